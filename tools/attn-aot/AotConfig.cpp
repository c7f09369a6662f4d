//===- AotConfig.cpp - attn-aot configs -> kernels to build ---------------===//
//
// JSON configs are read in two passes. The first checks each entry as a
// whole (known fields, no empty list, paged-only fields only on paged
// prefill) and counts its combinations; only when the count of the whole
// config is within the limit does the second expand the entries and read
// each combination into a variant and, per arch, a kernel spec.
//
//===----------------------------------------------------------------------===//
#include "tools/attn-aot/AotConfig.h"

#include "attn/runtime/cache/VariantKey.h"
#include "attn/runtime/serving/CacheOps.h"
#include "attn/runtime/support/InputFiles.h"
#include "compiler/Frontend/Frontend.h"
#include "compiler/Frontend/SourceLimits.h"
#include "dialect/IR/AttnOps.h"
#include "tools/RegisterAttn.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Errno.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <climits>

#include <fcntl.h>
#include <functional>
#include <map>
#include <set>
#include <tuple>
#include <unistd.h>
#include <variant>

namespace attn::aot {
namespace {

namespace json = llvm::json;

/// One combination of an entry: field -> value.
using Combo = std::map<std::string, json::Value>;

std::string describe(const Combo &combo) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "{";
  bool first = true;
  for (const auto &[name, value] : combo) {
    os << (first ? "" : ", ") << name << "=" << value;
    first = false;
  }
  os << "}";
  return text;
}

std::string printed(const json::Value &value) {
  std::string text;
  llvm::raw_string_ostream(text) << value;
  return text;
}

/// Reads the fields of one combination into a variant; the first problem
/// wins. Records every field name it asks for, so a reader run on an empty
/// combination lists the fields of its section.
class ComboReader {
public:
  /// Reads a "modifiers" file by its path; null reads none.
  using LoadModifiers =
      std::function<llvm::Expected<ModifierRegions>(llvm::StringRef)>;
  explicit ComboReader(const Combo &combo, LoadModifiers load = {})
      : combo(combo), loadModifiers(std::move(load)) {}
  std::string problem;
  std::set<std::string> asked;

  /// Counts and sizes: 1 to INT_MAX (the variant fields are int; a larger
  /// value would be cut to another, valid-looking one).
  void integer(const char *name, int &out) {
    if (const json::Value *v = take(name)) {
      std::optional<int64_t> i = runtime::getJsonInteger(*v);
      if (i && *i >= 1 && *i <= INT_MAX)
        out = int(*i);
      else
        fail(llvm::formatv("\"{0}\" must be an integer from 1 to {1}, not {2}",
                           name, INT_MAX, printed(*v)));
    }
  }
  void boolean(const char *name, bool &out) {
    if (const json::Value *v = take(name)) {
      if (auto b = v->getAsBoolean())
        out = *b;
      else
        fail(std::string("\"") + name + "\" must be true or false");
    }
  }
  /// A flag whose value is a launch parameter: any placeholder selects the
  /// kernel with the feature.
  template <class T>
  void present(const char *name, std::optional<T> &out, T placeholder) {
    bool on = false;
    boolean(name, on);
    if (on)
      out = placeholder;
  }
  void type(const char *name, ScalarType &out,
            std::optional<ScalarType> q = {}) {
    if (const json::Value *v = take(name)) {
      auto text = v->getAsString();
      std::optional<ScalarType> parsed = text && *text == "q" && q ? q
                                         : text ? parseScalarType(*text)
                                                : std::nullopt;
      if (parsed)
        out = *parsed;
      else
        fail(std::string("\"") + name + "\" must be f16, bf16, e4m3, e5m2" +
             (q ? " or q" : ""));
    }
  }
  void layout(const char *name, KVLayout &out) {
    if (const json::Value *v = take(name)) {
      auto text = v->getAsString();
      std::optional<KVLayout> parsed =
          text ? parseKVLayout(*text) : std::nullopt;
      if (parsed)
        out = *parsed;
      else
        fail(std::string("\"") + name + "\" must be nhd or hnd");
    }
  }

  /// The path of a .mlir file whose attention op's score_mod and mask_mod
  /// regions the variant takes.
  void modifiers(const char *name, AttentionKnobs &out) {
    const json::Value *v = take(name);
    if (!v)
      return;
    std::optional<llvm::StringRef> path = v->getAsString();
    if (!path || !path->ends_with(".mlir")) {
      fail(std::string("\"") + name +
           "\" must be the path of a .mlir file "
           "holding one attention op with score_mod / mask_mod regions, not " +
           printed(*v));
      return;
    }
    if (!loadModifiers) {
      fail(std::string("\"") + name +
           "\" names a file, and this reader reads "
           "no files");
      return;
    }
    llvm::Expected<ModifierRegions> regions = loadModifiers(*path);
    if (!regions) {
      fail(llvm::toString(regions.takeError()));
      return;
    }
    out.scoreMod = regions->scoreMod;
    out.maskMod = regions->maskMod;
  }

  void fail(const std::string &message) {
    if (problem.empty())
      problem = message;
  }

private:
  const json::Value *take(const char *name) {
    asked.insert(name);
    auto it = combo.find(name);
    return it == combo.end() ? nullptr : &it->second;
  }
  const Combo &combo;
  LoadModifiers loadModifiers;
};

/// The fields decode and prefill variants share, under the same names.
template <class Variant> void readAttentionFields(ComboReader &r, Variant &v) {
  r.type("q_type", v.qType);
  r.integer("num_q_heads", v.numQHeads);
  r.integer("num_kv_heads", v.numKVHeads);
  r.integer("head_dim", v.headDim);
  r.boolean("causal", v.causal);
  bool cross = false;
  r.boolean("cross", cross);
  if (cross)
    v.kind = AttentionKind::Cross;
  r.present("window_left", v.windowLeft, 1);
  r.present("softcap", v.softcap, 1.f);
  // Per-head tables (alibi, ...) by their knob's name.
#define ATTN_HEAD_TABLE(flag, ...) r.boolean(knobName(#flag).data(), v.flag);
#include "templates/attn/variant_knobs.h"
  r.boolean("write_lse", v.writeLse);
  r.boolean("batch_invariant", v.batchInvariant);
  r.modifiers("modifiers", v);
}

/// Each op's fields (its section is named in spec/Ops.h).
void readVariant(ComboReader &r, DecodeVariant &v) {
  readAttentionFields(r, v);
  r.type("kv_type", v.kvType, v.qType);
  r.integer("page_size", v.pageSize);
  r.layout("layout", v.layout);
  r.integer("query_len", v.queryLen);
  r.boolean("per_head_kv_scale", v.perHeadKVScale);
}

/// Prefill fields that describe the paged cache: an error on an entry that
/// is not "paged": true, where they would be silently ignored. (kv_type,
/// per_head_kv_scale and fp8_compute apply to ragged FP8 k/v too.)
constexpr const char *kPagedOnlyFields[] = {"page_size", "layout"};

void readVariant(ComboReader &r, PrefillVariant &v) {
  readAttentionFields(r, v);
  bool encoder = false;
  r.boolean("encoder", encoder);
  if (encoder && v.kind == AttentionKind::Cross)
    r.fail("an entry is \"encoder\" or \"cross\", not both");
  else if (encoder)
    v.kind = AttentionKind::Encoder;
  bool paged = false;
  r.boolean("paged", paged);
  PagedKVFormat format;
  format.kvType = v.qType;
  r.type("kv_type", format.kvType, v.qType);
  r.integer("page_size", format.pageSize);
  r.layout("layout", format.layout);
  r.boolean("per_head_kv_scale", format.perHeadKVScale);
  r.boolean("fp8_compute", v.fp8Compute);
  r.integer("rope_dim", v.ropeDim);
  if (paged)
    v.paged = format;
  else if (format.kvType != v.qType)
    v.fp8KV = FP8RowsFormat{format.kvType, format.perHeadKVScale};
}

void readVariant(ComboReader &r, AppendKVVariant &v) {
  r.type("in_type", v.inType);
  r.type("kv_type", v.kvType, v.inType);
  r.integer("num_kv_heads", v.numKVHeads);
  r.integer("head_dim", v.headDim);
  r.integer("page_size", v.pageSize);
  r.layout("layout", v.layout);
  r.boolean("per_head_kv_scale", v.perHeadKVScale);
}

void readVariant(ComboReader &r, MergeStatesVariant &v) {
  r.type("dtype", v.dtype);
  r.integer("num_heads", v.numHeads);
  r.integer("head_dim", v.headDim);
}

void readVariant(ComboReader &r, MlaDecodeVariant &v) {
  r.type("q_type", v.qType);
  r.type("kv_type", v.kvType, v.qType);
  r.integer("num_q_heads", v.numQHeads);
  r.integer("kv_lora_rank", v.kvLoraRank);
  r.integer("rope_dim", v.ropeDim);
  r.integer("page_size", v.pageSize);
  r.integer("query_len", v.queryLen);
  r.boolean("causal", v.causal);
  r.boolean("write_lse", v.writeLse);
  r.boolean("batch_invariant", v.batchInvariant);
}

/// The sections of a JSON config: one per op of spec/Ops.h.
const std::vector<std::string> &opSections() {
  static const std::vector<std::string> sections = {
#define ATTN_OP(Type, member, name) #name,
#include "spec/Ops.h"
  };
  return sections;
}

/// The fields a section reads: its reader run on nothing.
std::set<std::string> fieldsOf(llvm::StringRef kind) {
  Combo none;
  ComboReader reader(none);
#define ATTN_OP(Type, member, name)                                            \
  if (kind == #name) {                                                         \
    Type##Variant v;                                                           \
    readVariant(reader, v);                                                    \
  }
#include "spec/Ops.h"
  return reader.asked;
}

/// A checked entry of a section, with its combination count.
struct Entry {
  std::string kind;
  std::string where; ///< "CONFIG: decode[0]"
  const json::Object *object;
  uint64_t combinations;
  std::string lists; ///< "head_dim: 7, q_type: 2" for messages
};

/// Checks `object` as a whole; on success returns its entry, else adds
/// the problems to `errors`.
std::optional<Entry> checkEntry(llvm::StringRef kind, std::string where,
                                const json::Object &object,
                                const std::set<std::string> &known,
                                std::vector<std::string> &errors) {
  size_t errorsBefore = errors.size();
  std::vector<std::string> names;
  for (const auto &kv : object)
    names.push_back(kv.first.str());
  llvm::sort(names); // a stable order for messages
  uint64_t combinations = 1;
  std::string lists;
  for (const std::string &name : names) {
    if (!known.count(name)) {
      std::string hint = name == "window" ? " (renamed \"window_left\")" : "";
      errors.push_back(where + ": unknown field \"" + name + "\"" + hint);
      continue;
    }
    const json::Array *list = object.get(name)->getAsArray();
    if (!list)
      continue;
    if (list->empty()) {
      errors.push_back(where + ": \"" + name +
                       "\" is an empty list, so the entry stands for no "
                       "variant; give at least one value");
      continue;
    }
    combinations =
        llvm::SaturatingMultiply(combinations, uint64_t(list->size()));
    lists += (lists.empty() ? "" : ", ") + name + ": " +
             std::to_string(list->size());
  }
  if (kind == "prefill") {
    const json::Value *paged = object.get("paged");
    bool alwaysPaged = paged && paged->getAsBoolean() == true;
    for (const char *name : kPagedOnlyFields)
      if (object.get(name) && !alwaysPaged)
        errors.push_back(where + ": \"" + name +
                         "\" applies to paged prefill only, and this entry " +
                         (paged ? "has \"paged\": " + printed(*paged)
                                : std::string("is not paged")) +
                         "; give it only to entries with \"paged\": true");
  }
  if (errors.size() != errorsBefore)
    return std::nullopt;
  return Entry{kind.str(), std::move(where), &object, combinations,
               std::move(lists)};
}

/// The combinations of an entry: one map of field -> value per combination.
std::vector<Combo> expand(const json::Object &entry) {
  std::vector<Combo> combos(1);
  std::vector<std::string> names;
  for (const auto &kv : entry)
    names.push_back(kv.first.str());
  llvm::sort(names);
  for (const std::string &name : names) {
    const json::Value &value = *entry.get(name);
    std::vector<json::Value> options;
    if (const json::Array *list = value.getAsArray())
      options.assign(list->begin(), list->end());
    else
      options.push_back(value);
    std::vector<Combo> next;
    for (const Combo &combo : combos)
      for (const json::Value &option : options) {
        Combo extended = combo;
        extended.emplace(name, option);
        next.push_back(std::move(extended));
      }
    combos = std::move(next);
  }
  return combos;
}

std::string archCount(size_t archs) {
  return std::to_string(archs) + (archs == 1 ? " arch" : " archs");
}

/// An error unless the entries, times the archs, stand for at most
/// `limit` variants; names the entry that is too large alone, else each.
std::optional<std::string> overLimit(llvm::StringRef name,
                                     llvm::ArrayRef<Entry> entries,
                                     size_t archs, uint64_t limit) {
  std::string tail = llvm::formatv(
      ", more than the limit of {0} variants; --max-variants N raises it",
      limit);
  uint64_t total = 0;
  for (const Entry &e : entries) {
    uint64_t variants =
        llvm::SaturatingMultiply(e.combinations, uint64_t(archs));
    if (variants > limit)
      return llvm::formatv("{0} stands for {1} variants ({2} combinations of "
                           "{3}; times {4}){5}",
                           e.where, variants, e.combinations,
                           e.lists.empty() ? "no list" : e.lists,
                           archCount(archs), tail)
          .str();
    total = llvm::SaturatingAdd(total, variants);
  }
  if (total <= limit)
    return std::nullopt;
  std::string each;
  for (const Entry &e : entries)
    each += (each.empty() ? "" : ", ") + e.where.substr(name.size() + 2) +
            ": " + std::to_string(e.combinations);
  return llvm::formatv("{0}: the config stands for {1} variants ({2} "
                       "combinations; times {3}){4}",
                       name, total, each, archCount(archs), tail)
      .str();
}

ConfigJobs jsonJobs(llvm::StringRef text, llvm::StringRef name,
                    llvm::ArrayRef<Arch> archs, const ConfigLimits &limits,
                    const ReadFile &readFile) {
  ConfigJobs result;
  std::vector<std::string> &errors = result.errors;
  llvm::Expected<json::Value> root = runtime::parseJson(text, name);
  if (!root) {
    errors.push_back(llvm::toString(root.takeError()));
    return result;
  }
  const json::Object *object = root->getAsObject();
  if (!object) {
    errors.push_back(name.str() + ": the config must be a JSON object");
    return result;
  }

  // Pass 1: check and count every entry, in a fixed section order.
  std::vector<Entry> entries;
  bool cacheOps = false;
  std::vector<std::string> sections;
  for (const auto &kv : *object)
    sections.push_back(kv.first.str());
  llvm::sort(sections);
  for (llvm::StringRef kind : opSections()) {
    const json::Value *section = object->get(kind);
    if (!section)
      continue;
    const json::Array *list = section->getAsArray();
    if (!list) {
      errors.push_back(name.str() + ": \"" + kind.str() + "\" must be a list");
      continue;
    }
    if (list->empty()) {
      errors.push_back(name.str() + ": \"" + kind.str() +
                       "\" is an empty list; give at least one entry or "
                       "leave the section out");
      continue;
    }
    std::set<std::string> known = fieldsOf(kind);
    for (size_t i = 0; i < list->size(); ++i) {
      std::string where = llvm::formatv("{0}: {1}[{2}]", name, kind, i);
      const json::Object *entry = (*list)[i].getAsObject();
      if (!entry) {
        errors.push_back(where + ": must be an object");
        continue;
      }
      if (std::optional<Entry> checked =
              checkEntry(kind, where, *entry, known, errors))
        entries.push_back(std::move(*checked));
    }
  }
  for (const std::string &section : sections) {
    if (section == "cache_ops") {
      std::optional<bool> wanted = object->get(section)->getAsBoolean();
      if (!wanted)
        errors.push_back(name.str() + ": \"cache_ops\" must be true or false");
      cacheOps = wanted.value_or(false);
    } else if (!llvm::is_contained(opSections(), section)) {
      errors.push_back(name.str() + ": unknown section \"" + section +
                       "\" (expected " + llvm::join(opSections(), ", ") +
                       ", cache_ops)");
    }
  }

  // Counted before anything is expanded: a short config can stand for
  // more variants than memory holds.
  if (std::optional<std::string> error =
          overLimit(name, entries, archs.size(), limits.maxVariants)) {
    errors.push_back(*error);
    return result;
  }

  // Each modifier file is read and parsed once, however many variants
  // name it; a failure is remembered as its message.
  std::map<std::string, std::variant<ModifierRegions, std::string>>
      modifierFiles;
  ComboReader::LoadModifiers loadModifiers;
  if (readFile)
    loadModifiers =
        [&](llvm::StringRef path) -> llvm::Expected<ModifierRegions> {
      auto [it, added] = modifierFiles.try_emplace(path.str());
      if (added) {
        llvm::Expected<std::string> text = readFile(path);
        llvm::Expected<ModifierRegions> regions =
            text ? readModifierFile(*text, path)
                 : llvm::Expected<ModifierRegions>(text.takeError());
        if (regions)
          it->second = std::move(*regions);
        else
          it->second = llvm::toString(regions.takeError());
      }
      if (auto *error = std::get_if<std::string>(&it->second))
        return llvm::createStringError(*error);
      return std::get<ModifierRegions>(it->second);
    };

  // Pass 2: every combination of every entry, on every arch.
  if (cacheOps)
    for (Arch arch : archs)
      for (const KernelSpec &spec : runtime::CacheOps::specs(arch))
        result.jobs.push_back({spec, "", name.str() + ": cache_ops"});
  for (const Entry &entry : entries) {
    for (const Combo &combo : expand(*entry.object)) {
      std::string origin = entry.where + " " + describe(combo);
      ComboReader reader(combo, loadModifiers);
      std::string key;
      std::function<llvm::Expected<KernelSpec>(Arch)> compile;
      // The entry's op: its variant read, its key, its compile.
#define ATTN_OP(Type, member, name)                                            \
  if (entry.kind == #name) {                                                   \
    Type##Variant v;                                                           \
    readVariant(reader, v);                                                    \
    key = runtime::kernelKey(v);                                               \
    compile = [v](Arch arch) { return mlir::attn::compileVariant(v, arch); };  \
  }
#include "spec/Ops.h"
      if (!reader.problem.empty()) {
        errors.push_back(origin + ": " + reader.problem);
        continue; // the same problem on every arch
      }
      for (Arch arch : archs) {
        llvm::Expected<KernelSpec> spec = compile(arch);
        if (!spec) {
          errors.push_back(origin + " on " + std::string(toString(arch)) +
                           ": " + llvm::toString(spec.takeError()));
          continue;
        }
        result.jobs.push_back({*spec, key, origin});
      }
    }
  }
  return result;
}

/// The module in `sourceMgr`, parsed, checked for what MLIR 19 cannot print
/// and then verified (diagnostics show no op, for the same reason); null
/// after an error.
mlir::OwningOpRef<mlir::ModuleOp> parseUntrusted(llvm::SourceMgr &sourceMgr,
                                                 mlir::MLIRContext &context) {
  context.printOpOnDiagnostic(false);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(
          sourceMgr, mlir::ParserConfig(&context, /*verifyAfterParse=*/false));
  if (!module || failed(mlir::attn::rejectMalformedBoolArrays(*module)) ||
      failed(mlir::verify(*module)))
    return nullptr;
  return module;
}

ConfigJobs mlirJobs(llvm::StringRef text, llvm::StringRef name,
                    llvm::ArrayRef<Arch> archs, const ConfigLimits &limits) {
  ConfigJobs result;
  if (llvm::Error error = mlir::attn::checkIRText(text, name)) {
    result.errors.push_back(llvm::toString(std::move(error)));
    return result;
  }
  mlir::DialectRegistry registry;
  mlir::attn::registerAttnDialects(registry);
  mlir::MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, name),
                               llvm::SMLoc());
  std::string diagnostics;
  llvm::raw_string_ostream diagOs(diagnostics);
  mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context, diagOs);
  // Parsed and counted once; each arch lowers its own copy (the pipeline
  // records the target on the module).
  mlir::OwningOpRef<mlir::ModuleOp> module = parseUntrusted(sourceMgr, context);
  if (!module) {
    result.errors.push_back(diagnostics);
    return result;
  }
  // The attn ops' locations, in IR order: each lowers to one launch.
  std::vector<std::string> origins;
  module->walk([&](mlir::Operation *op) {
    if (mlir::isa<mlir::attn::DecodeOp, mlir::attn::PrefillOp,
                  mlir::attn::PagedPrefillOp, mlir::attn::AppendKVOp>(op)) {
      std::string loc;
      llvm::raw_string_ostream os(loc);
      op->getLoc().print(os);
      origins.push_back(loc);
    }
  });
  uint64_t variants = uint64_t(origins.size()) * archs.size();
  if (variants > limits.maxVariants) {
    result.errors.push_back(llvm::formatv(
        "{0}: {1} attn ops times {2} stand for {3} variants, more than the "
        "limit of {4} variants; --max-variants N raises it",
        name, origins.size(), archCount(archs.size()), variants,
        limits.maxVariants));
    return result;
  }
  for (Arch arch : archs) {
    diagnostics.clear();
    mlir::OwningOpRef<mlir::ModuleOp> copy = module->clone();
    auto specs = mlir::attn::lowerToKernelSpecs(*copy, arch);
    if (!specs) {
      result.errors.push_back(name.str() + " on " +
                              std::string(toString(arch)) + ": " +
                              llvm::toString(specs.takeError()) + diagnostics);
      continue;
    }
    for (size_t i = 0; i < specs->size(); ++i)
      result.jobs.push_back(
          {(*specs)[i], "",
           i < origins.size() && origins.size() == specs->size() ? origins[i]
                                                                 : name.str()});
  }
  return result;
}

/// `region` printed in a holder op of its own, every op in generic form:
/// equal for equal regions however they were written.
std::string genericText(mlir::Region &region) {
  mlir::OperationState state(mlir::UnknownLoc::get(region.getContext()),
                             "attn_aot.region");
  mlir::IRMapping mapping;
  region.cloneInto(state.addRegion(), mapping);
  mlir::Operation *holder = mlir::Operation::create(state);
  std::string text;
  llvm::raw_string_ostream os(text);
  holder->print(os, mlir::OpPrintingFlags().printGenericOpForm());
  holder->destroy();
  return text;
}

/// Where the `keyword { ... }` region first following offset `from` of
/// `text` is, braces included, read as MLIR's lexer reads it: comments and
/// string literals hold no keyword or brace. Empty if there is none.
llvm::StringRef regionAfter(llvm::StringRef text, size_t from,
                            llvm::StringRef keyword) {
  auto isIdent = [](char c) {
    return llvm::isAlnum(c) || c == '_' || c == '$' || c == '.';
  };
  // Steps over a comment or a string literal at i, if one starts there.
  auto skipped = [&](size_t &i) {
    if (text.substr(i).starts_with("//")) {
      i = std::min(text.find('\n', i), text.size());
      return true;
    }
    if (text[i] != '"')
      return false;
    for (++i; i < text.size() && text[i] != '"'; ++i)
      if (text[i] == '\\')
        ++i;
    ++i;
    return true;
  };
  size_t i = from;
  while (i < text.size()) {
    if (skipped(i))
      continue;
    bool atWord = text.substr(i).starts_with(keyword) &&
                  (i == 0 || (!isIdent(text[i - 1]) && text[i - 1] != '%' &&
                              text[i - 1] != '^' && text[i - 1] != '#')) &&
                  (i + keyword.size() == text.size() ||
                   !isIdent(text[i + keyword.size()]));
    if (atWord)
      break;
    ++i;
  }
  i += keyword.size();
  while (i < text.size() &&
         (llvm::isSpace(text[i]) || text.substr(i).starts_with("//")))
    if (!skipped(i))
      ++i;
  if (i >= text.size() || text[i] != '{')
    return {};
  size_t open = i;
  int depth = 0;
  while (i < text.size()) {
    if (skipped(i))
      continue;
    if (text[i] == '{')
      ++depth;
    else if (text[i] == '}' && --depth == 0)
      return text.slice(open, i + 1);
    ++i;
  }
  return {};
}

} // namespace

llvm::Expected<ModifierRegions> readModifierFile(llvm::StringRef text,
                                                 llvm::StringRef name) {
  if (llvm::Error error = mlir::attn::checkIRText(text, name))
    return error;
  mlir::DialectRegistry registry;
  mlir::attn::registerAttnDialects(registry);
  mlir::MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  unsigned buffer = sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(text, name), llvm::SMLoc());
  // Located messages only: the file may hold anything, and MLIR's source
  // manager handler would echo the line an error points into.
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    llvm::raw_string_ostream os(diagnostics);
    if (auto at = mlir::dyn_cast<mlir::FileLineColLoc>(diag.getLocation()))
      os << at.getFilename().getValue() << ":" << at.getLine() << ":"
         << at.getColumn();
    else
      os << diag.getLocation();
    os << ": "
       << (diag.getSeverity() == mlir::DiagnosticSeverity::Error ? "error: "
                                                                 : "note: ")
       << diag << "\n";
    return mlir::success();
  });
  // Parsed and verified: regions the verifier rejects never reach a config.
  mlir::OwningOpRef<mlir::ModuleOp> module = parseUntrusted(sourceMgr, context);
  if (!module)
    return llvm::createStringError(diagnostics);
  std::vector<mlir::attn::AttentionOpInterface> ops;
  module->walk([&](mlir::attn::AttentionOpInterface op) { ops.push_back(op); });
  if (ops.size() != 1)
    return llvm::createStringError(llvm::formatv(
        "{0}: a modifiers file holds one attention op (its score_mod and "
        "mask_mod are the modifiers), not {1}",
        name, ops.size()));
  mlir::attn::AttentionOpInterface op = ops.front();
  if (op.getScoreMod().empty() && op.getMaskMod().empty())
    return llvm::createStringError(name + ": its attention op has neither a "
                                          "score_mod nor a mask_mod region");
  // The regions as the file spells them (hosts find the kernels by that
  // text), found after the op's start, and parsed back: the text must be
  // the very region that was verified, wherever the location pointed.
  auto loc = mlir::dyn_cast<mlir::FileLineColLoc>(op->getLoc());
  llvm::SMLoc start = loc ? sourceMgr.FindLocForLineAndColumn(
                                buffer, loc.getLine(), loc.getColumn())
                          : llvm::SMLoc();
  if (!start.isValid())
    return llvm::createStringError(name + ": the attention op has no source "
                                          "location");
  size_t from =
      start.getPointer() - sourceMgr.getMemoryBuffer(buffer)->getBufferStart();
  ModifierRegions regions;
  for (auto [region, keyword, out] :
       {std::tuple{&op.getScoreMod(), "score_mod", &regions.scoreMod},
        {&op.getMaskMod(), "mask_mod", &regions.maskMod}}) {
    if (region->empty())
      continue;
    *out = regionAfter(text, from, keyword).str();
    mlir::FailureOr<mlir::OwningOpRef<mlir::Operation *>> reread =
        mlir::failure();
    if (!out->empty())
      reread = mlir::attn::parseModifierRegion(context, *out, keyword);
    if (failed(reread) ||
        genericText((*reread)->getRegion(0)) != genericText(*region))
      return llvm::createStringError(
          name + ": the text after the attention op's location is not its " +
          keyword + " region; write the op in its custom form, located " +
          "where it starts");
  }
  return regions;
}

llvm::Expected<std::string> readFileUnderConfig(llvm::StringRef configPath,
                                                llvm::StringRef path,
                                                uint64_t maxBytes) {
  auto refuse = [&](const llvm::Twine &why) {
    return llvm::createStringError("cannot read '" + path + "': " + why);
  };
  if (path.empty() || llvm::sys::path::is_absolute(path))
    return refuse("name it relative to the config's directory");
  llvm::SmallVector<llvm::StringRef> names;
  path.split(names, '/');
  for (llvm::StringRef part : names)
    if (part.empty() || part == "." || part == "..")
      return refuse("a path under the config's directory is plain names, "
                    "with no '.', '..' or empty one");
  llvm::SmallString<256> dir = llvm::sys::path::parent_path(configPath);
  if (dir.empty())
    dir = ".";
  int dirFd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirFd < 0)
    return refuse("cannot open the config's directory " + dir + ": " +
                  llvm::sys::StrError(errno));
  for (size_t i = 0; i + 1 < names.size(); ++i) {
    std::string part = names[i].str();
    int next = ::openat(dirFd, part.c_str(),
                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int error = errno;
    ::close(dirFd);
    if (next < 0)
      return refuse("'" + part + "' is not a directory of its own (" +
                    (error == ELOOP || error == ENOTDIR
                         ? std::string("a symbolic link, or a file")
                         : llvm::sys::StrError(error)) +
                    ")");
    dirFd = next;
  }
  llvm::Expected<runtime::RegularFile> file =
      runtime::RegularFile::openAt(dirFd, names.back(), path);
  ::close(dirFd);
  if (!file)
    return file.takeError();
  if (file->size() > maxBytes)
    return refuse(
        llvm::formatv("it is {0} bytes; at most {1}", file->size(), maxBytes)
            .str());
  return file->read(0, file->size());
}

ConfigJobs readConfig(llvm::StringRef text, llvm::StringRef name,
                      llvm::ArrayRef<Arch> archs, const ConfigLimits &limits,
                      const ReadFile &readFile) {
  if (archs.empty())
    return ConfigJobs{{}, {name.str() + ": no arch to build for"}};
  ConfigJobs result = name.ends_with(".mlir")
                          ? mlirJobs(text, name, archs, limits)
                          : jsonJobs(text, name, archs, limits, readFile);
  if (result.jobs.empty() && result.errors.empty())
    result.errors.push_back(name.str() + ": the config yields no kernel");
  return result;
}

} // namespace attn::aot
