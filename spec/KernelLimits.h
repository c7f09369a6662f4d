//===- KernelLimits.h - what attn kernels can run --------------*- C++ -*-===//
//
// The single home of the variant limits that the kernel templates honour. The
// dialect verifiers, the schedule passes, the runtime's argument and manifest
// checks and the docs all read these, so a rule changes in one place. Plain
// C++, no MLIR or CUDA dependency.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_SPEC_KERNELLIMITS_H
#define ATTN_SPEC_KERNELLIMITS_H

#include "spec/KernelSpec.h"

#include <cstdint>
#include <string>

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
/// Head dims a paged cache may hold: also MLA's latent rows (kv_lora_rank
/// 512), which only attn.mla_decode reads.
constexpr int64_t kMaxCacheHeadDim = 512;
constexpr bool isSupportedCacheHeadDim(int64_t headDim) {
  return headDim >= kMinHeadDim && headDim <= kMaxCacheHeadDim &&
         headDim % kHeadDimMultiple == 0;
}

/// Tokens per KV-cache page (vLLM's page size).
constexpr int64_t kMinPageSize = 1;
constexpr int64_t kMaxPageSize = 256;
constexpr bool isSupportedPageSize(int64_t pageSize) {
  return pageSize >= kMinPageSize && pageSize <= kMaxPageSize;
}

/// Bytes of a modifier's CUDA source (KernelSpec::scoreMod, maskMod, aux):
/// far above any real region, far below what would slow a compile to a hang.
constexpr size_t kMaxModifierBytes = 64 * 1024;

/// Query tokens per request in one decode step (1, or 1 + draft tokens for
/// speculative decoding). The decode kernel keeps them all in one tile.
constexpr int64_t kMaxDecodeQueryLen = 16;

/// Query heads that share one KV head (GQA group size); MQA with 128 query
/// heads is the largest ratio in use.
constexpr int64_t kMaxGroupSize = 128;

/// Heads of one q, k, v or cache tensor. Models use at most 128; the bound
/// keeps every head count (and heads x head_dim) a small int.
constexpr int64_t kMaxHeads = 1024;

/// Dynamic shared memory one CTA may opt in to on each target: 227 KiB on
/// sm_90a (H100, H200), 163 KiB on sm_80 (A100), 99 KiB on sm_89 (L40,
/// RTX 4090).
int64_t maxSharedMemoryPerBlock(Arch arch);

/// Schedule fields, bounded so every size computed from them stays in range
/// whoever wrote them (the schedule passes, a person, a manifest).
/// A CTA has at most 1024 threads.
constexpr int kMaxWarps = 32;
/// The mma.sync templates wait for stages - 2 cp.async groups, so rings have
/// at least two stages; more than 16 tiles in flight never paid.
constexpr int kMinSyncStages = 2;
constexpr int kMaxStages = 16;
/// Decode rows per CTA: row_tiles 16-row tiles whose fp32 accumulators take
/// row_tiles * head_dim / 2 registers per thread; at most 128 of the 255.
constexpr int kMaxDecodeAccumulators = 128;
constexpr int kMaxRowTiles = 2 * kMaxDecodeAccumulators / int(kMinHeadDim);
/// Decode split-KV chunk floor, in tokens, and the planner's CTAs per SM
/// (no SM holds more than 32 CTAs, nor more than 2048 threads: the decode
/// entry's __launch_bounds__ asks for ctas_per_sm CTAs of its warps).
constexpr int kMaxMinChunkTokens = 1 << 24;
constexpr int kMaxCtasPerSM = 32;
constexpr int kMaxThreadsPerSM = 2048;
/// mma.sync prefill: keys per tile, and the fp32 O and S accumulators of a
/// warp's 16 or 32 rows, rows / 16 * (head_dim + block_n) / 2 registers per
/// thread, at most 192 of the 255 (the rest hold fragments and addresses).
constexpr int kMaxPrefillBlockN = 256;
constexpr int kMaxPrefillAccumulators = 192;

/// The context-free rules of a decode schedule, as #attn.decode_schedule
/// checks them: "" when they hold, else one sentence naming the field, its
/// value and the limit.
std::string checkDecodeSchedule(const DecodeSchedule &schedule);
/// The same for a prefill schedule (#attn.prefill_schedule).
std::string checkPrefillSchedule(const PrefillSchedule &schedule);
/// What spec.prefillSchedule.packGqa needs of the spec ("" when it is off
/// or fits).
std::string checkPackGqa(const KernelSpec &spec);

/// Everything that keeps `spec` from being a kernel its template compiles
/// and its arch runs: the variant fields, the schedule of its kind (above),
/// and what the schedule needs of the variant and the arch (registers,
/// shared memory per CTA, the wgmma template's shapes). "" when the spec is
/// fine, else one sentence naming the field as #attn.kernel_spec and AOT
/// manifests spell it, its value and the limit.
std::string checkKernelSpec(const KernelSpec &spec);

} // namespace attn

#endif // ATTN_SPEC_KERNELLIMITS_H
