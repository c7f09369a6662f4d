//===- KernelCache.h - compiled kernels, in memory and on disk --*- C++ -*-===//
//
// Turns a generated translation unit into a cubin at most once: an in-memory
// LRU map, then the AOT kernel libraries it was given (attn-aot), then a
// disk cache shared by processes, then NVRTC. Concurrent requests for one
// kernel compile it once and share the result: threads of one process wait
// on the first one's compile, and processes sharing a disk cache wait on
// each other through a lock file per kernel (below). A failed compile is not
// cached, so a later request retries.
//
// The key hashes everything that changes the binary (source, NVRTC version
// and options, arch, attn version, templates); the disk layout is
// <root>/<attn version>/<arch>/<uri>-<hash16>.cubin.
//
// What the disk cache trusts: the user who owns it, and nothing else.
//  - Directories: the cache root and the <version>/<arch> directories below
//    it must be owned by this process's effective user and writable by no
//    one else (no group or world write bit); attn creates them 0700 (and a
//    missing root's missing parents too, as for $XDG_CACHE_HOME). Each is
//    opened and checked on its descriptor (fstat); entries, temporary files
//    and locks are reached through the last one (openat, without following
//    links). Symbolic links in the configured root path are followed (the
//    user's configuration); below the root none is.
//  - Directories above the root, which attn does not own, must each be
//    owned by the user or root and not writable by others unless sticky
//    (like /tmp), so no one else can rename the root away and put another
//    in its place; group write is allowed there (per-user groups, umask
//    002), as a replaced root fails the root's own check anyway.
//  - Entries: regular files (a symbolic link is never followed), owned by
//    the user and writable by no one else; attn writes them 0600 whatever
//    the umask.
// A directory that fails these checks is not used at all: a warning (once
// per cache) names it and why, and kernels are compiled in memory, as when
// the cache cannot be written (read-only, full, missing). An entry that
// fails them is refused with a warning naming it and why, never loaded
// (Stats::refusedEntries), and replaced by the recompiled kernel.
//
// Entries are still input the process cannot trust (disk faults, crashes,
// the user's own other processes write there), so each is checked on load:
//  - An entry is a header (magic, format version, full key hash, payload
//    size, xxh3 checksum over the key hash, the arch and the payload) and
//    the cubin. A file that fails any check, including one copied or renamed
//    under another kernel's name with its header's key rewritten, is counted
//    corrupt (Stats::corruptEntries), recompiled and replaced, never trusted.
//    The checksum detects damage, not forgery (it is computed from public
//    data): the ownership rules above are what keep others' cubins out.
//  - The cubin must have a well-formed CUDA ELF header for the entry's arch
//    (checkCubinArch, InputFiles.h); getLibrary loads it only if the current
//    GPU runs that arch (checkCubinRunsOn), with an error naming the kernel
//    and both archs otherwise.
//  - Only regular files are read, and at most a header plus kMaxCubinBytes
//    (InputFiles.h): a FIFO, a device, a symbolic link or a directory at an
//    entry's path is corrupt, never blocked on or read unbounded. The
//    recompiled entry is written to a temporary file and renamed over it
//    (a rename replaces a FIFO or a link, not a directory: then the kernel
//    is served uncached).
//
// Cross-process single flight: after a disk miss, the compiling thread takes
// an exclusive flock(2) on "<entry>.lock" next to the entry (in the private
// directory, so only the user's own processes can hold it), looks at the
// disk again once it holds it (another process may have written the entry
// meanwhile), and otherwise compiles and writes the entry. It then removes
// the lock file and unlocks, whether the compile and the write succeeded or
// not. The kernel drops the lock of a process that dies, so no one waits on
// a dead holder; a live holder that hangs delays the others by at most
// Options::diskLockTimeout (kDiskLockTimeout), after which they compile
// anyway. If the lock file cannot be created (a read-only cache directory),
// the kernel is compiled without it.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_KERNELCACHE_H
#define ATTN_RUNTIME_KERNELCACHE_H

#include "attn/runtime/support/CudaHandles.h"
#include "attn/runtime/support/Nvrtc.h"
#include "spec/KernelSpec.h"

#include "llvm/Support/Error.h"

#include <chrono>
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

/// How long a process waits for another that is compiling the same kernel
/// into a shared disk cache before compiling it too: far beyond one NVRTC
/// compile (seconds), so only a hung holder is given up on.
constexpr std::chrono::seconds kDiskLockTimeout{180};

/// The bytes of a disk cache entry holding `cubin` for the 64-hex-digit key
/// hash `keyHash` on `arch` (the header described above, then `cubin`).
std::string cacheEntryBytes(llvm::StringRef keyHash, Arch arch,
                            llvm::StringRef cubin);

/// The cubin in disk cache entry `bytes`, if they are a whole, intact entry
/// written by cacheEntryBytes for `keyHash` on `arch`; none for anything
/// else. Reads no files: the entry point for fuzzing cache entries.
std::optional<llvm::StringRef>
parseCacheEntry(llvm::StringRef bytes, llvm::StringRef keyHash, Arch arch);

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
    /// How long to wait for another process compiling the same kernel into
    /// the disk cache before compiling it here too.
    std::chrono::milliseconds diskLockTimeout = kDiskLockTimeout;
    /// AOT libraries searched, in order, before the disk cache. When empty,
    /// the libraries named in $ATTN_AOT_LIBRARY (paths separated by ':')
    /// are opened; one that cannot be is skipped with a warning.
    std::vector<std::shared_ptr<const AotLibrary>> libraries;
  };

  /// Counters since construction.
  struct Stats {
    unsigned memoryHits = 0; ///< served from memory, or by another's compile
    unsigned aotHits = 0;    ///< served from an AOT library
    /// Served from the disk cache, also after waiting for another process
    /// to write the entry.
    unsigned diskHits = 0;
    unsigned compiles = 0; ///< compiler calls, failed ones included
    /// Disk files rejected on load (damaged, another key's, not a cubin
    /// for the entry's arch, not a regular file); each is recompiled.
    unsigned corruptEntries = 0;
    /// Disk files not the user's own (owned by another user, or writable by
    /// others): refused with a warning, never read, and recompiled.
    unsigned refusedEntries = 0;
  };

  /// A cache with default Options.
  KernelCache();
  explicit KernelCache(Options options);
  ~KernelCache();
  KernelCache(const KernelCache &) = delete;
  KernelCache &operator=(const KernelCache &) = delete;

  /// The cubin for `request`: from memory, else an AOT library, else disk,
  /// else the compiler (once per key, however many threads, or processes
  /// sharing the disk cache, ask).
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
  /// none if no variable is set. It must be private to the user (above).
  static std::optional<std::string> defaultDiskDir();

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace attn::runtime

#endif // ATTN_RUNTIME_KERNELCACHE_H
