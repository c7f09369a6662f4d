//===- InputFilesTest.cpp - reading untrusted files and JSON --------------===//
//
// Regular files are read whole within a bound or by range; FIFOs, devices,
// directories and oversized files are errors naming the path and, for size,
// the limit, and never block; opened in a directory, a symbolic link is
// refused and owner and mode are reported. JSON nested past the limit or
// with duplicate keys is refused before the recursive parser sees it;
// integers are read without undefined conversions. Cubins: the arch of real
// NVRTC cubins and of both CUDA ELF layouts is read from the header, every
// malformed header field and random bytes are refused, and which GPU runs
// which arch is decided without a GPU.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/support/InputFiles.h"

#include "attn/runtime/support/Nvrtc.h"
#include "test/unit/runtime/TestFiles.h"

#include "llvm/Support/Endian.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace attn;
using namespace attn::runtime;
using namespace attn::test;

namespace {

/// The message of an Expected that must have failed.
template <class T> std::string failure(llvm::Expected<T> value) {
  if (value)
    return "(succeeded)";
  return llvm::toString(value.takeError());
}

/// The message of an Error that must be one.
std::string failure(llvm::Error error) {
  if (!error)
    return "(succeeded)";
  return llvm::toString(std::move(error));
}

TEST(InputFilesTest, ReadsARegularFileWithinTheBound) {
  TempDir dir;
  writeFile(dir.str("a"), "0123456789");
  auto bytes = readRegularFile(dir.str("a"), 10);
  ASSERT_TRUE(bool(bytes)) << failure(std::move(bytes));
  EXPECT_EQ(*bytes, "0123456789");
  writeFile(dir.str("empty"), "");
  auto empty = readRegularFile(dir.str("empty"), 0);
  ASSERT_TRUE(bool(empty)) << failure(std::move(empty));
  EXPECT_EQ(*empty, "");
}

TEST(InputFilesTest, LargerThanTheBoundNamesSizeAndLimit) {
  TempDir dir;
  writeFile(dir.str("a"), "0123456789");
  std::string message = failure(readRegularFile(dir.str("a"), 9));
  EXPECT_NE(message.find(dir.str("a")), std::string::npos) << message;
  EXPECT_NE(message.find("is 10 bytes, larger than the limit of 9 bytes"),
            std::string::npos)
      << message;
}

TEST(InputFilesTest, MissingFileNamesThePath) {
  TempDir dir;
  std::string message = failure(readRegularFile(dir.str("nowhere"), 100));
  EXPECT_NE(message.find("nowhere' cannot be opened"), std::string::npos)
      << message;
}

TEST(InputFilesTest, DevicesDirectoriesAndFifosAreRefusedWithoutBlocking) {
  TempDir dir;
  // A FIFO with no writer blocks a plain open(O_RDONLY) forever; the alarm
  // turns a hang into a failure.
  ASSERT_EQ(mkfifo(dir.str("fifo").c_str(), 0600), 0);
  ASSERT_EQ(symlink("/dev/zero", dir.str("zero").c_str()), 0);
  alarm(20);
  struct Case {
    std::string path, kind;
  };
  for (const Case &c :
       {Case{"/dev/zero", "a device"}, Case{dir.str("zero"), "a device"},
        Case{dir.str("fifo"), "a FIFO"}, Case{dir.str(), "a directory"}}) {
    std::string message = failure(readRegularFile(c.path, 1 << 20));
    EXPECT_NE(message.find("'" + c.path + "' is not a regular file (it is " +
                           c.kind + ")"),
              std::string::npos)
        << message;
    EXPECT_NE(failure(RegularFile::open(c.path)).find("is not a regular file"),
              std::string::npos);
  }
  alarm(0);
}

TEST(InputFilesTest, RangesInsideTheFileAreReadAndOthersRefused) {
  TempDir dir;
  writeFile(dir.str("a"), "0123456789");
  auto file = RegularFile::open(dir.str("a"));
  ASSERT_TRUE(bool(file)) << failure(std::move(file));
  EXPECT_EQ(file->size(), 10u);
  auto middle = file->read(3, 4);
  ASSERT_TRUE(bool(middle));
  EXPECT_EQ(*middle, "3456");
  auto end = file->read(10, 0);
  ASSERT_TRUE(bool(end));
  EXPECT_EQ(*end, "");
  EXPECT_NE(failure(file->read(8, 3)).find("lie past its end"),
            std::string::npos);
  // Offsets and counts whose sum overflows are refused, not wrapped.
  EXPECT_NE(failure(file->read(2, ~uint64_t(0))).find("lie past its end"),
            std::string::npos);
  EXPECT_NE(failure(file->read(~uint64_t(0), 2)).find("lie past its end"),
            std::string::npos);
  // A file that shrank under an open descriptor is an error, not short data.
  ASSERT_EQ(truncate(dir.str("a").c_str(), 5), 0);
  EXPECT_NE(failure(file->read(3, 4)).find("changed while being read"),
            std::string::npos);
}

TEST(InputFilesTest, OpenedInADirectoryNoLinkIsFollowed) {
  TempDir dir;
  writeFile(dir.str("a"), "0123456789");
  ASSERT_EQ(chmod(dir.str("a").c_str(), 0640), 0);
  ASSERT_EQ(symlink(dir.str("a").c_str(), dir.str("link").c_str()), 0);
  int dirFd = ::open(dir.str().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dirFd, 0);
  auto file = RegularFile::openAt(dirFd, "a", "shown/a");
  ASSERT_TRUE(bool(file)) << failure(std::move(file));
  EXPECT_EQ(file->size(), 10u);
  EXPECT_EQ(file->owner(), uint32_t(geteuid()));
  EXPECT_EQ(file->permissions(), 0640u);
  EXPECT_EQ(file->path(), "shown/a");
  EXPECT_NE(failure(RegularFile::openAt(dirFd, "link", "shown/link"))
                .find("'shown/link' is a symbolic link, not followed"),
            std::string::npos);
  // A missing file's error carries ENOENT, so callers can tell it apart.
  auto missing = RegularFile::openAt(dirFd, "nowhere", "shown/nowhere");
  ASSERT_FALSE(bool(missing));
  std::error_code code;
  llvm::handleAllErrors(missing.takeError(), [&](const llvm::ErrorInfoBase &e) {
    code = e.convertToErrorCode();
  });
  EXPECT_EQ(code, std::errc::no_such_file_or_directory);
  ::close(dirFd);
}

//===- Cubins -------------------------------------------------------------===//

/// A tiny kernel compiled by NVRTC for `arch`.
std::string nvrtcCubin(Arch arch) {
  auto cubin = compileToCubin(
      "extern \"C\" __global__ void attn_probe(int *out) { *out = 1; }",
      "probe", arch);
  EXPECT_TRUE(bool(cubin)) << failure(std::move(cubin));
  return cubin ? *cubin : std::string();
}

TEST(CubinTest, RealNvrtcCubinsNameTheirArch) {
  // CUDA 13's NVRTC writes ELF ABI version 8, the SM in e_flags bits 8-15;
  // sm_90a and sm_90 cubins have the same header (no 'a' flag).
  for (Arch arch : {Arch::SM80, Arch::SM89, Arch::SM90a}) {
    SCOPED_TRACE(toString(arch));
    std::string cubin = nvrtcCubin(arch);
    auto target = readCubinTarget(cubin, "probe");
    ASSERT_TRUE(bool(target)) << failure(std::move(target));
    EXPECT_EQ(archOfCubinTarget(*target), arch) << toString(*target);
    llvm::Error error = checkCubinArch(cubin, arch, "probe");
    EXPECT_FALSE(bool(error)) << llvm::toString(std::move(error));
    for (Arch other : {Arch::SM80, Arch::SM89, Arch::SM90a})
      if (other != arch)
        EXPECT_NE(failure(checkCubinArch(cubin, other, "kernel probe"))
                      .find("kernel probe is built for " +
                            std::string(toString(arch)) + ", not " +
                            std::string(toString(other))),
                  std::string::npos);
  }
}

TEST(CubinTest, BothElfLayoutsAreRead) {
  struct Case {
    CubinHeader header;
    const char *name;
    std::optional<Arch> arch;
  };
  for (const Case &c : {
           Case{{80, false, 8}, "sm_80", Arch::SM80},
           Case{{89, false, 8}, "sm_89", Arch::SM89},
           Case{{90, false, 8}, "sm_90", Arch::SM90a},
           Case{{90, true, 8}, "sm_90a", Arch::SM90a},
           // CUDA 12: the SM in the low byte, 'a' in bit 11.
           Case{{80, false, 7}, "sm_80", Arch::SM80},
           Case{{90, true, 7}, "sm_90a", Arch::SM90a},
           // Archs attn does not build.
           Case{{86, false, 8}, "sm_86", std::nullopt},
           Case{{100, true, 8}, "sm_100a", std::nullopt},
           Case{{75, false, 7}, "sm_75", std::nullopt},
           Case{{80, true, 8}, "sm_80a", std::nullopt},
       }) {
    SCOPED_TRACE(c.name);
    std::string cubin = cubinImage(c.header, "payload");
    auto target = readCubinTarget(cubin, "k");
    ASSERT_TRUE(bool(target)) << failure(std::move(target));
    EXPECT_EQ(toString(*target), c.name);
    EXPECT_EQ(archOfCubinTarget(*target), c.arch);
    if (!c.arch)
      EXPECT_NE(failure(checkCubinArch(cubin, Arch::SM80, "kernel k"))
                    .find("kernel k is built for " + std::string(c.name) +
                          ", which attn does not target"),
                std::string::npos);
  }
}

TEST(CubinTest, MalformedHeadersAreRefusedNamingTheProblem) {
  const std::string good = cubinImage(Arch::SM90a, "payload");
  using namespace llvm::support::endian;
  struct Case {
    const char *problem;
    std::function<void(std::string &)> damage;
  };
  auto at = [](std::string &bytes, size_t offset) {
    return bytes.data() + offset;
  };
  for (const Case &c : std::initializer_list<Case>{
           {"is not a CUDA cubin (0 bytes, shorter than an ELF header)",
            [](std::string &b) { b.clear(); }},
           {"is not a CUDA cubin (63 bytes, shorter than an ELF header)",
            [](std::string &b) { b.resize(63); }},
           {"(no ELF magic)", [](std::string &b) { b[1] = 'e'; }},
           {"(not a 64-bit little-endian ELF file)",
            [](std::string &b) { b[4] = 1; }},
           {"(not a 64-bit little-endian ELF file)",
            [](std::string &b) { b[5] = 2; }},
           {"(ELF machine 62, not CUDA)",
            [&](std::string &b) { write16le(at(b, 18), 62); }},
           {"(ELF OS ABI 0x00)", [](std::string &b) { b[7] = 0; }},
           {"(unknown CUDA ELF ABI version 9)",
            [](std::string &b) { b[8] = 9; }},
           {"(ELF type 1, not an executable (a relocatable object needs "
            "linking))",
            [&](std::string &b) { write16le(at(b, 16), 1); }},
           {"(a malformed ELF header)",
            [&](std::string &b) { write16le(at(b, 52), 52); }},
           {"(its section header table is malformed or lies past its end)",
            [&](std::string &b) { write64le(at(b, 40), ~uint64_t(0) - 8); }},
           {"(its section header table is malformed or lies past its end)",
            [&](std::string &b) { write16le(at(b, 60), 0); }},
           {"(its section header table is malformed or lies past its end)",
            [&](std::string &b) { write16le(at(b, 60), 0xffff); }},
           {"(its section header table is malformed or lies past its end)",
            [&](std::string &b) { write16le(at(b, 62), 2); }},
           {"(section 1 lies past the end of the image)",
            [&](std::string &b) {
              write64le(at(b, read64le(at(b, 40)) + 64 + 32), 1 << 20);
            }},
           {"(its program header table is malformed or lies past its end)",
            [&](std::string &b) {
              write16le(at(b, 56), 1);
              write64le(at(b, 32), b.size());
            }},
       }) {
    SCOPED_TRACE(c.problem);
    std::string bytes = good;
    c.damage(bytes);
    std::string message =
        failure(readCubinTarget(bytes, "the cubin of decode_x"));
    EXPECT_NE(message.find("the cubin of decode_x is not a CUDA cubin ("),
              std::string::npos)
        << message;
    EXPECT_NE(message.find(c.problem), std::string::npos) << message;
  }
}

TEST(CubinTest, RandomBytesAreRefused) {
  // Random images, some behind a real ELF magic: none gets through.
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005 + 1442695040888963407;
    return char(state >> 56);
  };
  for (int i = 0; i < 1000; ++i) {
    std::string bytes(64 + i, '\0');
    for (char &c : bytes)
      c = next();
    if (i % 2)
      bytes.replace(0, 9,
                    std::string("\x7f"
                                "ELF\x02\x01\x01\x41\x08",
                                9));
    EXPECT_NE(failure(checkCubinArch(bytes, Arch::SM90a, "random")),
              "(succeeded)")
        << i;
  }
}

TEST(CubinTest, WhichGpuRunsWhichArch) {
  // Cubins run on their major version at the same or a higher minor;
  // sm_90a only on 9.0.
  EXPECT_TRUE(deviceRunsArch(Arch::SM80, Arch::SM80));
  EXPECT_TRUE(deviceRunsArch(Arch::SM89, Arch::SM80));
  EXPECT_TRUE(deviceRunsArch(Arch::SM89, Arch::SM89));
  EXPECT_TRUE(deviceRunsArch(Arch::SM90a, Arch::SM90a));
  EXPECT_FALSE(deviceRunsArch(Arch::SM80, Arch::SM89));
  EXPECT_FALSE(deviceRunsArch(Arch::SM80, Arch::SM90a));
  EXPECT_FALSE(deviceRunsArch(Arch::SM89, Arch::SM90a));
  EXPECT_FALSE(deviceRunsArch(Arch::SM90a, Arch::SM80));
  EXPECT_FALSE(deviceRunsArch(Arch::SM90a, Arch::SM89));

  std::string sm90a = cubinImage(Arch::SM90a), sm80 = cubinImage(Arch::SM80);
  llvm::Error runs = checkCubinRunsOn(sm80, Arch::SM89, "kernel k");
  EXPECT_FALSE(bool(runs)) << llvm::toString(std::move(runs));
  std::string message =
      failure(checkCubinRunsOn(sm90a, Arch::SM80, "kernel decode_x"));
  EXPECT_NE(message.find("kernel decode_x is built for sm_90a, and the "
                         "current GPU runs sm_80 cubins, not sm_90a ones"),
            std::string::npos)
      << message;
  // Not a cubin at all: refused before the arch is compared.
  EXPECT_NE(failure(checkCubinRunsOn("random bytes", Arch::SM90a, "kernel k"))
                .find("kernel k is not a CUDA cubin"),
            std::string::npos);
}

TEST(InputFilesTest, JsonParses) {
  auto value = parseJson(R"({"a": [1, {"b": "x"}], "c": {"a": 2}})", "t.json");
  ASSERT_TRUE(bool(value)) << failure(std::move(value));
  EXPECT_EQ(value->getAsObject()->getObject("c")->getInteger("a"), 2);
}

TEST(InputFilesTest, JsonSyntaxErrorsNameTheInput) {
  std::string message = failure(parseJson("{\"a\": ", "t.json"));
  EXPECT_NE(message.find("t.json: not valid JSON"), std::string::npos)
      << message;
  // Unterminated strings and stray closers are left to the parser.
  EXPECT_NE(failure(parseJson("{\"a", "t.json")).find("not valid JSON"),
            std::string::npos);
  EXPECT_NE(failure(parseJson("]]]", "t.json")).find("not valid JSON"),
            std::string::npos);
}

TEST(InputFilesTest, DeepNestingIsRefusedBeforeParsing) {
  // Deep enough to overflow the stack in llvm::json::parse.
  std::string deep = std::string(1 << 20, '[') + std::string(1 << 20, ']');
  std::string message = failure(parseJson(deep, "deep.json"));
  EXPECT_NE(message.find("deep.json: JSON nests deeper than the limit of 64 "
                         "levels at line 1, column 65"),
            std::string::npos)
      << message;
  // Exactly the limit is fine; objects count as levels too.
  std::string limit =
      std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(bool(parseJson(limit, "t")));
  std::string objects;
  for (unsigned i = 0; i <= kMaxJsonDepth; ++i)
    objects += "{\"a\":";
  objects += "1" + std::string(kMaxJsonDepth + 1, '}');
  EXPECT_NE(failure(parseJson(objects, "t")).find("deeper than the limit"),
            std::string::npos);
  // Brackets inside strings do not count, escaped quotes included.
  std::string quoted =
      "[\"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"]";
  EXPECT_TRUE(bool(parseJson(quoted, "t"))) << failure(parseJson(quoted, "t"));
}

TEST(InputFilesTest, DuplicateKeysAreRefusedAndNamed) {
  std::string message =
      failure(parseJson("{\"a\": 1,\n \"b\": {\"c\": 1, \"c\": 2}}", "t.json"));
  EXPECT_NE(message.find("t.json: duplicate key \"c\" at line 2, column 16"),
            std::string::npos)
      << message;
  // Compared unescaped.
  EXPECT_NE(failure(parseJson(R"({"a": 1, "\u0061": 2})", "t"))
                .find("duplicate key \"a\""),
            std::string::npos);
  // Equal keys in different objects, and strings that are values, are fine.
  EXPECT_TRUE(
      bool(parseJson(R"({"a": {"a": "a"}, "b": [{"a": 1}, {"a": 2}]})", "t")));
  EXPECT_TRUE(bool(parseJson(R"({"a": "b", "b": "a"})", "t")));
}

TEST(InputFilesTest, IntegersNeverConvertOutOfRange) {
  auto integer = [](llvm::StringRef text) {
    llvm::Expected<llvm::json::Value> value = llvm::json::parse(text);
    EXPECT_TRUE(bool(value)) << text.str();
    return value ? getJsonInteger(*value) : std::nullopt;
  };
  EXPECT_EQ(integer("42"), 42);
  EXPECT_EQ(integer("-7"), -7);
  EXPECT_EQ(integer("64.0"), 64);
  EXPECT_EQ(integer("4294967328"), 4294967328);
  EXPECT_EQ(integer("1.5"), std::nullopt);
  EXPECT_EQ(integer("\"1\""), std::nullopt);
  EXPECT_EQ(integer("18446744073709551615"), std::nullopt);
  // 2^63 as a double: json::Value::getAsInteger converts it (undefined).
  EXPECT_EQ(integer("9223372036854775808.0"), std::nullopt);
  EXPECT_EQ(integer("1e300"), std::nullopt);
}

} // namespace
