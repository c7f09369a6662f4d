//===- KernelSpec.cpp - kernel variant names ------------------------------===//
#include "codegen/KernelSpec.h"

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
  case KernelKind::CopyBlocks:
    return "copy_blocks";
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

std::optional<KernelKind> parseKernelKind(std::string_view name) {
  for (KernelKind kind :
       {KernelKind::Decode, KernelKind::AppendKV, KernelKind::Prefill,
        KernelKind::PagedPrefill, KernelKind::CopyBlocks,
        KernelKind::AdvanceStep})
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

std::string KernelSpec::uri() const {
  // Only fields that change the binary, in a fixed order; flags appear only
  // when set so common names stay short. The cache ops take everything at
  // run time: one kernel per arch, named by its kind.
  if (isCacheOp())
    return std::string(toString(kind));
  std::string name = fmt::format("{}_q{}_kv{}_h{}x{}_d{}", toString(kind),
                                 toString(qType), toString(kvType), numQHeads,
                                 numKVHeads, headDim);
  if (kind != KernelKind::Prefill) // ragged prefill reads no cache
    name += fmt::format("_p{}{}", pageSize, toString(layout));
  if (kind != KernelKind::AppendKV) {
    if (queryLen != 1)
      name += fmt::format("_ql{}", queryLen);
    if (causal)
      name += "_causal";
    if (slidingWindow)
      name += "_swa";
    if (alibi)
      name += "_alibi";
    if (softcap)
      name += "_softcap";
    if (writeLse)
      name += "_lse";
    if (kind == KernelKind::Decode)
      name += fmt::format("_w{}s{}r{}", schedule.warps, schedule.stages,
                          schedule.rowTiles);
    else
      name += fmt::format("_m{}n{}w{}s{}", prefillSchedule.blockM,
                          prefillSchedule.blockN, prefillSchedule.warps,
                          prefillSchedule.stages);
    // mma.sync names stay as they were before the wgmma path existed.
    if (isPrefill() && prefillSchedule.mma == PrefillMma::Wgmma)
      name += "_wgmma";
  }
  if (isFP8KV() && perHeadKVScale)
    name += "_headscale";
  return name;
}

bool KernelSpec::operator==(const KernelSpec &o) const {
  return kind == o.kind && arch == o.arch && qType == o.qType &&
         kvType == o.kvType && numQHeads == o.numQHeads &&
         numKVHeads == o.numKVHeads && headDim == o.headDim &&
         pageSize == o.pageSize && layout == o.layout &&
         queryLen == o.queryLen && causal == o.causal &&
         slidingWindow == o.slidingWindow && alibi == o.alibi &&
         softcap == o.softcap && perHeadKVScale == o.perHeadKVScale &&
         writeLse == o.writeLse && schedule == o.schedule &&
         prefillSchedule == o.prefillSchedule;
}

} // namespace attn
