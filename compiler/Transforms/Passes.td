//===- Passes.td - attn compiler passes --------------------*- tablegen -*-===//
//
// The passes that take attn ops to kernel-level IR: pick a schedule for the
// target GPU, then turn each op into the launch of one specialized kernel
// template. They live here, not in dialect/, so the dialect library does not
// depend on lowering code.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_COMPILER_TRANSFORMS_PASSES_TD
#define ATTN_COMPILER_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def AttnSelectSchedulePass
    : Pass<"attn-select-schedule", "::mlir::ModuleOp"> {
  let summary = "choose a GPU schedule for every attn.decode and prefill";
  let description = [{
    Records the target on the module (`attn.arch = "sm_90a"`) and, on every
    `attn.decode` without one, a `#attn.decode_schedule`: warps per CTA,
    cp.async pipeline depth, GQA row tiles (16 rows of (query token, q head)
    per tile) and the split-KV policy; on every `attn.prefill` and
    `attn.paged_prefill` without one, a `#attn.prefill_schedule`: warps,
    query rows per CTA (16 or 32 per warp), keys per K/V tile and ring
    depth; on every `attn.mla_decode` without one, its decode schedule (four
    warps, one row tile, the ring depth). Loads are always 16-byte vectors (8
    f16/bf16 or 16 FP8 elements), the unit every template moves data in, so
    the vector width is not a schedule knob. An op that already has a
    schedule keeps it (a user can pin one). The heuristics are
    `attn::chooseDecodeSchedule`, `attn::choosePrefillSchedule` and
    `attn::chooseMlaDecodeSchedule`
    (compiler/Transforms/Schedule.h), shared with the JIT and attn-aot.

    A module that already names a different target is an error: its pinned
    schedules were chosen for that GPU.
  }];
  let options = [
    Option<"arch", "arch", "std::string", /*default=*/"\"sm_90a\"",
           "target GPU: sm_80, sm_89 or sm_90a">,
  ];
  let statistics = [
    Statistic<"numScheduled", "num-scheduled",
              "attn.decode, attn.prefill, attn.paged_prefill and "
              "attn.mla_decode ops given a schedule">,
    Statistic<"numPinned", "num-pinned",
              "attn.decode, attn.prefill, attn.paged_prefill and "
              "attn.mla_decode ops that kept their pinned schedule">,
  ];
  let dependentDialects = ["::mlir::attn::AttnDialect"];
}

def AttnLowerToKernelPass : Pass<"attn-lower-to-kernel", "::mlir::ModuleOp"> {
  let summary = "turn scheduled attn ops into attn.kernel_launch";
  let description = [{
    Replaces every op a generated kernel runs (the attention ops and
    `attn.mla_decode`, which need a schedule: run attn-select-schedule
    first, and `attn.append_kv`)
    by an `attn.kernel_launch` naming the kernel's symbol and its
    compile-time parameters (`#attn.kernel_spec`, the full
    `attn::KernelSpec`, from which codegen picks the template, entry and
    launch ABI). Operands and results are kept, so the IR stays well typed;
    runtime values (scale, soft-cap value, window size) are the host's, not
    the launch's.

    `attn.merge_states` has no kernel template yet: each is reported at its
    location and the pass fails without changing the module.
  }];
  let statistics = [
    Statistic<"numLaunches", "num-launches",
              "ops lowered to a kernel launch">,
  ];
  let dependentDialects = ["::mlir::attn::AttnDialect"];
}

#endif // ATTN_COMPILER_TRANSFORMS_PASSES_TD
