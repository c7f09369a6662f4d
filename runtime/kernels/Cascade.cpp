//===- Cascade.cpp - shared-prefix (cascade) decode -----------------------===//
#include "attn/runtime/kernels/Cascade.h"
#include "attn/runtime/cache/VariantKey.h"

#include "llvm/Support/FormatVariadic.h"

namespace attn::runtime {

namespace {

llvm::Error cascadeError(const llvm::Twine &message) {
  return llvm::createStringError("cascade: " + message.str());
}

/// What a cascade cannot split into levels, named; none when it can.
std::optional<std::string> unsplittable(const DecodeVariant &v) {
  if (v.windowLeft)
    return "a sliding window depends on positions, which differ per level";
#define ATTN_HEAD_TABLE(flag, ...)                                             \
  if (v.flag)                                                                  \
    return std::string(#flag " is not supported (each level would apply it "  \
                             "by itself)");
#include "templates/attn/variant_knobs.h"
  if (!v.scoreMod.empty() || !v.maskMod.empty())
    return "score_mod and mask_mod see positions, which differ per level";
  if (v.kind != AttentionKind::Decoder)
    return "a cascade is decoder self attention";
  return std::nullopt;
}

/// Bytes of one level's partial output and of its LSE, 16-byte aligned.
struct PartialSizes {
  size_t out = 0, lse = 0;
  size_t level() const { return out + lse; }
};
PartialSizes partialSizes(const KernelSpec &suffix, int maxBatch) {
  int64_t rows = int64_t(maxBatch) * suffix.queryLen * suffix.numQHeads;
  auto align = [](size_t b) { return (b + 15) / 16 * 16; };
  return {align(size_t(rows) * suffix.headDim * sizeOf(suffix.qType)),
          align(size_t(rows) * sizeof(float))};
}

} // namespace

PrefillVariant cascadePrefixVariant(const DecodeVariant &d) {
  PrefillVariant p;
  p.qType = d.qType;
  p.numQHeads = d.numQHeads;
  p.numKVHeads = d.numKVHeads;
  p.headDim = d.headDim;
  p.paged = PagedKVFormat{d.kvType, d.pageSize, d.layout, d.perHeadKVScale};
  static_cast<AttentionKnobs &>(p) = d;
  // Every query of a group sees every shared key: cross attention over the
  // group's pages, no mask.
  p.kind = AttentionKind::Cross;
  p.causal = false;
  p.writeLse = true;
  return p;
}

DecodeVariant cascadeSuffixVariant(const DecodeVariant &d) {
  DecodeVariant s = d;
  s.writeLse = true;
  return s;
}

MergeStatesVariant cascadeMergeVariant(const DecodeVariant &d) {
  return {d.qType, d.numQHeads, d.headDim};
}

llvm::Expected<CascadeAttention>
CascadeAttention::create(std::shared_ptr<const PrefillKernel> prefix,
                         std::shared_ptr<const DecodeKernel> suffix,
                         std::shared_ptr<const MergeStatesKernel> merge) {
  if (!prefix || !suffix || !merge)
    return cascadeError("the prefix, suffix and merge kernels must be given");
  const DecodeVariant &d = suffix->variant();
  if (auto problem = unsplittable(d))
    return cascadeError(*problem);
  if (variantKey(suffix->variant()) != variantKey(cascadeSuffixVariant(d)))
    return cascadeError("the suffix kernel must write its LSE");
  if (variantKey(prefix->variant()) != variantKey(cascadePrefixVariant(d)))
    return cascadeError("the prefix kernel must be the suffix variant's "
                        "cascadePrefixVariant (paged cross attention over the "
                        "same cache, writing its LSE)");
  if (merge->spec().qType != d.qType || merge->spec().numQHeads != d.numQHeads ||
      merge->spec().headDim != d.headDim)
    return cascadeError("the merge kernel must take the variant's q type, "
                        "heads and head_dim");
  CascadeAttention c;
  c.prefix = std::move(prefix);
  c.suffix = std::move(suffix);
  c.merge = std::move(merge);
  return std::move(c);
}

llvm::Expected<CascadeWorkspace>
CascadeAttention::createWorkspace(int maxBatch, int maxLevels) const {
  if (maxLevels < 1 || maxLevels > kMaxCascadeLevels)
    return cascadeError(llvm::formatv("maxLevels = {0}; a cascade has 1 to {1} "
                                      "shared levels",
                                      maxLevels, kMaxCascadeLevels));
  const int64_t maxQTokens = int64_t(maxBatch) * suffix->spec().queryLen;
  std::vector<PrefillWorkspace> levels;
  for (int l = 0; l < maxLevels; ++l) {
    auto level = prefix->createWorkspace(maxBatch, maxQTokens);
    if (!level)
      return level.takeError();
    levels.push_back(std::move(*level));
  }
  auto suffixWs = suffix->createWorkspace(maxBatch);
  if (!suffixWs)
    return suffixWs.takeError();
  auto partials = DeviceBuffer::allocate(
      (maxLevels + 1) * partialSizes(suffix->spec(), maxBatch).level());
  if (!partials)
    return partials.takeError();
  return CascadeWorkspace{std::move(levels), std::move(*suffixWs),
                          std::move(*partials), maxBatch};
}

llvm::Expected<CascadePlan>
CascadeAttention::plan(llvm::ArrayRef<CascadeLevel> levels,
                       llvm::ArrayRef<int32_t> suffixLens,
                       CascadeWorkspace &ws, CUstream stream,
                       bool forGraph) const {
  const int batch = int(suffixLens.size());
  const KernelSpec &s = suffix->spec();
  if (batch < 1 || batch > ws.maxBatch)
    return cascadeError(llvm::formatv("{0} requests; the workspace holds 1 to "
                                      "{1}",
                                      batch, ws.maxBatch));
  if (levels.empty() || levels.size() > ws.levels.size())
    return cascadeError(llvm::formatv("{0} shared levels; the workspace holds "
                                      "1 to {1}",
                                      levels.size(), ws.levels.size()));
  CascadePlan plan;
  plan.batch = batch;
  for (size_t l = 0; l < levels.size(); ++l) {
    const CascadeLevel &level = levels[l];
    const auto &starts = level.groupStarts;
    if (starts.size() < 2 || starts.front() != 0 || starts.back() != batch ||
        level.kvLens.size() + 1 != starts.size())
      return cascadeError(llvm::formatv(
          "level {0}: groupStarts must run from 0 to the batch ({1}) with one "
          "more entry than kvLens (got {2} and {3})",
          l, batch, starts.size(), level.kvLens.size()));
    std::vector<int32_t> cuQ;
    for (size_t g = 0; g < starts.size(); ++g) {
      if (g > 0 && starts[g] <= starts[g - 1])
        return cascadeError(llvm::formatv(
            "level {0}: group {1} is empty or out of order (groupStarts[{1}] = "
            "{2}, groupStarts[{3}] = {4})",
            l, g - 1, starts[g - 1], g, starts[g]));
      cuQ.push_back(starts[g] * s.queryLen);
    }
    for (size_t g = 0; g < level.kvLens.size(); ++g)
      if (level.kvLens[g] < 0 || level.kvLens[g] % s.pageSize != 0)
        return cascadeError(llvm::formatv(
            "level {0}: kvLens[{1}] = {2} must be a non-negative multiple of "
            "the page size ({3}), so that no page is split between levels",
            l, g, level.kvLens[g], s.pageSize));
    auto levelPlan = prefix->planPaged(cuQ, level.kvLens, ws.levels[l], stream,
                                       forGraph);
    if (!levelPlan)
      return levelPlan.takeError();
    plan.levels.push_back(*levelPlan);
  }
  auto suffixPlan = suffix->plan(suffixLens, ws.suffix, stream, forGraph);
  if (!suffixPlan)
    return suffixPlan.takeError();
  plan.suffix = *suffixPlan;
  return plan;
}

llvm::Error CascadeAttention::run(const CascadePlan &plan,
                                  const CascadeArgs &a, CascadeWorkspace &ws,
                                  CUstream stream) const {
  const KernelSpec &s = suffix->spec();
  const int levels = int(plan.levels.size());
  if (plan.batch > ws.maxBatch || levels > int(ws.levels.size()))
    return cascadeError("the plan was made with a larger workspace");
  if (a.numQTokens != int64_t(plan.batch) * s.queryLen)
    return cascadeError(llvm::formatv("q has {0} tokens; the plan has {1} "
                                      "requests x query_len {2}",
                                      a.numQTokens, plan.batch, s.queryLen));
  for (int l = 0; l < levels; ++l)
    if (!a.levelPageTables[l] || a.levelPageTableStrides[l] < 1)
      return cascadeError(llvm::formatv(
          "levelPageTables[{0}] and its stride must be given", l));
  const PartialSizes sizes = partialSizes(s, ws.maxBatch);
  auto partialOut = [&](int i) {
    return reinterpret_cast<void *>(ws.partials.get() + i * sizes.level());
  };
  auto partialLse = [&](int i) {
    return reinterpret_cast<float *>(ws.partials.get() + i * sizes.level() +
                                     sizes.out);
  };
  for (int l = 0; l < levels; ++l) {
    PagedPrefillArgs p;
    p.q = a.q;
    p.qType = a.qType;
    p.numQTokens = a.numQTokens;
    p.numQHeads = a.numQHeads;
    p.headDim = a.headDim;
    p.out = partialOut(l);
    p.lse = partialLse(l);
    p.cache = a.cache;
    p.pageTables = a.levelPageTables[l];
    p.pageTableStride = a.levelPageTableStrides[l];
    p.kScale = a.kScale;
    p.vScale = a.vScale;
    p.numKVScales = a.numKVScales;
    if (llvm::Error error = prefix->run(plan.levels[l], p, stream))
      return error;
  }
  DecodeArgs d;
  d.q = a.q;
  d.qType = a.qType;
  d.numTokens = a.numQTokens;
  d.numQHeads = a.numQHeads;
  d.headDim = a.headDim;
  d.out = partialOut(levels);
  d.lse = partialLse(levels);
  d.cache = a.cache;
  d.pageTables = a.suffixPageTables;
  d.pageTableStride = a.suffixPageTableStride;
  d.kScale = a.kScale;
  d.vScale = a.vScale;
  d.numKVScales = a.numKVScales;
  if (llvm::Error error = suffix->run(plan.suffix, d, stream))
    return error;
  MergeStatesArgs m;
  m.dtype = a.qType;
  m.numTokens = a.numQTokens;
  m.numHeads = a.numQHeads;
  m.headDim = a.headDim;
  m.numStates = levels + 1;
  for (int i = 0; i <= levels; ++i) {
    m.outs[i] = partialOut(i);
    m.lses[i] = partialLse(i);
  }
  m.out = a.out;
  m.lse = a.lse;
  return merge->run(m, stream);
}

} // namespace attn::runtime
