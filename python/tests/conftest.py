"""pytest setup for attn's Python tests.

The tests import the package from the source tree (python/) unless
ATTN_TEST_INSTALLED=1, which tests the installed one (the venv
scripts/install-python.sh makes). The library comes from $ATTN_LIBRARY
when set (ctest sets it), else the package's own search.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
REPO = os.path.dirname(PYTHON_DIR)

if os.environ.get("ATTN_TEST_INSTALLED", "") in ("", "0"):
    sys.path.insert(0, PYTHON_DIR)
