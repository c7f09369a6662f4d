//===- MixedBatch.cpp - one forward call over prefills and decodes --------===//
#include "attn/runtime/kernels/MixedBatch.h"
#include "runtime/kernels/CacheChecks.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

namespace attn::runtime {

namespace {

llvm::Error mixedError(const llvm::Twine &message) {
  return llvm::createStringError("mixed batch: " + message.str());
}

/// The first field in which the decode kernel's variant differs from the
/// one the prefill variant implies, by name; nothing if they agree.
std::optional<std::string> mismatch(const DecodeVariant &want,
                                    const DecodeVariant &got) {
  std::optional<std::string> first;
  auto compare = [&](const char *name, const auto &a, const auto &b) {
    if (!first && !(a == b))
      first = name;
  };
  compare("qType", want.qType, got.qType);
  compare("kvType", want.kvType, got.kvType);
  compare("numQHeads", want.numQHeads, got.numQHeads);
  compare("numKVHeads", want.numKVHeads, got.numKVHeads);
  compare("headDim", want.headDim, got.headDim);
  compare("pageSize", want.pageSize, got.pageSize);
  compare("layout", want.layout, got.layout);
  compare("perHeadKVScale", want.perHeadKVScale, got.perHeadKVScale);
  // With one query row per request a causal mask removes nothing.
  AttentionKnobs wantKnobs = want;
  if (got.queryLen == 1)
    wantKnobs.causal = got.causal;
  forEachKnob(compare, wantKnobs, static_cast<const AttentionKnobs &>(got));
  return first;
}

} // namespace

DecodeVariant decodeVariantFor(const PrefillVariant &p) {
  DecodeVariant d;
  d.qType = p.qType;
  d.kvType = p.paged ? p.paged->kvType : p.qType;
  d.numQHeads = p.numQHeads;
  d.numKVHeads = p.numKVHeads;
  d.headDim = p.headDim;
  if (p.paged) {
    d.pageSize = p.paged->pageSize;
    d.layout = p.paged->layout;
    d.perHeadKVScale = p.paged->perHeadKVScale;
  }
  d.queryLen = 1;
  static_cast<AttentionKnobs &>(d) = p; // every knob, as the prefill has it
  return d;
}

llvm::Expected<MixedBatchAttention>
MixedBatchAttention::create(std::shared_ptr<const PrefillKernel> prefill,
                            std::shared_ptr<const DecodeKernel> decode) {
  if (!prefill || !decode)
    return mixedError("both kernels must be given");
  if (prefill->spec().kind != KernelKind::PagedPrefill)
    return mixedError("the prefill kernel must read the paged cache (a "
                      "PrefillVariant with `paged` set)");
  DecodeVariant want = decodeVariantFor(prefill->variant());
  if (auto field = mismatch(want, decode->variant()))
    return mixedError(llvm::formatv("the decode kernel's {0} differs from the "
                                    "prefill kernel's",
                                    *field));
  MixedBatchAttention mixed;
  mixed.prefill = std::move(prefill);
  mixed.decode = std::move(decode);
  return std::move(mixed);
}

llvm::Expected<MixedBatchWorkspace>
MixedBatchAttention::createWorkspace(int maxBatch, int64_t maxQTokens) const {
  auto prefillWs = prefill->createWorkspace(maxBatch, maxQTokens);
  if (!prefillWs)
    return prefillWs.takeError();
  auto decodeWs = decode->createWorkspace(maxBatch);
  if (!decodeWs)
    return decodeWs.takeError();
  return MixedBatchWorkspace{std::move(*prefillWs), std::move(*decodeWs)};
}

llvm::Expected<MixedBatchPlan>
MixedBatchAttention::plan(llvm::ArrayRef<int32_t> cuSeqlensQ,
                          llvm::ArrayRef<int32_t> seqLens, int numPrefills,
                          MixedBatchWorkspace &ws, CUstream stream,
                          bool forGraph) const {
  const int batch = int(seqLens.size());
  if (cuSeqlensQ.size() != seqLens.size() + 1 || batch < 1)
    return mixedError(llvm::formatv("cu_seqlens_q has {0} entries for {1} "
                                    "seq_lens; it must hold batch + 1 >= 2",
                                    cuSeqlensQ.size(), seqLens.size()));
  if (numPrefills < 0 || numPrefills > batch)
    return mixedError(llvm::formatv("numPrefills = {0} is outside [0, {1}]",
                                    numPrefills, batch));
  const int queryLen = decode->spec().queryLen;
  for (int b = numPrefills; b < batch; ++b) {
    int rows = cuSeqlensQ[b + 1] - cuSeqlensQ[b];
    if (rows != queryLen)
      return mixedError(llvm::formatv(
          "request {0} has {1} query rows; requests after the {2} prefills are "
          "decodes of {3} row(s) each",
          b, rows, numPrefills, queryLen));
  }
  // Batch-invariant: every request through the prefill kernel, so that a
  // token's bits are the same as a decode, in a prefill chunk or in a mixed
  // batch (the decode kernel's tiles and splits differ from prefill's).
  if (prefill->variant().batchInvariant)
    numPrefills = batch;
  MixedBatchPlan plan;
  plan.numPrefills = numPrefills;
  plan.numDecodes = batch - numPrefills;
  plan.numPrefillTokens = cuSeqlensQ[numPrefills];
  plan.numDecodeTokens = int64_t(plan.numDecodes) * queryLen;
  if (numPrefills > 0) {
    auto prefillPlan = prefill->planPaged(
        cuSeqlensQ.take_front(numPrefills + 1), seqLens.take_front(numPrefills),
        ws.prefill, stream, forGraph);
    if (!prefillPlan)
      return prefillPlan.takeError();
    plan.prefill = *prefillPlan;
  }
  if (plan.numDecodes > 0) {
    auto decodePlan = decode->plan(seqLens.drop_front(numPrefills), ws.decode,
                                   stream, forGraph);
    if (!decodePlan)
      return decodePlan.takeError();
    plan.decode = *decodePlan;
  }
  return plan;
}

PagedPrefillArgs
MixedBatchAttention::prefillArgs(const MixedBatchArgs &a) const {
  PagedPrefillArgs p;
  p.q = a.q;
  p.qType = a.qType;
  p.numQHeads = a.numQHeads;
  p.headDim = a.headDim;
  p.qStrideToken = a.qStrideToken;
  p.out = a.out;
  p.outStrideToken = a.outStrideToken;
  p.lse = a.lse;
  p.cache = a.cache;
  p.pageTables = a.pageTables;
  p.pageTableStride = a.pageTableStride;
  p.kScale = a.kScale;
  p.vScale = a.vScale;
  p.numKVScales = a.numKVScales;
  static_cast<HeadTables &>(p) = a;
  return p;
}

DecodeArgs MixedBatchAttention::decodeArgs(const MixedBatchPlan &plan,
                                           const MixedBatchArgs &a) const {
  // The decode rows follow the prefill rows; the decode requests' table
  // rows and lengths follow the prefills'.
  const int64_t dense = int64_t(a.numQHeads) * a.headDim;
  const int64_t rows = plan.numPrefillTokens;
  const int bytes = sizeOf(a.qType);
  auto shift = [&](int64_t stride) {
    return rows * (stride ? stride : dense) * bytes;
  };
  DecodeArgs d;
  d.q = a.q ? static_cast<const char *>(a.q) + shift(a.qStrideToken) : nullptr;
  d.qType = a.qType;
  d.numTokens = plan.numDecodeTokens;
  d.numQHeads = a.numQHeads;
  d.headDim = a.headDim;
  d.qStrideToken = a.qStrideToken;
  d.out =
      a.out ? static_cast<char *>(a.out) + shift(a.outStrideToken) : nullptr;
  d.outStrideToken = a.outStrideToken;
  d.lse = a.lse ? a.lse + rows * a.numQHeads : nullptr;
  d.cache = a.cache;
  d.pageTables = a.pageTables ? a.pageTables + int64_t(plan.numPrefills) *
                                                   a.pageTableStride
                              : nullptr;
  d.pageTableStride = a.pageTableStride;
  d.seqLens = a.seqLens ? a.seqLens + plan.numPrefills : nullptr;
  d.firstRequest = plan.numPrefills; // as the modifier regions see it
  d.kScale = a.kScale;
  d.vScale = a.vScale;
  d.numKVScales = a.numKVScales;
  static_cast<HeadTables &>(d) = a;
  return d;
}

llvm::Error MixedBatchAttention::run(const MixedBatchPlan &plan,
                                     const MixedBatchArgs &a,
                                     CUstream stream) const {
  if (a.numQTokens != plan.numPrefillTokens + plan.numDecodeTokens)
    return mixedError(llvm::formatv(
        "q has {0} tokens; the plan has {1} prefill "
        "and {2} decode rows",
        a.numQTokens, plan.numPrefillTokens, plan.numDecodeTokens));
  // Check both parts before launching either, so a bad call launches nothing.
  PagedPrefillArgs prefillPart = prefillArgs(a);
  prefillPart.numQTokens = plan.numPrefillTokens;
  DecodeArgs decodePart = decodeArgs(plan, a);
  if (plan.prefill)
    if (llvm::Error err = prefill->checkArgs(*plan.prefill, prefillPart))
      return err;
  if (plan.decode)
    if (llvm::Error err = decode->checkArgs(*plan.decode, decodePart))
      return err;
  // So do earlier launches' reports of page ids outside the cache (both
  // parts' at once).
  llvm::Error reports = llvm::joinErrors(
      takePageIdError(plan.prefill ? plan.prefill->pageIdError : nullptr,
                      "mixed batch (paged prefill)"),
      takePageIdError(plan.decode ? plan.decode->pageIdError : nullptr,
                      "mixed batch (decode)"));
  if (reports)
    return reports;
  if (plan.prefill)
    if (llvm::Error err = prefill->run(*plan.prefill, prefillPart, stream))
      return err;
  if (plan.decode)
    if (llvm::Error err = decode->run(*plan.decode, decodePart, stream))
      return err;
  return llvm::Error::success();
}

} // namespace attn::runtime
