//===- KernelHandle.cpp - what every loaded kernel holds ------------------===//
#include "attn/runtime/kernels/KernelHandle.h"

#include "attn/runtime/support/Error.h"
#include "runtime/support/SharedMemory.h"

#include "llvm/Support/FormatVariadic.h"

namespace attn::runtime {

llvm::Error KernelHandle::bind(const KernelSpec &spec,
                               std::shared_ptr<CudaLibrary> library) {
  kernelSpec = spec;
  auto found = library->getKernel(kernelSymbol(spec));
  if (!found)
    return found.takeError();
  entry = *found;
  if (!kernelTemplate(spec).traits.empty()) {
    auto smem = setUpSharedMemory(*library, entry, spec);
    if (!smem)
      return smem.takeError();
    smemBytes = *smem;
  }
  this->library = std::move(library);
  return llvm::Error::success();
}

llvm::Expected<KernelHandle::Residency> KernelHandle::residency() const {
  Residency r;
  CUdevice device;
  ATTN_CU_CHECK(cuCtxGetDevice(&device));
  ATTN_CU_CHECK(cuDeviceGetAttribute(
      &r.numSMs, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device));
  ATTN_CU_CHECK(cuKernelGetFunction(&r.function, entry));
  ATTN_CU_CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor(
      &r.ctasPerSM, r.function, threadsPerBlock(kernelSpec), smemBytes));
  if (r.ctasPerSM < 1)
    return llvm::createStringError(llvm::formatv(
        "{0} kernel {1} cannot run on this device (no CTA fits an SM)",
        toString(kernelSpec.kind), kernelSymbol(kernelSpec)));
  return r;
}

} // namespace attn::runtime
