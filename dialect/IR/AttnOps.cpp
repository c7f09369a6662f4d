//===- AttnOps.cpp - attn dialect op verifiers ----------------------------===//
//
// Each verifier rejects what no attn kernel can run, with a message that names
// the operand or attribute and the rule. The limits themselves live in
// spec/KernelLimits.h.
//
//===----------------------------------------------------------------------===//
#include "dialect/IR/AttnOps.h"
#include "spec/KernelLimits.h"
#include "templates/attn/params.h"

#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::attn;

#include "dialect/IR/AttnInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "dialect/IR/AttnOps.cpp.inc"

namespace {

/// A tokens x heads x head_dim tensor type (ODS guarantees rank 3).
struct Rows {
  RankedTensorType type;
  int64_t tokens() const { return type.getDimSize(0); }
  int64_t heads() const { return type.getDimSize(1); }
  int64_t headDim() const { return type.getDimSize(2); }
  Type elementType() const { return type.getElementType(); }
};

Rows rowsOf(Value value) {
  return Rows{cast<RankedTensorType>(value.getType())};
}

bool bothStatic(int64_t a, int64_t b) {
  return !ShapedType::isDynamic(a) && !ShapedType::isDynamic(b);
}

/// Static size of a rank-1 tensor, or kDynamic.
int64_t lengthOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getDimSize(0);
}

/// Rows whose heads and head_dim are static and whose head_dim a kernel runs.
LogicalResult verifyRows(Operation *op, StringRef name, Rows rows) {
  if (ShapedType::isDynamic(rows.heads()) ||
      ShapedType::isDynamic(rows.headDim()))
    return op->emitOpError() << name
                             << " must have static head and head_dim sizes, "
                                "got "
                             << rows.type;
  if (rows.heads() < 1 || rows.heads() > ::attn::kMaxHeads)
    return op->emitOpError() << name << " must have 1 to " << ::attn::kMaxHeads
                             << " heads, got " << rows.heads();
  if (!::attn::isSupportedHeadDim(rows.headDim()))
    return op->emitOpError()
           << name << " head_dim " << rows.headDim()
           << " is not supported; expected a multiple of "
           << ::attn::kHeadDimMultiple << " from " << ::attn::kMinHeadDim
           << " to " << ::attn::kMaxHeadDim;
  return success();
}

/// What the attention ops (prefill, paged_prefill, decode) share, read
/// through AttentionOpInterface: query and KV heads, output and LSE shapes,
/// the per-head tables and the score modifiers. `kvName` ("k" or "cache")
/// names where the keys come from; `vHeadDim` is the values' (and so the
/// output's) head dim, which only attn.prefill lets differ from q's.
LogicalResult verifyAttention(AttentionOpInterface op, int64_t kvHeads,
                              int64_t kvHeadDim, StringRef kvName,
                              int64_t vHeadDim) {
  Rows q = rowsOf(op.getQ()), out = rowsOf(op.getOut());
  if (failed(verifyRows(op, "q", q)))
    return failure();
  int64_t qHeads = q.heads();
  if (kvHeads < 1 || qHeads % kvHeads != 0)
    return op->emitOpError()
           << "q heads (" << qHeads << ") must be a multiple of " << kvName
           << " heads (" << kvHeads << ")";
  if (qHeads / kvHeads > ::attn::kMaxGroupSize)
    return op->emitOpError()
           << "q heads per kv head (" << qHeads / kvHeads
           << ") exceeds the supported group size " << ::attn::kMaxGroupSize;
  if (kvHeadDim != q.headDim())
    return op->emitOpError() << "q head_dim (" << q.headDim() << ") must equal "
                             << kvName << " head_dim (" << kvHeadDim << ")";
  // e4m3 q (quantized by the caller) comes with its q_scale and writes a
  // 16-bit out; otherwise out is q's type.
  bool fp8Query = isa<Float8E4M3FNType>(q.elementType());
  Value qScale = op.getHeadTable("q_scale");
  if (fp8Query && !qScale)
    return op->emitOpError() << "an e4m3 q needs its q_scale";
  if (!fp8Query && qScale)
    return op->emitOpError()
           << "q_scale is for an e4m3 q, got q of " << q.elementType();
  if (failed(verifyCompatibleShape(
          out.type.getShape(),
          ArrayRef<int64_t>{q.tokens(), q.heads(), vHeadDim})) ||
      (fp8Query ? !out.elementType().isF16() && !out.elementType().isBF16()
                : out.elementType() != q.elementType()))
    return op->emitOpError()
           << "out type " << out.type << " must match q type " << q.type
           << (vHeadDim != q.headDim()
                   ? " with v's head_dim (" + std::to_string(vHeadDim) + ")"
                   : std::string())
           << (fp8Query ? " in f16 or bf16" : "");
  if (Value lse = op.getLse()) {
    auto lseType = cast<RankedTensorType>(lse.getType());
    if (failed(verifyCompatibleShape(lseType.getShape(),
                                     ArrayRef<int64_t>{q.tokens(), qHeads})))
      return op->emitOpError()
             << "lse must be q tokens x q heads, got " << lseType;
  }
  // Every per-head table holds one f32 per q head.
  StringRef tables[] = {
#define ATTN_HEAD_TABLE(flag, pointer, operand, accessor) operand,
#include "templates/attn/variant_knobs.h"
  };
  for (StringRef name : tables) {
    Value table = op.getHeadTable(name);
    if (!table)
      continue;
    int64_t length = lengthOf(table);
    if (!ShapedType::isDynamic(length) && length != qHeads)
      return op->emitOpError() << name << " must have one value per q head ("
                               << qHeads << "), got " << length;
  }
  struct {
    MaskAttr mask;
    ::attn::AttentionKind kind;
    FloatAttr scale, softcap;
  } parts{op.getMaskAttr(), op.getKind(), op.getScaleAttr(),
          op.getSoftcapAttr()};
  bool causal = parts.mask && parts.mask.isCausal();
  if (causal && parts.kind == ::attn::AttentionKind::Cross)
    return op->emitOpError()
           << "cross attention cannot be causal: queries and keys come "
              "from different sequences";
  if (causal && parts.kind == ::attn::AttentionKind::Encoder)
    return op->emitOpError()
           << "encoder attention is bidirectional and cannot be causal";
  if (parts.scale) {
    double scale = parts.scale.getValueAsDouble();
    if (!(scale > 0) || !std::isfinite(scale))
      return op->emitOpError()
             << "scale must be positive and finite, got " << scale;
  }
  if (parts.softcap) {
    double softcap = parts.softcap.getValueAsDouble();
    if (!(softcap > 0) || !std::isfinite(softcap))
      return op->emitOpError()
             << "softcap must be positive and finite, got " << softcap;
  }
  return success();
}

/// FP8 k/v (`what`: "cache" or "k/v") need dequantization scales, others
/// must not have them; a scale vector holds one value per tensor or one per
/// KV head.
LogicalResult verifyKVScales(Operation *op, StringRef what, Type kvElement,
                             int64_t numKvHeads, Value kScale, Value vScale) {
  const bool fp8 = isFP8Type(kvElement);
  if (!kScale != !vScale)
    return op->emitOpError() << "k_scale and v_scale must be given together";
  if (fp8 && !kScale)
    return op->emitOpError()
           << "an FP8 " << what << " (" << kvElement << ") needs kv_scales";
  if (!fp8 && kScale)
    return op->emitOpError() << "kv_scales given, but the " << what
                             << " stores " << kvElement << ", not FP8";
  for (auto [name, scale] : {std::pair<StringRef, Value>{"k_scale", kScale},
                             std::pair<StringRef, Value>{"v_scale", vScale}}) {
    if (!scale)
      continue;
    int64_t n = lengthOf(scale);
    if (!ShapedType::isDynamic(n) && n != 1 && n != numKvHeads)
      return op->emitOpError()
             << name << " must have 1 element (per tensor) or " << numKvHeads
             << " (one per kv head), got " << n;
  }
  return success();
}
LogicalResult verifyKVScales(Operation *op, PagedKVType cache, Value kScale,
                             Value vScale) {
  return verifyKVScales(op, "cache", cache.getElementType(),
                        cache.getNumKvHeads(), kScale, vScale);
}

/// An f16/bf16 cache stores what the queries compute in; FP8 is quantized.
LogicalResult verifyCacheElementType(Operation *op, StringRef name, Type elem,
                                     PagedKVType cache) {
  if (!cache.isFP8() && cache.getElementType() != elem)
    return op->emitOpError() << "cache element type " << cache.getElementType()
                             << " must equal the " << name << " element type ("
                             << elem << ") or be FP8";
  return success();
}

/// page_tables has one row per request, as many as seq_lens has entries.
LogicalResult verifyPageTables(Operation *op, Value pageTables, Value seqLens) {
  int64_t rows = cast<RankedTensorType>(pageTables.getType()).getDimSize(0);
  int64_t lens = lengthOf(seqLens);
  if (bothStatic(rows, lens) && rows != lens)
    return op->emitOpError()
           << "page_tables has " << rows << " rows but seq_lens has " << lens
           << " entries; both need one per request";
  return success();
}

/// cu_seqlens holds batch + 1 offsets.
LogicalResult verifyCuSeqlens(Operation *op, StringRef name, Value cuSeqlens) {
  int64_t n = lengthOf(cuSeqlens);
  if (!ShapedType::isDynamic(n) && n < 2)
    return op->emitOpError()
           << name << " needs batch + 1 >= 2 entries, got " << n;
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// PrefillOp
//===----------------------------------------------------------------------===//

LogicalResult PrefillOp::verify() {
  Rows q = rowsOf(getQ()), k = rowsOf(getK()), v = rowsOf(getV());
  if (failed(verifyRows(*this, "k", k)) || failed(verifyRows(*this, "v", v)))
    return failure();
  // v may have fewer dims than q and k (MLA's prefill: q/k 192 = 128 + a
  // 64-dim RoPE part, v 128); the output has v's.
  if (failed(verifyCompatibleShape(k.type.getShape().drop_back(),
                                   v.type.getShape().drop_back())) ||
      v.headDim() > k.headDim())
    return emitOpError() << "k " << k.type << " and v " << v.type
                         << " must have the same tokens and heads, and v "
                            "at most k's head_dim";
  if (v.headDim() != k.headDim() && isFP8Type(k.elementType()))
    return emitOpError() << "k and v of different head dims (" << k.headDim()
                         << ", " << v.headDim() << ") must be 16-bit, got "
                         << k.elementType();
  // k and v are of the output's type (q's, but for an e4m3 q) or FP8.
  Type outElement = rowsOf(getOut()).elementType();
  if (k.elementType() != v.elementType() ||
      (k.elementType() != outElement && !isFP8Type(k.elementType())))
    return emitOpError() << "k and v must both be of the output's element "
                            "type ("
                         << outElement << ") or both FP8, got "
                         << k.elementType() << " and " << v.elementType();
  if (failed(verifyKVScales(*this, "k/v", k.elementType(), k.heads(),
                            getKScale(), getVScale())))
    return failure();
  if (getFp8Compute() && !isFP8Type(k.elementType()))
    return emitOpError() << "fp8_compute needs FP8 k/v (e4m3, e5m2), got "
                         << k.elementType();
  if (failed(verifyCuSeqlens(*this, "cu_seqlens_q", getCuSeqlensQ())) ||
      failed(verifyCuSeqlens(*this, "cu_seqlens_kv", getCuSeqlensKv())))
    return failure();
  int64_t nq = lengthOf(getCuSeqlensQ()), nkv = lengthOf(getCuSeqlensKv());
  if (bothStatic(nq, nkv) && nq != nkv)
    return emitOpError() << "cu_seqlens_q (" << nq << ") and cu_seqlens_kv ("
                         << nkv << ") must both have batch + 1 entries";
  return verifyAttention(*this, k.heads(), k.headDim(), "k", v.headDim());
}

//===----------------------------------------------------------------------===//
// score_mod and mask_mod regions
//===----------------------------------------------------------------------===//

bool mlir::attn::isModifierScalar(Type type) {
  return type.isInteger(1) || type.isInteger(32) || type.isInteger(64) ||
         type.isF32() || type.isF64();
}

bool mlir::attn::isModifierOp(Operation *op) {
  return isa<
      // arith: every scalar op with one result, but index casts.
      arith::ConstantOp, arith::AddIOp, arith::SubIOp, arith::MulIOp,
      arith::DivSIOp, arith::DivUIOp, arith::RemSIOp, arith::RemUIOp,
      arith::CeilDivSIOp, arith::CeilDivUIOp, arith::FloorDivSIOp,
      arith::AndIOp, arith::OrIOp, arith::XOrIOp, arith::ShLIOp, arith::ShRSIOp,
      arith::ShRUIOp, arith::MinSIOp, arith::MaxSIOp, arith::MinUIOp,
      arith::MaxUIOp, arith::CmpIOp, arith::AddFOp, arith::SubFOp,
      arith::MulFOp, arith::DivFOp, arith::RemFOp, arith::NegFOp,
      arith::MaximumFOp, arith::MinimumFOp, arith::MaxNumFOp, arith::MinNumFOp,
      arith::CmpFOp, arith::SelectOp, arith::SIToFPOp, arith::UIToFPOp,
      arith::FPToSIOp, arith::FPToUIOp, arith::ExtSIOp, arith::ExtUIOp,
      arith::TruncIOp, arith::ExtFOp, arith::TruncFOp, arith::BitcastOp,
      // math: every op but the integer powers.
      math::AbsFOp, math::AbsIOp, math::AcosOp, math::AcoshOp, math::AsinOp,
      math::AsinhOp, math::Atan2Op, math::AtanOp, math::AtanhOp, math::CbrtOp,
      math::CeilOp, math::CopySignOp, math::CosOp, math::CoshOp,
      math::CountLeadingZerosOp, math::CountTrailingZerosOp, math::CtPopOp,
      math::ErfOp, math::Exp2Op, math::ExpM1Op, math::ExpOp, math::FloorOp,
      math::FmaOp, math::Log10Op, math::Log1pOp, math::Log2Op, math::LogOp,
      math::PowFOp, math::RoundEvenOp, math::RoundOp, math::RsqrtOp,
      math::SinOp, math::SinhOp, math::SqrtOp, math::TanOp, math::TanhOp,
      math::TruncOp,
      // Branches, aux tables and the region's end.
      scf::IfOp, scf::YieldOp, AuxLoadOp, YieldOp>(op);
}

namespace {

/// One region: its arguments ((f32 score,) request, q_pos, k_pos, q_head,
/// kv_head, then one per aux operand), its attn.yield of `resultType`, and
/// every op inside (allowed, on scalars), each error at what is wrong.
LogicalResult verifyModifier(AttentionOpInterface op, Region &region,
                             StringRef name, bool takesScore, Type resultType) {
  if (region.empty())
    return success();
  Block &block = region.front();
  MLIRContext *context = op->getContext();
  SmallVector<Type> expected;
  if (takesScore)
    expected.push_back(Float32Type::get(context));
  expected.append(5, IntegerType::get(context, 32));
  for (Value aux : op.getAux())
    expected.push_back(aux.getType());
  const char *signature =
      takesScore ? "(f32 score, i32 request, i32 q_pos, i32 k_pos, i32 "
                   "q_head, i32 kv_head, then one per aux operand)"
                 : "(i32 request, i32 q_pos, i32 k_pos, i32 q_head, i32 "
                   "kv_head, then one per aux operand)";
  if (block.getNumArguments() != expected.size())
    return op->emitOpError()
           << name << " must take " << expected.size() << " arguments "
           << signature << ", got " << block.getNumArguments();
  for (auto [i, arg, type] : llvm::enumerate(block.getArguments(), expected))
    if (arg.getType() != type)
      return op->emitOpError()
             << name << " argument " << i << " must be " << type << " "
             << signature << ", got " << arg.getType();
  // Other terminators' own parent checks reject them first; this guards
  // the cast below.
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield)
    return block.getTerminator()->emitOpError()
           << "cannot end " << name << "; it ends with attn.yield";
  if (yield.getValue().getType() != resultType)
    return yield.emitOpError() << "in " << name << " must yield " << resultType
                               << ", got " << yield.getValue().getType();
  WalkResult walk = region.walk([&](Operation *inner) -> WalkResult {
    if (!isModifierOp(inner))
      return inner->emitOpError()
             << "is not allowed in " << name << " of '" << op->getName()
             << "': it holds scalar arith and math ops (but index casts, "
                "the extended-result ops and math.ipowi/fpowi), scf.if and "
                "attn.aux_load";
    auto scalarTypes = [&](TypeRange types) {
      return llvm::all_of(types, isModifierScalar);
    };
    if (!isa<AuxLoadOp>(inner) && (!scalarTypes(inner->getOperandTypes()) ||
                                   !scalarTypes(inner->getResultTypes())))
      return inner->emitOpError() << "in " << name
                                  << " computes on a type a kernel has no "
                                     "scalar for; use i1, i32, i64, f32 or f64";
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

LogicalResult verifyModifiers(AttentionOpInterface op) {
  MLIRContext *context = op->getContext();
  // A launch passes each table's dimensions as int32 and its data as a
  // tensor that holds at least one element.
  for (auto [i, aux] : llvm::enumerate(op.getAux()))
    for (int64_t dim : cast<RankedTensorType>(aux.getType()).getShape())
      if (!ShapedType::isDynamic(dim) &&
          (dim < 1 || dim > std::numeric_limits<int32_t>::max()))
        return op->emitOpError()
               << "aux table " << i << " has a dimension of " << dim
               << "; a launch can pass only 1 to 2147483647 (or ?)";
  if (failed(verifyModifier(op, op.getScoreMod(), "score_mod",
                            /*takesScore=*/true, Float32Type::get(context))))
    return failure();
  return verifyModifier(op, op.getMaskMod(), "mask_mod", /*takesScore=*/false,
                        IntegerType::get(context, 1));
}

/// Names the printed IR gives results (%out, %lse) and modifier arguments:
/// %score, %request, %q_pos, %k_pos, %q_head, %kv_head, then %aux0, %aux1, ...
void nameModifierArguments(Region &region, OpAsmSetValueNameFn setName) {
  if (region.empty())
    return;
  static const char *const kPositions[] = {"request", "q_pos", "k_pos",
                                           "q_head", "kv_head"};
  Block &block = region.front();
  unsigned first = 0;
  if (block.getNumArguments() > 0 && block.getArgument(0).getType().isF32()) {
    setName(block.getArgument(0), "score");
    first = 1;
  }
  for (unsigned i = first; i < block.getNumArguments(); ++i) {
    unsigned position = i - first;
    if (position < 5)
      setName(block.getArgument(i), kPositions[position]);
    else
      setName(block.getArgument(i), "aux" + std::to_string(position - 5));
  }
}

} // namespace

#define ATTN_MODIFIER_REGION_HOOKS(Op)                                         \
  LogicalResult Op::verifyRegions() { return verifyModifiers(*this); }         \
  void Op::getAsmBlockArgumentNames(Region &region,                            \
                                    OpAsmSetValueNameFn setName) {             \
    nameModifierArguments(region, setName);                                    \
  }                                                                            \
  void Op::getAsmResultNames(OpAsmSetValueNameFn setName) {                    \
    setName(getOut(), "out");                                                  \
    if (Value lse = getLse())                                                  \
      setName(lse, "lse");                                                     \
  }
ATTN_MODIFIER_REGION_HOOKS(PrefillOp)
ATTN_MODIFIER_REGION_HOOKS(PagedPrefillOp)
ATTN_MODIFIER_REGION_HOOKS(DecodeOp)
#undef ATTN_MODIFIER_REGION_HOOKS

LogicalResult AuxLoadOp::verify() {
  auto table = cast<RankedTensorType>(getTable().getType());
  if (int64_t(getIndices().size()) != table.getRank())
    return emitOpError() << "needs one index per dimension of " << table << " ("
                         << table.getRank() << "), got " << getIndices().size();
  // Tables are region arguments: the aux operands of the attention op.
  auto arg = dyn_cast<BlockArgument>(getTable());
  auto owner =
      arg ? dyn_cast<AttentionOpInterface>(arg.getOwner()->getParentOp())
          : AttentionOpInterface();
  if (!owner)
    return emitOpError() << "reads a table that is not an aux argument of "
                            "an enclosing score_mod or mask_mod";
  return success();
}

//===----------------------------------------------------------------------===//
// PagedPrefillOp
//===----------------------------------------------------------------------===//

LogicalResult PagedPrefillOp::verify() {
  PagedKVType cache = getCache().getType();
  Rows q = rowsOf(getQ());
  if (getKind() == ::attn::AttentionKind::Encoder)
    return emitOpError() << "encoder attention has no KV cache; use "
                            "attn.prefill";
  if (failed(verifyCacheElementType(*this, "q", q.elementType(), cache)) ||
      failed(verifyKVScales(*this, cache, getKScale(), getVScale())) ||
      failed(verifyPageTables(*this, getPageTables(), getSeqLens())) ||
      failed(verifyCuSeqlens(*this, "cu_seqlens_q", getCuSeqlensQ())))
    return failure();
  if (getFp8Compute() && !cache.isFP8())
    return emitOpError() << "fp8_compute needs an FP8 cache (e4m3, e5m2), got "
                         << cache.getElementType();
  int64_t offsets = lengthOf(getCuSeqlensQ()), lens = lengthOf(getSeqLens());
  if (bothStatic(offsets, lens) && offsets != lens + 1)
    return emitOpError() << "cu_seqlens_q has " << offsets
                         << " entries but seq_lens has " << lens
                         << "; expected seq_lens + 1";
  return verifyAttention(*this, cache.getNumKvHeads(), cache.getHeadDim(),
                         "cache", cache.getHeadDim());
}

//===----------------------------------------------------------------------===//
// DecodeOp
//===----------------------------------------------------------------------===//

LogicalResult DecodeOp::verify() {
  PagedKVType cache = getCache().getType();
  Rows q = rowsOf(getQ());
  if (getKind() == ::attn::AttentionKind::Encoder)
    return emitOpError() << "encoder attention has no decode phase";
  int64_t queryLen = getQueryLen();
  if (queryLen < 1 || queryLen > ::attn::kMaxDecodeQueryLen)
    return emitOpError() << "query_len must be from 1 to "
                         << ::attn::kMaxDecodeQueryLen << ", got " << queryLen;
  if (failed(verifyCacheElementType(*this, "q", q.elementType(), cache)) ||
      failed(verifyKVScales(*this, cache, getKScale(), getVScale())) ||
      failed(verifyPageTables(*this, getPageTables(), getSeqLens())))
    return failure();
  int64_t requests = lengthOf(getSeqLens());
  if (bothStatic(q.tokens(), requests) && q.tokens() != requests * queryLen)
    return emitOpError() << "q has " << q.tokens() << " tokens but " << requests
                         << " requests x query_len " << queryLen << " = "
                         << requests * queryLen;
  return verifyAttention(*this, cache.getNumKvHeads(), cache.getHeadDim(),
                         "cache", cache.getHeadDim());
}

//===----------------------------------------------------------------------===//
// MlaDecodeOp
//===----------------------------------------------------------------------===//

LogicalResult MlaDecodeOp::verify() {
  PagedKVType ckv = getCkv().getType();
  Rows q = rowsOf(getQNope());
  int64_t queryLen = getQueryLen();
  if (queryLen < 1 || queryLen > ::attn::kMaxDecodeQueryLen)
    return emitOpError() << "query_len must be from 1 to "
                         << ::attn::kMaxDecodeQueryLen << ", got " << queryLen;
  if (ShapedType::isDynamic(q.heads()) || q.heads() < 1 ||
      q.heads() > ::attn::kMaxGroupSize)
    return emitOpError() << "q_nope must have a static 1 to "
                         << ::attn::kMaxGroupSize << " heads, got " << q.type;
  if (ckv.getNumKvHeads() != 1)
    return emitOpError() << "ckv must have one (latent) kv head, got "
                         << ckv.getNumKvHeads();
  int64_t rank = ckv.getHeadDim();
  if (rank < 64 || rank > 512 || rank % 64)
    return emitOpError() << "ckv head_dim (kv_lora_rank) must be a multiple "
                            "of 64 from 64 to 512, got "
                         << rank;
  if (q.headDim() != rank)
    return emitOpError() << "q_nope head_dim " << q.headDim()
                         << " must equal ckv's kv_lora_rank " << rank;
  if (ckv.getElementType() != q.elementType() &&
      !ckv.getElementType().isFloat8E4M3FN())
    return emitOpError() << "ckv element type " << ckv.getElementType()
                         << " must equal q_nope's (" << q.elementType()
                         << ") or be e4m3";
  if (ckv.getLayout() != ::attn::KVLayout::NHD)
    return emitOpError() << "ckv must have layout nhd (one row per token)";
  if (bool(getQRope()) != bool(getKpe()))
    return emitOpError() << "q_rope and kpe must be given together";
  if (getKpe()) {
    auto kpe = cast<PagedKVType>(getKpe().getType());
    Rows qRope = rowsOf(getQRope());
    if (kpe.getNumKvHeads() != 1 ||
        kpe.getElementType() != ckv.getElementType() ||
        kpe.getPageSize() != ckv.getPageSize() ||
        kpe.getLayout() != ckv.getLayout())
      return emitOpError() << "kpe must be paged as ckv with one kv head of "
                              "ckv's element type, got "
                           << kpe;
    int64_t ropeDim = kpe.getHeadDim();
    if (ropeDim != 64 && ropeDim != 128)
      return emitOpError() << "kpe head_dim (rope_dim) must be 64 or 128, got "
                           << ropeDim;
    if (qRope.elementType() != q.elementType() ||
        !verifyCompatibleShape(qRope.type.getShape(),
                               {q.tokens(), q.heads(), ropeDim})
             .succeeded())
      return emitOpError() << "q_rope must be tokens x " << q.heads() << " x "
                           << ropeDim << " of q_nope's element type, got "
                           << qRope.type;
  }
  if (ckv.isFP8() != bool(getKvScale()))
    return emitOpError() << (ckv.isFP8() ? "an e4m3 cache needs kv_scale"
                                         : "kv_scale is for an e4m3 cache");
  if (getKvScale() && lengthOf(getKvScale()) != 1 &&
      !ShapedType::isDynamic(lengthOf(getKvScale())))
    return emitOpError() << "kv_scale must have 1 element, got "
                         << lengthOf(getKvScale());
  if (failed(verifyPageTables(*this, getPageTables(), getSeqLens())))
    return failure();
  int64_t requests = lengthOf(getSeqLens());
  if (bothStatic(q.tokens(), requests) && q.tokens() != requests * queryLen)
    return emitOpError() << "q_nope has " << q.tokens() << " tokens but "
                         << requests << " requests x query_len " << queryLen
                         << " = " << requests * queryLen;
  if (MaskAttr mask = getMaskAttr()) {
    if (mask.hasWindow())
      return emitOpError() << "mla_decode has no sliding window";
    if (mask.isCausal() && queryLen == 1)
      return emitOpError() << "a causal mask needs query_len > 1 (one query "
                              "sees every cached key anyway)";
  }
  Rows out = rowsOf(getOut());
  if (out.type.getElementType() != q.elementType() ||
      failed(verifyCompatibleShape(out.type.getShape(), q.type.getShape())))
    return emitOpError() << "out must have q_nope's type " << q.type << ", got "
                         << out.type;
  if (Value lse = getLse()) {
    auto lseType = cast<RankedTensorType>(lse.getType());
    if (failed(verifyCompatibleShape(lseType.getShape(),
                                     ArrayRef<int64_t>{q.tokens(), q.heads()})))
      return emitOpError() << "lse must be tokens x heads of q_nope, got "
                           << lseType;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// AppendKVOp
//===----------------------------------------------------------------------===//

LogicalResult AppendKVOp::verify() {
  PagedKVType cache = getCache().getType();
  Rows k = rowsOf(getK());
  if (getK().getType() != getV().getType())
    return emitOpError() << "k " << getK().getType() << " and v "
                         << getV().getType() << " must have the same type";
  if (k.heads() != cache.getNumKvHeads() || k.headDim() != cache.getHeadDim())
    return emitOpError() << "k and v must be tokens x " << cache.getNumKvHeads()
                         << " x " << cache.getHeadDim()
                         << " to match the cache, got " << k.type;
  int64_t slots = lengthOf(getSlotMapping());
  if (bothStatic(slots, k.tokens()) && slots != k.tokens())
    return emitOpError() << "slot_mapping has " << slots
                         << " entries but k has " << k.tokens() << " tokens";
  if (failed(verifyCacheElementType(*this, "k", k.elementType(), cache)))
    return failure();
  return verifyKVScales(*this, cache, getKScale(), getVScale());
}

//===----------------------------------------------------------------------===//
// MergeStatesOp
//===----------------------------------------------------------------------===//

ParseResult MergeStatesOp::parse(OpAsmParser &parser, OperationState &result) {
  SmallVector<OpAsmParser::UnresolvedOperand, 8> states;
  Type outType, lseType;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseOperandList(states) ||
      parser.parseOptionalAttrDict(result.attributes) || parser.parseColon() ||
      parser.parseType(outType) || parser.parseComma() ||
      parser.parseType(lseType))
    return failure();
  if (states.size() % 2 != 0)
    return parser.emitError(loc) << "expected (output, lse) pairs, got "
                                 << states.size() << " operands";
  // Every pair has the result types.
  for (size_t i = 0; i < states.size(); ++i)
    if (parser.resolveOperand(states[i], i % 2 ? lseType : outType,
                              result.operands))
      return failure();
  result.addTypes({outType, lseType});
  return success();
}

void MergeStatesOp::print(OpAsmPrinter &p) {
  p << ' ' << getStates();
  p.printOptionalAttrDict((*this)->getAttrs());
  p << " : " << getOut().getType() << ", " << getLse().getType();
}

LogicalResult MergeStatesOp::verify() {
  unsigned n = getStates().size();
  if (n % 2 != 0 || n / 2 < 2 || n / 2 > ::attn::kMaxMergeStates)
    return emitOpError() << "merges 2 to " << ::attn::kMaxMergeStates
                         << " (output, lse) pairs, got " << n << " operands";
  for (unsigned i = 0; i < getNumStates(); ++i) {
    if (getStateOut(i).getType() != getOut().getType())
      return emitOpError() << "output " << i << " is "
                           << getStateOut(i).getType()
                           << "; every output has the result's type "
                           << getOut().getType();
    if (getStateLse(i).getType() != getLse().getType())
      return emitOpError() << "lse " << i << " is " << getStateLse(i).getType()
                           << "; every lse has the result's type "
                           << getLse().getType();
  }
  Rows out = rowsOf(getOut());
  if (failed(verifyRows(*this, "out", out)))
    return failure();
  auto lseType = cast<RankedTensorType>(getLse().getType());
  if (failed(verifyCompatibleShape(
          lseType.getShape(), ArrayRef<int64_t>{out.tokens(), out.heads()})))
    return emitOpError() << "lse must be tokens x heads of out (" << out.type
                         << "), got " << lseType;
  return success();
}

//===----------------------------------------------------------------------===//
// KernelLaunchOp
//===----------------------------------------------------------------------===//

LogicalResult KernelLaunchOp::verify() {
  // A spec built with the unchecked get() has not been verified yet.
  if (failed(getSpec().verifyParameters([&] { return emitOpError(); })))
    return failure();
  ::attn::KernelSpec spec = getSpec().getSpec();
  // The symbol is how the runtime finds the entry in the compiled unit.
  std::string symbol = spec.symbol();
  if (getKernel() != symbol)
    return emitOpError() << "kernel @" << getKernel()
                         << " does not match its spec; expected @" << symbol;

  // Operands and results follow the lowered op (see the op description).
  // Decode and both prefills are attention kernels: they take a scale and
  // may write the LSE.
  // merge_states: (output, lse) pairs in, the merged pair out.
  if (spec.kind == ::attn::KernelKind::MergeStates) {
    size_t n = getArgs().size();
    if (n % 2 != 0 || n / 2 < 2 || n / 2 > size_t(::attn::kMaxMergeStates))
      return emitOpError() << "takes 2 to " << ::attn::kMaxMergeStates
                           << " (output, lse) pairs for its merge_states "
                              "spec, got "
                           << n << " operands";
    if (getOuts().size() != 2)
      return emitOpError() << "returns the merged output and lse for its "
                              "merge_states spec, got "
                           << getOuts().size() << " results";
    return success();
  }
  bool attention = spec.kind != ::attn::KernelKind::AppendKV;
  SmallVector<StringRef, 8> operands;
  switch (spec.kind) {
  case ::attn::KernelKind::Decode:
    operands = {"q", "cache", "page_tables", "seq_lens"};
    break;
  case ::attn::KernelKind::Prefill:
    operands = {"q", "k", "v", "cu_seqlens_q", "cu_seqlens_kv"};
    break;
  case ::attn::KernelKind::PagedPrefill:
    operands = {"q", "cache", "cu_seqlens_q", "page_tables", "seq_lens"};
    break;
  case ::attn::KernelKind::AppendKV:
    operands = {"k", "v", "cache", "slot_mapping"};
    break;
  case ::attn::KernelKind::MlaDecode:
    operands = {"q_nope", "ckv", "page_tables", "seq_lens"};
    if (spec.ropeDim)
      operands.append({"q_rope", "kpe"});
    break;
  case ::attn::KernelKind::MergeStates:
  case ::attn::KernelKind::CopyPages:
  case ::attn::KernelKind::AdvanceStep:
    // Unreachable from valid IR: the kernel_spec verifier rejects them.
    return emitOpError() << "cannot launch the runtime-only "
                         << ::attn::toString(spec.kind) << " kernel";
  }
  if (spec.isFP8KV() && spec.kind == ::attn::KernelKind::MlaDecode)
    operands.push_back("kv_scale");
  else if (spec.isFP8KV())
    operands.append({"k_scale", "v_scale"});
#define ATTN_HEAD_TABLE(flag, pointer, operand, accessor)                      \
  if (attention && spec.flag)                                                  \
    operands.push_back(operand);
#include "templates/attn/variant_knobs.h"
  static const char *const kAux[] = {"aux0", "aux1", "aux2", "aux3"};
  for (int i = 0; i < spec.numAuxTables() && i < 4; ++i)
    operands.push_back(kAux[i]);
  if (getArgs().size() != operands.size())
    return emitOpError() << "takes " << operands.size() << " operands for its "
                         << ::attn::toString(spec.kind) << " spec ("
                         << llvm::join(operands, ", ") << "), got "
                         << getArgs().size();
  size_t results = attention && spec.writeLse ? 2 : 1;
  if (getOuts().size() != results)
    return emitOpError() << "returns " << results << " results for its "
                         << ::attn::toString(spec.kind) << " spec, got "
                         << getOuts().size();

  return success();
}
