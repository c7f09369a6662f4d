//===- Modifiers.cpp - score_mod / mask_mod regions to CUDA ---------------===//
//
// One C++ statement per op, in block order: each result is a `const` local
// named v<N>; scf.if declares its results and assigns them in each branch.
// Each op is a call of its namesake in templates/attn/region_ops.h
// (arith.addi -> attn::region::addi), which computes what MLIR's op means;
// i1 is bool, and integers keep their width (int32_t, int64_t). Float
// constants are written as hex literals, so the kernel sees exactly the
// IR's value.
//
//===----------------------------------------------------------------------===//
#include "compiler/Transforms/Modifiers.h"
#include "spec/KernelLimits.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdio>
#include <cstring>

namespace mlir::attn {

namespace {

/// The CUDA type of a region scalar (the verifier admits only these).
const char *cudaType(Type type) {
  if (type.isInteger(1))
    return "bool";
  if (type.isInteger(32))
    return "int32_t";
  if (type.isInteger(64))
    return "int64_t";
  if (type.isF32())
    return "float";
  return "double";
}

/// A float constant exactly: a hex literal, or its bits where it has none
/// (infinities, NaNs with their payload).
std::string floatLiteral(const APFloat &value) {
  bool f32 = &value.getSemantics() == &APFloat::IEEEsingle();
  uint64_t bits = value.bitcastToAPInt().getZExtValue();
  if (!value.isFinite())
    return f32 ? llvm::formatv(
                     "attn::region::bitcast<float>(uint32_t(0x{0:x-}u))", bits)
                     .str()
               : llvm::formatv(
                     "attn::region::bitcast<double>(uint64_t(0x{0:x-}ull))",
                     bits)
                     .str();
  char text[64];
  if (f32)
    std::snprintf(text, sizeof text, "%af", value.convertToFloat());
  else
    std::snprintf(text, sizeof text, "%a", value.convertToDouble());
  return text;
}

/// Whether `value` is an arith.constant (a division by one compiles to a
/// multiply, a shift or one short path).
bool isConstant(Value value) {
  return value.getDefiningOp<arith::ConstantOp>() != nullptr;
}

/// 1 / c where `value` is a float constant c whose inverse is exact (a
/// power of two): x / c is then x * (1 / c) exactly, one multiply rather
/// than a division and its slow path.
std::optional<APFloat> exactInverse(Value value) {
  auto constant = value.getDefiningOp<arith::ConstantOp>();
  auto attr = constant ? dyn_cast<FloatAttr>(constant.getValue()) : nullptr;
  APFloat inverse(0.0);
  if (!attr || !attr.getValue().getExactInverse(&inverse))
    return std::nullopt;
  return inverse;
}

/// What an op adds to a region's inline cost: the code NVRTC generates for
/// it where it is inlined at every score (a tile of 64 or more per thread,
/// on each of the kernel's tile paths), measured as NVRTC time per op in an
/// sm_90a prefill kernel. Branchy expansions (IEEE division and square root,
/// integer division by a variable and its guards, the saturating float to
/// integer casts, libm's functions, scf.if) cost 50 to 100 times an add.
unsigned inlineCost(Operation *op) {
  if (isa<arith::ConstantOp, YieldOp, scf::YieldOp>(op))
    return 0;
  constexpr unsigned kLight = 1, kMedium = 8, kHeavy = 32;
  if (isa<arith::DivFOp>(op) && exactInverse(op->getOperand(1)))
    return kLight;
  if (isa<arith::DivFOp, arith::RemFOp>(op)) {
    auto fastmath =
        cast<arith::ArithFastMathInterface>(op).getFastMathFlagsAttr();
    bool arcp = fastmath && bitEnumContainsAny(fastmath.getValue(),
                                               arith::FastMathFlags::arcp);
    return isConstant(op->getOperand(1)) || arcp ? kMedium : kHeavy;
  }
  if (isa<arith::DivSIOp, arith::DivUIOp, arith::RemSIOp, arith::RemUIOp,
          arith::CeilDivSIOp, arith::CeilDivUIOp, arith::FloorDivSIOp>(op))
    return isConstant(op->getOperand(1)) ? kMedium : kHeavy;
  if (isa<arith::FPToSIOp, arith::FPToUIOp, math::SqrtOp>(op))
    return kHeavy;
  if (isa<scf::IfOp, math::RsqrtOp, math::FmaOp>(op))
    return kMedium;
  if (isa<math::ExpOp, math::LogOp, math::TanhOp>(op))
    return op->getResult(0).getType().isF32() ? kMedium : kHeavy;
  if (op->getDialect() && op->getDialect()->getNamespace() == "math" &&
      !isa<math::AbsFOp, math::AbsIOp, math::CopySignOp, math::CtPopOp,
           math::CountLeadingZerosOp, math::CountTrailingZerosOp>(op))
    return kHeavy; // libm: sin, pow, erf, ...
  return kLight;
}

/// Most inline cost of the ops a region runs per score for it to be inlined
/// at every score of the wgmma prefill, whose tile paths NVRTC compiles
/// slowest (16 IEEE divisions inlined: a minute and 3 GB): a costlier
/// region marks itself costly (KernelSpec::costlyRegions) and its prefill
/// takes mma.sync on sm_90a (Schedule.cpp). Soft-cap, ALiBi, chunked local
/// and document masks written as regions stay below (docs/performance.md
/// measures them).
constexpr unsigned kMaxWgmmaInlineCost = 32;

/// Most inline cost of the ops a region runs per score for it to be inlined
/// at every score of the mma.sync prefill and decode (16 IEEE divisions
/// inlined: 6 s of NVRTC); a costlier score_mod runs over a row's scores in
/// one out-of-line call, a costlier mask_mod is an out-of-line function.
constexpr unsigned kMaxInlineCost = 256;

class RegionEmitter {
public:
  explicit RegionEmitter(llvm::raw_string_ostream &os) : os(os) {}

  /// The statements of `region`, whose first arguments are named `argNames`
  /// and the rest are aux tables. With `head`, the top-level ops whose
  /// operands are all per-head (request, q_head, kv_head, aux, constants, or
  /// such ops: an ALiBi slope read, say) go to `head` instead, as fields of
  /// `head` that the kernel computes once per row before its key loop;
  /// `fields` declares them.
  LogicalResult emit(Region &region, ArrayRef<const char *> argNames,
                     llvm::raw_string_ostream *head = nullptr,
                     llvm::raw_string_ostream *fields = nullptr) {
    this->head = head;
    this->fields = fields;
    Block &block = region.front();
    for (auto [i, arg] : llvm::enumerate(block.getArguments()))
      names[arg] = i < argNames.size()
                       ? std::string(argNames[i])
                       : llvm::formatv("aux[{0}]", i - argNames.size()).str();
    if (head) {
      llvm::DenseSet<Value> perHead;
      for (auto [i, arg] : llvm::enumerate(block.getArguments())) {
        StringRef argName = names[arg];
        if (argName == "request" || argName == "q_head" ||
            argName == "kv_head" || i >= argNames.size())
          perHead.insert(arg);
      }
      for (Operation &op : block) {
        if (isa<arith::ConstantOp>(op)) {
          perHead.insert(op.getResult(0));
          continue;
        }
        if (op.getNumRegions() || op.getNumResults() != 1 ||
            !llvm::all_of(op.getOperands(),
                          [&](Value v) { return perHead.contains(v); }))
          continue;
        perHead.insert(op.getResult(0));
        hoisted.insert(&op);
      }
      for (Operation &op : block) {
        if (isa<arith::ConstantOp>(op) || hoisted.contains(&op)) {
          // Constants stay in both functions; hoisted values are `head`'s.
          FailureOr<std::string> expr = expression(&op);
          if (failed(expr))
            return failure();
          if (failed(checkSize(&op)))
            return failure();
          Value result = op.getResult(0);
          std::string local = fresh(result);
          if (hoisted.contains(&op)) {
            *fields << "    " << cudaType(result.getType()) << " " << local
                    << ";\n";
            *head << "    head." << local << " = " << *expr << ";\n";
            names[result] = "head." + local;
          } else {
            *head << "    const " << cudaType(result.getType()) << " " << local
                  << " = " << *expr << ";\n";
          }
        }
      }
    }
    return emitBlock(block, /*depth=*/2, /*results=*/{});
  }

  /// The inline cost of the ops `region` runs per score (not those moved
  /// to `head`), after emit().
  unsigned perScoreCost(Region &region) const {
    unsigned cost = 0;
    region.walk([&](Operation *op) {
      if (!hoisted.contains(op))
        cost += inlineCost(op);
    });
    return cost;
  }

private:
  /// A block's ops; its terminator returns (attn.yield) or assigns the
  /// enclosing scf.if's `results`.
  LogicalResult emitBlock(Block &block, int depth,
                          ArrayRef<std::string> results) {
    for (Operation &op : block) {
      if (failed(checkSize(&op)))
        return failure();
      std::string indent(depth * 2, ' ');
      if (auto yield = dyn_cast<YieldOp>(op)) {
        os << indent << "return " << name(yield.getValue()) << ";\n";
        continue;
      }
      if (auto yield = dyn_cast<scf::YieldOp>(op)) {
        for (auto [result, value] : llvm::zip(results, yield.getOperands()))
          os << indent << result << " = " << name(value) << ";\n";
        continue;
      }
      if (auto ifOp = dyn_cast<scf::IfOp>(op)) {
        SmallVector<std::string> declared;
        for (Value result : ifOp.getResults()) {
          declared.push_back(fresh(result));
          os << indent << cudaType(result.getType()) << " " << declared.back()
             << ";\n";
        }
        os << indent << "if (" << name(ifOp.getCondition()) << ") {\n";
        if (failed(
                emitBlock(ifOp.getThenRegion().front(), depth + 1, declared)))
          return failure();
        os << indent << "}";
        if (!ifOp.getElseRegion().empty()) {
          os << " else {\n";
          if (failed(
                  emitBlock(ifOp.getElseRegion().front(), depth + 1, declared)))
            return failure();
          os << indent << "}";
        }
        os << "\n";
        continue;
      }
      if (hoisted.contains(&op))
        continue;
      Value result = op.getResult(0);
      if (isa<arith::ConstantOp>(op) && names.count(result)) {
        // Numbered by emit()'s head pass: the same literal again.
        os << indent << "const " << cudaType(result.getType()) << " "
           << names[result] << " = " << *expression(&op) << ";\n";
        continue;
      }
      FailureOr<std::string> expr = expression(&op);
      if (failed(expr))
        return failure();
      os << indent << "const " << cudaType(result.getType()) << " "
         << fresh(result) << " = " << *expr << ";\n";
    }
    return success();
  }

  /// The C++ expression of a one-result op: a call of the function of its
  /// name in templates/attn/region_ops.h, which gives it MLIR's meaning.
  FailureOr<std::string> expression(Operation *op) {
    if (op->getNumResults() != 1)
      return op->emitOpError() << "has no CUDA form in a modifier region";
    Type type = op->getResult(0).getType();
    auto call = [&](StringRef fn, StringRef templateArgs = "") {
      std::string text = ("attn::region::" + fn).str();
      if (!templateArgs.empty())
        text += ("<" + templateArgs + ">").str();
      text += "(";
      for (unsigned i = 0; i < op->getNumOperands(); ++i)
        text += (i ? ", " : "") + name(op->getOperand(i));
      return text + ")";
    };
    std::optional<std::string> text =
        llvm::TypeSwitch<Operation *, std::optional<std::string>>(op)
            .Case([&](arith::ConstantOp c) -> std::string {
              if (auto f = dyn_cast<FloatAttr>(c.getValue()))
                return floatLiteral(f.getValue());
              APInt value = cast<IntegerAttr>(c.getValue()).getValue();
              if (type.isInteger(1))
                return value.isZero() ? "false" : "true";
              return llvm::formatv("{0}(0x{1:x-}ull)", cudaType(type),
                                   value.getZExtValue());
            })
            .Case([&](arith::CmpIOp cmp) {
              std::string predicate =
                  arith::stringifyCmpIPredicate(cmp.getPredicate()).str();
              predicate[0] = llvm::toUpper(predicate[0]);
              return call("cmpi" + predicate);
            })
            .Case([&](arith::CmpFOp cmp) {
              std::string predicate =
                  arith::stringifyCmpFPredicate(cmp.getPredicate()).str();
              predicate[0] = llvm::toUpper(predicate[0]);
              return call("cmpf" + predicate);
            })
            .Case<arith::AddFOp, arith::SubFOp, arith::MulFOp>(
                [&](Operation *) -> std::string {
                  // fastmath<contract> (or fast) lets a multiply and an add
                  // fuse into an fma: the plain operators, which NVRTC
                  // contracts where both sides allow it; without it each op
                  // rounds on its own (region_ops.h).
                  arith::FastMathFlags flags =
                      cast<arith::ArithFastMathInterface>(op)
                          .getFastMathFlagsAttr()
                          .getValue();
                  if (!arith::bitEnumContainsAll(
                          flags, arith::FastMathFlags::contract))
                    return call(op->getName().stripDialect());
                  const char *infix = isa<arith::AddFOp>(op)   ? "+"
                                      : isa<arith::SubFOp>(op) ? "-"
                                                               : "*";
                  return llvm::formatv("({0} {1} {2})", name(op->getOperand(0)),
                                       infix, name(op->getOperand(1)))
                      .str();
                })
            .Case([&](arith::DivFOp) -> std::string {
              if (std::optional<APFloat> inverse =
                      exactInverse(op->getOperand(1)))
                return llvm::formatv("attn::region::mulf({0}, {1})",
                                     name(op->getOperand(0)),
                                     floatLiteral(*inverse))
                    .str();
              // fastmath<arcp> (or fast) allows a / b as a * (1 / b): one
              // multiply where b is a constant (region_ops.h).
              arith::FastMathFlags flags =
                  cast<arith::ArithFastMathInterface>(op)
                      .getFastMathFlagsAttr()
                      .getValue();
              return call(
                  arith::bitEnumContainsAll(flags, arith::FastMathFlags::arcp)
                      ? "divfArcp"
                      : "divf");
            })
            .Case([&](arith::SelectOp) {
              return llvm::formatv("({0} ? {1} : {2})", name(op->getOperand(0)),
                                   name(op->getOperand(1)),
                                   name(op->getOperand(2)))
                  .str();
            })
            .Case([&](arith::TruncFOp trunc) {
              std::optional<arith::RoundingMode> mode = trunc.getRoundingmode();
              if (!mode)
                return call("truncf");
              std::string suffix;
              for (StringRef word :
                   llvm::split(arith::stringifyRoundingMode(*mode), '_'))
                suffix += std::string(1, llvm::toUpper(word[0])) +
                          word.drop_front().str();
              return call("truncf" + suffix);
            })
            .Case<arith::ExtSIOp, arith::ExtUIOp, arith::TruncIOp,
                  arith::SIToFPOp, arith::UIToFPOp, arith::FPToSIOp,
                  arith::FPToUIOp, arith::BitcastOp>([&](Operation *) {
              // Casts name their result type.
              return call(op->getName().stripDialect(), cudaType(type));
            })
            .Case([&](AuxLoadOp load) {
              std::string text = llvm::formatv(
                  "auxLoad<{0}>({1}", cudaType(type), name(load.getTable()));
              for (Value index : load.getIndices())
                text += ", " + name(index);
              return text + ")";
            })
            .Default([&](Operation *) -> std::optional<std::string> {
              // Every other op the verifier admits (isModifierOp) is a
              // function of its operands of the op's own name.
              if (!isModifierOp(op) ||
                  isa<YieldOp, scf::IfOp, scf::YieldOp>(op))
                return std::nullopt;
              return call(op->getName().stripDialect());
            });
    if (!text)
      return op->emitOpError() << "has no CUDA form in a modifier region";
    return *text;
  }

  /// Fails at `op` once the CUDA written so far is over the spec's bound,
  /// so that a large region costs no more than the bound to reject.
  LogicalResult checkSize(Operation *op) {
    size_t bytes = os.str().size() + (head ? head->str().size() : 0) +
                   (fields ? fields->str().size() : 0);
    if (bytes <= ::attn::kMaxModifierBytes)
      return success();
    return op->emitOpError() << "makes the modifier region's CUDA longer than "
                             << ::attn::kMaxModifierBytes << " bytes";
  }

  std::string fresh(Value value) {
    std::string name = "v" + std::to_string(next++);
    names[value] = name;
    return name;
  }
  std::string name(Value value) { return names.lookup(value); }

  llvm::raw_string_ostream &os;
  llvm::raw_string_ostream *head = nullptr, *fields = nullptr;
  llvm::DenseMap<Value, std::string> names;
  llvm::DenseSet<Operation *> hoisted;
  unsigned next = 0;
};

/// The interval form of a mask_mod: each i32 value becomes a Range that
/// holds it for every (q_pos, k_pos, q_head, kv_head) in the given ranges,
/// each i1 a BoolRange (whether it can be false, can be true), so that the
/// yield says whether any pair of a tile may be visible (else the tile is
/// skipped) and whether any may be hidden (else it needs no mask). Ops it
/// cannot bound (aux reads, floats, i64, bitwise ops) give the full range: such
/// masks skip no tile, and stay correct.
class RangeEmitter {
public:
  explicit RangeEmitter(llvm::raw_string_ostream &os) : os(os) {}

  void emit(Region &region) {
    Block &block = region.front();
    static const char *const kArgs[] = {"request", "q_pos", "k_pos", "q_head",
                                        "kv_head"};
    for (auto [i, arg] : llvm::enumerate(block.getArguments()))
      if (i < 5)
        names[arg] = kArgs[i];
    for (Operation &op : block)
      emitOp(op);
  }

private:
  static bool isI32(Type type) { return type.isInteger(32); }
  static bool isI1(Type type) { return type.isInteger(1); }

  std::string range(Value value) {
    auto it = names.find(value);
    if (it != names.end())
      return it->second;
    return isI1(value.getType()) ? "attn::BoolRange{true, true}"
                                 : "attn::Range::full()";
  }

  void emitOp(Operation &op) {
    if (auto yield = dyn_cast<YieldOp>(op)) {
      os << "    return " << range(yield.getValue()) << ";\n";
      return;
    }
    if (op.getNumResults() != 1)
      return; // scf.if and the like: their results stay unbounded
    Value result = op.getResult(0);
    Type type = result.getType();
    if (!isI32(type) && !isI1(type))
      return;
    auto arg = [&](unsigned i) { return range(op.getOperand(i)); };
    auto call = [&](const char *fn, unsigned n) {
      std::string text = std::string("attn::") + fn + "(";
      for (unsigned i = 0; i < n; ++i)
        text += (i ? ", " : "") + arg(i);
      return text + ")";
    };
    std::optional<std::string> expr =
        llvm::TypeSwitch<Operation *, std::optional<std::string>>(&op)
            .Case([&](arith::ConstantOp c) -> std::optional<std::string> {
              auto i = cast<IntegerAttr>(c.getValue());
              if (isI1(type))
                return llvm::formatv("attn::BoolRange{{{0}, {1}}",
                                     i.getValue().isZero() ? "true" : "false",
                                     i.getValue().isZero() ? "false" : "true")
                    .str();
              return llvm::formatv("attn::Range{{{0}, {0}}",
                                   i.getValue().getSExtValue())
                  .str();
            })
            .Case<arith::AddIOp, arith::SubIOp, arith::MulIOp, arith::DivSIOp,
                  arith::FloorDivSIOp, arith::RemSIOp, arith::MinSIOp,
                  arith::MaxSIOp>(
                [&](Operation *) -> std::optional<std::string> {
                  // The Range forms are of i32 arithmetic; i1 arithmetic stays
                  // unbounded.
                  if (!isI32(type))
                    return std::nullopt;
                  const char *fn =
                      llvm::TypeSwitch<Operation *, const char *>(&op)
                          .Case([](arith::AddIOp) { return "rangeAdd"; })
                          .Case([](arith::SubIOp) { return "rangeSub"; })
                          .Case([](arith::MulIOp) { return "rangeMul"; })
                          .Case([](arith::DivSIOp) { return "rangeDiv"; })
                          .Case([](arith::FloorDivSIOp) {
                            return "rangeFloorDiv";
                          })
                          .Case([](arith::RemSIOp) { return "rangeRem"; })
                          .Case([](arith::MinSIOp) { return "rangeMin"; })
                          .Default([](Operation *) { return "rangeMax"; });
                  return call(fn, 2);
                })
            .Case([&](arith::SelectOp) {
              return call(isI1(type) ? "boolSelect" : "rangeSelect", 3);
            })
            .Case([&](arith::AndIOp) -> std::optional<std::string> {
              if (isI1(type))
                return call("boolAnd", 2);
              return std::nullopt;
            })
            .Case([&](arith::OrIOp) -> std::optional<std::string> {
              if (isI1(type))
                return call("boolOr", 2);
              return std::nullopt;
            })
            .Case([&](arith::XOrIOp) -> std::optional<std::string> {
              if (isI1(type))
                return call("boolXor", 2);
              return std::nullopt;
            })
            .Case([&](arith::ExtUIOp) -> std::optional<std::string> {
              if (isI1(op.getOperand(0).getType()))
                return call("rangeOfBool", 1);
              return std::nullopt;
            })
            .Case([&](arith::CmpIOp cmp) -> std::optional<std::string> {
              if (!isI32(cmp.getLhs().getType()))
                return std::nullopt;
              using P = arith::CmpIPredicate;
              switch (cmp.getPredicate()) {
              case P::eq:
                return call("rangeEq", 2);
              case P::ne:
                return call("rangeNe", 2);
              case P::slt:
                return call("rangeLt", 2);
              case P::sle:
                return call("rangeLe", 2);
              case P::sgt:
                return llvm::formatv("attn::rangeLt({1}, {0})", arg(0), arg(1))
                    .str();
              case P::sge:
                return llvm::formatv("attn::rangeLe({1}, {0})", arg(0), arg(1))
                    .str();
              default:
                return std::nullopt;
              }
            })
            .Default([&](Operation *) { return std::nullopt; });
    if (!expr)
      return; // unbounded: range() gives the full range
    std::string name = "r" + std::to_string(next++);
    names[result] = name;
    os << "    const " << (isI1(type) ? "attn::BoolRange " : "attn::Range ")
       << name << " = " << *expr << ";\n";
  }

  llvm::raw_string_ostream &os;
  llvm::DenseMap<Value, std::string> names;
  unsigned next = 0;
};

/// "f32:8x32,i32:?": each aux table's element type and shape.
std::string auxTableTypes(AttentionOpInterface op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleave(
      op.getAux(), os,
      [&](Value aux) {
        auto type = cast<RankedTensorType>(aux.getType());
        os << (type.getElementType().isF32() ? "f32" : "i32") << ":";
        llvm::interleave(
            type.getShape(), os,
            [&](int64_t dim) {
              if (ShapedType::isDynamic(dim))
                os << "?";
              else
                os << dim;
            },
            "x");
      },
      ",");
  return text;
}

} // namespace

FailureOr<ModifierSource> emitModifiers(AttentionOpInterface op) {
  ModifierSource source;
  // The signatures Variant<Config> (templates/attn/variant.cuh) calls.
  constexpr const char *kPositions =
      "int32_t request, int32_t q_pos, int32_t k_pos, int32_t q_head, "
      "int32_t kv_head, const attn::AuxTable *aux";
  static const char *const kScoreArgs[] = {"score", "request", "q_pos",
                                           "k_pos", "q_head",  "kv_head"};
  if (!op.getScoreMod().empty()) {
    std::string body, head, fields;
    llvm::raw_string_ostream bodyOS(body), headOS(head), fieldsOS(fields);
    RegionEmitter emitter(bodyOS);
    if (failed(emitter.emit(op.getScoreMod(), kScoreArgs, &headOS, &fieldsOS)))
      return failure();
    // A score_mod too costly to inline runs over a row's scores of a tile
    // in one out-of-line call (scoreModRow), its body inlined once in a
    // loop: one call per row and tile rather than per score, so that the
    // kernels' accumulators are saved around a call a few times per tile,
    // not at every score.
    const unsigned cost = emitter.perScoreCost(op.getScoreMod());
    const bool outOfLine = cost > kMaxInlineCost;
    source.scoreMod = llvm::formatv(
        "  struct ScoreModHead {{\n{0}  };\n"
        "  static __device__ __forceinline__ ScoreModHead\n"
        "  scoreModHead(int32_t request, int32_t q_head, int32_t kv_head, "
        "const attn::AuxTable *aux) {{\n"
        "    using attn::auxLoad;\n    ScoreModHead head;\n{1}"
        "    return head;\n  }\n"
        "  static constexpr bool kScoreModOutOfLine = {4};\n"
        "  {5}\n"
        "  static __device__ __forceinline__ float\n"
        "  scoreMod(float score, {2}, const ScoreModHead &head) {{\n"
        "    using attn::auxLoad;\n{3}  }\n",
        fields, head, kPositions, body, outOfLine ? "true" : "false",
        cost > kMaxWgmmaInlineCost
            ? ::attn::KernelSpec::kCostlyScoreMod
            : "static constexpr bool kScoreModCostly = false;");
    if (outOfLine) {
      // The aux tables' descriptors are copied once per call, not loaded
      // per score (the score stores might alias them); four scores per
      // iteration overlap their loads.
      const unsigned numAux =
          op.getScoreMod().getNumArguments() - std::size(kScoreArgs);
      std::string copy;
      for (unsigned i = 0; i < numAux; ++i)
        copy += llvm::formatv("{0}aux[{1}]", i ? ", " : "", i).str();
      source.scoreMod = llvm::formatv(
          "{0}  template <int N>\n"
          "  static __device__ __noinline__ void\n"
          "  scoreModRow(float (&score)[N], const int32_t (&k_pos)[N], "
          "int32_t request, int32_t q_pos, int32_t q_head, int32_t kv_head, "
          "const attn::AuxTable *aux, const ScoreModHead &head) {{\n"
          "{1}"
          "#pragma unroll 4\n"
          "    for (int i = 0; i < N; ++i)\n"
          "      score[i] = scoreMod(score[i], request, q_pos, k_pos[i], "
          "q_head, kv_head, {2}, head);\n"
          "  }\n",
          source.scoreMod,
          numAux ? llvm::formatv("    const attn::AuxTable tables[{0}] = "
                                 "{{{1}};\n",
                                 numAux, copy)
                       .str()
                 : std::string(),
          numAux ? "tables" : "aux");
    }
  }
  if (!op.getMaskMod().empty()) {
    std::string body;
    llvm::raw_string_ostream bodyOS(body);
    RegionEmitter emitter(bodyOS);
    if (failed(emitter.emit(op.getMaskMod(),
                            ArrayRef<const char *>(kScoreArgs).drop_front())))
      return failure();
    const unsigned cost = emitter.perScoreCost(op.getMaskMod());
    source.maskMod = llvm::formatv(
        "  {3}\n"
        "  static __device__ {2} bool\n"
        "  maskMod({0}) {{\n"
        "    using attn::auxLoad;\n{1}  }\n",
        kPositions, body,
        cost > kMaxInlineCost ? "__noinline__" : "__forceinline__",
        cost > kMaxWgmmaInlineCost
            ? ::attn::KernelSpec::kCostlyMaskMod
            : "static constexpr bool kMaskModCostly = false;");
    std::string tiles;
    llvm::raw_string_ostream tilesOS(tiles);
    RangeEmitter(tilesOS).emit(op.getMaskMod());
    source.maskModTiles = llvm::formatv(
        "  static __device__ __forceinline__ attn::BoolRange\n"
        "  maskModTile(attn::Range request, attn::Range q_pos, attn::Range "
        "k_pos, attn::Range q_head, attn::Range kv_head) {{\n{0}  }\n",
        tiles);
  }
  if (!source.scoreMod.empty() || !source.maskMod.empty())
    source.aux = auxTableTypes(op);
  return source;
}

} // namespace mlir::attn
