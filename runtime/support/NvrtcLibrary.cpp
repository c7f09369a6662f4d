//===- NvrtcLibrary.cpp - NVRTC, loaded on first use ----------------------===//
//
// NVRTC is needed only to compile kernels: a host that runs from an AOT
// library must start and work without it. So, as for the CUDA driver
// (CudaDriver.cpp), the runtime defines the NVRTC functions it uses as
// hidden forwarders to libnvrtc opened on first call: by soname, then at the
// path found at build time. Without NVRTC every forwarder returns
// NVRTC_ERROR_INTERNAL_ERROR and loadNvrtc() says why.
//
//===----------------------------------------------------------------------===//
#include "runtime/support/CudaDriver.h"
#include "runtime/support/DynamicLibrary.h"

#include <nvrtc.h>

namespace attn::runtime {
namespace {

const DynamicLibrary &nvrtcLibrary() {
  static const DynamicLibrary library =
      DynamicLibrary::open({"libnvrtc.so.13", ATTN_NVRTC_BUILD_PATH});
  return library;
}

void *nvrtcSymbol(const char *symbol) { return nvrtcLibrary().symbol(symbol); }

} // namespace

llvm::Error loadNvrtc() {
  const DynamicLibrary &library = nvrtcLibrary();
  if (library.handle)
    return llvm::Error::success();
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "cannot load NVRTC (%s): %s; compiling kernels needs the CUDA toolkit's "
      "NVRTC (a host without it can run kernels from an attn-aot library)",
      library.name.c_str(), library.loadError.c_str());
}

} // namespace attn::runtime

#define ATTN_NVRTC_FORWARD(name, params, args)                                 \
  extern "C" __attribute__((visibility("hidden"))) nvrtcResult name params {   \
    static const auto fn = reinterpret_cast<decltype(&name)>(                  \
        ::attn::runtime::nvrtcSymbol(#name));                                  \
    return fn ? fn args : NVRTC_ERROR_INTERNAL_ERROR;                          \
  }

ATTN_NVRTC_FORWARD(nvrtcVersion, (int *major, int *minor), (major, minor))
ATTN_NVRTC_FORWARD(nvrtcCreateProgram,
                   (nvrtcProgram * program, const char *source,
                    const char *name, int numHeaders,
                    const char *const *headers, const char *const *headerNames),
                   (program, source, name, numHeaders, headers, headerNames))
ATTN_NVRTC_FORWARD(nvrtcCompileProgram,
                   (nvrtcProgram program, int numOptions,
                    const char *const *options),
                   (program, numOptions, options))
ATTN_NVRTC_FORWARD(nvrtcDestroyProgram, (nvrtcProgram * program), (program))
ATTN_NVRTC_FORWARD(nvrtcGetProgramLogSize, (nvrtcProgram program, size_t *size),
                   (program, size))
ATTN_NVRTC_FORWARD(nvrtcGetProgramLog, (nvrtcProgram program, char *log),
                   (program, log))
ATTN_NVRTC_FORWARD(nvrtcGetCUBINSize, (nvrtcProgram program, size_t *size),
                   (program, size))
ATTN_NVRTC_FORWARD(nvrtcGetCUBIN, (nvrtcProgram program, char *cubin),
                   (program, cubin))

extern "C" __attribute__((visibility("hidden"))) const char *
nvrtcGetErrorString(nvrtcResult result) {
  static const auto fn = reinterpret_cast<decltype(&nvrtcGetErrorString)>(
      ::attn::runtime::nvrtcSymbol("nvrtcGetErrorString"));
  return fn ? fn(result) : "NVRTC is not loaded";
}
