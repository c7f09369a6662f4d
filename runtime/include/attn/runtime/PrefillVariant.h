//===- PrefillVariant.h - prefill variants for hosts ------------*- C++ -*-===//
//
// How a C++ host describes a ragged prefill, as a plain struct (the JIT API
// turns it into attn IR and a cached kernel). No MLIR types.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_PREFILLVARIANT_H
#define ATTN_RUNTIME_PREFILLVARIANT_H

#include "codegen/KernelSpec.h"

#include <optional>

namespace attn {

/// The paged cache a paged prefill reads (see attn.paged_prefill).
struct PagedKVFormat {
  ScalarType kvType = ScalarType::BF16; ///< q's type, or F8E4M3 / F8E5M2
  int pageSize = 16;
  KVLayout layout = KVLayout::NHD;
  bool perHeadKVScale = false; ///< FP8 scales per KV head, else one
};

/// Prefill. Ragged: request b's query rows cu_seqlens_q[b] .. [b+1] attend
/// to its key/value rows cu_seqlens_kv[b] .. [b+1] of contiguous q/k/v.
/// Paged (`paged` set; chunked prefill, prefix caching): the request's new
/// rows are already appended to the cache and attend to all seq_lens[b]
/// cached tokens, prefix and new, through its block-table row.
struct PrefillVariant {
  ScalarType qType = ScalarType::BF16; ///< f16 or bf16: q, out (and ragged k, v)
  int numQHeads = 32;
  int numKVHeads = 8;
  int headDim = 128;
  /// Causal: query i of a request with q_len queries and kv_len keys sees
  /// keys <= i + kv_len - q_len (aligned to the end of the keys).
  bool causal = true;
  bool crossAttention = false; ///< keys are encoder outputs (not causal)
  bool encoder = false;        ///< bidirectional self attention (not causal)
  std::optional<int> windowLeft; ///< keys >= query position - windowLeft
  std::optional<float> softcap;  ///< logits soft-cap c: c * tanh(s / c)
  std::optional<float> scale;    ///< softmax scale; default 1/sqrt(headDim)
  /// ALiBi: add -slope[h] * |key_pos - query_pos| (FlashAttention's
  /// definition; docs/semantics.md).
  bool alibi = false;
  bool writeLse = false;         ///< also write log-sum-exp per row
  /// Pins the GPU schedule instead of letting the compiler choose.
  std::optional<PrefillSchedule> schedule;
  /// Keys and values come from this paged cache instead of k / v tensors.
  std::optional<PagedKVFormat> paged;
};

} // namespace attn

#endif // ATTN_RUNTIME_PREFILLVARIANT_H
