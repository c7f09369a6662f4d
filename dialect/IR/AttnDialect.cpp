//===- AttnDialect.cpp - attn dialect, attributes, types ------------------===//
//
// Dialect registration, the mask attribute and paged KV-cache type verifiers,
// and the KV-cache shape syntax (`8x128xbf16`).
//
//===----------------------------------------------------------------------===//
#include "dialect/IR/AttnDialect.h"
#include "codegen/KernelLimits.h"
#include "dialect/IR/AttnOps.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::attn;

#include "dialect/IR/AttnEnums.cpp.inc"
#include "dialect/IR/AttnOpsDialect.cpp.inc"

//===----------------------------------------------------------------------===//
// KV shape syntax: <kv_heads>x<head_dim>x<element type>
//===----------------------------------------------------------------------===//

static ParseResult parseKVShape(AsmParser &parser, int64_t &numKvHeads,
                                int64_t &headDim, Type &elementType) {
  SmallVector<int64_t, 2> dims;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseDimensionList(dims, /*allowDynamic=*/false))
    return failure();
  if (dims.size() != 2)
    return parser.emitError(loc, "expected <kv_heads>x<head_dim>x<type>, got ")
           << dims.size() << " dimensions";
  numKvHeads = dims[0];
  headDim = dims[1];
  return parser.parseType(elementType);
}

static void printKVShape(AsmPrinter &printer, int64_t numKvHeads,
                         int64_t headDim, Type elementType) {
  printer << numKvHeads << 'x' << headDim << 'x' << elementType;
}

#define GET_ATTRDEF_CLASSES
#include "dialect/IR/AttnAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialect/IR/AttnOpsTypes.cpp.inc"

//===----------------------------------------------------------------------===//
// Dialect
//===----------------------------------------------------------------------===//

void AttnDialect::initialize() {
  registerAttributes();
  registerTypes();
  addOperations<
#define GET_OP_LIST
#include "dialect/IR/AttnOps.cpp.inc"
      >();
}

void AttnDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialect/IR/AttnAttrs.cpp.inc"
      >();
}

void AttnDialect::registerTypes() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialect/IR/AttnOpsTypes.cpp.inc"
      >();
}

bool mlir::attn::isFP8Type(Type type) {
  return isa<Float8E4M3FNType, Float8E5M2Type>(type);
}

bool mlir::attn::isCacheElementType(Type type) {
  return type.isF16() || type.isBF16() || isFP8Type(type);
}

//===----------------------------------------------------------------------===//
// MaskAttr
//===----------------------------------------------------------------------===//

LogicalResult MaskAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               MaskKind kind, std::optional<int64_t> window) {
  if (!window)
    return success();
  if (*window < 0)
    return emitError() << "sliding window must be non-negative, got "
                       << *window;
  if (kind != MaskKind::causal)
    return emitError() << "a sliding window needs a causal mask";
  return success();
}

//===----------------------------------------------------------------------===//
// PagedKVType
//===----------------------------------------------------------------------===//

LogicalResult PagedKVType::verify(function_ref<InFlightDiagnostic()> emitError,
                                  int64_t numKvHeads, int64_t headDim,
                                  Type elementType, int64_t pageSize,
                                  KVLayout layout) {
  if (numKvHeads < 1)
    return emitError() << "paged_kv needs at least one kv head, got "
                       << numKvHeads;
  if (!::attn::isSupportedHeadDim(headDim))
    return emitError() << "paged_kv head_dim " << headDim
                       << " is not supported; expected a multiple of "
                       << ::attn::kHeadDimMultiple << " from "
                       << ::attn::kMinHeadDim << " to " << ::attn::kMaxHeadDim;
  if (!isCacheElementType(elementType))
    return emitError() << "paged_kv element type " << elementType
                       << " is not allowed; expected f16, bf16, f8E4M3FN or "
                          "f8E5M2";
  if (!::attn::isSupportedPageSize(pageSize))
    return emitError() << "paged_kv page_size " << pageSize
                       << " is not supported; expected "
                       << ::attn::kMinPageSize << " to "
                       << ::attn::kMaxPageSize;
  return success();
}

bool PagedKVType::isFP8() const { return isFP8Type(getElementType()); }
