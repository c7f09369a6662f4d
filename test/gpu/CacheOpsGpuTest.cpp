//===- CacheOpsGpuTest.cpp - copy_pages and advance_step on the GPU ------===//
//
// copyPages copies exactly the listed pages (K and V of every layer, bf16
// and e4m3 caches, NHD and HND) and nothing else, from host and from device
// pairs, and refuses bad pairs without touching the cache. advanceStep
// moves the builder's metadata (and input tokens, positions) as a host
// computation says, step after step across page boundaries, with padding
// rows at slot -1. And a decode planned once, advanced on the device, then
// run again equals the fp64 reference at the longer lengths, directly and
// as one captured graph replayed after each step.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/serving/CacheOps.h"
#include "compiler/Jit/Jit.h"
#include "test/gpu/GpuTestUtil.h"

#include <cmath>
#include <cstring>
#include <random>

using namespace attn;
using namespace attn::runtime;
using namespace attn::test;

namespace {

/// The process's CacheOps for the current device, created once.
llvm::Expected<CacheOps *> cacheOps() {
  static std::unique_ptr<CacheOps> ops;
  if (!ops) {
    auto arch = currentDeviceArch();
    if (!arch)
      return arch.takeError();
    auto created = CacheOps::create(KernelCache::global(), *arch);
    if (!created)
      return created.takeError();
    ops = std::make_unique<CacheOps>(std::move(*created));
  }
  return ops.get();
}

llvm::Expected<std::vector<uint8_t>> downloadLayer(const KVCache &cache,
                                                   int layer) {
  std::vector<uint8_t> bytes(cache.config().layerBytes());
  ATTN_CU_CHECK(cuCtxSynchronize());
  ATTN_CU_CHECK(
      cuMemcpyDtoH(bytes.data(), cache.layerData(layer), bytes.size()));
  return bytes;
}

llvm::Error uploadLayer(KVCache &cache, int layer,
                        const std::vector<uint8_t> &bytes) {
  return copyHostToDevice(cache.layerData(layer), bytes.data(), bytes.size());
}

/// `pairs` applied to a host image of a layer: K and V pages.
void applyPairs(std::vector<uint8_t> &layer, const KVCacheConfig &c,
                llvm::ArrayRef<PagePair> pairs) {
  const std::vector<uint8_t> before = layer;
  const int64_t bb = c.pageBytes();
  for (int kv = 0; kv < 2; ++kv)
    for (const PagePair &p : pairs)
      std::memcpy(layer.data() + (kv * c.numPages + p.dst) * bb,
                  before.data() + (kv * c.numPages + p.src) * bb, bb);
}

/// `count` pairs over `numPages` pages: distinct destinations, none of
/// them a source; sources may repeat (one prefix page shared by many).
std::vector<PagePair> randomPairs(std::mt19937 &rng, int64_t numPages,
                                  int count) {
  std::vector<int64_t> pages(numPages);
  for (int64_t i = 0; i < numPages; ++i)
    pages[i] = i;
  std::shuffle(pages.begin(), pages.end(), rng);
  // The first half are sources, the second half destinations.
  std::vector<PagePair> pairs;
  for (int i = 0; i < count; ++i)
    pairs.push_back({pages[rng() % (numPages / 2)], pages[numPages / 2 + i]});
  return pairs;
}

struct CopyCase {
  ScalarType dtype;
  KVLayout layout;
};

void PrintTo(const CopyCase &c, std::ostream *os) {
  *os << toString(c.dtype) << "_" << toString(c.layout);
}

class CopyPagesGpuTest : public ::testing::TestWithParam<CopyCase> {};

TEST_P(CopyPagesGpuTest, CopiesExactlyTheListedBlocksOfEveryLayer) {
  ATTN_REQUIRE_GPU();
  ATTN_ASSIGN_OR_FAIL(ops, cacheOps());
  KVCacheConfig c;
  c.numLayers = 3;
  c.numPages = 600;
  c.pageSize = 16;
  c.numKVHeads = 4;
  c.headDim = 72; // bf16: 9216-byte pages; e4m3: 4608 (not a power of 2)
  c.dtype = GetParam().dtype;
  c.layout = GetParam().layout;
  ATTN_ASSIGN_OR_FAIL(cache, KVCache::allocate(c));
  ATTN_ASSIGN_OR_FAIL(stream, Stream::create());

  std::mt19937 rng(11);
  std::vector<std::vector<uint8_t>> expected(c.numLayers);
  for (int l = 0; l < c.numLayers; ++l) {
    expected[l].resize(c.layerBytes());
    for (uint8_t &b : expected[l])
      b = uint8_t(rng());
    ATTN_ASSERT_OK(uploadLayer(cache, l, expected[l]));
  }

  // 250 pairs from the host (one launch), then 40 more from the device.
  std::vector<PagePair> hostPairs = randomPairs(rng, c.numPages, 250);
  ATTN_ASSERT_OK(ops->copyPages(cache, hostPairs, stream.get()));
  for (auto &layer : expected)
    applyPairs(layer, c, hostPairs);
  std::vector<PagePair> devicePairs = randomPairs(rng, c.numPages, 40);
  ATTN_ASSIGN_OR_FAIL(dPairs, upload(devicePairs));
  ATTN_ASSERT_OK(ops->copyPages(cache, dPairs.ptr<const PagePair>(),
                                int64_t(devicePairs.size()), stream.get()));
  for (auto &layer : expected)
    applyPairs(layer, c, devicePairs);
  ATTN_ASSERT_OK(stream.synchronize());

  for (int l = 0; l < c.numLayers; ++l) {
    ATTN_ASSIGN_OR_FAIL(got, downloadLayer(cache, l));
    // Name the first wrong page rather than dump megabytes.
    for (int64_t page = 0; page < 2 * c.numPages; ++page) {
      const int64_t at = page * c.pageBytes();
      ASSERT_EQ(
          std::memcmp(got.data() + at, expected[l].data() + at, c.pageBytes()),
          0)
          << "layer " << l << (page < c.numPages ? " K" : " V") << " page "
          << page % c.numPages;
    }
  }
}

TEST_P(CopyPagesGpuTest, BadPairsAreErrorsAndCopyNothing) {
  ATTN_REQUIRE_GPU();
  ATTN_ASSIGN_OR_FAIL(ops, cacheOps());
  KVCacheConfig c;
  c.numLayers = 2;
  c.numPages = 8;
  c.pageSize = 4;
  c.numKVHeads = 2;
  c.headDim = 32;
  c.dtype = GetParam().dtype;
  c.layout = GetParam().layout;
  ATTN_ASSIGN_OR_FAIL(cache, KVCache::allocate(c));
  ATTN_ASSIGN_OR_FAIL(stream, Stream::create());
  std::vector<uint8_t> image(c.layerBytes());
  std::mt19937 rng(3);
  for (uint8_t &b : image)
    b = uint8_t(rng());
  for (int l = 0; l < c.numLayers; ++l)
    ATTN_ASSERT_OK(uploadLayer(cache, l, image));

  auto errorOf = [&](std::vector<PagePair> pairs) {
    llvm::Error error = ops->copyPages(cache, pairs, stream.get());
    return error ? llvm::toString(std::move(error)) : std::string("(none)");
  };
  // A valid pair first: a bad one anywhere rejects the whole call.
  EXPECT_EQ(errorOf({{0, 1}, {2, 8}}),
            "copyPages: pair 1: destination page 8 is outside [0, 8)");
  EXPECT_EQ(errorOf({{0, 1}, {3, 3}}),
            "copyPages: pair 1: page 3 is copied onto itself");
  EXPECT_EQ(errorOf({{0, 1}, {2, 1}}),
            "copyPages: pair 1: destination page 1 is written by an "
            "earlier pair");
  EXPECT_NE(
      errorOf({{0, 1}, {1, 2}}).find("destination page 1 is also a source"),
      std::string::npos);
  ATTN_ASSERT_OK(stream.synchronize());
  for (int l = 0; l < c.numLayers; ++l) {
    ATTN_ASSIGN_OR_FAIL(got, downloadLayer(cache, l));
    EXPECT_TRUE(got == image) << "layer " << l << " changed";
  }

  // A page size the 16-byte kernel cannot copy (40-byte e4m3 pages).
  KVCacheConfig odd = c;
  odd.dtype = ScalarType::F8E4M3;
  odd.pageSize = 1;
  odd.numKVHeads = 1;
  odd.headDim = 40;
  ATTN_ASSIGN_OR_FAIL(oddCache, KVCache::allocate(odd));
  std::vector<PagePair> onePair = {{0, 1}};
  llvm::Error error = ops->copyPages(oddCache, onePair, stream.get());
  ASSERT_TRUE(bool(error));
  EXPECT_EQ(llvm::toString(std::move(error)),
            "copyPages: a page is 40 bytes (1 tokens x 1 heads x 40 dims of "
            "e4m3); the kernel copies 16-byte vectors and needs a multiple of "
            "16");
}

TEST(CopyPagesCapacityGpuTest, MorePairsThanStagedAreAnError) {
  ATTN_REQUIRE_GPU();
  ATTN_ASSIGN_OR_FAIL(arch, currentDeviceArch());
  ATTN_ASSIGN_OR_FAIL(ops, CacheOps::create(KernelCache::global(), arch, 4));
  KVCacheConfig c;
  c.numPages = 16;
  ATTN_ASSIGN_OR_FAIL(cache, KVCache::allocate(c));
  llvm::Error error =
      ops.copyPages(cache, {{0, 1}, {0, 2}, {0, 3}, {0, 4}, {0, 5}}, nullptr);
  ASSERT_TRUE(bool(error));
  EXPECT_EQ(llvm::toString(std::move(error)),
            "copyPages: 5 pairs exceed the staging capacity of 4 "
            "(CacheOps::create's maxStagedPairs)");
  ATTN_ASSERT_OK(
      ops.copyPages(cache, {{0, 1}, {0, 2}, {0, 3}, {0, 4}}, nullptr));
}

INSTANTIATE_TEST_SUITE_P(
    Caches, CopyPagesGpuTest,
    ::testing::Values(CopyCase{ScalarType::BF16, KVLayout::NHD},
                      CopyCase{ScalarType::BF16, KVLayout::HND},
                      CopyCase{ScalarType::F8E4M3, KVLayout::NHD},
                      CopyCase{ScalarType::F8E4M3, KVLayout::HND}),
    [](const auto &info) {
      return std::string(toString(info.param.dtype)) + "_" +
             std::string(toString(info.param.layout));
    });

template <class T>
llvm::Expected<std::vector<T>> downloadArray(const T *device, size_t n) {
  std::vector<T> host(n);
  ATTN_CU_CHECK(cuCtxSynchronize());
  ATTN_CU_CHECK(cuMemcpyDtoH(host.data(), reinterpret_cast<CUdeviceptr>(device),
                             n * sizeof(T)));
  return host;
}

// A step of one prefill and five decodes from the builder; the decodes are
// advanced four times, as a padded batch of seven rows.
TEST(AdvanceStepGpuTest, MetadataFollowsTheHostComputation) {
  ATTN_REQUIRE_GPU();
  ATTN_ASSIGN_OR_FAIL(ops, cacheOps());
  ATTN_ASSIGN_OR_FAIL(stream, Stream::create());
  MetadataLimits limits;
  limits.pageSize = 4;
  limits.numPages = 64;
  limits.maxBatch = 8;
  limits.maxTokens = 32;
  limits.maxPagesPerSeq = 6;
  ATTN_ASSIGN_OR_FAIL(builder, AttentionMetadataBuilder::create(limits));

  // Context lengths put the steps' tokens across page boundaries (a new
  // token at position 4, 8, 12, ... opens a page); each table has room
  // for every step.
  const std::vector<int32_t> contexts = {3, 4, 7, 10, 0};
  std::vector<std::vector<int32_t>> tables(5);
  int32_t next = 1;
  for (int r = 0; r < 5; ++r)
    for (int b = 0; b < (contexts[r] + 1 + 4 + 3) / 4; ++b)
      tables[r].push_back((next++ * 37) % 64);
  std::vector<int32_t> prefillTable = {62, 63};
  std::vector<ScheduledRequest> requests;
  ScheduledRequest prefill;
  prefill.isPrefill = true;
  prefill.queryLen = 6;
  prefill.pageTable = prefillTable;
  requests.push_back(prefill);
  for (int r = 0; r < 5; ++r) {
    ScheduledRequest d;
    d.contextLen = contexts[r];
    d.pageTable = tables[r];
    requests.push_back(d);
  }
  ATTN_ASSIGN_OR_FAIL(md, builder.build(requests, stream.get()));
  AttentionMetadataView decode = md.decodeView();
  AdvanceStepArgs args;
  ATTN_ASSERT_OK(bindMetadata(args, decode, limits.pageSize));
  ASSERT_EQ(args.numQueries, 5);
  args.numSeqs = 7; // two padding rows, as a graph of batch 7 runs

  constexpr int64_t kUntouched = -77;
  std::vector<int64_t> init(7, kUntouched);
  ATTN_ASSIGN_OR_FAIL(dTokens, upload(init));
  ATTN_ASSIGN_OR_FAIL(dPositions, upload(init));
  ATTN_ASSIGN_OR_FAIL(dSampled, upload(std::vector<int64_t>(5)));
  args.inputTokens = dTokens.ptr<int64_t>();
  args.positions = dPositions.ptr<int64_t>();
  args.sampledTokenIds = dSampled.ptr<int64_t>();

  std::vector<int32_t> lens(decode.seqLens.begin(), decode.seqLens.end());
  const std::vector<int64_t> prefillSlots(md.slotMapping.begin(),
                                          md.slotMapping.begin() + 6);
  for (int step = 1; step <= 4; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    std::vector<int64_t> sampled;
    for (int r = 0; r < 5; ++r)
      sampled.push_back(1000 * step + r);
    ATTN_ASSERT_OK(dSampled.copyFromHost(sampled.data(), 5 * sizeof(int64_t)));
    ATTN_ASSERT_OK(ops->advanceStep(args, nullptr, stream.get()));

    std::vector<int64_t> slots(7, -1), positions(7, kUntouched),
        tokens(7, kUntouched);
    for (int r = 0; r < 5; ++r) {
      int32_t pos = lens[r]; // the new token's position
      ++lens[r];
      positions[r] = pos;
      tokens[r] = sampled[r];
      slots[r] = int64_t(tables[r][pos / 4]) * 4 + pos % 4;
    }
    ATTN_ASSIGN_OR_FAIL(gotLens, downloadArray(args.seqLens, 7));
    ATTN_ASSIGN_OR_FAIL(gotSlots, downloadArray(args.slotMapping, 7));
    ATTN_ASSIGN_OR_FAIL(gotPositions, downloadArray(args.positions, 7));
    ATTN_ASSIGN_OR_FAIL(gotTokens, downloadArray(args.inputTokens, 7));
    std::vector<int32_t> wantLens = lens;
    wantLens.resize(7, 0); // padding rows keep the builder's 0
    EXPECT_EQ(gotLens, wantLens);
    EXPECT_EQ(gotSlots, slots);
    EXPECT_EQ(gotPositions, positions);
    EXPECT_EQ(gotTokens, tokens);
    // The prefill's rows of the same arrays are not the decodes'.
    ATTN_ASSIGN_OR_FAIL(allSlots, downloadArray(md.device.slotMapping, 6));
    EXPECT_EQ(allSlots, prefillSlots);
    ATTN_ASSIGN_OR_FAIL(prefillLen, downloadArray(md.device.seqLens, 1));
    EXPECT_EQ(prefillLen[0], 6);
  }
}

/// Request b's rows of a [batch, heads, dim] output.
std::vector<double> rowsOf(const std::vector<double> &out, int b,
                           int64_t rowElems) {
  return std::vector<double>(out.begin() + b * rowElems,
                             out.begin() + (b + 1) * rowElems);
}

// A decode planned at the first lengths runs step after step, its work
// items advanced on the device, and matches the reference at each step's
// lengths. The requests cross page boundaries (16 -> 17, 48 -> 49), and the
// long ones are split (their last chunk grows).
void runPlannedOnce(bool inGraph) {
  ATTN_ASSIGN_OR_FAIL(ops, cacheOps());
  DecodeVariant v; // bf16, 32 q heads over 8 KV heads, d128, page 16
  ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().decode(v));
  const std::vector<int> first = {16, 47, 520, 512};
  constexpr int kSteps = 3;
  const int batch = int(first.size());
  std::vector<int> last = first;
  for (int &len : last)
    len += kSteps;

  std::mt19937 rng(21);
  check::PagedCacheShape shape; // matches v
  // The cache holds every step's tokens from the start, as the engine's
  // append-KV would have written them; only the lengths grow.
  const check::RandomPagedCache cache =
      check::randomPagedCache(rng, shape, last);
  ATTN_ASSIGN_OR_FAIL(dCache, check::uploadCache(cache, shape));
  const int64_t rowElems = int64_t(v.numQHeads) * v.headDim;
  Quantized q = randomValues(rng, v.qType, batch * rowElems, 1.0);
  ATTN_ASSIGN_OR_FAIL(dq, upload(q.bytes));
  ATTN_ASSIGN_OR_FAIL(dOut, poisoned(q.bytes.size()));
  std::vector<int32_t> lens(first.begin(), first.end());
  ATTN_ASSIGN_OR_FAIL(dLens, upload(lens));
  ATTN_ASSIGN_OR_FAIL(dSlots, poisoned(batch * sizeof(int64_t)));
  ATTN_ASSIGN_OR_FAIL(stream, Stream::create());

  ATTN_ASSIGN_OR_FAIL(ws, kernel->createWorkspace(batch));
  ATTN_ASSIGN_OR_FAIL(plan, kernel->plan(lens, ws, stream.get(), inGraph));
  ASSERT_LT(plan.chunkTokens, 512) << "the long requests must be split";
  DecodeArgs args;
  args.q = dq.ptr<void>();
  args.qType = v.qType;
  args.numTokens = batch;
  args.numQHeads = v.numQHeads;
  args.headDim = v.headDim;
  args.out = dOut.ptr<void>();
  args.cache = dCache.view;
  args.pageTables = dCache.pageTables.ptr<int32_t>();
  args.pageTableStride = cache.pageTableStride;
  args.seqLens = dLens.ptr<int32_t>();

  AdvanceStepArgs step;
  step.numQueries = batch;
  step.numSeqs = batch;
  step.pageSize = v.pageSize;
  step.seqLens = dLens.ptr<int32_t>();
  step.slotMapping = dSlots.ptr<int64_t>();
  step.pageTables = dCache.pageTables.ptr<int32_t>();
  step.pageTableStride = cache.pageTableStride;

  CUgraphExec exec = nullptr;
  if (inGraph) {
    ATTN_ASSERT_OK([&]() -> llvm::Error {
      CUgraph graph;
      ATTN_CU_CHECK(
          cuStreamBeginCapture(stream.get(), CU_STREAM_CAPTURE_MODE_GLOBAL));
      llvm::Error runErr = kernel->run(plan, args, stream.get());
      ATTN_CU_CHECK(cuStreamEndCapture(stream.get(), &graph));
      if (runErr)
        return runErr;
      ATTN_CU_CHECK(cuGraphInstantiate(&exec, graph, 0));
      ATTN_CU_CHECK(cuGraphDestroy(graph));
      return llvm::Error::success();
    }());
  }

  ref::DecodeProblem prob;
  prob.numQHeads = v.numQHeads;
  prob.numKVHeads = v.numKVHeads;
  prob.headDim = v.headDim;
  prob.pageSize = v.pageSize;
  prob.layout = v.layout;
  prob.pageTables = cache.pageTables;
  prob.pageTableStride = cache.pageTableStride;
  prob.pageStride = cache.pageStride;
  prob.scale = 1.0 / std::sqrt(double(v.headDim));
  prob.q = q.values;
  prob.k = cache.k;
  prob.v = cache.v;
  std::vector<double> previousRef;

  for (int s = 0; s <= kSteps; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    if (s > 0)
      ATTN_ASSERT_OK(ops->advanceStep(step, &plan, stream.get()));
    ATTN_ASSERT_OK([&]() -> llvm::Error {
      // Poison the output so this step's launch alone must have written it.
      ATTN_CU_CHECK(cuStreamSynchronize(stream.get()));
      ATTN_CU_CHECK(cuMemsetD8(dOut.get(), 0xFF, dOut.size()));
      // On the legacy stream, which `stream` does not wait for.
      ATTN_CU_CHECK(cuCtxSynchronize());
      if (inGraph)
        ATTN_CU_CHECK(cuGraphLaunch(exec, stream.get()));
      else if (llvm::Error err = kernel->run(plan, args, stream.get()))
        return err;
      return stream.synchronize();
    }());

    prob.seqLens.clear();
    for (int len : first)
      prob.seqLens.push_back(len + s);
    std::vector<double> want, lse;
    ref::decodeReference(prob, want, lse);
    ATTN_ASSIGN_OR_FAIL(outBytes, download(dOut));
    std::vector<double> got = decodeAll(v.qType, outBytes);
    for (int b = 0; b < batch; ++b) {
      double error = ref::relativeError(rowsOf(got, b, rowElems),
                                        rowsOf(want, b, rowElems));
      EXPECT_LT(error, 1e-2)
          << "request " << b << " at length " << prob.seqLens[b];
      if (s > 0) {
        // The test can tell the lengths apart: one more key moves every
        // request's output (by about 1/sqrt(length)) beyond the tolerance,
        // so a decode that missed the new token would fail above.
        double moved = ref::relativeError(rowsOf(previousRef, b, rowElems),
                                          rowsOf(want, b, rowElems));
        EXPECT_GT(moved, 1.5e-2) << "request " << b;
      }
    }
    previousRef = want;

    // The metadata side of the same steps.
    ATTN_ASSIGN_OR_FAIL(gotLens, downloadArray(step.seqLens, batch));
    ATTN_ASSIGN_OR_FAIL(gotSlots, downloadArray(step.slotMapping, batch));
    for (int b = 0; b < batch; ++b) {
      EXPECT_EQ(gotLens[b], first[b] + s) << "request " << b;
      if (s > 0) {
        int pos = first[b] + s - 1;
        EXPECT_EQ(gotSlots[b],
                  int64_t(cache.pageTables[b * cache.pageTableStride +
                                           pos / v.pageSize]) *
                          v.pageSize +
                      pos % v.pageSize)
            << "request " << b;
      }
    }
  }
  if (exec)
    ATTN_ASSERT_OK([&]() -> llvm::Error {
      ATTN_CU_CHECK(cuGraphExecDestroy(exec));
      return llvm::Error::success();
    }());
}

TEST(AdvanceStepGpuTest, DecodePlannedOnceMatchesReferenceAfterEachStep) {
  ATTN_REQUIRE_GPU();
  runPlannedOnce(/*inGraph=*/false);
}

TEST(AdvanceStepGpuTest, CapturedDecodeReplaysEachStep) {
  ATTN_REQUIRE_GPU();
  runPlannedOnce(/*inGraph=*/true);
}

} // namespace
