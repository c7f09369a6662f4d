//===- TestFiles.h - temporary files for the runtime tests ------*- C++ -*-===//
#ifndef ATTN_TEST_UNIT_RUNTIME_TESTFILES_H
#define ATTN_TEST_UNIT_RUNTIME_TESTFILES_H

#include "spec/KernelSpec.h"

#include "llvm/Support/Endian.h"
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

/// Fields of a stand-in cubin's ELF header (cubinImage).
struct CubinHeader {
  unsigned sm = 90;          ///< major * 10 + minor
  bool archSpecific = false; ///< the 'a' flag
  uint8_t abiVersion = 8;    ///< 8: CUDA 13's e_flags layout; 7: CUDA 12's
};

/// A stand-in cubin: a well-formed CUDA ELF executable header (as
/// `header` says) and one section holding `payload`. The runtime's checks
/// (InputFiles.h) take it for a cubin of its arch; it holds no kernel, so
/// nothing may load it on a GPU.
inline std::string cubinImage(const CubinHeader &header,
                              llvm::StringRef payload = "") {
  using namespace llvm::support::endian;
  constexpr size_t kHeader = 64, kSection = 64;
  size_t tableOffset = (kHeader + payload.size() + 7) / 8 * 8;
  std::string image(tableOffset + 2 * kSection, '\0');
  char *h = image.data();
  bool cuda13 = header.abiVersion >= 8;
  const char ident[] = {0x7f,
                        'E',
                        'L',
                        'F',
                        2 /*64-bit*/,
                        1 /*LE*/,
                        1 /*version*/,
                        char(cuda13 ? 0x41 : 0x33),
                        char(header.abiVersion)};
  std::copy(std::begin(ident), std::end(ident), h);
  write16le(h + 16, 2);   // an executable
  write16le(h + 18, 190); // EM_CUDA
  write32le(h + 20, 1);
  write64le(h + 40, tableOffset);
  uint32_t flags =
      cuda13 ? 0x06000004 | (header.sm << 8) | (header.archSpecific ? 0x8 : 0)
             : header.sm | (header.sm << 16) | 0x500 |
                   (header.archSpecific ? 0x800 : 0);
  write32le(h + 48, flags);
  write16le(h + 52, kHeader);
  write16le(h + 54, 56);
  write16le(h + 58, kSection);
  write16le(h + 60, 2); // the null section and the payload's
  std::copy(payload.begin(), payload.end(), h + kHeader);
  char *section = h + tableOffset + kSection;
  write32le(section + 4, 1); // SHT_PROGBITS
  write64le(section + 24, kHeader);
  write64le(section + 32, payload.size());
  return image;
}

/// A stand-in cubin for `arch` (sm_90a as CUDA 13's NVRTC writes it: sm_90).
inline std::string cubinImage(attn::Arch arch, llvm::StringRef payload = "") {
  CubinHeader header;
  header.sm = arch == attn::Arch::SM80   ? 80
              : arch == attn::Arch::SM89 ? 89
                                         : 90;
  return cubinImage(header, payload);
}

} // namespace attn::test

#endif // ATTN_TEST_UNIT_RUNTIME_TESTFILES_H
