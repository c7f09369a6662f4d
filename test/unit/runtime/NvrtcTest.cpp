//===- NvrtcTest.cpp - NVRTC compilation and CUDA header discovery --------===//
//
// Real NVRTC, no GPU: kernels that include the embedded templates and the
// CUDA fp16/bf16/fp8 headers compile for every target arch, and a broken
// kernel comes back as an NvrtcError carrying the compiler log.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/support/Nvrtc.h"
#include "attn/runtime/support/Error.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

using namespace attn;
using namespace attn::runtime;

namespace {

constexpr const char *kProbeSource = R"cuda(
#include "attn/params.h"
#include <cuda_bf16.h>
#include <cuda_fp8.h>

extern "C" __global__ void attn_probe(attn::DecodeParams params) {
  auto *out = static_cast<__nv_bfloat16 *>(params.out);
  out[threadIdx.x] = __float2bfloat16(params.smScale * threadIdx.x);
}
)cuda";

bool contains(llvm::StringRef haystack, llvm::StringRef needle) {
  return haystack.contains(needle);
}

TEST(Nvrtc, CompilesEmbeddedTemplatesForEveryArch) {
  for (Arch arch : {Arch::SM80, Arch::SM89, Arch::SM90a}) {
    SCOPED_TRACE(std::string(toString(arch)));
    llvm::Expected<std::string> cubin =
        compileToCubin(kProbeSource, "probe", arch);
    ASSERT_TRUE(bool(cubin)) << llvm::toString(cubin.takeError());
    EXPECT_TRUE(llvm::StringRef(*cubin).starts_with("\x7f"
                                                    "ELF"));
    // The extern "C" entry keeps its name: the runtime looks it up as is.
    EXPECT_TRUE(contains(*cubin, "attn_probe"));
  }
}

TEST(Nvrtc, SyntaxErrorIsNvrtcErrorWithTheLog) {
  llvm::Expected<std::string> cubin = compileToCubin(
      "extern \"C\" __global__ void attn_bad() { undeclared_thing_42 = 1; }",
      "bad_kernel", Arch::SM80);
  ASSERT_FALSE(bool(cubin));
  bool isNvrtcError = false;
  llvm::handleAllErrors(
      cubin.takeError(),
      [&](const NvrtcError &error) {
        isNvrtcError = true;
        EXPECT_TRUE(contains(error.getLog(), "undeclared_thing_42"));
        EXPECT_TRUE(contains(error.message(), "undeclared_thing_42"));
        EXPECT_TRUE(contains(error.message(), "bad_kernel"));
        EXPECT_TRUE(contains(error.message(), "sm_80"));
        EXPECT_EQ(error.getArch(), Arch::SM80);
        EXPECT_EQ(error.getResult(), NVRTC_ERROR_COMPILATION);
        const std::vector<std::string> &options = error.getOptions();
        EXPECT_NE(std::find(options.begin(), options.end(),
                            "--gpu-architecture=sm_80"),
                  options.end());
      },
      [](const llvm::ErrorInfoBase &other) {
        ADD_FAILURE() << "not an NvrtcError: " << other.message();
      });
  EXPECT_TRUE(isNvrtcError);
}

TEST(Nvrtc, OptionsNameTheArchAndLeaveFastMathOff) {
  std::vector<std::string> options = compileOptions(Arch::SM90a);
  EXPECT_EQ(options.front(), "--gpu-architecture=sm_90a");
  EXPECT_EQ(std::count(options.begin(), options.end(), "--use_fast_math"), 0);
  EXPECT_EQ(std::count(options.begin(), options.end(), "-lineinfo"), 0);

  NvrtcOptions withLineInfo;
  withLineInfo.lineInfo = true;
  std::vector<std::string> lineInfo = compileOptions(Arch::SM90a, withLineInfo);
  EXPECT_EQ(std::count(lineInfo.begin(), lineInfo.end(), "-lineinfo"), 1);
}

TEST(Nvrtc, VersionIsCuda13) {
  EXPECT_TRUE(llvm::StringRef(nvrtcVersionString()).starts_with("13."))
      << nvrtcVersionString();
}

TEST(CudaInclude, FirstCandidateWithTheHeadersWins) {
  std::vector<std::string> candidates = {"/nonexistent/attn-include",
                                         ATTN_TEST_CUDA_INCLUDE};
  llvm::Expected<std::string> found = findCudaInclude(candidates);
  ASSERT_TRUE(bool(found)) << llvm::toString(found.takeError());
  EXPECT_EQ(*found, ATTN_TEST_CUDA_INCLUDE);
}

TEST(CudaInclude, NoCandidateIsAnErrorListingWhatWasTried) {
  std::vector<std::string> candidates = {"/nonexistent/one",
                                         "/nonexistent/two"};
  llvm::Expected<std::string> found = findCudaInclude(candidates);
  ASSERT_FALSE(bool(found));
  std::string message = llvm::toString(found.takeError());
  EXPECT_TRUE(contains(message, "/nonexistent/one")) << message;
  EXPECT_TRUE(contains(message, "/nonexistent/two")) << message;
  EXPECT_TRUE(contains(message, "ATTN_CUDA_INCLUDE")) << message;
}

TEST(CudaInclude, EnvironmentOverrideComesFirst) {
  ASSERT_EQ(setenv("ATTN_CUDA_INCLUDE", "/nonexistent/override", 1), 0);
  std::vector<std::string> candidates = cudaIncludeCandidates();
  unsetenv("ATTN_CUDA_INCLUDE");
  ASSERT_GE(candidates.size(), 3u);
  EXPECT_EQ(candidates.front(), "/nonexistent/override");
  EXPECT_EQ(candidates.back(), "/usr/local/cuda/include");
  // A bogus override does not hide a toolkit found later in the list.
  llvm::Expected<std::string> found = findCudaInclude(candidates);
  EXPECT_TRUE(bool(found)) << llvm::toString(found.takeError());
}

} // namespace
