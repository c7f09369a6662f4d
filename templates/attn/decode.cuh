//===- decode.cuh - paged decode attention ---------------------*- CUDA -*-===//
//
// Paged decode on tensor cores, one template for every head ratio, head dim,
// page size, layout and KV dtype; CTAs of one query row (MHA, one query
// token; decode_layout.h, decodeSimt) take a CUDA-core path instead
// (simtLoop, below).
//
// Work: a CTA takes one KV chunk of one request (a plan work item) and one
// KV head (grid.x x grid.y, numbered head first), and up to 16*kRowTiles
// query rows of that head's group (grid.z); rows are (query token, q head
// of the group), so every q head of a group shares each K/V byte loaded.
// Each warp streams every kWarps-th tile of 16 tokens through a private
// cp.async ring of kStages stages and keeps its own online-softmax state;
// warps meet once, at the end, to merge. A chunk that is a whole request
// writes the output; otherwise the CTA writes an f32 partial and its LSE,
// and the CTA that finishes a request's last chunk merges all of them (no
// second launch).
//
// MMA operand layouts: the head dim is processed in groups of 32. For QK^T a
// thread (r = lane/4, c = lane%4) feeds dims 32a + 8c .. 32a + 8c + 7 of its
// query rows and of key r: the reduction order is permuted consistently in A
// and B, so each thread reads one 16-byte (or, for FP8, 8-byte) run. For PV
// the output column n of n8-tile 4a + j holds dim 32a + 4n + j, so each thread
// loads 4 consecutive dims of 4 tokens and ends up owning 8 consecutive output
// dims per group. With an FP8 cache the MMAs run in f16 (every FP8 value is
// exact in f16, common.cuh): q is converted once when staged, K and V bytes
// in registers as they are read.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEMPLATES_DECODE_CUH
#define ATTN_TEMPLATES_DECODE_CUH

#include "attn/common.cuh"
#include "attn/decode_layout.h"
#include "attn/variant.cuh"

namespace attn {

/// \brief Sizes and constants derived from a decode Config.
template <class Config> struct DecodeTraits {
  using QT = typename Config::QType;
  using KVT = typename Config::KVType;
  static constexpr bool kFP8 = IsFP8<KVT>::value;
  /// MMA input type: the cache's 16-bit type, or f16 for FP8 caches.
  using MT = typename Conditional<kFP8, __half, QT>::type;
  static constexpr int kKVBytes = sizeof(KVT);
  static constexpr int kHeadDim = Config::kHeadDim;
  static constexpr int kDimPad = decodeDimPad(kHeadDim);
  static constexpr int kDimGroups = kDimPad / 32;
  static constexpr int kRows = Config::kGroupSize * Config::kQueryLen;
  static constexpr int kTileRows = kDecodeTileRows * Config::kRowTiles;
  static constexpr int kTileTokens = kDecodeTileTokens;

  // Shared-memory layout (decode_layout.h): Q tile, then per warp a ring of
  // stages holding 16 tokens of K, then of V.
  static constexpr int kRowBytes = kDimPad * kKVBytes;
  static constexpr int kRowStride = decodeRowStride(kHeadDim, kKVBytes);
  static constexpr int kStageBytes = decodeStageBytes(kHeadDim, kKVBytes);

  // Global rows are copied in 16-byte pieces, or 8 when an FP8 row of a head
  // dim that is not a multiple of 16 is only 8-byte aligned.
  static constexpr int kDataBytes = kHeadDim * kKVBytes;
  static constexpr int kCopyBytes = kDataBytes % 16 == 0 ? 16 : 8;
  static constexpr int kCopiesPerRow = kDataBytes / kCopyBytes;
  static constexpr int kCopiesPerTile = kTileTokens * kCopiesPerRow;

  static constexpr int kQBytes = decodeQBytes(kHeadDim, Config::kRowTiles);

  // End-of-CTA merge: per warp, f32 O rows plus m and l of each row.
  static constexpr int kOStride = kDimPad + 4;
  static constexpr int kSmemBytes =
      decodeSmemBytes(kHeadDim, kKVBytes, Config::kRowTiles, Config::kWarps,
                      Config::kStages, kRows);
  /// Few query rows: the CUDA-core path (decode_layout.h, decodeSimt).
  static constexpr bool kSimt = decodeSimt(kRows, kHeadDim, kKVBytes);

  // FP8 on sm_80: 2^kLog2Ratio left by dequantization, undone in the scales.
  static constexpr int kLog2Ratio = DequantRatio<KVT>::kLog2;
};

/// \brief Issues the cp.async copies of 16-token K and V tiles. The lane's
/// share of a tile (which tokens and 16-byte pieces) is fixed, so its offsets
/// are computed once, before the tile loop.
template <class Config> struct KVTileLoader {
  using Tr = DecodeTraits<Config>;
  static constexpr int P = Config::kPageSize, D = Tr::kHeadDim;
  static constexpr int kIters = ceilDiv(Tr::kCopiesPerTile, 32);
  // Elements between consecutive tokens of one head inside a page.
  static constexpr int kTokenStride =
      Config::kLayoutHND ? D : Config::kNumKVHeads * D;
  static constexpr int kCopyElems = Tr::kCopyBytes / Tr::kKVBytes;
  static constexpr bool kOnePage = P % Tr::kTileTokens == 0; // no straddling

  int token[kIters];     ///< token of the tile each copy reads (16: none)
  int dstOffset[kIters]; ///< bytes into the stage
  int srcOffset[kIters]; ///< bytes from the token's row (one-page tiles:
                         ///< from the tile's first token)

  __device__ __forceinline__ explicit KVTileLoader(int lane) {
#pragma unroll
    for (int u = 0; u < kIters; ++u) {
      int i = lane + 32 * u;
      int col = i % Tr::kCopiesPerRow;
      token[u] =
          i < Tr::kCopiesPerTile ? i / Tr::kCopiesPerRow : Tr::kTileTokens;
      dstOffset[u] =
          (token[u] % Tr::kTileTokens) * Tr::kRowStride + col * Tr::kCopyBytes;
      srcOffset[u] =
          ((kOnePage ? token[u] * kTokenStride : 0) + col * kCopyElems) *
          Tr::kKVBytes;
    }
  }

  /// `pageOfLane` holds, in lane t < 16, the page of the tile's token t
  /// (with one page per tile, every lane holds that page), as read from
  /// row `row` of the page tables: clamped here, checked once the copies
  /// are issued.
  __device__ __forceinline__ void load(const DecodeParams &p, char *stage,
                                       int tileStart, int kvEnd, int head,
                                       int pageOfLane, int row) const {
    const char *kBase = static_cast<const char *>(p.kCache);
    const char *vBase = static_cast<const char *>(p.vCache);
    const int validTokens = kvEnd - tileStart;
    const int safePage = clampedPage(p, pageOfLane);
    int64_t tileBase = 0;
    if constexpr (kOnePage)
      tileBase = kvOffset<Config>(safePage, tileStart % P, head, p.pageStride) *
                 Tr::kKVBytes;
#pragma unroll
    for (int u = 0; u < kIters; ++u) {
      int64_t src = tileBase + srcOffset[u];
      if constexpr (!kOnePage) {
        int page = __shfl_sync(0xffffffffu, safePage, token[u] & 15);
        src += kvOffset<Config>(page, (tileStart + token[u]) % P, head,
                                p.pageStride) *
               Tr::kKVBytes;
      }
      if (token[u] < Tr::kTileTokens) {
        bool valid = token[u] < validTokens;
        if (!valid)
          src = 0; // zero-fill: nothing is read
        char *dst = stage + dstOffset[u];
        char *vDst = dst + Tr::kTileTokens * Tr::kRowStride;
        if constexpr (Tr::kCopyBytes == 16) {
          cpAsyncStream16(dst, kBase + src, valid);
          cpAsyncStream16(vDst, vBase + src, valid);
        } else {
          cpAsync<Tr::kCopyBytes>(dst, kBase + src, valid);
          cpAsync<Tr::kCopyBytes>(vDst, vBase + src, valid);
        }
      }
    }
    checkPage(p, pageOfLane, row);
  }
};

/// \brief K fragment of token `row` for dim group a: 4 registers, pairs
/// (8c, 8c+1) .. (8c+6, 8c+7) of the group (see the layout note above).
template <class Config>
__device__ __forceinline__ void loadKFrag(uint32_t (&b)[4], const char *kTile,
                                          int row, int a, int c) {
  using Tr = DecodeTraits<Config>;
  const char *src =
      kTile + row * Tr::kRowStride + (a * 32 + c * 8) * Tr::kKVBytes;
  if constexpr (Tr::kFP8) {
    using Cvt = FP8ToHalf<typename Tr::KVT>;
    uint32_t w[2];
    lds64(w, src);
    b[0] = Cvt::convert(w[0]);
    b[1] = Cvt::convert(w[0] >> 16);
    b[2] = Cvt::convert(w[1]);
    b[3] = Cvt::convert(w[1] >> 16);
  } else {
    lds128(b, src);
  }
}

/// \brief V fragments for dim group a: vb[j] = {tokens (2c, 2c+1), tokens
/// (2c+8, 2c+9)} at dim 32a + 4r + j.
template <class Config>
__device__ __forceinline__ void
loadVFrags(uint32_t (&vb)[4][2], const char *vTile, int a, int r, int c) {
  using Tr = DecodeTraits<Config>;
  const char *base = vTile + (a * 32 + r * 4) * Tr::kKVBytes;
  const int t0 = 2 * c;
  if constexpr (Tr::kFP8) {
    using Cvt = FP8ToHalf<typename Tr::KVT>;
    uint32_t x0 =
        *reinterpret_cast<const uint32_t *>(base + t0 * Tr::kRowStride);
    uint32_t x1 =
        *reinterpret_cast<const uint32_t *>(base + (t0 + 1) * Tr::kRowStride);
    uint32_t y0 =
        *reinterpret_cast<const uint32_t *>(base + (t0 + 8) * Tr::kRowStride);
    uint32_t y1 =
        *reinterpret_cast<const uint32_t *>(base + (t0 + 9) * Tr::kRowStride);
    // Byte j of two tokens side by side, then converted.
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      vb[j][0] = Cvt::convert(prmt(x0, x1, j | ((4 + j) << 4)));
      vb[j][1] = Cvt::convert(prmt(y0, y1, j | ((4 + j) << 4)));
    }
  } else {
    uint32_t x0[2], x1[2], y0[2], y1[2];
    lds64(x0, base + t0 * Tr::kRowStride);
    lds64(x1, base + (t0 + 1) * Tr::kRowStride);
    lds64(y0, base + (t0 + 8) * Tr::kRowStride);
    lds64(y1, base + (t0 + 9) * Tr::kRowStride);
    // Two 16-bit values per register: dims (4r, 4r+1) and (4r+2, 4r+3).
    vb[0][0] = prmt(x0[0], x1[0], 0x5410);
    vb[1][0] = prmt(x0[0], x1[0], 0x7632);
    vb[2][0] = prmt(x0[1], x1[1], 0x5410);
    vb[3][0] = prmt(x0[1], x1[1], 0x7632);
    vb[0][1] = prmt(y0[0], y1[0], 0x5410);
    vb[1][1] = prmt(y0[0], y1[0], 0x7632);
    vb[2][1] = prmt(y0[1], y1[1], 0x5410);
    vb[3][1] = prmt(y0[1], y1[1], 0x7632);
  }
}

/// \brief Stores 8 f32 accumulators times `scale` as one 16-byte vector.
template <class QT>
__device__ __forceinline__ void storeOut8(QT *dst, const float (&acc)[8],
                                          float scale) {
  uint4 packed;
  packed.x = pack2<QT>(acc[0] * scale, acc[1] * scale);
  packed.y = pack2<QT>(acc[2] * scale, acc[3] * scale);
  packed.z = pack2<QT>(acc[4] * scale, acc[5] * scale);
  packed.w = pack2<QT>(acc[6] * scale, acc[7] * scale);
  *reinterpret_cast<uint4 *>(dst) = packed;
}

/// \brief The request index the modifier regions see: its place in the
/// whole batch, which in a mixed batch starts after the prefills.
__device__ __forceinline__ int batchIndex(const DecodeParams &p,
                                          const DecodeWorkItem &work) {
  return p.firstRequest + work.request;
}

/// \brief The end of a split request: counts this CTA's chunk as done and,
/// in the CTA that completes the request, merges every chunk's partial by
/// its LSE into the output. The counter is reset for the next launch.
template <class Config>
__device__ __forceinline__ void mergePartials(const DecodeParams &p,
                                              const DecodeWorkItem &work,
                                              int head, int rowBase) {
  using Tr = DecodeTraits<Config>;
  using QT = typename Tr::QT;
  constexpr int kPartialRows = Config::kQueryLen * Config::kNumQHeads;
  __shared__ int isLast;
  // Every thread publishes its partial writes before the count goes up.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t *counter =
        p.mergeCounters +
        (int64_t(work.request) * Config::kNumKVHeads + head) * gridDim.z +
        blockIdx.z;
    isLast = atomicAdd(counter, 1) == work.numPartials - 1;
    if (isLast)
      *counter = 0;
  }
  __syncthreads();
  if (!isLast)
    return;
  __threadfence();
  // Each (row, 8 dims) is merged by `lanes` neighbouring threads, a power
  // of two up to a warp, as many as the CTA holds and the partials need:
  // each reads every lanes-th partial, kBatch at a time, so a request split
  // 64 ways is read in one round rather than 8, and the lanes combine their
  // states by shuffles.
  constexpr int kSegments = Tr::kHeadDim / 8;
  const int units = min(Tr::kTileRows, Tr::kRows - rowBase) * kSegments;
  constexpr int kBatch = 8; // partials a thread reads at once
  int lanes = 1;
  while (lanes < 32 && units * lanes * 2 <= int(blockDim.x) &&
         lanes * kBatch < work.numPartials)
    lanes *= 2;
  // Whole warps run each round (the shuffles need every lane).
  for (int i0 = 0; i0 < units * lanes; i0 += blockDim.x) {
    const int i = i0 + threadIdx.x;
    const bool active = i < units * lanes;
    const int unit = active ? i / lanes : 0, sub = i % lanes;
    int gr = rowBase + unit / kSegments, d0 = (unit % kSegments) * 8;
    int qi = gr / Config::kGroupSize;
    int qh = head * Config::kGroupSize + gr % Config::kGroupSize;
    int prow = qi * Config::kNumQHeads + qh;
    // Other CTAs wrote these: read through L2 (__ldcg), never a stale L1.
    // Partials are read kBatch at a time with no branch between the loads,
    // so their latencies overlap; a running max keeps it one pass.
    const int count = active ? work.numPartials : 0;
    float base = negInf(), sum = 0.f, acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int k0 = sub; k0 < count; k0 += kBatch * lanes) {
      float lse[kBatch];
      float4 lo[kBatch], hi[kBatch];
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        int k = min(k0 + j * lanes, count - 1); // in bounds; masked below
        int64_t slot = int64_t(work.firstPartial + k) * kPartialRows + prow;
        const float4 *src = reinterpret_cast<const float4 *>(
            p.partialOut + slot * Tr::kHeadDim + d0);
        lse[j] = __ldcg(p.partialLse + slot);
        lo[j] = __ldcg(src);
        hi[j] = __ldcg(src + 1);
      }
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        // Past the end, and chunks that saw no visible key, weigh nothing.
        float l = k0 + j * lanes < count ? lse[j] : negInf();
        float mNew = fmaxf(base, l);
        bool none = mNew == negInf();
        float rescale = none ? 1.f : __expf(base - mNew);
        float w = none ? 0.f : __expf(l - mNew);
        base = mNew;
        sum = sum * rescale + w;
        acc[0] = acc[0] * rescale + w * lo[j].x;
        acc[1] = acc[1] * rescale + w * lo[j].y;
        acc[2] = acc[2] * rescale + w * lo[j].z;
        acc[3] = acc[3] * rescale + w * lo[j].w;
        acc[4] = acc[4] * rescale + w * hi[j].x;
        acc[5] = acc[5] * rescale + w * hi[j].y;
        acc[6] = acc[6] * rescale + w * hi[j].z;
        acc[7] = acc[7] * rescale + w * hi[j].w;
      }
    }
    // Combine the lanes' states (base, sum, acc) pairwise.
    for (int offset = lanes / 2; offset > 0; offset /= 2) {
      float otherBase = __shfl_xor_sync(0xffffffffu, base, offset);
      float otherSum = __shfl_xor_sync(0xffffffffu, sum, offset);
      float mNew = fmaxf(base, otherBase);
      bool none = mNew == negInf();
      float mine = none ? 0.f : __expf(base - mNew);
      float theirs = none ? 0.f : __expf(otherBase - mNew);
      base = mNew;
      sum = sum * mine + otherSum * theirs;
#pragma unroll
      for (int e = 0; e < 8; ++e)
        acc[e] = acc[e] * mine +
                 __shfl_xor_sync(0xffffffffu, acc[e], offset) * theirs;
    }
    if (!active || sub != 0)
      continue;
    float numer = Variant<Config>::template finishRow<false>(
        Variant<Config>::row(p, batchIndex(p, work), qh), base, sum);
    float inv = sum > 0.f ? numer / sum : 0.f;
    int token = work.request * Config::kQueryLen + qi;
    storeOut8<QT>(static_cast<QT *>(p.out) + int64_t(token) * p.outStrideToken +
                      qh * Tr::kHeadDim + d0,
                  acc, inv);
    if constexpr (Config::kWriteLse)
      if (d0 == 0)
        p.lse[int64_t(token) * Config::kNumQHeads + qh] =
            sum > 0.f ? base + __logf(sum) : negInf();
  }
}

/// \brief The key loop of a CTA of few query rows (decodeSimt): q.k and
/// p.v on CUDA cores, K and V read from global memory straight into
/// registers, no shared-memory ring. kLanes lanes hold a token's row, 16
/// bytes each, so a warp reads 32 / kLanes tokens per load and kUnroll
/// loads of K and of V are in flight per lane; every lane keeps its dims
/// of each row's q and O, so each K/V byte loaded serves all the CTA's
/// rows (the q heads of a KV head, times the query tokens). Each lane group
/// keeps an online-softmax state per row for its tokens, merged across the
/// warp at the end. Writes the warp's states (m, l in log2 units,
/// unnormalized O) to rows warp * kRows + j of mAll/lAll/oAll for finishCta.
template <class Config>
__device__ __forceinline__ void
simtLoop(const DecodeParams &p, const DecodeWorkItem &work, int head,
         float scoreScale, float *oAll, float *mAll, float *lAll) {
  using Tr = DecodeTraits<Config>;
  using QT = typename Tr::QT;
  using KVT = typename Tr::KVT;
  constexpr int D = Tr::kHeadDim;
  constexpr int kRows = Tr::kRows;
  constexpr int kVec = 16 / Tr::kKVBytes; // elements per 16-byte load
  constexpr int kLanes = decodeSimtLanes(D, Tr::kKVBytes);
  constexpr int kTokens = 32 / kLanes;     // tokens per warp load
  constexpr int kUnroll = 4;               // loads of K (and V) in flight
  constexpr int kStep = kTokens * kUnroll; // tokens per warp step
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int sub = lane % kLanes, slot = lane / kLanes;

  // Row j is (query token j / group, q head head * group + j % group), as
  // in finishCta. This lane's kVec dims of each row's q, its position and
  // its per-head constants.
  float q[kRows][kVec];
  int qpos[kRows];
  typename Variant<Config>::Row rows[kRows];
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    const int qi = j / Config::kGroupSize;
    const int qh = head * Config::kGroupSize + j % Config::kGroupSize;
    const QT *src =
        static_cast<const QT *>(p.q) +
        int64_t(work.request * Config::kQueryLen + qi) * p.qStrideToken +
        qh * D + sub * kVec;
#pragma unroll
    for (int h = 0; h < kVec / 8; ++h) {
      uint4 raw = *reinterpret_cast<const uint4 *>(src + 8 * h);
      const QT *e = reinterpret_cast<const QT *>(&raw);
#pragma unroll
      for (int k = 0; k < 8; ++k)
        q[j][8 * h + k] = toFloat(e[k]);
    }
    qpos[j] = work.seqLen - Config::kQueryLen + qi;
    rows[j] = Variant<Config>::row(p, batchIndex(p, work), qh);
  }
  const int32_t *pageTable =
      p.pageTables + int64_t(work.request) * p.pageTableStride;
  const char *kBase = static_cast<const char *>(p.kCache);
  const char *vBase = static_cast<const char *>(p.vCache);

  // A 16-byte piece as kVec floats (FP8: times 2^kLog2Ratio, as the MMA
  // path's f16 conversion leaves them; the scales undo it).
  auto widen = [](const uint4 &raw, float(&x)[kVec]) {
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
    if constexpr (Tr::kFP8) {
      using Cvt = FP8ToHalf<KVT>;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        uint32_t lo = Cvt::convert(w[i]), hi = Cvt::convert(w[i] >> 16);
        float2 a = __half22float2(*reinterpret_cast<__half2 *>(&lo));
        float2 b = __half22float2(*reinterpret_cast<__half2 *>(&hi));
        x[4 * i] = a.x, x[4 * i + 1] = a.y, x[4 * i + 2] = b.x,
              x[4 * i + 3] = b.y;
      }
    } else {
      const QT *e = reinterpret_cast<const QT *>(w);
#pragma unroll
      for (int i = 0; i < kVec; ++i)
        x[i] = toFloat(e[i]);
    }
  };

  float m[kRows], l[kRows], o[kRows][kVec];
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
    m[j] = negInf(), l[j] = 0.f;
#pragma unroll
    for (int i = 0; i < kVec; ++i)
      o[j][i] = 0.f;
  }
  // Pages of under 8 tokens: the pages of a step's tokens are loaded a step
  // ahead, so that no K/V load waits on the page table (on an H200, e4m3
  // MHA with pages of one token: 92% of read bandwidth against 82%). With
  // larger pages the same lookahead lost a third (e4m3 62% against 89%);
  // their few page ids per step are loaded with the step's K/V.
  constexpr bool kPagesAhead = Config::kPageSize < 8;
  constexpr int kStride = Config::kWarps * kStep;
  auto lookUp = [&](int t0, int(&page)[kUnroll]) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      int pos = t0 + u * kTokens + slot;
      page[u] = pos < work.kvEnd ? pageTable[pos / Config::kPageSize] : 0;
    }
  };
  int page[kUnroll] = {};
  if constexpr (kPagesAhead)
    lookUp(work.kvBegin + warp * kStep, page);
  for (int t0 = work.kvBegin + warp * kStep; t0 < work.kvEnd; t0 += kStride) {
    // Every load of the step first, then the math: kUnroll pieces of K and
    // of V in flight per lane (zeros past the chunk: nothing is read).
    uint4 kr[kUnroll], vr[kUnroll];
    int pos[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      pos[u] = t0 + u * kTokens + slot;
      kr[u] = vr[u] = make_uint4(0, 0, 0, 0);
      if (pos[u] < work.kvEnd) {
        if constexpr (!kPagesAhead)
          page[u] = pageTable[pos[u] / Config::kPageSize];
        int64_t off =
            kvOffset<Config>(clampedPage(p, page[u]),
                             pos[u] % Config::kPageSize, head, p.pageStride) *
                Tr::kKVBytes +
            sub * 16;
        kr[u] = __ldcs(reinterpret_cast<const uint4 *>(kBase + off));
        vr[u] = __ldcs(reinterpret_cast<const uint4 *>(vBase + off));
      }
    }
    // The step's pages are checked once its loads are issued: no branch
    // between a page id and the loads it addresses.
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (pos[u] < work.kvEnd)
        checkPage(p, page[u], batchIndex(p, work));
    if constexpr (kPagesAhead)
      lookUp(t0 + kStride, page);
    // Scores of every row: each lane's partial dot, summed over its group.
    float sc[kRows][kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float k[kVec];
      widen(kr[u], k);
#pragma unroll
      for (int j = 0; j < kRows; ++j) {
        float dot = 0.f;
#pragma unroll
        for (int i = 0; i < kVec; ++i)
          dot = fmaf(q[j][i], k[i], dot);
        sc[j][u] = dot;
      }
    }
#pragma unroll
    for (int j = 0; j < kRows; ++j)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int off = kLanes / 2; off > 0; off /= 2)
          sc[j][u] += __shfl_xor_sync(0xffffffffu, sc[j][u], off);
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        sc[j][u] = Variant<Config>::template score<false>(
            sc[j][u], pos[u], qpos[j],
            KeyDistance{float(pos[u] - qpos[j]), 0.f}, scoreScale, rows[j], p);
      Variant<Config>::template modifyScores<kUnroll>(
          [&](int u) -> float & { return sc[j][u]; },
          [&](int u) { return pos[u]; }, qpos[j], scoreScale, rows[j], p);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (!Variant<Config>::visible(pos[u], work.kvEnd, qpos[j], rows[j], p))
          sc[j][u] = negInf();
      float mNew = m[j];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        mNew = fmaxf(mNew, sc[j][u]);
      // A lane group that has seen no visible key keeps a finite base so
      // that exp2 gives 0, not NaN.
      float base = mNew == negInf() ? 0.f : mNew;
      float corr = fastExp2(m[j] - base);
      m[j] = mNew;
      l[j] *= corr;
#pragma unroll
      for (int i = 0; i < kVec; ++i)
        o[j][i] *= corr;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        sc[j][u] = fastExp2(sc[j][u] - base);
        l[j] += sc[j][u];
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float v[kVec];
      widen(vr[u], v);
#pragma unroll
      for (int j = 0; j < kRows; ++j)
#pragma unroll
        for (int i = 0; i < kVec; ++i)
          o[j][i] = fmaf(sc[j][u], v[i], o[j][i]);
    }
  }
  // The warp's lane groups hold the same dims of different tokens: merge
  // them pairwise.
#pragma unroll
  for (int j = 0; j < kRows; ++j) {
#pragma unroll
    for (int off = kLanes; off < 32; off *= 2) {
      float mo = __shfl_xor_sync(0xffffffffu, m[j], off);
      float lo = __shfl_xor_sync(0xffffffffu, l[j], off);
      float mNew = fmaxf(m[j], mo);
      float base = mNew == negInf() ? 0.f : mNew;
      float mine = fastExp2(m[j] - base), theirs = fastExp2(mo - base);
      m[j] = mNew;
      l[j] = l[j] * mine + lo * theirs;
#pragma unroll
      for (int i = 0; i < kVec; ++i)
        o[j][i] = o[j][i] * mine +
                  __shfl_xor_sync(0xffffffffu, o[j][i], off) * theirs;
    }
    if (slot == 0) {
      float *dst = oAll + (warp * kRows + j) * Tr::kOStride + sub * kVec;
#pragma unroll
      for (int i = 0; i < kVec; i += 4)
        *reinterpret_cast<float4 *>(dst + i) =
            make_float4(o[j][i], o[j][i + 1], o[j][i + 2], o[j][i + 3]);
      if (sub == 0) {
        mAll[warp * kRows + j] = m[j];
        lAll[warp * kRows + j] = l[j];
      }
    }
  }
}

/// \brief The end of a CTA: merges the warps' states of its rows (kRowsPerWarp
/// rows of the scratch per warp: m and l in log2 units, unnormalized O rows
/// of kOStride floats) and writes the output, or this chunk's partial and
/// then, in the CTA that completes a split request, the merge of all of them.
template <class Config, int kRowsPerWarp>
__device__ __forceinline__ void
finishCta(const DecodeParams &p, const DecodeWorkItem &work, int head,
          int rowBase, const float *oAll, const float *mAll, const float *lAll,
          float outScale) {
  using Tr = DecodeTraits<Config>;
  using QT = typename Tr::QT;
  constexpr int kWarps = Config::kWarps;
  // Each thread finishes 8 dims of one row at a time.
  constexpr int kSegments = Tr::kHeadDim / 8;
  constexpr int kPartialRows = Config::kQueryLen * Config::kNumQHeads;
  for (int i = threadIdx.x; i < kRowsPerWarp * kSegments; i += kWarps * 32) {
    int row = i / kSegments, d0 = (i % kSegments) * 8;
    int gr = rowBase + row;
    if (gr >= Tr::kRows)
      continue;
    float mMax = negInf();
#pragma unroll
    for (int w = 0; w < kWarps; ++w)
      mMax = fmaxf(mMax, mAll[w * kRowsPerWarp + row]);
    float base = mMax == negInf() ? 0.f : mMax;
    float l = 0.f, acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      float wgt = exp2f(mAll[w * kRowsPerWarp + row] - base);
      l += lAll[w * kRowsPerWarp + row] * wgt;
      const float *src = oAll + (w * kRowsPerWarp + row) * Tr::kOStride + d0;
#pragma unroll
      for (int k = 0; k < 8; ++k)
        acc[k] += src[k] * wgt;
    }
    int qi = gr / Config::kGroupSize;
    int qh = head * Config::kGroupSize + gr % Config::kGroupSize;
    // A split request's chunk is a partial: its row is finished once, by
    // the merge.
    float numer = 1.f;
    if (work.partialIdx < 0)
      numer = Variant<Config>::template finishRow<true>(
          Variant<Config>::row(p, batchIndex(p, work), qh), base, l);
    // l == 0 only for a row that saw no visible key: output 0, LSE -inf.
    float inv = l > 0.f ? outScale * numer / l : 0.f;
    float lse = l > 0.f ? (base + log2f(l)) * kLn2 : negInf();
    int token = work.request * Config::kQueryLen + qi;
    if (work.partialIdx < 0) {
      storeOut8<QT>(static_cast<QT *>(p.out) +
                        int64_t(token) * p.outStrideToken + qh * Tr::kHeadDim +
                        d0,
                    acc, inv);
      if constexpr (Config::kWriteLse)
        if (d0 == 0)
          p.lse[int64_t(token) * Config::kNumQHeads + qh] = lse;
    } else {
      int prow = qi * Config::kNumQHeads + qh;
      float *dst =
          p.partialOut +
          (int64_t(work.partialIdx) * kPartialRows + prow) * Tr::kHeadDim + d0;
      *reinterpret_cast<float4 *>(dst) =
          make_float4(acc[0] * inv, acc[1] * inv, acc[2] * inv, acc[3] * inv);
      *reinterpret_cast<float4 *>(dst + 4) =
          make_float4(acc[4] * inv, acc[5] * inv, acc[6] * inv, acc[7] * inv);
      if (d0 == 0)
        p.partialLse[int64_t(work.partialIdx) * kPartialRows + prow] = lse;
    }
  }
  if (work.partialIdx >= 0)
    mergePartials<Config>(p, work, head, rowBase);
}

/// \brief Paged decode: one work item x KV head x row block per CTA.
/// \tparam Config the variant (see codegen/EmitCuda.cpp)
template <class Config>
__device__ __forceinline__ void decodeKernel(const DecodeParams &p) {
  using Tr = DecodeTraits<Config>;
  using QT = typename Tr::QT;
  using MT = typename Tr::MT;
  constexpr int kWarps = Config::kWarps;
  constexpr int kStages = Config::kStages;
  constexpr int kRowTiles = Config::kRowTiles;
  constexpr int kDimGroups = Tr::kDimGroups;

  // The grid is (work items, KV heads, row blocks), numbered KV head first:
  // CTAs that run at the same time read the heads of the same pages side by
  // side (+0.3-1.3 points of read bandwidth on an H200 over work item first,
  // most with FP8 NHD caches, whose rows of one head are 128 bytes).
  const int linear = blockIdx.x + gridDim.x * blockIdx.y;
  const int item = linear / Config::kNumKVHeads;
  const int head = linear % Config::kNumKVHeads;
  // Both loads at once: grid.x never exceeds the work list's capacity.
  DecodeWorkItem work = p.workItems[item];
  if (item >= *p.numWorkItems)
    return;
  const int rowBase = blockIdx.z * Tr::kTileRows;
  const int seqLen = work.seqLen;
  if constexpr (Config::kMaskMod) {
    // A mask_mod's hidden tiles are never loaded. The host planned the
    // split over every key it knows to be visible; a split request's chunks
    // are spread again over the keys the mask_mod leaves (chunked local
    // attention at 32k sees one key in four), in chunks of at least the
    // schedule's minimum, as the planner would have cut them: the pieces
    // past the visible keys have no work.
    auto narrow = [&](int &begin, int &end) {
      Variant<Config>::template narrowKeys<Tr::kTileTokens>(
          begin, end, batchIndex(p, work), seqLen - Config::kQueryLen,
          seqLen - 1, head * Config::kGroupSize,
          (head + 1) * Config::kGroupSize - 1);
    };
    if (work.partialIdx < 0) {
      narrow(work.kvBegin, work.kvEnd);
    } else {
      // The request's first key as the planner computed it (DecodePlan.cpp).
      int lo = 0, hi = seqLen;
      if constexpr (Config::kSlidingWindow)
        lo = decodeFirstKey(seqLen, Config::kQueryLen, p.windowLeft);
      narrow(lo, hi);
      constexpr int kGranule = Tr::kTileTokens * kWarps;
      int chunk =
          max(ceilDiv(hi - lo, work.numPartials), Config::kMinChunkTokens);
      chunk = ceilDiv(chunk, kGranule) * kGranule;
      int piece = work.partialIdx - work.firstPartial;
      work.kvBegin = min(hi, lo + piece * chunk);
      work.kvEnd = min(hi, work.kvBegin + chunk);
    }
  }
  float scoreScale = p.smScale;
  float outScale = 1.f;
  if constexpr (Tr::kFP8) {
    int si = Config::kPerHeadKVScale ? head : 0;
    scoreScale *= p.kScale[si] * exp2i(-Tr::kLog2Ratio);
    outScale = p.vScale[si] * exp2i(-Tr::kLog2Ratio);
  }
  extern __shared__ __align__(16) char smem[];
  if constexpr (Tr::kSimt) {
    float *oAll = reinterpret_cast<float *>(smem);
    float *mAll = oAll + kWarps * Tr::kRows * Tr::kOStride;
    float *lAll = mAll + kWarps * Tr::kRows;
    simtLoop<Config>(p, work, head, scoreScale, oAll, mAll, lAll);
    __syncthreads();
    finishCta<Config, Tr::kRows>(p, work, head, rowBase, oAll, mAll, lAll,
                                 outScale);
    return;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int r = lane / 4, c = lane % 4;

  // Q in fragment order: for row tile m and dim group a, lane l's two A
  // fragments are the 8 words at qFrag + ((m * kDimGroups + a) * 32 + l) * 8.
  uint32_t *qFrag = reinterpret_cast<uint32_t *>(smem);
  char *pipe = smem + Tr::kQBytes;

  // Start the K/V pipeline first: its loads then overlap the staging of q.
  // This warp's tiles: warp, warp + kWarps, ... of the chunk.
  const int numTiles = ceilDiv(work.kvEnd - work.kvBegin, Tr::kTileTokens);
  const int myTiles = numTiles > warp ? ceilDiv(numTiles - warp, kWarps) : 0;
  char *ring = pipe + warp * kStages * Tr::kStageBytes;
  const KVTileLoader<Config> loader(lane);
  const int32_t *pageTable =
      p.pageTables + int64_t(work.request) * p.pageTableStride;
  auto tileStart = [&](int i) {
    return work.kvBegin + (warp + i * kWarps) * Tr::kTileTokens;
  };
  // Page lookups. With pages of 16 or more tokens a tile lies in one page:
  // lane j holds the page of this warp's tile base + j, and the next 32
  // tiles' pages are loaded 32 tiles ahead, so no tile waits on the block
  // table. With smaller pages, lane t < 16 looks up token t's page per tile.
  constexpr bool kOnePage = Config::kPageSize % Tr::kTileTokens == 0;
  auto lookUp = [&](int i, int token) {
    int pos = tileStart(i) + token;
    return i < myTiles && pos < work.kvEnd ? pageTable[pos / Config::kPageSize]
                                           : 0;
  };
  int windowBase = 0;
  int window = kOnePage ? lookUp(lane, 0) : 0;
  int nextWindow = kOnePage ? lookUp(32 + lane, 0) : 0;
  // Called with nondecreasing i.
  auto pageOf = [&](int i) {
    if constexpr (kOnePage) {
      if (i >= windowBase + 32) {
        windowBase += 32;
        window = nextWindow;
        nextWindow = lookUp(windowBase + 32 + lane, 0);
      }
      return __shfl_sync(0xffffffffu, window, i - windowBase);
    } else {
      return lookUp(i, lane & 15);
    }
  };

  int nextPage = 0;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < myTiles)
      loader.load(p, ring + s * Tr::kStageBytes, tileStart(s), work.kvEnd, head,
                  pageOf(s), batchIndex(p, work));
    cpAsyncCommit();
  }
  nextPage = pageOf(kStages - 1);

  // Stage this row tile of q (zero past the head dim and past the group) in
  // the MMA type.
  for (int i = threadIdx.x; i < Tr::kTileRows * Tr::kDimPad / 8;
       i += kWarps * 32) {
    int row = i / (Tr::kDimPad / 8), d0 = (i % (Tr::kDimPad / 8)) * 8;
    int gr = rowBase + row;
    float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (gr < Tr::kRows && d0 < Tr::kHeadDim) {
      int qi = gr / Config::kGroupSize, hg = gr % Config::kGroupSize;
      const QT *src =
          static_cast<const QT *>(p.q) +
          int64_t(work.request * Config::kQueryLen + qi) * p.qStrideToken +
          (head * Config::kGroupSize + hg) * Tr::kHeadDim + d0;
      uint4 raw = *reinterpret_cast<const uint4 *>(src);
      const QT *e = reinterpret_cast<const QT *>(&raw);
#pragma unroll
      for (int k = 0; k < 8; ++k)
        v[k] = toFloat(e[k]);
    }
    // Row r of a tile feeds fragment words 0/2 (k-step 2a) and 4/6 (2a+1) of
    // lane 4 * (r % 8) + c; row r + 8 the odd words.
    int m = row / 16, rr = row % 16, a = d0 / 32, c = (d0 % 32) / 8;
    uint32_t *frag =
        qFrag + ((m * kDimGroups + a) * 32 + (rr % 8) * 4 + c) * 8 + rr / 8;
    frag[0] = pack2<MT>(v[0], v[1]);
    frag[2] = pack2<MT>(v[2], v[3]);
    frag[4] = pack2<MT>(v[4], v[5]);
    frag[6] = pack2<MT>(v[6], v[7]);
  }
  // The padded dims of every K/V row stay zero: cp.async never writes them.
  if constexpr (Tr::kDataBytes < Tr::kRowBytes) {
    constexpr int kPadWords = (Tr::kRowBytes - Tr::kDataBytes) / 4;
    for (int i = threadIdx.x;
         i < kWarps * kStages * 2 * Tr::kTileTokens * kPadWords;
         i += kWarps * 32) {
      int row = i / kPadWords, w = i % kPadWords;
      reinterpret_cast<uint32_t *>(pipe + row * Tr::kRowStride +
                                   Tr::kDataBytes)[w] = 0;
    }
  }
  __syncthreads();

  // Per-row constants of rows r and r + 8 of every row tile: the query
  // position and the per-head table values (Variant::Row).
  int qpos[kRowTiles][2];
  typename Variant<Config>::Row rows[kRowTiles][2];
#pragma unroll
  for (int m = 0; m < kRowTiles; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      int gr = rowBase + m * 16 + r + 8 * h;
      int qi = gr / Config::kGroupSize;
      qpos[m][h] = seqLen - Config::kQueryLen + qi;
      int qh = head * Config::kGroupSize + gr % Config::kGroupSize;
      rows[m][h] = gr < Tr::kRows
                       ? Variant<Config>::row(p, batchIndex(p, work), qh)
                       : typename Variant<Config>::Row();
    }

  float o[kRowTiles][kDimGroups * 4][4];
  float mRun[kRowTiles][2], lRun[kRowTiles][2];
#pragma unroll
  for (int m = 0; m < kRowTiles; ++m) {
#pragma unroll
    for (int j = 0; j < kDimGroups * 4; ++j)
      o[m][j][0] = o[m][j][1] = o[m][j][2] = o[m][j][3] = 0.f;
    mRun[m][0] = mRun[m][1] = negInf();
    lRun[m][0] = lRun[m][1] = 0.f;
  }

  // Ring slots: tile i is read from readSlot while tile i + kStages - 1 is
  // written to writeSlot (the slot read in the previous iteration).
  int readSlot = 0, writeSlot = kStages - 1;
  for (int i = 0; i < myTiles; ++i) {
    cpAsyncWait<kStages - 2>();
    __syncwarp();
    {
      int f = i + kStages - 1;
      if (f < myTiles)
        loader.load(p, ring + writeSlot * Tr::kStageBytes, tileStart(f),
                    work.kvEnd, head, nextPage, batchIndex(p, work));
      cpAsyncCommit();
      nextPage = pageOf(f + 1);
    }
    const char *kTile = ring + readSlot * Tr::kStageBytes;
    writeSlot = readSlot;
    readSlot = readSlot + 1 == kStages ? 0 : readSlot + 1;
    const char *vTile = kTile + Tr::kTileTokens * Tr::kRowStride;
    const int t0 = tileStart(i);

    // S = Q K^T for 16 tokens (two n8 tiles) and every row tile.
    float s[kRowTiles][2][4];
#pragma unroll
    for (int m = 0; m < kRowTiles; ++m)
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
        s[m][nt][0] = s[m][nt][1] = s[m][nt][2] = s[m][nt][3] = 0.f;
#pragma unroll
    for (int a = 0; a < kDimGroups; ++a) {
      uint32_t kb[2][4];
      loadKFrag<Config>(kb[0], kTile, r, a, c);
      loadKFrag<Config>(kb[1], kTile, 8 + r, a, c);
#pragma unroll
      for (int m = 0; m < kRowTiles; ++m) {
        uint32_t a0[4], a1[4];
        const uint32_t *frag = qFrag + ((m * kDimGroups + a) * 32 + lane) * 8;
        lds128(a0, frag);
        lds128(a1, frag + 4);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          mma16816<MT>(s[m][nt], a0, kb[nt][0], kb[nt][1]);
          mma16816<MT>(s[m][nt], a1, kb[nt][2], kb[nt][3]);
        }
      }
    }

    // Score modifiers, mask, online softmax; P goes to A fragments.
    uint32_t pa[kRowTiles][4];
#pragma unroll
    for (int m = 0; m < kRowTiles; ++m) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float v[4];
        Variant<Config>::template modifyScores<4>(
            [&](int e) -> float & { return s[m][e / 2][2 * h + (e & 1)]; },
            [&](int e) { return t0 + (e / 2) * 8 + 2 * c + (e & 1); },
            qpos[m][h], scoreScale, rows[m][h], p);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          int nt = e / 2;
          int pos = t0 + nt * 8 + 2 * c + (e & 1);
          float x = s[m][nt][2 * h + (e & 1)];
          x = Variant<Config>::template score<false>(
              x, pos, qpos[m][h], KeyDistance{float(pos - qpos[m][h]), 0.f},
              scoreScale, rows[m][h], p);
          v[e] = Variant<Config>::visible(pos, work.kvEnd, qpos[m][h],
                                          rows[m][h], p)
                     ? x
                     : negInf();
        }
        float tmax = fmaxf(fmaxf(v[0], v[1]), fmaxf(v[2], v[3]));
        tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
        tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 2));
        float mNew = fmaxf(mRun[m][h], tmax);
        // A row that has seen no visible key keeps a finite base so that
        // exp2 gives 0, not NaN.
        float base = mNew == negInf() ? 0.f : mNew;
        float corr = fastExp2(mRun[m][h] - base);
        mRun[m][h] = mNew;
        float pr[4];
#pragma unroll
        for (int e = 0; e < 4; ++e)
          pr[e] = fastExp2(v[e] - base);
        lRun[m][h] = lRun[m][h] * corr + (pr[0] + pr[1]) + (pr[2] + pr[3]);
        // Once the running max settles it rarely moves: skip the rescale of
        // the accumulators when no row of the warp needs it.
        if (__any_sync(0xffffffffu, corr != 1.f)) {
#pragma unroll
          for (int j = 0; j < kDimGroups * 4; ++j) {
            o[m][j][2 * h] *= corr;
            o[m][j][2 * h + 1] *= corr;
          }
        }
        // A fragment of P: a0/a1 = rows r/r+8 of tokens 2c..; a2/a3 = +8.
        pa[m][h] = pack2<MT>(pr[0], pr[1]);
        pa[m][2 + h] = pack2<MT>(pr[2], pr[3]);
      }
    }

    // O += P V.
#pragma unroll
    for (int a = 0; a < kDimGroups; ++a) {
      uint32_t vb[4][2];
      loadVFrags<Config>(vb, vTile, a, r, c);
#pragma unroll
      for (int m = 0; m < kRowTiles; ++m)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          mma16816<MT>(o[m][a * 4 + j], pa[m], vb[j][0], vb[j][1]);
    }
  }
  cpAsyncWait<0>();

  // Merge the warps through shared memory: O rows, then m and l per row.
  __syncthreads();
  float *oAll = reinterpret_cast<float *>(pipe);
  float *mAll = oAll + kWarps * Tr::kTileRows * Tr::kOStride;
  float *lAll = mAll + kWarps * Tr::kTileRows;
#pragma unroll
  for (int m = 0; m < kRowTiles; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = lRun[m][h];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      int row = m * 16 + r + 8 * h;
      if (c == 0) {
        mAll[warp * Tr::kTileRows + row] = mRun[m][h];
        lAll[warp * Tr::kTileRows + row] = l;
      }
      float *dst = oAll + (warp * Tr::kTileRows + row) * Tr::kOStride;
#pragma unroll
      for (int a = 0; a < kDimGroups; ++a) {
        // This thread owns dims 32a + 8c + [0, 8): n8 tile 4a + j holds
        // 32a + 8c + j (c0/c2) and 32a + 8c + 4 + j (c1/c3).
        float4 lo, hi;
        lo.x = o[m][a * 4 + 0][2 * h];
        lo.y = o[m][a * 4 + 1][2 * h];
        lo.z = o[m][a * 4 + 2][2 * h];
        lo.w = o[m][a * 4 + 3][2 * h];
        hi.x = o[m][a * 4 + 0][2 * h + 1];
        hi.y = o[m][a * 4 + 1][2 * h + 1];
        hi.z = o[m][a * 4 + 2][2 * h + 1];
        hi.w = o[m][a * 4 + 3][2 * h + 1];
        *reinterpret_cast<float4 *>(dst + a * 32 + c * 8) = lo;
        *reinterpret_cast<float4 *>(dst + a * 32 + c * 8 + 4) = hi;
      }
    }
  __syncthreads();

  finishCta<Config, Tr::kTileRows>(p, work, head, rowBase, oAll, mAll, lAll,
                                   outScale);
}

} // namespace attn

#endif // ATTN_TEMPLATES_DECODE_CUH
