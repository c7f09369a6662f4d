//===- params.h - launch parameters of the attn kernels ---------*- C++ -*-===//
//
// The argument ABI between the runtime (host) and the kernel templates
// (device): each kernel takes one of these structs by value. Plain C++ that
// both a host compiler and NVRTC accept; no CUDA types, so pointers to
// half/bf16/fp8 data are void pointers whose element type the kernel knows at
// compile time.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEMPLATES_PARAMS_H
#define ATTN_TEMPLATES_PARAMS_H

#ifdef __CUDACC_RTC__
typedef long long int64_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#else
#include <cstdint>
#endif

namespace attn {

/// Aux tables a score_mod or mask_mod reads (attn.aux_load), per launch.
constexpr int kMaxAuxTables = 4;

/// One aux table: row-major f32 or i32 data of up to 3 dimensions; the
/// dimensions past its rank are 1. A read outside `dims` returns 0.
struct AuxTable {
  const void *data;
  int32_t dims[3];
};

/// Where kernels report a page id outside the paged cache, or an append_kv
/// slot past it (docs/semantics.md, "Page ids outside the cache"): pinned
/// host memory the GPU writes through its unified address, owned by each
/// workspace (and append-KV kernel) and read by the host, without
/// synchronizing, at its next plan() or run().
struct PageIdError {
  /// 0, or what a kernel met, in one 8-byte store (a host that sees it sees
  /// all of it): bit 63 set, bits 32-62 the page table's row (append_kv:
  /// the token), bits 0-31 the id (append_kv: the slot, at most INT32_MAX).
  uint64_t report;
  /// The cache's pages at the last launch; written by the host.
  int64_t numPages;
};

/// One unit of decode work: a KV range of one request, processed by one CTA
/// for every KV head (grid.y) and row tile (grid.z). A split request's chunks
/// own consecutive partial slots; the CTA that finishes last merges them.
struct DecodeWorkItem {
  int32_t request;      ///< index into seq_lens / page_tables
  int32_t kvBegin;      ///< first KV token of the chunk, a multiple of 16
  int32_t kvEnd;        ///< one past the last KV token of the chunk
  int32_t partialIdx;   ///< this chunk's partial slot; -1 if unsplit
  int32_t firstPartial; ///< the request's first slot (split requests)
  int32_t numPartials;  ///< the request's chunk count (split requests)
  int32_t seqLen;       ///< the request's cached tokens, new ones included
};

/// Paged decode (templates/attn/decode.cuh).
struct DecodeParams {
  const void *q;      ///< [batch * query_len, num_q_heads, head_dim], q dtype
  void *out;          ///< same shape and dtype as q
  float *lse;         ///< [batch * query_len, num_q_heads] or null
  const void *kCache; ///< K pages, kv dtype; page p at kCache + p * pageStride
  const void *vCache; ///< V pages, same layout as K
  const int32_t *pageTables; ///< [batch, pageTableStride] page indices
  PageIdError *pageIdError;  ///< never null
  const float *kScale;       ///< FP8 only: [1] or [num_kv_heads]
  const float *vScale;       ///< FP8 only: [1] or [num_kv_heads]
  /// Per-query-head tables ([num_q_heads] f32; attn/variant_knobs.h), set
  /// when the variant has them: alibiSlopes, ...
#define ATTN_HEAD_TABLE(flag, pointer, ...) const float *pointer;
#include "attn/variant_knobs.h"
  const DecodeWorkItem *workItems; ///< from the plan
  const int32_t *numWorkItems;     ///< device count; grid.x may be larger
  float *partialOut; ///< [slots, query_len * num_q_heads, head_dim] f32
  float *partialLse; ///< [slots, query_len * num_q_heads] f32
  /// [batch, num_kv_heads, row blocks]: chunks of a split request that have
  /// finished; zero between launches (the merging CTA resets its counter).
  int32_t *mergeCounters;
  int64_t qStrideToken;   ///< elements between tokens of q
  int64_t outStrideToken; ///< elements between tokens of out
  int64_t pageStride;     ///< elements between pages of kCache / vCache
  int32_t pageTableStride;
  /// The cache's last page id (pages - 1, at most 2^31 - 1): a page id
  /// above it, or negative, reads this page instead and is reported.
  uint32_t lastPage;
  float smScale;      ///< softmax scale (1/sqrt(head_dim) by default)
  float softcap;      ///< cap c of c * tanh(s / c); unused unless compiled in
  int32_t windowLeft; ///< keys at positions >= pos - windowLeft are visible
  /// Added to a request's index where the modifier regions see it: a
  /// mixed batch's decodes follow its prefills.
  int32_t firstRequest;
  AuxTable aux[kMaxAuxTables]; ///< read by score_mod / mask_mod, if any
};

/// Absorbed MLA decode (templates/attn/mla_decode.cuh): one latent KV head
/// whose cache rows hold the latent c (head_dim values, also the values)
/// then the RoPE key (rope_dim). The latent and RoPE parts may be one
/// tensor ([pages, page_size, head_dim + rope_dim]: kpe = ckv + head_dim,
/// the same strides) or two (FlashInfer's ckv_cache and kpe_cache).
struct MlaDecodeParams {
  const void *qNope; ///< [batch * query_len, num_q_heads, head_dim], q dtype
  const void *qRope; ///< [batch * query_len, num_q_heads, rope_dim]
  void *out;         ///< [batch * query_len, num_q_heads, head_dim], q dtype
  float *lse;        ///< [batch * query_len, num_q_heads] or null
  const void *ckv;   ///< latent of token t of page p: ckv + p * ckvPageStride
                     ///< + t * ckvTokenStride, kv dtype
  const void *kpe;   ///< RoPE key, addressed alike with the kpe strides
  const int32_t *pageTables;       ///< [batch, pageTableStride] page indices
  PageIdError *pageIdError;        ///< never null
  const float *kvScale;            ///< FP8 only: [1], the cache's scale
  const DecodeWorkItem *workItems; ///< from the decode plan
  const int32_t *numWorkItems;     ///< device count; grid.x may be larger
  float *partialOut;        ///< [slots, query_len * num_q_heads, head_dim] f32
  float *partialLse;        ///< [slots, query_len * num_q_heads] f32
  int32_t *mergeCounters;   ///< [batch, row blocks], zero between launches
  int64_t qNopeStrideToken; ///< elements between tokens of qNope
  int64_t qRopeStrideToken; ///< ... of qRope
  int64_t outStrideToken;   ///< ... of out
  int64_t ckvPageStride;    ///< elements
  int64_t kpePageStride;
  int32_t ckvTokenStride;
  int32_t kpeTokenStride;
  int32_t pageTableStride;
  uint32_t lastPage; ///< as DecodeParams::lastPage
  float smScale;     ///< softmax scale
};

/// One CTA's share of a prefill: blockM query rows of one request (for every
/// q head along grid.y). Offsets come from the host plan, so the kernel reads
/// no cu_seqlens.
struct PrefillWorkItem {
  int32_t qStart; ///< the request's first row in q / out (cu_seqlens_q[b])
  int32_t qLen;   ///< the request's query rows
  /// Ragged: the request's first row in k / v. Paged: its first key in
  /// its page-table row, a multiple of the page size (0 but for pieces of
  /// a request, as cascade attention's split prefixes).
  int32_t kvStart;
  int32_t kvLen;     ///< the request's keys (paged: its cached tokens)
  int32_t tileBegin; ///< first query row of this CTA, relative to qStart
  int32_t request;   ///< paged: the request's row of pageTables
  /// The request's first row in out / lse: qStart, but for pieces that
  /// read the same query rows and write apart (cascade attention's key
  /// chunks of a shared prefix).
  int32_t outStart;
  /// Split-KV (sm_90a only): the item reads keys [keyBegin, keyEnd) of
  /// the piece, which are (0, kvLen) for a whole tile; boundaries are
  /// multiples of the key tile. A split item (split >= 0) writes its
  /// normalized f32 O and LSE to slot `split` of partialOut / partialLse;
  /// whichever of the tile's numSplits items finishes last merges slots
  /// [firstSplit, firstSplit + numSplits) into out / lse.
  int32_t keyBegin, keyEnd;
  int32_t split; ///< -1: a whole tile, written straight to out
  int32_t firstSplit, numSplits;
};

/// Ragged and paged prefill (templates/attn/prefill.cuh). Ragged kernels
/// read contiguous k / v rows; paged kernels read k / v as cache pages
/// through pageTables, like DecodeParams.
struct PrefillParams {
  const void *q; ///< [q tokens, num_q_heads, head_dim]
  const void
      *k; ///< ragged: [kv tokens, num_kv_heads, head_dim]; paged: K pages
  const void *v; ///< like k
  void *out;     ///< like q
  float *lse;    ///< [q tokens, num_q_heads] or null
  /// Per-query-head tables, as in DecodeParams.
#define ATTN_HEAD_TABLE(flag, pointer, ...) const float *pointer;
#include "attn/variant_knobs.h"
  const PrefillWorkItem *workItems; ///< from the plan
  const int32_t *numWorkItems;      ///< device count; grid.x may be larger
  /// Split-KV: [slots, blockM, num_q_heads, head_dim] f32 and [slots,
  /// blockM, num_q_heads] (log2 units); mergeCounters [slots, num_q_heads,
  /// consumer warpgroups], zero between launches (the merger resets its
  /// counter). Null when the plan splits nothing.
  float *partialOut;
  float *partialLse;
  int32_t *mergeCounters;
  const int32_t *pageTables; ///< paged: [batch, pageTableStride]
  PageIdError *pageIdError;  ///< paged: never null
  const float *kScale;       ///< paged FP8: [1] or [num_kv_heads]
  const float *vScale;       ///< paged FP8: [1] or [num_kv_heads]
  int64_t qStrideToken;      ///< elements between tokens of q
  int64_t kStrideToken;      ///< ragged: ... of k
  int64_t vStrideToken;      ///< ragged: ... of v
  int64_t outStrideToken;    ///< ... of out
  int64_t pageStride;        ///< paged: elements between pages of k / v
  int32_t pageTableStride;   ///< paged
  uint32_t lastPage;         ///< paged: as in DecodeParams
  float smScale;
  float softcap;
  int32_t windowLeft; ///< keys at positions >= pos - windowLeft are visible
  AuxTable aux[kMaxAuxTables]; ///< read by score_mod / mask_mod, if any
};

/// An opaque CUDA tensor map (CUtensorMap: 128 bytes, 64-byte aligned),
/// encoded on the host by cuTensorMapEncodeTiled and read by TMA copies
/// from the kernel's parameter space.
struct alignas(64) TmaDescriptor {
  uint64_t opaque[16];
};

/// Ragged prefill on sm_90a (templates/attn/prefill_sm90.cuh): the common
/// prefill parameters and the tensor maps of q, k and v, each a 3-d view
/// (head dim, heads, tokens) with a box of 64 dims x 1 head x the tile's
/// rows, 128-byte swizzled.
struct PrefillSm90Params {
  TmaDescriptor qMap; ///< box rows: 64 (one consumer warpgroup's rows)
  TmaDescriptor kMap; ///< box rows: blockN
  TmaDescriptor vMap; ///< box rows: blockN
  PrefillParams base;
};

/// Reshape-and-cache (templates/attn/append_kv.cuh).
struct AppendKVParams {
  const void *k; ///< [num_tokens, num_kv_heads, head_dim], activation dtype
  const void *v;
  void *kCache; ///< pages as in DecodeParams
  void *vCache;
  const int64_t *slotMapping; ///< [num_tokens]; slot = page * page_size +
                              ///< offset, < 0 skips
  PageIdError *pageIdError;   ///< slots past the cache: skipped, reported
  const float *kScale;        ///< FP8 only: stored value is x / scale
  const float *vScale;
  int64_t kStrideToken;
  int64_t vStrideToken;
  int64_t pageStride;
  int64_t numPages; ///< pages of the cache
  int32_t numTokens;
};

/// Partial states one merge_states launch combines (attn.merge_states).
constexpr int kMaxMergeStates = 16;

/// merge_states (templates/attn/merge_states.cuh): per (token, head) row,
/// out = sum_i out_i * exp(lse_i - lse) with lse = log(sum_i exp(lse_i)).
/// out and lse may be states[0]'s (in place).
struct MergeStatesParams {
  const void *outs[kMaxMergeStates];  ///< [tokens, heads, head_dim] each
  const float *lses[kMaxMergeStates]; ///< [tokens, heads] each
  void *out;                 ///< [tokens, heads, head_dim], the states' dtype
  float *lse;                ///< [tokens, heads] or null
  int64_t statesStrideToken; ///< elements between tokens of every out_i
  int64_t outStrideToken;    ///< ... of out
  int64_t numTokens;
  int32_t numStates;
};

/// copy_pages (templates/attn/cache_ops.cuh): page pairs copied in K and V
/// of every layer of a KV cache whose layers are [2, numPages, pageBytes].
struct CopyPagesParams {
  const uint64_t *layers; ///< [numLayers] device addresses of the layers
  const int64_t *pairs;   ///< [numPairs, 2] (src, dst) page ids
  int64_t numPairs;
  int64_t numPages;  ///< pages per layer: V starts numPages pages in
  int64_t pageBytes; ///< bytes of one page of K (or V), a multiple of 16
  int32_t numLayers;
};

/// advance_step (templates/attn/cache_ops.cuh): moves a decode batch of
/// numSeqs rows (numQueries requests, then padding) one token forward in
/// place, and with it a decode plan's work items.
struct AdvanceStepParams {
  int64_t *inputTokens;           ///< [numSeqs] or null
  const int64_t *sampledTokenIds; ///< [numQueries]; null iff inputTokens is
  int64_t *positions;             ///< [numSeqs] or null
  int32_t *seqLens;               ///< [numSeqs] cached tokens, new one included
  int64_t *slotMapping;           ///< [numSeqs]
  const int32_t *pageTables;      ///< [numQueries, pageTableStride]
  DecodeWorkItem *workItems;      ///< a decode plan's, or null
  const int32_t *numWorkItems;    ///< the plan's device count
  int32_t maxWorkItems;           ///< bound of *numWorkItems (the plan's grid)
  int32_t numQueries;
  int32_t numSeqs;
  int32_t pageSize;
  int32_t pageTableStride;
};

} // namespace attn

#endif // ATTN_TEMPLATES_PARAMS_H
