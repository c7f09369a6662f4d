//===- EmbeddedTemplatesTest.cpp - the embedded template table ------------===//
//
// The table built into the binary must be exactly templates/attn/ on disk:
// every file, byte for byte, under the name it is included by.
//
//===----------------------------------------------------------------------===//
#include "templates/EmbeddedTemplates.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace {

/// templates/attn/*.cuh and *.h in the source tree, by include name.
std::map<std::string, std::string> templatesOnDisk() {
  std::map<std::string, std::string> files;
  std::error_code ec;
  llvm::SmallString<256> dir(ATTN_TEMPLATES_SOURCE_DIR);
  llvm::sys::path::append(dir, "attn");
  for (llvm::sys::fs::recursive_directory_iterator it(dir, ec), end;
       it != end && !ec; it.increment(ec)) {
    llvm::StringRef path = it->path();
    if (!path.ends_with(".cuh") && !path.ends_with(".h"))
      continue;
    auto buffer = llvm::MemoryBuffer::getFile(path);
    EXPECT_TRUE(bool(buffer)) << path.str();
    if (!buffer)
      continue;
    std::string name =
        path.drop_front(llvm::StringRef(ATTN_TEMPLATES_SOURCE_DIR).size() + 1)
            .str();
    files[name] = (*buffer)->getBuffer().str();
  }
  EXPECT_FALSE(ec) << ec.message();
  return files;
}

TEST(EmbeddedTemplates, ParamsHeaderMatchesTheSourceTree) {
  const attn::EmbeddedFile *params = nullptr;
  for (const attn::EmbeddedFile &file : attn::embeddedTemplates())
    if (llvm::StringRef(file.name) == "attn/params.h")
      params = &file;
  ASSERT_NE(params, nullptr);
  auto onDisk =
      llvm::MemoryBuffer::getFile(ATTN_TEMPLATES_SOURCE_DIR "/attn/params.h");
  ASSERT_TRUE(bool(onDisk));
  EXPECT_EQ(llvm::StringRef(params->contents, params->size),
            (*onDisk)->getBuffer());
  // NVRTC takes the contents as a C string.
  EXPECT_EQ(params->contents[params->size], '\0');
}

TEST(EmbeddedTemplates, TableIsExactlyTheTemplateDirectory) {
  std::map<std::string, std::string> embedded;
  std::string previous;
  for (const attn::EmbeddedFile &file : attn::embeddedTemplates()) {
    EXPECT_LT(previous, file.name) << "table not sorted by name";
    previous = file.name;
    embedded[file.name] = std::string(file.contents, file.size);
  }
  EXPECT_EQ(embedded, templatesOnDisk());
}

TEST(EmbeddedTemplates, HashIsSha256Hex) {
  llvm::StringRef hash = attn::templatesHash();
  EXPECT_EQ(hash.size(), 64u);
  EXPECT_EQ(hash.find_first_not_of("0123456789abcdef"), llvm::StringRef::npos);
}

} // namespace
