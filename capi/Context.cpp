//===- Context.cpp - where kernels come from ------------------------------===//
//
// A context is a runtime::KernelSource: the JIT's (CompilerJit.cpp) or an
// AOT library's for the current device's arch (here). Every kernel handle
// gets its kernels through one.
//
//===----------------------------------------------------------------------===//
#include "capi/CApi.h"

#include "attn/runtime/support/CudaHandles.h"

using namespace attn;
using namespace attn::capi;

llvm::Expected<Arch> attn_context::targetArch() {
  if (arch)
    return *arch;
  return runtime::currentDeviceArch();
}

llvm::Expected<const runtime::KernelSource *> attn_context::kernels() {
  std::lock_guard<std::mutex> lock(mutex);
  if (source)
    return &*source;
  // AOT: bound on first use, so that a library opens without a GPU.
  auto target = targetArch();
  if (!target)
    return target.takeError();
  source = runtime::kernelsFrom(library, *target);
  return &*source;
}

extern "C" {

attn_status attn_context_create_aot(const char *library_path,
                                    attn_context **out) {
  return guard(__func__, [&]() -> llvm::Error {
    if (llvm::Error error = requireNonNull(out, "out"))
      return error;
    *out = nullptr;
    if (llvm::Error error = requireNonNull(library_path, "library_path"))
      return error;
    auto library = runtime::AotLibrary::open(library_path);
    if (!library)
      return library.takeError();
    auto context = std::make_unique<attn_context>();
    context->library = *library;
    // CacheOps takes its kernels through a KernelCache: one given the
    // library serves them from it (attn-aot's "cache_ops"), else from the
    // disk cache or NVRTC where the host has it.
    runtime::KernelCache::Options options;
    options.libraries.push_back(context->library);
    context->ownedCache = std::make_unique<runtime::KernelCache>(options);
    context->cache = context->ownedCache.get();
    *out = context.release();
    return llvm::Error::success();
  });
}

void attn_context_destroy(attn_context *context) { delete context; }

} // extern "C"

extern "C" {

const char *attn_compiled_kernel_name(const attn_compiled *c) {
  return c ? c->name.c_str() : "";
}

const char *attn_compiled_source(const attn_compiled *c) {
  return c ? c->source.c_str() : "";
}

size_t attn_compiled_cubin_size(const attn_compiled *c) {
  return c && c->cubin ? c->cubin->size() : 0;
}

void attn_compiled_destroy(attn_compiled *c) { delete c; }

} // extern "C"
