//===- attn-aot.cpp - ahead-of-time kernel libraries ----------------------===//
//
//   attn-aot CONFIG --arch sm_80,sm_90a -o OUT [-j N] [--pack FILE]
//            [--max-variants N]
//
// Builds the kernel library OUT
// (runtime/include/attn/runtime/cache/AotLibrary.h) for every variant CONFIG
// lists on every arch: generated CUDA, cubin and a manifest. CONFIG is JSON
// (ranges of variants, below) or .mlir (attn ops, lowered by attn-pipeline for
// each arch), read by AotConfig.h. Variants are deduplicated by AOT key,
// compiled in parallel, and an unchanged kernel already in OUT is not
// recompiled. A kernel that fails is reported with where it came from and
// NVRTC's log; the others still finish and the exit code is 1. A config that
// yields no kernel at all builds nothing.
//
// JSON: {"decode": [ENTRY...], "prefill": [...], "append_kv": [...],
// "merge_states": [...], "cache_ops": true}. "cache_ops" adds the copy_pages
// and advance_step kernels (runtime::CacheOps), which a host without NVRTC
// needs. Each ENTRY maps field names to a value or a non-empty list of
// alternatives; an entry stands for every combination, and the config for at
// most
// --max-variants of them (10000 by default) on all archs together, counted
// before any is built. Fields (defaults as in the variant structs):
//   decode:    q_type kv_type num_q_heads num_kv_heads head_dim page_size
//              layout query_len causal cross window_left softcap alibi
//              sinks per_head_kv_scale write_lse modifiers
//   prefill:   q_type num_q_heads num_kv_heads head_dim causal cross encoder
//              window_left softcap alibi sinks write_lse modifiers paged
//              kv_type per_head_kv_scale fp8_compute (kv_type FP8 on a ragged
//              entry: FP8 k/v rows), and with "paged": true only: page_size
//              layout
//   append_kv: in_type kv_type num_kv_heads head_dim page_size layout
//              per_head_kv_scale
//   merge_states: dtype (f16, bf16 or f32) num_heads head_dim
// Types are f16, bf16, e4m3, e5m2, or "q" for the query type; counts are
// integers from 1 to 2^31 - 1; every per-head table of templates/attn/
// variant_knobs.h (alibi, sinks, fp8_query: an e4m3 q with its q_scale)
// is a boolean under its knob's name;
// window_left and softcap are booleans (their
// values are launch parameters, so one kernel serves all of them).
// "modifiers" is the path (relative to CONFIG's directory, and under it: no
// '..', no symbolic link) of a .mlir file holding one attention op, e.g.
// examples/modifiers/chunked-local.mlir:
// the variant takes its score_mod and mask_mod regions, and a host finds
// the kernel by passing the same region text (layout and comments aside;
// runtime/cache/VariantKey.h). Unknown
// fields, fields a section does not use, empty lists and duplicate keys are
// errors.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/cache/AotLibrary.h"
#include "attn/runtime/cache/KernelCache.h"
#include "attn/runtime/cache/VariantKey.h"
#include "attn/runtime/support/InputFiles.h"
#include "attn/runtime/support/Nvrtc.h"
#include "codegen/EmitCuda.h"
#include "tools/attn-aot/AotConfig.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

using namespace attn;

namespace {

llvm::cl::opt<std::string>
    configPath(llvm::cl::Positional, llvm::cl::Required,
               llvm::cl::desc("<config .json or .mlir>"));
llvm::cl::opt<std::string>
    archList("arch", llvm::cl::Required,
             llvm::cl::desc("comma-separated archs: sm_80,sm_89,sm_90a"));
llvm::cl::opt<std::string> outDir("o", llvm::cl::Required,
                                  llvm::cl::desc("output library directory"));
llvm::cl::opt<unsigned>
    jobs("j", llvm::cl::desc("parallel compiles (default: cores)"),
         llvm::cl::init(0));
llvm::cl::opt<std::string>
    packPath("pack", llvm::cl::desc("also pack the library into this file"));
llvm::cl::opt<uint64_t> maxVariants(
    "max-variants",
    llvm::cl::desc("most variants CONFIG may stand for, all archs together "
                   "(default 10000)"),
    llvm::cl::init(aot::kDefaultMaxVariants));

using aot::Job;

//===- Building
//------------------------------------------------------------===//

std::string humanBytes(uint64_t bytes) {
  if (bytes >= (1u << 20))
    return llvm::formatv("{0:F1} MiB", bytes / double(1 << 20));
  return llvm::formatv("{0:F1} KiB", bytes / 1024.0);
}

/// The attn-aot library already at `dir`, null if `dir` is new or empty; an
/// error for anything else, so that attn-aot never overwrites or deletes
/// files it did not write.
llvm::Expected<std::shared_ptr<const runtime::AotLibrary>>
previousLibrary(llvm::StringRef dir) {
  const char *advice = "; attn-aot builds only into a new or empty directory "
                       "or a library it wrote: remove it or pick another -o";
  if (dir.empty())
    return llvm::createStringError("-o is empty: name the library directory "
                                   "to build");
  llvm::sys::fs::file_status status;
  if (std::error_code error = llvm::sys::fs::status(dir, status)) {
    if (error == std::errc::no_such_file_or_directory)
      return nullptr;
    return llvm::createStringError("cannot examine -o '" + dir.str() +
                                   "': " + error.message());
  }
  if (!llvm::sys::fs::is_directory(status))
    return llvm::createStringError("-o '" + dir.str() +
                                   "' exists and is not a directory");
  llvm::SmallString<256> manifest(dir);
  llvm::sys::path::append(manifest, "manifest.json");
  if (!llvm::sys::fs::status(manifest, status, /*follow=*/false)) {
    auto library = runtime::AotLibrary::open(dir);
    if (!library)
      return llvm::createStringError(
          "'" + manifest.str().str() +
          "' is not a valid attn-aot library manifest (" +
          llvm::toString(library.takeError()) + ")" + advice);
    return std::move(*library);
  }
  std::error_code error;
  llvm::sys::fs::directory_iterator it(dir, error);
  if (error)
    return llvm::createStringError("cannot list -o '" + dir.str() +
                                   "': " + error.message());
  if (it != llvm::sys::fs::directory_iterator())
    return llvm::createStringError("-o '" + dir.str() +
                                   "' is not empty and holds no attn-aot "
                                   "manifest" +
                                   std::string(advice));
  return nullptr;
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
  // Checked before anything is read or built.
  auto previous = previousLibrary(outDir);
  if (!previous) {
    llvm::errs() << "attn-aot: " << llvm::toString(previous.takeError())
                 << "\n";
    return 2;
  }
  std::shared_ptr<const runtime::AotLibrary> old = std::move(*previous);

  // Configs are a few KiB written by hand or a script; 16 MiB is room for
  // any script and still a bound on memory.
  constexpr uint64_t kMaxConfigBytes = uint64_t(16) << 20;
  llvm::Expected<std::string> text =
      runtime::readRegularFile(configPath, kMaxConfigBytes);
  if (!text) {
    llvm::errs() << "attn-aot: cannot read the config: "
                 << llvm::toString(text.takeError()) << "\n";
    return 2;
  }
  // A "modifiers" file lies under the config's directory.
  auto readModifiers = [](llvm::StringRef path) -> llvm::Expected<std::string> {
    constexpr uint64_t kMaxModifierBytes = uint64_t(1) << 20;
    return aot::readFileUnderConfig(configPath.getValue(), path,
                                    kMaxModifierBytes);
  };
  aot::ConfigJobs config = aot::readConfig(
      *text, configPath, archs, aot::ConfigLimits{maxVariants}, readModifiers);
  std::vector<std::string> &errors = config.errors;
  std::vector<Job> &all = config.jobs;
  if (all.empty()) {
    // Nothing to build: OUT is left as it was.
    for (const std::string &error : errors)
      llvm::errs() << "attn-aot: error: " << error << "\n";
    return 1;
  }

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
    runtime::CompileRequest request{job.spec.uri(), emitCuda(job.spec),
                                    job.spec.arch};
    std::string key = runtime::aotKey(request).hash;
    auto [it, added] = unitOf.try_emplace(key, units.size());
    if (added)
      units.push_back({job, std::move(request), key, {}});
    std::vector<std::string> &keys = units[it->second].kernelKeys;
    if (!job.kernelKey.empty() && !llvm::is_contained(keys, job.kernelKey))
      keys.push_back(job.kernelKey);
  }

  // What OUT already holds (incremental builds).
  std::map<std::string, runtime::AotKernel> previousKernels;
  if (old)
    for (const runtime::AotKernel &k : old->kernels())
      previousKernels.emplace(k.key, k);
  for (Arch arch : archs)
    if (std::error_code error = llvm::sys::fs::create_directories(
            outDir + "/" + std::string(toString(arch)))) {
      llvm::errs() << "attn-aot: cannot create " << outDir << ": "
                   << error.message() << "\n";
      return 2;
    }
  // A new library is claimed with an empty manifest first, so a run cut
  // short leaves a directory later runs accept as theirs.
  if (!old)
    if (llvm::Error error = runtime::writeManifest(outDir, {})) {
      llvm::errs() << "attn-aot: " << llvm::toString(std::move(error)) << "\n";
      return 2;
    }
  if (!packPath.empty())
    if (llvm::Error error = runtime::checkPackTarget(outDir, packPath)) {
      llvm::errs() << "attn-aot: " << llvm::toString(std::move(error)) << "\n";
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
      auto it = previousKernels.find(u.key);
      bool upToDate = false;
      if (it != previousKernels.end()) {
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
        llvm::Error written =
            cubin
                ? runtime::writeKernelFiles(outDir, k, u.request.source, *cubin)
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
  unsigned threads =
      jobs ? unsigned(jobs) : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned t = 0;
       t < std::min<size_t>(threads, std::max<size_t>(units.size(), 1)); ++t)
    pool.emplace_back(work);
  for (std::thread &t : pool)
    t.join();
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
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
  // Files the previous manifest listed and this one does not go, so OUT is
  // what it lists; nothing else in OUT is touched (the manifest reader
  // insists on the library's own file names, so these lie inside OUT).
  if (old) {
    std::set<std::string> listed;
    for (const auto &k : kernels) {
      listed.insert(k.source);
      listed.insert(k.cubin);
    }
    for (const runtime::AotKernel &k : old->kernels())
      for (const std::string &file : {k.source, k.cubin})
        if (!listed.count(file))
          llvm::sys::fs::remove(outDir + "/" + file);
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
    llvm::outs() << llvm::formatv(
        "  {0,-7} {1,5} kernels {2,12}  ({3} per kernel)\n", toString(arch),
        stats.first, humanBytes(stats.second),
        humanBytes(stats.second / std::max<size_t>(stats.first, 1)));
  llvm::outs() << llvm::formatv("  total   {0,5} kernels {1,12}\n",
                                kernels.size(), humanBytes(total));
  if (compiled)
    llvm::outs() << llvm::formatv(
        "  {0:F1} variants per minute ({1:F2} s of NVRTC each)\n",
        compiled * 60.0 / seconds,
        (compileSeconds) / std::max<size_t>(kernels.size(), 1));

  if (!packPath.empty()) {
    if (llvm::Error error = runtime::packLibrary(outDir, packPath)) {
      llvm::errs() << "attn-aot: " << llvm::toString(std::move(error)) << "\n";
      return 2;
    }
    uint64_t size = 0;
    llvm::sys::fs::file_size(packPath, size);
    llvm::outs() << "  packed into " << packPath << " (" << humanBytes(size)
                 << ")\n";
  }

  for (const std::string &failure : failures)
    if (!failure.empty())
      errors.push_back(failure);
  for (const std::string &error : errors)
    llvm::errs() << "attn-aot: error: " << error << "\n";
  if (!errors.empty())
    llvm::errs() << "attn-aot: " << errors.size()
                 << " problem(s); the library holds the " << kernels.size()
                 << " kernels that built\n";
  return errors.empty() ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::cl::ParseCommandLineOptions(
      argc, argv, "attn-aot: ahead-of-time attn kernel libraries\n");
  return run();
}
