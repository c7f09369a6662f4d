//===- MlaDecode.h - plan and run absorbed MLA decode -----------*- C++ -*-===//
//
// The host side of attn.mla_decode, in decode's plan/run split: plan() is
// decode's (the same split-KV work list and workspace, DecodeWorkspace),
// run() launches with no allocation and no host sync, so it can be
// captured in a CUDA graph. Launch arguments are checked against the
// compiled variant: a mismatch is an Error, never a wrong result.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_MLADECODE_H
#define ATTN_RUNTIME_MLADECODE_H

#include "attn/runtime/kernels/Decode.h"
#include "attn/runtime/kernels/KernelHandle.h"
#include "spec/KernelSpec.h"
#include "spec/Variant.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cuda.h>
#include <memory>

namespace attn::runtime {

/// Device arguments of one MLA decode call (one layer). Strides are in
/// elements; 0 means dense.
struct MlaDecodeArgs {
  ScalarType qType = ScalarType::BF16;
  int64_t numTokens = 0; ///< batch * queryLen
  int numQHeads = 0;
  const void *qNope = nullptr; ///< [numTokens, numQHeads, kvLoraRank]
  int64_t qNopeStrideToken = 0;
  const void *qRope = nullptr; ///< [numTokens, numQHeads, ropeDim]
  int64_t qRopeStrideToken = 0;
  void *out = nullptr; ///< [numTokens, numQHeads, kvLoraRank], qType
  int64_t outStrideToken = 0;
  float *lse = nullptr; ///< [numTokens, numQHeads], iff the variant writes it
  /// The cache, one KV head, `numPages` pages of pageSize tokens. Token t of
  /// page p has its latent at ckv + p * ckvPageStride + t * ckvTokenStride
  /// and its RoPE key at kpe + p * kpePageStride + t * kpeTokenStride.
  /// kpe = null: one tensor [pages, pageSize, kvLoraRank + ropeDim] (vLLM,
  /// FlashMLA), whose RoPE part follows the latent in each row; dense
  /// strides are then of that row.
  ScalarType kvType = ScalarType::BF16;
  int64_t numPages = 0;
  const void *ckv = nullptr;
  int64_t ckvPageStride = 0;
  int64_t ckvTokenStride = 0;
  const void *kpe = nullptr;
  int64_t kpePageStride = 0;
  int64_t kpeTokenStride = 0;
  const int32_t *pageTables = nullptr; ///< [batch, pageTableStride]
  int pageTableStride = 0;
  const float *kvScale = nullptr; ///< e4m3 cache: [1]
};

/// A loaded MLA decode kernel for one variant.
class MlaDecodeKernel : public KernelHandle {
public:
  /// Wraps a loaded library holding `spec`'s entry; `variant` supplies the
  /// softmax scale baked into every launch.
  static llvm::Expected<MlaDecodeKernel>
  create(const KernelSpec &spec, const MlaDecodeVariant &variant,
         std::shared_ptr<CudaLibrary> library);
  const MlaDecodeVariant &variant() const { return mlaVariant; }
  /// A workspace for batches of up to `maxBatch` requests.
  llvm::Expected<DecodeWorkspace> createWorkspace(int maxBatch) const;
  /// As DecodeKernel::plan.
  llvm::Expected<DecodePlan> plan(llvm::ArrayRef<int32_t> seqLens,
                                  DecodeWorkspace &workspace, CUstream stream,
                                  bool forGraph = false) const;
  llvm::Error checkArgs(const DecodePlan &plan,
                        const MlaDecodeArgs &args) const;
  /// Checks `args`, then launches; a page id outside the cache is read as
  /// the last page and reported as by DecodeKernel::run.
  llvm::Error run(const DecodePlan &plan, const MlaDecodeArgs &args,
                  CUstream stream) const;

private:
  MlaDecodeKernel() = default;
  MlaDecodeVariant mlaVariant;
  int smCount = 0;
  int residentCTAs = 1;
};

} // namespace attn::runtime

#endif // ATTN_RUNTIME_MLADECODE_H
