//===- PageIdGpuTest.cpp - page ids outside the cache ---------------------===//
//
// Page tables holding ids outside the cache (its page count, 1000 past it,
// INT32_MAX, -1, -5), and append_kv slots past it, on every kernel that turns
// one into an address: decode (the CUDA-core path and the tensor-core path,
// pages that hold a tile and pages that do not), paged prefill (mma.sync,
// and on sm_90a wgmma over TMA), mixed batches, cascade and append_kv. Each
// kernel must stay inside the cache: the context survives (a following
// synchronization succeeds), and the cache sits between guard pages of NaN
// (0xFF bytes) that a read would carry into the request's output, or that a
// write would change. The batch's other requests still match the fp64
// reference; the next call fails naming the id and its row, and the call
// after that is correct again (docs/semantics.md, "Page ids outside the
// cache").
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/kernels/Cascade.h"
#include "attn/runtime/kernels/MixedBatch.h"
#include "compiler/Jit/Jit.h"
#include "test/gpu/GpuTestUtil.h"
#include "test/reference/PrefillCheck.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

using namespace attn;
using namespace attn::test;

namespace {

//===--- Bad ids and the guarded cache ------------------------------------===//

/// The ids outside the cache every test plants, given its page count.
enum class BadId { Count, Past1000, IntMax, MinusOne, MinusFive };
constexpr BadId kBadIds[] = {BadId::Count, BadId::Past1000, BadId::IntMax,
                             BadId::MinusOne, BadId::MinusFive};

int32_t badId(BadId which, int numPages) {
  switch (which) {
  case BadId::Count:
    return numPages;
  case BadId::Past1000:
    return numPages + 1000;
  case BadId::IntMax:
    return INT32_MAX;
  case BadId::MinusOne:
    return -1;
  case BadId::MinusFive:
    return -5;
  }
  return 0;
}

std::string nameOf(BadId which) {
  switch (which) {
  case BadId::Count:
    return "num_pages";
  case BadId::Past1000:
    return "num_pages_plus_1000";
  case BadId::IntMax:
    return "int_max";
  case BadId::MinusOne:
    return "minus_1";
  case BadId::MinusFive:
    return "minus_5";
  }
  return "";
}

/// Guard pages before and after the cache: as far as the bad ids reach
/// without leaving the allocation (INT32_MAX would leave any allocation:
/// reading it would lose the context).
constexpr int kGuardBefore = 8, kGuardAfter = 1008;

/// A random cache uploaded between guard pages of 0xFF bytes (NaN in every
/// cache format), and its view.
struct GuardedCache {
  runtime::DeviceBuffer k, v, kScales, vScales;
  int64_t pageBytes = 0;
  runtime::PagedKVView view;
};

llvm::Expected<GuardedCache> uploadGuarded(const check::RandomPagedCache &c,
                                           const check::PagedCacheShape &sh) {
  GuardedCache g;
  g.pageBytes = c.pageStride * sizeOf(sh.kvType);
  const size_t bytes =
      size_t(kGuardBefore + c.totalPages + kGuardAfter) * g.pageBytes;
  for (auto [buffer, data] :
       {std::pair{&g.k, &c.kBytes}, std::pair{&g.v, &c.vBytes}}) {
    auto guarded = poisoned(bytes);
    if (!guarded)
      return guarded.takeError();
    if (llvm::Error err = guarded->copyFromHost(
            data->data(), data->size(), size_t(kGuardBefore) * g.pageBytes))
      return std::move(err);
    *buffer = std::move(*guarded);
  }
  for (auto [buffer, scales] :
       {std::pair{&g.kScales, &c.kScales}, std::pair{&g.vScales, &c.vScales}}) {
    auto uploaded = upload(*scales);
    if (!uploaded)
      return uploaded.takeError();
    *buffer = std::move(*uploaded);
  }
  g.view.k = g.k.ptr<char>() + kGuardBefore * g.pageBytes;
  g.view.v = g.v.ptr<char>() + kGuardBefore * g.pageBytes;
  g.view.dtype = sh.kvType;
  g.view.numKVHeads = sh.numKVHeads;
  g.view.headDim = sh.headDim;
  g.view.pageSize = sh.pageSize;
  g.view.layout = sh.layout;
  g.view.numPages = c.totalPages;
  g.view.pageStride = c.pageStride;
  return std::move(g);
}

bool isFP8(ScalarType t) { return sizeOf(t) == 1; }

/// Fills `buffer` with 0xFF (NaN) once the device is idle, and waits for
/// it (cuMemsetD8 runs on the legacy stream, which a non-blocking stream's
/// kernels do not wait for), so that the next call must write what is
/// checked.
llvm::Error repoison(const runtime::DeviceBuffer &buffer) {
  ATTN_CU_CHECK(cuCtxSynchronize());
  ATTN_CU_CHECK(cuMemsetD8(buffer.get(), 0xFF, buffer.size()));
  ATTN_CU_CHECK(cuCtxSynchronize());
  return llvm::Error::success();
}

/// `tables` with `id` at entry `index` of row `row`.
std::vector<int32_t> withBadId(std::vector<int32_t> tables, int stride, int row,
                               int index, int32_t id) {
  tables[size_t(row) * stride + index] = id;
  return tables;
}

/// Rows [begin, end) of `values` (rows of `rowElems` values).
std::vector<double> rowsOf(const std::vector<double> &values, int64_t begin,
                           int64_t end, int64_t rowElems) {
  return std::vector<double>(values.begin() + begin * rowElems,
                             values.begin() + end * rowElems);
}

bool allFinite(const std::vector<double> &values) {
  return std::all_of(values.begin(), values.end(),
                     [](double x) { return std::isfinite(x); });
}

/// `error` must be the report of page id `id` read from row `row` of a cache
/// of `numPages` pages, from the kernel `kernel` names.
void expectPageIdReport(llvm::Error error, const std::string &kernel,
                        int32_t id, int row, int numPages) {
  ASSERT_TRUE(bool(error)) << "the bad page id was not reported";
  std::string message = llvm::toString(std::move(error));
  EXPECT_NE(message.find(kernel + ": an earlier launch read page id " +
                         std::to_string(id) + " from row " +
                         std::to_string(row) +
                         " of its page table, outside the cache's " +
                         std::to_string(numPages) + " pages"),
            std::string::npos)
      << message;
}

//===--- Decode -----------------------------------------------------------===//

struct DecodePath {
  std::string name;
  DecodeVariant variant;
  double kvScale = 1.0;
};

DecodeVariant decodeVariant(ScalarType kv, int hq, int hkv, int page) {
  DecodeVariant v;
  v.kvType = kv;
  v.numQHeads = hq;
  v.numKVHeads = hkv;
  v.headDim = 128;
  v.pageSize = page;
  return v;
}

std::vector<DecodePath> decodePaths() {
  using S = ScalarType;
  return {
      // One q head per KV head: the CUDA-core path; pages of 16 tokens read
      // their ids with the step's loads, pages of one token a step ahead.
      {"cuda_cores_p16", decodeVariant(S::BF16, 4, 4, 16)},
      {"cuda_cores_p1", decodeVariant(S::BF16, 4, 4, 1)},
      // Grouped heads: tensor cores; a page holds a 16-token tile (ids
      // loaded 32 tiles ahead), or not (per token, FP8 cache).
      {"tensor_cores_p16", decodeVariant(S::BF16, 8, 2, 16)},
      {"tensor_cores_e4m3_p2", decodeVariant(S::F8E4M3, 8, 2, 2), 0.05},
  };
}

class DecodePageIdGpuTest
    : public ::testing::TestWithParam<std::tuple<DecodePath, BadId>> {};

TEST_P(DecodePageIdGpuTest, StaysInTheCacheAndReportsNextCall) {
  ATTN_REQUIRE_GPU();
  const auto &[path, which] = GetParam();
  const DecodeVariant &v = path.variant;
  ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().decode(v));
  // Request 1 (split over several CTAs) holds the bad id halfway.
  const std::vector<int> seqLens = {700, 2500, 37};
  const int batch = int(seqLens.size()), badRow = 1;
  std::mt19937 rng(11);
  check::PagedCacheShape shape;
  shape.kvType = v.kvType;
  shape.numKVHeads = v.numKVHeads;
  shape.headDim = v.headDim;
  shape.pageSize = v.pageSize;
  shape.kvScale = path.kvScale;
  check::RandomPagedCache cache = check::randomPagedCache(rng, shape, seqLens);
  const int32_t id = badId(which, cache.totalPages);
  const int badIndex = (seqLens[badRow] / v.pageSize) / 2;

  ref::DecodeProblem prob;
  prob.numQHeads = v.numQHeads;
  prob.numKVHeads = v.numKVHeads;
  prob.headDim = v.headDim;
  prob.pageSize = v.pageSize;
  prob.layout = v.layout;
  prob.seqLens = seqLens;
  prob.pageTables = cache.pageTables;
  prob.pageTableStride = cache.pageTableStride;
  prob.pageStride = cache.pageStride;
  check::setScoreMods(prob, v);
  Quantized q =
      randomValues(rng, v.qType, size_t(batch) * v.numQHeads * v.headDim, 1.0);
  prob.q = q.values;
  prob.k = cache.k;
  prob.v = cache.v;
  std::vector<double> refOut, refLse;
  ref::decodeReference(prob, refOut, refLse);

  ATTN_ASSIGN_OR_FAIL(dCache, uploadGuarded(cache, shape));
  ATTN_ASSIGN_OR_FAIL(dq, upload(q.bytes));
  ATTN_ASSIGN_OR_FAIL(good, upload(cache.pageTables));
  ATTN_ASSIGN_OR_FAIL(bad,
                      upload(withBadId(cache.pageTables, cache.pageTableStride,
                                       badRow, badIndex, id)));
  ATTN_ASSIGN_OR_FAIL(out, poisoned(q.bytes.size()));
  ATTN_ASSIGN_OR_FAIL(ws, kernel->createWorkspace(batch));
  ATTN_ASSIGN_OR_FAIL(stream, runtime::Stream::create());
  std::vector<int32_t> lens(seqLens.begin(), seqLens.end());

  runtime::DecodeArgs args;
  args.q = dq.ptr<void>();
  args.qType = v.qType;
  args.numTokens = batch;
  args.numQHeads = v.numQHeads;
  args.headDim = v.headDim;
  args.out = out.ptr<void>();
  args.cache = dCache.view;
  args.pageTableStride = cache.pageTableStride;
  if (isFP8(v.kvType)) {
    args.kScale = dCache.kScales.ptr<float>();
    args.vScale = dCache.vScales.ptr<float>();
    args.numKVScales = int(cache.kScales.size());
  }
  const int64_t rowElems = int64_t(v.numQHeads) * v.headDim;
  auto output = [&]() -> llvm::Expected<std::vector<double>> {
    auto bytes = download(out);
    if (!bytes)
      return bytes.takeError();
    return decodeAll(v.qType, *bytes);
  };

  // The bad call: no error yet (nothing was reported before it).
  ATTN_ASSIGN_OR_FAIL(plan, kernel->plan(lens, ws, stream.get()));
  args.pageTables = bad.ptr<int32_t>();
  ATTN_ASSERT_OK(repoison(out));
  ATTN_ASSERT_OK(kernel->run(plan, args, stream.get()));
  ATTN_ASSERT_OK(stream.synchronize()); // the context survived
  ATTN_ASSIGN_OR_FAIL(got, output());
  EXPECT_LT(ref::relativeError(rowsOf(got, 0, 1, rowElems),
                               rowsOf(refOut, 0, 1, rowElems)),
            1e-2)
      << "request 0";
  EXPECT_LT(ref::relativeError(rowsOf(got, 2, 3, rowElems),
                               rowsOf(refOut, 2, 3, rowElems)),
            1e-2)
      << "request 2";
  EXPECT_TRUE(allFinite(rowsOf(got, 1, 2, rowElems)))
      << "request 1 read a guard page";

  // The next run() fails with the report and launches nothing; the one
  // after it is correct.
  args.pageTables = good.ptr<int32_t>();
  expectPageIdReport(kernel->run(plan, args, stream.get()), "decode", id,
                     badRow, cache.totalPages);
  ATTN_ASSERT_OK(repoison(out));
  ATTN_ASSERT_OK(kernel->run(plan, args, stream.get()));
  ATTN_ASSERT_OK(stream.synchronize());
  ATTN_ASSIGN_OR_FAIL(fixed, output());
  EXPECT_LT(ref::relativeError(fixed, refOut), 1e-2);

  // Or the next plan() fails with it.
  args.pageTables = bad.ptr<int32_t>();
  ATTN_ASSERT_OK(kernel->run(plan, args, stream.get()));
  ATTN_ASSERT_OK(stream.synchronize());
  auto failed = kernel->plan(lens, ws, stream.get());
  expectPageIdReport(failed.takeError(), "decode", id, badRow,
                     cache.totalPages);
  ATTN_ASSIGN_OR_FAIL(replanned, kernel->plan(lens, ws, stream.get()));
  args.pageTables = good.ptr<int32_t>();
  ATTN_ASSERT_OK(repoison(out));
  ATTN_ASSERT_OK(kernel->run(replanned, args, stream.get()));
  ATTN_ASSERT_OK(stream.synchronize());
  ATTN_ASSIGN_OR_FAIL(again, output());
  EXPECT_LT(ref::relativeError(again, refOut), 1e-2);
}

INSTANTIATE_TEST_SUITE_P(Paths, DecodePageIdGpuTest,
                         ::testing::Combine(::testing::ValuesIn(decodePaths()),
                                            ::testing::ValuesIn(kBadIds)),
                         [](const auto &info) {
                           return std::get<0>(info.param).name + "_" +
                                  nameOf(std::get<1>(info.param));
                         });

// A captured graph writes the workspace's report as a direct launch does
// (the address is the workspace's, fixed); the next plan() returns it.
TEST(DecodePageIdGraphGpuTest, ReplayReportsAtNextPlan) {
  ATTN_REQUIRE_GPU();
  DecodeVariant v = decodeVariant(ScalarType::BF16, 8, 2, 16);
  ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().decode(v));
  const std::vector<int> seqLens = {100, 300};
  std::mt19937 rng(5);
  check::PagedCacheShape shape;
  shape.numKVHeads = v.numKVHeads;
  check::RandomPagedCache cache = check::randomPagedCache(rng, shape, seqLens);
  ATTN_ASSIGN_OR_FAIL(dCache, uploadGuarded(cache, shape));
  Quantized q =
      randomValues(rng, v.qType, size_t(2) * v.numQHeads * v.headDim, 1.0);
  ATTN_ASSIGN_OR_FAIL(dq, upload(q.bytes));
  ATTN_ASSIGN_OR_FAIL(out, poisoned(q.bytes.size()));
  ATTN_ASSIGN_OR_FAIL(bad, upload(withBadId(cache.pageTables,
                                            cache.pageTableStride, 0, 3, -1)));
  ATTN_ASSIGN_OR_FAIL(ws, kernel->createWorkspace(2));
  ATTN_ASSIGN_OR_FAIL(stream, runtime::Stream::create());
  std::vector<int32_t> lens(seqLens.begin(), seqLens.end());
  ATTN_ASSIGN_OR_FAIL(plan,
                      kernel->plan(lens, ws, stream.get(), /*forGraph=*/true));
  runtime::DecodeArgs args;
  args.q = dq.ptr<void>();
  args.numTokens = 2;
  args.numQHeads = v.numQHeads;
  args.headDim = v.headDim;
  args.out = out.ptr<void>();
  args.cache = dCache.view;
  args.pageTables = bad.ptr<int32_t>();
  args.pageTableStride = cache.pageTableStride;
  ATTN_ASSERT_OK(
      check::replayInGraph(*kernel, plan, args, stream.get(), {&out}, 2));
  auto failed = kernel->plan(lens, ws, stream.get());
  expectPageIdReport(failed.takeError(), "decode", -1, 0, cache.totalPages);
  ATTN_ASSERT_OK(kernel->plan(lens, ws, stream.get()).takeError());
}

//===--- Paged prefill ----------------------------------------------------===//

struct PrefillPath {
  std::string name;
  PrefillVariant variant;
  bool wgmma = false;
  double kvScale = 1.0;
};

PrefillSchedule syncSchedule() { return PrefillSchedule{}; }

PrefillSchedule wgmmaSchedule() {
  PrefillSchedule s;
  s.mma = PrefillMma::Wgmma;
  s.warps = 12;
  s.blockM = 128;
  s.blockN = 128;
  return s;
}

PrefillVariant pagedVariant(ScalarType kv, int headDim, int page,
                            KVLayout layout, PrefillSchedule schedule) {
  PrefillVariant v;
  v.numQHeads = 8;
  v.numKVHeads = 2;
  v.headDim = headDim;
  v.paged = PagedKVFormat{kv, page, layout, false};
  v.schedule = schedule;
  return v;
}

std::vector<PrefillPath> prefillPaths() {
  using S = ScalarType;
  return {
      // mma.sync: a thread's rows' ids all loaded before the copies (head
      // dim 128), or per copy (head dim 80); an FP8 cache of 1-token pages.
      {"sync_d128_p16",
       pagedVariant(S::BF16, 128, 16, KVLayout::NHD, syncSchedule())},
      {"sync_d80_p16",
       pagedVariant(S::BF16, 80, 16, KVLayout::NHD, syncSchedule())},
      {"sync_e4m3_p1_hnd",
       pagedVariant(S::F8E4M3, 128, 1, KVLayout::HND, syncSchedule()), false,
       0.05},
      // sm_90a: TMA boxes of the pages (16-bit, and FP8 landing raw).
      {"wgmma_d128_p16",
       pagedVariant(S::BF16, 128, 16, KVLayout::NHD, wgmmaSchedule()), true},
      {"wgmma_e4m3_d128_p32_hnd",
       pagedVariant(S::F8E4M3, 128, 32, KVLayout::HND, wgmmaSchedule()), true,
       0.05},
  };
}

bool onSm90a() {
  auto arch = runtime::currentDeviceArch();
  if (!arch) {
    llvm::consumeError(arch.takeError());
    return false;
  }
  return *arch == Arch::SM90a;
}

/// A paged-prefill problem: its cache, q and fp64 reference.
struct PagedPrefillCase {
  std::vector<int> qLens, kvLens;
  std::vector<int32_t> cuQ;
  check::PagedCacheShape shape;
  check::RandomPagedCache cache;
  Quantized q;
  std::vector<double> refOut, refLse;
};

PagedPrefillCase drawPrefill(const PrefillVariant &v, std::vector<int> qLens,
                             std::vector<int> kvLens, double kvScale,
                             uint32_t seed) {
  PagedPrefillCase d;
  std::mt19937 rng(seed);
  d.qLens = std::move(qLens);
  d.kvLens = std::move(kvLens);
  d.cuQ = check::cumulative(d.qLens);
  d.shape.kvType = v.paged->kvType;
  d.shape.numKVHeads = v.numKVHeads;
  d.shape.headDim = v.headDim;
  d.shape.pageSize = v.paged->pageSize;
  d.shape.layout = v.paged->layout;
  d.shape.kvScale = kvScale;
  d.cache = check::randomPagedCache(rng, d.shape, d.kvLens);
  ref::PrefillProblem prob;
  prob.numQHeads = v.numQHeads;
  prob.numKVHeads = v.numKVHeads;
  prob.headDim = v.headDim;
  prob.cuSeqlensQ.assign(d.cuQ.begin(), d.cuQ.end());
  std::vector<int32_t> cuKV = check::cumulative(d.kvLens);
  prob.cuSeqlensKV.assign(cuKV.begin(), cuKV.end());
  check::setScoreMods(prob, v);
  check::gatherPages(d.cache, d.shape, d.kvLens, prob.k, prob.v);
  d.q = randomValues(rng, v.qType,
                     size_t(d.cuQ.back()) * v.numQHeads * v.headDim, 1.0);
  prob.q = d.q.values;
  ref::prefillReference(prob, d.refOut, d.refLse);
  return d;
}

class PrefillPageIdGpuTest
    : public ::testing::TestWithParam<std::tuple<PrefillPath, BadId>> {};

TEST_P(PrefillPageIdGpuTest, StaysInTheCacheAndReportsNextCall) {
  ATTN_REQUIRE_GPU();
  const auto &[path, which] = GetParam();
  if (path.wgmma && !onSm90a())
    GTEST_SKIP() << "the wgmma prefill needs an sm_90a GPU";
  const PrefillVariant &v = path.variant;
  ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().prefill(v));
  ASSERT_EQ(kernel->spec().prefillSchedule.mma,
            path.wgmma ? PrefillMma::Wgmma : PrefillMma::Sync);
  // Request 1's bad page holds keys its queries see (causal).
  PagedPrefillCase d =
      drawPrefill(v, {40, 100, 7}, {300, 500, 64}, path.kvScale, 3);
  const int badRow = 1, badIndex = 300 / v.paged->pageSize;
  const int batch = int(d.qLens.size());
  const int32_t id = badId(which, d.cache.totalPages);

  ATTN_ASSIGN_OR_FAIL(dCache, uploadGuarded(d.cache, d.shape));
  ATTN_ASSIGN_OR_FAIL(dq, upload(d.q.bytes));
  ATTN_ASSIGN_OR_FAIL(good, upload(d.cache.pageTables));
  ATTN_ASSIGN_OR_FAIL(
      bad, upload(withBadId(d.cache.pageTables, d.cache.pageTableStride, badRow,
                            badIndex, id)));
  ATTN_ASSIGN_OR_FAIL(out, poisoned(d.q.bytes.size()));
  ATTN_ASSIGN_OR_FAIL(ws, kernel->createWorkspace(batch, d.cuQ.back()));
  ATTN_ASSIGN_OR_FAIL(stream, runtime::Stream::create());
  std::vector<int32_t> seqLens(d.kvLens.begin(), d.kvLens.end());

  runtime::PagedPrefillArgs args;
  args.q = dq.ptr<void>();
  args.qType = v.qType;
  args.numQTokens = d.cuQ.back();
  args.numQHeads = v.numQHeads;
  args.headDim = v.headDim;
  args.out = out.ptr<void>();
  args.cache = dCache.view;
  args.pageTableStride = d.cache.pageTableStride;
  if (isFP8(v.paged->kvType)) {
    args.kScale = dCache.kScales.ptr<float>();
    args.vScale = dCache.vScales.ptr<float>();
    args.numKVScales = int(d.cache.kScales.size());
  }
  const int64_t rowElems = int64_t(v.numQHeads) * v.headDim;
  auto output = [&]() -> llvm::Expected<std::vector<double>> {
    auto bytes = download(out);
    if (!bytes)
      return bytes.takeError();
    return decodeAll(v.qType, *bytes);
  };
  auto request = [&](const std::vector<double> &all, int b) {
    return rowsOf(all, d.cuQ[b], d.cuQ[b + 1], rowElems);
  };

  ATTN_ASSIGN_OR_FAIL(plan,
                      kernel->planPaged(d.cuQ, seqLens, ws, stream.get()));
  args.pageTables = bad.ptr<int32_t>();
  ATTN_ASSERT_OK(repoison(out));
  ATTN_ASSERT_OK(kernel->run(plan, args, stream.get()));
  ATTN_ASSERT_OK(stream.synchronize()); // the context survived
  ATTN_ASSIGN_OR_FAIL(got, output());
  for (int b : {0, 2})
    EXPECT_LT(ref::relativeError(request(got, b), request(d.refOut, b)), 1e-2)
        << "request " << b;
  EXPECT_TRUE(allFinite(request(got, badRow))) << "request 1 read a guard page";

  args.pageTables = good.ptr<int32_t>();
  expectPageIdReport(kernel->run(plan, args, stream.get()), "paged prefill", id,
                     badRow, d.cache.totalPages);
  ATTN_ASSERT_OK(repoison(out));
  ATTN_ASSERT_OK(kernel->run(plan, args, stream.get()));
  ATTN_ASSERT_OK(stream.synchronize());
  ATTN_ASSIGN_OR_FAIL(fixed, output());
  EXPECT_LT(ref::relativeError(fixed, d.refOut), 1e-2);

  // The next planPaged() reports it too.
  args.pageTables = bad.ptr<int32_t>();
  ATTN_ASSERT_OK(kernel->run(plan, args, stream.get()));
  ATTN_ASSERT_OK(stream.synchronize());
  auto failed = kernel->planPaged(d.cuQ, seqLens, ws, stream.get());
  expectPageIdReport(failed.takeError(), "paged prefill", id, badRow,
                     d.cache.totalPages);
}

INSTANTIATE_TEST_SUITE_P(Paths, PrefillPageIdGpuTest,
                         ::testing::Combine(::testing::ValuesIn(prefillPaths()),
                                            ::testing::ValuesIn(kBadIds)),
                         [](const auto &info) {
                           return std::get<0>(info.param).name + "_" +
                                  nameOf(std::get<1>(info.param));
                         });

//===--- Mixed batches and cascade ----------------------------------------===//

// Bad ids in a prefill's row and a decode's row of one mixed batch: both
// reported by the next call, the other requests correct.
TEST(MixedBatchPageIdGpuTest, BothPartsReportNextCall) {
  ATTN_REQUIRE_GPU();
  PrefillVariant v =
      pagedVariant(ScalarType::BF16, 128, 16, KVLayout::NHD, syncSchedule());
  v.schedule.reset(); // the schedule the compiler picks, as a server runs
  ATTN_ASSIGN_OR_FAIL(mixed, Jit::global().mixedBatch(v));
  // Two prefills, then two decodes of one row each.
  PagedPrefillCase d =
      drawPrefill(v, {30, 50, 1, 1}, {200, 300, 400, 77}, 1.0, 9);
  const int numPrefills = 2, batch = 4;
  const int32_t prefillId = d.cache.totalPages + 1000, decodeId = -5;
  std::vector<int32_t> tables = withBadId(
      d.cache.pageTables, d.cache.pageTableStride, 1, 250 / 16, prefillId);
  tables = withBadId(tables, d.cache.pageTableStride, 3, 2, decodeId);
  ATTN_ASSIGN_OR_FAIL(dCache, uploadGuarded(d.cache, d.shape));
  ATTN_ASSIGN_OR_FAIL(dq, upload(d.q.bytes));
  ATTN_ASSIGN_OR_FAIL(good, upload(d.cache.pageTables));
  ATTN_ASSIGN_OR_FAIL(bad, upload(tables));
  ATTN_ASSIGN_OR_FAIL(out, poisoned(d.q.bytes.size()));
  ATTN_ASSIGN_OR_FAIL(ws, mixed.createWorkspace(batch, d.cuQ.back()));
  std::vector<int32_t> seqLens(d.kvLens.begin(), d.kvLens.end());
  ATTN_ASSIGN_OR_FAIL(plan,
                      mixed.plan(d.cuQ, seqLens, numPrefills, ws, nullptr));
  runtime::MixedBatchArgs args;
  args.q = dq.ptr<void>();
  args.numQTokens = d.cuQ.back();
  args.numQHeads = v.numQHeads;
  args.headDim = v.headDim;
  args.out = out.ptr<void>();
  args.cache = dCache.view;
  args.pageTables = bad.ptr<int32_t>();
  args.pageTableStride = d.cache.pageTableStride;
  ATTN_ASSERT_OK(mixed.run(plan, args, nullptr));
  ATTN_ASSIGN_OR_FAIL(gotBytes, download(out)); // synchronizes the context
  std::vector<double> got = decodeAll(v.qType, gotBytes);
  const int64_t rowElems = int64_t(v.numQHeads) * v.headDim;
  for (int b : {0, 2})
    EXPECT_LT(
        ref::relativeError(rowsOf(got, d.cuQ[b], d.cuQ[b + 1], rowElems),
                           rowsOf(d.refOut, d.cuQ[b], d.cuQ[b + 1], rowElems)),
        1e-2)
        << "request " << b;
  EXPECT_TRUE(allFinite(got)) << "a guard page was read";

  args.pageTables = good.ptr<int32_t>();
  llvm::Error reports = mixed.run(plan, args, nullptr);
  ASSERT_TRUE(bool(reports));
  std::string message = llvm::toString(std::move(reports));
  EXPECT_NE(message.find(
                "mixed batch (paged prefill): an earlier launch read page id " +
                std::to_string(prefillId) + " from row 1"),
            std::string::npos)
      << message;
  EXPECT_NE(
      message.find("mixed batch (decode): an earlier launch read page id -5 "
                   "from row 3"),
      std::string::npos)
      << message;
  ATTN_ASSERT_OK(repoison(out));
  ATTN_ASSERT_OK(mixed.run(plan, args, nullptr));
  ATTN_ASSIGN_OR_FAIL(fixedBytes, download(out));
  EXPECT_LT(ref::relativeError(decodeAll(v.qType, fixedBytes), d.refOut), 1e-2);
}

// Bad ids in a shared level's row (both requests of group 0 read it) and in
// a suffix row: the request that reads neither is correct, both are
// reported by the next call.
TEST(CascadePageIdGpuTest, LevelAndSuffixReportNextCall) {
  ATTN_REQUIRE_GPU();
  DecodeVariant v = decodeVariant(ScalarType::BF16, 16, 4, 16);
  v.causal = false; // one query row: the last key either way
  ATTN_ASSIGN_OR_FAIL(cascade, Jit::global().cascade(v));
  const std::vector<runtime::CascadeLevel> levels = {{{0, 2, 4}, {256, 512}}};
  const std::vector<int> suffixLens = {30, 1, 40, 17};
  const int batch = 4;
  // Cache sequences: the level's two groups, then each request's suffix.
  std::vector<int> seqLens = {256, 512};
  seqLens.insert(seqLens.end(), suffixLens.begin(), suffixLens.end());
  std::mt19937 rng(21);
  check::PagedCacheShape shape;
  shape.numKVHeads = v.numKVHeads;
  check::RandomPagedCache cache = check::randomPagedCache(rng, shape, seqLens);
  std::vector<double> seqK, seqV;
  check::gatherPages(cache, shape, seqLens, seqK, seqV);
  std::vector<int64_t> seqStart = {0};
  for (int len : seqLens)
    seqStart.push_back(seqStart.back() + len);

  // Each request's keys: its group's shared tokens, then its own.
  const int64_t row = int64_t(v.numKVHeads) * v.headDim;
  ref::PrefillProblem prob;
  prob.numQHeads = v.numQHeads;
  prob.numKVHeads = v.numKVHeads;
  prob.headDim = v.headDim;
  prob.scale = 1.0 / std::sqrt(double(v.headDim));
  prob.causal = true;
  prob.cuSeqlensQ = {0};
  prob.cuSeqlensKV = {0};
  for (int b = 0; b < batch; ++b) {
    int keys = 0;
    for (int seq : {b / 2, 2 + b}) {
      prob.k.insert(prob.k.end(), seqK.begin() + seqStart[seq] * row,
                    seqK.begin() + seqStart[seq + 1] * row);
      prob.v.insert(prob.v.end(), seqV.begin() + seqStart[seq] * row,
                    seqV.begin() + seqStart[seq + 1] * row);
      keys += seqLens[seq];
    }
    prob.cuSeqlensQ.push_back(b + 1);
    prob.cuSeqlensKV.push_back(prob.cuSeqlensKV.back() + keys);
  }
  Quantized q =
      randomValues(rng, v.qType, size_t(batch) * v.numQHeads * v.headDim, 1.0);
  prob.q = q.values;
  std::vector<double> refOut, refLse;
  ref::prefillReference(prob, refOut, refLse);

  const int stride = cache.pageTableStride;
  const int32_t levelId = cache.totalPages, suffixId = INT32_MAX;
  std::vector<int32_t> tables =
      withBadId(cache.pageTables, stride, 0, 7, levelId);
  tables = withBadId(tables, stride, 2 + 3, 0, suffixId);
  ATTN_ASSIGN_OR_FAIL(dCache, uploadGuarded(cache, shape));
  ATTN_ASSIGN_OR_FAIL(dq, upload(q.bytes));
  ATTN_ASSIGN_OR_FAIL(good, upload(cache.pageTables));
  ATTN_ASSIGN_OR_FAIL(bad, upload(tables));
  ATTN_ASSIGN_OR_FAIL(out, poisoned(q.bytes.size()));
  ATTN_ASSIGN_OR_FAIL(ws, cascade.createWorkspace(batch, 1));
  ATTN_ASSIGN_OR_FAIL(plan, cascade.plan(levels, suffixLens, ws, nullptr));
  runtime::CascadeArgs args;
  args.q = dq.ptr<void>();
  args.numQTokens = batch;
  args.numQHeads = v.numQHeads;
  args.headDim = v.headDim;
  args.out = out.ptr<void>();
  args.cache = dCache.view;
  auto point = [&](const runtime::DeviceBuffer &t) {
    args.levelPageTables[0] = t.ptr<int32_t>();
    args.levelPageTableStrides[0] = stride;
    args.suffixPageTables = t.ptr<int32_t>() + 2 * stride;
    args.suffixPageTableStride = stride;
  };
  point(bad);
  ATTN_ASSERT_OK(cascade.run(plan, args, nullptr));
  ATTN_ASSIGN_OR_FAIL(gotBytes, download(out)); // synchronizes the context
  std::vector<double> got = decodeAll(v.qType, gotBytes);
  const int64_t rowElems = int64_t(v.numQHeads) * v.headDim;
  EXPECT_LT(ref::relativeError(rowsOf(got, 2, 3, rowElems),
                               rowsOf(refOut, 2, 3, rowElems)),
            1e-2)
      << "request 2";
  EXPECT_TRUE(allFinite(got)) << "a guard page was read";

  point(good);
  llvm::Error reports = cascade.run(plan, args, nullptr);
  ASSERT_TRUE(bool(reports));
  std::string message = llvm::toString(std::move(reports));
  EXPECT_NE(
      message.find("cascade level 0 (paged prefill): an earlier launch read "
                   "page id " +
                   std::to_string(levelId) + " from row 0"),
      std::string::npos)
      << message;
  EXPECT_NE(
      message.find("cascade suffix (decode): an earlier launch read page id " +
                   std::to_string(suffixId) + " from row 3"),
      std::string::npos)
      << message;
  ATTN_ASSERT_OK(repoison(out));
  ATTN_ASSERT_OK(cascade.run(plan, args, nullptr));
  ATTN_ASSIGN_OR_FAIL(fixedBytes, download(out));
  EXPECT_LT(ref::relativeError(decodeAll(v.qType, fixedBytes), refOut), 1e-2);
}

//===--- append_kv --------------------------------------------------------===//

// Slots past the cache (its slot count, 1000 pages past it, INT32_MAX and
// INT64_MAX) are skipped and reported; negative ones are padding, skipped
// silently. The valid tokens land exactly, nothing else changes (the
// guard pages included), and the next run() fails naming a bad slot.
TEST(AppendKVPageIdGpuTest, SkipsSlotsPastTheCacheAndReportsNextCall) {
  ATTN_REQUIRE_GPU();
  AppendKVVariant v;
  v.numKVHeads = 2;
  ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().appendKV(v));
  const int numPages = 20;
  const int64_t slots = int64_t(numPages) * v.pageSize;
  const std::vector<int64_t> badSlots = {slots, slots + 1000 * v.pageSize,
                                         INT32_MAX, INT64_MAX};
  // Tokens 1, 3, 5, 7 hold the bad slots; 9 and 10 padding.
  std::vector<int64_t> mapping = {5,         badSlots[0], 17,  badSlots[1],
                                  slots - 1, badSlots[2], 100, badSlots[3],
                                  200,       -1,          -5,  0};
  const int tokens = int(mapping.size());
  const size_t rowElems = size_t(v.numKVHeads) * v.headDim;
  std::mt19937 rng(2);
  Quantized k = randomValues(rng, v.inType, tokens * rowElems, 1.0);
  Quantized vals = randomValues(rng, v.inType, tokens * rowElems, 1.0);
  ATTN_ASSIGN_OR_FAIL(dk, upload(k.bytes));
  ATTN_ASSIGN_OR_FAIL(dv, upload(vals.bytes));
  ATTN_ASSIGN_OR_FAIL(dMapping, upload(mapping));
  const int64_t pageBytes = int64_t(v.pageSize) * rowElems * 2;
  const size_t bytes =
      size_t(kGuardBefore + numPages + kGuardAfter) * pageBytes;
  ATTN_ASSIGN_OR_FAIL(kCache, poisoned(bytes));
  ATTN_ASSIGN_OR_FAIL(vCache, poisoned(bytes));

  runtime::AppendKVArgs args;
  args.k = dk.ptr<void>();
  args.v = dv.ptr<void>();
  args.numTokens = tokens;
  args.numKVHeads = v.numKVHeads;
  args.headDim = v.headDim;
  args.cache = {kCache.ptr<char>() + kGuardBefore * pageBytes,
                vCache.ptr<char>() + kGuardBefore * pageBytes,
                v.kvType,
                v.numKVHeads,
                v.headDim,
                v.pageSize,
                v.layout,
                numPages,
                0};
  args.slotMapping = dMapping.ptr<int64_t>();
  ATTN_ASSERT_OK(kernel->run(args, nullptr));
  ATTN_ASSIGN_OR_FAIL(kOut, download(kCache)); // synchronizes the context
  ATTN_ASSIGN_OR_FAIL(vOut, download(vCache));

  // Expected: poison everywhere but the valid tokens' rows (NHD: a token's
  // heads are one row of rowElems elements).
  std::vector<uint8_t> kWant(bytes, 0xFF), vWant(bytes, 0xFF);
  for (int t = 0; t < tokens; ++t) {
    if (mapping[t] < 0 || mapping[t] >= slots)
      continue;
    size_t at =
        size_t(kGuardBefore) * pageBytes + size_t(mapping[t]) * rowElems * 2;
    std::memcpy(&kWant[at], &k.bytes[t * rowElems * 2], rowElems * 2);
    std::memcpy(&vWant[at], &vals.bytes[t * rowElems * 2], rowElems * 2);
  }
  EXPECT_TRUE(kOut == kWant) << "K: a slot was not written exactly, or a byte "
                                "outside the valid slots changed";
  EXPECT_TRUE(vOut == vWant) << "V: as K";

  // The next run fails with one of the bad slots (any; the kernels keep one)
  // and writes nothing; padding alone reports nothing.
  std::vector<int64_t> padding = {-1, -5, 3};
  ATTN_ASSIGN_OR_FAIL(dPadding, upload(padding));
  args.slotMapping = dPadding.ptr<int64_t>();
  args.numTokens = 3;
  llvm::Error report = kernel->run(args, nullptr);
  ASSERT_TRUE(bool(report)) << "the bad slots were not reported";
  std::string message = llvm::toString(std::move(report));
  bool named = false;
  for (int t : {1, 3, 5, 7}) {
    std::string slot =
        mapping[t] >= INT32_MAX ? ">= 2147483647" : std::to_string(mapping[t]);
    named |= message.find("append_kv: an earlier launch met slot " + slot +
                          " for token " + std::to_string(t) +
                          ", past the cache's " + std::to_string(numPages) +
                          " pages of 16 tokens") != std::string::npos;
  }
  EXPECT_TRUE(named) << message;
  ATTN_ASSERT_OK(kernel->run(args, nullptr));
  ATTN_ASSERT_OK(repoison(kCache));           // synchronizes: any report is in
  ATTN_ASSERT_OK(kernel->run(args, nullptr)); // padding reported nothing
}

} // namespace
