//===- AttentionMetadata.h - one engine step's attention metadata -*- C++
//-*-===//
//
// The scheduler hands over the requests of one step (prefill chunks and
// decodes with their cached context and page tables); the builder turns
// them into the arrays the seeds' backends call attention metadata
// (seq_lens, query_start_loc, seq_start_loc, context_lens, page_tables,
// slot_mapping, ..., prefill_metadata / decode_metadata) on the host and in
// device memory, in the form MixedBatchAttention, DecodeKernel and
// AppendKVKernel take without glue.
//
// Order is vLLM's: every prefill comes before every decode; a prefill after
// a decode is an Error (the builder does not reorder, since the caller's
// q/k/v rows follow the same order). Decodes all have the same query length
// (1, or 1 + draft tokens), as the decode kernel runs one length per launch.
//
// Device buffers are sized once for MetadataLimits, so their addresses never
// change and CUDA graphs can capture them. Beyond a step's entries the device
// arrays hold padding: slot mappings -1 (append-KV skips such a row; vLLM's
// PAD_SLOT_ID), everything else 0.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_ATTENTIONMETADATA_H
#define ATTN_RUNTIME_ATTENTIONMETADATA_H

#include "attn/runtime/kernels/AppendKV.h"
#include "attn/runtime/kernels/Decode.h"
#include "attn/runtime/kernels/MixedBatch.h"
#include "attn/runtime/support/CudaHandles.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace attn::runtime {

/// One request of a step, as the scheduler has it.
struct ScheduledRequest {
  bool isPrefill = false;
  /// New tokens this step: the prefill chunk, or 1 (+ draft tokens) for a
  /// decode. They are the last queryLen of the request's seqLen tokens.
  int32_t queryLen = 1;
  int32_t contextLen = 0; ///< tokens already cached before this step
  /// Pages holding the request's tokens; covers contextLen + queryLen.
  llvm::ArrayRef<int32_t> pageTable;
  /// Encoder-decoder models: encoder tokens of the request (0: none) and
  /// the pages of the cross-attention cache holding their K/V. A prefill
  /// with contextLen == 0 is the step its encoder runs: its encoder tokens
  /// get cross slot mappings (their K/V are written now); later steps only
  /// read them.
  int32_t encoderLen = 0;
  llvm::ArrayRef<int32_t> crossPageTable;
};

/// Capacities the device buffers are sized for, and the cache geometry.
struct MetadataLimits {
  int pageSize = 16; ///< tokens per cache page
  int64_t numPages =
      0; ///< cache pages; table entries must be below it (0: unchecked)
  int maxBatch = 0;       ///< requests per step
  int64_t maxTokens = 0;  ///< query tokens per step
  int maxPagesPerSeq = 0; ///< page-table width (the padded stride)
  /// Cross attention (0: off): encoder tokens written per step and
  /// cross-page-table width.
  int64_t maxEncoderTokens = 0;
  int maxCrossPagesPerSeq = 0;
};

/// An Error naming the first limit that is not positive (or negative, for
/// the optional cross-attention ones).
llvm::Error checkLimits(const MetadataLimits &limits);

/// Device copies of the metadata arrays; null when built without a device.
struct DeviceMetadata {
  const int32_t *seqLens = nullptr;            ///< [batch]
  const int32_t *contextLens = nullptr;        ///< [batch]
  const int32_t *queryStartLoc = nullptr;      ///< [batch + 1]
  const int32_t *seqStartLoc = nullptr;        ///< [batch + 1]
  const int32_t *pageTables = nullptr;         ///< [batch, pageTableStride]
  const int64_t *slotMapping = nullptr;        ///< [numTokens], -1 beyond
  const int32_t *encoderSeqLens = nullptr;     ///< [batch]
  const int32_t *encoderSeqStartLoc = nullptr; ///< [batch + 1]
  const int32_t *crossPageTables = nullptr;  ///< [batch, crossPageTableStride]
  const int64_t *crossSlotMapping = nullptr; ///< [crossSlotMapping.size()]
};

/// The prefill or decode requests of a step (vLLM's prefill_metadata /
/// decode_metadata): host arrays point into the AttentionMetadata they came
/// from, device pointers into the same device buffers, offsets and
/// cumulative arrays rebased to start at 0.
struct AttentionMetadataView {
  int firstRequest = 0;
  int numRequests = 0;
  int64_t firstToken = 0; ///< first query row in the step
  int64_t numTokens = 0;
  int32_t maxQueryLen = 0;
  int32_t maxSeqLen = 0;
  int pageTableStride = 0;
  int crossPageTableStride = 0;
  llvm::ArrayRef<int32_t> seqLens, contextLens, queryStartLoc, seqStartLoc,
      pageTables, encoderSeqLens, crossPageTables;
  llvm::ArrayRef<int64_t> slotMapping, crossSlotMapping;
  /// The same arrays on the device; encoderSeqStartLoc is not rebased and
  /// left null.
  DeviceMetadata device;
};

/// The metadata of one step. Field names follow the seeds' (camelCase).
struct AttentionMetadata {
  int numPrefills = 0;
  int numDecodes = 0;
  int64_t numPrefillTokens = 0;
  int64_t numDecodeTokens = 0;
  int32_t maxQueryLen = 0;
  int32_t maxDecodeQueryLen = 0; ///< the decodes' (common) query length
  int32_t maxPrefillSeqLen = 0;
  int32_t maxDecodeSeqLen = 0;
  int pageTableStride = 0; ///< MetadataLimits::maxPagesPerSeq

  std::vector<int32_t> seqLens;       ///< [batch] contextLen + queryLen
  std::vector<int32_t> contextLens;   ///< [batch]
  std::vector<int32_t> queryStartLoc; ///< [batch + 1] cu_seqlens_q
  std::vector<int32_t> seqStartLoc;   ///< [batch + 1] cumulative seqLens
  /// [batch, pageTableStride]; entries past a request's pages are 0.
  std::vector<int32_t> pageTables;
  /// [numTokens] page * pageSize + offset of each new token.
  std::vector<int64_t> slotMapping;

  // Encoder-decoder models (zeros and empty tables otherwise).
  std::vector<int32_t> encoderSeqLens;     ///< [batch]
  std::vector<int32_t> encoderSeqStartLoc; ///< [batch + 1]
  int32_t maxEncoderSeqLen = 0;
  int64_t numEncoderTokens = 0;         ///< encoderSeqStartLoc.back()
  int crossPageTableStride = 0;         ///< MetadataLimits::maxCrossPagesPerSeq
  std::vector<int32_t> crossPageTables; ///< [batch, crossPageTableStride]
  /// Slots of the encoder tokens written this step: those of the prefills
  /// with contextLen == 0, in request order.
  std::vector<int64_t> crossSlotMapping;

  /// Set by AttentionMetadataBuilder::build: valid until its next build.
  DeviceMetadata device;

  int batch() const { return int(seqLens.size()); }
  int64_t numTokens() const { return numPrefillTokens + numDecodeTokens; }
  /// The KV lengths attention reads: seqLens, or encoderSeqLens for cross
  /// attention (the `seqLens` argument of the kernels' plan calls).
  llvm::ArrayRef<int32_t> kvLens(bool crossAttention = false) const {
    return crossAttention ? encoderSeqLens : seqLens;
  }
  AttentionMetadataView prefillView() const;
  AttentionMetadataView decodeView() const;

private:
  friend llvm::Expected<AttentionMetadata>
  buildAttentionMetadata(llvm::ArrayRef<ScheduledRequest>,
                         const MetadataLimits &);
  friend class AttentionMetadataBuilder;
  AttentionMetadataView view(int first, int count) const;
  // The decode view's cumulative arrays, rebased to 0 (host and device).
  std::vector<int32_t> decodeQueryStartLoc, decodeSeqStartLoc;
  const int32_t *deviceDecodeQueryStartLoc = nullptr;
  const int32_t *deviceDecodeSeqStartLoc = nullptr;
};

/// The host arrays of one step (no device). Errors name the request and
/// the rule: a prefill after a decode, decodes of different query lengths,
/// a page table too short for the tokens or wider than the limit, a page
/// id out of range, more requests or tokens than the limits allow.
llvm::Expected<AttentionMetadata>
buildAttentionMetadata(llvm::ArrayRef<ScheduledRequest> requests,
                       const MetadataLimits &limits);

/// Builds each step's metadata into one set of fixed device buffers.
class AttentionMetadataBuilder {
public:
  /// Device buffers (and their pinned staging copy) for `limits`.
  static llvm::Expected<AttentionMetadataBuilder>
  create(const MetadataLimits &limits);

  const MetadataLimits &limits() const { return metadataLimits; }
  size_t deviceBytes() const { return buffer.device().size(); }

  /// buildAttentionMetadata, then one asynchronous upload on `stream`
  /// (waiting only for the previous step's upload to leave the staging
  /// buffer); the result's `device` pointers are valid until the next build.
  llvm::Expected<AttentionMetadata>
  build(llvm::ArrayRef<ScheduledRequest> requests, CUstream stream);

private:
  AttentionMetadataBuilder() = default;
  MetadataLimits metadataLimits;
  StagedBuffer buffer;
  /// Byte offsets of each array in the buffer.
  struct Layout {
    size_t seqLens, contextLens, queryStartLoc, seqStartLoc, pageTables,
        slotMapping, decodeQueryStartLoc, decodeSeqStartLoc, encoderSeqLens,
        encoderSeqStartLoc, crossPageTables, crossSlotMapping, total;
  } layout{};
  static Layout layoutFor(const MetadataLimits &limits);
};

/// Points a mixed-batch call at the step's metadata: numQTokens, page
/// tables, their stride and the device lengths (for cross attention the
/// cross page tables and encoder lengths). Plan it with
/// plan(md.queryStartLoc, md.kvLens(cross), md.numPrefills, ...).
void bindMetadata(MixedBatchArgs &args, const AttentionMetadata &md,
                  bool crossAttention = false);
/// The same for a decode-only call over `decode` (md.decodeView()); plan it
/// with plan(decode.seqLens (or encoderSeqLens), ...).
void bindMetadata(DecodeArgs &args, const AttentionMetadataView &decode,
                  bool crossAttention = false);
/// The rows append-KV writes: the step's new tokens at slotMapping, or
/// (cross attention) the encoder tokens at crossSlotMapping.
void bindSlots(AppendKVArgs &args, const AttentionMetadata &md,
               bool crossAttention = false);

} // namespace attn::runtime

#endif // ATTN_RUNTIME_ATTENTIONMETADATA_H
