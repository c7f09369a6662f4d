//===- Reference.cpp - fp64 CPU reference for attn kernels ----------------===//
#include "test/reference/Reference.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <thread>

namespace attn::ref {

namespace {

/// Bit layout of a small binary float format.
struct Format {
  int expBits, manBits, bias;
  bool ieeeSpecials; ///< top exponent is inf/NaN (f16, bf16, e5m2), else e4m3
};

Format formatOf(ScalarType type) {
  switch (type) {
  case ScalarType::F16:
    return {5, 10, 15, true};
  case ScalarType::BF16:
    return {8, 7, 127, true};
  case ScalarType::F8E4M3:
    return {4, 3, 7, false};
  case ScalarType::F8E5M2:
    return {5, 2, 15, true};
  case ScalarType::F32:
    return {8, 23, 127, true};
  }
  return {0, 0, 0, true};
}

/// Largest finite value of a format.
double maxFinite(const Format &f) {
  int maxExp = (1 << f.expBits) - 1 - (f.ieeeSpecials ? 1 : 0);
  // e4m3 reserves only mantissa 111 of the top exponent for NaN.
  double maxMan = f.ieeeSpecials ? 2.0 - std::ldexp(1.0, -f.manBits)
                                 : 2.0 - std::ldexp(1.0, -(f.manBits - 1));
  return std::ldexp(maxMan, maxExp - f.bias);
}

} // namespace

double decode(ScalarType type, uint32_t bits) {
  Format f = formatOf(type);
  int total = 1 + f.expBits + f.manBits;
  uint32_t sign = (bits >> (total - 1)) & 1;
  uint32_t exp = (bits >> f.manBits) & ((1u << f.expBits) - 1);
  uint32_t man = bits & ((1u << f.manBits) - 1);
  double s = sign ? -1.0 : 1.0;
  uint32_t topExp = (1u << f.expBits) - 1;
  if (f.ieeeSpecials && exp == topExp)
    return man ? std::numeric_limits<double>::quiet_NaN()
               : s * std::numeric_limits<double>::infinity();
  if (!f.ieeeSpecials && exp == topExp && man == (1u << f.manBits) - 1)
    return std::numeric_limits<double>::quiet_NaN();
  if (exp == 0)
    return s * std::ldexp(double(man), 1 - f.bias - f.manBits);
  return s * std::ldexp(double(man | (1u << f.manBits)),
                        int(exp) - f.bias - f.manBits);
}

uint32_t encode(ScalarType type, double x) {
  Format f = formatOf(type);
  int total = 1 + f.expBits + f.manBits;
  uint32_t sign = std::signbit(x) ? 1u : 0u;
  uint32_t signBit = sign << (total - 1);
  double a = std::fabs(x);
  bool fp8 = type == ScalarType::F8E4M3 || type == ScalarType::F8E5M2;
  if (std::isnan(x))
    return signBit | ((1u << (total - 1)) - 1); // a NaN encoding
  if (fp8 && a > maxFinite(f))
    a = maxFinite(f); // saturate, infinities included
  if (std::isinf(a))
    return signBit | (((1u << f.expBits) - 1) << f.manBits);
  // Quantum of the binade holding a (subnormal quantum below the normals).
  int e = a > 0 ? std::ilogb(a) : 1 - f.bias;
  if (e < 1 - f.bias)
    e = 1 - f.bias;
  double quantum = std::ldexp(1.0, e - f.manBits);
  double q = std::nearbyint(a / quantum); // ties to even (default rounding)
  double r = q * quantum;
  if (!fp8 && r > maxFinite(f))
    return signBit | (((1u << f.expBits) - 1) << f.manBits); // inf
  if (fp8 && r > maxFinite(f))
    r = maxFinite(f);
  if (r == 0)
    return signBit;
  int re = std::ilogb(r);
  if (re < 1 - f.bias) // subnormal
    return signBit | uint32_t(std::ldexp(r, f.bias - 1 + f.manBits));
  uint32_t man =
      uint32_t(std::ldexp(r, f.manBits - re)) & ((1u << f.manBits) - 1);
  return signBit | (uint32_t(re + f.bias) << f.manBits) | man;
}

int64_t kvOffset(KVLayout layout, int64_t page, int offset, int head,
                 int numKVHeads, int pageSize, int headDim,
                 int64_t pageStride) {
  if (layout == KVLayout::HND)
    return page * pageStride + (int64_t(head) * pageSize + offset) * headDim;
  return page * pageStride + (int64_t(offset) * numKVHeads + head) * headDim;
}

void mlaDecodeReference(const MlaDecodeProblem &p, std::vector<double> &out,
                        std::vector<double> &lse) {
  const int batch = int(p.seqLens.size());
  const int tokens = batch * p.queryLen;
  out.assign(size_t(tokens) * p.numQHeads * p.rank, 0.0);
  lse.assign(size_t(tokens) * p.numQHeads, 0.0);
  std::vector<double> scores;
  for (int b = 0; b < batch; ++b) {
    const int len = p.seqLens[b];
    for (int t = 0; t < p.queryLen; ++t) {
      const int64_t token = int64_t(b) * p.queryLen + t;
      const int visible = p.causal ? len - p.queryLen + t + 1 : len;
      for (int h = 0; h < p.numQHeads; ++h) {
        const int64_t row = token * p.numQHeads + h;
        const double *qn = &p.qNope[row * p.rank];
        const double *qr = p.ropeDim ? &p.qRope[row * p.ropeDim] : nullptr;
        scores.assign(size_t(std::max(visible, 0)), 0.0);
        double max = -INFINITY;
        for (int j = 0; j < visible; ++j) {
          const int64_t r = p.cacheRow[b][j];
          double s = 0;
          for (int d = 0; d < p.rank; ++d)
            s += qn[d] * p.latent[r * p.rank + d];
          for (int d = 0; d < p.ropeDim; ++d)
            s += qr[d] * p.rope[r * p.ropeDim + d];
          scores[j] = s * p.scale;
          max = std::max(max, scores[j]);
        }
        if (visible <= 0) {
          lse[row] = -INFINITY;
          continue;
        }
        double sum = 0;
        for (int j = 0; j < visible; ++j)
          sum += std::exp(scores[j] - max);
        double *o = &out[row * p.rank];
        for (int j = 0; j < visible; ++j) {
          const double w = std::exp(scores[j] - max) / sum;
          const int64_t r = p.cacheRow[b][j];
          for (int d = 0; d < p.rank; ++d)
            o[d] += w * p.latent[r * p.rank + d];
        }
        lse[row] = max + std::log(sum);
      }
    }
  }
}

void decodeReference(const DecodeProblem &p, std::vector<double> &out,
                     std::vector<double> &lse) {
  const int group = p.numQHeads / p.numKVHeads;
  const int rows = p.batch() * p.queryLen;
  out.assign(size_t(rows) * p.numQHeads * p.headDim, 0.0);
  lse.assign(size_t(rows) * p.numQHeads, 0.0);
  std::vector<double> scores;
  for (int b = 0; b < p.batch(); ++b) {
    const int len = p.seqLens[b];
    auto offsetOf = [&](int pos, int kvHead) {
      int page = p.pageTables[size_t(b) * p.pageTableStride + pos / p.pageSize];
      return kvOffset(p.layout, page, pos % p.pageSize, kvHead, p.numKVHeads,
                      p.pageSize, p.headDim, p.pageStride);
    };
    for (int qi = 0; qi < p.queryLen; ++qi) {
      const int token = b * p.queryLen + qi;
      const int qpos = len - p.queryLen + qi;
      for (int h = 0; h < p.numQHeads; ++h) {
        const int kvHead = h / group;
        const double *qrow =
            &p.q[(size_t(token) * p.numQHeads + h) * p.headDim];
        scores.assign(len, -std::numeric_limits<double>::infinity());
        double maxScore = -std::numeric_limits<double>::infinity();
        for (int pos = 0; pos < len; ++pos) {
          if (p.causal && pos > qpos)
            continue;
          if (p.windowLeft && pos < qpos - *p.windowLeft)
            continue;
          if (p.maskMod && !p.maskMod(b, qpos, pos, h, kvHead))
            continue;
          const double *krow = &p.k[offsetOf(pos, kvHead)];
          double dot = 0;
          for (int d = 0; d < p.headDim; ++d)
            dot += qrow[d] * krow[d];
          double s = dot * p.scale;
          if (p.softcap)
            s = *p.softcap * std::tanh(s / *p.softcap);
          if (!p.alibiSlopes.empty())
            s -= p.alibiSlopes[h] * std::abs(double(pos - qpos));
          if (p.scoreMod)
            s = p.scoreMod(s, b, qpos, pos, h, kvHead);
          scores[pos] = s;
          maxScore = std::max(maxScore, s);
        }
        double *orow = &out[(size_t(token) * p.numQHeads + h) * p.headDim];
        double sum = 0;
        for (int pos = 0; pos < len; ++pos) {
          if (scores[pos] == -std::numeric_limits<double>::infinity())
            continue;
          double w = std::exp(scores[pos] - maxScore);
          sum += w;
          const double *vrow = &p.v[offsetOf(pos, kvHead)];
          for (int d = 0; d < p.headDim; ++d)
            orow[d] += w * vrow[d];
        }
        if (!p.sinks.empty()) {
          // e^{sink} joins the denominator only.
          double sink = p.sinks[h];
          double mNew = sum > 0 ? std::max(maxScore, sink) : sink;
          double c = sum > 0 ? std::exp(maxScore - mNew) : 0.0;
          for (int d = 0; d < p.headDim; ++d)
            orow[d] *= c;
          sum = sum * c + std::exp(sink - mNew);
          maxScore = mNew;
        }
        for (int d = 0; d < p.headDim; ++d)
          orow[d] = sum > 0 ? orow[d] / sum : 0.0;
        lse[size_t(token) * p.numQHeads + h] =
            sum > 0 ? maxScore + std::log(sum)
                    : -std::numeric_limits<double>::infinity();
      }
    }
  }
}

/// Softmax-weighted sum of a request's `numKeys` value rows for one (query
/// row, head) of the prefill reference: `rowOf(pos)` is key `pos`'s offset
/// in k, `vRowOf(pos)` in v, `visible(pos)` applies the masks. Writes
/// vHeadDim outputs and returns the LSE. decodeReference keeps its own loop on
/// purpose, so that the unit test comparing the two checks two independent
/// implementations.
template <class RowOf, class VRowOf, class Visible, class ModScore>
static double
attendRow(const double *qrow, int numKeys, int headDim, int vHeadDim,
          double scale, std::optional<double> softcap, double slope,
          std::optional<double> sink, int qpos, const std::vector<double> &k,
          const std::vector<double> &v, RowOf rowOf, VRowOf vRowOf,
          Visible visible, ModScore modScore, double *orow,
          std::vector<double> &scores) {
  const double negInf = -std::numeric_limits<double>::infinity();
  scores.assign(numKeys, negInf);
  double maxScore = negInf;
  for (int pos = 0; pos < numKeys; ++pos) {
    if (!visible(pos))
      continue;
    const double *krow = &k[rowOf(pos)];
    double dot = 0;
    for (int d = 0; d < headDim; ++d)
      dot += qrow[d] * krow[d];
    double s = dot * scale;
    if (softcap)
      s = *softcap * std::tanh(s / *softcap);
    s -= slope * std::abs(double(pos - qpos)); // ALiBi, FlashAttention's sign
    scores[pos] = modScore(s, pos);
    maxScore = std::max(maxScore, s);
  }
  for (int d = 0; d < vHeadDim; ++d)
    orow[d] = 0;
  double sum = 0;
  for (int pos = 0; pos < numKeys; ++pos) {
    if (scores[pos] == negInf)
      continue;
    double w = std::exp(scores[pos] - maxScore);
    sum += w;
    const double *vrow = &v[vRowOf(pos)];
    for (int d = 0; d < vHeadDim; ++d)
      orow[d] += w * vrow[d];
  }
  if (sink) {
    double mNew = sum > 0 ? std::max(maxScore, *sink) : *sink;
    double c = sum > 0 ? std::exp(maxScore - mNew) : 0.0;
    for (int d = 0; d < vHeadDim; ++d)
      orow[d] *= c;
    sum = sum * c + std::exp(*sink - mNew);
    maxScore = mNew;
  }
  for (int d = 0; d < vHeadDim; ++d)
    orow[d] = sum > 0 ? orow[d] / sum : 0.0;
  return sum > 0 ? maxScore + std::log(sum) : negInf;
}

void prefillReference(const PrefillProblem &p, std::vector<double> &out,
                      std::vector<double> &lse) {
  assert(p.batch() >= 0 && p.cuSeqlensKV.size() == p.cuSeqlensQ.size());
  const int group = p.numQHeads / p.numKVHeads;
  const int qTokens = p.cuSeqlensQ.empty() ? 0 : p.cuSeqlensQ.back();
  const int vDim = p.valueDim();
  assert(p.q.size() == size_t(qTokens) * p.numQHeads * p.headDim);
  out.assign(size_t(qTokens) * p.numQHeads * vDim, 0.0);
  lse.assign(size_t(qTokens) * p.numQHeads, 0.0);
  std::vector<int> requestOf(qTokens);
  for (int b = 0; b < p.batch(); ++b)
    for (int t = p.cuSeqlensQ[b]; t < p.cuSeqlensQ[b + 1]; ++t)
      requestOf[t] = b;

  // Rows are independent, so threads take every n-th query token (an
  // interleaving that balances causal rows of growing length). The GPU tests
  // check requests of thousands of tokens, which would take minutes on one
  // core in fp64.
  auto rows = [&](int first, int step) {
    std::vector<double> scores;
    for (int token = first; token < qTokens; token += step) {
      const int b = requestOf[token];
      const int qLen = p.cuSeqlensQ[b + 1] - p.cuSeqlensQ[b];
      const int kvStart = p.cuSeqlensKV[b];
      const int kvLen = p.cuSeqlensKV[b + 1] - kvStart;
      const int qpos = kvLen - qLen + (token - p.cuSeqlensQ[b]); // bottom-right
      for (int h = 0; h < p.numQHeads; ++h) {
        const int kvHead = h / group;
        auto visible = [&](int pos) {
          if (p.causal && pos > qpos)
            return false;
          if (p.windowLeft && pos < qpos - *p.windowLeft)
            return false;
          return !p.maskMod || p.maskMod(b, qpos, pos, h, kvHead);
        };
        auto modScore = [&](double s, int pos) {
          return p.scoreMod ? p.scoreMod(s, b, qpos, pos, h, kvHead) : s;
        };
        auto rowOf = [&](int pos) {
          return (size_t(kvStart + pos) * p.numKVHeads + kvHead) * p.headDim;
        };
        auto vRowOf = [&](int pos) {
          return (size_t(kvStart + pos) * p.numKVHeads + kvHead) * vDim;
        };
        const size_t row = size_t(token) * p.numQHeads + h;
        lse[row] = attendRow(
            &p.q[row * p.headDim], kvLen, p.headDim, vDim, p.scale, p.softcap,
            p.alibiSlopes.empty() ? 0.0 : p.alibiSlopes[h],
            p.sinks.empty() ? std::nullopt : std::optional<double>(p.sinks[h]),
            qpos, p.k, p.v, rowOf, vRowOf, visible, modScore, &out[row * vDim],
            scores);
      }
    }
  };
  // Small problems (the unit tests) stay on the calling thread.
  const double work = double(p.cuSeqlensKV.empty() ? 0 : p.cuSeqlensKV.back()) *
                      qTokens * p.numQHeads * p.headDim;
  const int numThreads =
      work < 1e7
          ? 1
          : int(std::clamp(std::thread::hardware_concurrency(), 1u, 32u));
  std::vector<std::thread> threads;
  for (int i = 1; i < numThreads; ++i)
    threads.emplace_back(rows, i, numThreads);
  rows(0, numThreads);
  for (std::thread &t : threads)
    t.join();
}

double relativeError(const std::vector<double> &a,
                     const std::vector<double> &b) {
  assert(a.size() == b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]))
      return std::numeric_limits<double>::infinity();
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

} // namespace attn::ref
