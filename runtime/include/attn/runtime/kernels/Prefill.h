//===- Prefill.h - plan and run prefill kernels -----------------*- C++ -*-===//
//
// The host side of ragged (varlen) and paged prefill in the plan/run split:
// plan() turns the batch's host lengths into a list of query tiles (longest
// work first) and copies it to the workspace; run() launches one kernel with
// no allocation and no host sync. Launch arguments are checked against the
// compiled variant.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_PREFILL_H
#define ATTN_RUNTIME_PREFILL_H

#include "attn/runtime/kernels/HeadTables.h"
#include "attn/runtime/kernels/KernelHandle.h"
#include "attn/runtime/kernels/PagedKV.h"
#include "attn/runtime/support/CudaHandles.h"
#include "spec/KernelSpec.h"
#include "spec/Variant.h"
#include "templates/attn/params.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cuda.h>

#include <memory>
#include <optional>
#include <vector>

namespace attn::runtime {

/// The query tiles of a batch, heaviest first; a pure function of the
/// lengths. Errors name the first bad offset.
llvm::Expected<std::vector<PrefillWorkItem>>
partitionPrefill(llvm::ArrayRef<int32_t> cuSeqlensQ,
                 llvm::ArrayRef<int32_t> cuSeqlensKV, const KernelSpec &spec);

/// The same for a paged prefill over seqLens[b] cached tokens per request.
/// In causal self attention (`rowsInCache`) request b's cu_seqlens_q[b+1] -
/// cu_seqlens_q[b] new rows must be the last of them; without the causal
/// mask (cross attention included) every row sees every cached key, and
/// rows may outnumber them (docs/semantics.md, "Positions").
llvm::Expected<std::vector<PrefillWorkItem>>
partitionPagedPrefill(llvm::ArrayRef<int32_t> cuSeqlensQ,
                      llvm::ArrayRef<int32_t> seqLens, const KernelSpec &spec,
                      bool rowsInCache);

/// Split-KV for the sm_90a (wgmma) kernels: when the tiles times the q
/// heads would leave some of the device's `residentCTAs` idle (a long
/// request's few tiles, a tensor-parallel chunk's few heads), cuts the keys
/// of the longer tiles into splits of whole key tiles so that the pieces
/// about fill them once (at least 512 keys a split, at most `slots` split
/// items; a tile's splits are merged by their LSE in the kernel). Returns
/// the list heaviest first; unchanged when nothing gains. A pure function
/// of the list, the spec, the window and the two counts.
std::vector<PrefillWorkItem>
splitPrefillKeys(std::vector<PrefillWorkItem> items, const KernelSpec &spec,
                 std::optional<int> windowLeft, int residentCTAs, int slots);

/// A piece of prefill work: query rows [qStart, qStart + qLen) see keys
/// [kvStart, kvStart + kvLen): rows of k / v (ragged), or keys of
/// page-table row `request` (paged; kvStart a multiple of the page size),
/// and write rows [outStart, outStart + qLen) of out / lse. Whole requests
/// are pieces (outStart = qStart); cascade attention cuts a shared prefix
/// into pieces of its keys, which read the same query rows.
struct PrefillPiece {
  int32_t qStart = 0, qLen = 0;
  int32_t request = 0;
  int32_t kvStart = 0, kvLen = 0;
  int32_t outStart = 0;
};

/// Device and pinned buffers a prefill kernel plans into, sized for at most
/// `maxQTokens` query rows in `maxBatch` requests.
class PrefillWorkspace {
public:
  /// Work items: query tiles, plus split items (splitPrefillKeys).
  int maxTiles() const { return tileCapacity + splitCapacity; }
  /// Split items a plan may hold; 0 when the kernel does not split.
  int maxSplits() const { return splitCapacity; }
  size_t deviceBytes() const { return buffer.device().size() + splits.size(); }

private:
  friend class PrefillKernel;
  PrefillWorkspace() = default;
  StagedBuffer buffer; ///< tile count, then tiles; all staged
  /// Split-KV: partial O, partial LSE, merge counters (PrefillParams).
  DeviceBuffer splits;
  size_t partialLseOffset = 0, countersOffset = 0;
  /// Paged: the kernels' report of a page id outside the cache
  /// (PageIdError).
  PinnedBuffer pageIdError;
  int tileCapacity = 0;
  int splitCapacity = 0;
};

/// A planned batch.
struct PrefillPlan {
  int batch = 0;
  int64_t numQTokens = 0;  ///< cu_seqlens_q[batch]
  int64_t numKVTokens = 0; ///< ragged: cu_seqlens_kv[batch]
  int maxKVLen = 0;        ///< paged: the longest request's cached tokens
  int gridX = 0;           ///< tiles (or capacity, for graph replay)
  int splitItems = 0;      ///< items that read part of a tile's keys
  const PrefillWorkItem *workItems = nullptr;
  const int32_t *numWorkItems = nullptr;
  /// Split-KV slots and counters (PrefillParams); null without splits.
  float *partialOut = nullptr;
  float *partialLse = nullptr;
  int32_t *mergeCounters = nullptr;
  /// Paged: the workspace's report of a page id outside the cache (as
  /// DecodePlan's).
  PageIdError *pageIdError = nullptr;
};

/// Device arguments of one prefill call (one layer).
struct PrefillArgs : HeadTables {
  /// [numQTokens, numQHeads, headDim + ropeDim]: of dtype, or e4m3 when the
  /// variant takes a quantized q (fp8Query; qScale its [numQHeads] scales).
  const void *q = nullptr;
  const void *k = nullptr; ///< [numKVTokens, numKVHeads, headDim + ropeDim]
  const void *v = nullptr; ///< [numKVTokens, numKVHeads, headDim]
  ScalarType dtype = ScalarType::BF16; ///< of out (and q, and k, v unless FP8)
  /// FP8 k and v (PrefillVariant::fp8KV): their type and dequantization
  /// scales, [1] or [numKVHeads] each (stored value = x / scale).
  std::optional<ScalarType> kvType;
  const float *kScale = nullptr;
  const float *vScale = nullptr;
  int numKVScales = 0;
  int64_t numQTokens = 0;
  int64_t numKVTokens = 0;
  int numQHeads = 0;
  int numKVHeads = 0;
  int headDim = 0; ///< of v and out
  /// q and k have headDim + ropeDim dims (MLA's prefill: 128 + 64).
  int ropeDim = 0;
  int64_t qStrideToken = 0; ///< elements; 0 means dense
  int64_t kStrideToken = 0;
  int64_t vStrideToken = 0;
  void *out = nullptr; ///< like q
  int64_t outStrideToken = 0;
  float *lse = nullptr; ///< [numQTokens, numQHeads] iff LSE
};

/// Device arguments of one paged-prefill call (one layer). The new rows'
/// keys and values must already be in the cache (attn.append_kv).
struct PagedPrefillArgs : HeadTables {
  /// [numQTokens, numQHeads, headDim]: of qType, or e4m3 when the variant
  /// takes a quantized q (fp8Query; qScale its [numQHeads] scales).
  const void *q = nullptr;
  ScalarType qType = ScalarType::BF16; ///< the variant's: of out (and q)
  int64_t numQTokens = 0;
  int numQHeads = 0;
  int headDim = 0;
  int64_t qStrideToken = 0; ///< elements; 0 means dense
  void *out = nullptr;      ///< like q
  int64_t outStrideToken = 0;
  float *lse = nullptr; ///< [numQTokens, numQHeads] iff LSE
  PagedKVView cache;
  const int32_t *pageTables = nullptr; ///< [batch, pageTableStride]
  int pageTableStride = 0;
  const float *kScale = nullptr; ///< FP8: [1] or [numKVHeads]
  const float *vScale = nullptr;
  int numKVScales = 0;
};

/// A loaded prefill kernel for one variant, ragged or paged.
class PrefillKernel : public KernelHandle {
public:
  static llvm::Expected<PrefillKernel>
  create(const KernelSpec &spec, const PrefillVariant &variant,
         std::shared_ptr<CudaLibrary> library);

  const PrefillVariant &variant() const { return prefillVariant; }

  /// A workspace for batches of at most `maxQTokens` query rows in at most
  /// `maxBatch` requests. With `splitKV` (sm_90a kernels), plans split the
  /// keys of batches too small to fill the device (splitPrefillKeys); the
  /// workspace then holds the split slots (about numSMs x blockM x
  /// head_dim floats).
  llvm::Expected<PrefillWorkspace>
  createWorkspace(int maxBatch, int64_t maxQTokens, bool splitKV = true) const;

  /// Plans a batch from host cu_seqlens (batch + 1 offsets each) and copies
  /// the tile list into `workspace` on `stream`. With `forGraph`, the grid is
  /// the workspace capacity (extra CTAs exit at once).
  llvm::Expected<PrefillPlan> plan(llvm::ArrayRef<int32_t> cuSeqlensQ,
                                   llvm::ArrayRef<int32_t> cuSeqlensKV,
                                   PrefillWorkspace &workspace, CUstream stream,
                                   bool forGraph = false) const;
  /// Plans a paged batch from host cu_seqlens_q (batch + 1 offsets) and the
  /// requests' cached lengths (batch values, new rows included).
  llvm::Expected<PrefillPlan> planPaged(llvm::ArrayRef<int32_t> cuSeqlensQ,
                                        llvm::ArrayRef<int32_t> seqLens,
                                        PrefillWorkspace &workspace,
                                        CUstream stream,
                                        bool forGraph = false) const;
  /// Plans paged work given as pieces over q's `numQTokens` rows (which
  /// pieces may share) writing rows of an out (and lse) of `numOutTokens`
  /// rows (which they must not). Queries sit at the end of their piece's
  /// keys, so a causal variant needs pieces that end at the request's last
  /// key; cascade's cross-attention pieces have no mask.
  llvm::Expected<PrefillPlan>
  planPagedPieces(llvm::ArrayRef<PrefillPiece> pieces, int64_t numQTokens,
                  int64_t numOutTokens, PrefillWorkspace &workspace,
                  CUstream stream, bool forGraph = false) const;

  llvm::Error checkArgs(const PrefillPlan &plan, const PrefillArgs &args) const;
  llvm::Error checkArgs(const PrefillPlan &plan,
                        const PagedPrefillArgs &args) const;
  /// Checks `args`, then launches: no allocation, no host sync.
  llvm::Error run(const PrefillPlan &plan, const PrefillArgs &args,
                  CUstream stream) const;
  /// Paged: a page id outside the cache is read as another page (or zeros)
  /// and reported, as by DecodeKernel::run; the plan*() of the workspace
  /// fail with an earlier launch's report too.
  llvm::Error run(const PrefillPlan &plan, const PagedPrefillArgs &args,
                  CUstream stream) const;

private:
  PrefillKernel() = default;
  /// Copies a partition's tiles into `workspace`: the plan of a batch
  /// of cuSeqlensQ.size() - 1 requests.
  llvm::Expected<PrefillPlan>
  upload(llvm::Expected<std::vector<PrefillWorkItem>> partition,
         llvm::ArrayRef<int32_t> cuSeqlensQ, PrefillWorkspace &workspace,
         CUstream stream, bool forGraph) const;
  /// The launch parameters run() derives from the variant, and the launch.
  PrefillParams baseParams(const PrefillPlan &plan) const;
  llvm::Error launch(const PrefillPlan &plan, const PrefillParams &params,
                     CUstream stream) const;
  /// The sm_90a (wgmma) launches: build q's and k/v's (ragged rows or cache
  /// pages) tensor maps, then launch.
  llvm::Error launchSm90(const PrefillPlan &plan, const PrefillParams &params,
                         const PrefillArgs &args, CUstream stream) const;
  llvm::Error launchSm90(const PrefillPlan &plan, const PrefillParams &params,
                         const PagedPrefillArgs &args, CUstream stream) const;
  llvm::Error launchSm90(const PrefillPlan &plan, PrefillSm90Params &params,
                         CUstream stream) const;
  /// q's tensor map, as the sm_90a template reads it.
  llvm::Error encodeQMap(TmaDescriptor &map, const void *q, int64_t numQTokens,
                         int qkDim, int64_t qStrideToken) const;
  PrefillVariant prefillVariant;
  int residentCTAs = 0; ///< of the whole device, for split-KV
};

} // namespace attn::runtime

#endif // ATTN_RUNTIME_PREFILL_H
