//===- merge_states.cuh - combine partial states by their LSE --*- CUDA -*-===//
//
// Each thread takes 8 consecutive dims of one (token, head) row: it reads
// the row's LSE from every state, then its 8 dims of every state, and
// writes the merged 8 dims (and, the row's first thread, the merged LSE).
// A row's threads are lanes of one warp (head_dim <= 256 is at most 32
// threads), so an in-place merge is safe once every lane of the warp has
// read its LSEs: the warp syncs before any write.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEMPLATES_MERGE_STATES_CUH
#define ATTN_TEMPLATES_MERGE_STATES_CUH

#include "attn/common.cuh"

namespace attn {

/// 8 elements of T as floats, from a 16-byte (f16/bf16) or 32-byte (f32)
/// aligned address.
template <class T>
__device__ __forceinline__ void load8(const T *src, float (&x)[8]) {
  if constexpr (sizeof(T) == 4) {
    float4 a = __ldg(reinterpret_cast<const float4 *>(src));
    float4 b = __ldg(reinterpret_cast<const float4 *>(src) + 1);
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w;
    x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
  } else {
    uint4 raw = __ldg(reinterpret_cast<const uint4 *>(src));
    const T *e = reinterpret_cast<const T *>(&raw);
#pragma unroll
    for (int k = 0; k < 8; ++k)
      x[k] = toFloat(e[k]);
  }
}

template <class T>
__device__ __forceinline__ void store8(T *dst, const float (&x)[8]) {
  if constexpr (sizeof(T) == 4) {
    reinterpret_cast<float4 *>(dst)[0] = make_float4(x[0], x[1], x[2], x[3]);
    reinterpret_cast<float4 *>(dst)[1] = make_float4(x[4], x[5], x[6], x[7]);
  } else {
    *reinterpret_cast<uint4 *>(dst) =
        make_uint4(pack2<T>(x[0], x[1]), pack2<T>(x[2], x[3]),
                   pack2<T>(x[4], x[5]), pack2<T>(x[6], x[7]));
  }
}

/// \brief merge_states: grid.x * blockDim.x threads over tokens x heads x
/// head_dim / 8.
template <class Config>
__device__ __forceinline__ void mergeStatesKernel(const MergeStatesParams &p) {
  using T = typename Config::QType;
  constexpr int kHeads = Config::kNumQHeads;
  constexpr int kVecs = Config::kHeadDim / 8; // threads a row needs
  // A row takes a power-of-two group of lanes, so rows never straddle
  // warps (head_dim 96: 12 of 16 lanes work).
  constexpr int kLanes = kVecs <= 1    ? 1
                         : kVecs <= 2  ? 2
                         : kVecs <= 4  ? 4
                         : kVecs <= 8  ? 8
                         : kVecs <= 16 ? 16
                                       : 32;
  static_assert(kVecs <= 32, "head_dim is at most 256");
  const int64_t thread = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t row = thread / kLanes; // token * heads + head
  const int vec = int(thread % kLanes);
  const bool active = row < p.numTokens * kHeads && vec < kVecs;
  const int d0 = vec * 8;
  const int64_t token = row / kHeads;
  const int head = int(row % kHeads);

  // The row's largest LSE; a state with LSE -inf saw no key.
  float lse[kMaxMergeStates];
  float m = negInf();
#pragma unroll
  for (int i = 0; i < kMaxMergeStates; ++i) {
    lse[i] = i < p.numStates && active ? p.lses[i][row] : negInf();
    m = fmaxf(m, lse[i]);
  }
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  float sum = 0.f;
  if (active && m != negInf()) {
    const int64_t at =
        token * p.statesStrideToken + head * Config::kHeadDim + d0;
#pragma unroll
    for (int i = 0; i < kMaxMergeStates; ++i) {
      if (i >= p.numStates)
        break;
      float w = __expf(lse[i] - m); // 0 for -inf
      if (w == 0.f)
        continue; // an empty state's output may be anything, even NaN
      float x[8];
      load8(static_cast<const T *>(p.outs[i]) + at, x);
      sum += w;
#pragma unroll
      for (int k = 0; k < 8; ++k)
        acc[k] += w * x[k];
    }
  }
  // In place, out and lse are state 0's: every lane has read before any
  // writes.
  __syncwarp();
  if (!active)
    return;
  float inv = sum > 0.f ? 1.f / sum : 0.f;
#pragma unroll
  for (int k = 0; k < 8; ++k)
    acc[k] *= inv;
  store8(static_cast<T *>(p.out) + token * p.outStrideToken +
             head * Config::kHeadDim + d0,
         acc);
  if (p.lse && d0 == 0)
    p.lse[row] = sum > 0.f ? m + __logf(sum) : negInf();
}

} // namespace attn

#endif // ATTN_TEMPLATES_MERGE_STATES_CUH
