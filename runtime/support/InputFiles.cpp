//===- InputFiles.cpp - reading files and JSON attn did not write ---------===//
#include "attn/runtime/support/InputFiles.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace attn::runtime {
namespace {

llvm::Error fileError(llvm::StringRef path, const llvm::Twine &message) {
  return llvm::createStringError("'" + path.str() + "' " + message.str());
}

llvm::Error errnoError(llvm::StringRef path, const char *action, int error) {
  return fileError(path, llvm::Twine(action) + ": " + std::strerror(error));
}

/// What a file that is not regular is, for messages.
const char *fileKind(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode))
    return "a device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "of an unknown kind";
}

/// Opens `path` for reading without blocking (a FIFO with no writer would
/// block a plain open forever) and checks, on the open descriptor, that it
/// is a regular file.
llvm::Expected<std::pair<int, uint64_t>> openRegular(llvm::StringRef path) {
  std::string name = path.str();
  int fd;
  do
    fd = ::open(name.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0)
    return errnoError(path, "cannot be opened", errno);
  struct stat status;
  if (::fstat(fd, &status) != 0) {
    int error = errno;
    ::close(fd);
    return errnoError(path, "cannot be examined", error);
  }
  if (!S_ISREG(status.st_mode)) {
    ::close(fd);
    return fileError(path, llvm::Twine("is not a regular file (it is ") +
                               fileKind(status.st_mode) + ")");
  }
  return std::pair{fd, uint64_t(status.st_size)};
}

/// Reads exactly `count` bytes at `offset` into `out`, looping over short
/// reads; fewer bytes only at the end of the file (which then shrank).
llvm::Error preadAll(int fd, llvm::StringRef path, uint64_t offset,
                     uint64_t count, std::string &out) {
  out.resize(count);
  uint64_t done = 0;
  while (done < count) {
    ssize_t got = ::pread(fd, out.data() + done, count - done, offset + done);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      return errnoError(path, "cannot be read", errno);
    if (got == 0)
      return fileError(path, llvm::formatv("ended at byte {0} while reading "
                                           "{1} bytes at offset {2} (it "
                                           "changed while being read)",
                                           offset + done, count, offset));
    done += uint64_t(got);
  }
  return llvm::Error::success();
}

/// "line L, column C" of byte `offset` in `text`.
std::string position(llvm::StringRef text, size_t offset) {
  llvm::StringRef before = text.take_front(offset);
  size_t line = before.count('\n') + 1;
  size_t lineStart = before.rfind('\n');
  size_t column =
      lineStart == llvm::StringRef::npos ? offset + 1 : offset - lineStart;
  return llvm::formatv("line {0}, column {1}", line, column);
}

} // namespace

llvm::Expected<std::string> readRegularFile(llvm::StringRef path,
                                            uint64_t maxBytes) {
  auto opened = openRegular(path);
  if (!opened)
    return opened.takeError();
  auto [fd, size] = *opened;
  if (size > maxBytes) {
    ::close(fd);
    return fileError(path, llvm::formatv("is {0} bytes, larger than the limit "
                                         "of {1} bytes",
                                         size, maxBytes));
  }
  std::string bytes;
  llvm::Error error = preadAll(fd, path, 0, size, bytes);
  ::close(fd);
  if (error)
    return std::move(error);
  return bytes;
}

llvm::Expected<RegularFile> RegularFile::open(llvm::StringRef path) {
  auto opened = openRegular(path);
  if (!opened)
    return opened.takeError();
  return RegularFile(opened->first, path.str(), opened->second);
}

RegularFile::RegularFile(RegularFile &&other) noexcept
    : fd(std::exchange(other.fd, -1)), filePath(std::move(other.filePath)),
      fileSize(other.fileSize) {}

RegularFile &RegularFile::operator=(RegularFile &&other) noexcept {
  std::swap(fd, other.fd);
  std::swap(filePath, other.filePath);
  std::swap(fileSize, other.fileSize);
  return *this;
}

RegularFile::~RegularFile() {
  if (fd >= 0)
    ::close(fd);
}

llvm::Expected<std::string> RegularFile::read(uint64_t offset,
                                              uint64_t count) const {
  // Written so that no sum can overflow.
  if (offset > fileSize || count > fileSize - offset)
    return fileError(filePath,
                     llvm::formatv("has {0} bytes; bytes [{1}, {1} + {2}) lie "
                                   "past its end",
                                   fileSize, offset, count));
  std::string bytes;
  if (llvm::Error error = preadAll(fd, filePath, offset, count, bytes))
    return std::move(error);
  return bytes;
}

llvm::Error checkJsonShape(llvm::StringRef text, llvm::StringRef what,
                           unsigned maxDepth) {
  // One level per open bracket; objects remember their keys and whether the
  // next string is a key. The lexing of strings matches the parser's, so
  // every bracket the parser would recurse on is counted here. Malformed
  // text is scanned as well as can be and left to the parser to report.
  struct Level {
    bool object;
    bool expectKey;
    llvm::StringSet<> keys;
  };
  std::vector<Level> levels;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '{' || c == '[') {
      if (levels.size() >= maxDepth)
        return llvm::createStringError(llvm::formatv(
            "{0}: JSON nests deeper than the limit of {1} levels at {2}", what,
            maxDepth, position(text, i)));
      levels.push_back({c == '{', c == '{', {}});
    } else if (c == '}' || c == ']') {
      if (!levels.empty())
        levels.pop_back();
    } else if (c == ',') {
      if (!levels.empty() && levels.back().object)
        levels.back().expectKey = true;
    } else if (c == '"') {
      size_t start = i;
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\')
          ++i; // the escaped character cannot end the string
      if (i >= text.size())
        break; // unterminated: the parser says so
      if (levels.empty() || !levels.back().object || !levels.back().expectKey)
        continue;
      levels.back().expectKey = false;
      // The key unescaped, by the parser itself (a string does not nest).
      llvm::StringRef literal = text.slice(start, i + 1);
      llvm::Expected<llvm::json::Value> key = llvm::json::parse(literal);
      if (!key) {
        llvm::consumeError(key.takeError());
        break; // a bad string: the parser says so
      }
      llvm::StringRef name = *key->getAsString();
      if (!levels.back().keys.insert(name).second)
        return llvm::createStringError(
            llvm::formatv("{0}: duplicate key \"{1}\" at {2}", what, name,
                          position(text, start)));
    }
  }
  return llvm::Error::success();
}

llvm::Expected<llvm::json::Value> parseJson(llvm::StringRef text,
                                            llvm::StringRef what) {
  if (llvm::Error error = checkJsonShape(text, what))
    return std::move(error);
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(text);
  if (!value)
    return llvm::createStringError(
        what + ": not valid JSON: " + llvm::toString(value.takeError()));
  return value;
}

std::optional<int64_t> getJsonInteger(const llvm::json::Value &value) {
  std::optional<double> number = value.getAsNumber();
  // getAsInteger converts doubles up to and including 2^63, which does not
  // fit; anything in [-2^63, 2^63) converts exactly or is not integral.
  if (!number || !(*number >= -0x1p63 && *number < 0x1p63))
    return std::nullopt;
  return value.getAsInteger();
}

} // namespace attn::runtime
