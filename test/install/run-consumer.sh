#!/usr/bin/env bash
# Installs the attn build into a temporary prefix, builds the consumer
# project against it (find_package(attn), attn_add_kernel_library, a host
# linked to attn::runtime, a C host linked to attn::c), checks that nothing
# of LLVM, MLIR or NVRTC is on their link lines or among their libraries,
# and runs them.
#
#   run-consumer.sh BUILD_DIR CONSUMER_SOURCE_DIR
set -euo pipefail
build=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -Dattn_DIR="$work/prefix/lib/cmake/attn" > "$work/configure.log"
cmake --build "$work/build" -j 2
link=$(ninja -C "$work/build" -t commands consumer | tail -n 1)
echo "link line: $link"
if grep -Eq 'LLVM|MLIR|nvrtc|libcuda' <<< "$link"; then
  echo "error: the consumer's link line names LLVM, MLIR, NVRTC or libcuda" >&2
  exit 1
fi
grep -q 'libattn_runtime.so' <<< "$link" || { echo "error: not linked to libattn_runtime.so" >&2; exit 1; }
if ldd "$work/build/consumer" | grep -E 'libLLVM|libMLIR|nvrtc|libcuda'; then
  echo "error: the consumer needs LLVM, MLIR, NVRTC or libcuda at load time" >&2
  exit 1
fi
"$work/build/consumer"

# The C host: libattn_c.so holds the compiler, but nothing of it shows.
link=$(ninja -C "$work/build" -t commands c_consumer | tail -n 1)
echo "c_consumer link line: $link"
if grep -Eq 'LLVM|MLIR|nvrtc|libcuda' <<< "$link"; then
  echo "error: the C consumer's link line names LLVM, MLIR, NVRTC or libcuda" >&2
  exit 1
fi
grep -q 'libattn_c.so' <<< "$link" || { echo "error: not linked to libattn_c.so" >&2; exit 1; }
if ldd "$work/build/c_consumer" | grep -E 'libLLVM|libMLIR|nvrtc|libcuda'; then
  echo "error: the C consumer needs LLVM, MLIR, NVRTC or libcuda at load time" >&2
  exit 1
fi
"$work/build/c_consumer"
