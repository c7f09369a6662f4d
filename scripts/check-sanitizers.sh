#!/usr/bin/env bash
# The sanitizer build and the fuzzers, as CI runs them after the README's two
# commands: builds attn with clang-19, ASan and UBSan into build-asan/
# (cmake -DATTN_SANITIZE=ON), runs the CPU tests there (GPU tests skip
# themselves without a GPU), then runs each libFuzzer target (test/fuzz/) over
# its seeds and regressions. A sanitizer report, a failed test, or a fuzzer
# crash, hang, leak or out-of-memory fails the script.
#
# The fuzzing is reproducible: a fixed seed, a fixed number of inputs per
# target and a fresh corpus (build-asan/fuzz/check-corpus/), so a run here
# executes the inputs CI executes and a finding reproduces. Exploring for new
# findings is a longer run with a random seed (docs/fuzzing.md).
#
#   scripts/check-sanitizers.sh [--no-fuzz]
#
# Idempotent like setup.sh: missing Debian packages are installed (clang-19,
# libclang-rt-19-dev and setup.sh's), the build is incremental. Environment:
# ASAN_BUILD_DIR (default build-asan), JOBS (default: number of cores),
# CUDA_HOME (default /usr/local/cuda), FUZZ_SEED (default 1), FUZZ_RUNS
# (inputs per target; default 400,000 for the IR target, 300,000 for
# aot-library, 150,000 for aot-config, 90,000 for region and cache-entry:
# about 11 minutes in all on CI's two cores), FUZZ_SECONDS (a cap per target,
# default 600).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${ASAN_BUILD_DIR:-$root/build-asan}
jobs=${JOBS:-$(nproc)}
cuda_home=${CUDA_HOME:-/usr/local/cuda}
fuzz=1
[[ "${1:-}" == "--no-fuzz" ]] && fuzz=0

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
elapsed() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# --- Debian packages --------------------------------------------------------
"$root/scripts/install-packages.sh" clang-19 libclang-rt-19-dev

# --- Sanitizer run-time settings -------------------------------------------
# Symbolized stacks in every report; UBSan prints its stack too. Leak
# checking is on by default (LeakSanitizer, part of ASan on Linux).
symbolizer=/usr/lib/llvm-19/bin/llvm-symbolizer
[[ -x $symbolizer ]] && export ASAN_SYMBOLIZER_PATH=$symbolizer
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
# The kernel cache stays inside the build directory, whatever the caller has.
export ATTN_CACHE_DIR=$build_dir/kernel-cache

# --- Build --------------------------------------------------------------------
start=$SECONDS
if [[ ! -f "$build_dir/build.ninja" ]]; then
  say "configuring $build_dir (clang-19, ASan + UBSan)"
  cmake -G Ninja -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
    -DATTN_SANITIZE=ON -DCUDAToolkit_ROOT="$cuda_home"
fi
say "building $build_dir with $jobs jobs"
cmake --build "$build_dir" -j "$jobs"
build_time=$((SECONDS - start))

# --- CPU tests under the sanitizers ----------------------------------------
start=$SECONDS
say "ctest in $build_dir"
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs"
test_time=$((SECONDS - start))

# --- Fuzzing ------------------------------------------------------------------
start=$SECONDS
failed=()
if ((fuzz)); then
  for script in "$build_dir"/fuzz/*.sh; do
    name=$(basename "$script" .sh)
    case $name in
      ir) runs=400000 ;;
      aot-library) runs=300000 ;;
      aot-config) runs=150000 ;;
      *) runs=90000 ;;
    esac
    runs=${FUZZ_RUNS:-$runs}
    seconds=${FUZZ_SECONDS:-600}
    log=$build_dir/fuzz/$name.log
    corpus=$build_dir/fuzz/check-corpus/$name
    rm -rf "$corpus"
    say "fuzzing $name: $runs inputs, seed ${FUZZ_SEED:-1} (log: $log)"
    if FUZZ_CORPUS=$corpus "$script" -seed="${FUZZ_SEED:-1}" -runs="$runs" \
        -max_total_time="$seconds" > "$log" 2>&1; then
      # libFuzzer's final stats: inputs executed, rate, corpus size.
      grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)' "$log" || true
      grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 || true
    else
      failed+=("$name")
      echo "FAILED: $name found a crash, hang, leak or out-of-memory:"
      grep -E 'ERROR:|SUMMARY:|Test unit written to|==[0-9]+==' "$log" | head -20 || true
      tail -40 "$log"
      echo "Minimize with: $build_dir/bin/attn-fuzz-$name -minimize_crash=1" \
           "-max_total_time=60 -exact_artifact_path=<out> <artifact>; file it" \
           "under test/fuzz/known-crashes/$name/ (docs/fuzzing.md)."
    fi
  done
fi
fuzz_time=$((SECONDS - start))

say "build $(elapsed $build_time), tests $(elapsed $test_time), fuzzing $(elapsed $fuzz_time)"
if ((${#failed[@]})); then
  echo "error: fuzz targets failed: ${failed[*]}" >&2
  exit 1
fi
