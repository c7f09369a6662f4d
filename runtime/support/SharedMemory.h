//===- SharedMemory.h - dynamic shared memory of loaded kernels -*- C++ -*-===//
//
// Private to the runtime. Decode and prefill translation units export their
// entry's dynamic shared memory as a device global (codegen/EmitCuda.cpp), so
// host and device never disagree about it; this reads it and opts the entry
// in to that much.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_SHAREDMEMORY_H
#define ATTN_RUNTIME_SHAREDMEMORY_H

#include "attn/runtime/support/CudaHandles.h"
#include "attn/runtime/support/Error.h"
#include "codegen/EmitCuda.h"

#include "llvm/Support/FormatVariadic.h"

namespace attn::runtime {

/// The dynamic shared memory `spec`'s entry needs, after raising the entry's
/// limit to it on the current device; an Error when the device has less.
inline llvm::Expected<int> setUpSharedMemory(const CudaLibrary &library,
                                             CUkernel entry,
                                             const KernelSpec &spec) {
  CUdeviceptr global = 0;
  size_t globalBytes = 0;
  std::string name = smemBytesSymbol(spec);
  ATTN_CU_CHECK(
      cuLibraryGetGlobal(&global, &globalBytes, library.get(), name.c_str()));
  int bytes = 0;
  ATTN_CU_CHECK(cuMemcpyDtoH(&bytes, global, sizeof(int)));
  CUdevice device;
  ATTN_CU_CHECK(cuCtxGetDevice(&device));
  int optIn = 0;
  ATTN_CU_CHECK(cuDeviceGetAttribute(
      &optIn, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device));
  if (bytes > optIn)
    return llvm::createStringError(llvm::formatv(
        "kernel {0} needs {1} bytes of shared memory; the device allows {2}",
        kernelSymbol(spec), bytes, optIn));
  ATTN_CU_CHECK(cuKernelSetAttribute(
      CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes, entry, device));
  return bytes;
}

} // namespace attn::runtime

#endif // ATTN_RUNTIME_SHAREDMEMORY_H
