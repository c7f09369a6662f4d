//===- AotLibraryTest.cpp - AOT kernel libraries --------------------------===//
//
// A library written through the runtime's own manifest writer is read back
// (directory and packed), its kernels are found by AOT key and by kernel
// key, and a kernel cache given the library serves its cubin with a
// compiler that always fails, proving no NVRTC is involved. Damaged
// libraries and manifests are errors that name the problem; hostile ones
// (FIFOs, devices, deep JSON, out-of-range integers, paths leaving the
// library) are refused without blocking or crashing, also when
// ATTN_AOT_LIBRARY names them. A cubin whose size and checksum were fixed up
// to match the manifest is still refused, with an error naming the kernel,
// if it is no cubin of the kernel's arch (random bytes, a damaged ELF
// header, another arch's cubin, through a symbolic link or not). Packing
// never overwrites a file it did not write. The cubins here are stand-ins
// (TestFiles.h): a valid CUDA ELF header and no kernel.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/cache/AotLibrary.h"
#include "attn/runtime/cache/KernelCache.h"
#include "attn/runtime/cache/VariantKey.h"
#include "codegen/EmitCuda.h"
#include "test/unit/runtime/TestFiles.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

using namespace attn;
using namespace attn::runtime;
using namespace attn::test;

namespace {

/// A directory library holding one decode kernel for sm_90a.
struct OneKernelLibrary {
  TempDir dir;
  KernelSpec spec;
  CompileRequest request;
  std::string cubin = cubinImage(Arch::SM90a, "stand-in cubin bytes");
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
    llvm::Error written =
        writeKernelFiles(dir.str(), kernel, request.source, cubin);
    EXPECT_FALSE(bool(written)) << llvm::toString(std::move(written));
    EXPECT_EQ(kernel.size, cubin.size());
    written = writeManifest(dir.str(), {kernel});
    EXPECT_FALSE(bool(written)) << llvm::toString(std::move(written));
  }
};

/// A cache that never compiles: any compile is a test failure.
KernelCache::Options
noCompilerOptions(std::shared_ptr<const AotLibrary> library) {
  KernelCache::Options options;
  options.useDisk = false;
  options.compiler =
      [](const CompileRequest &request) -> llvm::Expected<std::string> {
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

TEST(AotLibraryTest, MlaDecodeSpecRoundTrips) {
  // rope_dim and the MLA kind survive the manifest; the kernel key finds it.
  TempDir dir;
  KernelSpec spec;
  spec.kind = KernelKind::MlaDecode;
  spec.arch = Arch::SM90a;
  spec.numQHeads = 16;
  spec.numKVHeads = 1;
  spec.headDim = 512;
  spec.ropeDim = 64;
  spec.pageSize = 64;
  spec.schedule.stages = 2;
  CompileRequest request{spec.uri(), emitCuda(spec), spec.arch};
  MlaDecodeVariant variant;
  AotKernel kernel;
  kernel.key = aotKey(request).hash;
  kernel.name = spec.uri();
  kernel.kernelKeys = {kernelKey(variant)};
  kernel.spec = spec;
  std::string cubin = cubinImage(Arch::SM90a, "stand-in MLA cubin");
  ASSERT_FALSE(
      bool(writeKernelFiles(dir.str(), kernel, request.source, cubin)));
  ASSERT_FALSE(bool(writeManifest(dir.str(), {kernel})));
  auto opened = AotLibrary::open(dir.str());
  ASSERT_TRUE(bool(opened)) << llvm::toString(opened.takeError());
  ASSERT_EQ((*opened)->kernels().size(), 1u);
  EXPECT_EQ((*opened)->kernels()[0].spec, spec);
  EXPECT_EQ((*opened)->kernels()[0].spec.ropeDim, 64);
  EXPECT_NE((*opened)->find(kernelKey(variant), Arch::SM90a), nullptr);
  variant.ropeDim = 0;
  EXPECT_EQ((*opened)->find(kernelKey(variant), Arch::SM90a), nullptr);
}

TEST(AotLibraryTest, PackedRoundTrip) {
  OneKernelLibrary lib;
  TempDir out;
  std::string packed = out.str("lib.attnlib");
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

/// Puts `bytes` where `lib`'s cubin was and fixes its manifest entry's size
/// and checksum to match, as someone hiding a swap would.
void swapCubin(OneKernelLibrary &lib, const std::string &bytes) {
  writeFile(lib.dir.str(lib.kernel.cubin), bytes);
  AotKernel fixed = lib.kernel;
  fixed.size = bytes.size();
  fixed.checksum = cubinChecksum(bytes);
  llvm::Error written = writeManifest(lib.dir.str(), {fixed});
  ASSERT_FALSE(bool(written)) << llvm::toString(std::move(written));
}

/// Checks that `lib`'s cubin is refused with `fragment` (after the library
/// and kernel names), and that a cache given the library compiles instead,
/// saying so.
void expectCubinRefused(const OneKernelLibrary &lib,
                        const std::string &fragment) {
  auto opened = AotLibrary::open(lib.dir.str());
  ASSERT_TRUE(bool(opened)) << llvm::toString(opened.takeError());
  auto cubin = (*opened)->readCubin((*opened)->kernels()[0]);
  ASSERT_FALSE(bool(cubin)) << "accepted: " << fragment;
  std::string message = llvm::toString(cubin.takeError());
  EXPECT_NE(message.find("AOT library '" + lib.dir.str() + "': the cubin of " +
                         lib.kernel.name + fragment),
            std::string::npos)
      << message;
  testing::internal::CaptureStderr();
  KernelCache cache(noCompilerOptions(*opened));
  auto served = cache.getCubin(lib.request);
  std::string warning = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(bool(served));
  llvm::consumeError(served.takeError());
  EXPECT_EQ(cache.stats().aotHits, 0u);
  EXPECT_EQ(cache.stats().compiles, 1u);
  EXPECT_NE(warning.find(fragment), std::string::npos) << warning;
}

TEST(AotLibraryTest, CubinForAnotherArchIsRefusedEvenWithAFixedUpChecksum) {
  OneKernelLibrary lib;
  swapCubin(lib, cubinImage(Arch::SM80, "an sm_80 kernel"));
  expectCubinRefused(lib, " is built for sm_80, not sm_90a");
  // And an arch attn does not build, as CUDA 12 wrote it.
  OneKernelLibrary old;
  CubinHeader header;
  header.sm = 86;
  header.abiVersion = 7;
  swapCubin(old, cubinImage(header, "an sm_86 kernel"));
  expectCubinRefused(old, " is built for sm_86, which attn does not target");
}

TEST(AotLibraryTest, RandomBytesWithAFixedUpChecksumAreRefused) {
  OneKernelLibrary lib;
  std::string random(4096, '\0');
  uint64_t state = 0x9e3779b97f4a7c15;
  for (char &c : random) {
    state = state * 6364136223846793005 + 1442695040888963407;
    c = char(state >> 56);
  }
  swapCubin(lib, random);
  expectCubinRefused(lib, " is not a CUDA cubin (no ELF magic)");
}

TEST(AotLibraryTest, CubinWithADamagedElfHeaderIsRefused) {
  // A cubin whose section table lies past its end, size and checksum fixed.
  OneKernelLibrary lib;
  std::string cubin = lib.cubin;
  cubin[40] = char(0xf0); // e_shoff
  swapCubin(lib, cubin);
  expectCubinRefused(lib, " is not a CUDA cubin (its section header table is "
                          "malformed or lies past its end)");
}

TEST(AotLibraryTest, SymlinkedCubinOfAnotherArchIsRefused) {
  // The library's cubin is a link to a file elsewhere whose size and
  // checksum the manifest was fixed to: followed (a library is the user's
  // own files), and still checked for its arch.
  OneKernelLibrary lib;
  TempDir elsewhere;
  std::string other = cubinImage(Arch::SM89, "an sm_89 kernel");
  writeFile(elsewhere.str("other.cubin"), other);
  swapCubin(lib, other);
  std::string path = lib.dir.str(lib.kernel.cubin);
  ASSERT_EQ(unlink(path.c_str()), 0);
  ASSERT_EQ(symlink(elsewhere.str("other.cubin").c_str(), path.c_str()), 0);
  expectCubinRefused(lib, " is built for sm_89, not sm_90a");
}

TEST(AotLibraryTest, KernelFiledUnderAnotherArchsKeyIsNotServed) {
  // A manifest that files an sm_80 kernel (its own cubin, intact) under
  // the AOT key of the sm_90a request: the cache checks the cubin against
  // the arch it was asked for.
  OneKernelLibrary lib;
  std::string cubin = cubinImage(Arch::SM80, "an sm_80 kernel");
  AotKernel misfiled = lib.kernel;
  misfiled.spec.arch = Arch::SM80;
  misfiled.name = misfiled.spec.uri();
  llvm::Error written =
      writeKernelFiles(lib.dir.str(), misfiled, lib.request.source, cubin);
  ASSERT_FALSE(bool(written)) << llvm::toString(std::move(written));
  written = writeManifest(lib.dir.str(), {misfiled});
  ASSERT_FALSE(bool(written)) << llvm::toString(std::move(written));
  auto opened = AotLibrary::open(lib.dir.str());
  ASSERT_TRUE(bool(opened)) << llvm::toString(opened.takeError());
  ASSERT_NE((*opened)->findByAotKey(lib.kernel.key), nullptr);
  testing::internal::CaptureStderr();
  KernelCache cache(noCompilerOptions(*opened));
  auto served = cache.getCubin(lib.request);
  std::string warning = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(bool(served));
  llvm::consumeError(served.takeError());
  EXPECT_EQ(cache.stats().aotHits, 0u);
  EXPECT_NE(warning.find("the cubin of " + misfiled.name +
                         " is built for sm_80, not sm_90a"),
            std::string::npos)
      << warning;
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
  expectError("{", "manifest: not valid JSON");
  expectError(replaced("attn-aot-4", "attn-aot-0"), "attn-aot-0");
  expectError(replaced("\"head_dim\"", "\"head_dims\""), "lacks \"head_dim\"");
  expectError(replaced("\"kind\": \"decode\"", "\"kind\": \"encode\""),
              "unknown kind");
  expectError(replaced("\"head_dim\": 128", "\"head_dim\": 64"), "its spec is");
  auto missing = AotLibrary::open(lib.dir.str("nowhere"));
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("nowhere"),
            std::string::npos);

  // Integers out of their range are errors naming the field and the value,
  // not silently cast (4294967328 would be 32 as an int).
  expectError(replaced("\"num_q_heads\": 32", "\"num_q_heads\": 4294967328"),
              "\"num_q_heads\" is 4294967328; expected an integer from 0 to "
              "2147483647");
  expectError(replaced("\"head_dim\": 128", "\"head_dim\": -128"),
              "\"head_dim\" is -128");
  expectError(replaced("\"size\": ", "\"size\": -"), "\"size\" is -");
  expectError(replaced("\"size\": ", "\"size\": 1e300, \"x\": "),
              "\"size\" is 1.0000000000000001e+300");
  // A spec no template runs never reaches the planner or a launch: the
  // compiler's own rules (checkKernelSpec) apply to manifests too.
  expectError(replaced("\"row_tiles\": 1", "\"row_tiles\": 268435456"),
              "spec decode_schedule row_tiles must be from 1 to 8, got "
              "268435456");
  expectError(replaced("\"num_kv_heads\": 8", "\"num_kv_heads\": 0"),
              "spec num_q_heads (32) must be a multiple of num_kv_heads (0)");
  // File names must be the library's own: never a path out of it.
  expectError(replaced("\"cubin\": \"sm_90a/", "\"cubin\": \"../../sm_90a/"),
              "has cubin \"../../sm_90a/");
  expectError(replaced("\"source\": \"sm_90a/", "\"source\": \"/etc/"),
              "has source \"/etc/");
  expectError(replaced("\"key\": \"", "\"key\": \"../"),
              "expected 64 lowercase hex digits");
  // Duplicate keys (the parser would keep the last) and deep nesting (the
  // parser would overflow the stack).
  expectError(replaced("\"kernels\":", "\"kernels\": [], \"kernels\":"),
              "duplicate key \"kernels\"");
  expectError(std::string(100000, '[') + std::string(100000, ']'),
              "nests deeper than the limit of 64 levels");
}

TEST(AotLibraryTest, ManifestThatIsNotARegularFileIsRefusedWithoutBlocking) {
  alarm(20); // a FIFO opened without O_NONBLOCK blocks: fail, not hang
  OneKernelLibrary fifo, zero;
  std::string fifoManifest = fifo.dir.str("manifest.json");
  ASSERT_EQ(unlink(fifoManifest.c_str()), 0);
  ASSERT_EQ(mkfifo(fifoManifest.c_str(), 0600), 0);
  auto opened = AotLibrary::open(fifo.dir.str());
  ASSERT_FALSE(bool(opened));
  EXPECT_NE(llvm::toString(opened.takeError())
                .find("is not a regular file (it is a FIFO)"),
            std::string::npos);
  std::string zeroManifest = zero.dir.str("manifest.json");
  ASSERT_EQ(unlink(zeroManifest.c_str()), 0);
  ASSERT_EQ(symlink("/dev/zero", zeroManifest.c_str()), 0);
  opened = AotLibrary::open(zero.dir.str());
  ASSERT_FALSE(bool(opened));
  EXPECT_NE(llvm::toString(opened.takeError())
                .find("is not a regular file (it is a device)"),
            std::string::npos);
  // A packed library that is /dev/zero, and a cubin that is a FIFO.
  opened = AotLibrary::open("/dev/zero");
  ASSERT_FALSE(bool(opened));
  EXPECT_NE(llvm::toString(opened.takeError())
                .find("'/dev/zero' is not a regular file"),
            std::string::npos);
  OneKernelLibrary fifoCubin;
  auto library = AotLibrary::open(fifoCubin.dir.str());
  ASSERT_TRUE(bool(library)) << llvm::toString(library.takeError());
  std::string cubin = fifoCubin.dir.str(fifoCubin.kernel.cubin);
  ASSERT_EQ(unlink(cubin.c_str()), 0);
  ASSERT_EQ(mkfifo(cubin.c_str(), 0600), 0);
  auto read = (*library)->readCubin((*library)->kernels()[0]);
  ASSERT_FALSE(bool(read));
  EXPECT_NE(llvm::toString(read.takeError()).find("is not a regular file"),
            std::string::npos);
  alarm(0);
}

TEST(AotLibraryTest, EnvironmentLibrariesThatCannotBeReadAreSkipped) {
  alarm(20);
  TempDir dir;
  ASSERT_EQ(mkfifo(dir.str("fifo").c_str(), 0600), 0);
  ASSERT_TRUE(!llvm::sys::fs::create_directory(dir.str("deep")));
  writeFile(dir.str("deep/manifest.json"),
            std::string(200000, '[') + std::string(200000, ']'));
  std::string paths = dir.str("fifo") + ":/dev/zero:" + dir.str("deep");
  ASSERT_EQ(setenv("ATTN_AOT_LIBRARY", paths.c_str(), 1), 0);
  testing::internal::CaptureStderr();
  KernelCache::Options options;
  options.useDisk = false;
  options.compiler =
      [](const CompileRequest &request) -> llvm::Expected<std::string> {
    return "cubin of " + request.uri;
  };
  KernelCache cache(options);
  std::string warnings = testing::internal::GetCapturedStderr();
  unsetenv("ATTN_AOT_LIBRARY");
  for (const char *fragment :
       {"fifo' is not a regular file (it is a FIFO)",
        "'/dev/zero' is not a regular file (it is a device)",
        "nests deeper than the limit of 64 levels"})
    EXPECT_NE(warnings.find(fragment), std::string::npos) << warnings;
  EXPECT_EQ(
      llvm::StringRef(warnings).count("attn: warning: ATTN_AOT_LIBRARY: "), 3u)
      << warnings;
  auto cubin = cache.getCubin(CompileRequest{"k", "// k", Arch::SM90a});
  ASSERT_TRUE(bool(cubin)) << llvm::toString(cubin.takeError());
  EXPECT_EQ(**cubin, "cubin of k");
  alarm(0);
}

TEST(AotLibraryTest, PackedLibraryReadsOnlyTheKernelsBytes) {
  OneKernelLibrary lib;
  TempDir out;
  std::string packed = out.str("lib.attnlib");
  ASSERT_FALSE(bool(packLibrary(lib.dir.str(), packed)));
  // Grown past any bound on a whole-file read (sparse, so cheap): the
  // kernel's byte range is all that is read.
  ASSERT_EQ(truncate(packed.c_str(), off_t(kMaxCubinBytes) * 2), 0);
  auto opened = AotLibrary::open(packed);
  ASSERT_TRUE(bool(opened)) << llvm::toString(opened.takeError());
  auto cubin = (*opened)->readCubin((*opened)->kernels()[0]);
  ASSERT_TRUE(bool(cubin)) << llvm::toString(cubin.takeError());
  EXPECT_EQ(*cubin, lib.cubin);
  // A kernel whose range lies past the end is an error, not a crash.
  AotKernel outside = (*opened)->kernels()[0];
  outside.offset = ~uint64_t(0) - 2;
  auto past = (*opened)->readCubin(outside);
  ASSERT_FALSE(bool(past));
  EXPECT_NE(llvm::toString(past.takeError()).find("past the end"),
            std::string::npos);
}

TEST(AotLibraryTest, PackedHeaderClaimingAHugeManifestIsRefused) {
  TempDir out;
  std::string bytes = "ATTNLIB1";
  bytes += std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8);
  writeFile(out.str("huge.attnlib"), bytes);
  auto opened = AotLibrary::open(out.str("huge.attnlib"));
  ASSERT_FALSE(bool(opened));
  EXPECT_NE(llvm::toString(opened.takeError()).find("larger than the limit"),
            std::string::npos);
}

TEST(AotLibraryTest, PackingNeverOverwritesWhatItDidNotWrite) {
  OneKernelLibrary lib;
  std::string manifest = readFile(lib.dir.str("manifest.json"));
  auto expectRefused = [&](const std::string &file, const char *fragment) {
    llvm::Error error = packLibrary(lib.dir.str(), file);
    ASSERT_TRUE(bool(error)) << file;
    std::string message = llvm::toString(std::move(error));
    EXPECT_NE(message.find("will not pack into '" + file + "'"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find(fragment), std::string::npos) << message;
  };
  // Inside the library: the manifest itself, a subdirectory, and the
  // library reached through a symlink.
  expectRefused(lib.dir.str("manifest.json"), "inside the library directory");
  expectRefused(lib.dir.str("sm_90a/lib.attnlib"),
                "inside the library directory");
  TempDir out;
  ASSERT_EQ(symlink(lib.dir.str().c_str(), out.str("alias").c_str()), 0);
  expectRefused(out.str("alias/lib.attnlib"), "inside the library directory");
  EXPECT_EQ(readFile(lib.dir.str("manifest.json")), manifest);
  // Over someone else's file, or a directory.
  writeFile(out.str("notes.txt"), "precious");
  expectRefused(out.str("notes.txt"), "not a packed attn library");
  EXPECT_EQ(readFile(out.str("notes.txt")), "precious");
  expectRefused(out.str(), "not a regular file");
  // A directory that does not exist is named.
  expectRefused(out.str("missing/lib.attnlib"), "cannot resolve its directory");
  // Over a packed library: replaced.
  std::string packed = out.str("lib.attnlib");
  ASSERT_FALSE(bool(packLibrary(lib.dir.str(), packed)));
  llvm::Error again = packLibrary(lib.dir.str(), packed);
  EXPECT_FALSE(bool(again)) << llvm::toString(std::move(again));
  EXPECT_TRUE(bool(AotLibrary::open(packed)));
}

} // namespace
