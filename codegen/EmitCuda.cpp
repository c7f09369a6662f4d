//===- EmitCuda.cpp - KernelSpec to a CUDA translation unit ---------------===//
#include "codegen/EmitCuda.h"

#include <fmt/format.h>

namespace attn {

std::string_view cudaTypeName(ScalarType type) {
  switch (type) {
  case ScalarType::F16:
    return "__half";
  case ScalarType::BF16:
    return "__nv_bfloat16";
  case ScalarType::F8E4M3:
    return "__nv_fp8_e4m3";
  case ScalarType::F8E5M2:
    return "__nv_fp8_e5m2";
  case ScalarType::F32:
    return "float";
  }
  return "?";
}

std::string kernelSymbol(const KernelSpec &spec) { return spec.symbol(); }

std::string smemBytesSymbol(const KernelSpec &spec) {
  return kernelSymbol(spec) + "_smem_bytes";
}

static const char *boolStr(bool b) { return b ? "true" : "false"; }

/// The score_mod and mask_mod device functions (bodies from
/// compiler/Transforms/Modifiers.cpp) that Variant<Config> calls, and their
/// flags; a kernel without them has the flags false and no functions.
static std::string emitModifierFunctions(const KernelSpec &spec) {
  constexpr const char *kPositions =
      "int32_t request, int32_t q_pos, int32_t k_pos, int32_t q_head, "
      "int32_t kv_head, const attn::AuxTable *aux";
  std::string text = fmt::format("  static constexpr bool kScoreMod = {};\n"
                                 "  static constexpr bool kMaskMod = {};\n",
                                 boolStr(!spec.scoreMod.empty()),
                                 boolStr(!spec.maskMod.empty()));
  if (!spec.scoreMod.empty())
    text += fmt::format("  static __device__ __forceinline__ float\n"
                        "  scoreMod(float score, {}) {{\n"
                        "    using attn::auxLoad;\n{}  }}\n",
                        kPositions, spec.scoreMod);
  if (!spec.maskMod.empty())
    text += fmt::format("  static __device__ __forceinline__ bool\n"
                        "  maskMod({}) {{\n"
                        "    using attn::auxLoad;\n{}  }}\n",
                        kPositions, spec.maskMod);
  if (!spec.maskModTiles.empty())
    text += fmt::format("  static __device__ __forceinline__ attn::BoolRange\n"
                        "  maskModTile(attn::Range request, attn::Range q_pos, "
                        "attn::Range k_pos, attn::Range q_head, "
                        "attn::Range kv_head) {{\n{}  }}\n",
                        spec.maskModTiles);
  return text;
}

/// The Config every configured template takes: the spec's types, shapes,
/// variant flags (templates/attn/variant_knobs.h) and schedule as constexpr
/// members. Templates ignore what they do not use; the code of every
/// feature whose flag is false is discarded at compile time.
static std::string emitConfig(const KernelSpec &spec) {
  const bool paged = spec.kind != KernelKind::Prefill;
  std::string config = fmt::format(
      R"cuda(struct Config {{
  using QType = {q_type};
  using KVType = {kv_type};
  static constexpr int kNumQHeads = {num_q_heads};
  static constexpr int kNumKVHeads = {num_kv_heads};
  static constexpr int kGroupSize = {group_size};
  static constexpr int kHeadDim = {head_dim};
  static constexpr bool kPaged = {paged};
  static constexpr int kPageSize = {page_size};
  static constexpr bool kLayoutHND = {layout_hnd};
  static constexpr int kQueryLen = {query_len};
)cuda",
      fmt::arg("q_type", cudaTypeName(spec.qType)),
      fmt::arg("kv_type", cudaTypeName(spec.kvType)),
      fmt::arg("num_q_heads", spec.numQHeads),
      fmt::arg("num_kv_heads", spec.numKVHeads),
      fmt::arg("group_size", spec.groupSize()),
      fmt::arg("head_dim", spec.headDim), fmt::arg("paged", boolStr(paged)),
      // Ragged prefill reads contiguous rows: pages of one token.
      fmt::arg("page_size", paged ? spec.pageSize : 1),
      fmt::arg("layout_hnd", boolStr(paged && spec.layout == KVLayout::HND)),
      fmt::arg("query_len", spec.queryLen));
#define ATTN_FLAG(member, name, uriTag, cudaConstant)                          \
  config += fmt::format("  static constexpr bool " #cudaConstant " = {};\n",   \
                        boolStr(spec.member));
#include "templates/attn/variant_knobs.h"
  config += emitModifierFunctions(spec);
  if (spec.kind == KernelKind::Decode)
    config += fmt::format("  static constexpr int kWarps = {};\n"
                          "  static constexpr int kStages = {};\n"
                          "  static constexpr int kRowTiles = {};\n",
                          spec.schedule.warps, spec.schedule.stages,
                          spec.schedule.rowTiles);
  else if (spec.isPrefill())
    config += fmt::format("  static constexpr int kWarps = {};\n"
                          "  static constexpr int kBlockM = {};\n"
                          "  static constexpr int kBlockN = {};\n"
                          "  static constexpr int kStages = {};\n",
                          spec.prefillSchedule.warps, spec.prefillSchedule.blockM,
                          spec.prefillSchedule.blockN,
                          spec.prefillSchedule.stages);
  return config + "};\n";
}

std::string emitCuda(const KernelSpec &spec) {
  const KernelTemplate &tmpl = kernelTemplate(spec);
  std::string source =
      fmt::format("// Generated by attn: {} for {}. Do not edit.\n"
                  "#include \"{}\"\n\n",
                  spec.uri(), toString(spec.arch), tmpl.header);
  if (tmpl.configured)
    source += "namespace {\n" + emitConfig(spec) + "} // namespace\n\n";
  if (!tmpl.traits.empty())
    source += fmt::format(
        "// Dynamic shared memory of the entry, read by the runtime at load\n"
        "// time so host and device never disagree about it.\n"
        "extern \"C\" __device__ const int {}_smem_bytes =\n"
        "    attn::{}<Config>::kSmemBytes;\n\n",
        kernelSymbol(spec), tmpl.traits);
  // Kernels with a schedule hold one CTA per SM's worth of registers.
  bool scheduled = tmpl.threads == 0;
  source += fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({}{})\n"
      "{}(const __grid_constant__ attn::{} params) {{\n"
      "  attn::{}{}(params);\n"
      "}}\n",
      threadsPerBlock(spec), scheduled ? ", 1" : "", kernelSymbol(spec),
      tmpl.params, tmpl.entry, tmpl.configured ? "<Config>" : "");
  return source;
}

} // namespace attn
