//===- CApiChecks.h - checks both C ABI libraries must pass -----*- C++ -*-===//
//
// Argument checks that need no GPU and no compiler, run by the tests of
// libattn_c.so (CApiTest.cpp) and of libattn_runtime_c.so
// (RuntimeOnlyTest.cpp): handles that are not live, variants no kernel
// runs, counts no buffer holds.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEST_UNIT_CAPI_CAPICHECKS_H
#define ATTN_TEST_UNIT_CAPI_CAPICHECKS_H

#include "attn_c.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace attn_capi_test {

inline std::string lastError() { return attn_last_error(); }

/// A handle no create call returned: the address of a buffer of the test's
/// own, so that reading it (the library must not) would not be a use after
/// free either.
template <class Handle> Handle *neverCreated() {
  alignas(64) static unsigned char storage[4096];
  return reinterpret_cast<Handle *>(storage);
}

/// What the library says of argument `name` when it is not a live handle
/// of `type`.
inline std::string notLive(const std::string &function, const std::string &name,
                           const std::string &type) {
  return function + ": " + name + " is not a live " + type +
         " handle (destroyed, or never created)";
}

/// Every attn_*_destroy: NULL is a no-op returning ATTN_OK, a handle never
/// created an error naming it (and nothing is freed).
inline void expectDestroysRefuseWhatIsNotLive() {
  struct Destroy {
    const char *function, *name, *type;
    std::function<attn_status(bool)> call; ///< with NULL, or not
  };
  const std::vector<Destroy> destroys = {
      {"attn_context_destroy", "context", "attn_context",
       [](bool null) {
         return attn_context_destroy(null ? nullptr
                                          : neverCreated<attn_context>());
       }},
      {"attn_compiled_destroy", "compiled", "attn_compiled",
       [](bool null) {
         return attn_compiled_destroy(null ? nullptr
                                           : neverCreated<attn_compiled>());
       }},
      {"attn_decode_destroy", "decode", "attn_decode",
       [](bool null) {
         return attn_decode_destroy(null ? nullptr
                                         : neverCreated<attn_decode>());
       }},
      {"attn_prefill_destroy", "prefill", "attn_prefill",
       [](bool null) {
         return attn_prefill_destroy(null ? nullptr
                                          : neverCreated<attn_prefill>());
       }},
      {"attn_mixed_batch_destroy", "mixed", "attn_mixed_batch",
       [](bool null) {
         return attn_mixed_batch_destroy(
             null ? nullptr : neverCreated<attn_mixed_batch>());
       }},
      {"attn_merge_states_destroy", "merge", "attn_merge_states",
       [](bool null) {
         return attn_merge_states_destroy(
             null ? nullptr : neverCreated<attn_merge_states>());
       }},
      {"attn_cascade_destroy", "cascade", "attn_cascade",
       [](bool null) {
         return attn_cascade_destroy(null ? nullptr
                                          : neverCreated<attn_cascade>());
       }},
      {"attn_append_kv_destroy", "append", "attn_append_kv",
       [](bool null) {
         return attn_append_kv_destroy(null ? nullptr
                                            : neverCreated<attn_append_kv>());
       }},
      {"attn_cache_ops_destroy", "ops", "attn_cache_ops",
       [](bool null) {
         return attn_cache_ops_destroy(null ? nullptr
                                            : neverCreated<attn_cache_ops>());
       }},
      {"attn_metadata_builder_destroy", "builder", "attn_metadata_builder",
       [](bool null) {
         return attn_metadata_builder_destroy(
             null ? nullptr : neverCreated<attn_metadata_builder>());
       }},
  };
  for (const Destroy &d : destroys) {
    EXPECT_EQ(d.call(true), ATTN_OK) << d.function;
    EXPECT_EQ(lastError(), "") << d.function;
    // Twice: the first refusal freed nothing and changed nothing.
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(d.call(false), ATTN_ERROR_INVALID_ARGUMENT) << d.function;
      EXPECT_EQ(lastError(), notLive(d.function, d.name, d.type));
    }
  }
}

/// Every call that takes a handle, given one never created (as a destroyed
/// one looks): an error naming the argument, before any other argument is
/// read.
inline void expectCallsRefuseWhatIsNotLive() {
  struct Call {
    const char *function, *name, *type;
    std::function<attn_status()> call;
  };
  attn_decode_variant d;
  attn_decode_variant_init(&d);
  attn_prefill_variant p;
  attn_prefill_variant_init(&p);
  attn_merge_states_variant m;
  attn_merge_states_variant_init(&m);
  attn_append_kv_variant a;
  attn_append_kv_variant_init(&a);
  attn_metadata_limits limits;
  ATTN_INIT(&limits);
  int32_t lens[1] = {1};
  attn_decode_args decodeArgs;
  ATTN_INIT(&decodeArgs);
  attn_prefill_args prefillArgs;
  ATTN_INIT(&prefillArgs);
  attn_merge_states_args mergeArgs;
  ATTN_INIT(&mergeArgs);
  attn_cascade_args cascadeArgs;
  ATTN_INIT(&cascadeArgs);
  attn_append_kv_args appendArgs;
  ATTN_INIT(&appendArgs);
  attn_cache_layers layers;
  ATTN_INIT(&layers);
  attn_advance_step_args step;
  ATTN_INIT(&step);
  attn_metadata md;
  ATTN_INIT(&md);
  attn_context *context = neverCreated<attn_context>();
  attn_decode *decode = nullptr;
  attn_prefill *prefill = nullptr;
  attn_mixed_batch *mixed = nullptr;
  attn_merge_states *merge = nullptr;
  attn_cascade *cascade = nullptr;
  attn_append_kv *append = nullptr;
  attn_cache_ops *ops = nullptr;
  const std::vector<Call> calls = {
      {"attn_decode_create", "context", "attn_context",
       [&] { return attn_decode_create(context, &d, 4, &decode); }},
      {"attn_prefill_create", "context", "attn_context",
       [&] { return attn_prefill_create(context, &p, 4, 64, &prefill); }},
      {"attn_mixed_batch_create", "context", "attn_context",
       [&] { return attn_mixed_batch_create(context, &p, 4, 64, &mixed); }},
      {"attn_merge_states_create", "context", "attn_context",
       [&] { return attn_merge_states_create(context, &m, &merge); }},
      {"attn_cascade_create", "context", "attn_context",
       [&] { return attn_cascade_create(context, &d, 4, 2, &cascade); }},
      {"attn_append_kv_create", "context", "attn_context",
       [&] { return attn_append_kv_create(context, &a, &append); }},
      {"attn_cache_ops_create", "context", "attn_context",
       [&] { return attn_cache_ops_create(context, &ops); }},
      {"attn_decode_plan", "decode", "attn_decode",
       [&] {
         return attn_decode_plan(neverCreated<attn_decode>(), lens, 1, 0,
                                 nullptr);
       }},
      {"attn_decode_run", "decode", "attn_decode",
       [&] {
         return attn_decode_run(neverCreated<attn_decode>(), &decodeArgs,
                                nullptr);
       }},
      {"attn_prefill_plan", "prefill", "attn_prefill",
       [&] {
         return attn_prefill_plan(neverCreated<attn_prefill>(), lens, lens, 0,
                                  0, nullptr);
       }},
      {"attn_prefill_plan_paged", "prefill", "attn_prefill",
       [&] {
         return attn_prefill_plan_paged(neverCreated<attn_prefill>(), lens,
                                        lens, 0, 0, nullptr);
       }},
      {"attn_prefill_run", "prefill", "attn_prefill",
       [&] {
         return attn_prefill_run(neverCreated<attn_prefill>(), &prefillArgs,
                                 nullptr);
       }},
      {"attn_mixed_batch_plan", "mixed", "attn_mixed_batch",
       [&] {
         return attn_mixed_batch_plan(neverCreated<attn_mixed_batch>(), lens,
                                      lens, 0, 0, 0, nullptr);
       }},
      {"attn_mixed_batch_run", "mixed", "attn_mixed_batch",
       [&] {
         return attn_mixed_batch_run(neverCreated<attn_mixed_batch>(),
                                     &prefillArgs, lens, nullptr);
       }},
      {"attn_merge_states_run", "merge", "attn_merge_states",
       [&] {
         return attn_merge_states_run(neverCreated<attn_merge_states>(),
                                      &mergeArgs, nullptr);
       }},
      {"attn_cascade_plan", "cascade", "attn_cascade",
       [&] {
         return attn_cascade_plan(neverCreated<attn_cascade>(), nullptr, 0,
                                  lens, 1, 0, nullptr);
       }},
      {"attn_cascade_run", "cascade", "attn_cascade",
       [&] {
         return attn_cascade_run(neverCreated<attn_cascade>(), &cascadeArgs,
                                 nullptr);
       }},
      {"attn_append_kv_run", "append", "attn_append_kv",
       [&] {
         return attn_append_kv_run(neverCreated<attn_append_kv>(), &appendArgs,
                                   nullptr);
       }},
      {"attn_copy_blocks", "ops", "attn_cache_ops",
       [&] {
         return attn_copy_blocks(neverCreated<attn_cache_ops>(), &layers,
                                 nullptr, 0, nullptr);
       }},
      {"attn_copy_blocks_device", "ops", "attn_cache_ops",
       [&] {
         return attn_copy_blocks_device(neverCreated<attn_cache_ops>(), &layers,
                                        nullptr, 0, nullptr);
       }},
      {"attn_advance_step", "ops", "attn_cache_ops",
       [&] {
         return attn_advance_step(neverCreated<attn_cache_ops>(), &step,
                                  nullptr, nullptr);
       }},
      {"attn_metadata_builder_build", "builder", "attn_metadata_builder",
       [&] {
         return attn_metadata_builder_build(
             neverCreated<attn_metadata_builder>(), nullptr, 0, nullptr, &md);
       }},
  };
  for (const Call &c : calls) {
    EXPECT_EQ(c.call(), ATTN_ERROR_INVALID_ARGUMENT) << c.function;
    EXPECT_EQ(lastError(), notLive(c.function, c.name, c.type));
  }
  // Nothing was created.
  EXPECT_EQ(decode, nullptr);
  EXPECT_EQ(prefill, nullptr);
  EXPECT_EQ(mixed, nullptr);
  EXPECT_EQ(merge, nullptr);
  EXPECT_EQ(cascade, nullptr);
  EXPECT_EQ(append, nullptr);
  EXPECT_EQ(ops, nullptr);

  // The compiled accessors return no status: "" or 0, and the error.
  const attn_compiled *compiled = neverCreated<attn_compiled>();
  EXPECT_STREQ(attn_compiled_kernel_name(compiled), "");
  EXPECT_EQ(lastError(),
            notLive("attn_compiled_kernel_name", "compiled", "attn_compiled"));
  EXPECT_STREQ(attn_compiled_source(compiled), "");
  EXPECT_EQ(attn_compiled_cubin_size(compiled), 0u);
  EXPECT_EQ(lastError(),
            notLive("attn_compiled_cubin_size", "compiled", "attn_compiled"));
  EXPECT_STREQ(attn_compiled_kernel_name(nullptr), "");
  EXPECT_EQ(lastError(), "attn_compiled_kernel_name: compiled is null");
}

/// A change that makes a variant invalid and what the error must say.
template <class V> struct BadVariant {
  const char *change;
  std::function<void(V &)> apply;
  const char *message; ///< a part of attn_last_error()
};

inline std::vector<BadVariant<attn_decode_variant>> badDecodeVariants() {
  using V = attn_decode_variant;
  return {
      {"negative heads", [](V &v) { v.num_q_heads = -32; },
       "v->num_q_heads is -32; expected 1 to 1024"},
      {"no KV heads", [](V &v) { v.num_kv_heads = 0; },
       "v->num_kv_heads is 0; expected 1 to 1024"},
      {"too many heads", [](V &v) { v.num_q_heads = 2048; },
       "v->num_q_heads is 2048"},
      {"heads not in groups", [](V &v) { v.num_q_heads = 12; },
       "v->num_q_heads (12) must be a multiple of v->num_kv_heads (8)"},
      {"too large a group",
       [](V &v) {
         v.num_q_heads = 256;
         v.num_kv_heads = 1;
       },
       "v->num_q_heads / v->num_kv_heads is 256; at most 128"},
      {"zero head dim", [](V &v) { v.head_dim = 0; },
       "v->head_dim 0 is not supported"},
      {"odd head dim", [](V &v) { v.head_dim = 100; },
       "v->head_dim 100 is not supported"},
      {"zero page size", [](V &v) { v.page_size = 0; },
       "v->page_size 0 is not supported"},
      {"too large pages", [](V &v) { v.page_size = 512; },
       "v->page_size 512 is not supported"},
      {"no query", [](V &v) { v.query_len = 0; },
       "v->query_len is 0; expected 1 to 16"},
      {"too long a query", [](V &v) { v.query_len = 17; },
       "v->query_len is 17"},
      {"f32 q",
       [](V &v) {
         v.q_type = ATTN_DTYPE_F32;
         v.kv_type = ATTN_DTYPE_F32;
       },
       "v->q_type is f32; expected f16 or bf16"},
      {"f16 cache under a bf16 q", [](V &v) { v.kv_type = ATTN_DTYPE_F16; },
       "v->kv_type is f16; expected q_type (bf16), e4m3 or e5m2"},
      {"encoder",
       [](V &v) {
         v.knobs.kind = ATTN_KIND_ENCODER;
         v.knobs.causal = 0;
       },
       "encoder attention has no decode phase"},
      {"causal cross attention", [](V &v) { v.knobs.kind = ATTN_KIND_CROSS; },
       "v->knobs.causal is 1 with v->knobs.kind cross"},
      {"window without causal",
       [](V &v) {
         v.knobs.window_left = 64;
         v.knobs.causal = 0;
       },
       "v->knobs.window_left is 64 with v->knobs.causal 0"},
      {"negative soft-cap", [](V &v) { v.knobs.softcap = -1; },
       "v->knobs.softcap is -1"},
      {"NaN scale", [](V &v) { v.knobs.scale = NAN; }, "v->knobs.scale is"},
      {"infinite scale", [](V &v) { v.knobs.scale = INFINITY; },
       "expected a positive finite value"},
      {"e4m3 q", [](V &v) { v.knobs.fp8_query = 1; },
       "v->knobs.fp8_query is 1"},
  };
}

inline std::vector<BadVariant<attn_prefill_variant>> badPrefillVariants() {
  using V = attn_prefill_variant;
  return {
      {"negative heads", [](V &v) { v.num_q_heads = -32; },
       "v->num_q_heads is -32"},
      {"zero head dim", [](V &v) { v.head_dim = 0; },
       "v->head_dim 0 is not supported"},
      {"zero page size, paged",
       [](V &v) {
         v.paged = 1;
         v.page_size = 0;
       },
       "v->page_size 0 is not supported"},
      {"f32 cache",
       [](V &v) {
         v.paged = 1;
         v.kv_type = ATTN_DTYPE_F32;
       },
       "v->kv_type is f32; expected q_type (bf16), e4m3 or e5m2"},
      {"causal encoder", [](V &v) { v.knobs.kind = ATTN_KIND_ENCODER; },
       "v->knobs.causal is 1 with v->knobs.kind encoder"},
      {"paged encoder",
       [](V &v) {
         v.knobs.kind = ATTN_KIND_ENCODER;
         v.knobs.causal = 0;
         v.paged = 1;
       },
       "encoder attention has no KV cache"},
      {"window without causal",
       [](V &v) {
         v.knobs.window_left = 0;
         v.knobs.causal = 0;
       },
       "v->knobs.window_left is 0 with v->knobs.causal 0"},
      {"zero soft-cap is none, negative is wrong",
       [](V &v) { v.knobs.softcap = -0.5f; }, "v->knobs.softcap is -0.5"},
      {"FP8 compute over bf16", [](V &v) { v.fp8_compute = 1; },
       "v->fp8_compute is 1 with v->kv_type bf16"},
      {"e4m3 q without FP8 compute", [](V &v) { v.knobs.fp8_query = 1; },
       "v->knobs.fp8_query is 1: an e4m3 q needs v->fp8_compute"},
  };
}

inline std::vector<BadVariant<attn_append_kv_variant>> badAppendKVVariants() {
  using V = attn_append_kv_variant;
  return {
      {"f32 rows",
       [](V &v) {
         v.in_type = ATTN_DTYPE_F32;
         v.kv_type = ATTN_DTYPE_F32;
       },
       "v->in_type is f32; expected f16 or bf16"},
      {"f16 cache of bf16 rows", [](V &v) { v.kv_type = ATTN_DTYPE_F16; },
       "v->kv_type is f16; expected in_type (bf16)"},
      {"no KV heads", [](V &v) { v.num_kv_heads = 0; }, "v->num_kv_heads is 0"},
      {"odd head dim", [](V &v) { v.head_dim = 100; },
       "v->head_dim 100 is not supported"},
      {"negative page size", [](V &v) { v.page_size = -16; },
       "v->page_size -16 is not supported"},
  };
}

inline std::vector<BadVariant<attn_merge_states_variant>>
badMergeStatesVariants() {
  using V = attn_merge_states_variant;
  return {
      {"e4m3 outputs", [](V &v) { v.dtype = ATTN_DTYPE_E4M3; },
       "v->dtype is e4m3; expected f16, bf16 or f32"},
      {"no heads", [](V &v) { v.num_heads = 0; }, "v->num_heads is 0"},
      {"zero head dim", [](V &v) { v.head_dim = 0; },
       "v->head_dim 0 is not supported"},
  };
}

/// `call(v)` refuses each bad variant of `bad` (from `init`'s defaults),
/// naming the field in a message that starts with `function`.
template <class V>
void expectRefused(const char *function, void (*init)(V *),
                   const std::vector<BadVariant<V>> &bad,
                   const std::function<attn_status(const V &)> &call) {
  for (const BadVariant<V> &b : bad) {
    V v;
    init(&v);
    b.apply(v);
    EXPECT_EQ(call(v), ATTN_ERROR_INVALID_ARGUMENT)
        << function << ", " << b.change;
    EXPECT_EQ(lastError().rfind(std::string(function) + ": ", 0), 0u)
        << lastError();
    EXPECT_NE(lastError().find(b.message), std::string::npos)
        << function << ", " << b.change << ": " << lastError();
  }
}

/// Every key function refuses every bad variant.
inline void expectKeysRefuseBadVariants() {
  size_t length = 0;
  char buffer[8];
  for (auto [function, key] :
       {std::pair{"attn_decode_kernel_key", &attn_decode_kernel_key},
        std::pair{"attn_decode_variant_key", &attn_decode_variant_key}})
    expectRefused<attn_decode_variant>(
        function, attn_decode_variant_init, badDecodeVariants(),
        [&, key = key](const attn_decode_variant &v) {
          return key(&v, buffer, sizeof buffer, &length);
        });
  for (auto [function, key] :
       {std::pair{"attn_prefill_kernel_key", &attn_prefill_kernel_key},
        std::pair{"attn_prefill_variant_key", &attn_prefill_variant_key}})
    expectRefused<attn_prefill_variant>(
        function, attn_prefill_variant_init, badPrefillVariants(),
        [&, key = key](const attn_prefill_variant &v) {
          return key(&v, buffer, sizeof buffer, &length);
        });
  expectRefused<attn_append_kv_variant>(
      "attn_append_kv_kernel_key", attn_append_kv_variant_init,
      badAppendKVVariants(), [&](const attn_append_kv_variant &v) {
        return attn_append_kv_kernel_key(&v, nullptr, 0, &length);
      });
  expectRefused<attn_merge_states_variant>(
      "attn_merge_states_kernel_key", attn_merge_states_variant_init,
      badMergeStatesVariants(), [&](const attn_merge_states_variant &v) {
        return attn_merge_states_kernel_key(&v, nullptr, 0, &length);
      });
}

/// The edges of every range are variants.
inline void expectKeysTakeTheLimits() {
  size_t length = 0;
  attn_decode_variant d;
  attn_decode_variant_init(&d);
  d.num_q_heads = 1024;
  d.num_kv_heads = 8;
  d.head_dim = 256;
  d.page_size = 256;
  d.query_len = 16;
  d.knobs.window_left = 0;
  EXPECT_EQ(attn_decode_variant_key(&d, nullptr, 0, &length), ATTN_OK)
      << lastError();
  d.num_q_heads = 128;
  d.num_kv_heads = 1;
  d.head_dim = 32;
  d.page_size = 1;
  d.query_len = 1;
  d.knobs.kind = ATTN_KIND_CROSS;
  d.knobs.causal = 0;
  d.knobs.window_left = -5; // any negative: none
  EXPECT_EQ(attn_decode_variant_key(&d, nullptr, 0, &length), ATTN_OK)
      << lastError();
  attn_prefill_variant p;
  attn_prefill_variant_init(&p);
  p.kv_type = ATTN_DTYPE_E4M3;
  p.fp8_compute = 1;
  p.knobs.fp8_query = 1;
  p.knobs.kind = ATTN_KIND_ENCODER;
  p.knobs.causal = 0;
  p.page_size = 0; // ragged: no pages
  EXPECT_EQ(attn_prefill_variant_key(&p, nullptr, 0, &length), ATTN_OK)
      << lastError();
  attn_merge_states_variant m;
  attn_merge_states_variant_init(&m);
  m.dtype = ATTN_DTYPE_F16;
  m.num_heads = 1024;
  EXPECT_EQ(attn_merge_states_kernel_key(&m, nullptr, 0, &length), ATTN_OK)
      << lastError();
}

/// Counts whose arrays or buffers no memory holds are argument errors, found
/// before anything is read or allocated.
inline void expectCountsNoBufferHoldsAreRefused() {
  int64_t pairs[] = {0, 1, 1, 2};
  char src[64] = {}, dst[64] = {};
  EXPECT_EQ(
      attn_swap_blocks(src, 4, dst, 4, 16, pairs, int64_t(1) << 40, nullptr),
      ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "attn_swap_blocks: num_pairs is 1099511627776, more "
                         "than num_dst_pages (4): a destination page would "
                         "be written twice");
  EXPECT_EQ(attn_swap_blocks(src, 4, dst, 4, 16, pairs, -1, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "attn_swap_blocks: num_pairs is -1");
  EXPECT_EQ(
      attn_swap_blocks(src, int64_t(1) << 40, dst, 4, 16, pairs, 2, nullptr),
      ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("num_src_pages is 1099511627776; expected 0 to "
                             "2147483647"),
            std::string::npos)
      << lastError();
  EXPECT_EQ(attn_swap_blocks(src, 4, dst, -4, 16, pairs, 2, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("num_dst_pages is -4"), std::string::npos)
      << lastError();
  EXPECT_EQ(attn_swap_blocks(src, 4, dst, 1 << 30, int64_t(1) << 40, pairs, 2,
                             nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("num_dst_pages is 1073741824: 1073741824 pages "
                             "of 1099511627776 bytes are more than any "
                             "buffer holds"),
            std::string::npos)
      << lastError();

  // The builder's page tables: max_batch rows of max_pages_per_seq.
  attn_metadata_limits limits;
  ATTN_INIT(&limits);
  limits.page_size = 16;
  limits.max_batch = INT32_MAX;
  limits.max_tokens = 64;
  limits.max_pages_per_seq = INT32_MAX;
  attn_metadata_builder *builder = nullptr;
  EXPECT_EQ(attn_metadata_builder_create(&limits, &builder),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("limits->max_batch * limits->max_pages_per_seq "
                             "is 4611686014132420609"),
            std::string::npos)
      << lastError();
  EXPECT_EQ(builder, nullptr);
}

} // namespace attn_capi_test

#endif // ATTN_TEST_UNIT_CAPI_CAPICHECKS_H
