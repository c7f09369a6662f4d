//===- InputFilesTest.cpp - reading untrusted files and JSON --------------===//
//
// Regular files are read whole within a bound or by range; FIFOs, devices,
// directories and oversized files are errors naming the path and, for size,
// the limit, and never block. JSON nested past the limit or with duplicate
// keys is refused before the recursive parser sees it; integers are read
// without undefined conversions.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/support/InputFiles.h"

#include "test/unit/runtime/TestFiles.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

using namespace attn::runtime;
using namespace attn::test;

namespace {

/// The message of an Expected that must have failed.
template <class T> std::string failure(llvm::Expected<T> value) {
  if (value)
    return "(succeeded)";
  return llvm::toString(value.takeError());
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
