#!/usr/bin/env bash
# attn.vllm_backend against vLLM's own classes (python/tests/test_vllm.py,
# no GPU): installs the vLLM release the backend is checked against
# (attn.vllm_backend.CHECKED_VLLM_VERSION, with its torch: about 8 GB) into
# its own venv, then runs the tests there with the built C library.
#
#   scripts/check-vllm.sh [--optional]
#   VLLM_VENV: the venv (default build/vllm-venv, reused when present)
#
# --optional (CI): when vLLM does not install here (no network, no disk, or
# over 15 minutes), say so and exit 0; test failures still fail.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
optional=0
[[ "${1:-}" == --optional ]] && optional=1
venv=${VLLM_VENV:-$root/build/vllm-venv}
version=$(sed -n 's/^CHECKED_VLLM_VERSION = "\(.*\)"$/\1/p' "$root/python/attn/vllm_backend.py")
skip() {
  echo "SKIP: vLLM $version did not install ($1); attn.vllm_backend not checked against it"
  exit 0
}
if ! "$venv/bin/python" -c "import vllm, pytest, sys; sys.exit(vllm.__version__ != '$version')" \
    2>/dev/null; then
  if ! python3 -m venv "$venv" || ! timeout 900 "$venv/bin/pip" install --quiet \
      "vllm==$version" pytest; then
    ((optional)) && skip "pip install failed or timed out"
    echo "error: could not install vllm==$version into $venv" >&2
    exit 1
  fi
fi
cd "$root"
ATTN_LIBRARY=${ATTN_LIBRARY:-$root/build/lib/libattn_c.so} PYTHONPATH=$root/python \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests/test_vllm.py
