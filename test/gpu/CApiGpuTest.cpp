//===- CApiGpuTest.cpp - every kernel handle of attn_c.h on a GPU ---------===//
//
// Linked to libattn_c.so only, as a C host is: each handle plans and runs
// on small random inputs and is checked against an fp64 reference (the
// attention calls) or exactly (the copies). What is tested here is the C
// layer's completion of the C++ launch arguments (types, heads, token
// counts from the variant and the plan, strides, scales, tables); the
// kernels themselves have their own GPU tests. The driver is opened with
// dlopen, so without a GPU every case reports itself skipped.
//
//===----------------------------------------------------------------------===//
#include "attn_c.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

//===--- The driver, opened at run time -----------------------------------===//

using CUresult = int;
using CUdeviceptr = unsigned long long;

struct Driver {
  bool ok = false;
  CUresult (*init)(unsigned) = nullptr;
  CUresult (*deviceGet)(int *, int) = nullptr;
  CUresult (*primaryCtxRetain)(void **, int) = nullptr;
  CUresult (*ctxSetCurrent)(void *) = nullptr;
  CUresult (*ctxSynchronize)() = nullptr;
  CUresult (*memAlloc)(CUdeviceptr *, size_t) = nullptr;
  CUresult (*memFree)(CUdeviceptr) = nullptr;
  CUresult (*memcpyHtoD)(CUdeviceptr, const void *, size_t) = nullptr;
  CUresult (*memcpyDtoH)(void *, CUdeviceptr, size_t) = nullptr;
  CUresult (*memAllocHost)(void **, size_t) = nullptr;
  CUresult (*memFreeHost)(void *) = nullptr;

  static Driver &get() {
    static Driver driver = [] {
      Driver d;
      void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
      if (!lib)
        return d;
      auto load = [&](auto &fn, const char *name) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
            dlsym(lib, name));
        return fn != nullptr;
      };
      if (!load(d.init, "cuInit") || !load(d.deviceGet, "cuDeviceGet") ||
          !load(d.primaryCtxRetain, "cuDevicePrimaryCtxRetain") ||
          !load(d.ctxSetCurrent, "cuCtxSetCurrent") ||
          !load(d.ctxSynchronize, "cuCtxSynchronize") ||
          !load(d.memAlloc, "cuMemAlloc_v2") ||
          !load(d.memFree, "cuMemFree_v2") ||
          !load(d.memcpyHtoD, "cuMemcpyHtoD_v2") ||
          !load(d.memcpyDtoH, "cuMemcpyDtoH_v2") ||
          !load(d.memAllocHost, "cuMemAllocHost_v2") ||
          !load(d.memFreeHost, "cuMemFreeHost"))
        return d;
      int device = 0;
      void *context = nullptr;
      d.ok = d.init(0) == 0 && d.deviceGet(&device, 0) == 0 &&
             d.primaryCtxRetain(&context, device) == 0 &&
             d.ctxSetCurrent(context) == 0;
      return d;
    }();
    return driver;
  }
};

#define REQUIRE_GPU()                                                          \
  do {                                                                         \
    if (!Driver::get().ok)                                                     \
      GTEST_SKIP() << "no GPU";                                                \
  } while (false)

#define ASSERT_ATTN(call) ASSERT_EQ((call), ATTN_OK) << attn_last_error()

/// A device copy of a host vector; freed with the object.
template <class T> struct Device {
  CUdeviceptr ptr = 0;
  size_t count = 0;
  explicit Device(const std::vector<T> &host) : count(host.size()) {
    EXPECT_EQ(Driver::get().memAlloc(&ptr, bytes()), 0);
    EXPECT_EQ(Driver::get().memcpyHtoD(ptr, host.data(), bytes()), 0);
  }
  explicit Device(size_t n) : Device(std::vector<T>(n)) {}
  ~Device() { Driver::get().memFree(ptr); }
  Device(const Device &) = delete;
  size_t bytes() const { return std::max<size_t>(1, count) * sizeof(T); }
  T *get() const { return reinterpret_cast<T *>(ptr); }
  std::vector<T> read() const {
    EXPECT_EQ(Driver::get().ctxSynchronize(), 0);
    std::vector<T> host(count);
    EXPECT_EQ(Driver::get().memcpyDtoH(host.data(), ptr, count * sizeof(T)), 0);
    return host;
  }
};

//===--- bf16 and the reference -------------------------------------------===//

uint16_t toBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return uint16_t((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}
double fromBf16(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}
std::vector<uint16_t> randomBf16(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<uint16_t> v(n);
  for (auto &x : v)
    x = toBf16(dist(gen));
  return v;
}

constexpr int kQHeads = 8, kKVHeads = 2, kDim = 128, kPage = 16;

/// Row `row` of a [rows, heads, kDim] bf16 array.
const uint16_t *rowOf(const std::vector<uint16_t> &a, int64_t row, int head,
                      int heads) {
  return a.data() + (size_t(row) * heads + head) * kDim;
}

/// A request's keys: token t's K / V row for a KV head.
using KeyRow = std::function<const uint16_t *(int t, int kvHead)>;

/// Softmax(q K^T / sqrt(d)) V over keys [0, visible), in fp64.
std::vector<double> attend(const uint16_t *q, int visible, int kvHead,
                           const KeyRow &key, const KeyRow &value) {
  std::vector<double> scores(visible), out(kDim, 0.0);
  double maxScore = -INFINITY, sum = 0;
  for (int t = 0; t < visible; ++t) {
    const uint16_t *k = key(t, kvHead);
    double s = 0;
    for (int d = 0; d < kDim; ++d)
      s += fromBf16(q[d]) * fromBf16(k[d]);
    scores[t] = s / std::sqrt(double(kDim));
    maxScore = std::max(maxScore, scores[t]);
  }
  for (int t = 0; t < visible; ++t) {
    double p = std::exp(scores[t] - maxScore);
    sum += p;
    const uint16_t *v = value(t, kvHead);
    for (int d = 0; d < kDim; ++d)
      out[d] += p * fromBf16(v[d]);
  }
  for (double &x : out)
    x /= sum;
  return out;
}

/// The largest error of `out` rows [row0, row0 + qLen) of a request whose
/// queries sit at the end of its kvLen keys (causal).
double requestError(const std::vector<uint16_t> &q,
                    const std::vector<uint16_t> &out, int64_t row0, int qLen,
                    int kvLen, const KeyRow &key, const KeyRow &value) {
  double worst = 0;
  for (int i = 0; i < qLen; ++i)
    for (int h = 0; h < kQHeads; ++h) {
      std::vector<double> ref =
          attend(rowOf(q, row0 + i, h, kQHeads), i + 1 + kvLen - qLen,
                 h / (kQHeads / kKVHeads), key, value);
      const uint16_t *got = rowOf(out, row0 + i, h, kQHeads);
      for (int d = 0; d < kDim; ++d) {
        double e = std::fabs(fromBf16(got[d]) - ref[d]);
        worst = std::isnan(e) ? INFINITY : std::max(worst, e);
      }
    }
  return worst;
}

/// A paged NHD bf16 cache with random K and V.
struct Cache {
  int64_t numPages;
  std::vector<uint16_t> k, v;
  Device<uint16_t> dk, dv;
  explicit Cache(int64_t pages)
      : numPages(pages), k(randomBf16(pages * kPage * kKVHeads * kDim, 1)),
        v(randomBf16(k.size(), 2)), dk(k), dv(v) {}
  attn_paged_kv view() const {
    attn_paged_kv c{};
    c.k = dk.get();
    c.v = dv.get();
    c.dtype = ATTN_DTYPE_BF16;
    c.num_kv_heads = kKVHeads;
    c.head_dim = kDim;
    c.page_size = kPage;
    c.layout = ATTN_LAYOUT_NHD;
    c.num_pages = numPages;
    return c;
  }
  /// Token t of a request whose pages are `table`.
  KeyRow keys(const std::vector<int32_t> &table, bool values) const {
    const std::vector<uint16_t> &a = values ? v : k;
    return [&a, table](int t, int kvHead) {
      int64_t slot = int64_t(table[t / kPage]) * kPage + t % kPage;
      return rowOf(a, slot, kvHead, kKVHeads);
    };
  }
};

struct CApiGpu : ::testing::Test {
  attn_context *context = nullptr;
  void SetUp() override {
    if (!Driver::get().ok)
      GTEST_SKIP() << "no GPU";
    ASSERT_ATTN(attn_context_create_jit(nullptr, &context));
  }
  void TearDown() override { attn_context_destroy(context); }
  static attn_decode_variant decodeVariant() {
    attn_decode_variant v;
    attn_decode_variant_init(&v);
    v.num_q_heads = kQHeads;
    v.num_kv_heads = kKVHeads;
    return v;
  }
  static attn_prefill_variant prefillVariant(bool paged) {
    attn_prefill_variant v;
    attn_prefill_variant_init(&v);
    v.num_q_heads = kQHeads;
    v.num_kv_heads = kKVHeads;
    v.paged = paged;
    return v;
  }
};

constexpr double kTolerance = 1e-2; // bf16 outputs of values below 1

//===--- Attention --------------------------------------------------------===//

TEST_F(CApiGpu, DecodeRunsBeforePlanIsAnError) {
  attn_decode_variant v = decodeVariant();
  attn_decode *decode = nullptr;
  ASSERT_ATTN(attn_decode_create(context, &v, 4, &decode));
  Cache cache(4);
  Device<uint16_t> q(kQHeads * kDim), out(kQHeads * kDim);
  Device<int32_t> tables(std::vector<int32_t>{0}),
      lens(std::vector<int32_t>{5});
  attn_decode_args args;
  ATTN_INIT(&args);
  args.q = q.get();
  args.out = out.get();
  args.cache = cache.view();
  args.page_tables = tables.get();
  args.page_table_stride = 1;
  args.seq_lens = lens.get();
  EXPECT_EQ(attn_decode_run(decode, &args, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attn_last_error()).find("attn_decode_plan"),
            std::string::npos);
  int32_t len = 5;
  ASSERT_ATTN(attn_decode_plan(decode, &len, 1, 0, nullptr));
  ASSERT_ATTN(attn_decode_run(decode, &args, nullptr));
  // The C++ checks still speak: a missing lse for a variant without one is
  // fine, an lse given to it is not.
  Device<float> lse(kQHeads);
  args.lse = lse.get();
  EXPECT_EQ(attn_decode_run(decode, &args, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attn_last_error()).find("lse"), std::string::npos)
      << attn_last_error();
  attn_decode_destroy(decode);
}

// Page ids outside the cache: the call that reads them stays inside it
// (the context survives), the next call fails with
// ATTN_ERROR_INVALID_ARGUMENT naming one, and the call after it is correct.
TEST_F(CApiGpu, PageIdOutsideTheCacheFailsTheNextCall) {
  attn_decode_variant v = decodeVariant();
  attn_decode *decode = nullptr;
  ASSERT_ATTN(attn_decode_create(context, &v, 2, &decode));
  Cache cache(8);
  const std::vector<int32_t> lens = {40, 20};
  const std::vector<int32_t> good = {6, 1, 2, 3, 4, 0}; // 3 pages a row
  const std::vector<int32_t> badTables = {6, -1, 2, 3, INT32_MAX, 0};
  auto q = randomBf16(size_t(2) * kQHeads * kDim, 6);
  Device<uint16_t> dq(q), out(q.size());
  Device<int32_t> dGood(good), dBad(badTables), dLens(lens);
  attn_decode_args args;
  ATTN_INIT(&args);
  args.q = dq.get();
  args.out = out.get();
  args.cache = cache.view();
  args.page_tables = dBad.get();
  args.page_table_stride = 3;
  args.seq_lens = dLens.get();
  ASSERT_ATTN(attn_decode_plan(decode, lens.data(), 2, 0, nullptr));
  ASSERT_ATTN(attn_decode_run(decode, &args, nullptr));
  ASSERT_EQ(Driver::get().ctxSynchronize(), 0);
  args.page_tables = dGood.get();
  EXPECT_EQ(attn_decode_run(decode, &args, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attn_last_error()).find("outside the cache's 8 pages"),
            std::string::npos)
      << attn_last_error();
  ASSERT_ATTN(attn_decode_run(decode, &args, nullptr));
  auto got = out.read();
  for (int b = 0; b < 2; ++b) {
    std::vector<int32_t> row(good.begin() + 3 * b, good.begin() + 3 * b + 3);
    EXPECT_LT(requestError(q, got, b, 1, lens[b], cache.keys(row, false),
                           cache.keys(row, true)),
              kTolerance)
        << "request " << b;
  }
  attn_decode_destroy(decode);
}

TEST_F(CApiGpu, RaggedPrefill) {
  attn_prefill_variant v = prefillVariant(false);
  attn_prefill *prefill = nullptr;
  ASSERT_ATTN(attn_prefill_create(context, &v, 4, 256, &prefill));
  const std::vector<int32_t> cuQ = {0, 20, 21, 61}, cuKV = {0, 20, 50, 90};
  auto q = randomBf16(size_t(cuQ.back()) * kQHeads * kDim, 3);
  auto k = randomBf16(size_t(cuKV.back()) * kKVHeads * kDim, 4);
  auto vv = randomBf16(k.size(), 5);
  Device<uint16_t> dq(q), dk(k), dv(vv), dOut(q.size());
  ASSERT_ATTN(
      attn_prefill_plan(prefill, cuQ.data(), cuKV.data(), 3, 0, nullptr));
  EXPECT_EQ(
      attn_prefill_plan_paged(prefill, cuQ.data(), cuKV.data(), 3, 0, nullptr),
      ATTN_ERROR_INVALID_ARGUMENT);
  attn_prefill_args args;
  ATTN_INIT(&args);
  args.q = dq.get();
  args.out = dOut.get();
  args.k = dk.get();
  args.v = dv.get();
  ASSERT_ATTN(attn_prefill_run(prefill, &args, nullptr));
  auto out = dOut.read();
  for (int b = 0; b < 3; ++b) {
    int kv0 = cuKV[b];
    KeyRow key = [&](int t, int h) { return rowOf(k, kv0 + t, h, kKVHeads); };
    KeyRow val = [&](int t, int h) { return rowOf(vv, kv0 + t, h, kKVHeads); };
    EXPECT_LT(requestError(q, out, cuQ[b], cuQ[b + 1] - cuQ[b],
                           cuKV[b + 1] - cuKV[b], key, val),
              kTolerance)
        << "request " << b;
  }
  attn_prefill_destroy(prefill);
}

TEST_F(CApiGpu, MlaDecodeOneTensorAndTwo) {
  // DeepSeek's MLA at TP8: 16 heads, a 512 latent and a 64 RoPE key per
  // token, pages of 16; the cache as one [pages, 16, 576] tensor (vLLM's)
  // and as ckv + kpe views of it with their strides (FlashInfer's form).
  constexpr int kHeads = 16, kRank = 512, kRope = 64, kRow = kRank + kRope;
  constexpr int kMlaPage = 16, kPages = 30;
  attn_mla_decode_variant v;
  attn_mla_decode_variant_init(&v);
  v.num_q_heads = kHeads;
  v.page_size = kMlaPage;
  v.write_lse = 1;
  attn_mla_decode *mla = nullptr;
  ASSERT_ATTN(attn_mla_decode_create(context, &v, 4, &mla));
  const std::vector<int32_t> lens = {1, 50, 300};
  const int batch = int(lens.size()), tableWidth = 20;
  // Request b's pages: a shuffled walk over the cache, distinct within a
  // request.
  std::vector<int32_t> tables(size_t(batch) * tableWidth);
  for (size_t i = 0; i < tables.size(); ++i)
    tables[i] = int32_t((i * 7 + 3) % kPages);
  auto cache = randomBf16(size_t(kPages) * kMlaPage * kRow, 6);
  auto qNope = randomBf16(size_t(batch) * kHeads * kRank, 7);
  auto qRope = randomBf16(size_t(batch) * kHeads * kRope, 8);
  Device<uint16_t> dCache(cache), dNope(qNope), dRope(qRope),
      dOut(qNope.size());
  Device<float> dLse(size_t(batch) * kHeads);
  Device<int32_t> dTables(tables);
  ASSERT_ATTN(attn_mla_decode_plan(mla, lens.data(), batch, 0, nullptr));
  for (bool twoTensors : {false, true}) {
    attn_mla_decode_args args;
    ATTN_INIT(&args);
    args.q_nope = dNope.get();
    args.q_rope = dRope.get();
    args.out = dOut.get();
    args.lse = dLse.get();
    args.ckv = dCache.get();
    args.num_pages = kPages;
    args.page_tables = dTables.get();
    args.page_table_stride = tableWidth;
    if (twoTensors) {
      args.ckv_page_stride = args.kpe_page_stride = int64_t(kMlaPage) * kRow;
      args.ckv_token_stride = args.kpe_token_stride = kRow;
      args.kpe = dCache.get() + kRank;
    }
    ASSERT_ATTN(attn_mla_decode_run(mla, &args, nullptr));
    auto out = dOut.read();
    auto lse = dLse.read();
    double worst = 0, worstLse = 0;
    const double scale = 1.0 / std::sqrt(double(kRow));
    // Request b's token t in the cache, through its page table.
    auto cacheRow = [&](int b, int t) {
      const int32_t page = tables[size_t(b) * tableWidth + t / kMlaPage];
      return cache.data() + (size_t(page) * kMlaPage + t % kMlaPage) * kRow;
    };
    for (int b = 0; b < batch; ++b)
      for (int h = 0; h < kHeads; ++h) {
        const size_t qRow = size_t(b) * kHeads + h;
        std::vector<double> s(lens[b]), o(kRank, 0.0);
        double m = -INFINITY, sum = 0;
        for (int t = 0; t < lens[b]; ++t) {
          const uint16_t *row = cacheRow(b, t);
          double dot = 0;
          for (int d = 0; d < kRank; ++d)
            dot += fromBf16(qNope[qRow * kRank + d]) * fromBf16(row[d]);
          for (int d = 0; d < kRope; ++d)
            dot += fromBf16(qRope[qRow * kRope + d]) * fromBf16(row[kRank + d]);
          s[t] = dot * scale;
          m = std::max(m, s[t]);
        }
        for (int t = 0; t < lens[b]; ++t) {
          const uint16_t *row = cacheRow(b, t);
          const double p = std::exp(s[t] - m);
          sum += p;
          for (int d = 0; d < kRank; ++d)
            o[d] += p * fromBf16(row[d]);
        }
        for (int d = 0; d < kRank; ++d) {
          const double e =
              std::fabs(fromBf16(out[qRow * kRank + d]) - o[d] / sum);
          worst = std::isnan(e) ? INFINITY : std::max(worst, e);
        }
        const double e = std::fabs(lse[qRow] - (m + std::log(sum)));
        worstLse = std::isnan(e) ? INFINITY : std::max(worstLse, e);
      }
    EXPECT_LT(worst, kTolerance) << (twoTensors ? "ckv + kpe" : "one tensor");
    EXPECT_LT(worstLse, 2e-3) << (twoTensors ? "ckv + kpe" : "one tensor");
  }
  attn_mla_decode_destroy(mla);
}

TEST_F(CApiGpu, PagedPrefillAndMixedBatch) {
  Cache cache(24);
  // Two prefills (a chunk over a cached prefix, a fresh prompt), then two
  // decodes.
  const std::vector<std::vector<int32_t>> tables = {
      {5, 17, 2, 9}, {11, 3}, {0, 21, 7}, {13}};
  const std::vector<int32_t> seqLens = {60, 30, 40, 9};
  const std::vector<int32_t> cuQ = {0, 25, 55, 56, 57};
  const int stride = 4;
  std::vector<int32_t> flat(tables.size() * stride, 0);
  for (size_t b = 0; b < tables.size(); ++b)
    std::copy(tables[b].begin(), tables[b].end(), flat.begin() + b * stride);
  Device<int32_t> dTables(flat), dLens(seqLens);
  auto q = randomBf16(size_t(cuQ.back()) * kQHeads * kDim, 6);
  Device<uint16_t> dq(q);

  attn_prefill_args args;
  ATTN_INIT(&args);
  args.q = dq.get();
  args.cache = cache.view();
  args.page_tables = dTables.get();
  args.page_table_stride = stride;

  // Paged prefill of the two prefills alone.
  {
    attn_prefill_variant v = prefillVariant(true);
    attn_prefill *prefill = nullptr;
    ASSERT_ATTN(attn_prefill_create(context, &v, 4, 256, &prefill));
    Device<uint16_t> dOut(size_t(cuQ[2]) * kQHeads * kDim);
    args.out = dOut.get();
    ASSERT_ATTN(attn_prefill_plan_paged(prefill, cuQ.data(), seqLens.data(), 2,
                                        0, nullptr));
    ASSERT_ATTN(attn_prefill_run(prefill, &args, nullptr));
    auto out = dOut.read();
    for (int b = 0; b < 2; ++b)
      EXPECT_LT(requestError(q, out, cuQ[b], cuQ[b + 1] - cuQ[b], seqLens[b],
                             cache.keys(tables[b], false),
                             cache.keys(tables[b], true)),
                kTolerance)
          << "request " << b;
    attn_prefill_destroy(prefill);
  }
  // The whole step as a mixed batch.
  attn_prefill_variant v = prefillVariant(true);
  attn_mixed_batch *mixed = nullptr;
  ASSERT_ATTN(attn_mixed_batch_create(context, &v, 4, 256, &mixed));
  Device<uint16_t> dOut(q.size());
  args.out = dOut.get();
  EXPECT_EQ(attn_mixed_batch_run(mixed, &args, dLens.get(), nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  ASSERT_ATTN(attn_mixed_batch_plan(mixed, cuQ.data(), seqLens.data(), 4, 2, 0,
                                    nullptr));
  ASSERT_ATTN(attn_mixed_batch_run(mixed, &args, dLens.get(), nullptr));
  auto out = dOut.read();
  for (int b = 0; b < 4; ++b)
    EXPECT_LT(requestError(q, out, cuQ[b], cuQ[b + 1] - cuQ[b], seqLens[b],
                           cache.keys(tables[b], false),
                           cache.keys(tables[b], true)),
              kTolerance)
        << "request " << b;
  attn_mixed_batch_destroy(mixed);
}

TEST_F(CApiGpu, CascadeMatchesFullAttention) {
  Cache cache(16);
  // Three requests share pages {4, 9} (32 tokens), then own suffixes.
  const std::vector<int32_t> shared = {4, 9};
  const std::vector<std::vector<int32_t>> suffix = {{1, 12}, {6}, {14, 3}};
  const std::vector<int32_t> suffixLens = {20, 7, 31};
  const int batch = 3, stride = 2;
  std::vector<int32_t> flat(batch * stride, 0);
  for (int b = 0; b < batch; ++b)
    std::copy(suffix[b].begin(), suffix[b].end(), flat.begin() + b * stride);
  Device<int32_t> dShared(shared), dSuffix(flat);
  auto q = randomBf16(size_t(batch) * kQHeads * kDim, 7);
  Device<uint16_t> dq(q), dOut(q.size());

  attn_decode_variant v = decodeVariant();
  attn_cascade *cascade = nullptr;
  ASSERT_ATTN(attn_cascade_create(context, &v, 4, 2, &cascade));
  const int32_t groupStarts[] = {0, 3}, kvLens[] = {32};
  attn_cascade_level level{groupStarts, kvLens, 1};
  ASSERT_ATTN(attn_cascade_plan(cascade, &level, 1, suffixLens.data(), batch, 0,
                                nullptr));
  attn_cascade_args args;
  ATTN_INIT(&args);
  args.q = dq.get();
  args.out = dOut.get();
  args.cache = cache.view();
  args.level_page_tables[0] = dShared.get();
  args.level_page_table_strides[0] = 2;
  args.suffix_page_tables = dSuffix.get();
  args.suffix_page_table_stride = stride;
  ASSERT_ATTN(attn_cascade_run(cascade, &args, nullptr));
  auto out = dOut.read();
  for (int b = 0; b < batch; ++b) {
    std::vector<int32_t> table = shared;
    table.insert(table.end(), suffix[b].begin(), suffix[b].end());
    EXPECT_LT(requestError(q, out, b, 1, 32 + suffixLens[b],
                           cache.keys(table, false), cache.keys(table, true)),
              kTolerance)
        << "request " << b;
  }
  attn_cascade_destroy(cascade);
}

TEST_F(CApiGpu, MergeStates) {
  attn_merge_states_variant v;
  attn_merge_states_variant_init(&v);
  v.num_heads = 4;
  v.head_dim = 64;
  attn_merge_states *merge = nullptr;
  ASSERT_ATTN(attn_merge_states_create(context, &v, &merge));
  const int tokens = 5, n = tokens * 4 * 64;
  std::vector<float> a(n), b(n), la(tokens * 4), lb(tokens * 4);
  std::mt19937 gen(8);
  std::uniform_real_distribution<float> dist(-2.f, 2.f);
  for (auto *x : {&a, &b, &la, &lb})
    for (float &e : *x)
      e = dist(gen);
  Device<float> da(a), db(b), dla(la), dlb(lb), dOut(n), dLse(tokens * 4);
  attn_merge_states_args args;
  ATTN_INIT(&args);
  args.num_tokens = tokens;
  args.num_states = 2;
  args.outs[0] = da.get();
  args.outs[1] = db.get();
  args.lses[0] = dla.get();
  args.lses[1] = dlb.get();
  args.out = dOut.get();
  args.lse = dLse.get();
  ASSERT_ATTN(attn_merge_states_run(merge, &args, nullptr));
  auto out = dOut.read();
  auto lse = dLse.read();
  for (int r = 0; r < tokens * 4; ++r) {
    double m = std::max(la[r], lb[r]);
    double wa = std::exp(la[r] - m), wb = std::exp(lb[r] - m);
    EXPECT_NEAR(lse[r], m + std::log(wa + wb), 1e-4);
    for (int d = 0; d < 64; ++d)
      EXPECT_NEAR(out[r * 64 + d],
                  (wa * a[r * 64 + d] + wb * b[r * 64 + d]) / (wa + wb), 1e-4);
  }
  args.num_states = 1;
  EXPECT_EQ(attn_merge_states_run(merge, &args, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  attn_merge_states_destroy(merge);
}

//===--- Writing the cache ------------------------------------------------===//

TEST_F(CApiGpu, AppendKV) {
  attn_append_kv_variant v;
  attn_append_kv_variant_init(&v);
  v.num_kv_heads = kKVHeads;
  attn_append_kv *append = nullptr;
  ASSERT_ATTN(attn_append_kv_create(context, &v, &append));
  Cache cache(4);
  const int tokens = 3;
  auto k = randomBf16(size_t(tokens) * kKVHeads * kDim, 9);
  auto vv = randomBf16(k.size(), 10);
  const std::vector<int64_t> slots = {17, -1, 63};
  Device<uint16_t> dk(k), dv(vv);
  Device<int64_t> dSlots(slots);
  attn_append_kv_args args;
  ATTN_INIT(&args);
  args.k = dk.get();
  args.v = dv.get();
  args.num_tokens = tokens;
  args.cache = cache.view();
  args.slot_mapping = dSlots.get();
  ASSERT_ATTN(attn_append_kv_run(append, &args, nullptr));
  auto ck = cache.dk.read(), cv = cache.dv.read();
  for (int h = 0; h < kKVHeads; ++h) {
    for (auto [t, slot] : {std::pair{0, 17}, {2, 63}}) {
      EXPECT_EQ(0, std::memcmp(rowOf(ck, slot, h, kKVHeads),
                               rowOf(k, t, h, kKVHeads), kDim * 2))
          << "token " << t;
      EXPECT_EQ(0, std::memcmp(rowOf(cv, slot, h, kKVHeads),
                               rowOf(vv, t, h, kKVHeads), kDim * 2))
          << "token " << t;
    }
    // Token 1's slot is -1: nothing written; slot 18 is as it was.
    EXPECT_EQ(0, std::memcmp(rowOf(ck, 18, h, kKVHeads),
                             rowOf(cache.k, 18, h, kKVHeads), kDim * 2));
  }
  attn_append_kv_destroy(append);
}

TEST_F(CApiGpu, CopyAndSwapBlocks) {
  attn_cache_ops *ops = nullptr;
  ASSERT_ATTN(attn_cache_ops_create(context, &ops));
  // Two layers of [2, 6 pages, 16, 2, 128] bf16.
  const int64_t pages = 6, pageElems = kPage * kKVHeads * kDim;
  auto layer0 = randomBf16(2 * pages * pageElems, 11);
  auto layer1 = randomBf16(layer0.size(), 12);
  Device<uint16_t> l0(layer0), l1(layer1);
  Device<uint64_t> table(std::vector<uint64_t>{l0.ptr, l1.ptr});
  attn_cache_layers layers;
  ATTN_INIT(&layers);
  layers.layer_table = table.get();
  layers.num_layers = 2;
  layers.num_pages = pages;
  layers.page_size = kPage;
  layers.num_kv_heads = kKVHeads;
  layers.head_dim = kDim;
  layers.dtype = ATTN_DTYPE_BF16;
  layers.layout = ATTN_LAYOUT_NHD;
  auto expectCopied = [&](const std::vector<std::pair<int, int>> &pairs) {
    for (auto [layer, host] : {std::pair{&l0, &layer0}, {&l1, &layer1}}) {
      std::vector<uint16_t> want = *host;
      for (auto [src, dst] : pairs)
        for (int kv = 0; kv < 2; ++kv)
          std::copy_n(host->begin() + (kv * pages + src) * pageElems, pageElems,
                      want.begin() + (kv * pages + dst) * pageElems);
      EXPECT_EQ(layer->read(), want);
      *host = want;
    }
  };
  const std::vector<int64_t> hostPairs = {0, 3, 1, 4};
  ASSERT_ATTN(attn_copy_blocks(ops, &layers, hostPairs.data(), 2, nullptr));
  expectCopied({{0, 3}, {1, 4}});
  Device<int64_t> devicePairs(std::vector<int64_t>{2, 5});
  ASSERT_ATTN(
      attn_copy_blocks_device(ops, &layers, devicePairs.get(), 1, nullptr));
  expectCopied({{2, 5}});
  const std::vector<int64_t> bad = {0, 6};
  EXPECT_EQ(attn_copy_blocks(ops, &layers, bad.data(), 1, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attn_last_error()).find("outside [0, 6)"),
            std::string::npos)
      << attn_last_error();
  // More pairs than pages: refused before a pair is read or copied.
  for (auto copy : {&attn_copy_blocks, &attn_copy_blocks_device}) {
    EXPECT_EQ(copy(ops, &layers, bad.data(), int64_t(1) << 40, nullptr),
              ATTN_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(attn_last_error())
                  .find("num_pairs is 1099511627776, more than "
                        "cache->num_pages (6)"),
              std::string::npos)
        << attn_last_error();
  }

  // swap_blocks: device pages to pinned host pages and back, coalesced.
  const int64_t pageBytes = 256;
  auto src = randomBf16(8 * pageBytes / 2, 13);
  Device<uint16_t> dSrc(src), dBack(src.size());
  void *host = nullptr;
  ASSERT_EQ(Driver::get().memAllocHost(&host, 4 * pageBytes), 0);
  const std::vector<int64_t> out = {2, 0, 3, 1, 7, 3};
  ASSERT_ATTN(attn_swap_blocks(dSrc.get(), 8, host, 4, pageBytes, out.data(), 3,
                               nullptr));
  const std::vector<int64_t> in = {0, 5, 1, 6, 3, 0};
  ASSERT_ATTN(attn_swap_blocks(host, 4, dBack.get(), 8, pageBytes, in.data(), 3,
                               nullptr));
  auto back = dBack.read();
  for (auto [from, to] : {std::pair{2, 5}, {3, 6}, {7, 0}})
    EXPECT_EQ(0, std::memcmp(back.data() + to * pageBytes / 2,
                             src.data() + from * pageBytes / 2, pageBytes))
        << from << " -> " << to;
  Driver::get().memFreeHost(host);
  attn_cache_ops_destroy(ops);
}

//===--- Metadata and advance_step ----------------------------------------===//

TEST_F(CApiGpu, MetadataAdvanceStepAndDecode) {
  attn_metadata_limits limits;
  ATTN_INIT(&limits);
  limits.page_size = kPage;
  limits.num_pages = 16;
  limits.max_batch = 4;
  limits.max_tokens = 64;
  limits.max_pages_per_seq = 4;
  attn_metadata_builder *builder = nullptr;
  ASSERT_ATTN(attn_metadata_builder_create(&limits, &builder));
  const int32_t pagesA[] = {3, 8}, pagesB[] = {12, 1, 5};
  attn_scheduled_request requests[2] = {{0, 1, 20, pagesA, 2},
                                        {0, 1, 40, pagesB, 3}};
  attn_metadata md;
  ATTN_INIT(&md);
  ASSERT_ATTN(attn_metadata_builder_build(builder, requests, 2, nullptr, &md));
  EXPECT_EQ(md.num_decodes, 2);
  EXPECT_EQ(md.batch, 2);
  EXPECT_EQ(md.page_table_stride, 4);
  EXPECT_EQ(md.seq_lens[0], 21);
  EXPECT_EQ(md.seq_lens[1], 41);
  EXPECT_EQ(md.slot_mapping[0], 8 * kPage + 4); // token 20: page 1, slot 4
  EXPECT_EQ(md.slot_mapping[1], 5 * kPage + 8); // token 40: page 2, slot 8
  EXPECT_EQ(md.page_tables[4 + 2], 5);
  ASSERT_NE(md.device_seq_lens, nullptr);

  // Decode the step from the device metadata, then advance it one token.
  Cache cache(16);
  attn_decode_variant v = decodeVariant();
  attn_decode *decode = nullptr;
  ASSERT_ATTN(attn_decode_create(context, &v, 4, &decode));
  ASSERT_ATTN(attn_decode_plan(decode, md.seq_lens, 2, 0, nullptr));
  attn_cache_ops *ops = nullptr;
  ASSERT_ATTN(attn_cache_ops_create(context, &ops));
  attn_advance_step_args step;
  ATTN_INIT(&step);
  step.num_queries = 2;
  step.num_seqs = 2;
  step.page_size = kPage;
  step.seq_lens = const_cast<int32_t *>(md.device_seq_lens);
  step.slot_mapping = const_cast<int64_t *>(md.device_slot_mapping);
  step.page_tables = md.device_page_tables;
  step.page_table_stride = md.page_table_stride;
  ASSERT_ATTN(attn_advance_step(ops, &step, decode, nullptr));
  std::vector<int32_t> lens(2);
  std::vector<int64_t> slots(2);
  ASSERT_EQ(Driver::get().ctxSynchronize(), 0);
  ASSERT_EQ(
      Driver::get().memcpyDtoH(lens.data(), CUdeviceptr(md.device_seq_lens), 8),
      0);
  ASSERT_EQ(Driver::get().memcpyDtoH(slots.data(),
                                     CUdeviceptr(md.device_slot_mapping), 16),
            0);
  EXPECT_EQ(lens, (std::vector<int32_t>{22, 42}));
  EXPECT_EQ(slots, (std::vector<int64_t>{8 * kPage + 5, 5 * kPage + 9}));

  // The advanced plan decodes the new lengths.
  auto q = randomBf16(size_t(2) * kQHeads * kDim, 14);
  Device<uint16_t> dq(q), dOut(q.size());
  attn_decode_args args;
  ATTN_INIT(&args);
  args.q = dq.get();
  args.out = dOut.get();
  args.cache = cache.view();
  args.page_tables = md.device_page_tables;
  args.page_table_stride = md.page_table_stride;
  args.seq_lens = md.device_seq_lens;
  ASSERT_ATTN(attn_decode_run(decode, &args, nullptr));
  auto out = dOut.read();
  EXPECT_LT(requestError(q, out, 0, 1, 22, cache.keys({3, 8}, false),
                         cache.keys({3, 8}, true)),
            kTolerance);
  EXPECT_LT(requestError(q, out, 1, 1, 42, cache.keys({12, 1, 5}, false),
                         cache.keys({12, 1, 5}, true)),
            kTolerance);

  // Errors name the request and the rule.
  attn_scheduled_request prefillAfterDecode[2] = {{0, 1, 20, pagesA, 2},
                                                  {1, 4, 0, pagesB, 3}};
  EXPECT_EQ(
      attn_metadata_builder_build(builder, prefillAfterDecode, 2, nullptr, &md),
      ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attn_last_error()).find("request 1"), std::string::npos)
      << attn_last_error();
  attn_cache_ops_destroy(ops);
  attn_decode_destroy(decode);
  attn_metadata_builder_destroy(builder);
}

//===--- Handles ----------------------------------------------------------===//

/// The error of a call given a handle that is not live.
void expectNotLive(attn_status status, const std::string &function,
                   const std::string &name, const std::string &type) {
  EXPECT_EQ(status, ATTN_ERROR_INVALID_ARGUMENT) << function;
  EXPECT_EQ(std::string(attn_last_error()),
            function + ": " + name + " is not a live " + type +
                " handle (destroyed, or never created)");
}

TEST_F(CApiGpu, DestroyedHandlesAreRefused) {
  // Every handle kind: the first destroy frees it, a second one and any
  // later call are errors naming it (and read nothing freed: the sanitizer
  // build checks that).
  int32_t lens[2] = {5, 9}, cu[3] = {0, 1, 2};
  attn_decode_variant d = decodeVariant();
  attn_decode *decode = nullptr;
  ASSERT_ATTN(attn_decode_create(context, &d, 4, &decode));
  ASSERT_ATTN(attn_decode_plan(decode, lens, 2, 0, nullptr));
  ASSERT_ATTN(attn_decode_destroy(decode));
  expectNotLive(attn_decode_destroy(decode), "attn_decode_destroy", "decode",
                "attn_decode");
  expectNotLive(attn_decode_plan(decode, lens, 2, 0, nullptr),
                "attn_decode_plan", "decode", "attn_decode");
  attn_decode_args decodeArgs;
  ATTN_INIT(&decodeArgs);
  expectNotLive(attn_decode_run(decode, &decodeArgs, nullptr),
                "attn_decode_run", "decode", "attn_decode");

  attn_prefill_variant pv = prefillVariant(false);
  attn_prefill *prefill = nullptr;
  ASSERT_ATTN(attn_prefill_create(context, &pv, 4, 64, &prefill));
  ASSERT_ATTN(attn_prefill_destroy(prefill));
  expectNotLive(attn_prefill_destroy(prefill), "attn_prefill_destroy",
                "prefill", "attn_prefill");
  expectNotLive(attn_prefill_plan(prefill, cu, cu, 2, 0, nullptr),
                "attn_prefill_plan", "prefill", "attn_prefill");

  attn_prefill_variant paged = prefillVariant(true);
  attn_mixed_batch *mixed = nullptr;
  ASSERT_ATTN(attn_mixed_batch_create(context, &paged, 4, 64, &mixed));
  ASSERT_ATTN(attn_mixed_batch_destroy(mixed));
  expectNotLive(attn_mixed_batch_destroy(mixed), "attn_mixed_batch_destroy",
                "mixed", "attn_mixed_batch");
  expectNotLive(attn_mixed_batch_plan(mixed, cu, lens, 2, 0, 0, nullptr),
                "attn_mixed_batch_plan", "mixed", "attn_mixed_batch");

  attn_merge_states_variant mv;
  attn_merge_states_variant_init(&mv);
  mv.num_heads = kQHeads;
  attn_merge_states *merge = nullptr;
  ASSERT_ATTN(attn_merge_states_create(context, &mv, &merge));
  ASSERT_ATTN(attn_merge_states_destroy(merge));
  expectNotLive(attn_merge_states_destroy(merge), "attn_merge_states_destroy",
                "merge", "attn_merge_states");
  attn_merge_states_args mergeArgs;
  ATTN_INIT(&mergeArgs);
  expectNotLive(attn_merge_states_run(merge, &mergeArgs, nullptr),
                "attn_merge_states_run", "merge", "attn_merge_states");

  attn_cascade *cascade = nullptr;
  ASSERT_ATTN(attn_cascade_create(context, &d, 4, 2, &cascade));
  ASSERT_ATTN(attn_cascade_destroy(cascade));
  expectNotLive(attn_cascade_destroy(cascade), "attn_cascade_destroy",
                "cascade", "attn_cascade");
  expectNotLive(attn_cascade_plan(cascade, nullptr, 0, lens, 2, 0, nullptr),
                "attn_cascade_plan", "cascade", "attn_cascade");

  attn_append_kv_variant av;
  attn_append_kv_variant_init(&av);
  av.num_kv_heads = kKVHeads;
  attn_append_kv *append = nullptr;
  ASSERT_ATTN(attn_append_kv_create(context, &av, &append));
  ASSERT_ATTN(attn_append_kv_destroy(append));
  expectNotLive(attn_append_kv_destroy(append), "attn_append_kv_destroy",
                "append", "attn_append_kv");
  attn_append_kv_args appendArgs;
  ATTN_INIT(&appendArgs);
  expectNotLive(attn_append_kv_run(append, &appendArgs, nullptr),
                "attn_append_kv_run", "append", "attn_append_kv");

  attn_cache_ops *ops = nullptr;
  ASSERT_ATTN(attn_cache_ops_create(context, &ops));
  ASSERT_ATTN(attn_cache_ops_destroy(ops));
  expectNotLive(attn_cache_ops_destroy(ops), "attn_cache_ops_destroy", "ops",
                "attn_cache_ops");
  attn_advance_step_args step;
  ATTN_INIT(&step);
  expectNotLive(attn_advance_step(ops, &step, nullptr, nullptr),
                "attn_advance_step", "ops", "attn_cache_ops");

  attn_metadata_limits limits;
  ATTN_INIT(&limits);
  limits.page_size = kPage;
  limits.max_batch = 4;
  limits.max_tokens = 64;
  limits.max_pages_per_seq = 4;
  attn_metadata_builder *builder = nullptr;
  ASSERT_ATTN(attn_metadata_builder_create(&limits, &builder));
  ASSERT_ATTN(attn_metadata_builder_destroy(builder));
  expectNotLive(attn_metadata_builder_destroy(builder),
                "attn_metadata_builder_destroy", "builder",
                "attn_metadata_builder");
  attn_metadata md;
  ATTN_INIT(&md);
  expectNotLive(attn_metadata_builder_build(builder, nullptr, 0, nullptr, &md),
                "attn_metadata_builder_build", "builder",
                "attn_metadata_builder");
}

TEST_F(CApiGpu, AStaleHandleNeverReachesANewObject) {
  // The next decode likely takes the freed one's memory; its handle is
  // another, and the stale one stays refused. A prefill passed as a decode
  // (cast by the caller) is refused too.
  attn_decode_variant d = decodeVariant();
  attn_decode *first = nullptr, *second = nullptr;
  ASSERT_ATTN(attn_decode_create(context, &d, 4, &first));
  ASSERT_ATTN(attn_decode_destroy(first));
  ASSERT_ATTN(attn_decode_create(context, &d, 4, &second));
  EXPECT_NE(first, second);
  int32_t len = 5;
  expectNotLive(attn_decode_plan(first, &len, 1, 0, nullptr),
                "attn_decode_plan", "decode", "attn_decode");
  ASSERT_ATTN(attn_decode_plan(second, &len, 1, 0, nullptr));

  attn_prefill_variant pv = prefillVariant(false);
  attn_prefill *prefill = nullptr;
  ASSERT_ATTN(attn_prefill_create(context, &pv, 4, 64, &prefill));
  EXPECT_EQ(attn_decode_plan(reinterpret_cast<attn_decode *>(prefill), &len, 1,
                             0, nullptr),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(attn_last_error(), "attn_decode_plan: decode is an "
                                  "attn_prefill handle, not an attn_decode");
  // advance_step's optional decode is checked as well.
  attn_cache_ops *ops = nullptr;
  ASSERT_ATTN(attn_cache_ops_create(context, &ops));
  attn_advance_step_args step;
  ATTN_INIT(&step);
  expectNotLive(attn_advance_step(ops, &step, first, nullptr),
                "attn_advance_step", "decode", "attn_decode");
  ASSERT_ATTN(attn_cache_ops_destroy(ops));
  ASSERT_ATTN(attn_prefill_destroy(prefill));
  ASSERT_ATTN(attn_decode_destroy(second));
}

} // namespace
