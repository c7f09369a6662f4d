//===- Backend.h - one attention backend per model config -------*- C++ -*-===//
//
// What an inference engine calls for attention, in the shape of the seeds'
// backends: one Backend per model configuration; per step, plan() once from
// the step's AttentionMetadata (shared by every layer), then forward() per
// layer:
//  - decoder self attention: append the step's new K/V to the layer's cache,
//    then the prefill chunks (paged prefill) and decodes of the mixed batch;
//  - encoder attention: bidirectional over the step's q/k/v, no cache;
//  - encoder-decoder cross attention: at the step a request's encoder runs,
//    append its encoder K/V to the cross cache; queries of prefills and
//    decodes attend to the cached encoder tokens. (An encoder-decoder model
//    uses a Decoder backend for its decoder's self attention and an
//    EncoderDecoder backend for cross attention, as its layers do.)
// forwardWithoutCache() is the profiling run: attention over the step's q/k/v
// alone, as an engine runs before it sizes the cache.
//
// Graph mode (decode-only steps): captureGraph() records the engine's whole
// forward for a padded batch size once; replayGraph() re-plans a step of at
// most that many decodes into the same workspaces and launches the graph.
// The engine keeps q/k/v/out and the metadata builder's buffers at fixed
// addresses, as graphs require.
//
// Kernels come from a KernelSource: the JIT (Jit::kernelSource()) or an AOT
// library (kernelsFrom()), so a host without the compiler uses the same
// Backend.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_BACKEND_H
#define ATTN_RUNTIME_BACKEND_H

#include "attn/runtime/cache/AotLibrary.h"
#include "attn/runtime/kernels/AppendKV.h"
#include "attn/runtime/kernels/Cascade.h"
#include "attn/runtime/kernels/KernelSource.h"
#include "attn/runtime/kernels/MixedBatch.h"
#include "attn/runtime/kernels/Prefill.h"
#include "attn/runtime/serving/AttentionMetadata.h"
#include "attn/runtime/serving/KVCache.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>

namespace attn::runtime {

/// Kernels of an AOT library for `arch` (kept alive by the source).
KernelSource kernelsFrom(std::shared_ptr<const AotLibrary> library, Arch arch);

/// Cascade decode for `variant` from `kernels`: its prefix, suffix and
/// merge kernels (cascadePrefixVariant, ...; the JIT's and the Backend's
/// one way to load them).
llvm::Expected<CascadeAttention> cascadeFrom(const KernelSource &kernels,
                                             const DecodeVariant &variant);

/// One attention configuration of a model (every layer the same).
struct BackendConfig {
  /// Decoder self attention, an encoder, or an encoder-decoder's cross
  /// attention.
  AttentionKind kind = AttentionKind::Decoder;
  ScalarType qType = ScalarType::BF16; ///< q, k, v and out
  int numQHeads = 32;
  int numKVHeads = 8;
  int headDim = 128;
  /// The paged cache (decoder: self-attention cache; encoder-decoder: the
  /// cross-attention cache); unused by encoders.
  ScalarType kvType = ScalarType::BF16;
  int pageSize = 16;
  KVLayout layout = KVLayout::NHD;
  bool perHeadKVScale = false;
  std::optional<int> windowLeft; ///< decoder self attention only
  std::optional<float> softcap;
  std::optional<float> scale; ///< default 1/sqrt(headDim)
  /// score_mod / mask_mod regions (IR text, as AttentionKnobs takes
  /// them); empty: none. A region's request index is the request's place
  /// in the step (prefills first, as the metadata has them), and
  /// LayerArgs::aux passes the tables it reads.
  std::string scoreMod, maskMod;
  /// Decode steps whose requests share leading pages (a system prompt, the
  /// prompt of parallel samples) run as cascade attention where it pays
  /// (runtime/kernels/Cascade.h; docs/backend.md). Its kernels are loaded
  /// at create for decoder configs a cascade can split (no window, ALiBi,
  /// sinks or modifier regions); false serves without them.
  bool cascade = true;
  /// Every layer's result for a request independent of the rest of the
  /// step (docs/semantics.md, "Batch invariance"): the kernels' batch_invariant
  /// knob, and no cascade decode (which a step takes or not by its batch).
  bool batchInvariant = false;
  /// Per-query-head tables (alibi, ...; templates/attn/variant_knobs.h):
  /// LayerArgs passes each layer's.
#define ATTN_HEAD_TABLE(flag, ...) bool flag = false;
#include "templates/attn/variant_knobs.h"
};

/// One layer's tensors for forward().
struct LayerArgs : HeadTables {
  /// [step tokens, numQHeads, headDim]; out likewise.
  const void *q = nullptr;
  void *out = nullptr;
  /// Decoder: the step's new K/V rows. Encoder: every row's K/V. Encoder-
  /// decoder: the encoder outputs of the requests whose encoder runs this
  /// step, in request order (null when none does).
  const void *k = nullptr;
  const void *v = nullptr;
  int64_t qStrideToken = 0, kStrideToken = 0, vStrideToken = 0,
          outStrideToken = 0; ///< elements; 0 means dense
  PagedKVView cache; ///< this layer's (cross) cache; unused by encoders
  const float *kScale = nullptr, *vScale = nullptr; ///< FP8 caches
  int numKVScales = 0;
};

/// Whether `cache` is the cache `config` describes: page size, KV heads,
/// head dim, element type, layout and FP8 scale granularity; the error
/// names every field that differs.
llvm::Error checkCacheConfig(const BackendConfig &config,
                             const KVCacheConfig &cache);

/// Points `args` at layer `layer` of `cache`: its view and FP8 scales.
void bindCache(LayerArgs &args, const KVCache &cache, int layer);

/// A step's plans, shared by every layer's forward().
struct StepPlan {
  const AttentionMetadata *metadata = nullptr;
  std::optional<MixedBatchPlan> mixed; ///< decoder / encoder-decoder steps
  std::optional<PrefillPlan> ragged;   ///< encoder steps, runs without cache
  /// Decode steps run as a cascade: the plan and the leading pages every
  /// request shares.
  std::optional<CascadePlan> cascade;
  int sharedPages = 0;
};

/// The leading pages every request of a decode-only step shares (equal
/// page ids in every page-table row), leaving each request at least its
/// query tokens of its own; 0 for other steps.
int sharedLeadingPages(const AttentionMetadata &md, int pageSize);

/// Whether a cascade over `sharedTokens` shared by `batch` requests beats
/// plain decode for `config`: the thresholds measured on the H200
/// (docs/perf-log/history.md, "merge_states and cascade attention").
bool cascadePays(const BackendConfig &config, int batch, int sharedTokens);

class Backend {
public:
  /// Loads every kernel the configuration needs and sizes the workspaces
  /// for `limits` (those the engine's AttentionMetadataBuilder uses).
  /// Fails, before compiling anything, if `limits` or `cache` (when given)
  /// describe another cache than `config`: one page size for the
  /// metadata, the kernels and the cache (checkCacheConfig).
  static llvm::Expected<std::unique_ptr<Backend>>
  create(const BackendConfig &config, const KernelSource &kernels,
         const MetadataLimits &limits, const KVCacheConfig *cache = nullptr);

  const BackendConfig &config() const { return backendConfig; }

  /// Plans a step from its metadata (host arrays); `md` must outlive the
  /// plan. With `forGraph`, grids are the workspace capacity (and no
  /// cascade: graphs capture the plain path).
  llvm::Expected<StepPlan> plan(const AttentionMetadata &md, CUstream stream,
                                bool forGraph = false);
  /// One layer of the step.
  llvm::Error forward(const StepPlan &plan, const LayerArgs &layer,
                      CUstream stream) const;

  /// The profiling run: attention of each request's step rows over the same
  /// rows' k/v (causal for decoders), no cache read or written.
  llvm::Expected<StepPlan> planWithoutCache(const AttentionMetadata &md,
                                            CUstream stream);
  llvm::Error forwardWithoutCache(const StepPlan &plan, const LayerArgs &layer,
                                  CUstream stream) const;

  /// Graph mode. Captures `forward(plan, stream)` (every layer of the
  /// model) for the decode-only step `padded` (its batch is the size
  /// captured; padded requests hold valid page tables). Replaces an
  /// earlier graph of the same size.
  llvm::Error captureGraph(
      const AttentionMetadata &padded,
      llvm::function_ref<llvm::Error(const StepPlan &, CUstream)> forward,
      CUstream stream);
  /// Runs the decode-only step `md` through the smallest captured graph that
  /// holds it: re-plans into the captured workspaces, then launches. False
  /// (nothing launched) when no graph fits or the step has prefills.
  llvm::Expected<bool> replayGraph(const AttentionMetadata &md,
                                   CUstream stream);
  /// The batch sizes captured so far, ascending, with the device memory
  /// each graph took when captured and instantiated (cuMemGetInfo).
  std::vector<std::pair<int, size_t>> graphSizes() const;
  /// Device bytes the workspaces hold (shared by every graph).
  size_t workspaceBytes() const;

  ~Backend();

private:
  Backend() = default;
  struct Graph;
  BackendConfig backendConfig;
  MetadataLimits limits;
  std::shared_ptr<const AppendKVKernel> appendKV;
  std::optional<MixedBatchAttention> mixed;
  std::shared_ptr<const PrefillKernel> ragged;
  std::optional<MixedBatchWorkspace> mixedWorkspace;
  std::optional<CascadeAttention> cascade;
  std::optional<CascadeWorkspace> cascadeWorkspace;
  std::optional<PrefillWorkspace> raggedWorkspace;
  std::map<int, std::unique_ptr<Graph>> graphs;
};

} // namespace attn::runtime

#endif // ATTN_RUNTIME_BACKEND_H
