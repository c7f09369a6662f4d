//===- KernelSpecs.h - attn ops <-> kernel specs ----------------*- C++ -*-===//
//
// Which kernel runs an attn op: the attn::KernelSpec derived from the op (the
// one place the op -> spec rules live, shared by attn-select-schedule and
// attn-lower-to-kernel), the template it instantiates, its launch ABI and
// grid rule, and the spec back from a lowered attn.kernel_launch.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_COMPILER_TRANSFORMS_KERNELSPECS_H
#define ATTN_COMPILER_TRANSFORMS_KERNELSPECS_H

#include "dialect/IR/AttnOps.h"
#include "spec/KernelSpec.h"

#include "mlir/Support/LogicalResult.h"

#include <string>

namespace mlir::attn {

/// The spec of the kernel that runs `op` on `arch`: dtypes, heads, head dim,
/// page size and layout from the types; query_len; causal and sliding window
/// from the mask; ALiBi from the slopes operand; soft-cap from the attribute;
/// per-head FP8 scales when the scale vectors hold num_kv_heads > 1 values;
/// LSE from the second result; the schedule from the op (the default
/// DecodeSchedule when the op has none yet). Emits an error at `op` for IR
/// no kernel can run (kv scales of unknown or unequal lengths).
FailureOr<::attn::KernelSpec> getDecodeKernelSpec(DecodeOp op,
                                                  ::attn::Arch arch);

/// The spec of the ragged-prefill kernel that runs `op` on `arch`: q dtype,
/// q heads, KV heads and head dim from the types; causal and sliding window
/// from the mask; ALiBi from the slopes operand; soft-cap from the
/// attribute; LSE from the second result; the schedule from the op (the
/// default PrefillSchedule when the op has none yet). The cache fields take
/// their canonical prefill values (#attn.kernel_spec): kv_type = q_type,
/// page_size 0, layout NHD, query_len 1, no per-head KV scale.
FailureOr<::attn::KernelSpec> getPrefillKernelSpec(PrefillOp op,
                                                   ::attn::Arch arch);

/// The spec of the paged-prefill kernel that runs `op` on `arch`: the
/// prefill template reading K/V pages. q dtype, q heads, the mask, ALiBi,
/// soft-cap, LSE and the schedule as for getPrefillKernelSpec; KV type, KV
/// heads, head dim, page size and layout from the cache type; per-head FP8
/// scales as for getDecodeKernelSpec; query_len 1 (rows come from
/// cu_seqlens_q). Emits an error at `op` for kv scales of unknown or unequal
/// lengths.
FailureOr<::attn::KernelSpec> getPagedPrefillKernelSpec(PagedPrefillOp op,
                                                        ::attn::Arch arch);

/// The spec of the append_kv kernel that runs `op` on `arch`. Emits an error
/// at `op` when the kernel cannot run it (slot_mapping not i64, kv scales of
/// unknown or unequal lengths).
FailureOr<::attn::KernelSpec> getAppendKVKernelSpec(AppendKVOp op,
                                                    ::attn::Arch arch);

/// Whether a generated kernel runs `op` once it is lowered: the attention
/// ops (AttentionOpInterface), attn.mla_decode, attn.append_kv and
/// attn.merge_states.
bool runsKernel(Operation *op);

/// Whether `op`'s kernel takes a schedule attn-select-schedule chooses (the
/// attention ops and attn.mla_decode).
bool takesSchedule(Operation *op);
/// The schedule `op` holds (null: none yet); `op` takes one.
Attribute getScheduleOf(Operation *op);
/// Records `schedule` (getScheduleAttr's) on `op`, which takes one.
void setScheduleOf(Operation *op, Attribute schedule);

/// The spec of the kernel that runs `op` (an op runsKernel accepts) on
/// `arch`, by the op's rule above: the one place the passes dispatch on the
/// op. Emits an error at `op` for IR no kernel can run, and for ops that have
/// no kernel template yet (attn.merge_states).
FailureOr<::attn::KernelSpec> getKernelSpec(Operation *op, ::attn::Arch arch);

/// The schedule attribute of `spec`'s template: #attn.prefill_schedule for
/// the prefill kinds, #attn.decode_schedule otherwise.
Attribute getScheduleAttr(MLIRContext *context, const ::attn::KernelSpec &spec);

/// Checks `spec`, derived from `op`, against what its template and arch can
/// run (attn::checkKernelSpec: schedule ranges, registers, shared memory per
/// CTA, ...); the error, at `op`, names the field and the limit. Every
/// schedule passes through it, whether the pass chose it or a person wrote
/// it.
LogicalResult verifyKernelSpecAt(Operation *op, const ::attn::KernelSpec &spec);

/// The spec of a lowered launch: exactly the spec its #attn.kernel_spec was
/// built from. Fails, with an error at `op`, if the launch does not verify.
FailureOr<::attn::KernelSpec> getKernelSpec(KernelLaunchOp op);

/// The target recorded by attn-select-schedule on `op` or its nearest
/// enclosing op that has one (`attn.arch`); std::nullopt when none has.
std::optional<::attn::Arch> getTargetArch(Operation *op);

} // namespace mlir::attn

#endif // ATTN_COMPILER_TRANSFORMS_KERNELSPECS_H
