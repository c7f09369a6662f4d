//===- CacheOps.h - copy_pages and advance_step on the GPU -----*- C++ -*-===//
//
// The utility kernels an engine runs between attention launches (the seeds'
// copy_pages and advance_step), in the same path as the attention kernels:
// a KernelSpec built here (nothing to schedule: one kernel per kind and
// arch), generated CUDA (templates/attn/cache_ops.cuh), a cubin from a
// KernelCache (memory, AOT library, disk or NVRTC).
//
//  - copyPages: many (src, dst) page pairs copied in K and V of every
//    layer of a KVCache, in one launch (copy-on-write of shared prefix
//    pages; PageTable::append / prepareWrite give the pairs).
//  - advanceStep: multi-step decoding. Moves a decode batch one token
//    forward in place on the device (input tokens, positions, seq_lens,
//    slot_mapping) and, with it, the work items of the batch's DecodePlan,
//    so a decode planned once (e.g. forGraph, captured in a graph) runs the
//    next step without replanning.
//
// Both launch without allocating or synchronizing and can be captured in a
// CUDA graph; copyPages from host pairs adds one small staged upload.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_CACHEOPS_H
#define ATTN_RUNTIME_CACHEOPS_H

#include "attn/runtime/cache/KernelCache.h"
#include "attn/runtime/kernels/Decode.h"
#include "attn/runtime/serving/AttentionMetadata.h"
#include "attn/runtime/serving/KVCache.h"
#include "attn/runtime/support/CudaHandles.h"
#include "spec/KernelSpec.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace attn::runtime {

/// An Error naming the first pair copyPages cannot take for a cache of
/// `numPages` pages: a page outside [0, numPages), src == dst, a
/// destination used twice, or a destination that is also a source (the
/// copies of one launch run in no order, so each must read a page no copy
/// writes).
llvm::Error checkCopyPairs(llvm::ArrayRef<PagePair> pairs, int64_t numPages);

/// Device arguments of one advance_step over a decode batch of `numSeqs`
/// rows: `numQueries` requests of one new token each, then padding (rows a
/// CUDA graph of a larger batch size runs). Every pointer is device memory
/// the caller owns; the arrays are updated in place.
struct AdvanceStepArgs {
  int numQueries = 0;
  int numSeqs = 0; ///< >= numQueries
  int pageSize = 0;
  /// [numSeqs] each request's cached tokens, the one just decoded
  /// included; + 1 for requests, padding rows untouched.
  int32_t *seqLens = nullptr;
  /// [numSeqs] out: the new token's slot, page * pageSize + offset (from
  /// pageTables; -1 when its position is past the table's width, which an
  /// engine prevents by reserving the pages of every step it advances to),
  /// -1 for padding rows.
  int64_t *slotMapping = nullptr;
  const int32_t *pageTables = nullptr; ///< [numQueries, pageTableStride]
  int pageTableStride = 0;
  /// [numSeqs] out: sampledTokenIds for requests. Optional, with
  /// sampledTokenIds ([numQueries]); padding rows untouched.
  int64_t *inputTokens = nullptr;
  const int64_t *sampledTokenIds = nullptr;
  /// [numSeqs] out (optional): the new token's position, new seqLen - 1;
  /// padding rows untouched.
  int64_t *positions = nullptr;
};

/// Points `args` at a step's decodes as AttentionMetadataBuilder uploaded
/// them (`decode` = md.decodeView()): its device seq_lens, slot_mapping and
/// page tables, which advanceStep then updates in place until the next
/// build (the builder's buffers are device memory like any other; the
/// view's pointers are const only because the attention kernels read them).
/// The host arrays of the metadata are not updated. numSeqs is set to the
/// number of decodes; raise it for a padded batch. Errors: a view without
/// device arrays, decodes of more than one query token.
llvm::Error bindMetadata(AdvanceStepArgs &args,
                         const AttentionMetadataView &decode, int pageSize);

/// The copy_pages and advance_step kernels, loaded.
class CacheOps {
public:
  /// Gets both kernels for `arch` through `cache` and loads them (needs a
  /// GPU), and a staging buffer for copyPages calls of up to
  /// `maxStagedPairs` host pairs.
  static llvm::Expected<CacheOps> create(KernelCache &cache, Arch arch,
                                         int64_t maxStagedPairs = 1024);

  /// The specs of the kernels create() loads, for AOT libraries.
  static std::vector<KernelSpec> specs(Arch arch);

  /// Copies page pairs[i].src to pairs[i].dst in K and V of every layer of
  /// `cache`, in one launch on `stream` (none for no pairs). The pairs are
  /// checked (checkCopyPairs) and staged through pinned memory into a device
  /// buffer that the next call overwrites: issue calls of one CacheOps on
  /// one stream. Errors also name a page size that is not a multiple of
  /// 16 bytes and more pairs than the staging capacity.
  llvm::Error copyPages(KVCache &cache, llvm::ArrayRef<PagePair> pairs,
                        CUstream stream);
  /// The same from `numPairs` pairs already on the device (int64 [numPairs,
  /// 2], src then dst; PagePair's layout): no upload, so it can be
  /// captured in a CUDA graph. The pairs cannot be checked here: they must
  /// satisfy checkCopyPairs, or pages are read and written out of range.
  llvm::Error copyPages(KVCache &cache, const PagePair *devicePairs,
                        int64_t numPairs, CUstream stream) const;
  /// Both, for a cache the host allocated itself (the C ABI's, a PyTorch
  /// tensor per layer): its geometry and a device array of config.numLayers
  /// uint64 layer addresses, each a [2, numPages, ...] buffer (the form of
  /// KVCache::layerTable()). The KVCache overloads call these.
  llvm::Error copyPages(const KVCacheConfig &config, CUdeviceptr layerTable,
                        llvm::ArrayRef<PagePair> pairs, CUstream stream);
  llvm::Error copyPages(const KVCacheConfig &config, CUdeviceptr layerTable,
                        const PagePair *devicePairs, int64_t numPairs,
                        CUstream stream) const;

  /// Moves the decode batch of `args` one token forward (see
  /// AdvanceStepArgs) and, when `plan` is given, the plan's device work
  /// items with it: every work item of a request gets seqLen + 1, the chunk
  /// that ended at the old length ends one later. `plan` must have been
  /// planned for the requests' lengths as they were before this call (so
  /// equal to args.seqLens), with one query token per request (queryLen 1);
  /// after the call, running it decodes the new lengths. One launch; no
  /// allocation, no sync.
  llvm::Error advanceStep(const AdvanceStepArgs &args, const DecodePlan *plan,
                          CUstream stream) const;
  /// The checks advanceStep makes before launching.
  static llvm::Error checkArgs(const AdvanceStepArgs &args,
                               const DecodePlan *plan);

private:
  CacheOps() = default;
  std::shared_ptr<CudaLibrary> copyLibrary, advanceLibrary;
  CUkernel copyEntry = nullptr, advanceEntry = nullptr;
  StagedBuffer pairBuffer;
  int64_t pairCapacity = 0;
};

} // namespace attn::runtime

#endif // ATTN_RUNTIME_CACHEOPS_H
