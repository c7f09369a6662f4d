//===- FuzzScratch.h - a scratch directory for a fuzz target ----*- C++ -*-===//
//
// The runtime's readers take paths, so the runtime fuzz targets write each
// input under a per-process scratch directory, removed at exit.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEST_FUZZ_FUZZSCRATCH_H
#define ATTN_TEST_FUZZ_FUZZSCRATCH_H

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <string>

namespace attn::fuzz {

/// This process's scratch directory, named after `prefix` on first use and
/// removed at exit.
inline const std::string &scratchDir(const char *prefix) {
  // Never destroyed: the exit handler is registered before the static is
  // constructed, so it runs after the static's destructor would have.
  static const std::string &dir = *[prefix] {
    llvm::SmallString<256> path;
    if (std::error_code ec =
            llvm::sys::fs::createUniqueDirectory(prefix, path)) {
      llvm::errs() << "cannot create a scratch directory: " << ec.message()
                   << "\n";
      std::abort();
    }
    std::atexit([] { llvm::sys::fs::remove_directories(scratchDir("")); });
    return new std::string(path.str());
  }();
  return dir;
}

/// Writes `bytes` to `path`; a failure ends the process (a broken harness,
/// not a finding).
inline void writeFile(const std::string &path, llvm::StringRef bytes) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec) {
    llvm::errs() << "cannot write " << path << ": " << ec.message() << "\n";
    std::abort();
  }
  os << bytes;
}

} // namespace attn::fuzz

#endif // ATTN_TEST_FUZZ_FUZZSCRATCH_H
