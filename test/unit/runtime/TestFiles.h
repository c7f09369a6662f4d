//===- TestFiles.h - temporary files for the runtime tests ------*- C++ -*-===//
#ifndef ATTN_TEST_UNIT_RUNTIME_TESTFILES_H
#define ATTN_TEST_UNIT_RUNTIME_TESTFILES_H

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <string>

namespace attn::test {

/// A fresh directory, removed with its contents at the end of the test.
class TempDir {
public:
  TempDir() {
    std::error_code ec =
        llvm::sys::fs::createUniqueDirectory("attn-runtime-test", path);
    EXPECT_FALSE(ec) << ec.message();
  }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
  std::string str(llvm::StringRef child = "") const {
    llvm::SmallString<256> result(path);
    if (!child.empty())
      llvm::sys::path::append(result, child);
    return result.str().str();
  }

private:
  llvm::SmallString<256> path;
};

inline std::string readFile(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  return buffer ? (*buffer)->getBuffer().str() : std::string();
}

inline void writeFile(const std::string &path, llvm::StringRef contents) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  ASSERT_FALSE(ec) << ec.message();
  os << contents;
}

} // namespace attn::test

#endif // ATTN_TEST_UNIT_RUNTIME_TESTFILES_H
