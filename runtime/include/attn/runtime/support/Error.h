//===- Error.h - CUDA driver and NVRTC failures as llvm::Error --*- C++ -*-===//
//
// Every driver and NVRTC call in the runtime is checked and its failure
// returned as an llvm::Error (no exceptions, no aborts): ATTN_CU_CHECK and
// ATTN_NVRTC_CHECK for plain calls, NvrtcError for a failed compilation, which
// carries the compiler log and the options so the caller can show why.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_ERROR_H
#define ATTN_RUNTIME_ERROR_H

#include "spec/KernelSpec.h"

#include "llvm/Support/Error.h"

#include <cuda.h>
#include <nvrtc.h>

#include <string>
#include <vector>

namespace attn::runtime {

/// An Error for a failed driver call: names `call` and the CUresult
/// (e.g. "cuMemAlloc(&ptr, bytes) failed: CUDA_ERROR_OUT_OF_MEMORY (out of
/// memory)").
llvm::Error cudaError(CUresult result, llvm::StringRef call);

/// An Error for a failed NVRTC call other than the compilation itself.
llvm::Error nvrtcError(nvrtcResult result, llvm::StringRef call);

/// Writes `error` to llvm::errs() prefixed with "attn: " and consumes it; for
/// destructors and other places that cannot return an Error.
void logError(llvm::Error error);

/// A program NVRTC refused to compile: the log is the useful part.
class NvrtcError : public llvm::ErrorInfo<NvrtcError> {
public:
  static char ID;

  NvrtcError(nvrtcResult result, std::string programName, Arch arch,
             std::vector<std::string> options, std::string log);

  /// "NVRTC failed to compile <program> for <arch> (<result>)", the options
  /// and the full compiler log.
  std::string message() const override;
  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override;

  nvrtcResult getResult() const { return result; }
  const std::string &getProgramName() const { return programName; }
  Arch getArch() const { return arch; }
  const std::vector<std::string> &getOptions() const { return options; }
  /// The NVRTC program log (errors and warnings, with source positions).
  const std::string &getLog() const { return programLog; }

private:
  nvrtcResult result;
  std::string programName;
  Arch arch;
  std::vector<std::string> options;
  std::string programLog;
};

} // namespace attn::runtime

/// Runs a CUDA driver call; on failure returns an llvm::Error naming the call
/// and the CUresult from the enclosing function (which returns llvm::Error or
/// llvm::Expected<T>).
#define ATTN_CU_CHECK(expr)                                                    \
  do {                                                                         \
    if (CUresult attnCuResult = (expr); attnCuResult != CUDA_SUCCESS)          \
      return ::attn::runtime::cudaError(attnCuResult, #expr);                  \
  } while (false)

/// ATTN_CU_CHECK for NVRTC calls.
#define ATTN_NVRTC_CHECK(expr)                                                 \
  do {                                                                         \
    if (nvrtcResult attnNvrtcResult = (expr);                                  \
        attnNvrtcResult != NVRTC_SUCCESS)                                      \
      return ::attn::runtime::nvrtcError(attnNvrtcResult, #expr);              \
  } while (false)

#endif // ATTN_RUNTIME_ERROR_H
