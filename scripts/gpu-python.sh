#!/usr/bin/env bash
# Runs on the GPU host, from the repository root, with bundle/ carried along
# (scripts/make-bundle.sh): the C ABI's checks (scripts/check-c-api-gpu.sh), the Python
# package's tests (pytest; its GPU tests need torch there), the Python
# per-call overhead, the transformers model on attn (examples/python/
# hf_llama.py) and context-parallel decode (two GPUs through torchrun and
# NCCL when the host has two, else the same shards simulated on one).
# Logs and JSON go to $OUT when set (the device tool's output folder), else
# to gpu-out/. Name steps to run only those:
#
#   scripts/gpu-python.sh [c-api|pytest|overhead|hf|cp ...]
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
root=$(pwd)
export ATTN_LIBRARY=$root/bundle/lib/libattn_c.so
export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
export ATTN_CACHE_DIR=${ATTN_CACHE_DIR:-/tmp/attn-cache}
# NVLink multicast stays off: on a shared host it can take GPUs out of service.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

steps=("$@")
((${#steps[@]})) || steps=(c-api pytest overhead hf cp)
status=0
# run NAME COMMAND...: the command's output to $out/NAME.log, its tail here.
run() {
  local name=$1
  shift
  echo "== $name: $*"
  local start=$SECONDS
  "$@" > "$out/$name.log" 2>&1
  local rc=$?
  tail -n 30 "$out/$name.log"
  echo "-- $name: rc $rc, $((SECONDS - start)) s"
  ((rc == 0)) || status=1
}

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for s in "${steps[@]}"; do
  case $s in
    c-api) run c-api bash scripts/check-c-api-gpu.sh ;;
    pytest) run pytest python3 -m pytest -q -rs python/tests ;;
    overhead) run python-overhead python3 bench/python_overhead.py \
                --json "$out/python-overhead.json" ;;
    hf) run hf-llama python3 examples/python/hf_llama.py --continuous-batching --agreement-seeds 3 \
          --json "$out/hf-llama.json" ;;
    cp)
      if (($(nvidia-smi -L | wc -l) >= 2)); then
        run context-parallel torchrun --nproc-per-node 2 \
          examples/python/context_parallel.py --json "$out/context-parallel.json"
      else
        run context-parallel-simulated python3 examples/python/context_parallel.py \
          --simulate 2 --json "$out/context-parallel-simulated.json"
      fi ;;
    *) echo "unknown step $s" >&2; status=2 ;;
  esac
done
exit $status
