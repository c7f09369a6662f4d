//===- Kernels.h - every op's kernel, by its variant ------------*- C++ -*-===//
//
// The loaded kernel of each operation of spec/Ops.h, found by the type of
// its variant: KernelFor<DecodeVariant> is DecodeKernel. Code written once
// for every op (the JIT, kernel sources, AOT libraries) is a template over
// the variant and uses this; every kernel has create(spec, variant,
// library) and the KernelHandle base.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_KERNELS_H
#define ATTN_RUNTIME_KERNELS_H

#include "attn/runtime/kernels/AppendKV.h"
#include "attn/runtime/kernels/Decode.h"
#include "attn/runtime/kernels/MergeStates.h"
#include "attn/runtime/kernels/MlaDecode.h"
#include "attn/runtime/kernels/Prefill.h"
#include "spec/Variant.h"

namespace attn::runtime {

template <class Variant> struct KernelOf;
#define ATTN_OP(Type, member, name)                                            \
  template <> struct KernelOf<Type##Variant> {                                 \
    using type = Type##Kernel;                                                 \
    static constexpr const char *opName = #name;                               \
  };
#include "spec/Ops.h"

template <class Variant> using KernelFor = typename KernelOf<Variant>::type;

} // namespace attn::runtime

#endif // ATTN_RUNTIME_KERNELS_H
