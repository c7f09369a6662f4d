//===- Passes.h - attn compiler passes --------------------------*- C++ -*-===//
//
// Declarations of the passes in Passes.td: create<Def>() for each, the
// options structs, and registerAttnPasses().
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_COMPILER_TRANSFORMS_PASSES_H
#define ATTN_COMPILER_TRANSFORMS_PASSES_H

#include "dialect/IR/AttnDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace mlir::attn {

#define GEN_PASS_DECL
#include "compiler/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "compiler/Transforms/Passes.h.inc"

} // namespace mlir::attn

#endif // ATTN_COMPILER_TRANSFORMS_PASSES_H
