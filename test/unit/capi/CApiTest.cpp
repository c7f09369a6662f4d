//===- CApiTest.cpp - attn_c.h through libattn_c.so -----------------------===//
//
// Linked to the shared library a C host (or ctypes) loads, so these calls go
// through the exported symbols only. The C++ structs of spec/Variant.h are
// read for their defaults (header-only; nothing of the C++ API is linked).
// No GPU: kernel creation must fail cleanly here.
//
//===----------------------------------------------------------------------===//
#include "attn_c.h"

#include "spec/Variant.h"
#include "test/unit/capi/CApiChecks.h"

#include <gtest/gtest.h>

#include <atomic>
#include <climits>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string lastError() { return attn_last_error(); }

/// attn_dtype as the C++ ScalarType, written out here (not the library's
/// mapping) so that a wrong mapping in the library fails the tests.
attn::ScalarType cxx(attn_dtype t) {
  switch (t) {
  case ATTN_DTYPE_F16:
    return attn::ScalarType::F16;
  case ATTN_DTYPE_BF16:
    return attn::ScalarType::BF16;
  case ATTN_DTYPE_F32:
    return attn::ScalarType::F32;
  case ATTN_DTYPE_E4M3:
    return attn::ScalarType::F8E4M3;
  case ATTN_DTYPE_E5M2:
    return attn::ScalarType::F8E5M2;
  }
  ADD_FAILURE() << "bad dtype " << int(t);
  return attn::ScalarType::F32;
}
attn::KVLayout cxx(attn_layout l) {
  return l == ATTN_LAYOUT_NHD ? attn::KVLayout::NHD : attn::KVLayout::HND;
}
attn::AttentionKind cxx(attn_kind k) {
  return k == ATTN_KIND_DECODER   ? attn::AttentionKind::Decoder
         : k == ATTN_KIND_ENCODER ? attn::AttentionKind::Encoder
                                  : attn::AttentionKind::Cross;
}

void expectKnobDefaults(const attn_knobs &c, const attn::AttentionKnobs &d) {
  EXPECT_EQ(cxx(c.kind), d.kind);
  EXPECT_EQ(c.causal != 0, d.causal);
  EXPECT_EQ(c.window_left < 0, !d.windowLeft.has_value());
  EXPECT_EQ(c.softcap == 0, !d.softcap.has_value());
  EXPECT_EQ(c.scale == 0, !d.scale.has_value());
  EXPECT_EQ(c.alibi != 0, d.alibi);
  EXPECT_EQ(c.sinks != 0, d.sinks);
  EXPECT_EQ(c.fp8_query != 0, d.fp8Query);
  EXPECT_EQ(c.write_lse != 0, d.writeLse);
  EXPECT_EQ(c.batch_invariant != 0, d.batchInvariant);
  EXPECT_EQ(c.score_mod == nullptr, d.scoreMod.empty());
  EXPECT_EQ(c.mask_mod == nullptr, d.maskMod.empty());
}

template <class V, class Fn> std::string keyOf(Fn fn, const V &v) {
  size_t length = 0;
  EXPECT_EQ(fn(&v, nullptr, 0, &length), ATTN_OK) << lastError();
  std::string key(length, '\0');
  EXPECT_EQ(fn(&v, key.data(), length + 1, &length), ATTN_OK) << lastError();
  return key;
}

constexpr const char *kScoreMod = R"({
^bb0(%score: f32, %request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32):
  %cap = arith.constant 30.0 : f32
  %x = arith.divf %score, %cap : f32
  %t = math.tanh %x : f32
  %y = arith.mulf %t, %cap : f32
  attn.yield %y : f32
})";

constexpr const char *kMaskMod = R"({
^bb0(%request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32):
  %c = arith.constant 256 : i32
  %a = arith.divsi %q_pos, %c : i32
  %b = arith.divsi %k_pos, %c : i32
  %same = arith.cmpi eq, %a, %b : i32
  attn.yield %same : i1
})";

//===--- Queries ----------------------------------------------------------===//

TEST(CApiQueries, VersionApiArchs) {
  EXPECT_STREQ(attn_version(), ATTN_TEST_VERSION);
  EXPECT_EQ(attn_c_api_version(), ATTN_C_API_VERSION);
  EXPECT_EQ(attn_has_compiler(), 1);
  EXPECT_STREQ(attn_supported_archs(), "sm_80,sm_89,sm_90a");
}

TEST(CApiQueries, HeadSizes) {
  int count = 0;
  ASSERT_EQ(attn_supported_head_sizes(nullptr, 0, &count), ATTN_OK);
  // Every multiple of 8 from 32 to 256 (KVCache.h).
  ASSERT_EQ(count, (256 - 32) / 8 + 1);
  std::vector<int> sizes(count + 2, -1);
  ASSERT_EQ(attn_supported_head_sizes(sizes.data(), count + 2, &count),
            ATTN_OK);
  EXPECT_EQ(sizes[0], 32);
  EXPECT_EQ(sizes[count - 1], 256);
  EXPECT_EQ(sizes[count], -1); // nothing past the count is written
  for (int i = 1; i < count; ++i)
    EXPECT_LT(sizes[i - 1], sizes[i]);
  // A short buffer gets the first ones and the full count.
  int two[2] = {0, 0};
  ASSERT_EQ(attn_supported_head_sizes(two, 2, &count), ATTN_OK);
  EXPECT_EQ(two[0], 32);
  EXPECT_EQ(two[1], 40);
  EXPECT_EQ(count, 29);
  EXPECT_EQ(attn_supported_head_sizes(two, 2, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("attn_supported_head_sizes: count is null"),
            std::string::npos)
      << lastError();
  EXPECT_EQ(attn_supported_head_sizes(nullptr, 4, &count),
            ATTN_ERROR_INVALID_ARGUMENT);
}

TEST(CApiQueries, KVCacheShape) {
  int64_t shape[5] = {};
  ASSERT_EQ(attn_kv_cache_shape(100, 16, 8, 128, ATTN_LAYOUT_NHD, shape),
            ATTN_OK);
  EXPECT_EQ(std::vector<int64_t>(shape, shape + 5),
            (std::vector<int64_t>{2, 100, 16, 8, 128}));
  ASSERT_EQ(attn_kv_cache_shape(100, 16, 8, 128, ATTN_LAYOUT_HND, shape),
            ATTN_OK);
  EXPECT_EQ(std::vector<int64_t>(shape, shape + 5),
            (std::vector<int64_t>{2, 100, 8, 16, 128}));

  auto errorOf = [&](int64_t pages, int pageSize, int heads, int dim,
                     int layout) {
    EXPECT_EQ(attn_kv_cache_shape(pages, pageSize, heads, dim,
                                  attn_layout(layout), shape),
              ATTN_ERROR_INVALID_ARGUMENT);
    return lastError();
  };
  EXPECT_NE(errorOf(0, 16, 8, 128, 0).find("numPages"), std::string::npos);
  EXPECT_NE(errorOf(10, 0, 8, 128, 0).find("page size 0"), std::string::npos)
      << lastError();
  EXPECT_NE(errorOf(10, 512, 8, 128, 0).find("page size 512"),
            std::string::npos);
  EXPECT_NE(errorOf(10, 16, 8, 100, 0).find("100"), std::string::npos);
  EXPECT_NE(errorOf(10, 16, 0, 128, 0).find("numKVHeads"), std::string::npos)
      << lastError();
  EXPECT_NE(errorOf(10, 16, 8, 128, 2).find("layout is 2, not an attn_layout"),
            std::string::npos);
  EXPECT_EQ(attn_kv_cache_shape(10, 16, 8, 128, ATTN_LAYOUT_NHD, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("attn_kv_cache_shape: shape is null"),
            std::string::npos);
}

//===--- Defaults and conversions -----------------------------------------===//

TEST(CApiVariants, InitDefaultsAreTheCxxDefaults) {
  attn_decode_variant d;
  std::memset(&d, 0xab, sizeof d);
  attn_decode_variant_init(&d);
  const attn::DecodeVariant dc;
  EXPECT_EQ(d.struct_size, sizeof(attn_decode_variant));
  expectKnobDefaults(d.knobs, dc);
  EXPECT_EQ(cxx(d.q_type), dc.qType);
  EXPECT_EQ(cxx(d.kv_type), dc.kvType);
  EXPECT_EQ(d.num_q_heads, dc.numQHeads);
  EXPECT_EQ(d.num_kv_heads, dc.numKVHeads);
  EXPECT_EQ(d.head_dim, dc.headDim);
  EXPECT_EQ(d.page_size, dc.pageSize);
  EXPECT_EQ(cxx(d.layout), dc.layout);
  EXPECT_EQ(d.query_len, dc.queryLen);
  EXPECT_EQ(d.per_head_kv_scale != 0, dc.perHeadKVScale);

  attn_prefill_variant p;
  std::memset(&p, 0xab, sizeof p);
  attn_prefill_variant_init(&p);
  const attn::PrefillVariant pc;
  const attn::PagedKVFormat paged;
  EXPECT_EQ(p.struct_size, sizeof(attn_prefill_variant));
  expectKnobDefaults(p.knobs, pc);
  EXPECT_EQ(cxx(p.q_type), pc.qType);
  EXPECT_EQ(p.num_q_heads, pc.numQHeads);
  EXPECT_EQ(p.num_kv_heads, pc.numKVHeads);
  EXPECT_EQ(p.head_dim, pc.headDim);
  EXPECT_EQ(p.paged != 0, pc.paged.has_value());
  EXPECT_FALSE(pc.fp8KV.has_value());
  EXPECT_EQ(cxx(p.kv_type), paged.kvType);
  EXPECT_EQ(p.page_size, paged.pageSize);
  EXPECT_EQ(cxx(p.layout), paged.layout);
  EXPECT_EQ(p.per_head_kv_scale != 0, paged.perHeadKVScale);
  EXPECT_EQ(p.fp8_compute != 0, pc.fp8Compute);
  EXPECT_EQ(p.rope_dim, pc.ropeDim);

  attn_append_kv_variant a;
  std::memset(&a, 0xab, sizeof a);
  attn_append_kv_variant_init(&a);
  const attn::AppendKVVariant ac;
  EXPECT_EQ(a.struct_size, sizeof(attn_append_kv_variant));
  EXPECT_EQ(cxx(a.in_type), ac.inType);
  EXPECT_EQ(cxx(a.kv_type), ac.kvType);
  EXPECT_EQ(a.num_kv_heads, ac.numKVHeads);
  EXPECT_EQ(a.head_dim, ac.headDim);
  EXPECT_EQ(a.page_size, ac.pageSize);
  EXPECT_EQ(cxx(a.layout), ac.layout);
  EXPECT_EQ(a.per_head_kv_scale != 0, ac.perHeadKVScale);

  attn_merge_states_variant m;
  std::memset(&m, 0xab, sizeof m);
  attn_merge_states_variant_init(&m);
  const attn::MergeStatesVariant mc;
  EXPECT_EQ(m.struct_size, sizeof(attn_merge_states_variant));
  EXPECT_EQ(cxx(m.dtype), mc.dtype);
  EXPECT_EQ(m.num_heads, mc.numHeads);
  EXPECT_EQ(m.head_dim, mc.headDim);
}

/// Each change must reach the C++ variant: its variant key (the kernel key
/// plus launch values) differs from the default's.
template <class V>
void expectEveryChangeChangesTheKey(
    const char *what, void (*init)(V *),
    attn_status (*key)(const V *, char *, size_t, size_t *),
    const std::vector<std::pair<const char *, std::function<void(V &)>>>
        &changes) {
  V base;
  init(&base);
  const std::string baseKey = keyOf(key, base);
  ASSERT_FALSE(baseKey.empty());
  for (const auto &[name, change] : changes) {
    V v;
    init(&v);
    change(v);
    EXPECT_NE(keyOf(key, v), baseKey) << what << ": " << name << " is dropped";
  }
}

TEST(CApiVariants, EveryDecodeKnobReachesTheKey) {
  using V = attn_decode_variant;
  expectEveryChangeChangesTheKey<V>(
      "decode", attn_decode_variant_init, attn_decode_variant_key,
      {{"causal", [](V &v) { v.knobs.causal = 0; }},
       {"window_left", [](V &v) { v.knobs.window_left = 64; }},
       {"softcap", [](V &v) { v.knobs.softcap = 30; }},
       {"scale", [](V &v) { v.knobs.scale = 0.125f; }},
       {"alibi", [](V &v) { v.knobs.alibi = 1; }},
       {"sinks", [](V &v) { v.knobs.sinks = 1; }},
       {"write_lse", [](V &v) { v.knobs.write_lse = 1; }},
       {"batch_invariant", [](V &v) { v.knobs.batch_invariant = 1; }},
       {"score_mod", [](V &v) { v.knobs.score_mod = kScoreMod; }},
       {"mask_mod", [](V &v) { v.knobs.mask_mod = kMaskMod; }},
       {"q_type",
        [](V &v) {
          v.q_type = ATTN_DTYPE_F16;
          v.kv_type = ATTN_DTYPE_F16;
        }},
       {"kv_type", [](V &v) { v.kv_type = ATTN_DTYPE_E4M3; }},
       {"num_q_heads", [](V &v) { v.num_q_heads = 16; }},
       {"num_kv_heads", [](V &v) { v.num_kv_heads = 4; }},
       {"head_dim", [](V &v) { v.head_dim = 64; }},
       {"page_size", [](V &v) { v.page_size = 32; }},
       {"layout", [](V &v) { v.layout = ATTN_LAYOUT_HND; }},
       {"query_len", [](V &v) { v.query_len = 2; }},
       {"per_head_kv_scale", [](V &v) { v.per_head_kv_scale = 1; }}});
  // Cross attention is not causal. (fp8_query is prefill's: decode refuses
  // it, CApiVariants.BadVariantsAreRefusedEverywhere.)
  expectEveryChangeChangesTheKey<V>(
      "non-causal decode",
      [](V *v) {
        attn_decode_variant_init(v);
        v->knobs.causal = 0;
      },
      attn_decode_variant_key,
      {{"kind", [](V &v) { v.knobs.kind = ATTN_KIND_CROSS; }}});
  // The window's size and the soft-cap's and scale's values are launch
  // values: the kernel key holds only whether there is one.
  attn_decode_variant a, b;
  attn_decode_variant_init(&a);
  attn_decode_variant_init(&b);
  a.knobs.window_left = 64;
  b.knobs.window_left = 128;
  EXPECT_EQ(keyOf(attn_decode_kernel_key, a), keyOf(attn_decode_kernel_key, b));
  EXPECT_NE(keyOf(attn_decode_variant_key, a),
            keyOf(attn_decode_variant_key, b));
}

TEST(CApiVariants, EveryPrefillKnobReachesTheKey) {
  using V = attn_prefill_variant;
  expectEveryChangeChangesTheKey<V>(
      "prefill", attn_prefill_variant_init, attn_prefill_variant_key,
      {{"causal", [](V &v) { v.knobs.causal = 0; }},
       {"window_left", [](V &v) { v.knobs.window_left = 0; }},
       {"softcap", [](V &v) { v.knobs.softcap = 50; }},
       {"scale", [](V &v) { v.knobs.scale = 2; }},
       {"alibi", [](V &v) { v.knobs.alibi = 1; }},
       {"sinks", [](V &v) { v.knobs.sinks = 1; }},
       {"write_lse", [](V &v) { v.knobs.write_lse = 1; }},
       {"batch_invariant", [](V &v) { v.knobs.batch_invariant = 1; }},
       {"score_mod", [](V &v) { v.knobs.score_mod = kScoreMod; }},
       {"mask_mod", [](V &v) { v.knobs.mask_mod = kMaskMod; }},
       {"q_type",
        [](V &v) {
          v.q_type = ATTN_DTYPE_F16;
          v.kv_type = ATTN_DTYPE_F16;
        }},
       {"num_q_heads", [](V &v) { v.num_q_heads = 8; }},
       {"num_kv_heads", [](V &v) { v.num_kv_heads = 2; }},
       {"head_dim", [](V &v) { v.head_dim = 256; }},
       {"rope_dim", [](V &v) { v.rope_dim = 64; }},
       {"paged", [](V &v) { v.paged = 1; }},
       {"kv_type (ragged FP8 rows)", [](V &v) { v.kv_type = ATTN_DTYPE_E5M2; }},
       {"per_head_kv_scale (ragged FP8 rows)", [](V &v) {
          v.kv_type = ATTN_DTYPE_E4M3;
          v.per_head_kv_scale = 1;
        }}});
  // Knobs that need others: a bidirectional encoder, FP8 compute over FP8
  // rows and an e4m3 q with it.
  expectEveryChangeChangesTheKey<V>(
      "non-causal prefill",
      [](V *v) {
        attn_prefill_variant_init(v);
        v->knobs.causal = 0;
      },
      attn_prefill_variant_key,
      {{"kind", [](V &v) { v.knobs.kind = ATTN_KIND_ENCODER; }}});
  expectEveryChangeChangesTheKey<V>(
      "prefill over FP8 rows",
      [](V *v) {
        attn_prefill_variant_init(v);
        v->kv_type = ATTN_DTYPE_E4M3;
      },
      attn_prefill_variant_key,
      {{"fp8_compute", [](V &v) { v.fp8_compute = 1; }}});
  expectEveryChangeChangesTheKey<V>(
      "FP8 compute prefill",
      [](V *v) {
        attn_prefill_variant_init(v);
        v->kv_type = ATTN_DTYPE_E4M3;
        v->fp8_compute = 1;
      },
      attn_prefill_variant_key,
      {{"fp8_query", [](V &v) { v.knobs.fp8_query = 1; }}});
  // The cache's fields, against a paged base.
  expectEveryChangeChangesTheKey<V>(
      "paged prefill",
      [](V *v) {
        attn_prefill_variant_init(v);
        v->paged = 1;
      },
      attn_prefill_variant_key,
      {{"kv_type", [](V &v) { v.kv_type = ATTN_DTYPE_E4M3; }},
       {"page_size", [](V &v) { v.page_size = 64; }},
       {"layout", [](V &v) { v.layout = ATTN_LAYOUT_HND; }},
       {"per_head_kv_scale", [](V &v) { v.per_head_kv_scale = 1; }}});
  // FP8 rows scaled per tensor and per head are other kernels.
  V perTensor, perHead;
  attn_prefill_variant_init(&perTensor);
  perTensor.kv_type = ATTN_DTYPE_E4M3;
  perHead = perTensor;
  perHead.per_head_kv_scale = 1;
  EXPECT_NE(keyOf(attn_prefill_kernel_key, perTensor),
            keyOf(attn_prefill_kernel_key, perHead));
}

TEST(CApiVariants, EveryAppendAndMergeFieldReachesTheKey) {
  using A = attn_append_kv_variant;
  expectEveryChangeChangesTheKey<A>(
      "append_kv", attn_append_kv_variant_init, attn_append_kv_kernel_key,
      {{"in_type",
        [](A &v) {
          v.in_type = ATTN_DTYPE_F16;
          v.kv_type = ATTN_DTYPE_F16;
        }},
       {"kv_type", [](A &v) { v.kv_type = ATTN_DTYPE_E4M3; }},
       {"num_kv_heads", [](A &v) { v.num_kv_heads = 1; }},
       {"head_dim", [](A &v) { v.head_dim = 64; }},
       {"page_size", [](A &v) { v.page_size = 32; }},
       {"layout", [](A &v) { v.layout = ATTN_LAYOUT_HND; }},
       {"per_head_kv_scale", [](A &v) { v.per_head_kv_scale = 1; }}});
  using M = attn_merge_states_variant;
  expectEveryChangeChangesTheKey<M>(
      "merge_states", attn_merge_states_variant_init,
      attn_merge_states_kernel_key,
      {{"dtype", [](M &v) { v.dtype = ATTN_DTYPE_BF16; }},
       {"num_heads", [](M &v) { v.num_heads = 4; }},
       {"head_dim", [](M &v) { v.head_dim = 64; }}});
}

TEST(CApiVariants, EveryMlaDecodeFieldReachesTheKey) {
  using V = attn_mla_decode_variant;
  expectEveryChangeChangesTheKey<V>(
      "mla_decode", attn_mla_decode_variant_init, attn_mla_decode_kernel_key,
      {{"q_type",
        [](V &v) {
          v.q_type = ATTN_DTYPE_F16;
          v.kv_type = ATTN_DTYPE_F16;
        }},
       {"kv_type", [](V &v) { v.kv_type = ATTN_DTYPE_E4M3; }},
       {"num_q_heads", [](V &v) { v.num_q_heads = 128; }},
       {"kv_lora_rank", [](V &v) { v.kv_lora_rank = 256; }},
       {"rope_dim", [](V &v) { v.rope_dim = 0; }},
       {"page_size", [](V &v) { v.page_size = 1; }},
       {"query_len",
        [](V &v) {
          v.query_len = 2;
          v.causal = 1;
        }},
       {"write_lse", [](V &v) { v.write_lse = 1; }},
       {"batch_invariant", [](V &v) { v.batch_invariant = 1; }}});
  attn_mla_decode_variant v;
  attn_mla_decode_variant_init(&v);
  EXPECT_EQ(v.num_q_heads, 16);
  EXPECT_EQ(v.kv_lora_rank, 512);
  EXPECT_EQ(v.rope_dim, 64);
  EXPECT_EQ(v.page_size, 64);
  char key[512];
  size_t length = 0;
  auto refused = [&](const char *what) {
    EXPECT_EQ(attn_mla_decode_kernel_key(&v, key, sizeof key, &length),
              ATTN_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(lastError().find(what), std::string::npos) << lastError();
    attn_mla_decode_variant_init(&v);
  };
  v.kv_lora_rank = 500;
  refused("v->kv_lora_rank is 500");
  v.rope_dim = 32;
  refused("v->rope_dim is 32");
  v.kv_type = ATTN_DTYPE_E5M2;
  refused("v->kv_type is e5m2");
  v.num_q_heads = 129;
  refused("v->num_q_heads");
  v.causal = 1;
  refused("v->causal is 1 with v->query_len 1");
  v.scale = -1.f;
  refused("v->scale is -1");
}

TEST(CApiVariants, KeyBufferContract) {
  attn_decode_variant v;
  attn_decode_variant_init(&v);
  size_t length = 0;
  ASSERT_EQ(attn_decode_kernel_key(&v, nullptr, 0, &length), ATTN_OK);
  ASSERT_GT(length, 8u);
  // A short buffer gets a NUL-terminated prefix and the full length.
  char small[8];
  size_t again = 0;
  ASSERT_EQ(attn_decode_kernel_key(&v, small, sizeof small, &again), ATTN_OK);
  EXPECT_EQ(again, length);
  EXPECT_EQ(std::strlen(small), 7u);
  EXPECT_EQ(std::string(small), keyOf(attn_decode_kernel_key, v).substr(0, 7));
  EXPECT_EQ(attn_decode_kernel_key(&v, small, sizeof small, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(attn_decode_kernel_key(&v, nullptr, 4, &length),
            ATTN_ERROR_INVALID_ARGUMENT);
}

//===--- Argument errors --------------------------------------------------===//

TEST(CApiErrors, NullAndStructSize) {
  size_t length = 0;
  EXPECT_EQ(attn_decode_kernel_key(nullptr, nullptr, 0, &length),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "attn_decode_kernel_key: v is null");

  attn_decode_variant v;
  attn_decode_variant_init(&v);
  v.struct_size = 0;
  EXPECT_EQ(attn_decode_kernel_key(&v, nullptr, 0, &length),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("v->struct_size is 0"), std::string::npos)
      << lastError();
  EXPECT_NE(lastError().find("ATTN_INIT"), std::string::npos);
  v.struct_size = sizeof(attn_decode_variant) - 4;
  EXPECT_EQ(attn_compile_decode(&v, "sm_80", nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("attn_compile_decode: out is null"),
            std::string::npos)
      << lastError();
  attn_compiled *compiled = reinterpret_cast<attn_compiled *>(1);
  EXPECT_EQ(attn_compile_decode(&v, "sm_80", &compiled),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(compiled, nullptr); // out is cleared on failure
  EXPECT_NE(lastError().find("smaller than"), std::string::npos) << lastError();
  // A newer, larger struct is accepted.
  struct Bigger {
    attn_decode_variant v;
    int64_t newField;
  } bigger;
  attn_decode_variant_init(&bigger.v);
  bigger.v.struct_size = sizeof bigger;
  EXPECT_EQ(attn_decode_kernel_key(&bigger.v, nullptr, 0, &length), ATTN_OK)
      << lastError();

  attn_prefill_variant p;
  attn_prefill_variant_init(&p);
  p.struct_size = 3;
  EXPECT_EQ(attn_prefill_kernel_key(&p, nullptr, 0, &length),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("attn_prefill_kernel_key: v->struct_size is 3"),
            std::string::npos)
      << lastError();

  // Run calls check their handle and arguments before anything else.
  attn_decode_args args;
  ATTN_INIT(&args);
  EXPECT_EQ(attn_decode_run(nullptr, &args, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "attn_decode_run: decode is null");
  EXPECT_EQ(attn_prefill_run(nullptr, nullptr, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(attn_decode_plan(nullptr, nullptr, 0, 0, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(attn_cascade_run(nullptr, nullptr, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(attn_mixed_batch_plan(nullptr, nullptr, nullptr, 0, 0, 0, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(attn_advance_step(nullptr, nullptr, nullptr, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(attn_metadata_builder_create(nullptr, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "attn_metadata_builder_create: out is null");
  attn_metadata_builder *builder = nullptr;
  EXPECT_EQ(attn_metadata_builder_create(nullptr, &builder),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "attn_metadata_builder_create: limits is null");
  attn_metadata_limits limits;
  ATTN_INIT(&limits);
  limits.page_size = 16;
  limits.max_batch = 0;
  limits.max_tokens = 64;
  limits.max_pages_per_seq = 8;
  EXPECT_EQ(attn_metadata_builder_create(&limits, &builder),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("maxBatch"), std::string::npos) << lastError();

  // Destroying NULL is a no-op (CApiHandles: every destroy).
  EXPECT_EQ(attn_decode_destroy(nullptr), ATTN_OK);
  attn_decode_variant_init(nullptr);
}

TEST(CApiErrors, EnumsOutOfRange) {
  size_t length = 0;
  attn_decode_variant v;
  attn_decode_variant_init(&v);
  v.q_type = attn_dtype(9);
  EXPECT_EQ(attn_decode_kernel_key(&v, nullptr, 0, &length),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(),
            "attn_decode_kernel_key: v->q_type is 9, not an attn_dtype");
  attn_decode_variant_init(&v);
  v.layout = attn_layout(-1);
  EXPECT_EQ(attn_decode_kernel_key(&v, nullptr, 0, &length),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("v->layout is -1"), std::string::npos);
  attn_decode_variant_init(&v);
  v.knobs.kind = attn_kind(3);
  EXPECT_EQ(attn_decode_kernel_key(&v, nullptr, 0, &length),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("v->knobs.kind is 3, not an attn_kind"),
            std::string::npos);

  attn_prefill_variant p;
  attn_prefill_variant_init(&p);
  p.kv_type = ATTN_DTYPE_F16; // ragged rows: q_type (bf16) or FP8
  EXPECT_EQ(attn_prefill_kernel_key(&p, nullptr, 0, &length),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("v->kv_type is f16"), std::string::npos)
      << lastError();
  attn_append_kv_variant a;
  attn_append_kv_variant_init(&a);
  a.in_type = attn_dtype(5);
  EXPECT_EQ(attn_append_kv_kernel_key(&a, nullptr, 0, &length),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("v->in_type is 5"), std::string::npos);
}

TEST(CApiErrors, LastErrorIsClearedAndThreadLocal) {
  size_t length = 0;
  EXPECT_EQ(attn_decode_kernel_key(nullptr, nullptr, 0, &length),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_FALSE(lastError().empty());
  attn_decode_variant v;
  attn_decode_variant_init(&v);
  EXPECT_EQ(attn_decode_kernel_key(&v, nullptr, 0, &length), ATTN_OK);
  EXPECT_EQ(lastError(), "");

  // Another thread's failure is not this thread's message, nor the reverse.
  std::string other;
  std::thread thread([&] {
    attn_kv_cache_shape(0, 16, 8, 128, ATTN_LAYOUT_NHD, nullptr);
    other = attn_last_error();
  });
  thread.join();
  EXPECT_NE(other.find("attn_kv_cache_shape"), std::string::npos);
  EXPECT_EQ(lastError(), "");
  EXPECT_EQ(attn_decode_kernel_key(nullptr, nullptr, 0, &length),
            ATTN_ERROR_INVALID_ARGUMENT);
  std::thread clean([&] { other = attn_last_error(); });
  clean.join();
  EXPECT_EQ(other, "");
}

//===--- Compiling without a GPU ------------------------------------------===//

class CApiCompile : public ::testing::TestWithParam<const char *> {};

TEST_P(CApiCompile, DecodeWithScoreModAndSinks) {
  attn_decode_variant v;
  attn_decode_variant_init(&v);
  v.num_q_heads = 8;
  v.num_kv_heads = 2;
  v.knobs.score_mod = kScoreMod;
  v.knobs.sinks = 1;
  attn_compiled *compiled = nullptr;
  ASSERT_EQ(attn_compile_decode(&v, GetParam(), &compiled), ATTN_OK)
      << lastError();
  EXPECT_EQ(lastError(), "");
  std::string name = attn_compiled_kernel_name(compiled);
  EXPECT_EQ(name.rfind("attn_decode_", 0), 0u) << name;
  EXPECT_NE(name.find("sinks"), std::string::npos) << name;
  EXPECT_NE(std::string(attn_compiled_source(compiled)).find(name),
            std::string::npos);
  // The region reached the generated source.
  EXPECT_NE(std::string(attn_compiled_source(compiled)).find("tanh"),
            std::string::npos);
  EXPECT_GT(attn_compiled_cubin_size(compiled), 0u);
  attn_compiled_destroy(compiled);
}

TEST_P(CApiCompile, RaggedAndPagedPrefill) {
  attn_prefill_variant v;
  attn_prefill_variant_init(&v);
  v.num_q_heads = 8;
  v.num_kv_heads = 2;
  v.knobs.mask_mod = kMaskMod;
  for (int paged : {0, 1}) {
    v.paged = paged;
    attn_compiled *compiled = nullptr;
    ASSERT_EQ(attn_compile_prefill(&v, GetParam(), &compiled), ATTN_OK)
        << lastError();
    std::string name = attn_compiled_kernel_name(compiled);
    EXPECT_EQ(name.find(paged ? "attn_paged_prefill" : "attn_prefill"), 0u)
        << name;
    EXPECT_FALSE(std::string(attn_compiled_source(compiled)).empty());
    EXPECT_GT(attn_compiled_cubin_size(compiled), 0u);
    attn_compiled_destroy(compiled);
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, CApiCompile,
                         ::testing::Values("sm_80", "sm_89", "sm_90a"));

TEST(CApiCompileErrors, BadVariantsAndArchs) {
  attn_decode_variant v;
  attn_decode_variant_init(&v);
  attn_compiled *compiled = nullptr;
  EXPECT_EQ(attn_compile_decode(&v, "sm_75", &compiled),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "attn_compile_decode: arch \"sm_75\" is not an arch "
                         "attn targets (sm_80,sm_89,sm_90a)");
  EXPECT_EQ(attn_compile_decode(&v, nullptr, &compiled),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "attn_compile_decode: arch is null");

  v.head_dim = 0;
  EXPECT_EQ(attn_compile_decode(&v, "sm_90a", &compiled),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("head_dim 0"), std::string::npos) << lastError();
  EXPECT_EQ(compiled, nullptr);

  attn_decode_variant_init(&v);
  v.knobs.score_mod = "{ ^bb0(%s: f32): attn.yield %undefined : f32 }";
  attn_status status = attn_compile_decode(&v, "sm_90a", &compiled);
  EXPECT_TRUE(status == ATTN_ERROR_COMPILE ||
              status == ATTN_ERROR_INVALID_ARGUMENT)
      << status;
  EXPECT_NE(lastError().find("score_mod"), std::string::npos) << lastError();
  EXPECT_NE(lastError().find("undeclared SSA value"), std::string::npos)
      << lastError();

  attn_prefill_variant p;
  attn_prefill_variant_init(&p);
  p.knobs.mask_mod = "{ not ir";
  EXPECT_NE(attn_compile_prefill(&p, "sm_80", &compiled), ATTN_OK);
  EXPECT_NE(lastError().find("attn_compile_prefill: "), std::string::npos);
  EXPECT_NE(lastError().find("mask_mod"), std::string::npos) << lastError();
}

//===--- Contexts and kernels without a GPU -------------------------------===//

TEST(CApiContext, JitOptions) {
  attn_context *context = nullptr;
  ASSERT_EQ(attn_context_create_jit(nullptr, &context), ATTN_OK) << lastError();
  attn_context_destroy(context);

  attn_jit_options options;
  ATTN_INIT(&options);
  options.arch = "sm_90a";
  std::string dir = ::testing::TempDir() + "/attn-capi-cache";
  options.cache_dir = dir.c_str();
  ASSERT_EQ(attn_context_create_jit(&options, &context), ATTN_OK)
      << lastError();
  attn_context_destroy(context);

  options.arch = "sm_90";
  context = reinterpret_cast<attn_context *>(1);
  EXPECT_EQ(attn_context_create_jit(&options, &context),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(context, nullptr);
  EXPECT_NE(lastError().find("options->arch \"sm_90\""), std::string::npos)
      << lastError();
  options.arch = nullptr;
  options.struct_size = 4;
  EXPECT_EQ(attn_context_create_jit(&options, &context),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("options->struct_size is 4"), std::string::npos);
  EXPECT_EQ(attn_context_create_jit(nullptr, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
}

TEST(CApiContext, AotLibraryThatIsNotThere) {
  attn_context *context = nullptr;
  EXPECT_EQ(attn_context_create_aot("/nonexistent/attn-kernels", &context),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(context, nullptr);
  EXPECT_NE(lastError().find("/nonexistent/attn-kernels"), std::string::npos)
      << lastError();
  EXPECT_EQ(attn_context_create_aot(nullptr, &context),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "attn_context_create_aot: library_path is null");
}

/// Without a GPU every kernel handle fails as a CUDA error naming the
/// driver; with one (a GPU host running these tests) it succeeds.
void expectNoGpuFailure(attn_status status, const char *function) {
  if (status == ATTN_OK)
    return;
  EXPECT_TRUE(status == ATTN_ERROR_CUDA || status == ATTN_ERROR_UNSUPPORTED)
      << function << ": " << status << " " << lastError();
  EXPECT_EQ(lastError().rfind(function, 0), 0u) << lastError();
  EXPECT_NE(lastError().find("CUDA"), std::string::npos) << lastError();
}

TEST(CApiContext, KernelsWithoutAGpuFailCleanly) {
  attn_jit_options options;
  ATTN_INIT(&options);
  options.arch = "sm_90a"; // so the failure is loading, not finding a device
  attn_context *context = nullptr;
  ASSERT_EQ(attn_context_create_jit(&options, &context), ATTN_OK);

  attn_decode_variant d;
  attn_decode_variant_init(&d);
  d.num_q_heads = 8;
  d.num_kv_heads = 2;
  attn_decode *decode = nullptr;
  // Argument errors come first, GPU or not.
  EXPECT_EQ(attn_decode_create(context, &d, 0, &decode),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "attn_decode_create: max_batch is 0");
  EXPECT_EQ(attn_decode_create(nullptr, &d, 4, &decode),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "attn_decode_create: context is null");
  d.head_dim = 0;
  EXPECT_EQ(attn_decode_create(context, &d, 4, &decode),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("head_dim 0"), std::string::npos) << lastError();
  d.head_dim = 128;

  expectNoGpuFailure(attn_decode_create(context, &d, 4, &decode),
                     "attn_decode_create");
  attn_decode_destroy(decode);

  attn_prefill_variant p;
  attn_prefill_variant_init(&p);
  p.num_q_heads = 8;
  p.num_kv_heads = 2;
  attn_prefill *prefill = nullptr;
  expectNoGpuFailure(attn_prefill_create(context, &p, 4, 256, &prefill),
                     "attn_prefill_create");
  attn_prefill_destroy(prefill);
  attn_mixed_batch *mixed = nullptr;
  EXPECT_EQ(attn_mixed_batch_create(context, &p, 4, 256, &mixed),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("v->paged is 0"), std::string::npos);
  p.paged = 1;
  expectNoGpuFailure(attn_mixed_batch_create(context, &p, 4, 256, &mixed),
                     "attn_mixed_batch_create");
  attn_mixed_batch_destroy(mixed);

  attn_mla_decode_variant mv;
  attn_mla_decode_variant_init(&mv);
  attn_mla_decode *mla = nullptr;
  EXPECT_EQ(attn_mla_decode_create(context, &mv, 0, &mla),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "attn_mla_decode_create: max_batch is 0");
  expectNoGpuFailure(attn_mla_decode_create(context, &mv, 4, &mla),
                     "attn_mla_decode_create");
  attn_mla_decode_destroy(mla);

  attn_cascade *cascade = nullptr;
  d.knobs.alibi = 1;
  EXPECT_EQ(attn_cascade_create(context, &d, 4, 2, &cascade),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("cannot run as a cascade"), std::string::npos)
      << lastError();
  d.knobs.alibi = 0;
  EXPECT_EQ(attn_cascade_create(context, &d, 4, 16, &cascade),
            ATTN_ERROR_INVALID_ARGUMENT);
  expectNoGpuFailure(attn_cascade_create(context, &d, 4, 2, &cascade),
                     "attn_cascade_create");
  attn_cascade_destroy(cascade);

  attn_merge_states_variant m;
  attn_merge_states_variant_init(&m);
  attn_merge_states *merge = nullptr;
  expectNoGpuFailure(attn_merge_states_create(context, &m, &merge),
                     "attn_merge_states_create");
  attn_merge_states_destroy(merge);

  attn_append_kv_variant a;
  attn_append_kv_variant_init(&a);
  attn_append_kv *append = nullptr;
  expectNoGpuFailure(attn_append_kv_create(context, &a, &append),
                     "attn_append_kv_create");
  attn_append_kv_destroy(append);

  attn_cache_ops *ops = nullptr;
  expectNoGpuFailure(attn_cache_ops_create(context, &ops),
                     "attn_cache_ops_create");
  attn_cache_ops_destroy(ops);

  attn_metadata_limits limits;
  ATTN_INIT(&limits);
  limits.page_size = 16;
  limits.max_batch = 4;
  limits.max_tokens = 64;
  limits.max_pages_per_seq = 8;
  attn_metadata_builder *builder = nullptr;
  expectNoGpuFailure(attn_metadata_builder_create(&limits, &builder),
                     "attn_metadata_builder_create");
  attn_metadata_builder_destroy(builder);

  // A context without an arch asks the device for one.
  attn_context *current = nullptr;
  ASSERT_EQ(attn_context_create_jit(nullptr, &current), ATTN_OK);
  expectNoGpuFailure(attn_decode_create(current, &d, 4, &decode),
                     "attn_decode_create");
  attn_decode_destroy(decode);
  attn_context_destroy(current);
  attn_context_destroy(context);
}

TEST(CApiServing, SwapBlocksChecksPages) {
  int64_t pairs[] = {0, 1, 5, 2};
  char src[64] = {}, dst[64] = {};
  EXPECT_EQ(attn_swap_blocks(src, 4, dst, 4, 16, pairs, 2, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(),
            "attn_swap_blocks: pair 1: source page 5 is outside [0, 4)");
  pairs[2] = 3;
  pairs[3] = 4;
  EXPECT_EQ(attn_swap_blocks(src, 4, dst, 4, 16, pairs, 2, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("destination page 4"), std::string::npos);
  EXPECT_EQ(attn_swap_blocks(src, 4, dst, 4, 0, pairs, 2, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(attn_swap_blocks(src, 4, dst, 4, 16, nullptr, 2, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("host_pairs is null"), std::string::npos);
  // No pairs: nothing to do, no GPU needed.
  EXPECT_EQ(attn_swap_blocks(nullptr, 0, nullptr, 0, 16, nullptr, 0, nullptr),
            ATTN_OK);
  pairs[3] = 2;
  expectNoGpuFailure(attn_swap_blocks(src, 4, dst, 4, 16, pairs, 2, nullptr),
                     "attn_swap_blocks");
}

//===--- Handles ----------------------------------------------------------===//

TEST(CApiHandles, DestroyRefusesWhatIsNotLive) {
  attn_capi_test::expectDestroysRefuseWhatIsNotLive();
}

TEST(CApiHandles, CallsRefuseWhatIsNotLive) {
  attn_capi_test::expectCallsRefuseWhatIsNotLive();
}

TEST(CApiHandles, DoubleDestroyAndUseAfterDestroy) {
  // A context (no GPU needed): a second destroy and a use after the first
  // are errors naming it, and free or read nothing.
  attn_context *context = nullptr;
  ASSERT_EQ(attn_context_create_jit(nullptr, &context), ATTN_OK);
  ASSERT_NE(context, nullptr);
  EXPECT_EQ(attn_context_destroy(context), ATTN_OK) << lastError();
  EXPECT_EQ(lastError(), "");
  EXPECT_EQ(attn_context_destroy(context), ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "attn_context_destroy: context is not a live "
                         "attn_context handle (destroyed, or never created)");
  attn_decode_variant d;
  attn_decode_variant_init(&d);
  attn_decode *decode = reinterpret_cast<attn_decode *>(1);
  EXPECT_EQ(attn_decode_create(context, &d, 4, &decode),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "attn_decode_create: context is not a live "
                         "attn_context handle (destroyed, or never created)");
  EXPECT_EQ(decode, nullptr);
  attn_cache_ops *ops = nullptr;
  EXPECT_EQ(attn_cache_ops_create(context, &ops), ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("context is not a live attn_context handle"),
            std::string::npos);

  // A compiled kernel: its accessors give "" and 0 once it is destroyed.
  d.num_q_heads = 8;
  d.num_kv_heads = 2;
  attn_compiled *compiled = nullptr;
  ASSERT_EQ(attn_compile_decode(&d, "sm_80", &compiled), ATTN_OK)
      << lastError();
  EXPECT_GT(attn_compiled_cubin_size(compiled), 0u);
  EXPECT_NE(std::string(attn_compiled_kernel_name(compiled)), "");
  EXPECT_EQ(attn_compiled_destroy(compiled), ATTN_OK);
  EXPECT_STREQ(attn_compiled_kernel_name(compiled), "");
  EXPECT_EQ(lastError(), "attn_compiled_kernel_name: compiled is not a live "
                         "attn_compiled handle (destroyed, or never created)");
  EXPECT_STREQ(attn_compiled_source(compiled), "");
  EXPECT_EQ(attn_compiled_cubin_size(compiled), 0u);
  EXPECT_EQ(attn_compiled_destroy(compiled), ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "attn_compiled_destroy: compiled is not a live "
                         "attn_compiled handle (destroyed, or never created)");
}

TEST(CApiHandles, AHandleOfAnotherTypeIsRefused) {
  attn_context *context = nullptr;
  ASSERT_EQ(attn_context_create_jit(nullptr, &context), ATTN_OK);
  int32_t len = 4;
  // Cast by the caller: a context where a decode or a compiled kernel goes.
  EXPECT_EQ(attn_decode_plan(reinterpret_cast<attn_decode *>(context), &len, 1,
                             0, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "attn_decode_plan: decode is an attn_context handle, "
                         "not an attn_decode");
  EXPECT_STREQ(attn_compiled_source(reinterpret_cast<attn_compiled *>(context)),
               "");
  EXPECT_EQ(lastError(), "attn_compiled_source: compiled is an attn_context "
                         "handle, not an attn_compiled");
  // The wrong destroy refuses it and frees nothing: the context still works.
  EXPECT_EQ(attn_decode_destroy(reinterpret_cast<attn_decode *>(context)),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "attn_decode_destroy: decode is an attn_context "
                         "handle, not an attn_decode");
  attn_decode_variant d;
  attn_decode_variant_init(&d);
  attn_decode *decode = nullptr;
  EXPECT_EQ(attn_decode_create(context, &d, 0, &decode),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(), "attn_decode_create: max_batch is 0");
  EXPECT_EQ(attn_context_destroy(context), ATTN_OK) << lastError();
}

TEST(CApiHandles, HandleValuesAreNeverReused) {
  // The allocator hands a freed object's address to the next one; a handle
  // is never given out twice, so a stale one cannot reach a new context.
  std::set<attn_context *> seen;
  attn_context *previous = nullptr;
  for (int i = 0; i < 64; ++i) {
    attn_context *context = nullptr;
    ASSERT_EQ(attn_context_create_jit(nullptr, &context), ATTN_OK);
    EXPECT_TRUE(seen.insert(context).second)
        << "handle " << context << " given out twice";
    if (previous) {
      EXPECT_EQ(attn_context_destroy(previous), ATTN_ERROR_INVALID_ARGUMENT);
    }
    EXPECT_EQ(attn_context_destroy(context), ATTN_OK) << lastError();
    previous = context;
  }
}

TEST(CApiHandles, ConcurrentCallsKeepTheRegistryWhole) {
  // Threads creating, using and destroying their own handles, and one
  // destroying a handle others are using (the caller's bug): every call
  // returns a status, and the registry stays consistent.
  attn_context *shared = nullptr;
  ASSERT_EQ(attn_context_create_jit(nullptr, &shared), ATTN_OK);
  std::atomic<bool> go{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      while (!go)
        std::this_thread::yield();
      attn_decode_variant d;
      attn_decode_variant_init(&d);
      for (int i = 0; i < 200; ++i) {
        attn_context *own = nullptr;
        if (attn_context_create_jit(nullptr, &own) != ATTN_OK)
          ++failures;
        attn_decode *decode = nullptr;
        // max_batch 0: the context is looked up, then the call fails
        // without a GPU.
        if (attn_decode_create(own, &d, 0, &decode) !=
            ATTN_ERROR_INVALID_ARGUMENT)
          ++failures;
        if (std::string(attn_last_error()) !=
            "attn_decode_create: max_batch is 0")
          ++failures;
        attn_status status = attn_decode_create(shared, &d, 0, &decode);
        std::string message = attn_last_error();
        if (status != ATTN_ERROR_INVALID_ARGUMENT ||
            (message != "attn_decode_create: max_batch is 0" &&
             message.find("context is not a live") == std::string::npos))
          ++failures;
        if (attn_context_destroy(own) != ATTN_OK ||
            attn_context_destroy(own) != ATTN_ERROR_INVALID_ARGUMENT)
          ++failures;
      }
    });
  go = true;
  EXPECT_EQ(attn_context_destroy(shared), ATTN_OK);
  for (std::thread &thread : threads)
    thread.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(attn_context_destroy(shared), ATTN_ERROR_INVALID_ARGUMENT);
}

//===--- Variants every entry point refuses -------------------------------===//

TEST(CApiVariants, BadVariantsAreRefusedEverywhere) {
  using namespace attn_capi_test;
  expectKeysRefuseBadVariants();
  expectKeysTakeTheLimits();
  // The compiler and every create refuse the same variants, before any GPU
  // or NVRTC work.
  attn_jit_options options;
  ATTN_INIT(&options);
  options.arch = "sm_90a";
  attn_context *context = nullptr;
  ASSERT_EQ(attn_context_create_jit(&options, &context), ATTN_OK);
  expectRefused<attn_decode_variant>(
      "attn_compile_decode", attn_decode_variant_init, badDecodeVariants(),
      [](const attn_decode_variant &v) {
        attn_compiled *compiled = nullptr;
        return attn_compile_decode(&v, "sm_90a", &compiled);
      });
  expectRefused<attn_decode_variant>(
      "attn_decode_create", attn_decode_variant_init, badDecodeVariants(),
      [&](const attn_decode_variant &v) {
        attn_decode *decode = nullptr;
        return attn_decode_create(context, &v, 4, &decode);
      });
  expectRefused<attn_decode_variant>(
      "attn_cascade_create", attn_decode_variant_init, badDecodeVariants(),
      [&](const attn_decode_variant &v) {
        attn_cascade *cascade = nullptr;
        return attn_cascade_create(context, &v, 4, 2, &cascade);
      });
  expectRefused<attn_prefill_variant>(
      "attn_compile_prefill", attn_prefill_variant_init, badPrefillVariants(),
      [](const attn_prefill_variant &v) {
        attn_compiled *compiled = nullptr;
        return attn_compile_prefill(&v, "sm_90a", &compiled);
      });
  expectRefused<attn_prefill_variant>(
      "attn_prefill_create", attn_prefill_variant_init, badPrefillVariants(),
      [&](const attn_prefill_variant &v) {
        attn_prefill *prefill = nullptr;
        return attn_prefill_create(context, &v, 4, 64, &prefill);
      });
  expectRefused<attn_prefill_variant>(
      "attn_mixed_batch_create", attn_prefill_variant_init,
      badPrefillVariants(), [&](const attn_prefill_variant &v) {
        attn_mixed_batch *mixed = nullptr;
        return attn_mixed_batch_create(context, &v, 4, 64, &mixed);
      });
  expectRefused<attn_append_kv_variant>(
      "attn_append_kv_create", attn_append_kv_variant_init,
      badAppendKVVariants(), [&](const attn_append_kv_variant &v) {
        attn_append_kv *append = nullptr;
        return attn_append_kv_create(context, &v, &append);
      });
  expectRefused<attn_merge_states_variant>(
      "attn_merge_states_create", attn_merge_states_variant_init,
      badMergeStatesVariants(), [&](const attn_merge_states_variant &v) {
        attn_merge_states *merge = nullptr;
        return attn_merge_states_create(context, &v, &merge);
      });
  EXPECT_EQ(attn_context_destroy(context), ATTN_OK);
}

//===--- Counts no buffer holds -------------------------------------------===//

TEST(CApiServing, CountsNoBufferHoldsAreArgumentErrors) {
  attn_capi_test::expectCountsNoBufferHoldsAreRefused();
  // Workspaces for more query rows than any q holds, whatever the GPU.
  attn_jit_options options;
  ATTN_INIT(&options);
  options.arch = "sm_90a";
  attn_context *context = nullptr;
  ASSERT_EQ(attn_context_create_jit(&options, &context), ATTN_OK);
  attn_decode_variant d;
  attn_decode_variant_init(&d);
  d.num_q_heads = 1024;
  d.head_dim = 256;
  d.query_len = 16;
  attn_decode *decode = nullptr;
  EXPECT_EQ(attn_decode_create(context, &d, INT_MAX, &decode),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(lastError(),
            "attn_decode_create: max_batch is 2147483647: 2147483647 "
            "requests' q rows of 8388608 bytes are more than any buffer "
            "holds (1125899906842624 bytes)");
  attn_cascade *cascade = nullptr;
  EXPECT_EQ(attn_cascade_create(context, &d, INT_MAX, 2, &cascade),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("max_batch is 2147483647"), std::string::npos)
      << lastError();
  attn_prefill_variant p;
  attn_prefill_variant_init(&p);
  attn_prefill *prefill = nullptr;
  EXPECT_EQ(attn_prefill_create(context, &p, 4, INT64_MAX, &prefill),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("max_q_tokens is 9223372036854775807: "),
            std::string::npos)
      << lastError();
  p.paged = 1;
  attn_mixed_batch *mixed = nullptr;
  EXPECT_EQ(attn_mixed_batch_create(context, &p, 4, INT64_MAX, &mixed),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(lastError().find("max_q_tokens is 9223372036854775807: "),
            std::string::npos)
      << lastError();
  EXPECT_EQ(attn_context_destroy(context), ATTN_OK);
}

} // namespace
