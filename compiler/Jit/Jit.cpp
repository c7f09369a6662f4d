//===- Jit.cpp - the JIT API for C++ hosts --------------------------------===//
#include "compiler/Jit/Jit.h"
#include "codegen/EmitCuda.h"
#include "compiler/Frontend/Frontend.h"
#include "attn/runtime/cache/VariantKey.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstring>

namespace attn {

namespace {

/// The front end and runtime entry points of each kind of variant, so the
/// JIT's paths are written once.
llvm::Expected<KernelSpec> specFor(const DecodeVariant &v, Arch arch) {
  return mlir::attn::compileDecodeVariant(v, arch);
}
llvm::Expected<KernelSpec> specFor(const AppendKVVariant &v, Arch arch) {
  return mlir::attn::compileAppendKVVariant(v, arch);
}
llvm::Expected<KernelSpec> specFor(const PrefillVariant &v, Arch arch) {
  return mlir::attn::compilePrefillVariant(v, arch);
}
llvm::Expected<KernelSpec> specFor(const MergeStatesVariant &v, Arch arch) {
  return mlir::attn::compileMergeStatesVariant(v, arch);
}
llvm::Expected<runtime::DecodeKernel>
createKernel(const KernelSpec &spec, const DecodeVariant &v,
             std::shared_ptr<runtime::CudaLibrary> library) {
  return runtime::DecodeKernel::create(spec, v, std::move(library));
}
llvm::Expected<runtime::AppendKVKernel>
createKernel(const KernelSpec &spec, const AppendKVVariant &,
             std::shared_ptr<runtime::CudaLibrary> library) {
  return runtime::AppendKVKernel::create(spec, std::move(library));
}
llvm::Expected<runtime::PrefillKernel>
createKernel(const KernelSpec &spec, const PrefillVariant &v,
             std::shared_ptr<runtime::CudaLibrary> library) {
  return runtime::PrefillKernel::create(spec, v, std::move(library));
}
llvm::Expected<runtime::MergeStatesKernel>
createKernel(const KernelSpec &spec, const MergeStatesVariant &,
             std::shared_ptr<runtime::CudaLibrary> library) {
  return runtime::MergeStatesKernel::create(spec, std::move(library));
}

} // namespace

struct Jit::Impl {
  Options options;
  runtime::KernelCache *cache;
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<const runtime::DecodeKernel>> decodeKernels;
  std::map<std::string, std::shared_ptr<const runtime::AppendKVKernel>> appendKernels;
  std::map<std::string, std::shared_ptr<const runtime::PrefillKernel>> prefillKernels;
  std::map<std::string, std::shared_ptr<const runtime::MergeStatesKernel>> mergeKernels;

  template <class Variant>
  llvm::Expected<CompiledKernel> compile(const Variant &variant, Arch arch) {
    auto spec = specFor(variant, arch);
    if (!spec)
      return spec.takeError();
    CompiledKernel compiled{*spec, emitCuda(*spec), nullptr};
    auto cubin = cache->getCubin({spec->uri(), compiled.source, arch});
    if (!cubin)
      return cubin.takeError();
    compiled.cubin = *cubin;
    return compiled;
  }

  /// The memoized kernel of `variant`: compiled and loaded on first use.
  /// Compiling happens outside the lock so other variants proceed; the
  /// cache makes concurrent compiles of one variant a single NVRTC run.
  template <class Kernel, class Variant>
  llvm::Expected<std::shared_ptr<const Kernel>>
  load(std::map<std::string, std::shared_ptr<const Kernel>> &kernels,
       const Variant &variant,
       llvm::function_ref<llvm::Expected<Arch>()> targetArch) {
    std::string key = runtime::variantKey(variant);
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = kernels.find(key);
      if (it != kernels.end())
        return it->second;
    }
    llvm::Expected<Arch> arch = targetArch();
    if (!arch)
      return arch.takeError();
    auto spec = specFor(variant, *arch);
    if (!spec)
      return spec.takeError();
    auto library = cache->getLibrary({spec->uri(), emitCuda(*spec), *arch});
    if (!library)
      return library.takeError();
    auto kernel = createKernel(*spec, variant, *library);
    if (!kernel)
      return kernel.takeError();
    std::lock_guard<std::mutex> lock(mutex);
    auto [it, inserted] =
        kernels.emplace(key, std::make_shared<const Kernel>(std::move(*kernel)));
    return it->second;
  }
};

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

llvm::Expected<CompiledKernel> Jit::compile(const DecodeVariant &variant,
                                            Arch arch) {
  return impl->compile(variant, arch);
}

llvm::Expected<CompiledKernel> Jit::compile(const AppendKVVariant &variant,
                                            Arch arch) {
  return impl->compile(variant, arch);
}

llvm::Expected<CompiledKernel> Jit::compile(const PrefillVariant &variant,
                                            Arch arch) {
  return impl->compile(variant, arch);
}

llvm::Expected<CompiledKernel> Jit::compile(const MergeStatesVariant &variant,
                                            Arch arch) {
  return impl->compile(variant, arch);
}

llvm::Expected<std::shared_ptr<const runtime::DecodeKernel>>
Jit::decode(const DecodeVariant &variant) {
  return impl->load(impl->decodeKernels, variant, [&] { return targetArch(); });
}

llvm::Expected<std::shared_ptr<const runtime::AppendKVKernel>>
Jit::appendKV(const AppendKVVariant &variant) {
  return impl->load(impl->appendKernels, variant, [&] { return targetArch(); });
}

llvm::Expected<std::shared_ptr<const runtime::PrefillKernel>>
Jit::prefill(const PrefillVariant &variant) {
  return impl->load(impl->prefillKernels, variant,
                    [&] { return targetArch(); });
}

llvm::Expected<std::shared_ptr<const runtime::MergeStatesKernel>>
Jit::mergeStates(const MergeStatesVariant &variant) {
  return impl->load(impl->mergeKernels, variant, [&] { return targetArch(); });
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
  runtime::KernelSource source;
  source.decode = [this](const DecodeVariant &v) { return decode(v); };
  source.prefill = [this](const PrefillVariant &v) { return prefill(v); };
  source.appendKV = [this](const AppendKVVariant &v) { return appendKV(v); };
  source.mergeStates = [this](const MergeStatesVariant &v) {
    return mergeStates(v);
  };
  return source;
}

} // namespace attn
