//===- Modifiers.h - score_mod / mask_mod regions to CUDA -------*- C++ -*-===//
//
// An attention op's modifier regions become CUDA statements that the
// generated Config holds as device functions (codegen/EmitCuda.cpp) and the
// templates call through Variant<Config> (templates/attn/variant.cuh): the
// same code a person would write by hand, inlined into every kernel. The
// text is a pure function of the region, so equal regions give equal
// KernelSpecs, kernel names and cache entries.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_COMPILER_TRANSFORMS_MODIFIERS_H
#define ATTN_COMPILER_TRANSFORMS_MODIFIERS_H

#include "dialect/IR/AttnOps.h"

#include <string>

namespace mlir::attn {

/// What a KernelSpec carries of an op's modifiers (spec/KernelSpec.h:
/// scoreMod, maskMod, maskModTiles, aux): members of the generated Config
/// that Variant<Config> (templates/attn/variant.cuh) calls.
struct ModifierSource {
  /// `struct ScoreModHead`, `scoreModHead(request, q_head, kv_head, aux)`
  /// (the region's per-head values, computed once per row) and
  /// `float scoreMod(score, request, q_pos, k_pos, q_head, kv_head, aux,
  /// head)`, `kScoreModOutOfLine` and, where that is true, `scoreModRow`
  /// (scoreMod over N scores of a row in one out-of-line call), and
  /// `kScoreModCostly` (KernelSpec::costlyRegions); empty without a
  /// score_mod.
  std::string scoreMod;
  /// `bool maskMod(request, q_pos, k_pos, q_head, kv_head, aux)` and
  /// `kMaskModCostly`; empty without a mask_mod.
  std::string maskMod;
  /// `BoolRange maskModTile(Range request, Range q_pos, Range k_pos, Range
  /// q_head, Range kv_head)`: the interval form of mask_mod, whether some
  /// pair in the ranges may be visible (else the kernels skip the tile) and
  /// whether some may be hidden (else they do not mask it).
  std::string maskModTiles;
  /// The aux tables' types, e.g. "f32:8x32,i32:?".
  std::string aux;
};

/// The CUDA source of `op`'s regions. Emits an error at the op inside a
/// region that has no CUDA form (the verifier admits every arith and math
/// op; a few, such as the extended-result ones, have none here).
FailureOr<ModifierSource> emitModifiers(AttentionOpInterface op);

} // namespace mlir::attn

#endif // ATTN_COMPILER_TRANSFORMS_MODIFIERS_H
