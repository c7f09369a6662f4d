//===- KernelSpecs.cpp - attn ops <-> kernel specs ------------------------===//
#include "compiler/Transforms/KernelSpecs.h"
#include "compiler/Transforms/Modifiers.h"
#include "spec/KernelLimits.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

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
  spec.layout = cache.getLayout();
}

/// What every attention op gives its spec, through AttentionOpInterface:
/// q's type and heads, the mask flags, the per-head tables' flags
/// (templates/attn/variant_knobs.h), soft-cap and LSE.
LogicalResult setAttentionFields(::attn::KernelSpec &spec,
                                 AttentionOpInterface op) {
  auto qType = cast<RankedTensorType>(op.getQ().getType());
  // q_type is the output's (q's, but for an e4m3 q with its q_scale, which
  // sets fp8Query below); the op verifiers admit only f16/bf16 outputs.
  spec.qType = *toScalarType(
      cast<RankedTensorType>(op.getOut().getType()).getElementType());
  spec.numQHeads = int(qType.getDimSize(1));
  // head_dim is v's and the output's; q and k may have more (rope_dim:
  // attn.prefill's MLA form, q/k 192 and v 128).
  spec.headDim =
      int(cast<RankedTensorType>(op.getOut().getType()).getDimSize(2));
  spec.ropeDim = int(qType.getDimSize(2)) - spec.headDim;
  MaskAttr mask = op.getMaskAttr();
  spec.causal = mask && mask.isCausal();
  spec.slidingWindow = mask && mask.hasWindow();
#define ATTN_HEAD_TABLE(flag, pointer, operand, accessor)                      \
  spec.flag = static_cast<bool>(op.getHeadTable(operand));
#include "templates/attn/variant_knobs.h"
  spec.softcap = static_cast<bool>(op.getSoftcapAttr());
  spec.writeLse = static_cast<bool>(op.getLse());
  spec.batchInvariant = op.getBatchInvariant();
  FailureOr<ModifierSource> modifiers = emitModifiers(op);
  if (failed(modifiers))
    return failure();
  spec.scoreMod = std::move(modifiers->scoreMod);
  spec.maskMod = std::move(modifiers->maskMod);
  spec.maskModTiles = std::move(modifiers->maskModTiles);
  spec.aux = std::move(modifiers->aux);
  return success();
}

/// What ragged and paged prefill take alike from their op: the attention
/// fields (many queries per request, so causal always stays) and the
/// schedule (the default PrefillSchedule when the op has none yet).
template <typename PrefillLikeOp>
LogicalResult setPrefillFields(::attn::KernelSpec &spec, PrefillLikeOp op) {
  if (failed(setAttentionFields(spec, op)))
    return failure();
  // Query rows come from cu_seqlens_q, not a fixed count per request.
  spec.queryLen = 1;
  if (PrefillScheduleAttr schedule = op.getScheduleAttr())
    spec.prefillSchedule = schedule.getSchedule();
  return success();
}

} // namespace

FailureOr<::attn::KernelSpec> getDecodeKernelSpec(DecodeOp op,
                                                  ::attn::Arch arch) {
  ::attn::KernelSpec spec;
  spec.kind = ::attn::KernelKind::Decode;
  spec.arch = arch;
  if (failed(setAttentionFields(spec, op)))
    return failure();
  setCacheFields(spec, op.getCache().getType());
  spec.queryLen = int(op.getQueryLen());
  // With one query per request the query is the last key, so a causal mask
  // removes nothing: one kernel serves both.
  spec.causal = spec.causal && spec.queryLen > 1;
  FailureOr<bool> perHead =
      isPerHeadKVScale(op, op.getKScale(), op.getVScale());
  if (failed(perHead))
    return failure();
  spec.perHeadKVScale = *perHead;
  if (DecodeScheduleAttr schedule = op.getScheduleAttr())
    spec.schedule = schedule.getSchedule();
  return spec;
}

FailureOr<::attn::KernelSpec> getPrefillKernelSpec(PrefillOp op,
                                                   ::attn::Arch arch) {
  ::attn::KernelSpec spec;
  spec.kind = ::attn::KernelKind::Prefill;
  spec.arch = arch;
  if (failed(setPrefillFields(spec, op)))
    return failure();
  // The op verifier admits only k of q's head dim, v of the output's, and
  // k, v of the output's type or FP8.
  auto kType = cast<RankedTensorType>(op.getK().getType());
  spec.numKVHeads = int(kType.getDimSize(1));
  spec.kvType = *toScalarType(kType.getElementType());
  FailureOr<bool> perHead =
      isPerHeadKVScale(op, op.getKScale(), op.getVScale());
  if (failed(perHead))
    return failure();
  spec.perHeadKVScale = *perHead;
  spec.fp8Compute = op.getFp8Compute();
  // No cache: the canonical cache fields of a prefill spec.
  spec.pageSize = 0;
  spec.layout = ::attn::KVLayout::NHD;
  return spec;
}

FailureOr<::attn::KernelSpec> getPagedPrefillKernelSpec(PagedPrefillOp op,
                                                        ::attn::Arch arch) {
  ::attn::KernelSpec spec;
  spec.kind = ::attn::KernelKind::PagedPrefill;
  spec.arch = arch;
  if (failed(setPrefillFields(spec, op)))
    return failure();
  setCacheFields(spec, op.getCache().getType());
  FailureOr<bool> perHead =
      isPerHeadKVScale(op, op.getKScale(), op.getVScale());
  if (failed(perHead))
    return failure();
  spec.perHeadKVScale = *perHead;
  spec.fp8Compute = op.getFp8Compute();
  return spec;
}

FailureOr<::attn::KernelSpec> getAppendKVKernelSpec(AppendKVOp op,
                                                    ::attn::Arch arch) {
  ::attn::KernelSpec spec;
  spec.kind = ::attn::KernelKind::AppendKV;
  spec.arch = arch;
  spec.qType = *toScalarType(
      cast<RankedTensorType>(op.getK().getType()).getElementType());
  setCacheFields(spec, op.getCache().getType());
  // No query heads: the canonical append_kv spec repeats the KV heads.
  spec.numQHeads = spec.numKVHeads;
  FailureOr<bool> perHead =
      isPerHeadKVScale(op, op.getKScale(), op.getVScale());
  if (failed(perHead))
    return failure();
  spec.perHeadKVScale = *perHead;
  return spec;
}

FailureOr<::attn::KernelSpec> getMergeStatesKernelSpec(MergeStatesOp op,
                                                       ::attn::Arch arch) {
  auto out = cast<RankedTensorType>(op.getOut().getType());
  ::attn::KernelSpec spec;
  spec.kind = ::attn::KernelKind::MergeStates;
  spec.arch = arch;
  spec.qType = spec.kvType = *toScalarType(out.getElementType());
  // The canonical merge_states spec: heads and head_dim, no cache.
  spec.numQHeads = spec.numKVHeads = int(out.getDimSize(1));
  spec.headDim = int(out.getDimSize(2));
  spec.pageSize = 0;
  return spec;
}

FailureOr<::attn::KernelSpec> getMlaDecodeKernelSpec(MlaDecodeOp op,
                                                     ::attn::Arch arch) {
  ::attn::KernelSpec spec;
  spec.kind = ::attn::KernelKind::MlaDecode;
  spec.arch = arch;
  spec.qType = *toScalarType(
      cast<RankedTensorType>(op.getOut().getType()).getElementType());
  setCacheFields(spec, op.getCkv().getType());
  spec.numQHeads =
      int(cast<RankedTensorType>(op.getQNope().getType()).getDimSize(1));
  spec.ropeDim =
      op.getKpe() ? int(cast<PagedKVType>(op.getKpe().getType()).getHeadDim())
                  : 0;
  spec.queryLen = int(op.getQueryLen());
  MaskAttr mask = op.getMaskAttr();
  spec.causal = mask && mask.isCausal();
  spec.writeLse = static_cast<bool>(op.getLse());
  spec.batchInvariant = op.getBatchInvariant();
  if (DecodeScheduleAttr schedule = op.getScheduleAttr())
    spec.schedule = schedule.getSchedule();
  return spec;
}

bool runsKernel(Operation *op) {
  return isa<AttentionOpInterface, AppendKVOp, MergeStatesOp, MlaDecodeOp>(op);
}

bool takesSchedule(Operation *op) {
  return isa<AttentionOpInterface, MlaDecodeOp>(op);
}

Attribute getScheduleOf(Operation *op) {
  if (auto mla = dyn_cast<MlaDecodeOp>(op))
    return mla.getScheduleAttr();
  return cast<AttentionOpInterface>(op).getScheduleAttr();
}

void setScheduleOf(Operation *op, Attribute schedule) {
  if (auto mla = dyn_cast<MlaDecodeOp>(op))
    return mla.setScheduleAttr(cast<DecodeScheduleAttr>(schedule));
  cast<AttentionOpInterface>(op).recordSchedule(schedule);
}

FailureOr<::attn::KernelSpec> getKernelSpec(Operation *op, ::attn::Arch arch) {
  if (auto decode = dyn_cast<DecodeOp>(op))
    return getDecodeKernelSpec(decode, arch);
  if (auto prefill = dyn_cast<PrefillOp>(op))
    return getPrefillKernelSpec(prefill, arch);
  if (auto paged = dyn_cast<PagedPrefillOp>(op))
    return getPagedPrefillKernelSpec(paged, arch);
  if (auto append = dyn_cast<AppendKVOp>(op))
    return getAppendKVKernelSpec(append, arch);
  if (auto merge = dyn_cast<MergeStatesOp>(op))
    return getMergeStatesKernelSpec(merge, arch);
  if (auto mla = dyn_cast<MlaDecodeOp>(op))
    return getMlaDecodeKernelSpec(mla, arch);
  return op->emitError() << "no kernel template for '" << op->getName()
                         << "' yet";
}

Attribute getScheduleAttr(MLIRContext *context,
                          const ::attn::KernelSpec &spec) {
  if (spec.isPrefill())
    return PrefillScheduleAttr::get(context, spec.prefillSchedule);
  return DecodeScheduleAttr::get(context, spec.schedule);
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

std::optional<::attn::Arch> getTargetArch(Operation *op) {
  for (; op; op = op->getParentOp())
    if (auto arch =
            op->getAttrOfType<StringAttr>(AttnDialect::getArchAttrName()))
      return ::attn::parseArch(arch.getValue().str());
  return std::nullopt;
}

} // namespace mlir::attn
