//===- Ops.h - the operations attn compiles, one row each -------*- C++ -*-===//
//
// The one home of an operation (a kernel kind a host asks for by a variant):
//
//   ATTN_OP(Type, member, name)
//
// Type   the C++ stem: its host variant is Type##Variant (spec/Variant.h),
//        its loaded kernel runtime::Type##Kernel (runtime/kernels/), its
//        front end build##Type##Module / compile##Type##Variant
//        (compiler/Frontend/Frontend.h);
// member the C++ name of its loader in every kernel source (Jit::member,
//        KernelSource::member, AotLibrary::member);
// name   its name outside C++: attn-aot's config section, the C ABI's
//        attn_<name>_* functions and types, Python's.
//
// Every layer that handles ops expands this table with its own ATTN_OP (as
// templates/attn/variant_knobs.h does for knobs): the JIT's compile and
// load, kernel sources, AOT library lookups, the kernel-of-a-variant map
// (runtime/kernels/Kernels.h). Include it with ATTN_OP defined; it undefines
// it. docs/architecture.md, "Adding an op", lists what a new row needs.
//
//===----------------------------------------------------------------------===//

#ifndef ATTN_OP
#error "define ATTN_OP(Type, member, name) before including spec/Ops.h"
#endif

ATTN_OP(Decode, decode, decode)
ATTN_OP(Prefill, prefill, prefill)
ATTN_OP(AppendKV, appendKV, append_kv)
ATTN_OP(MergeStates, mergeStates, merge_states)
ATTN_OP(MlaDecode, mlaDecode, mla_decode)

#undef ATTN_OP
