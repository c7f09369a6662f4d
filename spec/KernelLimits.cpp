//===- KernelLimits.cpp - the rules every kernel spec obeys ---------------===//
//
// One implementation of the rules #attn.kernel_spec, the schedule attributes,
// attn-select-schedule, attn-lower-to-kernel and the AOT manifest reader
// apply. Each rule returns one sentence naming the field (as kernel_spec
// spells it), its value and the limit; the callers add where it came from.
//
//===----------------------------------------------------------------------===//
#include "spec/KernelLimits.h"
#include "templates/attn/decode_layout.h"
#include "templates/attn/params.h"
#include "templates/attn/prefill_layout.h"

#include <algorithm>
#include <fmt/format.h>
#include <string_view>

namespace attn {

int64_t maxSharedMemoryPerBlock(Arch arch) {
  switch (arch) {
  case Arch::SM90a:
    return kSm90SmemPerBlock; // templates/attn/prefill_layout.h sizes by it
  case Arch::SM80:
    return 163 * 1024;
  case Arch::SM89:
    return 99 * 1024;
  }
  return 99 * 1024;
}

namespace {

/// "" when `value` is in [lo, hi], else the range rule.
std::string checkRange(const char *field, int value, int lo, int hi,
                       const char *why) {
  if (value >= lo && value <= hi)
    return "";
  return fmt::format("{} must be from {} to {}, got {} ({})", field, lo, hi,
                     value, why);
}

/// The first non-empty problem.
template <class... Problems> std::string firstOf(Problems &&...problems) {
  std::string result;
  ((result.empty() ? (void)(result = std::forward<Problems>(problems))
                   : (void)0),
   ...);
  return result;
}

std::string checkSharedMemory(const char *what, int64_t bytes, Arch arch) {
  if (bytes <= maxSharedMemoryPerBlock(arch))
    return "";
  return fmt::format("{} needs {} bytes of shared memory per CTA; {} allows {}",
                     what, bytes, toString(arch),
                     maxSharedMemoryPerBlock(arch));
}

/// What a decode schedule needs of its variant and arch.
std::string checkDecodeFit(const KernelSpec &spec) {
  const DecodeSchedule &s = spec.schedule;
  const int dimPad = decodeDimPad(spec.headDim);
  if (s.rowTiles * dimPad / 2 > kMaxDecodeAccumulators)
    return fmt::format(
        "decode_schedule row_tiles = {} at head_dim {} needs {} fp32 "
        "accumulator registers per thread; at most {} (row_tiles <= {})",
        s.rowTiles, spec.headDim, s.rowTiles * dimPad / 2,
        kMaxDecodeAccumulators, 2 * kMaxDecodeAccumulators / dimPad);
  std::string what = fmt::format(
      "decode_schedule (warps = {}, stages = {}, row_tiles = {}) at head_dim "
      "{} with a {}-byte cache",
      s.warps, s.stages, s.rowTiles, spec.headDim, sizeOf(spec.kvType));
  return checkSharedMemory(what.c_str(),
                           decodeSmemBytes(spec.headDim, sizeOf(spec.kvType),
                                           s.rowTiles, s.warps, s.stages,
                                           spec.groupSize() * spec.queryLen),
                           spec.arch);
}

/// "head_dim 128", or with MLA's wider q/k "head_dim 128 + rope_dim 64".
std::string headDims(const KernelSpec &spec) {
  return spec.ropeDim ? fmt::format("head_dim {} + rope_dim {}", spec.headDim,
                                    spec.ropeDim)
                      : fmt::format("head_dim {}", spec.headDim);
}

/// What the sm_90a wgmma template needs of its variant (templates/attn/
/// prefill_sm90.cuh): k/v in TMA boxes of 64 dims, contiguous 16-bit rows
/// or pages of a multiple of 8 tokens of q's type or FP8; registers per
/// consumer (setmaxnreg).
std::string checkWgmmaFit(const KernelSpec &spec) {
  const PrefillSchedule &s = spec.prefillSchedule;
  if (spec.arch != Arch::SM90a)
    return fmt::format(
        "prefill_schedule mma = wgmma needs arch sm_90a, got \"{}\"",
        toString(spec.arch));
  if (spec.kind == KernelKind::PagedPrefill &&
      ((spec.kvType != spec.qType && !spec.isFP8KV()) ||
       spec.pageSize % 8 != 0))
    return fmt::format("prefill_schedule mma = wgmma reads a paged cache of "
                       "q's type or FP8 with pages of a multiple of 8 tokens, "
                       "got kv_type {} and page_size {}",
                       toString(spec.kvType), spec.pageSize);
  if (spec.headDim != 64 && spec.headDim != 128 && spec.headDim != 256)
    return fmt::format(
        "prefill_schedule mma = wgmma needs head_dim 64, 128 or 256, got {}",
        spec.headDim);
  // Q and K tiles come in 64-dim TMA boxes.
  if ((spec.headDim + spec.ropeDim) % 64 != 0)
    return fmt::format("prefill_schedule mma = wgmma needs q/k head dims "
                       "(head_dim + rope_dim) that are a multiple of 64, got "
                       "{}",
                       spec.headDim + spec.ropeDim);
  // FP8 compute reads Q and K rows of 128-byte swizzle blocks.
  if (spec.fp8Compute && spec.headDim == 64)
    return "fp8_compute needs head_dim 128 or 256, got 64";
  // At head dim 256 the O accumulator takes 128 of a consumer's 240
  // registers: S of a 128-key tile no longer fits beside it.
  if (spec.headDim == 256 && s.blockN != 64)
    return fmt::format("prefill_schedule mma = wgmma needs block_n 64 at "
                       "head_dim 256, got {}",
                       s.blockN);
  // Three consumers get 160 registers each: room for head dim 64's O
  // accumulator and S tile only.
  if (s.warps == 16 && spec.headDim != 64)
    return fmt::format("prefill_schedule mma = wgmma with warps = 16 needs "
                       "head_dim 64, got {}",
                       spec.headDim);
  std::string what = fmt::format(
      "prefill_schedule (mma = wgmma, block_m = {}, block_n = {}, stages = "
      "{}) at {}",
      s.blockM, s.blockN, s.stages, headDims(spec));
  return checkSharedMemory(
      what.c_str(),
      prefillSm90SmemBytes(spec.headDim, sizeOf(spec.kvType),
                           spec.fp8Compute ? 1 : 2, s.blockM, s.blockN,
                           s.stages, spec.ropeDim),
      spec.arch);
}

/// What an mma.sync prefill schedule needs of its variant and arch
/// (templates/attn/prefill.cuh).
std::string checkSyncPrefillFit(const KernelSpec &spec) {
  const PrefillSchedule &s = spec.prefillSchedule;
  const int mTiles = s.blockM / (16 * s.warps);
  const int accumulators =
      mTiles * (prefillDimPad(spec.headDim) + s.blockN) / 2;
  if (accumulators > kMaxPrefillAccumulators)
    return fmt::format(
        "prefill_schedule (block_m = {}, warps = {}, block_n = {}) at "
        "head_dim {} needs {} fp32 accumulator registers per thread; at most "
        "{}",
        s.blockM, s.warps, s.blockN, spec.headDim, accumulators,
        kMaxPrefillAccumulators);
  std::string what = fmt::format(
      "prefill_schedule (block_m = {}, block_n = {}, stages = {}) at {} with "
      "a {}-byte cache",
      s.blockM, s.blockN, s.stages, headDims(spec), sizeOf(spec.kvType));
  return checkSharedMemory(what.c_str(),
                           prefillSmemBytes(spec.headDim + spec.ropeDim,
                                            sizeOf(spec.kvType), s.blockM,
                                            s.blockN, s.stages),
                           spec.arch);
}

} // namespace

/// What packing a KV head's q heads into one tile needs (templates/attn/
/// prefill.cuh, prefill_sm90.cuh): a tile that holds a whole group (wgmma:
/// each consumer's 64 rows whole groups, which one TMA box loads), and no
/// per-head value that would differ between a tile's rows.
std::string checkPackGqa(const KernelSpec &spec) {
  const PrefillSchedule &s = spec.prefillSchedule;
  if (!s.packGqa)
    return "";
  if (s.mma == PrefillMma::Wgmma && 64 % spec.groupSize() != 0)
    return fmt::format("prefill_schedule pack_gqa with mma = wgmma needs "
                       "q heads per KV head ({}) that divide 64",
                       spec.groupSize());
  if (s.blockM < spec.groupSize())
    return fmt::format("prefill_schedule pack_gqa needs block_m ({}) of at "
                       "least the q heads per KV head ({})",
                       s.blockM, spec.groupSize());
  // Every knob with a per-head table, and the regions (which take the q
  // head), reads values per row the template hoists per CTA; the wgmma
  // template reads an e4m3 q's scales per row.
  auto readPerRow = [&](std::string_view operand) {
    return s.mma == PrefillMma::Wgmma && operand == "q_scale";
  };
  std::string perHead = spec.hasModifiers() ? "modifier regions" : "";
#define ATTN_HEAD_TABLE(flag, pointer, operand, accessor)                      \
  if (spec.flag && !readPerRow(operand))                                       \
    perHead = operand;
#include "templates/attn/variant_knobs.h"
  if (!perHead.empty())
    return "prefill_schedule pack_gqa needs a variant without per-head "
           "values; this one has " +
           perHead;
  return "";
}

std::string checkDecodeSchedule(const DecodeSchedule &s) {
  return firstOf(
      checkRange("decode_schedule warps", s.warps, 1, kMaxWarps,
                 "a CTA has at most 1024 threads"),
      checkRange("decode_schedule stages", s.stages, kMinSyncStages, kMaxStages,
                 "the cp.async ring"),
      checkRange("decode_schedule row_tiles", s.rowTiles, 1, kMaxRowTiles,
                 "fp32 accumulators in registers"),
      checkRange("decode_schedule min_chunk_tokens", s.minChunkTokens, 1,
                 kMaxMinChunkTokens, "tokens"),
      checkRange("decode_schedule ctas_per_sm", s.ctasPerSM, 1, kMaxCtasPerSM,
                 "resident CTAs per SM"),
      checkRange("decode_schedule ctas_per_sm", s.ctasPerSM, 1,
                 kMaxThreadsPerSM / (32 * std::clamp(s.warps, 1, kMaxWarps)),
                 "CTAs of `warps` warps an SM runs at once: 2048 threads"));
}

std::string checkPrefillSchedule(const PrefillSchedule &s) {
  if (std::string problem =
          checkRange("prefill_schedule warps", s.warps, 1, kMaxWarps,
                     "a CTA has at most 1024 threads");
      !problem.empty())
    return problem;
  if (std::string problem = checkRange(
          "prefill_schedule persistent_max_q_len", s.persistentMaxQLen, 0,
          kMaxMinChunkTokens, "query tokens per request");
      !problem.empty())
    return problem;
  if (s.mma == PrefillMma::Wgmma) {
    // Warpgroup 0 loads (TMA), each further one owns 64 query rows. The
    // template moves registers to the consumers (setmaxnreg): 240 each for
    // one or two, 160 each for three (head dim 64 only: checkKernelSpec).
    if (s.warps != 8 && s.warps != 12 && s.warps != 16)
      return fmt::format(
          "prefill_schedule with mma = wgmma needs warps = 8, 12 or 16 (a "
          "producer warpgroup and 1 to 3 consumer warpgroups), got {}",
          s.warps);
    if (s.blockM != 16 * (s.warps - 4))
      return fmt::format("prefill_schedule with mma = wgmma needs block_m = "
                         "16 * (warps - 4) = {} (64 rows per consumer "
                         "warpgroup), got {}",
                         16 * (s.warps - 4), s.blockM);
    // The wgmma N of S = Q K^T.
    if (s.blockN != 64 && s.blockN != 128)
      return fmt::format(
          "prefill_schedule with mma = wgmma needs block_n 64 or 128, got {}",
          s.blockN);
    // The producer and consumers hand stages over by mbarrier: one is a
    // valid, if serial, ring.
    return checkRange("prefill_schedule stages", s.stages, 1, kMaxStages,
                      "K/V tiles in flight");
  }
  if (s.blockM != 16 * s.warps && s.blockM != 32 * s.warps)
    return fmt::format("prefill_schedule block_m must be 16 * warps = {} or "
                       "32 * warps = {} (each warp owns 16 or 32 query rows), "
                       "got {}",
                       16 * s.warps, 32 * s.warps, s.blockM);
  // P * V consumes keys 16 at a time (the k-extent of one MMA).
  if (s.blockN < 16 || s.blockN > kMaxPrefillBlockN || s.blockN % 16 != 0)
    return fmt::format("prefill_schedule block_n must be a multiple of 16 "
                       "from 16 to {}, got {}",
                       kMaxPrefillBlockN, s.blockN);
  return checkRange("prefill_schedule stages", s.stages, kMinSyncStages,
                    kMaxStages, "the cp.async ring");
}

namespace {
/// The modifier fields: only on attention kernels, bounded in size, and aux
/// tables only with a region to read them.
std::string checkModifiers(const KernelSpec &spec) {
  if (!spec.hasModifiers())
    return spec.aux.empty() && spec.maskModTiles.empty()
               ? ""
               : "aux and mask_mod_tiles need a score_mod or mask_mod";
  if (spec.kind == KernelKind::AppendKV)
    return "of an append_kv kernel has no score_mod or mask_mod";
  for (auto [name, text] : {std::pair{"score_mod", &spec.scoreMod},
                            {"mask_mod", &spec.maskMod},
                            {"mask_mod_tiles", &spec.maskModTiles},
                            {"aux", &spec.aux}})
    if (text->size() > kMaxModifierBytes)
      return fmt::format("{} is {} bytes; at most {}", name, text->size(),
                         kMaxModifierBytes);
  if (spec.numAuxTables() > kMaxAuxTables)
    return fmt::format("aux has {} tables; at most {}", spec.numAuxTables(),
                       kMaxAuxTables);
  return "";
}
} // namespace

namespace {
/// merge_states reads and writes rows of one dtype: only q_type, the heads
/// and head_dim choose its kernel; every other field has its default.
std::string checkMergeStates(const KernelSpec &spec) {
  if (spec.qType != ScalarType::F16 && spec.qType != ScalarType::BF16 &&
      spec.qType != ScalarType::F32)
    return fmt::format("q_type of a merge_states kernel must be f16, bf16 or "
                       "f32, got {}",
                       toString(spec.qType));
  if (spec.numQHeads < 1 || spec.numQHeads > kMaxHeads)
    return fmt::format("num_q_heads must be from 1 to {}, got {}", kMaxHeads,
                       spec.numQHeads);
  if (!isSupportedHeadDim(spec.headDim))
    return fmt::format("head_dim {} is not supported; expected a multiple of "
                       "{} from {} to {}",
                       spec.headDim, kHeadDimMultiple, kMinHeadDim,
                       kMaxHeadDim);
  KernelSpec canonical;
  canonical.kind = spec.kind;
  canonical.arch = spec.arch;
  canonical.qType = canonical.kvType = spec.qType;
  canonical.numQHeads = canonical.numKVHeads = spec.numQHeads;
  canonical.headDim = spec.headDim;
  canonical.pageSize = 0;
  if (spec != canonical)
    return "of a merge_states kernel has only q_type, num_q_heads and "
           "head_dim: kv_type == q_type, num_kv_heads == num_q_heads, "
           "page_size 0, and every other field its default";
  return "";
}
} // namespace

namespace {
/// MLA decode: one latent KV head of head_dim (a multiple of 64 up to 512)
/// plus rope_dim (0, 64 or 128), 16-bit or e4m3 cache rows
/// of one token each (NHD), causal only across several query tokens, and
/// the four-warp schedule of templates/attn/mla_decode.cuh.
std::string checkMlaDecode(const KernelSpec &spec) {
  if (spec.qType != ScalarType::F16 && spec.qType != ScalarType::BF16)
    return fmt::format("q_type must be f16 or bf16, got {}",
                       toString(spec.qType));
  if (spec.kvType != spec.qType && spec.kvType != ScalarType::F8E4M3)
    return fmt::format("kv_type of an mla_decode kernel must be q_type ({}) "
                       "or e4m3, got {}",
                       toString(spec.qType), toString(spec.kvType));
  if (spec.numKVHeads != 1)
    return fmt::format("num_kv_heads of an mla_decode kernel must be 1 (one "
                       "latent head), got {}",
                       spec.numKVHeads);
  if (spec.numQHeads < 1 || spec.numQHeads > kMaxGroupSize)
    return fmt::format("num_q_heads must be from 1 to {}, got {}",
                       kMaxGroupSize, spec.numQHeads);
  if (spec.headDim < 64 || spec.headDim > 512 || spec.headDim % 64)
    return fmt::format("head_dim (kv_lora_rank) of an mla_decode kernel must "
                       "be a multiple of 64 from 64 to 512, got {}",
                       spec.headDim);
  if (spec.ropeDim != 0 && spec.ropeDim != 64 && spec.ropeDim != 128)
    return fmt::format("rope_dim of an mla_decode kernel must be 0, 64 or "
                       "128, got {}",
                       spec.ropeDim);
  if (!isSupportedPageSize(spec.pageSize))
    return fmt::format("page_size {} is not supported; expected {} to {}",
                       spec.pageSize, kMinPageSize, kMaxPageSize);
  if (spec.layout != KVLayout::NHD)
    return "layout of an mla_decode kernel must be nhd (a cache row per "
           "token)";
  if (spec.queryLen < 1 || spec.queryLen > kMaxDecodeQueryLen)
    return fmt::format("query_len must be from 1 to {}, got {}",
                       kMaxDecodeQueryLen, spec.queryLen);
  if (spec.causal && spec.queryLen == 1)
    return "causal needs query_len > 1 (one query sees every cached key "
           "anyway)";
  std::string other;
  auto taken = [](std::string_view flag) {
    return flag == "causal" || flag == "write_lse" || flag == "batch_invariant";
  };
#define ATTN_FLAG(member, name, ...)                                           \
  if (spec.member && !taken(name))                                             \
    other += other.empty() ? name : std::string(", ") + name;
#include "templates/attn/variant_knobs.h"
  if (!other.empty() || spec.hasModifiers() || !spec.aux.empty())
    return "an mla_decode kernel takes only the causal, write_lse and "
           "batch_invariant flags" +
           (other.empty() ? std::string() : " (got " + other + ")");
  const DecodeSchedule &s = spec.schedule;
  if (s.warps != kMlaWarps || s.rowTiles != 1)
    return fmt::format("decode_schedule of an mla_decode kernel has warps = "
                       "{} and row_tiles = 1, got warps = {}, row_tiles = {}",
                       kMlaWarps, s.warps, s.rowTiles);
  if (std::string problem = checkDecodeSchedule(s); !problem.empty())
    return problem;
  std::string what = fmt::format(
      "mla_decode (stages = {}) at head_dim {} + rope_dim {} with a {}-byte "
      "cache",
      s.stages, spec.headDim, spec.ropeDim, sizeOf(spec.kvType));
  return checkSharedMemory(what.c_str(),
                           mlaDecodeSmemBytes(spec.headDim, spec.ropeDim,
                                              sizeOf(spec.kvType), s.stages),
                           spec.arch);
}
} // namespace

std::string checkKernelSpec(const KernelSpec &spec) {
  const bool decode = spec.kind == KernelKind::Decode;
  const bool raggedPrefill = spec.kind == KernelKind::Prefill;
  const bool pagedPrefill = spec.kind == KernelKind::PagedPrefill;
  const bool prefill = raggedPrefill || pagedPrefill;
  // The cache ops take everything at run time: only the arch matters.
  if (spec.isCacheOp())
    return "";
  if (spec.kind == KernelKind::MergeStates)
    return checkMergeStates(spec);
  if (spec.kind == KernelKind::MlaDecode)
    return checkMlaDecode(spec);
  if (spec.ropeDim != 0 && !raggedPrefill)
    return fmt::format("rope_dim is for mla_decode and prefill kernels; a {} "
                       "kernel has none, got {}",
                       toString(spec.kind), spec.ropeDim);
  // Ragged prefill in MLA's form: q/k of head_dim + rope_dim, v of head_dim,
  // 16-bit.
  if (spec.ropeDim != 0 &&
      (spec.ropeDim < 0 || !isSupportedHeadDim(spec.headDim + spec.ropeDim) ||
       spec.ropeDim % kHeadDimMultiple != 0 || spec.isFP8KV()))
    return fmt::format("rope_dim {} of a prefill kernel needs q/k head dims "
                       "(head_dim + rope_dim = {}) that are a multiple of {} "
                       "up to {}, and 16-bit k/v (got kv_type {})",
                       spec.ropeDim, spec.headDim + spec.ropeDim,
                       kHeadDimMultiple, kMaxHeadDim, toString(spec.kvType));
  if (spec.qType != ScalarType::F16 && spec.qType != ScalarType::BF16)
    return fmt::format("q_type must be f16 or bf16, got {}",
                       toString(spec.qType));
  if (spec.kvType != spec.qType && !spec.isFP8KV())
    return fmt::format(
        "kv_type must be q_type ({}) or FP8 (e4m3, e5m2), got {}",
        toString(spec.qType), toString(spec.kvType));
  if (spec.numKVHeads < 1 || spec.numQHeads < 1 || spec.numQHeads > kMaxHeads ||
      spec.numQHeads % spec.numKVHeads != 0 ||
      spec.numQHeads / spec.numKVHeads > kMaxGroupSize)
    return fmt::format("num_q_heads ({}) must be a multiple of num_kv_heads "
                       "({}) by at most {}, with 1 to {} heads",
                       spec.numQHeads, spec.numKVHeads, kMaxGroupSize,
                       kMaxHeads);
  if (!isSupportedHeadDim(spec.headDim))
    return fmt::format("head_dim {} is not supported; expected a multiple of "
                       "{} from {} to {}",
                       spec.headDim, kHeadDimMultiple, kMinHeadDim,
                       kMaxHeadDim);
  // Ragged prefill reads contiguous k/v (of q's type or FP8) and takes its
  // query rows from cu_seqlens: the other cache and decode fields have one
  // value, so equal prefill kernels are one spec.
  if (raggedPrefill && (spec.pageSize != 0 || spec.layout != KVLayout::NHD ||
                        spec.queryLen != 1))
    return "of a prefill kernel reads no KV cache: it has layout = nhd and "
           "no page_size or query_len";
  // A paged prefill reads the cache like decode, but its query rows come
  // from cu_seqlens like ragged prefill: no query_len.
  if (pagedPrefill && spec.queryLen != 1)
    return "of a paged_prefill kernel takes its query rows from cu_seqlens: "
           "it has no query_len";
  if (!raggedPrefill && !isSupportedPageSize(spec.pageSize))
    return fmt::format("page_size {} is not supported; expected {} to {}",
                       spec.pageSize, kMinPageSize, kMaxPageSize);
  if (spec.queryLen < 1 || spec.queryLen > kMaxDecodeQueryLen)
    return fmt::format("query_len must be from 1 to {}, got {}",
                       kMaxDecodeQueryLen, spec.queryLen);
  // A single decode query is the last key, so its kernels carry no causal
  // flag; a window then needs none either. Prefill queries are many.
  if (spec.slidingWindow && !spec.causal && (prefill || spec.queryLen > 1))
    return "sliding_window needs causal";
  if (spec.causal && decode && spec.queryLen == 1)
    return "causal needs query_len > 1 (one query sees every cached key "
           "anyway)";
  if (spec.perHeadKVScale && !spec.isFP8KV())
    return "per_head_kv_scale needs an FP8 kv_type";
  if (spec.fp8Compute && (!prefill || !spec.isFP8KV()))
    return "fp8_compute needs a prefill over FP8 k/v (e4m3, e5m2)";
  if (spec.fp8Query && !spec.fp8Compute)
    return "an e4m3 q (fp8_query, q_scale) needs fp8_compute";
  if (std::string problem = checkModifiers(spec); !problem.empty())
    return problem;
  if (spec.kind == KernelKind::AppendKV) {
    // Writing the cache knows only the cache's knob (per_head_kv_scale).
    std::string attentionFlags;
#define ATTN_FLAG(member, name, ...)                                           \
  if (spec.member && std::string_view(name) != "per_head_kv_scale")            \
    attentionFlags += attentionFlags.empty() ? name : std::string(", ") + name;
#include "templates/attn/variant_knobs.h"
    if (spec.numQHeads != spec.numKVHeads || spec.queryLen != 1 ||
        !attentionFlags.empty())
      return "of an append_kv kernel has num_q_heads == num_kv_heads, no "
             "query_len and no attention flags" +
             (attentionFlags.empty() ? std::string()
                                     : " (got " + attentionFlags + ")");
  }
  if (decode) {
    if (std::string problem = checkDecodeSchedule(spec.schedule);
        !problem.empty())
      return problem;
    return checkDecodeFit(spec);
  }
  if (prefill) {
    if (std::string problem = checkPrefillSchedule(spec.prefillSchedule);
        !problem.empty())
      return problem;
    if (std::string problem = checkPackGqa(spec); !problem.empty())
      return problem;
    if (spec.fp8Compute && spec.prefillSchedule.mma != PrefillMma::Wgmma)
      return fmt::format("fp8_compute needs the FP8 tensor cores of the "
                         "wgmma schedule (arch sm_90a, head_dim 128 or 256, "
                         "pages of a multiple of 8 tokens), got arch {}, "
                         "head_dim {}, page_size {}",
                         toString(spec.arch), spec.headDim, spec.pageSize);
    return spec.prefillSchedule.mma == PrefillMma::Wgmma
               ? checkWgmmaFit(spec)
               : checkSyncPrefillFit(spec);
  }
  return "";
}

} // namespace attn
