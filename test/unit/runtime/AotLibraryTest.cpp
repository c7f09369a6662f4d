//===- AotLibraryTest.cpp - AOT kernel libraries --------------------------===//
//
// A library written through the runtime's own manifest writer is read back
// (directory and packed), its kernels are found by AOT key and by kernel
// key, and a kernel cache given the library serves its cubin with a
// compiler that always fails, proving no NVRTC is involved. Damaged
// libraries and manifests are errors that name the problem. The cubins here
// are stand-in bytes: the library layer never looks inside them.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/AotLibrary.h"
#include "attn/runtime/KernelCache.h"
#include "attn/runtime/VariantKey.h"
#include "codegen/EmitCuda.h"
#include "test/unit/runtime/TestFiles.h"

#include <gtest/gtest.h>

using namespace attn;
using namespace attn::runtime;
using namespace attn::test;

namespace {

/// A directory library holding one decode kernel for sm_90a.
struct OneKernelLibrary {
  TempDir dir;
  KernelSpec spec;
  CompileRequest request;
  std::string cubin = "\x7f" "ELF stand-in cubin bytes";
  AotKernel kernel;

  OneKernelLibrary() {
    spec.kind = KernelKind::Decode;
    spec.arch = Arch::SM90a;
    request = {spec.uri(), emitCuda(spec), spec.arch};
    kernel.key = aotKey(request).hash;
    kernel.name = spec.uri();
    kernel.kernelKeys = {kernelKey(DecodeVariant{})};
    kernel.spec = spec;
    kernel.compileSeconds = 0.25;
    llvm::Error written = writeKernelFiles(dir.str(), kernel, request.source, cubin);
    EXPECT_FALSE(bool(written)) << llvm::toString(std::move(written));
    EXPECT_EQ(kernel.size, cubin.size());
    written = writeManifest(dir.str(), {kernel});
    EXPECT_FALSE(bool(written)) << llvm::toString(std::move(written));
  }
};

/// A cache that never compiles: any compile is a test failure.
KernelCache::Options noCompilerOptions(std::shared_ptr<const AotLibrary> library) {
  KernelCache::Options options;
  options.useDisk = false;
  options.compiler = [](const CompileRequest &request) -> llvm::Expected<std::string> {
    return llvm::createStringError("no compiler here (" + request.uri + ")");
  };
  options.libraries = {std::move(library)};
  return options;
}

TEST(AotLibraryTest, DirectoryRoundTrip) {
  OneKernelLibrary lib;
  auto opened = AotLibrary::open(lib.dir.str());
  ASSERT_TRUE(bool(opened)) << llvm::toString(opened.takeError());
  const AotLibrary &library = **opened;
  ASSERT_EQ(library.kernels().size(), 1u);
  const AotKernel &k = library.kernels()[0];
  EXPECT_EQ(k.spec, lib.spec);
  EXPECT_EQ(k.name, lib.kernel.name);
  EXPECT_EQ(k.kernelKeys, lib.kernel.kernelKeys);
  EXPECT_EQ(k.checksum, lib.kernel.checksum);
  EXPECT_EQ(library.findByAotKey(lib.kernel.key), &k);
  EXPECT_EQ(library.find(kernelKey(DecodeVariant{}), Arch::SM90a), &k);
  EXPECT_EQ(library.find(kernelKey(DecodeVariant{}), Arch::SM80), nullptr);
  DecodeVariant other;
  other.headDim = 64;
  EXPECT_EQ(library.find(kernelKey(other), Arch::SM90a), nullptr);
  auto cubin = library.readCubin(k);
  ASSERT_TRUE(bool(cubin)) << llvm::toString(cubin.takeError());
  EXPECT_EQ(*cubin, lib.cubin);
}

TEST(AotLibraryTest, PackedRoundTrip) {
  OneKernelLibrary lib;
  std::string packed = lib.dir.str("lib.attnlib");
  ASSERT_FALSE(bool(packLibrary(lib.dir.str(), packed)));
  auto opened = AotLibrary::open(packed);
  ASSERT_TRUE(bool(opened)) << llvm::toString(opened.takeError());
  ASSERT_EQ((*opened)->kernels().size(), 1u);
  auto cubin = (*opened)->readCubin((*opened)->kernels()[0]);
  ASSERT_TRUE(bool(cubin)) << llvm::toString(cubin.takeError());
  EXPECT_EQ(*cubin, lib.cubin);
}

TEST(AotLibraryTest, CacheServesLibraryKernelsWithoutCompiling) {
  OneKernelLibrary lib;
  auto opened = AotLibrary::open(lib.dir.str());
  ASSERT_TRUE(bool(opened)) << llvm::toString(opened.takeError());
  KernelCache cache(noCompilerOptions(*opened));
  auto cubin = cache.getCubin(lib.request);
  ASSERT_TRUE(bool(cubin)) << llvm::toString(cubin.takeError());
  EXPECT_EQ(**cubin, lib.cubin);
  EXPECT_EQ(cache.stats().aotHits, 1u);
  EXPECT_EQ(cache.stats().compiles, 0u);
  // Another source is another kernel: not in the library, so compiled.
  CompileRequest changed = lib.request;
  changed.source += "// changed\n";
  auto missing = cache.getCubin(changed);
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("no compiler here"),
            std::string::npos);
  EXPECT_EQ(cache.stats().compiles, 1u);
}

TEST(AotLibraryTest, AotKeyIgnoresOnlyTheNvrtcVersion) {
  OneKernelLibrary lib;
  KernelCache cache(KernelCache::Options{});
  // The cache key adds the NVRTC version; the AOT key leaves it out, and
  // both change with the source and the arch.
  EXPECT_NE(cache.keyFor(lib.request).hash, aotKey(lib.request).hash);
  CompileRequest otherArch = lib.request;
  otherArch.arch = Arch::SM80;
  EXPECT_NE(aotKey(otherArch).hash, aotKey(lib.request).hash);
  CompileRequest otherSource = lib.request;
  otherSource.source += " ";
  EXPECT_NE(aotKey(otherSource).hash, aotKey(lib.request).hash);
}

TEST(AotLibraryTest, DamagedCubinIsNeverServed) {
  OneKernelLibrary lib;
  auto opened = AotLibrary::open(lib.dir.str());
  ASSERT_TRUE(bool(opened)) << llvm::toString(opened.takeError());
  std::string damaged = lib.cubin;
  damaged[5] ^= 1;
  writeFile(lib.dir.str(lib.kernel.cubin), damaged);
  auto cubin = (*opened)->readCubin((*opened)->kernels()[0]);
  ASSERT_FALSE(bool(cubin));
  EXPECT_NE(llvm::toString(cubin.takeError()).find("does not match"),
            std::string::npos);
  // The cache compiles instead of trusting it.
  KernelCache cache(noCompilerOptions(*opened));
  auto served = cache.getCubin(lib.request);
  EXPECT_FALSE(bool(served));
  llvm::consumeError(served.takeError());
  EXPECT_EQ(cache.stats().aotHits, 0u);
  EXPECT_EQ(cache.stats().compiles, 1u);
}

TEST(AotLibraryTest, BadManifestsNameTheProblem) {
  OneKernelLibrary lib;
  std::string manifest = readFile(lib.dir.str("manifest.json"));
  auto expectError = [&](const std::string &text, const char *fragment) {
    writeFile(lib.dir.str("manifest.json"), text);
    auto opened = AotLibrary::open(lib.dir.str());
    ASSERT_FALSE(bool(opened)) << "accepted: " << fragment;
    std::string message = llvm::toString(opened.takeError());
    EXPECT_NE(message.find(fragment), std::string::npos) << message;
  };
  auto replaced = [&](const std::string &from, const std::string &to) {
    std::string text = manifest;
    size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? text : text.replace(at, from.size(), to);
  };
  expectError("{", "not JSON");
  expectError(replaced("attn-aot-1", "attn-aot-0"), "attn-aot-0");
  expectError(replaced("\"head_dim\"", "\"head_dims\""), "lacks \"head_dim\"");
  expectError(replaced("\"kind\": \"decode\"", "\"kind\": \"encode\""), "unknown kind");
  expectError(replaced("\"head_dim\": 128", "\"head_dim\": 64"), "its spec is");
  auto missing = AotLibrary::open(lib.dir.str("nowhere"));
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("nowhere"), std::string::npos);
}

} // namespace
