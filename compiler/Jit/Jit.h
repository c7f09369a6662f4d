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

#include "attn/runtime/kernels/AppendKV.h"
#include "attn/runtime/kernels/Cascade.h"
#include "attn/runtime/kernels/MergeStates.h"
#include "attn/runtime/serving/Backend.h"
#include "attn/runtime/kernels/Decode.h"
#include "attn/runtime/kernels/MixedBatch.h"
#include "spec/Variant.h"
#include "attn/runtime/kernels/Prefill.h"
#include "attn/runtime/cache/KernelCache.h"

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

  /// The loaded decode kernel for `variant` (needs a GPU).
  llvm::Expected<std::shared_ptr<const runtime::DecodeKernel>>
  decode(const DecodeVariant &variant);
  /// The loaded append-KV kernel for `variant` (needs a GPU).
  llvm::Expected<std::shared_ptr<const runtime::AppendKVKernel>>
  appendKV(const AppendKVVariant &variant);
  /// The loaded ragged- or paged-prefill kernel for `variant` (needs a GPU).
  llvm::Expected<std::shared_ptr<const runtime::PrefillKernel>>
  prefill(const PrefillVariant &variant);
  /// The loaded merge_states kernel for `variant` (needs a GPU).
  llvm::Expected<std::shared_ptr<const runtime::MergeStatesKernel>>
  mergeStates(const MergeStatesVariant &variant);
  /// Mixed prefill + decode batches over the paged cache of `variant`
  /// (`paged` must be set): its prefill kernel with the decode kernel of
  /// runtime::decodeVariantFor(variant) (needs a GPU).
  llvm::Expected<runtime::MixedBatchAttention>
  mixedBatch(const PrefillVariant &variant);
  /// Cascade (shared-prefix) decode for `variant`: its prefix, suffix and
  /// merge kernels (runtime/kernels/Cascade.h; needs a GPU).
  llvm::Expected<runtime::CascadeAttention> cascade(const DecodeVariant &variant);
  /// This JIT as the kernel source of a runtime::Backend (it must outlive
  /// the backend).
  runtime::KernelSource kernelSource();

  /// Spec, source and cubin of a variant for `arch` (no GPU needed).
  llvm::Expected<CompiledKernel> compile(const DecodeVariant &variant, Arch arch);
  llvm::Expected<CompiledKernel> compile(const AppendKVVariant &variant,
                                         Arch arch);
  llvm::Expected<CompiledKernel> compile(const PrefillVariant &variant,
                                         Arch arch);
  llvm::Expected<CompiledKernel> compile(const MergeStatesVariant &variant,
                                         Arch arch);

private:
  struct Impl;
  llvm::Expected<Arch> targetArch();
  std::unique_ptr<Impl> impl;
};

} // namespace attn

#endif // ATTN_COMPILER_JIT_JIT_H
