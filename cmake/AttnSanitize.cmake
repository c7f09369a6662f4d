#===- AttnSanitize.cmake - ASan + UBSan build of attn -----------*- cmake -*-===#
#
# Included by the top level when ATTN_SANITIZE is on, before any attn target
# is defined, so the flags reach every target attn builds and nothing else:
# Debian's LLVM/MLIR archives are imported, uninstrumented, and stay so.
# ASan still sees their heap (malloc and free are intercepted process-wide);
# UBSan checks only code compiled here.
#
# Every attn target also gets libFuzzer's coverage hooks
# (-fsanitize=fuzzer-no-link), so the fuzz targets in test/fuzz/ are guided
# by branches inside attn's libraries, not only inside the harness. Binaries
# that do not link libFuzzer resolve the hooks to the sanitizer runtime's
# no-op definitions.
#
#===----------------------------------------------------------------------===#
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "ATTN_SANITIZE needs clang (libFuzzer comes with it): "
    "configure with -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 "
    "(Debian: apt-get install clang-19 libclang-rt-19-dev)")
endif()

set(ATTN_SANITIZER_FLAGS
  -fsanitize=address,undefined
  # A report fails the test or the fuzz run instead of scrolling by.
  -fno-sanitize-recover=all)
add_compile_options(${ATTN_SANITIZER_FLAGS}
  -fsanitize=fuzzer-no-link
  # Whole stacks in reports; line tables are enough to symbolize them.
  -fno-omit-frame-pointer -gline-tables-only
  # After the build type's -O3: -O1 builds faster on CI's two cores and keeps
  # stacks readable, the usual choice for sanitizer builds. NDEBUG stays, as
  # Debian's LLVM was built with it (some MLIR headers change layout
  # without it).
  -O1
  # LLVM's inline allocator code must not poison memory by hand: see the
  # header.
  "SHELL:-include ${CMAKE_CURRENT_LIST_DIR}/AttnAsanNoUserPoisoning.h")
add_link_options(${ATTN_SANITIZER_FLAGS})

# HandleLLVMOptions links shared libraries with -z,defs; under ASan the
# runtime lives in the executable, so libattn_runtime.so must be allowed
# undefined __asan_* symbols.
string(REPLACE "-Wl,-z,defs" "" CMAKE_SHARED_LINKER_FLAGS
  "${CMAKE_SHARED_LINKER_FLAGS}")

message(STATUS "attn: ATTN_SANITIZE: ASan + UBSan + fuzzer coverage on attn's targets")
