//===- variant.cuh - what a variant does to scores and softmax --*- CUDA -*-===//
//
// The one device home of the variant knobs (attn/variant_knobs.h): how a
// score is transformed (scale, soft-cap, ALiBi), which keys a query sees
// (causal, sliding window), and how a finished row's softmax state is
// completed. Decode, the mma.sync prefill and the sm_90a wgmma prefill all
// call these hooks; a knob that changes scores, masks or the softmax changes
// this file and no template. Every feature whose Config flag is false
// compiles to nothing.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEMPLATES_VARIANT_CUH
#define ATTN_TEMPLATES_VARIANT_CUH

#include "attn/common.cuh"

namespace attn {

/// \brief ALiBi bias of key `key` seen from the query at position `rowPos`
/// (both counted from the first key, queries aligned to the end of the
/// keys): -slope * |key - rowPos|, FlashAttention's definition. Causal
/// attention sees only keys <= rowPos, where it is slope * (key - rowPos);
/// bidirectional and cross attention penalize later keys alike.
__device__ __forceinline__ float alibiBias(float slope, int key, int rowPos) {
  return -slope * float(abs(key - rowPos));
}

/// \brief Element (i0, i1, i2) of an aux table (attn.aux_load in a
/// score_mod or mask_mod); indices past the table's rank are 0. A read
/// outside the table's dimensions returns 0 and touches no memory.
template <class T>
__device__ __forceinline__ T auxLoad(const AuxTable &table, int32_t i0,
                                     int32_t i1 = 0, int32_t i2 = 0) {
  if (uint32_t(i0) >= uint32_t(table.dims[0]) ||
      uint32_t(i1) >= uint32_t(table.dims[1]) ||
      uint32_t(i2) >= uint32_t(table.dims[2]))
    return T(0);
  int64_t at = (int64_t(i0) * table.dims[1] + i1) * table.dims[2] + i2;
  return static_cast<const T *>(table.data)[at];
}

template <class Config> struct Variant {
  /// Plain scores (no soft-cap, ALiBi or score_mod) may keep the raw q.k
  /// scale, which the prefill kernels fold into exp2's argument; modified
  /// scores are always in log2 units.
  static constexpr bool kPlainScores =
      !Config::kSoftcap && !Config::kAlibi && !Config::kScoreMod;
  /// A mask_mod may hide any key: every tile is masked.
  static constexpr bool kMaskEveryTile = Config::kMaskMod;

  /// What a row (one q head of one request) reads from the per-head tables,
  /// loaded once before its key loop so that no hook waits on memory (the
  /// ALiBi slope, the sink logit), and the indices the modifier regions
  /// take. Members of knobs that are off stay 0 and unread.
  struct Row {
    float slope = 0.f;
    float sink = 0.f;
    int request = 0;
    int qHead = 0;
  };
  template <class Params>
  __device__ static __forceinline__ Row row(const Params &p, int request,
                                            int qHead) {
    Row r;
    r.request = request;
    r.qHead = qHead;
    if constexpr (Config::kAlibi)
      r.slope = p.alibiSlopes[qHead];
    if constexpr (Config::kSinks)
      r.sink = p.sinks[qHead];
    return r;
  }

  /// \brief Score x = q.k of the query at position `rowPos` and key `key`,
  /// scaled by `qkScale`, soft-capped and ALiBi-biased, in log2 units. With
  /// kFoldScale, plain scores come back raw (the caller folds the scale
  /// into exp2's argument).
  template <bool kFoldScale, class Params>
  __device__ static __forceinline__ float score(float x, int key, int rowPos,
                                                float qkScale, const Row &row,
                                                const Params &p) {
    if constexpr (kPlainScores) {
      if constexpr (kFoldScale)
        return x;
      else
        return x * (qkScale * kLog2e);
    } else {
      x *= qkScale;
      if constexpr (Config::kSoftcap)
        x = p.softcap * tanhf(x / p.softcap);
      if constexpr (Config::kAlibi)
        x += alibiBias(row.slope, key, rowPos);
      if constexpr (Config::kScoreMod)
        x = Config::scoreMod(x, row.request, rowPos, key, row.qHead,
                             row.qHead / Config::kGroupSize, p.aux);
      return x * kLog2e;
    }
  }

  /// \brief Whether the query at `rowPos` sees key `key` of `kvLen`: in
  /// range, not after it (causal), not left of its window, and allowed by
  /// the mask_mod.
  template <class Params>
  __device__ static __forceinline__ bool visible(int key, int kvLen, int rowPos,
                                                 const Row &row,
                                                 const Params &p) {
    bool visible = key < kvLen;
    if constexpr (Config::kCausal)
      visible = visible && key <= rowPos;
    if constexpr (Config::kSlidingWindow)
      visible = visible && key >= rowPos - p.windowLeft;
    if constexpr (Config::kMaskMod)
      visible = visible && Config::maskMod(row.request, rowPos, key, row.qHead,
                                           row.qHead / Config::kGroupSize,
                                           p.aux);
    return visible;
  }

  /// \brief Completes a finished row (`row`: its q head's values): `m` is its running
  /// max (log2 units, or natural log with !kLog2Units; any value when
  /// l == 0) and `l` the sum of exp(score - m) over its visible keys.
  /// Returns the factor the row's unnormalized output takes; m and l become
  /// the row's final state (out = acc * factor / l, LSE from m + log l).
  /// A sink (natural-log logit s of the q head) adds exp(s) to the
  /// denominator, once per row, and nothing to the numerator.
  template <bool kLog2Units>
  __device__ static __forceinline__ float finishRow(const Row &row, float &m,
                                                    float &l) {
    if constexpr (Config::kSinks) {
      float sink = kLog2Units ? row.sink * kLog2e : row.sink;
      // A row with no visible key has only the sink: output 0.
      float mNew = l > 0.f ? fmaxf(m, sink) : sink;
      float factor = l > 0.f ? (kLog2Units ? exp2f(m - mNew) : __expf(m - mNew))
                             : 0.f;
      l = l * factor + (kLog2Units ? exp2f(sink - mNew) : __expf(sink - mNew));
      m = mNew;
      return factor;
    } else {
      return 1.f;
    }
  }
};

/// \brief Prefill score of the query at position `rowPos` and key `key`
/// (Variant::score with the scale folded for plain scores); with kMask,
/// -inf where Variant::visible says the key is hidden.
template <class Config, bool kMask>
__device__ __forceinline__ float
prefillScore(float x, int key, int rowPos, int kvLen, float qkScale,
             const typename Variant<Config>::Row &row, const PrefillParams &p) {
  x = Variant<Config>::template score<true>(x, key, rowPos, qkScale, row, p);
  if constexpr (kMask)
    x = Variant<Config>::visible(key, kvLen, rowPos, row, p) ? x : negInf();
  return x;
}

} // namespace attn

#endif // ATTN_TEMPLATES_VARIANT_CUH
