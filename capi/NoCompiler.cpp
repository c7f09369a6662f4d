//===- NoCompiler.cpp - the JIT entry points of libattn_runtime_c.so ------===//
//
// The runtime-only library has no compiler: its contexts are AOT libraries
// (attn_context_create_aot), and the JIT entry points say where the JIT is.
//
//===----------------------------------------------------------------------===//
#include "capi/CApi.h"

using namespace attn::capi;

namespace {
attn_status unsupported(const char *function) {
  clearError();
  return fail(function, ATTN_ERROR_UNSUPPORTED,
              "libattn_runtime_c.so has no compiler: load kernels from an "
              "attn-aot library (attn_context_create_aot), or use "
              "libattn_c.so for the JIT");
}
} // namespace

extern "C" {

int attn_has_compiler(void) { return 0; }

attn_status attn_context_create_jit(const attn_jit_options *,
                                    attn_context **out) {
  if (out)
    *out = nullptr;
  return unsupported(__func__);
}

attn_status attn_compile_decode(const attn_decode_variant *, const char *,
                                attn_compiled **out) {
  if (out)
    *out = nullptr;
  return unsupported(__func__);
}

attn_status attn_compile_prefill(const attn_prefill_variant *, const char *,
                                 attn_compiled **out) {
  if (out)
    *out = nullptr;
  return unsupported(__func__);
}

} // extern "C"
