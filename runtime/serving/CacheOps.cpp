//===- CacheOps.cpp - copy_pages and advance_step on the GPU -------------===//
#include "attn/runtime/serving/CacheOps.h"
#include "attn/runtime/support/Error.h"
#include "codegen/EmitCuda.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstring>

namespace attn::runtime {

namespace {

llvm::Error copyError(const llvm::Twine &message) {
  return llvm::createStringError("copyPages: " + message.str());
}

llvm::Error advanceError(const llvm::Twine &message) {
  return llvm::createStringError("advanceStep: " + message.str());
}

KernelSpec cacheOpSpec(KernelKind kind, Arch arch) {
  KernelSpec spec;
  spec.kind = kind;
  spec.arch = arch;
  return spec;
}

/// The page size the kernel of `kind` was generated for (any arch).
int threadsOf(KernelKind kind) {
  return threadsPerBlock(cacheOpSpec(kind, Arch::SM80));
}

/// The geometry copyPages needs of a cache.
llvm::Error checkCopyCache(const KVCacheConfig &c, CUdeviceptr layerTable) {
  if (!layerTable)
    return copyError("the layer table is null");
  if (c.pageBytes() % 16)
    return copyError(llvm::formatv(
        "a page is {0} bytes ({1} tokens x {2} heads x {3} dims of {4}); the "
        "kernel copies 16-byte vectors and needs a multiple of 16",
        c.pageBytes(), c.pageSize, c.numKVHeads, c.headDim, toString(c.dtype)));
  // grid.y is 2 * numLayers.
  if (c.numLayers > 32767)
    return copyError(llvm::formatv("{0} layers exceed the 32767 one launch "
                                   "covers",
                                   c.numLayers));
  return llvm::Error::success();
}

} // namespace

llvm::Error checkCopyPairs(llvm::ArrayRef<PagePair> pairs, int64_t numPages) {
  llvm::DenseSet<int64_t> dsts, srcs;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const PagePair &p = pairs[i];
    for (auto [page, what] :
         {std::pair{p.src, "source"}, {p.dst, "destination"}})
      if (page < 0 || page >= numPages)
        return copyError(llvm::formatv("pair {0}: {1} page {2} is outside "
                                       "[0, {3})",
                                       i, what, page, numPages));
    if (p.src == p.dst)
      return copyError(
          llvm::formatv("pair {0}: page {1} is copied onto itself", i, p.src));
    if (!dsts.insert(p.dst).second)
      return copyError(llvm::formatv(
          "pair {0}: destination page {1} is written by an earlier pair", i,
          p.dst));
    srcs.insert(p.src);
  }
  for (size_t i = 0; i < pairs.size(); ++i)
    if (srcs.contains(pairs[i].dst))
      return copyError(llvm::formatv(
          "pair {0}: destination page {1} is also a source; the copies of "
          "one launch run in no order",
          i, pairs[i].dst));
  return llvm::Error::success();
}

llvm::Error bindMetadata(AdvanceStepArgs &args,
                         const AttentionMetadataView &decode, int pageSize) {
  if (decode.numRequests && decode.maxQueryLen != 1)
    return advanceError(llvm::formatv(
        "the decodes have {0} query tokens each; a step advances one",
        decode.maxQueryLen));
  if (!decode.device.seqLens || !decode.device.slotMapping ||
      !decode.device.pageTables)
    return advanceError("the decode view has no device arrays (build it "
                        "with AttentionMetadataBuilder)");
  args.numQueries = decode.numRequests;
  args.numSeqs = decode.numRequests;
  args.pageSize = pageSize;
  // The builder's device buffers are plain device memory, valid until its
  // next build; only the attention kernels' view of them is const.
  args.seqLens = const_cast<int32_t *>(decode.device.seqLens);
  args.slotMapping = const_cast<int64_t *>(decode.device.slotMapping);
  args.pageTables = decode.device.pageTables;
  args.pageTableStride = decode.pageTableStride;
  return llvm::Error::success();
}

std::vector<KernelSpec> CacheOps::specs(Arch arch) {
  return {cacheOpSpec(KernelKind::CopyPages, arch),
          cacheOpSpec(KernelKind::AdvanceStep, arch)};
}

llvm::Expected<CacheOps> CacheOps::create(KernelCache &cache, Arch arch,
                                          int64_t maxStagedPairs) {
  if (maxStagedPairs < 1)
    return llvm::createStringError(llvm::formatv(
        "CacheOps: maxStagedPairs must be >= 1, got {0}", maxStagedPairs));
  CacheOps ops;
  for (const KernelSpec &spec : specs(arch)) {
    auto library = cache.getLibrary({spec.uri(), emitCuda(spec), arch});
    if (!library)
      return library.takeError();
    auto entry = (*library)->getKernel(kernelSymbol(spec));
    if (!entry)
      return entry.takeError();
    if (spec.kind == KernelKind::CopyPages) {
      ops.copyLibrary = std::move(*library);
      ops.copyEntry = *entry;
    } else {
      ops.advanceLibrary = std::move(*library);
      ops.advanceEntry = *entry;
    }
  }
  const size_t bytes = size_t(maxStagedPairs) * sizeof(PagePair);
  auto buffer = StagedBuffer::allocate(bytes, bytes);
  if (!buffer)
    return buffer.takeError();
  ops.pairBuffer = std::move(*buffer);
  ops.pairCapacity = maxStagedPairs;
  return std::move(ops);
}

llvm::Error CacheOps::copyPages(KVCache &cache, llvm::ArrayRef<PagePair> pairs,
                                CUstream stream) {
  return copyPages(cache.config(), cache.layerTable(), pairs, stream);
}

llvm::Error CacheOps::copyPages(KVCache &cache, const PagePair *devicePairs,
                                int64_t numPairs, CUstream stream) const {
  return copyPages(cache.config(), cache.layerTable(), devicePairs, numPairs,
                   stream);
}

llvm::Error CacheOps::copyPages(const KVCacheConfig &config,
                                CUdeviceptr layerTable,
                                llvm::ArrayRef<PagePair> pairs,
                                CUstream stream) {
  if (llvm::Error error = checkCopyCache(config, layerTable))
    return error;
  if (llvm::Error error = checkCopyPairs(pairs, config.numPages))
    return error;
  if (int64_t(pairs.size()) > pairCapacity)
    return copyError(llvm::formatv(
        "{0} pairs exceed the staging capacity of {1} (CacheOps::create's "
        "maxStagedPairs)",
        pairs.size(), pairCapacity));
  if (pairs.empty())
    return llvm::Error::success();
  // The previous call's upload must have left the staging buffer.
  auto host = pairBuffer.beginWrite();
  if (!host)
    return host.takeError();
  std::memcpy(*host, pairs.data(), pairs.size() * sizeof(PagePair));
  if (llvm::Error error = pairBuffer.upload(stream))
    return error;
  return copyPages(config, layerTable,
                   pairBuffer.device().ptr<const PagePair>(),
                   int64_t(pairs.size()), stream);
}

llvm::Error CacheOps::copyPages(const KVCacheConfig &c, CUdeviceptr layerTable,
                                const PagePair *devicePairs, int64_t numPairs,
                                CUstream stream) const {
  if (llvm::Error error = checkCopyCache(c, layerTable))
    return error;
  if (numPairs < 0 || numPairs > INT32_MAX)
    return copyError(
        llvm::formatv("numPairs {0} is outside [0, {1}]", numPairs, INT32_MAX));
  if (numPairs == 0)
    return llvm::Error::success();
  if (!devicePairs)
    return copyError("devicePairs is null");
  static_assert(sizeof(PagePair) == 2 * sizeof(int64_t),
                "PagePair is the kernel's int64 [n, 2] pair array");
  CopyPagesParams p{};
  p.layers = reinterpret_cast<const uint64_t *>(layerTable);
  p.pairs = reinterpret_cast<const int64_t *>(devicePairs);
  p.numPairs = numPairs;
  p.numPages = c.numPages;
  p.pageBytes = c.pageBytes();
  p.numLayers = c.numLayers;
  void *args[] = {&p};
  ATTN_CU_CHECK(cuLaunchKernel(reinterpret_cast<CUfunction>(copyEntry),
                               unsigned(numPairs), unsigned(2 * c.numLayers), 1,
                               threadsOf(KernelKind::CopyPages), 1, 1, 0,
                               stream, args, nullptr));
  return llvm::Error::success();
}

llvm::Error CacheOps::checkArgs(const AdvanceStepArgs &a,
                                const DecodePlan *plan) {
  if (a.numQueries < 0 || a.numSeqs < a.numQueries)
    return advanceError(
        llvm::formatv("numQueries ({0}) must be >= 0 and at most numSeqs ({1})",
                      a.numQueries, a.numSeqs));
  if (a.pageSize < 1)
    return advanceError(
        llvm::formatv("pageSize must be >= 1, got {0}", a.pageSize));
  if (a.numSeqs > 0 && (!a.seqLens || !a.slotMapping))
    return advanceError("seqLens and slotMapping must not be null");
  if (a.numQueries > 0 && !a.pageTables)
    return advanceError("pageTables must not be null");
  if (a.numQueries > 0 && a.pageTableStride < 1)
    return advanceError(llvm::formatv("pageTableStride must be >= 1, got {0}",
                                      a.pageTableStride));
  if (bool(a.inputTokens) != bool(a.sampledTokenIds))
    return advanceError("inputTokens and sampledTokenIds go together: give "
                        "both or neither");
  if (plan) {
    if (!plan->workItems || !plan->numWorkItems)
      return advanceError("the decode plan has no device work items");
    if (plan->batch != a.numQueries)
      return advanceError(
          llvm::formatv("the decode plan has {0} requests; numQueries is {1}",
                        plan->batch, a.numQueries));
  }
  return llvm::Error::success();
}

llvm::Error CacheOps::advanceStep(const AdvanceStepArgs &a,
                                  const DecodePlan *plan,
                                  CUstream stream) const {
  if (llvm::Error error = checkArgs(a, plan))
    return error;
  AdvanceStepParams p{};
  p.inputTokens = a.inputTokens;
  p.sampledTokenIds = a.sampledTokenIds;
  p.positions = a.positions;
  p.seqLens = a.seqLens;
  p.slotMapping = a.slotMapping;
  p.pageTables = a.pageTables;
  if (plan) {
    // The plan's work list lives in the caller's DecodeWorkspace: device
    // memory the decode kernel only reads, updated here between steps.
    p.workItems = const_cast<DecodeWorkItem *>(plan->workItems);
    p.numWorkItems = plan->numWorkItems;
    p.maxWorkItems = plan->gridX;
  }
  p.numQueries = a.numQueries;
  p.numSeqs = a.numSeqs;
  p.pageSize = a.pageSize;
  p.pageTableStride = a.pageTableStride;
  const int threads = threadsOf(KernelKind::AdvanceStep);
  const int rows = std::max(a.numSeqs, int(p.maxWorkItems));
  if (rows == 0)
    return llvm::Error::success();
  void *args[] = {&p};
  ATTN_CU_CHECK(cuLaunchKernel(reinterpret_cast<CUfunction>(advanceEntry),
                               unsigned((rows + threads - 1) / threads), 1, 1,
                               threads, 1, 1, 0, stream, args, nullptr));
  return llvm::Error::success();
}

} // namespace attn::runtime
