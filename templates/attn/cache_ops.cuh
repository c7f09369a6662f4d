//===- cache_ops.cuh - copy_pages and advance_step ------------*- CUDA -*-===//
//
// The two utility kernels an engine runs between attention launches
// (runtime/CacheOps.h): copy_pages copies many cache pages in one launch
// (copy-on-write of shared prefix pages), advance_step moves a decode batch
// one token forward on the device (multi-step decoding). Neither depends on
// a dtype or a head size: a page is pageBytes of 16-byte vectors, and the
// metadata arrays have fixed types. NVRTC-compilable: params.h only.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEMPLATES_CACHE_OPS_CUH
#define ATTN_TEMPLATES_CACHE_OPS_CUH

#include "attn/params.h"

namespace attn {

/// \brief copy_pages: the CTA at (pair, 2 * layer + kv) copies page
/// pairs[pair].src to pairs[pair].dst in K (kv 0) or V (kv 1) of one layer.
/// The host checks that destinations are distinct and never sources, so the
/// CTAs are independent.
/// \param p pageBytes must be a multiple of 16 (every page then starts
/// 16-byte aligned, as cuMemAlloc aligns the layers to 256 bytes).
__device__ __forceinline__ void copyPagesKernel(const CopyPagesParams &p) {
  const int64_t pair = blockIdx.x;
  if (pair >= p.numPairs)
    return;
  const int layer = int(blockIdx.y >> 1), kv = int(blockIdx.y & 1);
  char *base =
      reinterpret_cast<char *>(p.layers[layer]) + kv * p.numPages * p.pageBytes;
  const uint4 *from =
      reinterpret_cast<const uint4 *>(base + p.pairs[2 * pair] * p.pageBytes);
  uint4 *to =
      reinterpret_cast<uint4 *>(base + p.pairs[2 * pair + 1] * p.pageBytes);
  const int64_t vecs = p.pageBytes / 16;
  // Four loads in flight per thread before their stores.
  constexpr int kUnroll = 4;
  int64_t i = threadIdx.x;
  for (; i + (kUnroll - 1) * int64_t(blockDim.x) < vecs;
       i += kUnroll * int64_t(blockDim.x)) {
    uint4 r[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      r[u] = from[i + u * int64_t(blockDim.x)];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      to[i + u * int64_t(blockDim.x)] = r[u];
  }
  for (; i < vecs; i += blockDim.x)
    to[i] = from[i];
}

/// \brief advance_step: thread i moves row i of a decode batch one token
/// forward. A request row (i < numQueries) takes its sampled token as input,
/// grows its length by one and gets the new token's position and slot; a
/// padding row (numQueries <= i < numSeqs) gets slot -1, which append-KV
/// skips. Thread i also advances work item i of a decode plan when it
/// belongs to a request: every item of the request has seqLen + 1, and the
/// chunk that ended at the old length ends one later, so the planned decode
/// reads the new token without replanning.
__device__ __forceinline__ void advanceStepKernel(const AdvanceStepParams &p) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < p.numQueries) {
    const int32_t pos = p.seqLens[i]; // the new token's position
    p.seqLens[i] = pos + 1;
    if (p.positions)
      p.positions[i] = pos;
    if (p.inputTokens)
      p.inputTokens[i] = p.sampledTokenIds[i];
    const int32_t entry = pos / p.pageSize;
    // A position past the page table has no page to go to: the engine
    // reserves pages for every step before it advances. Rather than read
    // outside the table, such a token is not written (slot -1).
    p.slotMapping[i] =
        entry < p.pageTableStride
            ? int64_t(p.pageTables[int64_t(i) * p.pageTableStride + entry]) *
                      p.pageSize +
                  pos % p.pageSize
            : int64_t(-1);
  } else if (i < p.numSeqs) {
    p.slotMapping[i] = -1;
  }
  if (p.workItems && i < p.maxWorkItems && i < *p.numWorkItems) {
    DecodeWorkItem &w = p.workItems[i];
    if (w.request < p.numQueries) {
      if (w.kvEnd == w.seqLen)
        ++w.kvEnd;
      ++w.seqLen;
    }
  }
}

} // namespace attn

#endif // ATTN_TEMPLATES_CACHE_OPS_CUH
