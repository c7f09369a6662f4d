//===- Error.cpp - CUDA driver and NVRTC failures as llvm::Error ----------===//
//
// Messages name the failed call and the result code by name, so a log line is
// enough to tell an out-of-memory from a missing driver.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/support/Error.h"

#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>

namespace attn::runtime {

llvm::Error cudaError(CUresult result, llvm::StringRef call) {
  // cuGetErrorName fails too when the driver is missing or a stub; the number
  // still identifies the error then.
  const char *name = nullptr;
  const char *description = nullptr;
  std::string text = cuGetErrorName(result, &name) == CUDA_SUCCESS && name
                         ? std::string(name)
                         : fmt::format("CUresult {}", static_cast<int>(result));
  if (cuGetErrorString(result, &description) == CUDA_SUCCESS && description)
    text += fmt::format(" ({})", description);
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "%s failed: %s", call.str().c_str(),
                                 text.c_str());
}

llvm::Error nvrtcError(nvrtcResult result, llvm::StringRef call) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "%s failed: %s", call.str().c_str(),
                                 nvrtcGetErrorString(result));
}

void logError(llvm::Error error) {
  llvm::logAllUnhandledErrors(std::move(error), llvm::errs(), "attn: ");
}

char NvrtcError::ID = 0;

NvrtcError::NvrtcError(nvrtcResult result, std::string programName, Arch arch,
                       std::vector<std::string> options, std::string log)
    : result(result), programName(std::move(programName)), arch(arch),
      options(std::move(options)), programLog(std::move(log)) {}

std::string NvrtcError::message() const {
  std::string text = fmt::format(
      "NVRTC failed to compile {} for {} ({})\noptions:", programName,
      toString(arch), nvrtcGetErrorString(result));
  for (const std::string &option : options)
    text += " " + option;
  text += "\n" + programLog;
  return text;
}

void NvrtcError::log(llvm::raw_ostream &os) const { os << message(); }

std::error_code NvrtcError::convertToErrorCode() const {
  return llvm::inconvertibleErrorCode();
}

} // namespace attn::runtime
