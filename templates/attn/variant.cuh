//===- variant.cuh - what a variant does to scores and softmax --*- CUDA
//-*-===//
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
#include "attn/region_ops.h"

namespace attn {

/// \brief A key's distance from its query row, key - rowPos (both counted
/// from the first key, queries aligned to the end of the keys), in float as
/// `base + offset`: the prefill kernels keep `base` per tile and row and
/// `offset` is a constant per score, so a distance costs no conversion (a
/// conversion takes a special-function slot, as exp2 does) and ALiBi's bias
/// of a tile's keys one FFMA each. Exact below 2^24.
struct KeyDistance {
  float base, offset;
  __device__ __forceinline__ float value() const { return base + offset; }
};

/// \brief Bounds of an i32 value of a mask_mod over a tile: lo <= v <= hi
/// for every (query, key) pair of the tile (the interval form the compiler
/// emits as Config::maskModMayHold). Arithmetic runs in 64 bits; a result
/// that could wrap in 32 is unbounded.
struct Range {
  int64_t lo, hi;
  static __device__ __forceinline__ Range full() {
    return {-2147483648ll, 2147483647ll};
  }
  static __device__ __forceinline__ Range fit(int64_t lo, int64_t hi) {
    return lo < -2147483648ll || hi > 2147483647ll ? full() : Range{lo, hi};
  }
};
/// Whether an i1 of a mask_mod can be false, can be true, over a tile.
struct BoolRange {
  bool canBeFalse, canBeTrue;
};
__device__ __forceinline__ Range rangeAdd(Range a, Range b) {
  return Range::fit(a.lo + b.lo, a.hi + b.hi);
}
__device__ __forceinline__ Range rangeSub(Range a, Range b) {
  return Range::fit(a.lo - b.hi, a.hi - b.lo);
}
__device__ __forceinline__ Range corners(int64_t a, int64_t b, int64_t c,
                                         int64_t d) {
  return Range::fit(min(min(a, b), min(c, d)), max(max(a, b), max(c, d)));
}
__device__ __forceinline__ Range rangeMul(Range a, Range b) {
  return corners(a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi);
}
/// Truncating division is monotone in each operand while the divisor keeps
/// its sign, so its bounds are at the corners.
__device__ __forceinline__ Range rangeDiv(Range a, Range b) {
  if (b.lo <= 0 && b.hi >= 0)
    return Range::full();
  return corners(a.lo / b.lo, a.lo / b.hi, a.hi / b.lo, a.hi / b.hi);
}
__device__ __forceinline__ int64_t floorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return q - (a % b != 0 && (a < 0) != (b < 0));
}
__device__ __forceinline__ Range rangeFloorDiv(Range a, Range b) {
  if (b.lo <= 0 && b.hi >= 0)
    return Range::full();
  return corners(floorDiv(a.lo, b.lo), floorDiv(a.lo, b.hi),
                 floorDiv(a.hi, b.lo), floorDiv(a.hi, b.hi));
}
__device__ __forceinline__ Range rangeRem(Range a, Range b) {
  if (b.lo != b.hi || b.lo == 0)
    return Range::full();
  int64_t c = b.lo < 0 ? -b.lo : b.lo;
  if (a.lo >= 0 && a.lo / c == a.hi / c)
    return {a.lo % c, a.hi % c};
  return a.lo >= 0 ? Range{0, min(c - 1, a.hi)} : Range{-(c - 1), c - 1};
}
__device__ __forceinline__ Range rangeMin(Range a, Range b) {
  return {min(a.lo, b.lo), min(a.hi, b.hi)};
}
__device__ __forceinline__ Range rangeMax(Range a, Range b) {
  return {max(a.lo, b.lo), max(a.hi, b.hi)};
}
__device__ __forceinline__ Range rangeSelect(BoolRange c, Range a, Range b) {
  if (!c.canBeFalse)
    return a;
  if (!c.canBeTrue)
    return b;
  return {min(a.lo, b.lo), max(a.hi, b.hi)};
}
__device__ __forceinline__ Range rangeOfBool(BoolRange c) {
  return {c.canBeFalse ? 0 : 1, c.canBeTrue ? 1 : 0};
}
__device__ __forceinline__ BoolRange rangeEq(Range a, Range b) {
  bool disjoint = a.hi < b.lo || b.hi < a.lo;
  bool single = a.lo == a.hi && b.lo == b.hi && a.lo == b.lo;
  return {!single, !disjoint};
}
__device__ __forceinline__ BoolRange rangeNe(Range a, Range b) {
  BoolRange eq = rangeEq(a, b);
  return {eq.canBeTrue, eq.canBeFalse};
}
__device__ __forceinline__ BoolRange rangeLt(Range a, Range b) {
  return {a.hi >= b.lo, a.lo < b.hi};
}
__device__ __forceinline__ BoolRange rangeLe(Range a, Range b) {
  return {a.hi > b.lo, a.lo <= b.hi};
}
__device__ __forceinline__ BoolRange boolAnd(BoolRange a, BoolRange b) {
  return {a.canBeFalse || b.canBeFalse, a.canBeTrue && b.canBeTrue};
}
__device__ __forceinline__ BoolRange boolOr(BoolRange a, BoolRange b) {
  return {a.canBeFalse && b.canBeFalse, a.canBeTrue || b.canBeTrue};
}
__device__ __forceinline__ BoolRange boolXor(BoolRange a, BoolRange b) {
  return {(a.canBeTrue && b.canBeTrue) || (a.canBeFalse && b.canBeFalse),
          (a.canBeTrue && b.canBeFalse) || (a.canBeFalse && b.canBeTrue)};
}
__device__ __forceinline__ BoolRange boolSelect(BoolRange c, BoolRange a,
                                                BoolRange b) {
  if (!c.canBeFalse)
    return a;
  if (!c.canBeTrue)
    return b;
  return {a.canBeFalse || b.canBeFalse, a.canBeTrue || b.canBeTrue};
}

template <class Config> struct Variant {
  /// Scores the prefill kernels keep without their last factor, which they
  /// fold into exp2's FFMA (foldedScale): plain ones (no soft-cap, ALiBi or
  /// score_mod: raw q.k, the scale folded) and soft-capped ones without
  /// ALiBi or score_mod (tanh(s / c), c log2(e) folded). Others are in log2
  /// units.
  static constexpr bool kFoldedScores = !Config::kAlibi && !Config::kScoreMod;
  static constexpr bool kPlainScores = kFoldedScores && !Config::kSoftcap;

  /// \brief The factor the prefill kernels fold into exp2's argument for
  /// score<true>'s values (1 where none is left to fold).
  template <class Params>
  __device__ static __forceinline__ float foldedScale(float qkScale,
                                                      const Params &p) {
    if constexpr (!kFoldedScores)
      return 1.f;
    else if constexpr (Config::kSoftcap)
      return p.softcap * kLog2e;
    else
      return qkScale * kLog2e;
  }

  /// What a row (one q head of one request) reads from the per-head tables,
  /// loaded once before its key loop so that no hook waits on memory (the
  /// ALiBi slope, the sink logit), and the indices the modifier regions
  /// take. Members of knobs that are off stay 0 and unread.
  struct Row {
    float slope = 0.f;
    float sink = 0.f;
    float invCap = 0.f;    ///< 1 / softcap, so that no score divides
    float slopeLog2 = 0.f; ///< ALiBi's slope * log2(e)
    int request = 0;
    int qHead = 0;
    /// The score_mod's per-head values (an ALiBi slope read from an aux
    /// table, say), computed once here rather than per score.
    typename Config::ScoreModHead scoreHead;
  };
  template <class Params>
  __device__ static __forceinline__ Row row(const Params &p, int request,
                                            int qHead) {
    Row r;
    r.request = request;
    r.qHead = qHead;
    if constexpr (Config::kScoreMod)
      r.scoreHead = Config::scoreModHead(request, qHead,
                                         qHead / Config::kGroupSize, p.aux);
    if constexpr (Config::kAlibi) {
      r.slope = p.alibiSlopes[qHead];
      r.slopeLog2 = r.slope * kLog2e;
    }
    if constexpr (Config::kSinks)
      r.sink = p.sinks[qHead];
    if constexpr (Config::kSoftcap)
      r.invCap = 1.f / p.softcap;
    return r;
  }

  /// \brief Score x = q.k of the query at position `rowPos` and key `key`
  /// (`dist` apart), scaled by `qkScale`, soft-capped and ALiBi-biased, in
  /// log2 units. With kFoldScale, kFoldedScores come back without their
  /// last factor (the caller folds foldedScale into exp2's argument).
  /// Soft-cap c tanh(s / c) takes the SFU's tanh, its argument one multiply
  /// by a per-row constant. ALiBi without score_mod works in log2 units from
  /// the start, so its bias -slope |dist| joins in one FFMA; kKeysBeforeRow
  /// (every key at or before the row: a causal tile left of the diagonal)
  /// drops the |.|, so a tile's biases are the row's part plus a constant.
  template <bool kFoldScale, bool kKeysBeforeRow = false, class Params>
  __device__ static __forceinline__ float
  score(float x, int key, int rowPos, KeyDistance dist, float qkScale,
        const Row &row, const Params &p) {
    if constexpr (kPlainScores) {
      if constexpr (kFoldScale)
        return x;
      else
        return x * (qkScale * kLog2e);
    } else if constexpr (kFoldedScores) { // soft-cap alone
      const float t = fastTanh(x * (qkScale * row.invCap));
      if constexpr (kFoldScale)
        return t;
      else
        return t * (p.softcap * kLog2e);
    } else if constexpr (!Config::kScoreMod) { // ALiBi (and soft-cap)
      float bias;
      if constexpr (kKeysBeforeRow)
        bias = fmaf(row.slopeLog2, dist.offset, row.slopeLog2 * dist.base);
      else
        bias = -row.slopeLog2 * fabsf(dist.value());
      if constexpr (Config::kSoftcap)
        return fmaf(fastTanh(x * (qkScale * row.invCap)), p.softcap * kLog2e,
                    bias);
      else
        return fmaf(x, qkScale * kLog2e, bias);
    } else if constexpr (Config::kScoreModOutOfLine) {
      return x; // modifyScores scored it
    } else {
      x = beforeScoreMod(x, dist.value(), qkScale, row, p);
      if constexpr (Config::kScoreMod)
        x = Config::scoreMod(x, row.request, rowPos, key, row.qHead,
                             row.qHead / Config::kGroupSize, p.aux,
                             row.scoreHead);
      return x * kLog2e;
    }
  }

  /// \brief With an out-of-line score_mod (Config::kScoreModOutOfLine),
  /// scores the `N` scores `scoreAt(i)` of one row (keys `keyAt(i)`) in
  /// place, as score() does the others, before the caller's score() (which
  /// then leaves them as they are) and mask: one call of the region per row
  /// and tile. Does nothing for other kernels.
  template <int N, class ScoreAt, class KeyAt, class Params>
  __device__ static __forceinline__ void
  modifyScores(ScoreAt scoreAt, KeyAt keyAt, int rowPos, float qkScale,
               const Row &row, const Params &p) {
    if constexpr (Config::kScoreModOutOfLine) {
      float x[N];
      int32_t key[N];
#pragma unroll
      for (int i = 0; i < N; ++i) {
        key[i] = keyAt(i);
        x[i] =
            beforeScoreMod(scoreAt(i), float(key[i] - rowPos), qkScale, row, p);
      }
      Config::scoreModRow(x, key, row.request, rowPos, row.qHead,
                          row.qHead / Config::kGroupSize, p.aux, row.scoreHead);
#pragma unroll
      for (int i = 0; i < N; ++i)
        scoreAt(i) = x[i] * kLog2e;
    }
  }

  /// The score a score_mod takes: x scaled, soft-capped and ALiBi-biased
  /// (`dist` = key - rowPos), in natural units.
  template <class Params>
  __device__ static __forceinline__ float
  beforeScoreMod(float x, float dist, float qkScale, const Row &row,
                 const Params &p) {
    x *= qkScale;
    if constexpr (Config::kSoftcap)
      x = p.softcap * fastTanh(x * row.invCap);
    if constexpr (Config::kAlibi) // -slope |key - row|
      x -= row.slope * fabsf(dist);
    return x;
  }

  /// \brief Whether the query at `rowPos` sees key `key` of `kvLen`: in
  /// range, not after it (causal), not left of its window, and allowed by
  /// the mask_mod.
  template <class Params>
  __device__ static __forceinline__ bool
  visible(int key, int kvLen, int rowPos, const Row &row, const Params &p) {
    bool visible = key < kvLen;
    if constexpr (Config::kCausal)
      visible = visible && key <= rowPos;
    if constexpr (Config::kSlidingWindow)
      visible = visible && key >= rowPos - p.windowLeft;
    if constexpr (Config::kMaskMod)
      visible =
          visible && Config::maskMod(row.request, rowPos, key, row.qHead,
                                     row.qHead / Config::kGroupSize, p.aux);
    return visible;
  }

  /// \brief Narrows the keys [kvBegin, kvEnd) of a CTA whose queries sit at
  /// positions [firstPos, lastPos] and read q heads [qHeadLo, qHeadHi] of
  /// `request`: whole `kTile`-key tiles at either end (tiles start at
  /// kvBegin, a multiple of kTile) that the mask_mod's interval form proves
  /// hidden are dropped, as causal and window drop theirs. Runs of hidden
  /// tiles are proven hidden whole (a run is halved until it is proven or
  /// down to one tile), so a mask that hides most of a long context costs
  /// a few dozen checks, not one per tile. Every thread of the CTA computes
  /// the same result.
  template <int kTile>
  __device__ static __forceinline__ void
  narrowKeys(int &kvBegin, int &kvEnd, int request, int firstPos, int lastPos,
             int qHeadLo, int qHeadHi) {
    if constexpr (Config::kMaskMod) {
      const Range q{firstPos, lastPos}, r{request, request};
      const Range h{qHeadLo, qHeadHi};
      const Range kvh{qHeadLo / Config::kGroupSize,
                      qHeadHi / Config::kGroupSize};
      const int base = kvBegin, end = kvEnd;
      // Whether some key of tiles [a, b) may be visible.
      auto mayHold = [&](int a, int b) {
        return Config::maskModTile(
                   r, q,
                   Range{base + a * kTile, min(base + b * kTile, end) - 1}, h,
                   kvh)
            .canBeTrue;
      };
      auto pow2Below = [](int x) { return 1 << (31 - __clz(x)); };
      const int n = ceilDiv(end - base, kTile);
      int a = 0; // tiles before a are hidden
      while (a < n) {
        int size = pow2Below(n - a);
        while (size > 1 && mayHold(a, a + size))
          size >>= 1;
        if (size == 1 && mayHold(a, a + 1))
          break;
        a += size;
      }
      int b = n; // tiles from b on are hidden
      while (b > a) {
        int size = pow2Below(b - a);
        while (size > 1 && mayHold(b - size, b))
          size >>= 1;
        if (size == 1 && mayHold(b - 1, b))
          break;
        b -= size;
      }
      kvBegin = base + a * kTile;
      kvEnd = b == a ? kvBegin : min(end, base + b * kTile);
    }
  }

  /// \brief The keys [kvBegin, kvEnd) that a CTA whose queries sit at
  /// positions [firstPos, lastPos] (q heads [qHeadLo, qHeadHi] of
  /// `request`) can see, in whole `kTile`-key tiles from kvBegin (a
  /// multiple of kTile): causal ends them after lastPos, a window starts
  /// them at the tile of firstPos - windowLeft, and a mask_mod drops the
  /// tiles it proves hidden (narrowKeys). Both prefill templates' tiles.
  template <int kTile>
  __device__ static __forceinline__ void
  visibleKeys(int &kvBegin, int &kvEnd, int request, int firstPos, int lastPos,
              int qHeadLo, int qHeadHi, int windowLeft) {
    if constexpr (Config::kCausal)
      kvEnd = max(0, min(kvEnd, lastPos + 1));
    if constexpr (Config::kSlidingWindow)
      kvBegin = max(kvBegin, max(0, firstPos - windowLeft) / kTile * kTile);
    narrowKeys<kTile>(kvBegin, kvEnd, request, firstPos, lastPos, qHeadLo,
                      qHeadHi);
  }

  /// \brief Whether the mask_mod may hide a key in [firstKey, lastKey] from
  /// a query at [firstPos, lastPos] of q head `qHead` (then the tile needs
  /// the per-element mask); false without a mask_mod.
  __device__ static __forceinline__ bool
  maskModMayHide(int request, int firstPos, int lastPos, int firstKey,
                 int lastKey, int qHead) {
    if constexpr (Config::kMaskMod)
      return Config::maskModTile(
                 Range{request, request}, Range{firstPos, lastPos},
                 Range{firstKey, lastKey}, Range{qHead, qHead},
                 Range{qHead / Config::kGroupSize, qHead / Config::kGroupSize})
          .canBeFalse;
    else
      return false;
  }

  /// \brief Completes a finished row (`row`: its q head's values): `m` is its
  /// running max (log2 units, or natural log with !kLog2Units; any value when
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
      float factor =
          l > 0.f ? (kLog2Units ? exp2f(m - mNew) : __expf(m - mNew)) : 0.f;
      l = l * factor + (kLog2Units ? exp2f(sink - mNew) : __expf(sink - mNew));
      m = mNew;
      return factor;
    } else {
      return 1.f;
    }
  }
};

/// \brief The online softmax of one query row, the one home both prefill
/// templates share: `m` the running max of the row's scores in their own
/// units (raw or folded: `scale`, Variant::foldedScale, turns them into
/// log2 units), `l` this thread's share of the running sum of weights.
struct PrefillSoftmaxRow {
  float m = negInf(), l = 0.f;

  /// Takes a tile: kCount of this thread's scores (`at(i)`, a float&) are
  /// replaced by their weights 2^(x * scale + pLog2 - base), where `tmax`
  /// is the tile's max over the row's lanes; returns the factor earlier
  /// weights (and O) take. A row that has seen no visible key keeps a
  /// finite base, so exp2 gives 0, not NaN.
  template <int kCount, class At>
  __device__ __forceinline__ float update(float tmax, float scale, float pLog2,
                                          At &&at) {
    const float mNew = fmaxf(m, tmax);
    const float base = mNew == negInf() ? 0.f : mNew * scale;
    const float corr = fastExp2(fmaf(m, scale, -base));
    m = mNew;
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < kCount; ++i) {
      float &x = at(i);
      x = fastExp2(fmaf(x, scale, pLog2 - base));
      sum += x;
    }
    l = l * corr + sum;
    return corr;
  }
};

/// \brief Prefill score of the query at position `rowPos` and key `key`
/// (`dist` apart; Variant::score with the last factor folded); with kMask,
/// -inf where Variant::visible says the key is hidden.
template <class Config, bool kMask>
__device__ __forceinline__ float
prefillScore(float x, int key, int rowPos, KeyDistance dist, int kvLen,
             float qkScale, const typename Variant<Config>::Row &row,
             const PrefillParams &p) {
  // A causal tile that needs no mask lies left of every row's diagonal.
  x = Variant<Config>::template score < true,
  Config::kCausal && !kMask > (x, key, rowPos, dist, qkScale, row, p);
  if constexpr (kMask)
    x = Variant<Config>::visible(key, kvLen, rowPos, row, p) ? x : negInf();
  return x;
}

} // namespace attn

#endif // ATTN_TEMPLATES_VARIANT_CUH
