//===- CudaDriver.h - the CUDA driver, loaded on first use ------*- C++ -*-===//
//
// Private to the runtime. CudaDriver.cpp defines the driver API functions the
// runtime uses, forwarding to libcuda.so.1 opened on first call; this header
// only lets initCuda() report why the driver could not be opened.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_CUDADRIVER_H
#define ATTN_RUNTIME_CUDADRIVER_H

#include "llvm/Support/Error.h"

namespace attn::runtime {

/// Opens the CUDA driver library if that has not happened yet; an Error
/// naming the library and the loader's message if it cannot be opened.
llvm::Error loadCudaDriver();

} // namespace attn::runtime

#endif // ATTN_RUNTIME_CUDADRIVER_H
