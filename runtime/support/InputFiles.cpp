//===- InputFiles.cpp - reading files and JSON attn did not write ---------===//
#include "attn/runtime/support/InputFiles.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Endian.h"
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

/// Carries `error` as its error code, so callers can tell a missing file
/// (ENOENT) from one that is there but refused.
llvm::Error errnoError(llvm::StringRef path, const char *action, int error) {
  return llvm::createStringError(
      std::error_code(error, std::generic_category()), "'%s' %s: %s",
      path.str().c_str(), action, std::strerror(error));
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

/// Opens `name` (relative to `dirFd`, or AT_FDCWD) for reading without
/// blocking (a FIFO with no writer would block a plain open forever) and
/// checks, on the open descriptor, that it is a regular file; `path` names
/// it in errors. With `noFollow`, a symbolic link at `name` is refused.
llvm::Expected<std::pair<int, struct stat>> openRegular(int dirFd,
                                                        llvm::StringRef name,
                                                        llvm::StringRef path,
                                                        bool noFollow) {
  std::string file = name.str();
  int flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | (noFollow ? O_NOFOLLOW : 0);
  int fd;
  do
    fd = ::openat(dirFd, file.c_str(), flags);
  while (fd < 0 && errno == EINTR);
  if (fd < 0 && noFollow && errno == ELOOP)
    return errnoError(path, "is a symbolic link, not followed", errno);
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
  return std::pair{fd, status};
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
  auto opened = openRegular(AT_FDCWD, path, path, /*noFollow=*/false);
  if (!opened)
    return opened.takeError();
  int fd = opened->first;
  uint64_t size = uint64_t(opened->second.st_size);
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
  auto opened = openRegular(AT_FDCWD, path, path, /*noFollow=*/false);
  if (!opened)
    return opened.takeError();
  const struct stat &status = opened->second;
  return RegularFile(opened->first, path.str(), uint64_t(status.st_size),
                     uint32_t(status.st_uid), uint32_t(status.st_mode & 07777));
}

llvm::Expected<RegularFile> RegularFile::openAt(int dirFd, llvm::StringRef name,
                                                llvm::StringRef path) {
  auto opened = openRegular(dirFd, name, path, /*noFollow=*/true);
  if (!opened)
    return opened.takeError();
  const struct stat &status = opened->second;
  return RegularFile(opened->first, path.str(), uint64_t(status.st_size),
                     uint32_t(status.st_uid), uint32_t(status.st_mode & 07777));
}

RegularFile::RegularFile(RegularFile &&other) noexcept
    : fd(std::exchange(other.fd, -1)), filePath(std::move(other.filePath)),
      fileSize(other.fileSize), fileOwner(other.fileOwner),
      fileMode(other.fileMode) {}

RegularFile &RegularFile::operator=(RegularFile &&other) noexcept {
  std::swap(fd, other.fd);
  std::swap(filePath, other.filePath);
  std::swap(fileSize, other.fileSize);
  std::swap(fileOwner, other.fileOwner);
  std::swap(fileMode, other.fileMode);
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

//===- Cubins -------------------------------------------------------------===//

namespace {

// ELF64 as the CUDA toolchain writes it (llvm/BinaryFormat/ELF.h names the
// generic fields; the CUDA-specific values are NVIDIA's).
constexpr size_t kElfHeaderSize = 64, kSectionHeaderSize = 64,
                 kProgramHeaderSize = 56;
constexpr uint8_t kElfClass64 = 2, kElfLittleEndian = 1, kElfVersion = 1;
/// EI_OSABI: CUDA 12 and earlier write 0x33, CUDA 13 0x41.
constexpr uint8_t kOsAbiCuda = 0x33, kOsAbiCuda13 = 0x41;
/// EI_ABIVERSION, which picks the e_flags layout.
constexpr uint8_t kCudaAbiV1 = 7, kCudaAbiV2 = 8;
constexpr uint16_t kElfExecutable = 2, kMachineCuda = 190;
constexpr uint32_t kSectionNoBits = 8; ///< SHT_NOBITS: no bytes in the file

/// Whether [offset, offset + size) lies in `total` bytes, without overflow.
bool inside(uint64_t offset, uint64_t size, uint64_t total) {
  return offset <= total && size <= total - offset;
}

/// "<what> <problem>": "the cubin of decode_... is built for sm_80, ...".
llvm::Error cubinError(llvm::StringRef what, const llvm::Twine &problem) {
  return llvm::createStringError(what + " " + problem.str());
}

} // namespace

std::string toString(CubinTarget target) {
  return "sm_" + std::to_string(target.sm) + (target.archSpecific ? "a" : "");
}

llvm::Expected<CubinTarget> readCubinTarget(llvm::StringRef bytes,
                                            llvm::StringRef what) {
  using namespace llvm::support::endian;
  auto notACubin = [&](const llvm::Twine &why) {
    return cubinError(what, "is not a CUDA cubin (" + why + ")");
  };
  if (bytes.size() < kElfHeaderSize)
    return notACubin(
        llvm::formatv("{0} bytes, shorter than an ELF header", bytes.size()));
  const char *h = bytes.data();
  auto u8 = [&](size_t at) { return uint8_t(h[at]); };
  if (!bytes.starts_with("\x7f"
                         "ELF"))
    return notACubin("no ELF magic");
  if (u8(4) != kElfClass64 || u8(5) != kElfLittleEndian || u8(6) != kElfVersion)
    return notACubin("not a 64-bit little-endian ELF file");
  if (read16le(h + 18) != kMachineCuda)
    return notACubin(
        llvm::formatv("ELF machine {0}, not CUDA", read16le(h + 18)));
  if (u8(7) != kOsAbiCuda && u8(7) != kOsAbiCuda13)
    return notACubin(llvm::formatv("ELF OS ABI {0:x2}", u8(7)));
  if (u8(8) != kCudaAbiV1 && u8(8) != kCudaAbiV2)
    return notACubin(llvm::formatv("unknown CUDA ELF ABI version {0}", u8(8)));
  if (read16le(h + 16) != kElfExecutable)
    return notACubin(llvm::formatv("ELF type {0}, not an executable "
                                   "(a relocatable object needs linking)",
                                   read16le(h + 16)));
  if (read32le(h + 20) != kElfVersion || read16le(h + 52) != kElfHeaderSize)
    return notACubin("a malformed ELF header");

  uint64_t size = bytes.size();
  uint64_t shoff = read64le(h + 40);
  uint16_t shentsize = read16le(h + 58), shnum = read16le(h + 60),
           shstrndx = read16le(h + 62);
  // No sections, or more than 16 bits count (extended numbering), is no
  // cubin the toolchain writes.
  if (shnum == 0 || shentsize != kSectionHeaderSize || shstrndx >= shnum ||
      !inside(shoff, uint64_t(shnum) * kSectionHeaderSize, size))
    return notACubin("its section header table is malformed or lies past "
                     "its end");
  for (uint16_t i = 0; i < shnum; ++i) {
    const char *section = h + shoff + uint64_t(i) * kSectionHeaderSize;
    if (read32le(section + 4) == kSectionNoBits)
      continue;
    if (!inside(read64le(section + 24), read64le(section + 32), size))
      return notACubin(
          llvm::formatv("section {0} lies past the end of the image", i));
  }
  uint64_t phoff = read64le(h + 32);
  uint16_t phentsize = read16le(h + 54), phnum = read16le(h + 56);
  if (phnum != 0 &&
      (phentsize != kProgramHeaderSize ||
       !inside(phoff, uint64_t(phnum) * kProgramHeaderSize, size)))
    return notACubin("its program header table is malformed or lies past "
                     "its end");
  for (uint16_t i = 0; i < phnum; ++i) {
    const char *segment = h + phoff + uint64_t(i) * kProgramHeaderSize;
    if (!inside(read64le(segment + 8), read64le(segment + 32), size))
      return notACubin(
          llvm::formatv("segment {0} lies past the end of the image", i));
  }

  uint32_t flags = read32le(h + 48);
  CubinTarget target;
  if (u8(8) == kCudaAbiV1) {
    target.sm = flags & 0xff;
    target.archSpecific = flags & 0x800;
  } else {
    target.sm = (flags >> 8) & 0xff;
    target.archSpecific = flags & 0x8;
  }
  return target;
}

std::optional<Arch> archOfCubinTarget(CubinTarget target) {
  if (target.sm == 90)
    return Arch::SM90a;
  if (target.archSpecific)
    return std::nullopt; // attn builds no other arch-specific cubin
  if (target.sm == 80)
    return Arch::SM80;
  if (target.sm == 89)
    return Arch::SM89;
  return std::nullopt;
}

bool deviceRunsArch(Arch device, Arch cubin) {
  // SM80 devices are 8.0, 8.6 and 8.7; SM89 is 8.9; SM90a is 9.0.
  return device == cubin || (cubin == Arch::SM80 && device == Arch::SM89);
}

/// The attn arch of cubin `bytes`, or an error starting with `what`.
static llvm::Expected<Arch> cubinArch(llvm::StringRef bytes,
                                      llvm::StringRef what) {
  llvm::Expected<CubinTarget> target = readCubinTarget(bytes, what);
  if (!target)
    return target.takeError();
  if (std::optional<Arch> arch = archOfCubinTarget(*target))
    return *arch;
  return cubinError(what, "is built for " + toString(*target) +
                              ", which attn does not target (sm_80, sm_89, "
                              "sm_90a)");
}

llvm::Error checkCubinArch(llvm::StringRef bytes, Arch arch,
                           llvm::StringRef what) {
  llvm::Expected<Arch> built = cubinArch(bytes, what);
  if (!built)
    return built.takeError();
  if (*built != arch)
    return cubinError(what, llvm::Twine("is built for ") + toString(*built) +
                                ", not " + toString(arch));
  return llvm::Error::success();
}

llvm::Error checkCubinRunsOn(llvm::StringRef bytes, Arch device,
                             llvm::StringRef what) {
  llvm::Expected<Arch> built = cubinArch(bytes, what);
  if (!built)
    return built.takeError();
  if (!deviceRunsArch(device, *built))
    return cubinError(what, llvm::Twine("is built for ") + toString(*built) +
                                ", and the current GPU runs " +
                                toString(device) + " cubins, not " +
                                toString(*built) + " ones");
  return llvm::Error::success();
}

} // namespace attn::runtime
