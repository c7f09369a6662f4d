//===- KVCache.cpp - paged KV cache memory, device and pinned host --------===//
#include "attn/runtime/serving/KVCache.h"
#include "attn/runtime/support/Error.h"
#include "spec/KernelLimits.h"

#include "llvm/Support/FormatVariadic.h"

#include <cstring>
#include <limits>

namespace attn::runtime {

namespace {

llvm::Error cacheError(const llvm::Twine &message) {
  return llvm::createStringError("KV cache: " + message.str());
}

bool isCacheType(ScalarType type) {
  return type == ScalarType::F16 || type == ScalarType::BF16 ||
         type == ScalarType::F8E4M3 || type == ScalarType::F8E5M2;
}

/// Only the page count may differ between a device cache and its swap space.
llvm::Error checkSameGeometry(const KVCacheConfig &a, const KVCacheConfig &b) {
  if (a.numLayers != b.numLayers || a.pageSize != b.pageSize ||
      a.numKVHeads != b.numKVHeads || a.headDim != b.headDim ||
      a.dtype != b.dtype || a.layout != b.layout)
    return cacheError(
        "swap: the host cache's geometry (layers, page size, heads, head "
        "dim, dtype, layout) differs from the device cache's");
  return llvm::Error::success();
}

llvm::Error checkPairs(llvm::ArrayRef<PagePair> pairs, int64_t srcPages,
                       int64_t dstPages, const char *srcName,
                       const char *dstName) {
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (pairs[i].src < 0 || pairs[i].src >= srcPages)
      return cacheError(
          llvm::formatv("swap: pair {0}: {1} page {2} is outside [0, {3})", i,
                        srcName, pairs[i].src, srcPages));
    if (pairs[i].dst < 0 || pairs[i].dst >= dstPages)
      return cacheError(
          llvm::formatv("swap: pair {0}: {1} page {2} is outside [0, {3})", i,
                        dstName, pairs[i].dst, dstPages));
  }
  return llvm::Error::success();
}

/// Byte offset of page `page` of K (kv = 0) or V (kv = 1) in a layer of
/// `numPages` pages.
int64_t pageOffset(const KVCacheConfig &config, int64_t numPages, int kv,
                   int64_t page) {
  return (kv * numPages + page) * config.pageBytes();
}

} // namespace

int KVCacheConfig::numScales() const {
  if (dtype != ScalarType::F8E4M3 && dtype != ScalarType::F8E5M2)
    return 0;
  return perHeadScale ? numKVHeads : 1;
}

llvm::Error checkConfig(const KVCacheConfig &c) {
  if (c.numLayers < 1)
    return cacheError(
        llvm::formatv("numLayers must be >= 1, got {0}", c.numLayers));
  if (c.numPages < 1)
    return cacheError(
        llvm::formatv("numPages must be >= 1, got {0}", c.numPages));
  // Page tables hold int32 page ids.
  if (c.numPages > std::numeric_limits<int32_t>::max())
    return cacheError(llvm::formatv(
        "numPages = {0} does not fit the int32 page tables", c.numPages));
  if (!isSupportedPageSize(c.pageSize))
    return cacheError(llvm::formatv("page size {0} is outside [{1}, {2}]",
                                    c.pageSize, kMinPageSize, kMaxPageSize));
  if (c.numKVHeads < 1)
    return cacheError(
        llvm::formatv("numKVHeads must be >= 1, got {0}", c.numKVHeads));
  if (!isSupportedHeadDim(c.headDim))
    return cacheError(llvm::formatv(
        "head size {0} is not supported (the kernels take multiples of {1} "
        "from {2} to {3})",
        c.headDim, kHeadDimMultiple, kMinHeadDim, kMaxHeadDim));
  if (!isCacheType(c.dtype))
    return cacheError(llvm::formatv(
        "dtype {0} is not a cache type (f16, bf16, f8e4m3, f8e5m2)",
        toString(c.dtype)));
  if (c.numPages > std::numeric_limits<int64_t>::max() / 2 / c.pageBytes())
    return cacheError(llvm::formatv("{0} pages of {1} bytes overflow",
                                    c.numPages, c.pageBytes()));
  return llvm::Error::success();
}

std::array<int64_t, 5> kvCacheShape(const KVCacheConfig &c) {
  if (c.layout == KVLayout::NHD)
    return {2, c.numPages, c.pageSize, c.numKVHeads, c.headDim};
  return {2, c.numPages, c.numKVHeads, c.pageSize, c.headDim};
}

std::vector<int> supportedHeadSizes() {
  std::vector<int> sizes;
  for (int64_t d = kMinHeadDim; d <= kMaxHeadDim; d += kHeadDimMultiple)
    if (isSupportedHeadDim(d))
      sizes.push_back(int(d));
  return sizes;
}

std::vector<PageRun> coalescePagePairs(llvm::ArrayRef<PagePair> pairs) {
  std::vector<PageRun> runs;
  for (const PagePair &p : pairs) {
    if (!runs.empty()) {
      PageRun &last = runs.back();
      if (p.src == last.src + last.count && p.dst == last.dst + last.count) {
        ++last.count;
        continue;
      }
    }
    runs.push_back({p.src, p.dst, 1});
  }
  return runs;
}

//===----------------------------------------------------------------------===//
// KVCache
//===----------------------------------------------------------------------===//

llvm::Expected<KVCache> KVCache::allocate(const KVCacheConfig &config) {
  if (llvm::Error error = checkConfig(config))
    return std::move(error);
  KVCache cache;
  cache.cacheConfig = config;
  const size_t bytes = size_t(config.layerBytes());
  for (int layer = 0; layer < config.numLayers; ++layer) {
    auto buffer = DeviceBuffer::allocate(bytes);
    if (!buffer)
      return cacheError(llvm::formatv(
          "allocating layer {0} of {1} ({2} bytes, {3} held so far) failed: "
          "{4}",
          layer, config.numLayers, bytes, size_t(layer) * bytes,
          llvm::toString(buffer.takeError())));
    cache.layers.push_back(std::move(*buffer));
  }
  std::vector<uint64_t> addresses;
  for (const DeviceBuffer &layer : cache.layers)
    addresses.push_back(layer.get());
  auto table = DeviceBuffer::allocate(addresses.size() * sizeof(uint64_t));
  if (!table)
    return table.takeError();
  if (llvm::Error error = table->copyFromHost(
          addresses.data(), addresses.size() * sizeof(uint64_t)))
    return std::move(error);
  cache.layerAddresses = std::move(*table);
  if (int n = config.numScales()) {
    std::vector<float> ones(size_t(config.numLayers) * 2 * n, 1.0f);
    auto scales = DeviceBuffer::allocate(ones.size() * sizeof(float));
    if (!scales)
      return scales.takeError();
    if (llvm::Error error =
            scales->copyFromHost(ones.data(), ones.size() * sizeof(float)))
      return std::move(error);
    cache.scales = std::move(*scales);
  }
  return std::move(cache);
}

PagedKVView KVCache::view(int layer) const {
  const KVCacheConfig &c = cacheConfig;
  PagedKVView v;
  const char *base = layers[layer].ptr<const char>();
  v.k = base;
  v.v = base + pageOffset(c, c.numPages, 1, 0);
  v.dtype = c.dtype;
  v.numKVHeads = c.numKVHeads;
  v.headDim = c.headDim;
  v.pageSize = c.pageSize;
  v.layout = c.layout;
  v.numPages = c.numPages;
  v.pageStride = 0; // dense: K pages follow each other, as do V pages
  return v;
}

const float *KVCache::kScale(int layer) const {
  int n = cacheConfig.numScales();
  return n ? scales.ptr<const float>() + size_t(layer) * 2 * n : nullptr;
}

const float *KVCache::vScale(int layer) const {
  int n = cacheConfig.numScales();
  return n ? kScale(layer) + n : nullptr;
}

llvm::Error KVCache::setScales(int layer, llvm::ArrayRef<float> k,
                               llvm::ArrayRef<float> v) {
  const int n = cacheConfig.numScales();
  if (n == 0)
    return cacheError(llvm::formatv("a {0} cache has no FP8 scales",
                                    toString(cacheConfig.dtype)));
  if (layer < 0 || layer >= cacheConfig.numLayers)
    return cacheError(llvm::formatv("layer {0} is outside [0, {1})", layer,
                                    cacheConfig.numLayers));
  if (int(k.size()) != n || int(v.size()) != n)
    return cacheError(llvm::formatv(
        "setScales: {0} K and {1} V scales given, the cache has {2} each",
        k.size(), v.size(), n));
  std::vector<float> both(k.begin(), k.end());
  both.insert(both.end(), v.begin(), v.end());
  return copyHostToDevice(reinterpret_cast<CUdeviceptr>(kScale(layer)),
                          both.data(), both.size() * sizeof(float));
}

size_t KVCache::deviceBytes() const {
  return layers.size() * size_t(cacheConfig.layerBytes()) +
         layerAddresses.size() + scales.size();
}

llvm::Error KVCache::swapOut(llvm::ArrayRef<PagePair> pairs, HostKVCache &host,
                             CUstream stream) const {
  const KVCacheConfig &c = cacheConfig;
  const int64_t hostPages = host.config().numPages;
  if (llvm::Error error = checkSameGeometry(c, host.config()))
    return error;
  if (llvm::Error error =
          checkPairs(pairs, c.numPages, hostPages, "device", "host"))
    return error;
  const std::vector<PageRun> runs = coalescePagePairs(pairs);
  for (int layer = 0; layer < c.numLayers; ++layer)
    for (int kv = 0; kv < 2; ++kv)
      for (const PageRun &run : runs)
        ATTN_CU_CHECK(cuMemcpyDtoHAsync(
            host.layerData(layer) + pageOffset(c, hostPages, kv, run.dst),
            layers[layer].get() + pageOffset(c, c.numPages, kv, run.src),
            run.count * c.pageBytes(), stream));
  return llvm::Error::success();
}

llvm::Error KVCache::swapIn(llvm::ArrayRef<PagePair> pairs,
                            const HostKVCache &host, CUstream stream) {
  const KVCacheConfig &c = cacheConfig;
  const int64_t hostPages = host.config().numPages;
  if (llvm::Error error = checkSameGeometry(c, host.config()))
    return error;
  if (llvm::Error error =
          checkPairs(pairs, hostPages, c.numPages, "host", "device"))
    return error;
  const std::vector<PageRun> runs = coalescePagePairs(pairs);
  for (int layer = 0; layer < c.numLayers; ++layer)
    for (int kv = 0; kv < 2; ++kv)
      for (const PageRun &run : runs)
        ATTN_CU_CHECK(cuMemcpyHtoDAsync(
            layers[layer].get() + pageOffset(c, c.numPages, kv, run.dst),
            host.layerData(layer) + pageOffset(c, hostPages, kv, run.src),
            run.count * c.pageBytes(), stream));
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// HostKVCache
//===----------------------------------------------------------------------===//

llvm::Expected<HostKVCache> HostKVCache::allocate(const KVCacheConfig &config) {
  if (llvm::Error error = checkConfig(config))
    return std::move(error);
  HostKVCache cache;
  cache.cacheConfig = config;
  const size_t bytes = size_t(config.layerBytes());
  for (int layer = 0; layer < config.numLayers; ++layer) {
    auto buffer = PinnedBuffer::allocate(bytes);
    if (!buffer)
      return cacheError(llvm::formatv(
          "allocating pinned host layer {0} of {1} ({2} bytes) failed: {3}",
          layer, config.numLayers, bytes, llvm::toString(buffer.takeError())));
    cache.layers.push_back(std::move(*buffer));
  }
  return std::move(cache);
}

} // namespace attn::runtime
