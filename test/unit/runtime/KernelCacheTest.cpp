//===- KernelCacheTest.cpp - the kernel cache -----------------------------===//
//
// Keys, the memory and disk layers, single-flight compilation (across
// threads and, through fork(), across processes) and failure handling, with
// an injected compiler that counts its calls and returns stand-in cubins;
// damaged, foreign and planted (FIFO, device, directory, symbolic link, not
// a cubin, another arch's cubin) disk entries; whom the disk cache trusts
// (modes it creates whatever the umask, directories and entries writable by
// others or owned by another user refused, lock files in the private
// directory and gone after a failed write); plus one pass through the real
// NVRTC.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/cache/KernelCache.h"

#include "attn/runtime/support/Error.h"
#include "test/unit/runtime/TestFiles.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include <csignal>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace attn;
using namespace attn::runtime;
using namespace attn::test;

namespace {

CompileRequest request(std::string uri = "decode_test",
                       std::string source = "// kernel source",
                       Arch arch = Arch::SM90a) {
  return CompileRequest{std::move(uri), std::move(source), arch};
}

/// Every file below `dir`.
std::vector<std::string> filesUnder(const std::string &dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (llvm::sys::fs::recursive_directory_iterator it(dir, ec), end;
       it != end && !ec; it.increment(ec))
    if (it->type() == llvm::sys::fs::file_type::regular_file)
      files.push_back(it->path());
  return files;
}

/// The permission bits of `path` (not following a link), or ~0u.
unsigned modeOf(const std::string &path) {
  struct stat status;
  return ::lstat(path.c_str(), &status) == 0 ? status.st_mode & 07777 : ~0u;
}

/// Creates `path` and its missing parents private to the user, as the cache
/// would (llvm's default mode depends on the umask).
void makePrivateDirectories(const std::string &path) {
  ASSERT_FALSE(llvm::sys::fs::create_directories(
      path, /*IgnoreExisting=*/true, llvm::sys::fs::perms::owner_all));
}

/// A user id that is not this process's, for files given away (as root).
constexpr uid_t kOtherUser = 54321;

/// A stand-in cubin made of the request, for its arch.
std::string fakeCubin(const CompileRequest &request) {
  return cubinImage(request.arch,
                    "cubin(" + request.uri + "," + request.source + ")");
}

/// Disk and memory behaviour against a compiler that counts its calls and
/// returns a cubin made of the request.
class KernelCacheTest : public ::testing::Test {
protected:
  KernelCache::Options options(std::chrono::milliseconds delay = {}) {
    KernelCache::Options result;
    result.diskDir = dir.str("cache");
    result.compiler =
        [this,
         delay](const CompileRequest &request) -> llvm::Expected<std::string> {
      ++compilerCalls;
      std::this_thread::sleep_for(delay);
      return fakeCubin(request);
    };
    return result;
  }

  TempDir dir;
  std::atomic<int> compilerCalls{0};
};

//===- Keys ---------------------------------------------------------------===//

TEST_F(KernelCacheTest, IdenticalRequestsGiveIdenticalKeys) {
  KernelCache cache(options());
  CacheKey a = cache.keyFor(request());
  CacheKey b = cache.keyFor(request());
  EXPECT_EQ(a.uri, "decode_test");
  EXPECT_EQ(a.hash, b.hash);
  EXPECT_EQ(a.hash.size(), 64u);
  // A second cache (another process, say) agrees.
  EXPECT_EQ(KernelCache(options()).keyFor(request()).hash, a.hash);
}

TEST_F(KernelCacheTest, SourceArchUriAndOptionsChangeTheHash) {
  KernelCache cache(options());
  std::string base = cache.keyFor(request()).hash;
  EXPECT_NE(cache.keyFor(request("decode_test", "// other")).hash, base);
  EXPECT_NE(
      cache.keyFor(request("decode_test", "// kernel source", Arch::SM80)).hash,
      base);
  EXPECT_NE(cache.keyFor(request("decode_other")).hash, base);
  KernelCache::Options lineInfo = options();
  lineInfo.nvrtc.lineInfo = true;
  EXPECT_NE(KernelCache(lineInfo).keyFor(request()).hash, base);
}

TEST_F(KernelCacheTest, FileNameAndDiskLayout) {
  KernelCache cache(options());
  CacheKey key = cache.keyFor(request());
  EXPECT_EQ(key.fileName(), "decode_test-" + key.hash.substr(0, 16) + ".cubin");
  std::optional<std::string> path = cache.diskPath(request());
  ASSERT_TRUE(path);
  llvm::SmallString<256> expected(dir.str("cache"));
  llvm::sys::path::append(expected, ATTN_TEST_VERSION, "sm_90a",
                          key.fileName());
  EXPECT_EQ(*path, expected.str());
}

TEST_F(KernelCacheTest, InvalidUriIsAnErrorAndNothingCompiles) {
  KernelCache cache(options());
  for (const char *uri : {"", "../escape", "has space", "dir/name"}) {
    llvm::Expected<std::shared_ptr<const std::string>> cubin =
        cache.getCubin(request(uri));
    ASSERT_FALSE(bool(cubin)) << uri;
    EXPECT_TRUE(llvm::StringRef(llvm::toString(cubin.takeError()))
                    .contains("invalid kernel uri"));
  }
  EXPECT_EQ(compilerCalls, 0);
}

TEST(KernelCacheGlobal, IsOneInstance) {
  EXPECT_EQ(&KernelCache::global(), &KernelCache::global());
}

//===- Memory -------------------------------------------------------------===//

TEST_F(KernelCacheTest, SecondGetIsAMemoryHit) {
  KernelCache cache(options());
  auto first = cache.getCubin(request());
  auto second = cache.getCubin(request());
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->get(), second->get());
  EXPECT_EQ(**first, fakeCubin(request()));
  EXPECT_EQ(cache.stats().compiles, 1u);
  EXPECT_EQ(cache.stats().memoryHits, 1u);
}

TEST_F(KernelCacheTest, LeastRecentlyUsedIsEvicted) {
  KernelCache::Options opts = options();
  opts.useDisk = false;
  opts.maxEntries = 2;
  KernelCache cache(opts);
  for (const char *uri : {"a", "b", "a", "c"}) // "b" is now the oldest
    ASSERT_TRUE(bool(cache.getCubin(request(uri))));
  EXPECT_EQ(compilerCalls, 3);
  ASSERT_TRUE(bool(cache.getCubin(request("a"))));
  EXPECT_EQ(compilerCalls, 3);
  ASSERT_TRUE(bool(cache.getCubin(request("b"))));
  EXPECT_EQ(compilerCalls, 4);
}

//===- Disk ---------------------------------------------------------------===//

TEST_F(KernelCacheTest, CompileWritesAFileThatAFreshCacheReads) {
  {
    KernelCache cache(options());
    ASSERT_TRUE(bool(cache.getCubin(request())));
    EXPECT_EQ(cache.stats().compiles, 1u);
    EXPECT_TRUE(llvm::sys::fs::exists(*cache.diskPath(request())));
  }
  KernelCache fresh(options());
  auto cubin = fresh.getCubin(request());
  ASSERT_TRUE(bool(cubin));
  EXPECT_EQ(**cubin, fakeCubin(request()));
  EXPECT_EQ(fresh.stats().compiles, 0u);
  EXPECT_EQ(fresh.stats().diskHits, 1u);
  EXPECT_EQ(compilerCalls, 1);
}

/// Damages the cached file with `damage`, then checks that a fresh cache
/// rejects it, recompiles, and leaves a good file behind.
void expectDamageIsRepaired(const KernelCache::Options &opts,
                            const std::function<void(std::string &)> &damage,
                            const std::string &expected) {
  std::string path = *KernelCache(opts).diskPath(request());
  std::string bytes = readFile(path);
  ASSERT_FALSE(bytes.empty());
  damage(bytes);
  writeFile(path, bytes);

  KernelCache second(opts);
  auto cubin = second.getCubin(request());
  ASSERT_TRUE(bool(cubin));
  EXPECT_EQ(**cubin, expected);
  EXPECT_EQ(second.stats().corruptEntries, 1u);
  EXPECT_EQ(second.stats().compiles, 1u);
  EXPECT_EQ(second.stats().diskHits, 0u);

  KernelCache third(opts);
  ASSERT_TRUE(bool(third.getCubin(request())));
  EXPECT_EQ(third.stats().diskHits, 1u);
  EXPECT_EQ(third.stats().corruptEntries, 0u);
}

TEST_F(KernelCacheTest, TruncatedFileIsRecompiledAndRepaired) {
  ASSERT_TRUE(bool(KernelCache(options()).getCubin(request())));
  expectDamageIsRepaired(
      options(), [](std::string &bytes) { bytes.resize(bytes.size() - 3); },
      fakeCubin(request()));
  // Shorter than the header, too.
  expectDamageIsRepaired(
      options(), [](std::string &bytes) { bytes.resize(10); },
      fakeCubin(request()));
}

TEST_F(KernelCacheTest, FlippedByteIsRecompiledAndRepaired) {
  ASSERT_TRUE(bool(KernelCache(options()).getCubin(request())));
  expectDamageIsRepaired(
      options(), [](std::string &bytes) { bytes.back() ^= 0x01; },
      fakeCubin(request()));
  expectDamageIsRepaired(
      options(), [](std::string &bytes) { bytes[0] ^= 0x01; },
      fakeCubin(request()));
}

TEST_F(KernelCacheTest, FileOfAnotherKeyIsNotTrusted) {
  KernelCache cache(options());
  ASSERT_TRUE(bool(cache.getCubin(request())));
  ASSERT_TRUE(bool(cache.getCubin(request("decode_test", "// other"))));
  std::string other =
      readFile(*cache.diskPath(request("decode_test", "// other")));
  expectDamageIsRepaired(
      options(), [&](std::string &bytes) { bytes = other; },
      fakeCubin(request()));
}

/// Plants `plant` at the entry's path, then checks that a cache counts it
/// corrupt and compiles without blocking or reading it, and returns the
/// kernel.
void expectPlantedEntryIsRecompiled(
    const KernelCache::Options &opts,
    const std::function<void(const std::string &)> &plant,
    const std::string &expected) {
  std::string path = *KernelCache(opts).diskPath(request());
  makePrivateDirectories(llvm::sys::path::parent_path(path).str());
  plant(path);
  alarm(20); // a FIFO read with a blocking open hangs: fail, not hang
  KernelCache cache(opts);
  auto cubin = cache.getCubin(request());
  alarm(0);
  ASSERT_TRUE(bool(cubin)) << llvm::toString(cubin.takeError());
  EXPECT_EQ(**cubin, expected);
  EXPECT_EQ(cache.stats().corruptEntries, 1u);
  EXPECT_EQ(cache.stats().compiles, 1u);
}

TEST_F(KernelCacheTest, FifoAtTheEntryIsReplaced) {
  expectPlantedEntryIsRecompiled(
      options(),
      [](const std::string &path) { ASSERT_EQ(mkfifo(path.c_str(), 0600), 0); },
      fakeCubin(request()));
  // The rename replaced the FIFO with a real entry.
  KernelCache fresh(options());
  ASSERT_TRUE(bool(fresh.getCubin(request())));
  EXPECT_EQ(fresh.stats().diskHits, 1u);
}

TEST_F(KernelCacheTest, SymlinkToADeviceAtTheEntryIsReplaced) {
  expectPlantedEntryIsRecompiled(
      options(),
      [](const std::string &path) {
        ASSERT_EQ(symlink("/dev/zero", path.c_str()), 0);
      },
      fakeCubin(request()));
  std::string path = *KernelCache(options()).diskPath(request());
  llvm::sys::fs::file_status status;
  ASSERT_FALSE(llvm::sys::fs::status(path, status, /*follow=*/false));
  EXPECT_EQ(status.type(), llvm::sys::fs::file_type::regular_file);
  KernelCache fresh(options());
  ASSERT_TRUE(bool(fresh.getCubin(request())));
  EXPECT_EQ(fresh.stats().diskHits, 1u);
}

TEST_F(KernelCacheTest, DirectoryAtTheEntryStillGivesTheKernel) {
  // A rename cannot replace a directory: the kernel is served uncached.
  testing::internal::CaptureStderr();
  expectPlantedEntryIsRecompiled(
      options(),
      [](const std::string &path) {
        ASSERT_FALSE(llvm::sys::fs::create_directory(path));
      },
      fakeCubin(request()));
  std::string warning = testing::internal::GetCapturedStderr();
  EXPECT_NE(warning.find("kernels are not cached on disk"), std::string::npos)
      << warning;
}

TEST_F(KernelCacheTest, EntryUnderAnotherKeyWithItsHeaderRewrittenIsRejected) {
  // An entry copied to another kernel's path and given that kernel's key in
  // its header: the checksum binds the key, so it is still corrupt.
  KernelCache cache(options());
  ASSERT_TRUE(bool(cache.getCubin(request())));
  ASSERT_TRUE(bool(cache.getCubin(request("decode_test", "// other"))));
  std::string other =
      readFile(*cache.diskPath(request("decode_test", "// other")));
  std::string key = cache.keyFor(request()).hash;
  constexpr size_t kKeyOffset = 8 + 4; // magic, format version
  ASSERT_EQ(other.substr(kKeyOffset, 64),
            cache.keyFor(request("decode_test", "// other")).hash);
  expectDamageIsRepaired(
      options(),
      [&](std::string &bytes) { bytes = other.replace(kKeyOffset, 64, key); },
      fakeCubin(request()));
}

TEST(CacheEntryTest, TheChecksumBindsKeyAndArch) {
  std::string key(64, 'a'), otherKey(64, 'b');
  std::string bytes = cacheEntryBytes(key, Arch::SM90a, "cubin bytes");
  EXPECT_EQ(parseCacheEntry(bytes, key, Arch::SM90a),
            std::optional<llvm::StringRef>("cubin bytes"));
  EXPECT_EQ(parseCacheEntry(bytes, key, Arch::SM80), std::nullopt);
  EXPECT_EQ(parseCacheEntry(bytes, otherKey, Arch::SM90a), std::nullopt);
  // The header's key rewritten to the other key: the checksum disagrees.
  std::string rewritten = bytes;
  rewritten.replace(12, 64, otherKey);
  EXPECT_EQ(parseCacheEntry(rewritten, otherKey, Arch::SM90a), std::nullopt);
  // Truncated, extended, a key hash of the wrong size: never out of bounds.
  for (size_t size = 0; size < bytes.size(); ++size)
    EXPECT_EQ(parseCacheEntry(bytes.substr(0, size), key, Arch::SM90a),
              std::nullopt);
  EXPECT_EQ(parseCacheEntry(bytes + "x", key, Arch::SM90a), std::nullopt);
  EXPECT_EQ(parseCacheEntry(bytes, "short", Arch::SM90a), std::nullopt);
}

TEST_F(KernelCacheTest, NoTemporaryFilesRemain) {
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      // Separate caches: every thread writes, several to the same file.
      KernelCache cache(options());
      EXPECT_TRUE(bool(cache.getCubin(request("k" + std::to_string(i % 3)))));
    });
  for (std::thread &thread : threads)
    thread.join();
  std::vector<std::string> files = filesUnder(dir.str("cache"));
  EXPECT_EQ(files.size(), 3u);
  for (const std::string &file : files)
    EXPECT_TRUE(llvm::StringRef(file).ends_with(".cubin")) << file;
}

TEST_F(KernelCacheTest, UnwritableCacheDirStillReturnsTheCubin) {
  // A regular file where a directory should be: fails for root too.
  writeFile(dir.str("blocker"), "not a directory");
  KernelCache::Options opts = options();
  opts.diskDir = dir.str("blocker") + "/cache";
  KernelCache cache(opts);
  for (int i = 0; i < 2; ++i) {
    auto cubin = cache.getCubin(request("k" + std::to_string(i)));
    ASSERT_TRUE(bool(cubin)) << llvm::toString(cubin.takeError());
    EXPECT_EQ(**cubin, fakeCubin(request("k" + std::to_string(i))));
  }
  EXPECT_EQ(cache.stats().compiles, 2u);
}

TEST_F(KernelCacheTest, DiskCanBeTurnedOff) {
  KernelCache::Options opts = options();
  opts.useDisk = false;
  KernelCache byOption(opts);
  EXPECT_FALSE(byOption.diskPath(request()));
  ASSERT_TRUE(bool(byOption.getCubin(request())));

  ASSERT_EQ(setenv("ATTN_CACHE_DISABLE", "1", 1), 0);
  KernelCache byEnvironment(options());
  unsetenv("ATTN_CACHE_DISABLE");
  EXPECT_FALSE(byEnvironment.diskPath(request()));
  ASSERT_TRUE(bool(byEnvironment.getCubin(request())));

  EXPECT_TRUE(filesUnder(dir.str()).empty());
}

TEST_F(KernelCacheTest, DefaultDiskDirFollowsTheEnvironment) {
  auto saved = [](const char *name) -> std::optional<std::string> {
    const char *value = getenv(name);
    return value ? std::optional<std::string>(value) : std::nullopt;
  };
  std::optional<std::string> cacheDir = saved("ATTN_CACHE_DIR"),
                             xdg = saved("XDG_CACHE_HOME"),
                             home = saved("HOME");
  setenv("ATTN_CACHE_DIR", "/tmp/attn-a", 1);
  setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
  setenv("HOME", "/tmp/home", 1);
  std::optional<std::string> fromAttn = KernelCache::defaultDiskDir();
  unsetenv("ATTN_CACHE_DIR");
  std::optional<std::string> fromXdg = KernelCache::defaultDiskDir();
  unsetenv("XDG_CACHE_HOME");
  std::optional<std::string> fromHome = KernelCache::defaultDiskDir();
  unsetenv("HOME");
  std::optional<std::string> none = KernelCache::defaultDiskDir();
  for (auto [name, value] :
       {std::pair{"ATTN_CACHE_DIR", cacheDir}, std::pair{"XDG_CACHE_HOME", xdg},
        std::pair{"HOME", home}})
    if (value)
      setenv(name, value->c_str(), 1);
  EXPECT_EQ(fromAttn, std::optional<std::string>("/tmp/attn-a"));
  EXPECT_EQ(fromXdg, std::optional<std::string>("/tmp/xdg/attn"));
  EXPECT_EQ(fromHome, std::optional<std::string>("/tmp/home/.cache/attn"));
  EXPECT_EQ(none, std::nullopt);
}

//===- Single flight and failures -----------------------------------------===//

TEST_F(KernelCacheTest, ConcurrentRequestsForOneKeyCompileOnce) {
  KernelCache cache(options(std::chrono::milliseconds(200)));
  std::vector<std::shared_ptr<const std::string>> results(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < results.size(); ++i)
    threads.emplace_back([&, i] {
      auto cubin = cache.getCubin(request());
      ASSERT_TRUE(bool(cubin));
      results[i] = *cubin;
    });
  for (std::thread &thread : threads)
    thread.join();
  EXPECT_EQ(compilerCalls, 1);
  for (const auto &result : results) {
    ASSERT_TRUE(result);
    EXPECT_EQ(result.get(), results.front().get());
  }
  EXPECT_EQ(cache.stats().memoryHits, 7u);
}

TEST_F(KernelCacheTest, DifferentKeysCompileSeparately) {
  KernelCache cache(options(std::chrono::milliseconds(50)));
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      auto cubin = cache.getCubin(request("k" + std::to_string(i)));
      ASSERT_TRUE(bool(cubin));
      EXPECT_EQ(**cubin, fakeCubin(request("k" + std::to_string(i))));
    });
  for (std::thread &thread : threads)
    thread.join();
  EXPECT_EQ(compilerCalls, 4);
}

TEST_F(KernelCacheTest, FailureReachesEveryWaiterAndIsNotCached) {
  // The leader's compile blocks until every other thread is waiting on it,
  // then fails.
  constexpr int kWaiters = 7;
  std::atomic<int> waiting{0};
  std::atomic<bool> leaderStarted{false};
  KernelCache::Options opts = options();
  opts.compiler =
      [&](const CompileRequest &request) -> llvm::Expected<std::string> {
    ++compilerCalls;
    leaderStarted = true;
    while (waiting < kWaiters)
      std::this_thread::yield();
    // Let the last waiters get from the counter into the cache's wait.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return llvm::make_error<NvrtcError>(
        NVRTC_ERROR_COMPILATION, request.uri, request.arch,
        std::vector<std::string>{"-std=c++17"},
        "probe.cu(3): error: identifier \"oops\" is undefined");
  };
  KernelCache cache(opts);

  auto expectNvrtcFailure = [](llvm::Error error) {
    bool sawNvrtcError = false;
    llvm::handleAllErrors(
        std::move(error),
        [&](const NvrtcError &nvrtc) {
          sawNvrtcError = true;
          EXPECT_TRUE(llvm::StringRef(nvrtc.getLog()).contains("oops"));
        },
        [](const llvm::ErrorInfoBase &other) {
          ADD_FAILURE() << "not an NvrtcError: " << other.message();
        });
    EXPECT_TRUE(sawNvrtcError);
  };

  std::vector<std::thread> threads;
  threads.emplace_back([&] {
    auto cubin = cache.getCubin(request());
    ASSERT_FALSE(bool(cubin));
    expectNvrtcFailure(cubin.takeError());
  });
  while (!leaderStarted)
    std::this_thread::yield();
  for (int i = 0; i < kWaiters; ++i)
    threads.emplace_back([&] {
      ++waiting;
      auto cubin = cache.getCubin(request());
      ASSERT_FALSE(bool(cubin));
      expectNvrtcFailure(cubin.takeError());
    });
  for (std::thread &thread : threads)
    thread.join();
  EXPECT_EQ(compilerCalls, 1);
  // No entry, and no lock file: the leader removes it after a failure too.
  EXPECT_EQ(filesUnder(dir.str()), std::vector<std::string>{});

  // Not cached: the next request compiles again.
  waiting = kWaiters;
  auto retry = cache.getCubin(request());
  ASSERT_FALSE(bool(retry));
  llvm::consumeError(retry.takeError());
  EXPECT_EQ(compilerCalls, 2);
}

//===- Single flight across processes -------------------------------------===//

/// Forks a child that runs `body` and exits with its result; returns its pid.
/// The child never returns to the test (no gtest teardown runs there).
pid_t forkChild(const std::function<int()> &body) {
  pid_t pid = fork();
  if (pid == 0)
    _exit(body());
  return pid;
}

/// The exit status of `pid`, or -1 if it did not exit within `timeout` (it
/// is then killed).
int waitForChild(pid_t pid, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// A compiler for several processes: sleeps, then appends one byte to
/// `counter`, so the file's size counts compiles across processes.
KernelCache::Options countingOptions(const std::string &diskDir,
                                     const std::string &counter) {
  KernelCache::Options result;
  result.diskDir = diskDir;
  result.compiler =
      [counter](const CompileRequest &request) -> llvm::Expected<std::string> {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    int fd = ::open(counter.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0600);
    if (fd < 0 || ::write(fd, "x", 1) != 1)
      return llvm::createStringError("cannot count a compile");
    ::close(fd);
    return fakeCubin(request);
  };
  return result;
}

uint64_t sizeOf(const std::string &path) {
  uint64_t size = 0;
  return llvm::sys::fs::file_size(path, size) ? 0 : size;
}

TEST_F(KernelCacheTest, ColdProcessesOnOneCacheCompileOnce) {
  constexpr int kProcesses = 16;
  std::string counter = dir.str("compiles");
  KernelCache::Options opts = countingOptions(dir.str("cache"), counter);
  int start[2];
  ASSERT_EQ(pipe(start), 0);
  std::vector<pid_t> children;
  for (int i = 0; i < kProcesses; ++i)
    children.push_back(forkChild([&] {
      // Released together, when the parent closes the pipe.
      ::close(start[1]);
      char byte;
      (void)::read(start[0], &byte, 1);
      KernelCache cache(opts);
      auto cubin = cache.getCubin(request());
      return cubin && **cubin == fakeCubin(request()) ? 0 : 1;
    }));
  ::close(start[0]);
  ::close(start[1]);
  for (pid_t child : children)
    EXPECT_EQ(waitForChild(child, std::chrono::seconds(60)), 0);
  EXPECT_EQ(sizeOf(counter), 1u) << "compiles across processes";
  // The entry is there, and no lock file is left behind.
  std::vector<std::string> files = filesUnder(dir.str("cache"));
  ASSERT_EQ(files.size(), 1u);
  EXPECT_TRUE(llvm::StringRef(files[0]).ends_with(".cubin")) << files[0];
}

/// Forks a child that takes the lock of the entry for request() and holds
/// it until killed; returns once it holds it.
pid_t forkLockHolder(const std::string &entryPath) {
  makePrivateDirectories(llvm::sys::path::parent_path(entryPath).str());
  int ready[2];
  EXPECT_EQ(pipe(ready), 0);
  pid_t holder = forkChild([&] {
    int fd = ::open((entryPath + ".lock").c_str(), O_RDWR | O_CREAT, 0600);
    if (fd < 0 || flock(fd, LOCK_EX) != 0)
      return 1;
    (void)::write(ready[1], "x", 1);
    for (;;)
      pause();
  });
  ::close(ready[1]);
  char byte = 0;
  EXPECT_EQ(::read(ready[0], &byte, 1), 1) << "the holder did not lock";
  ::close(ready[0]);
  return holder;
}

TEST_F(KernelCacheTest, LockOfAKilledProcessIsReleased) {
  std::string counter = dir.str("compiles");
  KernelCache::Options opts = countingOptions(dir.str("cache"), counter);
  opts.diskLockTimeout = std::chrono::seconds(60);
  pid_t holder = forkLockHolder(*KernelCache(opts).diskPath(request()));
  ASSERT_EQ(kill(holder, SIGKILL), 0);
  ASSERT_EQ(waitForChild(holder, std::chrono::seconds(10)), -1); // killed
  auto start = std::chrono::steady_clock::now();
  KernelCache cache(opts);
  auto cubin = cache.getCubin(request());
  ASSERT_TRUE(bool(cubin)) << llvm::toString(cubin.takeError());
  EXPECT_EQ(**cubin, fakeCubin(request()));
  // Promptly: nowhere near the 60 s a live holder could cost.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(sizeOf(counter), 1u);
}

TEST_F(KernelCacheTest, LockOfAHungProcessOnlyDelays) {
  std::string counter = dir.str("compiles");
  KernelCache::Options opts = countingOptions(dir.str("cache"), counter);
  opts.diskLockTimeout = std::chrono::milliseconds(300);
  pid_t holder = forkLockHolder(*KernelCache(opts).diskPath(request()));
  auto start = std::chrono::steady_clock::now();
  KernelCache cache(opts);
  testing::internal::CaptureStderr();
  auto cubin = cache.getCubin(request());
  std::string warning = testing::internal::GetCapturedStderr();
  auto elapsed = std::chrono::steady_clock::now() - start;
  kill(holder, SIGKILL);
  waitForChild(holder, std::chrono::seconds(10));
  ASSERT_TRUE(bool(cubin)) << llvm::toString(cubin.takeError());
  EXPECT_EQ(**cubin, fakeCubin(request()));
  EXPECT_EQ(sizeOf(counter), 1u);
  // It waited for the holder, up to the timeout, and said so.
  EXPECT_GE(elapsed, std::chrono::milliseconds(300));
  EXPECT_LT(elapsed, std::chrono::seconds(10));
  EXPECT_NE(warning.find("for another process to compile decode_test"),
            std::string::npos)
      << warning;
}

TEST_F(KernelCacheTest, LockFileNotTheUsersOwnIsNotWaitedOn) {
  // A lock file someone else could hold (writable by others, or another
  // user's): the compile goes ahead at once rather than wait on its holder.
  std::vector<std::pair<std::string, std::function<int(const char *)>>> spoils;
  spoils.emplace_back("writable by others",
                      [](const char *lock) { return chmod(lock, 0666); });
  if (geteuid() == 0)
    spoils.emplace_back("another user's", [](const char *lock) {
      return chown(lock, kOtherUser, gid_t(-1));
    });
  for (const auto &[name, spoil] : spoils) {
    SCOPED_TRACE(name);
    TempDir scratch;
    std::string counter = scratch.str("compiles");
    KernelCache::Options opts = countingOptions(scratch.str("cache"), counter);
    opts.diskLockTimeout = std::chrono::seconds(60);
    std::string entry = *KernelCache(opts).diskPath(request());
    pid_t holder = forkLockHolder(entry);
    ASSERT_EQ(spoil((entry + ".lock").c_str()), 0);
    auto start = std::chrono::steady_clock::now();
    KernelCache cache(opts);
    auto cubin = cache.getCubin(request());
    auto elapsed = std::chrono::steady_clock::now() - start;
    kill(holder, SIGKILL);
    waitForChild(holder, std::chrono::seconds(10));
    ASSERT_TRUE(bool(cubin)) << llvm::toString(cubin.takeError());
    EXPECT_EQ(**cubin, fakeCubin(request()));
    EXPECT_LT(elapsed, std::chrono::seconds(10));
    EXPECT_EQ(sizeOf(counter), 1u);
  }
}

//===- Entries that hold no cubin for their arch --------------------------===//

TEST_F(KernelCacheTest, IntactEntryWithoutACubinForItsArchIsRecompiled) {
  // The header and checksum are right (anyone can compute them): the bytes
  // are still no sm_90a cubin, so they never reach the driver.
  CacheKey key = KernelCache(options()).keyFor(request());
  for (const std::string &payload :
       {std::string("random bytes, not an ELF image"),
        cubinImage(Arch::SM80, "an sm_80 cubin under an sm_90a key")}) {
    SCOPED_TRACE(payload.substr(0, 16));
    std::string path = *KernelCache(options()).diskPath(request());
    makePrivateDirectories(llvm::sys::path::parent_path(path).str());
    writeFile(path, cacheEntryBytes(key.hash, Arch::SM90a, payload));
    ASSERT_EQ(chmod(path.c_str(), 0600), 0);
    KernelCache cache(options());
    auto cubin = cache.getCubin(request());
    ASSERT_TRUE(bool(cubin)) << llvm::toString(cubin.takeError());
    EXPECT_EQ(**cubin, fakeCubin(request()));
    EXPECT_EQ(cache.stats().corruptEntries, 1u);
    EXPECT_EQ(cache.stats().diskHits, 0u);
  }
}

//===- Whom the disk cache trusts -----------------------------------------===//

/// Sets the umask for the life of the object.
class ScopedUmask {
public:
  explicit ScopedUmask(mode_t mask) : saved(::umask(mask)) {}
  ~ScopedUmask() { ::umask(saved); }

private:
  mode_t saved;
};

TEST_F(KernelCacheTest, CreatesDirectoriesAndEntriesPrivateWhateverTheUmask) {
  // 0 would give mkdir's and open's usual modes (0777, 0666) unmasked; 0277
  // would leave directories attn could not create anything in.
  for (mode_t mask : {mode_t(0), mode_t(0277)}) {
    SCOPED_TRACE(mask);
    // A root with a missing parent: attn creates both.
    std::string root = dir.str(mask ? "restrictive/cache" : "open/cache");
    KernelCache::Options opts = options();
    opts.diskDir = root;
    std::string path = *KernelCache(opts).diskPath(request());
    {
      ScopedUmask umask(mask);
      KernelCache cache(opts);
      ASSERT_TRUE(bool(cache.getCubin(request())));
    }
    llvm::StringRef arch = llvm::sys::path::parent_path(path);
    llvm::StringRef version = llvm::sys::path::parent_path(arch);
    for (llvm::StringRef created : {llvm::sys::path::parent_path(root),
                                    llvm::StringRef(root), version, arch})
      EXPECT_EQ(modeOf(created.str()), 0700u) << created.str();
    EXPECT_EQ(modeOf(path), 0600u);
    KernelCache fresh(opts);
    ASSERT_TRUE(bool(fresh.getCubin(request())));
    EXPECT_EQ(fresh.stats().diskHits, 1u);
  }
}

/// Fills the cache with request()'s entry, changes the cache with `spoil`,
/// then checks that a fresh cache compiles instead of loading the entry,
/// warning once with `fragments` (and the kernel still comes back).
void expectRefused(const KernelCache::Options &opts,
                   const std::function<void(const std::string &entry)> &spoil,
                   std::initializer_list<std::string> fragments,
                   bool entryRefused) {
  std::string entry = *KernelCache(opts).diskPath(request());
  llvm::sys::fs::remove(*KernelCache(opts).diskPath(request("other_kernel")));
  {
    KernelCache writer(opts);
    ASSERT_TRUE(bool(writer.getCubin(request())));
    ASSERT_EQ(modeOf(entry), 0600u);
  }
  spoil(entry);
  testing::internal::CaptureStderr();
  KernelCache cache(opts);
  auto cubin = cache.getCubin(request());
  auto other = cache.getCubin(request("other_kernel"));
  std::string warnings = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(bool(cubin)) << llvm::toString(cubin.takeError());
  ASSERT_TRUE(bool(other)) << llvm::toString(other.takeError());
  EXPECT_EQ(**cubin, fakeCubin(request()));
  EXPECT_EQ(cache.stats().diskHits, 0u) << "loaded what it must refuse";
  EXPECT_EQ(cache.stats().compiles, 2u);
  EXPECT_EQ(cache.stats().refusedEntries, entryRefused ? 1u : 0u);
  for (const std::string &fragment : fragments)
    EXPECT_NE(warnings.find(fragment), std::string::npos)
        << "no \"" << fragment << "\" in: " << warnings;
  // A refused directory: one warning for both kernels. A refused entry:
  // one for it, none for the other kernel.
  EXPECT_EQ(llvm::StringRef(warnings).count("attn: warning:"), 1u) << warnings;
}

TEST_F(KernelCacheTest, CacheDirectoryWritableByOthersIsRefused) {
  std::string root = dir.str("cache");
  expectRefused(
      options(),
      [&](const std::string &) { ASSERT_EQ(chmod(root.c_str(), 0777), 0); },
      {"kernels are not cached on disk: '" + root + "' is not used",
       "writable by others (mode 0777)"},
      /*entryRefused=*/false);
  // Nothing was written there.
  EXPECT_EQ(filesUnder(root).size(), 1u);
}

TEST_F(KernelCacheTest, CacheDirectoryWritableByItsGroupIsRefused) {
  std::string root = dir.str("cache");
  expectRefused(
      options(),
      [&](const std::string &) { ASSERT_EQ(chmod(root.c_str(), 0770), 0); },
      {"'" + root + "' is not used", "writable by its group (mode 0770)"},
      /*entryRefused=*/false);
}

TEST_F(KernelCacheTest, ArchDirectoryWritableByOthersIsRefused) {
  std::string arch =
      llvm::sys::path::parent_path(*KernelCache(options()).diskPath(request()))
          .str();
  expectRefused(
      options(),
      [&](const std::string &) { ASSERT_EQ(chmod(arch.c_str(), 0757), 0); },
      {"'" + arch + "' is not used", "writable by others (mode 0757)"},
      /*entryRefused=*/false);
}

TEST_F(KernelCacheTest, SymbolicLinkBelowTheRootIsRefused) {
  // <root>/<version> swapped for a link to another of the user's
  // directories: below the root, attn follows no link.
  std::string version = dir.str("cache/" ATTN_TEST_VERSION);
  std::string moved = dir.str("moved");
  expectRefused(
      options(),
      [&](const std::string &) {
        ASSERT_EQ(rename(version.c_str(), moved.c_str()), 0);
        ASSERT_EQ(symlink(moved.c_str(), version.c_str()), 0);
      },
      {"'" + version + "' is not used: it is a symbolic link"},
      /*entryRefused=*/false);
}

TEST_F(KernelCacheTest, ParentWritableByOthersIsRefusedUnlessSticky) {
  std::string parent = dir.str("shared");
  makePrivateDirectories(parent);
  KernelCache::Options opts = options();
  opts.diskDir = dir.str("shared/cache");
  expectRefused(
      opts,
      [&](const std::string &) { ASSERT_EQ(chmod(parent.c_str(), 0777), 0); },
      {"'" + *opts.diskDir + "' is not used: the directory above it, '" +
           parent + "', is writable by others without the sticky bit",
       "someone else could replace it"},
      /*entryRefused=*/false);
  // Sticky, as /tmp: no one may rename what they do not own there.
  ASSERT_EQ(chmod(parent.c_str(), 01777), 0);
  KernelCache sticky(opts);
  ASSERT_TRUE(bool(sticky.getCubin(request())));
  EXPECT_EQ(sticky.stats().diskHits, 1u);
  // Group-writable parents are fine (per-user groups).
  ASSERT_EQ(chmod(parent.c_str(), 0770), 0);
  KernelCache group(opts);
  ASSERT_TRUE(bool(group.getCubin(request())));
  EXPECT_EQ(group.stats().diskHits, 1u);
}

TEST_F(KernelCacheTest, EntryWritableByOthersIsRefusedAndReplaced) {
  for (mode_t mode : {mode_t(0666), mode_t(0620)}) {
    SCOPED_TRACE(mode);
    std::string entry = *KernelCache(options()).diskPath(request());
    expectRefused(
        options(),
        [&](const std::string &path) {
          ASSERT_EQ(chmod(path.c_str(), mode), 0);
        },
        {"attn: warning: kernel cache entry '" + entry + "' is not used",
         mode & S_IWOTH ? "writable by others" : "writable by its group",
         "compiling the kernel instead"},
        /*entryRefused=*/true);
    // Replaced by the user's own.
    EXPECT_EQ(modeOf(entry), 0600u);
    KernelCache fresh(options());
    ASSERT_TRUE(bool(fresh.getCubin(request())));
    EXPECT_EQ(fresh.stats().diskHits, 1u);
  }
}

TEST_F(KernelCacheTest, EntryOwnedByAnotherUserIsRefused) {
  if (geteuid() != 0)
    GTEST_SKIP() << "needs root to give an entry to another user (uid "
                 << kOtherUser << "); the mode checks above run for anyone";
  std::string entry = *KernelCache(options()).diskPath(request());
  expectRefused(
      options(),
      [&](const std::string &path) {
        ASSERT_EQ(chown(path.c_str(), kOtherUser, gid_t(-1)), 0);
      },
      {"kernel cache entry '" + entry + "' is not used: it is owned by uid " +
       std::to_string(kOtherUser) + ", not by this user (uid 0)"},
      /*entryRefused=*/true);
}

TEST_F(KernelCacheTest, CacheDirectoryOwnedByAnotherUserIsRefused) {
  if (geteuid() != 0)
    GTEST_SKIP() << "needs root to give a directory to another user (uid "
                 << kOtherUser << "); the mode checks above run for anyone";
  std::string root = dir.str("cache");
  expectRefused(
      options(),
      [&](const std::string &) {
        ASSERT_EQ(chown(root.c_str(), kOtherUser, gid_t(-1)), 0);
      },
      {"'" + root + "' is not used: it is owned by uid " +
       std::to_string(kOtherUser)},
      /*entryRefused=*/false);
}

TEST_F(KernelCacheTest, LockFileLivesInThePrivateDirectoryWhileCompiling) {
  KernelCache::Options opts = options();
  std::string entry = *KernelCache(opts).diskPath(request());
  std::string lock = entry + ".lock";
  unsigned lockMode = 0, dirMode = 0;
  opts.compiler = [&](const CompileRequest &r) -> llvm::Expected<std::string> {
    lockMode = modeOf(lock);
    dirMode = modeOf(llvm::sys::path::parent_path(lock).str());
    return fakeCubin(r);
  };
  KernelCache cache(opts);
  ASSERT_TRUE(bool(cache.getCubin(request())));
  EXPECT_EQ(lockMode, 0600u);
  EXPECT_EQ(dirMode, 0700u);
  EXPECT_EQ(modeOf(lock), ~0u) << "the lock file outlived the compile";
}

TEST_F(KernelCacheTest, FailedWriteLeavesNoFileBehind) {
  // A file size limit makes the write fail (EFBIG) as a full disk would; in
  // a child, so the limit ends with it.
  std::string root = dir.str("cache");
  pid_t child = forkChild([&] {
    signal(SIGXFSZ, SIG_IGN); // EFBIG instead of death
    struct rlimit limit = {512, 512};
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0)
      return 2;
    KernelCache::Options opts = options();
    opts.compiler = [](const CompileRequest &r) -> llvm::Expected<std::string> {
      return cubinImage(r.arch, std::string(4096, 'x'));
    };
    testing::internal::CaptureStderr();
    KernelCache cache(opts);
    auto cubin = cache.getCubin(request());
    std::string warning = testing::internal::GetCapturedStderr();
    if (!cubin || (*cubin)->size() < 4096)
      return 3;
    return warning.find("kernels are not cached on disk: cannot write") !=
                   std::string::npos
               ? 0
               : 4;
  });
  ASSERT_EQ(waitForChild(child, std::chrono::seconds(60)), 0);
  // Neither the partial temporary file nor an empty lock file.
  EXPECT_EQ(filesUnder(root), std::vector<std::string>{});
}

//===- Real NVRTC ---------------------------------------------------------===//

TEST_F(KernelCacheTest, DefaultCompilerIsNvrtc) {
  KernelCache::Options opts;
  opts.diskDir = dir.str("cache");
  KernelCache cache(opts);
  CompileRequest probe =
      request("probe",
              "extern \"C\" __global__ void attn_probe(int *out) { *out = 1; }",
              Arch::SM80);
  auto cubin = cache.getCubin(probe);
  ASSERT_TRUE(bool(cubin)) << llvm::toString(cubin.takeError());
  EXPECT_TRUE(llvm::StringRef(**cubin).starts_with("\x7f"
                                                   "ELF"));
  std::string file = readFile(*cache.diskPath(probe));
  EXPECT_GT(file.size(), (*cubin)->size());
  EXPECT_TRUE(llvm::StringRef(file).ends_with(**cubin));
}

} // namespace
