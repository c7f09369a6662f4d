//===- NvrtcMatrixTest.cpp - every kernel variant compiles with NVRTC -----===//
//
// The compile matrix: decode, append-KV, ragged- and paged-prefill variants
// across head dims, dtypes, head ratios, page sizes, layouts, masks and feature
// flags go through the real JIT path (variant -> attn IR -> attn-pipeline ->
// CUDA C++ -> NVRTC) for sm_80, sm_89 and sm_90a. NVRTC needs no GPU, so
// this runs in CI. Each case checks that the cubin is an ELF image holding
// the kernel's entry points (and, for prefill, that the spec is the variant's).
//
//===----------------------------------------------------------------------===//
#include "codegen/EmitCuda.h"
#include "compiler/Jit/Jit.h"
#include "test/reference/Modifiers.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace attn;

namespace attn {
/// Test names and failure messages show the arch by name.
inline void PrintTo(Arch arch, std::ostream *os) { *os << toString(arch); }
} // namespace attn

namespace {

struct MatrixCase {
  std::string name;
  std::optional<DecodeVariant> decode;
  std::optional<AppendKVVariant> append;
  std::optional<PrefillVariant> prefill;
  std::optional<MergeStatesVariant> merge;
  std::optional<MlaDecodeVariant> mla;
};

std::vector<MatrixCase> matrixCases() {
  using S = ScalarType;
  std::vector<MatrixCase> cases;
  auto addDecode = [&](std::string name, DecodeVariant v) {
    cases.push_back({std::move(name), v, std::nullopt, std::nullopt});
  };
  auto addPrefill = [&](std::string name, PrefillVariant v) {
    cases.push_back({std::move(name), std::nullopt, std::nullopt, v});
  };
  // Every head dim the kernels document, for each q/cache dtype pairing.
  struct Types {
    const char *name;
    S q, kv;
  };
  for (Types t : {Types{"bf16", S::BF16, S::BF16}, Types{"f16", S::F16, S::F16},
                  Types{"bf16_e4m3", S::BF16, S::F8E4M3},
                  Types{"f16_e5m2", S::F16, S::F8E5M2}})
    for (int d : {64, 80, 96, 112, 128, 192, 256}) {
      DecodeVariant v;
      v.qType = t.q;
      v.kvType = t.kv;
      v.headDim = d;
      addDecode(std::string("decode_") + t.name + "_d" + std::to_string(d), v);
    }
  // Head ratios, page sizes and layouts.
  for (auto [hq, hkv] : {std::pair{32, 32}, std::pair{64, 1}, std::pair{8, 2}})
    for (int page : {1, 8, 32, 64, 128}) {
      DecodeVariant v;
      v.numQHeads = hq;
      v.numKVHeads = hkv;
      v.pageSize = page;
      v.layout = page % 16 ? KVLayout::HND : KVLayout::NHD;
      addDecode("decode_h" + std::to_string(hq) + "x" + std::to_string(hkv) +
                    "_p" + std::to_string(page),
                v);
    }
  // Feature flags, alone and together.
  {
    DecodeVariant v;
    v.windowLeft = 1024;
    v.alibi = true;
    v.softcap = 30.f;
    v.writeLse = true;
    v.queryLen = 4;
    addDecode("decode_all_features", v);
    v.kvType = S::F8E4M3;
    v.perHeadKVScale = true;
    v.headDim = 40; // 8-byte FP8 rows
    addDecode("decode_all_features_e4m3_d40", v);
  }
  for (S kv : {S::BF16, S::F8E4M3, S::F8E5M2})
    for (KVLayout layout : {KVLayout::NHD, KVLayout::HND}) {
      AppendKVVariant v;
      v.kvType = kv;
      v.layout = layout;
      v.perHeadKVScale = kv != S::BF16;
      cases.push_back({std::string("append_") + std::string(toString(kv)) +
                           "_" + std::string(toString(layout)),
                       std::nullopt, v, std::nullopt});
    }

  // merge_states: each dtype, and head dims whose rows fill a warp's lanes
  // exactly (64, 256) or not (40, 96).
  for (S dtype : {S::F16, S::BF16, S::F32})
    for (int d : {40, 64, 96, 128, 256}) {
      MergeStatesVariant v;
      v.dtype = dtype;
      v.numHeads = 8;
      v.headDim = d;
      cases.push_back(
          {"merge_" + std::string(toString(dtype)) + "_d" + std::to_string(d),
           std::nullopt, std::nullopt, std::nullopt, v});
    }

  // MLA decode: DeepSeek's 512 + 64 and the smaller 256 + 64, NoPE MLA,
  // e4m3 caches, page sizes 1 and 64, multi-token causal rows with LSE.
  auto addMla = [&](std::string name, MlaDecodeVariant v) {
    MatrixCase c;
    c.name = "mla_" + std::move(name);
    c.mla = v;
    cases.push_back(std::move(c));
  };
  for (S q : {S::F16, S::BF16})
    for (S kv : {q, S::F8E4M3}) {
      MlaDecodeVariant v;
      v.qType = q;
      v.kvType = kv;
      std::string types =
          std::string(toString(q)) + "_" + std::string(toString(kv));
      addMla(types + "_r512_64", v);
      v.kvLoraRank = 256;
      v.pageSize = 1;
      addMla(types + "_r256_64_p1", v);
      v.kvLoraRank = 512;
      v.ropeDim = 0;
      v.numQHeads = 128;
      addMla(types + "_r512_nope_h128", v);
    }
  {
    MlaDecodeVariant v;
    v.queryLen = 4;
    v.causal = true;
    v.writeLse = true;
    addMla("bf16_mtp4_causal_lse", v);
  }

  // Prefill: every head dim for both dtypes, causal (the default) and
  // bidirectional, then head ratios, masks and every flag together.
  for (S dtype : {S::BF16, S::F16})
    for (int d : {64, 80, 96, 112, 128, 192, 256})
      for (bool causal : {true, false}) {
        PrefillVariant v;
        v.qType = dtype;
        v.headDim = d;
        v.causal = causal;
        if (!causal)
          v.kind = AttentionKind::Encoder;
        addPrefill(std::string("prefill_") + std::string(toString(dtype)) +
                       "_d" + std::to_string(d) +
                       (causal ? "_causal" : "_encoder"),
                   v);
      }
  // MLA's prefill: q/k of head_dim + rope_dim, v of head_dim.
  for (auto [d, rope] : {std::pair{128, 64}, std::pair{64, 32}}) {
    PrefillVariant v;
    v.numQHeads = v.numKVHeads = 16;
    v.headDim = d;
    v.ropeDim = rope;
    v.writeLse = true;
    addPrefill("prefill_mla_qk" + std::to_string(d + rope) + "_v" +
                   std::to_string(d),
               v);
  }
  for (auto [hq, hkv] : {std::pair{32, 32}, std::pair{32, 8}, std::pair{8, 1},
                         std::pair{64, 1}}) {
    PrefillVariant v;
    v.numQHeads = hq;
    v.numKVHeads = hkv;
    addPrefill("prefill_h" + std::to_string(hq) + "x" + std::to_string(hkv), v);
  }
  {
    PrefillVariant v;
    v.causal = false;
    v.kind = AttentionKind::Cross;
    addPrefill("prefill_cross", v);
  }
  {
    PrefillVariant v;
    v.windowLeft = 4096;
    v.alibi = true;
    v.softcap = 30.f;
    v.scale = 0.1f;
    v.writeLse = true;
    addPrefill("prefill_all_features", v);
    v.qType = S::F16;
    v.headDim = 256;
    v.numKVHeads = 1;
    addPrefill("prefill_all_features_f16_d256_mqa", v);
    v.causal = false;
    v.kind = AttentionKind::Encoder;
    v.windowLeft.reset();
    addPrefill("prefill_all_features_encoder", v);
  }

  // Paged prefill: every head dim over a cache of q's type and an e4m3
  // cache, then page sizes, layouts, e5m2 with per-head scales (and a head
  // dim whose FP8 rows take 8-byte copies) and every flag together.
  for (Types t : {Types{"bf16", S::BF16, S::BF16},
                  Types{"bf16_e4m3", S::BF16, S::F8E4M3}})
    for (int d : {64, 80, 96, 112, 128, 192, 256}) {
      PrefillVariant v;
      v.qType = t.q;
      v.headDim = d;
      v.paged = PagedKVFormat{t.kv, 16, KVLayout::NHD, false};
      addPrefill(
          std::string("paged_prefill_") + t.name + "_d" + std::to_string(d), v);
    }
  for (auto [pageSize, layout] :
       {std::pair{1, KVLayout::HND}, std::pair{32, KVLayout::HND},
        std::pair{256, KVLayout::NHD}}) {
    PrefillVariant v;
    v.qType = S::F16;
    v.paged = PagedKVFormat{S::F16, pageSize, layout, false};
    addPrefill("paged_prefill_f16_p" + std::to_string(pageSize) + "_" +
                   std::string(toString(layout)),
               v);
  }
  {
    PrefillVariant v;
    v.qType = S::F16;
    v.headDim = 72;
    v.paged = PagedKVFormat{S::F8E5M2, 16, KVLayout::HND, true};
    addPrefill("paged_prefill_f16_e5m2_headscale_d72", v);
    v.headDim = 128;
    v.windowLeft = 4096;
    v.alibi = true;
    v.softcap = 30.f;
    v.writeLse = true;
    addPrefill("paged_prefill_all_features_e5m2", v);
    v.causal = false;
    v.kind = AttentionKind::Cross;
    v.windowLeft.reset();
    addPrefill("paged_prefill_cross_e5m2", v);
  }
  // Ragged FP8 k/v: an odd head dim (8-byte rows) and every feature.
  {
    PrefillVariant v;
    v.qType = S::F16;
    v.headDim = 72;
    v.fp8KV = FP8RowsFormat{S::F8E4M3, true};
    addPrefill("prefill_f16_e4m3_headscale_d72", v);
    v.headDim = 128;
    v.fp8KV = FP8RowsFormat{S::F8E5M2, false};
    v.windowLeft = 4096;
    v.alibi = true;
    v.softcap = 30.f;
    v.writeLse = true;
    addPrefill("prefill_all_features_e5m2", v);
  }

  // Programmable modifiers (a score_mod with math and an aux table, a
  // mask_mod with an aux table, and a score_mod with a mask_mod) in decode,
  // ragged prefill (head dims 96 and 128: mma.sync, and wgmma on sm_90a)
  // and paged prefill.
  {
    std::mt19937 rng(1);
    check::TestModifiers bias = check::t5Bias(rng, 32);
    check::TestModifiers docs = check::documentMask(rng, {100, 50});
    check::TestModifiers softcap = check::softcapRegion(30.0);
    check::TestModifiers chunked = check::chunkedLocal(1024);
    for (const check::TestModifiers *m : {&bias, &docs}) {
      DecodeVariant d;
      d.scoreMod = m->scoreMod;
      d.maskMod = m->maskMod;
      addDecode("decode_" + m->name, d);
      d.kvType = S::F8E4M3;
      d.queryLen = 4;
      addDecode("decode_e4m3_ql4_" + m->name, d);
      for (int headDim : {96, 128}) {
        PrefillVariant p;
        p.headDim = headDim;
        p.scoreMod = m->scoreMod;
        p.maskMod = m->maskMod;
        addPrefill("prefill_d" + std::to_string(headDim) + "_" + m->name, p);
        p.paged = PagedKVFormat{S::BF16, 16, KVLayout::NHD, false};
        addPrefill("paged_prefill_d" + std::to_string(headDim) + "_" + m->name,
                   p);
      }
    }
    PrefillVariant p;
    p.scoreMod = softcap.scoreMod;
    p.maskMod = chunked.maskMod;
    addPrefill("prefill_softcap_region_chunked_local", p);
  }
  return cases;
}

void PrintTo(const MatrixCase &c, std::ostream *os) { *os << c.name; }

class NvrtcMatrix
    : public ::testing::TestWithParam<std::tuple<MatrixCase, Arch>> {};

TEST_P(NvrtcMatrix, Compiles) {
  const auto &[tc, arch] = GetParam();
  // A private cache without disk: this test is about NVRTC, not the cache.
  static runtime::KernelCache cache([] {
    runtime::KernelCache::Options o;
    o.useDisk = false;
    return o;
  }());
  Jit jit({arch, &cache});
  auto compiled = tc.decode   ? jit.compile(*tc.decode, arch)
                  : tc.append ? jit.compile(*tc.append, arch)
                  : tc.merge  ? jit.compile(*tc.merge, arch)
                  : tc.mla    ? jit.compile(*tc.mla, arch)
                              : jit.compile(*tc.prefill, arch);
  ASSERT_TRUE(bool(compiled)) << llvm::toString(compiled.takeError());
  const std::string &cubin = *compiled->cubin;
  ASSERT_GT(cubin.size(), 4u);
  EXPECT_EQ(cubin.substr(0, 4), "\x7f"
                                "ELF");
  EXPECT_NE(cubin.find(kernelSymbol(compiled->spec)), std::string::npos);
  if (tc.prefill) {
    // The spec must be the variant asked for, not a neighbour of it.
    const KernelSpec &spec = compiled->spec;
    const PrefillVariant &v = *tc.prefill;
    EXPECT_EQ(spec.kind,
              v.paged ? KernelKind::PagedPrefill : KernelKind::Prefill);
    if (v.paged) {
      EXPECT_EQ(spec.kvType, v.paged->kvType);
      EXPECT_EQ(spec.pageSize, v.paged->pageSize);
      EXPECT_EQ(spec.layout, v.paged->layout);
      EXPECT_EQ(spec.perHeadKVScale, v.paged->perHeadKVScale);
    }
    EXPECT_EQ(spec.arch, arch);
    EXPECT_EQ(spec.qType, v.qType);
    EXPECT_EQ(spec.numQHeads, v.numQHeads);
    EXPECT_EQ(spec.numKVHeads, v.numKVHeads);
    EXPECT_EQ(spec.headDim, v.headDim);
    EXPECT_EQ(spec.ropeDim, v.ropeDim);
    EXPECT_EQ(spec.causal, v.causal);
    EXPECT_EQ(spec.slidingWindow, v.windowLeft.has_value());
    EXPECT_EQ(spec.alibi, v.alibi);
    EXPECT_EQ(spec.softcap, v.softcap.has_value());
    EXPECT_EQ(spec.writeLse, v.writeLse);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, NvrtcMatrix,
    ::testing::Combine(::testing::ValuesIn(matrixCases()),
                       ::testing::Values(Arch::SM80, Arch::SM89, Arch::SM90a)),
    [](const auto &info) {
      std::string arch(toString(std::get<1>(info.param)));
      return std::get<0>(info.param).name + "_" + arch.substr(3);
    });

/// The sm_90a wgmma prefill (templates/attn/prefill_sm90.cuh) pinned on
/// each variant class it supports: both dtypes, head dims 64, 128 and 256,
/// one and two consumer warpgroups, 64- and 128-key tiles (64 only at head
/// dim 256), masks and every flag.
std::vector<MatrixCase> wgmmaCases() {
  using S = ScalarType;
  std::vector<MatrixCase> cases;
  auto add = [&](std::string name, PrefillVariant v, int consumers,
                 int blockN) {
    PrefillSchedule s;
    s.mma = PrefillMma::Wgmma;
    s.warps = 4 + 4 * consumers;
    s.blockM = 64 * consumers;
    s.blockN = blockN;
    v.schedule = s;
    cases.push_back({std::move(name), std::nullopt, std::nullopt, v});
  };
  for (S dtype : {S::BF16, S::F16})
    for (int d : {64, 128})
      for (bool causal : {true, false}) {
        PrefillVariant v;
        v.qType = dtype;
        v.headDim = d;
        v.causal = causal;
        if (!causal)
          v.kind = AttentionKind::Encoder;
        add(std::string("wgmma_") + std::string(toString(dtype)) + "_d" +
                std::to_string(d) + (causal ? "_causal" : "_encoder"),
            v, 2, 128);
      }
  // Head dim 256: 64-key tiles (O takes 128 registers per thread).
  for (S dtype : {S::BF16, S::F16})
    for (bool causal : {true, false}) {
      PrefillVariant v;
      v.qType = dtype;
      v.headDim = 256;
      v.causal = causal;
      if (!causal)
        v.kind = AttentionKind::Encoder;
      add(std::string("wgmma_") + std::string(toString(dtype)) + "_d256" +
              (causal ? "_causal" : "_encoder"),
          v, 2, 64);
    }
  PrefillVariant v;
  v.windowLeft = 4096;
  v.alibi = true;
  v.softcap = 30.f;
  v.writeLse = true;
  add("wgmma_all_features", v, 2, 128);
  v.headDim = 64;
  v.numKVHeads = 1;
  add("wgmma_all_features_d64_mqa_m64n64", v, 1, 64);
  add("wgmma_all_features_d64_mqa_m192", v, 3, 128);
  // MLA's prefill: q/k 192 (three 64-dim boxes), v 128; q/k 128, v 64.
  {
    PrefillVariant mla;
    mla.numQHeads = mla.numKVHeads = 16;
    mla.ropeDim = 64;
    mla.writeLse = true;
    add("wgmma_mla_qk192_v128", mla, 2, 128);
    mla.windowLeft = 100;
    mla.softcap = 30.f;
    add("wgmma_mla_qk192_v128_m64n64_window_softcap", mla, 1, 64);
    mla.headDim = 64;
    add("wgmma_mla_qk128_v64_m192", mla, 3, 128);
  }
  // Paged over a cache of q's type: NHD and HND, pages smaller than, equal
  // to and larger than the K/V tile, and pages that are no power of two.
  struct Paged {
    const char *name;
    S dtype;
    int headDim, pageSize;
    KVLayout layout;
    int consumers, blockN;
  };
  for (Paged c :
       {Paged{"p16_nhd", S::BF16, 128, 16, KVLayout::NHD, 2, 128},
        Paged{"p16_hnd_f16_d64", S::F16, 64, 16, KVLayout::HND, 2, 128},
        Paged{"p48_nhd", S::BF16, 64, 48, KVLayout::NHD, 2, 128},
        Paged{"p256_hnd", S::BF16, 128, 256, KVLayout::HND, 2, 128},
        Paged{"p8_nhd_m64n64", S::F16, 128, 8, KVLayout::NHD, 1, 64},
        Paged{"p16_nhd_d256", S::BF16, 256, 16, KVLayout::NHD, 2, 64},
        Paged{"p128_hnd_f16_d256", S::F16, 256, 128, KVLayout::HND, 2, 64}}) {
    PrefillVariant p;
    p.qType = c.dtype;
    p.headDim = c.headDim;
    p.paged = PagedKVFormat{c.dtype, c.pageSize, c.layout, false};
    add(std::string("wgmma_paged_") + c.name, p, c.consumers, c.blockN);
  }
  PrefillVariant all = v;
  all.paged = PagedKVFormat{all.qType, 32, KVLayout::NHD, false};
  add("wgmma_paged_all_features_d64_mqa_m64n64", all, 1, 64);
  add("wgmma_paged_all_features_d64_mqa_m192", all, 3, 128);
  // FP8 compute: e4m3 and e5m2 caches at head dims 128 and 256, every
  // feature, 8-token HND pages.
  PrefillVariant fp8 = v;
  fp8.headDim = 128;
  fp8.numKVHeads = 8;
  fp8.sinks = true;
  fp8.fp8Compute = true;
  fp8.paged = PagedKVFormat{S::F8E4M3, 16, KVLayout::NHD, true};
  add("wgmma_fp8mma_e4m3_all_features", fp8, 2, 128);
  fp8.paged = PagedKVFormat{S::F8E5M2, 8, KVLayout::HND, false};
  fp8.headDim = 256;
  add("wgmma_fp8mma_e5m2_p8_hnd_d256", fp8, 2, 64);
  // Ragged FP8 k/v: widened (16-bit MMAs) at every head dim, and FP8
  // compute.
  for (int d : {64, 128, 256}) {
    PrefillVariant r = v;
    r.headDim = d;
    r.fp8KV = FP8RowsFormat{d == 128 ? S::F8E5M2 : S::F8E4M3, d == 256};
    add("wgmma_ragged_fp8_d" + std::to_string(d), r, 2, d == 256 ? 64 : 128);
    if (d >= 128) {
      r.fp8Compute = true;
      add("wgmma_ragged_fp8mma_d" + std::to_string(d), r, 2,
          d == 256 ? 64 : 128);
      r.fp8Query = true;
      add("wgmma_ragged_fp8mma_q8_d" + std::to_string(d), r, 2,
          d == 256 ? 64 : 128);
    }
  }
  // An e4m3 q with its per-head scales (fp8Query).
  fp8.fp8Query = true;
  add("wgmma_fp8mma_e5m2_p8_hnd_d256_q8", fp8, 2, 64);
  fp8.headDim = 128;
  fp8.paged = PagedKVFormat{S::F8E4M3, 16, KVLayout::NHD, true};
  add("wgmma_fp8mma_e4m3_all_features_q8", fp8, 2, 128);
  // A KV head's q heads packed into the tile (pack_gqa): ragged 8/1 with a
  // window, soft-cap and LSE; paged FP8 compute over an e4m3 q (per-head
  // scales per row) at 32/8; head dim 256 at 16/8 with 64-key tiles.
  auto packed = [&](std::string name, PrefillVariant p, int consumers,
                    int blockN) {
    add(std::move(name), p, consumers, blockN);
    cases.back().prefill->schedule->packGqa = true;
  };
  PrefillVariant tp;
  tp.numQHeads = 8;
  tp.numKVHeads = 1;
  tp.windowLeft = 4096;
  tp.softcap = 30.f;
  tp.writeLse = true;
  packed("wgmma_packed_mqa8_window_softcap", tp, 2, 128);
  PrefillVariant pf = fp8;
  pf.sinks = false;
  pf.alibi = false;
  pf.numQHeads = 32;
  packed("wgmma_packed_fp8mma_e4m3_q8_gqa4", pf, 2, 128);
  PrefillVariant wide;
  wide.numQHeads = 16;
  wide.numKVHeads = 8;
  wide.headDim = 256;
  wide.paged = PagedKVFormat{S::BF16, 16, KVLayout::NHD, false};
  packed("wgmma_packed_paged_d256_gqa2", wide, 2, 64);
  return cases;
}

class NvrtcWgmmaPrefill : public ::testing::TestWithParam<MatrixCase> {};

TEST_P(NvrtcWgmmaPrefill, CompilesForSm90a) {
  static runtime::KernelCache cache([] {
    runtime::KernelCache::Options o;
    o.useDisk = false;
    return o;
  }());
  Jit jit({Arch::SM90a, &cache});
  auto compiled = jit.compile(*GetParam().prefill, Arch::SM90a);
  ASSERT_TRUE(bool(compiled)) << llvm::toString(compiled.takeError());
  const std::string &cubin = *compiled->cubin;
  ASSERT_GT(cubin.size(), 4u);
  EXPECT_EQ(cubin.substr(0, 4), "\x7f"
                                "ELF");
  EXPECT_NE(cubin.find(kernelSymbol(compiled->spec)), std::string::npos);
  EXPECT_EQ(compiled->spec.prefillSchedule, *GetParam().prefill->schedule);
  EXPECT_NE(compiled->source.find("prefill_sm90.cuh"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Variants, NvrtcWgmmaPrefill,
                         ::testing::ValuesIn(wgmmaCases()),
                         [](const auto &info) { return info.param.name; });

} // namespace
