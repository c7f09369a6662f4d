//===- KVCacheTest.cpp - KV cache geometry and config errors --------------===//
//
// The GPU-free part of the KV cache: the per-layer shape, the supported head
// sizes, config errors (raised before any memory is touched), the page
// arithmetic and the coalescing of swap pairs into runs.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/serving/KVCache.h"
#include "attn/runtime/serving/Backend.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace attn;
using namespace attn::runtime;

namespace {

KVCacheConfig smallConfig() {
  KVCacheConfig c;
  c.numLayers = 2;
  c.numPages = 10;
  c.pageSize = 16;
  c.numKVHeads = 4;
  c.headDim = 64;
  return c;
}

std::string configError(const KVCacheConfig &c) {
  llvm::Error error = checkConfig(c);
  EXPECT_TRUE(bool(error)) << "expected an error";
  return llvm::toString(std::move(error));
}

TEST(KVCacheShape, FollowsTheLayout) {
  KVCacheConfig c = smallConfig();
  EXPECT_EQ(kvCacheShape(c), (std::array<int64_t, 5>{2, 10, 16, 4, 64}));
  c.layout = KVLayout::HND;
  EXPECT_EQ(kvCacheShape(c), (std::array<int64_t, 5>{2, 10, 4, 16, 64}));
}

TEST(KVCacheShape, BytesPerBlockAndLayer) {
  KVCacheConfig c = smallConfig();
  EXPECT_EQ(c.pageElements(), 16 * 4 * 64);
  EXPECT_EQ(c.pageBytes(), 16 * 4 * 64 * 2);
  EXPECT_EQ(c.layerBytes(), 2 * 10 * 16 * 4 * 64 * 2);
  c.dtype = ScalarType::F8E5M2;
  EXPECT_EQ(c.pageBytes(), 16 * 4 * 64);
}

TEST(KVCacheShape, ScalesOnlyForFp8) {
  KVCacheConfig c = smallConfig();
  EXPECT_EQ(c.numScales(), 0);
  c.dtype = ScalarType::F8E4M3;
  EXPECT_EQ(c.numScales(), 1);
  c.perHeadScale = true;
  EXPECT_EQ(c.numScales(), 4);
}

TEST(KVCacheShape, SupportedHeadSizesAreMultiplesOf8From32To256) {
  std::vector<int> sizes = supportedHeadSizes();
  ASSERT_EQ(sizes.size(), 29u);
  EXPECT_EQ(sizes.front(), 32);
  EXPECT_EQ(sizes.back(), 256);
  // Every size the seeds' backends name.
  for (int d : {32, 64, 80, 96, 112, 120, 128, 160, 192, 224, 256})
    EXPECT_NE(std::find(sizes.begin(), sizes.end(), d), sizes.end()) << d;
  for (int d : sizes)
    EXPECT_EQ(d % 8, 0) << d;
}

TEST(KVCacheConfigCheck, AcceptsAValidConfig) {
  EXPECT_FALSE(bool(checkConfig(smallConfig())));
}

TEST(KVCacheConfigCheck, NamesWhatIsWrong) {
  KVCacheConfig c = smallConfig();
  c.headDim = 36;
  EXPECT_EQ(configError(c), "KV cache: head size 36 is not supported (the "
                            "kernels take multiples of 8 from 32 to 256)");
  c = smallConfig();
  c.headDim = 264;
  EXPECT_TRUE(llvm::StringRef(configError(c)).contains("head size 264"));
  c = smallConfig();
  c.numPages = 0;
  EXPECT_EQ(configError(c), "KV cache: numPages must be >= 1, got 0");
  c = smallConfig();
  c.numPages = int64_t(1) << 31;
  EXPECT_TRUE(llvm::StringRef(configError(c)).contains("int32 page tables"));
  c = smallConfig();
  c.numLayers = 0;
  EXPECT_EQ(configError(c), "KV cache: numLayers must be >= 1, got 0");
  c = smallConfig();
  c.pageSize = 0;
  EXPECT_EQ(configError(c), "KV cache: page size 0 is outside [1, 256]");
  c = smallConfig();
  c.numKVHeads = 0;
  EXPECT_EQ(configError(c), "KV cache: numKVHeads must be >= 1, got 0");
  c = smallConfig();
  c.dtype = ScalarType::F32;
  EXPECT_TRUE(llvm::StringRef(configError(c)).contains("not a cache type"));
}

TEST(KVCacheConfigCheck, AllocateChecksBeforeTouchingTheGpu) {
  KVCacheConfig c = smallConfig();
  c.headDim = 36;
  // The config error, not a missing-GPU error, on any machine.
  llvm::Expected<KVCache> cache = KVCache::allocate(c);
  ASSERT_FALSE(bool(cache));
  EXPECT_TRUE(llvm::StringRef(llvm::toString(cache.takeError()))
                  .contains("head size 36"));
  llvm::Expected<HostKVCache> host = HostKVCache::allocate(c);
  ASSERT_FALSE(bool(host));
  EXPECT_TRUE(llvm::StringRef(llvm::toString(host.takeError()))
                  .contains("head size 36"));
}

TEST(CoalescePagePairs, MergesConsecutivePairsInOrder) {
  std::vector<PagePair> pairs = {{2, 0}, {3, 1}, {4, 2}, {9, 3},
                                 {7, 4}, {8, 5}, {8, 6}};
  std::vector<PageRun> runs = coalescePagePairs(pairs);
  ASSERT_EQ(runs.size(), 4u);
  auto same = [](const PageRun &r, int64_t s, int64_t d, int64_t n) {
    return r.src == s && r.dst == d && r.count == n;
  };
  EXPECT_TRUE(same(runs[0], 2, 0, 3));
  EXPECT_TRUE(same(runs[1], 9, 3, 1));
  EXPECT_TRUE(same(runs[2], 7, 4, 2));
  EXPECT_TRUE(same(runs[3], 8, 6, 1)); // src repeats: a new run
  EXPECT_TRUE(coalescePagePairs({}).empty());
}

} // namespace

// A Backend checks that the cache it will read is the one its config
// describes (GPU-free: configs only).
TEST(BackendCacheCheckTest, NamesEveryMismatch) {
  BackendConfig config;
  config.numKVHeads = 4;
  config.headDim = 64;
  config.pageSize = 16;
  KVCacheConfig cache = smallConfig();
  EXPECT_FALSE(bool(checkCacheConfig(config, cache)));
  cache.pageSize = 32;
  cache.layout = KVLayout::HND;
  std::string message = llvm::toString(checkCacheConfig(config, cache));
  EXPECT_NE(message.find("pageSize 16 (the cache has 32)"), std::string::npos)
      << message;
  EXPECT_NE(message.find("layout nhd (the cache has hnd)"), std::string::npos)
      << message;
}

// The Backend takes the cascade where `attn-bench cascade` measured it to
// pay: a 4x read saving and 2k (16-bit) or 4k (FP8) shared tokens.
TEST(BackendCascadeChoice, FollowsTheMeasuredThresholds) {
  BackendConfig config; // 32 q heads over 8 KV heads
  config.numQHeads = 32;
  config.numKVHeads = 8;
  config.kvType = ScalarType::BF16;
  EXPECT_TRUE(runtime::cascadePays(config, 16, 2048));
  EXPECT_FALSE(runtime::cascadePays(config, 16, 2032));
  EXPECT_FALSE(runtime::cascadePays(config, 15, 16384));
  config.kvType = ScalarType::F8E4M3;
  EXPECT_TRUE(runtime::cascadePays(config, 64, 4096));
  EXPECT_FALSE(runtime::cascadePays(config, 64, 2048));
  // MHA saves as much with a quarter of the requests.
  config.numKVHeads = 32;
  EXPECT_TRUE(runtime::cascadePays(config, 4, 4096));
  EXPECT_FALSE(runtime::cascadePays(config, 3, 4096));
}
