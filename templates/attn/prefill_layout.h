//===- prefill_layout.h - prefill kernel shared-memory layout ---*- C++ -*-===//
//
// The one home of the prefill kernel's shared-memory sizes, as constexpr
// functions that NVRTC (the template's PrefillTraits) and the host compiler
// (attn-select-schedule) both use.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEMPLATES_PREFILL_LAYOUT_H
#define ATTN_TEMPLATES_PREFILL_LAYOUT_H

namespace attn {

/// The head dim padded to the 32-wide MMA steps (zeros past the real dims).
constexpr int prefillDimPad(int headDim) { return (headDim + 31) / 32 * 32; }

/// Bytes of one 16-bit row of Q, K or V as the MMAs read it: padded by 16
/// bytes so the 8 rows of every ldmatrix fall in different banks.
constexpr int prefillRowStride(int headDim) {
  return prefillDimPad(headDim) * 2 + 16;
}

/// Bytes of one cached row in the K/V ring: 16-bit rows are read in place;
/// FP8 rows land raw and are widened into a 16-bit tile before the MMAs.
constexpr int prefillRingRowBytes(int headDim, int kvBytes) {
  return kvBytes == 2 ? prefillRowStride(headDim)
                      : prefillDimPad(headDim) * kvBytes;
}

/// Dynamic shared memory of one CTA: the Q tile, the K/V ring of `stages`
/// tiles of blockN keys, and for FP8 caches one widened K and V tile. Every
/// row is sized for q and k (headDim is theirs: with a ropeDim, v's rows
/// use only their first dims).
constexpr int prefillSmemBytes(int headDim, int kvBytes, int blockM, int blockN,
                               int stages) {
  int widened = kvBytes == 2 ? 0 : 2 * blockN * prefillRowStride(headDim);
  return blockM * prefillRowStride(headDim) +
         stages * 2 * blockN * prefillRingRowBytes(headDim, kvBytes) + widened;
}

/// sm_90a's dynamic shared memory per CTA (227 KiB).
constexpr int kSm90SmemPerBlock = 227 * 1024;

/// Bytes of an sm_90a prefill CTA before its FP8 raw ring: 1 KiB of slack
/// to align the tiles to the 128-byte swizzle's 1024-byte period, the
/// 16-bit Q tile, `stages` K and V tiles of the MMAs' type (`mmaBytes`: 2,
/// or 1 for FP8 compute), and 4 * stages + 2 mbarriers (full and empty per
/// K and V stage, full and empty for Q). Q and K rows have headDim +
/// ropeDim dims, V rows headDim.
constexpr int prefillSm90BaseBytes(int headDim, int mmaBytes, int blockM,
                                   int blockN, int stages, int ropeDim = 0) {
  return 1024 + blockM * (headDim + ropeDim) * 2 +
         stages * blockN * (2 * headDim + ropeDim) * mmaBytes +
         (4 * stages + 2) * 8;
}

/// Bytes of an FP8 raw ring of `raw` stages (templates/attn/prefill_sm90.cuh):
/// per stage two slots of a raw K or V tile with two mbarriers each, and
/// the word that tells the wideners the last tile has passed.
constexpr int prefillSm90RawBytes(int headDim, int blockN, int raw) {
  return raw == 0 ? 0 : raw * 2 * (blockN * headDim + 16) + 8;
}

/// Stages of the raw ring an FP8 cache lands in before it is widened into
/// the 16-bit tiles (or, FP8 compute, V transposed): as many as fit (1 to
/// 4); 0 for 16-bit caches.
constexpr int prefillSm90RawStages(int headDim, int kvBytes, int mmaBytes,
                                   int blockM, int blockN, int stages) {
  int raw = kvBytes == 2 ? 0 : 4;
  while (raw > 1 &&
         prefillSm90BaseBytes(headDim, mmaBytes, blockM, blockN, stages) +
                 prefillSm90RawBytes(headDim, blockN, raw) >
             kSm90SmemPerBlock)
    --raw;
  return raw;
}

/// Dynamic shared memory of one sm_90a prefill CTA: the base above and, for
/// FP8 caches, the raw ring.
constexpr int prefillSm90SmemBytes(int headDim, int kvBytes, int mmaBytes,
                                   int blockM, int blockN, int stages,
                                   int ropeDim = 0) {
  return prefillSm90BaseBytes(headDim, mmaBytes, blockM, blockN, stages,
                              ropeDim) +
         prefillSm90RawBytes(headDim, blockN,
                             prefillSm90RawStages(headDim, kvBytes, mmaBytes,
                                                  blockM, blockN, stages));
}

} // namespace attn

#endif // ATTN_TEMPLATES_PREFILL_LAYOUT_H
