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

/// The end-of-CTA merge scratch: f32 O rows plus m and l per row and warp.
constexpr int decodeMergeBytes(int headDim, int rowTiles, int warps) {
  return warps * kDecodeTileRows * rowTiles * (decodeDimPad(headDim) + 4 + 2) * 4;
}

/// Dynamic shared memory of one CTA: the Q tile, then the warps' pipelines,
/// whose space the merge scratch reuses.
constexpr int decodeSmemBytes(int headDim, int kvBytes, int rowTiles, int warps,
                              int stages) {
  int pipe = warps * stages * decodeStageBytes(headDim, kvBytes);
  int merge = decodeMergeBytes(headDim, rowTiles, warps);
  return decodeQBytes(headDim, rowTiles) + (pipe > merge ? pipe : merge);
}

} // namespace attn

#endif // ATTN_TEMPLATES_DECODE_LAYOUT_H
