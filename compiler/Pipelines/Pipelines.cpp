//===- Pipelines.cpp - attn pass pipelines --------------------------------===//
#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

namespace mlir::attn {

void buildAttnPipeline(OpPassManager &pm, const AttnPipelineOptions &options) {
  AttnSelectSchedulePassOptions scheduleOptions;
  scheduleOptions.arch = options.arch;
  pm.addPass(createAttnSelectSchedulePass(scheduleOptions));
  pm.addPass(createAttnLowerToKernelPass());
}

void registerAttnPipelines() {
  PassPipelineRegistration<AttnPipelineOptions>(
      "attn-pipeline",
      "Lower attn ops to kernel launches for one GPU: attn-select-schedule, "
      "then attn-lower-to-kernel",
      buildAttnPipeline);
}

void registerAttnCompilerPasses() { registerAttnPasses(); }

} // namespace mlir::attn
