//===- MixedBatchGpuTest.cpp - prefills and decodes in one call -----------===//
//
// A mixed batch (prefill chunks first, then one-row decodes, as an engine's
// forward call has them) runs through MixedBatchAttention: the paged-prefill
// kernel and the decode kernel over one random paged cache, outputs
// poisoned, checked against the fp64 reference of the whole batch (each
// decode row is a one-row chunk at the end of its keys). Tolerances as in
// PrefillGpuTest.
//
//===----------------------------------------------------------------------===//
#include "compiler/Jit/Jit.h"
#include "test/gpu/GpuTestUtil.h"
#include "test/reference/PrefillCheck.h"

using namespace attn;
using namespace attn::test;

namespace {

PrefillVariant pagedVariant(ScalarType qType, ScalarType kvType, int hq,
                            int hkv, int d, KVLayout layout = KVLayout::NHD,
                            bool perHeadScale = false) {
  PrefillVariant v;
  v.qType = qType;
  v.numQHeads = hq;
  v.numKVHeads = hkv;
  v.headDim = d;
  v.paged = PagedKVFormat{kvType, 16, layout, perHeadScale};
  return v;
}

llvm::Expected<runtime::MixedBatchAttention> mixedFor(const PrefillVariant &v) {
  return Jit::global().mixedBatch(v);
}

struct MixedCase {
  std::string name;
  PrefillVariant variant;
  std::vector<int> qLens;  ///< prefills, then 1 per decode
  std::vector<int> kvLens; ///< cached tokens, new rows included
  int numPrefills;
  double kvScale = 1.0;
  int graphReplays = 0;
};

std::vector<MixedCase> cases() {
  using S = ScalarType;
  std::vector<MixedCase> c;
  {
    auto v = pagedVariant(S::BF16, S::BF16, 32, 8, 128);
    v.writeLse = true;
    c.push_back({"bf16_3_prefills_5_decodes_lse",
                 v,
                 {200, 17, 1000, 1, 1, 1, 1, 1},
                 {1200, 17, 3000, 1, 77, 600, 4097, 33},
                 3});
  }
  c.push_back({"f16_e4m3_hnd_headscale_2_prefills_8_decodes",
               pagedVariant(S::F16, S::F8E4M3, 16, 4, 128, KVLayout::HND, true),
               {300, 64, 1, 1, 1, 1, 1, 1, 1, 1},
               {2000, 64, 5000, 16, 17, 300, 1, 2, 900, 40},
               2,
               0.05});
  c.push_back({"bf16_decodes_only",
               pagedVariant(S::BF16, S::BF16, 8, 2, 64),
               {1, 1, 1},
               {500, 17, 3000},
               0});
  c.push_back({"bf16_prefills_only",
               pagedVariant(S::BF16, S::BF16, 8, 2, 64),
               {100, 3},
               {500, 3},
               2});
  {
    auto v = pagedVariant(S::BF16, S::F8E4M3, 32, 8, 128);
    v.windowLeft = 255;
    v.softcap = 30.f;
    c.push_back({"bf16_e4m3_window_softcap_graph",
                 v,
                 {300, 1, 1, 1},
                 {1000, 2000, 5, 700},
                 1,
                 0.5,
                 /*graphReplays=*/3});
  }
  {
    // gpt-oss: sinks with a 128-key window (window_left 127).
    auto v = pagedVariant(S::BF16, S::BF16, 64, 8, 64);
    v.sinks = true;
    v.windowLeft = 127;
    v.writeLse = true;
    c.push_back({"bf16_sinks_window127_lse",
                 v,
                 {300, 1, 1, 1},
                 {1000, 20000, 5, 700},
                 1});
  }
  return c;
}

void PrintTo(const MixedCase &c, std::ostream *os) { *os << c.name; }

class MixedBatchGpuTest : public ::testing::TestWithParam<MixedCase> {};

TEST_P(MixedBatchGpuTest, MatchesReference) {
  ATTN_REQUIRE_GPU();
  const MixedCase &tc = GetParam();
  ATTN_ASSIGN_OR_FAIL(mixed, mixedFor(tc.variant));
  check::PrefillCheckOptions options;
  options.qLens = tc.qLens;
  options.kvLens = tc.kvLens;
  options.kvScale = tc.kvScale;
  options.graphReplays = tc.graphReplays;
  options.seed = uint32_t(std::hash<std::string>()(tc.name));
  ATTN_ASSIGN_OR_FAIL(result, check::checkMixedBatch(mixed, tc.variant, options,
                                                     tc.numPrefills));
  double tolerance = tc.variant.qType == ScalarType::BF16 ? 1e-2 : 4e-3;
  EXPECT_LT(result.outError, tolerance) << tc.name;
  if (tc.variant.writeLse) {
    EXPECT_LT(result.lseError, 2e-3) << tc.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Matrix, MixedBatchGpuTest,
                         ::testing::ValuesIn(cases()),
                         [](const auto &info) { return info.param.name; });

TEST(MixedBatchArgsGpuTest, CreateRejectsKernelsThatDisagree) {
  ATTN_REQUIRE_GPU();
  PrefillVariant v = pagedVariant(ScalarType::BF16, ScalarType::BF16, 8, 2, 64);
  ATTN_ASSIGN_OR_FAIL(prefill, Jit::global().prefill(v));
  DecodeVariant other = runtime::decodeVariantFor(v);
  other.softcap = 30.f;
  ATTN_ASSIGN_OR_FAIL(decode, Jit::global().decode(other));
  auto mixed = runtime::MixedBatchAttention::create(prefill, decode);
  ASSERT_FALSE(bool(mixed));
  EXPECT_NE(llvm::toString(mixed.takeError()).find("softcap"),
            std::string::npos);

  PrefillVariant ragged = v;
  ragged.paged.reset();
  ATTN_ASSIGN_OR_FAIL(raggedKernel, Jit::global().prefill(ragged));
  ATTN_ASSIGN_OR_FAIL(goodDecode,
                      Jit::global().decode(runtime::decodeVariantFor(v)));
  auto notPaged =
      runtime::MixedBatchAttention::create(raggedKernel, goodDecode);
  ASSERT_FALSE(bool(notPaged));
  EXPECT_NE(llvm::toString(notPaged.takeError()).find("paged"),
            std::string::npos);
}

TEST(MixedBatchArgsGpuTest, PlanRejectsDecodeOfSeveralRows) {
  ATTN_REQUIRE_GPU();
  PrefillVariant v = pagedVariant(ScalarType::BF16, ScalarType::BF16, 8, 2, 64);
  ATTN_ASSIGN_OR_FAIL(mixed, mixedFor(v));
  ATTN_ASSIGN_OR_FAIL(ws, mixed.createWorkspace(4, 1024));
  std::vector<int32_t> cuQ = {0, 100, 101, 103}, seqLens = {100, 50, 60};
  auto plan = mixed.plan(cuQ, seqLens, /*numPrefills=*/1, ws, nullptr);
  ASSERT_FALSE(bool(plan));
  std::string message = llvm::toString(plan.takeError());
  EXPECT_NE(message.find("request 2 has 2 query rows"), std::string::npos)
      << message;
  auto tooMany = mixed.plan(cuQ, seqLens, /*numPrefills=*/4, ws, nullptr);
  ASSERT_FALSE(bool(tooMany));
  EXPECT_NE(llvm::toString(tooMany.takeError()).find("numPrefills = 4"),
            std::string::npos);
}

} // namespace
