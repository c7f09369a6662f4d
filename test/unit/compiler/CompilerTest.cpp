//===- CompilerTest.cpp - front end, schedule, kernel-level IR ------------===//
//
// What the JIT and attn-aot rely on, without a GPU: a host variant becomes
// exactly the kernel spec its fields describe, invalid variants come back as
// errors carrying the verifier's message, the schedule heuristic's choices,
// #attn.kernel_spec <-> attn::KernelSpec without loss, and launch ABIs that
// match templates/attn/params.h field by field.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/cache/VariantKey.h"
#include "codegen/EmitCuda.h"
#include "compiler/Frontend/Frontend.h"
#include "compiler/Frontend/SourceLimits.h"
#include "compiler/Transforms/KernelSpecs.h"
#include "compiler/Transforms/Schedule.h"
#include "dialect/IR/AttnOps.h"
#include "spec/KernelLimits.h"
#include "templates/attn/params.h"
#include "templates/attn/prefill_layout.h"
#include "tools/RegisterAttn.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <set>
#include <thread>

#include <pthread.h>

using namespace mlir;
using namespace mlir::attn;
using ::attn::AppendKVVariant;
using ::attn::Arch;
using ::attn::DecodeSchedule;
using ::attn::DecodeVariant;
using SpecKind = ::attn::KernelKind;
using ::attn::KernelSpec;
using ::attn::PrefillSchedule;
using ::attn::PrefillVariant;
using ::attn::ScalarType;

namespace {

/// A chunked-local mask_mod (chunks of 256 keys), as a host writes it.
constexpr const char *kChunkMask = R"({
^bb0(%request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32):
  %c = arith.constant 256 : i32
  %a = arith.divsi %q_pos, %c : i32
  %b = arith.divsi %k_pos, %c : i32
  %same = arith.cmpi eq, %a, %b : i32
  attn.yield %same : i1
})";

/// The error text of `expected`, which must hold an error.
template <typename T> std::string errorText(llvm::Expected<T> expected) {
  if (expected)
    return "<no error>";
  return llvm::toString(expected.takeError());
}

DecodeSchedule schedule(int warps, int stages, int rowTiles,
                        int ctasPerSM = 2) {
  DecodeSchedule s;
  s.warps = warps;
  s.stages = stages;
  s.rowTiles = rowTiles;
  s.ctasPerSM = ctasPerSM;
  return s;
}

//===----------------------------------------------------------------------===//
// Variant -> spec
//===----------------------------------------------------------------------===//

TEST(FrontendTest, DefaultDecodeVariant) {
  DecodeVariant variant; // bf16, 32 q heads over 8, head dim 128, causal
  llvm::Expected<KernelSpec> spec = compileDecodeVariant(variant, Arch::SM90a);
  ASSERT_TRUE(static_cast<bool>(spec)) << llvm::toString(spec.takeError());
  EXPECT_EQ(spec->kind, SpecKind::Decode);
  EXPECT_EQ(spec->arch, Arch::SM90a);
  EXPECT_EQ(spec->qType, ScalarType::BF16);
  EXPECT_EQ(spec->kvType, ScalarType::BF16);
  EXPECT_EQ(spec->numQHeads, 32);
  EXPECT_EQ(spec->numKVHeads, 8);
  EXPECT_EQ(spec->headDim, 128);
  EXPECT_EQ(spec->pageSize, 16);
  EXPECT_EQ(spec->layout, ::attn::KVLayout::NHD);
  EXPECT_EQ(spec->queryLen, 1);
  // One query per request is the last key: causal is dropped from the spec.
  EXPECT_FALSE(spec->causal);
  EXPECT_FALSE(spec->slidingWindow);
  EXPECT_FALSE(spec->alibi);
  EXPECT_FALSE(spec->softcap);
  EXPECT_FALSE(spec->perHeadKVScale);
  EXPECT_FALSE(spec->writeLse);
  EXPECT_EQ(spec->schedule, schedule(8, 2, 1, 1));
  EXPECT_EQ(::attn::kernelSymbol(*spec),
            "attn_decode_qbf16_kvbf16_h32x8_d128_p16nhd_w8s2r1");
}

TEST(FrontendTest, DecodeVariantWithEveryFlag) {
  DecodeVariant variant;
  variant.qType = ScalarType::F16;
  variant.kvType = ScalarType::F8E4M3;
  variant.numQHeads = 64;
  variant.numKVHeads = 8;
  variant.headDim = 96;
  variant.pageSize = 32;
  variant.layout = ::attn::KVLayout::HND;
  variant.queryLen = 2;
  variant.windowLeft = 1024;
  variant.softcap = 30.0f;
  variant.scale = 0.125f;
  variant.alibi = true;
  variant.perHeadKVScale = true;
  variant.writeLse = true;
  llvm::Expected<KernelSpec> spec = compileDecodeVariant(variant, Arch::SM80);
  ASSERT_TRUE(static_cast<bool>(spec)) << llvm::toString(spec.takeError());
  EXPECT_EQ(spec->kind, SpecKind::Decode);
  EXPECT_EQ(spec->arch, Arch::SM80);
  EXPECT_EQ(spec->qType, ScalarType::F16);
  EXPECT_EQ(spec->kvType, ScalarType::F8E4M3);
  EXPECT_EQ(spec->numQHeads, 64);
  EXPECT_EQ(spec->numKVHeads, 8);
  EXPECT_EQ(spec->headDim, 96);
  EXPECT_EQ(spec->pageSize, 32);
  EXPECT_EQ(spec->layout, ::attn::KVLayout::HND);
  EXPECT_EQ(spec->queryLen, 2);
  EXPECT_TRUE(spec->causal);
  EXPECT_TRUE(spec->slidingWindow);
  EXPECT_TRUE(spec->alibi);
  EXPECT_TRUE(spec->softcap);
  EXPECT_TRUE(spec->perHeadKVScale);
  EXPECT_TRUE(spec->writeLse);
  // 16 rows, one tile; FP8 on sm_80: two 8-warp CTAs fit 164 KiB.
  EXPECT_EQ(spec->schedule, schedule(8, 2, 1, 2));
}

TEST(FrontendTest, CrossAttentionMQAWithPerTensorE5M2) {
  DecodeVariant variant;
  variant.kvType = ScalarType::F8E5M2;
  variant.numQHeads = 16;
  variant.numKVHeads = 1;
  variant.causal = false;
  variant.kind = ::attn::AttentionKind::Cross;
  // With one KV head, per head and per tensor are the same kernel.
  variant.perHeadKVScale = true;
  llvm::Expected<KernelSpec> spec = compileDecodeVariant(variant, Arch::SM89);
  ASSERT_TRUE(static_cast<bool>(spec)) << llvm::toString(spec.takeError());
  EXPECT_EQ(spec->kvType, ScalarType::F8E5M2);
  EXPECT_EQ(spec->numQHeads, 16);
  EXPECT_EQ(spec->numKVHeads, 1);
  EXPECT_FALSE(spec->causal);
  EXPECT_FALSE(spec->perHeadKVScale);
  EXPECT_EQ(spec->schedule, schedule(8, 2, 1, 1));
}

TEST(FrontendTest, PinnedScheduleIsKept) {
  DecodeVariant variant;
  variant.schedule = schedule(2, 5, 2);
  variant.schedule->minChunkTokens = 512;
  variant.schedule->ctasPerSM = 1;
  llvm::Expected<KernelSpec> spec = compileDecodeVariant(variant, Arch::SM89);
  ASSERT_TRUE(static_cast<bool>(spec)) << llvm::toString(spec.takeError());
  EXPECT_EQ(spec->schedule, *variant.schedule);

  variant.schedule->warps = 0;
  std::string error = errorText(compileDecodeVariant(variant, Arch::SM89));
  EXPECT_NE(error.find("decode_schedule warps must be from 1 to 32, got 0"),
            std::string::npos)
      << error;

  // A pinned schedule is checked against the template and the arch like a
  // chosen one: an error naming the limit, never a kernel that cannot run.
  variant.schedule->warps = 8;
  error = errorText(compileDecodeVariant(variant, Arch::SM89));
  EXPECT_NE(error.find("bytes of shared memory per CTA; sm_89 allows 101376"),
            std::string::npos)
      << error;
  variant.schedule->warps = 2;
  variant.schedule->rowTiles = 1 << 28;
  error = errorText(compileDecodeVariant(variant, Arch::SM90a));
  EXPECT_NE(error.find("decode_schedule row_tiles must be from 1 to 8, got "
                       "268435456"),
            std::string::npos)
      << error;
}

TEST(FrontendTest, PerHeadScaleIsIgnoredWithoutFP8) {
  DecodeVariant variant;
  variant.perHeadKVScale = true; // a bf16 cache has no scales at all
  llvm::Expected<KernelSpec> spec = compileDecodeVariant(variant, Arch::SM90a);
  ASSERT_TRUE(static_cast<bool>(spec)) << llvm::toString(spec.takeError());
  EXPECT_FALSE(spec->perHeadKVScale);
}

TEST(FrontendTest, AppendKVVariant) {
  AppendKVVariant variant;
  variant.inType = ScalarType::F16;
  variant.kvType = ScalarType::F8E4M3;
  variant.numKVHeads = 4;
  variant.headDim = 256;
  variant.pageSize = 1;
  variant.layout = ::attn::KVLayout::HND;
  variant.perHeadKVScale = true;
  llvm::Expected<KernelSpec> spec = compileAppendKVVariant(variant, Arch::SM89);
  ASSERT_TRUE(static_cast<bool>(spec)) << llvm::toString(spec.takeError());
  KernelSpec expected;
  expected.kind = SpecKind::AppendKV;
  expected.arch = Arch::SM89;
  expected.qType = ScalarType::F16;
  expected.kvType = ScalarType::F8E4M3;
  expected.numQHeads = 4; // canonical: the KV heads again
  expected.numKVHeads = 4;
  expected.headDim = 256;
  expected.pageSize = 1;
  expected.layout = ::attn::KVLayout::HND;
  expected.causal = false;
  expected.perHeadKVScale = true;
  EXPECT_TRUE(*spec == expected) << spec->uri() << " vs " << expected.uri();
  EXPECT_EQ(::attn::kernelSymbol(*spec),
            "attn_append_kv_qf16_kve4m3_h4x4_d256_p1hnd_per_head_kv_scale");
}

PrefillSchedule prefillSchedule(int warps, int blockM, int blockN, int stages) {
  PrefillSchedule s;
  s.warps = warps;
  s.blockM = blockM;
  s.blockN = blockN;
  s.stages = stages;
  return s;
}
/// `s` with a KV head's q heads packed into each tile.
PrefillSchedule packed(PrefillSchedule s) {
  s.packGqa = true;
  return s;
}

TEST(FrontendTest, DefaultPrefillVariant) {
  PrefillVariant variant; // bf16, 32 q heads over 8, head dim 128, causal
  llvm::Expected<KernelSpec> spec = compilePrefillVariant(variant, Arch::SM90a);
  ASSERT_TRUE(static_cast<bool>(spec)) << llvm::toString(spec.takeError());
  EXPECT_EQ(spec->kind, SpecKind::Prefill);
  EXPECT_EQ(spec->arch, Arch::SM90a);
  EXPECT_EQ(spec->qType, ScalarType::BF16);
  EXPECT_EQ(spec->numQHeads, 32);
  EXPECT_EQ(spec->numKVHeads, 8);
  EXPECT_EQ(spec->headDim, 128);
  // Canonical cache fields: a prefill kernel reads no cache.
  EXPECT_EQ(spec->kvType, ScalarType::BF16);
  EXPECT_EQ(spec->pageSize, 0);
  EXPECT_EQ(spec->layout, ::attn::KVLayout::NHD);
  EXPECT_EQ(spec->queryLen, 1);
  EXPECT_FALSE(spec->perHeadKVScale);
  // Many queries per request: causal stays in the spec.
  EXPECT_TRUE(spec->causal);
  EXPECT_FALSE(spec->slidingWindow);
  EXPECT_FALSE(spec->alibi);
  EXPECT_FALSE(spec->softcap);
  EXPECT_FALSE(spec->writeLse);
  // sm_90a at head dim 128: the wgmma template's schedule.
  PrefillSchedule wgmma = prefillSchedule(12, 128, 128, 2);
  wgmma.mma = ::attn::PrefillMma::Wgmma;
  EXPECT_EQ(spec->prefillSchedule, wgmma);
  // The decode schedule is not part of a prefill kernel: left at default.
  EXPECT_EQ(spec->schedule, DecodeSchedule());
  EXPECT_EQ(::attn::kernelSymbol(*spec),
            "attn_prefill_qbf16_kvbf16_h32x8_d128_causal_m128n128w12s2_wgmma");
  llvm::Expected<KernelSpec> sm80 = compilePrefillVariant(variant, Arch::SM80);
  ASSERT_TRUE(static_cast<bool>(sm80)) << llvm::toString(sm80.takeError());
  // sm_80 keeps the mma.sync template, each tile 32 tokens x 4 q heads.
  EXPECT_EQ(sm80->prefillSchedule, packed(prefillSchedule(4, 128, 64, 2)));
  EXPECT_EQ(::attn::kernelSymbol(*sm80),
            "attn_prefill_qbf16_kvbf16_h32x8_d128_causal_m128n64w4s2_gqa");
}

TEST(FrontendTest, PrefillVariantWithEveryFlag) {
  PrefillVariant variant;
  variant.qType = ScalarType::F16;
  variant.numQHeads = 16;
  variant.numKVHeads = 2;
  variant.headDim = 256;
  variant.windowLeft = 4096;
  variant.softcap = 50.0f;
  variant.scale = 0.0625f;
  variant.alibi = true;
  variant.writeLse = true;
  llvm::Expected<KernelSpec> spec = compilePrefillVariant(variant, Arch::SM80);
  ASSERT_TRUE(static_cast<bool>(spec)) << llvm::toString(spec.takeError());
  KernelSpec expected;
  expected.kind = SpecKind::Prefill;
  expected.arch = Arch::SM80;
  expected.qType = ScalarType::F16;
  expected.kvType = ScalarType::F16;
  expected.numQHeads = 16;
  expected.numKVHeads = 2;
  expected.headDim = 256;
  expected.pageSize = 0;
  expected.causal = true;
  expected.slidingWindow = true;
  expected.alibi = true;
  expected.softcap = true;
  expected.writeLse = true;
  // Head dim 256: 32 keys per K/V tile.
  expected.prefillSchedule = prefillSchedule(4, 64, 32, 2);
  EXPECT_TRUE(*spec == expected) << spec->uri() << " vs " << expected.uri();
  EXPECT_EQ(spec->uri(), "prefill_qf16_kvf16_h16x2_d256_causal_sliding_window_"
                         "alibi_softcap_write_lse_m64n32w4s2");
}

TEST(FrontendTest, SinksReachEverySpec) {
  // gpt-oss: sinks on a windowed layer; decode, ragged and paged prefill.
  DecodeVariant decode;
  decode.numQHeads = 64;
  decode.headDim = 64;
  decode.sinks = true;
  decode.windowLeft = 127;
  llvm::Expected<KernelSpec> d = compileDecodeVariant(decode, Arch::SM90a);
  ASSERT_TRUE(static_cast<bool>(d)) << llvm::toString(d.takeError());
  EXPECT_TRUE(d->sinks && d->slidingWindow);
  EXPECT_NE(d->uri().find("_sliding_window_sinks_"), std::string::npos)
      << d->uri();
  PrefillVariant prefill;
  prefill.sinks = true;
  for (bool paged : {false, true}) {
    if (paged)
      prefill.paged = ::attn::PagedKVFormat{};
    llvm::Expected<KernelSpec> p = compilePrefillVariant(prefill, Arch::SM90a);
    ASSERT_TRUE(static_cast<bool>(p)) << llvm::toString(p.takeError());
    EXPECT_TRUE(p->sinks) << p->uri();
    EXPECT_NE(emitCuda(*p).find("static constexpr bool kSinks = true;"),
              std::string::npos);
  }
  // Sinks change the kernel: a different key and symbol.
  DecodeVariant plain = decode;
  plain.sinks = false;
  EXPECT_NE(::attn::runtime::kernelKey(plain),
            ::attn::runtime::kernelKey(decode));
}

TEST(FrontendTest, QuantizedQueryNeedsFP8Compute) {
  // vLLM's quantized query: e4m3 q with per-head scales, bf16 out.
  PrefillVariant variant;
  variant.paged = ::attn::PagedKVFormat{};
  variant.paged->kvType = ScalarType::F8E4M3;
  variant.fp8Compute = true;
  variant.fp8Query = true;
  llvm::Expected<KernelSpec> spec = compilePrefillVariant(variant, Arch::SM90a);
  ASSERT_TRUE(static_cast<bool>(spec)) << llvm::toString(spec.takeError());
  EXPECT_TRUE(spec->fp8Query && spec->fp8Compute);
  EXPECT_EQ(spec->qType, ScalarType::BF16); // the output's type
  EXPECT_NE(spec->uri().find("_fp8_query"), std::string::npos) << spec->uri();
  PrefillVariant plain = variant;
  plain.fp8Query = false;
  EXPECT_NE(::attn::runtime::kernelKey(plain),
            ::attn::runtime::kernelKey(variant));
  // Without FP8 compute (the MMAs would be 16-bit) and on a decode, an
  // error that names what is missing.
  variant.fp8Compute = false;
  EXPECT_NE(errorText(compilePrefillVariant(variant, Arch::SM90a))
                .find("an e4m3 q (fp8_query, q_scale) needs fp8_compute"),
            std::string::npos);
  DecodeVariant decode;
  decode.kvType = ScalarType::F8E4M3;
  decode.fp8Query = true;
  EXPECT_NE(errorText(compileDecodeVariant(decode, Arch::SM90a))
                .find("needs fp8_compute"),
            std::string::npos);
}

TEST(FrontendTest, EncoderAndCrossPrefillAreNotCausal) {
  PrefillVariant variant;
  variant.causal = false;
  variant.kind = ::attn::AttentionKind::Encoder;
  llvm::Expected<KernelSpec> encoder =
      compilePrefillVariant(variant, Arch::SM89);
  ASSERT_TRUE(static_cast<bool>(encoder))
      << llvm::toString(encoder.takeError());
  EXPECT_FALSE(encoder->causal);
  variant.kind = ::attn::AttentionKind::Cross;
  llvm::Expected<KernelSpec> cross = compilePrefillVariant(variant, Arch::SM89);
  ASSERT_TRUE(static_cast<bool>(cross)) << llvm::toString(cross.takeError());
  // The kind changes what the host passes, not the kernel.
  EXPECT_TRUE(*cross == *encoder) << cross->uri();
}

TEST(FrontendTest, PinnedPrefillScheduleIsKept) {
  PrefillVariant variant;
  variant.schedule = prefillSchedule(8, 128, 32, 3);
  llvm::Expected<KernelSpec> spec = compilePrefillVariant(variant, Arch::SM90a);
  ASSERT_TRUE(static_cast<bool>(spec)) << llvm::toString(spec.takeError());
  EXPECT_EQ(spec->prefillSchedule, *variant.schedule);
  EXPECT_EQ(spec->uri(), "prefill_qbf16_kvbf16_h32x8_d128_causal_m128n32w8s3");

  variant.schedule->blockM = 64;
  std::string error = errorText(compilePrefillVariant(variant, Arch::SM90a));
  EXPECT_NE(error.find("prefill_schedule block_m must be 16 * warps = 128 "
                       "or 32 * warps = 256 (each warp owns 16 or 32 query "
                       "rows), got 64"),
            std::string::npos)
      << error;
  EXPECT_EQ(error.rfind("loc(\"attn::PrefillVariant\"): error: ", 0), 0u)
      << error;
}

TEST(FrontendTest, InvalidPrefillVariants) {
  struct Case {
    const char *name;
    PrefillVariant variant;
    const char *message;
  };
  std::vector<Case> cases;
  PrefillVariant v;
  v.numQHeads = 12;
  cases.push_back({"heads", v,
                   "'attn.prefill' op q heads (12) must be a multiple of k "
                   "heads (8)"});
  v = PrefillVariant();
  v.headDim = 100;
  cases.push_back({"head dim", v, "head_dim 100 is not supported"});
  v = PrefillVariant();
  v.kind = ::attn::AttentionKind::Encoder; // causal stays true
  cases.push_back({"encoder causal", v,
                   "encoder attention is bidirectional and cannot be causal"});
  v = PrefillVariant();
  v.kind = ::attn::AttentionKind::Cross;
  cases.push_back({"cross causal", v, "cross attention cannot be causal"});
  v = PrefillVariant();
  v.causal = false;
  v.windowLeft = 128;
  cases.push_back({"window", v, "a sliding window needs a causal mask"});
  v = PrefillVariant();
  v.qType = ScalarType::F8E4M3;
  cases.push_back({"fp8 q", v,
                   "qType (of q and the output) must be f16 or "
                   "bf16, got 'f8E4M3FN'"});
  v = PrefillVariant();
  v.scale = 0.0f;
  cases.push_back({"scale", v, "scale must be positive and finite, got 0"});
  for (const Case &c : cases) {
    std::string error =
        errorText(compilePrefillVariant(c.variant, Arch::SM90a));
    EXPECT_NE(error.find(c.message), std::string::npos)
        << c.name << ": " << error;
  }
}

/// A paged prefill variant: the default prefill over a bf16 NHD cache of
/// 16-token pages.
PrefillVariant pagedPrefillVariant() {
  PrefillVariant variant;
  variant.paged = ::attn::PagedKVFormat{};
  return variant;
}

TEST(FrontendTest, DefaultPagedPrefillVariant) {
  PrefillVariant variant = pagedPrefillVariant(); // causal GQA-4, d128
  llvm::Expected<KernelSpec> spec = compilePrefillVariant(variant, Arch::SM90a);
  ASSERT_TRUE(static_cast<bool>(spec)) << llvm::toString(spec.takeError());
  KernelSpec expected;
  expected.kind = SpecKind::PagedPrefill;
  expected.arch = Arch::SM90a;
  expected.qType = ScalarType::BF16;
  expected.kvType = ScalarType::BF16;
  expected.numQHeads = 32;
  expected.numKVHeads = 8;
  expected.headDim = 128;
  // The cache fields come from the cache, as for decode.
  expected.pageSize = 16;
  expected.layout = ::attn::KVLayout::NHD;
  expected.queryLen = 1;
  // Many queries per request: causal stays in the spec.
  expected.causal = true;
  // The ragged prefill's schedule for the same shape: on sm_90a the wgmma
  // template over a cache of q's type.
  expected.prefillSchedule = prefillSchedule(12, 128, 128, 2);
  expected.prefillSchedule.mma = ::attn::PrefillMma::Wgmma;
  EXPECT_TRUE(*spec == expected) << spec->uri() << " vs " << expected.uri();
  EXPECT_EQ(::attn::kernelSymbol(*spec),
            "attn_paged_prefill_qbf16_kvbf16_h32x8_d128_p16nhd_causal_"
            "m128n128w12s2_wgmma");
}

TEST(FrontendTest, PagedPrefillVariantWithEveryFlag) {
  PrefillVariant variant = pagedPrefillVariant();
  variant.qType = ScalarType::F16;
  variant.numQHeads = 16;
  variant.numKVHeads = 2;
  variant.headDim = 256;
  variant.paged->kvType = ScalarType::F8E4M3;
  variant.paged->pageSize = 32;
  variant.paged->layout = ::attn::KVLayout::HND;
  variant.paged->perHeadKVScale = true;
  variant.windowLeft = 4096;
  variant.softcap = 50.0f;
  variant.scale = 0.0625f;
  variant.alibi = true;
  variant.writeLse = true;
  llvm::Expected<KernelSpec> spec = compilePrefillVariant(variant, Arch::SM89);
  ASSERT_TRUE(static_cast<bool>(spec)) << llvm::toString(spec.takeError());
  KernelSpec expected;
  expected.kind = SpecKind::PagedPrefill;
  expected.arch = Arch::SM89;
  expected.qType = ScalarType::F16;
  expected.kvType = ScalarType::F8E4M3;
  expected.numQHeads = 16;
  expected.numKVHeads = 2;
  expected.headDim = 256;
  expected.pageSize = 32;
  expected.layout = ::attn::KVLayout::HND;
  expected.causal = true;
  expected.slidingWindow = true;
  expected.alibi = true;
  expected.softcap = true;
  expected.perHeadKVScale = true;
  expected.writeLse = true;
  // Head dim 256 with FP8 widening: 98 KiB, within sm_89's 99 KiB.
  expected.prefillSchedule = prefillSchedule(4, 64, 32, 2);
  EXPECT_TRUE(*spec == expected) << spec->uri() << " vs " << expected.uri();
  EXPECT_EQ(spec->uri(), "paged_prefill_qf16_kve4m3_h16x2_d256_p32hnd_causal_"
                         "sliding_window_alibi_softcap_per_head_kv_scale_"
                         "write_lse_m64n32w4s2");
}

TEST(FrontendTest, PagedPrefillCrossAttentionPerTensorE5M2) {
  PrefillVariant variant = pagedPrefillVariant();
  variant.causal = false;
  variant.kind = ::attn::AttentionKind::Cross;
  variant.numKVHeads = 1;
  variant.paged->kvType = ScalarType::F8E5M2;
  // With one KV head, per head and per tensor are the same kernel.
  variant.paged->perHeadKVScale = true;
  llvm::Expected<KernelSpec> spec = compilePrefillVariant(variant, Arch::SM80);
  ASSERT_TRUE(static_cast<bool>(spec)) << llvm::toString(spec.takeError());
  EXPECT_EQ(spec->kind, SpecKind::PagedPrefill);
  EXPECT_EQ(spec->kvType, ScalarType::F8E5M2);
  EXPECT_EQ(spec->numKVHeads, 1);
  EXPECT_FALSE(spec->causal);
  EXPECT_FALSE(spec->perHeadKVScale);
}

TEST(FrontendTest, PagedPrefillPerHeadScaleIsIgnoredWithoutFP8) {
  PrefillVariant variant = pagedPrefillVariant();
  variant.paged->perHeadKVScale = true; // a bf16 cache has no scales at all
  llvm::Expected<KernelSpec> spec = compilePrefillVariant(variant, Arch::SM90a);
  ASSERT_TRUE(static_cast<bool>(spec)) << llvm::toString(spec.takeError());
  EXPECT_FALSE(spec->perHeadKVScale);
}

TEST(FrontendTest, PinnedPagedPrefillScheduleIsKept) {
  PrefillVariant variant = pagedPrefillVariant();
  variant.schedule = prefillSchedule(8, 128, 32, 3);
  llvm::Expected<KernelSpec> spec = compilePrefillVariant(variant, Arch::SM89);
  ASSERT_TRUE(static_cast<bool>(spec)) << llvm::toString(spec.takeError());
  EXPECT_EQ(spec->prefillSchedule, *variant.schedule);
}

TEST(FrontendTest, InvalidPagedPrefillVariants) {
  struct Case {
    const char *name;
    PrefillVariant variant;
    const char *message;
  };
  std::vector<Case> cases;
  PrefillVariant v = pagedPrefillVariant();
  v.causal = false;
  v.kind = ::attn::AttentionKind::Encoder;
  cases.push_back({"encoder", v,
                   "'attn.paged_prefill' op encoder attention has no KV "
                   "cache; use attn.prefill"});
  v = pagedPrefillVariant();
  v.paged->kvType = ScalarType::F16; // q is bf16
  cases.push_back({"cache type", v,
                   "'attn.paged_prefill' op cache element type 'f16' must "
                   "equal the q element type ('bf16') or be FP8"});
  v = pagedPrefillVariant();
  v.paged->kvType = ScalarType::F32;
  cases.push_back({"f32 cache", v,
                   "paged_kv element type 'f32' is not "
                   "allowed; expected f16, bf16, f8E4M3FN or "
                   "f8E5M2"});
  v = pagedPrefillVariant();
  v.paged->pageSize = 0;
  cases.push_back({"page size", v, "paged_kv page_size 0 is not supported"});
  v = pagedPrefillVariant();
  v.numQHeads = 12;
  cases.push_back({"heads", v,
                   "'attn.paged_prefill' op q heads (12) must be a multiple "
                   "of cache heads (8)"});
  v = pagedPrefillVariant();
  v.kind = ::attn::AttentionKind::Cross; // causal stays true
  cases.push_back({"cross causal", v, "cross attention cannot be causal"});
  v = pagedPrefillVariant();
  v.qType = ScalarType::F8E4M3;
  v.paged->kvType = ScalarType::F8E4M3;
  cases.push_back({"fp8 q", v,
                   "qType (of q and the output) must be f16 or "
                   "bf16, got 'f8E4M3FN'"});
  v = pagedPrefillVariant();
  v.schedule = prefillSchedule(4, 48, 64, 2);
  cases.push_back({"schedule", v,
                   "prefill_schedule block_m must be 16 * "
                   "warps = 64 or 32 * warps = 128"});
  for (const Case &c : cases) {
    std::string error =
        errorText(compilePrefillVariant(c.variant, Arch::SM90a));
    EXPECT_NE(error.find(c.message), std::string::npos)
        << c.name << ": " << error;
    // Every diagnostic points at the variant.
    EXPECT_EQ(error.rfind("loc(\"attn::PrefillVariant\"): error: ", 0), 0u)
        << c.name << ": " << error;
  }
}

//===----------------------------------------------------------------------===//
// Invalid variants: errors carry the verifier's message
//===----------------------------------------------------------------------===//

TEST(FrontendTest, HeadsNotAMultipleOfKVHeads) {
  DecodeVariant variant;
  variant.numQHeads = 12;
  variant.numKVHeads = 8;
  std::string error = errorText(compileDecodeVariant(variant, Arch::SM90a));
  EXPECT_NE(error.find("'attn.decode' op q heads (12) must be a multiple of "
                       "cache heads (8)"),
            std::string::npos)
      << error;
  // The diagnostic points at the variant, as a located MLIR error would.
  EXPECT_EQ(error.rfind("loc(\"attn::DecodeVariant\"): error: ", 0), 0u)
      << error;
}

TEST(FrontendTest, OtherInvalidVariants) {
  struct Case {
    const char *name;
    DecodeVariant variant;
    const char *message;
  };
  std::vector<Case> cases;
  DecodeVariant v;
  v.headDim = 100;
  cases.push_back({"head dim", v, "paged_kv head_dim 100 is not supported"});
  v = DecodeVariant();
  v.kind = ::attn::AttentionKind::Cross; // causal stays true
  cases.push_back({"cross causal", v, "cross attention cannot be causal"});
  v = DecodeVariant();
  v.causal = false;
  v.windowLeft = 128;
  cases.push_back({"window", v, "a sliding window needs a causal mask"});
  v = DecodeVariant();
  v.qType = ScalarType::F8E4M3;
  v.kvType = ScalarType::F8E4M3;
  cases.push_back({"fp8 q", v,
                   "qType (of q and the output) must be f16 or "
                   "bf16, got 'f8E4M3FN'; an e4m3 q the caller "
                   "quantized is fp8Query"});
  v = DecodeVariant();
  v.queryLen = 17;
  cases.push_back({"query_len", v, "query_len must be from 1 to 16, got 17"});
  v = DecodeVariant();
  v.softcap = -1.0f;
  cases.push_back({"softcap", v, "softcap must be positive and finite"});
  for (const Case &c : cases) {
    std::string error = errorText(compileDecodeVariant(c.variant, Arch::SM90a));
    EXPECT_NE(error.find(c.message), std::string::npos)
        << c.name << ": " << error;
  }

  AppendKVVariant append;
  append.inType = ScalarType::F16;
  append.kvType = ScalarType::BF16;
  std::string error = errorText(compileAppendKVVariant(append, Arch::SM90a));
  EXPECT_NE(error.find("cache element type 'bf16' must equal the k element "
                       "type ('f16') or be FP8"),
            std::string::npos)
      << error;
}

//===----------------------------------------------------------------------===//
// Modules and the pipeline
//===----------------------------------------------------------------------===//

class ModuleTest : public ::testing::Test {
protected:
  ModuleTest() {
    DialectRegistry registry;
    registerAttnDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  OwningOpRef<ModuleOp> parse(StringRef source) {
    return parseSourceString<ModuleOp>(source, &context);
  }

  MLIRContext context;
};

TEST_F(ModuleTest, BuiltModuleReadsAsAttnIR) {
  DecodeVariant variant;
  variant.windowLeft = 4096;
  variant.alibi = true;
  variant.writeLse = true;
  OwningOpRef<ModuleOp> module = buildDecodeModule(context, variant);
  ASSERT_TRUE(module);
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  EXPECT_NE(
      text.find("attn.decode %arg0, %arg1, %arg2, %arg3 alibi(%arg4 : "
                "tensor<32xf32>) {mask = #attn.mask<causal, window_left = "
                "4096>}"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("-> tensor<?x32x128xbf16>, tensor<?x32xf32>"),
            std::string::npos)
      << text;
}

TEST_F(ModuleTest, LowerToKernelSpecsKeepsIROrder) {
  OwningOpRef<ModuleOp> module = parse(R"mlir(
func.func @step(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>,
                %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                %slots: tensor<?xi64>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
    -> tensor<?x32x128xbf16> {
  %c1 = attn.append_kv %k, %k into %c at %slots
      : tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
        !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?xi64>
  %o = attn.decode %q, %c1, %bt, %lens
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}
)mlir");
  ASSERT_TRUE(module);
  llvm::Expected<std::vector<KernelSpec>> specs =
      lowerToKernelSpecs(*module, Arch::SM90a);
  ASSERT_TRUE(static_cast<bool>(specs)) << llvm::toString(specs.takeError());
  ASSERT_EQ(specs->size(), 2u);
  EXPECT_EQ((*specs)[0].kind, SpecKind::AppendKV);
  EXPECT_EQ((*specs)[1].kind, SpecKind::Decode);
  EXPECT_FALSE((*specs)[1].causal);
}

TEST_F(ModuleTest, LowerToKernelSpecsOfMergeStates) {
  OwningOpRef<ModuleOp> module = parse(R"mlir(
func.func @merge(%o: tensor<?x32x128xf32>, %l: tensor<?x32xf32>) -> tensor<?x32x128xf32> {
  %m, %lm = attn.merge_states %o, %l, %o, %l : tensor<?x32x128xf32>, tensor<?x32xf32>
  return %m : tensor<?x32x128xf32>
}
)mlir");
  ASSERT_TRUE(module);
  llvm::Expected<std::vector<KernelSpec>> specs =
      lowerToKernelSpecs(*module, Arch::SM90a);
  ASSERT_TRUE(static_cast<bool>(specs)) << llvm::toString(specs.takeError());
  ASSERT_EQ(specs->size(), 1u);
  const KernelSpec &spec = specs->front();
  EXPECT_EQ(spec.kind, SpecKind::MergeStates);
  EXPECT_EQ(spec.qType, ScalarType::F32);
  EXPECT_EQ(spec.numQHeads, 32);
  EXPECT_EQ(spec.headDim, 128);
  EXPECT_EQ(checkKernelSpec(spec), "");
  EXPECT_EQ(spec.uri(), "merge_states_f32_h32_d128");
  // Fields merge_states has no use for are an error, not ignored.
  KernelSpec causal = spec;
  causal.causal = true;
  EXPECT_NE(checkKernelSpec(causal).find("of a merge_states kernel has only"),
            std::string::npos);
}

TEST_F(ModuleTest, GetKernelSpecOfAPrefillLaunch) {
  PrefillVariant variant;
  variant.alibi = true;
  variant.writeLse = true;
  variant.softcap = 30.0f;
  variant.windowLeft = 512;
  OwningOpRef<ModuleOp> module = buildPrefillModule(context, variant);
  ASSERT_TRUE(module);
  llvm::Expected<std::vector<KernelSpec>> specs =
      lowerToKernelSpecs(*module, Arch::SM90a);
  ASSERT_TRUE(static_cast<bool>(specs)) << llvm::toString(specs.takeError());
  KernelLaunchOp launch;
  module->walk([&](KernelLaunchOp op) { launch = op; });
  ASSERT_TRUE(launch);
  FailureOr<KernelSpec> spec = getKernelSpec(launch);
  ASSERT_TRUE(succeeded(spec));
  EXPECT_TRUE(*spec == specs->front());
  // sm_90a, head dim 128: the wgmma template, three warpgroups.
  EXPECT_EQ(kernelTemplate(*spec).header, "attn/prefill_sm90.cuh");
  EXPECT_EQ(kernelTemplate(*spec).params, "PrefillSm90Params");
  EXPECT_EQ(threadsPerBlock(*spec), 384);
  // q, k, v, cu_seqlens_q, cu_seqlens_kv, slopes; out and lse.
  EXPECT_EQ(launch.getArgs().size(), 6u);
  EXPECT_EQ(launch.getOuts().size(), 2u);
  EXPECT_TRUE(spec->softcap && spec->slidingWindow);
}

TEST_F(ModuleTest, GetKernelSpecOfAPagedPrefillLaunch) {
  PrefillVariant variant = pagedPrefillVariant();
  variant.paged->kvType = ScalarType::F8E5M2;
  variant.paged->perHeadKVScale = true;
  variant.alibi = true;
  variant.writeLse = true;
  OwningOpRef<ModuleOp> module = buildPrefillModule(context, variant);
  ASSERT_TRUE(module);
  llvm::Expected<std::vector<KernelSpec>> specs =
      lowerToKernelSpecs(*module, Arch::SM80);
  ASSERT_TRUE(static_cast<bool>(specs)) << llvm::toString(specs.takeError());
  KernelLaunchOp launch;
  module->walk([&](KernelLaunchOp op) { launch = op; });
  ASSERT_TRUE(launch);
  FailureOr<KernelSpec> spec = getKernelSpec(launch);
  ASSERT_TRUE(succeeded(spec));
  EXPECT_TRUE(*spec == specs->front());
  EXPECT_EQ(spec->kind, SpecKind::PagedPrefill);
  EXPECT_TRUE(spec->perHeadKVScale);
  EXPECT_EQ(kernelTemplate(*spec).header, "attn/prefill.cuh");
  // q, cache, cu_seqlens_q, page_tables, seq_lens, k_scale, v_scale (one
  // per KV head), slopes; out and lse.
  ASSERT_EQ(launch.getArgs().size(), 8u);
  EXPECT_EQ(cast<RankedTensorType>(launch.getArgs()[5].getType()).getDimSize(0),
            8);
  EXPECT_EQ(launch.getOuts().size(), 2u);
}

//===----------------------------------------------------------------------===//
// #attn.kernel_spec <-> attn::KernelSpec
//===----------------------------------------------------------------------===//

TEST_F(ModuleTest, KernelSpecAttrRoundTripsThroughText) {
  std::vector<KernelSpec> specs(4);
  specs[1].kvType = ScalarType::F8E5M2;
  specs[1].perHeadKVScale = true;
  specs[1].queryLen = 3;
  specs[1].causal = specs[1].slidingWindow = specs[1].alibi = true;
  specs[1].softcap = specs[1].writeLse = true;
  specs[1].schedule = schedule(4, 7, 2);
  specs[1].schedule.minChunkTokens = 64;
  specs[1].schedule.ctasPerSM = 3;
  specs[2].arch = Arch::SM89;
  specs[2].qType = ScalarType::F16;
  specs[2].kvType = ScalarType::F16;
  specs[2].layout = ::attn::KVLayout::HND;
  specs[2].schedule.stages = 2; // sm_89's 99 KiB per CTA
  specs[3].kind = SpecKind::AppendKV;
  specs[3].numQHeads = specs[3].numKVHeads;
  // Prefill specs: canonical cache fields, a prefill schedule.
  for (int i = 0; i < 2; ++i) {
    KernelSpec prefill;
    prefill.kind = SpecKind::Prefill;
    prefill.pageSize = 0;
    prefill.prefillSchedule = prefillSchedule(4, 64, 32, 3);
    if (i == 1) {
      prefill.arch = Arch::SM80;
      prefill.qType = prefill.kvType = ScalarType::F16;
      prefill.causal = prefill.slidingWindow = prefill.alibi = true;
      prefill.softcap = prefill.writeLse = true;
      prefill.prefillSchedule = prefillSchedule(8, 128, 64, 2);
    }
    specs.push_back(prefill);
  }
  // Paged prefill specs: cache fields as decode, a prefill schedule.
  for (int i = 0; i < 2; ++i) {
    KernelSpec paged;
    paged.kind = SpecKind::PagedPrefill;
    paged.prefillSchedule = prefillSchedule(4, 128, 64, 2);
    if (i == 1) {
      paged.arch = Arch::SM89;
      paged.qType = ScalarType::F16;
      paged.kvType = ScalarType::F8E4M3;
      paged.pageSize = 1;
      paged.layout = ::attn::KVLayout::HND;
      paged.causal = paged.slidingWindow = paged.alibi = true;
      paged.softcap = paged.perHeadKVScale = paged.writeLse = true;
      paged.prefillSchedule = prefillSchedule(4, 64, 32, 2);
    }
    specs.push_back(paged);
  }
  for (const KernelSpec &spec : specs) {
    auto attr = KernelSpecAttr::get(&context, spec);
    EXPECT_TRUE(attr.getSpec() == spec) << spec.uri();
    std::string text;
    llvm::raw_string_ostream(text) << attr;
    Attribute parsed = parseAttribute(text, &context);
    ASSERT_TRUE(parsed) << text;
    EXPECT_EQ(parsed, attr) << text;
    EXPECT_TRUE(cast<KernelSpecAttr>(parsed).getSpec() == spec) << text;
  }
}

TEST_F(ModuleTest, EverySpecOfTheVariantSpaceRoundTripsThroughText) {
  // What the compiler makes of a grid of variants, every kind, type, knob
  // and arch: attn-opt must re-read every spec it prints.
  std::vector<KernelSpec> specs;
  auto add = [&](llvm::Expected<KernelSpec> spec) {
    if (spec)
      specs.push_back(*spec);
    else
      llvm::consumeError(spec.takeError());
  };
  const ScalarType kFloats[] = {ScalarType::F16, ScalarType::BF16};
  for (Arch arch : {Arch::SM80, Arch::SM89, Arch::SM90a}) {
    for (ScalarType dtype :
         {ScalarType::F16, ScalarType::BF16, ScalarType::F32})
      for (int heads : {1, 32, 1024})
        add(compileMergeStatesVariant({dtype, heads, 128}, arch));
    for (ScalarType q : kFloats)
      for (ScalarType kv : {q, ScalarType::F8E4M3, ScalarType::F8E5M2})
        for (auto [qHeads, kvHeads] : {std::pair{32, 8}, {8, 8}, {128, 1}})
          for (int dim : {64, 128, 256})
            for (bool everything : {false, true}) {
              DecodeVariant d;
              d.qType = q;
              d.kvType = kv;
              d.numQHeads = qHeads;
              d.numKVHeads = kvHeads;
              d.headDim = dim;
              if (everything) {
                d.pageSize = 1;
                d.layout = ::attn::KVLayout::HND;
                d.queryLen = 4;
                d.perHeadKVScale = true;
                d.windowLeft = 128;
                d.softcap = 30.0f;
                d.alibi = d.sinks = d.writeLse = true;
                d.maskMod = kChunkMask;
              }
              add(compileDecodeVariant(d, arch));
              PrefillVariant p;
              p.qType = q;
              p.numQHeads = qHeads;
              p.numKVHeads = kvHeads;
              p.headDim = dim;
              if (kv != q) {
                p.paged = ::attn::PagedKVFormat{kv, 16, ::attn::KVLayout::NHD,
                                                everything};
                p.fp8Compute = everything && arch == Arch::SM90a;
              }
              if (everything) {
                p.windowLeft = 64;
                p.softcap = 50.0f;
                p.alibi = p.sinks = p.writeLse = true;
                p.maskMod = kChunkMask;
              }
              add(compilePrefillVariant(p, arch));
              AppendKVVariant a;
              a.inType = q;
              a.kvType = kv;
              a.numKVHeads = kvHeads;
              a.headDim = dim;
              a.perHeadKVScale = everything;
              add(compileAppendKVVariant(a, arch));
            }
  }
  EXPECT_GT(specs.size(), 900u);
  std::set<SpecKind> kinds;
  for (const KernelSpec &spec : specs) {
    kinds.insert(spec.kind);
    auto attr = KernelSpecAttr::get(&context, spec);
    std::string text;
    llvm::raw_string_ostream(text) << attr;
    Attribute parsed = parseAttribute(text, &context);
    ASSERT_TRUE(parsed) << text;
    EXPECT_TRUE(cast<KernelSpecAttr>(parsed).getSpec() == spec) << text;
  }
  EXPECT_EQ(kinds.size(), 5u); // decode, prefill, paged, append, merge
}

TEST_F(ModuleTest, GetKernelSpecOfALaunch) {
  DecodeVariant variant;
  variant.kvType = ScalarType::F8E4M3;
  variant.perHeadKVScale = true;
  OwningOpRef<ModuleOp> module = buildDecodeModule(context, variant);
  ASSERT_TRUE(module);
  llvm::Expected<std::vector<KernelSpec>> specs =
      lowerToKernelSpecs(*module, Arch::SM90a);
  ASSERT_TRUE(static_cast<bool>(specs)) << llvm::toString(specs.takeError());
  KernelLaunchOp launch;
  module->walk([&](KernelLaunchOp op) { launch = op; });
  ASSERT_TRUE(launch);
  FailureOr<KernelSpec> spec = getKernelSpec(launch);
  ASSERT_TRUE(succeeded(spec));
  EXPECT_TRUE(*spec == specs->front());
  EXPECT_EQ(launch.getKernel(), ::attn::kernelSymbol(*spec));
  EXPECT_EQ(kernelTemplate(*spec).entry, "decodeKernel");
  // 4 operands + k_scale, v_scale.
  EXPECT_EQ(launch.getArgs().size(), 6u);
}

//===----------------------------------------------------------------------===//
// The schedule heuristics
//===----------------------------------------------------------------------===//

KernelSpec decodeSpec(Arch arch, int qHeads, int kvHeads, int headDim,
                      ScalarType kvType = ScalarType::BF16, int queryLen = 1) {
  KernelSpec spec;
  spec.arch = arch;
  spec.numQHeads = qHeads;
  spec.numKVHeads = kvHeads;
  spec.headDim = headDim;
  spec.kvType = kvType;
  spec.queryLen = queryLen;
  return spec;
}

TEST(ScheduleTest, ChoicesPerShape) {
  // Eight double-buffered warps: GQA-8 at head dim 128, one row tile; the
  // 139 KiB CTA leaves room for one per SM. MHA (one row) takes the
  // CUDA-core path: 4 KiB of shared memory, two CTAs by registers.
  EXPECT_EQ(chooseDecodeSchedule(decodeSpec(Arch::SM90a, 32, 32, 128)),
            schedule(8, 2, 1, 2));
  EXPECT_EQ(chooseDecodeSchedule(decodeSpec(Arch::SM90a, 64, 8, 128)),
            schedule(8, 2, 1, 1));
  // MQA: 32 rows, two tiles.
  EXPECT_EQ(chooseDecodeSchedule(decodeSpec(Arch::SM90a, 32, 1, 128)),
            schedule(8, 2, 2, 1));
  // Head dim 256 in bf16: eight warps do not fit 227 KiB, four do.
  EXPECT_EQ(chooseDecodeSchedule(decodeSpec(Arch::SM90a, 32, 1, 256)),
            schedule(4, 2, 1, 1));
  // FP8 halves the stage: two CTAs per SM on sm_90a and sm_80, one on sm_89.
  EXPECT_EQ(chooseDecodeSchedule(
                decodeSpec(Arch::SM90a, 32, 8, 128, ScalarType::F8E4M3)),
            schedule(8, 2, 1, 2));
  EXPECT_EQ(chooseDecodeSchedule(
                decodeSpec(Arch::SM80, 32, 8, 128, ScalarType::F8E4M3)),
            schedule(8, 2, 1, 2));
  EXPECT_EQ(chooseDecodeSchedule(
                decodeSpec(Arch::SM89, 32, 8, 128, ScalarType::F8E4M3)),
            schedule(8, 2, 1, 1));
  // Four query tokens of a GQA-8 group: 32 rows, two tiles.
  EXPECT_EQ(chooseDecodeSchedule(
                decodeSpec(Arch::SM90a, 64, 8, 128, ScalarType::BF16, 4)),
            schedule(8, 2, 2, 1));
  // Small heads in FP8: shared memory holds five CTAs, registers two (the
  // entry's launch bounds then keep a thread within 128 registers).
  EXPECT_EQ(chooseDecodeSchedule(
                decodeSpec(Arch::SM90a, 8, 8, 64, ScalarType::F8E5M2)),
            schedule(8, 2, 1, 2));
  // Two row tiles of FP8 at head dim 64 (accumulators of 64 registers) keep
  // two CTAs; at head dim 128 (128 registers) one.
  EXPECT_EQ(chooseDecodeSchedule(
                decodeSpec(Arch::SM90a, 32, 1, 64, ScalarType::F8E5M2)),
            schedule(8, 2, 2, 2));
  EXPECT_EQ(chooseDecodeSchedule(
                decodeSpec(Arch::SM90a, 32, 1, 128, ScalarType::F8E5M2)),
            schedule(8, 2, 2, 1));
  // sm_89's 100 KiB take four warps at head dim 128 in bf16.
  EXPECT_EQ(chooseDecodeSchedule(decodeSpec(Arch::SM89, 32, 8, 128)),
            schedule(4, 2, 1, 1));
  // Head dim 256 in bf16 on sm_89: four warps need 140 KiB, two fit.
  EXPECT_EQ(chooseDecodeSchedule(decodeSpec(Arch::SM89, 32, 8, 256)),
            schedule(2, 2, 1, 1));
  // The minimum split chunk is fixed; the planner picks the rest.
  DecodeSchedule s = chooseDecodeSchedule(decodeSpec(Arch::SM80, 32, 8, 64));
  EXPECT_EQ(s.minChunkTokens, 256);
}

TEST(ScheduleTest, EveryChosenScheduleFitsItsTemplateAndArch) {
  // The heuristics answer to the same rules as hand-written schedules
  // (checkKernelSpec): registers and shared memory per CTA on every arch,
  // for every head dim, cache type, group size and query length.
  for (Arch arch : {Arch::SM80, Arch::SM89, Arch::SM90a})
    for (int headDim = 32; headDim <= 256; headDim += 8)
      for (ScalarType kvType :
           {ScalarType::BF16, ScalarType::F8E4M3, ScalarType::F8E5M2})
        for (int group : {1, 4, 8, 128})
          for (int queryLen : {1, 4, 16}) {
            KernelSpec spec =
                decodeSpec(arch, 8 * group, 8, headDim, kvType, queryLen);
            spec.causal = queryLen > 1;
            spec.schedule = chooseDecodeSchedule(spec);
            EXPECT_EQ(checkKernelSpec(spec), "") << spec.uri();
            KernelSpec paged = spec;
            paged.kind = SpecKind::PagedPrefill;
            paged.queryLen = 1;
            paged.causal = true;
            paged.prefillSchedule = choosePrefillSchedule(paged);
            EXPECT_EQ(checkKernelSpec(paged), "") << paged.uri();
            if (kvType != ScalarType::BF16)
              continue;
            KernelSpec ragged = paged;
            ragged.kind = SpecKind::Prefill;
            ragged.pageSize = 0;
            ragged.prefillSchedule = choosePrefillSchedule(ragged);
            EXPECT_EQ(checkKernelSpec(ragged), "") << ragged.uri();
            // MLA's form: q/k wider than v, up to the largest head dim.
            for (int rope = 8; headDim + rope <= 256; rope *= 2) {
              KernelSpec mla = ragged;
              mla.ropeDim = rope;
              mla.prefillSchedule = choosePrefillSchedule(mla);
              EXPECT_EQ(checkKernelSpec(mla), "") << mla.uri();
            }
          }
}

TEST(ScheduleTest, MlaPrefillTakesWgmmaWhereQKComeInWholeBoxes) {
  KernelSpec spec;
  spec.kind = SpecKind::Prefill;
  spec.pageSize = 0;
  spec.numQHeads = spec.numKVHeads = 16;
  spec.headDim = 128;
  spec.ropeDim = 64; // DeepSeek: q/k 192, v 128
  spec.causal = true;
  spec.prefillSchedule = choosePrefillSchedule(spec);
  EXPECT_EQ(spec.prefillSchedule.mma, ::attn::PrefillMma::Wgmma);
  EXPECT_EQ(spec.prefillSchedule.blockN, 128);
  EXPECT_EQ(checkKernelSpec(spec), "");
  spec.ropeDim = 32; // q/k 160: not whole 64-dim boxes
  spec.prefillSchedule = choosePrefillSchedule(spec);
  EXPECT_EQ(spec.prefillSchedule.mma, ::attn::PrefillMma::Sync);
  EXPECT_EQ(checkKernelSpec(spec), "");
  PrefillSchedule wgmma;
  wgmma.mma = ::attn::PrefillMma::Wgmma;
  wgmma.warps = 12;
  wgmma.blockM = 128;
  wgmma.blockN = 128;
  wgmma.stages = 2;
  spec.prefillSchedule = wgmma;
  EXPECT_NE(checkKernelSpec(spec).find("q/k head dims (head_dim + rope_dim) "
                                       "that are a multiple of 64, got 160"),
            std::string::npos);
  // Wider q/k is for ragged 16-bit k/v only.
  spec.ropeDim = 64;
  KernelSpec paged = spec;
  paged.kind = SpecKind::PagedPrefill;
  paged.pageSize = 16;
  EXPECT_NE(checkKernelSpec(paged).find("rope_dim is for mla_decode and "
                                        "prefill kernels"),
            std::string::npos);
  KernelSpec fp8 = spec;
  fp8.kvType = ScalarType::F8E4M3;
  EXPECT_NE(checkKernelSpec(fp8).find("and 16-bit k/v (got kv_type e4m3)"),
            std::string::npos);
  KernelSpec wide = spec;
  wide.ropeDim = 136; // q/k 264
  EXPECT_NE(checkKernelSpec(wide).find("rope_dim 136 of a prefill kernel"),
            std::string::npos);
}

TEST(ScheduleTest, PrefillChoicesPerShape) {
  // Four double-buffered warps of two 16-row tiles and 64 keys per tile up
  // to head dim 128; one tile and 32 keys above.
  for (Arch arch : {Arch::SM80, Arch::SM89, Arch::SM90a}) {
    for (int headDim : {32, 64, 96})
      EXPECT_EQ(choosePrefillSchedule(decodeSpec(arch, 32, 8, headDim)),
                packed(prefillSchedule(4, 128, 64, 2)))
          << headDim;
    for (int headDim : {136, 192, 256})
      EXPECT_EQ(choosePrefillSchedule(decodeSpec(arch, 16, 16, headDim)),
                prefillSchedule(4, 64, 32, 2))
          << headDim;
  }
  // Head dim 128: sm_89's 100 KiB cannot hold the 128-row Q tile too.
  EXPECT_EQ(choosePrefillSchedule(decodeSpec(Arch::SM90a, 32, 8, 128)),
            packed(prefillSchedule(4, 128, 64, 2)));
  EXPECT_EQ(choosePrefillSchedule(decodeSpec(Arch::SM80, 32, 8, 128)),
            packed(prefillSchedule(4, 128, 64, 2)));
  EXPECT_EQ(choosePrefillSchedule(decodeSpec(Arch::SM89, 32, 8, 128)),
            packed(prefillSchedule(4, 64, 64, 2)));
}

TEST(ScheduleTest, SyncPrefillPacksGroupedHeadsWithoutPerHeadValues) {
  // Grouped heads without per-head values: packed; MHA, ALiBi, sinks and
  // modifier regions: one q head per tile.
  EXPECT_TRUE(
      choosePrefillSchedule(decodeSpec(Arch::SM80, 32, 4, 128)).packGqa);
  EXPECT_TRUE(choosePrefillSchedule(decodeSpec(Arch::SM80, 14, 2, 64)).packGqa);
  EXPECT_FALSE(
      choosePrefillSchedule(decodeSpec(Arch::SM80, 16, 16, 128)).packGqa);
  KernelSpec alibi = decodeSpec(Arch::SM80, 32, 8, 128);
  alibi.alibi = true;
  EXPECT_FALSE(choosePrefillSchedule(alibi).packGqa);
  KernelSpec sinks = decodeSpec(Arch::SM80, 32, 8, 128);
  sinks.sinks = true;
  EXPECT_FALSE(choosePrefillSchedule(sinks).packGqa);
  // The wgmma template takes one q head per tile.
  KernelSpec ragged = decodeSpec(Arch::SM90a, 32, 8, 128);
  ragged.kind = SpecKind::Prefill;
  EXPECT_FALSE(choosePrefillSchedule(ragged).packGqa);
}

TEST(ScheduleTest, PackedGqaRefusesWhatItCannotPack) {
  KernelSpec spec = decodeSpec(Arch::SM80, 32, 8, 128);
  spec.kind = SpecKind::Prefill;
  spec.pageSize = 0;
  spec.prefillSchedule = packed(prefillSchedule(4, 128, 64, 2));
  EXPECT_EQ(checkKernelSpec(spec), "");
  KernelSpec alibi = spec;
  alibi.alibi = true;
  EXPECT_EQ(checkKernelSpec(alibi),
            "prefill_schedule pack_gqa needs a variant without per-head "
            "values; this one has alibi_slopes");
  KernelSpec mqa = spec;
  mqa.numKVHeads = 1;
  mqa.numQHeads = 32;
  mqa.prefillSchedule = packed(prefillSchedule(1, 16, 64, 2));
  EXPECT_EQ(checkKernelSpec(mqa),
            "prefill_schedule pack_gqa needs block_m (16) of at least the q "
            "heads per KV head (32)");
  KernelSpec wgmma = spec;
  wgmma.arch = Arch::SM90a;
  wgmma.prefillSchedule = packed(prefillSchedule(12, 128, 128, 2));
  wgmma.prefillSchedule.mma = ::attn::PrefillMma::Wgmma;
  EXPECT_EQ(checkKernelSpec(wgmma), "");
  KernelSpec odd = wgmma;
  odd.numQHeads = 28;
  odd.numKVHeads = 4;
  EXPECT_EQ(checkKernelSpec(odd),
            "prefill_schedule pack_gqa with mma = wgmma needs q heads per KV "
            "head (7) that divide 64");
}

TEST(ScheduleTest, PagedPrefillTakesWgmmaOnSm90aForPagesOf16) {
  auto paged = [](int headDim, int pageSize, ScalarType kvType) {
    KernelSpec spec = decodeSpec(Arch::SM90a, 32, 8, headDim, kvType);
    spec.kind = SpecKind::PagedPrefill;
    spec.pageSize = pageSize;
    return spec;
  };
  // Pages of a multiple of 16 tokens (at most 8 TMA boxes per 128-key
  // tile), a cache of q's type or FP8, head dims 64 and 128.
  for (ScalarType kvType :
       {ScalarType::BF16, ScalarType::F8E4M3, ScalarType::F8E5M2})
    for (int headDim : {64, 128})
      for (int pageSize : {16, 32, 48, 128, 256})
        EXPECT_EQ(choosePrefillSchedule(paged(headDim, pageSize, kvType)).mma,
                  ::attn::PrefillMma::Wgmma)
            << headDim << " " << pageSize;
  for (int pageSize : {1, 8, 24, 100})
    EXPECT_EQ(choosePrefillSchedule(paged(128, pageSize, ScalarType::BF16)).mma,
              ::attn::PrefillMma::Sync)
        << pageSize;
  EXPECT_EQ(choosePrefillSchedule(paged(96, 16, ScalarType::BF16)).mma,
            ::attn::PrefillMma::Sync);
  EXPECT_EQ(choosePrefillSchedule(paged(128, 8, ScalarType::F8E4M3)).mma,
            ::attn::PrefillMma::Sync);
}

TEST(ScheduleTest, WgmmaPacksTheQHeadsOfOneOrTwoKVHeads) {
  auto prefill = [](int qHeads, int kvHeads) {
    KernelSpec spec = decodeSpec(Arch::SM90a, qHeads, kvHeads, 128);
    spec.kind = SpecKind::PagedPrefill;
    spec.pageSize = 16;
    return spec;
  };
  // Tensor-parallel shards: one or two KV heads.
  for (auto [q, kv] : {std::pair{8, 1}, {4, 1}, {16, 2}, {64, 1}}) {
    ::attn::PrefillSchedule s = choosePrefillSchedule(prefill(q, kv));
    EXPECT_EQ(s.mma, ::attn::PrefillMma::Wgmma) << q << "/" << kv;
    EXPECT_TRUE(s.packGqa) << q << "/" << kv;
  }
  // More KV heads, one q head per KV head, a group that does not divide
  // 64, per-head values: not packed.
  for (auto [q, kv] : {std::pair{32, 8}, {2, 2}, {6, 1}})
    EXPECT_FALSE(choosePrefillSchedule(prefill(q, kv)).packGqa)
        << q << "/" << kv;
  KernelSpec alibi = prefill(8, 1);
  alibi.alibi = true;
  EXPECT_FALSE(choosePrefillSchedule(alibi).packGqa);
}

TEST(ScheduleTest, RaggedPrefillTakesWgmmaOnSm90a) {
  auto ragged = [](Arch arch, int headDim) {
    KernelSpec spec = decodeSpec(arch, 32, 8, headDim);
    spec.kind = SpecKind::Prefill;
    return spec;
  };
  PrefillSchedule wgmma = prefillSchedule(12, 128, 128, 2);
  wgmma.mma = ::attn::PrefillMma::Wgmma;
  // sm_90a, head dims 64 and 128, either dtype, causal: the wgmma template
  // with two consumer warpgroups.
  for (int headDim : {64, 128}) {
    KernelSpec causal = ragged(Arch::SM90a, headDim);
    causal.causal = true;
    EXPECT_EQ(choosePrefillSchedule(causal), wgmma);
    causal.qType = causal.kvType = ScalarType::F16;
    EXPECT_EQ(choosePrefillSchedule(causal), wgmma);
  }
  // Without a causal mask head dim 128 keeps them, head dim 64 takes three
  // (192 rows), whose shared memory fits too.
  EXPECT_EQ(choosePrefillSchedule(ragged(Arch::SM90a, 128)), wgmma);
  PrefillSchedule wgmma64 = prefillSchedule(16, 192, 128, 2);
  wgmma64.mma = ::attn::PrefillMma::Wgmma;
  EXPECT_EQ(choosePrefillSchedule(ragged(Arch::SM90a, 64)), wgmma64);
  EXPECT_LE(::attn::prefillSm90SmemBytes(64, 2, 2, 192, 128, 2),
            sharedMemoryPerSM(Arch::SM90a) - 1024);
  // Head dim 256: 64-key tiles (registers), 192 KiB of shared memory.
  PrefillSchedule wgmma256 = prefillSchedule(12, 128, 64, 2);
  wgmma256.mma = ::attn::PrefillMma::Wgmma;
  EXPECT_EQ(choosePrefillSchedule(ragged(Arch::SM90a, 256)), wgmma256);
  EXPECT_LE(::attn::prefillSm90SmemBytes(256, 2, 2, 128, 64, 2),
            sharedMemoryPerSM(Arch::SM90a) - 1024);
  // Other head dims on sm_90a, and every head dim elsewhere: mma.sync.
  EXPECT_EQ(choosePrefillSchedule(ragged(Arch::SM90a, 96)).mma,
            ::attn::PrefillMma::Sync);
  EXPECT_EQ(choosePrefillSchedule(ragged(Arch::SM80, 256)).mma,
            ::attn::PrefillMma::Sync);
  EXPECT_EQ(choosePrefillSchedule(ragged(Arch::SM80, 128)),
            packed(prefillSchedule(4, 128, 64, 2)));
  EXPECT_EQ(choosePrefillSchedule(ragged(Arch::SM89, 64)).mma,
            ::attn::PrefillMma::Sync);
}

TEST(ScheduleTest, PagedPrefillChoicesPerShape) {
  // The heuristic reads the KV element size: FP8 caches add the widened
  // K/V tiles but halve the ring (templates/attn/prefill_layout.h).
  auto paged = [](Arch arch, int headDim, ScalarType kvType) {
    KernelSpec spec = decodeSpec(arch, 32, 8, headDim, kvType);
    spec.kind = SpecKind::PagedPrefill;
    return spec;
  };
  PrefillSchedule wgmma = prefillSchedule(12, 128, 128, 2);
  wgmma.mma = ::attn::PrefillMma::Wgmma;
  for (ScalarType kvType :
       {ScalarType::BF16, ScalarType::F8E4M3, ScalarType::F8E5M2}) {
    // Head dim 128: 102 KiB (16-bit) or 100 KiB (FP8) with 128 rows; only
    // sm_89's 99 KiB take 64. On sm_90a every cache takes the wgmma
    // template (FP8 widened in shared memory, 225 KiB with its raw ring).
    EXPECT_EQ(choosePrefillSchedule(paged(Arch::SM90a, 128, kvType)), wgmma);
    EXPECT_LE(::attn::prefillSm90SmemBytes(128, ::attn::sizeOf(kvType), 2, 128,
                                           128, 2),
              ::attn::maxSharedMemoryPerBlock(Arch::SM90a));
    EXPECT_EQ(choosePrefillSchedule(paged(Arch::SM80, 128, kvType)),
              packed(prefillSchedule(4, 128, 64, 2)));
    EXPECT_EQ(choosePrefillSchedule(paged(Arch::SM89, 128, kvType)),
              packed(prefillSchedule(4, 64, 64, 2)));
    // Head dim 256 fits every arch, sm_89 included; on sm_90a every cache
    // takes the wgmma template with 64-key tiles.
    PrefillSchedule wgmma256 = prefillSchedule(12, 128, 64, 2);
    wgmma256.mma = ::attn::PrefillMma::Wgmma;
    EXPECT_EQ(choosePrefillSchedule(paged(Arch::SM90a, 256, kvType)), wgmma256);
    for (Arch arch : {Arch::SM80, Arch::SM89}) {
      ::attn::PrefillSchedule s =
          choosePrefillSchedule(paged(arch, 256, kvType));
      EXPECT_EQ(s, packed(prefillSchedule(4, 64, 32, 2)));
      EXPECT_LE(::attn::prefillSmemBytes(256, ::attn::sizeOf(kvType), s.blockM,
                                         s.blockN, s.stages),
                sharedMemoryPerSM(Arch::SM89) - 1024);
    }
  }
}

//===----------------------------------------------------------------------===//
// Cost and thread safety of the JIT's entry
//===----------------------------------------------------------------------===//

TEST(FrontendTest, CompileDecodeVariantTime) {
  DecodeVariant variant;
  llvm::Expected<KernelSpec> warm = compileDecodeVariant(variant, Arch::SM90a);
  ASSERT_TRUE(static_cast<bool>(warm)) << llvm::toString(warm.takeError());
  constexpr int kRuns = 200;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRuns; ++i) {
    variant.numQHeads = 8 * (1 + i % 8);
    llvm::Expected<KernelSpec> spec =
        compileDecodeVariant(variant, Arch::SM90a);
    ASSERT_TRUE(static_cast<bool>(spec)) << llvm::toString(spec.takeError());
  }
  double us = std::chrono::duration<double, std::micro>(
                  std::chrono::steady_clock::now() - start)
                  .count() /
              kRuns;
  // Reported, not asserted: machines differ.
  std::printf("[ info     ] compileDecodeVariant: %.1f us per variant\n", us);
}

TEST(FrontendTest, CompilesFromSeveralThreads) {
  std::vector<std::thread> threads;
  std::vector<KernelSpec> results(4);
  std::vector<bool> ok(4, false);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      DecodeVariant variant;
      variant.numQHeads = 8 * (t + 1);
      for (int i = 0; i < 20; ++i) {
        llvm::Expected<KernelSpec> spec =
            compileDecodeVariant(variant, Arch::SM90a);
        if (!spec) {
          llvm::consumeError(spec.takeError());
          return;
        }
        results[t] = *spec;
      }
      ok[t] = true;
    });
  for (std::thread &thread : threads)
    thread.join();
  for (int t = 0; t < 4; ++t) {
    EXPECT_TRUE(ok[t]) << t;
    EXPECT_EQ(results[t].numQHeads, 8 * (t + 1));
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// score_mod / mask_mod from region text
//===----------------------------------------------------------------------===//

TEST(FrontendModifiersTest, RegionsReachTheSpecAndItsName) {
  PrefillVariant variant;
  variant.maskMod = kChunkMask;
  llvm::Expected<KernelSpec> spec = compilePrefillVariant(variant, Arch::SM80);
  ASSERT_TRUE(static_cast<bool>(spec)) << llvm::toString(spec.takeError());
  EXPECT_TRUE(spec->scoreMod.empty());
  EXPECT_NE(spec->maskMod.find("attn::region::divsi(q_pos, v0)"),
            std::string::npos)
      << spec->maskMod;
  EXPECT_NE(spec->maskModTiles.find("attn::rangeEq"), std::string::npos);
  EXPECT_TRUE(spec->aux.empty());
  EXPECT_NE(spec->uri().find("_mod"), std::string::npos);
  // Another constant is another kernel; SSA names are not part of it.
  PrefillVariant other = variant;
  other.maskMod.replace(other.maskMod.find("256"), 3, "512");
  llvm::Expected<KernelSpec> otherSpec =
      compilePrefillVariant(other, Arch::SM80);
  ASSERT_TRUE(static_cast<bool>(otherSpec));
  EXPECT_NE(spec->uri(), otherSpec->uri());
  PrefillVariant renamed = variant;
  for (size_t at; (at = renamed.maskMod.find("%same")) != std::string::npos;)
    renamed.maskMod.replace(at, 5, "%eq");
  llvm::Expected<KernelSpec> renamedSpec =
      compilePrefillVariant(renamed, Arch::SM80);
  ASSERT_TRUE(static_cast<bool>(renamedSpec));
  EXPECT_EQ(spec->uri(), renamedSpec->uri());
}

TEST(FrontendModifiersTest, BadRegionTextIsAnErrorNamingIt) {
  auto errorOf = [](std::string scoreMod, std::string maskMod) {
    DecodeVariant variant;
    variant.scoreMod = std::move(scoreMod);
    variant.maskMod = std::move(maskMod);
    llvm::Expected<KernelSpec> spec =
        compileDecodeVariant(variant, Arch::SM90a);
    return spec ? std::string() : llvm::toString(spec.takeError());
  };
  // Not a region at all.
  EXPECT_NE(
      errorOf("{ ^bb0(%x: f32): attn.yield", "").find("loc(\"score_mod\":1:"),
      std::string::npos)
      << errorOf("{ ^bb0(%x: f32): attn.yield", "");
  // Text that closes the holder op and adds another, or spells both
  // regions in the score_mod and comments out the rest, or adds an
  // attribute: each is not one region, whatever the parser makes of it.
  const char *kOneRegion = "must be exactly one region";
  EXPECT_NE(errorOf("{}) : () -> () \"x.y\"() ({}", "").find(kOneRegion),
            std::string::npos);
  std::string maskAsScore =
      "{}, " + std::string(kChunkMask) + ") : () -> () //";
  EXPECT_NE(errorOf(maskAsScore, "").find("loc(\"score_mod\""),
            std::string::npos)
      << errorOf(maskAsScore, "");
  std::string withAttr = std::string(kChunkMask) + ") {x = 1} : () -> ()";
  EXPECT_NE(errorOf("", withAttr).find("loc(\"mask_mod\""), std::string::npos)
      << errorOf("", withAttr);
  EXPECT_NE(errorOf("", "{}").find(kOneRegion), std::string::npos);
  // MLIR 19 crashes printing an i1 array written with integers, as a
  // verifier error on its op would: refused before anything verifies.
  std::string boolArray = kChunkMask;
  boolArray.insert(boolArray.find("  %c ="),
                   "  %x = \"x.y\"() {a = array<i1: 1, 0>} : () -> i32\n");
  EXPECT_NE(errorOf("", boolArray).find("is an i1 array written with integers"),
            std::string::npos)
      << errorOf("", boolArray);
  // A mask that yields f32.
  std::string wrongYield = kChunkMask;
  wrongYield.replace(wrongYield.find("attn.yield %same : i1"), 21,
                     "attn.yield %c : i32");
  EXPECT_NE(
      errorOf("", wrongYield)
          .find("'attn.yield' op operand #0 must be 32-bit float or 1-bit"),
      std::string::npos)
      << errorOf("", wrongYield);
  // The two regions disagree on their aux tables.
  std::string scoreWithTable = R"({
^bb0(%score: f32, %request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32, %t: tensor<8xf32>):
  attn.yield %score : f32
})";

  EXPECT_NE(errorOf(scoreWithTable, kChunkMask)
                .find("mask_mod must take 6 arguments"),
            std::string::npos)
      << errorOf(scoreWithTable, kChunkMask);
}

namespace {
/// A score_mod of `depth` scf.if nested in each other's then-branch.
std::string nestedIfs(int depth) {
  std::string text = "{\n^bb0(%score: f32, %request: i32, %q_pos: i32, "
                     "%k_pos: i32, %q_head: i32, %kv_head: i32):\n"
                     "  %c = arith.cmpi slt, %q_pos, %k_pos : i32\n";
  for (int i = 0; i < depth; ++i)
    text += "%r" + std::to_string(i) + " = scf.if %c -> (f32) {\n";
  for (int i = depth - 1; i >= 0; --i)
    text +=
        "scf.yield " +
        (i + 1 < depth ? "%r" + std::to_string(i + 1) : std::string("%score")) +
        " : f32\n} else {\nscf.yield %score : f32\n}\n";
  return text + "attn.yield %r0 : f32\n}";
}

/// The error of compiling `scoreMod` (empty if it compiles).
std::string scoreModError(const std::string &scoreMod) {
  PrefillVariant variant;
  variant.scoreMod = scoreMod;
  llvm::Expected<KernelSpec> spec = compilePrefillVariant(variant, Arch::SM90a);
  return spec ? std::string() : llvm::toString(spec.takeError());
}
} // namespace

TEST(FrontendModifiersTest, DeepNestingIsAnErrorBeforeParsing) {
  EXPECT_EQ(scoreModError(nestedIfs(8)), "");
  // As deep as the bound allows: the region's brace, then one per scf.if.
  EXPECT_EQ(scoreModError(nestedIfs(kMaxIRNesting - 2)), "");
  std::string error = scoreModError(nestedIfs(kMaxIRNesting));
  EXPECT_NE(error.find("nests deeper than 64 levels"), std::string::npos)
      << error;
  // Far past it (once a stack overflow), in little text: the same error.
  error = scoreModError("{" + std::string(6000, '{') + std::string(6001, '}'));
  EXPECT_NE(error.find("nests deeper than 64 levels"), std::string::npos)
      << error;
  // Brackets of attributes and types count too, not only regions.
  std::string deepAttr = nestedIfs(1);
  deepAttr.insert(deepAttr.find("  %c ="),
                  "  %k = arith.constant {deep = " + std::string(100, '[') +
                      std::string(100, ']') + "} 0 : i32\n");
  error = scoreModError(deepAttr);
  EXPECT_NE(error.find("nests deeper"), std::string::npos) << error;
  std::string deepType = nestedIfs(1);
  std::string tuple;
  for (int i = 0; i < 100; ++i)
    tuple += "tuple<";
  tuple += "i32" + std::string(100, '>');
  deepType.insert(deepType.find("  %c ="),
                  "  %t = \"x.y\"() : () -> " + tuple + "\n");
  error = scoreModError(deepType);
  EXPECT_NE(error.find("nests deeper"), std::string::npos) << error;
  // `->` and brackets in comments and strings count for nothing.
  std::string arrows = nestedIfs(kMaxIRNesting - 2);
  arrows.insert(arrows.find("  %c ="), "  // " + std::string(100, '{') +
                                           "\n  %s = arith.constant "
                                           "{note = \"" +
                                           std::string(100, '(') +
                                           "\"} 0 : i32\n");
  EXPECT_EQ(scoreModError(arrows), "");
}

TEST(FrontendModifiersTest, LargeResultNumberIsAnErrorBeforeParsing) {
  // MLIR 19 allocates a slot per result number up to N of `%name#N` before
  // it checks N, and wraps at 2^32-1 into a write out of bounds.
  auto withUse = [](const std::string &use) {
    std::string text = nestedIfs(1);
    text.insert(text.find("  %c ="),
                "  %u = arith.addi " + use + ", %q_pos : i32\n");
    return text;
  };
  // MLIR's lexer lets whitespace, NULs and comments stand before `#N`.
  for (const std::string use :
       {std::string("%q_pos#4294967295"), std::string("%q_pos#64"),
        std::string("%k#1000000000000"), std::string("%q_pos #4294967295"),
        std::string("%q_pos\0\0#4294967295", 19),
        std::string("%q_pos // c\n#4294967295")}) {
    std::string error = scoreModError(withUse(use));
    EXPECT_NE(error.find("attn parses result numbers up to 63"),
              std::string::npos)
        << use << ": " << error;
  }
  // At the bound it is MLIR's to judge (here: a block argument has one
  // value); in a string it is no reference at all.
  std::string error = scoreModError(withUse("%q_pos#63"));
  EXPECT_EQ(error.find("attn parses result numbers"), std::string::npos)
      << error;
  EXPECT_NE(error, "");
  std::string quoted = nestedIfs(1);
  quoted.insert(quoted.find("  %c ="),
                "  %s = arith.constant {note = \"%x#99999\"} 0 : i32\n");
  EXPECT_EQ(scoreModError(quoted), "");
}

TEST(FrontendModifiersTest, ForwardReferenceIntoANestedRegionIsAnError) {
  // A name used before it is defined inside a region of the op that uses
  // it: MLIR 19's parser writes through a deleted placeholder.
  std::string text = nestedIfs(2);
  const size_t use = text.find("scf.if %c");
  text.replace(use, 9, "scf.if %late");
  text.insert(text.rfind("scf.yield %score"),
              "%late = arith.cmpi slt, %q_pos, %k_pos : i32\n");
  std::string error = scoreModError(text);
  EXPECT_NE(error.find("uses %late before it is defined in a region nested "
                       "inside"),
            std::string::npos)
      << error;
  // Defined first, then used in the nested region: fine.
  EXPECT_EQ(scoreModError(nestedIfs(2)), "");
}

TEST(FrontendModifiersTest, RegionAtTheNestingBoundCompilesOnASmallStack) {
  // A host may compile on a worker thread with a small stack; the bound
  // keeps parsing, verifying and emitting within 256 KiB (more under
  // AddressSanitizer, whose frames are larger).
#if defined(__SANITIZE_ADDRESS__)
  constexpr size_t kStack = 1024 * 1024;
#else
  constexpr size_t kStack = 256 * 1024;
#endif
  struct Job {
    std::string text, error;
  } job{nestedIfs(kMaxIRNesting - 2), "<not run>"};
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, kStack), 0);
  pthread_t thread;
  ASSERT_EQ(pthread_create(
                &thread, &attr,
                [](void *arg) -> void * {
                  auto *job = static_cast<Job *>(arg);
                  job->error = scoreModError(job->text);
                  return nullptr;
                },
                &job),
            0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  EXPECT_EQ(job.error, "");
}

TEST(FrontendModifiersTest, LongRegionTextIsAnError) {
  std::string text = nestedIfs(1);
  text.insert(text.find("  %c ="),
              "  // " + std::string(::attn::kMaxModifierBytes, 'x') + "\n");
  std::string error = scoreModError(text);
  EXPECT_NE(error.find("bytes of text; at most"), std::string::npos) << error;
  // A region whose CUDA outgrows the bound fails while it is emitted.
  std::string wide = nestedIfs(1);
  std::string ops;
  for (int i = 0; i < 1400; ++i)
    ops += "  %w" + std::to_string(i) + " = arith.addi %q_pos, %k_pos : i32\n";
  wide.insert(wide.find("  %c ="), ops);
  error = scoreModError(wide);
  EXPECT_NE(error.find("longer than 65536 bytes"), std::string::npos) << error;
}

TEST(FrontendModifiersTest, I1ArithmeticInAMaskCompilesBothForms) {
  // Every integer op on i1 at a mask_mod's top level: its interval form
  // leaves what it cannot bound unbounded (once a compile error).
  std::string mask = "{\n^bb0(%request: i32, %q_pos: i32, %k_pos: i32, "
                     "%q_head: i32, %kv_head: i32):\n"
                     "  %a = arith.cmpi slt, %q_pos, %k_pos : i32\n"
                     "  %b = arith.cmpi eq, %q_head, %kv_head : i32\n";
  std::string last = "%a";
  int i = 0;
  for (const char *op :
       {"addi",  "subi",  "muli",      "divsi",     "divui",
        "remsi", "remui", "ceildivsi", "ceildivui", "floordivsi",
        "minsi", "maxsi", "minui",     "maxui",     "shli",
        "shrsi", "shrui", "andi",      "ori",       "xori"}) {
    std::string next = "%x" + std::to_string(i++);
    mask += "  " + next + " = arith." + op + " " + last + ", %b : i1\n";
    last = next;
  }
  mask += "  attn.yield " + last + " : i1\n}";
  PrefillVariant variant;
  variant.maskMod = mask;
  llvm::Expected<KernelSpec> spec = compilePrefillVariant(variant, Arch::SM90a);
  ASSERT_TRUE(static_cast<bool>(spec)) << llvm::toString(spec.takeError());
  EXPECT_EQ(spec->maskModTiles.find("rangeAdd"), std::string::npos);
  EXPECT_NE(spec->maskModTiles.find("attn::rangeLt"), std::string::npos);
  EXPECT_NE(spec->maskMod.find("attn::region::addi(v"), std::string::npos);
}

TEST(FrontendModifiersTest, OpsWithoutAFaithfulFormAreLocatedErrors) {
  for (const char *op :
       {"%x = math.ipowi %q_pos, %k_pos : i32",
        "%x, %o = arith.addui_extended %q_pos, %k_pos : i32, i1",
        "%x = math.fpowi %score, %q_pos : f32, i32"}) {
    std::string text = nestedIfs(1);
    text.insert(text.find("  %c ="), std::string("  ") + op + "\n");
    std::string error = scoreModError(text);
    EXPECT_NE(error.find("is not allowed in score_mod"), std::string::npos)
        << op << ": " << error;
    EXPECT_NE(error.find("loc(\"score_mod\":"), std::string::npos) << error;
  }
}
