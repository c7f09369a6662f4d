//===- LowerToKernel.cpp - attn ops to kernel launches --------------------===//
//
// Replaces each op a kernel runs (runsKernel: the scheduled attention ops
// and attn.append_kv) by the attn.kernel_launch of its specialized
// template. The rewrite is one op to one op with no fixpoint, so it walks the
// module instead of running the greedy pattern driver, which would also erase
// attention ops whose results are unused (they are Pure) and so change more
// than the lowering.
//
//===----------------------------------------------------------------------===//
#include "compiler/Transforms/KernelSpecs.h"
#include "compiler/Transforms/Passes.h"
#include "dialect/IR/AttnOps.h"

#include "mlir/IR/Builders.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNLOWERTOKERNELPASS
#include "compiler/Transforms/Passes.h.inc"

namespace {

/// An op to replace and the spec of the kernel that runs it.
struct Lowering {
  Operation *op;
  ::attn::KernelSpec spec;
};

KernelLaunchOp buildLaunch(OpBuilder &builder, Operation *op,
                           const ::attn::KernelSpec &spec) {
  return builder.create<KernelLaunchOp>(
      op->getLoc(), op->getResultTypes(),
      FlatSymbolRefAttr::get(builder.getContext(), spec.symbol()),
      KernelSpecAttr::get(builder.getContext(), spec), op->getOperands());
}

struct AttnLowerToKernelPass final
    : impl::AttnLowerToKernelPassBase<AttnLowerToKernelPass> {
  using AttnLowerToKernelPassBase::AttnLowerToKernelPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Derive every spec first and report every op no kernel runs; the module
    // is changed only when all of them can be lowered.
    SmallVector<Lowering> lowerings;
    bool ok = true;
    module.walk([&](Operation *op) {
      if (!runsKernel(op))
        return;
      std::optional<::attn::Arch> arch = getTargetArch(op);
      if (!arch) {
        op->emitError() << "no target for '" << op->getName()
                        << "': the module has no '"
                        << AttnDialect::getArchAttrName()
                        << "'; run attn-select-schedule first";
        ok = false;
        return;
      }
      if (takesSchedule(op) && !getScheduleOf(op)) {
        op->emitOpError() << "has no schedule; run attn-select-schedule first";
        ok = false;
        return;
      }
      // The spec (a hand-written schedule included) must be one its template
      // and arch run before anything is derived from it (the grid rule
      // divides by its tiles).
      FailureOr<::attn::KernelSpec> spec = getKernelSpec(op, *arch);
      if (failed(spec) || failed(verifyKernelSpecAt(op, *spec))) {
        ok = false;
        return;
      }
      lowerings.push_back({op, *spec});
    });
    if (!ok)
      return signalPassFailure();

    OpBuilder builder(&getContext());
    for (const Lowering &lowering : lowerings) {
      builder.setInsertionPoint(lowering.op);
      KernelLaunchOp launch = buildLaunch(builder, lowering.op, lowering.spec);
      ++numLaunches;
      lowering.op->replaceAllUsesWith(launch.getOuts());
      lowering.op->erase();
    }
  }
};

} // namespace
} // namespace mlir::attn
