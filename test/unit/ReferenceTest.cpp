//===- ReferenceTest.cpp - the fp64 oracle checked against itself ---------===//
//
// The GPU tests are only as good as the reference: its format conversions
// must be exact and its attention must agree with facts that hold for any
// data (softmax weights sum to one, a single key returns its value, masks
// remove keys).
//
//===----------------------------------------------------------------------===//
#include "test/reference/Reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace attn;
using namespace attn::ref;

namespace {

TEST(ReferenceFormats, KnownEncodings) {
  EXPECT_EQ(decode(ScalarType::BF16, 0x3f80), 1.0);
  EXPECT_EQ(decode(ScalarType::F16, 0x3c00), 1.0);
  EXPECT_EQ(decode(ScalarType::F16, 0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(decode(ScalarType::F8E4M3, 0x7e), 448.0);
  EXPECT_EQ(decode(ScalarType::F8E4M3, 0x01), std::ldexp(1.0, -9));
  EXPECT_TRUE(std::isnan(decode(ScalarType::F8E4M3, 0x7f)));
  EXPECT_EQ(decode(ScalarType::F8E5M2, 0x7b), 57344.0);
  EXPECT_TRUE(std::isinf(decode(ScalarType::F8E5M2, 0x7c)));
  EXPECT_EQ(encode(ScalarType::BF16, 1.0), 0x3f80u);
  EXPECT_EQ(encode(ScalarType::F8E4M3, -2.0), 0xc0u);
}

TEST(ReferenceFormats, FP8SaturatesAndRoundsToEven) {
  EXPECT_EQ(encode(ScalarType::F8E4M3, 1e6), 0x7eu);
  EXPECT_EQ(encode(ScalarType::F8E4M3, -1e6), 0xfeu);
  EXPECT_EQ(encode(ScalarType::F8E5M2, 1e9), 0x7bu);
  // 1 + 1/16 is halfway between 1 and 1.125 in e4m3: ties go to even (1).
  EXPECT_EQ(decode(ScalarType::F8E4M3, encode(ScalarType::F8E4M3, 1.0625)), 1.0);
  EXPECT_EQ(decode(ScalarType::F8E4M3, encode(ScalarType::F8E4M3, 1.1875)), 1.25);
}

TEST(ReferenceFormats, EveryEncodingRoundTrips) {
  for (ScalarType type : {ScalarType::F8E4M3, ScalarType::F8E5M2}) {
    for (uint32_t bits = 0; bits < 256; ++bits) {
      double x = decode(type, bits);
      if (std::isnan(x) || std::isinf(x) || (x == 0 && bits != 0))
        continue; // NaNs, -0 have no unique encoding; FP8 saturates inf
      EXPECT_EQ(encode(type, x), bits) << toString(type) << " " << bits;
    }
  }
  for (uint32_t bits = 0; bits < 0x10000; bits += 7) {
    for (ScalarType type : {ScalarType::F16, ScalarType::BF16}) {
      double x = decode(type, bits);
      if (!std::isnan(x) && !(x == 0 && bits != 0))
        EXPECT_EQ(encode(type, x), bits) << toString(type) << " " << bits;
    }
  }
}

/// One request, one head, page size 1, identity block table.
DecodeProblem tinyProblem(int len, int dim) {
  DecodeProblem p;
  p.numQHeads = p.numKVHeads = 1;
  p.headDim = dim;
  p.pageSize = 1;
  p.seqLens = {len};
  p.blockTableStride = len;
  for (int i = 0; i < len; ++i)
    p.blockTables.push_back(i);
  p.pageStride = dim;
  std::mt19937 rng(1);
  std::normal_distribution<double> n;
  for (int i = 0; i < dim; ++i)
    p.q.push_back(n(rng));
  for (int i = 0; i < len * dim; ++i) {
    p.k.push_back(n(rng));
    p.v.push_back(n(rng));
  }
  p.scale = 1.0 / std::sqrt(double(dim));
  return p;
}

TEST(ReferenceAttention, ConstantValuesGiveThatValue) {
  DecodeProblem p = tinyProblem(50, 8);
  for (int i = 0; i < 50 * 8; ++i)
    p.v[i] = 3.0; // any convex combination of equal rows is that row
  std::vector<double> out, lse;
  decodeReference(p, out, lse);
  for (double x : out)
    EXPECT_NEAR(x, 3.0, 1e-12);
}

TEST(ReferenceAttention, WindowOfZeroSeesOnlyItself) {
  DecodeProblem p = tinyProblem(30, 8);
  p.causal = true;
  p.windowLeft = 0;
  std::vector<double> out, lse;
  decodeReference(p, out, lse);
  for (int d = 0; d < 8; ++d)
    EXPECT_NEAR(out[d], p.v[29 * 8 + d], 1e-12);
}

TEST(ReferenceAttention, LseMatchesDefinition) {
  DecodeProblem p = tinyProblem(20, 16);
  p.softcap = 2.0;
  std::vector<double> out, lse;
  decodeReference(p, out, lse);
  double sum = 0;
  for (int t = 0; t < 20; ++t) {
    double dot = 0;
    for (int d = 0; d < 16; ++d)
      dot += p.q[d] * p.k[t * 16 + d];
    sum += std::exp(2.0 * std::tanh(dot * p.scale / 2.0));
  }
  EXPECT_NEAR(lse[0], std::log(sum), 1e-12);
}

} // namespace
