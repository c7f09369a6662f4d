//===- CudaDriver.h - the CUDA driver, loaded on first use ------*- C++ -*-===//
//
// Private to the runtime. CudaDriver.cpp (NvrtcLibrary.cpp) defines the
// driver (NVRTC) API functions the runtime uses, forwarding to libcuda.so.1
// (libnvrtc) opened on first call; this header only lets callers report why
// a library could not be opened.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_CUDADRIVER_H
#define ATTN_RUNTIME_CUDADRIVER_H

#include "llvm/Support/Error.h"

namespace attn::runtime {

/// Opens the CUDA driver library if that has not happened yet; an Error
/// naming the library and the loader's message if it cannot be opened.
llvm::Error loadCudaDriver();

/// The same for NVRTC (NvrtcLibrary.cpp).
llvm::Error loadNvrtc();

} // namespace attn::runtime

#endif // ATTN_RUNTIME_CUDADRIVER_H
