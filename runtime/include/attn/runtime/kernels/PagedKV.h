//===- PagedKV.h - a paged KV cache as the kernels see it -------*- C++ -*-===//
//
// The view of a paged KV cache that every kernel reading or writing one
// (decode, paged prefill, append-KV) takes. No ownership.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_PAGEDKV_H
#define ATTN_RUNTIME_PAGEDKV_H

#include "spec/KernelSpec.h"

#include <cstdint>

namespace attn::runtime {

/// A paged KV cache in device memory, as the kernels read it.
struct PagedKVView {
  const void *k = nullptr; ///< K pages; page p at k + p * pageStride elements
  const void *v = nullptr; ///< V pages, same layout
  ScalarType dtype = ScalarType::BF16;
  int numKVHeads = 0;
  int headDim = 0;
  int pageSize = 0;
  KVLayout layout = KVLayout::NHD;
  int64_t numPages = 0;
  int64_t pageStride = 0; ///< elements; 0 means pageSize * numKVHeads * headDim
};

} // namespace attn::runtime

#endif // ATTN_RUNTIME_PAGEDKV_H
