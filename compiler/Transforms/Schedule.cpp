//===- Schedule.cpp - the schedule heuristics -----------------------------===//
//
// A first heuristic, meant to be tuned against measurements: every rule says
// why it is there.
//
//===----------------------------------------------------------------------===//
#include "compiler/Transforms/Schedule.h"
#include "spec/KernelLimits.h"
#include "templates/attn/decode_layout.h"
#include "templates/attn/prefill_layout.h"

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

  // Eight warps with double-buffered rings. Measured on an H200
  // (docs/perf-log/history.md), every pinned alternative was slower or equal:
  // 4 warps x 2-4 stages at 2-4 CTAs per SM, 8 warps x 3 stages. Per-warp
  // latency, not bytes in flight, bounds the loop, so more warps per chunk
  // beat deeper rings, most of all for small batches. Where 8 warps do not
  // fit a CTA's shared memory (head dim 256 in 16-bit, smaller SMs), the
  // most of 4, 2 or 1 that does (sm_89's 99 KiB holds two at head dim 192).
  const int64_t smemPerCta = ::attn::maxSharedMemoryPerBlock(spec.arch);
  schedule.stages = 2;
  schedule.warps = 8;
  while (schedule.warps > 1 &&
         ::attn::decodeSmemBytes(headDim, kvBytes, schedule.rowTiles,
                                 schedule.warps, 2, rows) > smemPerCta)
    schedule.warps /= 2;
  // How many such CTAs share an SM by shared memory, 1 KiB of each reserved
  // by the system (the runtime measures the real occupancy; this records
  // the intent in the IR).
  int64_t smemCtas =
      (sharedMemoryPerSM(spec.arch) - 1024) /
      (::attn::decodeSmemBytes(headDim, kvBytes, schedule.rowTiles,
                               schedule.warps, 2, rows) +
       1024);
  // And by registers: the entry's __launch_bounds__ asks for ctasPerSM CTAs
  // (codegen/EmitCuda.cpp), which caps a thread at 64K / (ctasPerSM x
  // threads). With O accumulators of up to 64 registers (row tiles x head
  // dim / 2: one row tile at head dim 128, two at 64) the loop fits 128; left
  // unbounded it took 126-140, and above 128 two 8-warp CTAs no longer share an
  // SM (FP8 caches with pages under 16 tokens lost 3-5 points of read bandwidth
  // to that on an H200). Larger accumulators, and score_mod / mask_mod regions
  // (code of any size), keep one CTA's worth of registers.
  int64_t registerCtas =
      schedule.rowTiles * headDim <= 128 && !spec.hasModifiers()
          ? 65536 / (schedule.warps * 32 * 128)
          : 1;
  schedule.ctasPerSM = int(std::clamp<int64_t>(std::min(smemCtas, registerCtas),
                                               1, ::attn::kMaxCtasPerSM));

  // Split-KV: a request is split only into chunks of at least 256 tokens
  // (shorter chunks cost more in the merge than they gain); the planner
  // picks the chunk from the batch (runtime/kernels/DecodePlan.cpp).
  schedule.minChunkTokens = 256;
  return schedule;
}

/// True where the sm_90a wgmma template (templates/attn/prefill_sm90.cuh)
/// runs the variant: prefill of 16-bit q at head dim 64, 128 or 256 (TMA
/// boxes of 64 dims), ragged (k/v of q's type or FP8), or paged over a cache of
/// q's type or FP8 (widened to f16 in shared memory) whose pages are a multiple
/// of 16 tokens (at most 8 TMA boxes per 128-key tile; smaller pages keep the
/// mma.sync template, which gathers rows with cp.async). Every mask and
/// score modifier is supported, but a region too costly to inline there
/// (KernelSpec::costlyRegions: NVRTC takes a minute over some inlined, and
/// wgmma's pipeline serializes across an out-of-line call, ptxas C7514)
/// makes the prefill take mma.sync; FP8 compute has no mma.sync template
/// and keeps wgmma (slower to compile). MLA's form (q/k of head_dim +
/// rope_dim, v of head_dim) takes it where q/k come in whole 64-dim boxes.
static bool wgmmaPrefillApplies(const ::attn::KernelSpec &spec) {
  // FP8 compute has no mma.sync template: pages of 8 take wgmma too.
  const bool paged = spec.kind == ::attn::KernelKind::PagedPrefill &&
                     (spec.kvType == spec.qType || spec.isFP8KV()) &&
                     spec.pageSize % (spec.fp8Compute ? 8 : 16) == 0;
  return spec.arch == ::attn::Arch::SM90a &&
         (spec.kind == ::attn::KernelKind::Prefill || paged) &&
         (!spec.costlyRegions() || spec.fp8Compute) &&
         (spec.headDim == 64 || spec.headDim == 128 || spec.headDim == 256) &&
         (spec.headDim + spec.ropeDim) % 64 == 0 &&
         ::attn::prefillSm90SmemBytes(
             spec.headDim, 2, 2, 128, spec.headDim == 256 ? 64 : 128, 2,
             spec.ropeDim) <= ::attn::kSm90SmemPerBlock;
}

void chooseSchedule(::attn::KernelSpec &spec) {
  if (spec.isPrefill())
    spec.prefillSchedule = choosePrefillSchedule(spec);
  else if (spec.kind == ::attn::KernelKind::MlaDecode)
    spec.schedule = chooseMlaDecodeSchedule(spec);
  else
    spec.schedule = chooseDecodeSchedule(spec);
}

::attn::DecodeSchedule chooseMlaDecodeSchedule(const ::attn::KernelSpec &) {
  // Four warps over 16 rows (templates/attn/mla_decode.cuh) and a ring of
  // two 32-key tiles: two such CTAs share an SM (93 KiB each at 512 + 64
  // in bf16), which hides more latency than one CTA with a deeper ring
  // (H200, bf16, 16 heads: 35-66% of the read roof against 30-44% with
  // three or four stages; docs/perf-log/history.md, "MLA decode").
  ::attn::DecodeSchedule schedule;
  schedule.warps = ::attn::kMlaWarps;
  schedule.rowTiles = 1;
  schedule.stages = 2;
  schedule.ctasPerSM = 2;
  schedule.minChunkTokens = 256;
  return schedule;
}

::attn::PrefillSchedule choosePrefillSchedule(const ::attn::KernelSpec &spec) {
  ::attn::PrefillSchedule schedule;
  if (wgmmaPrefillApplies(spec)) {
    // FlashAttention-3's shape: a producer warpgroup and two consumer
    // warpgroups of 64 rows (block_m 128), 128-key tiles in two stages:
    // 160 KiB of shared memory at head dim 128, one CTA per SM. On an H200
    // 1.3-1.9x the mma.sync schedule at head dims 64 and 128, causal and
    // not (docs/perf-log/history.md, "Hopper prefill").
    schedule.mma = ::attn::PrefillMma::Wgmma;
    schedule.warps = 12;
    schedule.blockM = 128;
    schedule.blockN = 128;
    schedule.stages = 2;
    // Head dim 256: O takes 128 of a consumer's 240 registers, so 64-key
    // tiles (S 32 registers); 192 KiB of shared memory. On an H200
    // 0.97-1.08x cuDNN at seq >= 4k, 2.1-2.8x mma.sync
    // (docs/perf-log/history.md, "Head dim 256 on the wgmma path").
    if (spec.headDim == 256)
      schedule.blockN = 64;
    // Head dim 64 without a causal mask: three consumer warpgroups (192
    // rows, 160 registers each) keep more wgmma in flight per SM; on an
    // H200 +6-9% at seq >= 4k, the same at 16 x 1k. Causal keeps two: 192-row
    // tiles lost 10% on 16 x 1k prompts (docs/perf-log/history.md, "Three
    // consumer warpgroups at head dim 64"). FP8 caches keep two: beside
    // the producer's wideners three consumers would spill.
    if (spec.headDim == 64 && !spec.causal && !spec.isFP8KV()) {
      schedule.warps = 16;
      schedule.blockM = 192;
    }
    // One or two KV heads (a tensor-parallel shard: 8/1, 4/1, 16/2): the q
    // heads of a KV head share the tile where the variant allows
    // (checkPackGqa), so each K/V tile is read once per group rather than
    // once per q head; on an H200 chunks over long caches at 8/1 ran
    // 1.1-1.8x faster so (docs/perf-log/history.md, "Tensor-parallel chunked
    // prefill"). At 32/8 it measured -7..+6% on prompts: not packed, except
    // in batch-invariant mode, where this kernel also runs the decodes (one
    // row per request), which unpacked read each K/V tile once per q head.
    if (spec.groupSize() > 1 && (spec.numKVHeads <= 2 || spec.batchInvariant)) {
      ::attn::KernelSpec packed = spec;
      packed.prefillSchedule = schedule;
      packed.prefillSchedule.packGqa = true;
      schedule.packGqa = ::attn::checkPackGqa(packed).empty();
    }
    return schedule;
  }
  // Four warps, each with two 16-row MMA tiles up to head dim 128: every K/V
  // fragment read from shared memory then feeds two MMAs, which measured
  // 10-30% faster on an H200 than one tile per warp (docs/perf-log/history.md).
  // Above 128 the two 16 x headDim fp32 accumulators no longer fit the
  // registers, and on sm_89 the 128-row Q tile does not fit next to the
  // K/V ring at head dim 128: one tile per warp there.
  schedule.warps = 4;
  // Keys per K/V tile: 64 while the accumulators leave registers for the
  // score tile (head dim <= 128), 32 above.
  const int qkDim = spec.headDim + spec.ropeDim;
  schedule.blockN = qkDim <= 128 ? 64 : 32;
  // Double buffering: the next K/V tile loads while the current one is used;
  // prefill is compute bound, and a third stage measured slower.
  schedule.stages = 2;
  // Shared memory of a CTA: the Q tile, the K/V ring and, for FP8 caches
  // (paged prefill), the widened K/V tiles (templates/attn/prefill_layout.h).
  const int kvBytes = ::attn::sizeOf(spec.kvType);
  schedule.blockM = 32 * schedule.warps;
  if (qkDim > 128 ||
      ::attn::prefillSmemBytes(qkDim, kvBytes, schedule.blockM, schedule.blockN,
                               schedule.stages) >
          ::attn::maxSharedMemoryPerBlock(spec.arch))
    schedule.blockM = 16 * schedule.warps;
  // Grouped heads: a tile takes the q heads of one KV head together where
  // the variant allows (checkPackGqa), as FlashInfer's prefill does. Rows
  // of short queries (a cascade's shared level, chunked decode-like steps)
  // then fill the tile and each K/V tile, widened once for FP8 caches,
  // serves the whole group; long prompts do the same work either way.
  if (spec.groupSize() > 1) {
    ::attn::KernelSpec packed = spec;
    packed.prefillSchedule = schedule;
    packed.prefillSchedule.packGqa = true;
    schedule.packGqa = ::attn::checkPackGqa(packed).empty();
  }
  return schedule;
}

// The smallest schedule above (block_m 64, block_n 32 past head dim 128,
// two stages) fits the smallest SM (sm_89: 99 KiB per CTA) at the largest
// head dim, for 16-bit and FP8 caches alike: no head dim needs a smaller one.
static_assert(::attn::prefillSmemBytes(int(::attn::kMaxHeadDim), 2, 64, 32,
                                       2) <= 99 * 1024);
static_assert(::attn::prefillSmemBytes(int(::attn::kMaxHeadDim), 1, 64, 32,
                                       2) <= 99 * 1024);

} // namespace mlir::attn
