export ATTN_CACHE_DIR=/tmp/attn-cache
for s in 4,128,64,2 4,128,32,2 4,128,64,3 8,256,64,2; do
  echo "== $s"; bundle/bin/attn-bench prefill --quick --prefill-schedule $s 2>&1 | tail -n +3 | awk '{printf "%s %s %s %s %s %s | ", $1,$2,$3,$4,$5,$7} END {print ""}'
done
ATTN_CACHE_DIR=/tmp/x bundle/bin/AttnGpuTests --gtest_filter='*Prefill*' 2>&1 | grep -E "^\[  (PASSED|FAILED)|FAILED  \]" | head -5
