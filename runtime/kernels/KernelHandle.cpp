//===- KernelHandle.cpp - what every loaded kernel holds ------------------===//
#include "attn/runtime/kernels/KernelHandle.h"

#include "runtime/support/SharedMemory.h"

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

} // namespace attn::runtime
