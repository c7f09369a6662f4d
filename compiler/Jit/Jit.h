//===- Jit.h - the JIT API for C++ hosts ------------------------*- C++ -*-===//
//
// Describe a variant as a plain struct, get a cached, loaded kernel:
// variant -> attn IR -> attn-pipeline -> KernelSpec -> CUDA C++ -> NVRTC ->
// cubin (memory and disk cache) -> loaded library. Repeated requests for a
// variant return the same kernel object from an in-memory map.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_COMPILER_JIT_JIT_H
#define ATTN_COMPILER_JIT_JIT_H

#include "attn/runtime/cache/KernelCache.h"
#include "attn/runtime/kernels/Cascade.h"
#include "attn/runtime/kernels/KernelSource.h"
#include "attn/runtime/kernels/Kernels.h"
#include "attn/runtime/kernels/MixedBatch.h"
#include "attn/runtime/serving/Backend.h"
#include "spec/Variant.h"

#include "llvm/Support/Error.h"

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace attn {

/// A variant compiled for one arch, without touching a GPU.
struct CompiledKernel {
  KernelSpec spec;
  std::string source; ///< the CUDA translation unit
  std::shared_ptr<const std::string> cubin;
};

/// The JIT: compiles variants on first use and memoizes loaded kernels.
/// Thread-safe; concurrent first requests for one kernel compile it once.
class Jit {
public:
  struct Options {
    /// Target; default: the current device's arch.
    std::optional<Arch> arch;
    /// Cubin cache; default: runtime::KernelCache::global().
    runtime::KernelCache *cache = nullptr;
  };

  explicit Jit(Options options);
  Jit() : Jit(Options{}) {}
  ~Jit();
  /// The process-wide JIT with default options.
  static Jit &global();

  /// The loaded kernel of `variant`, of any op of spec/Ops.h (needs a GPU):
  /// compiled on first use, then memoized by the variant's key.
  template <class Variant>
  llvm::Expected<std::shared_ptr<const runtime::KernelFor<Variant>>>
  load(const Variant &variant);
  /// load() under each op's name: decode(variant), prefill(variant), ...
#define ATTN_OP(Type, member, name)                                            \
  llvm::Expected<std::shared_ptr<const runtime::Type##Kernel>> member(         \
      const Type##Variant &variant) {                                          \
    return load(variant);                                                      \
  }
#include "spec/Ops.h"
  /// Mixed prefill + decode batches over the paged cache of `variant`
  /// (`paged` must be set): its prefill kernel with the decode kernel of
  /// runtime::decodeVariantFor(variant) (needs a GPU).
  llvm::Expected<runtime::MixedBatchAttention>
  mixedBatch(const PrefillVariant &variant);
  /// Cascade (shared-prefix) decode for `variant`: its prefix, suffix and
  /// merge kernels (runtime/kernels/Cascade.h; needs a GPU).
  llvm::Expected<runtime::CascadeAttention>
  cascade(const DecodeVariant &variant);
  /// This JIT as the kernel source of a runtime::Backend (it must outlive
  /// the backend).
  runtime::KernelSource kernelSource();

  /// Spec, source and cubin of a variant of any op for `arch` (no GPU
  /// needed).
  template <class Variant>
  llvm::Expected<CompiledKernel> compile(const Variant &variant, Arch arch);

private:
  struct Impl;
  llvm::Expected<Arch> targetArch();
  std::unique_ptr<Impl> impl;
};

} // namespace attn

#endif // ATTN_COMPILER_JIT_JIT_H
