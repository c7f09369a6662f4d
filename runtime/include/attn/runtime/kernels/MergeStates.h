//===- MergeStates.h - combine partial attention states ---------*- C++ -*-===//
//
// Runs attn.merge_states: N partial attention outputs over disjoint key
// sets, each with its LSE (natural log, as every attn kernel writes it),
// become the output over their union (split-KV merges, cascade attention,
// context-parallel decode). One launch, no allocation, no host sync:
// graph-capturable.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_MERGESTATES_H
#define ATTN_RUNTIME_MERGESTATES_H

#include "attn/runtime/kernels/KernelHandle.h"
#include "attn/runtime/support/CudaHandles.h"
#include "spec/KernelSpec.h"
#include "spec/Variant.h"
#include "templates/attn/params.h"

#include "llvm/Support/Error.h"

#include <memory>

namespace attn::runtime {

/// Device arguments of one merge. Per (token, head) row:
/// lse = log(sum_i exp(lses[i])), out = sum_i outs[i] * exp(lses[i] - lse).
/// A state whose LSE is -inf weighs nothing (its output is not read); a
/// row whose states all have -inf gets output 0 and LSE -inf.
struct MergeStatesArgs {
  ScalarType dtype = ScalarType::F32; ///< of every output: f16, bf16 or f32
  int64_t numTokens = 0;
  int numHeads = 0;
  int headDim = 0;
  int numStates = 0; ///< 2 to kMaxMergeStates
  /// outs[i]: [numTokens, numHeads, headDim]; lses[i]: [numTokens, numHeads].
  const void *outs[kMaxMergeStates] = {};
  const float *lses[kMaxMergeStates] = {};
  int64_t statesStrideToken =
      0; ///< elements between tokens of outs[i]; 0: dense
  /// The merged state. `out` may be one of `outs` (with the same stride)
  /// and `lse` one of `lses`: the merge is then in place. Any other overlap
  /// is an error. `lse` may be null.
  void *out = nullptr;
  int64_t outStrideToken = 0;
  float *lse = nullptr;
};

/// A loaded merge_states kernel for one dtype, head count and head dim.
class MergeStatesKernel : public KernelHandle {
public:
  static llvm::Expected<MergeStatesKernel>
  create(const KernelSpec &spec, const MergeStatesVariant &variant,
         std::shared_ptr<CudaLibrary> library);
  llvm::Error checkArgs(const MergeStatesArgs &args) const;
  llvm::Error run(const MergeStatesArgs &args, CUstream stream) const;

private:
  MergeStatesKernel() = default;
};

} // namespace attn::runtime

#endif // ATTN_RUNTIME_MERGESTATES_H
