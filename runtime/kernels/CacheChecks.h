//===- CacheChecks.h - launch checks shared by the cache kernels -*- C++ -*-===//
//
// Private to the runtime: the checks of a paged cache and its FP8 scales
// against a compiled kernel, for every kernel that reads or writes a cache.
// Each returns the problem in words, or nothing.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_CACHECHECKS_H
#define ATTN_RUNTIME_CACHECHECKS_H

#include "attn/runtime/kernels/PagedKV.h"

#include "llvm/Support/FormatVariadic.h"

#include <optional>
#include <string>

namespace attn::runtime {

/// The cache's dtype and geometry must be the ones the kernel was built for.
inline std::optional<std::string> cacheMismatch(const PagedKVView &c,
                                                const KernelSpec &s) {
  if (c.dtype == s.kvType && c.numKVHeads == s.numKVHeads &&
      c.headDim == s.headDim && c.pageSize == s.pageSize && c.layout == s.layout)
    return std::nullopt;
  return std::string(llvm::formatv(
      "cache is {0} {1}x{2}, page {3}, {4}; the kernel was compiled for "
      "{5} {6}x{7}, page {8}, {9}",
      toString(c.dtype), c.numKVHeads, c.headDim, c.pageSize, toString(c.layout),
      toString(s.kvType), s.numKVHeads, s.headDim, s.pageSize, toString(s.layout)));
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

} // namespace attn::runtime

#endif // ATTN_RUNTIME_CACHECHECKS_H
