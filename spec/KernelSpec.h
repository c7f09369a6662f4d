//===- KernelSpec.h - one kernel variant, as plain data --------*- C++ -*-===//
//
// Everything that changes a generated kernel's binary: which template, its
// dtypes, shapes, variant flags, the schedule the compiler chose and the target
// arch. Plain C++ with no MLIR types, so the runtime and attn-aot use it
// without the compiler. The compiler fills it from lowered IR; codegen turns it
// into a CUDA translation unit (codegen/EmitCuda.h).
//
// The fields are listed once, in forEachField: equality, #attn.kernel_spec's
// text, the AOT manifest's JSON and the kernel name all walk that list. The
// variant flags among them come from templates/attn/variant_knobs.h.
//
// Values that do not change the binary (softmax scale, soft-cap value, window
// size) are not here: they travel as launch parameters (templates/attn/
// params.h).
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_SPEC_KERNELSPEC_H
#define ATTN_SPEC_KERNELSPEC_H

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace attn {

/// Element types of activations and KV caches.
enum class ScalarType { F16, BF16, F8E4M3, F8E5M2, F32 };

/// Order inside one KV-cache page.
enum class KVLayout { NHD, HND };

/// GPU targets the kernels are generated for.
enum class Arch { SM80, SM89, SM90a };

/// Decoder self attention (causal as a rule), bidirectional encoder self
/// attention, or cross attention over cached encoder outputs: the one
/// attention-kind enum of hosts, the Backend and (as #attn.kind) the IR.
enum class AttentionKind { Decoder, Encoder, Cross };

/// Which template a kernel instantiates.
enum class KernelKind {
  Decode,       ///< paged decode, split-KV partials merged in the same launch
  AppendKV,     ///< reshape-and-cache, quantizing to FP8 caches
  Prefill,      ///< ragged (varlen) prefill over contiguous q/k/v
  PagedPrefill, ///< prefill whose keys/values (prefix + new) are in a paged
                ///< cache
  /// merge_states: partial outputs combined by their LSEs; q_type is the
  /// outputs' dtype (f16, bf16, f32), num_q_heads their heads.
  MergeStates,
  /// Absorbed multi-head latent attention decode (DeepSeek, Kimi, GLM): one
  /// KV head whose rows are the latent (head_dim, also the values) and the
  /// RoPE key (rope_dim); split-KV as decode, with a decode schedule.
  MlaDecode,
  /// Runtime utilities (runtime/CacheOps.h), never lowered to by the
  /// compiler; no field but the arch specializes them.
  CopyPages,   ///< copy_pages: page pairs of every layer's K and V
  AdvanceStep, ///< advance_step: a decode batch's metadata one token on
};

/// How the decode template is laid out on the GPU; chosen by the
/// attn-select-schedule pass.
struct DecodeSchedule {
  /// Warps per CTA. Each warp streams its own share of the KV chunk through a
  /// private cp.async ring, so warps never wait for each other until the end.
  int warps = 4;
  /// cp.async stages per warp (loads in flight = stages - 1 tiles); the
  /// CUDA-core path of one query row (templates/attn/decode_layout.h,
  /// decodeSimt) has no ring and ignores it.
  int stages = 4;
  /// 16-row MMA tiles per CTA; rows are (query token, q head of the group).
  int rowTiles = 1;
  /// Smallest KV chunk, in tokens, a CTA takes when a request is split.
  int minChunkTokens = 256;
  /// CTAs per SM the decode entry's __launch_bounds__ asks for, which caps
  /// a thread at 64K / (ctasPerSM x threads) registers; the planner sizes
  /// its waves by the occupancy the runtime measures.
  int ctasPerSM = 2;

  bool operator==(const DecodeSchedule &o) const;
  bool operator!=(const DecodeSchedule &o) const { return !(*this == o); }
};

/// Calls f(name, field...) for every field of one or more DecodeSchedules,
/// by their IR names.
template <class F, class... S> void forEachDecodeScheduleField(F &&f, S &...s) {
  f("warps", s.warps...);
  f("stages", s.stages...);
  f("row_tiles", s.rowTiles...);
  f("min_chunk_tokens", s.minChunkTokens...);
  f("ctas_per_sm", s.ctasPerSM...);
}

/// Which tensor-core instructions, and so which template, a prefill uses.
enum class PrefillMma {
  /// mma.sync + ldmatrix + cp.async (templates/attn/prefill.cuh), any arch.
  Sync,
  /// sm_90a: wgmma + TMA, a producer warpgroup and 64-row consumer
  /// warpgroups (templates/attn/prefill_sm90.cuh); ragged, 16-bit, head
  /// dims 64 and 128.
  Wgmma,
};

/// How the prefill template is laid out: a CTA takes blockM query rows of
/// one q head and streams K/V in tiles of blockN keys through a ring of
/// `stages` shared-memory buffers. mma.sync: each warp owns 16 or 32 query
/// rows. wgmma: warpgroup 0 loads, each further warpgroup owns 64 rows.
struct PrefillSchedule {
  int warps = 4;   ///< sync: blockM / 16 or / 32; wgmma: 4 + blockM / 16
  int blockM = 64; ///< query rows per CTA
  int blockN = 64; ///< keys per K/V tile
  int stages = 2;  ///< K/V tiles in flight
  PrefillMma mma = PrefillMma::Sync;
  /// wgmma: the runtime launches a persistent grid (one row of resident
  /// CTAs looping over (work item, q head) pairs) when a batch averages at
  /// most this many query tokens per request, else one CTA per pair; 0
  /// never. Not part of the binary (both grids are compiled in).
  int persistentMaxQLen = 2048;
  /// mma.sync: a CTA takes the q heads of one KV head together, its blockM
  /// rows being blockM / group tokens times the group's heads (the rows of
  /// a token's heads adjacent). Short queries (decode-like rows, a cascade's
  /// shared level) then fill the tile, and each K/V tile read serves every
  /// head of its group. Only for variants without per-head values (ALiBi,
  /// sinks, modifier regions), and only where blockM >= the group.
  bool packGqa = false;

  bool operator==(const PrefillSchedule &o) const;
  bool operator!=(const PrefillSchedule &o) const { return !(*this == o); }
};

/// Calls f(name, field...) for every field of one or more PrefillSchedules.
template <class F, class... S>
void forEachPrefillScheduleField(F &&f, S &...s) {
  f("warps", s.warps...);
  f("block_m", s.blockM...);
  f("block_n", s.blockN...);
  f("stages", s.stages...);
  f("mma", s.mma...);
  f("persistent_max_q_len", s.persistentMaxQLen...);
  f("pack_gqa", s.packGqa...);
}

/// One kernel variant.
struct KernelSpec {
  KernelKind kind = KernelKind::Decode;
  Arch arch = Arch::SM90a;

  ScalarType qType = ScalarType::BF16;  ///< queries and outputs
  ScalarType kvType = ScalarType::BF16; ///< KV-cache elements
  int numQHeads = 32;
  int numKVHeads = 8;
  int headDim = 128;
  /// MLA: q and k have head_dim + rope_dim dims (the latent or nope part,
  /// then the decoupled RoPE part), the values and the output head_dim:
  /// mla_decode, and ragged prefill in MLA's form (q/k 192, v 128). 0
  /// everywhere else.
  int ropeDim = 0;
  int pageSize = 16;
  KVLayout layout = KVLayout::NHD;
  int queryLen = 1; ///< query tokens per request (decode)

  /// The variant flags (causal, alibi, ...), one per knob of
  /// templates/attn/variant_knobs.h.
#define ATTN_FLAG(member, ...) bool member = false;
#include "templates/attn/variant_knobs.h"

  /// Programmable modifiers (compiler/Transforms/Modifiers.h): the CUDA
  /// bodies of the score_mod and mask_mod device functions the Config holds,
  /// and the types of the aux tables they read ("f32:8x32,i32:?"); empty
  /// without. The bodies are code: a spec is trusted as its source is.
  std::string scoreMod;
  std::string maskMod;
  /// The interval form of mask_mod, which lets the kernels skip the tiles
  /// it hides and leave unmasked the tiles it cannot hide (maskModTile;
  /// compiler/Transforms/Modifiers.h).
  std::string maskModTiles;
  std::string aux;

  DecodeSchedule schedule;         ///< decode kernels
  PrefillSchedule prefillSchedule; ///< prefill and paged-prefill kernels

  int groupSize() const { return numQHeads / numKVHeads; }
  /// Query tokens of one prefill tile: blockM, or blockM / group rows of
  /// every head of a group when the schedule packs them (packGqa).
  int prefillTileTokens() const {
    return prefillSchedule.packGqa ? prefillSchedule.blockM / groupSize()
                                   : prefillSchedule.blockM;
  }
  /// The heads a prefill grid spans in y: q heads, or KV heads when packed.
  int prefillGridHeads() const {
    return prefillSchedule.packGqa ? numKVHeads : numQHeads;
  }
  bool isPrefill() const {
    return kind == KernelKind::Prefill || kind == KernelKind::PagedPrefill;
  }
  /// Kernels that take a DecodeSchedule and the decode plan's work items.
  bool hasDecodeSchedule() const {
    return kind == KernelKind::Decode || kind == KernelKind::MlaDecode;
  }
  /// A runtime utility kernel (copy_pages, advance_step): its uri() is the
  /// kind alone, as none of the attention fields applies.
  bool isCacheOp() const {
    return kind == KernelKind::CopyPages || kind == KernelKind::AdvanceStep;
  }
  bool hasModifiers() const { return !scoreMod.empty() || !maskMod.empty(); }
  /// Whether a region is too costly to inline in the wgmma prefill (its
  /// Config says so; compiler/Transforms/Modifiers.cpp).
  bool costlyRegions() const {
    return scoreMod.find(kCostlyScoreMod) != std::string::npos ||
           maskMod.find(kCostlyMaskMod) != std::string::npos;
  }
  /// The Config members that mark a region costly.
  static constexpr std::string_view kCostlyScoreMod =
      "static constexpr bool kScoreModCostly = true;";
  static constexpr std::string_view kCostlyMaskMod =
      "static constexpr bool kMaskModCostly = true;";
  /// The aux tables `aux` lists (one per comma-separated type).
  int numAuxTables() const {
    return aux.empty() ? 0 : 1 + int(std::count(aux.begin(), aux.end(), ','));
  }
  bool isFP8KV() const {
    return kvType == ScalarType::F8E4M3 || kvType == ScalarType::F8E5M2;
  }
  /// Readable, unique name of the variant: the kernel symbol is
  /// "attn_" + uri() and the cache file name starts with it.
  std::string uri() const;
  /// The extern "C" entry of the variant's translation unit: "attn_" + uri().
  std::string symbol() const { return "attn_" + uri(); }

  bool operator==(const KernelSpec &o) const;
  bool operator!=(const KernelSpec &o) const { return !(*this == o); }
};

/// Calls f(name, field...) for every field of one or more KernelSpecs, by
/// their IR and JSON names, in a fixed order: the one list of what a spec
/// holds. Schedules are visited whole ("schedule", "prefill_schedule").
template <class F, class... K> void forEachSpecField(F &&f, K &...k) {
  f("kind", k.kind...);
  f("arch", k.arch...);
  f("q_type", k.qType...);
  f("kv_type", k.kvType...);
  f("num_q_heads", k.numQHeads...);
  f("num_kv_heads", k.numKVHeads...);
  f("head_dim", k.headDim...);
  f("rope_dim", k.ropeDim...);
  f("page_size", k.pageSize...);
  f("layout", k.layout...);
  f("query_len", k.queryLen...);
#define ATTN_FLAG(member, name, ...) f(name, k.member...);
#include "templates/attn/variant_knobs.h"
  f("score_mod", k.scoreMod...);
  f("mask_mod", k.maskMod...);
  f("mask_mod_tiles", k.maskModTiles...);
  f("aux", k.aux...);
  f("schedule", k.schedule...);
  f("prefill_schedule", k.prefillSchedule...);
}

/// A device template and how a kernel of it is launched; one row per
/// template (kernelTemplate()), so every per-kind choice lives here.
struct KernelTemplate {
  std::string_view header; ///< under templates/, as included
  std::string_view entry;  ///< the function in namespace attn it instantiates
  std::string_view params; ///< its launch-parameter struct (params.h)
  /// The traits struct whose kSmemBytes is its dynamic shared memory; empty
  /// for templates without any.
  std::string_view traits;
  /// Threads per CTA; 0: 32 * the schedule's warps.
  int threads;
  /// Whether the entry is a template over the generated Config (the cache
  /// ops take everything at run time).
  bool configured;
};

/// The template `spec` instantiates (the prefill kinds pick theirs by the
/// schedule's mma).
const KernelTemplate &kernelTemplate(const KernelSpec &spec);

/// Threads per CTA of the spec's main entry.
int threadsPerBlock(const KernelSpec &spec);

std::string_view toString(ScalarType type);
std::string_view toString(AttentionKind kind);
std::string_view toString(KVLayout layout);
std::string_view toString(Arch arch);
std::string_view toString(KernelKind kind);
std::string_view toString(PrefillMma mma);
/// The inverses of toString; none for an unknown name.
std::optional<Arch> parseArch(std::string_view name);
std::optional<ScalarType> parseScalarType(std::string_view name);
std::optional<KVLayout> parseKVLayout(std::string_view name);
std::optional<AttentionKind> parseAttentionKind(std::string_view name);
std::optional<KernelKind> parseKernelKind(std::string_view name);
std::optional<PrefillMma> parsePrefillMma(std::string_view name);
/// Bytes per element.
int sizeOf(ScalarType type);

} // namespace attn

#endif // ATTN_SPEC_KERNELSPEC_H
