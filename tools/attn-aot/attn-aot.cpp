//===- attn-aot.cpp - ahead-of-time kernel libraries ----------------------===//
//
//   attn-aot CONFIG --arch sm_80,sm_90a -o OUT [-j N] [--pack FILE]
//
// Builds the kernel library OUT (runtime/include/attn/runtime/AotLibrary.h)
// for every variant CONFIG lists on every arch: generated CUDA, cubin and a
// manifest. CONFIG is JSON (ranges of variants, below) or .mlir (attn ops,
// lowered by attn-pipeline for each arch). Variants are deduplicated by AOT
// key, compiled in parallel, and an unchanged kernel already in OUT is not
// recompiled. A kernel that fails is reported with where it came from and
// NVRTC's log; the others still finish and the exit code is 1.
//
// JSON: {"decode": [ENTRY...], "prefill": [...], "append_kv": [...],
// "cache_ops": true}. "cache_ops" adds the copy_blocks and advance_step
// kernels (runtime::CacheOps), which a host without NVRTC needs. Each
// ENTRY maps field names to a value or a list of alternatives; an entry
// stands for every combination. Fields (defaults as in the variant structs):
//   decode:    q_type kv_type num_q_heads num_kv_heads head_dim page_size
//              layout query_len causal cross window softcap alibi
//              per_head_scale lse
//   prefill:   q_type num_q_heads num_kv_heads head_dim causal cross encoder
//              window softcap alibi lse paged kv_type page_size layout
//              per_head_scale
//   append_kv: in_type kv_type num_kv_heads head_dim page_size layout
//              per_head_scale
// Types are f16, bf16, e4m3, e5m2, or "q" for the query type; window and
// softcap are booleans (their values are launch parameters, so one kernel
// serves all of them).
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/AotLibrary.h"
#include "attn/runtime/CacheOps.h"
#include "attn/runtime/InputFiles.h"
#include "attn/runtime/KernelCache.h"
#include "attn/runtime/Nvrtc.h"
#include "attn/runtime/VariantKey.h"
#include "codegen/EmitCuda.h"
#include "compiler/Frontend/Frontend.h"
#include "dialect/IR/AttnOps.h"
#include "tools/RegisterAttn.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

using namespace attn;
namespace json = llvm::json;

namespace {

llvm::cl::opt<std::string> configPath(llvm::cl::Positional, llvm::cl::Required,
                                      llvm::cl::desc("<config .json or .mlir>"));
llvm::cl::opt<std::string> archList("arch", llvm::cl::Required,
                                    llvm::cl::desc("comma-separated archs: sm_80,sm_89,sm_90a"));
llvm::cl::opt<std::string> outDir("o", llvm::cl::Required,
                                  llvm::cl::desc("output library directory"));
llvm::cl::opt<unsigned> jobs("j", llvm::cl::desc("parallel compiles (default: cores)"),
                             llvm::cl::init(0));
llvm::cl::opt<std::string> packPath("pack",
                                    llvm::cl::desc("also pack the library into this file"));

/// One kernel to build: its spec and where in CONFIG it came from.
struct Job {
  KernelSpec spec;
  std::string kernelKey; ///< empty for .mlir configs
  std::string origin;    ///< for messages: "CONFIG: decode[0] {...}" or a location
};

//===- JSON configs --------------------------------------------------------===//

/// The combinations of an entry: one map of field -> value per combination.
std::vector<std::map<std::string, json::Value>> expand(const json::Object &entry) {
  std::vector<std::map<std::string, json::Value>> combos(1);
  std::vector<std::string> names;
  for (const auto &kv : entry)
    names.push_back(kv.first.str());
  std::sort(names.begin(), names.end()); // a stable order for messages
  for (const std::string &name : names) {
    const json::Value &value = *entry.get(name);
    std::vector<json::Value> options;
    if (const json::Array *list = value.getAsArray())
      options.assign(list->begin(), list->end());
    else
      options.push_back(value);
    std::vector<std::map<std::string, json::Value>> next;
    for (const auto &combo : combos)
      for (const json::Value &option : options) {
        auto extended = combo;
        extended.emplace(name, option);
        next.push_back(std::move(extended));
      }
    combos = std::move(next);
  }
  return combos;
}

std::string describe(const std::map<std::string, json::Value> &combo) {
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

/// Reads the fields of one combination into a variant; the first problem
/// wins.
class ComboReader {
public:
  explicit ComboReader(const std::map<std::string, json::Value> &combo)
      : combo(combo) {}
  std::string problem;

  template <class T> void integer(const char *name, T &out) {
    if (const json::Value *v = take(name)) {
      if (auto i = v->getAsInteger())
        out = T(*i);
      else
        fail(std::string("\"") + name + "\" must be an integer");
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
  template <class T> void present(const char *name, std::optional<T> &out, T placeholder) {
    bool on = false;
    boolean(name, on);
    if (on)
      out = placeholder;
  }
  void type(const char *name, ScalarType &out, std::optional<ScalarType> q = {}) {
    if (const json::Value *v = take(name)) {
      auto text = v->getAsString();
      std::optional<ScalarType> parsed =
          text && *text == "q" && q ? q : text ? parseScalarType(*text) : std::nullopt;
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
      std::optional<KVLayout> parsed = text ? parseKVLayout(*text) : std::nullopt;
      if (parsed)
        out = *parsed;
      else
        fail(std::string("\"") + name + "\" must be nhd or hnd");
    }
  }
  /// Fields nobody read are typos: an error, not silently ignored.
  void finish() {
    for (const auto &[name, value] : combo)
      if (!used.count(name))
        fail("unknown field \"" + name + "\"");
  }

private:
  const json::Value *take(const char *name) {
    used.insert(name);
    auto it = combo.find(name);
    return it == combo.end() ? nullptr : &it->second;
  }
  void fail(const std::string &message) {
    if (problem.empty())
      problem = message;
  }
  const std::map<std::string, json::Value> &combo;
  std::set<std::string> used;
};

DecodeVariant readDecode(ComboReader &r) {
  DecodeVariant v;
  r.type("q_type", v.qType);
  r.type("kv_type", v.kvType, v.qType);
  r.integer("num_q_heads", v.numQHeads);
  r.integer("num_kv_heads", v.numKVHeads);
  r.integer("head_dim", v.headDim);
  r.integer("page_size", v.pageSize);
  r.layout("layout", v.layout);
  r.integer("query_len", v.queryLen);
  r.boolean("causal", v.causal);
  r.boolean("cross", v.crossAttention);
  r.present("window", v.windowLeft, 1);
  r.present("softcap", v.softcap, 1.f);
  r.boolean("alibi", v.alibi);
  r.boolean("per_head_scale", v.perHeadKVScale);
  r.boolean("lse", v.writeLse);
  return v;
}

PrefillVariant readPrefill(ComboReader &r) {
  PrefillVariant v;
  r.type("q_type", v.qType);
  r.integer("num_q_heads", v.numQHeads);
  r.integer("num_kv_heads", v.numKVHeads);
  r.integer("head_dim", v.headDim);
  r.boolean("causal", v.causal);
  r.boolean("cross", v.crossAttention);
  r.boolean("encoder", v.encoder);
  r.present("window", v.windowLeft, 1);
  r.present("softcap", v.softcap, 1.f);
  r.boolean("alibi", v.alibi);
  r.boolean("lse", v.writeLse);
  bool paged = false;
  r.boolean("paged", paged);
  PagedKVFormat format;
  format.kvType = v.qType;
  r.type("kv_type", format.kvType, v.qType);
  r.integer("page_size", format.pageSize);
  r.layout("layout", format.layout);
  r.boolean("per_head_scale", format.perHeadKVScale);
  if (paged)
    v.paged = format;
  return v;
}

AppendKVVariant readAppendKV(ComboReader &r) {
  AppendKVVariant v;
  r.type("in_type", v.inType);
  r.type("kv_type", v.kvType, v.inType);
  r.integer("num_kv_heads", v.numKVHeads);
  r.integer("head_dim", v.headDim);
  r.integer("page_size", v.pageSize);
  r.layout("layout", v.layout);
  r.boolean("per_head_scale", v.perHeadKVScale);
  return v;
}

/// The jobs of a JSON config; every problem goes to `errors`.
std::vector<Job> jsonJobs(llvm::StringRef text, llvm::ArrayRef<Arch> archs,
                          std::vector<std::string> &errors) {
  std::vector<Job> jobs;
  llvm::Expected<json::Value> root = runtime::parseJson(text, configPath);
  if (!root) {
    errors.push_back(llvm::toString(root.takeError()));
    return jobs;
  }
  const json::Object *object = root->getAsObject();
  if (!object) {
    errors.push_back(configPath + ": the config must be a JSON object");
    return jobs;
  }
  for (const auto &kv : *object) {
    llvm::StringRef kind = kv.first;
    if (kind == "cache_ops") {
      std::optional<bool> wanted = kv.second.getAsBoolean();
      if (!wanted)
        errors.push_back(configPath + ": \"cache_ops\" must be true or false");
      else if (*wanted)
        for (Arch arch : archs)
          for (const KernelSpec &spec : runtime::CacheOps::specs(arch))
            jobs.push_back({spec, "", configPath + ": cache_ops"});
      continue;
    }
    if (kind != "decode" && kind != "prefill" && kind != "append_kv") {
      errors.push_back(configPath + ": unknown section \"" + kind.str() +
                       "\" (expected decode, prefill, append_kv, cache_ops)");
      continue;
    }
    const json::Array *entries = kv.second.getAsArray();
    if (!entries) {
      errors.push_back(configPath + ": \"" + kind.str() + "\" must be a list");
      continue;
    }
    for (size_t i = 0; i < entries->size(); ++i) {
      std::string where = llvm::formatv("{0}: {1}[{2}]", configPath, kind, i);
      const json::Object *entry = (*entries)[i].getAsObject();
      if (!entry) {
        errors.push_back(where + ": must be an object");
        continue;
      }
      for (const auto &combo : expand(*entry)) {
        std::string origin = where + " " + describe(combo);
        ComboReader reader(combo);
        for (Arch arch : archs) {
          llvm::Expected<KernelSpec> spec = llvm::createStringError("unset");
          std::string key;
          if (kind == "decode") {
            DecodeVariant v = readDecode(reader);
            key = runtime::kernelKey(v);
            reader.finish();
            spec = mlir::attn::compileDecodeVariant(v, arch);
          } else if (kind == "prefill") {
            PrefillVariant v = readPrefill(reader);
            key = runtime::kernelKey(v);
            reader.finish();
            spec = mlir::attn::compilePrefillVariant(v, arch);
          } else {
            AppendKVVariant v = readAppendKV(reader);
            key = runtime::kernelKey(v);
            reader.finish();
            spec = mlir::attn::compileAppendKVVariant(v, arch);
          }
          if (!reader.problem.empty()) {
            llvm::consumeError(spec.takeError());
            errors.push_back(origin + ": " + reader.problem);
            break; // the same problem on every arch
          }
          if (!spec) {
            errors.push_back(origin + " on " + std::string(toString(arch)) +
                             ": " + llvm::toString(spec.takeError()));
            continue;
          }
          jobs.push_back({*spec, key, origin});
        }
      }
    }
  }
  return jobs;
}

//===- .mlir configs -------------------------------------------------------===//

std::vector<Job> mlirJobs(llvm::StringRef text, llvm::ArrayRef<Arch> archs,
                          std::vector<std::string> &errors) {
  std::vector<Job> jobs;
  for (Arch arch : archs) {
    mlir::DialectRegistry registry;
    mlir::attn::registerAttnDialects(registry);
    mlir::MLIRContext context(registry);
    llvm::SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, configPath),
                                 llvm::SMLoc());
    std::string diagnostics;
    llvm::raw_string_ostream diagOs(diagnostics);
    mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context, diagOs);
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
    if (!module) {
      errors.push_back(diagnostics);
      return jobs;
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
    auto specs = mlir::attn::lowerToKernelSpecs(*module, arch);
    if (!specs) {
      errors.push_back(configPath + " on " + std::string(toString(arch)) + ": " +
                       llvm::toString(specs.takeError()) + diagnostics);
      continue;
    }
    for (size_t i = 0; i < specs->size(); ++i)
      jobs.push_back({(*specs)[i], "",
                      i < origins.size() && origins.size() == specs->size()
                          ? origins[i]
                          : configPath});
  }
  return jobs;
}

//===- Building ------------------------------------------------------------===//

std::string humanBytes(uint64_t bytes) {
  if (bytes >= (1u << 20))
    return llvm::formatv("{0:F1} MiB", bytes / double(1 << 20));
  return llvm::formatv("{0:F1} KiB", bytes / 1024.0);
}

int run() {
  std::vector<Arch> archs;
  llvm::SmallVector<llvm::StringRef, 4> names;
  llvm::StringRef(archList).split(names, ',', -1, false);
  for (llvm::StringRef name : names) {
    std::optional<Arch> arch = parseArch(name.trim().str());
    if (!arch) {
      llvm::errs() << "attn-aot: unknown arch '" << name
                   << "' (expected sm_80, sm_89, sm_90a)\n";
      return 2;
    }
    archs.push_back(*arch);
  }
  // A config is written by hand or a script: tens of KiB at most.
  constexpr uint64_t kMaxConfigBytes = uint64_t(16) << 20;
  llvm::Expected<std::string> text = runtime::readRegularFile(configPath, kMaxConfigBytes);
  if (!text) {
    llvm::errs() << "attn-aot: cannot read the config: "
                 << llvm::toString(text.takeError()) << "\n";
    return 2;
  }
  std::vector<std::string> errors;
  std::vector<Job> all = llvm::StringRef(configPath).ends_with(".mlir")
                             ? mlirJobs(*text, archs, errors)
                             : jsonJobs(*text, archs, errors);

  // One job per AOT key: equal specs make equal sources.
  // Variants that make the same kernel share it, under all their keys.
  struct Unit {
    Job job;
    runtime::CompileRequest request;
    std::string key;
    std::vector<std::string> kernelKeys;
  };
  std::vector<Unit> units;
  std::map<std::string, size_t> unitOf;
  for (Job &job : all) {
    runtime::CompileRequest request{job.spec.uri(), emitCuda(job.spec), job.spec.arch};
    std::string key = runtime::aotKey(request).hash;
    auto [it, added] = unitOf.try_emplace(key, units.size());
    if (added)
      units.push_back({job, std::move(request), key, {}});
    std::vector<std::string> &keys = units[it->second].kernelKeys;
    if (!job.kernelKey.empty() && !llvm::is_contained(keys, job.kernelKey))
      keys.push_back(job.kernelKey);
  }

  // What OUT already holds (incremental builds).
  std::map<std::string, runtime::AotKernel> previous;
  std::shared_ptr<const runtime::AotLibrary> old;
  if (llvm::sys::fs::exists(outDir + "/manifest.json")) {
    auto opened = runtime::AotLibrary::open(outDir);
    if (opened) {
      old = *opened;
      for (const runtime::AotKernel &k : old->kernels())
        previous.emplace(k.key, k);
    } else {
      llvm::consumeError(opened.takeError()); // rebuilt from scratch
    }
  }
  for (Arch arch : archs)
    if (std::error_code error =
            llvm::sys::fs::create_directories(outDir + "/" + std::string(toString(arch)))) {
      llvm::errs() << "attn-aot: cannot create " << outDir << ": " << error.message() << "\n";
      return 2;
    }

  std::vector<std::optional<runtime::AotKernel>> built(units.size());
  std::vector<std::string> failures(units.size());
  std::atomic<size_t> next{0}, done{0}, reused{0};
  std::mutex printMutex;
  const bool terminal = llvm::sys::Process::StandardErrIsDisplayed();
  auto work = [&] {
    for (size_t i; (i = next++) < units.size();) {
      Unit &u = units[i];
      runtime::AotKernel k;
      k.key = u.key;
      k.name = u.request.uri;
      k.kernelKeys = u.kernelKeys;
      k.spec = u.job.spec;
      std::string arch(toString(u.job.spec.arch));
      // An unchanged kernel whose cubin is still intact is kept.
      auto it = previous.find(u.key);
      bool upToDate = false;
      if (it != previous.end()) {
        llvm::Expected<std::string> existing = old->readCubin(it->second);
        upToDate = bool(existing);
        if (!existing)
          llvm::consumeError(existing.takeError());
      }
      if (upToDate) {
        k = it->second;
        k.kernelKeys = u.kernelKeys;
        ++reused;
      } else {
        auto start = std::chrono::steady_clock::now();
        llvm::Expected<std::string> cubin =
            runtime::compileToCubin(u.request.source, k.name, u.job.spec.arch);
        k.compileSeconds = std::chrono::duration<double>(
                               std::chrono::steady_clock::now() - start)
                               .count();
        llvm::Error written = cubin ? runtime::writeKernelFiles(outDir, k, u.request.source,
                                                                *cubin)
                                    : llvm::Error::success();
        if (!cubin || written) {
          failures[i] = u.job.origin + " (" + k.name + ", " + arch + "): " +
                        (cubin ? llvm::toString(std::move(written))
                               : llvm::toString(cubin.takeError()));
          llvm::consumeError(std::move(written));
          ++done;
          continue;
        }
      }
      built[i] = std::move(k);
      size_t count = ++done;
      if (terminal) {
        std::lock_guard<std::mutex> lock(printMutex);
        llvm::errs() << llvm::formatv("\r[{0}/{1}] {2}", count, units.size(),
                                      units[i].request.uri)
                     << "\x1b[K";
      }
    }
  };
  auto start = std::chrono::steady_clock::now();
  unsigned threads = jobs ? unsigned(jobs) : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < std::min<size_t>(threads, std::max<size_t>(units.size(), 1)); ++t)
    pool.emplace_back(work);
  for (std::thread &t : pool)
    t.join();
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (terminal)
    llvm::errs() << "\r\x1b[K";

  std::vector<runtime::AotKernel> kernels;
  for (auto &k : built)
    if (k)
      kernels.push_back(*k);
  if (llvm::Error error = runtime::writeManifest(outDir, kernels)) {
    llvm::errs() << "attn-aot: " << llvm::toString(std::move(error)) << "\n";
    return 2;
  }
  // Files of kernels no longer in the library go, so OUT is what it lists.
  std::set<std::string> listed;
  for (const auto &k : kernels) {
    listed.insert(k.source);
    listed.insert(k.cubin);
  }
  for (Arch arch : {Arch::SM80, Arch::SM89, Arch::SM90a}) {
    std::string dir = outDir + "/" + std::string(toString(arch));
    std::error_code error;
    for (llvm::sys::fs::directory_iterator it(dir, error), end; it != end && !error;
         it.increment(error)) {
      llvm::StringRef file = llvm::sys::path::filename(it->path());
      std::string relative = std::string(toString(arch)) + "/" + file.str();
      if ((file.ends_with(".cu") || file.ends_with(".cubin")) && !listed.count(relative))
        llvm::sys::fs::remove(it->path());
    }
  }

  // The report: per arch, then totals.
  std::map<Arch, std::pair<size_t, uint64_t>> perArch;
  uint64_t total = 0;
  double compileSeconds = 0;
  for (const auto &k : kernels) {
    perArch[k.spec.arch].first++;
    perArch[k.spec.arch].second += k.size;
    total += k.size;
    compileSeconds += k.compileSeconds;
  }
  size_t compiled = kernels.size() - reused;
  llvm::outs() << llvm::formatv(
      "attn-aot: {0} kernels in {1} ({2} compiled, {3} up to date) in {4:F1} s "
      "on {5} threads\n",
      kernels.size(), outDir, compiled, reused.load(), seconds, threads);
  for (const auto &[arch, stats] : perArch)
    llvm::outs() << llvm::formatv("  {0,-7} {1,5} kernels {2,12}  ({3} per kernel)\n",
                                  toString(arch), stats.first, humanBytes(stats.second),
                                  humanBytes(stats.second / std::max<size_t>(stats.first, 1)));
  llvm::outs() << llvm::formatv("  total   {0,5} kernels {1,12}\n", kernels.size(),
                                humanBytes(total));
  if (compiled)
    llvm::outs() << llvm::formatv("  {0:F1} variants per minute ({1:F2} s of NVRTC each)\n",
                                  compiled * 60.0 / seconds,
                                  (compileSeconds) / std::max<size_t>(kernels.size(), 1));

  if (!packPath.empty()) {
    if (llvm::Error error = runtime::packLibrary(outDir, packPath)) {
      llvm::errs() << "attn-aot: " << llvm::toString(std::move(error)) << "\n";
      return 2;
    }
    uint64_t size = 0;
    llvm::sys::fs::file_size(packPath, size);
    llvm::outs() << "  packed into " << packPath << " (" << humanBytes(size) << ")\n";
  }

  for (const std::string &failure : failures)
    if (!failure.empty())
      errors.push_back(failure);
  for (const std::string &error : errors)
    llvm::errs() << "attn-aot: error: " << error << "\n";
  if (!errors.empty())
    llvm::errs() << "attn-aot: " << errors.size() << " problem(s); the library holds the "
                 << kernels.size() << " kernels that built\n";
  return errors.empty() ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::cl::ParseCommandLineOptions(argc, argv,
                                    "attn-aot: ahead-of-time attn kernel libraries\n");
  return run();
}
