//===- Decode.h - plan and run paged decode kernels -------------*- C++ -*-===//
//
// The host side of paged decode, in the plan/run split: plan() turns the
// batch's sequence lengths into a split-KV work list (host work, once per
// batch step, may copy to the device); run() launches the kernel (split
// requests are merged inside it) with no allocation and no host sync, so it
// can be captured in a CUDA graph. Launch arguments are checked against
// the compiled variant: a mismatch is an Error, never a wrong result.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_DECODE_H
#define ATTN_RUNTIME_DECODE_H

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
#include <vector>

namespace attn::runtime {

/// How a decode batch is split over CTAs; a pure function of the lengths.
struct DecodePartition {
  std::vector<DecodeWorkItem> workItems; ///< one CTA column each
  int chunkTokens = 0;                   ///< KV tokens per work item
  int numPartials = 0;                   ///< partial slots used
  int numSplitRequests = 0;              ///< requests of more than one chunk
};

/// Splits each request's KV range into chunks of at least
/// `spec.schedule.minChunkTokens` tokens, choosing the chunk length that
/// minimizes the estimated time of the grid on `numSMs * ctasPerSM` resident
/// CTAs: waves of CTAs times the tokens (plus a fixed cost) each wave takes.
/// That fills the GPU for small batches and avoids a last, nearly empty wave.
/// With a sliding window, keys no query can see are skipped. Errors name the
/// first bad length.
llvm::Expected<DecodePartition> partitionDecode(llvm::ArrayRef<int32_t> seqLens,
                                                const KernelSpec &spec,
                                                std::optional<int> windowLeft,
                                                int numSMs, int ctasPerSM);

/// Upper bound of work items for `maxBatch` requests (sizes the workspace).
int maxDecodeWorkItems(const KernelSpec &spec, int maxBatch, int numSMs,
                       int ctasPerSM);

/// Device and pinned buffers a decode kernel plans into, sized for a maximum
/// batch; owned by the caller and reused across steps (fixed addresses, as
/// CUDA graphs need).
class DecodeWorkspace {
public:
  static llvm::Expected<DecodeWorkspace>
  create(const KernelSpec &spec, int maxBatch, int numSMs, int ctasPerSM);
  int maxBatch() const { return batchCapacity; }
  int maxWorkItems() const { return workCapacity; }
  /// Device bytes held (work lists and f32 partials).
  size_t deviceBytes() const { return buffer.device().size(); }

private:
  friend class DecodeKernel;
  friend llvm::Expected<struct DecodePlan>
  planDecode(const KernelSpec &spec, std::optional<int> windowLeft, int numSMs,
             int ctasPerSM, llvm::ArrayRef<int32_t> seqLens,
             DecodeWorkspace &workspace, CUstream stream, bool forGraph);
  DecodeWorkspace() = default;
  StagedBuffer buffer; ///< work lists (staged), then f32 partials
  /// The kernels' report of a page id outside the cache (PageIdError).
  PinnedBuffer pageIdError;
  int batchCapacity = 0;
  int workCapacity = 0;
  size_t workOffset = 0, countsOffset = 0;
  size_t partialOutOffset = 0, partialLseOffset = 0, countersOffset = 0;
};

/// A planned batch: the device work lists and grid sizes run() launches.
struct DecodePlan {
  int batch = 0;
  int gridX = 0; ///< work items (or capacity, for graph replay)
  const DecodeWorkItem *workItems = nullptr;
  const int32_t *numWorkItems = nullptr;
  float *partialOut = nullptr;
  float *partialLse = nullptr;
  int32_t *mergeCounters = nullptr;
  /// The workspace's report of a page id outside the cache: the launches
  /// write it, the next plan() or run() on the workspace returns it.
  PageIdError *pageIdError = nullptr;
  int chunkTokens = 0;
};

/// The plan of a batch for a kernel with a decode schedule (decode, MLA
/// decode) running `ctasPerSM` CTAs on each of `numSMs`: partitions the
/// lengths (partitionDecode) and copies the work list into `workspace` on
/// `stream`; DecodeKernel::plan says the rest.
llvm::Expected<DecodePlan>
planDecode(const KernelSpec &spec, std::optional<int> windowLeft, int numSMs,
           int ctasPerSM, llvm::ArrayRef<int32_t> seqLens,
           DecodeWorkspace &workspace, CUstream stream, bool forGraph);

/// Device arguments of one decode call (one layer).
struct DecodeArgs : HeadTables {
  const void *q = nullptr; ///< [numTokens, numQHeads, headDim]
  ScalarType qType = ScalarType::BF16;
  int64_t numTokens = 0; ///< batch * queryLen
  int numQHeads = 0;
  int headDim = 0;
  int64_t qStrideToken = 0; ///< elements; 0 means dense
  void *out = nullptr;      ///< same shape and dtype as q
  int64_t outStrideToken = 0;
  float *lse = nullptr; ///< [numTokens, numQHeads], iff the variant writes LSE
  PagedKVView cache;
  const int32_t *pageTables = nullptr; ///< [batch, pageTableStride]
  int pageTableStride = 0;
  /// [batch], device copy of the plan's lengths; the kernel takes the
  /// lengths from the plan, validatePages reads these.
  const int32_t *seqLens = nullptr;
  const float *kScale = nullptr; ///< FP8: [1] or [numKVHeads]
  const float *vScale = nullptr;
  int numKVScales = 0;
  /// The batch index that modifier regions (and per-request aux tables)
  /// see for this call's request 0: a mixed batch's decodes follow its
  /// prefills. 0 for a plain decode batch.
  int firstRequest = 0;
  /// Debug aid: before launching, copy seqLens and pageTables to the host
  /// and check every page a request uses is in [0, cache.numPages). This
  /// synchronizes the stream, so it is off by default and must stay off
  /// under CUDA-graph capture.
  bool validatePages = false;
};

/// A loaded decode kernel for one variant.
class DecodeKernel : public KernelHandle {
public:
  /// Wraps a loaded library holding `spec`'s entries; `variant` supplies the
  /// runtime values (scale, soft-cap, window) baked into every launch.
  static llvm::Expected<DecodeKernel>
  create(const KernelSpec &spec, const DecodeVariant &variant,
         std::shared_ptr<CudaLibrary> library);

  const DecodeVariant &variant() const { return decodeVariant; }
  int numSMs() const { return smCount; }
  /// CTAs of this kernel that fit on one SM (the occupancy calculator's
  /// answer for its page size and shared memory).
  int residentCTAsPerSM() const { return residentCTAs; }

  /// A workspace for batches of up to `maxBatch` requests.
  llvm::Expected<DecodeWorkspace> createWorkspace(int maxBatch) const;

  /// Plans a batch from host sequence lengths and copies the work lists into
  /// `workspace` on `stream`. With `forGraph`, grid sizes are the workspace
  /// capacity (extra CTAs exit at once) so a captured graph stays valid for
  /// any batch that fits. Fails with the report of a page id outside the
  /// cache that an earlier launch on `workspace` read, if one is there.
  llvm::Expected<DecodePlan> plan(llvm::ArrayRef<int32_t> seqLens,
                                  DecodeWorkspace &workspace, CUstream stream,
                                  bool forGraph = false) const;

  /// Checks `args` against the compiled variant and the plan, then launches.
  /// A page id outside the cache reads the cache's last page instead, and
  /// the next plan() or run() on the workspace fails with it (the launches
  /// do not synchronize: a later call, and the first call after the stream
  /// is synchronized for certain; docs/semantics.md). This call fails, and
  /// launches nothing, if an earlier launch's report is there.
  llvm::Error run(const DecodePlan &plan, const DecodeArgs &args,
                  CUstream stream) const;

  /// The check run() does, alone (without validatePages' device reads).
  llvm::Error checkArgs(const DecodePlan &plan, const DecodeArgs &args) const;

  /// The page check of DecodeArgs::validatePages: reads seqLens and
  /// pageTables back (synchronizing `stream`) and names the first request
  /// whose page is out of range.
  llvm::Error validatePages(const DecodePlan &plan, const DecodeArgs &args,
                            CUstream stream) const;

private:
  DecodeKernel() = default;
  DecodeVariant decodeVariant;
  /// The entry in the context current at create(): launched through it
  /// while that context is current (about 1 us less host time per launch
  /// than the context-independent CUkernel; attn-bench jit).
  CUcontext decodeContext = nullptr;
  CUfunction decodeFunction = nullptr;
  int smCount = 0;
  int residentCTAs = 1;
};

} // namespace attn::runtime

#endif // ATTN_RUNTIME_DECODE_H
