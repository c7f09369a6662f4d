//===- KernelSource.h - where loaded kernels come from ----------*- C++ -*-===//
//
// A KernelSource loads the kernel of a variant, whoever compiled it: the JIT
// (Jit::kernelSource) or an AOT library (kernelsFrom, AotLibrary.h). It has
// one loader per op of spec/Ops.h, under the op's member name
// (source.decode(variant), ...), and load(variant) for code written once
// for every op. A new op's loader comes from its row in spec/Ops.h.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_KERNELSOURCE_H
#define ATTN_RUNTIME_KERNELSOURCE_H

#include "attn/runtime/kernels/Kernels.h"

#include "llvm/Support/Error.h"

#include <functional>
#include <memory>

namespace attn::runtime {

template <class Variant>
using KernelLoader =
    std::function<llvm::Expected<std::shared_ptr<const KernelFor<Variant>>>(
        const Variant &)>;

struct KernelSource {
#define ATTN_OP(Type, member, name) KernelLoader<Type##Variant> member;
#include "spec/Ops.h"

  /// The kernel of `variant`, through its op's loader.
  template <class Variant>
  llvm::Expected<std::shared_ptr<const KernelFor<Variant>>>
  load(const Variant &variant) const {
    return loaderOf(variant)(variant);
  }

  /// A source whose every loader calls `load(variant)`, a generic callable
  /// (a lambda taking `const auto &`).
  template <class Load> static KernelSource of(Load load) {
    KernelSource source;
#define ATTN_OP(Type, member, name)                                            \
  source.member = [load](const Type##Variant &v) { return load(v); };
#include "spec/Ops.h"
    return source;
  }

private:
#define ATTN_OP(Type, member, name)                                            \
  const KernelLoader<Type##Variant> &loaderOf(const Type##Variant &) const {   \
    return member;                                                             \
  }
#include "spec/Ops.h"
};

} // namespace attn::runtime

#endif // ATTN_RUNTIME_KERNELSOURCE_H
