#!/usr/bin/env bash
# A/B speed check on the GPU host: `attn-bench decode --quick` and
# `attn-bench prefill --quick` of two builds, interleaved (A, B, A, B) in one
# run so clocks and thermals are shared; ROUNDS (default 2) repeats it. Each build's binary keeps its own
# kernel cache. Output: $OUT/ab-{decode,prefill}-{a,b}{1,2}.txt.
#
#   scripts/ab-bench.sh <attn-bench A> <attn-bench B>
#   A_ARGS / B_ARGS: extra arguments of each side, e.g. the same binary with
#   B_ARGS=--sinks measures what attention sinks cost.
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
a=$1 b=$2
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee "$out/ab-gpu.txt"
for round in $(seq 1 "${ROUNDS:-2}"); do
  for side in a b; do
    bin=$a extra=${A_ARGS:-}
    [[ $side == b ]] && bin=$b extra=${B_ARGS:-}
    export ATTN_CACHE_DIR=/tmp/attn-cache-$side
    for bench in ${BENCHES:-decode prefill}; do
      echo "== $side$round $bench"
      # shellcheck disable=SC2086
      "$bin" "$bench" --quick $extra > "$out/ab-$bench-$side$round.txt" 2>&1 ||
        echo "failed: $side $bench"
    done
  done
done
python3 "$(dirname "$0")/../bench/ab-compare.py" "$out" | tee "$out/ab-compare.txt"
