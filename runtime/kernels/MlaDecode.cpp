//===- MlaDecode.cpp - plan and run absorbed MLA decode -------------------===//
#include "attn/runtime/kernels/MlaDecode.h"
#include "attn/runtime/support/Error.h"
#include "runtime/kernels/CacheChecks.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>

namespace attn::runtime {

namespace {
llvm::Error argError(const llvm::Twine &message) {
  return llvm::createStringError("mla_decode run: " + message.str());
}
} // namespace

llvm::Expected<MlaDecodeKernel>
MlaDecodeKernel::create(const KernelSpec &spec, const MlaDecodeVariant &variant,
                        std::shared_ptr<CudaLibrary> library) {
  if (spec.kind != KernelKind::MlaDecode)
    return llvm::createStringError("mla_decode: the spec is a " +
                                   std::string(toString(spec.kind)) +
                                   " kernel's");
  MlaDecodeKernel kernel;
  if (llvm::Error error = kernel.bind(spec, std::move(library)))
    return std::move(error);
  kernel.mlaVariant = variant;
  auto where = kernel.residency();
  if (!where)
    return where.takeError();
  kernel.smCount = where->numSMs;
  kernel.residentCTAs = where->ctasPerSM;
  return std::move(kernel);
}

llvm::Expected<DecodeWorkspace>
MlaDecodeKernel::createWorkspace(int maxBatch) const {
  return DecodeWorkspace::create(kernelSpec, maxBatch, smCount, residentCTAs);
}

llvm::Expected<DecodePlan>
MlaDecodeKernel::plan(llvm::ArrayRef<int32_t> seqLens,
                      DecodeWorkspace &workspace, CUstream stream,
                      bool forGraph) const {
  return planDecode(kernelSpec, std::nullopt, smCount, residentCTAs, seqLens,
                    workspace, stream, forGraph);
}

llvm::Error MlaDecodeKernel::checkArgs(const DecodePlan &plan,
                                       const MlaDecodeArgs &a) const {
  const KernelSpec &s = kernelSpec;
  const bool rope = s.ropeDim != 0;
  if (!a.qNope || !a.out || !a.ckv || !a.pageTables || (rope && !a.qRope))
    return argError(rope ? "qNope, qRope, out, ckv and pageTables must not "
                           "be null"
                         : "qNope, out, ckv and pageTables must not be null");
  if (!plan.pageIdError)
    return argError("the plan has no workspace: make it with plan()");
  if (a.qType != s.qType || a.kvType != s.kvType)
    return argError(llvm::formatv("q is {0} and the cache {1}; the kernel was "
                                  "compiled for {2} and {3}",
                                  toString(a.qType), toString(a.kvType),
                                  toString(s.qType), toString(s.kvType)));
  if (a.numQHeads != s.numQHeads)
    return argError(llvm::formatv("q has {0} heads; the kernel was compiled "
                                  "for {1}",
                                  a.numQHeads, s.numQHeads));
  if (a.numTokens != int64_t(plan.batch) * s.queryLen)
    return argError(llvm::formatv("q has {0} tokens; the plan has {1} requests "
                                  "x query_len {2}",
                                  a.numTokens, plan.batch, s.queryLen));
  const int bytes = sizeOf(s.kvType);
  // 16-byte copies: every row and part of a row starts 16-byte aligned.
  auto vectorElems = [&](int64_t elems, int elemBytes) {
    return elems * elemBytes % 16 == 0;
  };
  auto aligned = [](const void *p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
  };
  int64_t nope = int64_t(s.numQHeads) * s.headDim;
  int64_t ropeRow = int64_t(s.numQHeads) * s.ropeDim;
  int64_t qNopeStride = a.qNopeStrideToken ? a.qNopeStrideToken : nope;
  int64_t qRopeStride = a.qRopeStrideToken ? a.qRopeStrideToken : ropeRow;
  int64_t outStride = a.outStrideToken ? a.outStrideToken : nope;
  if (qNopeStride < nope || outStride < nope || qNopeStride % 8 ||
      outStride % 8 || (rope && (qRopeStride < ropeRow || qRopeStride % 8)))
    return argError(llvm::formatv(
        "token strides of qNope ({0}), out ({1}) and qRope ({2}) must be at "
        "least heads * dims ({3}, {3}, {4}) and multiples of 8",
        qNopeStride, outStride, qRopeStride, nope, ropeRow));
  if (!aligned(a.qNope) || !aligned(a.out) || (rope && !aligned(a.qRope)) ||
      !aligned(a.ckv) || (a.kpe && !aligned(a.kpe)))
    return argError("qNope, qRope, out, ckv and kpe must be 16-byte aligned");
  if (a.numPages < 1)
    return argError(
        llvm::formatv("numPages = {0}; the cache needs a page", a.numPages));
  if (a.pageTableStride < 1)
    return argError(
        llvm::formatv("pageTableStride = {0} must be >= 1", a.pageTableStride));
  const int64_t rowElems = a.kpe ? s.headDim : s.headDim + s.ropeDim;
  const int64_t ckvToken = a.ckvTokenStride ? a.ckvTokenStride : rowElems;
  const int64_t ckvPage =
      a.ckvPageStride ? a.ckvPageStride : ckvToken * s.pageSize;
  const int64_t kpeToken = a.kpeTokenStride ? a.kpeTokenStride : s.ropeDim;
  const int64_t kpePage =
      a.kpePageStride ? a.kpePageStride : kpeToken * s.pageSize;
  if (ckvToken < rowElems || !vectorElems(ckvToken, bytes) ||
      ckvPage < ckvToken * s.pageSize || !vectorElems(ckvPage, bytes) ||
      ckvToken > INT32_MAX)
    return argError(llvm::formatv(
        "ckv strides (token {0}, page {1}) must hold a row of {2} and a page "
        "of {3} tokens, in 16-byte multiples",
        ckvToken, ckvPage, rowElems, s.pageSize));
  if (a.kpe && rope &&
      (kpeToken < s.ropeDim || !vectorElems(kpeToken, bytes) ||
       kpePage < kpeToken * s.pageSize || !vectorElems(kpePage, bytes) ||
       kpeToken > INT32_MAX))
    return argError(llvm::formatv(
        "kpe strides (token {0}, page {1}) must hold a row of {2} and a page "
        "of {3} tokens, in 16-byte multiples",
        kpeToken, kpePage, s.ropeDim, s.pageSize));
  if (s.isFP8KV() != (a.kvScale != nullptr))
    return argError(s.isFP8KV() ? "an e4m3 cache needs kvScale"
                                : "kvScale is for an e4m3 cache");
  if (s.writeLse != (a.lse != nullptr))
    return argError(s.writeLse
                        ? "the variant writes LSE: lse must be set"
                        : "lse given, but the variant does not write LSE");
  return llvm::Error::success();
}

llvm::Error MlaDecodeKernel::run(const DecodePlan &plan, const MlaDecodeArgs &a,
                                 CUstream stream) const {
  if (llvm::Error err = checkArgs(plan, a))
    return err;
  if (llvm::Error err = takePageIdError(plan.pageIdError, "mla_decode"))
    return err;
  notePageCount(plan.pageIdError, a.numPages);
  const KernelSpec &s = kernelSpec;
  MlaDecodeParams p{};
  p.qNope = a.qNope;
  p.qRope = s.ropeDim ? a.qRope : a.qNope;
  p.out = a.out;
  p.lse = a.lse;
  const int64_t nope = int64_t(s.numQHeads) * s.headDim;
  p.qNopeStrideToken = a.qNopeStrideToken ? a.qNopeStrideToken : nope;
  p.qRopeStrideToken = a.qRopeStrideToken ? a.qRopeStrideToken
                                          : int64_t(s.numQHeads) * s.ropeDim;
  p.outStrideToken = a.outStrideToken ? a.outStrideToken : nope;
  const int64_t rowElems = a.kpe ? s.headDim : s.headDim + s.ropeDim;
  const int64_t ckvToken = a.ckvTokenStride ? a.ckvTokenStride : rowElems;
  p.ckv = a.ckv;
  p.ckvTokenStride = int32_t(ckvToken);
  p.ckvPageStride = a.ckvPageStride ? a.ckvPageStride : ckvToken * s.pageSize;
  if (a.kpe) {
    const int64_t kpeToken = a.kpeTokenStride ? a.kpeTokenStride : s.ropeDim;
    p.kpe = a.kpe;
    p.kpeTokenStride = int32_t(kpeToken);
    p.kpePageStride = a.kpePageStride ? a.kpePageStride : kpeToken * s.pageSize;
  } else {
    // One tensor: the RoPE key follows the latent in each row.
    p.kpe = static_cast<const char *>(a.ckv) +
            int64_t(s.headDim) * sizeOf(s.kvType);
    p.kpeTokenStride = p.ckvTokenStride;
    p.kpePageStride = p.ckvPageStride;
  }
  p.pageTables = a.pageTables;
  p.pageIdError = plan.pageIdError;
  p.kvScale = a.kvScale;
  p.workItems = plan.workItems;
  p.numWorkItems = plan.numWorkItems;
  p.partialOut = plan.partialOut;
  p.partialLse = plan.partialLse;
  p.mergeCounters = plan.mergeCounters;
  p.pageTableStride = a.pageTableStride;
  p.lastPage = uint32_t(std::min<int64_t>(a.numPages, int64_t(1) << 31) - 1);
  p.smScale = mlaVariant.scale
                  ? *mlaVariant.scale
                  : float(1.0 / std::sqrt(double(s.headDim + s.ropeDim)));
  if (plan.gridX > 0) {
    void *args[] = {&p};
    const int rows = s.numQHeads * s.queryLen;
    ATTN_CU_CHECK(cuLaunchKernel(
        reinterpret_cast<CUfunction>(entry), plan.gridX, 1, (rows + 15) / 16,
        threadsPerBlock(s), 1, 1, smemBytes, stream, args, nullptr));
  }
  return llvm::Error::success();
}

} // namespace attn::runtime
