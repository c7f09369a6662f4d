//===- KVCacheGpuTest.cpp - swap, metadata upload, append through slots ---===//
//
// The engine-side host code against real device memory: swapOut/swapIn move
// exactly the listed pages (K and V of every layer) and nothing else; the
// metadata builder's device arrays equal its host arrays, padded (slot -1,
// else 0) up to the limits at fixed addresses; and append-KV run with the
// builder's slot mapping on a KVCache layer puts every new row in the slot
// its page table says.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/serving/AttentionMetadata.h"
#include "attn/runtime/serving/KVCache.h"
#include "compiler/Jit/Jit.h"
#include "test/gpu/GpuTestUtil.h"

#include <cstring>
#include <random>

using namespace attn;
using namespace attn::runtime;
using namespace attn::test;

namespace {

KVCacheConfig swapConfig(KVLayout layout) {
  KVCacheConfig c;
  c.numLayers = 3;
  c.numPages = 12;
  c.pageSize = 4;
  c.numKVHeads = 2;
  c.headDim = 32;
  c.dtype = ScalarType::F8E4M3;
  c.layout = layout;
  return c;
}

std::vector<uint8_t> randomBytes(std::mt19937 &rng, size_t n) {
  std::vector<uint8_t> bytes(n);
  for (uint8_t &b : bytes)
    b = uint8_t(rng());
  return bytes;
}

/// Page `page` of K (kv 0) or V (kv 1) in a layer image of `numPages`.
std::vector<uint8_t> pageOf(const std::vector<uint8_t> &layer,
                            const KVCacheConfig &c, int64_t numPages, int kv,
                            int64_t page) {
  auto at = layer.begin() + (kv * numPages + page) * c.pageBytes();
  return std::vector<uint8_t>(at, at + c.pageBytes());
}

llvm::Expected<std::vector<uint8_t>> downloadLayer(const KVCache &cache,
                                                   int layer) {
  std::vector<uint8_t> bytes(cache.config().layerBytes());
  ATTN_CU_CHECK(cuCtxSynchronize());
  ATTN_CU_CHECK(
      cuMemcpyDtoH(bytes.data(), cache.layerData(layer), bytes.size()));
  return bytes;
}

class KVCacheSwapTest : public ::testing::TestWithParam<KVLayout> {};

TEST_P(KVCacheSwapTest, SwapOutAndInMoveExactlyTheListedPages) {
  ATTN_REQUIRE_GPU();
  const KVCacheConfig c = swapConfig(GetParam());
  KVCacheConfig hostConfig = c;
  hostConfig.numPages = 7; // swap space of another size
  ATTN_ASSIGN_OR_FAIL(cache, KVCache::allocate(c));
  ATTN_ASSIGN_OR_FAIL(host, HostKVCache::allocate(hostConfig));
  ATTN_ASSIGN_OR_FAIL(stream, Stream::create());

  std::mt19937 rng(5);
  std::vector<std::vector<uint8_t>> device(c.numLayers),
      hostBefore(c.numLayers);
  for (int l = 0; l < c.numLayers; ++l) {
    device[l] = randomBytes(rng, c.layerBytes());
    ATTN_ASSERT_OK(copyHostToDevice(cache.layerData(l), device[l].data(),
                                    device[l].size()));
    hostBefore[l] = randomBytes(rng, hostConfig.layerBytes());
    std::memcpy(host.layerData(l), hostBefore[l].data(), hostBefore[l].size());
  }

  // A run of two, a single page, a run into the host's last page.
  const std::vector<PagePair> out = {{2, 0}, {3, 1}, {9, 4}, {10, 5}, {11, 6}};
  ATTN_ASSERT_OK(cache.swapOut(out, host, stream.get()));
  ATTN_ASSERT_OK(cache.swapOut(out, host, stream.get())); // idempotent
  ASSERT_EQ(cuStreamSynchronize(stream.get()), CUDA_SUCCESS);
  for (int l = 0; l < c.numLayers; ++l) {
    std::vector<uint8_t> got(host.layerData(l),
                             host.layerData(l) + hostConfig.layerBytes());
    std::vector<uint8_t> want = hostBefore[l];
    for (const PagePair &p : out)
      for (int kv = 0; kv < 2; ++kv) {
        std::vector<uint8_t> src = pageOf(device[l], c, c.numPages, kv, p.src);
        std::copy(src.begin(), src.end(),
                  want.begin() +
                      (kv * hostConfig.numPages + p.dst) * c.pageBytes());
      }
    EXPECT_EQ(got, want) << "host layer " << l; // pages 2, 3 untouched
  }

  // Back in, to other device pages; everything else keeps its bytes.
  const std::vector<PagePair> in = {{0, 5}, {1, 6}, {4, 0}, {6, 11}};
  ATTN_ASSERT_OK(cache.swapIn(in, host, stream.get()));
  ASSERT_EQ(cuStreamSynchronize(stream.get()), CUDA_SUCCESS);
  auto originOf = [&](int64_t hostPage) { // the device page swapped there
    for (const PagePair &p : out)
      if (p.dst == hostPage)
        return p.src;
    return int64_t(-1);
  };
  for (int l = 0; l < c.numLayers; ++l) {
    ATTN_ASSIGN_OR_FAIL(got, downloadLayer(cache, l));
    std::vector<uint8_t> want = device[l];
    for (const PagePair &p : in) {
      int64_t origin = originOf(p.src);
      ASSERT_GE(origin, 0);
      for (int kv = 0; kv < 2; ++kv) {
        std::vector<uint8_t> src = pageOf(device[l], c, c.numPages, kv, origin);
        std::copy(src.begin(), src.end(),
                  want.begin() + (kv * c.numPages + p.dst) * c.pageBytes());
      }
    }
    EXPECT_EQ(got, want) << "device layer " << l;
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, KVCacheSwapTest,
                         ::testing::Values(KVLayout::NHD, KVLayout::HND),
                         [](const ::testing::TestParamInfo<KVLayout> &info) {
                           return std::string(toString(info.param));
                         });

TEST(KVCacheGpu, SwapErrorsCopyNothing) {
  ATTN_REQUIRE_GPU();
  const KVCacheConfig c = swapConfig(KVLayout::NHD);
  KVCacheConfig other = c;
  other.numPages = 4;
  ATTN_ASSIGN_OR_FAIL(cache, KVCache::allocate(c));
  ATTN_ASSIGN_OR_FAIL(host, HostKVCache::allocate(other));
  llvm::Error error = cache.swapOut({{1, 0}, {2, 4}}, host, nullptr);
  ASSERT_TRUE(bool(error));
  EXPECT_EQ(llvm::toString(std::move(error)),
            "KV cache: swap: pair 1: host page 4 is outside [0, 4)");
  error = cache.swapIn({{0, 12}}, host, nullptr);
  ASSERT_TRUE(bool(error));
  EXPECT_EQ(llvm::toString(std::move(error)),
            "KV cache: swap: pair 0: device page 12 is outside [0, 12)");
  other.headDim = 64;
  ATTN_ASSIGN_OR_FAIL(wrong, HostKVCache::allocate(other));
  error = cache.swapOut({{0, 0}}, wrong, nullptr);
  ASSERT_TRUE(bool(error));
  EXPECT_TRUE(
      llvm::StringRef(llvm::toString(std::move(error))).contains("geometry"));
}

TEST(KVCacheGpu, ViewAndScales) {
  ATTN_REQUIRE_GPU();
  KVCacheConfig c = swapConfig(KVLayout::HND);
  c.perHeadScale = true;
  ATTN_ASSIGN_OR_FAIL(cache, KVCache::allocate(c));
  PagedKVView v = cache.view(1);
  EXPECT_EQ(reinterpret_cast<CUdeviceptr>(v.k), cache.layerData(1));
  EXPECT_EQ(static_cast<const char *>(v.v) - static_cast<const char *>(v.k),
            c.numPages * c.pageBytes());
  EXPECT_EQ(v.numPages, 12);
  EXPECT_EQ(v.pageSize, 4);
  EXPECT_EQ(v.layout, KVLayout::HND);
  EXPECT_EQ(cache.deviceBytes(),
            size_t(3 * c.layerBytes() + 3 * sizeof(uint64_t) +
                   3 * 2 * 2 * sizeof(float)));
  ATTN_ASSERT_OK(cache.setScales(2, {0.5f, 0.25f}, {2.f, 4.f}));
  std::vector<float> scales(2 * 2 * 3);
  ASSERT_EQ(cuMemcpyDtoH(scales.data(),
                         reinterpret_cast<CUdeviceptr>(cache.kScale(0)),
                         scales.size() * sizeof(float)),
            CUDA_SUCCESS);
  EXPECT_EQ(scales, (std::vector<float>{1, 1, 1, 1, 1, 1, 1, 1, //
                                        0.5f, 0.25f, 2, 4}));
  EXPECT_EQ(cache.vScale(2), cache.kScale(2) + 2);
  llvm::Error error = cache.setScales(0, {1.f}, {1.f});
  ASSERT_TRUE(bool(error));
  EXPECT_EQ(llvm::toString(std::move(error)),
            "KV cache: setScales: 1 K and 1 V scales given, the cache has 2 "
            "each");
}

/// A step like the unit test's: two chunked prefills, three decodes.
struct Step {
  std::vector<std::vector<int32_t>> tables;
  std::vector<ScheduledRequest> requests;
};

Step mixedStep() {
  Step s;
  s.tables = {{7, 2, 9}, {1, 4, 5}, {3, 6}, {0, 10, 11}, {8}};
  const int32_t query[] = {6, 2, 1, 1, 1}, context[] = {3, 8, 4, 11, 2};
  for (int r = 0; r < 5; ++r) {
    ScheduledRequest q;
    q.isPrefill = r < 2;
    q.queryLen = query[r];
    q.contextLen = context[r];
    s.requests.push_back(q);
  }
  for (int r = 0; r < 5; ++r)
    s.requests[r].pageTable = s.tables[r];
  return s;
}

MetadataLimits stepLimits() {
  MetadataLimits l;
  l.pageSize = 4;
  l.numPages = 12;
  l.maxBatch = 8;
  l.maxTokens = 32;
  l.maxPagesPerSeq = 4;
  return l;
}

template <typename T>
llvm::Expected<std::vector<T>> fromDevice(const T *p, size_t n) {
  std::vector<T> values(n);
  ATTN_CU_CHECK(cuCtxSynchronize());
  if (n)
    ATTN_CU_CHECK(cuMemcpyDtoH(values.data(), reinterpret_cast<CUdeviceptr>(p),
                               n * sizeof(T)));
  return values;
}

TEST(AttentionMetadataGpu, UploadEqualsHostAndPads) {
  ATTN_REQUIRE_GPU();
  const MetadataLimits l = stepLimits();
  ATTN_ASSIGN_OR_FAIL(builder, AttentionMetadataBuilder::create(l));
  ATTN_ASSIGN_OR_FAIL(stream, Stream::create());
  Step step = mixedStep();
  ATTN_ASSIGN_OR_FAIL(md, builder.build(step.requests, stream.get()));
  const DeviceMetadata d = md.device;
  const size_t B = l.maxBatch, W = l.maxPagesPerSeq;

  auto padded = [](std::vector<int32_t> v, size_t n) {
    v.resize(n, 0);
    return v;
  };
  ATTN_ASSIGN_OR_FAIL(seqLens, fromDevice(d.seqLens, B));
  EXPECT_EQ(seqLens, padded(md.seqLens, B));
  ATTN_ASSIGN_OR_FAIL(contextLens, fromDevice(d.contextLens, B));
  EXPECT_EQ(contextLens, padded(md.contextLens, B));
  ATTN_ASSIGN_OR_FAIL(qsl, fromDevice(d.queryStartLoc, 6));
  EXPECT_EQ(qsl, md.queryStartLoc);
  ATTN_ASSIGN_OR_FAIL(ssl, fromDevice(d.seqStartLoc, 6));
  EXPECT_EQ(ssl, md.seqStartLoc);
  ATTN_ASSIGN_OR_FAIL(tables, fromDevice(d.pageTables, B * W));
  EXPECT_EQ(tables, padded(md.pageTables, B * W));
  ATTN_ASSIGN_OR_FAIL(slots, fromDevice(d.slotMapping, size_t(l.maxTokens)));
  std::vector<int64_t> wantSlots = md.slotMapping;
  wantSlots.resize(l.maxTokens, -1);
  EXPECT_EQ(slots, wantSlots);
  AttentionMetadataView dv = md.decodeView();
  ATTN_ASSIGN_OR_FAIL(dqsl, fromDevice(dv.device.queryStartLoc, 4));
  EXPECT_EQ(dqsl, (std::vector<int32_t>{0, 1, 2, 3}));
  ATTN_ASSIGN_OR_FAIL(dssl, fromDevice(dv.device.seqStartLoc, 4));
  EXPECT_EQ(dssl, (std::vector<int32_t>{0, 5, 17, 20}));
  ATTN_ASSIGN_OR_FAIL(dslots, fromDevice(dv.device.slotMapping, 3));
  EXPECT_EQ(dslots, (std::vector<int64_t>{24, 47, 34}));
  EXPECT_EQ(d.crossPageTables, nullptr); // cross attention off

  // A smaller next step: same addresses, the old entries are padding now.
  Step next = mixedStep();
  next.requests.erase(next.requests.begin()); // P1 and the decodes
  ATTN_ASSIGN_OR_FAIL(md2, builder.build(next.requests, stream.get()));
  EXPECT_EQ(md2.device.seqLens, d.seqLens);
  EXPECT_EQ(md2.device.slotMapping, d.slotMapping);
  ATTN_ASSIGN_OR_FAIL(tables2, fromDevice(md2.device.pageTables, B * W));
  EXPECT_EQ(tables2, padded(md2.pageTables, B * W));
  ATTN_ASSIGN_OR_FAIL(slots2,
                      fromDevice(md2.device.slotMapping, size_t(l.maxTokens)));
  std::vector<int64_t> wantSlots2 = md2.slotMapping;
  wantSlots2.resize(l.maxTokens, -1);
  EXPECT_EQ(slots2, wantSlots2);
}

TEST(AttentionMetadataGpu, CrossArraysUpload) {
  ATTN_REQUIRE_GPU();
  MetadataLimits l = stepLimits();
  l.maxEncoderTokens = 8;
  l.maxCrossPagesPerSeq = 2;
  ATTN_ASSIGN_OR_FAIL(builder, AttentionMetadataBuilder::create(l));
  const std::vector<int32_t> table = {0}, cross = {10, 11};
  ScheduledRequest r;
  r.isPrefill = true;
  r.queryLen = 2;
  r.pageTable = table;
  r.encoderLen = 6;
  r.crossPageTable = cross;
  ATTN_ASSIGN_OR_FAIL(md, builder.build({r}, nullptr));
  ATTN_ASSIGN_OR_FAIL(lens, fromDevice(md.device.encoderSeqLens, 1));
  EXPECT_EQ(lens, std::vector<int32_t>{6});
  ATTN_ASSIGN_OR_FAIL(start, fromDevice(md.device.encoderSeqStartLoc, 2));
  EXPECT_EQ(start, (std::vector<int32_t>{0, 6}));
  ATTN_ASSIGN_OR_FAIL(tables, fromDevice(md.device.crossPageTables, 2));
  EXPECT_EQ(tables, cross);
  ATTN_ASSIGN_OR_FAIL(slots, fromDevice(md.device.crossSlotMapping, 8));
  EXPECT_EQ(slots, (std::vector<int64_t>{40, 41, 42, 43, 44, 45, -1, -1}));
}

TEST(AttentionMetadataGpu, AppendKVWritesThroughTheSlotMapping) {
  ATTN_REQUIRE_GPU();
  KVCacheConfig c;
  c.numPages = 12;
  c.pageSize = 4;
  c.numKVHeads = 2;
  c.headDim = 64;
  c.dtype = ScalarType::BF16;
  AppendKVVariant v;
  v.inType = v.kvType = c.dtype;
  v.numKVHeads = c.numKVHeads;
  v.headDim = c.headDim;
  v.pageSize = c.pageSize;
  v.layout = c.layout;
  ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().appendKV(v));
  ATTN_ASSIGN_OR_FAIL(cache, KVCache::allocate(c));
  ATTN_ASSIGN_OR_FAIL(builder, AttentionMetadataBuilder::create(stepLimits()));
  ATTN_ASSIGN_OR_FAIL(stream, Stream::create());
  Step step = mixedStep();
  ATTN_ASSIGN_OR_FAIL(md, builder.build(step.requests, stream.get()));

  // Random rows, different for K and V, so a swapped K/V or a wrong slot
  // shows; the cache starts poisoned so a stray write shows too.
  std::mt19937 rng(3);
  const size_t row = size_t(c.numKVHeads) * c.headDim;
  // Padding rows past the step's tokens: their slots are -1.
  const size_t rows = md.numTokens() + 5;
  Quantized k = randomValues(rng, c.dtype, rows * row, 1.0);
  Quantized val = randomValues(rng, c.dtype, rows * row, 1.0);
  ATTN_ASSIGN_OR_FAIL(dk, upload(k.bytes));
  ATTN_ASSIGN_OR_FAIL(dv, upload(val.bytes));
  ATTN_ASSERT_OK([&]() -> llvm::Error {
    ATTN_CU_CHECK(cuMemsetD8(cache.layerData(0), 0xff, c.layerBytes()));
    // On the legacy stream, which the append's stream need not wait for.
    ATTN_CU_CHECK(cuCtxSynchronize());
    return llvm::Error::success();
  }());

  AppendKVArgs args;
  args.k = dk.ptr<void>();
  args.v = dv.ptr<void>();
  args.inType = c.dtype;
  args.numKVHeads = c.numKVHeads;
  args.headDim = c.headDim;
  args.cache = cache.view(0);
  bindSlots(args, md);
  args.numTokens = int64_t(rows); // a padded (graph-sized) launch
  ATTN_ASSERT_OK(kernel->run(args, stream.get()));
  ATTN_ASSIGN_OR_FAIL(layer, downloadLayer(cache, 0));

  std::vector<uint8_t> want(c.layerBytes(), 0xff);
  const int64_t elem = sizeOf(c.dtype);
  for (size_t t = 0; t < md.slotMapping.size(); ++t) {
    const int64_t slot = md.slotMapping[t];
    for (int h = 0; h < c.numKVHeads; ++h)
      for (int kv = 0; kv < 2; ++kv) {
        int64_t at = ref::kvOffset(c.layout, slot / c.pageSize,
                                   int(slot % c.pageSize), h, c.numKVHeads,
                                   c.pageSize, c.headDim, c.pageElements()) +
                     kv * c.numPages * c.pageElements();
        const Quantized &src = kv ? val : k;
        std::memcpy(&want[at * elem],
                    &src.bytes[(t * row + h * c.headDim) * elem],
                    c.headDim * elem);
      }
  }
  EXPECT_EQ(layer, want);
}

} // namespace
