//===- CascadeGpuTest.cpp - shared-prefix decode against fp64 -------------===//
//
// A random paged cache holds each group's shared pages once and each
// request's own pages after them; the cascade (prefix levels as paged
// cross attention, the suffix as decode, merged by their LSEs) must equal
// the fp64 reference of every request over its whole sequence (shared
// tokens, then its own), output and LSE. Cases: groups of different sizes,
// a group sharing nothing, two shared levels, an FP8 cache and two query
// tokens per request, each also with the kernels from an AOT library.
// Variants a cascade cannot split are refused.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/serving/Backend.h"
#include "compiler/Jit/Jit.h"
#include "test/gpu/GpuTestUtil.h"
#include "test/gpu/TestLibrary.h"
#include "test/reference/DecodeCheck.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace attn;
using namespace attn::test;

namespace {

struct CascadeCase {
  std::string name;
  DecodeVariant variant;
  std::vector<runtime::CascadeLevel> levels;
  std::vector<int> suffixLens;
  double kvScale = 1.0;
};

DecodeVariant variantOf(ScalarType kv, int hq, int hkv, int queryLen = 1) {
  DecodeVariant v;
  v.kvType = kv;
  v.numQHeads = hq;
  v.numKVHeads = hkv;
  v.queryLen = queryLen;
  v.causal = queryLen > 1;
  return v;
}

std::vector<CascadeCase> cases() {
  using S = ScalarType;
  std::vector<CascadeCase> c;
  c.push_back({"bf16_three_groups_one_unshared",
               variantOf(S::BF16, 32, 8),
               {{{0, 4, 5, 8}, {1024, 0, 256}}},
               {300, 1, 17, 64, 500, 2, 33, 129}});
  c.push_back({"bf16_two_levels",
               variantOf(S::BF16, 16, 4),
               {{{0, 6}, {512}}, {{0, 3, 6}, {256, 128}}},
               {40, 1, 300, 16, 17, 90}});
  c.push_back({"e4m3_ql2",
               variantOf(S::F8E4M3, 16, 2, 2),
               {{{0, 2, 5}, {2048, 512}}},
               {2, 77, 300, 5, 16},
               0.05});
  return c;
}

void PrintTo(const CascadeCase &c, std::ostream *os) { *os << c.name; }

/// `cascade` (of tc.variant) on a random cache against the fp64 reference.
void expectMatchesReference(const CascadeCase &tc,
                            const runtime::CascadeAttention &cascade) {
  const DecodeVariant &v = tc.variant;
  std::mt19937 rng(uint32_t(std::hash<std::string>()(tc.name)));
  const int batch = int(tc.suffixLens.size());

  // One cache sequence per group of every level, then one per request.
  std::vector<int> seqLens;
  std::vector<int> firstSeq; // of each level's groups
  for (const runtime::CascadeLevel &level : tc.levels) {
    firstSeq.push_back(int(seqLens.size()));
    seqLens.insert(seqLens.end(), level.kvLens.begin(), level.kvLens.end());
  }
  const int firstSuffix = int(seqLens.size());
  seqLens.insert(seqLens.end(), tc.suffixLens.begin(), tc.suffixLens.end());
  check::PagedCacheShape shape;
  shape.kvType = v.kvType;
  shape.numKVHeads = v.numKVHeads;
  shape.headDim = v.headDim;
  shape.pageSize = v.pageSize;
  shape.kvScale = tc.kvScale;
  check::RandomPagedCache cache = check::randomPagedCache(rng, shape, seqLens);
  std::vector<double> seqK, seqV;
  check::gatherPages(cache, shape, seqLens, seqK, seqV);
  std::vector<int64_t> seqStart = {0};
  for (int len : seqLens)
    seqStart.push_back(seqStart.back() + len);

  // Each request's keys: its group's shared tokens at every level, then
  // its own.
  const int64_t row = int64_t(v.numKVHeads) * v.headDim;
  ref::PrefillProblem prob;
  prob.numQHeads = v.numQHeads;
  prob.numKVHeads = v.numKVHeads;
  prob.headDim = v.headDim;
  prob.scale = 1.0 / std::sqrt(double(v.headDim));
  prob.causal = true;
  prob.cuSeqlensQ = {0};
  prob.cuSeqlensKV = {0};
  auto append = [&](int seq) {
    prob.k.insert(prob.k.end(), seqK.begin() + seqStart[seq] * row,
                  seqK.begin() + seqStart[seq + 1] * row);
    prob.v.insert(prob.v.end(), seqV.begin() + seqStart[seq] * row,
                  seqV.begin() + seqStart[seq + 1] * row);
    return seqLens[seq];
  };
  for (int b = 0; b < batch; ++b) {
    int keys = 0;
    for (size_t l = 0; l < tc.levels.size(); ++l) {
      const auto &starts = tc.levels[l].groupStarts;
      int g = int(std::upper_bound(starts.begin(), starts.end(), b) -
                  starts.begin()) -
              1;
      keys += append(firstSeq[l] + g);
    }
    keys += append(firstSuffix + b);
    prob.cuSeqlensQ.push_back(prob.cuSeqlensQ.back() + v.queryLen);
    prob.cuSeqlensKV.push_back(prob.cuSeqlensKV.back() + keys);
  }
  const int64_t qTokens = int64_t(batch) * v.queryLen;
  check::Quantized q = check::randomValues(
      rng, v.qType, size_t(qTokens * v.numQHeads * v.headDim), 1.0);
  prob.q = q.values;
  std::vector<double> refOut, refLse;
  ref::prefillReference(prob, refOut, refLse);

  ATTN_ASSIGN_OR_FAIL(dCache, check::uploadCache(cache, shape));
  ATTN_ASSIGN_OR_FAIL(dq, check::upload(q.bytes));
  ATTN_ASSIGN_OR_FAIL(out, poisoned(q.bytes.size()));
  ATTN_ASSIGN_OR_FAIL(lse, poisoned(size_t(qTokens * v.numQHeads) * 4));
  ATTN_ASSIGN_OR_FAIL(ws,
                      cascade.createWorkspace(batch, int(tc.levels.size())));
  ATTN_ASSIGN_OR_FAIL(plan,
                      cascade.plan(tc.levels, tc.suffixLens, ws, nullptr));
  runtime::CascadeArgs args;
  args.q = dq.ptr<void>();
  args.qType = v.qType;
  args.numQTokens = qTokens;
  args.numQHeads = v.numQHeads;
  args.headDim = v.headDim;
  args.out = out.ptr<void>();
  args.lse = lse.ptr<float>();
  args.cache = dCache.view;
  const int32_t *tables = dCache.pageTables.ptr<int32_t>();
  for (size_t l = 0; l < tc.levels.size(); ++l) {
    args.levelPageTables[l] =
        tables + int64_t(firstSeq[l]) * cache.pageTableStride;
    args.levelPageTableStrides[l] = cache.pageTableStride;
  }
  args.suffixPageTables = tables + int64_t(firstSuffix) * cache.pageTableStride;
  args.suffixPageTableStride = cache.pageTableStride;
  if (sizeOf(v.kvType) == 1) {
    args.kScale = dCache.kScales.ptr<float>();
    args.vScale = dCache.vScales.ptr<float>();
    args.numKVScales = int(cache.kScales.size());
  }
  ATTN_ASSERT_OK(cascade.run(plan, args, nullptr));
  ATTN_ASSIGN_OR_FAIL(outBytes, download(out));
  ATTN_ASSIGN_OR_FAIL(lseBytes, download(lse));
  EXPECT_LT(ref::relativeError(decodeAll(v.qType, outBytes), refOut), 1e-2)
      << tc.name;
  std::vector<float> gotLse(lseBytes.size() / 4);
  std::memcpy(gotLse.data(), lseBytes.data(), lseBytes.size());
  double lseError = 0;
  for (size_t i = 0; i < gotLse.size(); ++i)
    lseError = std::max(lseError, std::isnan(gotLse[i])
                                      ? std::numeric_limits<double>::infinity()
                                      : std::fabs(gotLse[i] - refLse[i]));
  EXPECT_LT(lseError, 2e-3) << tc.name;
}

class CascadeGpuTest : public ::testing::TestWithParam<CascadeCase> {};

TEST_P(CascadeGpuTest, MatchesReference) {
  ATTN_REQUIRE_GPU();
  ATTN_ASSIGN_OR_FAIL(cascade, Jit::global().cascade(GetParam().variant));
  expectMatchesReference(GetParam(), cascade);
}

// A host without the compiler: the three kernels from an AOT library (as
// attn-aot's decode, paged prefill and merge_states entries write them).
TEST(CascadeAotGpuTest, LibraryKernelsMatchReference) {
  ATTN_REQUIRE_GPU();
  ATTN_ASSIGN_OR_FAIL(arch, runtime::currentDeviceArch());
  for (const CascadeCase &tc : cases()) {
    const DecodeVariant &v = tc.variant;
    TestLibrary built;
    ATTN_ASSERT_OK(built.build(arch, runtime::cascadePrefixVariant(v),
                               runtime::cascadeSuffixVariant(v),
                               runtime::cascadeMergeVariant(v)));
    ATTN_ASSIGN_OR_FAIL(library, runtime::AotLibrary::open(built.path()));
    ATTN_ASSIGN_OR_FAIL(
        cascade, runtime::cascadeFrom(runtime::kernelsFrom(library, arch), v));
    expectMatchesReference(tc, cascade);
  }
}

INSTANTIATE_TEST_SUITE_P(Matrix, CascadeGpuTest, ::testing::ValuesIn(cases()),
                         [](const auto &info) { return info.param.name; });

TEST(CascadeArgsGpuTest, RefusesWhatItCannotSplit) {
  ATTN_REQUIRE_GPU();
  DecodeVariant windowed;
  windowed.windowLeft = 100;
  auto refused = Jit::global().cascade(windowed);
  ASSERT_FALSE(bool(refused));
  EXPECT_NE(llvm::toString(refused.takeError()).find("sliding window"),
            std::string::npos);
  DecodeVariant sinks;
  sinks.sinks = true;
  auto noSinks = Jit::global().cascade(sinks);
  ASSERT_FALSE(bool(noSinks));
  EXPECT_NE(llvm::toString(noSinks.takeError()).find("sinks is not supported"),
            std::string::npos);

  ATTN_ASSIGN_OR_FAIL(cascade, Jit::global().cascade(DecodeVariant{}));
  ATTN_ASSIGN_OR_FAIL(ws, cascade.createWorkspace(4, 1));
  auto split = cascade.plan({{{0, 4}, {100}}}, {1, 1, 1, 1}, ws, nullptr);
  ASSERT_FALSE(bool(split));
  EXPECT_NE(llvm::toString(split.takeError())
                .find("kvLens[0] = 100 must be a "
                      "non-negative multiple of "
                      "the page size (16)"),
            std::string::npos);
  auto gap =
      cascade.plan({{{0, 2, 2, 4}, {16, 16, 16}}}, {1, 1, 1, 1}, ws, nullptr);
  ASSERT_FALSE(bool(gap));
  EXPECT_NE(llvm::toString(gap.takeError()).find("group 1 is empty"),
            std::string::npos);
  auto deep =
      cascade.plan({{{0, 4}, {16}}, {{0, 4}, {16}}}, {1, 1, 1, 1}, ws, nullptr);
  ASSERT_FALSE(bool(deep));
  EXPECT_NE(llvm::toString(deep.takeError()).find("2 shared levels"),
            std::string::npos);
}

} // namespace
