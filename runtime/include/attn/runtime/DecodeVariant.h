//===- DecodeVariant.h - decode and append-KV variants for hosts -*- C++ -*-===//
//
// How a C++ host describes the attention it wants, as plain structs: the JIT
// API turns a variant into attn IR, runs the compiler pipeline on it and
// returns a cached kernel. No MLIR types.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_DECODEVARIANT_H
#define ATTN_RUNTIME_DECODEVARIANT_H

#include "codegen/KernelSpec.h"

#include <optional>

namespace attn {

/// A paged decode variant: `queryLen` new tokens per request attend to the
/// request's cached tokens (new ones included) in a paged KV cache.
struct DecodeVariant {
  ScalarType qType = ScalarType::BF16;  ///< f16 or bf16; also the output type
  ScalarType kvType = ScalarType::BF16; ///< q's type, or F8E4M3 / F8E5M2
  int numQHeads = 32;
  int numKVHeads = 8;
  int headDim = 128;
  int pageSize = 16;
  KVLayout layout = KVLayout::NHD;
  int queryLen = 1;          ///< 1, or 1 + draft tokens (speculative decoding)
  bool causal = true;        ///< causal among the query tokens
  bool crossAttention = false; ///< keys are cached encoder outputs
  std::optional<int> windowLeft; ///< sliding window: keys >= pos - windowLeft
  std::optional<float> softcap;  ///< logits soft-cap c: c * tanh(s / c)
  std::optional<float> scale;    ///< softmax scale; default 1/sqrt(headDim)
  /// ALiBi: add -slope[h] * |key_pos - query_pos| (FlashAttention's
  /// definition; docs/semantics.md).
  bool alibi = false;
  bool perHeadKVScale = false;   ///< FP8 scales per KV head, else one
  bool writeLse = false;         ///< also write log-sum-exp per row
  /// Pins the GPU schedule instead of letting attn-select-schedule choose
  /// (for tuning and benchmarks).
  std::optional<DecodeSchedule> schedule;
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

} // namespace attn

#endif // ATTN_RUNTIME_DECODEVARIANT_H
