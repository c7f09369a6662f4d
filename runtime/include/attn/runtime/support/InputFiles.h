//===- InputFiles.h - reading files and JSON attn did not write -*- C++ -*-===//
//
// The one way attn reads input it cannot trust: configs, AOT library
// manifests and cubins, disk cache entries. Any of them may be a FIFO, a
// device, a huge file, a symlink to /dev/zero, hostile JSON or random bytes
// named .cubin; reading one must end in the bytes or an Error naming the
// file and the problem, never in a block, a crash or unbounded memory.
//
//  - Files are opened with O_NONBLOCK (a FIFO never blocks the open), checked
//    with fstat on the open descriptor (no race with a rename) to be regular
//    files, and read up to a size bound the caller names. Errors from the
//    system carry its errno as their code (ErrorInfoBase::convertToErrorCode),
//    so a caller can tell a missing file from a refused one.
//  - JSON is scanned before llvm::json::parse sees it: parse recurses once
//    per nesting level and overflows the stack on tens of thousands, and it
//    keeps the last of duplicate keys without a word. Both are refused.
//  - A cubin's ELF header is checked before the driver sees the image: a
//    64-bit little-endian CUDA executable whose section and program header
//    tables, and every section's bytes, lie inside the image, built for the
//    arch the caller expects (checkCubinArch) or for one the device runs
//    (checkCubinRunsOn).
//
// Linux (POSIX) only, as the runtime is.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_INPUTFILES_H
#define ATTN_RUNTIME_INPUTFILES_H

#include "spec/KernelSpec.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <optional>
#include <string>

namespace attn::runtime {

/// Bound on an AOT library manifest: about 1.3 KiB per kernel, so 64 MiB
/// holds some 50,000 kernels, five times attn-aot's default variant limit.
constexpr uint64_t kMaxManifestBytes = uint64_t(64) << 20;
/// Bound on one cubin (AOT library or disk cache): attn's largest are a few
/// MiB; 256 MiB is far beyond any kernel and still safe to hold in memory.
constexpr uint64_t kMaxCubinBytes = uint64_t(256) << 20;
/// Deepest JSON nesting accepted: attn's own files nest 4 levels; 64 is far
/// from both that and the depth where llvm::json::parse exhausts the stack.
constexpr unsigned kMaxJsonDepth = 64;

/// The whole of the regular file at `path`, at most `maxBytes` long. Errors
/// name the path and the problem: missing or unreadable, not a regular file
/// (FIFO, device, directory, socket), or larger than `maxBytes` (naming the
/// size and the limit).
llvm::Expected<std::string> readRegularFile(llvm::StringRef path,
                                            uint64_t maxBytes);

/// A regular file held open for reads of byte ranges (pread), for packed
/// libraries whose cubins are read one at a time. Move-only; closes on
/// destruction. Reads are thread-safe.
class RegularFile {
public:
  /// Opens `path` as readRegularFile does, without reading it.
  static llvm::Expected<RegularFile> open(llvm::StringRef path);
  /// Opens `name` in the directory open as `dirFd` the same way, but never
  /// through a symbolic link at `name` (an error saying so); `path` names the
  /// file in errors.
  static llvm::Expected<RegularFile> openAt(int dirFd, llvm::StringRef name,
                                            llvm::StringRef path);

  RegularFile(RegularFile &&other) noexcept;
  RegularFile &operator=(RegularFile &&other) noexcept;
  ~RegularFile();

  const std::string &path() const { return filePath; }
  /// The size when opened.
  uint64_t size() const { return fileSize; }
  /// The owner's user id and the permission bits (st_mode & 07777) of the
  /// open file.
  uint32_t owner() const { return fileOwner; }
  uint32_t permissions() const { return fileMode; }
  /// Bytes [offset, offset + count); an error naming the range if it does
  /// not lie within the file, or if the file shrank under it.
  llvm::Expected<std::string> read(uint64_t offset, uint64_t count) const;

private:
  RegularFile(int fd, std::string path, uint64_t size, uint32_t owner,
              uint32_t mode)
      : fd(fd), filePath(std::move(path)), fileSize(size), fileOwner(owner),
        fileMode(mode) {}
  int fd = -1;
  std::string filePath;
  uint64_t fileSize = 0;
  uint32_t fileOwner = 0;
  uint32_t fileMode = 0;
};

/// Checks JSON `text` for what llvm::json::parse cannot be trusted with:
/// nesting deeper than `maxDepth` and an object with two equal keys (keys
/// are compared unescaped, so "a" and "\u0061" are the same key). Errors
/// start with `what` (e.g. the file name) and name the line and column,
/// and the limit or the key. Syntax errors are left to the parser.
llvm::Error checkJsonShape(llvm::StringRef text, llvm::StringRef what,
                           unsigned maxDepth = kMaxJsonDepth);

/// checkJsonShape, then llvm::json::parse; errors start with `what`.
llvm::Expected<llvm::json::Value> parseJson(llvm::StringRef text,
                                            llvm::StringRef what);

/// `value` as an integer, if it is a JSON number with an integral value
/// that fits in int64_t. Unlike json::Value::getAsInteger, never converts
/// an out-of-range double (undefined behaviour), so any input is safe.
std::optional<int64_t> getJsonInteger(const llvm::json::Value &value);

//===- Cubins -------------------------------------------------------------===//

/// The target a cubin's ELF header names.
struct CubinTarget {
  unsigned sm = 0; ///< major * 10 + minor: 80 for sm_80, 90 for sm_90a
  /// The arch-specific flag ('a'), where the header records it: CUDA 13's
  /// NVRTC writes sm_90a cubins with the same header as sm_90 ones.
  bool archSpecific = false;
};

/// "sm_90", "sm_90a".
std::string toString(CubinTarget target);

/// The target of cubin `bytes`, once its ELF header checks out (see the top
/// of this file); otherwise an error naming the first problem, after `what`
/// (e.g. "the cubin of decode_...": "the cubin of decode_... is not a CUDA
/// cubin (no ELF magic)"). CUDA ELF headers come in
/// two layouts, told apart by the ELF ABI version: 7 (CUDA 12 and earlier)
/// keeps the SM in e_flags' low byte and 'a' in bit 11, 8 (CUDA 13) the SM in
/// bits 8-15 and 'a' in bit 3.
llvm::Expected<CubinTarget> readCubinTarget(llvm::StringRef bytes,
                                            llvm::StringRef what);

/// The attn arch of a cubin built for `target`: sm_80, sm_89, sm_90 or
/// sm_90a (both SM90a: a 9.0 device runs either); none for any other.
std::optional<Arch> archOfCubinTarget(CubinTarget target);

/// Whether a device attn runs as `device` (currentDeviceArch) runs a cubin
/// built for `cubin`: cubins run on their own major version at the same or
/// a higher minor (an sm_80 cubin on any 8.x, so on SM89 too), never on
/// another major, and arch-specific ones (sm_90a) only on their exact
/// version.
bool deviceRunsArch(Arch device, Arch cubin);

/// An error unless `bytes` is a well-formed cubin built for `arch`; it
/// starts with `what` and names the arch the cubin is for.
llvm::Error checkCubinArch(llvm::StringRef bytes, Arch arch,
                           llvm::StringRef what);

/// An error unless `bytes` is a well-formed cubin that a device attn runs as
/// `device` can run; it starts with `what` and names the cubin's arch and
/// the device's.
llvm::Error checkCubinRunsOn(llvm::StringRef bytes, Arch device,
                             llvm::StringRef what);

} // namespace attn::runtime

#endif // ATTN_RUNTIME_INPUTFILES_H
