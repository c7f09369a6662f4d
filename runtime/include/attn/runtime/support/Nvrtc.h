//===- Nvrtc.h - CUDA C++ to cubin with NVRTC -------------------*- C++ -*-===//
//
// Compiles a generated translation unit for one target arch. The kernel
// templates are handed to NVRTC as in-memory headers (`#include
// "attn/decode.cuh"` works from any directory) and the CUDA toolkit headers
// are found on the machine (findCudaInclude). No GPU is needed.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_NVRTC_H
#define ATTN_RUNTIME_NVRTC_H

#include "spec/KernelSpec.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <string_view>
#include <vector>

namespace attn::runtime {

/// Compilation knobs beyond the target arch.
struct NvrtcOptions {
  /// Emit line info (-lineinfo) so profilers map SASS back to source.
  bool lineInfo = false;
  /// Preprocessor definitions ("NAME" or "NAME=VALUE"), passed as -D
  /// options. For experiments only (attn-bench's --define); templates read
  /// none of them in normal builds.
  std::vector<std::string> defines;
};

/// The NVRTC options that shape the binary for `arch`: everything passed to
/// NVRTC except the include paths. Part of the kernel cache key.
std::vector<std::string> compileOptions(Arch arch,
                                        const NvrtcOptions &options = {});

/// NVRTC's version, e.g. "13.0"; part of the kernel cache key.
std::string nvrtcVersionString();

/// The places searched for the CUDA headers, in order: $ATTN_CUDA_INCLUDE,
/// $CUDA_HOME/include, $CUDA_PATH/include, the toolkit include directory
/// attn was built against, /usr/local/cuda/include. Unset variables are
/// skipped.
std::vector<std::string> cudaIncludeCandidates();

/// The first of `candidates` that holds cuda_fp16.h, or an Error listing
/// every candidate tried and how to point attn at the headers.
llvm::Expected<std::string>
findCudaInclude(llvm::ArrayRef<std::string> candidates);

/// findCudaInclude(cudaIncludeCandidates()), searched once per process.
llvm::Expected<std::string> findCudaInclude();

/// Compiles `source` for `arch` and returns the cubin. `programName` names
/// the program in NVRTC diagnostics (use the kernel URI). A compile failure
/// is an NvrtcError carrying the log.
llvm::Expected<std::string> compileToCubin(std::string_view source,
                                           std::string_view programName,
                                           Arch arch,
                                           const NvrtcOptions &options = {});

} // namespace attn::runtime

#endif // ATTN_RUNTIME_NVRTC_H
