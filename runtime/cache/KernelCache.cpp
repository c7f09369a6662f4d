//===- KernelCache.cpp - compiled kernels, in memory and on disk ----------===//
//
// Single flight in the process: the first thread to miss a key becomes its
// leader and loads or compiles it outside the lock; later threads for the
// same key wait on the leader's Flight and share its result, error included.
//
// Single flight across processes: a leader that misses the disk takes an
// flock on "<entry>.lock" before compiling, and looks at the disk again once
// it has it, so processes that start cold together compile each kernel
// once. The kernel drops the flock of a process that dies; a holder that
// hangs only delays the others by the lock timeout, after which they compile
// anyway. Without a lock file (read-only cache) the leader just compiles.
//
// Disk files are written to a unique temporary name in the target directory
// and renamed into place, so readers see either no file or a whole one. Each
// file starts with a header (magic, format version, full key hash, payload
// size, checksum over key hash, arch and payload); a file that disagrees with
// its header, its key or its arch, or is no regular file at all, is counted
// corrupt and replaced by the recompiled cubin.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/cache/KernelCache.h"

#include "attn/runtime/cache/AotLibrary.h"
#include "attn/runtime/support/Error.h"
#include "attn/runtime/support/InputFiles.h"
#include "templates/EmbeddedTemplates.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <atomic>
#include <cassert>
#include <cerrno>
#include <condition_variable>
#include <list>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace attn::runtime {
namespace {

//===- Disk format --------------------------------------------------------===//

constexpr char kMagic[8] = {'A', 'T', 'T', 'N', 'C', 'U', 'B', 'N'};
// 2: the checksum covers the key hash and the arch, not the payload alone.
constexpr uint32_t kFormatVersion = 2;
constexpr size_t kKeyHashSize = 64; // SHA-256 in hex
// magic | u32 format version | key hash | u64 payload size | u64 checksum,
// integers little-endian.
constexpr size_t kHeaderSize = sizeof(kMagic) + 4 + kKeyHashSize + 8 + 8;

/// Binds the payload to its key and arch: an entry copied or renamed under
/// another kernel's name, even with the key in its header rewritten, fails
/// the check. Hashing the payload's hash keeps the payload from being copied.
uint64_t entryChecksum(llvm::StringRef keyHash, Arch arch,
                       llvm::StringRef payload) {
  std::string bound = keyHash.str();
  bound += '\0';
  bound += toString(arch);
  bound += '\0';
  uint8_t payloadHash[8];
  llvm::support::endian::write64le(payloadHash, llvm::xxh3_64bits(payload));
  bound.append(reinterpret_cast<const char *>(payloadHash), 8);
  return llvm::xxh3_64bits(bound);
}

/// The header of an entry; `keyHash` is kKeyHashSize long (anything longer
/// is cut, shorter padded with zeros, so no input writes out of bounds).
std::string fileHeader(llvm::StringRef keyHash, Arch arch,
                       llvm::StringRef payload) {
  std::string header(kHeaderSize, '\0');
  char *out = header.data();
  std::copy(std::begin(kMagic), std::end(kMagic), out);
  out += sizeof(kMagic);
  llvm::support::endian::write32le(out, kFormatVersion);
  out += 4;
  llvm::StringRef key = keyHash.take_front(kKeyHashSize);
  std::copy(key.begin(), key.end(), out);
  out += kKeyHashSize;
  llvm::support::endian::write64le(out, payload.size());
  out += 8;
  llvm::support::endian::write64le(out, entryChecksum(keyHash, arch, payload));
  return header;
}

enum class DiskLookup { Missing, Corrupt, Found };

DiskLookup readCacheFile(const std::string &path, llvm::StringRef keyHash,
                         Arch arch, std::string &cubin) {
  // Nothing there at all (lstat: a dangling link is something).
  llvm::sys::fs::file_status status;
  if (llvm::sys::fs::status(path, status, /*follow=*/false))
    return DiskLookup::Missing;
  // Anything else that is not an intact entry (a FIFO, a device, a
  // directory, an unreadable or oversized file) is corrupt: never blocked on
  // or read unbounded, and replaced by the recompiled cubin where a rename
  // can replace it.
  llvm::Expected<std::string> bytes =
      readRegularFile(path, kHeaderSize + kMaxCubinBytes);
  if (!bytes) {
    llvm::consumeError(bytes.takeError());
    return DiskLookup::Corrupt;
  }
  std::optional<llvm::StringRef> payload =
      parseCacheEntry(*bytes, keyHash, arch);
  if (!payload)
    return DiskLookup::Corrupt;
  cubin = payload->str();
  return DiskLookup::Found;
}

llvm::Error writeCacheFile(const std::string &path, llvm::StringRef keyHash,
                           Arch arch, llvm::StringRef cubin) {
  llvm::StringRef dir = llvm::sys::path::parent_path(path);
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return llvm::createStringError(ec, "cannot create %s: %s",
                                   dir.str().c_str(), ec.message().c_str());
  // Same directory as the target, so the rename is atomic; the random part
  // keeps concurrent writers (threads or processes) apart.
  int fd = -1;
  llvm::SmallString<256> tempPath;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueFile(path + ".tmp-%%%%%%%%", fd, tempPath))
    return llvm::createStringError(ec, "cannot create a file in %s: %s",
                                   dir.str().c_str(), ec.message().c_str());
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << cacheEntryBytes(keyHash, arch, cubin);
    os.close();
    if (std::error_code ec = os.error()) {
      // Cleared, or the stream's destructor would abort the process.
      os.clear_error();
      llvm::sys::fs::remove(tempPath);
      return llvm::createStringError(ec, "cannot write %s: %s",
                                     tempPath.c_str(), ec.message().c_str());
    }
  }
  if (std::error_code ec = llvm::sys::fs::rename(tempPath, path)) {
    llvm::sys::fs::remove(tempPath);
    return llvm::createStringError(ec, "cannot rename %s to %s: %s",
                                   tempPath.c_str(), path.c_str(),
                                   ec.message().c_str());
  }
  return llvm::Error::success();
}

//===- Cross-process single flight ----------------------------------------===//

/// An exclusive flock on "<entry>.lock", held until destruction. The kernel
/// drops it when the holding process exits or dies, so nobody waits on a
/// dead holder. Empty (not held) when there is no lock to be had.
class EntryLock {
public:
  /// Waits up to `timeout` for the lock of `entryPath`, polling, so that a
  /// hung holder delays the caller but never blocks it for good. Not held
  /// when the lock file cannot be created (a read-only cache) or is not a
  /// regular file, or the wait timed out; the caller compiles without it.
  static EntryLock acquire(const std::string &entryPath,
                           std::chrono::milliseconds timeout,
                           llvm::StringRef uri) {
    EntryLock lock;
    std::string path = entryPath + ".lock";
    if (llvm::sys::fs::create_directories(llvm::sys::path::parent_path(path)))
      return lock;
    int fd;
    do
      fd = ::open(path.c_str(),
                  O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
      return lock;
    struct stat status;
    if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
      ::close(fd);
      return lock;
    }
    auto start = std::chrono::steady_clock::now();
    auto pause = std::chrono::milliseconds(1);
    while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      if (errno == EINTR)
        continue;
      auto waited = std::chrono::steady_clock::now() - start;
      if (errno != EWOULDBLOCK || waited >= timeout) {
        if (errno == EWOULDBLOCK)
          llvm::errs() << "attn: warning: waited "
                       << std::chrono::duration_cast<std::chrono::seconds>(
                              waited)
                              .count()
                       << " s for another process to compile " << uri << " ("
                       << path << "); compiling it here\n";
        ::close(fd);
        return lock;
      }
      std::this_thread::sleep_for(
          std::min<std::chrono::nanoseconds>(pause, timeout - waited));
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
    lock.fd = fd;
    lock.path = std::move(path);
    return lock;
  }

  EntryLock() = default;
  EntryLock(EntryLock &&other) noexcept
      : fd(std::exchange(other.fd, -1)), path(std::move(other.path)) {}
  EntryLock &operator=(EntryLock &&other) noexcept {
    std::swap(fd, other.fd);
    std::swap(path, other.path);
    return *this;
  }
  ~EntryLock() {
    if (fd >= 0)
      ::close(fd); // drops the flock
  }

  bool held() const { return fd >= 0; }

  /// Removes the lock file, still holding the lock, once the entry is on
  /// disk. Safe because only processes that missed the entry take locks,
  /// and each looks at the disk again once it holds one: a waiter on this
  /// (now unlinked) file and a newcomer that creates a fresh one both find
  /// the entry. Two compiles at once need the entry gone again (deleted by
  /// hand), and then cost only time. Keeps the cache directory free of one
  /// lock file per kernel.
  void removeFile() {
    if (fd >= 0)
      ::unlink(path.c_str());
  }

private:
  int fd = -1;
  std::string path;
};

//===- Sharing a failure --------------------------------------------------===//

/// A failed compile, handed to the leader and to every waiter. llvm::Error
/// is move-only, so the failure is kept as data and re-created per caller;
/// an NvrtcError stays an NvrtcError (with its log).
class SharedFailure {
public:
  explicit SharedFailure(llvm::Error error) {
    llvm::handleAllErrors(
        std::move(error),
        [&](const NvrtcError &nvrtc) {
          nvrtcErrors.push_back(std::make_shared<NvrtcError>(nvrtc));
        },
        [&](const llvm::ErrorInfoBase &other) {
          messages.push_back(other.message());
        });
  }

  llvm::Error toError() const {
    llvm::Error result = llvm::Error::success();
    for (const std::shared_ptr<const NvrtcError> &nvrtc : nvrtcErrors)
      result = llvm::joinErrors(std::move(result),
                                llvm::make_error<NvrtcError>(*nvrtc));
    for (const std::string &message : messages)
      result = llvm::joinErrors(
          std::move(result),
          llvm::createStringError(llvm::inconvertibleErrorCode(), message));
    return result;
  }

private:
  std::vector<std::shared_ptr<const NvrtcError>> nvrtcErrors;
  std::vector<std::string> messages;
};

/// One key being loaded or compiled by its leader.
struct Flight {
  bool finished = false;
  std::shared_ptr<const std::string> cubin;
  std::shared_ptr<const SharedFailure> failure;
};

llvm::Error checkUri(llvm::StringRef uri) {
  // The URI becomes a file name and, behind "attn_", a C identifier.
  constexpr size_t kMaxUriSize = 200;
  bool valid =
      !uri.empty() && uri.size() <= kMaxUriSize &&
      llvm::all_of(uri, [](char c) { return llvm::isAlnum(c) || c == '_'; });
  if (valid)
    return llvm::Error::success();
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "invalid kernel uri '%s': expected 1 to %zu letters, digits or '_'",
      uri.str().c_str(), kMaxUriSize);
}

bool envFlag(const char *name) {
  std::optional<std::string> value = llvm::sys::Process::GetEnv(name);
  return value && !value->empty() && *value != "0";
}

} // namespace

/// SHA-256 over everything that makes `request`'s cubin; with or without
/// the NVRTC version (AOT libraries are served to hosts with another NVRTC,
/// or none).
CacheKey hashRequest(const CompileRequest &request, const NvrtcOptions &nvrtc,
                     bool withNvrtcVersion) {
  llvm::SHA256 sha;
  // Each field is labelled and length-prefixed so no two different requests
  // hash the same bytes.
  auto field = [&](llvm::StringRef label, llvm::StringRef value) {
    uint8_t size[8];
    llvm::support::endian::write64le(size, value.size());
    sha.update(label);
    sha.update(size);
    sha.update(value);
  };
  field("uri", request.uri);
  field("source", request.source);
  if (withNvrtcVersion) {
    static const std::string nvrtcVersion = nvrtcVersionString();
    field("nvrtc", nvrtcVersion);
  }
  for (const std::string &option : compileOptions(request.arch, nvrtc))
    field("option", option);
  field("arch", toString(request.arch));
  field("attn", ATTN_VERSION);
  field("templates", templatesHash());
  return CacheKey{request.uri, llvm::toHex(sha.final(), /*LowerCase=*/true)};
}

CacheKey aotKey(const CompileRequest &request, const NvrtcOptions &nvrtc) {
  return hashRequest(request, nvrtc, /*withNvrtcVersion=*/false);
}

std::string cacheEntryBytes(llvm::StringRef keyHash, Arch arch,
                            llvm::StringRef cubin) {
  assert(keyHash.size() == kKeyHashSize && "a cache key hash is 64 hex digits");
  return fileHeader(keyHash, arch, cubin) + cubin.str();
}

std::optional<llvm::StringRef>
parseCacheEntry(llvm::StringRef bytes, llvm::StringRef keyHash, Arch arch) {
  if (keyHash.size() != kKeyHashSize || bytes.size() < kHeaderSize)
    return std::nullopt;
  llvm::StringRef payload = bytes.drop_front(kHeaderSize);
  if (bytes.take_front(kHeaderSize) != fileHeader(keyHash, arch, payload))
    return std::nullopt;
  return payload;
}

std::string CacheKey::fileName() const {
  return uri + "-" + hash.substr(0, 16) + ".cubin";
}

//===- KernelCache::Impl --------------------------------------------------===//

struct KernelCache::Impl {
  struct Entry {
    std::shared_ptr<const std::string> cubin;
    std::shared_ptr<CudaLibrary> library; ///< loaded on first getLibrary
    std::list<std::string>::iterator lruPosition;
  };

  explicit Impl(Options opts) : options(std::move(opts)) {
    if (!options.compiler) {
      NvrtcOptions nvrtc = options.nvrtc;
      options.compiler = [nvrtc](const CompileRequest &request) {
        return compileToCubin(request.source, request.uri, request.arch, nvrtc);
      };
    }
    if (options.useDisk && !envFlag("ATTN_CACHE_DISABLE"))
      diskRoot = options.diskDir ? options.diskDir : defaultDiskDir();
    if (options.libraries.empty())
      openEnvironmentLibraries();
  }

  /// The libraries $ATTN_AOT_LIBRARY names; one that does not open is
  /// skipped with a warning (the kernels it would serve are compiled).
  void openEnvironmentLibraries() {
    std::optional<std::string> paths = llvm::sys::Process::GetEnv("ATTN_AOT_LIBRARY");
    if (!paths)
      return;
    llvm::SmallVector<llvm::StringRef, 4> parts;
    llvm::StringRef(*paths).split(parts, ':', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef path : parts) {
      auto library = AotLibrary::open(path);
      if (library)
        options.libraries.push_back(std::move(*library));
      else
        llvm::errs() << "attn: warning: ATTN_AOT_LIBRARY: "
                     << llvm::toString(library.takeError()) << "\n";
    }
  }

  /// `request`'s cubin from the first AOT library that has it.
  std::optional<std::string> fromLibraries(const CompileRequest &request) {
    if (options.libraries.empty())
      return std::nullopt;
    std::string key = aotKey(request, options.nvrtc).hash;
    for (const auto &library : options.libraries)
      if (const AotKernel *kernel = library->findByAotKey(key)) {
        llvm::Expected<std::string> cubin = library->readCubin(*kernel);
        if (cubin)
          return std::move(*cubin);
        // A damaged library is not trusted: compile instead, and say so.
        llvm::errs() << "attn: warning: " << llvm::toString(cubin.takeError())
                     << "\n";
      }
    return std::nullopt;
  }

  /// The cached cubin for `hash`, marked most recently used. Needs `mutex`.
  Entry *lookup(const std::string &hash) {
    auto it = entries.find(hash);
    if (it == entries.end())
      return nullptr;
    lru.splice(lru.begin(), lru, it->second.lruPosition);
    return &it->second;
  }

  /// Adds a cubin, evicting the least recently used beyond the bound. Needs
  /// `mutex`.
  void insert(const std::string &hash,
              std::shared_ptr<const std::string> cubin) {
    if (options.maxEntries == 0)
      return;
    lru.push_front(hash);
    entries[hash] = Entry{std::move(cubin), nullptr, lru.begin()};
    while (entries.size() > options.maxEntries) {
      entries.erase(lru.back());
      lru.pop_back();
    }
  }

  CacheKey keyFor(const CompileRequest &request) const {
    return hashRequest(request, options.nvrtc, /*withNvrtcVersion=*/true);
  }

  std::optional<std::string> pathFor(const CacheKey &key, Arch arch) const {
    if (!diskRoot)
      return std::nullopt;
    llvm::SmallString<256> path(*diskRoot);
    llvm::sys::path::append(path, ATTN_VERSION, toString(arch), key.fileName());
    return path.str().str();
  }

  llvm::Expected<std::shared_ptr<const std::string>>
  getCubin(const CompileRequest &request, const CacheKey &key) {
    std::shared_ptr<Flight> flight;
    {
      std::unique_lock<std::mutex> lock(mutex);
      if (Entry *entry = lookup(key.hash)) {
        ++memoryHits;
        return entry->cubin;
      }
      auto [it, leader] = inFlight.try_emplace(key.hash);
      if (!leader) {
        flight = it->second;
        flightDone.wait(lock, [&] { return flight->finished; });
        if (flight->failure)
          return flight->failure->toError();
        ++memoryHits;
        return flight->cubin;
      }
      flight = it->second = std::make_shared<Flight>();
    }

    llvm::Expected<std::string> cubin =
        loadOrCompile(request, key, pathFor(key, request.arch));

    std::lock_guard<std::mutex> lock(mutex);
    inFlight.erase(key.hash);
    flight->finished = true;
    if (cubin) {
      flight->cubin = std::make_shared<const std::string>(std::move(*cubin));
      insert(key.hash, flight->cubin);
    } else {
      // Not cached: the next request for this key compiles again.
      flight->failure = std::make_shared<SharedFailure>(cubin.takeError());
    }
    flightDone.notify_all();
    if (flight->failure)
      return flight->failure->toError();
    return flight->cubin;
  }

  /// AOT libraries, disk, then the compiler; runs in the leader, without
  /// `mutex`.
  llvm::Expected<std::string>
  loadOrCompile(const CompileRequest &request, const CacheKey &key,
                const std::optional<std::string> &path) {
    if (std::optional<std::string> cubin = fromLibraries(request)) {
      ++aotHits;
      return std::move(*cubin);
    }
    std::string cubin;
    EntryLock lock;
    if (path) {
      switch (readCacheFile(*path, key.hash, request.arch, cubin)) {
      case DiskLookup::Found:
        ++diskHits;
        return cubin;
      case DiskLookup::Corrupt:
        ++corruptEntries;
        break;
      case DiskLookup::Missing:
        break;
      }
      // Another process may be compiling it: wait for it, then look again.
      lock = EntryLock::acquire(*path, options.diskLockTimeout, request.uri);
      if (lock.held() && readCacheFile(*path, key.hash, request.arch, cubin) ==
                             DiskLookup::Found) {
        ++diskHits;
        lock.removeFile();
        return cubin;
      }
    }
    ++compiles;
    llvm::Expected<std::string> compiled = options.compiler(request);
    if (!compiled)
      return compiled.takeError();
    if (path) {
      if (llvm::Error error =
              writeCacheFile(*path, key.hash, request.arch, *compiled)) {
        // Disk caching is an optimization: compile on without it, and say so
        // once rather than for every kernel.
        std::string message = llvm::toString(std::move(error));
        std::call_once(diskWarning, [&] {
          llvm::errs() << "attn: warning: kernels are not cached on disk: "
                       << message << "\n";
        });
      } else {
        lock.removeFile();
      }
    }
    return compiled;
  }

  Options options;
  std::optional<std::string> diskRoot;

  std::mutex mutex;
  std::condition_variable flightDone;
  std::unordered_map<std::string, Entry> entries;
  std::list<std::string> lru; ///< key hashes, most recently used first
  std::unordered_map<std::string, std::shared_ptr<Flight>> inFlight;

  std::atomic<unsigned> memoryHits{0}, aotHits{0}, diskHits{0}, compiles{0},
      corruptEntries{0};
  std::once_flag diskWarning;
};

//===- KernelCache --------------------------------------------------------===//

KernelCache::KernelCache() : KernelCache(Options()) {}

KernelCache::KernelCache(Options options)
    : impl(std::make_unique<Impl>(std::move(options))) {}

KernelCache::~KernelCache() = default;

CacheKey KernelCache::keyFor(const CompileRequest &request) const {
  return impl->keyFor(request);
}

std::optional<std::string>
KernelCache::diskPath(const CompileRequest &request) const {
  return impl->pathFor(keyFor(request), request.arch);
}

llvm::Expected<std::shared_ptr<const std::string>>
KernelCache::getCubin(const CompileRequest &request) {
  if (llvm::Error error = checkUri(request.uri))
    return std::move(error);
  return impl->getCubin(request, keyFor(request));
}

llvm::Expected<std::shared_ptr<CudaLibrary>>
KernelCache::getLibrary(const CompileRequest &request) {
  if (llvm::Error error = checkUri(request.uri))
    return std::move(error);
  CacheKey key = keyFor(request);
  llvm::Expected<std::shared_ptr<const std::string>> cubin =
      impl->getCubin(request, key);
  if (!cubin)
    return cubin.takeError();
  {
    std::lock_guard<std::mutex> lock(impl->mutex);
    if (Impl::Entry *entry = impl->lookup(key.hash); entry && entry->library)
      return entry->library;
  }
  // Loaded outside the lock; if another thread won the race, its library is
  // kept and this one is unloaded.
  llvm::Expected<CudaLibrary> loaded = CudaLibrary::load(**cubin);
  if (!loaded)
    return loaded.takeError();
  auto library = std::make_shared<CudaLibrary>(std::move(*loaded));
  std::lock_guard<std::mutex> lock(impl->mutex);
  Impl::Entry *entry = impl->lookup(key.hash);
  if (!entry)
    return library; // evicted meanwhile: usable, just not memoized
  if (!entry->library)
    entry->library = library;
  return entry->library;
}

KernelCache::Stats KernelCache::stats() const {
  return Stats{impl->memoryHits.load(), impl->aotHits.load(),
               impl->diskHits.load(), impl->compiles.load(),
               impl->corruptEntries.load()};
}

KernelCache &KernelCache::global() {
  // Never destroyed: libraries must not be unloaded from static destructors,
  // after the driver may already have shut down.
  static KernelCache *cache = new KernelCache();
  return *cache;
}

std::optional<std::string> KernelCache::defaultDiskDir() {
  auto env = [](const char *name) -> std::optional<std::string> {
    std::optional<std::string> value = llvm::sys::Process::GetEnv(name);
    if (value && value->empty())
      return std::nullopt;
    return value;
  };
  if (std::optional<std::string> dir = env("ATTN_CACHE_DIR"))
    return dir;
  llvm::SmallString<256> path;
  if (std::optional<std::string> xdg = env("XDG_CACHE_HOME"))
    llvm::sys::path::append(path, *xdg, "attn");
  else if (std::optional<std::string> home = env("HOME"))
    llvm::sys::path::append(path, *home, ".cache", "attn");
  else
    return std::nullopt;
  return path.str().str();
}

} // namespace attn::runtime
