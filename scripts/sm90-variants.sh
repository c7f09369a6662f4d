#!/usr/bin/env bash
# Runs on the GPU host, from the repository root, with bundle/ carried: times
# the sm_90a prefill template's compile-time variants (ATTN_SM90_* macros of
# templates/attn/prefill_sm90.cuh, through attn-bench's --define) on the
# --quick prefill shapes, ragged only, and prints one TFLOP/s table. JSON per
# variant and the log go to $OUT (else gpu-out/) as one tarball.
#
#   scripts/sm90-variants.sh NAME=DEFINE[+DEFINE...] ...
#
# e.g. base= nosoftmax=ATTN_SM90_ABLATE=1 s3=@12,128,128,3,wgmma
# (an empty list is the template as built; @W,M,N,S,MMA pins a schedule).
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out/variants"
bin=bundle/bin
export ATTN_CACHE_DIR=${ATTN_CACHE_DIR:-/tmp/attn-cache}
names=()
for spec in "$@"; do
  name=${spec%%=*}
  defines=${spec#*=}
  args=()
  IFS='+' read -ra parts <<< "$defines"
  for d in "${parts[@]}"; do
    case "$d" in
      "") ;;
      @*) args+=(--prefill-schedule "${d#@}") ;; # @W,M,N,S,wgmma pins a schedule
      *) args+=(--define "$d") ;;
    esac
  done
  start=$SECONDS
  if "$bin/attn-bench" prefill --quick --json --ragged-only "${args[@]}" \
       > "$out/variants/$name.json" 2> "$out/variants/$name.err"; then
    names+=("$name")
    echo "$name: $((SECONDS - start)) s"
  else
    echo "$name failed:"; tail -3 "$out/variants/$name.err"
  fi
done
python3 - "$out/variants" "${names[@]}" <<'PY' | tee "$out/variants/table.txt"
import json, sys
root, names = sys.argv[1], sys.argv[2:]
runs = {n: json.load(open(f"{root}/{n}.json"))["prefill"] for n in names}
print(f"{'config':26}" + "".join(f"{n:>11}" for n in names))
for i, c in enumerate(runs[names[0]]):
    label = (f"{c['batch']}x{c['seq']} d{c['head_dim']} "
             f"{'causal' if c['causal'] else 'full'}")
    print(f"{label:26}" + "".join(f"{runs[n][i]['tflops']:11.1f}" for n in names))
PY
tar -C "$out" -czf "$out/variants.tgz" variants && rm -rf "$out/variants"
