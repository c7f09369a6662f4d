//===- KernelCache.h - compiled kernels, in memory and on disk --*- C++ -*-===//
//
// Turns a generated translation unit into a cubin at most once: an in-memory
// LRU map, then the AOT kernel libraries it was given (attn-aot), then a
// disk cache shared by processes, then NVRTC. Concurrent requests for one
// kernel compile it once and share the result. A failed compile is not
// cached, so a later request retries.
//
// The key hashes everything that changes the binary (source, NVRTC version
// and options, arch, attn version, templates); the disk layout is
// <root>/<attn version>/<arch>/<uri>-<hash16>.cubin, each file checked on
// load so a corrupt one is recompiled, never trusted.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_KERNELCACHE_H
#define ATTN_RUNTIME_KERNELCACHE_H

#include "attn/runtime/CudaHandles.h"
#include "attn/runtime/Nvrtc.h"
#include "codegen/KernelSpec.h"

#include "llvm/Support/Error.h"

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace attn::runtime {

/// One kernel to compile.
struct CompileRequest {
  /// Readable name of the variant (KernelSpec::uri()): letters, digits and
  /// '_'. Names the cache file; the kernel symbol is "attn_" + uri.
  std::string uri;
  std::string source; ///< the CUDA translation unit (codegen::emitCuda)
  Arch arch = Arch::SM90a;
};

/// Identity of a compiled kernel.
struct CacheKey {
  std::string uri;
  /// SHA-256 (hex) over the URI, source, NVRTC version and options, arch,
  /// attn version and templates hash.
  std::string hash;

  /// "<uri>-<first 16 hex digits of hash>.cubin".
  std::string fileName() const;
};

/// The key an AOT library files `request`'s cubin under: the cache key's
/// fields without the NVRTC version, so a library built once serves hosts
/// with any NVRTC, or none.
CacheKey aotKey(const CompileRequest &request, const NvrtcOptions &nvrtc = {});

class AotLibrary;

/// Turns a request into a cubin (NVRTC by default; tests inject others).
using CubinCompiler =
    std::function<llvm::Expected<std::string>(const CompileRequest &)>;

/// The kernel cache. Thread-safe.
class KernelCache {
public:
  struct Options {
    /// Root of the disk cache; defaultDiskDir() when unset.
    std::optional<std::string> diskDir;
    /// Whether to use the disk cache at all. ATTN_CACHE_DISABLE=1 in the
    /// environment also turns it off.
    bool useDisk = true;
    /// Cubins kept in memory; the least recently used go first.
    size_t maxEntries = 1024;
    /// Options for the default compiler; part of the key.
    NvrtcOptions nvrtc;
    /// compileToCubin(source, uri, arch, nvrtc) when empty.
    CubinCompiler compiler;
    /// AOT libraries searched, in order, before the disk cache. When empty,
    /// the libraries named in $ATTN_AOT_LIBRARY (paths separated by ':')
    /// are opened; one that cannot be is skipped with a warning.
    std::vector<std::shared_ptr<const AotLibrary>> libraries;
  };

  /// Counters since construction.
  struct Stats {
    unsigned memoryHits = 0; ///< served from memory, or by another's compile
    unsigned aotHits = 0; ///< served from an AOT library
    unsigned diskHits = 0;
    unsigned compiles = 0;       ///< compiler calls, failed ones included
    unsigned corruptEntries = 0; ///< disk files rejected on load
  };

  /// A cache with default Options.
  KernelCache();
  explicit KernelCache(Options options);
  ~KernelCache();
  KernelCache(const KernelCache &) = delete;
  KernelCache &operator=(const KernelCache &) = delete;

  /// The cubin for `request`: from memory, else disk, else the compiler
  /// (once per key, however many threads ask).
  llvm::Expected<std::shared_ptr<const std::string>>
  getCubin(const CompileRequest &request);

  /// The cubin for `request` loaded as a library (needs a GPU); one load per
  /// key while the key stays in memory. Hold the pointer as long as kernels
  /// from it are used.
  llvm::Expected<std::shared_ptr<CudaLibrary>>
  getLibrary(const CompileRequest &request);

  CacheKey keyFor(const CompileRequest &request) const;

  /// Where `request`'s cubin lives on disk; none when the disk cache is off.
  std::optional<std::string> diskPath(const CompileRequest &request) const;

  Stats stats() const;

  /// The process-wide cache with default options.
  static KernelCache &global();

  /// $ATTN_CACHE_DIR, else $XDG_CACHE_HOME/attn, else $HOME/.cache/attn;
  /// none if no variable is set.
  static std::optional<std::string> defaultDiskDir();

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace attn::runtime

#endif // ATTN_RUNTIME_KERNELCACHE_H
