export ATTN_CACHE_DIR=/tmp/attn-cache
bundle/bin/AttnGpuTests 2>&1 | grep -E "^\[  (PASSED|FAILED)" 
bundle/bin/attn-bench decode --quick | tail -n +5 | awk '{printf "%s %s %s %s %s %s | ", $1,$2,$3,$4,$7,$8} END {print ""}'
