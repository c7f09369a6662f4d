//===- Prefill.cpp - plan and run ragged prefill kernels ------------------===//
#include "attn/runtime/Prefill.h"
#include "attn/runtime/Error.h"
#include "runtime/SharedMemory.h"
#include "codegen/EmitCuda.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace attn::runtime {

namespace {

llvm::Error argError(const llvm::Twine &message) {
  return llvm::createStringError("prefill run: " + message.str());
}

size_t alignUp(size_t x) { return (x + 255) / 256 * 256; }

/// Keys a tile's rows can see, for ordering tiles heaviest first.
int64_t tileWork(const PrefillWorkItem &w, const KernelSpec &spec) {
  if (!spec.causal)
    return w.kvLen;
  int lastPos = w.kvLen - w.qLen + std::min(w.qLen, w.tileBegin + spec.prefillSchedule.blockM) - 1;
  return std::clamp(lastPos + 1, 0, w.kvLen);
}

} // namespace

llvm::Expected<std::vector<PrefillWorkItem>>
partitionPrefill(llvm::ArrayRef<int32_t> cuQ, llvm::ArrayRef<int32_t> cuKV,
                 const KernelSpec &spec) {
  if (cuQ.size() < 2 || cuQ.size() != cuKV.size())
    return llvm::createStringError(llvm::formatv(
        "prefill plan: cu_seqlens_q ({0} entries) and cu_seqlens_kv ({1}) "
        "must both hold batch + 1 >= 2 offsets",
        cuQ.size(), cuKV.size()));
  for (auto [name, offsets] : {std::pair{"cu_seqlens_q", cuQ},
                                std::pair{"cu_seqlens_kv", cuKV}}) {
    if (offsets[0] != 0)
      return llvm::createStringError(llvm::formatv(
          "prefill plan: {0}[0] = {1}, but offsets must start at 0", name,
          offsets[0]));
    for (size_t b = 1; b < offsets.size(); ++b)
      if (offsets[b] < offsets[b - 1])
        return llvm::createStringError(llvm::formatv(
            "prefill plan: {0}[{1}] = {2} is below {0}[{3}] = {4}; offsets "
            "must not decrease",
            name, b, offsets[b], b - 1, offsets[b - 1]));
  }
  const int blockM = spec.prefillSchedule.blockM;
  std::vector<PrefillWorkItem> items;
  for (size_t b = 0; b + 1 < cuQ.size(); ++b) {
    int qLen = cuQ[b + 1] - cuQ[b], kvLen = cuKV[b + 1] - cuKV[b];
    for (int begin = 0; begin < qLen; begin += blockM)
      items.push_back({cuQ[b], qLen, cuKV[b], kvLen, begin, int32_t(b)});
  }
  // Longest tiles first, so the last wave holds the short ones.
  std::stable_sort(items.begin(), items.end(),
                   [&](const PrefillWorkItem &a, const PrefillWorkItem &b) {
                     return tileWork(a, spec) > tileWork(b, spec);
                   });
  return items;
}

llvm::Expected<PrefillKernel>
PrefillKernel::create(const KernelSpec &spec, const PrefillVariant &variant,
                      std::shared_ptr<CudaLibrary> library) {
  PrefillKernel kernel;
  kernel.kernelSpec = spec;
  kernel.prefillVariant = variant;
  auto entry = library->getKernel(kernelSymbol(spec));
  if (!entry)
    return entry.takeError();
  kernel.entry = *entry;
  auto smem = setUpSharedMemory(*library, *entry, spec);
  if (!smem)
    return smem.takeError();
  kernel.smemBytes = *smem;
  kernel.library = std::move(library);
  return std::move(kernel);
}

llvm::Expected<PrefillWorkspace>
PrefillKernel::createWorkspace(int maxBatch, int64_t maxQTokens) const {
  if (maxBatch < 1 || maxQTokens < 1)
    return llvm::createStringError(llvm::formatv(
        "prefill workspace: maxBatch ({0}) and maxQTokens ({1}) must be >= 1",
        maxBatch, maxQTokens));
  PrefillWorkspace ws;
  // Every request adds at most one partial tile.
  int64_t tiles = maxQTokens / kernelSpec.prefillSchedule.blockM + maxBatch;
  if (tiles > INT32_MAX)
    return llvm::createStringError("prefill workspace: too many query tiles");
  ws.tileCapacity = int(tiles);
  size_t bytes = alignUp(sizeof(int32_t)) + tiles * sizeof(PrefillWorkItem);
  auto buffer = StagedBuffer::allocate(bytes, bytes);
  if (!buffer)
    return buffer.takeError();
  ws.buffer = std::move(*buffer);
  return std::move(ws);
}

llvm::Expected<PrefillPlan>
PrefillKernel::plan(llvm::ArrayRef<int32_t> cuSeqlensQ,
                    llvm::ArrayRef<int32_t> cuSeqlensKV, PrefillWorkspace &ws,
                    CUstream stream, bool forGraph) const {
  auto items = partitionPrefill(cuSeqlensQ, cuSeqlensKV, kernelSpec);
  if (!items)
    return items.takeError();
  if (int64_t(items->size()) > ws.maxTiles())
    return llvm::createStringError(llvm::formatv(
        "prefill plan: {0} query tiles exceed the workspace's {1}",
        items->size(), ws.maxTiles()));
  auto host = ws.buffer.beginWrite();
  if (!host)
    return host.takeError();
  int32_t count = int32_t(items->size());
  std::memcpy(*host, &count, sizeof(count));
  std::memcpy(*host + alignUp(sizeof(int32_t)), items->data(),
              items->size() * sizeof(PrefillWorkItem));
  if (llvm::Error error = ws.buffer.upload(stream))
    return std::move(error);

  PrefillPlan plan;
  plan.batch = int(cuSeqlensQ.size()) - 1;
  plan.numQTokens = cuSeqlensQ.back();
  plan.numKVTokens = cuSeqlensKV.back();
  plan.numWorkItems = ws.buffer.device().ptr<int32_t>();
  plan.workItems = reinterpret_cast<const PrefillWorkItem *>(
      ws.buffer.device().ptr<char>() + alignUp(sizeof(int32_t)));
  plan.gridX = forGraph ? ws.maxTiles() : count;
  return plan;
}

llvm::Error PrefillKernel::checkArgs(const PrefillPlan &plan,
                                     const PrefillArgs &a) const {
  const KernelSpec &s = kernelSpec;
  if (!a.q || !a.k || !a.v || !a.out)
    return argError("q, k, v and out must not be null");
  if (a.dtype != s.qType)
    return argError(llvm::formatv("q/k/v are {0}, the kernel was compiled for {1}",
                                  toString(a.dtype), toString(s.qType)));
  if (a.numQHeads != s.numQHeads || a.numKVHeads != s.numKVHeads ||
      a.headDim != s.headDim)
    return argError(llvm::formatv(
        "heads {0}/{1} x {2} dims, the kernel was compiled for {3}/{4} x {5}",
        a.numQHeads, a.numKVHeads, a.headDim, s.numQHeads, s.numKVHeads,
        s.headDim));
  if (a.numQTokens != plan.numQTokens || a.numKVTokens != plan.numKVTokens)
    return argError(llvm::formatv(
        "{0} q and {1} kv tokens; the plan's cu_seqlens end at {2} and {3}",
        a.numQTokens, a.numKVTokens, plan.numQTokens, plan.numKVTokens));
  int64_t qRow = int64_t(s.numQHeads) * s.headDim;
  int64_t kvRow = int64_t(s.numKVHeads) * s.headDim;
  for (auto [name, stride, dense] :
       {std::tuple<const char *, int64_t, int64_t>{"q", a.qStrideToken, qRow},
        {"k", a.kStrideToken, kvRow},
        {"v", a.vStrideToken, kvRow},
        {"out", a.outStrideToken, qRow}})
    if (stride && (stride < dense || stride % 8))
      return argError(llvm::formatv("{0} token stride {1} must be >= {2} and "
                                    "a multiple of 8",
                                    name, stride, dense));
  if (s.alibi != (a.alibiSlopes != nullptr))
    return argError(s.alibi ? "the variant uses ALiBi: alibiSlopes must be set"
                            : "alibiSlopes given, but the variant has no ALiBi");
  if (s.writeLse != (a.lse != nullptr))
    return argError(s.writeLse ? "the variant writes LSE: lse must be set"
                               : "lse given, but the variant does not write LSE");
  return llvm::Error::success();
}

llvm::Error PrefillKernel::run(const PrefillPlan &plan, const PrefillArgs &a,
                               CUstream stream) const {
  if (llvm::Error err = checkArgs(plan, a))
    return err;
  const KernelSpec &s = kernelSpec;
  int64_t qRow = int64_t(s.numQHeads) * s.headDim;
  int64_t kvRow = int64_t(s.numKVHeads) * s.headDim;
  PrefillParams p{};
  p.q = a.q;
  p.k = a.k;
  p.v = a.v;
  p.out = a.out;
  p.lse = a.lse;
  p.alibiSlopes = a.alibiSlopes;
  p.workItems = plan.workItems;
  p.numWorkItems = plan.numWorkItems;
  p.qStrideToken = a.qStrideToken ? a.qStrideToken : qRow;
  p.kStrideToken = a.kStrideToken ? a.kStrideToken : kvRow;
  p.vStrideToken = a.vStrideToken ? a.vStrideToken : kvRow;
  p.outStrideToken = a.outStrideToken ? a.outStrideToken : qRow;
  p.smScale = prefillVariant.scale ? *prefillVariant.scale
                                   : float(1.0 / std::sqrt(double(s.headDim)));
  p.softcap = prefillVariant.softcap.value_or(0.f);
  p.windowLeft = prefillVariant.windowLeft.value_or(0);
  if (plan.gridX == 0)
    return llvm::Error::success(); // an empty batch
  void *args[] = {&p};
  ATTN_CU_CHECK(cuLaunchKernel(reinterpret_cast<CUfunction>(entry), plan.gridX,
                               s.numQHeads, 1, threadsPerBlock(s), 1, 1,
                               smemBytes, stream, args, nullptr));
  return llvm::Error::success();
}

} // namespace attn::runtime
