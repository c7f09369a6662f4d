//===- MixedBatch.h - one forward call over prefills and decodes -*- C++
//-*-===//
//
// An inference engine's step batches prefill chunks and decode requests in
// one forward call. MixedBatchAttention runs such a batch through one
// plan/run pair: the paged-prefill kernel takes the prefill requests, the
// decode kernel the decode requests, both on one stream, and every output
// row lands in the row of its query.
//
// Order (as vLLM's metadata has it): the first numPrefills requests are
// prefills and own the first query rows; every later request is a decode
// with the decode kernel's queryLen rows. Both kernels read one paged cache,
// where every request's new keys and values already are (append-KV first).
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_MIXEDBATCH_H
#define ATTN_RUNTIME_MIXEDBATCH_H

#include "attn/runtime/kernels/Decode.h"
#include "attn/runtime/kernels/Prefill.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <optional>

namespace attn::runtime {

/// The decode variant that serves the decode requests of a mixed batch
/// whose prefills run `prefill` (a paged variant): the same heads, cache,
/// mask and score modifiers, one query row per request.
DecodeVariant decodeVariantFor(const PrefillVariant &prefill);

/// Workspaces of both kernels.
struct MixedBatchWorkspace {
  PrefillWorkspace prefill;
  DecodeWorkspace decode;
};

/// A planned mixed batch; a part with no requests is not launched.
struct MixedBatchPlan {
  int numPrefills = 0;
  int numDecodes = 0;
  int64_t numPrefillTokens = 0; ///< query rows of the prefills
  int64_t numDecodeTokens = 0;  ///< numDecodes * queryLen
  std::optional<PrefillPlan> prefill;
  std::optional<DecodePlan> decode;
};

/// Device arguments of one mixed-batch call (one layer).
struct MixedBatchArgs : HeadTables {
  const void *q = nullptr; ///< [numQTokens, numQHeads, headDim]
  ScalarType qType = ScalarType::BF16;
  int64_t numQTokens = 0; ///< prefill rows, then decode rows
  int numQHeads = 0;
  int headDim = 0;
  int64_t qStrideToken = 0; ///< elements; 0 means dense
  void *out = nullptr;      ///< like q
  int64_t outStrideToken = 0;
  float *lse = nullptr; ///< [numQTokens, numQHeads] iff the variant writes LSE
  PagedKVView cache;
  const int32_t *pageTables = nullptr; ///< [batch, pageTableStride]
  int pageTableStride = 0;
  const int32_t *seqLens = nullptr; ///< [batch] device copy (page validation)
  const float *kScale = nullptr;    ///< FP8: [1] or [numKVHeads]
  const float *vScale = nullptr;
  int numKVScales = 0;
};

class MixedBatchAttention {
public:
  /// Pairs a paged-prefill and a decode kernel; they must agree on
  /// everything but the query rows per request (heads, types, cache, mask,
  /// scale, soft-cap, window, ALiBi, LSE).
  static llvm::Expected<MixedBatchAttention>
  create(std::shared_ptr<const PrefillKernel> prefill,
         std::shared_ptr<const DecodeKernel> decode);

  const PrefillKernel &prefillKernel() const { return *prefill; }
  const DecodeKernel &decodeKernel() const { return *decode; }

  /// Workspaces for at most `maxBatch` requests and `maxQTokens` query rows.
  llvm::Expected<MixedBatchWorkspace> createWorkspace(int maxBatch,
                                                      int64_t maxQTokens) const;

  /// Plans a batch from host cu_seqlens_q (batch + 1 offsets over all
  /// requests) and cached lengths (batch values, new rows included).
  llvm::Expected<MixedBatchPlan>
  plan(llvm::ArrayRef<int32_t> cuSeqlensQ, llvm::ArrayRef<int32_t> seqLens,
       int numPrefills, MixedBatchWorkspace &workspace, CUstream stream,
       bool forGraph = false) const;

  /// Checks both parts' arguments, then launches them on `stream`.
  llvm::Error run(const MixedBatchPlan &plan, const MixedBatchArgs &args,
                  CUstream stream) const;

private:
  MixedBatchAttention() = default;
  PagedPrefillArgs prefillArgs(const MixedBatchArgs &args) const;
  DecodeArgs decodeArgs(const MixedBatchPlan &plan,
                        const MixedBatchArgs &args) const;
  std::shared_ptr<const PrefillKernel> prefill;
  std::shared_ptr<const DecodeKernel> decode;
};

} // namespace attn::runtime

#endif // ATTN_RUNTIME_MIXEDBATCH_H
