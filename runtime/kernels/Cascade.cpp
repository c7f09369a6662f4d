//===- Cascade.cpp - shared-prefix (cascade) decode -----------------------===//
#include "attn/runtime/kernels/Cascade.h"
#include "attn/runtime/support/Error.h"
#include "runtime/kernels/CacheChecks.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

namespace attn::runtime {

namespace {

llvm::Error cascadeError(const llvm::Twine &message) {
  return llvm::createStringError("cascade: " + message.str());
}

} // namespace

std::optional<std::string> cascadeProblem(const DecodeVariant &v) {
  if (v.windowLeft)
    return "a sliding window depends on positions, which differ per level";
#define ATTN_HEAD_TABLE(flag, ...)                                             \
  if (v.flag)                                                                  \
    return std::string(#flag " is not supported (each level would apply it "   \
                             "by itself)");
#include "templates/attn/variant_knobs.h"
  if (!v.scoreMod.empty() || !v.maskMod.empty())
    return "score_mod and mask_mod see positions, which differ per level";
  if (v.batchInvariant)
    return "batch_invariant is not supported (a shared level is cut by the "
           "size of its group)";
  if (v.kind != AttentionKind::Decoder)
    return "a cascade is decoder self attention";
  return std::nullopt;
}

namespace {

/// Whether two variants' knobs (kind, mask, values, tables, LSE) agree.
bool sameKnobs(const AttentionKnobs &a, const AttentionKnobs &b) {
  bool same = true;
  forEachKnob([&](const char *, const auto &x,
                  const auto &y) { same = same && x == y; },
              a, b);
  return same;
}

/// Keys below which a shared level is not cut further: a chunk's CTA
/// should stream long enough to amortize its start.
constexpr int kMinChunkKeys = 1024;

/// Bytes of one token's row of q / out, and of its LSEs.
size_t rowBytes(const KernelSpec &s) {
  return size_t(s.numQHeads) * s.headDim * sizeOf(s.qType);
}
size_t lseBytes(const KernelSpec &s) {
  return size_t(s.numQHeads) * sizeof(float);
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
  if (auto problem = cascadeProblem(d))
    return cascadeError(*problem);
  if (!d.writeLse)
    return cascadeError("the suffix kernel must write its LSE");
  const PrefillVariant want = cascadePrefixVariant(d), &got = prefix->variant();
  auto sameCache = [](const PagedKVFormat &a, const PagedKVFormat &b) {
    return a.kvType == b.kvType && a.pageSize == b.pageSize &&
           a.layout == b.layout && a.perHeadKVScale == b.perHeadKVScale;
  };
  if (!sameKnobs(want, got) || !got.paged ||
      !sameCache(*got.paged, *want.paged) || got.qType != want.qType ||
      got.numQHeads != want.numQHeads || got.numKVHeads != want.numKVHeads ||
      got.headDim != want.headDim)
    return cascadeError("the prefix kernel must be the suffix variant's "
                        "cascadePrefixVariant (paged cross attention over the "
                        "same cache, writing its LSE)");
  if (merge->spec().qType != d.qType ||
      merge->spec().numQHeads != d.numQHeads ||
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
  if (maxBatch < 1)
    return cascadeError(
        llvm::formatv("maxBatch = {0} must be positive", maxBatch));
  const KernelSpec &s = suffix->spec();
  const int64_t maxQTokens = int64_t(maxBatch) * s.queryLen;
  std::vector<PrefillWorkspace> levels;
  for (int l = 0; l < maxLevels; ++l) {
    // A level's pieces: its chunks times its groups.
    auto level = prefix->createWorkspace(kMaxCascadeLevels * maxBatch,
                                         kMaxCascadeLevels * maxQTokens);
    if (!level)
      return level.takeError();
    levels.push_back(std::move(*level));
  }
  auto suffixWs = suffix->createWorkspace(maxBatch);
  if (!suffixWs)
    return suffixWs.takeError();
  auto partialOut =
      DeviceBuffer::allocate(kMaxMergeStates * maxQTokens * rowBytes(s));
  if (!partialOut)
    return partialOut.takeError();
  auto partialLse =
      DeviceBuffer::allocate(kMaxMergeStates * maxQTokens * lseBytes(s));
  if (!partialLse)
    return partialLse.takeError();
  return CascadeWorkspace{std::move(levels), std::move(*suffixWs),
                          std::move(*partialOut), std::move(*partialLse),
                          maxBatch};
}

llvm::Expected<CascadePlan>
CascadeAttention::plan(llvm::ArrayRef<CascadeLevel> levels,
                       llvm::ArrayRef<int32_t> suffixLens, CascadeWorkspace &ws,
                       CUstream stream, bool forGraph) const {
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
  const int64_t rows = int64_t(batch) * s.queryLen;
  const int tileTokens = prefix->spec().prefillTileTokens();
  int statesLeft = kMaxCascadeLevels;
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
    int maxKeys = 0;
    int64_t tiles = 0;
    for (size_t g = 0; g + 1 < starts.size(); ++g) {
      if (starts[g + 1] <= starts[g])
        return cascadeError(llvm::formatv(
            "level {0}: group {1} is empty or out of order (groupStarts[{1}] = "
            "{2}, groupStarts[{3}] = {4})",
            l, g, starts[g], g + 1, starts[g + 1]));
      if (level.kvLens[g] < 0 || level.kvLens[g] % s.pageSize != 0)
        return cascadeError(llvm::formatv(
            "level {0}: kvLens[{1}] = {2} must be a non-negative multiple of "
            "the page size ({3}), so that no page is split between levels",
            l, g, level.kvLens[g], s.pageSize));
      maxKeys = std::max(maxKeys, level.kvLens[g]);
      tiles += ((starts[g + 1] - starts[g]) * s.queryLen + tileTokens - 1) /
               tileTokens;
    }
    // Chunks: enough CTAs for two waves, no chunk under kMinChunkKeys, and
    // a state left for every later level.
    const int64_t ctas = tiles * prefix->spec().prefillGridHeads();
    int64_t want = (2 * int64_t(suffix->numSMs()) + ctas - 1) / ctas;
    int64_t most = std::min<int64_t>(std::max(1, maxKeys / kMinChunkKeys),
                                     statesLeft - int(levels.size() - l - 1));
    int chunks = int(std::clamp<int64_t>(want, 1, std::max<int64_t>(1, most)));
    int chunkKeys = (maxKeys + chunks - 1) / chunks;
    chunkKeys = std::max(s.pageSize, (chunkKeys + s.pageSize - 1) / s.pageSize *
                                         s.pageSize);
    chunks = std::max(1, (maxKeys + chunkKeys - 1) / chunkKeys);
    statesLeft -= chunks;
    // Chunk c of every group reads the group's query rows and writes
    // state c of the level.
    std::vector<PrefillPiece> pieces;
    for (int c = 0; c < chunks; ++c)
      for (size_t g = 0; g + 1 < starts.size(); ++g) {
        int first = c * chunkKeys;
        int32_t qStart = starts[g] * s.queryLen;
        pieces.push_back({qStart, (starts[g + 1] - starts[g]) * s.queryLen,
                          int32_t(g), first,
                          std::clamp(level.kvLens[g] - first, 0, chunkKeys),
                          int32_t(c * rows + qStart)});
      }
    auto levelPlan = prefix->planPagedPieces(pieces, rows, chunks * rows,
                                             ws.levels[l], stream, forGraph);
    if (!levelPlan)
      return levelPlan.takeError();
    plan.levels.push_back(*levelPlan);
    plan.levelChunks.push_back(chunks);
  }
  auto suffixPlan = suffix->plan(suffixLens, ws.suffix, stream, forGraph);
  if (!suffixPlan)
    return suffixPlan.takeError();
  plan.suffix = *suffixPlan;
  plan.partialOut = ws.partialOut.get();
  plan.partialLse = ws.partialLse.get();
  return plan;
}

llvm::Error CascadeAttention::run(const CascadePlan &plan, const CascadeArgs &a,
                                  CUstream stream) const {
  const KernelSpec &s = suffix->spec();
  const int levels = int(plan.levels.size());
  if (!plan.partialOut || levels < 1)
    return cascadeError("the plan is empty");
  const int64_t rows = int64_t(plan.batch) * s.queryLen;
  if (a.numQTokens != rows)
    return cascadeError(llvm::formatv("q has {0} tokens; the plan has {1} "
                                      "requests x query_len {2}",
                                      a.numQTokens, plan.batch, s.queryLen));
  if (!a.q || !a.out)
    return cascadeError("q and out must not be null");
  if (a.qType != s.qType || a.numQHeads != s.numQHeads ||
      a.headDim != s.headDim)
    return cascadeError(llvm::formatv("q is {0} {1}x{2}; the kernels were "
                                      "compiled for {3} {4}x{5}",
                                      toString(a.qType), a.numQHeads, a.headDim,
                                      toString(s.qType), s.numQHeads,
                                      s.headDim));
  for (int l = 0; l < levels; ++l)
    if (!a.levelPageTables[l] || a.levelPageTableStrides[l] < 1)
      return cascadeError(llvm::formatv(
          "levelPageTables[{0}] and its stride must be given", l));
  const size_t stateBytes = size_t(rows) * rowBytes(s);
  const size_t stateLseBytes = size_t(rows) * lseBytes(s);
  auto partialOut = [&](int i) {
    return reinterpret_cast<void *>(plan.partialOut + i * stateBytes);
  };
  auto partialLse = [&](int i) {
    return reinterpret_cast<float *>(plan.partialLse + i * stateLseBytes);
  };
  const int64_t dense = int64_t(s.numQHeads) * s.headDim;
  const int64_t qStride = a.qStrideToken ? a.qStrideToken : dense;
  if (qStride < dense || (a.outStrideToken && a.outStrideToken < dense))
    return cascadeError(llvm::formatv("token strides of q ({0}) and out ({1}) "
                                      "must be 0 or >= heads * head_dim ({2})",
                                      a.qStrideToken, a.outStrideToken, dense));
  // Earlier launches' reports of page ids outside the cache fail the call,
  // all of them at once, before anything is launched.
  llvm::Error reports = llvm::Error::success();
  for (int l = 0; l < levels; ++l)
    reports = llvm::joinErrors(
        std::move(reports),
        takePageIdError(
            plan.levels[l].pageIdError,
            llvm::formatv("cascade level {0} (paged prefill)", l).str()));
  reports = llvm::joinErrors(
      std::move(reports),
      takePageIdError(plan.suffix.pageIdError, "cascade suffix (decode)"));
  if (reports)
    return reports;
  int state = 0;
  for (int l = 0; l < levels; ++l) {
    PagedPrefillArgs p;
    p.q = a.q;
    p.qStrideToken = qStride;
    p.qType = a.qType;
    p.numQTokens = rows;
    p.numQHeads = a.numQHeads;
    p.headDim = a.headDim;
    p.out = partialOut(state);
    p.lse = partialLse(state);
    p.cache = a.cache;
    p.pageTables = a.levelPageTables[l];
    p.pageTableStride = a.levelPageTableStrides[l];
    p.kScale = a.kScale;
    p.vScale = a.vScale;
    p.numKVScales = a.numKVScales;
    if (llvm::Error error = prefix->run(plan.levels[l], p, stream))
      return error;
    state += plan.levelChunks[l];
  }
  DecodeArgs d;
  d.q = a.q;
  d.qStrideToken = a.qStrideToken;
  d.qType = a.qType;
  d.numTokens = a.numQTokens;
  d.numQHeads = a.numQHeads;
  d.headDim = a.headDim;
  d.out = partialOut(state);
  d.lse = partialLse(state);
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
  m.numStates = state + 1;
  for (int i = 0; i <= state; ++i) {
    m.outs[i] = partialOut(i);
    m.lses[i] = partialLse(i);
  }
  m.out = a.out;
  m.outStrideToken = a.outStrideToken;
  m.lse = a.lse;
  return merge->run(m, stream);
}

} // namespace attn::runtime
