//===- InputFiles.h - reading files and JSON attn did not write -*- C++ -*-===//
//
// The one way attn reads input it cannot trust: configs, AOT library
// manifests and cubins, disk cache entries. Any of them may be a FIFO, a
// device, a huge file, a symlink to /dev/zero or hostile JSON; reading one
// must end in the bytes or an Error naming the file and the problem, never
// in a block, a crash or unbounded memory.
//
//  - Files are opened with O_NONBLOCK (a FIFO never blocks the open), checked
//    with fstat on the open descriptor (no race with a rename) to be regular
//    files, and read up to a size bound the caller names.
//  - JSON is scanned before llvm::json::parse sees it: parse recurses once
//    per nesting level and overflows the stack on tens of thousands, and it
//    keeps the last of duplicate keys without a word. Both are refused.
//
// Linux (POSIX) only, as the runtime is.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_INPUTFILES_H
#define ATTN_RUNTIME_INPUTFILES_H

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

  RegularFile(RegularFile &&other) noexcept;
  RegularFile &operator=(RegularFile &&other) noexcept;
  ~RegularFile();

  const std::string &path() const { return filePath; }
  /// The size when opened.
  uint64_t size() const { return fileSize; }
  /// Bytes [offset, offset + count); an error naming the range if it does
  /// not lie within the file, or if the file shrank under it.
  llvm::Expected<std::string> read(uint64_t offset, uint64_t count) const;

private:
  RegularFile(int fd, std::string path, uint64_t size)
      : fd(fd), filePath(std::move(path)), fileSize(size) {}
  int fd = -1;
  std::string filePath;
  uint64_t fileSize = 0;
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

} // namespace attn::runtime

#endif // ATTN_RUNTIME_INPUTFILES_H
