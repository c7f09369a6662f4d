//===- Frontend.cpp - host variants -> attn IR -> kernel specs ------------===//
#include "compiler/Frontend/Frontend.h"
#include "compiler/Frontend/SourceLimits.h"
#include "compiler/Pipelines/Pipelines.h"
#include "compiler/Transforms/KernelSpecs.h"
#include "dialect/IR/AttnOps.h"
#include "spec/KernelLimits.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <array>

using namespace mlir;
using namespace mlir::attn;

namespace {

/// Collects the diagnostics emitted to a context while alive, as text
/// ("<loc>: error: <message>", one per line, notes included).
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(MLIRContext &context)
      : handler(&context, [this](Diagnostic &diag) {
          append(diag);
          return success();
        }) {}

  /// An llvm::Error with everything collected, or `fallback` if nothing was.
  llvm::Error takeError(StringRef fallback) {
    std::string message = text.empty() ? fallback.str() : text;
    // Drop the trailing newline of the last diagnostic.
    if (!message.empty() && message.back() == '\n')
      message.pop_back();
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  }

private:
  void append(Diagnostic &diag) {
    llvm::raw_string_ostream os(text);
    os << diag.getLocation() << ": ";
    switch (diag.getSeverity()) {
    case DiagnosticSeverity::Error:
      os << "error: ";
      break;
    case DiagnosticSeverity::Warning:
      os << "warning: ";
      break;
    case DiagnosticSeverity::Note:
      os << "note: ";
      break;
    case DiagnosticSeverity::Remark:
      os << "remark: ";
      break;
    }
    os << diag << "\n";
    for (Diagnostic &note : diag.getNotes())
      os << note.getLocation() << ": note: " << note << "\n";
  }

  std::string text;
  ScopedDiagnosticHandler handler;
};

/// Where diagnostics about a variant point: the variant itself.
Location variantLoc(MLIRContext &context, StringRef name) {
  return NameLoc::get(StringAttr::get(&context, name));
}

void loadDialects(MLIRContext &context) {
  context.getOrLoadDialect<AttnDialect>();
  context.getOrLoadDialect<func::FuncDialect>();
}

/// A tensor type, or null after an error at `loc` (a negative size).
RankedTensorType tensorType(Location loc, ArrayRef<int64_t> shape,
                            Type elementType) {
  return RankedTensorType::getChecked([&] { return emitError(loc); }, shape,
                                      elementType);
}

/// tensor<?xheadsxheadDimxT>: token rows of q, out, k or v.
RankedTensorType rowsType(Location loc, int64_t heads, int64_t headDim,
                          Type elementType) {
  return tensorType(loc, {ShapedType::kDynamic, heads, headDim}, elementType);
}

/// FP8 dequantization scales: one per tensor or one per KV head.
RankedTensorType scaleType(Location loc, int64_t numKVHeads, bool perHead) {
  return tensorType(loc, {perHead ? numKVHeads : 1},
                    Float32Type::get(loc.getContext()));
}

/// Appends the k_scale and v_scale argument types an FP8 `cache` needs;
/// false (with a diagnostic) if they cannot be built.
bool appendKVScaleTypes(Location loc, PagedKVType cache, bool perHead,
                        SmallVectorImpl<Type> &argTypes) {
  if (!isFP8Type(cache.getElementType()))
    return true;
  RankedTensorType scales = scaleType(loc, cache.getNumKvHeads(), perHead);
  if (!scales)
    return false;
  argTypes.append({scales, scales});
  return true;
}

PagedKVType cacheType(Location loc, int numKVHeads, int headDim,
                      ::attn::ScalarType kvType, int pageSize,
                      ::attn::KVLayout layout) {
  MLIRContext *context = loc.getContext();
  return PagedKVType::getChecked([&] { return emitError(loc); }, context,
                                 int64_t(numKVHeads), int64_t(headDim),
                                 getElementType(context, kvType),
                                 int64_t(pageSize), layout);
}

/// The mask of a variant: causal, with the window when there is one; null
/// (no mask) when neither is set. Fails, after an error at `loc`, for a mask
/// no op accepts (a negative window, a window without causal).
LogicalResult buildMask(Location loc, bool causal,
                        std::optional<int> windowLeft, MaskAttr &mask) {
  mask = MaskAttr();
  if (!causal && !windowLeft)
    return success();
  std::optional<int64_t> window;
  if (windowLeft)
    window = *windowLeft;
  mask =
      MaskAttr::getChecked([&] { return emitError(loc); }, loc.getContext(),
                           causal ? MaskKind::causal : MaskKind::none, window);
  return success(static_cast<bool>(mask));
}

/// An optional f32 knob of a variant (scale, soft-cap) as an attribute;
/// null when unset.
FloatAttr optionalF32(Builder &builder, std::optional<float> value) {
  return value ? builder.getF32FloatAttr(*value) : FloatAttr();
}

/// The schedule a variant pins, as the attribute its op keeps (where
/// attn-select-schedule leaves it); null when it pins none. Fails, after an
/// error at `loc`, for a schedule the attribute refuses.
template <class Attr, class Schedule>
FailureOr<Attr> pinnedSchedule(Location loc,
                               const std::optional<Schedule> &schedule) {
  if (!schedule)
    return Attr();
  Attr attr = Attr::getChecked([&] { return emitError(loc); }, loc.getContext(),
                               *schedule);
  if (!attr)
    return failure();
  return attr;
}

/// page_tables (tensor<?x?xi32>) and seq_lens (tensor<?xi32>) of a paged op.
std::array<Type, 2> pagedIndexTypes(Builder &builder) {
  int64_t dyn = ShapedType::kDynamic;
  return {RankedTensorType::get({dyn, dyn}, builder.getI32Type()),
          RankedTensorType::get({dyn}, builder.getI32Type())};
}

/// tensor<?xnumQHeadsxf32>: the log-sum-exp result of an attention op.
RankedTensorType lseType(Builder &builder, int numQHeads) {
  return RankedTensorType::get({ShapedType::kDynamic, int64_t(numQHeads)},
                               builder.getF32Type());
}

/// Appends what the attention ops share: a [numQHeads] f32 argument per
/// per-head table the knobs turn on (ALiBi slopes, sinks; in the order of
/// templates/attn/variant_knobs.h), and the LSE result (also returned in
/// `lse`) when `writeLse`.
bool appendScoreModTypes(Location loc, Builder &builder, int numQHeads,
                         const ::attn::AttentionKnobs &knobs,
                         SmallVectorImpl<Type> &argTypes,
                         SmallVectorImpl<Type> &resultTypes,
                         RankedTensorType &lse) {
  bool tables[] = {
#define ATTN_HEAD_TABLE(flag, ...) knobs.flag,
#include "templates/attn/variant_knobs.h"
  };
  for (bool on : tables) {
    if (!on)
      continue;
    RankedTensorType table = tensorType(loc, {numQHeads}, builder.getF32Type());
    if (!table)
      return false;
    argTypes.push_back(table);
  }
  bool writeLse = knobs.writeLse;
  if (writeLse) {
    lse = lseType(builder, numQHeads);
    resultTypes.push_back(lse);
  }
  return true;
}

/// The per-head table arguments appendScoreModTypes added, which end the
/// argument list: one per table of templates/attn/variant_knobs.h (ALiBi
/// slopes, sinks, q_scale), null when off. The ops take them in the knob
/// table's order, which the builders expand in place.
struct HeadTableArgs {
#define ATTN_HEAD_TABLE(flag, ...) Value flag;
#include "templates/attn/variant_knobs.h"
};
HeadTableArgs headTableArgs(const ::attn::AttentionKnobs &knobs,
                            ValueRange args) {
  size_t next = args.size();
#define ATTN_HEAD_TABLE(flag, ...) next -= size_t(knobs.flag);
#include "templates/attn/variant_knobs.h"
  HeadTableArgs tables;
#define ATTN_HEAD_TABLE(flag, ...)                                             \
  if (knobs.flag)                                                              \
    tables.flag = args[next++];
#include "templates/attn/variant_knobs.h"
  return tables;
}

/// q's rows: of the output's type, or e4m3 for a query the caller quantized
/// (fp8Query, with its q_scale). Null, after an error, for an FP8 `out`.
RankedTensorType queryType(Location loc, const ::attn::AttentionKnobs &knobs,
                           RankedTensorType out) {
  if (out && isFP8Type(out.getElementType())) {
    emitError(loc) << "qType (of q and the output) must be f16 or bf16, got "
                   << out.getElementType()
                   << "; an e4m3 q the caller quantized is fp8Query";
    return nullptr;
  }
  if (!out || !knobs.fp8Query)
    return out;
  return RankedTensorType::get(out.getShape(),
                               Float8E4M3FNType::get(loc.getContext()));
}

/// A variant's score_mod and mask_mod, parsed from their IR text into a
/// holder op, and the types of the aux tables they read (the region
/// arguments after the positions), which the built function takes last.
struct Modifiers {
  /// Each region in a holder op of its own; null where the variant has none.
  OwningOpRef<Operation *> scoreMod, maskMod;
  SmallVector<Type> auxTypes;

  /// Gives the parsed regions to `op`, the attention op just built.
  void moveInto(AttentionOpInterface op) {
    if (scoreMod)
      op.getScoreMod().takeBody(scoreMod.get()->getRegion(0));
    if (maskMod)
      op.getMaskMod().takeBody(maskMod.get()->getRegion(0));
  }
};

} // namespace

FailureOr<OwningOpRef<Operation *>>
mlir::attn::parseModifierRegion(MLIRContext &context, StringRef text,
                                StringRef name) {
  Location loc = FileLineColLoc::get(&context, name, 0, 0);
  if (text.size() > ::attn::kMaxModifierBytes)
    return emitError(loc) << name << " is " << text.size()
                          << " bytes of text; at most "
                          << ::attn::kMaxModifierBytes;
  if (llvm::Error error = checkIRText(text, name))
    return emitError(loc) << llvm::toString(std::move(error));
  // The holder is no attn op: an unregistered one, allowed while parsing.
  std::string holderName = ("attn_frontend." + name).str();
  std::string source =
      ("\"" + holderName + "\"() (" + text + "\n) : () -> ()").str();
  bool allowed = context.allowsUnregisteredDialects();
  context.allowUnregisteredDialects(true);
  Block block;
  LogicalResult parsed = parseSourceString(
      source, &block,
      // aux_load checks its table against the attention op
      // the region moves into, and verifies there.
      ParserConfig(&context, /*verifyAfterParse=*/false), name);
  context.allowUnregisteredDialects(allowed);
  if (failed(parsed))
    return failure();
  for (Operation &op : block)
    if (failed(rejectMalformedBoolArrays(&op)))
      return failure();
  Operation *holder =
      block.getOperations().size() == 1 ? &block.front() : nullptr;
  if (!holder || holder->getName().getStringRef() != holderName ||
      holder->getNumRegions() != 1 || holder->getNumOperands() ||
      holder->getNumResults() || !holder->getAttrDictionary().empty() ||
      holder->getPropertiesAsAttribute() || !holder->getRegion(0).hasOneBlock())
    return emitError(loc) << name
                          << " must be exactly one region of one block, "
                             "`{ ^bb0(...): ... }`, and nothing else";
  holder->remove();
  return OwningOpRef<Operation *>(holder);
}

namespace {

/// Parses `knobs.scoreMod` and `knobs.maskMod` (each one region or empty).
/// Fails, after the error, on text that is not exactly one region; what the
/// regions may hold is the attention op's verifier's to check.
FailureOr<Modifiers> parseModifiers(MLIRContext &context,
                                    const ::attn::AttentionKnobs &knobs) {
  Modifiers modifiers;
  for (auto [text, name, holder] :
       {std::tuple{&knobs.scoreMod, "score_mod", &modifiers.scoreMod},
        {&knobs.maskMod, "mask_mod", &modifiers.maskMod}}) {
    if (text->empty())
      continue;
    FailureOr<OwningOpRef<Operation *>> parsed =
        parseModifierRegion(context, *text, name);
    if (failed(parsed))
      return failure();
    *holder = std::move(*parsed);
  }
  // The aux tables follow score_mod's 6 and mask_mod's 5 position arguments.
  for (auto [holder, positions] :
       {std::pair{&modifiers.scoreMod, 6u}, {&modifiers.maskMod, 5u}}) {
    if (!*holder || !modifiers.auxTypes.empty())
      continue;
    Region &region = holder->get()->getRegion(0);
    for (BlockArgument arg : region.getArguments().drop_front(
             std::min<size_t>(positions, region.getNumArguments())))
      modifiers.auxTypes.push_back(arg.getType());
  }
  return modifiers;
}

/// A module holding func.func @name(argTypes) -> resultTypes whose body
/// `buildBody` fills from the arguments and returns the values to return.
OwningOpRef<ModuleOp> buildFunctionModule(
    Location loc, StringRef name, ArrayRef<Type> argTypes,
    ArrayRef<Type> resultTypes,
    function_ref<ValueRange(OpBuilder &, ValueRange)> buildBody) {
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  OpBuilder builder = OpBuilder::atBlockEnd(module->getBody());
  auto func = builder.create<func::FuncOp>(
      loc, name, builder.getFunctionType(argTypes, resultTypes));
  Block *entry = func.addEntryBlock();
  builder.setInsertionPointToStart(entry);
  ValueRange results = buildBody(builder, entry->getArguments());
  builder.create<func::ReturnOp>(loc, results);
  return module;
}

/// The one spec `variant`'s module (made by `build`) lowers to for `arch`.
template <class Variant>
llvm::Expected<::attn::KernelSpec>
specOfVariant(OwningOpRef<ModuleOp> (*build)(MLIRContext &, const Variant &),
              const Variant &variant, ::attn::Arch arch) {
  // A context per call: hosts compile variants from several threads, and a
  // context without its own threads costs far less than a kernel compile.
  MLIRContext context(MLIRContext::Threading::DISABLED);
  // Errors name their location; showing the op would print IR a host wrote
  // (and MLIR 19 crashes printing some: rejectMalformedBoolArrays).
  context.printOpOnDiagnostic(false);
  DiagnosticCollector diagnostics(context);
  OwningOpRef<ModuleOp> module = build(context, variant);
  if (!module)
    return diagnostics.takeError("cannot build the attn IR of the variant");
  llvm::Expected<std::vector<::attn::KernelSpec>> specs =
      lowerToKernelSpecs(*module, arch);
  if (!specs)
    return specs.takeError();
  if (specs->size() != 1)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "expected one kernel for the variant, got " +
                                       std::to_string(specs->size()));
  return specs->front();
}

} // namespace

OwningOpRef<ModuleOp>
mlir::attn::buildDecodeModule(MLIRContext &context,
                              const ::attn::DecodeVariant &variant) {
  loadDialects(context);
  Location loc = variantLoc(context, "attn::DecodeVariant");
  Builder builder(&context);
  Type qElement = getElementType(&context, variant.qType);
  RankedTensorType outType =
      rowsType(loc, variant.numQHeads, variant.headDim, qElement);
  RankedTensorType qType = queryType(loc, variant, outType);
  PagedKVType cache =
      cacheType(loc, variant.numKVHeads, variant.headDim, variant.kvType,
                variant.pageSize, variant.layout);
  if (!qType || !cache)
    return nullptr;

  auto [pageTables, seqLens] = pagedIndexTypes(builder);
  SmallVector<Type> argTypes = {qType, cache, pageTables, seqLens};
  bool fp8 = isFP8Type(cache.getElementType());
  if (!appendKVScaleTypes(loc, cache, variant.perHeadKVScale, argTypes))
    return nullptr;
  SmallVector<Type> resultTypes = {outType};
  RankedTensorType lse;
  if (!appendScoreModTypes(loc, builder, variant.numQHeads, variant, argTypes,
                           resultTypes, lse))
    return nullptr;
  FailureOr<Modifiers> modifiers = parseModifiers(context, variant);
  if (failed(modifiers))
    return nullptr;
  argTypes.append(modifiers->auxTypes);
  size_t numAux = modifiers->auxTypes.size();

  MaskAttr mask;
  if (failed(buildMask(loc, variant.causal, variant.windowLeft, mask)))
    return nullptr;
  FloatAttr scale = optionalF32(builder, variant.scale);
  FloatAttr softcap = optionalF32(builder, variant.softcap);
  FailureOr<DecodeScheduleAttr> pinned =
      pinnedSchedule<DecodeScheduleAttr>(loc, variant.schedule);
  if (failed(pinned))
    return nullptr;

  return buildFunctionModule(
      loc, "decode", argTypes, resultTypes,
      [&](OpBuilder &b, ValueRange args) -> ValueRange {
        Value kScale = fp8 ? args[4] : Value();
        Value vScale = fp8 ? args[5] : Value();
        HeadTableArgs tables = headTableArgs(variant, args.drop_back(numAux));
        auto decode = b.create<DecodeOp>(loc, outType, lse, args[0], args[1],
                                         args[2], args[3], kScale, vScale,
#define ATTN_HEAD_TABLE(flag, ...) tables.flag,
#include "templates/attn/variant_knobs.h"
                                         args.take_back(numAux),
                                         uint64_t(int64_t(variant.queryLen)),
                                         *pinned, mask, variant.kind, scale,
                                         softcap, variant.batchInvariant);
        modifiers->moveInto(decode);
        return decode->getResults();
      });
}

OwningOpRef<ModuleOp>
mlir::attn::buildPrefillModule(MLIRContext &context,
                               const ::attn::PrefillVariant &variant) {
  loadDialects(context);
  Location loc = variantLoc(context, "attn::PrefillVariant");
  Builder builder(&context);
  Type element = getElementType(&context, variant.qType);
  RankedTensorType outType =
      rowsType(loc, variant.numQHeads, variant.headDim, element);
  if (!outType)
    return nullptr;
  // MLA's form: q and k have ropeDim more dims than v and the output.
  const int qkDim = variant.headDim + variant.ropeDim;
  if (variant.ropeDim != 0 && (variant.paged || variant.fp8KV)) {
    emitError(loc) << "ropeDim (q/k wider than v) is for ragged 16-bit k/v; "
                      "got "
                   << (variant.paged ? "a paged cache" : "FP8 k/v");
    return nullptr;
  }
  RankedTensorType qType = queryType(
      loc, variant,
      variant.ropeDim ? rowsType(loc, variant.numQHeads, qkDim, element)
                      : outType);
  if (!qType)
    return nullptr;
  RankedTensorType vector =
      RankedTensorType::get({ShapedType::kDynamic}, builder.getI32Type());

  // Ragged: q, k, v, cu_seqlens_q, cu_seqlens_kv. Paged: q, cache,
  // cu_seqlens_q, page_tables, seq_lens, and kv_scales for an FP8 cache.
  SmallVector<Type> argTypes = {qType};
  PagedKVType cache;
  if (const std::optional<::attn::PagedKVFormat> &paged = variant.paged) {
    cache = cacheType(loc, variant.numKVHeads, variant.headDim, paged->kvType,
                      paged->pageSize, paged->layout);
    if (!cache)
      return nullptr;
    auto [pageTables, seqLens] = pagedIndexTypes(builder);
    argTypes.append({cache, vector, pageTables, seqLens});
    if (!appendKVScaleTypes(loc, cache, paged->perHeadKVScale, argTypes))
      return nullptr;
  } else {
    // Ragged k, v: of q's type, or FP8 with their kv_scales.
    const std::optional<::attn::FP8RowsFormat> &fp8 = variant.fp8KV;
    Type kvElement = fp8 ? getElementType(&context, fp8->kvType) : element;
    RankedTensorType kvType =
        rowsType(loc, variant.numKVHeads, variant.headDim, kvElement);
    RankedTensorType kType =
        variant.ropeDim ? rowsType(loc, variant.numKVHeads, qkDim, kvElement)
                        : kvType;
    if (!kvType || !kType)
      return nullptr;
    argTypes.append({kType, kvType, vector, vector});
    if (fp8) {
      if (!isFP8Type(kvType.getElementType())) {
        emitError(loc) << "fp8KV->kvType must be e4m3 or e5m2, got "
                       << kvType.getElementType();
        return nullptr;
      }
      RankedTensorType scales =
          scaleType(loc, variant.numKVHeads, fp8->perHeadKVScale);
      if (!scales)
        return nullptr;
      argTypes.append({scales, scales});
    }
  }
  SmallVector<Type> resultTypes = {outType};
  RankedTensorType lse;
  if (!appendScoreModTypes(loc, builder, variant.numQHeads, variant, argTypes,
                           resultTypes, lse))
    return nullptr;
  FailureOr<Modifiers> modifiers = parseModifiers(context, variant);
  if (failed(modifiers))
    return nullptr;
  argTypes.append(modifiers->auxTypes);
  size_t numAux = modifiers->auxTypes.size();

  MaskAttr mask;
  if (failed(buildMask(loc, variant.causal, variant.windowLeft, mask)))
    return nullptr;
  FloatAttr scale = optionalF32(builder, variant.scale);
  FloatAttr softcap = optionalF32(builder, variant.softcap);
  FailureOr<PrefillScheduleAttr> pinned =
      pinnedSchedule<PrefillScheduleAttr>(loc, variant.schedule);
  if (failed(pinned))
    return nullptr;

  if (variant.paged && variant.fp8KV) {
    emitError(loc) << "fp8KV is for ragged k/v; a paged cache's type is "
                      "paged->kvType";
    return nullptr;
  }
  if (variant.fp8Compute && !(cache && cache.isFP8()) && !variant.fp8KV) {
    emitError(loc) << "fp8Compute needs FP8 keys and values (paged->kvType "
                      "or fp8KV e4m3 or e5m2)";
    return nullptr;
  }
  if (cache) {
    bool fp8 = cache.isFP8();
    return buildFunctionModule(
        loc, "paged_prefill", argTypes, resultTypes,
        [&](OpBuilder &b, ValueRange args) -> ValueRange {
          Value kScale = fp8 ? args[5] : Value();
          Value vScale = fp8 ? args[6] : Value();
          HeadTableArgs tables = headTableArgs(variant, args.drop_back(numAux));
          auto prefill = b.create<PagedPrefillOp>(
              loc, outType, lse, args[0], args[1], args[2], args[3], args[4],
              kScale, vScale,
#define ATTN_HEAD_TABLE(flag, ...) tables.flag,
#include "templates/attn/variant_knobs.h"
              args.take_back(numAux), *pinned, variant.fp8Compute, mask,
              variant.kind, scale, softcap, variant.batchInvariant);
          modifiers->moveInto(prefill);
          return prefill->getResults();
        });
  }
  return buildFunctionModule(
      loc, "prefill", argTypes, resultTypes,
      [&](OpBuilder &b, ValueRange args) -> ValueRange {
        Value kScale = variant.fp8KV ? args[5] : Value();
        Value vScale = variant.fp8KV ? args[6] : Value();
        HeadTableArgs tables = headTableArgs(variant, args.drop_back(numAux));
        auto prefill = b.create<PrefillOp>(
            loc, outType, lse, args[0], args[1], args[2], args[3], args[4],
            kScale, vScale,
#define ATTN_HEAD_TABLE(flag, ...) tables.flag,
#include "templates/attn/variant_knobs.h"
            args.take_back(numAux), *pinned, variant.fp8Compute, mask,
            variant.kind, scale, softcap, variant.batchInvariant);
        modifiers->moveInto(prefill);
        return prefill->getResults();
      });
}

OwningOpRef<ModuleOp>
mlir::attn::buildAppendKVModule(MLIRContext &context,
                                const ::attn::AppendKVVariant &variant) {
  loadDialects(context);
  Location loc = variantLoc(context, "attn::AppendKVVariant");
  Builder builder(&context);
  RankedTensorType rows = rowsType(loc, variant.numKVHeads, variant.headDim,
                                   getElementType(&context, variant.inType));
  PagedKVType cache =
      cacheType(loc, variant.numKVHeads, variant.headDim, variant.kvType,
                variant.pageSize, variant.layout);
  if (!rows || !cache)
    return nullptr;
  SmallVector<Type> argTypes = {
      rows, rows, cache,
      RankedTensorType::get({ShapedType::kDynamic}, builder.getI64Type())};
  bool fp8 = isFP8Type(cache.getElementType());
  if (!appendKVScaleTypes(loc, cache, variant.perHeadKVScale, argTypes))
    return nullptr;
  return buildFunctionModule(loc, "append_kv", argTypes, {cache},
                             [&](OpBuilder &b, ValueRange args) -> ValueRange {
                               auto append = b.create<AppendKVOp>(
                                   loc, cache, args[0], args[1], args[2],
                                   args[3], fp8 ? args[4] : Value(),
                                   fp8 ? args[5] : Value());
                               return append->getResults();
                             });
}

OwningOpRef<ModuleOp>
mlir::attn::buildMergeStatesModule(MLIRContext &context,
                                   const ::attn::MergeStatesVariant &variant) {
  loadDialects(context);
  Location loc = variantLoc(context, "attn::MergeStatesVariant");
  Builder builder(&context);
  RankedTensorType out = rowsType(loc, variant.numHeads, variant.headDim,
                                  getElementType(&context, variant.dtype));
  RankedTensorType lse = tensorType(
      loc, {ShapedType::kDynamic, variant.numHeads}, builder.getF32Type());
  if (!out || !lse)
    return nullptr;
  return buildFunctionModule(
      loc, "merge_states", {out, lse, out, lse}, {out, lse},
      [&](OpBuilder &b, ValueRange args) -> ValueRange {
        return b.create<MergeStatesOp>(loc, TypeRange{out, lse}, args)
            ->getResults();
      });
}

OwningOpRef<ModuleOp>
mlir::attn::buildMlaDecodeModule(MLIRContext &context,
                                 const ::attn::MlaDecodeVariant &variant) {
  loadDialects(context);
  Location loc = variantLoc(context, "attn::MlaDecodeVariant");
  Builder builder(&context);
  Type qElement = getElementType(&context, variant.qType);
  RankedTensorType qNope =
      rowsType(loc, variant.numQHeads, variant.kvLoraRank, qElement);
  PagedKVType ckv = cacheType(loc, 1, variant.kvLoraRank, variant.kvType,
                              variant.pageSize, ::attn::KVLayout::NHD);
  if (!qNope || !ckv)
    return nullptr;
  auto [pageTables, seqLens] = pagedIndexTypes(builder);
  SmallVector<Type> argTypes = {qNope, ckv, pageTables, seqLens};
  const bool rope = variant.ropeDim != 0;
  if (rope) {
    RankedTensorType qRope =
        rowsType(loc, variant.numQHeads, variant.ropeDim, qElement);
    PagedKVType kpe = cacheType(loc, 1, variant.ropeDim, variant.kvType,
                                variant.pageSize, ::attn::KVLayout::NHD);
    if (!qRope || !kpe)
      return nullptr;
    argTypes.append({qRope, kpe});
  }
  const bool fp8 = isFP8Type(ckv.getElementType());
  if (fp8)
    argTypes.push_back(scaleType(loc, 1, /*perHead=*/false));
  SmallVector<Type> resultTypes = {qNope};
  RankedTensorType lse;
  if (variant.writeLse) {
    lse = lseType(builder, variant.numQHeads);
    resultTypes.push_back(lse);
  }
  MaskAttr mask;
  if (failed(buildMask(loc, variant.causal, std::nullopt, mask)))
    return nullptr;
  FailureOr<DecodeScheduleAttr> pinned =
      pinnedSchedule<DecodeScheduleAttr>(loc, variant.schedule);
  if (failed(pinned))
    return nullptr;
  auto body = [&](OpBuilder &b, ValueRange args) -> ValueRange {
    Value qRope = rope ? args[4] : Value();
    Value kpe = rope ? args[5] : Value();
    Value kvScale = fp8 ? args.back() : Value();
    auto mla = b.create<MlaDecodeOp>(
        loc, qNope, lse, args[0], args[1], args[2], args[3], qRope, kpe,
        kvScale, uint64_t(int64_t(variant.queryLen)), mask,
        optionalF32(builder, variant.scale), *pinned, variant.batchInvariant);
    return mla->getResults();
  };
  return buildFunctionModule(loc, "mla_decode", argTypes, resultTypes, body);
}

llvm::Expected<std::vector<::attn::KernelSpec>>
mlir::attn::lowerToKernelSpecs(ModuleOp module, ::attn::Arch arch) {
  MLIRContext &context = *module.getContext();
  DiagnosticCollector diagnostics(context);
  if (failed(verify(module)))
    return diagnostics.takeError("the attn IR does not verify");

  PassManager pm(&context, ModuleOp::getOperationName());
  AttnPipelineOptions options;
  options.arch = std::string(::attn::toString(arch));
  buildAttnPipeline(pm, options);
  if (failed(pm.run(module)))
    return diagnostics.takeError("attn-pipeline failed");

  std::vector<::attn::KernelSpec> specs;
  WalkResult result = module.walk([&](KernelLaunchOp launch) {
    FailureOr<::attn::KernelSpec> spec = getKernelSpec(launch);
    if (failed(spec))
      return WalkResult::interrupt();
    specs.push_back(*spec);
    return WalkResult::advance();
  });
  if (result.wasInterrupted())
    return diagnostics.takeError("a kernel launch does not verify");
  return specs;
}

llvm::Expected<::attn::KernelSpec>
mlir::attn::compileDecodeVariant(const ::attn::DecodeVariant &variant,
                                 ::attn::Arch arch) {
  return specOfVariant(buildDecodeModule, variant, arch);
}

llvm::Expected<::attn::KernelSpec>
mlir::attn::compileAppendKVVariant(const ::attn::AppendKVVariant &variant,
                                   ::attn::Arch arch) {
  return specOfVariant(buildAppendKVModule, variant, arch);
}

llvm::Expected<::attn::KernelSpec>
mlir::attn::compileMlaDecodeVariant(const ::attn::MlaDecodeVariant &variant,
                                    ::attn::Arch arch) {
  return specOfVariant(buildMlaDecodeModule, variant, arch);
}

llvm::Expected<::attn::KernelSpec>
mlir::attn::compileMergeStatesVariant(const ::attn::MergeStatesVariant &variant,
                                      ::attn::Arch arch) {
  return specOfVariant(buildMergeStatesModule, variant, arch);
}

llvm::Expected<::attn::KernelSpec>
mlir::attn::compilePrefillVariant(const ::attn::PrefillVariant &variant,
                                  ::attn::Arch arch) {
  return specOfVariant(buildPrefillModule, variant, arch);
}
