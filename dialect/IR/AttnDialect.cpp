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
  // A CTA has at most 1024 threads.
  if (warps < 1 || warps > 32)
    return emitError() << "decode_schedule warps must be from 1 to 32, got "
                       << warps;
  for (auto [name, value] : {std::pair<StringRef, int>{"stages", stages},
                             {"row_tiles", rowTiles},
                             {"min_chunk_tokens", minChunkTokens},
                             {"ctas_per_sm", ctasPerSm}})
    if (value < 1)
      return emitError() << "decode_schedule " << name
                         << " must be at least 1, got " << value;
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
  // A CTA has at most 1024 threads.
  if (warps < 1 || warps > 32)
    return emitError() << "prefill_schedule warps must be from 1 to 32, got "
                       << warps;
  if (stages < 1)
    return emitError() << "prefill_schedule stages must be at least 1, got "
                       << stages;
  if (mma == PrefillMma::wgmma) {
    // Warpgroup 0 loads (TMA), each further one owns 64 query rows. The
    // template moves registers to the consumers (setmaxnreg): 240 each for
    // one or two, 160 each for three (head dim 64 only; kernel_spec checks).
    if (warps != 8 && warps != 12 && warps != 16)
      return emitError() << "prefill_schedule with mma = wgmma needs warps = "
                            "8, 12 or 16 (a producer warpgroup and 1 to 3 "
                            "consumer warpgroups), got "
                         << warps;
    if (blockM != 16 * (warps - 4))
      return emitError() << "prefill_schedule with mma = wgmma needs block_m "
                            "= 16 * (warps - 4) = "
                         << 16 * (warps - 4)
                         << " (64 rows per consumer warpgroup), got " << blockM;
    // The wgmma N of S = Q K^T.
    if (blockN != 64 && blockN != 128)
      return emitError() << "prefill_schedule with mma = wgmma needs block_n "
                            "64 or 128, got "
                         << blockN;
    return success();
  }
  if (blockM != 16 * warps && blockM != 32 * warps)
    return emitError() << "prefill_schedule block_m must be 16 * warps = "
                       << 16 * warps << " or 32 * warps = " << 32 * warps
                       << " (each warp owns 16 or 32 query rows), got "
                       << blockM;
  // P * V consumes keys 16 at a time (the k-extent of one MMA).
  if (blockN < 16 || blockN % 16 != 0)
    return emitError()
           << "prefill_schedule block_n must be a positive multiple of 16, got "
           << blockN;
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

LogicalResult KernelSpecAttr::verify(
    function_ref<InFlightDiagnostic()> emitError, KernelKind kind,
    StringRef arch, Type qType, Type kvType, int numQHeads, int numKvHeads,
    int headDim, int pageSize, KVLayout layout, int queryLen, bool causal,
    bool slidingWindow, bool alibi, bool softcap, bool perHeadKvScale,
    bool writeLse, DecodeScheduleAttr schedule,
    PrefillScheduleAttr prefillSchedule) {
  bool decode = kind == KernelKind::decode;
  bool raggedPrefill = kind == KernelKind::prefill;
  bool pagedPrefill = kind == KernelKind::paged_prefill;
  // Both prefill kernels instantiate the prefill template: many query rows
  // per request from cu_seqlens, laid out by a prefill_schedule.
  bool prefill = raggedPrefill || pagedPrefill;
  StringRef kindName = stringifyKernelKind(kind);
  // The runtime builds the cache ops' specs itself (runtime/CacheOps.h);
  // IR never describes them, so every field check below can assume an
  // attention or append_kv kernel.
  if (kind == KernelKind::copy_blocks || kind == KernelKind::advance_step)
    return emitError() << "kernel_spec kind " << kindName
                       << " is a runtime utility kernel; the compiler does "
                          "not lower to it";
  if (!::attn::parseArch(arch.str()))
    return emitError() << "kernel_spec arch \"" << arch
                       << "\" is not a target; expected " << describeArchs();
  if (!qType.isF16() && !qType.isBF16())
    return emitError() << "kernel_spec q_type must be f16 or bf16, got "
                       << qType;
  if (!isCacheElementType(kvType) || (kvType != qType && !isFP8Type(kvType)))
    return emitError() << "kernel_spec kv_type must be q_type (" << qType
                       << ") or FP8 (f8E4M3FN, f8E5M2), got " << kvType;
  if (numKvHeads < 1 || numQHeads < 1 || numQHeads % numKvHeads != 0 ||
      numQHeads / numKvHeads > ::attn::kMaxGroupSize)
    return emitError() << "kernel_spec num_q_heads (" << numQHeads
                       << ") must be a multiple of num_kv_heads ("
                       << numKvHeads << ") by at most "
                       << ::attn::kMaxGroupSize;
  if (!::attn::isSupportedHeadDim(headDim))
    return emitError() << "kernel_spec head_dim " << headDim
                       << " is not supported";
  // Ragged prefill reads contiguous k/v and takes its query rows from
  // cu_seqlens: the cache and decode fields have one value, so equal prefill
  // kernels are one attribute.
  if (raggedPrefill &&
      (kvType != qType || pageSize != 0 || layout != KVLayout::nhd ||
       queryLen != 1 || perHeadKvScale))
    return emitError()
           << "kernel_spec of a prefill kernel reads no KV cache: it has "
              "kv_type == q_type, layout = nhd and no page_size, query_len or "
              "per_head_kv_scale";
  // A paged prefill reads the cache like decode, but its query rows come
  // from cu_seqlens like ragged prefill: no query_len.
  if (pagedPrefill && queryLen != 1)
    return emitError() << "kernel_spec of a paged_prefill kernel takes its "
                          "query rows from cu_seqlens: it has no query_len";
  if (!raggedPrefill && !::attn::isSupportedPageSize(pageSize))
    return emitError() << "kernel_spec page_size " << pageSize
                       << " is not supported";
  if (queryLen < 1 || queryLen > ::attn::kMaxDecodeQueryLen)
    return emitError() << "kernel_spec query_len must be from 1 to "
                       << ::attn::kMaxDecodeQueryLen << ", got " << queryLen;
  // A single decode query is the last key, so its kernels carry no causal
  // flag; a window then needs none either. Prefill queries are many.
  if (slidingWindow && !causal && (prefill || queryLen > 1))
    return emitError() << "kernel_spec sliding_window needs causal";
  if (causal && decode && queryLen == 1)
    return emitError() << "kernel_spec causal needs query_len > 1 (one query "
                          "sees every cached key anyway)";
  if (perHeadKvScale && !isFP8Type(kvType))
    return emitError() << "kernel_spec per_head_kv_scale needs an FP8 kv_type";
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
  if (schedule && failed(DecodeScheduleAttr::verify(
                      emitError, schedule.getWarps(), schedule.getStages(),
                      schedule.getRowTiles(), schedule.getMinChunkTokens(),
                      schedule.getCtasPerSm())))
    return failure();
  if (prefillSchedule &&
      failed(PrefillScheduleAttr::verify(
          emitError, prefillSchedule.getWarps(), prefillSchedule.getBlockM(),
          prefillSchedule.getBlockN(), prefillSchedule.getStages(),
          prefillSchedule.getMma())))
    return failure();
  // The wgmma template (templates/attn/prefill_sm90.cuh) loads 16-bit k/v
  // with TMA in 64-dim column blocks: contiguous, or a cache of q's type in
  // boxes of at least 8 tokens of a page.
  if (prefillSchedule && prefillSchedule.getMma() == PrefillMma::wgmma) {
    if (arch != "sm_90a")
      return emitError() << "kernel_spec prefill_schedule mma = wgmma needs "
                            "arch sm_90a, got \""
                         << arch << "\"";
    if (!raggedPrefill && !pagedPrefill)
      return emitError() << "kernel_spec prefill_schedule mma = wgmma is for "
                            "prefill kernels only, got "
                         << kindName;
    if (pagedPrefill && (kvType != qType || pageSize % 8 != 0))
      return emitError() << "kernel_spec prefill_schedule mma = wgmma reads a "
                            "paged cache of q's type with pages of a multiple "
                            "of 8 tokens, got kv_type "
                         << kvType << " and page_size " << pageSize;
    if (headDim != 64 && headDim != 128 && headDim != 256)
      return emitError() << "kernel_spec prefill_schedule mma = wgmma needs "
                            "head_dim 64, 128 or 256, got "
                         << headDim;
    // At head dim 256 the O accumulator takes 128 of a consumer's 240
    // registers: S of a 128-key tile no longer fits beside it.
    if (headDim == 256 && prefillSchedule.getBlockN() != 64)
      return emitError() << "kernel_spec prefill_schedule mma = wgmma needs "
                            "block_n 64 at head_dim 256, got "
                         << prefillSchedule.getBlockN();
    // Three consumers get 160 registers each: room for head dim 64's O
    // accumulator and S tile only.
    if (prefillSchedule.getWarps() == 16 && headDim != 64)
      return emitError() << "kernel_spec prefill_schedule mma = wgmma with "
                            "warps = 16 needs head_dim 64, got "
                         << headDim;
  }
  if (kind == KernelKind::append_kv &&
      (schedule || numQHeads != numKvHeads || queryLen != 1 || causal ||
       alibi || softcap || writeLse))
    return emitError()
           << "kernel_spec of an append_kv kernel has num_q_heads == "
              "num_kv_heads and no query_len, causal, sliding_window, alibi, "
              "softcap, write_lse or schedule";
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
  ::attn::KernelSpec spec;
  spec.kind = toSpecKind(getKind());
  // The verifier admits only known archs and types; the fallbacks keep an
  // unverified attribute from reading garbage.
  spec.arch = ::attn::parseArch(getArch().str()).value_or(spec.arch);
  spec.qType = toScalarType(getQType()).value_or(spec.qType);
  spec.kvType = toScalarType(getKvType()).value_or(spec.kvType);
  spec.numQHeads = getNumQHeads();
  spec.numKVHeads = getNumKvHeads();
  spec.headDim = getHeadDim();
  spec.pageSize = getPageSize();
  spec.layout = toSpecLayout(getLayout());
  spec.queryLen = getQueryLen();
  spec.causal = getCausal();
  spec.slidingWindow = getSlidingWindow();
  spec.alibi = getAlibi();
  spec.softcap = getSoftcap();
  spec.perHeadKVScale = getPerHeadKvScale();
  spec.writeLse = getWriteLse();
  // A spec keeps the default of the schedule its kernel does not have, as a
  // KernelSpec built by hand does.
  if (DecodeScheduleAttr schedule = getSchedule())
    spec.schedule = schedule.getSchedule();
  if (PrefillScheduleAttr schedule = getPrefillSchedule())
    spec.prefillSchedule = schedule.getSchedule();
  return spec;
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
