//===- AttnDialect.h - attn dialect, attributes, types ---------*- C++ -*-===//
//
// The attn dialect with its enums, attributes and the paged KV-cache type.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_DIALECT_IR_ATTNDIALECT_H
#define ATTN_DIALECT_IR_ATTNDIALECT_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"

#include "dialect/IR/AttnEnums.h.inc"
#include "dialect/IR/AttnOpsDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/IR/AttnAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialect/IR/AttnOpsTypes.h.inc"

namespace mlir::attn {

/// True for the element types a KV cache may store in FP8.
bool isFP8Type(Type type);

/// True for the element types a KV cache may store: f16, bf16, FP8.
bool isCacheElementType(Type type);

} // namespace mlir::attn

#endif // ATTN_DIALECT_IR_ATTNDIALECT_H
