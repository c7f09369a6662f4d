//===- AttnOps.h - attn dialect ops ----------------------------*- C++ -*-===//
//
// The attention ops (prefill, paged_prefill, decode, append_kv, merge_states).
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_DIALECT_IR_ATTNOPS_H
#define ATTN_DIALECT_IR_ATTNOPS_H

#include "dialect/IR/AttnDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "dialect/IR/AttnOps.h.inc"

#endif // ATTN_DIALECT_IR_ATTNOPS_H
