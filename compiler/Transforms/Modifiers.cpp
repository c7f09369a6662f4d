//===- Modifiers.cpp - score_mod / mask_mod regions to CUDA ---------------===//
//
// One C++ statement per op, in block order: each result is a `const` local
// named v<N>; scf.if declares its results and assigns them in each branch.
// Integers keep their width (int32_t, int64_t); unsigned ops cast to the
// unsigned type of the same width. Float constants are written as hex
// literals, so the kernel sees exactly the IR's value.
//
//===----------------------------------------------------------------------===//
#include "compiler/Transforms/Modifiers.h"

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

const char *unsignedType(Type type) {
  return type.isInteger(64) ? "uint64_t" : "uint32_t";
}

std::string hexFloat(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%a", value);
  return text;
}

std::string floatLiteral(double value, bool isF32) {
  if (isF32) {
    float f = float(value);
    if (std::isfinite(f))
      return hexFloat(f) + "f";
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    return llvm::formatv("__int_as_float(int(0x{0:x-}u))", bits).str();
  }
  if (std::isfinite(value))
    return hexFloat(value);
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return llvm::formatv("__longlong_as_double((long long)0x{0:x-}ull)", bits)
      .str();
}

/// math op -> the CUDA function of its f64 name (f32 adds "f").
const char *mathFunction(Operation *op) {
  return llvm::TypeSwitch<Operation *, const char *>(op)
      .Case([](math::TanhOp) { return "tanh"; })
      .Case([](math::ExpOp) { return "exp"; })
      .Case([](math::Exp2Op) { return "exp2"; })
      .Case([](math::ExpM1Op) { return "expm1"; })
      .Case([](math::LogOp) { return "log"; })
      .Case([](math::Log2Op) { return "log2"; })
      .Case([](math::Log10Op) { return "log10"; })
      .Case([](math::Log1pOp) { return "log1p"; })
      .Case([](math::SqrtOp) { return "sqrt"; })
      .Case([](math::RsqrtOp) { return "rsqrt"; })
      .Case([](math::CbrtOp) { return "cbrt"; })
      .Case([](math::SinOp) { return "sin"; })
      .Case([](math::CosOp) { return "cos"; })
      .Case([](math::TanOp) { return "tan"; })
      .Case([](math::AtanOp) { return "atan"; })
      .Case([](math::Atan2Op) { return "atan2"; })
      .Case([](math::ErfOp) { return "erf"; })
      .Case([](math::FloorOp) { return "floor"; })
      .Case([](math::CeilOp) { return "ceil"; })
      .Case([](math::RoundOp) { return "round"; })
      .Case([](math::TruncOp) { return "trunc"; })
      .Case([](math::AbsFOp) { return "fabs"; })
      .Case([](math::PowFOp) { return "pow"; })
      .Case([](math::FmaOp) { return "fma"; })
      .Case([](math::CopySignOp) { return "copysign"; })
      .Default([](Operation *) { return nullptr; });
}

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
          Value result = op.getResult(0);
          std::string local = fresh(result);
          if (hoisted.contains(&op)) {
            *fields << "    " << cudaType(result.getType()) << " " << local
                    << ";\n";
            *head << "    head." << local << " = " << *expr << ";\n";
            names[result] = "head." + local;
          } else {
            *head << "    const " << cudaType(result.getType()) << " "
                  << local << " = " << *expr << ";\n";
          }
        }
      }
    }
    return emitBlock(block, /*depth=*/2, /*results=*/{});
  }

private:
  /// A block's ops; its terminator returns (attn.yield) or assigns the
  /// enclosing scf.if's `results`.
  LogicalResult emitBlock(Block &block, int depth, ArrayRef<std::string> results) {
    for (Operation &op : block) {
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
        if (failed(emitBlock(ifOp.getThenRegion().front(), depth + 1, declared)))
          return failure();
        os << indent << "}";
        if (!ifOp.getElseRegion().empty()) {
          os << " else {\n";
          if (failed(emitBlock(ifOp.getElseRegion().front(), depth + 1,
                               declared)))
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

  /// The C++ expression of a one-result op.
  FailureOr<std::string> expression(Operation *op) {
    auto arg = [&](unsigned i) { return name(op->getOperand(i)); };
    auto binary = [&](const char *infix) {
      return llvm::formatv("{0} {1} {2}", arg(0), infix, arg(1)).str();
    };
    auto asUnsigned = [&](unsigned i) {
      return llvm::formatv("{0}({1})", unsignedType(op->getOperand(i).getType()),
                           arg(i))
          .str();
    };
    auto unsignedBinary = [&](const char *infix) {
      return llvm::formatv("{0}({1} {2} {3})",
                           cudaType(op->getResult(0).getType()), asUnsigned(0),
                           infix, asUnsigned(1))
          .str();
    };
    auto ternary = [&](const std::string &cond, unsigned a, unsigned b) {
      return llvm::formatv("({0} ? {1} : {2})", cond, arg(a), arg(b)).str();
    };
    Type type = op->getNumResults() ? op->getResult(0).getType() : Type();
    bool f32 = type && type.isF32();
    std::optional<std::string> text =
        llvm::TypeSwitch<Operation *, std::optional<std::string>>(op)
            .Case([&](arith::ConstantOp c) -> std::optional<std::string> {
              if (auto f = dyn_cast<FloatAttr>(c.getValue()))
                return floatLiteral(f.getValueAsDouble(), f32);
              auto i = cast<IntegerAttr>(c.getValue());
              if (type.isInteger(1))
                return std::string(i.getValue().isZero() ? "false" : "true");
              return llvm::formatv("{0}(0x{1:x-}ull)", cudaType(type),
                                   i.getValue().getZExtValue())
                  .str();
            })
            .Case([&](arith::AddIOp) { return binary("+"); })
            .Case([&](arith::SubIOp) { return binary("-"); })
            .Case([&](arith::MulIOp) { return binary("*"); })
            .Case([&](arith::DivSIOp) { return binary("/"); })
            .Case([&](arith::RemSIOp) { return binary("%"); })
            .Case([&](arith::DivUIOp) { return unsignedBinary("/"); })
            .Case([&](arith::RemUIOp) { return unsignedBinary("%"); })
            .Case([&](arith::AndIOp) { return binary("&"); })
            .Case([&](arith::OrIOp) { return binary("|"); })
            .Case([&](arith::XOrIOp) { return binary("^"); })
            .Case([&](arith::ShLIOp) { return binary("<<"); })
            .Case([&](arith::ShRSIOp) { return binary(">>"); })
            .Case([&](arith::ShRUIOp) { return unsignedBinary(">>"); })
            .Case([&](arith::MinSIOp) {
              return ternary(arg(0) + " < " + arg(1), 0, 1);
            })
            .Case([&](arith::MaxSIOp) {
              return ternary(arg(0) + " > " + arg(1), 0, 1);
            })
            .Case([&](arith::MinUIOp) {
              return ternary(asUnsigned(0) + " < " + asUnsigned(1), 0, 1);
            })
            .Case([&](arith::MaxUIOp) {
              return ternary(asUnsigned(0) + " > " + asUnsigned(1), 0, 1);
            })
            .Case([&](arith::CeilDivSIOp) {
              return llvm::formatv("({0} / {1} + ({0} % {1} != 0 && ({0} < 0) "
                                   "== ({1} < 0)))",
                                   arg(0), arg(1))
                  .str();
            })
            .Case([&](arith::FloorDivSIOp) {
              return llvm::formatv("({0} / {1} - ({0} % {1} != 0 && ({0} < 0) "
                                   "!= ({1} < 0)))",
                                   arg(0), arg(1))
                  .str();
            })
            .Case([&](arith::AddFOp) { return binary("+"); })
            .Case([&](arith::SubFOp) { return binary("-"); })
            .Case([&](arith::MulFOp) { return binary("*"); })
            .Case([&](arith::DivFOp) { return binary("/"); })
            .Case([&](arith::NegFOp) { return "-" + arg(0); })
            .Case([&](arith::RemFOp) {
              return llvm::formatv("{0}({1}, {2})", f32 ? "fmodf" : "fmod",
                                   arg(0), arg(1))
                  .str();
            })
            .Case([&](arith::MaxNumFOp) {
              return llvm::formatv("{0}({1}, {2})", f32 ? "fmaxf" : "fmax",
                                   arg(0), arg(1))
                  .str();
            })
            .Case([&](arith::MinNumFOp) {
              return llvm::formatv("{0}({1}, {2})", f32 ? "fminf" : "fmin",
                                   arg(0), arg(1))
                  .str();
            })
            .Case([&](arith::MaximumFOp) {
              // NaN-propagating, unlike fmaxf.
              return llvm::formatv("(isnan({0}) || isnan({1}) ? {0} + {1} : "
                                   "{2}({0}, {1}))",
                                   arg(0), arg(1), f32 ? "fmaxf" : "fmax")
                  .str();
            })
            .Case([&](arith::MinimumFOp) {
              return llvm::formatv("(isnan({0}) || isnan({1}) ? {0} + {1} : "
                                   "{2}({0}, {1}))",
                                   arg(0), arg(1), f32 ? "fminf" : "fmin")
                  .str();
            })
            .Case([&](arith::CmpIOp cmp) -> std::optional<std::string> {
              using P = arith::CmpIPredicate;
              switch (cmp.getPredicate()) {
              case P::eq: return binary("==");
              case P::ne: return binary("!=");
              case P::slt: return binary("<");
              case P::sle: return binary("<=");
              case P::sgt: return binary(">");
              case P::sge: return binary(">=");
              case P::ult: return asUnsigned(0) + " < " + asUnsigned(1);
              case P::ule: return asUnsigned(0) + " <= " + asUnsigned(1);
              case P::ugt: return asUnsigned(0) + " > " + asUnsigned(1);
              case P::uge: return asUnsigned(0) + " >= " + asUnsigned(1);
              }
              return std::nullopt;
            })
            .Case([&](arith::CmpFOp cmp) -> std::optional<std::string> {
              using P = arith::CmpFPredicate;
              std::string a = arg(0), b = arg(1);
              auto unordered = "(isnan(" + a + ") || isnan(" + b + "))";
              switch (cmp.getPredicate()) {
              case P::AlwaysFalse: return std::string("false");
              case P::AlwaysTrue: return std::string("true");
              case P::OEQ: return binary("==");
              case P::OGT: return binary(">");
              case P::OGE: return binary(">=");
              case P::OLT: return binary("<");
              case P::OLE: return binary("<=");
              case P::ONE: return "(" + a + " < " + b + " || " + a + " > " + b + ")";
              case P::ORD: return "!" + unordered;
              case P::UEQ: return "!(" + a + " < " + b + " || " + a + " > " + b + ")";
              case P::UGT: return "!(" + a + " <= " + b + ")";
              case P::UGE: return "!(" + a + " < " + b + ")";
              case P::ULT: return "!(" + a + " >= " + b + ")";
              case P::ULE: return "!(" + a + " > " + b + ")";
              case P::UNE: return binary("!=");
              case P::UNO: return unordered;
              }
              return std::nullopt;
            })
            .Case([&](arith::SelectOp) {
              return llvm::formatv("({0} ? {1} : {2})", arg(0), arg(1), arg(2))
                  .str();
            })
            .Case([&](arith::SIToFPOp) {
              return llvm::formatv("{0}({1})", cudaType(type), arg(0)).str();
            })
            .Case([&](arith::UIToFPOp) {
              return llvm::formatv("{0}({1})", cudaType(type), asUnsigned(0))
                  .str();
            })
            .Case([&](arith::FPToSIOp) {
              return llvm::formatv("{0}({1})", cudaType(type), arg(0)).str();
            })
            .Case([&](arith::FPToUIOp) {
              return llvm::formatv("{0}({1}({2}))", cudaType(type),
                                   unsignedType(type), arg(0))
                  .str();
            })
            .Case([&](arith::ExtSIOp) -> std::string {
              if (op->getOperand(0).getType().isInteger(1))
                return llvm::formatv("({0} ? {1}(-1) : {1}(0))", arg(0),
                                     cudaType(type));
              return llvm::formatv("{0}({1})", cudaType(type), arg(0)).str();
            })
            .Case([&](arith::ExtUIOp) -> std::string {
              if (op->getOperand(0).getType().isInteger(1))
                return llvm::formatv("{0}({1})", cudaType(type), arg(0));
              return llvm::formatv("{0}({1})", cudaType(type), asUnsigned(0));
            })
            .Case([&](arith::TruncIOp) -> std::string {
              if (type.isInteger(1))
                return llvm::formatv("bool({0} & 1)", arg(0));
              return llvm::formatv("{0}({1})", cudaType(type), arg(0));
            })
            .Case<arith::ExtFOp, arith::TruncFOp>([&](Operation *) {
              return llvm::formatv("{0}({1})", cudaType(type), arg(0)).str();
            })
            .Case([&](arith::BitcastOp) -> std::optional<std::string> {
              Type from = op->getOperand(0).getType();
              if (from == type)
                return arg(0);
              const char *fn = type.isF32()        ? "__int_as_float"
                               : type.isF64()      ? "__longlong_as_double"
                               : from.isF32()      ? "__float_as_int"
                               : from.isF64()      ? "__double_as_longlong"
                                                   : nullptr;
              if (!fn)
                return std::nullopt;
              return llvm::formatv("{0}({1}({2}))", cudaType(type), fn, arg(0))
                  .str();
            })
            .Case([&](math::AbsIOp) {
              return llvm::formatv("({0} < 0 ? -{0} : {0})", arg(0)).str();
            })
            .Case([&](AuxLoadOp load) {
              std::string call = llvm::formatv(
                  "auxLoad<{0}>({1}", cudaType(type), name(load.getTable()));
              for (Value index : load.getIndices())
                call += ", " + name(index);
              return call + ")";
            })
            .Default([&](Operation *) -> std::optional<std::string> {
              const char *fn = mathFunction(op);
              if (!fn || !type)
                return std::nullopt;
              std::string call = std::string(fn) + (f32 ? "f" : "") + "(";
              for (unsigned i = 0; i < op->getNumOperands(); ++i)
                call += (i ? ", " : "") + arg(i);
              return call + ")";
            });
    if (!text || op->getNumResults() != 1)
      return op->emitOpError()
             << "has no CUDA form in a modifier region yet";
    return *text;
  }

  std::string fresh(Value value) {
    std::string name = "v" + std::to_string(next++);
    names[value] = name;
    return name;
  }
  std::string name(Value value) { return names.lookup(value); }

  llvm::raw_string_ostream &os;
  llvm::DenseMap<Value, std::string> names;
  llvm::DenseSet<Operation *> hoisted;
  unsigned next = 0;
};

/// The interval form of a mask_mod: each i32 value becomes a Range that
/// holds it for every (q_pos, k_pos, q_head, kv_head) in the given ranges,
/// each i1 a BoolRange (whether it can be false, can be true), so that the
/// yield says whether any pair of a tile may be visible (else the tile is
/// skipped) and whether any may be hidden (else it needs no mask). Ops it cannot bound
/// (aux reads, floats, i64, bitwise ops) give the full range: such masks
/// skip no tile, and stay correct.
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
            .Case([&](arith::AddIOp) { return call("rangeAdd", 2); })
            .Case([&](arith::SubIOp) { return call("rangeSub", 2); })
            .Case([&](arith::MulIOp) { return call("rangeMul", 2); })
            .Case([&](arith::DivSIOp) { return call("rangeDiv", 2); })
            .Case([&](arith::FloorDivSIOp) { return call("rangeFloorDiv", 2); })
            .Case([&](arith::RemSIOp) { return call("rangeRem", 2); })
            .Case([&](arith::MinSIOp) { return call("rangeMin", 2); })
            .Case([&](arith::MaxSIOp) { return call("rangeMax", 2); })
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
              case P::eq: return call("rangeEq", 2);
              case P::ne: return call("rangeNe", 2);
              case P::slt: return call("rangeLt", 2);
              case P::sle: return call("rangeLe", 2);
              case P::sgt:
                return llvm::formatv("attn::rangeLt({1}, {0})", arg(0), arg(1))
                    .str();
              case P::sge:
                return llvm::formatv("attn::rangeLe({1}, {0})", arg(0), arg(1))
                    .str();
              default: return std::nullopt;
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
                                           "k_pos", "q_head", "kv_head"};
  if (!op.getScoreMod().empty()) {
    std::string body, head, fields;
    llvm::raw_string_ostream bodyOS(body), headOS(head), fieldsOS(fields);
    RegionEmitter emitter(bodyOS);
    if (failed(emitter.emit(op.getScoreMod(), kScoreArgs, &headOS, &fieldsOS)))
      return failure();
    source.scoreMod = llvm::formatv(
        "  struct ScoreModHead {{\n{0}  };\n"
        "  static __device__ __forceinline__ ScoreModHead\n"
        "  scoreModHead(int32_t request, int32_t q_head, int32_t kv_head, "
        "const attn::AuxTable *aux) {{\n"
        "    using attn::auxLoad;\n    ScoreModHead head;\n{1}"
        "    return head;\n  }\n"
        "  static __device__ __forceinline__ float\n"
        "  scoreMod(float score, {2}, const ScoreModHead &head) {{\n"
        "    using attn::auxLoad;\n{3}  }\n",
        fields, head, kPositions, body);
  }
  if (!op.getMaskMod().empty()) {
    std::string body;
    llvm::raw_string_ostream bodyOS(body);
    RegionEmitter emitter(bodyOS);
    if (failed(emitter.emit(op.getMaskMod(),
                            ArrayRef<const char *>(kScoreArgs).drop_front())))
      return failure();
    source.maskMod = llvm::formatv("  static __device__ __forceinline__ bool\n"
                                   "  maskMod({0}) {{\n"
                                   "    using attn::auxLoad;\n{1}  }\n",
                                   kPositions, body);
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
