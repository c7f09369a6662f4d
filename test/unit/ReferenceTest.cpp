//===- ReferenceTest.cpp - the fp64 oracle checked against itself ---------===//
//
// The GPU tests are only as good as the reference: its format conversions
// must be exact and its attention must agree with facts that hold for any
// data (softmax weights sum to one, a single key returns its value, masks
// remove keys).
//
//===----------------------------------------------------------------------===//
#include "test/reference/Reference.h"
#include "test/reference/Modifiers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
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
  EXPECT_EQ(decode(ScalarType::F8E4M3, encode(ScalarType::F8E4M3, 1.0625)),
            1.0);
  EXPECT_EQ(decode(ScalarType::F8E4M3, encode(ScalarType::F8E4M3, 1.1875)),
            1.25);
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

/// One request, one head, page size 1, identity page table.
DecodeProblem tinyProblem(int len, int dim) {
  DecodeProblem p;
  p.numQHeads = p.numKVHeads = 1;
  p.headDim = dim;
  p.pageSize = 1;
  p.seqLens = {len};
  p.pageTableStride = len;
  for (int i = 0; i < len; ++i)
    p.pageTables.push_back(i);
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

//===----------------------------------------------------------------------===//
// Ragged prefill
//===----------------------------------------------------------------------===//

/// Random dense q/k/v for the given per-request lengths.
PrefillProblem randomPrefill(std::vector<int> qLens, std::vector<int> kvLens,
                             int hq, int hkv, int dim, uint32_t seed = 7) {
  PrefillProblem p;
  p.numQHeads = hq;
  p.numKVHeads = hkv;
  p.headDim = dim;
  p.cuSeqlensQ = {0};
  p.cuSeqlensKV = {0};
  for (size_t b = 0; b < qLens.size(); ++b) {
    p.cuSeqlensQ.push_back(p.cuSeqlensQ.back() + qLens[b]);
    p.cuSeqlensKV.push_back(p.cuSeqlensKV.back() + kvLens[b]);
  }
  std::mt19937 rng(seed);
  std::normal_distribution<double> n;
  for (int i = 0; i < p.cuSeqlensQ.back() * hq * dim; ++i)
    p.q.push_back(n(rng));
  for (int i = 0; i < p.cuSeqlensKV.back() * hkv * dim; ++i) {
    p.k.push_back(n(rng));
    p.v.push_back(n(rng));
  }
  p.scale = 1.0 / std::sqrt(double(dim));
  return p;
}

/// The same requests as a decode problem: page size 1 and an identity page
/// table make the paged cache the dense k/v, and decode's queryLen queries
/// per request are prefill's qLen when every request has that many.
DecodeProblem asDecode(const PrefillProblem &p, int queryLen) {
  DecodeProblem d;
  d.numQHeads = p.numQHeads;
  d.numKVHeads = p.numKVHeads;
  d.headDim = p.headDim;
  d.pageSize = 1;
  d.queryLen = queryLen;
  d.pageStride = int64_t(p.numKVHeads) * p.headDim;
  d.pageTableStride = 0;
  for (int b = 0; b < p.batch(); ++b)
    d.pageTableStride =
        std::max(d.pageTableStride, p.cuSeqlensKV[b + 1] - p.cuSeqlensKV[b]);
  d.pageTables.assign(size_t(p.batch()) * d.pageTableStride, 0);
  for (int b = 0; b < p.batch(); ++b) {
    d.seqLens.push_back(p.cuSeqlensKV[b + 1] - p.cuSeqlensKV[b]);
    for (int t = 0; t < d.seqLens.back(); ++t)
      d.pageTables[size_t(b) * d.pageTableStride + t] = p.cuSeqlensKV[b] + t;
  }
  d.q = p.q;
  d.k = p.k;
  d.v = p.v;
  d.scale = p.scale;
  d.causal = p.causal;
  d.windowLeft = p.windowLeft;
  d.softcap = p.softcap;
  d.alibiSlopes = p.alibiSlopes;
  d.scoreMod = p.scoreMod;
  d.maskMod = p.maskMod;
  return d;
}

void expectAllNear(const std::vector<double> &a, const std::vector<double> &b,
                   double tol, const char *what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(b[i])) {
      EXPECT_EQ(a[i], b[i]) << what << "[" << i << "]";
      continue;
    }
    ASSERT_NEAR(a[i], b[i], tol) << what << "[" << i << "]";
  }
}

// Decode is prefill with one query (or queryLen queries) per request over a
// paged cache; the two independent implementations must agree with every
// feature on, GQA included. queryLen 150 is large enough for the prefill
// reference to spread rows over threads.
TEST(ReferencePrefill, AgreesWithDecodeReference) {
  for (int queryLen : {1, 3, 150}) {
    PrefillProblem p =
        randomPrefill({queryLen, queryLen, queryLen},
                      {40 + queryLen, queryLen, 97 + 2 * queryLen}, 8, 2, 16);
    p.causal = true;
    p.windowLeft = 20;
    p.softcap = 3.0;
    for (int h = 0; h < 8; ++h)
      p.alibiSlopes.push_back(std::pow(2.0, -(h + 1)));
    std::vector<double> out, lse, refOut, refLse;
    prefillReference(p, out, lse);
    decodeReference(asDecode(p, queryLen), refOut, refLse);
    expectAllNear(out, refOut, 1e-12, "out");
    expectAllNear(lse, refLse, 1e-12, "lse");
  }
}

// Causal with qLen == kvLen: query 0 sees only key 0, so it returns v[0]
// and its LSE is that one score; the last query sees every key.
TEST(ReferencePrefill, CausalFirstRowIsFirstValue) {
  PrefillProblem p = randomPrefill({33}, {33}, 4, 2, 8);
  p.causal = true;
  std::vector<double> out, lse;
  prefillReference(p, out, lse);
  for (int h = 0; h < 4; ++h) {
    const int kvHead = h / 2;
    double dot = 0;
    for (int d = 0; d < 8; ++d) {
      EXPECT_NEAR(out[h * 8 + d], p.v[kvHead * 8 + d], 1e-12) << h << " " << d;
      dot += p.q[h * 8 + d] * p.k[kvHead * 8 + d];
    }
    EXPECT_NEAR(lse[h], dot * p.scale, 1e-12);
  }
  // The last row equals the non-causal answer.
  PrefillProblem full = p;
  full.causal = false;
  std::vector<double> fullOut, fullLse;
  prefillReference(full, fullOut, fullLse);
  for (int i = 32 * 4 * 8; i < 33 * 4 * 8; ++i)
    EXPECT_NEAR(out[i], fullOut[i], 1e-12);
  EXPECT_NE(out[1 * 4 * 8], fullOut[1 * 4 * 8]); // row 1 is masked
}

// Chunk continuation: 5 new queries over 12 keys sit at positions 7..11.
// Row i must equal the last row of a causal qLen == kvLen == 8 + i problem
// over the same keys.
TEST(ReferencePrefill, CausalAlignsToBottomRight) {
  PrefillProblem p = randomPrefill({5}, {12}, 2, 1, 8);
  p.causal = true;
  std::vector<double> out, lse;
  prefillReference(p, out, lse);
  for (int i = 0; i < 5; ++i) {
    const int keys = 8 + i;
    PrefillProblem one = p;
    one.cuSeqlensQ = {0, 1};
    one.cuSeqlensKV = {0, keys};
    one.q.assign(p.q.begin() + i * 2 * 8, p.q.begin() + (i + 1) * 2 * 8);
    one.k.resize(keys * 8);
    one.v.resize(keys * 8);
    std::vector<double> oneOut, oneLse;
    prefillReference(one, oneOut, oneLse);
    for (int j = 0; j < 2 * 8; ++j)
      EXPECT_NEAR(out[i * 2 * 8 + j], oneOut[j], 1e-12) << i;
    for (int h = 0; h < 2; ++h)
      EXPECT_NEAR(lse[i * 2 + h], oneLse[h], 1e-12) << i;
  }
}

// Causal with fewer keys than queries: the first qLen - kvLen rows see no
// key at all; they are 0 with LSE -inf, the rest are ordinary rows.
TEST(ReferencePrefill, RowsWithoutKeysAreZero) {
  PrefillProblem p = randomPrefill({6}, {4}, 2, 2, 8);
  p.causal = true;
  std::vector<double> out, lse;
  prefillReference(p, out, lse);
  for (int row = 0; row < 6; ++row)
    for (int h = 0; h < 2; ++h) {
      bool empty = row < 2;
      EXPECT_EQ(std::isinf(lse[row * 2 + h]) && lse[row * 2 + h] < 0, empty)
          << row;
      if (!empty)
        continue;
      for (int d = 0; d < 8; ++d) {
        EXPECT_EQ(out[(row * 2 + h) * 8 + d], 0.0);
      }
    }
  // Row 2 sits at position 0: it returns v[0] of its head.
  for (int h = 0; h < 2; ++h)
    for (int d = 0; d < 8; ++d)
      EXPECT_NEAR(out[(2 * 2 + h) * 8 + d], p.v[h * 8 + d], 1e-12);
}

// Encoder (non-causal, no window, no ALiBi) attention is a function of the
// set of keys: permuting a request's K/V rows together changes nothing.
TEST(ReferencePrefill, EncoderIsKeyPermutationInvariant) {
  PrefillProblem p = randomPrefill({10, 7}, {10, 23}, 4, 1, 16);
  p.softcap = 5.0;
  std::vector<double> out, lse;
  prefillReference(p, out, lse);
  PrefillProblem shuffled = p;
  std::mt19937 rng(3);
  for (int b = 0; b < 2; ++b) {
    std::vector<int> perm(p.cuSeqlensKV[b + 1] - p.cuSeqlensKV[b]);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    const int row = 16; // one KV head
    for (size_t t = 0; t < perm.size(); ++t)
      for (int d = 0; d < row; ++d) {
        size_t to = (p.cuSeqlensKV[b] + t) * row + d;
        size_t from = (p.cuSeqlensKV[b] + perm[t]) * row + d;
        shuffled.k[to] = p.k[from];
        shuffled.v[to] = p.v[from];
      }
  }
  std::vector<double> out2, lse2;
  prefillReference(shuffled, out2, lse2);
  expectAllNear(out2, out, 1e-12, "out");
  expectAllNear(lse2, lse, 1e-12, "lse");
  // ...while a causal mask does depend on the order.
  p.causal = shuffled.causal = true;
  prefillReference(p, out, lse);
  prefillReference(shuffled, out2, lse2);
  EXPECT_GT(relativeError(out2, out), 1e-3);
}

// ALiBi is FlashAttention's -slope * |i + kvLen - qLen - j|: with q = 0
// every score is the bias alone, so row i's softmax weights are
// 2^-|pos_i - j| for slope ln 2. Bidirectional (encoder) and cross attention
// penalize later keys as much as earlier ones; causal attention sees only
// earlier keys, where the bias is slope * (j - pos_i).
TEST(ReferencePrefill, AlibiIsFlashAttentionsSymmetricBias) {
  for (bool causal : {false, true}) {
    // Two queries over four keys: bottom-right positions 2 and 3.
    PrefillProblem p = randomPrefill({2}, {4}, 1, 1, 8);
    std::fill(p.q.begin(), p.q.end(), 0.0);
    p.causal = causal;
    p.alibiSlopes = {std::log(2.0)};
    std::vector<double> out, lse;
    prefillReference(p, out, lse);
    for (int i = 0; i < 2; ++i) {
      const int pos = 2 + i;
      double sum = 0;
      std::vector<double> expected(8, 0.0);
      for (int j = 0; j < 4; ++j) {
        if (causal && j > pos)
          continue;
        double w = std::pow(2.0, -std::abs(pos - j));
        sum += w;
        for (int d = 0; d < 8; ++d)
          expected[d] += w * p.v[j * 8 + d];
      }
      EXPECT_NEAR(lse[i], std::log(sum), 1e-12) << i << " causal " << causal;
      for (int d = 0; d < 8; ++d)
        EXPECT_NEAR(out[i * 8 + d], expected[d] / sum, 1e-12) << i;
    }
  }
}

// Requests of a ragged batch do not see each other: the batch's answer is
// each request's answer alone, concatenated.
TEST(ReferencePrefill, RequestsAreIndependent) {
  PrefillProblem p = randomPrefill({3, 9, 1}, {5, 9, 30}, 2, 2, 8);
  p.causal = true;
  p.windowLeft = 4;
  std::vector<double> out, lse;
  prefillReference(p, out, lse);
  for (int b = 0; b < 3; ++b) {
    PrefillProblem one = p;
    const int q0 = p.cuSeqlensQ[b], q1 = p.cuSeqlensQ[b + 1];
    const int k0 = p.cuSeqlensKV[b], k1 = p.cuSeqlensKV[b + 1];
    one.cuSeqlensQ = {0, q1 - q0};
    one.cuSeqlensKV = {0, k1 - k0};
    const int qRow = 2 * 8, kvRow = 2 * 8;
    one.q.assign(p.q.begin() + q0 * qRow, p.q.begin() + q1 * qRow);
    one.k.assign(p.k.begin() + k0 * kvRow, p.k.begin() + k1 * kvRow);
    one.v.assign(p.v.begin() + k0 * kvRow, p.v.begin() + k1 * kvRow);
    std::vector<double> oneOut, oneLse;
    prefillReference(one, oneOut, oneLse);
    for (size_t i = 0; i < oneOut.size(); ++i)
      EXPECT_NEAR(out[q0 * qRow + i], oneOut[i], 1e-12) << b;
  }
}

// A causal window of 0 sees only the key at the query's own position.
TEST(ReferencePrefill, WindowOfZeroSeesOwnPosition) {
  PrefillProblem p = randomPrefill({4}, {9}, 1, 1, 8);
  p.causal = true;
  p.windowLeft = 0;
  std::vector<double> out, lse;
  prefillReference(p, out, lse);
  for (int i = 0; i < 4; ++i)
    for (int d = 0; d < 8; ++d)
      EXPECT_NEAR(out[i * 8 + d], p.v[(5 + i) * 8 + d], 1e-12) << i;
}

// The test modifiers (test/reference/Modifiers.h) change the output well
// beyond the GPU tests' tolerance (1e-2) on the data those tests draw, so a
// kernel that ignored one would fail them; and the two references agree on
// them.
TEST(ReferenceModifiers, EachChangesTheOutputAndBothReferencesAgree) {
  std::mt19937 rng(3);
  std::vector<int> lens = {700, 300};
  for (const check::TestModifiers &m :
       {check::softcapRegion(1.5), check::chunkedLocal(256),
        check::documentMask(rng, lens), check::t5Bias(rng, 8),
        check::alibiRegion(8), check::causalRegion(), check::windowRegion(200),
        check::bidirectionalSpans(rng, lens)}) {
    PrefillProblem p = randomPrefill(lens, lens, 8, 2, 32);
    p.causal = !m.replacesCausal;
    std::vector<double> plain, plainLse, out, lse, refOut, refLse;
    prefillReference(p, plain, plainLse);
    p.scoreMod = m.refScore;
    p.maskMod = m.refMask;
    prefillReference(p, out, lse);
    EXPECT_GT(relativeError(out, plain), 0.05) << m.name;
    // The last 3 queries of each request as decode rows.
    PrefillProblem tail = randomPrefill({3, 3}, lens, 8, 2, 32);
    tail.causal = !m.replacesCausal;
    tail.scoreMod = m.refScore;
    tail.maskMod = m.refMask;
    prefillReference(tail, out, lse);
    decodeReference(asDecode(tail, 3), refOut, refLse);
    expectAllNear(out, refOut, 1e-12, m.name.c_str());
  }
}

} // namespace
