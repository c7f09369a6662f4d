//===- CompilerJit.cpp - the JIT entry points of libattn_c.so -------------===//
//
// The entry points that need the compiler: JIT contexts and compiling a
// variant without a GPU. libattn_runtime_c.so has NoCompiler.cpp instead.
//
//===----------------------------------------------------------------------===//
#include "capi/CApi.h"

#include "codegen/EmitCuda.h"
#include "compiler/Jit/Jit.h"

using namespace attn;
using namespace attn::capi;

namespace {

/// The JIT attn_compile_* use: the global cache, no fixed arch (each call
/// names one).
Jit &compileJit() { return Jit::global(); }

template <class CVariant>
attn_status compileVariant(const char *function, const CVariant *v,
                           const char *arch, attn_compiled **out) {
  return guard(function, [&]() -> llvm::Error {
    if (llvm::Error error = requireNonNull(out, "out"))
      return error;
    *out = nullptr;
    auto variant = toVariant(v);
    if (!variant)
      return variant.takeError();
    auto target = parseArchArg(arch, "arch");
    if (!target)
      return target.takeError();
    auto compiled = compileJit().compile(*variant, *target);
    if (!compiled)
      return compiled.takeError();
    auto result = std::make_unique<Compiled>();
    result->name = kernelSymbol(compiled->spec);
    result->source = std::move(compiled->source);
    result->cubin = std::move(compiled->cubin);
    *out = newHandle<attn_compiled>(std::move(result));
    return llvm::Error::success();
  });
}

} // namespace

extern "C" {

int attn_has_compiler(void) { return 1; }

attn_status attn_context_create_jit(const attn_jit_options *options,
                                    attn_context **out) {
  return guard(__func__, [&]() -> llvm::Error {
    if (llvm::Error error = requireNonNull(out, "out"))
      return error;
    *out = nullptr;
    auto context = std::make_unique<Context>();
    Jit::Options jitOptions;
    if (options) {
      ATTN_CHECK_STRUCT(options, attn_jit_options);
      if (options->arch) {
        auto arch = parseArchArg(options->arch, "options->arch");
        if (!arch)
          return arch.takeError();
        jitOptions.arch = *arch;
        context->arch = *arch;
      }
      if (options->cache_dir) {
        if (!*options->cache_dir)
          return argError("options->cache_dir is empty (NULL: the default "
                          "cache directory)");
        runtime::KernelCache::Options cacheOptions;
        cacheOptions.diskDir = std::string(options->cache_dir);
        context->ownedCache =
            std::make_unique<runtime::KernelCache>(cacheOptions);
        jitOptions.cache = context->ownedCache.get();
      }
    }
    context->cache =
        jitOptions.cache ? jitOptions.cache : &runtime::KernelCache::global();
    auto jit = std::make_shared<Jit>(jitOptions);
    context->source = jit->kernelSource();
    context->jit = std::move(jit);
    *out = newHandle<attn_context>(std::move(context));
    return llvm::Error::success();
  });
}

attn_status attn_compile_decode(const attn_decode_variant *v, const char *arch,
                                attn_compiled **out) {
  return compileVariant(__func__, v, arch, out);
}

attn_status attn_compile_prefill(const attn_prefill_variant *v,
                                 const char *arch, attn_compiled **out) {
  return compileVariant(__func__, v, arch, out);
}

} // extern "C"
