//===- VariantKey.h - names of variants for lookups -------------*- C++ -*-===//
//
// Two readable, deterministic names of a variant. The kernel key holds what
// chooses its kernel: types, shapes, mask kind, feature flags and a pinned
// schedule, but not the values every launch passes (scale, soft-cap value,
// window size), so one compiled kernel serves every such value; AOT
// libraries index their kernels by it. The variant key adds those values:
// the JIT memoizes loaded kernels, which carry them, by it.
//
// A score_mod / mask_mod region enters both keys as its text with comments
// dropped and each run of white space made one space (regionKey), so a
// host's string and an attn-aot config's .mlir file find the same kernel
// whatever their layout. Other spellings of the same region (SSA names)
// make other keys; they compile to the same spec and kernel.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_VARIANTKEY_H
#define ATTN_RUNTIME_VARIANTKEY_H

#include "spec/Variant.h"

#include <string>
#include <string_view>

namespace attn::runtime {

std::string kernelKey(const DecodeVariant &variant);
std::string kernelKey(const PrefillVariant &variant);
std::string kernelKey(const AppendKVVariant &variant);
std::string kernelKey(const MergeStatesVariant &variant);
std::string kernelKey(const MlaDecodeVariant &variant);

std::string variantKey(const DecodeVariant &variant);
std::string variantKey(const PrefillVariant &variant);
std::string variantKey(const AppendKVVariant &variant);
std::string variantKey(const MergeStatesVariant &variant);
std::string variantKey(const MlaDecodeVariant &variant);

/// `region` (IR text) as the keys hold it: comments dropped, white space
/// runs outside string literals one space, none at either end.
std::string regionKey(std::string_view region);

} // namespace attn::runtime

#endif // ATTN_RUNTIME_VARIANTKEY_H
