//===- MergeStatesGpuTest.cpp - merge_states against the fp64 reference --===//
//
// Random partial states (outputs of every dtype, LSEs spread wide) merged
// on the GPU and in fp64 from the same stored values. The states include
// rows where some or all LSEs are -inf (an empty partial, whose output is
// NaN garbage the kernel must not read), and rows whose LSEs differ by
// hundreds (one state takes all the weight). Merges run out of place, in
// place, and with strided states; bad arguments are errors naming them.
//
//===----------------------------------------------------------------------===//
#include "compiler/Jit/Jit.h"
#include "test/gpu/GpuTestUtil.h"
#include "test/reference/DecodeCheck.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace attn;
using namespace attn::test;

namespace {

struct MergeCase {
  std::string name;
  ScalarType dtype;
  int heads, headDim, numStates;
  int64_t tokens;
  bool inPlace = false;
  int64_t extraStride = 0; ///< elements past heads * head_dim per token
};

std::vector<MergeCase> cases() {
  using S = ScalarType;
  return {
      {"f32_h32_d128_2", S::F32, 32, 128, 2, 300},
      {"bf16_h8_d128_3", S::BF16, 8, 128, 3, 1000},
      {"f16_h4_d64_8", S::F16, 4, 64, 8, 257},
      {"bf16_h2_d256_16", S::BF16, 2, 256, 16, 100},
      {"f16_h6_d96_5", S::F16, 6, 96, 5, 77},
      {"f32_h3_d40_4", S::F32, 3, 40, 4, 33},
      {"bf16_h8_d128_4_in_place", S::BF16, 8, 128, 4, 500, true},
      {"f32_h4_d64_3_in_place_strided", S::F32, 4, 64, 3, 129, true, 16},
      {"f16_h8_d128_2_strided", S::F16, 8, 128, 2, 64, false, 8},
  };
}

void PrintTo(const MergeCase &c, std::ostream *os) { *os << c.name; }

class MergeStatesGpuTest : public ::testing::TestWithParam<MergeCase> {};

TEST_P(MergeStatesGpuTest, MatchesReference) {
  ATTN_REQUIRE_GPU();
  const MergeCase &tc = GetParam();
  MergeStatesVariant variant{tc.dtype, tc.heads, tc.headDim};
  ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().mergeStates(variant));
  std::mt19937 rng(uint32_t(std::hash<std::string>()(tc.name)));
  const int64_t rows = tc.tokens * tc.heads;
  const int64_t stride = int64_t(tc.heads) * tc.headDim + tc.extraStride;
  const int bytes = sizeOf(tc.dtype);
  const double inf = std::numeric_limits<double>::infinity();

  // LSEs: most rows spread over [-5, 5]; every 7th row has one empty state,
  // every 11th only empty ones, every 13th one state 300 above the rest.
  std::uniform_real_distribution<double> spread(-5.0, 5.0);
  std::vector<std::vector<float>> lses(tc.numStates, std::vector<float>(rows));
  for (int64_t r = 0; r < rows; ++r)
    for (int i = 0; i < tc.numStates; ++i) {
      double l = spread(rng);
      if (r % 7 == 0 && i == int(r % tc.numStates))
        l = -inf;
      if (r % 11 == 0)
        l = -inf;
      if (r % 13 == 0)
        l = i == int(r % tc.numStates) ? 250.0 : -50.0 + l;
      lses[i][r] = float(l);
    }
  // Outputs: stored values; an empty state's row is NaN.
  std::vector<std::vector<double>> values(tc.numStates);
  std::vector<runtime::DeviceBuffer> outBuffers, lseBuffers;
  runtime::MergeStatesArgs args;
  for (int i = 0; i < tc.numStates; ++i) {
    check::Quantized q =
        check::randomValues(rng, tc.dtype, size_t(tc.tokens * stride), 1.0);
    for (int64_t r = 0; r < rows; ++r)
      if (std::isinf(lses[i][r])) {
        int64_t at = (r / tc.heads) * stride + (r % tc.heads) * tc.headDim;
        for (int d = 0; d < tc.headDim; ++d)
          std::memset(&q.bytes[size_t(at + d) * bytes], 0xFF, bytes);
      }
    values[i] = q.values;
    ATTN_ASSIGN_OR_FAIL(out, check::upload(q.bytes));
    ATTN_ASSIGN_OR_FAIL(lse, check::upload(lses[i]));
    args.outs[i] = out.ptr<void>();
    args.lses[i] = lse.ptr<float>();
    outBuffers.push_back(std::move(out));
    lseBuffers.push_back(std::move(lse));
  }
  std::optional<runtime::DeviceBuffer> outBuffer, lseBuffer;
  if (!tc.inPlace) {
    ATTN_ASSIGN_OR_FAIL(o, poisoned(size_t(tc.tokens * stride) * bytes));
    ATTN_ASSIGN_OR_FAIL(l, poisoned(size_t(rows) * sizeof(float)));
    outBuffer.emplace(std::move(o));
    lseBuffer.emplace(std::move(l));
  }
  args.dtype = tc.dtype;
  args.numTokens = tc.tokens;
  args.numHeads = tc.heads;
  args.headDim = tc.headDim;
  args.numStates = tc.numStates;
  args.statesStrideToken = tc.extraStride ? stride : 0;
  args.outStrideToken = args.statesStrideToken;
  args.out = tc.inPlace ? outBuffers[0].ptr<void>() : outBuffer->ptr<void>();
  args.lse = tc.inPlace ? lseBuffers[0].ptr<float>() : lseBuffer->ptr<float>();
  ATTN_ASSERT_OK(kernel->run(args, nullptr));
  ATTN_ASSIGN_OR_FAIL(outBytes,
                      download(tc.inPlace ? outBuffers[0] : *outBuffer));
  ATTN_ASSIGN_OR_FAIL(lseBytes,
                      download(tc.inPlace ? lseBuffers[0] : *lseBuffer));
  std::vector<double> got = decodeAll(tc.dtype, outBytes);
  std::vector<float> gotLse(rows);
  std::memcpy(gotLse.data(), lseBytes.data(), rows * sizeof(float));

  // fp64: lse = log sum exp(lse_i); out = sum exp(lse_i - lse) out_i.
  double maxOutError = 0, maxLseError = 0, refScale = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double m = -inf;
    for (int i = 0; i < tc.numStates; ++i)
      m = std::max(m, double(lses[i][r]));
    double sum = 0;
    for (int i = 0; i < tc.numStates; ++i)
      sum += std::isinf(lses[i][r]) ? 0.0 : std::exp(lses[i][r] - m);
    double lse = sum > 0 ? m + std::log(sum) : -inf;
    if (std::isinf(lse))
      EXPECT_TRUE(std::isinf(gotLse[r]) && gotLse[r] < 0) << "row " << r;
    else
      maxLseError = std::max(maxLseError, std::fabs(gotLse[r] - lse));
    int64_t at = (r / tc.heads) * stride + (r % tc.heads) * tc.headDim;
    for (int d = 0; d < tc.headDim; ++d) {
      double want = 0;
      for (int i = 0; i < tc.numStates; ++i)
        if (!std::isinf(lses[i][r]))
          want += std::exp(lses[i][r] - lse) * values[i][at + d];
      double g = got[at + d];
      maxOutError =
          std::isnan(g) ? inf : std::max(maxOutError, std::fabs(g - want));
      refScale = std::max(refScale, std::fabs(want));
    }
  }
  // One rounding to the output type beyond fp32 arithmetic.
  double tolerance = tc.dtype == ScalarType::F32   ? 1e-5
                     : tc.dtype == ScalarType::F16 ? 2e-3
                                                   : 1.6e-2;
  EXPECT_LT(maxOutError, tolerance * std::max(1.0, refScale)) << tc.name;
  EXPECT_LT(maxLseError, 1e-3) << tc.name;
}

INSTANTIATE_TEST_SUITE_P(Matrix, MergeStatesGpuTest,
                         ::testing::ValuesIn(cases()),
                         [](const auto &info) { return info.param.name; });

TEST(MergeStatesArgsGpuTest, BadArgumentsAreErrorsNamingThem) {
  ATTN_REQUIRE_GPU();
  ATTN_ASSIGN_OR_FAIL(kernel,
                      Jit::global().mergeStates({ScalarType::BF16, 8, 128}));
  ATTN_ASSIGN_OR_FAIL(a, runtime::DeviceBuffer::allocate(1 << 20));
  ATTN_ASSIGN_OR_FAIL(b, runtime::DeviceBuffer::allocate(1 << 20));
  runtime::MergeStatesArgs args;
  args.dtype = ScalarType::BF16;
  args.numTokens = 10;
  args.numHeads = 8;
  args.headDim = 128;
  args.numStates = 2;
  args.outs[0] = a.ptr<void>();
  args.outs[1] = b.ptr<void>();
  args.lses[0] = a.ptr<float>() + 100000;
  args.lses[1] = b.ptr<float>() + 100000;
  args.out = a.ptr<void>();
  auto error = [&](const runtime::MergeStatesArgs &bad) {
    return llvm::toString(kernel->run(bad, nullptr));
  };
  ATTN_ASSERT_OK(kernel->run(args, nullptr)); // in place into state 0
  runtime::MergeStatesArgs one = args;
  one.numStates = 1;
  EXPECT_NE(error(one).find("numStates = 1"), std::string::npos);
  runtime::MergeStatesArgs types = args;
  types.dtype = ScalarType::F16;
  EXPECT_NE(error(types).find("states are f16 8x128"), std::string::npos);
  runtime::MergeStatesArgs shifted = args;
  shifted.out = static_cast<char *>(a.ptr<void>()) + 256;
  EXPECT_NE(error(shifted).find("out overlaps outs[0]"), std::string::npos);
  runtime::MergeStatesArgs missing = args;
  missing.lses[1] = nullptr;
  EXPECT_NE(error(missing).find("lses[1] must not be null"), std::string::npos);
  runtime::MergeStatesArgs stride = args;
  stride.statesStrideToken = 100;
  EXPECT_NE(error(stride).find("statesStrideToken = 100"), std::string::npos);
}

} // namespace
