//===- Schedule.cpp - the decode schedule heuristic -----------------------===//
//
// A first heuristic, meant to be tuned against measurements: every rule says
// why it is there.
//
//===----------------------------------------------------------------------===//
#include "compiler/Transforms/Schedule.h"

#include <algorithm>

namespace mlir::attn {

int64_t decodeSharedMemoryBudget(::attn::Arch arch) {
  // Half of an SM's shared memory, since two CTAs share an SM (ctasPerSM),
  // less the 1 KiB the driver reserves per CTA and some headroom.
  switch (arch) {
  case ::attn::Arch::SM90a: // H100/H200: 228 KiB per SM
    return 110 * 1024;
  case ::attn::Arch::SM80: // A100: 164 KiB per SM
    return 80 * 1024;
  case ::attn::Arch::SM89: // L40, RTX 4090: 100 KiB per SM
    return 48 * 1024;
  }
  return 48 * 1024;
}

::attn::DecodeSchedule chooseDecodeSchedule(const ::attn::KernelSpec &spec) {
  ::attn::DecodeSchedule schedule;
  const int64_t headDim = spec.headDim;

  // GQA grouping: all q heads of a KV head (times the query tokens) share
  // each K/V load, so one CTA covers as many of those rows as it can. Each
  // 16-row tile keeps a 16 x headDim fp32 accumulator per warp in registers:
  // two tiles fit up to head dim 128, one beyond. More rows are covered by
  // more CTAs along grid.z.
  int64_t rows = int64_t(spec.groupSize()) * spec.queryLen;
  int64_t neededTiles = (rows + kDecodeTileRows - 1) / kDecodeTileRows;
  schedule.rowTiles = int(std::min<int64_t>(neededTiles, headDim <= 128 ? 2 : 1));

  // Four warps: enough independent load streams per CTA to cover memory
  // latency with two CTAs per SM, few enough that the end-of-chunk reduction
  // across warps stays cheap.
  schedule.warps = 4;

  // Pipeline depth: as many cp.async stages as the shared-memory budget
  // holds after the Q tile. A stage is 16 tokens of K and of V per warp.
  // At least 2 (double buffering is what overlaps loads with math; for head
  // dim >= 128 on sm_89 that exceeds the budget and costs the second CTA per
  // SM), at most 8 (deeper queues stop paying off once enough bytes are in
  // flight per SM).
  int64_t stageBytes = int64_t(kDecodeStageTokens) * headDim *
                       ::attn::sizeOf(spec.kvType) * 2;
  int64_t qBytes = int64_t(kDecodeTileRows) * schedule.rowTiles * headDim *
                   ::attn::sizeOf(spec.qType);
  int64_t budget = decodeSharedMemoryBudget(spec.arch) - qBytes;
  int64_t stages = std::max<int64_t>(budget, 0) / (schedule.warps * stageBytes);
  schedule.stages = int(std::clamp<int64_t>(stages, 2, 8));

  // Split-KV: a request is split only into chunks of at least 256 tokens
  // (shorter chunks cost more in the merge than they gain), and only until
  // two CTAs per SM are busy, which is what the occupancy above assumes.
  schedule.minChunkTokens = 256;
  schedule.ctasPerSM = 2;
  return schedule;
}

} // namespace mlir::attn
