//===- VariantKey.h - names of variants for lookups -------------*- C++ -*-===//
//
// Two readable, deterministic names of a variant. The kernel key holds what
// chooses its kernel: types, shapes, mask kind, feature flags and a pinned
// schedule, but not the values every launch passes (scale, soft-cap value,
// window size), so one compiled kernel serves every such value; AOT
// libraries index their kernels by it. The variant key adds those values:
// the JIT memoizes loaded kernels, which carry them, by it.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_VARIANTKEY_H
#define ATTN_RUNTIME_VARIANTKEY_H

#include "spec/Variant.h"

#include <string>

namespace attn::runtime {

std::string kernelKey(const DecodeVariant &variant);
std::string kernelKey(const PrefillVariant &variant);
std::string kernelKey(const AppendKVVariant &variant);

std::string variantKey(const DecodeVariant &variant);
std::string variantKey(const PrefillVariant &variant);
std::string variantKey(const AppendKVVariant &variant);

} // namespace attn::runtime

#endif // ATTN_RUNTIME_VARIANTKEY_H
