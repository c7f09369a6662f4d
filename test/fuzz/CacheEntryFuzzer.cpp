//===- CacheEntryFuzzer.cpp - kernel cache disk entries, libFuzzer --------===//
//
// Arbitrary bytes as a file in the kernel cache's disk layer
// (runtime/include/attn/runtime/cache/KernelCache.h), where a crash
// mid-write, a full disk or the user's own other processes sharing
// $ATTN_CACHE_DIR can leave anything. Per input, with a stand-in compiler so
// no NVRTC is involved:
//
//  1. the bytes as the cubin: a cache compiles and writes the entry, and a
//     second cache reads it back from disk if the bytes are a well-formed
//     sm_90a cubin (checkCubinArch), and otherwise counts the entry corrupt
//     and recompiles (writer and reader agree on every payload);
//  2. the bytes as the entry file itself (the user's own, 0600): a cache
//     either serves them as a disk hit (a payload the file really holds,
//     a well-formed sm_90a cubin) or counts the file corrupt and
//     recompiles; nothing else.
// No lock file outlives a step.
//
// Through KernelCache's disk layer on a scratch cache directory rather than
// parseCacheEntry alone: the file and ownership checks, the cubin header
// check, the writer and the cross-process lock are fuzzed with the entry
// format.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/cache/KernelCache.h"
#include "attn/runtime/support/InputFiles.h"
#include "test/fuzz/FuzzScratch.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdlib>
#include <string>

#include <sys/stat.h>

using namespace attn;
using namespace attn::runtime;

namespace {

/// A cache in the scratch directory (created by the cache, so private
/// whatever the umask) whose compiler returns `cubin`, or fails when it is
/// empty.
KernelCache::Options options(std::string cubin) {
  KernelCache::Options o;
  o.diskDir = fuzz::scratchDir("attn-fuzz-cache") + "/cache";
  o.compiler = [cubin](const CompileRequest &) -> llvm::Expected<std::string> {
    if (cubin.empty())
      return llvm::createStringError("no compiler in this step");
    return cubin;
  };
  return o;
}

/// The cubin `cache` gives for `request`; traps on an error.
std::string get(KernelCache &cache, const CompileRequest &request) {
  auto cubin = cache.getCubin(request);
  if (!cubin) {
    llvm::errs() << llvm::toString(cubin.takeError()) << "\n";
    __builtin_trap();
  }
  return **cubin;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  // The scratch directory is the only cache this harness may touch.
  unsetenv("ATTN_CACHE_DISABLE");
  unsetenv("ATTN_AOT_LIBRARY");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  CompileRequest request{"decode_fuzz", "// fuzz source\n", Arch::SM90a};
  std::string path = *KernelCache(options("")).diskPath(request);
  const std::string recompiled = "recompiled cubin";
  auto isCubin = [&](llvm::StringRef cubin) {
    llvm::Error error = checkCubinArch(cubin, request.arch, "fuzz input");
    bool valid = !error;
    llvm::consumeError(std::move(error));
    return valid;
  };
  auto noLockLeft = [&] {
    if (llvm::sys::fs::exists(path + ".lock"))
      __builtin_trap();
  };

  // 1. Written by one cache, read back by another.
  if (!bytes.empty()) {
    llvm::sys::fs::remove(path);
    KernelCache writer(options(bytes));
    if (get(writer, request) != bytes || writer.stats().compiles != 1)
      __builtin_trap();
    noLockLeft();
    KernelCache reader(options(recompiled));
    std::string cubin = get(reader, request);
    KernelCache::Stats stats = reader.stats();
    if (isCubin(bytes) ? cubin != bytes || stats.diskHits != 1
                       : cubin != recompiled || stats.corruptEntries != 1)
      __builtin_trap();
    noLockLeft();
  }

  // 2. The bytes as the file, the user's own.
  if (llvm::sys::fs::create_directories(llvm::sys::path::parent_path(path),
                                        /*IgnoreExisting=*/true,
                                        llvm::sys::fs::perms::owner_all))
    __builtin_trap();
  fuzz::writeFile(path, bytes);
  if (::chmod(path.c_str(), 0600) != 0)
    __builtin_trap();
  KernelCache cache(options(recompiled));
  std::string cubin = get(cache, request);
  KernelCache::Stats stats = cache.stats();
  if (stats.corruptEntries == 1) {
    if (cubin != recompiled || stats.compiles != 1)
      __builtin_trap();
  } else if (stats.diskHits != 1 || stats.compiles != 0 ||
             !llvm::StringRef(bytes).ends_with(cubin) || !isCubin(cubin)) {
    __builtin_trap();
  }
  noLockLeft();
  return 0;
}
