//===- DecodeGpuTest.cpp - paged decode against the fp64 reference --------===//
//
// Every case JIT-compiles its variant, runs it on random data with poisoned
// outputs and compares with the fp64 reference (test/reference/DecodeCheck).
// Tolerances (relative L2 error of the output): 1e-2 for bf16 outputs, 4e-3 for
// f16 (bf16 keeps 8 mantissa bits, f16 11; P is rounded to the same type before
// P.V); LSE within 2e-3 absolute (f32 arithmetic). FP8 caches are compared
// against their exact dequantized values, so they share their q type's
// tolerance.
//
//===----------------------------------------------------------------------===//
#include "compiler/Jit/Jit.h"
#include "test/gpu/GpuTestUtil.h"

using namespace attn;
using namespace attn::test;

namespace {

struct DecodeCase {
  std::string name;
  DecodeVariant variant;
  std::vector<int> seqLens;
  double kvScale = 1.0;       ///< FP8 scale (head h uses kvScale * (1 + h/8))
  bool interleavedKV = false; ///< K and V of a page side by side (FlashInfer)
};

DecodeVariant base(ScalarType q, ScalarType kv, int hq, int hkv, int d,
                   int page) {
  DecodeVariant v;
  v.qType = q;
  v.kvType = kv;
  v.numQHeads = hq;
  v.numKVHeads = hkv;
  v.headDim = d;
  v.pageSize = page;
  return v;
}

std::vector<DecodeCase> cases() {
  using S = ScalarType;
  std::vector<DecodeCase> c;
  auto add = [&](std::string name, DecodeVariant v, std::vector<int> lens,
                 double scale = 1.0) {
    c.push_back({std::move(name), v, std::move(lens), scale});
  };
  add("bf16_mha_d128_p16", base(S::BF16, S::BF16, 8, 8, 128, 16), {1, 17, 300});
  {
    auto v = base(S::BF16, S::BF16, 32, 8, 128, 16);
    v.writeLse = true;
    add("bf16_gqa4_d128_split_lse", v, {5000, 3000});
  }
  {
    auto v = base(S::F16, S::F16, 32, 4, 64, 1);
    v.layout = KVLayout::HND;
    add("f16_gqa8_d64_p1_hnd", v, {100, 1000});
  }
  add("bf16_mqa32_d128_p32", base(S::BF16, S::BF16, 32, 1, 128, 32), {700, 5});
  // Pages smaller than a 16-token tile: 2 tokens (8 pages a tile, a split
  // request), and 24 tokens (a tile may straddle two pages).
  add("e4m3_bf16_gqa4_d128_p2", base(S::BF16, S::F8E4M3, 32, 8, 128, 2),
      {6000, 31}, 0.05);
  add("bf16_gqa4_d128_p24", base(S::BF16, S::BF16, 32, 8, 128, 24),
      {1, 50, 777});
  for (int d : {40, 80, 96, 112, 192, 256})
    add("bf16_gqa4_d" + std::to_string(d), base(S::BF16, S::BF16, 16, 4, d, 16),
        {257, 1200});
  add("e4m3_bf16_gqa4_d128", base(S::BF16, S::F8E4M3, 32, 8, 128, 16),
      {4000, 33}, 0.05);
  {
    auto v = base(S::F16, S::F8E5M2, 32, 4, 128, 8);
    v.layout = KVLayout::HND;
    add("e5m2_f16_gqa8_d128_p8_hnd", v, {900}, 0.5);
  }
  {
    auto v = base(S::F16, S::F8E4M3, 8, 8, 64, 64);
    v.perHeadKVScale = true;
    add("e4m3_f16_mha_d64_p64_headscale", v, {2100, 64}, 0.02);
  }
  add("e5m2_bf16_gqa2_d256_p128", base(S::BF16, S::F8E5M2, 8, 4, 256, 128),
      {1000, 129}, 2.0);
  add("e4m3_bf16_d40", base(S::BF16, S::F8E4M3, 8, 2, 40, 16), {333}, 0.1);
  {
    auto v = base(S::BF16, S::BF16, 32, 8, 128, 16);
    v.windowLeft = 255;
    add("bf16_gqa4_window", v, {3000, 100, 256});
  }
  {
    auto v = base(S::BF16, S::BF16, 16, 16, 128, 16);
    v.alibi = true;
    add("bf16_mha_alibi", v, {1500, 2});
    // Query tokens that see the keys after them: ALiBi's |key - query|.
    v.queryLen = 3;
    v.causal = false;
    add("bf16_mha_alibi_querylen3_unmasked", v, {700, 3});
  }
  {
    auto v = base(S::BF16, S::BF16, 32, 8, 128, 16);
    v.softcap = 5.0f; // small cap: most scores are bent by it
    add("bf16_gqa4_softcap", v, {2000});
  }
  {
    auto v = base(S::BF16, S::BF16, 32, 8, 128, 16);
    v.queryLen = 4;
    v.writeLse = true;
    add("bf16_gqa4_querylen4_causal", v, {64, 3000, 4});
  }
  {
    auto v = base(S::BF16, S::BF16, 64, 4, 128, 16);
    v.queryLen = 4; // 64 rows per KV head: two row blocks
    add("bf16_gqa16_querylen4", v, {500, 2500});
  }
  // Warps that hold several row tiles: FP8 with 32 rows (speculative
  // decoding over 8 q heads per KV head) and a window, four row tiles at
  // head dim 64 on a deeper ring, and an odd warp count.
  {
    auto v = base(S::BF16, S::F8E4M3, 32, 4, 128, 16);
    v.queryLen = 4;
    v.windowLeft = 700;
    v.writeLse = true;
    add("e4m3_bf16_gqa8_querylen4_window_lse", v, {6000, 40, 4}, 0.05);
  }
  {
    auto v = base(S::BF16, S::BF16, 64, 4, 64, 16);
    v.queryLen = 4;
    v.schedule = DecodeSchedule{/*warps=*/8, /*stages=*/3, /*rowTiles=*/4,
                                /*minChunkTokens=*/256, /*ctasPerSM=*/1};
    add("bf16_gqa16_d64_querylen4_rowtiles4", v, {3000, 9});
  }
  {
    auto v = base(S::BF16, S::BF16, 32, 1, 128, 32);
    v.schedule = DecodeSchedule{/*warps=*/3, /*stages=*/2, /*rowTiles=*/2,
                                /*minChunkTokens=*/256, /*ctasPerSM=*/1};
    add("bf16_mqa32_d128_3warps", v, {2000, 5});
  }
  {
    auto v = base(S::F16, S::F8E4M3, 16, 4, 128, 8);
    v.layout = KVLayout::HND;
    v.queryLen = 2;
    v.windowLeft = 100;
    v.alibi = true;
    v.softcap = 30.0f;
    v.perHeadKVScale = true;
    v.writeLse = true;
    add("kitchen_sink", v, {1700, 300}, 0.1);
  }
  {
    auto v = base(S::BF16, S::BF16, 8, 8, 64, 16);
    v.causal = false;
    v.kind = AttentionKind::Cross;
    v.scale = 0.3f;
    add("bf16_cross_custom_scale", v, {77, 1500});
  }
  // Attention sinks (gpt-oss): a long request split over many CTAs must
  // count its sink once, at the merge; a window of 128 keys (gpt-oss's
  // sliding layers) over an FP8 cache with several query tokens; page 1.
  {
    auto v = base(S::BF16, S::BF16, 64, 8, 64, 16);
    v.sinks = true;
    v.writeLse = true;
    add("bf16_gqa8_d64_sinks_split_lse", v, {30000, 5, 700});
    v.windowLeft = 127;
    add("bf16_gqa8_d64_sinks_window127_lse", v, {30000, 5, 700});
  }
  {
    auto v = base(S::F16, S::F8E4M3, 16, 4, 128, 8);
    v.layout = KVLayout::HND;
    v.queryLen = 3;
    v.windowLeft = 127;
    v.sinks = true;
    v.perHeadKVScale = true;
    v.writeLse = true;
    add("e4m3_f16_hnd_ql3_sinks_window_lse", v, {2500, 40, 3}, 0.1);
  }
  {
    auto v = base(S::BF16, S::F8E5M2, 32, 8, 128, 1);
    v.sinks = true;
    v.alibi = true;
    v.softcap = 30.0f;
    add("e5m2_bf16_p1_sinks_alibi_softcap", v, {900, 1}, 0.5);
  }
  // One q head per KV head and one query token: the CUDA-core path
  // (decodeSimt) at one row, with every knob it must keep, pages of one token
  // (page ids loaded a step ahead) and head dim 256 (a warp per token row).
  {
    auto v = base(S::F16, S::F8E4M3, 8, 8, 128, 1);
    v.sinks = true;
    v.windowLeft = 300;
    v.softcap = 30.0f;
    v.perHeadKVScale = true;
    v.writeLse = true;
    add("e4m3_f16_mha_p1_sinks_window_softcap_lse", v, {2500, 7, 1}, 0.1);
  }
  {
    auto v = base(S::BF16, S::BF16, 4, 4, 256, 16);
    v.layout = KVLayout::HND;
    v.writeLse = true;
    add("bf16_mha_d256_hnd_lse", v, {3000, 20});
  }
  {
    auto v = base(S::BF16, S::F8E5M2, 16, 16, 64, 8);
    v.alibi = true;
    add("e5m2_bf16_mha_d64_p8_alibi", v, {4100, 33}, 0.5);
  }
  // Two rows on the CUDA-core path: two q heads per KV head (Gemma 2's
  // ratio), or two query tokens of one head; split requests, LSE and the
  // knobs that depend on the row (sinks and ALiBi per head, the window and
  // the causal mask per query token).
  {
    auto v = base(S::BF16, S::BF16, 32, 16, 128, 16);
    v.sinks = true;
    v.softcap = 50.0f;
    v.windowLeft = 700;
    v.writeLse = true;
    add("bf16_gqa2_sinks_softcap_window_split_lse", v, {9000, 3, 1200});
  }
  {
    auto v = base(S::BF16, S::BF16, 16, 8, 256, 16); // Gemma 2
    v.softcap = 50.0f;
    v.windowLeft = 4095;
    add("bf16_gqa2_d256_softcap_window", v, {5000, 600});
  }
  {
    auto v = base(S::F16, S::F16, 8, 8, 64, 8);
    v.layout = KVLayout::HND;
    v.queryLen = 2;
    v.alibi = true;
    v.writeLse = true;
    add("f16_mha_ql2_d64_hnd_alibi_split_lse", v, {6000, 2, 333});
  }
  {
    auto v = base(S::BF16, S::F8E4M3, 16, 8, 128, 16);
    v.writeLse = true;
    add("e4m3_bf16_gqa2_split_lse", v, {5000, 17}, 0.5);
  }
  c.push_back({"bf16_interleaved_kv",
               base(S::BF16, S::BF16, 16, 4, 128, 16),
               {1000, 10},
               1.0,
               /*interleavedKV=*/true});
  return c;
}

void PrintTo(const DecodeCase &c, std::ostream *os) { *os << c.name; }

class DecodeGpuTest : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(DecodeGpuTest, MatchesReference) {
  ATTN_REQUIRE_GPU();
  const DecodeCase &tc = GetParam();
  ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().decode(tc.variant));
  check::DecodeCheckOptions options;
  options.seqLens = tc.seqLens;
  options.kvScale = tc.kvScale;
  options.interleavedKV = tc.interleavedKV;
  options.seed = uint32_t(std::hash<std::string>()(tc.name));
  ATTN_ASSIGN_OR_FAIL(result, check::checkDecode(*kernel, tc.variant, options));
  double tol = tc.variant.qType == ScalarType::BF16 ? 1e-2 : 4e-3;
  EXPECT_LT(result.outError, tol) << tc.name << ": relative L2 error (chunk "
                                  << result.chunkTokens << " tokens)";
  if (tc.variant.writeLse) {
    EXPECT_LT(result.lseError, 2e-3) << tc.name << ": worst LSE error";
  }
}

// Replays of one captured graph: the split-KV merge counters must return to
// zero after each launch, and grid sizes are the workspace capacity.
TEST(DecodeGraphGpuTest, ReplaysMatchReference) {
  ATTN_REQUIRE_GPU();
  DecodeVariant v = base(ScalarType::BF16, ScalarType::F8E4M3, 32, 8, 128, 16);
  v.writeLse = true;
  ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().decode(v));
  check::DecodeCheckOptions options;
  options.seqLens = {9000, 1, 300}; // split, tiny and single-chunk requests
  options.kvScale = 0.05;
  options.graphReplays = 3;
  ATTN_ASSIGN_OR_FAIL(result, check::checkDecode(*kernel, v, options));
  EXPECT_LT(result.outError, 1e-2);
  EXPECT_LT(result.lseError, 2e-3);
}

// Batch invariance: one request's output bytes alone and inside random
// batches (other requests, lengths, positions, batch sizes, graph replays),
// over the variants a serving engine runs. With the knob off the default
// plan splits by the batch, so some batch must change the bits: the test
// can fail.
struct InvarianceCase {
  std::string name;
  DecodeVariant variant;
};

std::vector<InvarianceCase> invarianceCases() {
  using S = ScalarType;
  std::vector<InvarianceCase> c;
  c.push_back({"bf16_32_8", base(S::BF16, S::BF16, 32, 8, 128, 16)});
  c.push_back({"e4m3_32_8", base(S::BF16, S::F8E4M3, 32, 8, 128, 16)});
  DecodeVariant mtp = base(S::BF16, S::BF16, 64, 8, 128, 16);
  mtp.queryLen = 4; // speculative decoding: 4 causal rows per request
  c.push_back({"bf16_64_8_query_len_4", mtp});
  return c;
}

class DecodeBatchInvarianceGpuTest
    : public ::testing::TestWithParam<InvarianceCase> {};

TEST_P(DecodeBatchInvarianceGpuTest, ARequestGivesTheSameBitsInAnyBatch) {
  ATTN_REQUIRE_GPU();
  for (bool invariant : {true, false}) {
    SCOPED_TRACE(invariant ? "batch_invariant" : "default");
    DecodeVariant v = GetParam().variant;
    v.batchInvariant = invariant;
    ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().decode(v));
    const size_t rowBytes = size_t(v.queryLen) * v.numQHeads * v.headDim * 2;
    auto bytesOf = [&](const std::vector<int> &lens, int at, uint32_t seed,
                       int replays) {
      check::DecodeCheckOptions o;
      o.seqLens = lens;
      o.pinnedRequest = at;
      o.pinnedSeed = 99;
      o.seed = seed;
      o.graphReplays = replays;
      o.kvScale = 0.05;
      auto r = check::checkDecode(*kernel, v, o);
      EXPECT_TRUE(bool(r)) << llvm::toString(r.takeError());
      if (!r)
        return std::vector<uint8_t>();
      EXPECT_LT(r->outError, 1e-2);
      return std::vector<uint8_t>(r->outBytes.begin() + at * rowBytes,
                                  r->outBytes.begin() + (at + 1) * rowBytes);
    };
    const int len = 9000;
    const std::vector<uint8_t> alone = bytesOf({len}, 0, 1, 0);
    std::mt19937 rng(5);
    int differ = 0;
    // Other requests short enough that the fp64 reference stays cheap.
    for (int trial = 0; trial < 10; ++trial) {
      const int batch = 1 + int(rng() % 48), at = int(rng() % batch);
      std::vector<int> lens;
      for (int b = 0; b < batch; ++b)
        lens.push_back(b == at ? len : v.queryLen + int(rng() % 3000));
      std::vector<uint8_t> got = bytesOf(lens, at, 10 + trial, trial % 3);
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

INSTANTIATE_TEST_SUITE_P(Variants, DecodeBatchInvarianceGpuTest,
                         ::testing::ValuesIn(invarianceCases()),
                         [](const auto &info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(Matrix, DecodeGpuTest, ::testing::ValuesIn(cases()),
                         [](const auto &info) { return info.param.name; });

} // namespace

namespace {

/// A small valid setup whose arguments each test breaks in one way.
class DecodeArgsGpuTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (llvm::Error err = runtime::initCuda())
      GTEST_SKIP() << "no GPU: " << llvm::toString(std::move(err));
    variant = base(ScalarType::BF16, ScalarType::F8E4M3, 8, 2, 64, 16);
    auto k = Jit::global().decode(variant);
    ASSERT_TRUE(bool(k)) << llvm::toString(k.takeError());
    kernel = *k;
    auto ws = kernel->createWorkspace(4);
    ASSERT_TRUE(bool(ws)) << llvm::toString(ws.takeError());
    workspace = std::make_unique<runtime::DecodeWorkspace>(std::move(*ws));
    // Any non-null device address passes the argument checks; run() is
    // never reached with broken arguments.
    auto buf = runtime::DeviceBuffer::allocate(1 << 20);
    ASSERT_TRUE(bool(buf)) << llvm::toString(buf.takeError());
    buffer = std::move(*buf);
    void *p = buffer.ptr<void>();
    args.q = p;
    args.qType = ScalarType::BF16;
    args.numTokens = 2;
    args.numQHeads = 8;
    args.headDim = 64;
    args.out = p;
    args.cache = {p, p, ScalarType::F8E4M3, 2, 64, 16, KVLayout::NHD, 8, 0};
    args.pageTables = buffer.ptr<int32_t>();
    args.pageTableStride = 4;
    args.seqLens = buffer.ptr<int32_t>();
    args.kScale = args.vScale = buffer.ptr<float>();
    args.numKVScales = 1;
  }

  /// The plan for two requests of 20 tokens; the args check must name `what`.
  void expectRejected(const std::string &what) {
    std::vector<int32_t> lens = {20, 20};
    auto plan = kernel->plan(lens, *workspace, nullptr);
    ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
    llvm::Error err = kernel->checkArgs(*plan, args);
    ASSERT_TRUE(bool(err)) << "accepted bad arguments (" << what << ")";
    std::string message = llvm::toString(std::move(err));
    EXPECT_NE(message.find(what), std::string::npos) << message;
  }

  DecodeVariant variant;
  std::shared_ptr<const runtime::DecodeKernel> kernel;
  std::unique_ptr<runtime::DecodeWorkspace> workspace;
  runtime::DeviceBuffer buffer;
  runtime::DecodeArgs args;
};

TEST_F(DecodeArgsGpuTest, AcceptsMatchingArguments) {
  std::vector<int32_t> lens = {20, 20};
  auto plan = kernel->plan(lens, *workspace, nullptr);
  ASSERT_TRUE(bool(plan)) << llvm::toString(plan.takeError());
  ATTN_ASSERT_OK(kernel->checkArgs(*plan, args));
}

TEST_F(DecodeArgsGpuTest, RejectsWrongHeads) {
  args.numQHeads = 16;
  expectRejected(
      "q has 16 heads x 64 dims, the kernel was compiled for 8 x 64");
}

TEST_F(DecodeArgsGpuTest, RejectsWrongQType) {
  args.qType = ScalarType::F16;
  expectRejected("q is f16, the kernel was compiled for bf16");
}

TEST_F(DecodeArgsGpuTest, RejectsWrongPageSize) {
  args.cache.pageSize = 32;
  expectRejected("page 32");
}

TEST_F(DecodeArgsGpuTest, RejectsMissingScales) {
  args.kScale = nullptr;
  expectRejected("the FP8 cache needs kScale and vScale");
}

TEST_F(DecodeArgsGpuTest, RejectsNullBuffers) {
  args.out = nullptr;
  expectRejected("must not be null");
}

TEST_F(DecodeArgsGpuTest, RejectsMisalignedBuffers) {
  // q is read and out written in 16-byte pieces, the cache copied so.
  const void *q = args.q;
  args.q = static_cast<const char *>(q) + 8;
  expectRejected("q must be 16-byte aligned");
  args.q = q;
  args.cache.k = static_cast<const char *>(args.cache.k) + 4;
  expectRejected("cache.k must be");
}

TEST_F(DecodeArgsGpuTest, RejectsTokenCountNotMatchingPlan) {
  args.numTokens = 3;
  expectRejected("q has 3 tokens; the plan has 2 requests");
}

TEST_F(DecodeArgsGpuTest, ValidationFindsOutOfRangePages) {
  // Two requests of 20 tokens use pages [0, 2) of their rows; request 1's
  // second page points past the cache's 8 pages.
  std::vector<int32_t> lens = {20, 20};
  std::vector<int32_t> tables = {0, 1, 0, 0, 2, 9, 0, 0};
  ATTN_ASSIGN_OR_FAIL(dLens, upload(lens));
  ATTN_ASSIGN_OR_FAIL(dTables, upload(tables));
  args.seqLens = dLens.ptr<int32_t>();
  args.pageTables = dTables.ptr<int32_t>();
  ATTN_ASSIGN_OR_FAIL(plan, kernel->plan(lens, *workspace, nullptr));
  args.validatePages = true;
  llvm::Error err = kernel->run(plan, args, nullptr);
  ASSERT_TRUE(bool(err)) << "out-of-range page accepted";
  std::string message = llvm::toString(std::move(err));
  EXPECT_NE(message.find("pageTables[1][1] = 9 is outside the cache's 8 pages"),
            std::string::npos)
      << message;
  tables[5] = 3;
  ATTN_ASSIGN_OR_FAIL(dFixed, upload(tables));
  args.pageTables = dFixed.ptr<int32_t>();
  ATTN_ASSERT_OK(kernel->validatePages(plan, args, nullptr));
}

TEST_F(DecodeArgsGpuTest, PlanRejectsZeroLengthSequence) {
  std::vector<int32_t> lens = {20, 0};
  auto plan = kernel->plan(lens, *workspace, nullptr);
  ASSERT_FALSE(bool(plan));
  std::string message = llvm::toString(plan.takeError());
  EXPECT_NE(message.find("seq_lens[1] = 0"), std::string::npos) << message;
}

TEST_F(DecodeArgsGpuTest, PlanRejectsBatchOverWorkspace) {
  std::vector<int32_t> lens(5, 20);
  auto plan = kernel->plan(lens, *workspace, nullptr);
  ASSERT_FALSE(bool(plan));
  std::string message = llvm::toString(plan.takeError());
  EXPECT_NE(message.find("exceeds the workspace's maximum of 4"),
            std::string::npos)
      << message;
}

} // namespace
