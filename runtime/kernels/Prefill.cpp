//===- Prefill.cpp - plan and run prefill kernels -------------------------===//
#include "attn/runtime/kernels/Prefill.h"
#include "attn/runtime/support/Error.h"
#include "codegen/EmitCuda.h"
#include "runtime/kernels/CacheChecks.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <tuple>

namespace attn::runtime {

namespace {

llvm::Error argError(const llvm::Twine &message) {
  return llvm::createStringError("prefill run: " + message.str());
}

size_t alignUp(size_t x) { return (x + 255) / 256 * 256; }

/// The keys [begin, end) a tile's rows can see: the causal diagonal's and
/// (with `windowLeft`) the window's bounds, begin rounded down to a key
/// tile as the kernels round it.
std::pair<int, int> visibleKeys(const PrefillWorkItem &w,
                                const KernelSpec &spec,
                                std::optional<int> windowLeft) {
  const int firstPos = w.kvLen - w.qLen + w.tileBegin;
  int end = w.kvLen, begin = 0;
  if (spec.causal) {
    int lastPos =
        firstPos + std::min(w.qLen - w.tileBegin, spec.prefillTileTokens()) - 1;
    end = std::clamp(lastPos + 1, 0, w.kvLen);
  }
  if (windowLeft) {
    const int blockN = spec.prefillSchedule.blockN;
    begin = std::max(0, firstPos - *windowLeft) / blockN * blockN;
  }
  return {std::min(begin, end), end};
}

/// Keys an item reads, for ordering items heaviest first.
int64_t tileWork(const PrefillWorkItem &w, const KernelSpec &spec) {
  auto [begin, end] = visibleKeys(w, spec, std::nullopt);
  return std::max(0, std::min(end, w.keyEnd) - std::max(begin, w.keyBegin));
}

void sortHeaviestFirst(std::vector<PrefillWorkItem> &items,
                       const KernelSpec &spec) {
  std::stable_sort(items.begin(), items.end(),
                   [&](const PrefillWorkItem &a, const PrefillWorkItem &b) {
                     return tileWork(a, spec) > tileWork(b, spec);
                   });
}

/// Checks that `offsets` are batch + 1 non-decreasing offsets from 0.
llvm::Error checkOffsets(const char *name, llvm::ArrayRef<int32_t> offsets) {
  if (offsets.size() < 2)
    return llvm::createStringError(
        llvm::formatv("prefill plan: {0} has {1} entries; it must hold batch + "
                      "1 >= 2 offsets",
                      name, offsets.size()));
  if (offsets[0] != 0)
    return llvm::createStringError(
        llvm::formatv("prefill plan: {0}[0] = {1}, but offsets must start at 0",
                      name, offsets[0]));
  for (size_t b = 1; b < offsets.size(); ++b)
    if (offsets[b] < offsets[b - 1])
      return llvm::createStringError(llvm::formatv(
          "prefill plan: {0}[{1}] = {2} is below {0}[{3}] = {4}; offsets "
          "must not decrease",
          name, b, offsets[b], b - 1, offsets[b - 1]));
  return llvm::Error::success();
}

/// The query tiles of `pieces`, longest first so the last wave holds the
/// short ones.
std::vector<PrefillWorkItem> tilesOf(llvm::ArrayRef<PrefillPiece> pieces,
                                     const KernelSpec &spec) {
  const int tileTokens = spec.prefillTileTokens();
  std::vector<PrefillWorkItem> items;
  for (const PrefillPiece &piece : pieces)
    for (int begin = 0; begin < piece.qLen; begin += tileTokens)
      items.push_back({piece.qStart, piece.qLen, piece.kvStart, piece.kvLen,
                       begin, piece.request, piece.outStart,
                       /*keyBegin=*/0, /*keyEnd=*/piece.kvLen, /*split=*/-1,
                       /*firstSplit=*/0, /*numSplits=*/1});
  sortHeaviestFirst(items, spec);
  return items;
}

/// Requests as pieces: request b's rows from cuQ and keys (kvStart(b),
/// kvLen(b)).
template <class KVRange>
std::vector<PrefillWorkItem> tilesOf(llvm::ArrayRef<int32_t> cuQ,
                                     const KernelSpec &spec, KVRange kvRange) {
  std::vector<PrefillPiece> pieces;
  for (size_t b = 0; b + 1 < cuQ.size(); ++b) {
    auto [kvStart, kvLen] = kvRange(b);
    pieces.push_back(
        {cuQ[b], cuQ[b + 1] - cuQ[b], int32_t(b), kvStart, kvLen, cuQ[b]});
  }
  return tilesOf(pieces, spec);
}

} // namespace

std::vector<PrefillWorkItem>
splitPrefillKeys(std::vector<PrefillWorkItem> items, const KernelSpec &spec,
                 std::optional<int> windowLeft, int residentCTAs, int slots) {
  const int64_t heads = spec.prefillGridHeads();
  // Batch-invariant: whether a tile splits would depend on the batch.
  if (spec.batchInvariant || slots < 2 ||
      int64_t(items.size()) * heads >= residentCTAs)
    return items;
  const int blockN = spec.prefillSchedule.blockN;
  constexpr int kMinSplitKeys = 512; // below, the merge costs what it saves
  std::vector<int> keyTiles;         // per item: key tiles its rows can see
  int64_t total = 0;
  for (const PrefillWorkItem &w : items) {
    auto [begin, end] = visibleKeys(w, spec, windowLeft);
    keyTiles.push_back((end - begin + blockN - 1) / blockN);
    total += keyTiles.back();
  }
  // Each tile's share of `budget` items, by its keys (rounded down, so the
  // pairs do not spill into a second wave), none under minTiles key tiles.
  const int64_t minTiles = std::max(2, (kMinSplitKeys + blockN - 1) / blockN);
  auto splitsOf = [&](int64_t tiles, int64_t budget) {
    if (total == 0)
      return int64_t(1);
    return std::max<int64_t>(
        1, std::min(budget * tiles / total, tiles / minTiles));
  };
  auto splitItems = [&](int64_t budget) {
    int64_t n = 0;
    for (int t : keyTiles)
      if (splitsOf(t, budget) > 1)
        n += splitsOf(t, budget);
    return n;
  };
  int64_t budget = residentCTAs / heads;
  while (budget > 1 && splitItems(budget) > slots)
    budget = budget * 3 / 4;
  if (splitItems(budget) == 0)
    return items;

  std::vector<PrefillWorkItem> out;
  int32_t nextSlot = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const PrefillWorkItem &w = items[i];
    const int t = keyTiles[i];
    const int n = int(splitsOf(t, budget));
    if (n <= 1) {
      out.push_back(w);
      continue;
    }
    const int begin = visibleKeys(w, spec, windowLeft).first;
    for (int j = 0; j < n; ++j) {
      PrefillWorkItem piece = w;
      // Split 0 starts at key 0 (it adds a sink, if any; the window
      // narrows it in the kernel); the last ends at the piece's end.
      piece.keyBegin = j == 0 ? 0 : begin + int(int64_t(j) * t / n) * blockN;
      piece.keyEnd =
          j + 1 == n ? w.kvLen : begin + int(int64_t(j + 1) * t / n) * blockN;
      piece.split = nextSlot + j;
      piece.firstSplit = nextSlot;
      piece.numSplits = n;
      out.push_back(piece);
    }
    nextSlot += n;
  }
  sortHeaviestFirst(out, spec);
  return out;
}

llvm::Expected<std::vector<PrefillWorkItem>>
partitionPrefill(llvm::ArrayRef<int32_t> cuQ, llvm::ArrayRef<int32_t> cuKV,
                 const KernelSpec &spec) {
  if (cuQ.size() != cuKV.size())
    return llvm::createStringError(llvm::formatv(
        "prefill plan: cu_seqlens_q ({0} entries) and cu_seqlens_kv ({1}) "
        "must both hold batch + 1 offsets",
        cuQ.size(), cuKV.size()));
  if (llvm::Error error = checkOffsets("cu_seqlens_q", cuQ))
    return std::move(error);
  if (llvm::Error error = checkOffsets("cu_seqlens_kv", cuKV))
    return std::move(error);
  return tilesOf(cuQ, spec, [&](size_t b) {
    return std::pair{cuKV[b], cuKV[b + 1] - cuKV[b]};
  });
}

llvm::Expected<std::vector<PrefillWorkItem>>
partitionPagedPrefill(llvm::ArrayRef<int32_t> cuQ,
                      llvm::ArrayRef<int32_t> seqLens, const KernelSpec &spec,
                      bool rowsInCache) {
  if (llvm::Error error = checkOffsets("cu_seqlens_q", cuQ))
    return std::move(error);
  if (seqLens.size() + 1 != cuQ.size())
    return llvm::createStringError(llvm::formatv(
        "prefill plan: {0} seq_lens for {1} requests (cu_seqlens_q has {2} "
        "entries)",
        seqLens.size(), cuQ.size() - 1, cuQ.size()));
  // Causal self attention: the new rows are the last of the cached tokens.
  // (Without the causal mask, every row sees every key: FlashInfer's
  // non-causal paged prefill takes more rows than keys, and cross
  // attention reads cached encoder outputs unrelated to the rows.)
  for (size_t b = 0; b < seqLens.size() && rowsInCache; ++b)
    if (seqLens[b] < cuQ[b + 1] - cuQ[b])
      return llvm::createStringError(llvm::formatv(
          "prefill plan: seq_lens[{0}] = {1} is below the request's {2} new "
          "rows, which must already be in the cache",
          b, seqLens[b], cuQ[b + 1] - cuQ[b]));
  return tilesOf(cuQ, spec, [&](size_t b) { return std::pair{0, seqLens[b]}; });
}

llvm::Expected<PrefillKernel>
PrefillKernel::create(const KernelSpec &spec, const PrefillVariant &variant,
                      std::shared_ptr<CudaLibrary> library) {
  PrefillKernel kernel;
  if (llvm::Error error = kernel.bind(spec, std::move(library)))
    return std::move(error);
  kernel.prefillVariant = variant;
  if (spec.prefillSchedule.mma == PrefillMma::Wgmma) {
    auto where = kernel.residency();
    if (!where)
      return where.takeError();
    kernel.residentCTAs = where->numSMs * where->ctasPerSM;
  }
  return std::move(kernel);
}

llvm::Expected<PrefillWorkspace>
PrefillKernel::createWorkspace(int maxBatch, int64_t maxQTokens,
                               bool splitKV) const {
  if (maxBatch < 1 || maxQTokens < 1)
    return llvm::createStringError(llvm::formatv(
        "prefill workspace: maxBatch ({0}) and maxQTokens ({1}) must be >= 1",
        maxBatch, maxQTokens));
  PrefillWorkspace ws;
  // Every request adds at most one partial tile.
  int64_t tiles = maxQTokens / kernelSpec.prefillTileTokens() + maxBatch;
  if (tiles > INT32_MAX)
    return llvm::createStringError("prefill workspace: too many query tiles");
  ws.tileCapacity = int(tiles);
  const KernelSpec &s = kernelSpec;
  if (splitKV && residentCTAs > 0) {
    // Splits fill the device about once: at most residentCTAs / heads
    // split items (splitPrefillKeys' budget, which it rounds down).
    const int heads = s.prefillGridHeads();
    ws.splitCapacity = std::max(2, residentCTAs / heads);
    const size_t slotRows =
        size_t(ws.splitCapacity) * s.prefillSchedule.blockM * heads;
    ws.partialLseOffset = alignUp(slotRows * s.headDim * sizeof(float));
    ws.countersOffset = ws.partialLseOffset + alignUp(slotRows * sizeof(float));
    const size_t counterBytes = size_t(ws.splitCapacity) * heads *
                                s.prefillSchedule.blockM / 64 * sizeof(int32_t);
    auto splits = DeviceBuffer::allocate(ws.countersOffset + counterBytes);
    if (!splits)
      return splits.takeError();
    // The merge counters start at zero; the kernel leaves them at zero.
    ATTN_CU_CHECK(
        cuMemsetD8(splits->get() + ws.countersOffset, 0, counterBytes));
    ws.splits = std::move(*splits);
  }
  size_t bytes = alignUp(sizeof(int32_t)) +
                 size_t(ws.maxTiles()) * sizeof(PrefillWorkItem);
  auto buffer = StagedBuffer::allocate(bytes, bytes);
  if (!buffer)
    return buffer.takeError();
  ws.buffer = std::move(*buffer);
  if (kernelSpec.kind == KernelKind::PagedPrefill) {
    auto pageIdError = allocatePageIdError();
    if (!pageIdError)
      return pageIdError.takeError();
    ws.pageIdError = std::move(*pageIdError);
  }
  return std::move(ws);
}

llvm::Expected<PrefillPlan>
PrefillKernel::upload(llvm::Expected<std::vector<PrefillWorkItem>> partition,
                      llvm::ArrayRef<int32_t> cuSeqlensQ, PrefillWorkspace &ws,
                      CUstream stream, bool forGraph) const {
  if (!partition)
    return partition.takeError();
  PageIdError *pageIdError = ws.pageIdError.ptr<PageIdError>();
  if (llvm::Error error = takePageIdError(pageIdError, "paged prefill"))
    return std::move(error);
  std::vector<PrefillWorkItem> items = std::move(*partition);
  if (int64_t(items.size()) > ws.tileCapacity)
    return llvm::createStringError(llvm::formatv(
        "prefill plan: {0} query tiles exceed the workspace's {1}",
        items.size(), ws.tileCapacity));
  // At most maxSplits() split items replace whole tiles: within maxTiles().
  if (ws.maxSplits() > 0)
    items = splitPrefillKeys(std::move(items), kernelSpec,
                             prefillVariant.windowLeft, residentCTAs,
                             ws.maxSplits());
  auto host = ws.buffer.beginWrite();
  if (!host)
    return host.takeError();
  int32_t count = int32_t(items.size());
  std::memcpy(*host, &count, sizeof(count));
  std::memcpy(*host + alignUp(sizeof(int32_t)), items.data(),
              items.size() * sizeof(PrefillWorkItem));
  if (llvm::Error error = ws.buffer.upload(stream))
    return std::move(error);

  PrefillPlan plan;
  plan.batch = int(cuSeqlensQ.size()) - 1;
  plan.numQTokens = cuSeqlensQ.back();
  plan.numWorkItems = ws.buffer.device().ptr<int32_t>();
  plan.workItems = reinterpret_cast<const PrefillWorkItem *>(
      ws.buffer.device().ptr<char>() + alignUp(sizeof(int32_t)));
  plan.pageIdError = pageIdError;
  if (ws.maxSplits() > 0) {
    plan.partialOut = ws.splits.ptr<float>();
    plan.partialLse =
        reinterpret_cast<float *>(ws.splits.get() + ws.partialLseOffset);
    plan.mergeCounters =
        reinterpret_cast<int32_t *>(ws.splits.get() + ws.countersOffset);
  }
  plan.gridX = forGraph ? ws.maxTiles() : count;
  plan.splitItems = int(llvm::count_if(
      items, [](const PrefillWorkItem &w) { return w.split >= 0; }));
  return plan;
}

llvm::Expected<PrefillPlan>
PrefillKernel::plan(llvm::ArrayRef<int32_t> cuSeqlensQ,
                    llvm::ArrayRef<int32_t> cuSeqlensKV, PrefillWorkspace &ws,
                    CUstream stream, bool forGraph) const {
  if (kernelSpec.kind != KernelKind::Prefill)
    return llvm::createStringError(
        "prefill plan: the kernel reads a paged cache; use planPaged");
  auto plan = upload(partitionPrefill(cuSeqlensQ, cuSeqlensKV, kernelSpec),
                     cuSeqlensQ, ws, stream, forGraph);
  if (plan)
    plan->numKVTokens = cuSeqlensKV.back();
  return plan;
}

llvm::Expected<PrefillPlan>
PrefillKernel::planPaged(llvm::ArrayRef<int32_t> cuSeqlensQ,
                         llvm::ArrayRef<int32_t> seqLens, PrefillWorkspace &ws,
                         CUstream stream, bool forGraph) const {
  if (kernelSpec.kind != KernelKind::PagedPrefill)
    return llvm::createStringError(
        "prefill plan: the kernel reads contiguous k/v; use plan");
  auto plan = upload(
      partitionPagedPrefill(cuSeqlensQ, seqLens, kernelSpec,
                            prefillVariant.kind != AttentionKind::Cross &&
                                prefillVariant.causal),
      cuSeqlensQ, ws, stream, forGraph);
  if (plan)
    for (int32_t len : seqLens)
      plan->maxKVLen = std::max(plan->maxKVLen, len);
  return plan;
}

llvm::Expected<PrefillPlan>
PrefillKernel::planPagedPieces(llvm::ArrayRef<PrefillPiece> pieces,
                               int64_t numQTokens, int64_t numOutTokens,
                               PrefillWorkspace &ws, CUstream stream,
                               bool forGraph) const {
  if (kernelSpec.kind != KernelKind::PagedPrefill)
    return llvm::createStringError(
        "prefill plan: the kernel reads contiguous k/v; use plan");
  int maxKey = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const PrefillPiece &p = pieces[i];
    if (p.qStart < 0 || p.qLen < 0 || p.qStart + int64_t(p.qLen) > numQTokens ||
        p.outStart < 0 || p.outStart + int64_t(p.qLen) > numOutTokens ||
        p.request < 0 || p.kvStart < 0 || p.kvLen < 0 ||
        p.kvStart % kernelSpec.pageSize != 0 ||
        int64_t(p.kvStart) + p.kvLen > INT32_MAX)
      return llvm::createStringError(llvm::formatv(
          "prefill plan: piece {0} (rows {1} + {2} of {3}, written at {4} of "
          "{5}, row {6}, keys {7} + {8}) is out of range or starts its keys "
          "inside a page",
          i, p.qStart, p.qLen, numQTokens, p.outStart, numOutTokens, p.request,
          p.kvStart, p.kvLen));
    maxKey = std::max(maxKey, p.kvStart + p.kvLen);
  }
  if (numQTokens > INT32_MAX)
    return llvm::createStringError("prefill plan: numQTokens out of range");
  std::vector<int32_t> rows = {0, int32_t(numQTokens)};
  auto plan = upload(tilesOf(pieces, kernelSpec), rows, ws, stream, forGraph);
  if (plan) {
    plan->batch = std::max<int>(1, int(pieces.size()));
    plan->maxKVLen = maxKey;
  }
  return plan;
}

namespace {

/// The checks every prefill launch shares: q / out strides, per-head
/// tables, LSE.
llvm::Error checkCommonArgs(const KernelSpec &s, const void *q, int64_t qStride,
                            const void *out, int64_t outStride,
                            const HeadTables &tables, const float *lse) {
  if (auto problem =
          misalignedBuffer({{"q", q, 16}, {"out", out, 16}, {"lse", lse, 4}}))
    return argError(*problem);
  // q rows have rope_dim more dims than out's (MLA's prefill).
  const int64_t outRow = int64_t(s.numQHeads) * s.headDim;
  const int64_t qRow = outRow + int64_t(s.numQHeads) * s.ropeDim;
  for (auto [name, stride, row] :
       {std::tuple{"q", qStride, qRow}, std::tuple{"out", outStride, outRow}})
    if (stride && (stride < row || stride % 8))
      return argError(llvm::formatv("{0} token stride {1} must be >= {2} and "
                                    "a multiple of 8",
                                    name, stride, row));
  if (auto problem = headTablesProblem(s, tables))
    return argError(*problem);
  if (s.writeLse != (lse != nullptr))
    return argError(s.writeLse
                        ? "the variant writes LSE: lse must be set"
                        : "lse given, but the variant does not write LSE");
  return llvm::Error::success();
}

} // namespace

llvm::Error PrefillKernel::checkArgs(const PrefillPlan &plan,
                                     const PrefillArgs &a) const {
  const KernelSpec &s = kernelSpec;
  if (s.kind != KernelKind::Prefill)
    return argError("the kernel reads a paged cache; pass PagedPrefillArgs");
  if (!a.q || !a.k || !a.v || !a.out)
    return argError("q, k, v and out must not be null");
  if (a.dtype != s.qType)
    return argError(
        llvm::formatv("q/k/v are {0}, the kernel was compiled for {1}",
                      toString(a.dtype), toString(s.qType)));
  if (a.kvType.value_or(a.dtype) != s.kvType)
    return argError(llvm::formatv(
        "k/v are {0}, the kernel was compiled for {1}",
        toString(a.kvType.value_or(a.dtype)), toString(s.kvType)));
  if (auto problem = scaleMismatch(s, a.kScale, a.vScale, a.numKVScales))
    return argError(*problem);
  if (a.numQHeads != s.numQHeads || a.numKVHeads != s.numKVHeads ||
      a.headDim != s.headDim || a.ropeDim != s.ropeDim)
    return argError(llvm::formatv(
        "heads {0}/{1} x {2} + {3} dims, the kernel was compiled for {4}/{5} "
        "x {6} + {7}",
        a.numQHeads, a.numKVHeads, a.headDim, a.ropeDim, s.numQHeads,
        s.numKVHeads, s.headDim, s.ropeDim));
  if (a.numQTokens != plan.numQTokens || a.numKVTokens != plan.numKVTokens)
    return argError(llvm::formatv(
        "{0} q and {1} kv tokens; the plan's cu_seqlens end at {2} and {3}",
        a.numQTokens, a.numKVTokens, plan.numQTokens, plan.numKVTokens));
  // Rows 16 bytes apart: 8 16-bit or 16 FP8 elements.
  const int64_t vRow = int64_t(s.numKVHeads) * s.headDim;
  const int64_t kRow = vRow + int64_t(s.numKVHeads) * s.ropeDim;
  const int kvAlign = s.isFP8KV() ? 16 : 8;
  for (auto [name, stride, row] : {std::tuple{"k", a.kStrideToken, kRow},
                                   std::tuple{"v", a.vStrideToken, vRow}})
    if (stride && (stride < row || stride % kvAlign))
      return argError(llvm::formatv("{0} token stride {1} must be >= {2} and "
                                    "a multiple of {3}",
                                    name, stride, row, kvAlign));
  if (s.fp8Query && a.qStrideToken % 16)
    return argError(llvm::formatv("e4m3 q token stride {0} must be a "
                                  "multiple of 16",
                                  a.qStrideToken));
  if (auto problem = misalignedBuffer({{"k", a.k, 16}, {"v", a.v, 16}}))
    return argError(*problem);
  return checkCommonArgs(s, a.q, a.qStrideToken, a.out, a.outStrideToken, a,
                         a.lse);
}

llvm::Error PrefillKernel::checkArgs(const PrefillPlan &plan,
                                     const PagedPrefillArgs &a) const {
  const KernelSpec &s = kernelSpec;
  if (s.kind != KernelKind::PagedPrefill)
    return argError("the kernel reads contiguous k/v; pass PrefillArgs");
  if (!a.q || !a.out || !a.cache.k || !a.cache.v || !a.pageTables)
    return argError("q, out, cache.k, cache.v and pageTables must not be null");
  if (!plan.pageIdError)
    return argError("the plan has no workspace: make it with planPaged() or "
                    "planPagedPieces()");
  if (a.qType != s.qType)
    return argError(llvm::formatv("q is {0}, the kernel was compiled for {1}",
                                  toString(a.qType), toString(s.qType)));
  if (a.numQHeads != s.numQHeads || a.headDim != s.headDim)
    return argError(llvm::formatv("q has {0} heads x {1} dims, the kernel was "
                                  "compiled for {2} x {3}",
                                  a.numQHeads, a.headDim, s.numQHeads,
                                  s.headDim));
  if (a.numQTokens != plan.numQTokens)
    return argError(
        llvm::formatv("{0} q tokens; the plan's cu_seqlens_q end at {1}",
                      a.numQTokens, plan.numQTokens));
  if (auto problem = pagedArgsProblem(a.cache, s, a.pageTableStride))
    return argError(*problem);
  int64_t pagesNeeded = (int64_t(plan.maxKVLen) + s.pageSize - 1) / s.pageSize;
  if (pagesNeeded > a.pageTableStride)
    return argError(llvm::formatv("the longest request ({0} tokens) needs {1} "
                                  "pages; the page table has {2} per request",
                                  plan.maxKVLen, pagesNeeded,
                                  a.pageTableStride));
  if (auto problem = scaleMismatch(s, a.kScale, a.vScale, a.numKVScales))
    return argError(*problem);
  // TMA reads rows 16 bytes apart: 16 e4m3 elements.
  if (s.fp8Query && a.qStrideToken % 16)
    return argError(llvm::formatv("e4m3 q token stride {0} must be a "
                                  "multiple of 16",
                                  a.qStrideToken));
  return checkCommonArgs(s, a.q, a.qStrideToken, a.out, a.outStrideToken, a,
                         a.lse);
}

PrefillParams PrefillKernel::baseParams(const PrefillPlan &plan) const {
  const KernelSpec &s = kernelSpec;
  PrefillParams p{};
  p.workItems = plan.workItems;
  p.numWorkItems = plan.numWorkItems;
  p.partialOut = plan.partialOut;
  p.partialLse = plan.partialLse;
  p.mergeCounters = plan.mergeCounters;
  // Scores are q.k over head_dim + rope_dim dims.
  p.smScale = prefillVariant.scale
                  ? *prefillVariant.scale
                  : float(1.0 / std::sqrt(double(s.headDim + s.ropeDim)));
  p.softcap = prefillVariant.softcap.value_or(0.f);
  p.windowLeft = prefillVariant.windowLeft.value_or(0);
  return p;
}

llvm::Error PrefillKernel::launch(const PrefillPlan &plan,
                                  const PrefillParams &p,
                                  CUstream stream) const {
  if (plan.gridX == 0)
    return llvm::Error::success(); // an empty batch
  PrefillParams params = p;
  void *args[] = {&params};
  ATTN_CU_CHECK(cuLaunchKernel(reinterpret_cast<CUfunction>(entry), plan.gridX,
                               kernelSpec.prefillGridHeads(), 1,
                               threadsPerBlock(kernelSpec), 1, 1, smemBytes,
                               stream, args, nullptr));
  return llvm::Error::success();
}

namespace {

// cuda.h aligns CUtensorMap to 128 bytes; the driver needs 64
// (cuTensorMapEncodeTiled), which TmaDescriptor keeps in the kernel's
// parameter space too.
static_assert(sizeof(TmaDescriptor) == sizeof(CUtensorMap) &&
                  alignof(TmaDescriptor) >= 64,
              "TmaDescriptor (templates/attn/params.h) must be a CUtensorMap");

/// How rows land in shared memory for the sm_90a template
/// (templates/attn/prefill_sm90.cuh): as the MMAs read them (128-byte rows,
/// 128-byte swizzled), or FP8 rows raw, in 64-byte pieces, to be widened
/// (unswizzled) or, FP8 compute's V, transposed (64-byte swizzled:
/// PrefillSm90Traits::rawVtOffset).
enum class Landing { Mma, RawToWiden, RawToTranspose };

CUtensorMapSwizzle swizzleOf(Landing landing) {
  switch (landing) {
  case Landing::Mma:
    return CU_TENSOR_MAP_SWIZZLE_128B;
  case Landing::RawToWiden:
    return CU_TENSOR_MAP_SWIZZLE_NONE;
  case Landing::RawToTranspose:
    return CU_TENSOR_MAP_SWIZZLE_64B;
  }
  return CU_TENSOR_MAP_SWIZZLE_128B;
}

/// How an FP8 k or v of spec `s` lands (16-bit ones as the MMAs read them).
Landing landingOf(const KernelSpec &s, bool isV) {
  if (!s.isFP8KV())
    return Landing::Mma;
  if (!s.fp8Compute)
    return Landing::RawToWiden;
  return isV ? Landing::RawToTranspose : Landing::Mma;
}

/// The tensor map of one ragged [tokens, heads, headDim] tensor of `type`
/// (token stride `strideToken` elements) as the sm_90a template reads it:
/// boxes of one 128-byte row piece (64 16-bit dims, or 128 FP8 ones) x
/// `boxHeads` heads x `boxRows` tokens (rows token-major: a packed q's
/// group), or 64-byte pieces of raw FP8 rows (`landing`); rows past the
/// tensor read as zeros.
llvm::Error encodeRowsMap(TmaDescriptor &map, const void *base, ScalarType type,
                          int64_t tokens, int heads, int headDim,
                          int64_t strideToken, int boxRows,
                          Landing landing = Landing::Mma, int boxHeads = 1) {
  const bool raw = landing != Landing::Mma;
  if (reinterpret_cast<uintptr_t>(base) % 16)
    return argError("q, k and v must be 16-byte aligned for the sm_90a "
                    "(TMA) prefill");
  const cuuint64_t bytes = cuuint64_t(sizeOf(type));
  // A tensor map needs at least one row; an empty tensor is never read.
  cuuint64_t dims[3] = {cuuint64_t(headDim), cuuint64_t(heads),
                        cuuint64_t(std::max<int64_t>(tokens, 1))};
  cuuint64_t strides[2] = {cuuint64_t(headDim) * bytes,
                           cuuint64_t(strideToken) * bytes};
  cuuint32_t box[3] = {cuuint32_t((raw ? 64 : 128) / bytes),
                       cuuint32_t(boxHeads), cuuint32_t(boxRows)};
  cuuint32_t elementStrides[3] = {1, 1, 1};
  ATTN_CU_CHECK(cuTensorMapEncodeTiled(
      reinterpret_cast<CUtensorMap *>(&map),
      bytes == 1                 ? CU_TENSOR_MAP_DATA_TYPE_UINT8
      : type == ScalarType::BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
      3, const_cast<void *>(base), dims, strides, box, elementStrides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, swizzleOf(landing),
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return llvm::Error::success();
}

/// The tensor map of one paged 16-bit cache (K or V) as the sm_90a template
/// reads it (PrefillSm90Traits::kKVRowGroupBytes): 5-d (64 dims, 8 tokens,
/// column block, 8-token group, page), so that one box of 64 dims x 8
/// tokens x every column block x `boxRows` / 8 groups of one page lands as
/// [8-row group][column block][8 rows][128 bytes], 128-byte swizzled, and
/// covers every column block (one box per page piece, not one per piece
/// and column block). NHD folds the head into the column-block index
/// (heads x column blocks, 128 bytes apart), HND into the group index
/// (heads x groups per page). Page -1 reads as zeros. FP8 caches land as
/// `landing` says: raw (64-byte rows in the same order, to be widened or
/// transposed in shared memory) or, FP8 compute's K, as the FP8 MMA reads
/// them (128 dims per 128-byte swizzled row).
llvm::Error encodePagesMap(TmaDescriptor &map, const void *base,
                           const KernelSpec &s, int64_t numPages,
                           int64_t pageStride, int boxRows, Landing landing) {
  if (reinterpret_cast<uintptr_t>(base) % 16)
    return argError("cache.k and cache.v must be 16-byte aligned for the "
                    "sm_90a (TMA) prefill");
  const bool fp8 = s.isFP8KV();
  const cuuint64_t blockDims =
      fp8 && landing == Landing::Mma ? 128 : 64; // per column block
  const cuuint64_t bytes = fp8 ? 1 : 2;
  if ((pageStride * int64_t(bytes)) % 16)
    return argError(llvm::formatv(
        "cache.pageStride ({0} elements) must be a multiple of 16 bytes for "
        "the sm_90a (TMA) prefill",
        pageStride));
  const bool hnd = s.layout == KVLayout::HND;
  const cuuint64_t heads = cuuint64_t(s.numKVHeads),
                   colBlocks = cuuint64_t(s.headDim) / blockDims,
                   groups = cuuint64_t(s.pageSize / 8);
  // Bytes between consecutive tokens of a page.
  const cuuint64_t tokenStride = (hnd ? 1 : heads) * s.headDim * bytes;
  cuuint64_t dims[5] = {blockDims, 8, hnd ? colBlocks : heads * colBlocks,
                        hnd ? heads * groups : groups, cuuint64_t(numPages)};
  cuuint64_t strides[4] = {tokenStride, blockDims * bytes, 8 * tokenStride,
                           cuuint64_t(pageStride) * bytes};
  cuuint32_t box[5] = {cuuint32_t(blockDims), 8, cuuint32_t(colBlocks),
                       cuuint32_t(boxRows / 8), 1};
  cuuint32_t elementStrides[5] = {1, 1, 1, 1, 1};
  ATTN_CU_CHECK(cuTensorMapEncodeTiled(
      reinterpret_cast<CUtensorMap *>(&map),
      fp8                           ? CU_TENSOR_MAP_DATA_TYPE_UINT8
      : s.qType == ScalarType::BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                    : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
      5, const_cast<void *>(base), dims, strides, box, elementStrides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, swizzleOf(landing),
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return llvm::Error::success();
}

} // namespace

llvm::Error PrefillKernel::encodeQMap(TmaDescriptor &map, const void *q,
                                      int64_t numQTokens, int qkDim,
                                      int64_t qStrideToken) const {
  // One consumer warpgroup's 64 rows per box: 64 tokens of one q head, or
  // (packed) 64 / group tokens of a KV head's q heads. An e4m3 q (fp8Query)
  // lands as the FP8 MMA reads it.
  const KernelSpec &s = kernelSpec;
  const int heads = s.prefillSchedule.packGqa ? s.groupSize() : 1;
  return encodeRowsMap(map, q, s.fp8Query ? ScalarType::F8E4M3 : s.qType,
                       numQTokens, s.numQHeads, qkDim, qStrideToken, 64 / heads,
                       Landing::Mma, heads);
}

/// The sm_90a grid: persistent (one row of at most as many CTAs as fit on
/// the device at once, each looping over (work item, q head) pairs with the
/// grid's stride; templates/attn/prefill_sm90.cuh) or one CTA per pair.
/// Persistent for short requests: on average at most the schedule's
/// persistent_max_q_len query tokens (docs/perf-log/history.md, "Persistent
/// grid").
static bool sm90Persistent(const PrefillPlan &plan,
                           const PrefillSchedule &schedule) {
  return plan.numQTokens <= int64_t(schedule.persistentMaxQLen) * plan.batch;
}

llvm::Error PrefillKernel::launchSm90(const PrefillPlan &plan,
                                      PrefillSm90Params &params,
                                      CUstream stream) const {
  const KernelSpec &s = kernelSpec;
  void *args[] = {&params};
  CUfunction fn = reinterpret_cast<CUfunction>(entry);
  unsigned gridX = unsigned(plan.gridX), gridY = unsigned(s.prefillGridHeads());
  if (sm90Persistent(plan, s.prefillSchedule)) {
    // Host-side queries only (no stream work): graph capture is unaffected,
    // and the kernel reads the item count on the device.
    CUdevice device;
    int sms = 0, perSm = 0;
    ATTN_CU_CHECK(cuCtxGetDevice(&device));
    ATTN_CU_CHECK(cuDeviceGetAttribute(
        &sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device));
    ATTN_CU_CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor(
        &perSm, fn, threadsPerBlock(s), smemBytes));
    int64_t pairs = int64_t(plan.gridX) * s.prefillGridHeads();
    int64_t resident = int64_t(std::max(1, sms)) * std::max(1, perSm);
    gridX = unsigned(std::min(pairs, resident));
    gridY = 1;
  }
  ATTN_CU_CHECK(cuLaunchKernel(fn, gridX, gridY, 1, threadsPerBlock(s), 1, 1,
                               smemBytes, stream, args, nullptr));
  return llvm::Error::success();
}

llvm::Error PrefillKernel::launchSm90(const PrefillPlan &plan,
                                      const PrefillParams &p,
                                      const PrefillArgs &a,
                                      CUstream stream) const {
  if (plan.gridX == 0)
    return llvm::Error::success(); // an empty batch
  const KernelSpec &s = kernelSpec;
  PrefillSm90Params params{};
  params.base = p;
  // Three host-side encodings per call (no driver round trip to the GPU):
  // the maps hold the buffers' addresses, which change from call to call.
  // FP8 k/v land raw (to be widened, and V transposed for FP8 compute)
  // but FP8 compute's K, which lands as the MMA reads it.
  const int qkDim = s.headDim + s.ropeDim;
  if (llvm::Error err =
          encodeQMap(params.qMap, a.q, a.numQTokens, qkDim, p.qStrideToken))
    return err;
  if (llvm::Error err = encodeRowsMap(
          params.kMap, a.k, s.kvType, a.numKVTokens, s.numKVHeads, qkDim,
          p.kStrideToken, s.prefillSchedule.blockN, landingOf(s, false)))
    return err;
  if (llvm::Error err = encodeRowsMap(
          params.vMap, a.v, s.kvType, a.numKVTokens, s.numKVHeads, s.headDim,
          p.vStrideToken, s.prefillSchedule.blockN, landingOf(s, true)))
    return err;
  return launchSm90(plan, params, stream);
}

llvm::Error PrefillKernel::launchSm90(const PrefillPlan &plan,
                                      const PrefillParams &p,
                                      const PagedPrefillArgs &a,
                                      CUstream stream) const {
  if (plan.gridX == 0)
    return llvm::Error::success(); // an empty batch
  const KernelSpec &s = kernelSpec;
  PrefillSm90Params params{};
  params.base = p;
  // Boxes of the largest piece of a page that tiles both pages and K/V
  // tiles (PrefillSm90Traits::kBoxRows).
  const int boxRows = std::gcd(s.pageSize, s.prefillSchedule.blockN);
  if (llvm::Error err =
          encodeQMap(params.qMap, a.q, a.numQTokens, s.headDim, p.qStrideToken))
    return err;
  if (llvm::Error err =
          encodePagesMap(params.kMap, a.cache.k, s, a.cache.numPages,
                         p.pageStride, boxRows, landingOf(s, false)))
    return err;
  if (llvm::Error err =
          encodePagesMap(params.vMap, a.cache.v, s, a.cache.numPages,
                         p.pageStride, boxRows, landingOf(s, true)))
    return err;
  return launchSm90(plan, params, stream);
}

llvm::Error PrefillKernel::run(const PrefillPlan &plan, const PrefillArgs &a,
                               CUstream stream) const {
  if (llvm::Error err = checkArgs(plan, a))
    return err;
  const KernelSpec &s = kernelSpec;
  const int64_t outRow = int64_t(s.numQHeads) * s.headDim;
  const int64_t qRow = outRow + int64_t(s.numQHeads) * s.ropeDim;
  const int64_t vRow = int64_t(s.numKVHeads) * s.headDim;
  const int64_t kRow = vRow + int64_t(s.numKVHeads) * s.ropeDim;
  PrefillParams p = baseParams(plan);
  p.q = a.q;
  p.k = a.k;
  p.v = a.v;
  p.out = a.out;
  p.lse = a.lse;
  setHeadTables(p, a);
  p.kScale = a.kScale;
  p.vScale = a.vScale;
  p.qStrideToken = a.qStrideToken ? a.qStrideToken : qRow;
  p.kStrideToken = a.kStrideToken ? a.kStrideToken : kRow;
  p.vStrideToken = a.vStrideToken ? a.vStrideToken : vRow;
  p.outStrideToken = a.outStrideToken ? a.outStrideToken : outRow;
  if (s.prefillSchedule.mma == PrefillMma::Wgmma)
    return launchSm90(plan, p, a, stream);
  return launch(plan, p, stream);
}

llvm::Error PrefillKernel::run(const PrefillPlan &plan,
                               const PagedPrefillArgs &a,
                               CUstream stream) const {
  if (llvm::Error err = checkArgs(plan, a))
    return err;
  if (llvm::Error err = takePageIdError(plan.pageIdError, "paged prefill"))
    return err;
  notePageCount(plan.pageIdError, a.cache.numPages);
  const KernelSpec &s = kernelSpec;
  int64_t qRow = int64_t(s.numQHeads) * s.headDim;
  PrefillParams p = baseParams(plan);
  p.q = a.q;
  p.k = a.cache.k;
  p.v = a.cache.v;
  p.out = a.out;
  p.lse = a.lse;
  setHeadTables(p, a);
  p.pageTables = a.pageTables;
  p.pageIdError = plan.pageIdError;
  p.kScale = a.kScale;
  p.vScale = a.vScale;
  p.qStrideToken = a.qStrideToken ? a.qStrideToken : qRow;
  p.outStrideToken = a.outStrideToken ? a.outStrideToken : qRow;
  p.pageStride = a.cache.pageStride
                     ? a.cache.pageStride
                     : int64_t(s.pageSize) * s.numKVHeads * s.headDim;
  p.pageTableStride = a.pageTableStride;
  p.lastPage = lastPageId(a.cache);
  if (s.prefillSchedule.mma == PrefillMma::Wgmma)
    return launchSm90(plan, p, a, stream);
  return launch(plan, p, stream);
}

} // namespace attn::runtime
