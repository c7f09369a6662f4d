//===- Variant.h - attention variants for hosts -----------------*- C++ -*-===//
//
// How a C++ host describes the kernels it wants, as plain structs: the JIT
// API turns a variant into attn IR, runs the compiler pipeline on it and
// returns a cached kernel; attn-aot configs and AOT libraries name them by
// their keys (VariantKey.h). No MLIR types.
//
// What decode and prefill variants share is AttentionKnobs, whose per-head
// tables come from templates/attn/variant_knobs.h: forEachKnob is the one
// list the keys, the mixed-batch pairing and attn-aot's reader walk.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_VARIANT_H
#define ATTN_RUNTIME_VARIANT_H

#include "spec/KernelSpec.h"

#include <optional>
#include <string>
#include <string_view>

namespace attn {

/// The knobs of an attention variant beyond its shapes and cache.
struct AttentionKnobs {
  /// Decoder self attention, bidirectional encoder self attention, or cross
  /// attention over cached encoder outputs.
  AttentionKind kind = AttentionKind::Decoder;
  /// Causal: query i of a request with q_len queries and kv_len keys sees
  /// keys <= i + kv_len - q_len (aligned to the end of the keys).
  bool causal = true;
  /// Sliding window: keys >= that diagonal position - windowLeft
  /// (FlashAttention's window_left; docs/semantics.md).
  std::optional<int> windowLeft;
  std::optional<float> softcap; ///< logits soft-cap c: c * tanh(s / c)
  std::optional<float> scale;   ///< softmax scale; default 1/sqrt(headDim)
  /// Per-query-head f32 tables the kernel reads (templates/attn/
  /// variant_knobs.h): `alibi` adds -slope[h] * |key_pos - query_pos|;
  /// `fp8Query` (with PrefillVariant::fp8Compute) takes q in e4m3 with its
  /// q_scale per head, qType then being the output's.
#define ATTN_HEAD_TABLE(flag, ...) bool flag = false;
#include "templates/attn/variant_knobs.h"
  bool writeLse = false; ///< also write log-sum-exp per row (natural log)
  /// A request's output and LSE do not depend on the rest of its batch
  /// (docs/semantics.md, "Batch invariance").
  bool batchInvariant = false;
  /// Programmable modifiers (docs/semantics.md): the IR text of a score_mod
  /// or mask_mod region, `{ ^bb0(%score: f32, %request: i32, ...): ...
  /// attn.yield %s : f32 }`; empty for none. Region arguments after the
  /// positions are aux tables, whose data each launch passes (`aux`).
  std::string scoreMod;
  std::string maskMod;
};

/// A flag's one name outside C++ (templates/attn/variant_knobs.h) from its
/// C++ member's: knobName("fp8Query") is "fp8_query".
constexpr std::string_view knobName(std::string_view member) {
#define ATTN_FLAG(member_, name, ...)                                          \
  if (member == #member_)                                                      \
    return name;
#include "templates/attn/variant_knobs.h"
  return member;
}

/// Calls f(name, knob...) for every knob of one or more AttentionKnobs.
template <class F, class... K> void forEachKnob(F &&f, K &...k) {
  f("kind", k.kind...);
  f("causal", k.causal...);
  f("window_left", k.windowLeft...);
  f("softcap", k.softcap...);
  f("scale", k.scale...);
#define ATTN_HEAD_TABLE(flag, ...) f(knobName(#flag).data(), k.flag...);
#include "templates/attn/variant_knobs.h"
  f("write_lse", k.writeLse...);
  f("batch_invariant", k.batchInvariant...);
  f("score_mod", k.scoreMod...);
  f("mask_mod", k.maskMod...);
}

/// A paged decode variant: `queryLen` new tokens per request attend to the
/// request's cached tokens (new ones included) in a paged KV cache.
struct DecodeVariant : AttentionKnobs {
  ScalarType qType = ScalarType::BF16;  ///< f16 or bf16; also the output type
  ScalarType kvType = ScalarType::BF16; ///< q's type, or F8E4M3 / F8E5M2
  int numQHeads = 32;
  int numKVHeads = 8;
  int headDim = 128;
  int pageSize = 16;
  KVLayout layout = KVLayout::NHD;
  int queryLen = 1; ///< 1, or 1 + draft tokens (speculative decoding)
  bool perHeadKVScale = false; ///< FP8 scales per KV head, else one
  /// Pins the GPU schedule instead of letting attn-select-schedule choose
  /// (for tuning and benchmarks).
  std::optional<DecodeSchedule> schedule;
};

/// The paged cache a paged prefill reads (see attn.paged_prefill).
struct PagedKVFormat {
  ScalarType kvType = ScalarType::BF16; ///< q's type, or F8E4M3 / F8E5M2
  int pageSize = 16;
  KVLayout layout = KVLayout::NHD;
  bool perHeadKVScale = false; ///< FP8 scales per KV head, else one
};

/// Ragged k and v stored in FP8, with their dequantization scales (stored
/// value = x / scale), as attn.prefill's kv_scales.
struct FP8RowsFormat {
  ScalarType kvType = ScalarType::F8E4M3; ///< F8E4M3 or F8E5M2
  bool perHeadKVScale = false;            ///< scales per KV head, else one
};

/// Prefill. Ragged: request b's query rows cu_seqlens_q[b] .. [b+1] attend
/// to its key/value rows cu_seqlens_kv[b] .. [b+1] of contiguous q/k/v.
/// Paged (`paged` set; chunked prefill, prefix caching): the request's new
/// rows are already appended to the cache and attend to all seq_lens[b]
/// cached tokens, prefix and new, through its page-table row.
struct PrefillVariant : AttentionKnobs {
  ScalarType qType =
      ScalarType::BF16; ///< f16 or bf16: q, out (and ragged k, v)
  int numQHeads = 32;
  int numKVHeads = 8;
  int headDim = 128; ///< of v and out (and of q, k without ropeDim)
  /// MLA's prefill (DeepSeek: 128 + 64 = 192 for q/k, 128 for v): q and k
  /// have headDim + ropeDim dims. Ragged 16-bit k/v only; the default
  /// scale is 1/sqrt(headDim + ropeDim).
  int ropeDim = 0;
  /// Pins the GPU schedule instead of letting the compiler choose.
  std::optional<PrefillSchedule> schedule;
  /// Keys and values come from this paged cache instead of k / v tensors.
  std::optional<PagedKVFormat> paged;
  /// Ragged k / v in FP8 instead of qType (not with `paged`: a cache's
  /// format holds its own type).
  std::optional<FP8RowsFormat> fp8KV;
  /// FP8 compute over an FP8 `paged` cache or `fp8KV` rows (sm_90a, head
  /// dim 128 or 256):
  /// Q K^T and P V as FP8 tensor-core MMAs, q quantized per row by the
  /// kernel (docs/semantics.md, "FP8 compute"); else the MMAs run in 16
  /// bits.
  bool fp8Compute = false;
};

/// Reshape-and-cache: write new K/V rows into their cache slots.
struct AppendKVVariant {
  ScalarType inType = ScalarType::BF16; ///< f16 or bf16 rows
  ScalarType kvType = ScalarType::BF16; ///< inType, or F8E4M3 / F8E5M2
  int numKVHeads = 8;
  int headDim = 128;
  int pageSize = 16;
  KVLayout layout = KVLayout::NHD;
  bool perHeadKVScale = false;
};

/// merge_states: partial attention states over disjoint keys combined by
/// their LSEs (the number of states is a launch value).
struct MergeStatesVariant {
  ScalarType dtype = ScalarType::F32; ///< of the outputs: f16, bf16 or f32
  int numHeads = 32;
  int headDim = 128;
};

/// Absorbed MLA decode (attn.mla_decode): every query head attends to one
/// latent cache row per token (kvLoraRank values, also the values) and its
/// RoPE key (ropeDim, 0 for NoPE MLA); the output has kvLoraRank dims per
/// head.
struct MlaDecodeVariant {
  ScalarType qType = ScalarType::BF16;  ///< f16 or bf16; also the output's
  ScalarType kvType = ScalarType::BF16; ///< qType, or F8E4M3 (kv_scale)
  int numQHeads = 16;
  int kvLoraRank = 512;
  int ropeDim = 64;
  int pageSize = 64;
  /// Query tokens per request: 1, or more with multi-token prediction
  /// (causal among themselves when `causal`).
  int queryLen = 1;
  bool causal = false;
  std::optional<float> scale; ///< default 1/sqrt(kvLoraRank + ropeDim)
  bool writeLse = false;
  /// A request's output and LSE do not depend on the rest of its batch
  /// (docs/semantics.md, "Batch invariance").
  bool batchInvariant = false;
  /// Pins the GPU schedule instead of letting the compiler choose.
  std::optional<DecodeSchedule> schedule;
};

} // namespace attn

#endif // ATTN_RUNTIME_VARIANT_H
