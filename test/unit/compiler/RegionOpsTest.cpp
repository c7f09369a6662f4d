//===- RegionOpsTest.cpp - emitted region code against MLIR's folder ------===//
//
// Every op a score_mod may hold, on every region type it takes, compiled the
// way a host variant is (region text -> attn IR -> the Config's CUDA) and
// run on edge values: 0, ±1, the widths, INT_MIN/INT_MAX, -0, denormals,
// infinities, NaN, halfway cases. The emitted code is built as host C++
// with templates/attn/region_ops.h, UndefinedBehaviorSanitizer on and the
// optimizer folding freely, and each result is compared with what MLIR's own
// folder gives for the same op on the same constants. Where the folder has
// no value (MLIR leaves the result undefined or poison) the result must be
// the one region_ops.h documents.
//
// The operands come from an aux table at run time, so nothing is known to
// the host compiler; tests/gpu runs the same cases through NVRTC.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/support/Nvrtc.h"
#include "test/unit/compiler/RegionOpsCases.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

namespace {

using namespace attn::regiontest;

std::string readFile(const std::string &path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Compiles `source` with the host compiler attn was built with and runs
/// it; its stdout, or a failure naming the step.
::testing::AssertionResult compileAndRun(const Harness &harness,
                                         std::string &output) {
  char dir[] = "/tmp/attn-region-ops-XXXXXX";
  if (!mkdtemp(dir))
    return ::testing::AssertionFailure() << "mkdtemp failed";
  std::string base = dir;
  std::ofstream(base + "/harness.cpp") << harness.source;
  std::ofstream(base + "/inputs.txt") << harness.inputs;
  // -ffp-contract=off: region_ops.h's host arithmetic rounds each op, as
  // its device form does with the _rn intrinsics.
  std::string compile =
      std::string(ATTN_TEST_HOST_CXX) +
      " -std=c++17 -O2 -ffp-contract=off -fsanitize=undefined "
      "-fsanitize=float-cast-overflow -fno-sanitize-recover=all -I" +
      ATTN_TEST_SOURCE_DIR + "/templates -o " + base + "/harness " + base +
      "/harness.cpp > " + base + "/compile.log 2>&1";
  int status = std::system(compile.c_str());
  if (status != 0) {
    std::string log = readFile(base + "/compile.log");
    return ::testing::AssertionFailure()
           << "the harness did not compile (" << compile << "):\n"
           << log.substr(0, 4000);
  }
  std::string run = base + "/harness " + base + "/inputs.txt > " + base +
                    "/out.txt 2> " + base + "/err.txt";
  status = std::system(run.c_str());
  output = readFile(base + "/out.txt");
  std::string errors = readFile(base + "/err.txt");
  std::system(("rm -rf " + base).c_str());
  if (status != 0 || !errors.empty())
    return ::testing::AssertionFailure() << "the harness failed (status "
                                         << status << "); UBSan or a crash:\n"
                                         << errors.substr(0, 4000);
  return ::testing::AssertionSuccess();
}

TEST(RegionOpsTest, EmittedCodeMatchesMLIRFolder) {
  std::vector<OpCase> cases = regionOpCases();
  std::string error;
  std::optional<Harness> harness =
      buildHarness(cases, HarnessTarget::Host, error);
  ASSERT_TRUE(harness) << error;
  std::string output;
  ASSERT_TRUE(compileAndRun(*harness, output));
  std::vector<uint64_t> results;
  std::istringstream lines(output);
  std::string word;
  while (lines >> word)
    results.push_back(std::strtoull(word.c_str(), nullptr, 16));
  ASSERT_EQ(results.size(), harness->evaluations.size());

  Comparison comparison = compareWithFolder(cases, *harness, results);
  for (const std::string &mismatch : comparison.mismatches)
    ADD_FAILURE() << mismatch;
  // Every result was checked; the folder has no value for a few ops.
  std::set<std::string> neverFolded(comparison.opsNeverFolded.begin(),
                                    comparison.opsNeverFolded.end());
  for (const char *op : {"math.cbrt", "math.rsqrt", "math.fma"})
    for (const char *type : {"f32", "f64"})
      neverFolded.erase(
          std::string(op) +
          (std::string(op) == "math.fma" ? " {0}, {1}, {2} : " : " {0} : ") +
          type);
  for (const std::string &op : neverFolded)
    ADD_FAILURE() << op << ": the folder gave no value on any input";
  for (const auto &[op, count] : comparison.uncheckedByOp)
    std::printf("unchecked: %s: %zu\n", op.c_str(), count);
  EXPECT_EQ(comparison.unchecked, 0u);
  EXPECT_GT(comparison.folded, 25000u);
  EXPECT_GT(comparison.documented, 1000u);
  std::printf("%zu results compared with MLIR's folder, %zu with the "
              "documented value, %zu unchecked (no fold, no rule)\n",
              comparison.folded, comparison.documented, comparison.unchecked);
}

TEST(RegionOpsTest, DeviceFormCompilesWithNvrtc) {
  // The device half of region_ops.h (the _rn intrinsics), as the GPU test
  // runs it; NVRTC needs no GPU.
  std::string error;
  std::optional<Harness> harness =
      buildHarness(regionOpCases(), HarnessTarget::Device, error);
  ASSERT_TRUE(harness) << error;
  llvm::Expected<std::string> cubin = attn::runtime::compileToCubin(
      harness->source, "region_ops", attn::Arch::SM90a);
  ASSERT_TRUE(bool(cubin)) << llvm::toString(cubin.takeError());
  EXPECT_FALSE(cubin->empty());
}

} // namespace
