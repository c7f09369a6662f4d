//===- Nvrtc.cpp - CUDA C++ to cubin with NVRTC ---------------------------===//
//
// One NVRTC program per compile; the embedded templates become its in-memory
// headers. The options that shape the code live in compileOptions() only, so
// what is compiled and what the cache key says can never disagree.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/support/Nvrtc.h"

#include "attn/runtime/support/Error.h"
#include "templates/EmbeddedTemplates.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"

#include <fmt/format.h>

#include "runtime/support/CudaDriver.h"

#include <nvrtc.h>

#include <memory>

namespace attn::runtime {
namespace {

/// Destroys an nvrtcProgram; owned through ProgramPtr.
struct ProgramDeleter {
  void operator()(_nvrtcProgram *program) const {
    if (nvrtcResult result = nvrtcDestroyProgram(&program);
        result != NVRTC_SUCCESS)
      logError(nvrtcError(result, "nvrtcDestroyProgram"));
  }
};
using ProgramPtr = std::unique_ptr<_nvrtcProgram, ProgramDeleter>;

llvm::Expected<std::string> programLog(nvrtcProgram program) {
  size_t size = 0;
  ATTN_NVRTC_CHECK(nvrtcGetProgramLogSize(program, &size));
  std::string log(size, '\0');
  ATTN_NVRTC_CHECK(nvrtcGetProgramLog(program, log.data()));
  // The size counts the terminating NUL.
  while (!log.empty() && log.back() == '\0')
    log.pop_back();
  return log;
}

} // namespace

std::vector<std::string> compileOptions(Arch arch,
                                        const NvrtcOptions &options) {
  // No --use_fast_math: approximate exp/div would change results against the
  // reference; templates opt into fast intrinsics where they are safe.
  std::vector<std::string> result = {
      fmt::format("--gpu-architecture={}", toString(arch)),
      "-std=c++17",
      "-default-device",
  };
  if (options.lineInfo)
    result.push_back("-lineinfo");
  for (const std::string &define : options.defines)
    result.push_back("-D" + define);
  return result;
}

std::string nvrtcVersionString() {
  int major = 0, minor = 0;
  if (llvm::Error error = loadNvrtc()) {
    llvm::consumeError(std::move(error));
    return "none";
  }
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS)
    return "unknown";
  return fmt::format("{}.{}", major, minor);
}

std::vector<std::string> cudaIncludeCandidates() {
  std::vector<std::string> candidates;
  auto addEnv = [&](const char *name, llvm::StringRef suffix) {
    if (std::optional<std::string> value = llvm::sys::Process::GetEnv(name);
        value && !value->empty())
      candidates.push_back(*value + suffix.str());
  };
  addEnv("ATTN_CUDA_INCLUDE", "");
  addEnv("CUDA_HOME", "/include");
  addEnv("CUDA_PATH", "/include");
  candidates.push_back(ATTN_CUDA_BUILD_INCLUDE);
  candidates.push_back("/usr/local/cuda/include");
  return candidates;
}

llvm::Expected<std::string>
findCudaInclude(llvm::ArrayRef<std::string> candidates) {
  std::string tried;
  for (const std::string &dir : candidates) {
    llvm::SmallString<256> probe(dir);
    llvm::sys::path::append(probe, "cuda_fp16.h");
    if (llvm::sys::fs::exists(probe))
      return dir;
    tried += "\n  " + dir;
  }
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "cannot find the CUDA headers (cuda_fp16.h) that NVRTC needs; tried:%s"
      "\nset ATTN_CUDA_INCLUDE to the include directory of a CUDA 13 toolkit",
      tried.c_str());
}

llvm::Expected<std::string> findCudaInclude() {
  // Searched once: the answer cannot change while the process runs, and a
  // failure is kept as text so every caller gets the same Error.
  static const std::pair<std::string, std::string> found = [] {
    llvm::Expected<std::string> dir = findCudaInclude(cudaIncludeCandidates());
    if (!dir)
      return std::make_pair(std::string(), llvm::toString(dir.takeError()));
    return std::make_pair(*dir, std::string());
  }();
  if (!found.second.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   found.second);
  return found.first;
}

llvm::Expected<std::string> compileToCubin(std::string_view source,
                                           std::string_view programName,
                                           Arch arch,
                                           const NvrtcOptions &options) {
  if (llvm::Error error = loadNvrtc())
    return std::move(error);
  llvm::Expected<std::string> include = findCudaInclude();
  if (!include)
    return include.takeError();

  std::vector<std::string> optionStrings = compileOptions(arch, options);
  optionStrings.push_back("-I" + *include);
  // CUDA 13 keeps CCCL (<cuda/std/...>, which cuda_fp16.h and friends use)
  // in its own subdirectory.
  llvm::SmallString<256> cccl(*include);
  llvm::sys::path::append(cccl, "cccl");
  if (llvm::sys::fs::is_directory(cccl))
    optionStrings.push_back("-I" + cccl.str().str());

  std::vector<const char *> headerNames, headerContents;
  for (const EmbeddedFile &file : embeddedTemplates()) {
    headerNames.push_back(file.name);
    headerContents.push_back(file.contents);
  }
  std::string name(programName);
  std::string sourceText(source);
  nvrtcProgram rawProgram = nullptr;
  ATTN_NVRTC_CHECK(nvrtcCreateProgram(
      &rawProgram, sourceText.c_str(), (name + ".cu").c_str(),
      static_cast<int>(headerNames.size()), headerContents.data(),
      headerNames.data()));
  ProgramPtr program(rawProgram);

  std::vector<const char *> optionPointers;
  for (const std::string &option : optionStrings)
    optionPointers.push_back(option.c_str());
  nvrtcResult compiled = nvrtcCompileProgram(
      program.get(), static_cast<int>(optionPointers.size()),
      optionPointers.data());
  if (compiled != NVRTC_SUCCESS) {
    llvm::Expected<std::string> log = programLog(program.get());
    if (!log)
      return log.takeError();
    return llvm::make_error<NvrtcError>(
        compiled, name, arch, std::move(optionStrings), std::move(*log));
  }

  size_t size = 0;
  ATTN_NVRTC_CHECK(nvrtcGetCUBINSize(program.get(), &size));
  std::string cubin(size, '\0');
  ATTN_NVRTC_CHECK(nvrtcGetCUBIN(program.get(), cubin.data()));
  return cubin;
}

} // namespace attn::runtime
