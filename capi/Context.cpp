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

llvm::Expected<Arch> Context::targetArch() {
  if (arch)
    return *arch;
  return runtime::currentDeviceArch();
}

llvm::Expected<const runtime::KernelSource *> Context::kernels() {
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
    auto context = std::make_unique<Context>();
    context->library = *library;
    // CacheOps takes its kernels through a KernelCache: one given the
    // library serves them from it (attn-aot's "cache_ops"), else from the
    // disk cache or NVRTC where the host has it.
    runtime::KernelCache::Options options;
    options.libraries.push_back(context->library);
    context->ownedCache = std::make_unique<runtime::KernelCache>(options);
    context->cache = context->ownedCache.get();
    *out = newHandle<attn_context>(std::move(context));
    return llvm::Error::success();
  });
}

attn_status attn_context_destroy(attn_context *context) {
  return guard(__func__, [&] { return destroyHandle(context, "context"); });
}

} // extern "C"

namespace {
/// The object of `compiled` for the accessors below, which return no
/// status: null (with this thread's error set) unless it is live.
std::shared_ptr<Compiled> compiledOf(const char *function,
                                     const attn_compiled *compiled) {
  std::shared_ptr<Compiled> object;
  guard(function,
        [&] { return lookup(compiled, "compiled").moveInto(object); });
  return object;
}
} // namespace

extern "C" {

const char *attn_compiled_kernel_name(const attn_compiled *compiled) {
  std::shared_ptr<Compiled> c = compiledOf(__func__, compiled);
  return c ? c->name.c_str() : "";
}

const char *attn_compiled_source(const attn_compiled *compiled) {
  std::shared_ptr<Compiled> c = compiledOf(__func__, compiled);
  return c ? c->source.c_str() : "";
}

size_t attn_compiled_cubin_size(const attn_compiled *compiled) {
  std::shared_ptr<Compiled> c = compiledOf(__func__, compiled);
  return c && c->cubin ? c->cubin->size() : 0;
}

attn_status attn_compiled_destroy(attn_compiled *compiled) {
  return guard(__func__, [&] { return destroyHandle(compiled, "compiled"); });
}

} // extern "C"
