//===- MlaDecodeGpuTest.cpp - MLA decode against the fp64 reference -------===//
//
// Random latent and RoPE caches on shuffled pages, every byte the kernel
// must not read (unused pages, slots past a request's length, the padding
// of strided rows) NaN, compared with mlaDecodeReference on the values the
// GPU stored: DeepSeek's 512 + 64 at 16 and 128 heads, 256 + 64, NoPE MLA,
// page sizes 1 to 64, one cache tensor (vLLM, FlashMLA) or two (FlashInfer),
// e4m3 caches, multi-token causal rows, split-KV over 33k keys, and CUDA
// graph replay. Bad arguments are errors naming them.
//
//===----------------------------------------------------------------------===//
#include "compiler/Jit/Jit.h"
#include "test/gpu/GpuTestUtil.h"
#include "test/reference/Reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

using namespace attn;
using namespace attn::test;

namespace {

struct MlaCase {
  std::string name;
  MlaDecodeVariant variant;
  std::vector<int> seqLens;
  bool twoTensors = false;   ///< separate ckv and kpe caches (FlashInfer)
  int64_t padTokenElems = 0; ///< extra elements per cache row (strided)
  /// >= 0: that request's q and cache rows are drawn from `pinnedSeed`
  /// alone, the same in any batch (16-bit caches; batch invariance).
  int pinnedRequest = -1;
  uint32_t pinnedSeed = 0;
};

MlaDecodeVariant mla(ScalarType q, ScalarType kv, int heads, int rank, int rope,
                     int page) {
  MlaDecodeVariant v;
  v.qType = q;
  v.kvType = kv;
  v.numQHeads = heads;
  v.kvLoraRank = rank;
  v.ropeDim = rope;
  v.pageSize = page;
  return v;
}

std::vector<MlaCase> cases() {
  using S = ScalarType;
  std::vector<MlaCase> c;
  c.push_back({"bf16_h16_512_64_p64",
               mla(S::BF16, S::BF16, 16, 512, 64, 64),
               {1, 63, 64, 65, 700, 1500, 2049, 3000}});
  c.push_back({"bf16_h128_512_64_p1",
               mla(S::BF16, S::BF16, 128, 512, 64, 1),
               {1, 100, 333, 900}});
  c.push_back({"f16_h32_256_64_p16",
               mla(S::F16, S::F16, 32, 256, 64, 16),
               {5, 77, 1024, 2000},
               true});
  c.push_back({"bf16_h16_512_nope_p32",
               mla(S::BF16, S::BF16, 16, 512, 0, 32),
               {17, 600, 1200}});
  c.push_back({"bf16_e4m3_h16_512_64_p64",
               mla(S::BF16, S::F8E4M3, 16, 512, 64, 64),
               {1, 200, 1000, 2500}});
  c.push_back({"f16_e4m3_h64_512_64_p16_two_tensors",
               mla(S::F16, S::F8E4M3, 64, 512, 64, 16),
               {40, 800},
               true});
  c.push_back({"bf16_h16_512_64_p64_strided",
               mla(S::BF16, S::BF16, 16, 512, 64, 64),
               {100, 900},
               false,
               64});
  MlaCase mtp{"bf16_h16_512_64_p64_mtp3_causal_lse",
              mla(S::BF16, S::BF16, 16, 512, 64, 64),
              {3, 64, 500, 1300}};
  mtp.variant.queryLen = 3;
  mtp.variant.causal = true;
  mtp.variant.writeLse = true;
  c.push_back(mtp);
  MlaCase lse{"bf16_h16_512_64_p64_lse_scale",
              mla(S::BF16, S::BF16, 16, 512, 64, 64),
              {2, 4000}};
  lse.variant.writeLse = true;
  lse.variant.scale = 0.0625f;
  c.push_back(lse);
  // A pinned deeper ring (one CTA per SM) against the default two stages.
  MlaCase deep{"bf16_h16_512_64_p64_4stages",
               mla(S::BF16, S::BF16, 16, 512, 64, 64),
               {1, 700, 2049}};
  DecodeSchedule four;
  four.warps = 4;
  four.stages = 4;
  four.rowTiles = 1;
  four.ctasPerSM = 1;
  deep.variant.schedule = four;
  c.push_back(deep);
  // Split-KV: one long request over many CTAs.
  c.push_back({"bf16_h16_512_64_p64_33k",
               mla(S::BF16, S::BF16, 16, 512, 64, 64),
               {33000}});
  c.push_back({"bf16_e4m3_h16_512_64_p64_33k",
               mla(S::BF16, S::F8E4M3, 16, 512, 64, 64),
               {33000, 50}});
  return c;
}

void PrintTo(const MlaCase &c, std::ostream *os) { *os << c.name; }

/// One problem on the device: the caches, queries, outputs and the fp64
/// reference of the values stored.
struct MlaRun {
  ref::MlaDecodeProblem prob;
  runtime::DeviceBuffer ckv, kpe, qNope, qRope, out, lse, pageTables, scale;
  runtime::MlaDecodeArgs args;
  std::vector<int32_t> lens;
};

llvm::Expected<MlaRun> makeRun(const MlaCase &tc, std::mt19937 &rng) {
  const MlaDecodeVariant &v = tc.variant;
  MlaRun r;
  const int batch = int(tc.seqLens.size());
  const int rank = v.kvLoraRank, rope = v.ropeDim, page = v.pageSize;
  const int kvBytes = sizeOf(v.kvType);
  const double kvScale = v.kvType == ScalarType::F8E4M3 ? 0.25 : 1.0;
  // Pages: what every request needs, plus unused ones, shuffled.
  std::vector<int> pagesOf(batch);
  int64_t numPages = 3;
  for (int b = 0; b < batch; ++b)
    numPages += pagesOf[b] = (tc.seqLens[b] + page - 1) / page;
  std::vector<int32_t> perm(numPages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  int pageTableStride = 1;
  for (int n : pagesOf)
    pageTableStride = std::max(pageTableStride, n + 1);
  std::vector<int32_t> tables(size_t(batch) * pageTableStride, -7);
  r.prob.cacheRow.resize(batch);
  size_t next = 0;
  for (int b = 0; b < batch; ++b)
    for (int i = 0; i < pagesOf[b]; ++i)
      tables[size_t(b) * pageTableStride + i] = perm[next++];

  // The caches, all NaN but the tokens requests hold.
  const int64_t ckvRow =
      (tc.twoTensors ? rank : rank + rope) + tc.padTokenElems;
  const int64_t kpeRow = rope;
  std::vector<uint8_t> ckvBytes(size_t(numPages) * page * ckvRow * kvBytes,
                                0xFF);
  std::vector<uint8_t> kpeBytes(
      tc.twoTensors ? size_t(numPages) * page * kpeRow * kvBytes : 0, 0xFF);
  int64_t rows = 0;
  for (int b = 0; b < batch; ++b)
    rows += tc.seqLens[b];
  Quantized latent =
      randomValues(rng, v.kvType, size_t(rows) * rank, 1.0, kvScale);
  Quantized ropeVals =
      randomValues(rng, v.kvType, size_t(rows) * rope, 1.0, kvScale);
  int64_t row = 0;
  const int64_t tokens = int64_t(batch) * v.queryLen;
  Quantized qNope =
      randomValues(rng, v.qType, size_t(tokens) * v.numQHeads * rank, 1.0);
  Quantized qRope =
      randomValues(rng, v.qType, size_t(tokens) * v.numQHeads * rope, 1.0);
  if (tc.pinnedRequest >= 0) {
    // Its cache rows by index, its q rows by position.
    const int pinned = tc.pinnedRequest;
    for (int b = 0; b < pinned; ++b)
      row += tc.seqLens[b];
    for (int j = 0; j < tc.seqLens[pinned]; ++j) {
      check::overwritePinned(latent.bytes, latent.values, v.kvType,
                             (row + j) * rank, rank, tc.pinnedSeed,
                             check::PinnedStream::KRow, j);
      if (rope)
        check::overwritePinned(ropeVals.bytes, ropeVals.values, v.kvType,
                               (row + j) * rope, rope, tc.pinnedSeed,
                               check::PinnedStream::KRopeRow, j);
    }
    const int64_t qRow = int64_t(v.numQHeads) * rank;
    const int64_t qRopeRow = int64_t(v.numQHeads) * rope;
    for (int i = 0; i < v.queryLen; ++i) {
      const int64_t token = int64_t(pinned) * v.queryLen + i;
      const int64_t position = tc.seqLens[pinned] - v.queryLen + i;
      check::overwritePinned(qNope.bytes, qNope.values, v.qType, token * qRow,
                             qRow, tc.pinnedSeed, check::PinnedStream::QRow,
                             position);
      if (rope)
        check::overwritePinned(qRope.bytes, qRope.values, v.qType,
                               token * qRopeRow, qRopeRow, tc.pinnedSeed,
                               check::PinnedStream::QRopeRow, position);
    }
    row = 0;
  }
  r.prob.latent = latent.values;
  r.prob.rope = ropeVals.values;
  for (int b = 0; b < batch; ++b)
    for (int j = 0; j < tc.seqLens[b]; ++j, ++row) {
      const int64_t p = tables[size_t(b) * pageTableStride + j / page];
      const int64_t slot = p * page + j % page;
      r.prob.cacheRow[b].push_back(row);
      std::memcpy(&ckvBytes[size_t(slot * ckvRow) * kvBytes],
                  &latent.bytes[size_t(row * rank) * kvBytes],
                  size_t(rank) * kvBytes);
      uint8_t *ropeDst =
          tc.twoTensors ? &kpeBytes[size_t(slot * kpeRow) * kvBytes]
                        : &ckvBytes[size_t(slot * ckvRow + rank) * kvBytes];
      if (rope)
        std::memcpy(ropeDst, &ropeVals.bytes[size_t(row * rope) * kvBytes],
                    size_t(rope) * kvBytes);
    }

  r.prob.numQHeads = v.numQHeads;
  r.prob.rank = rank;
  r.prob.ropeDim = rope;
  r.prob.queryLen = v.queryLen;
  r.prob.causal = v.causal;
  r.prob.scale = v.scale ? double(*v.scale) : 1.0 / std::sqrt(rank + rope);
  r.prob.seqLens = tc.seqLens;
  r.prob.qNope = qNope.values;
  r.prob.qRope = qRope.values;

  auto put = [](runtime::DeviceBuffer &dst,
                llvm::Expected<runtime::DeviceBuffer> src) -> llvm::Error {
    if (!src)
      return src.takeError();
    dst = std::move(*src);
    return llvm::Error::success();
  };
  if (llvm::Error e = put(r.ckv, upload(ckvBytes)))
    return std::move(e);
  if (tc.twoTensors)
    if (llvm::Error e = put(r.kpe, upload(kpeBytes)))
      return std::move(e);
  if (llvm::Error e = put(r.qNope, upload(qNope.bytes)))
    return std::move(e);
  if (rope)
    if (llvm::Error e = put(r.qRope, upload(qRope.bytes)))
      return std::move(e);
  const int qBytes = sizeOf(v.qType);
  if (llvm::Error e =
          put(r.out, poisoned(size_t(tokens) * v.numQHeads * rank * qBytes)))
    return std::move(e);
  if (v.writeLse)
    if (llvm::Error e = put(r.lse, poisoned(size_t(tokens) * v.numQHeads * 4)))
      return std::move(e);
  if (llvm::Error e = put(r.pageTables, upload(tables)))
    return std::move(e);
  std::vector<float> scaleHost = {float(kvScale)};
  if (llvm::Error e = put(r.scale, upload(scaleHost)))
    return std::move(e);

  runtime::MlaDecodeArgs &a = r.args;
  a.qType = v.qType;
  a.numTokens = tokens;
  a.numQHeads = v.numQHeads;
  a.qNope = reinterpret_cast<const void *>(r.qNope.get());
  a.qRope = rope ? reinterpret_cast<const void *>(r.qRope.get()) : nullptr;
  a.out = reinterpret_cast<void *>(r.out.get());
  a.lse = v.writeLse ? reinterpret_cast<float *>(r.lse.get()) : nullptr;
  a.kvType = v.kvType;
  a.numPages = numPages;
  a.ckv = reinterpret_cast<const void *>(r.ckv.get());
  a.ckvTokenStride = ckvRow;
  if (tc.twoTensors && rope)
    a.kpe = reinterpret_cast<const void *>(r.kpe.get());
  a.pageTables = reinterpret_cast<const int32_t *>(r.pageTables.get());
  a.pageTableStride = pageTableStride;
  a.kvScale = v.kvType == ScalarType::F8E4M3
                  ? reinterpret_cast<const float *>(r.scale.get())
                  : nullptr;
  r.lens.assign(tc.seqLens.begin(), tc.seqLens.end());
  return std::move(r);
}

/// The kernel's output and LSE against the reference: relative error of
/// the outputs and the worst LSE difference.
void expectMatches(const MlaCase &tc, const MlaRun &r) {
  std::vector<double> want, wantLse;
  ref::mlaDecodeReference(r.prob, want, wantLse);
  auto outBytes = download(r.out);
  ASSERT_TRUE(bool(outBytes)) << llvm::toString(outBytes.takeError());
  std::vector<double> got = decodeAll(tc.variant.qType, *outBytes);
  const double tol = tc.variant.qType == ScalarType::BF16 ? 1e-2 : 3e-3;
  EXPECT_LT(ref::relativeError(got, want), tol) << tc.name;
  if (tc.variant.writeLse) {
    auto lseBytes = download(r.lse);
    ASSERT_TRUE(bool(lseBytes)) << llvm::toString(lseBytes.takeError());
    std::vector<float> gotLse(wantLse.size());
    std::memcpy(gotLse.data(), lseBytes->data(), gotLse.size() * 4);
    double worst = 0;
    for (size_t i = 0; i < gotLse.size(); ++i)
      worst = std::max(worst, std::abs(double(gotLse[i]) - wantLse[i]));
    EXPECT_LT(worst, 2e-3) << tc.name << ": worst LSE error";
  }
}

class MlaDecodeGpuTest : public ::testing::TestWithParam<MlaCase> {};

TEST_P(MlaDecodeGpuTest, MatchesReference) {
  ATTN_REQUIRE_GPU();
  const MlaCase &tc = GetParam();
  ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().mlaDecode(tc.variant));
  std::mt19937 rng(uint32_t(std::hash<std::string>()(tc.name)));
  ATTN_ASSIGN_OR_FAIL(run, makeRun(tc, rng));
  ATTN_ASSIGN_OR_FAIL(workspace,
                      kernel->createWorkspace(int(tc.seqLens.size())));
  ATTN_ASSIGN_OR_FAIL(plan, kernel->plan(run.lens, workspace, nullptr));
  ATTN_ASSERT_OK(kernel->run(plan, run.args, nullptr));
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  expectMatches(tc, run);
}

TEST_P(MlaDecodeGpuTest, ReplaysFromACudaGraph) {
  ATTN_REQUIRE_GPU();
  const MlaCase &tc = GetParam();
  if (tc.name.find("33k") == std::string::npos &&
      tc.name.find("mtp") == std::string::npos)
    GTEST_SKIP() << "graph replay runs on the split and multi-token cases";
  ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().mlaDecode(tc.variant));
  std::mt19937 rng(uint32_t(std::hash<std::string>()(tc.name)) + 1);
  ATTN_ASSIGN_OR_FAIL(run, makeRun(tc, rng));
  ATTN_ASSIGN_OR_FAIL(workspace,
                      kernel->createWorkspace(int(tc.seqLens.size())));
  ATTN_ASSIGN_OR_FAIL(plan, kernel->plan(run.lens, workspace, nullptr,
                                         /*forGraph=*/true));
  CUstream stream;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  llvm::Error replayed = check::replayInGraph(*kernel, plan, run.args, stream,
                                              {&run.out, &run.lse}, 3);
  cuStreamDestroy(stream);
  ATTN_ASSERT_OK(std::move(replayed));
  expectMatches(tc, run);
}

INSTANTIATE_TEST_SUITE_P(Shapes, MlaDecodeGpuTest, ::testing::ValuesIn(cases()),
                         [](const auto &info) { return info.param.name; });

// Batch invariance: one request's output and LSE bytes alone and inside
// random batches (other requests, lengths, positions, graph replays). With
// the knob off the default plan splits by the batch, so some batch must
// change the bits: the test can fail.
TEST(MlaDecodeGpu, ARequestGivesTheSameBitsInAnyBatch) {
  ATTN_REQUIRE_GPU();
  for (bool invariant : {true, false}) {
    SCOPED_TRACE(invariant ? "batch_invariant" : "default");
    MlaCase tc{
        "pinned", mla(ScalarType::BF16, ScalarType::BF16, 16, 512, 64, 64), {}};
    tc.variant.writeLse = true;
    tc.variant.batchInvariant = invariant;
    tc.pinnedSeed = 11;
    ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().mlaDecode(tc.variant));
    const size_t outRow = size_t(16) * 512 * 2, lseRow = 16 * 4;
    using Bits = std::pair<std::vector<uint8_t>, std::vector<uint8_t>>;
    auto bitsOf = [&](std::vector<int> lens, int at, uint32_t seed,
                      bool graph) -> Bits {
      tc.seqLens = std::move(lens);
      tc.pinnedRequest = at;
      std::mt19937 rng(seed);
      auto run = makeRun(tc, rng);
      EXPECT_TRUE(bool(run)) << llvm::toString(run.takeError());
      auto workspace = kernel->createWorkspace(int(tc.seqLens.size()));
      EXPECT_TRUE(bool(workspace)) << llvm::toString(workspace.takeError());
      if (!run || !workspace)
        return {};
      // Graphs capture on a stream of their own.
      CUstream stream = nullptr;
      if (graph) {
        EXPECT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING),
                  CUDA_SUCCESS);
      }
      auto plan = kernel->plan(run->lens, *workspace, stream, graph);
      EXPECT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
      llvm::Error ran =
          !plan   ? plan.takeError()
          : graph ? check::replayInGraph(*kernel, *plan, run->args, stream,
                                         {&run->out, &run->lse}, 2)
                  : kernel->run(*plan, run->args, stream);
      EXPECT_FALSE(bool(ran)) << llvm::toString(std::move(ran));
      if (stream)
        cuStreamDestroy(stream);
      EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
      expectMatches(tc, *run);
      auto out = download(run->out);
      auto lse = download(run->lse);
      EXPECT_TRUE(out && lse);
      if (!out || !lse)
        return {};
      return {std::vector<uint8_t>(out->begin() + at * outRow,
                                   out->begin() + (at + 1) * outRow),
              std::vector<uint8_t>(lse->begin() + at * lseRow,
                                   lse->begin() + (at + 1) * lseRow)};
    };
    const Bits alone = bitsOf({9000}, 0, 1, false);
    std::mt19937 rng(4);
    int differ = 0;
    for (int trial = 0; trial < 8; ++trial) {
      const int batch = 1 + int(rng() % 32), at = int(rng() % batch);
      std::vector<int> lens;
      for (int b = 0; b < batch; ++b)
        // Longer requests too: the default plan sizes its chunk by the
        // longest one, which then cuts the pinned request elsewhere.
        lens.push_back(b == at ? 9000 : 1 + int(rng() % 20000));
      const Bits got = bitsOf(lens, at, 20 + trial, trial % 2 == 1);
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

TEST(MlaDecodeGpu, BadArgumentsAreErrors) {
  ATTN_REQUIRE_GPU();
  MlaCase tc{
      "bad", mla(ScalarType::BF16, ScalarType::BF16, 16, 512, 64, 64), {100}};
  ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().mlaDecode(tc.variant));
  std::mt19937 rng(7);
  ATTN_ASSIGN_OR_FAIL(run, makeRun(tc, rng));
  ATTN_ASSIGN_OR_FAIL(workspace, kernel->createWorkspace(1));
  ATTN_ASSIGN_OR_FAIL(plan, kernel->plan(run.lens, workspace, nullptr));
  auto expectError = [&](runtime::MlaDecodeArgs a, const char *what) {
    llvm::Error error = kernel->run(plan, a, nullptr);
    ASSERT_TRUE(bool(error)) << what;
    std::string text = llvm::toString(std::move(error));
    EXPECT_NE(text.find(what), std::string::npos) << text;
  };
  runtime::MlaDecodeArgs a = run.args;
  a.qRope = nullptr;
  expectError(a, "qRope");
  a = run.args;
  a.numQHeads = 32;
  expectError(a, "heads");
  a = run.args;
  a.kvScale = reinterpret_cast<const float *>(run.scale.get());
  expectError(a, "kvScale is for an e4m3 cache");
  a = run.args;
  a.ckvTokenStride = 100;
  expectError(a, "ckv strides");
  a = run.args;
  a.lse = reinterpret_cast<float *>(run.out.get());
  expectError(a, "lse given");
  a = run.args;
  a.numTokens = 2;
  expectError(a, "tokens");
  // A page id outside the cache reads the last page and is reported.
  std::vector<int32_t> bad(size_t(run.args.pageTableStride), 1 << 20);
  ATTN_ASSIGN_OR_FAIL(badTables, upload(bad));
  a = run.args;
  a.pageTables = reinterpret_cast<const int32_t *>(badTables.get());
  ATTN_ASSERT_OK(kernel->run(plan, a, nullptr));
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  auto replan = kernel->plan(run.lens, workspace, nullptr);
  ASSERT_FALSE(bool(replan));
  std::string text = llvm::toString(replan.takeError());
  EXPECT_NE(text.find("mla_decode"), std::string::npos) << text;
}

} // namespace
