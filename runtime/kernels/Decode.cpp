//===- Decode.cpp - plan and run paged decode kernels ---------------------===//
#include "attn/runtime/kernels/Decode.h"
#include "attn/runtime/support/Error.h"
#include "codegen/EmitCuda.h"
#include "runtime/kernels/CacheChecks.h"
#include "spec/KernelLimits.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstring>

namespace attn::runtime {

namespace {

int rowBlocks(const KernelSpec &spec) {
  int rows = spec.groupSize() * spec.queryLen;
  return (rows + 16 * spec.schedule.rowTiles - 1) /
         (16 * spec.schedule.rowTiles);
}

size_t alignUp(size_t x) { return (x + 255) / 256 * 256; }

llvm::Error argError(const llvm::Twine &message) {
  return llvm::createStringError("decode run: " + message.str());
}

} // namespace

//===----------------------------------------------------------------------===//
// DecodeWorkspace
//===----------------------------------------------------------------------===//

llvm::Expected<DecodeWorkspace> DecodeWorkspace::create(const KernelSpec &spec,
                                                        int maxBatch,
                                                        int numSMs,
                                                        int ctasPerSM) {
  if (maxBatch < 1)
    return llvm::createStringError(llvm::formatv(
        "decode workspace: maxBatch must be >= 1, got {0}", maxBatch));
  DecodeWorkspace ws;
  ws.batchCapacity = maxBatch;
  ws.workCapacity = maxDecodeWorkItems(spec, maxBatch, numSMs, ctasPerSM);
  // Partial slots: every work item of a split request has one.
  size_t partialRows = size_t(spec.queryLen) * spec.numQHeads;
  size_t offset = 0;
  ws.workOffset = offset;
  offset = alignUp(offset + ws.workCapacity * sizeof(DecodeWorkItem));
  ws.countsOffset = offset;
  offset = alignUp(offset + sizeof(int32_t));
  size_t stagingBytes = offset; // work lists and counts are staged on host
  ws.partialOutOffset = offset;
  offset = alignUp(offset + ws.workCapacity * partialRows * spec.headDim *
                                sizeof(float));
  ws.partialLseOffset = offset;
  offset = alignUp(offset + ws.workCapacity * partialRows * sizeof(float));
  ws.countersOffset = offset;
  size_t counterBytes =
      size_t(maxBatch) * spec.numKVHeads * rowBlocks(spec) * sizeof(int32_t);
  offset = alignUp(offset + counterBytes);

  auto buffer = StagedBuffer::allocate(offset, stagingBytes);
  if (!buffer)
    return buffer.takeError();
  auto pageIdError = allocatePageIdError();
  if (!pageIdError)
    return pageIdError.takeError();
  ws.pageIdError = std::move(*pageIdError);
  // The merge counters start at zero; the kernel leaves them at zero.
  ATTN_CU_CHECK(
      cuMemsetD8(buffer->device().get() + ws.countersOffset, 0, counterBytes));
  ws.buffer = std::move(*buffer);
  return std::move(ws);
}

//===----------------------------------------------------------------------===//
// DecodeKernel
//===----------------------------------------------------------------------===//

llvm::Expected<DecodeKernel>
DecodeKernel::create(const KernelSpec &spec, const DecodeVariant &variant,
                     std::shared_ptr<CudaLibrary> library) {
  DecodeKernel kernel;
  if (llvm::Error error = kernel.bind(spec, std::move(library)))
    return std::move(error);
  kernel.decodeVariant = variant;
  // The planner sizes waves by how many CTAs really share an SM.
  auto where = kernel.residency();
  if (!where)
    return where.takeError();
  kernel.smCount = where->numSMs;
  kernel.residentCTAs = where->ctasPerSM;
  kernel.decodeFunction = where->function;
  ATTN_CU_CHECK(cuCtxGetCurrent(&kernel.decodeContext));
  return std::move(kernel);
}

llvm::Expected<DecodeWorkspace>
DecodeKernel::createWorkspace(int maxBatch) const {
  return DecodeWorkspace::create(kernelSpec, maxBatch, smCount, residentCTAs);
}

llvm::Expected<DecodePlan>
planDecode(const KernelSpec &spec, std::optional<int> windowLeft, int numSMs,
           int ctasPerSM, llvm::ArrayRef<int32_t> seqLens, DecodeWorkspace &ws,
           CUstream stream, bool forGraph) {
  const char *op = spec.kind == KernelKind::MlaDecode ? "mla_decode" : "decode";
  PageIdError *pageIdError = ws.pageIdError.ptr<PageIdError>();
  if (llvm::Error error = takePageIdError(pageIdError, op))
    return std::move(error);
  if (int(seqLens.size()) > ws.maxBatch())
    return llvm::createStringError(llvm::formatv(
        "{0} plan: batch of {1} exceeds the workspace's maximum of {2}", op,
        seqLens.size(), ws.maxBatch()));
  auto partition =
      partitionDecode(seqLens, spec, windowLeft, numSMs, ctasPerSM);
  if (!partition)
    return partition.takeError();
  if (int(partition->workItems.size()) > ws.maxWorkItems())
    return llvm::createStringError("decode plan: work list exceeds the "
                                   "workspace (internal sizing error)");

  // The previous plan's copy must have left the staging buffer.
  auto host = ws.buffer.beginWrite();
  if (!host)
    return host.takeError();
  std::memcpy(*host + ws.workOffset, partition->workItems.data(),
              partition->workItems.size() * sizeof(DecodeWorkItem));
  int32_t count = int32_t(partition->workItems.size());
  std::memcpy(*host + ws.countsOffset, &count, sizeof(count));
  if (llvm::Error error = ws.buffer.upload(stream))
    return std::move(error);

  char *dev = ws.buffer.device().ptr<char>();
  DecodePlan plan;
  plan.batch = int(seqLens.size());
  plan.workItems =
      reinterpret_cast<const DecodeWorkItem *>(dev + ws.workOffset);
  plan.numWorkItems = reinterpret_cast<const int32_t *>(dev + ws.countsOffset);
  plan.partialOut = reinterpret_cast<float *>(dev + ws.partialOutOffset);
  plan.partialLse = reinterpret_cast<float *>(dev + ws.partialLseOffset);
  plan.mergeCounters = reinterpret_cast<int32_t *>(dev + ws.countersOffset);
  plan.pageIdError = pageIdError;
  plan.gridX = forGraph ? ws.maxWorkItems() : int(partition->workItems.size());
  plan.chunkTokens = partition->chunkTokens;
  return plan;
}

llvm::Expected<DecodePlan> DecodeKernel::plan(llvm::ArrayRef<int32_t> seqLens,
                                              DecodeWorkspace &ws,
                                              CUstream stream,
                                              bool forGraph) const {
  return planDecode(kernelSpec, decodeVariant.windowLeft, smCount, residentCTAs,
                    seqLens, ws, stream, forGraph);
}

llvm::Error DecodeKernel::checkArgs(const DecodePlan &plan,
                                    const DecodeArgs &a) const {
  const KernelSpec &s = kernelSpec;
  auto name = [](ScalarType t) { return std::string(toString(t)); };
  if (!a.q || !a.out || !a.pageTables || !a.cache.k || !a.cache.v)
    return argError("q, out, pageTables, cache.k and cache.v must not be null");
  if (!plan.pageIdError)
    return argError("the plan has no workspace: make it with plan()");
  if (a.qType != s.qType)
    return argError("q is " + name(a.qType) + ", the kernel was compiled for " +
                    name(s.qType));
  if (a.numQHeads != s.numQHeads || a.headDim != s.headDim)
    return argError(llvm::formatv("q has {0} heads x {1} dims, the kernel was "
                                  "compiled for {2} x {3}",
                                  a.numQHeads, a.headDim, s.numQHeads,
                                  s.headDim));
  if (a.numTokens != int64_t(plan.batch) * s.queryLen)
    return argError(llvm::formatv("q has {0} tokens; the plan has {1} requests "
                                  "x query_len {2}",
                                  a.numTokens, plan.batch, s.queryLen));
  int64_t denseStride = int64_t(s.numQHeads) * s.headDim;
  int64_t qStride = a.qStrideToken ? a.qStrideToken : denseStride;
  int64_t outStride = a.outStrideToken ? a.outStrideToken : denseStride;
  if (qStride < denseStride || outStride < denseStride || qStride % 8 ||
      outStride % 8)
    return argError(
        llvm::formatv("token strides of q ({0}) and out ({1}) must "
                      "be >= heads * head_dim ({2}) and multiples of 8",
                      qStride, outStride, denseStride));
  if (auto problem = pagedArgsProblem(a.cache, s, a.pageTableStride))
    return argError(*problem);
  if (auto problem = misalignedBuffer(
          {{"q", a.q, 16}, {"out", a.out, 16}, {"lse", a.lse, 4}}))
    return argError(*problem);
  if (auto problem = scaleMismatch(s, a.kScale, a.vScale, a.numKVScales))
    return argError(*problem);
  if (auto problem = headTablesProblem(s, a))
    return argError(*problem);
  if (a.firstRequest < 0)
    return argError(
        llvm::formatv("firstRequest = {0} must be >= 0", a.firstRequest));
  if (s.writeLse != (a.lse != nullptr))
    return argError(s.writeLse
                        ? "the variant writes LSE: lse must be set"
                        : "lse given, but the variant does not write LSE");
  return llvm::Error::success();
}

llvm::Error DecodeKernel::validatePages(const DecodePlan &plan,
                                        const DecodeArgs &a,
                                        CUstream stream) const {
  if (!a.seqLens)
    return argError("validatePages needs seqLens");
  std::vector<int32_t> lens(plan.batch);
  std::vector<int32_t> tables(size_t(plan.batch) * a.pageTableStride);
  ATTN_CU_CHECK(cuStreamSynchronize(stream));
  ATTN_CU_CHECK(cuMemcpyDtoH(lens.data(),
                             reinterpret_cast<CUdeviceptr>(a.seqLens),
                             lens.size() * sizeof(int32_t)));
  ATTN_CU_CHECK(cuMemcpyDtoH(tables.data(),
                             reinterpret_cast<CUdeviceptr>(a.pageTables),
                             tables.size() * sizeof(int32_t)));
  for (int b = 0; b < plan.batch; ++b) {
    int64_t pages =
        (int64_t(lens[b]) + kernelSpec.pageSize - 1) / kernelSpec.pageSize;
    if (lens[b] < kernelSpec.queryLen || pages > a.pageTableStride)
      return argError(llvm::formatv("seqLens[{0}] = {1} needs {2} pages; the "
                                    "page table has {3} per request",
                                    b, lens[b], pages, a.pageTableStride));
    for (int64_t i = 0; i < pages; ++i) {
      int32_t page = tables[size_t(b) * a.pageTableStride + i];
      if (page < 0 || page >= a.cache.numPages)
        return argError(llvm::formatv("pageTables[{0}][{1}] = {2} is outside "
                                      "the cache's {3} pages",
                                      b, i, page, a.cache.numPages));
    }
  }
  return llvm::Error::success();
}

llvm::Error DecodeKernel::run(const DecodePlan &plan, const DecodeArgs &a,
                              CUstream stream) const {
  if (llvm::Error err = checkArgs(plan, a))
    return err;
  if (a.validatePages)
    if (llvm::Error err = validatePages(plan, a, stream))
      return err;
  if (llvm::Error err = takePageIdError(plan.pageIdError, "decode"))
    return err;
  notePageCount(plan.pageIdError, a.cache.numPages);
  const KernelSpec &s = kernelSpec;
  DecodeParams p{};
  p.q = a.q;
  p.out = a.out;
  p.lse = a.lse;
  p.kCache = a.cache.k;
  p.vCache = a.cache.v;
  p.pageTables = a.pageTables;
  p.pageIdError = plan.pageIdError;
  p.kScale = a.kScale;
  p.vScale = a.vScale;
  setHeadTables(p, a);
  p.workItems = plan.workItems;
  p.numWorkItems = plan.numWorkItems;
  p.partialOut = plan.partialOut;
  p.partialLse = plan.partialLse;
  p.mergeCounters = plan.mergeCounters;
  int64_t dense = int64_t(s.numQHeads) * s.headDim;
  p.qStrideToken = a.qStrideToken ? a.qStrideToken : dense;
  p.outStrideToken = a.outStrideToken ? a.outStrideToken : dense;
  p.pageStride = a.cache.pageStride
                     ? a.cache.pageStride
                     : int64_t(s.pageSize) * s.numKVHeads * s.headDim;
  p.pageTableStride = a.pageTableStride;
  p.lastPage = lastPageId(a.cache);
  p.smScale = decodeVariant.scale ? *decodeVariant.scale
                                  : float(1.0 / std::sqrt(double(s.headDim)));
  p.softcap = decodeVariant.softcap.value_or(0.f);
  p.windowLeft = decodeVariant.windowLeft.value_or(0);
  p.firstRequest = a.firstRequest;

  if (plan.gridX > 0) {
    void *args[] = {&p};
    CUfunction function = reinterpret_cast<CUfunction>(entry);
    CUcontext current = nullptr;
    if (cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == decodeContext)
      function = decodeFunction;
    ATTN_CU_CHECK(cuLaunchKernel(function, plan.gridX, s.numKVHeads,
                                 rowBlocks(s), s.schedule.warps * 32, 1, 1,
                                 smemBytes, stream, args, nullptr));
  }
  return llvm::Error::success();
}

} // namespace attn::runtime
