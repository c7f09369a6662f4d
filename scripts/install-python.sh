#!/usr/bin/env bash
# Installs the attn Python package into a virtual environment, offline, from
# this build (Debian 12's system Python is externally managed, PEP 668):
#
#   1. stages python/attn, its pyproject and build backend, and the built
#      libattn_c.so (into attn/lib/) in $BUILD_DIR/python-package/ (build/python/ is CMake's);
#   2. creates $VENV with $PYTHON -m venv unless it exists;
#   3. pip install --no-build-isolation --no-deps --no-index $BUILD_DIR/python-package
#      (no network, no build dependency beyond the venv's own setuptools:
#      python/attn_build_backend.py writes the wheel itself where setuptools
#      cannot);
#   4. checks `python -c "import attn; print(attn.__version__)"` and that
#      the installed package loads its own library.
#
#   scripts/install-python.sh            then: source build/venv/bin/activate
#
# Idempotent: a second run restages and reinstalls (seconds). Environment:
# BUILD_DIR (default build), VENV (default $BUILD_DIR/venv), PYTHON (default
# /usr/bin/python3). To use attn with a PyTorch installed elsewhere, point
# VENV at that environment (or pip install build/python into it).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
venv=${VENV:-$build_dir/venv}
python=${PYTHON:-/usr/bin/python3}
lib=$build_dir/lib/libattn_c.so
stage=$build_dir/python-package

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

if [[ ! -f "$lib" ]]; then
  echo "error: $lib not found: build attn first (scripts/setup.sh, or" \
       "cmake --build $build_dir --target attn_c)" >&2
  exit 1
fi

say "staging the attn package in $stage"
rm -rf "$stage"
mkdir -p "$stage/attn/lib"
cp "$root/python/pyproject.toml" "$root/python/README.md" \
   "$root/python/attn_build_backend.py" "$stage/"
cp "$root"/python/attn/*.py "$stage/attn/"
cp "$lib" "$stage/attn/lib/"

if [[ ! -x "$venv/bin/python" ]]; then
  say "creating the virtual environment $venv"
  if ! "$python" -m venv "$venv"; then
    echo "error: '$python -m venv' failed: install python3-venv" \
         "(scripts/install-packages.sh does)" >&2
    rm -rf "$venv"
    exit 1
  fi
fi

say "installing attn into $venv"
PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/python" -m pip install --quiet \
  --no-build-isolation --no-deps --no-index --force-reinstall "$stage"

# The check runs outside the source tree and without ATTN_LIBRARY, so it
# sees the installed package and its own library.
version=$(cd / && env -u ATTN_LIBRARY "$venv/bin/python" -c \
  'import attn; print(attn.__version__)')
loaded=$(cd / && env -u ATTN_LIBRARY "$venv/bin/python" -c \
  'import attn; print(attn.library_path())')
case "$loaded" in
  "$venv"/*) ;;
  *) echo "error: the installed attn loaded $loaded, not its own library" >&2; exit 1 ;;
esac
say "attn $version installed in $venv ($loaded)"
echo "$venv"
