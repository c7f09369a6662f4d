//===- SelectSchedule.cpp - choose a GPU schedule per attention op --------===//
//
// Records the target on the module and, on every op whose kernel takes a
// schedule (takesSchedule: the attention ops, attn.mla_decode) and has
// none, the schedule its template takes
// (#attn.decode_schedule or #attn.prefill_schedule); the heuristics
// themselves are in Schedule.h. Every
// schedule, chosen or pinned, is then checked against what its template and
// the target can run, with an error at the op naming the field and limit.
//
//===----------------------------------------------------------------------===//
#include "compiler/Transforms/KernelSpecs.h"
#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/Schedule.h"
#include "dialect/IR/AttnOps.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNSELECTSCHEDULEPASS
#include "compiler/Transforms/Passes.h.inc"

namespace {

struct AttnSelectSchedulePass final
    : impl::AttnSelectSchedulePassBase<AttnSelectSchedulePass> {
  using AttnSelectSchedulePassBase::AttnSelectSchedulePassBase;

  /// Checks the option once, before any IR is touched, so a typo reads as
  /// one line and not as a failure on the module.
  LogicalResult initialize(MLIRContext *context) override {
    target = ::attn::parseArch(arch.getValue());
    if (!target)
      return emitError(UnknownLoc::get(context))
             << "attn-select-schedule: unknown arch '" << arch.getValue()
             << "'; expected " << describeArchs();
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // One target per module: schedules already on its ops (pinned, or from
    // an earlier run) were chosen for the target it names.
    Builder builder(&getContext());
    StringAttr archName = builder.getStringAttr(::attn::toString(*target));
    Attribute recorded = module->getAttr(AttnDialect::getArchAttrName());
    if (recorded && recorded != archName) {
      module.emitError() << "module targets " << recorded
                         << " but attn-select-schedule was asked for "
                         << archName;
      return signalPassFailure();
    }
    module->setAttr(AttnDialect::getArchAttrName(), archName);

    WalkResult result = module.walk([&](Operation *op) {
      if (!takesSchedule(op))
        return WalkResult::advance();
      FailureOr<::attn::KernelSpec> spec = getKernelSpec(op, *target);
      if (failed(spec))
        return WalkResult::interrupt();
      if (getScheduleOf(op)) {
        ++numPinned;
      } else {
        chooseSchedule(*spec);
        setScheduleOf(op, getScheduleAttr(&getContext(), *spec));
        ++numScheduled;
      }
      return failed(verifyKernelSpecAt(op, *spec)) ? WalkResult::interrupt()
                                                   : WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }

  /// The parsed `arch` option.
  std::optional<::attn::Arch> target;
};

} // namespace
} // namespace mlir::attn
