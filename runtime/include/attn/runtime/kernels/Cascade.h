//===- Cascade.h - shared-prefix (cascade) decode ---------------*- C++ -*-===//
//
// Requests that share a prefix (a system prompt, the prompt of parallel
// samples or beam candidates) attend to it once per group instead of once
// per request. Each shared level is a list of groups of consecutive
// requests and the tokens each group shares; the last level is every
// request's own suffix. A shared level runs the paged prefill kernel as
// cross attention (the group's query rows against the group's pages, no
// mask), the suffix runs the decode kernel, both writing their LSE, and
// merge_states combines the partial states into the output. Keys are read
// once per group and KV head instead of once per request.
//
// A group's query rows are few (one per request), so a level's keys are
// cut into chunks that run as separate pieces of one launch, enough to
// fill the GPU; each chunk is one more partial state of the merge (16 in
// all), and the query rows are copied once per chunk so that each chunk
// writes rows of its own.
//
// Each level has its own page table: a group's row holds its shared pages,
// a request's suffix row the pages after every shared level's. Shared
// lengths are multiples of the page size, so that no page is split between
// levels.
//
// Scores must not depend on positions or be completed per row: a variant
// with a window, ALiBi, attention sinks or modifier regions is refused
// (each level would see other positions, or count a sink again). Plan once
// per step; run per layer. No allocation in run(), no host sync.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_CASCADE_H
#define ATTN_RUNTIME_CASCADE_H

#include "attn/runtime/kernels/Decode.h"
#include "attn/runtime/kernels/MergeStates.h"
#include "attn/runtime/kernels/Prefill.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <vector>

namespace attn::runtime {

/// Shared levels one cascade may have (the suffix is one more state).
constexpr int kMaxCascadeLevels = kMaxMergeStates - 1;

/// One shared level: group g holds requests [groupStarts[g],
/// groupStarts[g + 1]) and shares their first kvLens[g] keys beyond the
/// levels before (a multiple of the page size; 0 for none).
struct CascadeLevel {
  std::vector<int32_t> groupStarts; ///< numGroups + 1 offsets, 0 to batch
  std::vector<int32_t> kvLens;      ///< numGroups
};

/// Why `variant` cannot run as a cascade (a window, ALiBi, sinks, modifier
/// regions, or not decoder attention); none when it can.
std::optional<std::string> cascadeProblem(const DecodeVariant &variant);

/// The prefix-level (paged cross-attention prefill, LSE), suffix (decode,
/// LSE) and merge kernels of a decode variant, as Jit::cascade builds them.
PrefillVariant cascadePrefixVariant(const DecodeVariant &decode);
DecodeVariant cascadeSuffixVariant(const DecodeVariant &decode);
MergeStatesVariant cascadeMergeVariant(const DecodeVariant &decode);

/// Buffers of every level, sized for a maximum batch and level count.
struct CascadeWorkspace {
  std::vector<PrefillWorkspace> levels;
  DecodeWorkspace suffix;
  /// Every state's partial output, then every state's LSE (states dense,
  /// one after another).
  DeviceBuffer partialOut, partialLse;
  int maxBatch = 0;
};

/// A planned batch: every launch's plan and the workspace buffers run()
/// writes (the workspace must outlive the plan).
struct CascadePlan {
  int batch = 0;
  std::vector<PrefillPlan> levels;
  std::vector<int> levelChunks; ///< states (key chunks) of each level
  DecodePlan suffix;
  CUdeviceptr partialOut = 0, partialLse = 0;
  int numStates() const {
    int n = 1;
    for (int c : levelChunks)
      n += c;
    return n;
  }
};

/// Device arguments of one cascade call (one layer).
struct CascadeArgs {
  const void *q = nullptr; ///< [batch * queryLen, numQHeads, headDim]
  ScalarType qType = ScalarType::BF16;
  int64_t numQTokens = 0;
  int numQHeads = 0;
  int headDim = 0;
  int64_t qStrideToken = 0; ///< elements; 0 means dense
  void *out = nullptr;      ///< like q
  int64_t outStrideToken = 0;
  float *lse = nullptr; ///< [numQTokens, numQHeads], or null
  PagedKVView cache;
  /// levelPageTables[l]: [numGroups of level l, levelPageTableStrides[l]].
  const int32_t *levelPageTables[kMaxCascadeLevels] = {};
  int levelPageTableStrides[kMaxCascadeLevels] = {};
  /// [batch, suffixPageTableStride]: each request's pages after the shared.
  const int32_t *suffixPageTables = nullptr;
  int suffixPageTableStride = 0;
  const float *kScale = nullptr; ///< FP8: [1] or [numKVHeads]
  const float *vScale = nullptr;
  int numKVScales = 0;
};

class CascadeAttention {
public:
  /// The kernels must be a decode variant's cascadePrefixVariant,
  /// cascadeSuffixVariant and cascadeMergeVariant.
  static llvm::Expected<CascadeAttention>
  create(std::shared_ptr<const PrefillKernel> prefix,
         std::shared_ptr<const DecodeKernel> suffix,
         std::shared_ptr<const MergeStatesKernel> merge);

  /// Buffers for up to `maxBatch` requests over up to `maxLevels` shared
  /// levels.
  llvm::Expected<CascadeWorkspace> createWorkspace(int maxBatch,
                                                   int maxLevels) const;

  /// Plans a batch: the shared levels, outermost first, and each request's
  /// suffix length (its tokens past every shared level, new ones
  /// included).
  llvm::Expected<CascadePlan> plan(llvm::ArrayRef<CascadeLevel> levels,
                                   llvm::ArrayRef<int32_t> suffixLens,
                                   CascadeWorkspace &workspace, CUstream stream,
                                   bool forGraph = false) const;

  /// Launches every level (its key chunks' pieces read the query rows in
  /// place and write a state each), the suffix and the merge on `stream`:
  /// no copy, no allocation, no host sync. q's token stride must be a
  /// multiple of 8 elements, as prefill's is.
  llvm::Error run(const CascadePlan &plan, const CascadeArgs &args,
                  CUstream stream) const;

private:
  CascadeAttention() = default;
  std::shared_ptr<const PrefillKernel> prefix;
  std::shared_ptr<const DecodeKernel> suffix;
  std::shared_ptr<const MergeStatesKernel> merge;
};

} // namespace attn::runtime

#endif // ATTN_RUNTIME_CASCADE_H
