//===- Jit.cpp - the JIT API for C++ hosts --------------------------------===//
#include "compiler/Jit/Jit.h"
#include "codegen/EmitCuda.h"
#include "compiler/Frontend/Frontend.h"

#include <cstring>

namespace attn {

namespace {

/// Bytes of a variant struct as a map key: variants are plain aggregates of
/// scalars and optionals, so their field-by-field bytes identify them.
template <class T> void appendField(std::string &key, const T &value) {
  key.append(reinterpret_cast<const char *>(&value), sizeof(T));
}
template <class T>
void appendField(std::string &key, const std::optional<T> &value) {
  appendField(key, value.has_value());
  appendField(key, value.value_or(T{}));
}

std::string keyOf(const DecodeVariant &v) {
  std::string key = "d";
  appendField(key, v.qType);
  appendField(key, v.kvType);
  appendField(key, v.numQHeads);
  appendField(key, v.numKVHeads);
  appendField(key, v.headDim);
  appendField(key, v.pageSize);
  appendField(key, v.layout);
  appendField(key, v.queryLen);
  appendField(key, v.causal);
  appendField(key, v.crossAttention);
  appendField(key, v.windowLeft);
  appendField(key, v.softcap);
  appendField(key, v.scale);
  appendField(key, v.alibi);
  appendField(key, v.perHeadKVScale);
  appendField(key, v.writeLse);
  appendField(key, v.schedule.has_value());
  if (v.schedule) {
    const DecodeSchedule &s = *v.schedule;
    for (int field : {s.warps, s.stages, s.rowTiles, s.minChunkTokens, s.ctasPerSM})
      appendField(key, field);
  }
  return key;
}

std::string keyOf(const AppendKVVariant &v) {
  std::string key = "a";
  appendField(key, v.inType);
  appendField(key, v.kvType);
  appendField(key, v.numKVHeads);
  appendField(key, v.headDim);
  appendField(key, v.pageSize);
  appendField(key, v.layout);
  appendField(key, v.perHeadKVScale);
  return key;
}

} // namespace

struct Jit::Impl {
  Options options;
  runtime::KernelCache *cache;
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<const runtime::DecodeKernel>> decodeKernels;
  std::map<std::string, std::shared_ptr<const runtime::AppendKVKernel>> appendKernels;
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
  auto spec = mlir::attn::compileDecodeVariant(variant, arch);
  if (!spec)
    return spec.takeError();
  CompiledKernel compiled{*spec, emitCuda(*spec), nullptr};
  auto cubin = impl->cache->getCubin({spec->uri(), compiled.source, arch});
  if (!cubin)
    return cubin.takeError();
  compiled.cubin = *cubin;
  return compiled;
}

llvm::Expected<CompiledKernel> Jit::compile(const AppendKVVariant &variant,
                                            Arch arch) {
  auto spec = mlir::attn::compileAppendKVVariant(variant, arch);
  if (!spec)
    return spec.takeError();
  CompiledKernel compiled{*spec, emitCuda(*spec), nullptr};
  auto cubin = impl->cache->getCubin({spec->uri(), compiled.source, arch});
  if (!cubin)
    return cubin.takeError();
  compiled.cubin = *cubin;
  return compiled;
}

llvm::Expected<std::shared_ptr<const runtime::DecodeKernel>>
Jit::decode(const DecodeVariant &variant) {
  std::string key = keyOf(variant);
  {
    std::lock_guard<std::mutex> lock(impl->mutex);
    auto it = impl->decodeKernels.find(key);
    if (it != impl->decodeKernels.end())
      return it->second;
  }
  // Compiling outside the lock lets other variants proceed; the cache makes
  // concurrent compiles of this one a single NVRTC run.
  auto arch = targetArch();
  if (!arch)
    return arch.takeError();
  auto spec = mlir::attn::compileDecodeVariant(variant, *arch);
  if (!spec)
    return spec.takeError();
  auto library = impl->cache->getLibrary({spec->uri(), emitCuda(*spec), *arch});
  if (!library)
    return library.takeError();
  auto kernel = runtime::DecodeKernel::create(*spec, variant, *library);
  if (!kernel)
    return kernel.takeError();
  std::lock_guard<std::mutex> lock(impl->mutex);
  auto [it, inserted] = impl->decodeKernels.emplace(
      key, std::make_shared<const runtime::DecodeKernel>(std::move(*kernel)));
  return it->second;
}

llvm::Expected<std::shared_ptr<const runtime::AppendKVKernel>>
Jit::appendKV(const AppendKVVariant &variant) {
  std::string key = keyOf(variant);
  {
    std::lock_guard<std::mutex> lock(impl->mutex);
    auto it = impl->appendKernels.find(key);
    if (it != impl->appendKernels.end())
      return it->second;
  }
  auto arch = targetArch();
  if (!arch)
    return arch.takeError();
  auto spec = mlir::attn::compileAppendKVVariant(variant, *arch);
  if (!spec)
    return spec.takeError();
  auto library = impl->cache->getLibrary({spec->uri(), emitCuda(*spec), *arch});
  if (!library)
    return library.takeError();
  auto kernel = runtime::AppendKVKernel::create(*spec, *library);
  if (!kernel)
    return kernel.takeError();
  std::lock_guard<std::mutex> lock(impl->mutex);
  auto [it, inserted] = impl->appendKernels.emplace(
      key, std::make_shared<const runtime::AppendKVKernel>(std::move(*kernel)));
  return it->second;
}

} // namespace attn
