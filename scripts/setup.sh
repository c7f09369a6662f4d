#!/usr/bin/env bash
# Sets up attn on Debian 12 and runs the main job on an example spec.
#
#   scripts/setup.sh            install what is missing, build, run the example
#   scripts/setup.sh --no-run   install and build only
#
# Idempotent: packages already present are not reinstalled and the build is
# incremental, so a second run takes seconds. Environment: BUILD_DIR (default
# build), JOBS (default: number of cores), CUDA_HOME (default /usr/local/cuda).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
jobs=${JOBS:-$(nproc)}
cuda_home=${CUDA_HOME:-/usr/local/cuda}
run_example=1
[[ "${1:-}" == "--no-run" ]] && run_example=0

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }

# --- Debian packages --------------------------------------------------------
"$root/scripts/install-packages.sh"

# --- CUDA -------------------------------------------------------------------
if [[ ! -x "$cuda_home/bin/nvcc" || ! -e "$cuda_home/include/nvrtc.h" ]]; then
  cat >&2 <<MSG
error: CUDA 13 not found at $cuda_home (need bin/nvcc, include/nvrtc.h and
lib64/stubs/libcuda.so). Install the CUDA 13 toolkit there, or point CUDA_HOME
at it. No GPU is needed to build attn or to compile kernels with NVRTC.
MSG
  exit 1
fi
cuda_version=$("$cuda_home/bin/nvcc" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
if [[ "$cuda_version" != 13 ]]; then
  echo "error: attn needs CUDA 13; $cuda_home has CUDA ${cuda_version:-unknown}" >&2
  exit 1
fi

# --- Configure and build ----------------------------------------------------
if [[ ! -f "$build_dir/build.ninja" ]]; then
  say "configuring $build_dir"
  cmake -G Ninja -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release \
    -DCUDAToolkit_ROOT="$cuda_home"
fi
say "building with $jobs jobs"
cmake --build "$build_dir" -j "$jobs"
say "installing the Python package into $build_dir/venv"
BUILD_DIR="$build_dir" "$root/scripts/install-python.sh"

# --- The main job -----------------------------------------------------------
# The example spec through every stage: parse and verify, schedule and lower
# for sm_90a, CUDA C++ from the templates, then NVRTC to cubins (into the
# kernel cache) and, where a GPU exists, a run checked against the fp64
# reference.
if ((run_example)); then
  bin=$build_dir/bin
  spec=$root/examples/decode.mlir
  say "attn-opt $spec --attn-pipeline=\"arch=sm_90a\" | attn-translate --attn-to-cuda"
  "$bin/attn-opt" "$spec" --attn-pipeline="arch=sm_90a" | "$bin/attn-translate" --attn-to-cuda
  say "attn-example-decode $spec (JIT compile; run on the GPU if there is one)"
  "$bin/attn-example-decode" "$spec"
fi
