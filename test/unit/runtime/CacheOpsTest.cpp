//===- CacheOpsTest.cpp - copy_pages and advance_step without a GPU ------===//
//
// What CacheOps decides on the host: which page pairs copyPages refuses,
// which advanceStep arguments are errors, how a decode view binds; and the
// two kernels' specs, names and generated units, compiled through a
// KernelCache with real NVRTC for every arch (no GPU needed). The kernels
// themselves run in test/gpu/CacheOpsGpuTest.cpp.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/serving/CacheOps.h"
#include "codegen/EmitCuda.h"

#include "llvm/ADT/StringRef.h"

#include <gtest/gtest.h>

#include <string>

using namespace attn;
using namespace attn::runtime;

namespace {

/// The error's message, or "" for success.
std::string message(llvm::Error error) {
  return error ? llvm::toString(std::move(error)) : std::string();
}

TEST(CopyPairs, ValidPairsPass) {
  EXPECT_EQ(message(checkCopyPairs({{0, 5}, {0, 6}, {3, 1}}, 8)), "");
  EXPECT_EQ(message(checkCopyPairs({}, 8)), "");
}

TEST(CopyPairs, BlocksOutOfRangeAreNamed) {
  EXPECT_EQ(message(checkCopyPairs({{0, 5}, {8, 6}}, 8)),
            "copyPages: pair 1: source page 8 is outside [0, 8)");
  EXPECT_EQ(message(checkCopyPairs({{0, -1}}, 8)),
            "copyPages: pair 0: destination page -1 is outside [0, 8)");
  EXPECT_EQ(message(checkCopyPairs({{-3, 2}}, 8)),
            "copyPages: pair 0: source page -3 is outside [0, 8)");
}

TEST(CopyPairs, SelfCopyIsAnError) {
  EXPECT_EQ(message(checkCopyPairs({{1, 2}, {4, 4}}, 8)),
            "copyPages: pair 1: page 4 is copied onto itself");
}

TEST(CopyPairs, DestinationTwiceIsAnError) {
  EXPECT_EQ(message(checkCopyPairs({{1, 2}, {3, 5}, {4, 2}}, 8)),
            "copyPages: pair 2: destination page 2 is written by an "
            "earlier pair");
}

TEST(CopyPairs, DestinationThatIsASourceIsAnError) {
  // Either order: the copies of one launch run concurrently.
  for (auto pairs : {std::vector<PagePair>{{1, 2}, {2, 3}},
                     std::vector<PagePair>{{2, 3}, {1, 2}}}) {
    std::string error = message(checkCopyPairs(pairs, 8));
    EXPECT_NE(error.find("destination page 2 is also a source"),
              std::string::npos)
        << error;
  }
}

AdvanceStepArgs validArgs() {
  // Not dereferenced on the host: any non-null address will do.
  static int32_t lens[4];
  static int64_t slots[4];
  static int32_t tables[8];
  AdvanceStepArgs a;
  a.numQueries = 3;
  a.numSeqs = 4;
  a.pageSize = 16;
  a.seqLens = lens;
  a.slotMapping = slots;
  a.pageTables = tables;
  a.pageTableStride = 2;
  return a;
}

TEST(AdvanceStepArgs, ValidArgsPass) {
  EXPECT_EQ(message(CacheOps::checkArgs(validArgs(), nullptr)), "");
}

TEST(AdvanceStepArgs, ErrorsNameTheBadValue) {
  AdvanceStepArgs a = validArgs();
  a.numSeqs = 2;
  EXPECT_EQ(message(CacheOps::checkArgs(a, nullptr)),
            "advanceStep: numQueries (3) must be >= 0 and at most numSeqs (2)");
  a = validArgs();
  a.pageSize = 0;
  EXPECT_EQ(message(CacheOps::checkArgs(a, nullptr)),
            "advanceStep: pageSize must be >= 1, got 0");
  a = validArgs();
  a.slotMapping = nullptr;
  EXPECT_EQ(message(CacheOps::checkArgs(a, nullptr)),
            "advanceStep: seqLens and slotMapping must not be null");
  a = validArgs();
  a.pageTableStride = 0;
  EXPECT_EQ(message(CacheOps::checkArgs(a, nullptr)),
            "advanceStep: pageTableStride must be >= 1, got 0");
  a = validArgs();
  static int64_t tokens[4];
  a.inputTokens = tokens;
  EXPECT_EQ(message(CacheOps::checkArgs(a, nullptr)),
            "advanceStep: inputTokens and sampledTokenIds go together: give "
            "both or neither");
}

TEST(AdvanceStepArgs, PlanMustMatchTheBatch) {
  static DecodeWorkItem items[3];
  static int32_t count;
  DecodePlan plan;
  plan.batch = 2;
  plan.gridX = 3;
  plan.workItems = items;
  plan.numWorkItems = &count;
  EXPECT_EQ(message(CacheOps::checkArgs(validArgs(), &plan)),
            "advanceStep: the decode plan has 2 requests; numQueries is 3");
  plan.batch = 3;
  EXPECT_EQ(message(CacheOps::checkArgs(validArgs(), &plan)), "");
  plan.workItems = nullptr;
  EXPECT_EQ(message(CacheOps::checkArgs(validArgs(), &plan)),
            "advanceStep: the decode plan has no device work items");
}

MetadataLimits limits() {
  MetadataLimits l;
  l.pageSize = 4;
  l.numPages = 32;
  l.maxBatch = 4;
  l.maxTokens = 16;
  l.maxPagesPerSeq = 4;
  return l;
}

TEST(AdvanceStepArgs, BindMetadataNeedsOneTokenDecodesOnTheDevice) {
  std::vector<int32_t> table = {3, 7};
  ScheduledRequest decode;
  decode.queryLen = 2; // a decode with one draft token
  decode.contextLen = 5;
  decode.pageTable = table;
  auto md = buildAttentionMetadata({decode, decode}, limits());
  ASSERT_TRUE(bool(md)) << llvm::toString(md.takeError());
  AdvanceStepArgs args;
  EXPECT_EQ(message(bindMetadata(args, md->decodeView(), 4)),
            "advanceStep: the decodes have 2 query tokens each; a step "
            "advances one");
  decode.queryLen = 1;
  md = buildAttentionMetadata({decode, decode}, limits());
  ASSERT_TRUE(bool(md)) << llvm::toString(md.takeError());
  // Host-only metadata has nothing on the device to advance.
  EXPECT_EQ(message(bindMetadata(args, md->decodeView(), 4)),
            "advanceStep: the decode view has no device arrays (build it "
            "with AttentionMetadataBuilder)");
}

TEST(CacheOpSpecs, NamesAndUnits) {
  std::vector<KernelSpec> specs = CacheOps::specs(Arch::SM89);
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0].kind, KernelKind::CopyPages);
  EXPECT_EQ(specs[1].kind, KernelKind::AdvanceStep);
  // Nothing but the kind names them: the attention fields do not apply.
  KernelSpec other = specs[0];
  other.headDim = 64;
  other.kvType = ScalarType::F8E4M3;
  EXPECT_EQ(other.uri(), "copy_pages");
  EXPECT_EQ(kernelSymbol(specs[1]), "attn_advance_step");
  for (const KernelSpec &spec : specs) {
    EXPECT_TRUE(spec.isCacheOp());
    EXPECT_EQ(spec.arch, Arch::SM89);
    EXPECT_EQ(parseKernelKind(toString(spec.kind)), spec.kind);
    std::string source = emitCuda(spec);
    EXPECT_NE(source.find("#include \"attn/cache_ops.cuh\""),
              std::string::npos);
    EXPECT_NE(source.find(kernelSymbol(spec) + "("), std::string::npos)
        << source;
  }
  EXPECT_EQ(threadsPerBlock(specs[0]), 256);
  EXPECT_EQ(threadsPerBlock(specs[1]), 128);
}

TEST(CacheOpSpecs, CompileThroughTheKernelCacheForEveryArch) {
  KernelCache::Options options;
  options.useDisk = false;
  KernelCache cache(options);
  for (Arch arch : {Arch::SM80, Arch::SM89, Arch::SM90a})
    for (const KernelSpec &spec : CacheOps::specs(arch)) {
      SCOPED_TRACE(spec.uri() + " " + std::string(toString(arch)));
      auto cubin = cache.getCubin({spec.uri(), emitCuda(spec), arch});
      ASSERT_TRUE(bool(cubin)) << llvm::toString(cubin.takeError());
      llvm::StringRef image(**cubin);
      EXPECT_TRUE(image.starts_with("\x7f"
                                    "ELF"));
      EXPECT_TRUE(image.contains(kernelSymbol(spec)));
    }
  EXPECT_EQ(cache.stats().compiles, 6u);
}

} // namespace
