//===- RegisterAttn.h - what every attn tool registers ----------*- C++ -*-===//
//
// One place that lists the dialects, passes and pipelines the attn tools
// (attn-opt, attn-translate, attn-aot) know, so they stay in step.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TOOLS_REGISTERATTN_H
#define ATTN_TOOLS_REGISTERATTN_H

#include "compiler/Pipelines/Pipelines.h"
#include "dialect/IR/AttnDialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"

namespace mlir::attn {

/// Dialects an attn spec may use: attn itself, plus func and arith for the
/// functions and constants around attn ops.
inline void registerAttnDialects(DialectRegistry &registry) {
  registry.insert<AttnDialect, func::FuncDialect, arith::ArithDialect>();
}

/// Passes and pipelines every attn tool exposes (link AttnCompiler):
/// --attn-select-schedule, --attn-lower-to-kernel and --attn-pipeline.
inline void registerAttnPassesAndPipelines() {
  registerAttnCompilerPasses();
  registerAttnPipelines();
}

} // namespace mlir::attn

#endif // ATTN_TOOLS_REGISTERATTN_H
