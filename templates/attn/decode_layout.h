//===- decode_layout.h - decode kernel shared-memory layout -----*- C++ -*-===//
//
// The one home of the decode kernel's tile and shared-memory sizes, as
// constexpr functions that NVRTC (the template's DecodeTraits) and the host
// compiler (attn-select-schedule sizing pipelines) both use.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEMPLATES_DECODE_LAYOUT_H
#define ATTN_TEMPLATES_DECODE_LAYOUT_H

namespace attn {

/// Query rows per MMA row tile and KV tokens per pipeline tile.
constexpr int kDecodeTileRows = 16;
constexpr int kDecodeTileTokens = 16;

/// Head dims are processed in groups of 32 (see decode.cuh).
constexpr int decodeDimPad(int headDim) { return (headDim + 31) / 32 * 32; }

/// Bytes of one token of K or V in shared memory: padded by 16 bytes so the
/// fragment reads of consecutive tokens fall in different banks.
constexpr int decodeRowStride(int headDim, int kvBytes) {
  return decodeDimPad(headDim) * kvBytes + 16;
}

/// One pipeline stage of one warp: 16 tokens of K and of V.
constexpr int decodeStageBytes(int headDim, int kvBytes) {
  return 2 * kDecodeTileTokens * decodeRowStride(headDim, kvBytes);
}

/// The Q tile: 16 * rowTiles rows of 16-bit q, stored in MMA fragment
/// order (each lane's A fragments of one dim group are 32 contiguous bytes).
constexpr int decodeQBytes(int headDim, int rowTiles) {
  return kDecodeTileRows * rowTiles * decodeDimPad(headDim) * 2;
}

/// The first key any query of a decode request of `seqLen` cached tokens
/// (its `queryLen` new ones last) can see under a window of `windowLeft`,
/// rounded down to a 16-token tile: where the planner's split starts
/// (runtime/kernels/DecodePlan.cpp) and where a kernel that narrows a
/// split request's keys again takes it from (decode.cuh).
constexpr int decodeFirstKey(int seqLen, int queryLen, int windowLeft) {
  const int first = seqLen - queryLen - windowLeft;
  return (first < 0 ? 0 : first) / kDecodeTileTokens * kDecodeTileTokens;
}

/// Lanes that hold one K/V row of the CUDA-core path, 16 bytes each.
constexpr int decodeSimtLanes(int headDim, int kvBytes) {
  return headDim * kvBytes / 16;
}

/// The most query rows (q heads of a KV head times query tokens) the
/// CUDA-core path takes. Each K/V byte loaded serves every row, but each row
/// costs its own dot products, reductions and softmax; past two rows the
/// tensor-core tile is faster (H100, bf16 16 x 4k: 32/16 heads 96.6% of
/// the read roof against 93.3%, 32/8 87.2% against 91.2%, 32/4 53% against
/// 81%; docs/perf-log/history.md, "Several rows on CUDA cores").
/// FP8 caches, which widen every byte, keep it to one row.
constexpr int decodeSimtMaxRows(int kvBytes) { return kvBytes == 1 ? 1 : 2; }

/// Whether a CTA of `rows` query rows runs the CUDA-core path (decode.cuh,
/// simtLoop): at most decodeSimtMaxRows rows, whose K/V rows split into
/// 16-byte pieces over a power of two of lanes up to a warp. A 16-row MMA
/// tile would waste most of its rows and hold a 16 x head dim accumulator
/// per warp.
constexpr bool decodeSimt(int rows, int headDim, int kvBytes) {
  return rows <= decodeSimtMaxRows(kvBytes) && headDim * kvBytes % 16 == 0 &&
         decodeSimtLanes(headDim, kvBytes) <= 32 &&
         32 % decodeSimtLanes(headDim, kvBytes) == 0;
}

/// The end-of-CTA merge scratch: f32 O rows plus m and l per row, for
/// `rowsPerWarp` rows of each warp (all of the CTA's rows on the CUDA-core
/// path).
constexpr int decodeMergeBytes(int headDim, int rowsPerWarp, int warps) {
  return warps * rowsPerWarp * (decodeDimPad(headDim) + 4 + 2) * 4;
}

/// Dynamic shared memory of one CTA of `rows` query rows: the Q tile, then
/// the warps' pipelines, whose space the merge scratch reuses; the
/// CUDA-core path keeps q and K/V in registers and needs only the scratch.
constexpr int decodeSmemBytes(int headDim, int kvBytes, int rowTiles, int warps,
                              int stages, int rows) {
  if (decodeSimt(rows, headDim, kvBytes))
    return decodeMergeBytes(headDim, rows, warps);
  int pipe = warps * stages * decodeStageBytes(headDim, kvBytes);
  int merge = decodeMergeBytes(headDim, kDecodeTileRows * rowTiles, warps);
  return decodeQBytes(headDim, rowTiles) + (pipe > merge ? pipe : merge);
}

/// MLA decode (mla_decode.cuh): 16 query rows, keys in tiles of 32 whole
/// cache rows (latent + RoPE) through a ring of `stages`.
constexpr int kMlaTileRows = 16;
constexpr int kMlaTileKeys = 32;
constexpr int kMlaWarps = 4;

/// The first region of an MLA decode CTA's shared memory: the 16-bit Q
/// tile until its fragments are in registers, then the warps' f32 partial
/// scores and three f32 per row.
constexpr int mlaDecodeQBytes(int headDim, int ropeDim) {
  const int q = kMlaTileRows * (headDim + ropeDim) * 2;
  const int scores =
      kMlaWarps * kMlaTileRows * kMlaTileKeys * 4 + 3 * kMlaTileRows * 4;
  return q > scores ? q : scores;
}

/// Shared memory of an MLA decode CTA: that region, the ring of tiles as
/// stored, an FP8 cache's widened 16-bit tile and the 16-bit
/// probabilities.
constexpr int mlaDecodeSmemBytes(int headDim, int ropeDim, int kvBytes,
                                 int stages) {
  const int dims = headDim + ropeDim;
  return mlaDecodeQBytes(headDim, ropeDim) +
         stages * kMlaTileKeys * dims * kvBytes +
         (kvBytes == 1 ? kMlaTileKeys * dims * 2 : 0) +
         kMlaTileRows * kMlaTileKeys * 2;
}

} // namespace attn

#endif // ATTN_TEMPLATES_DECODE_LAYOUT_H
