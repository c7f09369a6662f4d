//===- PrefillGpuTest.cpp - ragged and paged prefill vs the fp64 reference ===//
//
// Every case JIT-compiles its variant, runs it on random ragged batches with
// poisoned outputs and compares with the fp64 reference
// (test/reference/PrefillCheck). Tolerances as in DecodeGpuTest: relative
// L2 error of the output 1e-2 for bf16, 4e-3 for f16 (P is rounded to the
// storage type before P.V); LSE within 2e-3 absolute. Lengths are chosen not
// to be multiples of the 64-row tiles (1, 17, 200, 1000, 3000) next to ones
// that are (64), so partial tiles and masks at tile edges are exercised.
//
// Paged cases read keys and values from a random paged cache on shuffled
// pages (every page size class, NHD/HND/interleaved, 16-bit and FP8 with
// per-tensor and per-head scales); the reference reads the same values
// gathered into rows. FP8 values are exact in the reference, so the
// tolerances are those of the query type.
//
// Causal rows are aligned to the end of the keys (bottom-right): with
// q_len < kv_len (a chunk continuing a prefix) query i sits at kv_len -
// q_len + i; with q_len > kv_len the first q_len - kv_len rows see no key
// and must be 0 with LSE -inf.
//
//===----------------------------------------------------------------------===//
#include "compiler/Jit/Jit.h"
#include "test/gpu/GpuTestUtil.h"
#include "test/reference/PrefillCheck.h"

#include <initializer_list>

using namespace attn;
using namespace attn::test;

namespace {

struct PrefillCase {
  std::string name;
  PrefillVariant variant;
  std::vector<int> qLens;
  std::vector<int> kvLens; ///< empty: self attention (kvLens = qLens)
  int extraTokenStride = 0;
  double kvScale = 1.0;       ///< paged FP8 caches
  bool interleavedKV = false; ///< paged: K and V of a page side by side
};

/// A causal self-attention variant (PrefillVariant's default mask).
PrefillVariant base(ScalarType dtype, int hq, int hkv, int d) {
  PrefillVariant v;
  v.qType = dtype;
  v.numQHeads = hq;
  v.numKVHeads = hkv;
  v.headDim = d;
  return v;
}

PrefillVariant encoder(PrefillVariant v) {
  v.causal = false;
  v.kind = AttentionKind::Encoder;
  return v;
}

PrefillVariant cross(PrefillVariant v) {
  v.causal = false;
  v.kind = AttentionKind::Cross;
  return v;
}

PrefillVariant paged(PrefillVariant v, ScalarType kvType, int pageSize,
                     KVLayout layout = KVLayout::NHD,
                     bool perHeadScale = false) {
  v.paged = PagedKVFormat{kvType, pageSize, layout, perHeadScale};
  return v;
}

std::vector<PrefillCase> cases() {
  using S = ScalarType;
  std::vector<PrefillCase> c;
  auto add = [&](std::string name, PrefillVariant v, std::vector<int> qLens,
                 std::vector<int> kvLens = {}) {
    c.push_back({std::move(name), v, std::move(qLens), std::move(kvLens)});
  };

  // Every head dim for both dtypes: GQA 4, causal self attention.
  for (S dtype : {S::BF16, S::F16})
    for (int d : {64, 80, 96, 112, 128, 192, 256})
      add(std::string(toString(dtype)) + "_gqa4_causal_d" + std::to_string(d),
          base(dtype, 8, 2, d), {1, 17, 64, 200});

  // Head ratios: MHA, GQA 32/8 (with LSE), MQA 8/1.
  add("bf16_mha_causal", base(S::BF16, 16, 16, 128), {1000, 17});
  {
    auto v = base(S::BF16, 32, 8, 128);
    v.writeLse = true;
    add("bf16_gqa32x8_causal_lse", v, {200, 1000});
  }
  add("f16_mqa8x1_causal", base(S::F16, 8, 1, 128), {300, 64});
  add("bf16_mqa8x1_d256_causal", base(S::BF16, 8, 1, 256), {17, 200});
  {
    // Head dim 256 over long prefixes (many 64-key tiles of the sm_90a
    // template), with LSE, and unmasked.
    auto v = base(S::BF16, 16, 4, 256);
    v.writeLse = true;
    add("bf16_d256_chunk_continuation_lse", v, {17, 300, 1}, {1000, 2000, 1});
    add("f16_d256_encoder", encoder(base(S::F16, 8, 2, 256)), {500, 64});
  }

  // MLA's prefill (DeepSeek's MHA mode): q/k of 128 + 64 dims, v of 128,
  // causal with LSE (vLLM merges the context part with merge_states), over
  // a prefix, strided, with modifiers; and q/k 128 over v 64, 96 over 64.
  {
    auto mla = [&](S dtype, int hq, int hkv, int d, int rope) {
      auto v = base(dtype, hq, hkv, d);
      v.ropeDim = rope;
      v.writeLse = true;
      return v;
    };
    add("bf16_mla_qk192_v128_causal_lse", mla(S::BF16, 16, 16, 128, 64),
        {1, 17, 64, 1000});
    add("bf16_mla_qk192_v128_chunk_lse", mla(S::BF16, 16, 16, 128, 64),
        {17, 300, 1}, {1000, 2000, 1});
    add("f16_mla_qk192_v128_strided", mla(S::F16, 8, 8, 128, 64), {200, 64});
    c.back().extraTokenStride = 64;
    auto modified = mla(S::BF16, 16, 16, 128, 64);
    modified.softcap = 30.f;
    modified.windowLeft = 100;
    add("bf16_mla_qk192_v128_softcap_window", modified, {300, 17});
    add("bf16_mla_qk128_v64_gqa_encoder", encoder(mla(S::BF16, 8, 2, 64, 64)),
        {200, 1});
    add("f16_mla_qk96_v64_causal", mla(S::F16, 8, 8, 64, 32), {200, 64});
  }

  // Chunk continuation: new queries over a longer prefix, bottom-right.
  for (S dtype : {S::BF16, S::F16}) {
    auto v = base(dtype, 16, 4, dtype == S::BF16 ? 128 : 64);
    v.writeLse = true;
    add(std::string(toString(dtype)) + "_chunk_continuation_lse", v,
        {17, 64, 200, 1}, {1000, 164, 3000, 1});
  }
  {
    // Fewer keys than queries: the first rows see nothing (0, LSE -inf).
    auto v = base(S::BF16, 8, 2, 128);
    v.writeLse = true;
    add("bf16_causal_more_queries_than_keys_lse", v, {100, 64, 5}, {40, 64, 1});
  }

  // Encoder (bidirectional) self attention.
  add("bf16_encoder_mha", encoder(base(S::BF16, 8, 8, 128)), {200, 17, 1000});
  {
    auto v = encoder(base(S::F16, 16, 4, 64));
    v.writeLse = true;
    add("f16_encoder_gqa4_lse", v, {1, 300, 64});
  }

  // Cross attention: key counts unrelated to query counts, some shorter.
  {
    auto v = cross(base(S::BF16, 16, 4, 128));
    v.writeLse = true;
    add("bf16_cross_lse", v, {17, 200, 64, 1000}, {1500, 64, 1, 300});
  }
  add("f16_cross_mqa_d96", cross(base(S::F16, 8, 1, 96)), {1000, 3},
      {77, 2000});

  // Sliding window, on fresh prompts and on a continued chunk.
  {
    auto v = base(S::BF16, 16, 4, 128);
    v.windowLeft = 100;
    add("bf16_window100", v, {1000, 200, 17});
    v.windowLeft = 255;
    v.writeLse = true;
    add("bf16_window255_continuation_lse", v, {64, 300}, {3000, 300});
  }

  // ALiBi, causal, bidirectional and cross: FlashAttention's
  // -slope * |key - query position| penalizes keys after the query (encoder,
  // cross) as much as those before it.
  {
    auto v = base(S::BF16, 16, 16, 128);
    v.alibi = true;
    add("bf16_alibi_causal", v, {1000, 17});
    v = encoder(base(S::F16, 8, 2, 64));
    v.alibi = true;
    add("f16_alibi_encoder", v, {200, 64});
    v = cross(base(S::BF16, 16, 4, 128));
    v.alibi = true;
    add("bf16_alibi_cross", v, {17, 300}, {1000, 64});
  }

  // Soft-cap: a small cap bends most logits, a typical one (Gemma 2) few.
  {
    auto v = base(S::BF16, 32, 8, 128);
    v.softcap = 5.0f;
    add("bf16_softcap5", v, {1000, 200});
    v = base(S::F16, 8, 2, 256);
    v.softcap = 30.0f;
    add("f16_softcap30_d256", v, {300, 17});
  }

  // Ragged batches mixing every length, in both orders.
  {
    auto v = base(S::BF16, 16, 4, 128);
    v.writeLse = true;
    add("bf16_ragged_mix_lse", v, {1, 17, 64, 200, 1000, 3000});
    add("f16_mqa_ragged_mix_reversed", base(S::F16, 8, 1, 64),
        {3000, 1000, 200, 64, 17, 1});
  }

  // Custom scale and token strides of a fused QKV projection's slices.
  {
    auto v = base(S::BF16, 8, 2, 128);
    v.scale = 0.3f;
    add("bf16_custom_scale_strided", v, {200, 17});
    c.back().extraTokenStride = 2 * 2 * 128; // room for the other tensors
  }

  // Everything at once.
  {
    auto v = base(S::F16, 16, 4, 128);
    v.windowLeft = 300;
    v.alibi = true;
    v.softcap = 30.0f;
    v.writeLse = true;
    add("f16_kitchen_sink", v, {17, 1000, 64}, {500, 1000, 3000});
  }

  // Attention sinks (gpt-oss): full and 128-key windows, with LSE, ragged
  // and paged (the sm_90a template takes the 16-bit ones too).
  {
    auto v = base(S::BF16, 64, 8, 64);
    v.sinks = true;
    v.writeLse = true;
    add("bf16_d64_sinks_lse", v, {1000, 17, 1}, {1000, 300, 1});
    v.windowLeft = 127;
    add("bf16_d64_sinks_window127_lse", v, {1000, 17, 1}, {1000, 300, 1});
    auto e = encoder(base(S::F16, 8, 2, 128));
    e.sinks = true;
    add("f16_sinks_encoder", e, {200, 64});
    auto p = paged(base(S::BF16, 32, 8, 128), S::BF16, 16);
    p.sinks = true;
    p.windowLeft = 127;
    p.writeLse = true;
    add("paged_bf16_p16_sinks_window127_lse", p, {17, 400, 1},
        {1000, 400, 2000});
    auto f =
        paged(base(S::F16, 16, 4, 128), S::F8E4M3, 16, KVLayout::HND, true);
    f.sinks = true;
    f.writeLse = true;
    add("paged_e4m3_p16_hnd_sinks_lse", f, {300, 1}, {2000, 64});
  }

  // Paged prefill: chunks continuing a cached prefix (kvLens are the cached
  // tokens, the new rows included) and fresh prompts, over every page size
  // class, layout and cache type.
  using L = KVLayout;
  {
    auto v = paged(base(S::BF16, 32, 8, 128), S::BF16, 16);
    v.writeLse = true;
    add("paged_bf16_p16_chunk_continuation_lse", v, {17, 64, 200, 1},
        {1000, 164, 3000, 1});
    add("paged_bf16_p16_fresh_prompts",
        paged(base(S::BF16, 8, 2, 128), S::BF16, 16), {1000, 17, 64});
  }
  add("paged_f16_p1_hnd_d64", paged(base(S::F16, 8, 2, 64), S::F16, 1, L::HND),
      {33, 100}, {500, 100});
  add("paged_bf16_p128_d256_mqa", paged(base(S::BF16, 8, 1, 256), S::BF16, 128),
      {200, 17}, {1000, 300});
  {
    auto v = paged(base(S::BF16, 16, 4, 256), S::BF16, 16);
    v.windowLeft = 100;
    v.writeLse = true;
    add("paged_bf16_p16_d256_window_lse", v, {200, 17}, {1000, 300});
  }
  {
    // No mask over the cache (a decoder's bidirectional prefix).
    auto v = paged(base(S::F16, 16, 4, 96), S::F16, 32, L::HND);
    v.causal = false;
    add("paged_f16_p32_hnd_d96_unmasked", v, {300, 64}, {400, 64});
  }
  {
    // Pages the sm_90a template takes in several shapes: HND at head dim
    // 64, pages of no power of two, pages longer than a K/V tile.
    auto v = paged(base(S::F16, 16, 4, 64), S::F16, 32, L::HND);
    v.causal = false;
    add("paged_f16_p32_hnd_d64_unmasked", v, {300, 64}, {400, 64});
    auto w = paged(base(S::BF16, 16, 4, 128), S::BF16, 48);
    w.windowLeft = 100;
    add("paged_bf16_p48_d128_window", w, {200, 17}, {1000, 300});
    auto l = paged(base(S::BF16, 16, 2, 128), S::BF16, 256, L::HND);
    l.writeLse = true;
    add("paged_bf16_p256_hnd_d128_lse", l, {64, 130, 1}, {1000, 130, 700});
  }
  {
    // Head dim 64 over 16-token pages (the sm_90a template with three
    // consumer warpgroups among its pinned shapes): a window over
    // continued chunks, with LSE.
    auto v = paged(base(S::BF16, 32, 8, 64), S::BF16, 16);
    v.windowLeft = 300;
    v.writeLse = true;
    add("paged_bf16_p16_d64_window_lse", v, {17, 400, 1}, {1000, 400, 2000});
  }
  add("paged_bf16_p16_cross",
      paged(cross(base(S::BF16, 16, 4, 128)), S::BF16, 16), {17, 200},
      {1500, 64});
  {
    auto v = paged(cross(base(S::F16, 16, 4, 128)), S::F16, 16);
    v.alibi = true;
    add("paged_f16_p16_alibi_cross", v, {200, 17}, {64, 1500});
  }
  {
    auto v = paged(base(S::BF16, 16, 4, 128), S::BF16, 16);
    add("paged_bf16_p16_interleaved", v, {100, 5}, {700, 900});
    c.back().interleavedKV = true;
  }
  // FP8 caches: e4m3 and e5m2, per tensor and per head, 16- and 8-byte rows.
  {
    auto v = paged(base(S::BF16, 32, 8, 128), S::F8E4M3, 16);
    v.writeLse = true;
    add("paged_bf16_e4m3_p16_lse", v, {17, 200, 64}, {1000, 3000, 64});
    c.back().kvScale = 0.05;
  }
  {
    auto v = paged(base(S::F16, 16, 4, 128), S::F8E4M3, 16, L::HND, true);
    add("paged_f16_e4m3_p16_hnd_headscale", v, {300, 1}, {2000, 77});
    c.back().kvScale = 2.0;
  }
  add("paged_f16_e5m2_p8_d72", paged(base(S::F16, 8, 2, 72), S::F8E5M2, 8),
      {100, 33}, {400, 33});
  add("paged_bf16_e4m3_p64_d256",
      paged(base(S::BF16, 8, 2, 256), S::F8E4M3, 64), {64, 130}, {1000, 130});
  {
    auto v = paged(base(S::BF16, 16, 4, 128), S::F8E5M2, 16, L::NHD, true);
    v.windowLeft = 300;
    v.alibi = true;
    v.softcap = 30.0f;
    v.writeLse = true;
    add("paged_bf16_e5m2_kitchen_sink", v, {17, 1000, 64}, {500, 1000, 3000});
    c.back().kvScale = 0.5;
  }
  {
    // FP8 at head dim 64 (three consumer warpgroups among the sm_90a
    // template's pinned shapes), without a mask, over 8-token pages,
    // interleaved, at head dim 256 as cross attention.
    auto v = paged(base(S::BF16, 32, 8, 64), S::F8E4M3, 16);
    v.windowLeft = 300;
    v.writeLse = true;
    add("paged_bf16_e4m3_p16_d64_window_lse", v, {17, 400, 1},
        {1000, 400, 2000});
    c.back().kvScale = 0.25;
    auto u = paged(base(S::F16, 16, 4, 64), S::F8E5M2, 32, L::HND, true);
    u.causal = false;
    add("paged_f16_e5m2_p32_hnd_d64_unmasked_headscale", u, {300, 64},
        {400, 64});
    add("paged_bf16_e4m3_p8_interleaved",
        paged(base(S::BF16, 16, 4, 128), S::F8E4M3, 8), {100, 5}, {700, 900});
    c.back().interleavedKV = true;
    // Scales that leave most cache values subnormal (or zero) in FP8: the
    // widening (cvt, or bit placement on sm_80) must keep them exact.
    add("paged_bf16_e4m3_p16_subnormal_cache",
        paged(base(S::BF16, 16, 4, 128), S::F8E4M3, 16), {100, 5}, {700, 900});
    c.back().kvScale = 200.0;
    add("paged_f16_e4m3_p16_subnormal_cache",
        paged(base(S::F16, 16, 4, 64), S::F8E4M3, 16), {100, 5}, {700, 900});
    c.back().kvScale = 200.0;
    add("paged_bf16_e5m2_p16_subnormal_cache",
        paged(base(S::BF16, 16, 4, 128), S::F8E5M2, 16), {100, 5}, {700, 900});
    c.back().kvScale = 20000.0;
    auto x = paged(cross(base(S::BF16, 16, 2, 256)), S::F8E5M2, 16);
    x.writeLse = true;
    add("paged_bf16_e5m2_p16_d256_cross_lse", x, {17, 200}, {1500, 64});
  }
  // Ragged FP8 k/v with their scales (per tensor and per head): the wgmma
  // head dims and two only mma.sync runs (80, 96), one strided.
  {
    auto fp8 = [](PrefillVariant v, ScalarType kvType, bool perHead = false) {
      v.fp8KV = FP8RowsFormat{kvType, perHead};
      return v;
    };
    add("ragged_bf16_e4m3_d128", fp8(base(S::BF16, 16, 4, 128), S::F8E4M3),
        {1, 200, 1000});
    auto x = fp8(cross(base(S::F16, 8, 2, 64)), S::F8E5M2, true);
    x.writeLse = true;
    add("ragged_f16_e5m2_d64_headscale_cross_lse", x, {17, 64}, {300, 1000});
    auto w = fp8(base(S::BF16, 8, 2, 256), S::F8E4M3, true);
    w.windowLeft = 100;
    add("ragged_bf16_e4m3_d256_window_headscale", w, {300, 64});
    c.back().extraTokenStride = 16;
    add("ragged_f16_e4m3_d96_headscale",
        fp8(base(S::F16, 8, 8, 96), S::F8E4M3, true), {200, 17});
    auto k = fp8(base(S::BF16, 8, 4, 80), S::F8E5M2);
    k.sinks = true;
    k.writeLse = true;
    add("ragged_bf16_e5m2_d80_sinks_lse", k, {64, 333});
    c.back().kvScale = 0.01;
  }
  return c;
}

void PrintTo(const PrefillCase &c, std::ostream *os) { *os << c.name; }

/// FP8 compute rounds q (per row) and P to e4m3, 3 bits each: a few
/// percent per score and weight (measured 2.4-3.6% relative L2 on the H200
/// over these cases, LSE within 0.07).
double tolerance(const PrefillVariant &v) {
  if (v.fp8Compute)
    return 5e-2;
  return v.qType == ScalarType::BF16 ? 1e-2 : 4e-3;
}
double lseTolerance(const PrefillVariant &v) {
  return v.fp8Compute ? 0.15 : 2e-3;
}

/// `kernel` (of tc.variant) on tc's random problem against fp64; `splitKV`
/// lets the plan split keys (sm_90a). Returns the plan's split items.
int expectMatchesReference(const PrefillCase &tc,
                           const runtime::PrefillKernel &kernel,
                           bool splitKV = true) {
  check::PrefillCheckOptions options;
  options.splitKV = splitKV;
  options.qLens = tc.qLens;
  options.kvLens = tc.kvLens;
  options.extraTokenStride = tc.extraTokenStride;
  options.kvScale = tc.kvScale;
  options.interleavedKV = tc.interleavedKV;
  options.seed = uint32_t(std::hash<std::string>()(tc.name));
  auto resultOr = check::checkPrefill(kernel, tc.variant, options);
  if (!resultOr) {
    ADD_FAILURE() << llvm::toString(resultOr.takeError());
    return 0;
  }
  const check::PrefillCheckResult &result = *resultOr;
  EXPECT_LT(result.outError, tolerance(tc.variant))
      << tc.name << ": relative L2 error (" << result.gridX << " CTAs, "
      << result.splitItems << " split items)";
  if (tc.variant.writeLse) {
    EXPECT_LT(result.lseError, lseTolerance(tc.variant))
        << tc.name << ": worst LSE error";
  }
  if (tc.variant.fp8Compute)
    std::printf("[ fp8mma   ] %s: relative L2 error %.3g, LSE error %.3g\n",
                tc.name.c_str(), result.outError, result.lseError);
  return result.splitItems;
}

class PrefillGpuTest : public ::testing::TestWithParam<PrefillCase> {};

TEST_P(PrefillGpuTest, MatchesReference) {
  ATTN_REQUIRE_GPU();
  ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().prefill(GetParam().variant));
  expectMatchesReference(GetParam(), *kernel);
}

INSTANTIATE_TEST_SUITE_P(Matrix, PrefillGpuTest, ::testing::ValuesIn(cases()),
                         [](const auto &info) { return info.param.name; });

/// The sm_90a wgmma schedule: a producer warpgroup and `consumers` 64-row
/// consumer warpgroups, blockN-key tiles, two stages.
PrefillSchedule wgmmaSchedule(int consumers, int blockN) {
  PrefillSchedule s;
  s.mma = PrefillMma::Wgmma;
  s.warps = 4 + 4 * consumers;
  s.blockM = 64 * consumers;
  s.blockN = blockN;
  s.stages = 2;
  return s;
}

/// Whether the wgmma template may pack `v`'s q heads per KV head
/// (checkPackGqa): groups that divide 64, no per-head values but an e4m3
/// q's scales, no regions.
bool wgmmaPackable(const PrefillVariant &v) {
  const int group = v.numQHeads / v.numKVHeads;
  return group > 1 && 64 % group == 0 && !v.alibi && !v.sinks &&
         v.scoreMod.empty() && v.maskMod.empty();
}

/// Every case the sm_90a template supports (16-bit q, head dim 64, 128 or
/// 256; ragged, or paged over a cache of q's type or FP8 with pages of a
/// multiple of 8 tokens), pinned to it, so that it stays tested whichever
/// template the schedule picks by default; the default shape on all of them,
/// one consumer warpgroup with 64-key tiles on a few, three on head dim 64.
std::vector<PrefillCase> wgmmaCases() {
  std::vector<PrefillCase> out;
  for (PrefillCase c : cases()) {
    const PrefillVariant &v = c.variant;
    if ((v.headDim != 64 && v.headDim != 128 && v.headDim != 256) ||
        (v.headDim + v.ropeDim) % 64)
      continue;
    if (v.paged &&
        ((v.paged->kvType != v.qType && sizeOf(v.paged->kvType) != 1) ||
         v.paged->pageSize % 8))
      continue;
    PrefillCase pinned = c;
    // Head dim 256 takes 64-key tiles (registers).
    pinned.variant.schedule = wgmmaSchedule(2, v.headDim == 256 ? 64 : 128);
    pinned.name += "_wgmma";
    out.push_back(pinned);
    if (c.name == "bf16_ragged_mix_lse" || c.name == "f16_kitchen_sink" ||
        c.name == "bf16_window100" || c.name == "bf16_cross_lse" ||
        c.name == "paged_bf16_p16_chunk_continuation_lse" ||
        c.name == "paged_bf16_p256_hnd_d128_lse" ||
        c.name == "paged_bf16_e4m3_p16_lse" ||
        c.name == "bf16_d256_chunk_continuation_lse") {
      pinned.variant.schedule = wgmmaSchedule(1, 64);
      pinned.name = c.name + "_wgmma_m64n64";
      out.push_back(pinned);
    }
    // Head dim 64 also with three consumer warpgroups (192 query rows).
    if (v.headDim == 64) {
      pinned.variant.schedule = wgmmaSchedule(3, 128);
      pinned.name = c.name + "_wgmma_m192";
      out.push_back(pinned);
    }
    // A KV head's q heads packed into the tile where the variant allows.
    if (wgmmaPackable(v)) {
      pinned.variant.schedule = wgmmaSchedule(2, v.headDim == 256 ? 64 : 128);
      pinned.variant.schedule->packGqa = true;
      pinned.name = c.name + "_wgmma_packed";
      out.push_back(pinned);
    }
  }
  return out;
}

/// True on an sm_90a GPU, which the wgmma template needs.
bool onSm90a() {
  auto arch = runtime::currentDeviceArch();
  if (!arch) {
    llvm::consumeError(arch.takeError());
    return false;
  }
  return *arch == Arch::SM90a;
}
#define ATTN_REQUIRE_SM90A()                                                   \
  ATTN_REQUIRE_GPU();                                                          \
  if (!onSm90a())                                                              \
  GTEST_SKIP() << "the wgmma prefill needs an sm_90a GPU"

class PrefillWgmmaGpuTest : public ::testing::TestWithParam<PrefillCase> {};

TEST_P(PrefillWgmmaGpuTest, MatchesReference) {
  ATTN_REQUIRE_SM90A();
  const PrefillCase &tc = GetParam();
  ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().prefill(tc.variant));
  ASSERT_EQ(kernel->spec().prefillSchedule.mma, PrefillMma::Wgmma);
  // Where the plan splits keys, the whole-tile path is checked too.
  if (expectMatchesReference(tc, *kernel) > 0) {
    EXPECT_EQ(expectMatchesReference(tc, *kernel, /*splitKV=*/false), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Sm90, PrefillWgmmaGpuTest,
                         ::testing::ValuesIn(wgmmaCases()),
                         [](const auto &info) { return info.param.name; });

/// FP8 compute: every FP8 case at head dim 128 or 256, ragged and paged
/// (e4m3 and e5m2, per-tensor and per-head scales, pages of 8 to 64,
/// NHD/HND/interleaved, masks, modifiers, sinks, LSE, subnormal caches), with
/// one consumer warpgroup on a few, and a few of its own.
std::vector<PrefillCase> fp8ComputeCases() {
  std::vector<PrefillCase> out;
  for (PrefillCase c : cases()) {
    const PrefillVariant &v = c.variant;
    const bool fp8Cache =
        v.paged && sizeOf(v.paged->kvType) == 1 && v.paged->pageSize % 8 == 0;
    if (!(fp8Cache || v.fp8KV) || v.headDim < 128)
      continue;
    c.variant.fp8Compute = true;
    c.name += "_fp8mma";
    out.push_back(c);
    if (c.name == "paged_bf16_e4m3_p16_lse_fp8mma") {
      c.variant.schedule = wgmmaSchedule(1, 128);
      c.name += "_m64";
      out.push_back(c);
    }
  }
  using S = ScalarType;
  // Unmasked long keys (many tiles, no tail) and a bf16 window over
  // 32-token HND pages with per-head scales.
  auto e = paged(cross(base(S::BF16, 16, 4, 128)), S::F8E4M3, 16);
  e.fp8Compute = true;
  e.writeLse = true;
  out.push_back(
      {"paged_bf16_e4m3_p16_cross_long_lse_fp8mma", e, {64, 5}, {8192, 4096}});
  auto w = paged(base(S::BF16, 16, 2, 256), S::F8E4M3, 32, KVLayout::HND, true);
  w.fp8Compute = true;
  w.windowLeft = 500;
  out.push_back({"paged_bf16_e4m3_p32_hnd_d256_window_headscale_fp8mma",
                 w,
                 {300, 17},
                 {2000, 900}});
  return out;
}

/// FP8 compute over an e4m3 q the caller quantized (fp8Query: one scale
/// per q head, as vLLM's quantized query): the cases above whose token
/// strides TMA can read in e4m3 (multiples of 16 elements).
std::vector<PrefillCase> fp8QueryCases() {
  std::vector<PrefillCase> out;
  for (PrefillCase c : fp8ComputeCases()) {
    if (c.extraTokenStride % 16)
      continue;
    c.variant.fp8Query = true;
    c.name += "_q8";
    out.push_back(c);
    // Packed q heads read the scales per row.
    if (wgmmaPackable(c.variant)) {
      c.variant.schedule =
          wgmmaSchedule(2, c.variant.headDim == 256 ? 64 : 128);
      c.variant.schedule->packGqa = true;
      c.name += "_packed";
      out.push_back(c);
    }
  }
  return out;
}

class PrefillFP8ComputeGpuTest : public ::testing::TestWithParam<PrefillCase> {
};

TEST_P(PrefillFP8ComputeGpuTest, MatchesReference) {
  ATTN_REQUIRE_SM90A();
  const PrefillCase &tc = GetParam();
  ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().prefill(tc.variant));
  ASSERT_TRUE(kernel->spec().fp8Compute);
  ASSERT_EQ(kernel->spec().prefillSchedule.mma, PrefillMma::Wgmma);
  expectMatchesReference(tc, *kernel);
}

INSTANTIATE_TEST_SUITE_P(Sm90, PrefillFP8ComputeGpuTest,
                         ::testing::ValuesIn(fp8ComputeCases()),
                         [](const auto &info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(Sm90Query, PrefillFP8ComputeGpuTest,
                         ::testing::ValuesIn(fp8QueryCases()),
                         [](const auto &info) { return info.param.name; });

/// FP8 compute's error does not grow with the key count: 8 query rows
/// against 1k to 128k keys of an e4m3 cache, with N(0, 1) q (logits O(1))
/// and N(0, 4^2) q (a few large logits, needles, among many small ones),
/// against the fp64 reference. Printed beside the same check of the bf16
/// cache (16-bit MMAs) and of FP8 compute with O accumulated inside the
/// MMA across tiles (one level, ATTN_SM90_ABLATE's kAblateOneLevel): the
/// figures of docs/perf-log/history.md, "FP8 compute".
TEST(PrefillFP8ComputeGpuTest, ErrorDoesNotGrowWithLength) {
  ATTN_REQUIRE_SM90A();
  runtime::KernelCache::Options cacheOptions;
  cacheOptions.useDisk = false;
  cacheOptions.nvrtc.defines = {"ATTN_SM90_ABLATE=64"};
  runtime::KernelCache oneLevelCache(std::move(cacheOptions));
  Jit::Options jitOptions;
  jitOptions.cache = &oneLevelCache;
  Jit oneLevelJit(jitOptions);

  PrefillVariant fp8 =
      paged(cross(base(ScalarType::BF16, 4, 1, 128)), ScalarType::F8E4M3, 16);
  fp8.fp8Compute = true;
  PrefillVariant bf16 =
      paged(cross(base(ScalarType::BF16, 4, 1, 128)), ScalarType::BF16, 16);
  ATTN_ASSIGN_OR_FAIL(fp8Kernel, Jit::global().prefill(fp8));
  ATTN_ASSIGN_OR_FAIL(oneLevelKernel, oneLevelJit.prefill(fp8));
  ATTN_ASSIGN_OR_FAIL(bf16Kernel, Jit::global().prefill(bf16));
  for (double qStd : {1.0, 4.0}) {
    double first = 0;
    for (int keys : {1024, 8192, 32768, 131072}) {
      check::PrefillCheckOptions options;
      options.qLens = {8};
      options.kvLens = {keys};
      options.qStd = qStd;
      options.seed = uint32_t(keys);
      ATTN_ASSIGN_OR_FAIL(two, check::checkPrefill(*fp8Kernel, fp8, options));
      ATTN_ASSIGN_OR_FAIL(one,
                          check::checkPrefill(*oneLevelKernel, fp8, options));
      ATTN_ASSIGN_OR_FAIL(ref16,
                          check::checkPrefill(*bf16Kernel, bf16, options));
      std::printf(
          "[ fp8mma   ] q std %.0f, %6d keys: relative L2 error fp8 two-level "
          "%.3g, one-level %.3g, bf16 %.3g\n",
          qStd, keys, two.outError, one.outError, ref16.outError);
      if (keys == 1024)
        first = two.outError;
      EXPECT_LT(two.outError, 0.1) << keys << " keys, q std " << qStd;
      // Not growing with length: within 1.5x of the 1k error (plus noise).
      EXPECT_LT(two.outError, 1.5 * first + 2e-3)
          << keys << " keys, q std " << qStd;
    }
  }
}

/// Every case whose q heads the mma.sync template may pack per KV head
/// (grouped heads, no per-head values), pinned to a packed sync schedule,
/// and a few of its own: groups of 7 (a tile of 18 tokens of 126 rows) and
/// 32, decode-like rows over long keys (a cascade's shared level).
std::vector<PrefillCase> packedCases() {
  std::vector<PrefillCase> out;
  std::vector<PrefillCase> all = cases();
  {
    auto v = base(ScalarType::BF16, 14, 2, 128);
    v.writeLse = true;
    all.push_back({"bf16_gqa7_causal_lse", v, {1, 17, 300}, {}});
    all.push_back({"bf16_mqa32x1_window",
                   base(ScalarType::F16, 32, 1, 64),
                   {200, 5},
                   {900, 5}});
    all.back().variant.windowLeft = 100;
    auto c = paged(cross(base(ScalarType::BF16, 32, 8, 128)),
                   ScalarType::F8E4M3, 16);
    c.writeLse = true;
    all.push_back({"paged_bf16_e4m3_cross_short_rows_lse",
                   c,
                   {64, 4, 1},
                   {3000, 1024, 16}});
    all.back().kvScale = 0.05;
  }
  for (PrefillCase c : all) {
    const PrefillVariant &v = c.variant;
    if (v.numQHeads == v.numKVHeads || v.alibi || v.sinks ||
        !v.scoreMod.empty() || !v.maskMod.empty())
      continue;
    PrefillSchedule s;
    s.warps = 4;
    s.blockM = v.headDim <= 128 ? 128 : 64;
    s.blockN = v.headDim <= 128 ? 64 : 32;
    s.stages = 2;
    s.packGqa = true;
    c.variant.schedule = s;
    c.name += "_packed";
    out.push_back(c);
  }
  return out;
}

class PrefillPackGqaGpuTest : public ::testing::TestWithParam<PrefillCase> {};

TEST_P(PrefillPackGqaGpuTest, MatchesReference) {
  ATTN_REQUIRE_GPU();
  const PrefillCase &tc = GetParam();
  ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().prefill(tc.variant));
  ASSERT_TRUE(kernel->spec().prefillSchedule.packGqa);
  expectMatchesReference(tc, *kernel);
}

INSTANTIATE_TEST_SUITE_P(Sync, PrefillPackGqaGpuTest,
                         ::testing::ValuesIn(packedCases()),
                         [](const auto &info) { return info.param.name; });

/// Split-KV (sm_90a): few query tiles times heads over long keys, as a
/// tensor-parallel chunked prefill runs (8/1 heads), so the plan splits
/// each tile's keys across CTAs and merges them by LSE; causal and not,
/// ragged and paged, sinks (counted once) under a window, FP8 compute.
std::vector<PrefillCase> splitCases() {
  using S = ScalarType;
  std::vector<PrefillCase> out;
  auto v = paged(base(S::BF16, 8, 1, 128), S::BF16, 16);
  v.writeLse = true;
  out.push_back({"tp_chunk_paged_causal_lse", v, {256}, {20000}});
  auto c = cross(base(S::F16, 8, 2, 64));
  c.writeLse = true;
  out.push_back({"cross_d64_lse", c, {100, 1, 64}, {6000, 9000, 100}});
  auto w = base(S::BF16, 8, 1, 128);
  w.sinks = true;
  w.windowLeft = 3000;
  w.writeLse = true;
  out.push_back({"sinks_window_lse", w, {200, 64}, {9000, 5000}});
  auto f = paged(base(S::BF16, 8, 2, 128), S::F8E4M3, 16);
  f.fp8Compute = true;
  f.writeLse = true;
  out.push_back({"paged_e4m3_fp8mma_lse", f, {128, 3}, {8000, 4000}});
  auto d = base(S::BF16, 4, 1, 256);
  d.softcap = 30.f;
  out.push_back({"d256_softcap", d, {64}, {7000}});
  return out;
}

/// The split cases again with packed q heads, where the variant allows.
std::vector<PrefillCase> packedSplitCases() {
  std::vector<PrefillCase> out;
  for (PrefillCase c : splitCases())
    if (wgmmaPackable(c.variant)) {
      c.name += "_packed";
      out.push_back(c);
    }
  return out;
}

class PrefillSplitGpuTest : public ::testing::TestWithParam<PrefillCase> {};

TEST_P(PrefillSplitGpuTest, MatchesReference) {
  ATTN_REQUIRE_SM90A();
  PrefillCase tc = GetParam();
  tc.variant.schedule = wgmmaSchedule(2, tc.variant.headDim == 256 ? 64 : 128);
  tc.variant.schedule->packGqa = llvm::StringRef(tc.name).ends_with("_packed");
  ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().prefill(tc.variant));
  EXPECT_GT(expectMatchesReference(tc, *kernel), 0) << "the plan split nothing";
}

INSTANTIATE_TEST_SUITE_P(Sm90, PrefillSplitGpuTest,
                         ::testing::ValuesIn(splitCases()),
                         [](const auto &info) { return info.param.name; });
INSTANTIATE_TEST_SUITE_P(Sm90Packed, PrefillSplitGpuTest,
                         ::testing::ValuesIn(packedSplitCases()),
                         [](const auto &info) { return info.param.name; });

// Split items in replays of a graph: the merge counters must be back at
// zero after every launch.
TEST(PrefillSplitGpuTest, GraphReplaysMatchReference) {
  ATTN_REQUIRE_SM90A();
  PrefillVariant v =
      paged(base(ScalarType::BF16, 8, 1, 128), ScalarType::BF16, 16);
  v.writeLse = true;
  for (bool pack : {false, true}) {
    v.schedule = wgmmaSchedule(2, 128);
    v.schedule->packGqa = pack;
    ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().prefill(v));
    check::PrefillCheckOptions options;
    options.qLens = {256, 5};
    options.kvLens = {12000, 3000};
    options.graphReplays = 3;
    ATTN_ASSIGN_OR_FAIL(result, check::checkPrefill(*kernel, v, options));
    EXPECT_GT(result.splitItems, 0) << "packed: " << pack;
    EXPECT_LT(result.outError, 1e-2) << "packed: " << pack;
    EXPECT_LT(result.lseError, 2e-3) << "packed: " << pack;
  }
}

// Batch invariance: a paged prefill chunk (64 new rows over 12000 cached
// keys, which the default plan splits when the GPU is otherwise idle) gives
// the same output bytes alone and inside random batches, direct or replayed;
// with the knob off some batch changes them (the test can fail).
TEST(PrefillBatchInvarianceGpuTest, AChunkGivesTheSameBitsInAnyBatch) {
  ATTN_REQUIRE_SM90A();
  for (bool invariant : {true, false}) {
    SCOPED_TRACE(invariant ? "batch_invariant" : "default");
    PrefillVariant v =
        paged(base(ScalarType::BF16, 8, 1, 128), ScalarType::BF16, 16);
    v.batchInvariant = invariant;
    ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().prefill(v));
    const size_t rowBytes = size_t(v.numQHeads) * v.headDim * 2;
    auto bytesOf = [&](const std::vector<int> &qLens,
                       const std::vector<int> &kvLens, int at, uint32_t seed,
                       int replays) {
      check::PrefillCheckOptions o;
      o.qLens = qLens;
      o.kvLens = kvLens;
      o.pinnedRequest = at;
      o.pinnedSeed = 77;
      o.seed = seed;
      o.graphReplays = replays;
      auto r = check::checkPrefill(*kernel, v, o);
      EXPECT_TRUE(bool(r)) << llvm::toString(r.takeError());
      if (!r)
        return std::vector<uint8_t>();
      EXPECT_LT(r->outError, 1e-2);
      size_t first = 0;
      for (int b = 0; b < at; ++b)
        first += size_t(qLens[b]) * rowBytes;
      return std::vector<uint8_t>(r->outBytes.begin() + first,
                                  r->outBytes.begin() + first +
                                      size_t(qLens[at]) * rowBytes);
    };
    const std::vector<uint8_t> alone = bytesOf({64}, {12000}, 0, 1, 0);
    std::mt19937 rng(9);
    int differ = 0;
    for (int trial = 0; trial < 8; ++trial) {
      const int batch = 1 + int(rng() % 24), at = int(rng() % batch);
      std::vector<int> qLens, kvLens;
      for (int b = 0; b < batch; ++b) {
        const int q = b == at ? 64 : 1 + int(rng() % 300);
        qLens.push_back(q);
        kvLens.push_back(b == at ? 12000 : q + int(rng() % 3000));
      }
      std::vector<uint8_t> got =
          bytesOf(qLens, kvLens, at, 20 + trial, trial % 2 ? 2 : 0);
      if (invariant) {
        EXPECT_EQ(got, alone) << "batch " << batch << ", at " << at;
      }
      differ += got != alone;
    }
    if (!invariant) {
      EXPECT_GT(differ, 0) << "the default plan gave the same bits in every "
                              "batch: this test could not fail";
    }
  }
}

/// Three replays of one graph of `v` (with LSE), planned for graphs, against
/// the fp64 reference.
void expectGraphReplaysMatchReference(const PrefillVariant &v) {
  ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().prefill(v));
  check::PrefillCheckOptions options;
  options.qLens = {3000, 1, 200};
  options.graphReplays = 3;
  ATTN_ASSIGN_OR_FAIL(result, check::checkPrefill(*kernel, v, options));
  EXPECT_LT(result.outError, 1e-2);
  EXPECT_LT(result.lseError, 2e-3);
}

// The wgmma path in a captured graph planned for graphs (grid = capacity).
TEST(PrefillGraphGpuTest, WgmmaReplaysMatchReference) {
  ATTN_REQUIRE_SM90A();
  PrefillVariant v = base(ScalarType::BF16, 32, 8, 128);
  v.writeLse = true;
  v.schedule = wgmmaSchedule(2, 128);
  expectGraphReplaysMatchReference(v);
}

// Replays of one captured graph planned for graphs: the grid is the
// workspace capacity, so CTAs past the tile count must exit without writing,
// and every replay must rewrite the (re-poisoned) out and LSE.
TEST(PrefillGraphGpuTest, ReplaysMatchReference) {
  ATTN_REQUIRE_GPU();
  PrefillVariant v = base(ScalarType::BF16, 32, 8, 128);
  v.writeLse = true;
  expectGraphReplaysMatchReference(v);
}

// The same for a paged FP8 prefill.
TEST(PrefillGraphGpuTest, PagedReplaysMatchReference) {
  ATTN_REQUIRE_GPU();
  PrefillVariant v =
      paged(base(ScalarType::BF16, 32, 8, 128), ScalarType::F8E4M3, 16);
  v.writeLse = true;
  ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().prefill(v));
  check::PrefillCheckOptions options;
  options.qLens = {300, 1, 200};
  options.kvLens = {3000, 50, 200};
  options.graphReplays = 3;
  ATTN_ASSIGN_OR_FAIL(result, check::checkPrefill(*kernel, v, options));
  EXPECT_LT(result.outError, 1e-2);
  EXPECT_LT(result.lseError, 2e-3);
}

// One kernel and one workspace serve batches of different shapes in turn:
// each plan must replace the previous one's tiles (a smaller batch after a
// larger one leaves stale tiles behind in the device list).
TEST(PrefillReuseGpuTest, WorkspaceIsReusedAcrossBatches) {
  ATTN_REQUIRE_GPU();
  PrefillVariant v = base(ScalarType::F16, 8, 2, 64);
  ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().prefill(v));
  ATTN_ASSIGN_OR_FAIL(again, Jit::global().prefill(v));
  EXPECT_EQ(kernel.get(), again.get()) << "the JIT should memoize the kernel";
  ATTN_ASSIGN_OR_FAIL(workspace, kernel->createWorkspace(8, 4096));
  for (std::vector<int> lens :
       {std::vector<int>{1000, 2000}, std::vector<int>{1, 2, 3},
        std::vector<int>{129, 64, 65}}) {
    check::PrefillCheckOptions options;
    options.qLens = lens;
    options.workspace = &workspace;
    ATTN_ASSIGN_OR_FAIL(result, check::checkPrefill(*kernel, v, options));
    EXPECT_LT(result.outError, 4e-3) << lens.size() << " requests";
  }
}

} // namespace

namespace {

/// A small valid setup whose arguments each test breaks in one way: bf16,
/// 8 q heads over 2 KV heads, head dim 64, causal, no LSE, no ALiBi.
class PrefillArgsGpuTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (llvm::Error err = runtime::initCuda())
      GTEST_SKIP() << "no GPU: " << llvm::toString(std::move(err));
    variant = base(ScalarType::BF16, 8, 2, 64);
    auto k = Jit::global().prefill(variant);
    ASSERT_TRUE(bool(k)) << llvm::toString(k.takeError());
    kernel = *k;
    auto ws = kernel->createWorkspace(/*maxBatch=*/4, /*maxQTokens=*/1024);
    ASSERT_TRUE(bool(ws)) << llvm::toString(ws.takeError());
    workspace = std::make_unique<runtime::PrefillWorkspace>(std::move(*ws));
    // Any non-null device address passes the argument checks; run() is
    // never reached with broken arguments.
    auto buf = runtime::DeviceBuffer::allocate(1 << 20);
    ASSERT_TRUE(bool(buf)) << llvm::toString(buf.takeError());
    buffer = std::move(*buf);
    args = validArgs(buffer.ptr<void>());
  }

  static runtime::PrefillArgs validArgs(void *p) {
    runtime::PrefillArgs a;
    a.q = a.k = a.v = a.out = p;
    a.dtype = ScalarType::BF16;
    a.numQTokens = 40; // two requests of 20 queries over 20 keys
    a.numKVTokens = 40;
    a.numQHeads = 8;
    a.numKVHeads = 2;
    a.headDim = 64;
    return a;
  }

  /// Plans two requests of 20 queries and 20 keys, then expects checkArgs
  /// to reject `a` with a message holding every one of `fragments` (the
  /// values at fault, so the exact wording stays the runtime's choice).
  void expectRejected(const runtime::PrefillKernel &k,
                      runtime::PrefillWorkspace &ws,
                      const runtime::PrefillArgs &a,
                      std::initializer_list<const char *> fragments) {
    std::vector<int32_t> cu = {0, 20, 40};
    auto plan = k.plan(cu, cu, ws, nullptr);
    ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
    llvm::Error err = k.checkArgs(*plan, a);
    ASSERT_TRUE(bool(err)) << "accepted bad arguments (" << *fragments.begin()
                           << ")";
    std::string message = llvm::toString(std::move(err));
    for (const char *fragment : fragments)
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "'" << fragment << "' not in: " << message;
  }
  void expectRejected(std::initializer_list<const char *> fragments) {
    expectRejected(*kernel, *workspace, args, fragments);
  }

  /// plan() must fail on these offsets with a message holding every one of
  /// `fragments`: the array at fault and the bad offset's index (as
  /// "cu_seqlens_q[2]" or "cu_seqlens_q[1..2]"), not just "bad offsets".
  void expectPlanRejected(std::vector<int32_t> cuQ, std::vector<int32_t> cuKV,
                          std::initializer_list<const char *> fragments) {
    auto plan = kernel->plan(cuQ, cuKV, *workspace, nullptr);
    ASSERT_FALSE(bool(plan))
        << "planned bad offsets (" << *fragments.begin() << ")";
    std::string message = llvm::toString(plan.takeError());
    for (const char *fragment : fragments)
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "'" << fragment << "' not in: " << message;
  }

  PrefillVariant variant;
  std::shared_ptr<const runtime::PrefillKernel> kernel;
  std::unique_ptr<runtime::PrefillWorkspace> workspace;
  runtime::DeviceBuffer buffer;
  runtime::PrefillArgs args;
};

TEST_F(PrefillArgsGpuTest, AcceptsMatchingArguments) {
  std::vector<int32_t> cu = {0, 20, 40};
  ATTN_ASSIGN_OR_FAIL(plan, kernel->plan(cu, cu, *workspace, nullptr));
  EXPECT_EQ(plan.batch, 2);
  EXPECT_EQ(plan.numQTokens, 40);
  EXPECT_EQ(plan.numKVTokens, 40);
  EXPECT_GT(plan.gridX, 0);
  ATTN_ASSERT_OK(kernel->checkArgs(plan, args));
}

TEST_F(PrefillArgsGpuTest, RejectsWrongQHeads) {
  args.numQHeads = 16;
  expectRejected({"16", "heads"});
}

TEST_F(PrefillArgsGpuTest, RejectsWrongKVHeads) {
  args.numKVHeads = 4;
  expectRejected({"4", "heads"});
}

TEST_F(PrefillArgsGpuTest, RejectsWrongHeadDim) {
  args.headDim = 128;
  expectRejected({"128"});
}

TEST_F(PrefillArgsGpuTest, RejectsWrongDtype) {
  args.dtype = ScalarType::F16;
  expectRejected({"f16", "bf16"});
}

TEST_F(PrefillArgsGpuTest, RejectsNullBuffers) {
  for (int which = 0; which < 4; ++which) {
    args = validArgs(buffer.ptr<void>());
    const char *names[] = {"q", "k", "v", "out"};
    SCOPED_TRACE(names[which]);
    if (which == 0)
      args.q = nullptr;
    else if (which == 1)
      args.k = nullptr;
    else if (which == 2)
      args.v = nullptr;
    else
      args.out = nullptr;
    expectRejected({"must not be null"});
  }
}

TEST_F(PrefillArgsGpuTest, RejectsMisalignedBuffers) {
  // The kernels move rows in 16-byte pieces: a misaligned address would
  // fault on the GPU.
  auto shifted = [](const void *p, int bytes) {
    return static_cast<const char *>(p) + bytes;
  };
  args.k = shifted(args.k, 8);
  expectRejected({"k must be 16-byte aligned"});
  args = validArgs(buffer.ptr<void>());
  args.out = const_cast<char *>(shifted(args.out, 2));
  expectRejected({"out must be 16-byte aligned"});
}

TEST_F(PrefillArgsGpuTest, RejectsTokenCountsNotMatchingPlan) {
  args.numQTokens = 41;
  expectRejected({"41"});
  args = validArgs(buffer.ptr<void>());
  args.numKVTokens = 39;
  expectRejected({"39"});
}

TEST_F(PrefillArgsGpuTest, RejectsLseTheVariantDoesNotWrite) {
  args.lse = buffer.ptr<float>();
  expectRejected({"lse"});
}

TEST_F(PrefillArgsGpuTest, RejectsMissingLse) {
  PrefillVariant v = variant;
  v.writeLse = true;
  ATTN_ASSIGN_OR_FAIL(lseKernel, Jit::global().prefill(v));
  ATTN_ASSIGN_OR_FAIL(ws, lseKernel->createWorkspace(4, 1024));
  expectRejected(*lseKernel, ws, args, {"lse"});
  runtime::PrefillArgs withLse = args;
  withLse.lse = buffer.ptr<float>();
  std::vector<int32_t> cu = {0, 20, 40};
  ATTN_ASSIGN_OR_FAIL(plan, lseKernel->plan(cu, cu, ws, nullptr));
  ATTN_ASSERT_OK(lseKernel->checkArgs(plan, withLse));
}

TEST_F(PrefillArgsGpuTest, RejectsAlibiSlopesTheVariantDoesNotUse) {
  args.alibiSlopes = buffer.ptr<float>();
  expectRejected({"alibiSlopes"});
}

TEST_F(PrefillArgsGpuTest, PlanRejectsOffsetsNotStartingAtZero) {
  expectPlanRejected({1, 20, 40}, {0, 20, 40}, {"cu_seqlens_q[0]"});
  expectPlanRejected({0, 20, 40}, {5, 20, 40}, {"cu_seqlens_kv[0]"});
}

TEST_F(PrefillArgsGpuTest, PlanRejectsDecreasingOffsets) {
  expectPlanRejected({0, 30, 20}, {0, 20, 40}, {"cu_seqlens_q[", "2]"});
  expectPlanRejected({0, 20, 40}, {0, 20, 10}, {"cu_seqlens_kv[", "2]"});
}

TEST_F(PrefillArgsGpuTest, PlanRejectsMismatchedBatch) {
  expectPlanRejected({0, 20, 40}, {0, 40}, {"cu_seqlens"});
}

// The workspace holds maxQTokens / blockM + maxBatch tiles (20 here); a
// batch needing more, through long requests or many short ones, must be
// refused rather than overrun the device tile list.
TEST_F(PrefillArgsGpuTest, PlanRejectsBatchOverWorkspace) {
  expectPlanRejected({0, 2000}, {0, 2000}, {"workspace"});
  // One-token requests, a tile each: one more than the 1024 tokens' tiles
  // and one partial tile per request of the 4 the workspace holds.
  const int requests = 1024 / kernel->spec().prefillTileTokens() + 4 + 1;
  std::vector<int32_t> many(requests + 1);
  for (int i = 0; i <= requests; ++i)
    many[i] = i;
  expectPlanRejected(many, many, {"workspace"});
}

} // namespace

namespace {

/// Argument checks of a paged prefill: bf16 q over an e4m3 cache, 8 q heads
/// over 2 KV heads, head dim 64, page 16, NHD, per-tensor scales.
class PagedPrefillArgsGpuTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (llvm::Error err = runtime::initCuda())
      GTEST_SKIP() << "no GPU: " << llvm::toString(std::move(err));
    variant = paged(base(ScalarType::BF16, 8, 2, 64), ScalarType::F8E4M3, 16);
    auto k = Jit::global().prefill(variant);
    ASSERT_TRUE(bool(k)) << llvm::toString(k.takeError());
    kernel = *k;
    auto ws = kernel->createWorkspace(4, 1024);
    ASSERT_TRUE(bool(ws)) << llvm::toString(ws.takeError());
    workspace = std::make_unique<runtime::PrefillWorkspace>(std::move(*ws));
    auto buf = runtime::DeviceBuffer::allocate(1 << 20);
    ASSERT_TRUE(bool(buf)) << llvm::toString(buf.takeError());
    buffer = std::move(*buf);
    void *p = buffer.ptr<void>();
    args.q = args.out = p;
    args.qType = ScalarType::BF16;
    args.numQTokens = 40; // two requests of 20 new rows over 100 cached tokens
    args.numQHeads = 8;
    args.headDim = 64;
    args.cache = {p, p, ScalarType::F8E4M3, 2, 64, 16, KVLayout::NHD, 64, 0};
    args.pageTables = buffer.ptr<int32_t>();
    args.pageTableStride = 7; // ceil(100 / 16)
    args.kScale = args.vScale = buffer.ptr<float>();
    args.numKVScales = 1;
  }

  void expectRejected(std::initializer_list<const char *> fragments) {
    std::vector<int32_t> cuQ = {0, 20, 40}, seqLens = {100, 100};
    auto plan = kernel->planPaged(cuQ, seqLens, *workspace, nullptr);
    ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
    llvm::Error err = kernel->checkArgs(*plan, args);
    ASSERT_TRUE(bool(err)) << "accepted bad arguments (" << *fragments.begin()
                           << ")";
    std::string message = llvm::toString(std::move(err));
    for (const char *fragment : fragments)
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "'" << fragment << "' not in: " << message;
  }

  PrefillVariant variant;
  std::shared_ptr<const runtime::PrefillKernel> kernel;
  std::unique_ptr<runtime::PrefillWorkspace> workspace;
  runtime::DeviceBuffer buffer;
  runtime::PagedPrefillArgs args;
};

TEST_F(PagedPrefillArgsGpuTest, AcceptsMatchingArguments) {
  std::vector<int32_t> cuQ = {0, 20, 40}, seqLens = {100, 100};
  ATTN_ASSIGN_OR_FAIL(plan,
                      kernel->planPaged(cuQ, seqLens, *workspace, nullptr));
  EXPECT_EQ(plan.maxKVLen, 100);
  ATTN_ASSERT_OK(kernel->checkArgs(plan, args));
}

TEST_F(PagedPrefillArgsGpuTest, RejectsMissingScales) {
  args.vScale = nullptr;
  expectRejected({"kScale and vScale"});
}

TEST_F(PagedPrefillArgsGpuTest, RejectsCacheOfAnotherFormat) {
  args.cache.dtype = ScalarType::BF16;
  expectRejected({"bf16", "e4m3"});
  args.cache.dtype = ScalarType::F8E4M3;
  args.cache.pageSize = 32;
  expectRejected({"page 32", "page 16"});
}

TEST_F(PagedPrefillArgsGpuTest, RejectsShortBlockTable) {
  args.pageTableStride = 6;
  expectRejected({"100 tokens", "7 pages", "6"});
}

TEST_F(PagedPrefillArgsGpuTest, RejectsMisalignedCache) {
  args.cache.v = static_cast<const char *>(args.cache.v) + 4;
  expectRejected({"cache.v must be 16-byte aligned"});
}

TEST_F(PagedPrefillArgsGpuTest, RejectsNullCache) {
  args.cache.k = nullptr;
  expectRejected({"must not be null"});
}

TEST_F(PagedPrefillArgsGpuTest, PlanRejectsSeqLensBelowNewRows) {
  std::vector<int32_t> cuQ = {0, 20, 40}, seqLens = {100, 19};
  auto plan = kernel->planPaged(cuQ, seqLens, *workspace, nullptr);
  ASSERT_FALSE(bool(plan));
  std::string message = llvm::toString(plan.takeError());
  EXPECT_NE(message.find("seq_lens[1] = 19"), std::string::npos) << message;
}

TEST_F(PagedPrefillArgsGpuTest, PlanRejectsWrongBatch) {
  std::vector<int32_t> cuQ = {0, 20, 40}, seqLens = {100};
  auto plan = kernel->planPaged(cuQ, seqLens, *workspace, nullptr);
  ASSERT_FALSE(bool(plan));
  EXPECT_NE(llvm::toString(plan.takeError()).find("1 seq_lens"),
            std::string::npos);
}

TEST_F(PagedPrefillArgsGpuTest, RaggedEntryPointsRefusePagedKernel) {
  std::vector<int32_t> cu = {0, 20, 40};
  auto plan = kernel->plan(cu, cu, *workspace, nullptr);
  ASSERT_FALSE(bool(plan));
  EXPECT_NE(llvm::toString(plan.takeError()).find("planPaged"),
            std::string::npos);
}

} // namespace
