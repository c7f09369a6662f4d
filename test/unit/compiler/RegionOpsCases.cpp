//===- RegionOpsCases.cpp - every region op on edge values ----------------===//
#include "test/unit/compiler/RegionOpsCases.h"

#include "compiler/Frontend/Frontend.h"
#include "tools/RegisterAttn.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstring>
#include <map>
#include <set>

namespace attn::regiontest {

namespace {

int widthOf(const std::string &type) {
  if (type == "i1")
    return 1;
  if (type == "i32" || type == "f32")
    return 32;
  return 64;
}
bool isFloat(const std::string &type) { return type[0] == 'f'; }

uint64_t f32Bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}
uint64_t f64Bits(double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, sizeof bits);
  return bits;
}
float asF32(uint64_t bits) {
  uint32_t low = uint32_t(bits);
  float f;
  std::memcpy(&f, &low, sizeof f);
  return f;
}
double asF64(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

/// Edge values of each type, as bits; `few` keeps the first ones (for ops
/// of three operands).
std::vector<uint64_t> edgeValues(const std::string &type, bool few) {
  std::vector<uint64_t> values;
  if (type == "i1") {
    values = {0, 1};
  } else if (type == "i32") {
    for (int64_t v : {0ll, 1ll, -1ll, 2ll, -7ll, 31ll, 32ll, 33ll, 2147483647ll,
                      -2147483648ll, -2147483647ll, 100ll})
      values.push_back(uint32_t(int32_t(v)));
  } else if (type == "i64") {
    for (int64_t v :
         {int64_t(0), int64_t(1), int64_t(-1), int64_t(3), int64_t(-7),
          int64_t(63), int64_t(64), int64_t(65), int64_t(1) << 32,
          -(int64_t(1) << 32), int64_t(1) << 31, INT64_MAX, INT64_MIN})
      values.push_back(uint64_t(v));
  } else if (type == "f32") {
    for (float v : {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, -2.5f, 3.75f, 1e-40f,
                    2147483648.0f, -2147483648.0f, 3e9f, 9.2233720e18f, 1e20f,
                    3.4028235e38f, INFINITY, -INFINITY, NAN})
      values.push_back(f32Bits(v));
  } else {
    for (double v : {0.0, -0.0, 1.0, -1.0, 0.5, -2.5,
                     1.0 + std::ldexp(1.0, -24), // halfway between two floats
                     -(1.0 + 3 * std::ldexp(1.0, -25)), // not halfway
                     1.0 + std::ldexp(1.0, -30), 2147483648.0, -2147483648.5,
                     9223372036854775808.0, 1e300, 3.4028235677973366e38,
                     1e-310, double(INFINITY), -double(INFINITY), double(NAN)})
      values.push_back(f64Bits(v));
  }
  if (few && values.size() > 6)
    values.resize(6);
  return values;
}

/// The IR literal of `bits` as a constant of `type`.
std::string literal(const std::string &type, uint64_t bits) {
  if (type == "i1")
    return bits ? "true" : "false";
  if (type == "i32")
    return llvm::formatv("{0} : i32", int32_t(uint32_t(bits))).str();
  if (type == "i64")
    return llvm::formatv("{0} : i64", int64_t(bits)).str();
  if (type == "f32")
    return llvm::formatv("0x{0:X-8} : f32", uint32_t(bits)).str();
  return llvm::formatv("0x{0:X-16} : f64", bits).str();
}

std::string substitute(const std::string &text,
                       const std::vector<std::string> &operands) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '{' && i + 2 < text.size() && text[i + 2] == '}') {
      out += operands[text[i + 1] - '0'];
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

/// The score_mod of `c`: operands from the aux table's words, the result's
/// bits (the half q_pos names of a 64-bit one) returned as f32 bits.
std::string regionOf(const OpCase &c) {
  std::string body;
  llvm::raw_string_ostream os(body);
  os << "{\n^bb0(%score: f32, %request: i32, %q_pos: i32, %k_pos: i32, "
        "%q_head: i32, %kv_head: i32, %in: tensor<?xi32>):\n";
  for (int i = 0; i < 2 * int(c.operandTypes.size()); ++i)
    os << "  %i" << i << " = arith.constant " << i << " : i32\n"
       << "  %w" << i << " = attn.aux_load %in[%i" << i
       << "] : tensor<?xi32>\n";
  std::vector<std::string> operands;
  for (size_t k = 0; k < c.operandTypes.size(); ++k) {
    const std::string &type = c.operandTypes[k];
    std::string lo = "%w" + std::to_string(2 * k),
                hi = "%w" + std::to_string(2 * k + 1);
    std::string a = "%a" + std::to_string(k);
    if (type == "i1") {
      os << "  " << a << " = arith.trunci " << lo << " : i32 to i1\n";
    } else if (type == "i32") {
      a = lo;
    } else if (type == "f32") {
      os << "  " << a << " = arith.bitcast " << lo << " : i32 to f32\n";
    } else {
      os << "  " << a << "l = arith.extui " << lo << " : i32 to i64\n"
         << "  " << a << "h = arith.extui " << hi << " : i32 to i64\n"
         << "  " << a << "s = arith.constant 32 : i64\n"
         << "  " << a << "u = arith.shli " << a << "h, " << a << "s : i64\n"
         << "  " << a << (type == "f64" ? "i" : "") << " = arith.ori " << a
         << "l, " << a << "u : i64\n";
      if (type == "f64")
        os << "  " << a << " = arith.bitcast " << a << "i : i64 to f64\n";
    }
    operands.push_back(a);
  }
  os << "  %r = " << substitute(c.text, operands) << "\n";
  const std::string &r = c.resultType;
  std::string e = "%e";
  if (r == "i1") {
    os << "  %e = arith.extui %r : i1 to i32\n";
  } else if (r == "i32") {
    e = "%r";
  } else if (r == "f32") {
    os << "  %e = arith.bitcast %r : f32 to i32\n";
  } else {
    std::string whole = "%r";
    if (r == "f64") {
      os << "  %rb = arith.bitcast %r : f64 to i64\n";
      whole = "%rb";
    }
    os << "  %lo = arith.trunci " << whole << " : i64 to i32\n"
       << "  %c32 = arith.constant 32 : i64\n"
       << "  %sh = arith.shrui " << whole << ", %c32 : i64\n"
       << "  %hi = arith.trunci %sh : i64 to i32\n"
       << "  %low = arith.cmpi eq, %q_pos, %i0 : i32\n"
       << "  %e = arith.select %low, %lo, %hi : i32\n";
  }
  os << "  %f = arith.bitcast " << e << " : i32 to f32\n"
     << "  attn.yield %f : f32\n}";
  return body;
}

void addEvaluations(const OpCase &c, int index, std::vector<Evaluation> &out) {
  bool few = c.operandTypes.size() > 2;
  std::vector<std::vector<uint64_t>> sets;
  for (const std::string &type : c.operandTypes)
    sets.push_back(edgeValues(type, few));
  std::vector<size_t> at(sets.size(), 0);
  int halves = widthOf(c.resultType) == 64 ? 2 : 1;
  while (true) {
    for (int half = 0; half < halves; ++half) {
      Evaluation e{index, {}, half, {}};
      for (size_t k = 0; k < sets.size(); ++k) {
        uint64_t bits = sets[k][at[k]];
        e.operands.push_back(bits);
        e.words[2 * k] = int32_t(uint32_t(bits));
        e.words[2 * k + 1] = int32_t(uint32_t(bits >> 32));
      }
      e.words[kWordsPerEvaluation - 1] = half;
      out.push_back(e);
    }
    size_t k = 0;
    for (; k < sets.size(); ++k) {
      if (++at[k] < sets[k].size())
        break;
      at[k] = 0;
    }
    if (k == sets.size())
      return;
  }
}

/// What region_ops.h documents where MLIR's result is undefined or poison;
/// none where it documents nothing for these operands.
std::optional<uint64_t> documented(const OpCase &c,
                                   const std::vector<uint64_t> &operands) {
  std::string op = c.op.substr(c.op.find('.') + 1);
  int width = widthOf(c.resultType);
  uint64_t mask = width == 64 ? ~uint64_t(0) : (uint64_t(1) << width) - 1;
  auto isInt = [&](int w) {
    return !isFloat(c.operandTypes[0]) && widthOf(c.operandTypes[0]) == w;
  };
  (void)isInt;
  if (c.operandTypes.size() == 2 && !isFloat(c.operandTypes[0]) &&
      c.resultType == c.operandTypes[0]) {
    uint64_t a = operands[0] & mask, b = operands[1] & mask;
    uint64_t minValue = uint64_t(1) << (width - 1);
    uint64_t minusOne = mask;
    bool byZero = b == 0, overflow = a == minValue && b == minusOne;
    if (op == "divsi" || op == "ceildivsi" || op == "floordivsi") {
      if (byZero)
        return 0;
      if (overflow)
        return a;
    }
    if (op == "remsi" && (byZero || overflow))
      return 0;
    if ((op == "divui" || op == "remui" || op == "ceildivui") && byZero)
      return 0;
    if ((op == "shli" || op == "shrsi" || op == "shrui") &&
        b >= uint64_t(width))
      return 0;
    return std::nullopt;
  }
  if ((op == "fptosi" || op == "fptoui") && isFloat(c.operandTypes[0])) {
    double x = c.operandTypes[0] == "f32" ? double(asF32(operands[0]))
                                          : asF64(operands[0]);
    // An i1 result is the low bit of the i32 one.
    int w = width == 1 ? 32 : width;
    uint64_t wmask = w == 64 ? ~uint64_t(0) : (uint64_t(1) << w) - 1;
    uint64_t value;
    if (std::isnan(x)) {
      value = 0;
    } else if (op == "fptosi") {
      double limit = std::ldexp(1.0, w - 1);
      if (x >= limit)
        value = (uint64_t(1) << (w - 1)) - 1;
      else if (x <= -limit)
        value = uint64_t(1) << (w - 1);
      else if (width == 1)
        value = uint64_t(int64_t(std::trunc(x)));
      else
        return std::nullopt; // in range: the folder's
    } else {
      if (x <= -1.0)
        value = 0;
      else if (x >= std::ldexp(1.0, w))
        value = wmask;
      else if (width == 1)
        value = uint64_t(std::trunc(x));
      else
        return std::nullopt;
    }
    return (width == 1 ? value & 1 : value) & mask;
  }
  return std::nullopt;
}

/// Where MLIR 19's folder contradicts the op's documentation (or its own
/// lowering), the value the documentation gives: arith.maxnumf and minnumf
/// return the other operand when one is NaN (the folder propagates the NaN
/// in some orders), and math.atan2 at (±0, ±0) is libm's ±0 or ±π (the
/// folder gives NaN; the op lowers to libm's atan2).
std::optional<uint64_t> folderDeviation(const OpCase &c,
                                        const std::vector<uint64_t> &operands) {
  if (!isFloat(c.resultType) || operands.size() != 2 ||
      !isFloat(c.operandTypes[0]))
    return std::nullopt;
  bool f32 = c.resultType == "f32";
  double a = f32 ? asF32(operands[0]) : asF64(operands[0]);
  double b = f32 ? asF32(operands[1]) : asF64(operands[1]);
  if (c.op == "arith.maxnumf" || c.op == "arith.minnumf") {
    if (std::isnan(a))
      return operands[1];
    if (std::isnan(b))
      return operands[0];
  }
  if (c.op == "math.atan2" && a == 0 && b == 0)
    return f32 ? f32Bits(std::atan2(float(a), float(b)))
               : f64Bits(std::atan2(a, b));
  return std::nullopt;
}

/// An independent value for what the folder leaves out on defined inputs:
/// ops it does not fold (cbrt, rsqrt, fma), results it declines (NaN from a
/// logarithm's or sqrt's domain, an inexact or overflowing truncf, a
/// ceildivsi whose intermediate would overflow): host libm, APFloat and
/// 128-bit integers.
std::optional<uint64_t> reference(const OpCase &c,
                                  const std::vector<uint64_t> &operands) {
  std::string op = c.op.substr(c.op.find('.') + 1);
  bool f32 = c.resultType == "f32";
  auto value = [&](size_t k) {
    return c.operandTypes[k] == "f32" ? double(asF32(operands[k]))
                                      : asF64(operands[k]);
  };
  auto bits = [&](double v) { return f32 ? f32Bits(float(v)) : f64Bits(v); };
  auto unary = [&](float (*ff)(float), double (*fd)(double)) {
    return f32 ? f32Bits(ff(float(value(0)))) : f64Bits(fd(value(0)));
  };
  if (op == "cbrt")
    return unary(::cbrtf, ::cbrt);
  if (op == "sqrt")
    return unary(::sqrtf, ::sqrt);
  if (op == "log")
    return unary(::logf, ::log);
  if (op == "log2")
    return unary(::log2f, ::log2);
  if (op == "log10")
    return unary(::log10f, ::log10);
  if (op == "log1p")
    return unary(::log1pf, ::log1p);
  if (op == "rsqrt")
    return f32 ? f32Bits(1.0f / ::sqrtf(float(value(0))))
               : bits(1.0 / ::sqrt(value(0)));
  if (op == "fma")
    return f32 ? f32Bits(
                     ::fmaf(float(value(0)), float(value(1)), float(value(2))))
               : bits(::fma(value(0), value(1), value(2)));
  if (op == "truncf") {
    llvm::RoundingMode mode = llvm::RoundingMode::NearestTiesToEven;
    if (c.text.find("downward") != std::string::npos)
      mode = llvm::RoundingMode::TowardNegative;
    else if (c.text.find("upward") != std::string::npos)
      mode = llvm::RoundingMode::TowardPositive;
    else if (c.text.find("toward_zero") != std::string::npos)
      mode = llvm::RoundingMode::TowardZero;
    else if (c.text.find("to_nearest_away") != std::string::npos)
      mode = llvm::RoundingMode::NearestTiesToAway;
    llvm::APFloat x(asF64(operands[0]));
    bool losesInfo;
    x.convert(llvm::APFloat::IEEEsingle(), mode, &losesInfo);
    return x.bitcastToAPInt().getZExtValue();
  }
  if (op == "ceildivsi" && c.resultType != "i1") {
    int width = widthOf(c.resultType);
    auto signedValue = [&](uint64_t v) {
      return width == 32 ? __int128(int32_t(uint32_t(v)))
                         : __int128(int64_t(v));
    };
    __int128 a = signedValue(operands[0]), b = signedValue(operands[1]);
    __int128 limit = __int128(1) << (width - 1);
    if (b == 0)
      return std::nullopt;
    __int128 q = a / b;
    if (a % b != 0 && (a < 0) == (b < 0))
      ++q;
    if (q >= limit || q < -limit)
      return std::nullopt; // the overflow the documented rule covers
    uint64_t mask = width == 64 ? ~uint64_t(0) : (uint64_t(1) << width) - 1;
    return uint64_t(q) & mask;
  }
  return std::nullopt;
}

/// The folder's value of `c` on constant operands, as bits; none where it
/// gives none (a poison or undefined result, or an op it does not fold).
std::optional<uint64_t> folded(mlir::MLIRContext &context, const OpCase &c,
                               const std::vector<uint64_t> &operands) {
  std::string text = "func.func @f() -> " + c.resultType + " {\n";
  std::vector<std::string> names;
  for (size_t k = 0; k < operands.size(); ++k) {
    names.push_back("%a" + std::to_string(k));
    text += "  " + names.back() + " = arith.constant " +
            literal(c.operandTypes[k], operands[k]) + "\n";
  }
  text += "  %r = " + substitute(c.text, names) +
          "\n  return %r : " + c.resultType + "\n}\n";
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  if (!module)
    return std::nullopt;
  auto func = *module->getOps<mlir::func::FuncOp>().begin();
  mlir::Operation *ret = func.getBody().front().getTerminator();
  mlir::Operation *op = ret->getOperand(0).getDefiningOp();
  llvm::SmallVector<mlir::OpFoldResult> results;
  if (mlir::failed(op->fold(results)) || results.empty())
    return std::nullopt;
  mlir::Attribute attr = llvm::dyn_cast<mlir::Attribute>(results[0]);
  if (!attr && !mlir::matchPattern(llvm::cast<mlir::Value>(results[0]),
                                   mlir::m_Constant(&attr)))
    return std::nullopt;
  if (auto i = llvm::dyn_cast_or_null<mlir::IntegerAttr>(attr))
    return i.getValue().getZExtValue();
  if (auto f = llvm::dyn_cast_or_null<mlir::FloatAttr>(attr))
    return f.getValue().bitcastToAPInt().getZExtValue();
  return std::nullopt;
}

bool closeEnough(const OpCase &c, uint64_t got, uint64_t want) {
  const std::string &type = c.resultType;
  double g = type == "f32" ? asF32(got) : asF64(got);
  double w = type == "f32" ? asF32(want) : asF64(want);
  if (std::isnan(g) || std::isnan(w))
    return std::isnan(g) && std::isnan(w);
  if (std::isinf(w) || std::isinf(g))
    return g == w;
  // CUDA's and the host's libm agree within a few ulps; the SFU forms within
  // their documented bounds (OpCase::f32Rel).
  double rel = type == "f32" ? c.f32Rel : 1e-13;
  double abs = type == "f32" ? c.f32Abs : 1e-300;
  return std::fabs(g - w) <= std::max(std::fabs(w) * rel, abs);
}

} // namespace

std::vector<OpCase> regionOpCases() {
  std::vector<OpCase> cases;
  auto add = [&](std::string op, std::string text,
                 std::vector<std::string> operands, std::string result,
                 bool exact = true) {
    cases.push_back({op, text, operands, result, exact});
  };
  const std::vector<std::string> ints = {"i1", "i32", "i64"};
  const std::vector<std::string> floats = {"f32", "f64"};
  for (const char *op :
       {"addi",  "subi",  "muli",      "divsi",     "divui",
        "remsi", "remui", "ceildivsi", "ceildivui", "floordivsi",
        "andi",  "ori",   "xori",      "shli",      "shrsi",
        "shrui", "minsi", "maxsi",     "minui",     "maxui"})
    for (const std::string &t : ints)
      add(std::string("arith.") + op,
          llvm::formatv("arith.{0} {{0}, {{1} : {1}", op, t), {t, t}, t);
  for (const char *p :
       {"eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"})
    for (const std::string &t : ints)
      add("arith.cmpi", llvm::formatv("arith.cmpi {0}, {{0}, {{1} : {1}", p, t),
          {t, t}, "i1");
  for (const char *op : {"absi", "ctlz", "cttz", "ctpop"})
    for (const std::string &t : ints)
      add(std::string("math.") + op,
          llvm::formatv("math.{0} {{0} : {1}", op, t), {t}, t);
  for (const std::string &t : floats) {
    for (const char *op : {"addf", "subf", "mulf", "divf", "remf", "maximumf",
                           "minimumf", "maxnumf", "minnumf"})
      add(std::string("arith.") + op,
          llvm::formatv("arith.{0} {{0}, {{1} : {1}", op, t), {t, t}, t);
    add("arith.negf", "arith.negf {0} : " + t, {t}, t);
    // One op alone has nothing to fuse with: contract changes no result.
    for (const char *op : {"addf", "subf", "mulf"})
      add(std::string("arith.") + op,
          llvm::formatv("arith.{0} {{0}, {{1} fastmath<contract> : {1}", op, t),
          {t, t}, t);
    add("math.copysign", "math.copysign {0}, {1} : " + t, {t, t}, t);
    for (const char *op : {"powf", "atan2"})
      add(std::string("math.") + op,
          llvm::formatv("math.{0} {{0}, {{1} : {1}", op, t), {t, t}, t,
          /*exact=*/false);
    for (const char *op :
         {"absf", "ceil", "floor", "trunc", "round", "roundeven", "sqrt"})
      add(std::string("math.") + op,
          llvm::formatv("math.{0} {{0} : {1}", op, t), {t}, t);
    for (const char *op :
         {"rsqrt", "exp",  "exp2",  "expm1", "log",   "log2", "log10", "log1p",
          "cbrt",  "sin",  "cos",   "tan",   "asin",  "acos", "atan",  "sinh",
          "cosh",  "tanh", "asinh", "acosh", "atanh", "erf"})
      add(std::string("math.") + op,
          llvm::formatv("math.{0} {{0} : {1}", op, t), {t}, t,
          /*exact=*/false);
    // The SFU forms of f32 exp (2 + 1.17 |x| ulp: at most 2^-16 relative),
    // log (2^-21.4 absolute near 1, else 3 ulp) and tanh (2^-11 relative).
    for (OpCase &c : cases)
      if (c.resultType == "f32" && c.op == "math.exp")
        c.f32Rel = 1.0 / 65536;
      else if (c.resultType == "f32" && c.op == "math.log")
        c.f32Abs = 4e-7;
      else if (c.resultType == "f32" && c.op == "math.tanh")
        c.f32Rel = 1.0 / 1024;
    add("math.fma", "math.fma {0}, {1}, {2} : " + t, {t, t, t}, t);
    for (const char *p :
         {"false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq",
          "ugt", "uge", "ult", "ule", "une", "uno", "true"})
      add("arith.cmpf", llvm::formatv("arith.cmpf {0}, {{0}, {{1} : {1}", p, t),
          {t, t}, "i1");
  }
  for (const char *t : {"i1", "i32", "i64", "f32", "f64"})
    add("arith.select", llvm::formatv("arith.select {{0}, {{1}, {{2} : {0}", t),
        {"i1", t, t}, t);
  for (const char *op : {"extsi", "extui"})
    for (auto [from, to] :
         {std::pair{"i1", "i32"}, {"i1", "i64"}, {"i32", "i64"}})
      add(std::string("arith.") + op,
          llvm::formatv("arith.{0} {{0} : {1} to {2}", op, from, to), {from},
          to);
  for (auto [from, to] :
       {std::pair{"i32", "i1"}, {"i64", "i1"}, {"i64", "i32"}})
    add("arith.trunci",
        llvm::formatv("arith.trunci {{0} : {0} to {1}", from, to), {from}, to);
  for (const char *op : {"sitofp", "uitofp"})
    for (const std::string &from : ints)
      for (const std::string &to : floats)
        add(std::string("arith.") + op,
            llvm::formatv("arith.{0} {{0} : {1} to {2}", op, from, to), {from},
            to);
  for (const char *op : {"fptosi", "fptoui"})
    for (const std::string &from : floats)
      for (const std::string &to : ints)
        add(std::string("arith.") + op,
            llvm::formatv("arith.{0} {{0} : {1} to {2}", op, from, to), {from},
            to);
  add("arith.extf", "arith.extf {0} : f32 to f64", {"f32"}, "f64");
  for (const char *mode : {"", " to_nearest_even", " downward", " upward",
                           " toward_zero", " to_nearest_away"})
    add("arith.truncf",
        std::string("arith.truncf {0}") + mode + " : f64 to f32", {"f64"},
        "f32");
  for (auto [from, to] : {std::pair{"i32", "f32"},
                          {"f32", "i32"},
                          {"i64", "f64"},
                          {"f64", "i64"}})
    add("arith.bitcast",
        llvm::formatv("arith.bitcast {{0} : {0} to {1}", from, to), {from}, to);
  return cases;
}

std::optional<Harness> buildHarness(const std::vector<OpCase> &cases,
                                    HarnessTarget target, std::string &error) {
  Harness harness;
  bool host = target == HarnessTarget::Host;
  std::string configs;
  for (size_t i = 0; i < cases.size(); ++i) {
    PrefillVariant variant;
    variant.scoreMod = regionOf(cases[i]);
    llvm::Expected<KernelSpec> spec =
        mlir::attn::compilePrefillVariant(variant, Arch::SM90a);
    if (!spec) {
      error = cases[i].text + ": " + llvm::toString(spec.takeError()) +
              "\nregion:\n" + variant.scoreMod;
      return std::nullopt;
    }
    configs += llvm::formatv("struct Case{0} {{\n{1}};\n", i, spec->scoreMod);
    addEvaluations(cases[i], int(i), harness.evaluations);
  }
  std::string dispatch;
  for (size_t i = 0; i < cases.size(); ++i)
    dispatch += llvm::formatv("  case {0}: return evaluate<Case{0}>(words, "
                              "half);\n",
                              i);
  const char *prologue = host ? R"(#include <cstdint>
#include <cstdio>
#include <cstring>
#define __device__
#define __forceinline__ inline
#define __noinline__
#define ATTN_EVAL_FN static
)"
                              : R"(#define ATTN_EVAL_FN static __device__
)";
  harness.source = std::string(prologue) + R"(#include "attn/params.h"
#include "attn/region_ops.h"
)" + configs + R"(
template <class C>
ATTN_EVAL_FN uint32_t evaluate(const int32_t *words, int32_t half) {
  attn::AuxTable aux[1] = {{words, {)" +
                   std::to_string(kWordsPerEvaluation) + R"(, 1, 1}}};
  typename C::ScoreModHead head = C::scoreModHead(0, 0, 0, aux);
  return attn::region::bitcast<uint32_t>(
      C::scoreMod(0.0f, 0, half, 0, 0, 0, aux, head));
}
ATTN_EVAL_FN uint32_t evaluateCase(int c, const int32_t *words, int32_t half) {
  switch (c) {
)" + dispatch + R"(  }
  return 0xdeadbeefu;
}
)";
  constexpr int kWords = kWordsPerEvaluation;
  if (host) {
    harness.source += R"(
int main(int argc, char **argv) {
  if (argc != 2)
    return 2;
  FILE *in = std::fopen(argv[1], "r");
  if (!in)
    return 2;
  int c;
  int32_t words[)" + std::to_string(kWords) +
                      R"(];
  while (std::fscanf(in, "%d", &c) == 1) {
    for (int i = 0; i < )" +
                      std::to_string(kWords) + R"(; ++i)
      if (std::fscanf(in, "%d", &words[i]) != 1)
        return 3;
    std::printf("%x\n", (unsigned)evaluateCase(c, words, words[)" +
                      std::to_string(kWords - 1) + R"(]));
  }
  return 0;
}
)";
    for (const Evaluation &e : harness.evaluations) {
      harness.inputs += std::to_string(e.caseIndex);
      for (int32_t w : e.words)
        harness.inputs += " " + std::to_string(w);
      harness.inputs += "\n";
    }
  } else {
    harness.source += R"(
extern "C" __global__ void evaluateRegionOps(const int32_t *words,
                                             const int32_t *cases,
                                             uint32_t *results, int count) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count)
    results[i] = evaluateCase(cases[i], words + )" +
                      std::to_string(kWords) + R"( * i,
                              words[)" +
                      std::to_string(kWords) + " * i + " +
                      std::to_string(kWords - 1) + R"(]);
}
)";
  }
  return harness;
}

Comparison compareWithFolder(const std::vector<OpCase> &cases,
                             const Harness &harness,
                             const std::vector<uint64_t> &results) {
  Comparison comparison;
  mlir::DialectRegistry registry;
  mlir::attn::registerAttnDialects(registry);
  mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
  context.loadAllAvailableDialects();
  std::set<int> everFolded;
  const std::vector<Evaluation> &evaluations = harness.evaluations;
  for (size_t i = 0; i < evaluations.size();) {
    const Evaluation &e = evaluations[i];
    const OpCase &c = cases[e.caseIndex];
    // A 64-bit result comes back as two evaluations, low half first.
    uint64_t got = results[i] & 0xffffffffu;
    size_t next = i + 1;
    if (widthOf(c.resultType) == 64) {
      got |= (results[i + 1] & 0xffffffffu) << 32;
      next = i + 2;
    }
    const char *source = "MLIR's folder";
    std::optional<uint64_t> want = folderDeviation(c, e.operands);
    if (want)
      source = "the op's documentation";
    else
      want = folded(context, c, e.operands);
    bool fromFolder = want && source[0] == 'M';
    if (!want && (want = documented(c, e.operands)))
      source = "the documented rule";
    if (!want && (want = reference(c, e.operands)))
      source = "the reference";
    if (!want) {
      ++comparison.unchecked;
      ++comparison.uncheckedByOp[c.text];
      i = next;
      continue;
    }
    if (fromFolder)
      everFolded.insert(e.caseIndex);
    ++(fromFolder ? comparison.folded : comparison.documented);
    bool same = got == *want;
    if (isFloat(c.resultType)) {
      double w = c.resultType == "f32" ? asF32(*want) : asF64(*want);
      double g = c.resultType == "f32" ? asF32(got) : asF64(got);
      if (std::isnan(w))
        same = std::isnan(g); // any NaN: payloads are not part of the meaning
      else if (!c.exact)
        same = closeEnough(c, got, *want);
    }
    if (!same && comparison.mismatches.size() < 400) {
      std::string operandText;
      for (size_t k = 0; k < e.operands.size(); ++k)
        operandText +=
            (k ? ", " : "") + literal(c.operandTypes[k], e.operands[k]);
      comparison.mismatches.push_back(llvm::formatv(
          "{0} on ({1}): emitted code gives 0x{2:x-}, {3} 0x{4:x-}", c.text,
          operandText, got, source, *want));
    }
    i = next;
  }
  for (size_t i = 0; i < cases.size(); ++i)
    if (!everFolded.count(int(i)))
      comparison.opsNeverFolded.push_back(cases[i].text);
  return comparison;
}

} // namespace attn::regiontest
