//===- KernelSpecs.cpp - attn ops <-> kernel specs ------------------------===//
#include "compiler/Transforms/KernelSpecs.h"
#include "compiler/Transforms/Schedule.h"
#include "codegen/KernelLimits.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include "llvm/Support/FormatVariadic.h"

namespace mlir::attn {

namespace {

/// Whether the FP8 dequantization scales are per KV head (true) or per
/// tensor (false). The kernel is compiled for one of the two, so both vectors
/// need the same static length. Non-FP8 ops have no scales: false.
FailureOr<bool> isPerHeadKVScale(Operation *op, Value kScale, Value vScale) {
  if (!kScale)
    return false;
  auto kType = cast<RankedTensorType>(kScale.getType());
  auto vType = cast<RankedTensorType>(vScale.getType());
  if (kType.isDynamicDim(0) || vType.isDynamicDim(0))
    return op->emitOpError()
           << "kv_scales need static lengths (1 per tensor, or one per kv "
              "head) for a kernel to be chosen, got "
           << kType << " and " << vType;
  if (kType.getDimSize(0) != vType.getDimSize(0))
    return op->emitOpError()
           << "k_scale and v_scale must have the same length for one kernel "
              "(per tensor or per kv head), got "
           << kType.getDimSize(0) << " and " << vType.getDimSize(0);
  // With one KV head, per head and per tensor are the same kernel.
  return kType.getDimSize(0) > 1;
}

/// The cache-derived fields every kernel spec has.
void setCacheFields(::attn::KernelSpec &spec, PagedKVType cache) {
  // The op verifiers admit only types toScalarType knows.
  spec.kvType = *toScalarType(cache.getElementType());
  spec.numKVHeads = int(cache.getNumKvHeads());
  spec.headDim = int(cache.getHeadDim());
  spec.pageSize = int(cache.getPageSize());
  spec.layout = toSpecLayout(cache.getLayout());
}

/// What ragged and paged prefill take alike from their op: q's type, heads
/// and head dim; causal and sliding window from the mask (many queries per
/// request, so causal always stays); ALiBi from the slopes operand;
/// soft-cap from the attribute; LSE from the second result; the schedule
/// from the op (the default PrefillSchedule when the op has none yet).
template <typename PrefillLikeOp>
void setPrefillFields(::attn::KernelSpec &spec, PrefillLikeOp op) {
  auto qType = cast<RankedTensorType>(op.getQ().getType());
  // The op verifiers admit only f16/bf16 q.
  spec.qType = *toScalarType(qType.getElementType());
  spec.numQHeads = int(qType.getDimSize(1));
  spec.headDim = int(qType.getDimSize(2));
  // Query rows come from cu_seqlens_q, not a fixed count per request.
  spec.queryLen = 1;
  std::optional<MaskAttr> mask = op.getMask();
  spec.causal = mask && mask->isCausal();
  spec.slidingWindow = mask && mask->hasWindow();
  spec.alibi = static_cast<bool>(op.getAlibiSlopes());
  spec.softcap = op.getSoftcap().has_value();
  spec.writeLse = static_cast<bool>(op.getLse());
  if (PrefillScheduleAttr schedule = op.getScheduleAttr())
    spec.prefillSchedule = schedule.getSchedule();
}

} // namespace

FailureOr<::attn::KernelSpec> getDecodeKernelSpec(DecodeOp op,
                                                  ::attn::Arch arch) {
  ::attn::KernelSpec spec;
  spec.kind = ::attn::KernelKind::Decode;
  spec.arch = arch;
  auto qType = cast<RankedTensorType>(op.getQ().getType());
  spec.qType = *toScalarType(qType.getElementType());
  spec.numQHeads = int(qType.getDimSize(1));
  setCacheFields(spec, op.getCache().getType());
  spec.queryLen = int(op.getQueryLen());
  std::optional<MaskAttr> mask = op.getMask();
  // With one query per request the query is the last key, so a causal mask
  // removes nothing: one kernel serves both.
  spec.causal = mask && mask->isCausal() && spec.queryLen > 1;
  spec.slidingWindow = mask && mask->hasWindow();
  spec.alibi = static_cast<bool>(op.getAlibiSlopes());
  spec.softcap = op.getSoftcap().has_value();
  FailureOr<bool> perHead = isPerHeadKVScale(op, op.getKScale(), op.getVScale());
  if (failed(perHead))
    return failure();
  spec.perHeadKVScale = *perHead;
  spec.writeLse = static_cast<bool>(op.getLse());
  if (DecodeScheduleAttr schedule = op.getScheduleAttr())
    spec.schedule = schedule.getSchedule();
  return spec;
}

FailureOr<::attn::KernelSpec> getPrefillKernelSpec(PrefillOp op,
                                                   ::attn::Arch arch) {
  ::attn::KernelSpec spec;
  spec.kind = ::attn::KernelKind::Prefill;
  spec.arch = arch;
  setPrefillFields(spec, op);
  // The op verifier admits only k, v of q's type and head dim.
  spec.numKVHeads =
      int(cast<RankedTensorType>(op.getK().getType()).getDimSize(1));
  // No cache: the canonical cache fields of a prefill spec.
  spec.kvType = spec.qType;
  spec.pageSize = 0;
  spec.layout = ::attn::KVLayout::NHD;
  spec.perHeadKVScale = false;
  return spec;
}

FailureOr<::attn::KernelSpec> getPagedPrefillKernelSpec(PagedPrefillOp op,
                                                        ::attn::Arch arch) {
  ::attn::KernelSpec spec;
  spec.kind = ::attn::KernelKind::PagedPrefill;
  spec.arch = arch;
  setPrefillFields(spec, op);
  setCacheFields(spec, op.getCache().getType());
  FailureOr<bool> perHead = isPerHeadKVScale(op, op.getKScale(), op.getVScale());
  if (failed(perHead))
    return failure();
  spec.perHeadKVScale = *perHead;
  return spec;
}

FailureOr<::attn::KernelSpec> getAppendKVKernelSpec(AppendKVOp op,
                                                    ::attn::Arch arch) {
  ::attn::KernelSpec spec;
  spec.kind = ::attn::KernelKind::AppendKV;
  spec.arch = arch;
  spec.qType =
      *toScalarType(cast<RankedTensorType>(op.getK().getType()).getElementType());
  setCacheFields(spec, op.getCache().getType());
  // No query heads: the canonical append_kv spec repeats the KV heads.
  spec.numQHeads = spec.numKVHeads;
  FailureOr<bool> perHead = isPerHeadKVScale(op, op.getKScale(), op.getVScale());
  if (failed(perHead))
    return failure();
  spec.perHeadKVScale = *perHead;
  return spec;
}

LogicalResult verifyKernelSpecAt(Operation *op,
                                 const ::attn::KernelSpec &spec) {
  std::string problem = ::attn::checkKernelSpec(spec);
  if (problem.empty())
    return success();
  return op->emitOpError() << problem;
}

FailureOr<::attn::KernelSpec> getKernelSpec(KernelLaunchOp op) {
  // Lowered IR may have been edited or built by hand: check the launch (and
  // its spec) before trusting it.
  if (failed(mlir::verify(op, /*verifyRecursively=*/false)))
    return failure();
  return op.getSpec().getSpec();
}

StringRef getKernelTemplate(const ::attn::KernelSpec &spec) {
  // The sm_90a wgmma template takes the same parameters plus q/k/v's tensor
  // maps (attn::PrefillSm90Params), which the runtime builds at launch.
  if (spec.isPrefill() && spec.prefillSchedule.mma == ::attn::PrefillMma::Wgmma)
    return "attn/prefill_sm90.cuh:attn::prefillSm90Kernel";
  switch (spec.kind) {
  case ::attn::KernelKind::Decode:
    return "attn/decode.cuh:attn::decodeKernel";
  case ::attn::KernelKind::AppendKV:
    return "attn/append_kv.cuh:attn::appendKVKernel";
  case ::attn::KernelKind::Prefill:
  case ::attn::KernelKind::PagedPrefill: // the same template, kPaged = true
    return "attn/prefill.cuh:attn::prefillKernel";
  case ::attn::KernelKind::CopyBlocks:
  case ::attn::KernelKind::AdvanceStep:
    // Runtime-only (runtime/CacheOps.h): no op lowers to them, and the
    // kernel_spec verifier rejects them in IR.
    llvm_unreachable("the compiler never lowers to a runtime cache op");
  }
  llvm_unreachable("unknown attn::KernelKind");
}

ArrayRef<StringRef> getLaunchABI(::attn::KernelKind kind) {
  // Keep in step with templates/attn/params.h; AttnCompilerTests checks
  // every name against the struct with offsetof.
  static const StringRef decode[] = {
      "q",            "out",          "lse",            "kCache",
      "vCache",       "blockTables",  "kScale",
      "vScale",       "alibiSlopes",  "workItems",      "numWorkItems",
      "partialOut",   "partialLse",   "mergeCounters",  "qStrideToken",
      "outStrideToken",
      "pageStride",   "blockTableStride", "smScale",    "softcap",
      "windowLeft"};
  // One struct for ragged and paged prefill: each kind leaves the other's
  // fields unused (k / v are K / V pages when paged).
  static const StringRef prefill[] = {
      "q",            "k",            "v",              "out",
      "lse",          "alibiSlopes",  "workItems",      "numWorkItems",
      "blockTables",  "kScale",       "vScale",         "qStrideToken",
      "kStrideToken", "vStrideToken", "outStrideToken", "pageStride",
      "blockTableStride", "smScale",  "softcap",        "windowLeft"};
  static const StringRef appendKV[] = {
      "k",          "v",          "kCache",       "vCache",
      "slotMapping", "kScale",    "vScale",       "kStrideToken",
      "vStrideToken", "pageStride", "numTokens"};
  switch (kind) {
  case ::attn::KernelKind::Decode:
    return decode;
  case ::attn::KernelKind::AppendKV:
    return appendKV;
  case ::attn::KernelKind::Prefill:
  case ::attn::KernelKind::PagedPrefill:
    return prefill;
  case ::attn::KernelKind::CopyBlocks:
  case ::attn::KernelKind::AdvanceStep:
    llvm_unreachable("the compiler never lowers to a runtime cache op");
  }
  llvm_unreachable("unknown attn::KernelKind");
}

std::string getGridRule(const ::attn::KernelSpec &spec) {
  if (spec.kind == ::attn::KernelKind::AppendKV)
    return "grid.x = num_tokens (one CTA per token); block = 128";
  if (spec.isPrefill())
    return llvm::formatv(
        "grid.x = query tiles of the plan (block_m = {0} rows each), grid.y = "
        "num_q_heads = {1}; block = 32*warps = {2}",
        spec.prefillSchedule.blockM, spec.numQHeads,
        32 * spec.prefillSchedule.warps);
  int rows = spec.groupSize() * spec.queryLen;
  int tileRows = kDecodeTileRows * spec.schedule.rowTiles;
  return llvm::formatv(
      "grid.x = work items of the split-KV plan, grid.y = num_kv_heads = {0}, "
      "grid.z = ceil(group_size*query_len / (16*row_tiles)) = "
      "ceil({1} / {2}) = {3}; block = 32*warps = {4}",
      spec.numKVHeads, rows, tileRows, (rows + tileRows - 1) / tileRows,
      32 * spec.schedule.warps);
}

std::optional<::attn::Arch> getTargetArch(Operation *op) {
  for (; op; op = op->getParentOp())
    if (auto arch =
            op->getAttrOfType<StringAttr>(AttnDialect::getArchAttrName()))
      return ::attn::parseArch(arch.getValue().str());
  return std::nullopt;
}

} // namespace mlir::attn
