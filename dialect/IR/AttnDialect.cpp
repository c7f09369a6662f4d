//===- AttnDialect.cpp - attn dialect, attributes, types ------------------===//
//
// Dialect registration, the attribute and paged KV-cache type verifiers, the
// KV-cache shape syntax (`8x128xbf16`), the `attn.arch` module attribute, and
// the conversions between attn IR and the plain-C++ kernel spec.
//
//===----------------------------------------------------------------------===//
#include "dialect/IR/AttnDialect.h"
#include "dialect/IR/AttnOps.h"
#include "spec/KernelLimits.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/StringSet.h"
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
// attn::KernelSpec as an attribute parameter
//===----------------------------------------------------------------------===//

namespace attn {
/// Storage uniquing of #attn.kernel_spec: every field forEachSpecField lists.
llvm::hash_code hash_value(const KernelSpec &spec) {
  llvm::hash_code hash = 0;
  auto add = [&](const char *, const auto &field) {
    using T = std::decay_t<decltype(field)>;
    if constexpr (std::is_same_v<T, DecodeSchedule>)
      forEachDecodeScheduleField(
          [&](const char *, const auto &f) {
            hash = llvm::hash_combine(hash, f);
          },
          field);
    else if constexpr (std::is_same_v<T, PrefillSchedule>)
      forEachPrefillScheduleField(
          [&](const char *, const auto &f) {
            hash = llvm::hash_combine(hash, f);
          },
          field);
    else
      hash = llvm::hash_combine(hash, field);
  };
  forEachSpecField(add, spec);
  return hash;
}
} // namespace attn

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

Type mlir::attn::getElementType(MLIRContext *context, ::attn::ScalarType type) {
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
// KernelSpecAttr
//===----------------------------------------------------------------------===//

namespace {

/// Parses one field value of #attn.kernel_spec, by the field's C++ type.
struct SpecFieldParser {
  AsmParser &parser;

  template <typename T>
  static ParseResult assign(T &field, FailureOr<T> parsed) {
    if (failed(parsed))
      return failure();
    field = *parsed;
    return success();
  }

  ParseResult operator()(::attn::KernelKind &kind) {
    SMLoc loc = parser.getCurrentLocation();
    StringRef name;
    if (parser.parseKeyword(&name))
      return failure();
    std::optional<::attn::KernelKind> parsed = ::attn::parseKernelKind(name);
    if (!parsed)
      return parser.emitError(loc, "unknown kernel kind '") << name << "'";
    kind = *parsed;
    return success();
  }
  ParseResult operator()(::attn::Arch &arch) {
    SMLoc loc = parser.getCurrentLocation();
    std::string name;
    if (parser.parseString(&name))
      return failure();
    std::optional<::attn::Arch> parsed = ::attn::parseArch(name);
    if (!parsed)
      return parser.emitError(loc, "kernel_spec arch \"")
             << name << "\" is not a target; expected " << describeArchs();
    arch = *parsed;
    return success();
  }
  ParseResult operator()(::attn::ScalarType &type) {
    SMLoc loc = parser.getCurrentLocation();
    Type parsed;
    if (parser.parseType(parsed))
      return failure();
    // Which types a field takes for a kernel kind is checkKernelSpec's
    // (f32 rows are merge_states'), run when the attribute is built.
    std::optional<::attn::ScalarType> scalar = toScalarType(parsed);
    if (!scalar)
      return parser.emitError(loc, "kernel_spec element type must be f16, "
                                   "bf16, f32, f8E4M3FN or f8E5M2, got ")
             << parsed;
    type = *scalar;
    return success();
  }
  ParseResult operator()(::attn::KVLayout &layout) {
    return assign(
        layout, parseSpecKeyword(parser, ::attn::parseKVLayout, "nhd or hnd"));
  }
  ParseResult operator()(::attn::PrefillMma &mma) {
    return assign(mma, parseSpecKeyword(parser, ::attn::parsePrefillMma,
                                        "sync or wgmma"));
  }
  ParseResult operator()(int &value) { return parser.parseInteger(value); }
  ParseResult operator()(std::string &text) {
    return parser.parseString(&text);
  }
  ParseResult operator()(bool &flag) {
    SMLoc loc = parser.getCurrentLocation();
    StringRef keyword;
    if (parser.parseKeyword(&keyword))
      return failure();
    if (keyword != "true" && keyword != "false")
      return parser.emitError(loc, "expected 'true' or 'false', got '")
             << keyword << "'";
    flag = keyword == "true";
    return success();
  }
  ParseResult operator()(::attn::DecodeSchedule &schedule) {
    DecodeScheduleAttr attr;
    if (parser.parseAttribute(attr))
      return failure();
    schedule = attr.getSchedule();
    return success();
  }
  ParseResult operator()(::attn::PrefillSchedule &schedule) {
    PrefillScheduleAttr attr;
    if (parser.parseAttribute(attr))
      return failure();
    schedule = attr.getSchedule();
    return success();
  }
};

/// Parses `<name = value, ...>`: each name one of the fields `forEach`
/// lists for `value` (a spec or a schedule), at most once; `seen` collects
/// the names. Errors name the attribute (`what`) and the field.
template <class Struct, class ForEach>
ParseResult parseFields(AsmParser &parser, StringRef what, Struct &value,
                        ForEach forEach, llvm::StringSet<> &seen) {
  SpecFieldParser parseValue{parser};
  auto parseField = [&]() -> ParseResult {
    SMLoc loc = parser.getCurrentLocation();
    StringRef key;
    if (parser.parseKeyword(&key) || parser.parseEqual())
      return failure();
    if (!seen.insert(key).second)
      return parser.emitError(loc)
             << what << " field '" << key << "' given twice";
    bool known = false;
    ParseResult result = success();
    forEach(
        [&](const char *name, auto &field) {
          if (known || key != name)
            return;
          known = true;
          result = parseValue(field);
        },
        value);
    if (!known)
      return parser.emitError(loc)
             << "unknown " << what << " field '" << key << "'";
    return result;
  };
  if (parser.parseLess() || parser.parseCommaSeparatedList(parseField) ||
      parser.parseGreater())
    return failure();
  return success();
}

/// The first of `names` not in `seen`, as an error at `loc`.
LogicalResult requireFields(AsmParser &parser, SMLoc loc, StringRef what,
                            const llvm::StringSet<> &seen,
                            ArrayRef<StringRef> names) {
  for (StringRef name : names)
    if (!seen.contains(name))
      return parser.emitError(loc) << what << " needs '" << name << "'";
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// DecodeScheduleAttr and PrefillScheduleAttr: a schedule struct each
//===----------------------------------------------------------------------===//

namespace attn {
llvm::hash_code hash_value(const DecodeSchedule &schedule) {
  llvm::hash_code hash = 0;
  forEachDecodeScheduleField(
      [&](const char *, const auto &f) { hash = llvm::hash_combine(hash, f); },
      schedule);
  return hash;
}
llvm::hash_code hash_value(const PrefillSchedule &schedule) {
  llvm::hash_code hash = 0;
  forEachPrefillScheduleField(
      [&](const char *, const auto &f) { hash = llvm::hash_combine(hash, f); },
      schedule);
  return hash;
}
} // namespace attn

Attribute DecodeScheduleAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  ::attn::DecodeSchedule schedule;
  llvm::StringSet<> seen;
  auto forEach = [](auto &&f, ::attn::DecodeSchedule &s) {
    ::attn::forEachDecodeScheduleField(f, s);
  };
  if (failed(parseFields(parser, "decode_schedule", schedule, forEach, seen)))
    return {};
  // Every field, as printed.
  SmallVector<StringRef> names;
  ::attn::forEachDecodeScheduleField(
      [&](const char *name, auto &) { names.push_back(name); }, schedule);
  if (failed(requireFields(parser, loc, "decode_schedule", seen, names)))
    return {};
  return getChecked([&] { return parser.emitError(loc); }, parser.getContext(),
                    schedule);
}

void DecodeScheduleAttr::print(AsmPrinter &printer) const {
  const ::attn::DecodeSchedule schedule = getSchedule();
  bool first = true;
  printer << '<';
  ::attn::forEachDecodeScheduleField(
      [&](const char *name, int value) {
        printer << (first ? "" : ", ") << name << " = " << value;
        first = false;
      },
      schedule);
  printer << '>';
}

LogicalResult
DecodeScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                           ::attn::DecodeSchedule schedule) {
  // The context-free rules; what the schedule needs of its variant and arch
  // is checked where both are known (kernel_spec, attn-select-schedule).
  std::string problem = ::attn::checkDecodeSchedule(schedule);
  if (!problem.empty())
    return emitError() << problem;
  return success();
}

Attribute PrefillScheduleAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  ::attn::PrefillSchedule schedule; // mma and the threshold may be left out
  llvm::StringSet<> seen;
  auto forEach = [](auto &&f, ::attn::PrefillSchedule &s) {
    ::attn::forEachPrefillScheduleField(f, s);
  };
  if (failed(
          parseFields(parser, "prefill_schedule", schedule, forEach, seen)) ||
      failed(requireFields(parser, loc, "prefill_schedule", seen,
                           {"warps", "block_m", "block_n", "stages"})))
    return {};
  return getChecked([&] { return parser.emitError(loc); }, parser.getContext(),
                    schedule);
}

void PrefillScheduleAttr::print(AsmPrinter &printer) const {
  const ::attn::PrefillSchedule schedule = getSchedule();
  const ::attn::PrefillSchedule defaults;
  bool first = true;
  printer << '<';
  ::attn::forEachPrefillScheduleField(
      [&](const char *name, const auto &value, const auto &byDefault) {
        std::string_view key = name;
        // The optional fields are left out at their defaults.
        if ((key == "mma" || key == "persistent_max_q_len" ||
             key == "pack_gqa") &&
            value == byDefault)
          return;
        printer << (first ? "" : ", ") << name << " = ";
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, ::attn::PrefillMma>)
          printer << ::attn::toString(value);
        else if constexpr (std::is_same_v<T, bool>)
          printer << (value ? "true" : "false");
        else
          printer << value;
        first = false;
      },
      schedule, defaults);
  printer << '>';
}

LogicalResult
PrefillScheduleAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                            ::attn::PrefillSchedule schedule) {
  std::string problem = ::attn::checkPrefillSchedule(schedule);
  if (!problem.empty())
    return emitError() << problem;
  return success();
}

Attribute KernelSpecAttr::parse(AsmParser &parser, Type) {
  MLIRContext *context = parser.getContext();
  // The IR's defaults: fields left out are false, 1 (query_len) or 0
  // (page_size, for kernels that read no cache).
  ::attn::KernelSpec spec;
  spec.pageSize = 0;
  llvm::StringSet<> seen;
  SMLoc start = parser.getCurrentLocation();
  auto forEach = [](auto &&f, ::attn::KernelSpec &k) {
    ::attn::forEachSpecField(f, k);
  };
  if (failed(parseFields(parser, "kernel_spec", spec, forEach, seen)))
    return {};
  bool decodeSchedule = seen.contains("schedule");
  bool prefillSchedule = seen.contains("prefill_schedule");
  if (failed(requireFields(parser, start, "kernel_spec", seen,
                           {"kind", "arch", "q_type", "kv_type", "num_q_heads",
                            "num_kv_heads", "head_dim", "layout"})))
    return {};
  // What the text spells that the struct cannot hold: a missing or a
  // foreign schedule.
  StringRef kindName = ::attn::toString(spec.kind);
  auto error = [&] { return parser.emitError(start); };
  if (spec.isCacheOp()) {
    error()
        << "kernel_spec kind " << kindName
        << " is a runtime utility kernel; the compiler does not lower to it";
    return {};
  }
  if (spec.hasDecodeSchedule() && !decodeSchedule) {
    error() << "kernel_spec of a decode kernel needs a schedule";
    return {};
  }
  if (spec.isPrefill() && !prefillSchedule) {
    error() << "kernel_spec of a " << kindName
            << " kernel needs a prefill_schedule";
    return {};
  }
  if (!spec.hasDecodeSchedule() && decodeSchedule) {
    error() << "kernel_spec schedule is for decode kernels; a " << kindName
            << " kernel "
            << (spec.isPrefill() ? "has a prefill_schedule" : "has none");
    return {};
  }
  if (!spec.isPrefill() && prefillSchedule) {
    error() << "kernel_spec prefill_schedule is for prefill kernels only";
    return {};
  }
  return getChecked([&] { return parser.emitError(start); }, context, spec);
}

void KernelSpecAttr::print(AsmPrinter &printer) const {
  ::attn::KernelSpec spec = getSpec();
  MLIRContext *context = getContext();
  bool first = true;
  printer << '<';
  auto print = [&](const char *name, const auto &field) {
    using T = std::decay_t<decltype(field)>;
    std::string key = name;
    // Defaults are left out; each kernel shows only its own schedule.
    if constexpr (std::is_same_v<T, bool>) {
      if (!field)
        return;
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (field.empty())
        return;
    } else if constexpr (std::is_same_v<T, ::attn::DecodeSchedule>) {
      if (!spec.hasDecodeSchedule())
        return;
    } else if constexpr (std::is_same_v<T, ::attn::PrefillSchedule>) {
      if (!spec.isPrefill())
        return;
    } else if constexpr (std::is_same_v<T, int>) {
      if ((key == "query_len" && field == 1) ||
          (key == "page_size" && field == 0) ||
          (key == "rope_dim" && field == 0))
        return;
    }
    printer << (first ? "" : ", ") << key << " = ";
    first = false;
    if constexpr (std::is_same_v<T, bool>)
      printer << "true";
    else if constexpr (std::is_same_v<T, int>)
      printer << field;
    else if constexpr (std::is_same_v<T, std::string>)
      printer.printString(field);
    else if constexpr (std::is_same_v<T, ::attn::Arch>)
      printer << '"' << ::attn::toString(field) << '"';
    else if constexpr (std::is_same_v<T, ::attn::ScalarType>)
      printer << getElementType(context, field);
    else if constexpr (std::is_same_v<T, ::attn::DecodeSchedule>)
      printer.printAttribute(DecodeScheduleAttr::get(context, field));
    else if constexpr (std::is_same_v<T, ::attn::PrefillSchedule>)
      printer.printAttribute(PrefillScheduleAttr::get(context, field));
    else
      printer << ::attn::toString(field);
  };
  ::attn::forEachSpecField(print, spec);
  printer << '>';
}

LogicalResult
KernelSpecAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                       ::attn::KernelSpec spec) {
  if (spec.isCacheOp())
    return emitError() << "kernel_spec kind " << ::attn::toString(spec.kind)
                       << " is a runtime utility kernel; the compiler does "
                          "not lower to it";
  // Every rule is checkKernelSpec's (spec/KernelLimits.h), shared with the
  // runtime and the AOT manifest reader.
  std::string problem = ::attn::checkKernelSpec(spec);
  if (!problem.empty())
    return emitError() << "kernel_spec " << problem;
  return success();
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
                                  ::attn::KVLayout layout) {
  if (numKvHeads < 1 || numKvHeads > ::attn::kMaxHeads)
    return emitError() << "paged_kv must have 1 to " << ::attn::kMaxHeads
                       << " kv heads, got " << numKvHeads;
  if (!::attn::isSupportedCacheHeadDim(headDim))
    return emitError() << "paged_kv head_dim " << headDim
                       << " is not supported; expected a multiple of "
                       << ::attn::kHeadDimMultiple << " from "
                       << ::attn::kMinHeadDim << " to "
                       << ::attn::kMaxCacheHeadDim;
  if (!isCacheElementType(elementType))
    return emitError() << "paged_kv element type " << elementType
                       << " is not allowed; expected f16, bf16, f8E4M3FN or "
                          "f8E5M2";
  if (!::attn::isSupportedPageSize(pageSize))
    return emitError() << "paged_kv page_size " << pageSize
                       << " is not supported; expected " << ::attn::kMinPageSize
                       << " to " << ::attn::kMaxPageSize;
  return success();
}

bool PagedKVType::isFP8() const { return isFP8Type(getElementType()); }
