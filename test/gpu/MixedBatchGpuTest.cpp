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

#include <random>

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

// Batch invariance across paths: a request's last token (position 11999
// of 12000 cached keys) gives the same output and LSE bits as a decode
// alone, as the last row of a prefill chunk, and as a decode or a chunk
// inside random mixed batches, direct or replayed from a graph. With the
// knob off, the decode kernel's bits differ from the chunk's at least once
// (the test can fail).
TEST(MixedBatchInvarianceGpuTest, ATokenGivesTheSameBitsOnEveryPath) {
  ATTN_REQUIRE_GPU();
  for (bool invariant : {true, false}) {
    SCOPED_TRACE(invariant ? "batch_invariant" : "default");
    PrefillVariant v =
        pagedVariant(ScalarType::BF16, ScalarType::BF16, 32, 8, 128);
    v.writeLse = true;
    v.batchInvariant = invariant;
    ATTN_ASSIGN_OR_FAIL(mixed, mixedFor(v));
    const size_t rowBytes = size_t(v.numQHeads) * v.headDim * 2;
    const size_t lseRowBytes = size_t(v.numQHeads) * sizeof(float);
    using Bits = std::pair<std::vector<uint8_t>, std::vector<uint8_t>>;
    // The output and LSE bytes of request `at`'s last row.
    auto lastToken = [&](const std::vector<int> &qLens,
                         const std::vector<int> &kvLens, int numPrefills,
                         int at, uint32_t seed, int replays) -> Bits {
      check::PrefillCheckOptions o;
      o.qLens = qLens;
      o.kvLens = kvLens;
      o.pinnedRequest = at;
      o.pinnedSeed = 5;
      o.seed = seed;
      o.graphReplays = replays;
      auto r = check::checkMixedBatch(mixed, v, o, numPrefills);
      EXPECT_TRUE(bool(r)) << llvm::toString(r.takeError());
      if (!r)
        return {};
      EXPECT_LT(r->outError, 1e-2);
      EXPECT_LT(r->lseError, 2e-3);
      size_t row = 0;
      for (int b = 0; b <= at; ++b)
        row += size_t(qLens[b]);
      row -= 1;
      auto slice = [](const std::vector<uint8_t> &bytes, size_t first,
                      size_t n) {
        return std::vector<uint8_t>(bytes.begin() + first,
                                    bytes.begin() + first + n);
      };
      return {slice(r->outBytes, row * rowBytes, rowBytes),
              slice(r->lseBytes, row * lseRowBytes, lseRowBytes)};
    };
    const Bits alone = lastToken({1}, {12000}, 0, 0, 1, 0);
    int differ = 0;
    const Bits chunk = lastToken({64}, {12000}, 1, 0, 2, 0);
    if (invariant) {
      EXPECT_EQ(chunk, alone) << "the last row of a 64-row chunk";
    }
    differ += chunk != alone;
    std::mt19937 rng(3);
    for (int trial = 0; trial < 8; ++trial) {
      // Other requests short enough that the fp64 reference stays cheap.
      const int batch = 2 + int(rng() % 31);
      const int numPrefills = int(rng() % batch);
      const int at = int(rng() % batch);
      std::vector<int> qLens, kvLens;
      for (int b = 0; b < batch; ++b) {
        const bool prefillRow = b < numPrefills;
        const int q = prefillRow ? 1 + int(rng() % 64) : 1;
        qLens.push_back(q);
        kvLens.push_back(b == at ? 12000 : q + int(rng() % 2000));
      }
      const Bits got = lastToken(qLens, kvLens, numPrefills, at, 10 + trial,
                                 trial % 2 ? 2 : 0);
      if (invariant) {
        EXPECT_EQ(got, alone) << "batch " << batch << ", " << numPrefills
                              << " prefills, at " << at;
      }
      differ += got != alone;
    }
    if (!invariant) {
      EXPECT_GT(differ, 0) << "the default plans gave the same bits on every "
                              "path: this test could not fail";
    }
  }
}

} // namespace
