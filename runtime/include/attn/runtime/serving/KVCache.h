//===- KVCache.h - paged KV cache memory, device and pinned host -*- C++
//-*-===//
//
// The memory of an engine's paged KV cache: one device allocation per layer
// holding that layer's K and V pages, FP8 dequantization scales, and a
// pinned host copy of the same geometry that preempted pages are swapped
// to and back from. Which page belongs to whom is PageAllocator's
// business; the kernels see a layer through PagedKVView.
//
// Per-layer shape (the seeds' get_kv_cache_shape; vLLM's FlashAttention
// convention, K and V each contiguous so a swap copies runs of pages):
//   NHD: [2, numPages, pageSize, numKVHeads, headDim]
//   HND: [2, numPages, numKVHeads, pageSize, headDim]
// Index 0 is K, 1 is V. FlashInfer's [numPages, 2, ...] interleaves K and V
// per page instead; PagedKVView::pageStride could describe that too, but
// one convention keeps swap and the tests simple.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_KVCACHE_H
#define ATTN_RUNTIME_KVCACHE_H

#include "attn/runtime/kernels/PagedKV.h"
#include "attn/runtime/support/CudaHandles.h"
#include "spec/KernelSpec.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <array>
#include <cstdint>
#include <vector>

namespace attn::runtime {

/// Geometry and element type of a paged KV cache (all layers alike).
struct KVCacheConfig {
  int numLayers = 1;
  int64_t numPages = 0; ///< pages per layer
  int pageSize = 16;    ///< tokens per page (the kernels' page size)
  int numKVHeads = 8;
  int headDim = 128;
  ScalarType dtype = ScalarType::BF16; ///< F16, BF16, F8E4M3 or F8E5M2
  KVLayout layout = KVLayout::NHD;
  /// FP8 only: one dequantization scale per KV head instead of one per
  /// tensor (per layer, for K and for V).
  bool perHeadScale = false;

  /// Elements of one page of K (or of V).
  int64_t pageElements() const {
    return int64_t(pageSize) * numKVHeads * headDim;
  }
  int64_t pageBytes() const { return pageElements() * sizeOf(dtype); }
  /// Bytes of one layer: K and V of every page.
  int64_t layerBytes() const { return 2 * numPages * pageBytes(); }
  /// FP8 scales per layer for K (and as many for V); 0 for fp16/bf16.
  int numScales() const;
};

/// An Error naming the first field of `config` the kernels cannot serve
/// (head size, page size, dtype, zero layers, pages or heads) or a size
/// that overflows; page ids must fit the int32 page tables.
llvm::Error checkConfig(const KVCacheConfig &config);

/// The per-layer shape described in the file comment.
std::array<int64_t, 5> kvCacheShape(const KVCacheConfig &config);

/// Head sizes the kernels run: every multiple of 8 from 32 to 256
/// (spec/KernelLimits.h). That covers every size the seeds' backends list
/// (FlashAttention's 32..256 multiples of 32, xFormers' 80/96/112/120,
/// FlashInfer's 64/128/256).
std::vector<int> supportedHeadSizes();

/// A page copy: from page `src` of one cache to page `dst` of another.
struct PagePair {
  int64_t src = 0;
  int64_t dst = 0;
};

/// `count` consecutive pages from src.. to dst.. (one copy per K/V per layer).
struct PageRun {
  int64_t src = 0;
  int64_t dst = 0;
  int64_t count = 0;
};

/// Merges pairs that continue the previous one (src + 1, dst + 1) into runs,
/// keeping the given order; a swap issues one copy per run, not per page.
std::vector<PageRun> coalescePagePairs(llvm::ArrayRef<PagePair> pairs);

class HostKVCache;

/// A paged KV cache in device memory.
class KVCache {
public:
  /// One device buffer per layer; FP8 scales start at 1. Errors: an invalid
  /// config (checkConfig) and a failed allocation, naming the layer and bytes.
  static llvm::Expected<KVCache> allocate(const KVCacheConfig &config);

  const KVCacheConfig &config() const { return cacheConfig; }
  /// Layer `layer` as the decode, paged-prefill and append-KV kernels take it.
  PagedKVView view(int layer) const;
  /// Start of layer `layer`'s [2, numPages, ...] buffer.
  CUdeviceptr layerData(int layer) const { return layers[layer].get(); }
  /// Device array [numLayers] of the layerData addresses (uint64), for
  /// kernels that reach every layer in one launch (CacheOps::copyPages).
  CUdeviceptr layerTable() const { return layerAddresses.get(); }
  /// FP8 scales of a layer ([numScales()] floats each); null for fp16/bf16.
  const float *kScale(int layer) const;
  const float *vScale(int layer) const;
  /// Sets a layer's FP8 scales (numScales() values each; synchronous copy).
  llvm::Error setScales(int layer, llvm::ArrayRef<float> k,
                        llvm::ArrayRef<float> v);
  /// Device bytes held, scales and layer table included.
  size_t deviceBytes() const;

  /// Copies device pages `src` to host pages `dst`, K and V of every
  /// layer, asynchronously on `stream`: `host` must stay alive and not be
  /// read until the stream has passed the copies. Errors: a geometry that
  /// differs from this cache's (numPages may differ), a page out of range.
  llvm::Error swapOut(llvm::ArrayRef<PagePair> pairs, HostKVCache &host,
                      CUstream stream) const;
  /// The reverse: host pages `src` to device pages `dst`.
  llvm::Error swapIn(llvm::ArrayRef<PagePair> pairs, const HostKVCache &host,
                     CUstream stream);

private:
  KVCache() = default;
  KVCacheConfig cacheConfig;
  std::vector<DeviceBuffer> layers;
  DeviceBuffer layerAddresses; ///< [numLayers] uint64
  DeviceBuffer scales;         ///< [numLayers, 2 (K, V), numScales] floats
};

/// A paged KV cache in pinned host memory (the swap space), same per-layer
/// shape as KVCache; only numPages may differ from the device cache's.
class HostKVCache {
public:
  static llvm::Expected<HostKVCache> allocate(const KVCacheConfig &config);

  const KVCacheConfig &config() const { return cacheConfig; }
  /// Start of layer `layer`'s [2, numPages, ...] buffer.
  char *layerData(int layer) const { return layers[layer].ptr<char>(); }

private:
  HostKVCache() = default;
  KVCacheConfig cacheConfig;
  std::vector<PinnedBuffer> layers;
};

} // namespace attn::runtime

#endif // ATTN_RUNTIME_KVCACHE_H
