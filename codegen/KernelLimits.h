//===- KernelLimits.h - what attn kernels can run --------------*- C++ -*-===//
//
// The single home of the variant limits that the kernel templates honour. The
// dialect verifiers, the runtime's argument checks and the docs all read these,
// so a rule changes in one place. Plain C++, no MLIR or CUDA dependency.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_CODEGEN_KERNELLIMITS_H
#define ATTN_CODEGEN_KERNELLIMITS_H

#include <cstdint>

namespace attn {

/// Head dims run by the kernels: every multiple of 8 from 32 to 256. A row of
/// 8 fp16/bf16 elements is one 16-byte vector load, the unit all templates
/// move data in.
constexpr int64_t kMinHeadDim = 32;
constexpr int64_t kMaxHeadDim = 256;
constexpr int64_t kHeadDimMultiple = 8;
constexpr bool isSupportedHeadDim(int64_t headDim) {
  return headDim >= kMinHeadDim && headDim <= kMaxHeadDim &&
         headDim % kHeadDimMultiple == 0;
}

/// Tokens per KV-cache page (vLLM's block size).
constexpr int64_t kMinPageSize = 1;
constexpr int64_t kMaxPageSize = 256;
constexpr bool isSupportedPageSize(int64_t pageSize) {
  return pageSize >= kMinPageSize && pageSize <= kMaxPageSize;
}

/// Query tokens per request in one decode step (1, or 1 + draft tokens for
/// speculative decoding). The decode kernel keeps them all in one tile.
constexpr int64_t kMaxDecodeQueryLen = 16;

/// Query heads that share one KV head (GQA group size); MQA with 128 query
/// heads is the largest ratio in use.
constexpr int64_t kMaxGroupSize = 128;

} // namespace attn

#endif // ATTN_CODEGEN_KERNELLIMITS_H
