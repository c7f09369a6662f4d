//===- CacheChecks.h - launch checks shared by the cache kernels -*- C++
//-*-===//
//
// Private to the runtime: the checks of a paged cache and its FP8 scales
// against a compiled kernel, for every kernel that reads or writes a cache.
// Each returns the problem in words, or nothing. And the host side of the
// kernels' reports of page ids outside the cache.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_CACHECHECKS_H
#define ATTN_RUNTIME_CACHECHECKS_H

#include "attn/runtime/kernels/PagedKV.h"
#include "attn/runtime/support/CudaHandles.h"
#include "templates/attn/params.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <string>
#include <tuple>

namespace attn::runtime {

/// The cache's dtype and geometry must be the ones the kernel was built for.
inline std::optional<std::string> cacheMismatch(const PagedKVView &c,
                                                const KernelSpec &s) {
  if (c.dtype == s.kvType && c.numKVHeads == s.numKVHeads &&
      c.headDim == s.headDim && c.pageSize == s.pageSize &&
      c.layout == s.layout)
    return std::nullopt;
  return std::string(llvm::formatv(
      "cache is {0} {1}x{2}, page {3}, {4}; the kernel was compiled for "
      "{5} {6}x{7}, page {8}, {9}",
      toString(c.dtype), c.numKVHeads, c.headDim, c.pageSize,
      toString(c.layout), toString(s.kvType), s.numKVHeads, s.headDim,
      s.pageSize, toString(s.layout)));
}

/// Bytes the kernels move a cache row's pieces in: 16, or 8 for FP8 rows of
/// a head dim that is not a multiple of 16 (templates/attn/decode.cuh,
/// kCopyBytes; append_kv.cuh stores FP8 rows 8 bytes at a time).
inline int cacheAlignment(const KernelSpec &s) {
  return s.headDim * sizeOf(s.kvType) % 16 == 0 ? 16 : 8;
}

/// The first of `buffers` (name, address, the alignment the kernels read or
/// write it with) whose address is not aligned: vector loads and stores of
/// a misaligned address fault, which would end the CUDA context.
inline std::optional<std::string> misalignedBuffer(
    std::initializer_list<std::tuple<const char *, const void *, int>>
        buffers) {
  for (auto [name, address, alignment] : buffers)
    if (address && reinterpret_cast<uintptr_t>(address) % alignment)
      return std::string(llvm::formatv(
          "{0} must be {1}-byte aligned (the kernels move it in {1}-byte "
          "pieces), got address {2}",
          name, alignment, address));
  return std::nullopt;
}

/// The cache view and page-table row length of a launch that reads pages.
inline std::optional<std::string> pagedArgsProblem(const PagedKVView &c,
                                                   const KernelSpec &s,
                                                   int pageTableStride) {
  if (auto problem = cacheMismatch(c, s))
    return problem;
  int64_t densePage = int64_t(s.pageSize) * s.numKVHeads * s.headDim;
  if (c.pageStride && (c.pageStride < densePage || c.pageStride % 16))
    return std::string(llvm::formatv("cache pageStride {0} must be >= {1} and "
                                     "a multiple of 16",
                                     c.pageStride, densePage));
  if (c.numPages < 1)
    return std::string("cache.numPages must be >= 1");
  const int alignment = cacheAlignment(s);
  if (auto problem = misalignedBuffer(
          {{"cache.k", c.k, alignment}, {"cache.v", c.v, alignment}}))
    return problem;
  if (pageTableStride < 1)
    return std::string("pageTableStride must be >= 1");
  return std::nullopt;
}

/// FP8 caches need both scales with one value, or one per KV head; others
/// must have none.
inline std::optional<std::string> scaleMismatch(const KernelSpec &s,
                                                const float *kScale,
                                                const float *vScale,
                                                int numScales) {
  if (s.isFP8KV()) {
    int want = s.perHeadKVScale ? s.numKVHeads : 1;
    if (kScale && vScale && numScales == want)
      return std::nullopt;
    return std::string(llvm::formatv("the FP8 cache needs kScale and vScale "
                                     "with {0} value(s) each, got {1}",
                                     want, numScales));
  }
  if (kScale || vScale)
    return "kScale/vScale given, but the cache is " +
           std::string(toString(s.kvType)) + ", not FP8";
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Page ids outside the cache (params.h, PageIdError)
//===----------------------------------------------------------------------===//

/// A zeroed PageIdError in pinned host memory. cuMemHostAlloc's memory is
/// mapped at the same address for every device under unified addressing
/// (every 64-bit platform CUDA 13 runs on), so kernels write it through
/// its host pointer.
inline llvm::Expected<PinnedBuffer> allocatePageIdError() {
  auto memory = PinnedBuffer::allocate(sizeof(PageIdError));
  if (!memory)
    return memory.takeError();
  std::memset(memory->data(), 0, sizeof(PageIdError));
  return memory;
}

/// The cache's last page id as the kernels take it (params.h, lastPage):
/// every int32 id from 0 is a page of a cache of more than 2^31 pages.
inline uint32_t lastPageId(const PagedKVView &cache) {
  return uint32_t(std::min<int64_t>(cache.numPages, int64_t(1) << 31) - 1);
}

/// What an earlier launch reported into `error`, as an Error naming
/// `kernel`, and clears it; success when nothing has reached host memory
/// (yet: a launch's report is there once it has finished). Page-table ids
/// unless `slotPageSize` is set: append_kv's slots, of pages of that size.
/// A plain load when there is none: no driver call, no synchronization.
inline llvm::Error takePageIdError(PageIdError *error, llvm::StringRef kernel,
                                   int slotPageSize = 0) {
  if (!error || !__atomic_load_n(&error->report, __ATOMIC_ACQUIRE))
    return llvm::Error::success();
  // Another thread may have taken it meanwhile.
  uint64_t report = __atomic_exchange_n(&error->report, 0, __ATOMIC_ACQ_REL);
  int64_t pages = __atomic_load_n(&error->numPages, __ATOMIC_RELAXED);
  if (!report)
    return llvm::Error::success();
  const int32_t id = int32_t(uint32_t(report));
  const int32_t row = int32_t(uint32_t(report >> 32) & 0x7fffffffu);
  if (slotPageSize)
    return llvm::createStringError(llvm::formatv(
        "{0}: an earlier launch met slot {1}{2} for token {3}, past the "
        "cache's {4} pages of {5} tokens; that token's K and V were not "
        "written",
        kernel, id == INT32_MAX ? ">= " : "", id, row, pages, slotPageSize));
  return llvm::createStringError(llvm::formatv(
      "{0}: an earlier launch read page id {1} from row {2} of its page "
      "table, outside the cache's {3} pages; it read no memory outside the "
      "cache, but its output for that row is not valid",
      kernel, id, row, pages));
}

/// Records the pages of the cache a launch about to report into `error`
/// reads, for the message of its report.
inline void notePageCount(PageIdError *error, int64_t numPages) {
  __atomic_store_n(&error->numPages, numPages, __ATOMIC_RELAXED);
}

} // namespace attn::runtime

#endif // ATTN_RUNTIME_CACHECHECKS_H
