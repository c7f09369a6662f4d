#!/usr/bin/env bash
# Checks each C ABI library given: its dynamic symbols are attn_* only (the
# static LLVM, MLIR and C++ inside stay local), every function attn_c.h
# declares is there, and it loads without LLVM, MLIR, NVRTC or libcuda.
#
#   capi-exports.sh LIBRARY...
set -euo pipefail
header=$(dirname "${BASH_SOURCE[0]}")/../capi/include/attn_c.h
declared=$(grep -oE '\battn_[a-z0-9_]+\(' "$header" | tr -d '(' | sort -u)
status=0
for lib in "$@"; do
  defined=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort -u)
  others=$(grep -v '^attn_' <<< "$defined" || true)
  if [[ -n "$others" ]]; then
    echo "error: $lib exports symbols other than attn_*:" >&2
    head -n 20 <<< "$others" >&2
    status=1
  fi
  missing=$(comm -23 <(echo "$declared") <(echo "$defined"))
  if [[ -n "$missing" ]]; then
    echo "error: $lib lacks functions attn_c.h declares:" >&2
    echo "$missing" >&2
    status=1
  fi
  if ldd "$lib" | grep -E 'libLLVM|libMLIR|nvrtc|libcuda'; then
    echo "error: $lib needs LLVM, MLIR, NVRTC or libcuda at load time" >&2
    status=1
  fi
  echo "$lib: $(wc -l <<< "$defined") attn_* symbols"
done
exit $status
