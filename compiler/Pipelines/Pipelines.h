//===- Pipelines.h - attn pass pipelines ------------------------*- C++ -*-===//
//
// attn-pipeline: attn ops -> attn.kernel_launch for one GPU target. attn-opt
// exposes it for tests, and the front end (JIT, attn-aot) builds the same
// pipeline, so lit tests and production run identical passes.
//
// This header includes no generated file, so tools/RegisterAttn.h can list
// the registrations without a build dependency on compiler/.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_COMPILER_PIPELINES_PIPELINES_H
#define ATTN_COMPILER_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassOptions.h"

#include <string>

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace mlir::attn {

/// Options of attn-pipeline.
struct AttnPipelineOptions : public PassPipelineOptions<AttnPipelineOptions> {
  Option<std::string> arch{*this, "arch",
                           llvm::cl::desc("target GPU: sm_80, sm_89 or sm_90a"),
                           llvm::cl::init("sm_90a")};
};

/// Adds attn-pipeline to `pm` (on builtin.module): attn-select-schedule for
/// `options.arch`, then attn-lower-to-kernel. The input is verified where it
/// enters (parser, front end) and the pass manager verifies after each pass.
void buildAttnPipeline(OpPassManager &pm, const AttnPipelineOptions &options);

/// Registers attn-pipeline with the global pass registry.
void registerAttnPipelines();

/// Registers every attn pass (Passes.td) with the global pass registry: the
/// generated registerAttnPasses() behind a declaration that needs no
/// generated header.
void registerAttnCompilerPasses();

} // namespace mlir::attn

#endif // ATTN_COMPILER_PIPELINES_PIPELINES_H
