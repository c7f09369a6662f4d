//===- Reference.h - fp64 CPU reference for attn kernels --------*- C++ -*-===//
//
// The correctness oracle of the GPU tests: attention computed in double
// precision on the CPU, straight from the definitions, with no tiling or
// online softmax, plus exact conversions of the storage formats (f16, bf16,
// FP8 e4m3/e5m2) so that tests feed the reference exactly what the GPU sees.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEST_REFERENCE_REFERENCE_H
#define ATTN_TEST_REFERENCE_REFERENCE_H

#include "spec/KernelSpec.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace attn::ref {

/// Exact value of a stored element of `type` (bits in the low bytes).
double decode(ScalarType type, uint32_t bits);
/// Round-to-nearest-even encoding of `x` in `type`; FP8 saturates to the
/// largest finite value (as the kernels' __NV_SATFINITE does).
uint32_t encode(ScalarType type, double x);
/// `x` rounded to the nearest value representable in `type`.
inline double roundTo(ScalarType type, double x) {
  return decode(type, encode(type, x));
}

/// The fp64 meaning of a score_mod region: the new score from the score
/// (after soft-cap and ALiBi) and (request, q_pos, k_pos, q_head, kv_head).
using ScoreMod = std::function<double(double score, int request, int qPos,
                                      int kPos, int qHead, int kvHead)>;
/// The meaning of a mask_mod region: whether the query sees the key.
using MaskMod =
    std::function<bool(int request, int qPos, int kPos, int qHead, int kvHead)>;

/// A paged decode problem with every value already in double precision (the
/// cache holds dequantized values: stored value times its scale).
struct DecodeProblem {
  int numQHeads = 0, numKVHeads = 0, headDim = 0;
  int pageSize = 0;
  KVLayout layout = KVLayout::NHD;
  int queryLen = 1;
  std::vector<int> seqLens;    ///< per request, new tokens included
  std::vector<int> pageTables; ///< [batch, pageTableStride]
  int pageTableStride = 0;
  int64_t pageStride = 0;   ///< elements between pages of k / v
  std::vector<double> q;    ///< [batch * queryLen, numQHeads, headDim]
  std::vector<double> k, v; ///< paged caches, dequantized
  double scale = 0;         ///< softmax scale
  bool causal = false;
  std::optional<int> windowLeft;
  std::optional<double> softcap;
  std::vector<double> alibiSlopes; ///< empty: no ALiBi
  std::vector<double> sinks;       ///< per q head; empty: no sinks
  ScoreMod scoreMod;               ///< empty: none
  MaskMod maskMod;                 ///< empty: none

  int batch() const { return int(seqLens.size()); }
};

/// Attention of `problem`: out [batch*queryLen, numQHeads, headDim] and the
/// natural-log LSE [batch*queryLen, numQHeads]. Scores are
/// s = scale * q.k, then softcap * tanh(s / softcap), then - slope *
/// |key_pos - query_pos| (ALiBi as FlashAttention defines it); query i of a
/// request sits at position seq_len - queryLen + i and sees keys <= its
/// position (causal) and >= position - windowLeft. A sink logit adds
/// e^{sink} to the softmax denominator (and nothing to the output).
void decodeReference(const DecodeProblem &problem, std::vector<double> &out,
                     std::vector<double> &lse);

/// A ragged prefill problem: request b's queries are rows cuSeqlensQ[b] ..
/// cuSeqlensQ[b+1] of q and its keys/values rows cuSeqlensKV[b] ..
/// cuSeqlensKV[b+1] of k and v (contiguous, dense, in double precision).
struct PrefillProblem {
  int numQHeads = 0, numKVHeads = 0, headDim = 0; ///< headDim: q's and k's
  int vHeadDim = 0; ///< v's and out's; 0: headDim (MLA's prefill: 128 of 192)
  std::vector<int> cuSeqlensQ;  ///< batch + 1 offsets, starting at 0
  std::vector<int> cuSeqlensKV; ///< batch + 1 offsets, starting at 0
  std::vector<double> q;        ///< [q tokens, numQHeads, headDim]
  std::vector<double> k;        ///< [kv tokens, numKVHeads, headDim]
  std::vector<double> v;        ///< [kv tokens, numKVHeads, valueDim()]
  double scale = 0;             ///< softmax scale
  bool causal = false;
  std::optional<int> windowLeft;
  std::optional<double> softcap;
  std::vector<double> alibiSlopes; ///< empty: no ALiBi
  std::vector<double> sinks;       ///< per q head; empty: no sinks
  ScoreMod scoreMod;               ///< empty: none
  MaskMod maskMod;                 ///< empty: none

  int batch() const { return int(cuSeqlensQ.size()) - 1; }
  int valueDim() const { return vHeadDim ? vHeadDim : headDim; }
};

/// Attention of `problem`: out [q tokens, numQHeads, valueDim()] and the
/// natural-log LSE [q tokens, numQHeads], with decodeReference's semantics:
/// query i of a request with qLen queries and kvLen keys sits at position
/// kvLen - qLen + i (bottom-right alignment, as FlashAttention's varlen
/// causal mask), sees keys <= its position (causal) and >= position -
/// windowLeft; s = scale * q.k, then softcap * tanh(s / softcap), then -
/// slope * |key_pos - query_pos|. A row that sees no key (causal with kvLen
/// < qLen, or an empty request) is 0 with LSE -inf.
void prefillReference(const PrefillProblem &problem, std::vector<double> &out,
                      std::vector<double> &lse);

/// An absorbed MLA decode problem in double precision: one latent row of
/// rank values and one RoPE row of ropeDim per cached token (dense tokens,
/// already resolved through the page tables: token j of request b is row
/// cacheRow[b][j]), queries q_nope [tokens, heads, rank] and q_rope
/// [tokens, heads, ropeDim] with queryLen tokens per request.
struct MlaDecodeProblem {
  int numQHeads = 0, rank = 0, ropeDim = 0, queryLen = 1;
  bool causal = false;
  double scale = 0;
  std::vector<int> seqLens;
  std::vector<std::vector<int64_t>> cacheRow; ///< [batch][seqLen]
  std::vector<double> latent;                 ///< [rows, rank]
  std::vector<double> rope;                   ///< [rows, ropeDim]
  std::vector<double> qNope, qRope;
};

/// MLA attention: score(row, j) = scale * (q_nope . latent[j] + q_rope .
/// rope[j]); out [tokens, heads, rank] = softmax-weighted sum of latent[j];
/// LSE natural log. Query token t of a request sits at position seq_len -
/// queryLen + t and, when causal, sees keys <= it.
void mlaDecodeReference(const MlaDecodeProblem &problem,
                        std::vector<double> &out, std::vector<double> &lse);

/// Offset of (page, token-in-page, head) in a paged cache.
int64_t kvOffset(KVLayout layout, int64_t page, int offset, int head,
                 int numKVHeads, int pageSize, int headDim, int64_t pageStride);

/// Relative error ||a - b|| / ||b|| over all elements (inf if a has NaN).
double relativeError(const std::vector<double> &a,
                     const std::vector<double> &b);

} // namespace attn::ref

#endif // ATTN_TEST_REFERENCE_REFERENCE_H
