//===- mla_decode.cuh - absorbed multi-head latent attention ---*- CUDA -*-===//
//
// MLA decode (DeepSeek V2/V3, Kimi K2, GLM): every query head attends to one
// shared cache row per token, the latent c (kHeadDim values, 512 or 256)
// followed by the decoupled RoPE key (kRopeDim, 64 or 0). Scores use both
// parts, q_nope . c + q_rope . k_rope; the values are the latent part of the
// same row, so the output has kHeadDim dims per head and no V cache exists.
//
// A CTA takes one work item (a request's chunk of keys, split-KV as in
// decode.cuh) and 16 query rows (row = token * heads + head; a request's
// query tokens fold into the rows, as FlashMLA folds MTP tokens). Four
// warps stream 32-key tiles of whole rows through a cp.async ring:
//   - scores: warp w computes the 16 x 32 partial scores over its quarter
//     of the kHeadDim + kRopeDim dims, its Q fragments held in registers
//     for the whole kernel and four independent MMA chains (one per 8 keys);
//   - softmax: the partials are summed in shared memory, 8 threads per row
//     keep the row's running max and sum, and write the probabilities
//     (16-bit) and the row's rescale factor there;
//   - values: warp w accumulates output dims [w, w+1) * kHeadDim / 4 for all
//     16 rows from the probabilities and the tile's latent part
//     (ldmatrix.trans), so one tile read serves every head.
// FP8 caches are widened into a 16-bit tile first (exact; the scale joins
// the scores' and the output's factors).
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEMPLATES_MLA_DECODE_CUH
#define ATTN_TEMPLATES_MLA_DECODE_CUH

#include "attn/common.cuh"
#include "attn/decode_layout.h"

namespace attn {

template <class Config> struct MlaDecodeTraits {
  using QT = typename Config::QType;
  using KVT = typename Config::KVType;
  static constexpr bool kFP8 = IsFP8<KVT>::value;
  static constexpr int kDv = Config::kHeadDim;
  static constexpr int kDr = Config::kRopeDim;
  static constexpr int kDqk = kDv + kDr;
  static constexpr int kRows = kMlaTileRows; ///< query rows per CTA
  static constexpr int kAllRows = Config::kQueryLen * Config::kNumQHeads;
  static constexpr int kWarps = kMlaWarps;
  static constexpr int kBlockN = kMlaTileKeys; ///< keys per tile
  static constexpr int kStages = Config::kStages;
  /// 16-byte chunks of one row in a 16-bit tile (Q and K): a multiple of 8,
  /// so the XOR swizzle below stays inside the row.
  static constexpr int kChunks = kDqk * 2 / 16;
  /// 16-byte chunks of one cache row as stored, and of its latent part.
  static constexpr int kRawChunks = kDqk * int(sizeof(KVT)) / 16;
  static constexpr int kRawLatentChunks = kDv * int(sizeof(KVT)) / 16;
  /// Q, then (its fragments in registers) the partial scores and rows.
  static constexpr int kQBytes = mlaDecodeQBytes(kDv, kDr);
  static constexpr int kRawTileBytes = kBlockN * kRawChunks * 16;
  /// FP8: the widened tile the MMAs read; 16-bit caches read the ring.
  static constexpr int kWideTileBytes = kFP8 ? kBlockN * kChunks * 16 : 0;
  static constexpr int kPBytes = kRows * kBlockN * 2;
  /// MMA k-steps (16 dims) of the scores, and each warp's share.
  static constexpr int kSteps = kDqk / 16;
  static constexpr int kWarpSteps = kSteps / kWarps;
  static constexpr int kSmemBytes =
      kQBytes + kStages * kRawTileBytes + kWideTileBytes + kPBytes;
  static_assert(kSmemBytes ==
                    mlaDecodeSmemBytes(kDv, kDr, sizeof(KVT), kStages),
                "the host sizes shared memory by decode_layout.h");
  /// Output dims per warp, in 8-dim MMA tiles.
  static constexpr int kDimTiles = kDv / kWarps / 8;

  static_assert(Config::kNumKVHeads == 1, "MLA has one latent KV head");
  static_assert(Config::kWarps == kWarps, "MLA decode runs four warps");
  static_assert(kDv % 64 == 0 && kDr % 64 == 0, "MLA dims: latent and rope "
                                                "of 64k");
  static_assert(kChunks % 8 == 0, "rows of whole 8-chunk swizzle groups");
  static_assert(kStages >= 2, "a ring of at least two tiles");
};

/// Shared-memory chunk (16 bytes) `c` of row `r` in a swizzled 16-bit tile
/// of `kChunks` chunks per row: the 8 rows an ldmatrix reads at one column
/// fall in 8 different bank groups.
template <int kChunks> __device__ __forceinline__ int swizzled(int r, int c) {
  return r * kChunks + (c ^ (r & 7));
}

/// \brief The CTA's 16 query rows (q_nope then q_rope per row) into the
/// swizzled Q tile; rows past the request's last are zeros.
template <class Config>
__device__ __forceinline__ void mlaLoadQ(const MlaDecodeParams &p, int request,
                                         int row0, uint4 *sQ) {
  using Tr = MlaDecodeTraits<Config>;
  using QT = typename Tr::QT;
  constexpr int kNopeChunks = Tr::kDv / 8;
  for (int i = threadIdx.x; i < Tr::kRows * Tr::kChunks; i += blockDim.x) {
    const int r = i / Tr::kChunks, c = i % Tr::kChunks;
    const int row = row0 + r;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (row < Tr::kAllRows) {
      const int64_t token =
          int64_t(request) * Config::kQueryLen + row / Config::kNumQHeads;
      const int head = row % Config::kNumQHeads;
      if (c < kNopeChunks)
        v = *reinterpret_cast<const uint4 *>(static_cast<const QT *>(p.qNope) +
                                             token * p.qNopeStrideToken +
                                             head * Tr::kDv + c * 8);
      else
        v = *reinterpret_cast<const uint4 *>(
            static_cast<const QT *>(p.qRope) + token * p.qRopeStrideToken +
            head * Tr::kDr + (c - kNopeChunks) * 8);
    }
    sQ[swizzled<Tr::kChunks>(r, c)] = v;
  }
}

/// \brief Issues the cp.async copies of the tile of keys [tileStart,
/// tileStart + kBlockN) of `request` into `dst`; keys at or past `kvEnd`
/// are zero-filled and never read. 16-bit caches land swizzled, ready for
/// ldmatrix; FP8 rows land as stored, for widenTile. Lane l of every warp
/// looks up the page of the tile's key l once (kBlockN is the warp size);
/// the copies take it by shuffle, so no copy waits on a page-table read and
/// consecutive lanes still copy consecutive chunks of a row.
template <class Config>
__device__ __forceinline__ void mlaLoadTile(const MlaDecodeParams &p,
                                            int request, int tileStart,
                                            int kvEnd, uint4 *dst) {
  using Tr = MlaDecodeTraits<Config>;
  using KVT = typename Tr::KVT;
  static_assert(Tr::kBlockN == 32, "one key per lane");
  constexpr int kElems = 16 / int(sizeof(KVT)); // per chunk
  constexpr int kCopies = Tr::kBlockN * Tr::kRawChunks / (Tr::kWarps * 32);
  static_assert(kCopies * Tr::kWarps * 32 == Tr::kBlockN * Tr::kRawChunks,
                "the threads split a tile's chunks evenly");
  const int lane = threadIdx.x % 32;
  int laneAt = 0; // the page of key tileStart + lane, checked
  {
    const int pos = tileStart + lane;
    if (pos < kvEnd) {
      const int page = p.pageTables[int64_t(request) * p.pageTableStride +
                                    pos / Config::kPageSize];
      checkPage(p, page, request);
      laneAt = clampedPage(p, page);
    }
  }
#pragma unroll
  for (int n = 0; n < kCopies; ++n) {
    const int i = threadIdx.x + n * Tr::kWarps * 32;
    const int j = i / Tr::kRawChunks, c = i % Tr::kRawChunks;
    const int pos = tileStart + j;
    const bool valid = pos < kvEnd;
    const int64_t at = __shfl_sync(0xffffffffu, laneAt, j);
    const int slot = pos % Config::kPageSize;
    const KVT *src =
        c < Tr::kRawLatentChunks
            ? static_cast<const KVT *>(p.ckv) + at * p.ckvPageStride +
                  int64_t(slot) * p.ckvTokenStride + c * kElems
            : static_cast<const KVT *>(p.kpe) + at * p.kpePageStride +
                  int64_t(slot) * p.kpeTokenStride +
                  (c - Tr::kRawLatentChunks) * kElems;
    const int to = Tr::kFP8 ? i : swizzled<Tr::kChunks>(j, c);
    cpAsyncStream16(dst + to, valid ? src : p.ckv, valid);
  }
}

/// \brief FP8: widens a landed tile of raw rows into the swizzled 16-bit
/// tile (exact, times 2^DequantRatio, which the scales undo).
template <class Config>
__device__ __forceinline__ void mlaWidenTile(const uint4 *raw, uint4 *wide) {
  using Tr = MlaDecodeTraits<Config>;
  for (int i = threadIdx.x; i < Tr::kBlockN * Tr::kRawChunks; i += blockDim.x) {
    const int j = i / Tr::kRawChunks, c = i % Tr::kRawChunks;
    const uint4 v = raw[i];
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
    uint32_t out[8];
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      out[2 * w] =
          widenFP8Pair<typename Tr::KVT, typename Tr::QT>(words[w] & 0xffff);
      out[2 * w + 1] =
          widenFP8Pair<typename Tr::KVT, typename Tr::QT>(words[w] >> 16);
    }
    wide[swizzled<Tr::kChunks>(j, 2 * c)] =
        make_uint4(out[0], out[1], out[2], out[3]);
    wide[swizzled<Tr::kChunks>(j, 2 * c + 1)] =
        make_uint4(out[4], out[5], out[6], out[7]);
  }
}

/// A thread's part of the running softmax: the row it updates (threadIdx.x
/// / 8, with 7 other threads) and, as MMA lanes, the warp's output
/// accumulators for rows lane / 4 and lane / 4 + 8.
template <class Config> struct MlaState {
  using Tr = MlaDecodeTraits<Config>;
  float rowMax = negInf(); ///< log2 domain
  float rowSum = 0.f;      ///< this thread's 4 keys of each tile
  float acc[Tr::kDimTiles][4] = {};
};

/// \brief The warp's A fragments of Q for its quarter of the score dims.
template <class Config>
__device__ __forceinline__ void
mlaQFragments(const uint4 *sQ,
              uint32_t (&q)[MlaDecodeTraits<Config>::kWarpSteps][4]) {
  using Tr = MlaDecodeTraits<Config>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = (lane / 8 % 2) * 8 + lane % 8, half = lane / 16;
#pragma unroll
  for (int i = 0; i < Tr::kWarpSteps; ++i)
    ldmatrixX4(q[i], sQ + swizzled<Tr::kChunks>(
                              row, 2 * (warp * Tr::kWarpSteps + i) + half));
}

/// \brief One tile: partial scores, the CTA's softmax update, and the
/// warp's output dims accumulated over all 32 keys.
template <class Config>
__device__ __forceinline__ void
mlaTile(const uint32_t (&q)[MlaDecodeTraits<Config>::kWarpSteps][4],
        const uint4 *sK, __nv_bfloat16 *sPraw, float *sS, float *sRow,
        int tileStart, int visibleEnd, float qkScale, MlaState<Config> &st) {
  using Tr = MlaDecodeTraits<Config>;
  using QT = typename Tr::QT;
  QT *sP = reinterpret_cast<QT *>(sPraw);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  // Partial scores: rows 0-15 x keys 0-31 over this warp's dims; one
  // accumulator per 8 keys, so four MMA chains run side by side.
  float s[4][4] = {};
  {
    // ldmatrix.x4 of keys 16h..16h+15 at one k-step: B of two 8-key tiles.
    const int key = (lane / 16) * 8 + lane % 8, half = lane / 8 % 2;
#pragma unroll
    for (int i = 0; i < Tr::kWarpSteps; ++i) {
      const int chunk = 2 * (warp * Tr::kWarpSteps + i) + half;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        uint32_t b[4];
        ldmatrixX4(b, sK + swizzled<Tr::kChunks>(16 * h + key, chunk));
        mma16816<QT>(s[2 * h], q[i], b[0], b[1]);
        mma16816<QT>(s[2 * h + 1], q[i], b[2], b[3]);
      }
    }
  }
  // The warp's partials to shared memory, [warp][row][key].
  {
    float *mine = sS + warp * Tr::kRows * Tr::kBlockN;
    const int r = lane / 4, c = 2 * (lane % 4);
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      *reinterpret_cast<float2 *>(mine + r * Tr::kBlockN + 8 * n + c) =
          make_float2(s[n][0], s[n][1]);
      *reinterpret_cast<float2 *>(mine + (r + 8) * Tr::kBlockN + 8 * n + c) =
          make_float2(s[n][2], s[n][3]);
    }
  }
  __syncthreads();
  // Softmax: thread t takes keys 4(t % 8).. of row t / 8.
  {
    const int r = threadIdx.x / 8, k0 = 4 * (threadIdx.x % 8);
    float x[4];
    float4 sum = *reinterpret_cast<const float4 *>(sS + r * Tr::kBlockN + k0);
#pragma unroll
    for (int w = 1; w < Tr::kWarps; ++w) {
      const float4 v = *reinterpret_cast<const float4 *>(
          sS + (w * Tr::kRows + r) * Tr::kBlockN + k0);
      sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
    }
    x[0] = sum.x, x[1] = sum.y, x[2] = sum.z, x[3] = sum.w;
    float tileMax = negInf();
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      x[e] = tileStart + k0 + e < visibleEnd ? x[e] * qkScale : negInf();
      tileMax = fmaxf(tileMax, x[e]);
    }
#pragma unroll
    for (int o = 1; o < 8; o *= 2)
      tileMax = fmaxf(tileMax, __shfl_xor_sync(0xffffffffu, tileMax, o));
    const float m = fmaxf(st.rowMax, tileMax);
    // A row that has seen no visible key yet keeps weight 0 (not NaN).
    const float base = m == negInf() ? 0.f : m;
    const float alpha = fastExp2(st.rowMax - base);
    st.rowMax = m;
    float p[4];
#pragma unroll
    for (int e = 0; e < 4; ++e)
      p[e] = fastExp2(x[e] - base);
    st.rowSum = st.rowSum * alpha + (p[0] + p[1]) + (p[2] + p[3]);
    *reinterpret_cast<uint2 *>(sP + r * Tr::kBlockN + k0) =
        make_uint2(pack2<QT>(p[0], p[1]), pack2<QT>(p[2], p[3]));
    if (threadIdx.x % 8 == 0)
      sRow[r] = alpha;
  }
  __syncthreads();
  {
    const float alpha0 = sRow[lane / 4], alpha1 = sRow[lane / 4 + 8];
#pragma unroll
    for (int t = 0; t < Tr::kDimTiles; ++t) {
      st.acc[t][0] *= alpha0;
      st.acc[t][1] *= alpha0;
      st.acc[t][2] *= alpha1;
      st.acc[t][3] *= alpha1;
    }
  }
  // Values: out[16 x dims of this warp] += P[16 x 32] . latent[32 x dims].
  // P rows are 64 bytes: ldmatrix's 8 rows of one column hit 2 bank groups
  // each other row, an accepted 2-way conflict on a small read.
#pragma unroll
  for (int kk = 0; kk < Tr::kBlockN / 16; ++kk) {
    uint32_t a[4];
    {
      const int row = (lane / 8 % 2) * 8 + lane % 8;
      const int col = kk * 16 + (lane / 16) * 8;
      ldmatrixX4(a, sP + row * Tr::kBlockN + col);
    }
    // ldmatrix.trans of keys kk*16.. x 16 dims: two 8-dim tiles' B.
    const int key = kk * 16 + (lane / 8 % 2) * 8 + lane % 8;
#pragma unroll
    for (int t = 0; t < Tr::kDimTiles; t += 2) {
      const int chunk = (warp * Tr::kDimTiles + t) + lane / 16;
      uint32_t b[4];
      ldmatrixX4Trans(b, sK + swizzled<Tr::kChunks>(key, chunk));
      mma16816<QT>(st.acc[t], a, b[0], b[1]);
      mma16816<QT>(st.acc[t + 1], a, b[2], b[3]);
    }
  }
}

/// \brief Writes the CTA's rows: the output (or, for a split request, its
/// partial and LSE). The 8 threads of a row add their sums first.
template <class Config>
__device__ __forceinline__ void
mlaEpilogue(const MlaDecodeParams &p, const DecodeWorkItem &work, int row0,
            float *sRow, float outScale, MlaState<Config> &st) {
  using Tr = MlaDecodeTraits<Config>;
  using QT = typename Tr::QT;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float sum = st.rowSum;
#pragma unroll
  for (int o = 1; o < 8; o *= 2)
    sum += __shfl_xor_sync(0xffffffffu, sum, o);
  __syncthreads(); // every warp is done with the last tile's factors
  float *sInv = sRow + Tr::kRows, *sLse = sRow + 2 * Tr::kRows;
  if (threadIdx.x % 8 == 0) {
    const int r = threadIdx.x / 8;
    sInv[r] = sum > 0.f ? 1.f / sum : 0.f;
    // LSE (natural log) of the scaled scores; -inf for a row with no keys.
    sLse[r] = sum > 0.f ? (st.rowMax + __log2f(sum)) * kLn2 : negInf();
  }
  __syncthreads();
  const bool split = work.partialIdx >= 0;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = lane / 4 + 8 * h, row = row0 + r;
    const float inv = sInv[r];
    if (row >= Tr::kAllRows)
      continue;
    const int64_t token =
        int64_t(work.request) * Config::kQueryLen + row / Config::kNumQHeads;
    const int head = row % Config::kNumQHeads;
#pragma unroll
    for (int t = 0; t < Tr::kDimTiles; ++t) {
      const int dim = (warp * Tr::kDimTiles + t) * 8 + 2 * (lane % 4);
      const float x0 = st.acc[t][2 * h] * inv, x1 = st.acc[t][2 * h + 1] * inv;
      if (split) {
        const int64_t slot = int64_t(work.partialIdx) * Tr::kAllRows + row;
        *reinterpret_cast<float2 *>(p.partialOut + slot * Tr::kDv + dim) =
            make_float2(x0, x1);
      } else {
        *reinterpret_cast<uint32_t *>(
            static_cast<QT *>(p.out) + token * p.outStrideToken +
            head * Tr::kDv + dim) = pack2<QT>(x0 * outScale, x1 * outScale);
      }
    }
    if (warp == 0 && lane % 4 == 0) {
      if (split)
        p.partialLse[int64_t(work.partialIdx) * Tr::kAllRows + row] = sLse[r];
      else if (Config::kWriteLse)
        p.lse[token * Config::kNumQHeads + head] = sLse[r];
    }
  }
}

/// \brief The end of a split request: the CTA that completes it merges
/// every chunk's partial rows by their LSEs (the decode.cuh protocol: a
/// counter per request and row block, reset by the merging CTA).
template <class Config>
__device__ __forceinline__ void mlaMerge(const MlaDecodeParams &p,
                                         const DecodeWorkItem &work, int row0,
                                         float outScale) {
  using Tr = MlaDecodeTraits<Config>;
  using QT = typename Tr::QT;
  __shared__ int isLast;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t *counter =
        p.mergeCounters + int64_t(work.request) * gridDim.z + blockIdx.z;
    isLast = atomicAdd(counter, 1) == work.numPartials - 1;
    if (isLast)
      *counter = 0;
  }
  __syncthreads();
  if (!isLast)
    return;
  __threadfence();
  // A thread per (row, 4 dims): its LSEs, then its dims of every partial.
  constexpr int kUnits = Tr::kDv / 4;
  for (int i = threadIdx.x; i < Tr::kRows * kUnits; i += blockDim.x) {
    const int r = i / kUnits, d = (i % kUnits) * 4, row = row0 + r;
    if (row >= Tr::kAllRows)
      continue;
    float m = negInf();
    for (int k = 0; k < work.numPartials; ++k)
      m = fmaxf(m, __ldcg(p.partialLse +
                          int64_t(work.firstPartial + k) * Tr::kAllRows + row));
    const float base = m == negInf() ? 0.f : m;
    float sum = 0.f, acc[4] = {0.f, 0.f, 0.f, 0.f};
    for (int k = 0; k < work.numPartials; ++k) {
      const int64_t slot = int64_t(work.firstPartial + k) * Tr::kAllRows + row;
      const float w = __expf(__ldcg(p.partialLse + slot) - base);
      if (w == 0.f)
        continue;
      const float4 x = __ldcg(
          reinterpret_cast<const float4 *>(p.partialOut + slot * Tr::kDv + d));
      sum += w;
      acc[0] += w * x.x, acc[1] += w * x.y, acc[2] += w * x.z,
          acc[3] += w * x.w;
    }
    const float inv = sum > 0.f ? outScale / sum : 0.f;
    const int64_t token =
        int64_t(work.request) * Config::kQueryLen + row / Config::kNumQHeads;
    const int head = row % Config::kNumQHeads;
    QT *out = static_cast<QT *>(p.out) + token * p.outStrideToken +
              head * Tr::kDv + d;
    *reinterpret_cast<uint2 *>(out) =
        make_uint2(pack2<QT>(acc[0] * inv, acc[1] * inv),
                   pack2<QT>(acc[2] * inv, acc[3] * inv));
    if (Config::kWriteLse && d == 0)
      p.lse[token * Config::kNumQHeads + head] =
          sum > 0.f ? base + __logf(sum) : negInf();
  }
}

/// \brief MLA decode: one work item x 16 query rows per CTA (grid.x work
/// items, grid.z row blocks).
template <class Config>
__device__ void mlaDecodeKernel(const MlaDecodeParams &p) {
  using Tr = MlaDecodeTraits<Config>;
  if (int(blockIdx.x) >= *p.numWorkItems)
    return;
  const DecodeWorkItem work = p.workItems[blockIdx.x];
  const int row0 = blockIdx.z * Tr::kRows;

  extern __shared__ __align__(128) uint4 smem[];
  uint4 *sQ = smem;
  uint4 *ring = sQ + Tr::kQBytes / 16;
  uint4 *wide = ring + Tr::kStages * Tr::kRawTileBytes / 16;
  auto *sP = reinterpret_cast<__nv_bfloat16 *>(wide + Tr::kWideTileBytes / 16);
  // The warps' partial scores, then per row: rescale factor, 1/sum, LSE;
  // over Q, whose fragments are in registers before the first tile.
  float *sS = reinterpret_cast<float *>(sQ);
  float *sRow = sS + Tr::kWarps * Tr::kRows * Tr::kBlockN;

  // Scores in the log2 domain; an FP8 cache's scale (and the widening's
  // 2^ratio) joins the score factor and the output factor.
  float qkScale = p.smScale * kLog2e, outScale = 1.f;
  if constexpr (Tr::kFP8) {
    const float dequant =
        *p.kvScale * exp2i(-DequantRatio<typename Tr::KVT>::kLog2);
    qkScale *= dequant;
    outScale = dequant;
  }
  // The keys the row this thread's softmax updates sees: causal rows of
  // token t of the request's kQueryLen new tokens see keys < seqLen -
  // kQueryLen + t + 1.
  int visibleEnd;
  {
    const int row = row0 + threadIdx.x / 8;
    const int token = min(row, Tr::kAllRows - 1) / Config::kNumQHeads;
    const int end = Config::kCausal
                        ? work.seqLen - Config::kQueryLen + token + 1
                        : work.seqLen;
    visibleEnd = min(end, work.kvEnd);
  }

  mlaLoadQ<Config>(p, work.request, row0, sQ);
  __syncthreads();
  uint32_t q[Tr::kWarpSteps][4];
  mlaQFragments<Config>(sQ, q);
  const int numTiles = ceilDiv(work.kvEnd - work.kvBegin, Tr::kBlockN);
#pragma unroll
  for (int s = 0; s < Tr::kStages - 1; ++s) {
    if (s < numTiles)
      mlaLoadTile<Config>(p, work.request, work.kvBegin + s * Tr::kBlockN,
                          work.kvEnd, ring + s * Tr::kRawTileBytes / 16);
    cpAsyncCommit();
  }
  MlaState<Config> st;
  for (int tile = 0; tile < numTiles; ++tile) {
    cpAsyncWait<Tr::kStages - 2>();
    __syncthreads();
    // The ring slot the previous tile used is free: refill it.
    const int next = tile + Tr::kStages - 1;
    if (next < numTiles)
      mlaLoadTile<Config>(p, work.request, work.kvBegin + next * Tr::kBlockN,
                          work.kvEnd,
                          ring + (next % Tr::kStages) * Tr::kRawTileBytes / 16);
    cpAsyncCommit();
    const uint4 *sK = ring + (tile % Tr::kStages) * Tr::kRawTileBytes / 16;
    if constexpr (Tr::kFP8) {
      mlaWidenTile<Config>(sK, wide);
      __syncthreads();
      sK = wide;
    }
    mlaTile<Config>(q, sK, sP, sS, sRow, work.kvBegin + tile * Tr::kBlockN,
                    visibleEnd, qkScale, st);
  }
  cpAsyncWait<0>();
  mlaEpilogue<Config>(p, work, row0, sRow, outScale, st);
  if (work.partialIdx >= 0)
    mlaMerge<Config>(p, work, row0, outScale);
}

} // namespace attn

#endif // ATTN_TEMPLATES_MLA_DECODE_CUH
