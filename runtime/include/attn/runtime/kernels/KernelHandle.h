//===- KernelHandle.h - what every loaded kernel holds ----------*- C++ -*-===//
//
// The base of every op's kernel (runtime::<Type>Kernel, spec/Ops.h): its
// spec, the library that keeps its cubin loaded, the entry, and the dynamic
// shared memory the entry was opted in to. Each op's create() starts with
// bind() and adds what its launches need (the variant's runtime values,
// occupancy, a report buffer).
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_KERNELHANDLE_H
#define ATTN_RUNTIME_KERNELHANDLE_H

#include "attn/runtime/support/CudaHandles.h"
#include "spec/KernelSpec.h"

#include "llvm/Support/Error.h"

#include <memory>

namespace attn::runtime {

class KernelHandle {
public:
  const KernelSpec &spec() const { return kernelSpec; }
  /// Bytes of dynamic shared memory a launch passes (0: the template has
  /// none).
  int sharedMemoryBytes() const { return smemBytes; }

protected:
  KernelHandle() = default;
  /// Finds `spec`'s entry in `library` and, for a template with dynamic
  /// shared memory, opts the entry in to what its generated unit exports
  /// (an error when the device has less).
  llvm::Error bind(const KernelSpec &spec,
                   std::shared_ptr<CudaLibrary> library);

  /// Where a bound entry runs: the current device's SMs and how many of its
  /// CTAs fit one (the occupancy calculator's answer at its threads and
  /// shared memory), and the entry in the current context.
  struct Residency {
    int numSMs = 0;
    int ctasPerSM = 0;
    CUfunction function = nullptr;
  };
  /// The residency of the bound entry; an error naming the kernel when no
  /// CTA of it fits an SM.
  llvm::Expected<Residency> residency() const;

  KernelSpec kernelSpec;
  std::shared_ptr<CudaLibrary> library;
  CUkernel entry = nullptr;
  int smemBytes = 0;
};

} // namespace attn::runtime

#endif // ATTN_RUNTIME_KERNELHANDLE_H
