//===- AttnDialect.cpp - attn dialect, attributes, types ------------------===//
//
// Dialect registration, the attribute and paged KV-cache type verifiers, the
// KV-cache shape syntax (`8x128xbf16`), the `attn.arch` module attribute, and
// the conversions between attn IR and the plain-C++ kernel spec.
//
//===----------------------------------------------------------------------===//
#include "dialect/IR/AttnDialect.h"
#include "codegen/KernelLimits.h"
#include "dialect/IR/AttnOps.h"

#include "mlir/IR/BuiltinOps.h"
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

//===----------------------------------------------------------------------===//
// Flags of #attn.kernel_spec: `true` / `false`
//===----------------------------------------------------------------------===//

static FailureOr<bool> parseKernelSpecFlag(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return failure();
  if (keyword == "true")
    return true;
  if (keyword == "false")
    return false;
  return parser.emitError(loc, "expected 'true' or 'false', got '")
         << keyword << "'";
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

LogicalResult AttnDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attribute) {
  // Other attn.* discardable attributes are left to their users.
  if (attribute.getName() != getArchAttrName())
    return success();
  if (!isa<ModuleOp>(op))
    return op->emitError() << "'" << getArchAttrName()
                           << "' belongs on a builtin.module: one target per "
                              "compilation";
  auto arch = dyn_cast<StringAttr>(attribute.getValue());
  if (!arch || !::attn::parseArch(arch.getValue().str()))
    return op->emitError() << "'" << getArchAttrName()
                           << "' must name a target (" << describeArchs()
                           << "), got " << attribute.getValue();
  return success();
}

//===----------------------------------------------------------------------===//
// attn IR <-> attn::KernelSpec
//===----------------------------------------------------------------------===//

std::optional<::attn::ScalarType> mlir::attn::toScalarType(Type type) {
  using ::attn::ScalarType;
  if (type.isF16())
    return ScalarType::F16;
  if (type.isBF16())
    return ScalarType::BF16;
  if (isa<Float8E4M3FNType>(type))
    return ScalarType::F8E4M3;
  if (isa<Float8E5M2Type>(type))
    return ScalarType::F8E5M2;
  if (type.isF32())
    return ScalarType::F32;
  return std::nullopt;
}

Type mlir::attn::getElementType(MLIRContext *context,
                                ::attn::ScalarType type) {
  using ::attn::ScalarType;
  Builder builder(context);
  switch (type) {
  case ScalarType::F16:
    return builder.getF16Type();
  case ScalarType::BF16:
    return builder.getBF16Type();
  case ScalarType::F8E4M3:
    return builder.getFloat8E4M3FNType();
  case ScalarType::F8E5M2:
    return builder.getFloat8E5M2Type();
  case ScalarType::F32:
    return builder.getF32Type();
  }
  llvm_unreachable("unknown attn::ScalarType");
}

::attn::KVLayout mlir::attn::toSpecLayout(KVLayout layout) {
  return layout == KVLayout::hnd ? ::attn::KVLayout::HND
                                 : ::attn::KVLayout::NHD;
}

KVLayout mlir::attn::fromSpecLayout(::attn::KVLayout layout) {
  return layout == ::attn::KVLayout::HND ? KVLayout::hnd : KVLayout::nhd;
}

::attn::PrefillMma mlir::attn::toSpecMma(PrefillMma mma) {
  return mma == PrefillMma::wgmma ? ::attn::PrefillMma::Wgmma
                                  : ::attn::PrefillMma::Sync;
}

PrefillMma mlir::attn::fromSpecMma(::attn::PrefillMma mma) {
  return mma == ::attn::PrefillMma::Wgmma ? PrefillMma::wgmma : PrefillMma::sync;
}

::attn::KernelKind mlir::attn::toSpecKind(KernelKind kind) {
  switch (kind) {
  case KernelKind::decode:
    return ::attn::KernelKind::Decode;
  case KernelKind::append_kv:
    return ::attn::KernelKind::AppendKV;
  case KernelKind::prefill:
    return ::attn::KernelKind::Prefill;
  case KernelKind::paged_prefill:
    return ::attn::KernelKind::PagedPrefill;
  case KernelKind::copy_blocks:
    return ::attn::KernelKind::CopyBlocks;
  case KernelKind::advance_step:
    return ::attn::KernelKind::AdvanceStep;
  }
  llvm_unreachable("unknown mlir::attn::KernelKind");
}

KernelKind mlir::attn::fromSpecKind(::attn::KernelKind kind) {
  switch (kind) {
  case ::attn::KernelKind::Decode:
    return KernelKind::decode;
  case ::attn::KernelKind::AppendKV:
    return KernelKind::append_kv;
  case ::attn::KernelKind::Prefill:
    return KernelKind::prefill;
  case ::attn::KernelKind::PagedPrefill:
    return KernelKind::paged_prefill;
  case ::attn::KernelKind::CopyBlocks:
    return KernelKind::copy_blocks;
  case ::attn::KernelKind::AdvanceStep:
    return KernelKind::advance_step;
  }
  llvm_unreachable("unknown attn::KernelKind");
}

std::string mlir::attn::describeArchs() {
  using ::attn::Arch;
  std::string text;
  constexpr Arch archs[] = {Arch::SM80, Arch::SM89, Arch::SM90a};
  for (size_t i = 0; i < std::size(archs); ++i) {
    if (i)
      text += i + 1 == std::size(archs) ? " or " : ", ";
    text += ::attn::toString(archs[i]);
  }
  return text;
}

//===----------------------------------------------------------------------===//
// DecodeScheduleAttr
//===----------------------------------------------------------------------===//

LogicalResult
DecodeScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                           int warps, int stages, int rowTiles,
                           int minChunkTokens, int ctasPerSm) {
  // The context-free rules; what the schedule needs of its variant and arch
  // is checked where both are known (kernel_spec, attn-select-schedule).
  std::string problem = ::attn::checkDecodeSchedule(
      ::attn::DecodeSchedule{warps, stages, rowTiles, minChunkTokens, ctasPerSm});
  if (!problem.empty())
    return emitError() << problem;
  return success();
}

::attn::DecodeSchedule DecodeScheduleAttr::getSchedule() const {
  ::attn::DecodeSchedule schedule;
  schedule.warps = getWarps();
  schedule.stages = getStages();
  schedule.rowTiles = getRowTiles();
  schedule.minChunkTokens = getMinChunkTokens();
  schedule.ctasPerSM = getCtasPerSm();
  return schedule;
}

//===----------------------------------------------------------------------===//
// PrefillScheduleAttr
//===----------------------------------------------------------------------===//

LogicalResult
PrefillScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                            int warps, int blockM, int blockN, int stages,
                            PrefillMma mma) {
  std::string problem = ::attn::checkPrefillSchedule(
      ::attn::PrefillSchedule{warps, blockM, blockN, stages, toSpecMma(mma)});
  if (!problem.empty())
    return emitError() << problem;
  return success();
}

::attn::PrefillSchedule PrefillScheduleAttr::getSchedule() const {
  ::attn::PrefillSchedule schedule;
  schedule.warps = getWarps();
  schedule.blockM = getBlockM();
  schedule.blockN = getBlockN();
  schedule.stages = getStages();
  schedule.mma = toSpecMma(getMma());
  return schedule;
}

//===----------------------------------------------------------------------===//
// KernelSpecAttr
//===----------------------------------------------------------------------===//

/// The plain-C++ spec of kernel_spec parameters. The verifier admits only
/// known archs and types; the fallbacks keep an unverified attribute from
/// reading garbage. A spec keeps the default of the schedule its kernel does
/// not have, as a KernelSpec built by hand does.
static ::attn::KernelSpec
toKernelSpec(KernelKind kind, StringRef arch, Type qType, Type kvType,
             int numQHeads, int numKvHeads, int headDim, int pageSize,
             KVLayout layout, int queryLen, bool causal, bool slidingWindow,
             bool alibi, bool softcap, bool perHeadKvScale, bool writeLse,
             DecodeScheduleAttr schedule, PrefillScheduleAttr prefillSchedule) {
  ::attn::KernelSpec spec;
  spec.kind = toSpecKind(kind);
  spec.arch = ::attn::parseArch(arch.str()).value_or(spec.arch);
  spec.qType = toScalarType(qType).value_or(spec.qType);
  spec.kvType = toScalarType(kvType).value_or(spec.kvType);
  spec.numQHeads = numQHeads;
  spec.numKVHeads = numKvHeads;
  spec.headDim = headDim;
  spec.pageSize = pageSize;
  spec.layout = toSpecLayout(layout);
  spec.queryLen = queryLen;
  spec.causal = causal;
  spec.slidingWindow = slidingWindow;
  spec.alibi = alibi;
  spec.softcap = softcap;
  spec.perHeadKVScale = perHeadKvScale;
  spec.writeLse = writeLse;
  if (schedule)
    spec.schedule = schedule.getSchedule();
  if (prefillSchedule)
    spec.prefillSchedule = prefillSchedule.getSchedule();
  return spec;
}

LogicalResult KernelSpecAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, KernelKind kind,
    StringRef arch, Type qType, Type kvType, int numQHeads, int numKvHeads,
    int headDim, int pageSize, KVLayout layout, int queryLen, bool causal,
    bool slidingWindow, bool alibi, bool softcap, bool perHeadKvScale,
    bool writeLse, DecodeScheduleAttr schedule,
    PrefillScheduleAttr prefillSchedule) {
  bool decode = kind == KernelKind::decode;
  bool prefill = kind == KernelKind::prefill || kind == KernelKind::paged_prefill;
  StringRef kindName = stringifyKernelKind(kind);
  // The runtime builds the cache ops' specs itself (runtime/CacheOps.h);
  // IR never describes them.
  if (kind == KernelKind::copy_blocks || kind == KernelKind::advance_step)
    return emitError() << "kernel_spec kind " << kindName
                       << " is a runtime utility kernel; the compiler does "
                          "not lower to it";
  // What the IR spells that attn::KernelSpec cannot hold; every other rule
  // is checkKernelSpec's (codegen/KernelLimits.h), shared with the runtime.
  if (!::attn::parseArch(arch.str()))
    return emitError() << "kernel_spec arch \"" << arch
                       << "\" is not a target; expected " << describeArchs();
  if (!qType.isF16() && !qType.isBF16())
    return emitError() << "kernel_spec q_type must be f16 or bf16, got "
                       << qType;
  if (!isCacheElementType(kvType) || (kvType != qType && !isFP8Type(kvType)))
    return emitError() << "kernel_spec kv_type must be q_type (" << qType
                       << ") or FP8 (f8E4M3FN, f8E5M2), got " << kvType;
  if (decode && !schedule)
    return emitError() << "kernel_spec of a decode kernel needs a schedule";
  if (prefill && !prefillSchedule)
    return emitError() << "kernel_spec of a " << kindName
                       << " kernel needs a prefill_schedule";
  if (prefill && schedule)
    return emitError() << "kernel_spec schedule is for decode kernels; a "
                       << kindName << " kernel has a prefill_schedule";
  if (!prefill && prefillSchedule)
    return emitError()
           << "kernel_spec prefill_schedule is for prefill kernels only";
  if (kind == KernelKind::append_kv && schedule)
    return emitError() << "kernel_spec of an append_kv kernel has no schedule";

  ::attn::KernelSpec spec = toKernelSpec(
      kind, arch, qType, kvType, numQHeads, numKvHeads, headDim, pageSize,
      layout, queryLen, causal, slidingWindow, alibi, softcap, perHeadKvScale,
      writeLse, schedule, prefillSchedule);
  std::string problem = ::attn::checkKernelSpec(spec);
  if (!problem.empty())
    return emitError() << "kernel_spec " << problem;
  return success();
}

LogicalResult KernelSpecAttr::verifyParameters(
    function_ref<InFlightDiagnostic()> emitError) const {
  return verify(emitError, getKind(), getArch(), getQType(), getKvType(),
                getNumQHeads(), getNumKvHeads(), getHeadDim(), getPageSize(),
                getLayout(), getQueryLen(), getCausal(), getSlidingWindow(),
                getAlibi(), getSoftcap(), getPerHeadKvScale(), getWriteLse(),
                getSchedule(), getPrefillSchedule());
}

::attn::KernelSpec KernelSpecAttr::getSpec() const {
  return toKernelSpec(getKind(), getArch(), getQType(), getKvType(),
                      getNumQHeads(), getNumKvHeads(), getHeadDim(),
                      getPageSize(), getLayout(), getQueryLen(), getCausal(),
                      getSlidingWindow(), getAlibi(), getSoftcap(),
                      getPerHeadKvScale(), getWriteLse(), getSchedule(),
                      getPrefillSchedule());
}

//===----------------------------------------------------------------------===//
// MaskAttr
//===----------------------------------------------------------------------===//

LogicalResult MaskAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               MaskKind kind, std::optional<int64_t> window) {
  if (!window)
    return success();
  // The kernels take the window as a 32-bit launch parameter.
  if (*window < 0 || *window > std::numeric_limits<int32_t>::max())
    return emitError() << "window_left must be from 0 to "
                       << std::numeric_limits<int32_t>::max() << ", got "
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
  if (numKvHeads < 1 || numKvHeads > ::attn::kMaxHeads)
    return emitError() << "paged_kv must have 1 to " << ::attn::kMaxHeads
                       << " kv heads, got " << numKvHeads;
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
