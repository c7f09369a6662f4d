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

#endif // ATTN_DIALECT_IR_ATTNOPS_H
