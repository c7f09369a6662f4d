//===- prefill_sm90.cuh - ragged prefill on Hopper (wgmma + TMA) -*- CUDA
//-*-===//
//
// FlashAttention-3-style ragged prefill for sm_90a. A CTA takes blockM query
// rows of one request and one q head (a plan work item x grid.y), like the
// sm_80 template (prefill.cuh), with warp-specialized roles:
//
//   warpgroup 0 (producer): one thread issues every load as a bulk tensor
//     copy (TMA, cp.async.bulk.tensor) through host-built tensor maps: the
//     Q tile once, then K and V tiles of blockN keys into a ring of kStages
//     shared-memory stages. Each stage has a `full` mbarrier (completed by
//     the copies' byte count) and an `empty` mbarrier (every consumer thread
//     arrives once it no longer reads the stage). It gives its registers to
//     the consumers (setmaxnreg).
//   warpgroups 1.. (consumers): 64 query rows each. S = Q K^T by wgmma with
//     both operands in shared memory; the online softmax in registers (the
//     S accumulator has the mma.sync C-fragment layout per warp, so it is
//     the sm_80 template's softmax); O += P V by wgmma with P from
//     registers (the C fragment of S is, once rounded to 16 bits, the A
//     fragment) and V from shared memory, transposed by the descriptor.
//     Each consumer issues the S wgmma of tile t, then the PV wgmma of
//     tile t - 1, and runs the softmax of tile t while PV runs (K and V
//     stages have their own barriers, so K is released first); at head
//     dim 128 the two consumers also take turns issuing (named barriers),
//     so one's softmax runs under the other's wgmma.
//
// The kernel's named parts: Sm90Work (the pairs a CTA takes), Sm90Smem (the
// shared-memory layout and its barriers), the producer's sm90Load (thread
// 0's TMA copies), sm90Widen (FP8) and sm90CheckPages (16-bit paged), and
// Sm90Consumer (prepareQ, issueQK, softmax, issuePV, run, store);
// prefillSm90Body only assigns them their warps. The online softmax is
// PrefillSoftmaxRow (variant.cuh), shared with prefill.cuh.
//
// Shared-memory tiles are written by TMA with the 128-byte swizzle and read
// by wgmma through descriptors of the same swizzle: a tile of R rows and
// head dim D is D / 64 column blocks of R rows x 128 bytes, each 1024-byte
// aligned. Keys past a request's end (the next request's rows, or zeros past
// the tensor) are masked in S, and their P is 0. Tiles no row of the CTA can
// see (causal, sliding window) are never loaded.
//
// Paged K/V (Config::kPaged; attn.paged_prefill over a 16-bit cache of q's
// type): the producer reads the request's page-table entries and issues
// one box of kBoxRows = gcd(page size, blockN) tokens per page piece of a
// tile (8 boxes of 16 tokens for a 128-key tile over 16-token pages), each
// covering every column block, all completing on the stage's barrier;
// boxes past the request's last page read page -1, which TMA fills with
// zeros (so does a page id outside the cache: the maps end at its last
// page; a producer warp reports the id).
// A box is dense in shared memory, so paged K/V tiles are laid out
// as [8-row group][column block][8 rows][128 bytes] (the 5-d tensor maps
// of runtime/kernels/Prefill.cpp, encodePagesMap, walk the cache in that order)
// and the wgmma descriptors step 8-row groups by kKVRowGroupBytes instead
// of 1024. Rows of the last page past the request's end hold whatever the
// cache holds (NaN, say): the consumers zero those V rows in shared memory
// before P V, since P = 0 does not cancel NaN. The consumers are otherwise
// the ragged ones.
//
// FP8 caches (e4m3, e5m2): the producer thread copies the same boxes, raw
// and unswizzled (64-byte rows: the 16-bit layout at half the width), into
// a ring of raw slots (one K or V tile each, 2 * kRawStages); the producer
// warpgroup's other three
// warps widen each raw tile into the 16-bit K and V rings (to f16, exactly:
// one conversion per two values) while the consumers run the MMAs of
// earlier tiles, and complete the 16-bit stages' full barriers themselves.
// Both MMAs then run in f16 (Traits::MT); a bf16 Q tile is converted in
// place once per work item (kQToHalf). K's dequantization scale joins the
// softmax scale, V's the output normalization, as in prefill.cuh. On the
// H200 this runs at 0.76-0.90x the bf16 cache's speed at head dims 64 and
// 128, 0.59-0.73x at 256 (docs/perf-log/history.md, "FP8 caches on the wgmma
// path"); the widening is the limiting stage.
//
// FP8 compute (Config::kFP8Compute, `fp8_compute`; FP8 caches or ragged
// FP8 k/v at head dims 128 and 256): both MMAs in FP8. K lands by TMA
// swizzled for the MMA (128 dims per 128-byte row); V lands raw (64-byte
// swizzled) and the three warps transpose it into V^T with ldmatrix /
// stmatrix (transposeFP8VTileSm90), FP8 wgmma
// reading B K-major only. Each consumer quantizes its Q rows to e4m3 in
// place, one scale per row, taken back in that row's score scale (or,
// Config::kFP8Query, takes an e4m3 q the caller quantized with its scale
// per q head); P is 2^8 times its value in e4m3, in V^T's key order
// (fp8VtSlot); O is accumulated in two levels (a fresh fp32 accumulator
// per tile, in parts of kPVPartN head dims, added to O). On the H200
// 1.01-1.33x the bf16 cache at head dim 128, 0.97-1.13x at 256 (1.08-1.11x
// ragged bf16 over ragged e4m3 rows); the V transposition and the softmax
// share the limit (docs/perf-log/history.md, "V transposed by ldmatrix /
// stmatrix").
//
// Supported: 16-bit q (and e4m3 q with FP8 compute), head dims 64, 128 and
// 256 (256: 64-key tiles, O += P V as one N = 256 wgmma per 16 keys over
// the 4 column blocks of V), every mask and score modifier of the sm_80
// template, LSE; contiguous (ragged) k/v of q's type or FP8, or a paged
// cache of q's type or FP8 with pages of a multiple of 8 tokens, NHD or
// HND. FP8 k/v, ragged or paged, take the same two paths (widened to f16,
// or FP8 compute); only their tiles' layout differs (kvOffset, rawOffset).
// MLA's prefill (Config::kRopeDim): ragged 16-bit q/k of kQKDim = head dim
// + rope dim (192 = 128 + 64) and v/out of the head dim; Q and K tiles
// have kQKDim / 64 column blocks, V tiles and O the head dim's.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEMPLATES_PREFILL_SM90_CUH
#define ATTN_TEMPLATES_PREFILL_SM90_CUH

#include "attn/common.cuh"
#include "attn/prefill_layout.h"
#include "attn/variant.cuh"
#include "attn/wgmma.cuh"

namespace attn {

constexpr int sm90Gcd(int a, int b) { return b == 0 ? a : sm90Gcd(b, a % b); }

/// \brief Sizes derived from an sm_90a prefill Config.
template <class Config> struct PrefillSm90Traits {
  using QT = typename Config::QType;
  using KVT = typename Config::KVType;
  static constexpr bool kFP8 = IsFP8<KVT>::value;
  /// The MMAs' input type: q's, or f16 over FP8 caches: one conversion
  /// instruction widens two FP8 values to f16 (four to bf16), and P in
  /// [0, 1] keeps 3 more bits than in bf16. A bf16 Q tile is then scaled
  /// per warp by a power of two into f16's range and converted in place
  /// (kQToHalf); the scores take the power back.
  /// FP8 compute (Config::kFP8Compute): both MMAs in FP8 (e4m3 Q and P,
  /// the cache's type for K and V); K lands swizzled for the MMA, V raw and
  /// is transposed by the wideners (FP8 wgmma reads B K-major only).
  static constexpr bool kFP8Compute = Config::kFP8Compute;
  static constexpr bool kWiden = kFP8 && !kFP8Compute;
  using MT = typename Conditional<
      kFP8, typename Conditional<kFP8Compute, KVT, __half>::type, QT>::type;
  static constexpr bool kQToHalf = kWiden && !IsSame<QT, __half>::value;
  static constexpr int kMmaBytes = kFP8Compute ? 1 : 2; // of Q, K and V tiles
  /// V's and the output's head dim; Q and K rows have kQKDim (MLA's form:
  /// Config::kRopeDim more, 16-bit ragged k/v only).
  static constexpr int kHeadDim = Config::kHeadDim;
  static constexpr int kQKDim = kHeadDim + Config::kRopeDim;
  static constexpr int kBlockM = Config::kBlockM, kBlockN = Config::kBlockN;
  static constexpr int kConsumers = Config::kWarps / 4 - 1; // warpgroups
  static constexpr int kThreads = Config::kWarps * 32;
  /// 128-byte column blocks of a Q or K row as the MMAs read them, and of
  /// the 16-bit Q tile TMA writes (FP8 compute quantizes it in place).
  static constexpr int kColBlocks = kQKDim * kMmaBytes / 128;
  static constexpr int kQColBlocks = kQKDim / 64;
  static constexpr int kQWGBytes = 64 * kQKDim * 2; // one consumer's Q
  /// 128-byte column blocks of a V row.
  static constexpr int kVColBlocks = kHeadDim * kMmaBytes / 128;
  /// FP8 compute over an e4m3 q the caller quantized (Config::kFP8Query):
  /// TMA lands it as the MMA reads it, kColBlocks boxes of 128 dims, in
  /// the first half of the Q tile; else kQColBlocks boxes of 64 dims.
  static constexpr bool kFP8Query = Config::kFP8Query;
  static constexpr int kQBoxes = kFP8Query ? kColBlocks : kQColBlocks;
  static constexpr int kQBoxDims = kFP8Query ? 128 : 64;
  static constexpr int kQLoadBytes = 64 * kQKDim * (kFP8Query ? 1 : 2);
  static_assert(!kFP8Query || kFP8Compute, "an e4m3 q needs FP8 compute");
  static constexpr int kKTileBytes = kBlockN * kQKDim * kMmaBytes;
  static constexpr int kVTileBytes = kBlockN * kHeadDim * kMmaBytes;
  static constexpr int kSmemBytes =
      prefillSm90SmemBytes(kHeadDim, kFP8 ? 1 : 2, kMmaBytes, kBlockM, kBlockN,
                           Config::kStages, Config::kRopeDim);
  static_assert(Config::kRopeDim == 0 || (!kFP8 && !Config::kPaged),
                "q/k wider than v: 16-bit ragged k/v only");
  static_assert(kQKDim % 64 == 0, "q/k in 64-dim TMA boxes");
  /// FP8 caches: stages of the raw ring, bytes of one raw K or V tile, and
  /// the producer threads that widen (or, FP8 compute, transpose) them
  /// (warps 1-3).
  static constexpr int kRawStages = prefillSm90RawStages(
      kHeadDim, kFP8 ? 1 : 2, kMmaBytes, kBlockM, kBlockN, Config::kStages);
  static constexpr int kRawTileBytes = kBlockN * kHeadDim;
  /// Raw slots of one K or V tile: tile i's K takes slot 2i mod kRawSlots,
  /// its V the next, so K of tile i + 1 can land while V of tile i is
  /// widened (with one stage's bytes, at head dim 256, too). FP8 compute
  /// puts only V there: tile i's in slot i.
  static constexpr int kRawSlots = 2 * kRawStages;
  static constexpr int kRawPerTile = kFP8Compute ? 1 : 2;
  static constexpr int kWideners = 96;
  /// FP8 compute: V^T (head dim rows x blockN keys) in wgmma's unswizzled
  /// K-major layout, 8-row x 16-byte core matrices, 128 bytes apart along
  /// the keys and kVtGroupBytes apart along the head dim; P's keys are
  /// permuted (fp8VtSlot) so that the S accumulator is P's A fragment.
  static constexpr uint32_t kVtGroupBytes = 8 * kBlockN;
  /// O += P V in parts of kPVPartN head dims: each part's product goes to
  /// a fresh fp32 accumulator that is then added to O on the CUDA cores
  /// (two-level accumulation: the FP8 MMA's own accumulation keeps about 14
  /// bits, so O summed across tiles inside it would lose precision as keys
  /// grow).
  /// One part at head dim 128 (64 more registers fit); four of 64 at 256.
  static constexpr int kPVPartN =
      kFP8Compute && kHeadDim == 256 ? 64 : kHeadDim;
  static_assert(!kFP8Compute || (kFP8 && kHeadDim >= 128),
                "FP8 compute reads FP8 k/v at head dim 128 or 256");
  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256,
                "head dim 64, 128 or 256");
  // Head dim 256: O is 128 fp32 registers per thread, so S of a 128-key
  // tile (64 more, plus the in-flight P) would not fit the consumers'
  // 240; 64-key tiles (32 + 16) do.
  static_assert(kHeadDim < 256 || kBlockN == 64,
                "64-key tiles at head dim 256 (registers)");
  static_assert(kBlockM == 64 * kConsumers && kConsumers >= 1 &&
                    kConsumers <= 3,
                "one to three consumer warpgroups of 64 query rows");
  /// Registers per thread after setmaxnreg, within what the CTA launched
  /// with (168 per thread at 384 threads, 128 at 512, 240 at 256): the
  /// producer keeps 24 (one thread issues copies), 40 with FP8 wideners
  /// (at 24 they spill) but at head dim 256, where O needs a consumer's
  /// 240; consumers take the rest: 240 for one or two, 160 for three, 8
  /// less each beside 40-register wideners.
  static constexpr int kProducerRegs =
      kFP8 && (kHeadDim <= 128 || kFP8Compute) ? 40 : 24;
  static constexpr int kConsumerRegs =
      (kConsumers == 3 ? 160 : 240) -
      (kProducerRegs == 40 && kConsumers > 1 ? 8 : 0);
  // Three consumers: O (32 registers) and S of a 128-key tile (64) fit 160
  // at head dim 64 only.
  static_assert(kConsumers < 3 || kHeadDim == 64,
                "three consumer warpgroups at head dim 64 only (registers)");
  static_assert(kBlockN == 64 || kBlockN == 128, "wgmma N of S");
  /// Paged: tokens per TMA box, the largest piece of a page that tiles both
  /// pages and K/V tiles; a multiple of 8 rows (1024 bytes, one swizzle
  /// atom), so every box lands on the 128-byte swizzle pattern.
  static constexpr int kBoxRows =
      Config::kPaged ? sm90Gcd(Config::kPageSize, kBlockN) : kBlockN;
  static_assert(IsSame<KVT, QT>::value || kFP8,
                "the sm_90a template reads k/v of q's type or FP8");
  static_assert(!Config::kPaged || kBoxRows % 8 == 0,
                "pages of a multiple of 8 tokens");
  /// K/V tiles in shared memory: ragged, kColBlocks blocks of blockN rows
  /// x 128 bytes (a box each); paged, [8-row group][column block][8 rows]
  /// [128 bytes] (a box per page piece covers every column block). Both
  /// are 1024-byte swizzle atoms of 8 rows; these are the atoms' strides.
  static constexpr uint32_t kKVColBlockBytes =
      Config::kPaged ? 1024 : kBlockN * 128;
  static constexpr uint32_t kKVRowGroupBytes =
      Config::kPaged ? kColBlocks * 1024 : 1024;
  /// Shared-memory offset of 16-byte chunk `chunk` (before the swizzle) of
  /// row `row` and column block `block` of a K/V tile.
  static __device__ __forceinline__ uint32_t kvOffset(int row, int block,
                                                      int chunk) {
    return (row / 8) * kKVRowGroupBytes + block * kKVColBlockBytes +
           (row % 8) * 128 + chunk * 16;
  }
  /// Raw FP8 tiles (unswizzled 64-byte rows of 64 dims) in the same order
  /// at half the width: paged [8-row group][64-dim block][8 rows][64 bytes],
  /// ragged [64-dim block][blockN rows][64 bytes]. Byte offset of dim
  /// `dim` of row `row`; byte o widens to 16-bit offset 2 o of the tile.
  static __device__ __forceinline__ constexpr uint32_t rawOffset(int row,
                                                                 int dim) {
    return Config::kPaged ? (row / 8) * (kHeadDim / 64) * 512 +
                                (dim / 64) * 512 + (row % 8) * 64 + dim % 64
                          : (dim / 64) * kBlockN * 64 + row * 64 + dim % 64;
  }
  /// FP8 compute's raw V tiles: the same rows, 64-byte swizzled (TMA's
  /// SWIZZLE_64B: 16-byte chunk c of row r at c ^ (r / 2 % 4)), so that the
  /// transposers' ldmatrix rows (8 keys, 16 dims) cover the 32 banks. Byte
  /// offset of the 16-byte chunk holding dim `dim` (a multiple of 16).
  static __device__ __forceinline__ constexpr uint32_t rawVtOffset(int row,
                                                                   int dim) {
    return rawOffset(row, dim & ~63) +
           ((((dim % 64) / 16) ^ ((row / 2) % 4)) * 16);
  }
};

//===----------------------------------------------------------------------===//
// mbarrier, TMA, wgmma plumbing
//===----------------------------------------------------------------------===//

__device__ __forceinline__ void mbarInit(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar),
               "r"(count));
}
/// One arrival that also expects `bytes` of transactions (TMA) this phase.
__device__ __forceinline__ void mbarArriveExpectTx(uint32_t bar, int bytes) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
      "r"(bytes)
      : "memory");
}
__device__ __forceinline__ void mbarArrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar)
               : "memory");
}
/// Waits until the phase of parity `parity` has completed. A fresh barrier
/// counts the phase before its first (parity 1) as completed.
__device__ __forceinline__ void mbarWait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile("{\n.reg .pred p;\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
}

/// \brief A 3-d tile (dim, head, token) of a tensor map into shared memory,
/// completing on `bar`.
__device__ __forceinline__ void tmaLoad3d(uint32_t dst,
                                          const TmaDescriptor *map,
                                          uint32_t bar, int dim, int head,
                                          int token) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::"
               "complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
               "l"(reinterpret_cast<uint64_t>(map)), "r"(dim), "r"(head),
               "r"(token), "r"(bar)
               : "memory");
}

/// \brief A box of a paged cache's 5-d tensor map (dim, 8 tokens, column
/// block, 8-token group, page) from column block `block`, group `group`
/// and page `page` (runtime/kernels/Prefill.cpp, encodePagesMap).
__device__ __forceinline__ void tmaLoadPaged(uint32_t dst,
                                             const TmaDescriptor *map,
                                             uint32_t bar, int block, int group,
                                             int page) {
  asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::"
               "complete_tx::bytes"
               " [%0], [%1, {%2, %2, %3, %4, %5}], [%6];\n" ::"r"(dst),
               "l"(reinterpret_cast<uint64_t>(map)), "r"(0), "r"(block),
               "r"(group), "r"(page), "r"(bar)
               : "memory");
}

__device__ __forceinline__ void wgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int kPending> __device__ __forceinline__ void wgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending)
               : "memory");
}
/// Keeps the compiler from moving accesses of accumulator registers across
/// the asynchronous wgmma that reads or writes them.
template <int N> __device__ __forceinline__ void fenceRegs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    asm volatile("" : "+f"(r[i])::"memory");
}

/// \brief A wgmma shared-memory descriptor of a 128-byte-swizzled operand at
/// shared address `addr`: `lbo` bytes between 64-column blocks (used by the
/// MN-major V only), `sbo` bytes between 8-row groups.
__device__ __forceinline__ uint64_t smemDesc(uint32_t addr, uint32_t lbo,
                                             uint32_t sbo = 1024) {
  return uint64_t((addr & 0x3FFFF) >> 4) | uint64_t(lbo >> 4) << 16 |
         uint64_t(sbo >> 4) << 32 | uint64_t(1) << 62;
}

/// \brief A wgmma shared-memory descriptor of an unswizzled K-major operand
/// of 8-row x 16-byte core matrices: `lbo` bytes between core matrices
/// along K, `sbo` along M or N.
__device__ __forceinline__ uint64_t smemDescPlain(uint32_t addr, uint32_t lbo,
                                                  uint32_t sbo) {
  return uint64_t((addr & 0x3FFFF) >> 4) | uint64_t(lbo >> 4) << 16 |
         uint64_t(sbo >> 4) << 32;
}

/// \brief setmaxnreg: moves registers between warpgroups (sm_90a).
template <int kRegs> __device__ __forceinline__ void setMaxRegsDec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs> __device__ __forceinline__ void setMaxRegsInc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

/// Named barrier `id` (1..15; 0 is __syncthreads) over `threads` threads.
__device__ __forceinline__ void namedBarSync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void namedBarArrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
/// Named barrier `id` over `threads` threads that also ORs `pred` over
/// them (bar.red: no shared memory for a broadcast).
__device__ __forceinline__ bool namedBarOr(int id, int threads, bool pred) {
  uint32_t any;
  asm volatile("{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n"
               " bar.red.or.pred q, %2, %3, p;\n selp.u32 %0, 1, 0, q;\n}\n"
               : "=r"(any)
               : "r"(uint32_t(pred)), "r"(id), "r"(threads)
               : "memory");
  return any != 0;
}
/// Keeps the 16-bit P fragment of an in-flight wgmma live (and unmoved)
/// until the wgmma that reads it has completed.
template <int N>
__device__ __forceinline__ void fenceRegs(uint32_t (&r)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
      asm volatile("" : "+r"(r[i][j])::"memory");
}

/// \brief Widens one raw FP8 K or V tile (unswizzled 64-byte rows) into the
/// 128-byte-swizzled 16-bit tile at `dst`, as widener `thread` of
/// kWideners. Raw byte o holds the element whose 16-bit offset (before the
/// swizzle) is 2 o, so 16 raw bytes become two 16-byte chunks. The writes
/// are made visible to the async proxy (wgmma) before the caller arrives.
template <class Config, class T>
__device__ __forceinline__ void widenFP8TileSm90(uint32_t dst, uint32_t raw,
                                                 int thread) {
  using Tr = PrefillSm90Traits<Config>;
  // Two chunks in flight per thread where the registers allow (40).
#pragma unroll(Tr::kProducerRegs >= 40 ? 2 : 1)
  for (int i = thread; i < Tr::kRawTileBytes / 16; i += Tr::kWideners) {
    uint32_t in[4];
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(in[0]), "=r"(in[1]), "=r"(in[2]), "=r"(in[3])
                 : "r"(raw + 16 * i));
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      uint32_t out[4];
#pragma unroll
      for (int j = 0; j < 4; ++j)
        out[j] = widenFP8Pair<typename Tr::KVT, T>(in[2 * half + j / 2] >>
                                                   (16 * (j % 2)));
      const uint32_t offset = 32 * i + 16 * half;
      asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(
                       dst + (offset ^ ((offset >> 3) & 0x70))),
                   "r"(out[0]), "r"(out[1]), "r"(out[2]), "r"(out[3])
                   : "memory");
    }
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/// \brief FP8 compute: the slot of key `key` of a tile in V^T's key order.
/// Thread c of a quad holds S columns 2c, 2c + 1, 8 + 2c, 9 + 2c of every 16
/// (the C fragment); the FP8 A fragment wants k = 4c .. 4c + 3 of every 16.
/// Putting those four keys at those four slots (in V^T too) makes the S
/// accumulator, converted in place, P's A fragment.
__device__ __forceinline__ int fp8VtSlot(int key) {
  const int r16 = key % 16, quad = (r16 % 8) / 2;
  return key - r16 + 4 * quad + (r16 % 2) + (r16 >= 8 ? 2 : 0);
}

/// \brief Transposes one raw FP8 V tile (64-byte rows, 64-byte swizzled:
/// PrefillSm90Traits::rawVtOffset) into V^T at `dst`
/// (PrefillSm90Traits::kVtGroupBytes; keys at fp8VtSlot), as transposer
/// `thread` of kWideners. A warp step covers 16 keys x 32 dims: one
/// ldmatrix.trans gives lane (group g, quad c) dims 2g, 2g + 1 (of each 16)
/// of keys 2c, 2c + 1 and 8 + 2c, 9 + 2c; two byte permutes make each dim's
/// four keys one word, which is V^T's word c of that dim's row (slots
/// 4c .. 4c + 3), and one stmatrix stores the 32 rows. A matrix's rows are
/// even dims of one 8-dim group and odd dims of the next, so that its 8
/// rows cover the 32 banks (the 64-byte swizzle does the same for the
/// loads).
template <class Config>
__device__ __forceinline__ void
transposeFP8VTileSm90(uint32_t dst, uint32_t raw, int thread) {
  using Tr = PrefillSm90Traits<Config>;
  constexpr int D = Tr::kHeadDim, kSteps = (D / 32) * (Tr::kBlockN / 16);
  const int warp = thread / 32, lane = thread % 32;
  // The row this lane addresses: matrix m's row i.
  const int m = lane / 8, i = lane % 8, upper = i >= 4;
  const int loadKey = 8 * (m & 1) + i, loadDim = 16 * (m >> 1);
  const int storeDim = 16 * (m >> 1) + 2 * i + ((m & 1) ^ upper);
  // Step (k16, 32-dim block db) reads at loadAt + k16 * loadK16 + (db / 2)
  // * load64 + (db odd ? chunk1 : chunk0) (rawVtOffset, split into what
  // the lane fixes and what the step adds) and writes at storeAt + k16 *
  // 128 + db * 4 * kVtGroupBytes.
  const uint32_t loadAt = Tr::rawVtOffset(loadKey, 0) - Tr::rawVtOffset(0, 0);
  const uint32_t chunk0 = Tr::rawVtOffset(loadKey, loadDim) - loadAt,
                 chunk1 = Tr::rawVtOffset(loadKey, 32 + loadDim) - loadAt;
  constexpr uint32_t loadK16 = Tr::rawVtOffset(16, 0),
                     load64 = Tr::rawVtOffset(0, 64);
  const uint32_t storeAt =
      (storeDim / 8) * Tr::kVtGroupBytes + (storeDim % 8) * 16;
  // This lane's words: matrix 0 takes dim 2g (g < 4) or 2g + 1.
  const int g = lane / 4;
  const uint32_t first = g < 4 ? 0x6420u : 0x7531u,
                 second = g < 4 ? 0x7531u : 0x6420u;
  for (uint32_t step = warp; step < kSteps; step += Tr::kWideners / 32) {
    const uint32_t db = step % (D / 32), k16 = step / (D / 32);
    uint32_t r[4];
    asm volatile(
        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, "
        "[%4];\n"
        : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
        : "r"(raw + loadAt + k16 * loadK16 + (db / 2) * load64 +
              (db % 2 ? chunk1 : chunk0)));
    asm volatile(
        "stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::
            "r"(dst + storeAt + k16 * 128 + db * 4 * Tr::kVtGroupBytes),
        "r"(prmt(r[0], r[1], first)), "r"(prmt(r[0], r[1], second)),
        "r"(prmt(r[2], r[3], first)), "r"(prmt(r[2], r[3], second))
        : "memory");
  }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

/// Four fp32 values to e4m3 with saturation, in one register (a in bits 0-7).
__device__ __forceinline__ uint32_t packE4M3x4(float a, float b, float c,
                                               float d) {
  uint32_t r;
  asm("{.reg .b16 lo, hi;\n"
      " cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n"
      " cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n"
      " mov.b32 %0, {lo, hi};}\n"
      : "=r"(r)
      : "f"(a), "f"(b), "f"(c), "f"(d));
  return r;
}

//===----------------------------------------------------------------------===//
// Ablation switches (timing experiments only)
//===----------------------------------------------------------------------===//

// ATTN_SM90_ABLATE is a bit set that removes or doubles a part of the
// kernel, to find by timing which part limits a config
// (docs/perf-log/history.md, "Hopper prefill"). The results are wrong with any
// bit set. Only `attn-bench ... --define ATTN_SM90_ABLATE=N` sets it, through
// an NVRTC -D option (part of the cache key); normal builds never define it.
// Each part below reads the one switch that concerns it.
#ifndef ATTN_SM90_ABLATE
#define ATTN_SM90_ABLATE 0
#endif
struct Sm90Ablation {
  static constexpr int kBits = ATTN_SM90_ABLATE;
  static constexpr bool kNoSoftmax = kBits & 1; ///< P = S rounded
  static constexpr bool kNoQK = kBits & 2;      ///< S left opaque
  static constexpr bool kNoPV = kBits & 4;      ///< no O += P V wgmma
  static constexpr bool kDoubleSoftmax = kBits & 8;
  static constexpr bool kLoadsOnce = kBits & 16; ///< K/V once per stage
  static constexpr bool kNoWiden = kBits & 32;   ///< FP8: raw tiles copied
  /// FP8 compute: O accumulated inside the FP8 MMA across tiles (one
  /// level); right but less accurate as keys grow (docs/perf-log/history.md,
  /// "FP8 compute").
  static constexpr bool kOneLevel = kBits & 64;
};

//===----------------------------------------------------------------------===//
// The kernel's parts: work, shared memory, producer, consumer
//===----------------------------------------------------------------------===//

/// \brief One (work item, head) pair of a CTA and the key tiles it reads.
/// The head is a q head, or with Config::kPackGqa a KV head whose q heads
/// share the tile: row i is token i / group, q head qHead + i % group (the
/// K/V tiles then serve the whole group).
struct Sm90Item {
  /// The item's tile fields (qStart .. outStart); its split fields are read
  /// where they are needed, from workItems[index]. (With the whole item
  /// copied here and the paged boxes' page offsets computed at run time,
  /// paged prefill ran 10% slower on an H200.)
  PrefillWorkItem work;
  int index;
  int head;          ///< of the grid: q head, or KV head when packed
  int qHead, kvHead; ///< packed: qHead the group's first
  int tileRows, firstPos, kvBegin, numTiles;
};

/// \brief Rows of a tile per query token: the q heads of a KV head when
/// packed, else 1.
template <class Config> __host__ __device__ constexpr int sm90RowsPerToken() {
  return Config::kPackGqa ? Config::kGroupSize : 1;
}

/// \brief The pairs a CTA takes. A grid of (work items, heads) gives each
/// CTA one pair; a grid of one row (persistent, runtime/kernels/Prefill.cpp)
/// makes each CTA loop over the pairs w = item * heads + head, heaviest
/// items first: in round n CTA b takes pair n * grid + b (a snake order,
/// reversed in odd rounds, measured no better). The K/V rings and their
/// barriers run on across a CTA's pairs (the parts count the tiles of the
/// earlier ones); Q is reloaded per pair once the consumers release it. The
/// one-pair body is its own instantiation: there the loops run once with
/// constant indices, which measured 5-9% faster than the looping code on one
/// pair (docs/perf-log/history.md, "Persistent grid").
template <class Config, bool kPersistent> struct Sm90Work {
  static constexpr int kHeads =
      Config::kPackGqa ? Config::kNumKVHeads : Config::kNumQHeads;
  static constexpr int kRowsPerToken = sm90RowsPerToken<Config>();
  const PrefillParams &p;
  int numItems, total;

  __device__ __forceinline__ explicit Sm90Work(const PrefillParams &params)
      : p(params), numItems(*params.numWorkItems),
        total(kPersistent ? numItems * kHeads : 1) {}
  /// The CTA's n-th pair, or >= total when it has none left.
  __device__ __forceinline__ int pair(int n) const {
    if constexpr (!kPersistent)
      return n;
    return n * int(gridDim.x) + int(blockIdx.x);
  }
  __device__ __forceinline__ bool empty() const {
    return pair(0) >= total || (!kPersistent && int(blockIdx.x) >= numItems);
  }
  __device__ __forceinline__ int headOf(int w) const {
    return kPersistent ? w % kHeads : int(blockIdx.y);
  }
  __device__ __forceinline__ Sm90Item item(int w) const {
    constexpr int kBlockM = Config::kBlockM, kBlockN = Config::kBlockN;
    Sm90Item it;
    it.index = kPersistent ? w / kHeads : int(blockIdx.x);
    const PrefillWorkItem &src = p.workItems[it.index];
    it.work = {src.qStart,    src.qLen,    src.kvStart, src.kvLen,
               src.tileBegin, src.request, src.outStart};
    it.head = headOf(w);
    it.kvHead = Config::kPackGqa ? it.head : it.head / Config::kGroupSize;
    it.qHead = Config::kPackGqa ? it.head * Config::kGroupSize : it.head;
    // Positions: query token i of the request sits at kvLen - qLen + i.
    const int shift = it.work.kvLen - it.work.qLen;
    it.tileRows =
        min(kBlockM, (it.work.qLen - it.work.tileBegin) * kRowsPerToken);
    it.firstPos = shift + it.work.tileBegin;
    const int lastPos = it.firstPos + (it.tileRows - 1) / kRowsPerToken;
    // A split reads its own keys (multiples of kBlockN: tiles stay where
    // the whole tile's would be, and so do their masks).
    int kvEnd = min(it.work.kvLen, src.keyEnd), kvBegin = src.keyBegin;
    Variant<Config>::template visibleKeys<kBlockN>(
        kvBegin, kvEnd, it.work.request, it.firstPos, lastPos, it.qHead,
        it.qHead + kRowsPerToken - 1, p.windowLeft);
    it.kvBegin = kvBegin;
    it.numTiles =
        kvEnd > kvBegin ? (kvEnd - kvBegin + kBlockN - 1) / kBlockN : 0;
    return it;
  }
};

/// \brief Shared memory: Q (one 64-row tile per consumer), the K ring, the V
/// ring, the FP8 raw ring (K and V tiles per stage), then the barriers;
/// tiles 1024-byte aligned for the swizzle. K and V have their own
/// full/empty barriers: with the S wgmma of tile t + 1 issued before the
/// P V wgmma of tile t, a K stage is released before the V stage of the
/// same tile. FP8: a raw slot is full once its tile has landed, empty once
/// every widener has read it; after the last tile the producer sets rawDone
/// to the tile count + 1 and completes the next K slot without a copy.
template <class Config> struct Sm90Smem {
  using Tr = PrefillSm90Traits<Config>;
  static constexpr int kStages = Config::kStages;
  uint32_t q, k, v, raw, bars;

  __device__ __forceinline__ explicit Sm90Smem(uint32_t base)
      : q(base), k(q + Tr::kConsumers * Tr::kQWGBytes),
        v(k + kStages * Tr::kKTileBytes), raw(v + kStages * Tr::kVTileBytes),
        bars(raw + Tr::kRawStages * 2 * Tr::kRawTileBytes) {}
  __device__ __forceinline__ uint32_t kTile(int s) const {
    return k + s * Tr::kKTileBytes;
  }
  __device__ __forceinline__ uint32_t vTile(int s) const {
    return v + s * Tr::kVTileBytes;
  }
  __device__ __forceinline__ uint32_t kFull(int s) const {
    return bars + 8 * s;
  }
  __device__ __forceinline__ uint32_t vFull(int s) const {
    return bars + 8 * (kStages + s);
  }
  __device__ __forceinline__ uint32_t kEmpty(int s) const {
    return bars + 8 * (2 * kStages + s);
  }
  __device__ __forceinline__ uint32_t vEmpty(int s) const {
    return bars + 8 * (3 * kStages + s);
  }
  __device__ __forceinline__ uint32_t qFull() const {
    return bars + 32 * kStages;
  }
  __device__ __forceinline__ uint32_t qEmpty() const { return qFull() + 8; }
  // Raw slot j (K of tile i at j = 2i, its V at 2i + 1; FP8 compute: V of
  // tile i at i): its slot, address, barriers and the parity of its phase
  // (16-bit caches have no raw ring: kSlots keeps the arithmetic defined).
  static constexpr int kSlots = Tr::kRawSlots > 0 ? Tr::kRawSlots : 1;
  __device__ __forceinline__ static int rawSlot(int j) { return j % kSlots; }
  __device__ __forceinline__ uint32_t rawTile(int j) const {
    return raw + rawSlot(j) * Tr::kRawTileBytes;
  }
  __device__ __forceinline__ static uint32_t rawParity(int j) {
    return uint32_t(j / kSlots) & 1;
  }
  __device__ __forceinline__ uint32_t rawFull(int slot) const {
    return qEmpty() + 8 + 8 * slot;
  }
  __device__ __forceinline__ uint32_t rawEmpty(int slot) const {
    return qEmpty() + 8 + 8 * (Tr::kRawSlots + slot);
  }
  __device__ __forceinline__ uint32_t rawDone() const {
    return qEmpty() + 8 + 16 * Tr::kRawSlots;
  }

  /// Thread 0: every barrier. Stages are completed by one TMA arrival, or
  /// by the wideners.
  __device__ __forceinline__ void init() const {
    for (int s = 0; s < kStages; ++s) {
      mbarInit(kFull(s), Tr::kWiden ? Tr::kWideners : 1);
      mbarInit(vFull(s), Tr::kFP8 ? Tr::kWideners : 1);
      mbarInit(kEmpty(s), Tr::kConsumers * 128);
      mbarInit(vEmpty(s), Tr::kConsumers * 128);
    }
    mbarInit(qFull(), 1);
    mbarInit(qEmpty(), Tr::kConsumers * 128);
    for (int s = 0; s < Tr::kRawSlots; ++s) {
      mbarInit(rawFull(s), 1);
      mbarInit(rawEmpty(s), Tr::kWideners);
    }
    if constexpr (Tr::kFP8)
      asm volatile("st.shared.u32 [%0], 0;\n" ::"r"(rawDone()) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
};

/// \brief Producer, FP8 caches: warps 1-3 take tile after tile (the rings'
/// running index i, across pairs) until rawDone: raw slot -> a K or V
/// stage, once the consumers have released it, widened to f16 or (FP8
/// compute, V only) transposed. Nothing per pair is computed here.
template <class Config>
__device__ __forceinline__ void sm90Widen(const Sm90Smem<Config> &sm,
                                          int thread) {
  using Tr = PrefillSm90Traits<Config>;
  constexpr int kStages = Config::kStages;
  // Raw slot j into stage `tile` behind barriers `empty` and `full`.
  auto fill = [&](int j, uint32_t tile, uint32_t empty, uint32_t full,
                  uint32_t parity) {
    mbarWait(empty, parity);
    if constexpr (!Sm90Ablation::kNoWiden) {
      if constexpr (Tr::kFP8Compute)
        transposeFP8VTileSm90<Config>(tile, sm.rawTile(j), thread);
      else
        widenFP8TileSm90<Config, typename Tr::MT>(tile, sm.rawTile(j), thread);
    }
    mbarArrive(full);
    mbarArrive(sm.rawEmpty(sm.rawSlot(j)));
  };
  for (int i = 0;; ++i) {
    const int s = i % kStages;
    const uint32_t parity = ((i / kStages) & 1) ^ 1;
    const int j = Tr::kRawPerTile * i; // K's slot, or FP8 compute's V
    mbarWait(sm.rawFull(sm.rawSlot(j)), sm.rawParity(j));
    uint32_t done;
    asm volatile("ld.shared.u32 %0, [%1];\n"
                 : "=r"(done)
                 : "r"(sm.rawDone())
                 : "memory");
    if (done == uint32_t(i) + 1) // the stop, not a tile
      return;
    if constexpr (Tr::kWiden) {
      fill(j, sm.kTile(s), sm.kEmpty(s), sm.kFull(s), parity);
      mbarWait(sm.rawFull(sm.rawSlot(j + 1)), sm.rawParity(j + 1));
      fill(j + 1, sm.vTile(s), sm.vEmpty(s), sm.vFull(s), parity);
    } else {
      fill(j, sm.vTile(s), sm.vEmpty(s), sm.vFull(s), parity);
    }
  }
}

/// \brief Producer, 16-bit paged caches: warp 1, idle otherwise, checks the
/// page ids while thread 0 issues the copies (TMA reads an id outside the
/// cache as zeros: the maps end at its last page). An item's query heads
/// read the same pages, so only the pair of head 0 checks them. Checked in
/// thread 0's loop, they cost this producer-bound kernel 2%; in every pair,
/// 4% on short requests.
template <class Config, bool kPersistent>
__device__ __forceinline__ void
sm90CheckPages(const Sm90Work<Config, kPersistent> &work) {
  const PrefillParams &p = work.p;
  constexpr int kBlockN = Config::kBlockN, kPage = Config::kPageSize;
  for (int n = 0, w = work.pair(0); w < work.total; w = work.pair(++n)) {
    if (work.headOf(w) != 0)
      continue;
    const Sm90Item it = work.item(w);
    const int32_t *row = p.pageTables +
                         int64_t(it.work.request) * p.pageTableStride +
                         it.work.kvStart / kPage;
    const int pagesUsed = (it.work.kvLen + kPage - 1) / kPage;
    const int end = min(
        pagesUsed, (it.kvBegin + it.numTiles * kBlockN + kPage - 1) / kPage);
    for (int i = it.kvBegin / kPage + int(threadIdx.x % 32); i < end; i += 32) {
      const int page = row[i];
      if (uint32_t(page) > p.lastPage)
        reportPageId(p.pageIdError, page, it.work.request);
    }
  }
}

/// \brief Producer, thread 0: every load as a bulk tensor copy (TMA)
/// through the host-built tensor maps: per pair the Q tile (after the first
/// K tile, so that one flies meanwhile), then K and V tiles into their
/// rings, or (FP8) into raw slots the wideners fill the rings from.
template <class Config, bool kPersistent>
__device__ __forceinline__ void
sm90Load(const PrefillSm90Params &sp, const Sm90Work<Config, kPersistent> &work,
         const Sm90Smem<Config> &sm) {
  using Tr = PrefillSm90Traits<Config>;
  const PrefillParams &p = sp.base;
  constexpr int kBlockN = Config::kBlockN, kStages = Config::kStages;
  constexpr int D = Tr::kHeadDim;
  constexpr int kBoxes = kBlockN / Tr::kBoxRows;
  int base = 0; // tiles of the earlier pairs: the rings' running index
  for (int n = 0, w = work.pair(0); w < work.total; w = work.pair(++n)) {
    const Sm90Item it = work.item(w);
    const PrefillWorkItem &item = it.work;
    const int qToken = item.qStart + item.tileBegin;
    // Q of pair n, once the consumers have released pair n - 1's.
    auto loadQ = [&] {
      if (n > 0)
        mbarWait(sm.qEmpty(), (n - 1) & 1);
      mbarArriveExpectTx(sm.qFull(), Tr::kConsumers * Tr::kQLoadBytes);
#pragma unroll
      for (int g = 0; g < Tr::kConsumers; ++g)
#pragma unroll
        for (int c = 0; c < Tr::kQBoxes; ++c)
          tmaLoad3d(sm.q + g * Tr::kQWGBytes + c * 64 * 128, &sp.qMap,
                    sm.qFull(), c * Tr::kQBoxDims, it.qHead,
                    qToken + g * (64 / sm90RowsPerToken<Config>()));
    };
    if (it.numTiles == 0)
      loadQ();
    // Paged: the request's page-table row (from kvStart) and its pages in
    // use.
    const int32_t *pageRow = nullptr;
    int pagesUsed = 0;
    if constexpr (Config::kPaged) {
      pageRow = p.pageTables + int64_t(item.request) * p.pageTableStride +
                item.kvStart / Config::kPageSize;
      pagesUsed = (item.kvLen + Config::kPageSize - 1) / Config::kPageSize;
    }
    // Paged: box of the page piece at token `offset` of page `page` into
    // `dst` (every column block; `colBlocks` of them per row in the map).
    // NHD's maps index (head, column block) as one dim, HND's (head, token
    // group).
    auto loadBox = [&](const TmaDescriptor *map, int colBlocks, uint32_t dst,
                       uint32_t bar, int offset, int page) {
      if constexpr (Config::kLayoutHND)
        tmaLoadPaged(dst, map, bar, 0,
                     it.kvHead * (Config::kPageSize / 8) + offset / 8, page);
      else
        tmaLoadPaged(dst, map, bar, it.kvHead * colBlocks, offset / 8, page);
    };
    constexpr uint32_t kBoxBytes = Tr::kBoxRows * D * sizeof(typename Tr::KVT);
    // One tile of `map` into `tile`: kBoxes boxes of kBoxRows rows (paged),
    // or one box of blockN rows per 128-byte column block (ragged:
    // `colBlocks`, K's or V's). Raw FP8 tiles have 64-byte rows of 64 dims
    // per column block (Tr::rawOffset).
    auto loadTile = [&](const TmaDescriptor *map, uint32_t tile, uint32_t bar,
                        int token, const int(&pages)[kBoxes],
                        const int(&offsets)[kBoxes], bool raw = false,
                        int colBlocks = Tr::kColBlocks) {
      if constexpr (Config::kPaged) {
#pragma unroll
        for (int b = 0; b < kBoxes; ++b)
          loadBox(map, raw ? D / 64 : Tr::kColBlocks, tile + b * kBoxBytes, bar,
                  offsets[b], pages[b]);
      } else if (raw) {
#pragma unroll
        for (int c = 0; c < D / 64; ++c)
          tmaLoad3d(tile + c * kBlockN * 64, map, bar, c * 64, it.kvHead,
                    token);
      } else {
#pragma unroll
        for (int c = 0; c < colBlocks; ++c)
          tmaLoad3d(tile + c * Tr::kKVColBlockBytes, map, bar,
                    c * (128 / Tr::kMmaBytes), it.kvHead, token);
      }
    };
    for (int t = 0; t < it.numTiles; ++t) {
      const int s = (base + t) % kStages;
      const uint32_t parity = (((base + t) / kStages) & 1) ^ 1;
      const int token = item.kvStart + it.kvBegin + t * kBlockN;
      const bool load = !Sm90Ablation::kLoadsOnce || t < kStages;
      // Paged: each box's page (-1, read as zeros, past the last page) and
      // its first token in the page; K and V share them.
      int pages[kBoxes], offsets[kBoxes];
#pragma unroll
      for (int b = 0; b < kBoxes; ++b) {
        pages[b] = -1;
        offsets[b] = 0;
        if constexpr (Config::kPaged) {
          // kvBegin is a multiple of kBlockN: with pages that divide the
          // tile, a box's offset in its page is a constant.
          constexpr int kPage = Config::kPageSize;
          const int tile = it.kvBegin / kBlockN + t;
          int index;
          if constexpr (kBlockN % kPage == 0) {
            index = tile * (kBlockN / kPage) + b * Tr::kBoxRows / kPage;
            offsets[b] = b * Tr::kBoxRows % kPage;
          } else {
            const int key = tile * kBlockN + b * Tr::kBoxRows;
            index = key / kPage;
            offsets[b] = key % kPage;
          }
          if (load && index < pagesUsed)
            pages[b] = pageRow[index];
        }
      }
      // Raw tile j of `map` into its slot (FP8), completing on the slot's
      // barrier; the wideners fill the stages.
      auto loadRaw = [&](const TmaDescriptor *map, int j) {
        mbarWait(sm.rawEmpty(sm.rawSlot(j)), sm.rawParity(j) ^ 1);
        if (load) {
          mbarArriveExpectTx(sm.rawFull(sm.rawSlot(j)), Tr::kRawTileBytes);
          loadTile(map, sm.rawTile(j), sm.rawFull(sm.rawSlot(j)), token, pages,
                   offsets, true);
        } else {
          mbarArrive(sm.rawFull(sm.rawSlot(j)));
        }
      };
      if constexpr (Tr::kWiden) {
        // K, then V, each into its raw slot.
        loadRaw(&sp.kMap, 2 * (base + t));
        if (t == 0)
          loadQ();
        loadRaw(&sp.vMap, 2 * (base + t) + 1);
      } else {
        // A K or V tile of `map` (`tileBytes`, `colBlocks` 128-byte blocks
        // per row) straight into `tile`, stage s of its ring.
        auto loadStage = [&](const TmaDescriptor *map, uint32_t tile,
                             uint32_t full, uint32_t empty, int tileBytes,
                             int colBlocks) {
          mbarWait(empty, parity);
          if (load) {
            mbarArriveExpectTx(full, tileBytes);
            loadTile(map, tile, full, token, pages, offsets, false, colBlocks);
          } else {
            mbarArrive(full);
          }
        };
        loadStage(&sp.kMap, sm.kTile(s), sm.kFull(s), sm.kEmpty(s),
                  Tr::kKTileBytes, Tr::kColBlocks);
        if (t == 0)
          loadQ();
        if constexpr (Tr::kFP8Compute)
          loadRaw(&sp.vMap, base + t);
        else
          loadStage(&sp.vMap, sm.vTile(s), sm.vFull(s), sm.vEmpty(s),
                    Tr::kVTileBytes, Tr::kVColBlocks);
      }
      // FP8 caches (whose warps 1-3 widen): a page id outside the cache is
      // reported once its copies are issued; TMA read it as zeros, as the
      // tensor maps end at the cache's last page.
      if constexpr (Config::kPaged && Tr::kFP8) {
#pragma unroll
        for (int b = 0; b < kBoxes; ++b) {
          const int index =
              (it.kvBegin + t * kBlockN + b * Tr::kBoxRows) / Config::kPageSize;
          if (load && index < pagesUsed && uint32_t(pages[b]) > p.lastPage)
            reportPageId(p.pageIdError, pages[b], item.request);
        }
      }
    }
    base += it.numTiles;
  }
  if constexpr (Tr::kFP8) {
    // The wideners' stop: the K slot of tile `base`, completed without a
    // copy, with rawDone = base + 1 (wideners still on earlier tiles read
    // it too, and go on).
    const int j = Tr::kRawPerTile * base;
    mbarWait(sm.rawEmpty(sm.rawSlot(j)), sm.rawParity(j) ^ 1);
    asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(sm.rawDone()), "r"(base + 1)
                 : "memory");
    mbarArrive(sm.rawFull(sm.rawSlot(j)));
  }
}

/// \brief Consumer, kQToHalf (FP8 caches widened to f16 under a bf16 q):
/// this warp's 16 rows of the bf16 Q tile to f16 in place, times 2^-e,
/// where e puts their largest magnitude in [2^14, 2^15) (every bf16 digit
/// survives down to 2^-28 of it); S is then 2^-e times q.k, so the caller's
/// score scales take 2^e. Every 128-byte row is whole in its column block,
/// so the swizzle does not matter. Returns e.
template <class Config>
__device__ __forceinline__ int sm90QToHalf(uint32_t qTile, int warp, int lane) {
  using Tr = PrefillSm90Traits<Config>;
  auto chunkAddr = [&](int i) { // 16 rows x 8 chunks per column block
    const int block = i / 128, j = i % 128;
    return qTile + block * 64 * 128 + (warp * 16 + j / 8) * 128 + (j % 8) * 16;
  };
  constexpr int kChunks = 128 * Tr::kQColBlocks / 32; // per lane
  float mx = 0.f;
#pragma unroll
  for (int m = 0; m < kChunks; ++m) {
    uint32_t x[4];
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(x[0]), "=r"(x[1]), "=r"(x[2]), "=r"(x[3])
                 : "r"(chunkAddr(lane + 32 * m)));
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 f =
          __bfloat1622float2(*reinterpret_cast<__nv_bfloat162 *>(&x[j]));
      mx = fmaxf(mx, fmaxf(fabsf(f.x), fabsf(f.y)));
    }
  }
#pragma unroll
  for (int off = 16; off > 0; off /= 2)
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  // Past float's exponent range (or inf/NaN, which stay so) no scaling.
  const int e = mx > 0.f && mx <= 3.4e38f ? max(ilogbf(mx) - 14, -100) : 0;
  const float down = exp2i(-e);
#pragma unroll
  for (int m = 0; m < kChunks; ++m) {
    const uint32_t addr = chunkAddr(lane + 32 * m);
    uint32_t x[4];
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(x[0]), "=r"(x[1]), "=r"(x[2]), "=r"(x[3])
                 : "r"(addr));
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 f =
          __bfloat1622float2(*reinterpret_cast<__nv_bfloat162 *>(&x[j]));
      x[j] = pack2<__half>(f.x * down, f.y * down);
    }
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
                 "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3])
                 : "memory");
  }
  return e;
}

/// \brief Consumer, FP8 compute over a 16-bit q: the warpgroup's Q tile to
/// e4m3 in place (the first half of it), each row times 448 / its largest
/// magnitude. Lanes 2i and 2i + 1 take row i of the warp's 16, one 64-dim
/// column block of every 128 each: read (twice: the maximum, then the
/// values), then, once the warpgroup (named barrier `bar`) has read all of
/// Q, write. Returns this lane's MMA rows' dequantization factors (rows r
/// and r + 8 were quantized by lanes 2r and 2r + 16).
template <class Config>
__device__ __forceinline__ float2 sm90QuantizeQ(uint32_t qTile, int warp,
                                                int lane, int bar) {
  using Tr = PrefillSm90Traits<Config>;
  using QT = typename Tr::QT;
  const int row = warp * 16 + lane / 2, half = lane % 2;
  auto srcChunk = [&](int b8, int ch) { // 16-bit chunk ch of half `half`
    return qTile + (2 * b8 + half) * 8192 + row * 128 + ((ch ^ (row % 8)) * 16);
  };
  auto load8 = [&](uint32_t addr, float(&f)[8]) {
    uint32_t x[4];
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(x[0]), "=r"(x[1]), "=r"(x[2]), "=r"(x[3])
                 : "r"(addr));
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float2 v;
      if constexpr (IsSame<QT, __half>::value)
        v = __half22float2(*reinterpret_cast<__half2 *>(&x[j]));
      else
        v = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162 *>(&x[j]));
      f[2 * j] = v.x;
      f[2 * j + 1] = v.y;
    }
  };
  float mx = 0.f;
#pragma unroll
  for (int b8 = 0; b8 < Tr::kColBlocks; ++b8)
#pragma unroll
    for (int ch = 0; ch < 8; ++ch) {
      float f[8];
      load8(srcChunk(b8, ch), f);
#pragma unroll
      for (int j = 0; j < 8; ++j)
        mx = fmaxf(mx, fabsf(f[j]));
    }
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  // A zero row, or one with inf/NaN (which stay so), is not scaled.
  const bool scaled = mx > 0.f && mx <= 3.4e38f;
  const float up = scaled ? 448.f / mx : 1.f, down = scaled ? mx / 448.f : 1.f;
  uint32_t q8[Tr::kColBlocks][4][4];
#pragma unroll
  for (int b8 = 0; b8 < Tr::kColBlocks; ++b8)
#pragma unroll
    for (int c8 = 0; c8 < 4; ++c8) {
      float f[16];
      load8(srcChunk(b8, 2 * c8), *reinterpret_cast<float(*)[8]>(f));
      load8(srcChunk(b8, 2 * c8 + 1), *reinterpret_cast<float(*)[8]>(f + 8));
#pragma unroll
      for (int j = 0; j < 4; ++j)
        q8[b8][c8][j] = packE4M3x4(f[4 * j] * up, f[4 * j + 1] * up,
                                   f[4 * j + 2] * up, f[4 * j + 3] * up);
    }
  namedBarSync(bar, 128);
#pragma unroll
  for (int b8 = 0; b8 < Tr::kColBlocks; ++b8)
#pragma unroll
    for (int c8 = 0; c8 < 4; ++c8)
      asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(
                       qTile + b8 * 8192 + row * 128 +
                       (((4 * half + c8) ^ (row % 8)) * 16)),
                   "r"(q8[b8][c8][0]), "r"(q8[b8][c8][1]), "r"(q8[b8][c8][2]),
                   "r"(q8[b8][c8][3])
                   : "memory");
  const int r = lane / 4;
  return make_float2(__shfl_sync(0xffffffffu, down, 2 * r),
                     __shfl_sync(0xffffffffu, down, 2 * r + 16));
}

/// \brief What merging a tile's split slots needs (Sm90Consumer::mergeSplits).
struct Sm90MergeSlots {
  const float *partialOut, *partialLse;
  void *out;
  float *lse;
  int64_t outStrideToken;
  int firstSplit, numSplits;
  int head, qHead;        ///< grid head; q head of row 0
  int row0, rows, token0; ///< the warpgroup's rows; the tile's first token
};

/// \brief Merges slots [firstSplit, firstSplit + numSplits) of the rows by
/// their LSE, in slot order, into out and lse; 128 threads (`tid`). Out of
/// line: the key loop and the store that every tile runs do not carry it.
template <class Config>
__device__ __noinline__ void sm90MergeSlots(const Sm90MergeSlots m, int tid) {
  using QT = typename PrefillSm90Traits<Config>::QT;
  constexpr int D = PrefillSm90Traits<Config>::kHeadDim;
  constexpr int kRowsPerToken = sm90RowsPerToken<Config>();
  constexpr int kGridHeads = Sm90Work<Config, false>::kHeads;
  constexpr int kQuads = D / 4; // float4 pieces of a row
  for (int i = tid; i < m.rows * kQuads; i += 128) {
    const int row = m.row0 + i / kQuads, d = (i % kQuads) * 4;
    auto slotRow = [&](int k) {
      return (int64_t(m.firstSplit + k) * Config::kBlockM + row) * kGridHeads +
             m.head;
    };
    // Other CTAs wrote the slots: read through L2 (__ldcg).
    float mMax = negInf();
    for (int k = 0; k < m.numSplits; ++k)
      mMax = fmaxf(mMax, __ldcg(m.partialLse + slotRow(k)));
    const float base = mMax == negInf() ? 0.f : mMax;
    float sum = 0.f, acc[4] = {0.f, 0.f, 0.f, 0.f};
    for (int k = 0; k < m.numSplits; ++k) {
      const float w = exp2f(__ldcg(m.partialLse + slotRow(k)) - base);
      const float4 part = __ldcg(
          reinterpret_cast<const float4 *>(m.partialOut + slotRow(k) * D + d));
      sum += w;
      acc[0] += w * part.x;
      acc[1] += w * part.y;
      acc[2] += w * part.z;
      acc[3] += w * part.w;
    }
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    const int64_t token = m.token0 + row / kRowsPerToken;
    const int qHead = m.qHead + row % kRowsPerToken;
    QT *dst = static_cast<QT *>(m.out) + token * m.outStrideToken +
              int64_t(qHead) * D + d;
    *reinterpret_cast<uint32_t *>(dst) = pack2<QT>(acc[0] * inv, acc[1] * inv);
    *reinterpret_cast<uint32_t *>(dst + 2) =
        pack2<QT>(acc[2] * inv, acc[3] * inv);
    if constexpr (Config::kWriteLse)
      if (d == 0)
        m.lse[token * Config::kNumQHeads + qHead] =
            sum > 0.f ? (base + log2f(sum)) * kLn2 : negInf();
  }
}

/// \brief Consumer warpgroup g (64 query rows) of one pair: its MMA steps
/// (S = Q K^T, O += P V), the softmax between them, the paged V tail and
/// the epilogue, over the shared rings the producer fills. `base` is the
/// rings' running index at the pair's first tile.
template <class Config> struct Sm90Consumer {
  using Tr = PrefillSm90Traits<Config>;
  using QT = typename Tr::QT;
  static constexpr int kBlockM = Config::kBlockM, kBlockN = Config::kBlockN;
  static constexpr int kStages = Config::kStages;
  static constexpr int D = Tr::kHeadDim;
  static constexpr int kSRegs = kBlockN / 2; // S accumulator floats / thread
  static constexpr int kORegs = D / 2;       // O accumulator floats / thread
  static constexpr int kNTiles = kBlockN / 8;
  static constexpr int kOTiles = D / 8;
  static constexpr int kPartRegs = Tr::kPVPartN / 2;
  /// FP8 compute: P is 2^8 times its value (e4m3 keeps its 3 bits down to
  /// 2^-6 of that, not of 1), and so are l and O until the end.
  static constexpr float kPScale = Tr::kFP8Compute ? 256.f : 1.f;
  static constexpr float kPLog2 = Tr::kFP8Compute ? 8.f : 0.f;
  static constexpr bool kOneLevel = Tr::kFP8Compute && Sm90Ablation::kOneLevel;
  /// Two consumers at head dims 128 and 256 ping-pong: named barriers order
  /// their wgmma issue so that one's softmax runs under the other's wgmma
  /// (1-5% faster at 128 on the H200, within noise at 256; at 64 it
  /// measured -2..+5%: docs/perf-log/history.md, "Hopper prefill").
  static constexpr bool kPingPong = D >= 128 && Tr::kConsumers == 2;

  const PrefillParams &p;
  const Sm90Smem<Config> &sm;
  const Sm90Item &it;
  const int g, tid, warp, lane, r, c, base;
  static constexpr int kRowsPerToken = sm90RowsPerToken<Config>();
  const int warpRow0; // first row of this warp
  int rowPos[2];      // positions of rows r and r + 8 of this warp (h)
  int rowHead[2];     // their q heads
  const typename Variant<Config>::Row headValues;
  float qkScales[2], expScales[2], vDequant;
  float o[kORegs];
  PrefillSoftmaxRow rows[2];
  float sAcc[kSRegs];
  // P's A fragments: 16-bit, 16 keys each; FP8 compute, 32 keys each.
  uint32_t pa[kBlockN / (Tr::kFP8Compute ? 32 : 16)][4];
  float pv[Tr::kFP8Compute ? kPartRegs : 1]; // FP8 compute: a part of P V
  float corrs[2] = {1.f, 1.f};
  const uint32_t qTile;
  /// The item's split slot, or -1: read before the key loop, so that the
  /// store does not wait on the load.
  const int split;

  __device__ __forceinline__ Sm90Consumer(const PrefillParams &params,
                                          const Sm90Smem<Config> &smem,
                                          const Sm90Item &item, int group,
                                          int tileBase)
      : p(params), sm(smem), it(item), g(group), tid(threadIdx.x % 128),
        warp(tid / 32), lane(tid % 32), r(lane / 4), c(lane % 4),
        base(tileBase), warpRow0(group * 64 + warp * 16),
        headValues(Variant<Config>::row(params, item.work.request, item.qHead)),
        qTile(smem.q + group * Tr::kQWGBytes),
        split(params.workItems[item.index].split) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = warpRow0 + r + 8 * h;
      rowPos[h] = it.firstPos + row / kRowsPerToken;
      rowHead[h] = it.qHead + row % kRowsPerToken;
    }
    float qkScale;
    prefillScales<typename Tr::KVT, Config::kPerHeadKVScale>(p, it.kvHead,
                                                             qkScale, vDequant);
    qkScales[0] = qkScales[1] = qkScale;
    setExpScales();
#pragma unroll
    for (int i = 0; i < kORegs; ++i)
      o[i] = 0.f;
  }

  __device__ __forceinline__ void setExpScales() {
#pragma unroll
    for (int h = 0; h < 2; ++h)
      expScales[h] = Variant<Config>::foldedScale(qkScales[h], p);
  }
  __device__ __forceinline__ int stage(int t) const {
    return (base + t) % kStages;
  }
  __device__ __forceinline__ void waitFull(uint32_t bar, int t) const {
    mbarWait(bar, ((base + t) / kStages) & 1);
  }

  /// Ping-pong: consumer g issues its wgmma only after the other has issued
  /// its own (named barrier 1 + g, 256 threads: its 128 syncing and the
  /// other's 128 arriving); consumer 1 lets consumer 0 go first, and its
  /// init arrival is balanced by skipping its last one.
  __device__ __forceinline__ void issueBegin() const {
    if constexpr (kPingPong)
      namedBarSync(1 + g, 256);
  }
  __device__ __forceinline__ void issueEnd(bool last) const {
    if constexpr (kPingPong)
      if (!(last && g == 1))
        namedBarArrive(2 - g, 256);
  }
  __device__ __forceinline__ void startPingPong() const {
    if constexpr (kPingPong)
      if (g == 1 && it.numTiles > 0)
        namedBarArrive(1, 256);
  }

  /// The Q tile of this pair as the MMAs read it: converted to f16 (FP8
  /// caches widened to f16 under a bf16 q) or quantized to e4m3 (FP8
  /// compute), the score scales taking the conversion's factors; an e4m3 q
  /// the caller quantized brings its scale per q head.
  __device__ __forceinline__ void prepareQ() {
    if constexpr (Tr::kQToHalf) {
      const int e = sm90QToHalf<Config>(qTile, warp, lane);
      qkScales[0] = qkScales[1] = qkScales[0] * exp2i(e);
      setExpScales();
      // Visible to this warpgroup's wgmma (async proxy).
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
      namedBarSync(3 + g, 128);
    }
    if constexpr (Tr::kFP8Query) {
      qkScales[1] = qkScales[0] * p.qScale[rowHead[1]];
      qkScales[0] *= p.qScale[rowHead[0]];
      setExpScales();
    } else if constexpr (Tr::kFP8Compute) {
      const float2 down = sm90QuantizeQ<Config>(qTile, warp, lane, 3 + g);
      qkScales[0] *= down.x;
      qkScales[1] *= down.y;
      setExpScales();
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
      namedBarSync(3 + g, 128);
    }
  }

  /// S = Q K^T of tile t: head-dim steps of 16 (32 bytes) inside each
  /// 128-byte swizzled column block; one commit group.
  __device__ __forceinline__ void issueQK(int t) {
    const uint32_t kTile = sm.kTile(stage(t));
    fenceRegs(sAcc);
    wgmmaFence();
    if constexpr (!Sm90Ablation::kNoQK) {
#pragma unroll
      for (int k = 0; k < Tr::kColBlocks * 4; ++k) {
        const uint32_t colOffset = (k / 4) * 128, inRow = (k % 4) * 32;
        const uint64_t a = smemDesc(qTile + colOffset * 64 + inRow, 16);
        const uint64_t b =
            smemDesc(kTile + (k / 4) * Tr::kKVColBlockBytes + inRow, 16,
                     Tr::kKVRowGroupBytes);
        if constexpr (Tr::kFP8Compute)
          WgmmaFP8<typename Tr::KVT, kBlockN>::ss(sAcc, a, b, k > 0);
        else
          Wgmma<typename Tr::MT, kBlockN>::ss(sAcc, a, b, k > 0);
      }
    }
    wgmmaCommit();
  }

  /// O += P V of tile t: key steps of 16 rows (two 8-row groups of every
  /// column block); one commit group. FP8 compute: part `part` of the head
  /// dims into pv (or, one level, straight into O); key steps of 32 over
  /// V^T.
  __device__ __forceinline__ void issuePV(int t, int part = 0) {
    const uint32_t vTile = sm.vTile(stage(t));
    if constexpr (Tr::kFP8Compute) {
      float(&acc)[kPartRegs] = *reinterpret_cast<float(*)[kPartRegs]>(
          kOneLevel ? o + part * kPartRegs : pv);
      fenceRegs(acc);
      wgmmaFence();
      if constexpr (!Sm90Ablation::kNoPV) {
#pragma unroll
        for (int kk = 0; kk < kBlockN / 32; ++kk)
          WgmmaFP8<typename Tr::KVT, Tr::kPVPartN>::rs(
              acc, pa[kk],
              smemDescPlain(vTile + kk * 256 +
                                part * (Tr::kPVPartN / 8) * Tr::kVtGroupBytes,
                            128, Tr::kVtGroupBytes),
              kOneLevel || kk > 0);
      }
    } else {
      fenceRegs(o);
      wgmmaFence();
      if constexpr (!Sm90Ablation::kNoPV) {
#pragma unroll
        for (int kk = 0; kk < kBlockN / 16; ++kk)
          Wgmma<typename Tr::MT, D>::rs(
              o, pa[kk],
              smemDesc(vTile + kk * 2 * Tr::kKVRowGroupBytes,
                       Tr::kKVColBlockBytes, Tr::kKVRowGroupBytes),
              1);
      }
    }
    wgmmaCommit();
  }

  /// Once the P V wgmma of tile t (part 0) has completed: FP8 compute adds
  /// it to O, then runs and adds the other parts one by one (two-level
  /// accumulation).
  __device__ __forceinline__ void finishPV(int t) {
    if constexpr (Tr::kFP8Compute) {
#pragma unroll
      for (int part = 0; part < D / Tr::kPVPartN; ++part) {
        if (part > 0) {
          issuePV(t, part);
          wgmmaWait<0>();
        }
        fenceRegs(pv);
        fenceRegs(o);
        if constexpr (!kOneLevel)
#pragma unroll
          for (int i = 0; i < kPartRegs; ++i)
            o[part * kPartRegs + i] += pv[i];
      }
    }
    fenceRegs(o);
  }

  /// Score modifiers, masks and the online softmax of tile t, in place: sAcc
  /// becomes P (unnormalized, fp32); corrs gets the factors that rescale O.
  __device__ __forceinline__ void softmax(int t) {
    if constexpr (Sm90Ablation::kNoSoftmax)
      return;
    const PrefillWorkItem &work = it.work;
    const int tileStart = it.kvBegin + t * kBlockN;
    const int warpFirstPos = it.firstPos + warpRow0 / kRowsPerToken;
    const int warpLastPos = it.firstPos + (warpRow0 + 15) / kRowsPerToken;
    const bool needMask =
        Variant<Config>::maskModMayHide(work.request, warpFirstPos, warpLastPos,
                                        tileStart, tileStart + kBlockN - 1,
                                        it.qHead) ||
        tileStart + kBlockN > work.kvLen ||
        (Config::kCausal && tileStart + kBlockN - 1 > warpFirstPos) ||
        (Config::kSlidingWindow && tileStart < warpLastPos - p.windowLeft);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // key - rowPos: one conversion per tile and row (KeyDistance).
      const float distBase = float(tileStart + 2 * c - rowPos[h]);
      Variant<Config>::template modifyScores<2 * kNTiles>(
          [&](int i) -> float & { return sAcc[4 * (i / 2) + 2 * h + i % 2]; },
          [&](int i) { return tileStart + (i / 2) * 8 + 2 * c + i % 2; },
          rowPos[h], qkScales[h], headValues, p);
      auto scoresOf = [&](auto maskTag) {
        float tmax = negInf();
#pragma unroll
        for (int n = 0; n < kNTiles; ++n)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int key = tileStart + n * 8 + 2 * c + e;
            float &x = sAcc[4 * n + 2 * h + e];
            x = prefillScore<Config, decltype(maskTag)::value>(
                x, key, rowPos[h], KeyDistance{distBase, float(n * 8 + e)},
                work.kvLen, qkScales[h], headValues, p);
            tmax = fmaxf(tmax, x);
          }
        return tmax;
      };
      float tmax = needMask ? scoresOf(BoolConstant<true>())
                            : scoresOf(BoolConstant<false>());
      tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
      tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 2));
      corrs[h] = rows[h].update<2 * kNTiles>(
          tmax, expScales[h], kPLog2,
          [&](int i) -> float & { return sAcc[4 * (i / 2) + 2 * h + i % 2]; });
    }
  }
  __device__ __forceinline__ void softmaxStage(int t) {
    softmax(t);
    if constexpr (Sm90Ablation::kDoubleSoftmax) {
      fenceRegs(sAcc);
      softmax(t);
    }
  }
  __device__ __forceinline__ void rescaleO() {
    if constexpr (Sm90Ablation::kNoSoftmax)
      return;
#pragma unroll
    for (int j = 0; j < kOTiles; ++j) {
      o[4 * j] *= corrs[0];
      o[4 * j + 1] *= corrs[0];
      o[4 * j + 2] *= corrs[1];
      o[4 * j + 3] *= corrs[1];
    }
  }

  /// The C fragment of S, rounded to 16 bits, is the A fragment of P. In
  /// e4m3 (FP8 compute) it is too, in V^T's key order (fp8VtSlot): register
  /// 2q + h of 32 keys holds row h's columns of n-tiles 4 kk + 2q and + 1.
  __device__ __forceinline__ void packP() {
    if constexpr (Tr::kFP8Compute) {
#pragma unroll
      for (int kk = 0; kk < kBlockN / 32; ++kk)
#pragma unroll
        for (int q = 0; q < 2; ++q)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int n = 4 * kk + 2 * q;
            pa[kk][2 * q + h] =
                packE4M3x4(sAcc[4 * n + 2 * h], sAcc[4 * n + 2 * h + 1],
                           sAcc[4 * n + 4 + 2 * h], sAcc[4 * n + 5 + 2 * h]);
          }
    } else {
#pragma unroll
      for (int n = 0; n < kNTiles; ++n)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          pa[n / 2][(n % 2) * 2 + h] = pack2<typename Tr::MT>(
              sAcc[4 * n + 2 * h], sAcc[4 * n + 2 * h + 1]);
    }
  }

  /// Paged: zeroes the V rows of tile t past the request's end (only the
  /// last tile has any): whole 128-byte rows, so the swizzle does not
  /// matter, or (FP8 compute) those keys' bytes of every V^T row. Each
  /// consumer zeroes all of them (the other writes the same zeros), then
  /// makes them visible to its wgmma (async proxy) and waits for its
  /// warpgroup (named barrier 3 + g). Rows of the last page past the end
  /// hold whatever the cache holds (NaN, say), which P = 0 does not cancel.
  __device__ __forceinline__ void zeroVTail(int t) const {
    if constexpr (Config::kPaged) {
      const int first = it.work.kvLen - (it.kvBegin + t * kBlockN);
      if (first >= kBlockN)
        return;
      const int rows = kBlockN - max(first, 0);
      const uint32_t vTile = sm.vTile(stage(t));
      if constexpr (Tr::kFP8Compute) {
        for (int i = tid; i < rows * D; i += 128) {
          const int slot = fp8VtSlot(kBlockN - rows + i % rows), d = i / rows;
          asm volatile("st.shared.u8 [%0], %1;\n" ::"r"(
                           vTile + (d / 8) * Tr::kVtGroupBytes +
                           (slot / 16) * 128 + (d % 8) * 16 + slot % 16),
                       "r"(0)
                       : "memory");
        }
      } else {
        for (int i = tid; i < rows * 8 * Tr::kVColBlocks; i += 128) {
          const int chunk = i % 8, row = kBlockN - rows + (i / 8) % rows,
                    block = i / 8 / rows;
          asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(
                           vTile + Tr::kvOffset(row, block, chunk)),
                       "r"(0)
                       : "memory");
        }
      }
      asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
      namedBarSync(3 + g, 128);
    }
  }

  /// The key loop (FA3's intra-warpgroup overlap): S of tile t runs while
  /// P V of tile t - 1 is issued; the softmax of tile t waits for S only,
  /// then O is rescaled once P V of tile t - 1 has completed. K and V
  /// stages are released as soon as their wgmma has read them.
  __device__ __forceinline__ void run() {
    const int numTiles = it.numTiles;
    if (numTiles == 0)
      return;
    waitFull(sm.kFull(stage(0)), 0);
    issueBegin();
    issueQK(0);
    issueEnd(false);
    wgmmaWait<0>();
    fenceRegs(sAcc);
    mbarArrive(sm.kEmpty(stage(0)));
    softmaxStage(0);
    packP();
    for (int t = 1; t < numTiles; ++t) {
      waitFull(sm.kFull(stage(t)), t);
      issueBegin();
      issueQK(t);
      waitFull(sm.vFull(stage(t - 1)), t - 1);
      issuePV(t - 1);
      issueEnd(false);
      wgmmaWait<1>();
      fenceRegs(sAcc);
      mbarArrive(sm.kEmpty(stage(t)));
      softmaxStage(t);
      wgmmaWait<0>();
      finishPV(t - 1);
      fenceRegs(pa);
      mbarArrive(sm.vEmpty(stage(t - 1)));
      rescaleO();
      packP();
    }
    // P V of the last tile.
    waitFull(sm.vFull(stage(numTiles - 1)), numTiles - 1);
    zeroVTail(numTiles - 1);
    issueBegin();
    issuePV(numTiles - 1);
    issueEnd(true);
    wgmmaWait<0>();
    finishPV(numTiles - 1);
    fenceRegs(pa);
    mbarArrive(sm.vEmpty(stage(numTiles - 1)));
  }

  /// Split-KV: the index of tile row `row` of the CTA's head in slot
  /// `slot` (PrefillParams::partialOut, in D floats; partialLse).
  static constexpr int kGridHeads = Sm90Work<Config, false>::kHeads;
  __device__ __forceinline__ int64_t slotRowOf(int slot, int row) const {
    return (int64_t(slot) * kBlockM + row) * kGridHeads + it.head;
  }

  /// Normalizes and stores rows r and r + 8 of this warp (and their LSE):
  /// to out, or a split's to its partial slot, then merges the tile's
  /// splits if this is the last of them.
  __device__ __forceinline__ void store() {
    const bool isSplit = split >= 0;
    // A sink counts once per row: in the split that holds key 0.
    const bool addsSink = !isSplit || p.workItems[it.index].keyBegin == 0;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = rows[h].l;
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      l *= 1.f / kPScale; // O keeps P's scale: inv takes it back
      const int row = warpRow0 + r + 8 * h;
      if (row >= it.tileRows)
        continue;
      float mRow = rows[h].m * expScales[h]; // log2 units
      const float numer =
          addsSink
              ? Variant<Config>::template finishRow<true>(headValues, mRow, l)
              : 1.f;
      const float inv =
          l > 0.f ? numer / l * (vDequant / kPScale) : 0.f; // no visible key: 0
      if (isSplit) {
        const int64_t slotRow = slotRowOf(split, row);
        float *dst = p.partialOut + slotRow * D;
#pragma unroll
        for (int j = 0; j < kOTiles; ++j)
          *reinterpret_cast<float2 *>(dst + j * 8 + 2 * c) =
              make_float2(o[4 * j + 2 * h] * inv, o[4 * j + 2 * h + 1] * inv);
        if (c == 0)
          p.partialLse[slotRow] = l > 0.f ? mRow + log2f(l) : negInf();
        continue;
      }
      const int64_t token =
          it.work.outStart + it.work.tileBegin + row / kRowsPerToken;
      QT *dst = static_cast<QT *>(p.out) + token * p.outStrideToken +
                int64_t(rowHead[h]) * D;
#pragma unroll
      for (int j = 0; j < kOTiles; ++j)
        *reinterpret_cast<uint32_t *>(dst + j * 8 + 2 * c) =
            pack2<QT>(o[4 * j + 2 * h] * inv, o[4 * j + 2 * h + 1] * inv);
      if constexpr (Config::kWriteLse)
        if (c == 0)
          p.lse[token * Config::kNumQHeads + rowHead[h]] =
              l > 0.f ? (mRow + log2f(l)) * kLn2 : negInf();
    }
    if (isSplit)
      mergeSplits(p.workItems[it.index].firstSplit,
                  p.workItems[it.index].numSplits);
  }

  /// The end of a split: counts this warpgroup's 64 rows as done and, in
  /// the warpgroup that completes them for every split of the tile, merges
  /// the slots by their LSE (in slot order, whoever finishes last) into out
  /// and lse. Each warpgroup's rows are its own in every split, so only
  /// the warpgroup syncs (named barrier 3 + g); the counter is reset for
  /// the next launch.
  __device__ __forceinline__ void mergeSplits(int firstSplit,
                                              int numSplits) const {
    __threadfence(); // this thread's partial writes, before the count
    namedBarSync(3 + g, 128);
    bool last = false;
    if (tid == 0) {
      int32_t *counter =
          p.mergeCounters +
          (int64_t(firstSplit) * kGridHeads + it.head) * Tr::kConsumers + g;
      last = atomicAdd(counter, 1) == numSplits - 1;
      if (last)
        *counter = 0;
    }
    if (!namedBarOr(3 + g, 128, last))
      return;
    __threadfence();
    Sm90MergeSlots m;
    m.partialOut = p.partialOut;
    m.partialLse = p.partialLse;
    m.out = p.out;
    m.lse = p.lse;
    m.outStrideToken = p.outStrideToken;
    m.firstSplit = firstSplit;
    m.numSplits = numSplits;
    m.head = it.head;
    m.qHead = it.qHead;
    m.row0 = g * 64;
    m.rows = min(64, it.tileRows - g * 64);
    m.token0 = it.work.outStart + it.work.tileBegin;
    sm90MergeSlots<Config>(m, tid);
  }
};

//===----------------------------------------------------------------------===//
// The kernel
//===----------------------------------------------------------------------===//

/// \brief The kernel body for one grid shape: one (work item, q head) pair
/// per CTA, or persistent CTAs looping over pairs (`kPersistent`).
/// Warpgroup 0 produces (sm90Load, sm90Widen, sm90CheckPages), the others
/// consume (Sm90Consumer), each pair in turn.
template <class Config, bool kPersistent>
__device__ __forceinline__ void prefillSm90Body(const PrefillSm90Params &sp) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Tr = PrefillSm90Traits<Config>;
  const Sm90Work<Config, kPersistent> work(sp.base);
  if (work.empty())
    return;
  extern __shared__ __align__(1024) char smemRaw[];
  const Sm90Smem<Config> sm((smemAddr(smemRaw) + 1023) & ~1023u);
  if (threadIdx.x == 0)
    sm.init();
  __syncthreads();

  const int warpGroup = threadIdx.x / 128;
  if (warpGroup == 0) {
    // Every producer thread gives registers back; one issues the copies
    // (spreading a paged tile's boxes over a warp's lanes measured up to
    // 25% slower at head dim 64 and no faster elsewhere).
    setMaxRegsDec<Tr::kProducerRegs>();
    if constexpr (Tr::kFP8) {
      if (threadIdx.x >= 32) {
        sm90Widen<Config>(sm, threadIdx.x - 32);
        return;
      }
    }
    if constexpr (Config::kPaged && !Tr::kFP8) {
      if (threadIdx.x / 32 == 1) {
        sm90CheckPages(work);
        return;
      }
    }
    if (threadIdx.x == 0)
      sm90Load(sp, work, sm);
    return;
  }

  setMaxRegsInc<Tr::kConsumerRegs>();
  int base = 0; // tiles of the earlier pairs: the rings' running index
  for (int n = 0, w = work.pair(0); w < work.total; w = work.pair(++n)) {
    const Sm90Item it = work.item(w);
    Sm90Consumer<Config> consumer(sp.base, sm, it, warpGroup - 1, base);
    consumer.startPingPong();
    mbarWait(sm.qFull(), n & 1);
    consumer.prepareQ();
    consumer.run();
    // Q of this pair is no longer read: the producer may load the next.
    mbarArrive(sm.qEmpty());
    consumer.store();
    base += it.numTiles;
  }
#endif
}

/// \brief Ragged or paged prefill on sm_90a: a grid of (work items, q
/// heads), or one row of persistent CTAs (runtime/kernels/Prefill.cpp).
template <class Config>
__device__ __forceinline__ void prefillSm90Kernel(const PrefillSm90Params &sp) {
  if (gridDim.y == 1)
    prefillSm90Body<Config, true>(sp);
  else
    prefillSm90Body<Config, false>(sp);
}

} // namespace attn

#endif // ATTN_TEMPLATES_PREFILL_SM90_CUH
