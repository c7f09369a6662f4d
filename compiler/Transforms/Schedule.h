//===- Schedule.h - the schedule heuristics ---------------------*- C++ -*-===//
//
// How the paged-decode and prefill templates are laid out on a GPU,
// chosen from the variant and the target alone. One function per template,
// so attn-select-schedule, the JIT and attn-aot pick the same schedule for
// the same variant.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_COMPILER_TRANSFORMS_SCHEDULE_H
#define ATTN_COMPILER_TRANSFORMS_SCHEDULE_H

#include "spec/KernelSpec.h"
#include "templates/attn/decode_layout.h"

#include <cstdint>

namespace mlir::attn {

/// Rows of one MMA tile (a row is one (query token, q head of the group))
/// and KV tokens per stage come from templates/attn/decode_layout.h.
using ::attn::kDecodeTileRows;

/// Bytes of one global->shared load. Fixed, not a schedule knob: 16 bytes
/// (8 f16/bf16 or 16 FP8 elements) is the widest load, and every supported
/// head dim is a multiple of 8 elements (spec/KernelLimits.h).
constexpr int kDecodeVectorBytes = 16;

/// Shared memory one SM of `arch` offers to CTAs, in bytes.
int64_t sharedMemoryPerSM(::attn::Arch arch);

/// The schedule for a decode `spec` (its `schedule` field is ignored): reads
/// the arch, head dim, q and KV element sizes, group size and query_len.
::attn::DecodeSchedule chooseDecodeSchedule(const ::attn::KernelSpec &spec);

/// The schedule for a prefill or paged-prefill `spec` (its
/// `prefillSchedule` field is ignored): reads the arch, head dim and KV
/// element size.
::attn::PrefillSchedule choosePrefillSchedule(const ::attn::KernelSpec &spec);

/// The schedule for an MLA decode `spec`: two CTAs of four warps per SM.
::attn::DecodeSchedule chooseMlaDecodeSchedule(const ::attn::KernelSpec &spec);

/// Sets the schedule of `spec`'s template (decode or prefill) to the one the
/// heuristic above chooses for it.
void chooseSchedule(::attn::KernelSpec &spec);

} // namespace mlir::attn

#endif // ATTN_COMPILER_TRANSFORMS_SCHEDULE_H
