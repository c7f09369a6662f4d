#!/usr/bin/env bash
# Runs on the GPU host, from the repository root, with bundle/ carried along:
# the GPU tests, then attn-bench (jit, decode, prefill) and the comparison of
# prefill with PyTorch's SDPA backends (bench/sdpa.py; skipped with a note
# when python3 has no torch). Logs and JSON go to $OUT when set (the device
# tool's output folder), else to gpu-out/. --quick shortens both benches.
#
#   scripts/gpu-check.sh [--quick] [gtest filter]
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
quick=""
[[ "${1:-}" == "--quick" ]] && { quick="--quick"; shift; }
filter=${1:-*}
bin=bundle/bin
export ATTN_CACHE_DIR=${ATTN_CACHE_DIR:-/tmp/attn-cache}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.draw \
  --format=csv | tee "$out/gpu.txt"
echo "== GPU tests"
"$bin/AttnGpuTests" --gtest_filter="$filter" 2>&1 | tee "$out/gpu-tests.log" | \
  grep -E '^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|Failure|error' | head -80
status=${PIPESTATUS[0]}
echo "== example host program"
"$bin/attn-example-decode" examples/decode.mlir 2>&1 | tee "$out/example.txt"
echo "== attn-bench jit"
"$bin/attn-bench" jit 2>&1 | tee "$out/bench-jit.txt"
echo "== attn-bench decode"
"$bin/attn-bench" decode $quick 2>&1 | tee "$out/bench-decode.txt"
echo "== attn-bench prefill"
if "$bin/attn-bench" prefill --json $quick > "$out/bench-prefill.json" \
     2> "$out/bench-prefill.err"; then
  echo "== SDPA comparison (bench/sdpa.py)"
  if python3 -c 'import torch' 2>/dev/null; then
    python3 bench/sdpa.py "$out/bench-prefill.json" $quick \
      --out "$out/bench-sdpa.json" 2>&1 | tee "$out/bench-sdpa.txt"
  else
    echo "skipped: python3 has no torch"
  fi
else
  # A failed bench does not fail the check (the tests decide), but says so.
  echo "attn-bench prefill failed:"; tail -5 "$out/bench-prefill.err"
fi
exit "$status"
