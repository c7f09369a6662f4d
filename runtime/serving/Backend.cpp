//===- Backend.cpp - one attention backend per model config ---------------===//
#include "attn/runtime/serving/Backend.h"
#include "attn/runtime/support/Error.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

namespace attn::runtime {

namespace {

llvm::Error backendError(const llvm::Twine &message) {
  return llvm::createStringError("backend: " + message.str());
}

} // namespace

KernelSource kernelsFrom(std::shared_ptr<const AotLibrary> library, Arch arch) {
  return KernelSource::of([library, arch](const auto &variant) {
    return library->load(variant, arch);
  });
}

void bindCache(LayerArgs &args, const KVCache &cache, int layer) {
  args.cache = cache.view(layer);
  args.kScale = cache.kScale(layer);
  args.vScale = cache.vScale(layer);
  args.numKVScales = args.kScale ? cache.config().numScales() : 0;
}

struct Backend::Graph {
  CUgraphExec exec = nullptr;
  size_t deviceBytes = 0;
  ~Graph() {
    if (exec)
      cuGraphExecDestroy(exec);
  }
};

Backend::~Backend() = default;

llvm::Expected<std::unique_ptr<Backend>>
Backend::create(const BackendConfig &c, const KernelSource &kernels,
                const MetadataLimits &limits, const KVCacheConfig *cache) {
  if (c.qType != ScalarType::F16 && c.qType != ScalarType::BF16)
    return backendError(
        llvm::formatv("q type {0}: expected f16 or bf16", toString(c.qType)));
  if (c.kind != AttentionKind::Decoder && c.windowLeft)
    return backendError(
        "a sliding window applies to decoder self attention only");
  if (llvm::Error error = checkLimits(limits))
    return std::move(error);
  // Encoders read no cache; everyone else addresses one cache through the
  // metadata's slots and page tables.
  if (c.kind != AttentionKind::Encoder) {
    if (limits.pageSize != c.pageSize)
      return backendError(llvm::formatv(
          "the metadata limits have pageSize {0} but the config {1}: slots "
          "and page tables would address another cache than the kernels read",
          limits.pageSize, c.pageSize));
    if (cache)
      if (llvm::Error error = checkCacheConfig(c, *cache))
        return std::move(error);
  }
  std::unique_ptr<Backend> b(new Backend());
  b->backendConfig = c;
  b->limits = limits;

  PrefillVariant base;
  base.qType = c.qType;
  base.numQHeads = c.numQHeads;
  base.numKVHeads = c.numKVHeads;
  base.headDim = c.headDim;
  base.softcap = c.softcap;
  base.scale = c.scale;
  base.scoreMod = c.scoreMod;
  base.maskMod = c.maskMod;
  base.batchInvariant = c.batchInvariant;
#define ATTN_HEAD_TABLE(flag, ...) base.flag = c.flag;
#include "templates/attn/variant_knobs.h"
  // The kernel without a cache: encoders always; decoders and cross
  // attention for the profiling run.
  PrefillVariant ragged = base;
  ragged.causal = c.kind == AttentionKind::Decoder;
  ragged.kind = c.kind;
  ragged.windowLeft = c.windowLeft;
  auto raggedKernel = kernels.prefill(ragged);
  if (!raggedKernel)
    return raggedKernel.takeError();
  b->ragged = *raggedKernel;
  auto raggedWs = b->ragged->createWorkspace(limits.maxBatch, limits.maxTokens);
  if (!raggedWs)
    return raggedWs.takeError();
  b->raggedWorkspace.emplace(std::move(*raggedWs));
  if (c.kind == AttentionKind::Encoder)
    return std::move(b);

  // Paged prefill + decode over the (cross) cache, and append-KV into it.
  PrefillVariant paged = ragged;
  paged.paged = PagedKVFormat{c.kvType, c.pageSize, c.layout, c.perHeadKVScale};
  auto prefill = kernels.prefill(paged);
  if (!prefill)
    return prefill.takeError();
  auto decode = kernels.decode(decodeVariantFor(paged));
  if (!decode)
    return decode.takeError();
  auto mixed = MixedBatchAttention::create(*prefill, *decode);
  if (!mixed)
    return mixed.takeError();
  b->mixed.emplace(std::move(*mixed));
  auto mixedWs = b->mixed->createWorkspace(limits.maxBatch, limits.maxTokens);
  if (!mixedWs)
    return mixedWs.takeError();
  b->mixedWorkspace.emplace(std::move(*mixedWs));
  // Cascade decode over shared pages: its kernels now, so that no step
  // compiles.
  DecodeVariant decodeVariant = decodeVariantFor(paged);
  if (c.cascade && !c.batchInvariant && c.kind == AttentionKind::Decoder &&
      !cascadeProblem(decodeVariant)) {
    if (!kernels.mergeStates)
      return backendError("the kernel source has no merge_states kernels for "
                          "cascade decode; set BackendConfig::cascade = false "
                          "to serve without");
    auto cascade = cascadeFrom(kernels, decodeVariant);
    if (!cascade)
      return cascade.takeError();
    auto cascadeWs = cascade->createWorkspace(limits.maxBatch, 1);
    if (!cascadeWs)
      return cascadeWs.takeError();
    b->cascade.emplace(std::move(*cascade));
    b->cascadeWorkspace.emplace(std::move(*cascadeWs));
  }
  AppendKVVariant append;
  append.inType = c.qType;
  append.kvType = c.kvType;
  append.numKVHeads = c.numKVHeads;
  append.headDim = c.headDim;
  append.pageSize = c.pageSize;
  append.layout = c.layout;
  append.perHeadKVScale = c.perHeadKVScale;
  auto appendKernel = kernels.appendKV(append);
  if (!appendKernel)
    return appendKernel.takeError();
  b->appendKV = *appendKernel;
  return std::move(b);
}

llvm::Error checkCacheConfig(const BackendConfig &c, const KVCacheConfig &k) {
  std::string problems;
  auto compare = [&](const char *name, auto want, auto got) {
    if (want == got)
      return;
    problems += problems.empty() ? "" : ", ";
    problems += llvm::formatv("{0} {1} (the cache has {2})", name, want, got);
  };
  compare("pageSize", c.pageSize, k.pageSize);
  compare("numKVHeads", c.numKVHeads, k.numKVHeads);
  compare("headDim", c.headDim, k.headDim);
  compare("kvType", std::string(toString(c.kvType)),
          std::string(toString(k.dtype)));
  compare("layout", std::string(toString(c.layout)),
          std::string(toString(k.layout)));
  // Scale granularity exists for FP8 caches only.
  if (c.kvType == k.dtype && sizeOf(k.dtype) == 1)
    compare("perHeadKVScale", int(c.perHeadKVScale), int(k.perHeadScale));
  if (problems.empty())
    return llvm::Error::success();
  return backendError("the KV cache is not the one the config describes: " +
                      problems);
}

llvm::Expected<CascadeAttention> cascadeFrom(const KernelSource &kernels,
                                             const DecodeVariant &variant) {
  if (!kernels.prefill || !kernels.decode || !kernels.mergeStates)
    return backendError("cascade: the kernel source lacks prefill, decode or "
                        "merge_states kernels");
  auto prefixKernel = kernels.prefill(cascadePrefixVariant(variant));
  if (!prefixKernel)
    return prefixKernel.takeError();
  auto suffixKernel = kernels.decode(cascadeSuffixVariant(variant));
  if (!suffixKernel)
    return suffixKernel.takeError();
  auto mergeKernel = kernels.mergeStates(cascadeMergeVariant(variant));
  if (!mergeKernel)
    return mergeKernel.takeError();
  return CascadeAttention::create(*prefixKernel, *suffixKernel, *mergeKernel);
}

int sharedLeadingPages(const AttentionMetadata &md, int pageSize) {
  const int batch = md.batch();
  if (md.numPrefills > 0 || batch < 2 || md.pageTableStride < 1)
    return 0;
  // Each request keeps at least its query tokens as its own suffix.
  int pages = md.pageTableStride;
  for (int b = 0; b < batch; ++b)
    pages = std::min(pages, (md.seqLens[b] - md.maxDecodeQueryLen) / pageSize);
  const int32_t *first = md.pageTables.data();
  for (int b = 1; b < batch; ++b) {
    const int32_t *row = first + size_t(b) * md.pageTableStride;
    int same = 0;
    while (same < pages && row[same] == first[same])
      ++same;
    pages = same;
  }
  return std::max(0, pages);
}

bool cascadePays(const BackendConfig &c, int batch, int sharedTokens) {
  // The shared level reads the shared keys once per group and q head (the
  // wgmma prefill of 16-bit caches on sm_90a) or KV head (mma.sync packs a
  // KV head's q heads: FP8 caches); plain decode once per KV head and
  // request. Measured (`attn-bench cascade`, 32/8 heads, d128;
  // docs/perf-log/history.md): both pay from a 4x read saving (16 requests at
  // 32/8), 16-bit caches from 2k shared tokens, FP8 caches (which plain
  // decode reads twice as fast) from 4k.
  const int64_t saving = int64_t(batch) * c.numKVHeads / c.numQHeads;
  return saving >= 4 && sharedTokens >= (sizeOf(c.kvType) == 1 ? 4096 : 2048);
}

llvm::Expected<StepPlan> Backend::plan(const AttentionMetadata &md,
                                       CUstream stream, bool forGraph) {
  StepPlan plan;
  plan.metadata = &md;
  if (backendConfig.kind == AttentionKind::Encoder) {
    auto ragged = this->ragged->plan(md.queryStartLoc, md.queryStartLoc,
                                     *raggedWorkspace, stream, forGraph);
    if (!ragged)
      return ragged.takeError();
    plan.ragged = *ragged;
    return plan;
  }
  bool cross = backendConfig.kind == AttentionKind::Cross;
  if (cascade && !forGraph) {
    const int pageSize = backendConfig.pageSize;
    int shared = sharedLeadingPages(md, pageSize);
    if (cascadePays(backendConfig, md.batch(), shared * pageSize)) {
      std::vector<int32_t> suffixLens;
      for (int32_t len : md.seqLens)
        suffixLens.push_back(len - shared * pageSize);
      auto cascadePlan =
          cascade->plan({CascadeLevel{{0, md.batch()}, {shared * pageSize}}},
                        suffixLens, *cascadeWorkspace, stream);
      if (!cascadePlan)
        return cascadePlan.takeError();
      plan.cascade = std::move(*cascadePlan);
      plan.sharedPages = shared;
      return plan;
    }
  }
  auto mixedPlan =
      mixed->plan(md.queryStartLoc, md.kvLens(cross), md.numPrefills,
                  *mixedWorkspace, stream, forGraph);
  if (!mixedPlan)
    return mixedPlan.takeError();
  plan.mixed = *mixedPlan;
  return plan;
}

llvm::Error Backend::forward(const StepPlan &plan, const LayerArgs &layer,
                             CUstream stream) const {
  if (!plan.metadata)
    return backendError("the step plan is empty");
  const AttentionMetadata &md = *plan.metadata;
  const BackendConfig &c = backendConfig;
  if (c.kind == AttentionKind::Encoder)
    return forwardWithoutCache(plan, layer, stream);
  if (!plan.mixed && !plan.cascade)
    return backendError(
        "the plan is not for a step over the cache (use forwardWithoutCache)");
  bool cross = c.kind == AttentionKind::Cross;

  // New K/V into the cache: the step's tokens, or (cross) the encoder
  // outputs of requests whose encoder runs now.
  AppendKVArgs append;
  bindSlots(append, md, cross);
  if (append.numTokens > 0) {
    if (!layer.k || !layer.v)
      return backendError(
          cross ? "the step runs encoders: k and v must hold their outputs"
                : "k and v must hold the step's new rows");
    append.k = layer.k;
    append.v = layer.v;
    append.inType = c.qType;
    append.numKVHeads = c.numKVHeads;
    append.headDim = c.headDim;
    append.kStrideToken = layer.kStrideToken;
    append.vStrideToken = layer.vStrideToken;
    append.cache = layer.cache;
    append.kScale = layer.kScale;
    append.vScale = layer.vScale;
    append.numKVScales = layer.numKVScales;
    if (llvm::Error error = appendKV->run(append, stream))
      return error;
  }

  if (plan.cascade) {
    // Row 0's shared pages are every request's; each row's own pages
    // follow them.
    CascadeArgs args;
    args.q = layer.q;
    args.qType = c.qType;
    args.numQTokens = md.numTokens();
    args.numQHeads = c.numQHeads;
    args.headDim = c.headDim;
    args.qStrideToken = layer.qStrideToken;
    args.out = layer.out;
    args.outStrideToken = layer.outStrideToken;
    args.cache = layer.cache;
    args.levelPageTables[0] = md.device.pageTables;
    args.levelPageTableStrides[0] = md.pageTableStride;
    args.suffixPageTables = md.device.pageTables + plan.sharedPages;
    args.suffixPageTableStride = md.pageTableStride;
    args.kScale = layer.kScale;
    args.vScale = layer.vScale;
    args.numKVScales = layer.numKVScales;
    return cascade->run(*plan.cascade, args, stream);
  }
  MixedBatchArgs args;
  args.q = layer.q;
  args.qType = c.qType;
  args.numQHeads = c.numQHeads;
  args.headDim = c.headDim;
  args.qStrideToken = layer.qStrideToken;
  args.out = layer.out;
  args.outStrideToken = layer.outStrideToken;
  args.cache = layer.cache;
  args.kScale = layer.kScale;
  args.vScale = layer.vScale;
  args.numKVScales = layer.numKVScales;
  static_cast<HeadTables &>(args) = layer;
  bindMetadata(args, md, cross);
  return mixed->run(*plan.mixed, args, stream);
}

llvm::Expected<StepPlan> Backend::planWithoutCache(const AttentionMetadata &md,
                                                   CUstream stream) {
  StepPlan plan;
  plan.metadata = &md;
  // Cross attention reads every request's encoder rows; the others attend
  // within the step's rows.
  bool cross = backendConfig.kind == AttentionKind::Cross;
  auto ragged = this->ragged->plan(
      md.queryStartLoc, cross ? md.encoderSeqStartLoc : md.queryStartLoc,
      *raggedWorkspace, stream);
  if (!ragged)
    return ragged.takeError();
  plan.ragged = *ragged;
  return plan;
}

llvm::Error Backend::forwardWithoutCache(const StepPlan &plan,
                                         const LayerArgs &layer,
                                         CUstream stream) const {
  if (!plan.ragged || !plan.metadata)
    return backendError(
        "the plan is not for a step without cache (use planWithoutCache)");
  const BackendConfig &c = backendConfig;
  PrefillArgs args;
  args.q = layer.q;
  args.k = layer.k;
  args.v = layer.v;
  args.dtype = c.qType;
  args.numQTokens = plan.ragged->numQTokens;
  args.numKVTokens = plan.ragged->numKVTokens;
  args.numQHeads = c.numQHeads;
  args.numKVHeads = c.numKVHeads;
  args.headDim = c.headDim;
  args.qStrideToken = layer.qStrideToken;
  args.kStrideToken = layer.kStrideToken;
  args.vStrideToken = layer.vStrideToken;
  args.out = layer.out;
  args.outStrideToken = layer.outStrideToken;
  static_cast<HeadTables &>(args) = layer;
  return ragged->run(*plan.ragged, args, stream);
}

llvm::Error Backend::captureGraph(
    const AttentionMetadata &padded,
    llvm::function_ref<llvm::Error(const StepPlan &, CUstream)> forward,
    CUstream stream) {
  if (backendConfig.kind == AttentionKind::Encoder || padded.numPrefills > 0)
    return backendError("graphs capture decode-only steps of decoders and "
                        "encoder-decoders");
  auto plan = this->plan(padded, stream, /*forGraph=*/true);
  if (!plan)
    return plan.takeError();
  ATTN_CU_CHECK(cuStreamSynchronize(stream));
  size_t freeBefore = 0, freeAfter = 0, total = 0;
  ATTN_CU_CHECK(cuMemGetInfo(&freeBefore, &total));
  CUgraph graph = nullptr;
  ATTN_CU_CHECK(
      cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  llvm::Error forwardError = forward(*plan, stream);
  CUresult ended = cuStreamEndCapture(stream, &graph);
  if (forwardError) {
    if (graph)
      cuGraphDestroy(graph);
    return forwardError;
  }
  ATTN_CU_CHECK(ended);
  auto captured = std::make_unique<Graph>();
  CUresult instantiated = cuGraphInstantiate(&captured->exec, graph, 0);
  cuGraphDestroy(graph);
  ATTN_CU_CHECK(instantiated);
  ATTN_CU_CHECK(cuMemGetInfo(&freeAfter, &total));
  captured->deviceBytes = freeBefore > freeAfter ? freeBefore - freeAfter : 0;
  graphs[padded.batch()] = std::move(captured);
  return llvm::Error::success();
}

llvm::Expected<bool> Backend::replayGraph(const AttentionMetadata &md,
                                          CUstream stream) {
  if (md.numPrefills > 0 || md.batch() == 0)
    return false;
  auto it = graphs.lower_bound(md.batch());
  if (it == graphs.end())
    return false;
  // The new lengths into the captured workspaces; the graph's launches read
  // them from there.
  auto plan = this->plan(md, stream, /*forGraph=*/true);
  if (!plan)
    return plan.takeError();
  ATTN_CU_CHECK(cuGraphLaunch(it->second->exec, stream));
  return true;
}

std::vector<std::pair<int, size_t>> Backend::graphSizes() const {
  std::vector<std::pair<int, size_t>> sizes;
  for (const auto &[batch, graph] : graphs)
    sizes.push_back({batch, graph->deviceBytes});
  return sizes;
}

size_t Backend::workspaceBytes() const {
  size_t bytes = raggedWorkspace->deviceBytes();
  if (mixedWorkspace)
    bytes += mixedWorkspace->prefill.deviceBytes() +
             mixedWorkspace->decode.deviceBytes();
  if (cascadeWorkspace) {
    for (const PrefillWorkspace &level : cascadeWorkspace->levels)
      bytes += level.deviceBytes();
    bytes += cascadeWorkspace->suffix.deviceBytes() +
             cascadeWorkspace->partialOut.size() +
             cascadeWorkspace->partialLse.size();
  }
  return bytes;
}

} // namespace attn::runtime
