//===- AppendKV.h - run reshape-and-cache kernels ---------------*- C++ -*-===//
//
// Writes a step's new K/V rows into their paged-cache slots (quantizing for
// FP8 caches). One launch, no allocation, no host sync: graph-capturable.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_APPENDKV_H
#define ATTN_RUNTIME_APPENDKV_H

#include "attn/runtime/kernels/Decode.h"
#include "attn/runtime/kernels/KernelHandle.h"
#include "attn/runtime/support/CudaHandles.h"
#include "spec/Variant.h"

#include <memory>

namespace attn::runtime {

/// Device arguments of one append: rows [numTokens, numKVHeads, headDim].
struct AppendKVArgs {
  const void *k = nullptr;
  const void *v = nullptr;
  ScalarType inType = ScalarType::BF16;
  int64_t numTokens = 0;
  int numKVHeads = 0;
  int headDim = 0;
  int64_t kStrideToken = 0; ///< elements; 0 means dense
  int64_t vStrideToken = 0;
  PagedKVView cache; ///< written through (k and v are cast to mutable)
  /// [numTokens]; negative skips a row, and so does a slot past the cache
  /// (cache.numPages * pageSize or more), which is reported
  const int64_t *slotMapping = nullptr;
  const float *kScale = nullptr; ///< FP8: stored value is x / scale
  const float *vScale = nullptr;
  int numKVScales = 0;
};

/// A loaded append-KV kernel for one variant.
class AppendKVKernel : public KernelHandle {
public:
  static llvm::Expected<AppendKVKernel>
  create(const KernelSpec &spec, const AppendKVVariant &variant,
         std::shared_ptr<CudaLibrary> library);
  llvm::Error checkArgs(const AppendKVArgs &args) const;
  /// Launches; no allocation, no host sync. A slot past the cache is
  /// reported by a later run() of this kernel (object: every user of it
  /// shares the report), which fails with it and launches nothing; as
  /// DecodeKernel::run's page ids.
  llvm::Error run(const AppendKVArgs &args, CUstream stream) const;

private:
  AppendKVKernel() = default;
  /// The kernel's report of a slot past the cache (PageIdError).
  PinnedBuffer pageIdError;
};

} // namespace attn::runtime

#endif // ATTN_RUNTIME_APPENDKV_H
