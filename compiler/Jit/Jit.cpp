//===- Jit.cpp - the JIT API for C++ hosts --------------------------------===//
#include "compiler/Jit/Jit.h"
#include "attn/runtime/cache/VariantKey.h"
#include "codegen/EmitCuda.h"
#include "compiler/Frontend/Frontend.h"

#include <cstring>

namespace attn {

struct Jit::Impl {
  Options options;
  runtime::KernelCache *cache;
  std::mutex mutex;
  /// Loaded kernels of every op by "<op> <variant key>", each a
  /// runtime::KernelFor of its variant.
  std::map<std::string, std::shared_ptr<const void>> kernels;
};

template <class Variant>
llvm::Expected<CompiledKernel> Jit::compile(const Variant &variant, Arch arch) {
  auto spec = mlir::attn::compileVariant(variant, arch);
  if (!spec)
    return spec.takeError();
  CompiledKernel compiled{*spec, emitCuda(*spec), nullptr};
  auto cubin = impl->cache->getCubin({spec->uri(), compiled.source, arch});
  if (!cubin)
    return cubin.takeError();
  compiled.cubin = *cubin;
  return compiled;
}

/// Compiling happens outside the lock so other variants proceed; the cache
/// makes concurrent compiles of one variant a single NVRTC run.
template <class Variant>
llvm::Expected<std::shared_ptr<const runtime::KernelFor<Variant>>>
Jit::load(const Variant &variant) {
  using Kernel = runtime::KernelFor<Variant>;
  std::string key = std::string(runtime::KernelOf<Variant>::opName) + " " +
                    runtime::variantKey(variant);
  {
    std::lock_guard<std::mutex> lock(impl->mutex);
    auto it = impl->kernels.find(key);
    if (it != impl->kernels.end())
      return std::static_pointer_cast<const Kernel>(it->second);
  }
  llvm::Expected<Arch> arch = targetArch();
  if (!arch)
    return arch.takeError();
  auto spec = mlir::attn::compileVariant(variant, *arch);
  if (!spec)
    return spec.takeError();
  auto library = impl->cache->getLibrary({spec->uri(), emitCuda(*spec), *arch});
  if (!library)
    return library.takeError();
  auto kernel = Kernel::create(*spec, variant, *library);
  if (!kernel)
    return kernel.takeError();
  std::lock_guard<std::mutex> lock(impl->mutex);
  auto [it, inserted] = impl->kernels.emplace(
      key, std::make_shared<const Kernel>(std::move(*kernel)));
  return std::static_pointer_cast<const Kernel>(it->second);
}

// Every op's instances of the two templates.
#define ATTN_OP(Type, member, name)                                            \
  template llvm::Expected<CompiledKernel> Jit::compile(const Type##Variant &,  \
                                                       Arch);                  \
  template llvm::Expected<std::shared_ptr<const runtime::Type##Kernel>>        \
  Jit::load(const Type##Variant &);
#include "spec/Ops.h"

Jit::Jit(Options options) : impl(std::make_unique<Impl>()) {
  impl->options = options;
  impl->cache = options.cache ? options.cache : &runtime::KernelCache::global();
}

Jit::~Jit() = default;

Jit &Jit::global() {
  static Jit jit;
  return jit;
}

llvm::Expected<Arch> Jit::targetArch() {
  if (impl->options.arch)
    return *impl->options.arch;
  return runtime::currentDeviceArch();
}

llvm::Expected<runtime::MixedBatchAttention>
Jit::mixedBatch(const PrefillVariant &variant) {
  if (!variant.paged)
    return llvm::createStringError(
        "mixed batch: the prefill variant must read the paged cache (set "
        "`paged`)");
  auto prefillKernel = prefill(variant);
  if (!prefillKernel)
    return prefillKernel.takeError();
  auto decodeKernel = decode(runtime::decodeVariantFor(variant));
  if (!decodeKernel)
    return decodeKernel.takeError();
  return runtime::MixedBatchAttention::create(*prefillKernel, *decodeKernel);
}

llvm::Expected<runtime::CascadeAttention>
Jit::cascade(const DecodeVariant &variant) {
  return runtime::cascadeFrom(kernelSource(), variant);
}

runtime::KernelSource Jit::kernelSource() {
  return runtime::KernelSource::of(
      [this](const auto &variant) { return load(variant); });
}

} // namespace attn
