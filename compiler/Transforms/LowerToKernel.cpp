//===- LowerToKernel.cpp - attn ops to kernel launches --------------------===//
//
// Replaces each scheduled attn.decode, attn.prefill and attn.paged_prefill
// and each attn.append_kv by the attn.kernel_launch of its specialized
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

/// The spec of an attention op that must carry a schedule (attn.decode,
/// attn.prefill, attn.paged_prefill); fails with an error at `op` if it has
/// none yet.
template <typename ScheduledOp>
FailureOr<::attn::KernelSpec> getScheduledSpec(
    ScheduledOp op, ::attn::Arch arch,
    FailureOr<::attn::KernelSpec> (*specOf)(ScheduledOp, ::attn::Arch)) {
  if (!op.getScheduleAttr())
    return op.emitOpError() << "has no schedule; run attn-select-schedule "
                               "first";
  return specOf(op, arch);
}

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
      if (isa<MergeStatesOp>(op)) {
        op->emitError() << "no kernel template for '" << op->getName()
                        << "' yet";
        ok = false;
        return;
      }
      if (!isa<DecodeOp, PrefillOp, PagedPrefillOp, AppendKVOp>(op))
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
      FailureOr<::attn::KernelSpec> spec;
      if (auto decode = dyn_cast<DecodeOp>(op))
        spec = getScheduledSpec(decode, *arch, getDecodeKernelSpec);
      else if (auto prefill = dyn_cast<PrefillOp>(op))
        spec = getScheduledSpec(prefill, *arch, getPrefillKernelSpec);
      else if (auto paged = dyn_cast<PagedPrefillOp>(op))
        spec = getScheduledSpec(paged, *arch, getPagedPrefillKernelSpec);
      else
        spec = getAppendKVKernelSpec(cast<AppendKVOp>(op), *arch);
      // The spec (a hand-written schedule included) must be one its template
      // and arch run before anything is derived from it (the grid rule
      // divides by its tiles).
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
      if (isa<DecodeOp>(lowering.op))
        ++numDecodeLaunches;
      else if (isa<PrefillOp>(lowering.op))
        ++numPrefillLaunches;
      else if (isa<PagedPrefillOp>(lowering.op))
        ++numPagedPrefillLaunches;
      else
        ++numAppendKVLaunches;
      lowering.op->replaceAllUsesWith(launch.getOuts());
      lowering.op->erase();
    }
  }
};

} // namespace
} // namespace mlir::attn
