//===- prefill.cuh - ragged and paged prefill attention --------*- CUDA -*-===//
//
// FlashAttention-2-style prefill on mma.sync tensor cores for every arch from
// sm_80. A CTA takes blockM query rows of one request and one q head (a plan
// work item x grid.y), or with Config::kPackGqa the rows of blockM / group
// tokens for every q head of one KV head (row i: token i / group, head
// i % group), so short queries fill the tile and one K/V read serves the
// group; its warps own 16 or 32 rows each (one or two MMA row
// tiles). K/V tiles of blockN keys
// stream through a cp.async ring shared by the warps; S = Q K^T, the online
// softmax and O += P V stay in registers. Tiles no row of the CTA can see
// (causal, sliding window) are never loaded.
//
// Keys and values come from contiguous ragged k / v (Config::kPaged false)
// or from a paged cache through the request's page-table row (chunked
// prefill, prefix caching). FP8 rows (ragged or cached) land raw in the
// ring and are widened to the MMA type in one pass per tile; their
// dequantization scales fold into the softmax scale (K) and the output
// normalization (V).
//
// Operands: Q and K tiles are read with ldmatrix, V with ldmatrix.trans;
// shared-memory rows are padded by 16 bytes so the 8 rows of every ldmatrix
// fall in different banks. The head dim is padded to a multiple of 32 with
// zeros (cp.async zero-fill), so every supported head dim takes this path.
// MLA's prefill (Config::kRopeDim): ragged 16-bit q/k of head dim + rope
// dim and v/out of the head dim; rows are sized for q/k, and P V and O
// span v's dims only.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEMPLATES_PREFILL_CUH
#define ATTN_TEMPLATES_PREFILL_CUH

#include "attn/common.cuh"
#include "attn/prefill_layout.h"
#include "attn/variant.cuh"

namespace attn {

/// \brief Sizes derived from a prefill Config.
template <class Config> struct PrefillTraits {
  using QT = typename Config::QType;
  using KVT = typename Config::KVType;
  static constexpr bool kFP8 = IsFP8<KVT>::value;
  static constexpr int kKVBytes = kFP8 ? 1 : 2;
  /// V's and the output's head dim; Q and K rows have kQKDim (MLA's form:
  /// Config::kRopeDim more, 16-bit ragged k/v only). Shared-memory rows are
  /// sized for kQKDim; V uses the first kVDimPad dims of its rows.
  static constexpr int kHeadDim = Config::kHeadDim;
  static constexpr int kQKDim = kHeadDim + Config::kRopeDim;
  static constexpr int kDimPad = prefillDimPad(kQKDim);
  static constexpr int kVDimPad = prefillDimPad(kHeadDim);
  static constexpr int kRowStride = prefillRowStride(kQKDim); // 16-bit rows
  static constexpr int kRingRowBytes = prefillRingRowBytes(kQKDim, kKVBytes);
  static constexpr int kThreads = Config::kWarps * 32;
  static constexpr int kQBytes = Config::kBlockM * kRowStride;
  static constexpr int kRingTileBytes =
      Config::kBlockN * kRingRowBytes; // K or V
  static constexpr int kStageBytes = 2 * kRingTileBytes;
  static constexpr int kTileBytes =
      Config::kBlockN * kRowStride; // widened K or V
  static constexpr int kSmemBytes = prefillSmemBytes(
      kQKDim, kKVBytes, Config::kBlockM, Config::kBlockN, Config::kStages);
  static_assert(Config::kRopeDim == 0 || (!kFP8 && !Config::kPaged),
                "q/k wider than v: 16-bit ragged k/v only");
  /// 16-byte copies where every row is 16-byte aligned; 8-byte copies for
  /// FP8 rows of a head dim that is an odd multiple of 8.
  static constexpr int kCopyBytes =
      kQKDim * kKVBytes % 16 == 0 && kHeadDim * kKVBytes % 16 == 0 ? 16 : 8;
  /// 16-row MMA tiles per warp: two halve the shared-memory reads of K and
  /// V per FLOP (each fragment feeds both tiles).
  static constexpr int kMTiles = Config::kBlockM / (16 * Config::kWarps);
  static_assert(Config::kBlockM == 16 * Config::kWarps * kMTiles &&
                    (kMTiles == 1 || kMTiles == 2),
                "a warp owns 16 or 32 query rows");
  static_assert(Config::kBlockN % 16 == 0, "keys come in 16-key MMA steps");
};

/// \brief Copies `rows` rows of one head of kDims dims into a shared tile of
/// `rowBytes` per row: row i starts at element `rowStart(i)` of `base`.
/// Rows past `validRows` and columns past kDims become zeros (nothing is
/// read), so padded dims and keys past the end contribute nothing.
template <class Config, int kElemBytes, int kDims, class RowStart>
__device__ __forceinline__ void loadRows(char *tile, int rowBytes,
                                         const void *base, int validRows,
                                         int rows, RowStart rowStart) {
  using Tr = PrefillTraits<Config>;
  constexpr int kCopy = kElemBytes == 2 ? 16 : Tr::kCopyBytes;
  constexpr int kChunksPerRow = Tr::kDimPad * kElemBytes / kCopy;
  constexpr int kDataChunks = kDims * kElemBytes / kCopy;
  const char *src = static_cast<const char *>(base);
  for (int i = threadIdx.x; i < rows * kChunksPerRow; i += Tr::kThreads) {
    int row = i / kChunksPerRow, chunk = i % kChunksPerRow;
    bool valid = row < validRows && chunk < kDataChunks;
    int64_t elem = valid ? rowStart(row) : 0;
    cpAsync<kCopy>(tile + row * rowBytes + chunk * kCopy,
                   src + elem * kElemBytes + (valid ? chunk * kCopy : 0),
                   valid);
  }
}

/// \brief Copies the K and V rows of one tile of blockN keys into a K and a
/// V ring tile (zeros past `validRows`). Row i's K starts at element
/// kStart(key(i), i) of `k` and its V at vStart(key(i), i) of `v`, where
/// key() is the 32-bit lookup with latency (a page-table read for paged
/// caches) and the starts are arithmetic; kStart is each key's first use
/// (for a K row before its V row). Where the
/// threads split evenly over a row's chunks, each thread keeps one chunk
/// column and takes each of its rows' key once for K and V together, all
/// keys before any copy so the lookups are in flight at once; otherwise
/// every chunk takes its own.
template <class Config, class Key, class KStart, class VStart>
__device__ __forceinline__ void
loadKVTile(char *kTile, char *vTile, const void *k, const void *v,
           int validRows, Key key, KStart kStart, VStart vStart) {
  using Tr = PrefillTraits<Config>;
  constexpr int kElem = Tr::kKVBytes;
  constexpr int kCopy = Tr::kCopyBytes;
  constexpr int kChunksPerRow = Tr::kDimPad * kElem / kCopy;
  if constexpr (Tr::kThreads % kChunksPerRow == 0 &&
                Config::kBlockN % (Tr::kThreads / kChunksPerRow) == 0) {
    constexpr int kKChunks = Tr::kQKDim * kElem / kCopy;
    constexpr int kVChunks = Tr::kHeadDim * kElem / kCopy;
    constexpr int kRowsPerPass = Tr::kThreads / kChunksPerRow;
    constexpr int kPasses = Config::kBlockN / kRowsPerPass;
    const int chunk = threadIdx.x % kChunksPerRow;
    const int firstRow = threadIdx.x / kChunksPerRow;
    int32_t keys[kPasses];
#pragma unroll
    for (int j = 0; j < kPasses; ++j) {
      int row = firstRow + j * kRowsPerPass;
      keys[j] = row < validRows ? key(row) : 0;
    }
    const char *kSrc = static_cast<const char *>(k);
    const char *vSrc = static_cast<const char *>(v);
#pragma unroll
    for (int j = 0; j < kPasses; ++j) {
      int row = firstRow + j * kRowsPerPass;
      bool kValid = row < validRows && chunk < kKChunks;
      bool vValid = row < validRows && chunk < kVChunks;
      int64_t kAt = kValid ? kStart(keys[j], row) * kElem + chunk * kCopy : 0;
      int64_t vAt = vValid ? vStart(keys[j], row) * kElem + chunk * kCopy : 0;
      int dst = row * Tr::kRingRowBytes + chunk * kCopy;
      cpAsync<kCopy>(kTile + dst, kSrc + kAt, kValid);
      cpAsync<kCopy>(vTile + dst, vSrc + vAt, vValid);
    }
  } else {
    auto kRow = [&](int row) { return kStart(key(row), row); };
    auto vRow = [&](int row) { return vStart(key(row), row); };
    loadRows<Config, kElem, Tr::kQKDim>(kTile, Tr::kRingRowBytes, k, validRows,
                                        Config::kBlockN, kRow);
    loadRows<Config, kElem, Tr::kHeadDim>(vTile, Tr::kRingRowBytes, v,
                                          validRows, Config::kBlockN, vRow);
  }
}

/// \brief Widens one raw FP8 K and V tile of the ring into the 16-bit tiles
/// the MMAs read (values times 2^DequantRatio; the kernel folds the ratio
/// and the cache scales into its softmax scale and output normalization).
template <class Config>
__device__ __forceinline__ void widenFP8Tiles(char *dst, const char *raw) {
  using Tr = PrefillTraits<Config>;
  using QT = typename Tr::QT;
  constexpr int kPerRow = Tr::kDimPad / 8; // 8 elements per step
  constexpr int kSteps = 2 * Config::kBlockN * kPerRow;
  for (int i = threadIdx.x; i < kSteps; i += Tr::kThreads) {
    int row = i / kPerRow, piece = i % kPerRow; // K rows, then V rows
    uint2 in = *reinterpret_cast<const uint2 *>(raw + row * Tr::kRingRowBytes +
                                                piece * 8);
    uint32_t words[2] = {in.x, in.y}, out[4];
#pragma unroll
    for (int w = 0; w < 2; ++w)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        out[2 * w + h] =
            widenFP8Pair<typename Tr::KVT, QT>(words[w] >> (16 * h));
    *reinterpret_cast<uint4 *>(dst + row * Tr::kRowStride + piece * 16) =
        make_uint4(out[0], out[1], out[2], out[3]);
  }
}

/// \brief Prefill: one query tile of one request and one q head (or one
/// KV head's q heads, packed).
template <class Config>
__device__ __forceinline__ void prefillKernel(const PrefillParams &p) {
  using Tr = PrefillTraits<Config>;
  using QT = typename Tr::QT;
  constexpr int kBlockM = Config::kBlockM, kBlockN = Config::kBlockN;
  constexpr int kStages = Config::kStages;
  constexpr int kNTiles = kBlockN / 8;      // n8 tiles of S per warp
  constexpr int kOTiles = Tr::kVDimPad / 8; // n8 tiles of O per warp
  constexpr int kKSteps = Tr::kDimPad / 16; // k16 steps of Q K^T
  // Up to head dim 128 the warp's Q fragments stay in registers for the
  // whole loop; larger heads reread them from shared memory each tile.
  constexpr int kMTiles = Tr::kMTiles;
  constexpr bool kQInRegisters = kKSteps <= 8 && kMTiles == 1;

  const PrefillWorkItem work = p.workItems[blockIdx.x];
  if (int(blockIdx.x) >= *p.numWorkItems)
    return;
  // Packed: tile row i is token i / kRowsPerToken of head qHead + i %
  // kRowsPerToken. The variant has no per-head values then (checkPackGqa),
  // so qHead's stand for every row's.
  constexpr int kRowsPerToken = Config::kPackGqa ? Config::kGroupSize : 1;
  constexpr int kTileTokens = kBlockM / kRowsPerToken;
  const int kvHead =
      Config::kPackGqa ? int(blockIdx.y) : blockIdx.y / Config::kGroupSize;
  const int qHead =
      Config::kPackGqa ? kvHead * Config::kGroupSize : int(blockIdx.y);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int r = lane / 4, c = lane % 4;

  // Positions: query row i of the request sits at kvLen - qLen + i, so a
  // chunk of new tokens lines up with the end of its keys.
  const int shift = work.kvLen - work.qLen;
  const int tileTokens = min(kTileTokens, work.qLen - work.tileBegin);
  const int tileRows = tileTokens * kRowsPerToken;
  const int firstPos = shift + work.tileBegin;
  const int lastPos = firstPos + tileTokens - 1;
  // Keys any row of this tile can see; tiles outside are skipped.
  int kvEnd = work.kvLen, kvBegin = 0;
  Variant<Config>::template visibleKeys<kBlockN>(
      kvBegin, kvEnd, work.request, firstPos, lastPos, qHead,
      qHead + kRowsPerToken - 1, p.windowLeft);
  const int numTiles =
      kvEnd > kvBegin ? (kvEnd - kvBegin + kBlockN - 1) / kBlockN : 0;

  extern __shared__ __align__(16) char smem[];
  char *qTile = smem;
  char *ring = smem + Tr::kQBytes;
  char *widened = ring + kStages * Tr::kStageBytes; // FP8 caches only

  const int32_t *pages = nullptr; // the request's page-table row, from kvStart
  if constexpr (Config::kPaged)
    pages = p.pageTables + int64_t(work.request) * p.pageTableStride +
            work.kvStart / Config::kPageSize;
  auto loadTile = [&](int t, int slot) {
    int start = kvBegin + t * kBlockN;
    char *stage = ring + slot * Tr::kStageBytes;
    int valid = min(kBlockN, work.kvLen - start);
    if constexpr (Config::kPaged) {
      // Key: the row's page; K and V share the offset within the cache.
      // The page is checked at its first use (K's), not where it is read,
      // so that a tile's page reads stay in flight together.
      auto offset = [&](int32_t page, int row) {
        return kvOffset<Config>(page, (start + row) % Config::kPageSize, kvHead,
                                p.pageStride);
      };
      loadKVTile<Config>(
          stage, stage + Tr::kRingTileBytes, p.k, p.v, valid,
          [&](int row) { return pages[(start + row) / Config::kPageSize]; },
          [&](int32_t page, int row) {
            checkPage(p, page, work.request);
            return offset(clampedPage(p, page), row);
          },
          [&](int32_t page, int row) {
            return offset(clampedPage(p, page), row);
          });
    } else {
      // Key: the row's token in k / v.
      const int32_t first = work.kvStart + start;
      const int64_t kHeadOffset = int64_t(kvHead) * Tr::kQKDim;
      const int64_t vHeadOffset = int64_t(kvHead) * Tr::kHeadDim;
      loadKVTile<Config>(
          stage, stage + Tr::kRingTileBytes, p.k, p.v, valid,
          [&](int row) { return first + row; },
          [&](int32_t token, int) {
            return token * p.kStrideToken + kHeadOffset;
          },
          [&](int32_t token, int) {
            return token * p.vStrideToken + vHeadOffset;
          });
    }
  };

  // Q tile, then the first K/V tiles; all as cp.async groups.
  {
    const int64_t first = work.qStart + work.tileBegin;
    loadRows<Config, 2, Tr::kQKDim>(
        qTile, Tr::kRowStride, p.q, tileRows, kBlockM, [&](int row) {
          return (first + row / kRowsPerToken) * p.qStrideToken +
                 int64_t(qHead + row % kRowsPerToken) * Tr::kQKDim;
        });
  }
  cpAsyncCommit();
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < numTiles)
      loadTile(s, s);
    cpAsyncCommit();
  }

  // Per-row constants of this thread's rows r and r + 8 of the warp.
  // Row m * 16 + r (+ 8) of this warp's 16 * kMTiles rows.
  const int warpRow0 = warp * 16 * kMTiles;
  int rowPos[kMTiles][2];
#pragma unroll
  for (int m = 0; m < kMTiles; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      rowPos[m][h] = firstPos + (warpRow0 + m * 16 + r + 8 * h) / kRowsPerToken;
  // The q head's per-head table values, loaded before the key loop.
  const typename Variant<Config>::Row headValues =
      Variant<Config>::row(p, work.request, qHead);

  float o[kMTiles][kOTiles][4];
  PrefillSoftmaxRow rows[kMTiles][2];
#pragma unroll
  for (int m = 0; m < kMTiles; ++m)
#pragma unroll
    for (int j = 0; j < kOTiles; ++j)
      o[m][j][0] = o[m][j][1] = o[m][j][2] = o[m][j][3] = 0.f;
  float qkScale, vDequant;
  prefillScales<typename Tr::KVT, Config::kPerHeadKVScale>(p, kvHead, qkScale,
                                                           vDequant);
  // Plain and soft-capped scores stay without their last factor in m
  // (Variant::foldedScale), which joins exp2's argument in one FFMA; other
  // modified scores are already in log2 units.
  const float expScale = Variant<Config>::foldedScale(qkScale, p);

  // ldmatrix row addresses of this lane (see prefill.cuh header).
  const int aRow = warpRow0 + (lane % 16), aCol = (lane / 16) * 8; // Q
  const int bRow = (lane % 8) + (lane / 16) * 8,
            bCol = ((lane / 8) % 2) * 8; // K
  const int vRow = (lane % 8) + ((lane / 8) % 2) * 8,
            vCol = (lane / 16) * 8; // V

  uint32_t qFrag[kQInRegisters ? kKSteps : 1][4];
  for (int t = 0; t < numTiles; ++t) {
    cpAsyncWait<kStages - 2>();
    __syncthreads();
    if constexpr (kQInRegisters)
      if (t == 0) // the Q tile arrived with the first K/V tile
#pragma unroll
        for (int k = 0; k < kKSteps; ++k)
          ldmatrixX4(qFrag[k],
                     qTile + aRow * Tr::kRowStride + (k * 16 + aCol) * 2);
    // Refill the slot everyone finished reading in the previous iteration.
    if (t + kStages - 1 < numTiles)
      loadTile(t + kStages - 1, (t + kStages - 1) % kStages);
    cpAsyncCommit();

    const char *kTile = ring + (t % kStages) * Tr::kStageBytes;
    if constexpr (Tr::kFP8) {
      widenFP8Tiles<Config>(widened, kTile);
      __syncthreads();
      kTile = widened;
    }
    const char *vTile = kTile + Tr::kTileBytes;
    const int tileStart = kvBegin + t * kBlockN;

    // S = Q K^T: 16 rows x blockN keys for this warp.
    float s[kMTiles][kNTiles][4];
#pragma unroll
    for (int m = 0; m < kMTiles; ++m)
#pragma unroll
      for (int n = 0; n < kNTiles; ++n)
        s[m][n][0] = s[m][n][1] = s[m][n][2] = s[m][n][3] = 0.f;
#pragma unroll
    for (int k = 0; k < kKSteps; ++k) {
      uint32_t a[kMTiles][4];
#pragma unroll
      for (int m = 0; m < kMTiles; ++m) {
        if constexpr (kQInRegisters) {
#pragma unroll
          for (int e = 0; e < 4; ++e)
            a[m][e] = qFrag[k][e];
        } else {
          ldmatrixX4(a[m], qTile + (aRow + m * 16) * Tr::kRowStride +
                               (k * 16 + aCol) * 2);
        }
      }
#pragma unroll
      for (int n = 0; n < kNTiles; n += 2) {
        uint32_t b[4];
        ldmatrixX4(b, kTile + (n * 8 + bRow) * Tr::kRowStride +
                          (k * 16 + bCol) * 2);
#pragma unroll
        for (int m = 0; m < kMTiles; ++m) {
          mma16816<QT>(s[m][n], a[m], b[0], b[1]);
          mma16816<QT>(s[m][n + 1], a[m], b[2], b[3]);
        }
      }
    }

    // Score modifiers, masks, online softmax. Plain scores stay unscaled
    // until one FFMA folds scale, log2(e) and the running max into exp2's
    // argument; masks are applied only on tiles that cut a row's keys.
    const int warpFirstPos = firstPos + warpRow0 / kRowsPerToken;
    const int warpLastPos =
        firstPos + (warpRow0 + 16 * kMTiles - 1) / kRowsPerToken;
    const bool needMask =
        Variant<Config>::maskModMayHide(work.request, warpFirstPos, warpLastPos,
                                        tileStart, tileStart + kBlockN - 1,
                                        qHead) ||
        tileStart + kBlockN > work.kvLen ||
        (Config::kCausal && tileStart + kBlockN - 1 > warpFirstPos) ||
        (Config::kSlidingWindow && tileStart < warpLastPos - p.windowLeft);
    uint32_t pa[kMTiles][kBlockN / 16][4];
#pragma unroll
    for (int mh = 0; mh < 2 * kMTiles; ++mh) {
      const int m = mh / 2, h = mh % 2;
      float v[kNTiles][2];
      // key - rowPos: one conversion per tile and row (KeyDistance).
      const float distBase = float(tileStart + 2 * c - rowPos[m][h]);
      Variant<Config>::template modifyScores<2 * kNTiles>(
          [&](int i) -> float & { return s[m][i / 2][2 * h + i % 2]; },
          [&](int i) { return tileStart + (i / 2) * 8 + 2 * c + i % 2; },
          rowPos[m][h], qkScale, headValues, p);
      auto scoresOf = [&](auto maskTag) {
        float tmax = negInf();
#pragma unroll
        for (int n = 0; n < kNTiles; ++n)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            int key = tileStart + n * 8 + 2 * c + e;
            float x = prefillScore<Config, decltype(maskTag)::value>(
                s[m][n][2 * h + e], key, rowPos[m][h],
                KeyDistance{distBase, float(n * 8 + e)}, work.kvLen, qkScale,
                headValues, p);
            v[n][e] = x;
            tmax = fmaxf(tmax, x);
          }
        return tmax;
      };
      float tmax = needMask ? scoresOf(BoolConstant<true>())
                            : scoresOf(BoolConstant<false>());
      tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
      tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 2));
      const float corr = rows[m][h].update<2 * kNTiles>(
          tmax, expScale, 0.f,
          [&](int i) -> float & { return v[i / 2][i % 2]; });
      // A fragment of P for keys 16j..16j+15: n8 tile 2j feeds a0/a1 (rows
      // r / r+8), tile 2j+1 feeds a2/a3.
#pragma unroll
      for (int n = 0; n < kNTiles; ++n)
        pa[m][n / 2][(n % 2) * 2 + h] = pack2<QT>(v[n][0], v[n][1]);
      if (__any_sync(0xffffffffu, corr != 1.f)) {
#pragma unroll
        for (int j = 0; j < kOTiles; ++j) {
          o[m][j][2 * h] *= corr;
          o[m][j][2 * h + 1] *= corr;
        }
      }
    }

    // O += P V.
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk)
#pragma unroll
      for (int j = 0; j < kOTiles; j += 2) {
        uint32_t b[4];
        ldmatrixX4Trans(b, vTile + (kk * 16 + vRow) * Tr::kRowStride +
                               (j * 8 + vCol) * 2);
#pragma unroll
        for (int m = 0; m < kMTiles; ++m) {
          mma16816<QT>(o[m][j], pa[m][kk], b[0], b[1]);
          mma16816<QT>(o[m][j + 1], pa[m][kk], b[2], b[3]);
        }
      }
  }
  cpAsyncWait<0>();

  // Normalize and store rows r and r + 8 of each of this warp's row tiles.
#pragma unroll
  for (int mh = 0; mh < 2 * kMTiles; ++mh) {
    const int m = mh / 2, h = mh % 2;
    float l = rows[m][h].l;
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    int row = warpRow0 + m * 16 + r + 8 * h;
    if (row >= tileRows)
      continue;
    float mRow = rows[m][h].m * expScale; // log2 units
    float numer =
        Variant<Config>::template finishRow<true>(headValues, mRow, l);
    float inv = l > 0.f ? vDequant * numer / l : 0.f; // no visible key: 0
    int64_t token = work.outStart + work.tileBegin + row / kRowsPerToken;
    const int head = qHead + row % kRowsPerToken;
    QT *dst = static_cast<QT *>(p.out) + token * p.outStrideToken +
              int64_t(head) * Tr::kHeadDim;
#pragma unroll
    for (int j = 0; j < kOTiles; ++j) {
      int col = j * 8 + 2 * c;
      if (col < Tr::kHeadDim)
        *reinterpret_cast<uint32_t *>(dst + col) =
            pack2<QT>(o[m][j][2 * h] * inv, o[m][j][2 * h + 1] * inv);
    }
    if constexpr (Config::kWriteLse)
      if (c == 0)
        p.lse[token * Config::kNumQHeads + head] =
            l > 0.f ? (mRow + log2f(l)) * kLn2 : negInf();
  }
}

} // namespace attn

#endif // ATTN_TEMPLATES_PREFILL_CUH
