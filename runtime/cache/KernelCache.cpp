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
// The leader removes the lock file when it is done, whatever the outcome.
//
// The disk cache is the user's own (KernelCache.h says what it trusts):
// each use opens the root and the <version>/<arch> directories below it,
// checking every opened descriptor (fstat), and reaches entries, temporary
// files and locks through the last one (openat, renameat, unlinkat) without
// following links, so nothing renamed along the path after the checks can
// redirect a read or a write.
//
// Disk files are written to a unique temporary name in the target directory
// and renamed into place, so readers see either no file or a whole one. Each
// file starts with a header (magic, format version, full key hash, payload
// size, checksum over key hash, arch and payload); a file that disagrees with
// its header, its key or its arch, holds no cubin for that arch, or is no
// regular file at all, is counted corrupt and replaced by the recompiled
// cubin.
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
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <atomic>
#include <cassert>
#include <cerrno>
#include <condition_variable>
#include <cstring>
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

//===- Whom the disk cache trusts -----------------------------------------===//

/// "0777".
std::string octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", unsigned(mode & 07777));
  return text;
}

/// Why a cache directory or file with `owner` and permission bits `mode`
/// is not trusted, or none: it must belong to this process's effective user
/// and be writable by no one else, so that only the user (or root) can have
/// put anything there.
std::optional<std::string> distrust(uid_t owner, mode_t mode) {
  uid_t self = ::geteuid();
  if (owner != self)
    return llvm::formatv("it is owned by uid {0}, not by this user (uid {1})",
                         owner, self)
        .str();
  if (mode & (S_IWGRP | S_IWOTH))
    return "it is writable by " +
           std::string((mode & S_IWOTH) ? "others" : "its group") + " (mode " +
           octal(mode) + ")";
  return std::nullopt;
}

/// Why a directory above the cache root lets a stranger replace the root,
/// or none: it must belong to this user or root, and be writable by others
/// only with the sticky bit (/tmp), which lets no one rename an entry they
/// do not own. Group write is allowed: with per-user groups (umask 002) it
/// is the norm, and a replaced root is refused anyway unless it is the
/// user's own.
std::optional<std::string> distrustParent(const struct stat &status) {
  if (status.st_uid != ::geteuid() && status.st_uid != 0)
    return llvm::formatv("is owned by uid {0}, neither this user nor root",
                         status.st_uid)
        .str();
  if ((status.st_mode & S_IWOTH) && !(status.st_mode & S_ISVTX))
    return "is writable by others without the sticky bit (mode " +
           octal(status.st_mode) + ")";
  return std::nullopt;
}

/// "<action>: <strerror(error)>", carrying `error` (an errno value) as its
/// code. Callers read errno into `error` first: building `action` may
/// allocate, which may change errno.
llvm::Error systemError(int error, const std::string &action) {
  return llvm::make_error<llvm::StringError>(
      action + ": " + std::strerror(error),
      std::error_code(error, std::generic_category()));
}

/// mkdir(path, 0700), then exactly 0700 whatever the umask (one that left
/// the directory unwritable would stop attn creating anything inside); the
/// mode is set on the descriptor of what was opened without following a
/// link. EEXIST is success.
std::error_code makePrivateDirectory(const std::string &path) {
  if (::mkdir(path.c_str(), 0700) != 0)
    return errno == EEXIST ? std::error_code()
                           : std::error_code(errno, std::generic_category());
  int fd =
      ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    (void)::fchmod(fd, 0700);
    ::close(fd);
  }
  return {};
}

/// mkdir -p, each directory created private (makePrivateDirectory), as the
/// XDG base directory rules ask of $XDG_CACHE_HOME.
std::error_code makePrivateDirectories(const std::string &path) {
  std::error_code ec = makePrivateDirectory(path);
  if (ec != std::errc::no_such_file_or_directory)
    return ec;
  llvm::StringRef parent = llvm::sys::path::parent_path(path);
  if (parent.empty() || parent == path)
    return ec;
  if (std::error_code parentError = makePrivateDirectories(parent.str()))
    return parentError;
  return makePrivateDirectory(path);
}

/// A cache directory, open and checked. Entries, temporary files and locks
/// are reached through its descriptor, never by path.
class CacheDir {
public:
  /// The cache root `path`, created (0700, with missing parents) if it is
  /// not there. Symbolic links in `path` are followed (they are the user's
  /// configuration); the directory reached must pass distrust(), and every
  /// directory above it distrustParent(). Errors say which and why.
  static llvm::Expected<CacheDir> openRoot(const std::string &path) {
    int fd = openDirectory(AT_FDCWD, path, /*noFollow=*/false);
    if (fd < 0 && errno == ENOENT) {
      if (std::error_code ec = makePrivateDirectories(path))
        return llvm::createStringError(ec, "cannot create '%s': %s",
                                       path.c_str(), ec.message().c_str());
      fd = openDirectory(AT_FDCWD, path, /*noFollow=*/false);
    }
    if (fd < 0) {
      int error = errno;
      return systemError(error, "cannot open '" + path + "'");
    }
    CacheDir dir(fd, path);
    if (llvm::Error error = dir.check(/*created=*/false))
      return std::move(error);
    // The directories above, where a stranger could swap the root.
    llvm::SmallString<256> real;
    if (std::error_code ec = llvm::sys::fs::real_path(path, real))
      return llvm::createStringError(ec, "cannot resolve '%s': %s",
                                     path.c_str(), ec.message().c_str());
    for (llvm::StringRef parent = llvm::sys::path::parent_path(real);
         !parent.empty(); parent = llvm::sys::path::parent_path(parent)) {
      struct stat status;
      std::string name = parent.str();
      if (::lstat(name.c_str(), &status) != 0) {
        int error = errno;
        return systemError(error, "cannot examine '" + name + "'");
      }
      if (std::optional<std::string> why = distrustParent(status))
        return llvm::createStringError(
            "'%s' is not used: the directory above it, '%s', %s, so someone "
            "else could replace it",
            path.c_str(), name.c_str(), why->c_str());
      if (parent == llvm::sys::path::parent_path(parent))
        break; // "/"
    }
    return std::move(dir);
  }

  /// The subdirectory `name`, created (0700) if it is not there; never a
  /// symbolic link.
  llvm::Expected<CacheDir> child(llvm::StringRef name) const {
    std::string child = name.str(), childPath = pathOf(name);
    int fd = openDirectory(descriptor, child, /*noFollow=*/true);
    bool created = false;
    if (fd < 0 && errno == ENOENT) {
      if (::mkdirat(descriptor, child.c_str(), 0700) == 0)
        created = true;
      else if (int error = errno; error != EEXIST)
        return systemError(error, "cannot create '" + childPath + "'");
      fd = openDirectory(descriptor, child, /*noFollow=*/true);
    }
    if (fd < 0 && (errno == ENOTDIR || errno == ELOOP)) {
      struct stat status;
      bool link = ::fstatat(descriptor, child.c_str(), &status,
                            AT_SYMLINK_NOFOLLOW) == 0 &&
                  S_ISLNK(status.st_mode);
      const char *what = link ? "a symbolic link" : "not a directory";
      return llvm::createStringError(
          std::make_error_code(std::errc::not_a_directory),
          "'%s' is not used: it is %s", childPath.c_str(), what);
    }
    if (fd < 0) {
      int error = errno;
      return systemError(error, "cannot open '" + childPath + "'");
    }
    CacheDir dir(fd, childPath);
    if (llvm::Error error = dir.check(created))
      return std::move(error);
    return std::move(dir);
  }

  CacheDir(CacheDir &&other) noexcept
      : descriptor(std::exchange(other.descriptor, -1)),
        dirPath(std::move(other.dirPath)) {}
  CacheDir &operator=(CacheDir &&other) noexcept {
    std::swap(descriptor, other.descriptor);
    std::swap(dirPath, other.dirPath);
    return *this;
  }
  ~CacheDir() {
    if (descriptor >= 0)
      ::close(descriptor);
  }

  int fd() const { return descriptor; }
  const std::string &path() const { return dirPath; }
  /// The path of `name` in this directory, for messages.
  std::string pathOf(llvm::StringRef name) const {
    llvm::SmallString<256> path(dirPath);
    llvm::sys::path::append(path, name);
    return path.str().str();
  }

private:
  CacheDir(int fd, std::string path)
      : descriptor(fd), dirPath(std::move(path)) {}

  static int openDirectory(int parent, const std::string &name, bool noFollow) {
    int flags =
        O_RDONLY | O_DIRECTORY | O_CLOEXEC | (noFollow ? O_NOFOLLOW : 0);
    int fd;
    do
      fd = ::openat(parent, name.c_str(), flags);
    while (fd < 0 && errno == EINTR);
    return fd;
  }

  /// The open directory passes distrust(); one created here is set to
  /// exactly 0700 (a restrictive umask could have left it unusable).
  llvm::Error check(bool created) const {
    struct stat status;
    if (::fstat(descriptor, &status) != 0) {
      int error = errno;
      return systemError(error, "cannot examine '" + dirPath + "'");
    }
    if (std::optional<std::string> why =
            distrust(status.st_uid, status.st_mode))
      return llvm::createStringError("'%s' is not used: %s", dirPath.c_str(),
                                     why->c_str());
    if (created && (status.st_mode & 07777) != 0700)
      (void)::fchmod(descriptor, 0700);
    return llvm::Error::success();
  }

  int descriptor = -1;
  std::string dirPath;
};

//===- Entries ------------------------------------------------------------===//

enum class DiskLookup { Missing, Corrupt, Refused, Found };

/// Reads entry `name` of `dir`. `refusal` says why, for Refused (a file that
/// is not the user's own).
DiskLookup readCacheFile(const CacheDir &dir, const std::string &name,
                         llvm::StringRef keyHash, Arch arch, std::string &cubin,
                         std::string &refusal) {
  std::string path = dir.pathOf(name);
  // Anything that is not an intact entry (a symbolic link, a FIFO, a
  // device, a directory, an unreadable or oversized file) is corrupt: never
  // followed, blocked on or read unbounded, and replaced by the recompiled
  // cubin where a rename can replace it.
  llvm::Expected<RegularFile> file = RegularFile::openAt(dir.fd(), name, path);
  if (!file) {
    bool missing = false;
    llvm::handleAllErrors(file.takeError(), [&](const llvm::ErrorInfoBase &e) {
      missing = e.convertToErrorCode() == std::errc::no_such_file_or_directory;
    });
    return missing ? DiskLookup::Missing : DiskLookup::Corrupt;
  }
  if (std::optional<std::string> why =
          distrust(file->owner(), file->permissions())) {
    refusal = "kernel cache entry '" + path + "' is not used: " + *why;
    return DiskLookup::Refused;
  }
  if (file->size() > kHeaderSize + kMaxCubinBytes)
    return DiskLookup::Corrupt;
  llvm::Expected<std::string> bytes = file->read(0, file->size());
  if (!bytes) {
    llvm::consumeError(bytes.takeError());
    return DiskLookup::Corrupt;
  }
  std::optional<llvm::StringRef> payload =
      parseCacheEntry(*bytes, keyHash, arch);
  if (!payload)
    return DiskLookup::Corrupt;
  // Checked like an AOT library's cubins: a well-formed cubin for this arch.
  if (llvm::Error error = checkCubinArch(*payload, arch, path)) {
    llvm::consumeError(std::move(error));
    return DiskLookup::Corrupt;
  }
  cubin = payload->str();
  return DiskLookup::Found;
}

/// Writes entry `name` of `dir`: a new temporary file (exclusive, 0600,
/// never through a link) renamed over it. Nothing is left behind on
/// failure.
llvm::Error writeCacheFile(const CacheDir &dir, const std::string &name,
                           llvm::StringRef keyHash, Arch arch,
                           llvm::StringRef cubin) {
  std::string bytes = cacheEntryBytes(keyHash, arch, cubin);
  // Same directory as the target, so the rename is atomic; the random part
  // keeps concurrent writers (threads or processes) apart.
  std::string temp;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 32; ++attempt) {
    temp = name + ".tmp-" +
           llvm::utohexstr(llvm::sys::Process::GetRandomNumber(),
                           /*LowerCase=*/true);
    fd = ::openat(dir.fd(), temp.c_str(),
                  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST && errno != EINTR)
      break;
  }
  if (fd < 0) {
    int error = errno;
    return systemError(error, "cannot create a file in '" + dir.path() + "'");
  }
  std::string tempPath = dir.pathOf(temp);
  auto fail = [&](const std::string &action, int error) {
    if (fd >= 0)
      ::close(fd);
    ::unlinkat(dir.fd(), temp.c_str(), 0);
    return systemError(error, "cannot " + action);
  };
  // Exactly 0600, whatever the umask left.
  if (::fchmod(fd, 0600) != 0) {
    int error = errno;
    return fail("set the mode of " + tempPath, error);
  }
  for (size_t done = 0; done < bytes.size();) {
    ssize_t written = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (written < 0 && errno == EINTR)
      continue;
    if (written < 0) {
      int error = errno;
      return fail("write " + tempPath, error);
    }
    done += size_t(written);
  }
  int closed = ::close(fd);
  fd = -1;
  if (closed != 0) {
    int error = errno;
    return fail("write " + tempPath, error);
  }
  if (::renameat(dir.fd(), temp.c_str(), dir.fd(), name.c_str()) != 0) {
    int error = errno;
    return fail("rename " + tempPath + " to " + name, error);
  }
  return llvm::Error::success();
}

//===- Cross-process single flight ----------------------------------------===//

/// An exclusive flock on a lock file of a cache directory, held until
/// destruction, which also removes the file. The kernel drops the flock
/// when the holding process exits or dies, so nobody waits on a dead holder.
/// Empty (not held) when there is no lock to be had.
class EntryLock {
public:
  /// Waits up to `timeout` for the lock `name` of `dir`, polling, so that a
  /// hung holder delays the caller but never blocks it for good. Not held
  /// when the lock file cannot be created (a read-only cache), is not a
  /// regular file of the user's own, or the wait timed out; the caller
  /// compiles without it.
  static EntryLock acquire(const CacheDir &dir, const std::string &name,
                           std::chrono::milliseconds timeout,
                           llvm::StringRef uri) {
    EntryLock lock;
    int fd;
    do
      fd = ::openat(dir.fd(), name.c_str(),
                    O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
                    0600);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
      return lock;
    struct stat status;
    if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode) ||
        distrust(status.st_uid, status.st_mode)) {
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
                       << dir.pathOf(name) << "); compiling it here\n";
        ::close(fd);
        return lock;
      }
      std::this_thread::sleep_for(
          std::min<std::chrono::nanoseconds>(pause, timeout - waited));
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
    lock.dirFd = ::dup(dir.fd());
    if (lock.dirFd < 0) {
      ::close(fd);
      return lock;
    }
    lock.fd = fd;
    lock.name = name;
    return lock;
  }

  EntryLock() = default;
  EntryLock(EntryLock &&other) noexcept
      : fd(std::exchange(other.fd, -1)), dirFd(std::exchange(other.dirFd, -1)),
        name(std::move(other.name)) {}
  EntryLock &operator=(EntryLock &&other) noexcept {
    std::swap(fd, other.fd);
    std::swap(dirFd, other.dirFd);
    std::swap(name, other.name);
    return *this;
  }
  ~EntryLock() {
    if (fd < 0)
      return;
    removeFile();
    ::close(fd); // drops the flock
    ::close(dirFd);
  }

  bool held() const { return fd >= 0; }

private:
  /// Removes the lock file, still holding the lock, if the name still holds
  /// this file. Safe whether or not the entry got written: only processes
  /// that missed the entry take locks, and each looks at the disk again once
  /// it holds one, so a waiter on this (now unlinked) file and a newcomer
  /// that creates a fresh one both find the entry, or both compile (after a
  /// failure, costing only time). Keeps the cache directory free of one lock
  /// file per kernel, and of lock files left by failed compiles and writes.
  void removeFile() {
    struct stat mine, there;
    if (::fstat(fd, &mine) == 0 &&
        ::fstatat(dirFd, name.c_str(), &there, AT_SYMLINK_NOFOLLOW) == 0 &&
        mine.st_dev == there.st_dev && mine.st_ino == there.st_ino)
      ::unlinkat(dirFd, name.c_str(), 0);
  }

  int fd = -1;
  int dirFd = -1;
  std::string name;
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
    std::optional<std::string> paths =
        llvm::sys::Process::GetEnv("ATTN_AOT_LIBRARY");
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
        // The key names the arch, but a manifest could file a kernel of
        // another arch under it.
        if (cubin)
          if (llvm::Error error =
                  checkCubinArch(*cubin, request.arch,
                                 "AOT library '" + library->path() +
                                     "': the cubin of " + kernel->name))
            cubin = std::move(error);
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

    llvm::Expected<std::string> cubin = loadOrCompile(request, key);

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

  /// The disk cache's directory for `arch`, opened and checked.
  llvm::Expected<CacheDir> openDiskDir(Arch arch) const {
    llvm::Expected<CacheDir> root = CacheDir::openRoot(*diskRoot);
    if (!root)
      return root.takeError();
    llvm::Expected<CacheDir> version = root->child(ATTN_VERSION);
    if (!version)
      return version.takeError();
    return version->child(toString(arch));
  }

  /// Disk caching is an optimization: compile on without it, and say so
  /// once rather than for every kernel.
  void warnNotCached(llvm::Error error) {
    std::string message = llvm::toString(std::move(error));
    std::call_once(diskWarning, [&] {
      llvm::errs() << "attn: warning: kernels are not cached on disk: "
                   << message << "\n";
    });
  }

  /// AOT libraries, disk, then the compiler; runs in the leader, without
  /// `mutex`.
  llvm::Expected<std::string> loadOrCompile(const CompileRequest &request,
                                            const CacheKey &key) {
    if (std::optional<std::string> cubin = fromLibraries(request)) {
      ++aotHits;
      return std::move(*cubin);
    }
    std::optional<CacheDir> dir;
    if (diskRoot) {
      llvm::Expected<CacheDir> opened = openDiskDir(request.arch);
      if (opened)
        dir = std::move(*opened);
      else
        warnNotCached(opened.takeError());
    }
    std::string name = key.fileName(), cubin, refusal;
    EntryLock lock;
    if (dir) {
      switch (
          readCacheFile(*dir, name, key.hash, request.arch, cubin, refusal)) {
      case DiskLookup::Found:
        ++diskHits;
        return cubin;
      case DiskLookup::Corrupt:
        ++corruptEntries;
        break;
      case DiskLookup::Refused:
        ++refusedEntries;
        llvm::errs() << "attn: warning: " << refusal
                     << "; compiling the kernel instead\n";
        break;
      case DiskLookup::Missing:
        break;
      }
      // Another process may be compiling it: wait for it, then look again.
      lock = EntryLock::acquire(*dir, name + ".lock", options.diskLockTimeout,
                                request.uri);
      if (lock.held() && readCacheFile(*dir, name, key.hash, request.arch,
                                       cubin, refusal) == DiskLookup::Found) {
        ++diskHits;
        return cubin;
      }
    }
    ++compiles;
    llvm::Expected<std::string> compiled = options.compiler(request);
    if (!compiled)
      return compiled.takeError();
    if (dir)
      if (llvm::Error error =
              writeCacheFile(*dir, name, key.hash, request.arch, *compiled))
        warnNotCached(std::move(error));
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
      corruptEntries{0}, refusedEntries{0};
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
  // The driver only gets a cubin the current GPU runs (an error naming the
  // kernel and both archs rather than the driver's). Loaded outside the
  // lock; if another thread won the race, its library is kept and this one
  // is unloaded.
  llvm::Expected<Arch> device = currentDeviceArch();
  if (!device)
    return device.takeError();
  if (llvm::Error error =
          checkCubinRunsOn(**cubin, *device, "kernel " + request.uri))
    return std::move(error);
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
  return Stats{impl->memoryHits.load(),     impl->aotHits.load(),
               impl->diskHits.load(),       impl->compiles.load(),
               impl->corruptEntries.load(), impl->refusedEntries.load()};
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
