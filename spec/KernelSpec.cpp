//===- KernelSpec.cpp - kernel variant names ------------------------------===//
#include "spec/KernelSpec.h"

#include <fmt/format.h>

namespace attn {

std::string_view toString(ScalarType type) {
  switch (type) {
  case ScalarType::F16:
    return "f16";
  case ScalarType::BF16:
    return "bf16";
  case ScalarType::F8E4M3:
    return "e4m3";
  case ScalarType::F8E5M2:
    return "e5m2";
  case ScalarType::F32:
    return "f32";
  }
  return "?";
}

std::string_view toString(AttentionKind kind) {
  switch (kind) {
  case AttentionKind::Decoder:
    return "decoder";
  case AttentionKind::Encoder:
    return "encoder";
  case AttentionKind::Cross:
    return "cross";
  }
  return "?";
}

std::string_view toString(KVLayout layout) {
  return layout == KVLayout::NHD ? "nhd" : "hnd";
}

std::string_view toString(Arch arch) {
  switch (arch) {
  case Arch::SM80:
    return "sm_80";
  case Arch::SM89:
    return "sm_89";
  case Arch::SM90a:
    return "sm_90a";
  }
  return "?";
}

std::string_view toString(KernelKind kind) {
  switch (kind) {
  case KernelKind::Decode:
    return "decode";
  case KernelKind::AppendKV:
    return "append_kv";
  case KernelKind::Prefill:
    return "prefill";
  case KernelKind::PagedPrefill:
    return "paged_prefill";
  case KernelKind::MergeStates:
    return "merge_states";
  case KernelKind::MlaDecode:
    return "mla_decode";
  case KernelKind::CopyPages:
    return "copy_pages";
  case KernelKind::AdvanceStep:
    return "advance_step";
  }
  return "?";
}

std::string_view toString(PrefillMma mma) {
  return mma == PrefillMma::Wgmma ? "wgmma" : "sync";
}

std::optional<PrefillMma> parsePrefillMma(std::string_view name) {
  for (PrefillMma mma : {PrefillMma::Sync, PrefillMma::Wgmma})
    if (name == toString(mma))
      return mma;
  return std::nullopt;
}

std::optional<Arch> parseArch(std::string_view name) {
  for (Arch arch : {Arch::SM80, Arch::SM89, Arch::SM90a})
    if (name == toString(arch))
      return arch;
  return std::nullopt;
}

std::optional<ScalarType> parseScalarType(std::string_view name) {
  for (ScalarType type : {ScalarType::F16, ScalarType::BF16, ScalarType::F8E4M3,
                          ScalarType::F8E5M2, ScalarType::F32})
    if (name == toString(type))
      return type;
  return std::nullopt;
}

std::optional<KVLayout> parseKVLayout(std::string_view name) {
  for (KVLayout layout : {KVLayout::NHD, KVLayout::HND})
    if (name == toString(layout))
      return layout;
  return std::nullopt;
}

std::optional<AttentionKind> parseAttentionKind(std::string_view name) {
  for (AttentionKind kind :
       {AttentionKind::Decoder, AttentionKind::Encoder, AttentionKind::Cross})
    if (name == toString(kind))
      return kind;
  return std::nullopt;
}

std::optional<KernelKind> parseKernelKind(std::string_view name) {
  for (KernelKind kind :
       {KernelKind::Decode, KernelKind::AppendKV, KernelKind::Prefill,
        KernelKind::PagedPrefill, KernelKind::MergeStates,
        KernelKind::MlaDecode, KernelKind::CopyPages, KernelKind::AdvanceStep})
    if (name == toString(kind))
      return kind;
  return std::nullopt;
}

int sizeOf(ScalarType type) {
  switch (type) {
  case ScalarType::F16:
  case ScalarType::BF16:
    return 2;
  case ScalarType::F8E4M3:
  case ScalarType::F8E5M2:
    return 1;
  case ScalarType::F32:
    return 4;
  }
  return 0;
}

namespace {
/// FNV-1a over the texts, each followed by a 0 byte.
uint64_t fnv1a(std::initializer_list<std::string_view> texts) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (std::string_view text : texts) {
    for (char c : text)
      hash = (hash ^ uint8_t(c)) * 0x100000001b3ull;
    hash *= 0x100000001b3ull;
  }
  return hash;
}
} // namespace

std::string KernelSpec::uri() const {
  // Only fields that change the binary, in a fixed order; flags appear only
  // when set so common names stay short. The cache ops take everything at
  // run time: one kernel per arch, named by its kind.
  if (isCacheOp())
    return std::string(toString(kind));
  if (kind == KernelKind::MergeStates)
    return fmt::format("merge_states_{}_h{}_d{}", toString(qType), numQHeads,
                       headDim);
  std::string name =
      fmt::format("{}_q{}_kv{}_h{}x{}_d{}", toString(kind), toString(qType),
                  toString(kvType), numQHeads, numKVHeads, headDim);
  if (ropeDim != 0)
    name += fmt::format("r{}", ropeDim);
  if (kind != KernelKind::Prefill) // ragged prefill reads no cache
    name += fmt::format("_p{}{}", pageSize, toString(layout));
  if (queryLen != 1)
    name += fmt::format("_ql{}", queryLen);
#define ATTN_FLAG(member, name_, ...)                                          \
  if (member)                                                                  \
    name += "_" name_;
#include "templates/attn/variant_knobs.h"
  // Modifier source is long: the name holds its hash.
  if (hasModifiers())
    name += fmt::format("_mod{:016x}",
                        fnv1a({scoreMod, maskMod, maskModTiles, aux}));
  if (hasDecodeSchedule()) {
    name += fmt::format("_w{}s{}r{}", schedule.warps, schedule.stages,
                        schedule.rowTiles);
    // A mask_mod re-cuts split requests in chunks of at least this many.
    if (!maskMod.empty())
      name += fmt::format("c{}", schedule.minChunkTokens);
  } else if (isPrefill())
    name += fmt::format(
        "_m{}n{}w{}s{}{}{}", prefillSchedule.blockM, prefillSchedule.blockN,
        prefillSchedule.warps, prefillSchedule.stages,
        prefillSchedule.mma == PrefillMma::Wgmma ? "_wgmma" : "",
        prefillSchedule.packGqa ? "_gqa" : "");
  return name;
}

namespace {
/// Equality of every field forEach*Field lists.
struct AllEqual {
  bool equal = true;
  template <class T> void operator()(const char *, const T &a, const T &b) {
    equal = equal && a == b;
  }
};
} // namespace

bool DecodeSchedule::operator==(const DecodeSchedule &o) const {
  AllEqual eq;
  forEachDecodeScheduleField(eq, *this, o);
  return eq.equal;
}

bool PrefillSchedule::operator==(const PrefillSchedule &o) const {
  AllEqual eq;
  forEachPrefillScheduleField(eq, *this, o);
  return eq.equal;
}

bool KernelSpec::operator==(const KernelSpec &o) const {
  AllEqual eq;
  forEachSpecField(eq, *this, o);
  return eq.equal;
}

const KernelTemplate &kernelTemplate(const KernelSpec &spec) {
  // clang-format off
  static const KernelTemplate decode{"attn/decode.cuh", "decodeKernel",
      "DecodeParams", "DecodeTraits", 0, true};
  static const KernelTemplate appendKV{"attn/append_kv.cuh", "appendKVKernel",
      "AppendKVParams", "", 128 /* one 16-byte vector per thread */, true};
  // Ragged and paged prefill share a template (Config::kPaged).
  static const KernelTemplate prefill{"attn/prefill.cuh", "prefillKernel",
      "PrefillParams", "PrefillTraits", 0, true};
  // sm_90a: the prefill parameters plus q/k/v's tensor maps.
  static const KernelTemplate prefillSm90{"attn/prefill_sm90.cuh",
      "prefillSm90Kernel", "PrefillSm90Params", "PrefillSm90Traits", 0, true};
  static const KernelTemplate mergeStates{"attn/merge_states.cuh",
      "mergeStatesKernel", "MergeStatesParams", "", 256, true};
  static const KernelTemplate mlaDecode{"attn/mla_decode.cuh",
      "mlaDecodeKernel", "MlaDecodeParams", "MlaDecodeTraits", 0, true};
  static const KernelTemplate copyPages{"attn/cache_ops.cuh",
      "copyPagesKernel", "CopyPagesParams", "", 256, false};
  static const KernelTemplate advanceStep{"attn/cache_ops.cuh",
      "advanceStepKernel", "AdvanceStepParams", "", 128, false};
  // clang-format on
  switch (spec.kind) {
  case KernelKind::Decode:
    return decode;
  case KernelKind::AppendKV:
    return appendKV;
  case KernelKind::Prefill:
  case KernelKind::PagedPrefill:
    return spec.prefillSchedule.mma == PrefillMma::Wgmma ? prefillSm90
                                                         : prefill;
  case KernelKind::MergeStates:
    return mergeStates;
  case KernelKind::MlaDecode:
    return mlaDecode;
  case KernelKind::CopyPages:
    return copyPages;
  case KernelKind::AdvanceStep:
    return advanceStep;
  }
  return decode;
}

int threadsPerBlock(const KernelSpec &spec) {
  if (int threads = kernelTemplate(spec).threads)
    return threads;
  return 32 * (spec.hasDecodeSchedule() ? spec.schedule.warps
                                        : spec.prefillSchedule.warps);
}

} // namespace attn
