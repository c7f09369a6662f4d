//===- AttnOps.h - attn dialect ops ----------------------------*- C++ -*-===//
//
// The attention ops (prefill, paged_prefill, decode, append_kv, merge_states)
// and AttentionOpInterface, which the first three implement.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_DIALECT_IR_ATTNOPS_H
#define ATTN_DIALECT_IR_ATTNOPS_H

#include "dialect/IR/AttnDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::attn {
/// AttentionOpInterface::getHeadTable: the operand of a per-query-head
/// table of templates/attn/variant_knobs.h, by its operand name.
template <typename AttentionOp>
Value getHeadTableOf(AttentionOp op, llvm::StringRef operand) {
#define ATTN_HEAD_TABLE(flag, pointer, name, accessor)                         \
  if (operand == name)                                                         \
    return op.accessor();
#include "templates/attn/variant_knobs.h"
  return Value();
}
} // namespace mlir::attn

#include "dialect/IR/AttnInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialect/IR/AttnOps.h.inc"

namespace mlir::attn {
/// Whether a score_mod or mask_mod region may hold `op`: the arith and math
/// ops whose meaning templates/attn/region_ops.h gives (the one list both
/// the verifier and compiler/Transforms/Modifiers.cpp follow), scf.if and
/// its scf.yield, attn.aux_load and attn.yield. All are pure.
bool isModifierOp(Operation *op);
/// The scalar types a modifier region computes in: i1, i32, i64, f32, f64.
bool isModifierScalar(Type type);
} // namespace mlir::attn

#endif // ATTN_DIALECT_IR_ATTNOPS_H
