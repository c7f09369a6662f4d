//===- AppendKV.cpp - run reshape-and-cache kernels -----------------------===//
#include "attn/runtime/kernels/AppendKV.h"
#include "attn/runtime/support/Error.h"
#include "codegen/EmitCuda.h"
#include "runtime/kernels/CacheChecks.h"

#include "llvm/Support/FormatVariadic.h"

namespace attn::runtime {

llvm::Expected<AppendKVKernel>
AppendKVKernel::create(const KernelSpec &spec, const AppendKVVariant &,
                       std::shared_ptr<CudaLibrary> library) {
  AppendKVKernel kernel;
  if (llvm::Error error = kernel.bind(spec, std::move(library)))
    return std::move(error);
  auto pageIdError = allocatePageIdError();
  if (!pageIdError)
    return pageIdError.takeError();
  kernel.pageIdError = std::move(*pageIdError);
  return std::move(kernel);
}

llvm::Error AppendKVKernel::checkArgs(const AppendKVArgs &a) const {
  const KernelSpec &s = kernelSpec;
  auto fail = [](const llvm::Twine &m) {
    return llvm::createStringError("append_kv run: " + m.str());
  };
  if (!a.k || !a.v || !a.slotMapping || !a.cache.k || !a.cache.v)
    return fail("k, v, slotMapping, cache.k and cache.v must not be null");
  if (a.inType != s.qType || a.numKVHeads != s.numKVHeads ||
      a.headDim != s.headDim)
    return fail(llvm::formatv("rows are {0} {1}x{2}; the kernel was compiled "
                              "for {3} {4}x{5}",
                              toString(a.inType), a.numKVHeads, a.headDim,
                              toString(s.qType), s.numKVHeads, s.headDim));
  if (auto problem = cacheMismatch(a.cache, s))
    return fail(*problem);
  const int alignment = cacheAlignment(s);
  if (auto problem = misalignedBuffer({{"k", a.k, 16},
                                       {"v", a.v, 16},
                                       {"cache.k", a.cache.k, alignment},
                                       {"cache.v", a.cache.v, alignment}}))
    return fail(*problem);
  int64_t dense = int64_t(s.numKVHeads) * s.headDim;
  for (int64_t stride : {a.kStrideToken, a.vStrideToken})
    if (stride && (stride < dense || stride % 8))
      return fail(llvm::formatv("token stride {0} must be >= {1} and a "
                                "multiple of 8",
                                stride, dense));
  if (a.numTokens < 0 || a.numTokens > INT32_MAX)
    return fail(llvm::formatv("numTokens {0} out of range", a.numTokens));
  if (auto problem = scaleMismatch(s, a.kScale, a.vScale, a.numKVScales))
    return fail(*problem);
  return llvm::Error::success();
}

llvm::Error AppendKVKernel::run(const AppendKVArgs &a, CUstream stream) const {
  if (llvm::Error err = checkArgs(a))
    return err;
  PageIdError *error = pageIdError.ptr<PageIdError>();
  if (llvm::Error err =
          takePageIdError(error, "append_kv", kernelSpec.pageSize))
    return err;
  if (a.numTokens == 0)
    return llvm::Error::success();
  notePageCount(error, a.cache.numPages);
  const KernelSpec &s = kernelSpec;
  int64_t dense = int64_t(s.numKVHeads) * s.headDim;
  AppendKVParams p{};
  p.k = a.k;
  p.v = a.v;
  p.kCache = const_cast<void *>(a.cache.k);
  p.vCache = const_cast<void *>(a.cache.v);
  p.slotMapping = a.slotMapping;
  p.pageIdError = error;
  p.kScale = a.kScale;
  p.vScale = a.vScale;
  p.kStrideToken = a.kStrideToken ? a.kStrideToken : dense;
  p.vStrideToken = a.vStrideToken ? a.vStrideToken : dense;
  p.pageStride =
      a.cache.pageStride ? a.cache.pageStride : int64_t(s.pageSize) * dense;
  p.numPages = a.cache.numPages;
  p.numTokens = int32_t(a.numTokens);
  void *args[] = {&p};
  ATTN_CU_CHECK(cuLaunchKernel(reinterpret_cast<CUfunction>(entry),
                               unsigned(a.numTokens), 1, 1, threadsPerBlock(s),
                               1, 1, 0, stream, args, nullptr));
  return llvm::Error::success();
}

} // namespace attn::runtime
