//===- EmitCuda.h - KernelSpec to a CUDA translation unit ------*- C++ -*-===//
//
// The compiler never emits kernel bodies: a variant's translation unit is a
// config block (type aliases and constexpr knobs) plus thin extern "C" entries
// that instantiate a template from templates/. Pure functions of KernelSpec.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_CODEGEN_EMITCUDA_H
#define ATTN_CODEGEN_EMITCUDA_H

#include "spec/KernelSpec.h"

#include <string>

namespace attn {

/// The CUDA C++ source of `spec`'s kernel(s), ready for NVRTC with the
/// templates/ directory as include root.
std::string emitCuda(const KernelSpec &spec);

/// Name of the main extern "C" entry: "attn_" + spec.uri().
std::string kernelSymbol(const KernelSpec &spec);

/// Name of the device global holding the entry's dynamic shared memory in
/// bytes (decode and prefill TUs).
std::string smemBytesSymbol(const KernelSpec &spec);

/// CUDA spelling of a scalar type (`__nv_bfloat16`, `__nv_fp8_e4m3`, ...).
std::string_view cudaTypeName(ScalarType type);

} // namespace attn

#endif // ATTN_CODEGEN_EMITCUDA_H
