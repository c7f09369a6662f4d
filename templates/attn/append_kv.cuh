//===- append_kv.cuh - reshape-and-cache -----------------------*- CUDA -*-===//
//
// Writes each new token's K and V rows into its cache slot (page * page_size +
// offset), in the cache's layout; FP8 caches store x / scale, saturated to the
// format's finite range. One CTA per token, 16-byte input vectors. A negative
// slot is padding (skipped); a slot past the cache is skipped and reported.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEMPLATES_APPEND_KV_CUH
#define ATTN_TEMPLATES_APPEND_KV_CUH

#include "attn/common.cuh"

namespace attn {

template <class KVT> struct FP8Kind;
template <> struct FP8Kind<__nv_fp8_e4m3> {
  static constexpr __nv_fp8_interpretation_t value = __NV_E4M3;
};
template <> struct FP8Kind<__nv_fp8_e5m2> {
  static constexpr __nv_fp8_interpretation_t value = __NV_E5M2;
};

/// \brief Stores 8 values at `dst`: as-is for 16-bit caches, quantized by
/// 1/scale for FP8 ones.
template <class InT, class KVT>
__device__ __forceinline__ void storeRow8(void *dst, uint4 raw,
                                          float invScale) {
  if constexpr (IsFP8<KVT>::value) {
    const InT *e = reinterpret_cast<const InT *>(&raw);
    uint32_t w[2];
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      __nv_fp8x2_storage_t lo = __nv_cvt_float2_to_fp8x2(
          make_float2(toFloat(e[4 * k]) * invScale,
                      toFloat(e[4 * k + 1]) * invScale),
          __NV_SATFINITE, FP8Kind<KVT>::value);
      __nv_fp8x2_storage_t hi = __nv_cvt_float2_to_fp8x2(
          make_float2(toFloat(e[4 * k + 2]) * invScale,
                      toFloat(e[4 * k + 3]) * invScale),
          __NV_SATFINITE, FP8Kind<KVT>::value);
      w[k] = uint32_t(lo) | (uint32_t(hi) << 16);
    }
    *reinterpret_cast<uint2 *>(dst) = make_uint2(w[0], w[1]);
  } else {
    *reinterpret_cast<uint4 *>(dst) = raw;
  }
}

/// \brief Reshape-and-cache of one token per CTA (grid.x = tokens).
template <class Config>
__device__ __forceinline__ void appendKVKernel(const AppendKVParams &p) {
  using InT = typename Config::QType; // the rows' type: the spec's q_type
  using KVT = typename Config::KVType;
  constexpr int D = Config::kHeadDim;
  constexpr int kVecs = Config::kNumKVHeads * D / 8;
  const int token = blockIdx.x;
  if (token >= p.numTokens)
    return;
  const int64_t slot = p.slotMapping[token];
  if (slot < 0)
    return; // padding token
  const int64_t page = slot / Config::kPageSize;
  if (page >= p.numPages) { // past the cache: skipped and reported
    if (threadIdx.x == 0)
      reportPageId(p.pageIdError, slot, token);
    return;
  }
  const int offset = int(slot % Config::kPageSize);
  for (int i = threadIdx.x; i < kVecs; i += blockDim.x) {
    int head = i / (D / 8), d0 = (i % (D / 8)) * 8;
    int64_t dstElem = kvOffset<Config>(page, offset, head, p.pageStride) + d0;
    float kInv = 1.f, vInv = 1.f;
    if constexpr (IsFP8<KVT>::value) {
      int si = Config::kPerHeadKVScale ? head : 0;
      kInv = 1.f / p.kScale[si];
      vInv = 1.f / p.vScale[si];
    }
    uint4 k = *reinterpret_cast<const uint4 *>(
        static_cast<const InT *>(p.k) + token * p.kStrideToken + head * D + d0);
    uint4 v = *reinterpret_cast<const uint4 *>(
        static_cast<const InT *>(p.v) + token * p.vStrideToken + head * D + d0);
    storeRow8<InT, KVT>(static_cast<KVT *>(p.kCache) + dstElem, k, kInv);
    storeRow8<InT, KVT>(static_cast<KVT *>(p.vCache) + dstElem, v, vInv);
  }
}

} // namespace attn

#endif // ATTN_TEMPLATES_APPEND_KV_CUH
