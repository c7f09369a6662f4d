//===- CudaDriver.cpp - the CUDA driver, loaded on first use --------------===//
//
// Binaries that link the toolkit's libcuda stub need libcuda.so.1 at load
// time, which exists only where an NVIDIA driver is installed: they would not
// even start on a build or CI machine, where NVRTC compilation and every
// GPU-free test must still run. So the runtime does what the CUDA runtime
// library does: it opens libcuda.so.1 with dlopen on the first driver call.
//
// This file defines each driver function the runtime uses (under the names
// cuda.h maps it to, e.g. cuMemAlloc -> cuMemAlloc_v2, the same symbol a
// direct link would bind) as a forwarder to the loaded library. The
// definitions are hidden, so they never interpose on a host application's own
// libcuda calls. Without a driver every forwarder returns
// CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, and initCuda() says why.
//
// Using a driver function that is not listed below is a link error
// ("undefined reference to cuFoo"): add one ATTN_CUDA_FORWARD line for it.
//
//===----------------------------------------------------------------------===//
#include "runtime/support/CudaDriver.h"

#include "runtime/support/DynamicLibrary.h"

#include <cuda.h>

namespace attn::runtime {
namespace {

const DynamicLibrary &driverLibrary() {
  // Opened once, never closed: driver state lives as long as the process.
  static const DynamicLibrary library = DynamicLibrary::open({"libcuda.so.1"});
  return library;
}

/// The driver's `symbol`, or null without a driver or when this driver is too
/// old to have it.
void *driverSymbol(const char *symbol) {
  return driverLibrary().symbol(symbol);
}

} // namespace

llvm::Error loadCudaDriver() {
  const DynamicLibrary &library = driverLibrary();
  if (library.handle)
    return llvm::Error::success();
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "cannot load the CUDA driver (%s): %s; running kernels needs an NVIDIA "
      "GPU with its driver installed",
      library.name.c_str(), library.loadError.c_str());
}

} // namespace attn::runtime

// Two steps so that the argument is macro-expanded first: the symbol looked up
// is "cuMemAlloc_v2", not "cuMemAlloc".
#define ATTN_CUDA_SYMBOL_NAME(name) #name
#define ATTN_CUDA_SYMBOL(name) ATTN_CUDA_SYMBOL_NAME(name)

#define ATTN_CUDA_FORWARD(name, params, args)                                  \
  extern "C"                                                                   \
      __attribute__((visibility("hidden"))) CUresult CUDAAPI name params {     \
    static const auto fn = reinterpret_cast<decltype(&name)>(                  \
        ::attn::runtime::driverSymbol(ATTN_CUDA_SYMBOL(name)));                \
    return fn ? fn args : CUDA_ERROR_SHARED_OBJECT_INIT_FAILED;                \
  }

// Initialization, devices, contexts.
ATTN_CUDA_FORWARD(cuInit, (unsigned int flags), (flags))
ATTN_CUDA_FORWARD(cuGetErrorName, (CUresult error, const char **str),
                  (error, str))
ATTN_CUDA_FORWARD(cuGetErrorString, (CUresult error, const char **str),
                  (error, str))
ATTN_CUDA_FORWARD(cuDeviceGet, (CUdevice * device, int ordinal),
                  (device, ordinal))
ATTN_CUDA_FORWARD(cuDeviceGetAttribute,
                  (int *value, CUdevice_attribute attribute, CUdevice device),
                  (value, attribute, device))
ATTN_CUDA_FORWARD(cuDevicePrimaryCtxRetain,
                  (CUcontext * context, CUdevice device), (context, device))
ATTN_CUDA_FORWARD(cuCtxGetCurrent, (CUcontext * context), (context))
ATTN_CUDA_FORWARD(cuCtxSetCurrent, (CUcontext context), (context))
ATTN_CUDA_FORWARD(cuCtxGetDevice, (CUdevice * device), (device))
ATTN_CUDA_FORWARD(cuCtxSynchronize, (), ())

// Memory.
ATTN_CUDA_FORWARD(cuMemAlloc, (CUdeviceptr * ptr, size_t bytes), (ptr, bytes))
ATTN_CUDA_FORWARD(cuMemFree, (CUdeviceptr ptr), (ptr))
ATTN_CUDA_FORWARD(cuMemGetInfo, (size_t *free, size_t *total), (free, total))
ATTN_CUDA_FORWARD(cuMemHostAlloc,
                  (void **ptr, size_t bytes, unsigned int flags),
                  (ptr, bytes, flags))
ATTN_CUDA_FORWARD(cuMemFreeHost, (void *ptr), (ptr))
ATTN_CUDA_FORWARD(cuMemcpyHtoD,
                  (CUdeviceptr dst, const void *src, size_t bytes),
                  (dst, src, bytes))
ATTN_CUDA_FORWARD(cuMemcpyDtoH, (void *dst, CUdeviceptr src, size_t bytes),
                  (dst, src, bytes))
ATTN_CUDA_FORWARD(cuMemcpyHtoDAsync,
                  (CUdeviceptr dst, const void *src, size_t bytes,
                   CUstream stream),
                  (dst, src, bytes, stream))
ATTN_CUDA_FORWARD(cuMemcpyDtoHAsync,
                  (void *dst, CUdeviceptr src, size_t bytes, CUstream stream),
                  (dst, src, bytes, stream))
ATTN_CUDA_FORWARD(cuMemcpyAsync,
                  (CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                   CUstream stream),
                  (dst, src, bytes, stream))
ATTN_CUDA_FORWARD(cuMemsetD8,
                  (CUdeviceptr dst, unsigned char value, size_t count),
                  (dst, value, count))

// Libraries and kernels.
ATTN_CUDA_FORWARD(cuLibraryLoadData,
                  (CUlibrary * library, const void *image,
                   CUjit_option *jitOptions, void **jitValues,
                   unsigned int numJitOptions, CUlibraryOption *libraryOptions,
                   void **libraryValues, unsigned int numLibraryOptions),
                  (library, image, jitOptions, jitValues, numJitOptions,
                   libraryOptions, libraryValues, numLibraryOptions))
ATTN_CUDA_FORWARD(cuLibraryUnload, (CUlibrary library), (library))
ATTN_CUDA_FORWARD(cuLibraryGetKernel,
                  (CUkernel * kernel, CUlibrary library, const char *name),
                  (kernel, library, name))
ATTN_CUDA_FORWARD(cuLibraryGetGlobal,
                  (CUdeviceptr * ptr, size_t *bytes, CUlibrary library,
                   const char *name),
                  (ptr, bytes, library, name))
ATTN_CUDA_FORWARD(cuKernelSetAttribute,
                  (CUfunction_attribute attribute, int value, CUkernel kernel,
                   CUdevice device),
                  (attribute, value, kernel, device))
ATTN_CUDA_FORWARD(cuKernelGetFunction, (CUfunction * function, CUkernel kernel),
                  (function, kernel))
ATTN_CUDA_FORWARD(cuOccupancyMaxActiveBlocksPerMultiprocessor,
                  (int *blocks, CUfunction function, int blockSize,
                   size_t dynamicSmemBytes),
                  (blocks, function, blockSize, dynamicSmemBytes))
ATTN_CUDA_FORWARD(cuLaunchKernel,
                  (CUfunction function, unsigned int gridX, unsigned int gridY,
                   unsigned int gridZ, unsigned int blockX, unsigned int blockY,
                   unsigned int blockZ, unsigned int sharedBytes,
                   CUstream stream, void **params, void **extra),
                  (function, gridX, gridY, gridZ, blockX, blockY, blockZ,
                   sharedBytes, stream, params, extra))

// Tensor maps (TMA descriptors; host-side encoding, no GPU work).
ATTN_CUDA_FORWARD(cuTensorMapEncodeTiled,
                  (CUtensorMap * tensorMap, CUtensorMapDataType dataType,
                   cuuint32_t rank, void *globalAddress,
                   const cuuint64_t *globalDim, const cuuint64_t *globalStrides,
                   const cuuint32_t *boxDim, const cuuint32_t *elementStrides,
                   CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                   CUtensorMapL2promotion l2Promotion,
                   CUtensorMapFloatOOBfill oobFill),
                  (tensorMap, dataType, rank, globalAddress, globalDim,
                   globalStrides, boxDim, elementStrides, interleave, swizzle,
                   l2Promotion, oobFill))

// Streams, events, graphs.
ATTN_CUDA_FORWARD(cuStreamCreate, (CUstream * stream, unsigned int flags),
                  (stream, flags))
ATTN_CUDA_FORWARD(cuStreamDestroy, (CUstream stream), (stream))
ATTN_CUDA_FORWARD(cuStreamSynchronize, (CUstream stream), (stream))
ATTN_CUDA_FORWARD(cuStreamBeginCapture,
                  (CUstream stream, CUstreamCaptureMode mode), (stream, mode))
ATTN_CUDA_FORWARD(cuStreamEndCapture, (CUstream stream, CUgraph *graph),
                  (stream, graph))
ATTN_CUDA_FORWARD(cuGraphInstantiate,
                  (CUgraphExec * exec, CUgraph graph, unsigned long long flags),
                  (exec, graph, flags))
ATTN_CUDA_FORWARD(cuGraphLaunch, (CUgraphExec exec, CUstream stream),
                  (exec, stream))
ATTN_CUDA_FORWARD(cuGraphExecDestroy, (CUgraphExec exec), (exec))
ATTN_CUDA_FORWARD(cuGraphDestroy, (CUgraph graph), (graph))
ATTN_CUDA_FORWARD(cuEventCreate, (CUevent * event, unsigned int flags),
                  (event, flags))
ATTN_CUDA_FORWARD(cuEventDestroy, (CUevent event), (event))
ATTN_CUDA_FORWARD(cuEventRecord, (CUevent event, CUstream stream),
                  (event, stream))
ATTN_CUDA_FORWARD(cuEventSynchronize, (CUevent event), (event))
ATTN_CUDA_FORWARD(cuEventElapsedTime,
                  (float *milliseconds, CUevent start, CUevent end),
                  (milliseconds, start, end))
