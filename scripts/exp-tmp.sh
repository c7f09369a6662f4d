export ATTN_CACHE_DIR=/tmp/attn-cache
for s in default 8,2,1,2,256 8,3,1,2,256 16,2,1,1,256; do
  if [ $s = default ]; then a=""; else a="--schedule $s"; fi
  echo "== $s"; bundle/bin/attn-bench decode --quick $a | tail -n +5 | awk '{printf "%s %s %s %s %s | ", $1,$2,$3,$4,$7} END {print ""}'
done
