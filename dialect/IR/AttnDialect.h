//===- AttnDialect.h - attn dialect, attributes, types ---------*- C++ -*-===//
//
// The attn dialect with its enums, attributes and the paged KV-cache type.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_DIALECT_IR_ATTNDIALECT_H
#define ATTN_DIALECT_IR_ATTNDIALECT_H

#include "spec/KernelSpec.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"

#include "dialect/IR/AttnEnums.h.inc"

namespace attn {
/// Uniquing of #attn.kernel_spec and the schedule attributes, which hold
/// these structs (found by ADL).
llvm::hash_code hash_value(const KernelSpec &spec);
llvm::hash_code hash_value(const DecodeSchedule &schedule);
llvm::hash_code hash_value(const PrefillSchedule &schedule);
} // namespace attn

namespace mlir::attn {
/// Parses a keyword naming one of the spec's enums (Attn_SpecEnumParameter):
/// `parse` is its inverse of attn::toString; the error names `expected`.
template <typename Enum>
FailureOr<Enum> parseSpecKeyword(AsmParser &parser,
                                 std::optional<Enum> (*parse)(std::string_view),
                                 StringRef expected) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef name;
  if (parser.parseKeyword(&name))
    return failure();
  if (std::optional<Enum> value = parse(std::string_view(name)))
    return *value;
  return parser.emitError(loc)
         << "expected " << expected << ", got '" << name << "'";
}
} // namespace mlir::attn

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

//===----------------------------------------------------------------------===//
// The one mapping between attn IR and the plain-C++ kernel spec
// (spec/KernelSpec.h), used by the attributes below, the lowering and the
// front end.
//===----------------------------------------------------------------------===//

/// The scalar type of a builtin element type: f16, bf16, f8E4M3FN (F8E4M3,
/// CUDA's __nv_fp8_e4m3), f8E5M2, f32; std::nullopt for any other type.
std::optional<::attn::ScalarType> toScalarType(Type type);

/// The builtin element type of a scalar type; inverse of toScalarType.
Type getElementType(MLIRContext *context, ::attn::ScalarType type);

/// The targets a kernel can be generated for, as messages list them:
/// "sm_80, sm_89 or sm_90a".
std::string describeArchs();

} // namespace mlir::attn

#endif // ATTN_DIALECT_IR_ATTNDIALECT_H
