#!/usr/bin/env bash
# The C API on a GPU host, from a bundle (scripts/make-bundle.sh): the C
# example, the handle tests through libattn_c.so, and an AOT context through
# libattn_runtime_c.so over a library attn-aot builds here (a decode variant
# and cache_ops), with NVRTC's disk cache off so the library must serve.
#
#   scripts/check-c-api-gpu.sh [BUNDLE_DIR]
set -euo pipefail
bundle=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/bundle}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bundle/bin/attn-example-c-decode"
"$bundle/bin/AttnCApiGpuTests"
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1)
case $arch in 9.0) arch=sm_90a ;; 8.9) arch=sm_89 ;; *) arch=sm_80 ;; esac
cat > "$work/kernels.json" <<'JSON'
{"decode": [{"q_type": "bf16", "kv_type": "bf16", "num_q_heads": 8,
             "num_kv_heads": 2, "head_dim": 128, "page_size": 16}],
 "cache_ops": true}
JSON
"$bundle/bin/attn-aot" "$work/kernels.json" --arch "$arch" -o "$work/lib"
ATTN_CAPI_TEST_AOT_LIBRARY="$work/lib" ATTN_CACHE_DISABLE=1 \
  "$bundle/bin/AttnCApiRuntimeOnlyTests"
