//===- Schedule.cpp - the decode schedule heuristic -----------------------===//
//
// A first heuristic, meant to be tuned against measurements: every rule says
// why it is there.
//
//===----------------------------------------------------------------------===//
#include "compiler/Transforms/Schedule.h"

#include <algorithm>

namespace mlir::attn {

int64_t sharedMemoryPerSM(::attn::Arch arch) {
  switch (arch) {
  case ::attn::Arch::SM90a: // H100/H200
    return 228 * 1024;
  case ::attn::Arch::SM80: // A100
    return 164 * 1024;
  case ::attn::Arch::SM89: // L40, RTX 4090
    return 100 * 1024;
  }
  return 100 * 1024;
}

::attn::DecodeSchedule chooseDecodeSchedule(const ::attn::KernelSpec &spec) {
  ::attn::DecodeSchedule schedule;
  const int headDim = spec.headDim;
  const int kvBytes = ::attn::sizeOf(spec.kvType);

  // GQA grouping: all q heads of a KV head (times the query tokens) share
  // each K/V load, so one CTA covers as many of those rows as it can. Each
  // 16-row tile keeps a 16 x headDim fp32 accumulator per warp in registers:
  // two tiles fit up to head dim 128, one beyond. More rows are covered by
  // more CTAs along grid.z.
  int rows = spec.groupSize() * spec.queryLen;
  int neededTiles = (rows + kDecodeTileRows - 1) / kDecodeTileRows;
  schedule.rowTiles = std::min(neededTiles, headDim <= 128 ? 2 : 1);

  // Four warps: enough independent load streams per CTA, few enough that
  // the end-of-chunk reduction across warps stays cheap.
  schedule.warps = 4;

  // CTAs per SM. A 16-bit cache is memory-bound: two CTAs with 3-stage
  // pipelines keep enough bytes in flight. An FP8 tile carries half the
  // bytes for the same math plus dequantization, so the loop is bound by
  // issue and latency instead: four CTAs with double buffering give the
  // schedulers more warps to interleave, which measured 3-10 points of read
  // bandwidth faster than deeper pipelines on an H200 (docs/performance.md).
  schedule.ctasPerSM = ::attn::sizeOf(spec.kvType) == 1 ? 4 : 2;

  // Pipeline depth: the most cp.async stages whose shared memory (layout in
  // templates/attn/decode_layout.h) lets ctasPerSM CTAs share an SM, less
  // the 1 KiB the driver reserves per CTA. At least 2 (double buffering is
  // what overlaps loads with math), at most 8 (more stops paying once
  // enough bytes are in flight).
  int64_t budget = sharedMemoryPerSM(spec.arch) / schedule.ctasPerSM - 1024;
  schedule.stages = 2;
  for (int stages = 8; stages > 2; --stages)
    if (::attn::decodeSmemBytes(headDim, kvBytes, schedule.rowTiles,
                                schedule.warps, stages) <= budget) {
      schedule.stages = stages;
      break;
    }

  // Split-KV: a request is split only into chunks of at least 256 tokens
  // (shorter chunks cost more in the merge than they gain), and only until
  // ctasPerSM CTAs per SM are busy.
  schedule.minChunkTokens = 256;
  return schedule;
}

} // namespace mlir::attn
