//===- AotGpuTest.cpp - AOT-loaded kernels equal JIT ones -----------------===//
//
// A library built in the test (the JIT's compile step for this GPU's arch,
// written with the runtime's library writer, as attn-aot does) serves
// kernels two ways, and both give the bytes the JIT kernel gives on the
// same random problem: AotLibrary's loaders for hosts without the compiler,
// and a kernel cache that holds the library and has no working compiler.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/cache/AotLibrary.h"
#include "attn/runtime/cache/VariantKey.h"
#include "attn/runtime/serving/CacheOps.h"
#include "attn/runtime/support/Nvrtc.h"
#include "codegen/EmitCuda.h"
#include "compiler/Jit/Jit.h"
#include "test/gpu/GpuTestUtil.h"
#include "test/gpu/TestLibrary.h"
#include "test/reference/Modifiers.h"
#include "test/reference/PrefillCheck.h"

#include "llvm/Support/FileSystem.h"

using namespace attn;
using namespace attn::test;

namespace {

runtime::KernelCache::Options
libraryOnly(std::shared_ptr<const runtime::AotLibrary> library) {
  runtime::KernelCache::Options options;
  options.useDisk = false;
  options.compiler =
      [](const runtime::CompileRequest &r) -> llvm::Expected<std::string> {
    return llvm::createStringError("this cache must not compile " + r.uri);
  };
  options.libraries = {std::move(library)};
  return options;
}

TEST(AotGpuTest, LibraryKernelsMatchJitKernels) {
  ATTN_REQUIRE_GPU();
  ATTN_ASSIGN_OR_FAIL(arch, runtime::currentDeviceArch());
  DecodeVariant decode;
  decode.kvType = ScalarType::F8E4M3;
  decode.windowLeft = 300; // a launch value: the library kernel takes any
  PrefillVariant prefill;
  prefill.paged = PagedKVFormat{ScalarType::BF16, 16, KVLayout::NHD, false};
  prefill.writeLse = true;
  TestLibrary built;
  ATTN_ASSERT_OK(built.build(arch, decode, prefill));
  ATTN_ASSIGN_OR_FAIL(library, runtime::AotLibrary::open(built.path()));

  // Decode: the library's loader, then the JIT, on one problem.
  check::DecodeCheckOptions decodeOptions;
  decodeOptions.seqLens = {1000, 33, 4097};
  decodeOptions.kvScale = 0.05;
  ATTN_ASSIGN_OR_FAIL(aotDecode, library->decode(decode, arch));
  ATTN_ASSIGN_OR_FAIL(jitDecode, Jit::global().decode(decode));
  ATTN_ASSIGN_OR_FAIL(aotResult,
                      check::checkDecode(*aotDecode, decode, decodeOptions));
  ATTN_ASSIGN_OR_FAIL(jitResult,
                      check::checkDecode(*jitDecode, decode, decodeOptions));
  EXPECT_LT(aotResult.outError, 1e-2);
  EXPECT_EQ(aotResult.outBytes, jitResult.outBytes);

  // Paged prefill, same.
  check::PrefillCheckOptions prefillOptions;
  prefillOptions.qLens = {200, 17};
  prefillOptions.kvLens = {1000, 17};
  ATTN_ASSIGN_OR_FAIL(aotPrefill, library->prefill(prefill, arch));
  ATTN_ASSIGN_OR_FAIL(jitPrefill, Jit::global().prefill(prefill));
  ATTN_ASSIGN_OR_FAIL(
      aotP, check::checkPrefill(*aotPrefill, prefill, prefillOptions));
  ATTN_ASSIGN_OR_FAIL(
      jitP, check::checkPrefill(*jitPrefill, prefill, prefillOptions));
  EXPECT_LT(aotP.outError, 1e-2);
  EXPECT_EQ(aotP.outBytes, jitP.outBytes);

  // A variant the library does not hold is an error naming it.
  DecodeVariant missing = decode;
  missing.headDim = 64;
  auto none = library->decode(missing, arch);
  ASSERT_FALSE(bool(none));
  EXPECT_NE(llvm::toString(none.takeError()).find("dim=64"), std::string::npos);
}

// A kernel with a mask_mod region (a document mask over an aux table),
// found by a host whose region text is laid out otherwise than the text
// the library was built from (as attn-aot's "modifiers" files give it).
TEST(AotGpuTest, ModifierKernelsFoundByTheirRegionText) {
  ATTN_REQUIRE_GPU();
  ATTN_ASSIGN_OR_FAIL(arch, runtime::currentDeviceArch());
  std::mt19937 rng(3);
  std::vector<int> seqLens = {1000, 33, 4097};
  check::TestModifiers docs = check::documentMask(rng, seqLens);
  DecodeVariant built;
  built.maskMod = docs.maskMod;
  TestLibrary library;
  ATTN_ASSERT_OK(library.build(arch, built));
  ATTN_ASSIGN_OR_FAIL(opened, runtime::AotLibrary::open(library.path()));
  DecodeVariant host = built;
  host.maskMod = "// documents\n" + runtime::regionKey(docs.maskMod);
  ASSERT_NE(host.maskMod, built.maskMod);
  ATTN_ASSIGN_OR_FAIL(kernel, opened->decode(host, arch));
  check::DecodeCheckOptions options;
  options.seqLens = seqLens;
  options.modifiers = &docs;
  ATTN_ASSIGN_OR_FAIL(result, check::checkDecode(*kernel, host, options));
  EXPECT_LT(result.outError, 1e-2);
}

TEST(AotGpuTest, JitServedFromLibraryWithoutCompiling) {
  ATTN_REQUIRE_GPU();
  ATTN_ASSIGN_OR_FAIL(arch, runtime::currentDeviceArch());
  DecodeVariant decode; // bf16 cache
  TestLibrary built;
  ATTN_ASSERT_OK(built.build(arch, decode));
  ATTN_ASSIGN_OR_FAIL(library, runtime::AotLibrary::open(built.path()));
  runtime::KernelCache cache(libraryOnly(library));
  Jit jit({arch, &cache});
  ATTN_ASSIGN_OR_FAIL(kernel, jit.decode(decode));
  EXPECT_EQ(cache.stats().aotHits, 1u);
  EXPECT_EQ(cache.stats().compiles, 0u);
  check::DecodeCheckOptions options;
  options.seqLens = {500, 17};
  ATTN_ASSIGN_OR_FAIL(result, check::checkDecode(*kernel, decode, options));
  EXPECT_LT(result.outError, 1e-2);
}

// The copy_pages and advance_step kernels, as attn-aot's "cache_ops"
// section writes them, load through a cache that cannot compile.
TEST(AotGpuTest, CacheOpsServedFromLibrary) {
  ATTN_REQUIRE_GPU();
  ATTN_ASSIGN_OR_FAIL(arch, runtime::currentDeviceArch());
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("attn-aot-ops", dir));
  std::vector<runtime::AotKernel> kernels;
  for (const KernelSpec &spec : runtime::CacheOps::specs(arch)) {
    std::string source = emitCuda(spec);
    ATTN_ASSIGN_OR_FAIL(cubin,
                        runtime::compileToCubin(source, spec.uri(), arch));
    runtime::AotKernel k;
    k.name = spec.uri();
    k.key = runtime::aotKey({k.name, source, arch}).hash;
    k.spec = spec;
    ATTN_ASSERT_OK(runtime::writeKernelFiles(dir, k, source, cubin));
    kernels.push_back(k);
  }
  ATTN_ASSERT_OK(runtime::writeManifest(dir, kernels));
  ATTN_ASSIGN_OR_FAIL(library, runtime::AotLibrary::open(dir));
  runtime::KernelCache cache(libraryOnly(library));
  auto ops = runtime::CacheOps::create(cache, arch);
  llvm::sys::fs::remove_directories(dir);
  ASSERT_TRUE(bool(ops)) << llvm::toString(ops.takeError());
  EXPECT_EQ(cache.stats().aotHits, 2u);
  EXPECT_EQ(cache.stats().compiles, 0u);
}

} // namespace
