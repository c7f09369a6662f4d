//===- PrefillCheck.cpp - run a prefill kernel against the reference ------===//
#include "test/reference/PrefillCheck.h"
#include "attn/runtime/support/Error.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

namespace attn::check {

std::vector<int32_t> cumulative(const std::vector<int> &lens) {
  std::vector<int32_t> offsets = {0};
  for (int len : lens)
    offsets.push_back(offsets.back() + len);
  return offsets;
}

namespace {

/// `dense` rows of `rowElems` values spread to a token stride of `stride`
/// elements (the padding bytes are 0xFF: NaN, so a kernel that reads them
/// poisons its output).
std::vector<uint8_t> spread(const std::vector<uint8_t> &dense, int64_t rows,
                            int64_t rowElems, int64_t stride, int bytesPer) {
  if (stride == rowElems)
    return dense;
  std::vector<uint8_t> out(size_t(rows * stride * bytesPer), 0xFF);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(&out[size_t(r * stride * bytesPer)],
                &dense[size_t(r * rowElems * bytesPer)],
                size_t(rowElems * bytesPer));
  return out;
}

/// The bytes of `values`, to upload with the problem's other buffers.
std::vector<uint8_t> bytesOf(const std::vector<float> &values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  if (!bytes.empty())
    std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

/// The inverse of spread for a downloaded output.
std::vector<uint8_t> gather(const std::vector<uint8_t> &strided, int64_t rows,
                            int64_t rowElems, int64_t stride, int bytesPer) {
  if (stride == rowElems)
    return strided;
  std::vector<uint8_t> out(size_t(rows * rowElems * bytesPer));
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(&out[size_t(r * rowElems * bytesPer)],
                &strided[size_t(r * stride * bytesPer)],
                size_t(rowElems * bytesPer));
  return out;
}

std::vector<int32_t> kvLens32(const std::vector<int> &lens) {
  return std::vector<int32_t>(lens.begin(), lens.end());
}

} // namespace

namespace {

/// q as a caller quantizes it for an fp8Query variant: N(0, sigma) entries
/// (sigma growing with the head, so that heads' scales differ), stored in
/// e4m3 as x / scale[h] with scale[h] = max |x| of head h / 448; `values`
/// holds stored * scale[h].
Quantized randomQuantizedQuery(std::mt19937 &rng, int64_t tokens, int heads,
                               int headDim, double sigma,
                               std::vector<float> &scales) {
  std::vector<double> x(size_t(tokens) * heads * headDim);
  std::vector<double> amax(heads, 0.0);
  for (int64_t t = 0; t < tokens; ++t)
    for (int h = 0; h < heads; ++h) {
      std::normal_distribution<double> dist(0.0, sigma * (1.0 + 0.5 * (h % 3)));
      for (int e = 0; e < headDim; ++e) {
        double &value = x[(size_t(t) * heads + h) * headDim + e];
        value = dist(rng);
        amax[h] = std::max(amax[h], std::abs(value));
      }
    }
  scales.resize(heads);
  for (int h = 0; h < heads; ++h)
    scales[h] = float(amax[h] > 0 ? amax[h] / 448.0 : 1.0);
  Quantized q;
  q.bytes.resize(x.size());
  q.values.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double scale = scales[(i / headDim) % heads];
    const uint32_t bits = ref::encode(ScalarType::F8E4M3, x[i] / scale);
    q.bytes[i] = uint8_t(bits);
    q.values[i] = ref::decode(ScalarType::F8E4M3, bits) * scale;
  }
  return q;
}

/// Ragged FP8 k or v: N(0, 1) entries stored in `type` as x / scales[h]
/// (h the row's KV head); `values` holds stored * scales[h].
Quantized randomFP8Rows(std::mt19937 &rng, ScalarType type, int64_t tokens,
                        int heads, int headDim,
                        const std::vector<float> &scales) {
  std::normal_distribution<double> dist(0.0, 1.0);
  Quantized rows;
  rows.bytes.resize(size_t(tokens) * heads * headDim);
  rows.values.resize(rows.bytes.size());
  for (size_t i = 0; i < rows.bytes.size(); ++i) {
    const double scale = scales[scales.size() == 1 ? 0 : (i / headDim) % heads];
    const uint32_t bits = ref::encode(type, dist(rng) / scale);
    rows.bytes[i] = uint8_t(bits);
    rows.values[i] = ref::decode(type, bits) * scale;
  }
  return rows;
}

/// One random problem on the device, for a launcher to run.
struct DeviceProblem {
  std::vector<int32_t> cuQ, cuKV, kvLens;
  /// Token strides; q and k rows are wider than v and out with a rope_dim.
  int64_t qTokens = 0, kvTokens = 0, qStride = 0, outStride = 0, kStride = 0,
          vStride = 0;
  bool strided = false;
  runtime::DeviceBuffer q, k, v, slopes, sinks, qScales, out, lse, seqLens;
  runtime::DeviceBuffer kScales, vScales; ///< ragged FP8 k/v
  int numKVScales = 0;
  std::vector<runtime::DeviceBuffer> auxBuffers;
  AuxTable aux[kMaxAuxTables] = {};
  RandomPagedCache cache; ///< paged variants
  std::optional<DeviceCache> dCache;
};

/// The arguments every prefill-like launch shares, from `d`.
template <class Args>
void fillCommon(Args &args, const PrefillVariant &v, DeviceProblem &d) {
  args.q = d.q.ptr<void>();
  args.numQHeads = v.numQHeads;
  args.headDim = v.headDim;
  if (d.strided) {
    args.qStrideToken = d.qStride;
    args.outStrideToken = d.outStride;
  }
  args.out = d.out.ptr<void>();
  args.lse = v.writeLse ? d.lse.ptr<float>() : nullptr;
  args.alibiSlopes = v.alibi ? d.slopes.ptr<float>() : nullptr;
  args.sinks = v.sinks ? d.sinks.ptr<float>() : nullptr;
  args.qScale = v.fp8Query ? d.qScales.ptr<float>() : nullptr;
  for (int i = 0; i < kMaxAuxTables; ++i)
    args.aux[i] = d.aux[i];
}

template <class Args>
void fillPaged(Args &args, const PrefillVariant &v, DeviceProblem &d) {
  fillCommon(args, v, d);
  args.qType = v.qType;
  args.cache = d.dCache->view;
  args.pageTables = d.dCache->pageTables.ptr<int32_t>();
  args.pageTableStride = d.cache.pageTableStride;
  if (v.paged->kvType == ScalarType::F8E4M3 ||
      v.paged->kvType == ScalarType::F8E5M2) {
    args.kScale = d.dCache->kScales.ptr<float>();
    args.vScale = d.dCache->vScales.ptr<float>();
    args.numKVScales = int(d.cache.kScales.size());
  }
}

/// Plans and runs on `stream` (directly or by graph replays, re-poisoning
/// `poison` before each), setting the CTAs of the plan's grid.
using Launcher = llvm::function_ref<llvm::Error(DeviceProblem &, CUstream,
                                                PrefillCheckResult &plan)>;

/// Draws the problem `tc` describes, runs it through `launch` and compares
/// with the fp64 reference.
llvm::Expected<PrefillCheckResult> checkWith(const PrefillVariant &v,
                                             const PrefillCheckOptions &tc,
                                             Launcher launch) {
  assert(tc.kvLens.empty() || tc.kvLens.size() == tc.qLens.size());
  assert(tc.extraTokenStride % 8 == 0);
  std::mt19937 rng(tc.seed);
  DeviceProblem d;
  d.kvLens = tc.kvLens.empty() ? tc.qLens : tc.kvLens;
  d.cuQ = cumulative(tc.qLens);
  d.cuKV = cumulative(d.kvLens);
  d.qTokens = d.cuQ.back();
  d.kvTokens = d.cuKV.back();
  const int qkDim = v.headDim + v.ropeDim;
  const int64_t qRow = int64_t(v.numQHeads) * qkDim;
  const int64_t outRow = int64_t(v.numQHeads) * v.headDim;
  const int64_t kRow = int64_t(v.numKVHeads) * qkDim;
  const int64_t vRow = int64_t(v.numKVHeads) * v.headDim;
  d.strided = tc.extraTokenStride != 0;
  d.qStride = qRow + tc.extraTokenStride;
  d.outStride = outRow + tc.extraTokenStride;
  d.kStride = kRow + tc.extraTokenStride;
  d.vStride = vRow + tc.extraTokenStride;
  const int bytesPer = sizeOf(v.qType);

  ref::PrefillProblem prob;
  prob.numQHeads = v.numQHeads;
  prob.numKVHeads = v.numKVHeads;
  prob.headDim = qkDim;
  prob.vHeadDim = v.headDim;
  prob.cuSeqlensQ.assign(d.cuQ.begin(), d.cuQ.end());
  prob.cuSeqlensKV.assign(d.cuKV.begin(), d.cuKV.end());
  setScoreMods(prob, v);
  // The documented default scale is over every dim of q.k (MLA: 192).
  if (!v.scale)
    prob.scale = 1.0 / std::sqrt(double(qkDim));
  if (tc.modifiers) {
    prob.scoreMod = tc.modifiers->refScore;
    prob.maskMod = tc.modifiers->refMask;
    if (llvm::Error err = uploadAux(*tc.modifiers, d.auxBuffers, d.aux))
      return std::move(err);
  }

  // N(0, 1) entries: with the 1/sqrt(d) scale, logits are O(1) and the
  // softmax is neither uniform nor one-hot, so both P and V errors show.
  std::vector<float> qScales;
  Quantized q = v.fp8Query ? randomQuantizedQuery(rng, d.qTokens, v.numQHeads,
                                                  v.headDim, tc.qStd, qScales)
                           : randomValues(rng, v.qType,
                                          size_t(d.qTokens * qRow), tc.qStd);
  prob.q = q.values;
  // Ragged: contiguous k / v. Paged: a random cache; the reference reads
  // its pages gathered into rows.
  Quantized k, val;
  std::vector<float> kScales, vScales; // ragged FP8 k/v
  PagedCacheShape shape;
  if (v.paged) {
    shape.kvType = v.paged->kvType;
    shape.numKVHeads = v.numKVHeads;
    shape.headDim = v.headDim;
    shape.pageSize = v.paged->pageSize;
    shape.layout = v.paged->layout;
    shape.perHeadKVScale = v.paged->perHeadKVScale;
    shape.kvScale = tc.kvScale;
    shape.interleavedKV = tc.interleavedKV;
    d.cache = randomPagedCache(rng, shape, d.kvLens);
    gatherPages(d.cache, shape, d.kvLens, prob.k, prob.v);
  } else if (v.fp8KV) {
    // Scales of kvScale (and up to twice it, per head), v's half k's.
    for (int h = 0; h < (v.fp8KV->perHeadKVScale ? v.numKVHeads : 1); ++h) {
      kScales.push_back(float(tc.kvScale * (1.0 + 0.5 * (h % 3))));
      vScales.push_back(0.5f * kScales.back());
    }
    k = randomFP8Rows(rng, v.fp8KV->kvType, d.kvTokens, v.numKVHeads, v.headDim,
                      kScales);
    val = randomFP8Rows(rng, v.fp8KV->kvType, d.kvTokens, v.numKVHeads,
                        v.headDim, vScales);
    prob.k = k.values;
    prob.v = val.values;
  } else {
    k = randomValues(rng, v.qType, size_t(d.kvTokens * kRow), 1.0);
    val = randomValues(rng, v.qType, size_t(d.kvTokens * vRow), 1.0);
    prob.k = k.values;
    prob.v = val.values;
  }
  if (tc.pinnedRequest >= 0) {
    const int b = tc.pinnedRequest;
    if (v.fp8Query || v.fp8KV || (v.paged && v.paged->kvType != v.qType) ||
        tc.interleavedKV || b >= int(tc.qLens.size()))
      return llvm::createStringError(
          "pinnedRequest: a request of the batch, over 16-bit q/k/v");
    // Its q rows by their positions in the sequence (the last row is
    // position kvLen - 1), its pages or key / value rows by their indices.
    const int qRows = d.cuQ[b + 1] - d.cuQ[b];
    for (int i = 0; i < qRows; ++i)
      overwritePinned(q.bytes, q.values, v.qType, (d.cuQ[b] + i) * qRow, qRow,
                      tc.pinnedSeed, PinnedStream::QRow,
                      d.kvLens[b] - qRows + i);
    prob.q = q.values;
    if (v.paged) {
      const int pages = (d.kvLens[b] + shape.pageSize - 1) / shape.pageSize;
      for (int i = 0; i < pages; ++i) {
        const int64_t page =
            d.cache.pageTables[size_t(b) * d.cache.pageTableStride + i];
        overwritePinned(d.cache.kBytes, d.cache.k, v.qType,
                        page * d.cache.pageStride, d.cache.pageElems,
                        tc.pinnedSeed, PinnedStream::KPage, i);
        overwritePinned(d.cache.vBytes, d.cache.v, v.qType,
                        page * d.cache.pageStride, d.cache.pageElems,
                        tc.pinnedSeed, PinnedStream::VPage, i);
      }
      gatherPages(d.cache, shape, d.kvLens, prob.k, prob.v);
    } else {
      for (int j = 0; j < d.kvLens[b]; ++j) {
        overwritePinned(k.bytes, k.values, v.qType, (d.cuKV[b] + j) * kRow,
                        kRow, tc.pinnedSeed, PinnedStream::KRow, j);
        overwritePinned(val.bytes, val.values, v.qType, (d.cuKV[b] + j) * vRow,
                        vRow, tc.pinnedSeed, PinnedStream::VRow, j);
      }
      prob.k = k.values;
      prob.v = val.values;
    }
  }
  std::vector<double> refOut, refLse;
  ref::prefillReference(prob, refOut, refLse);

  const int64_t raggedKVRows = v.paged ? 0 : d.kvTokens;
  const int kvBytesPer = v.fp8KV ? 1 : bytesPer;
  d.numKVScales = int(kScales.size());
  std::vector<float> slopes(prob.alibiSlopes.begin(), prob.alibiSlopes.end());
  for (auto [buffer, data] :
       {std::pair{&d.q, spread(q.bytes, d.qTokens, qRow, d.qStride,
                               v.fp8Query ? 1 : bytesPer)},
        {&d.k, spread(k.bytes, raggedKVRows, kRow, d.kStride, kvBytesPer)},
        {&d.v, spread(val.bytes, raggedKVRows, vRow, d.vStride, kvBytesPer)},
        {&d.kScales, bytesOf(kScales)},
        {&d.vScales, bytesOf(vScales)}}) {
    auto uploaded = upload(data);
    if (!uploaded)
      return uploaded.takeError();
    *buffer = std::move(*uploaded);
  }
  auto slopesOr = upload(slopes);
  if (!slopesOr)
    return slopesOr.takeError();
  d.slopes = std::move(*slopesOr);
  auto sinksOr =
      upload(std::vector<float>(prob.sinks.begin(), prob.sinks.end()));
  if (!sinksOr)
    return sinksOr.takeError();
  d.sinks = std::move(*sinksOr);
  auto qScalesOr = upload(qScales);
  if (!qScalesOr)
    return qScalesOr.takeError();
  d.qScales = std::move(*qScalesOr);
  auto lensOr = upload(kvLens32(d.kvLens));
  if (!lensOr)
    return lensOr.takeError();
  d.seqLens = std::move(*lensOr);
  if (v.paged) {
    auto uploaded = uploadCache(d.cache, shape);
    if (!uploaded)
      return uploaded.takeError();
    d.dCache.emplace(std::move(*uploaded));
  }
  auto outOr = poisoned(size_t(d.qTokens * d.outStride * bytesPer));
  if (!outOr)
    return outOr.takeError();
  d.out = std::move(*outOr);
  auto lseOr = poisoned(size_t(d.qTokens * v.numQHeads) * sizeof(float));
  if (!lseOr)
    return lseOr.takeError();
  d.lse = std::move(*lseOr);

  auto streamOr = runtime::Stream::create();
  if (!streamOr)
    return streamOr.takeError();
  PrefillCheckResult result;
  if (llvm::Error err = launch(d, streamOr->get(), result))
    return std::move(err);

  auto outBytesOr = download(d.out);
  if (!outBytesOr)
    return outBytesOr.takeError();
  result.outBytes =
      gather(*outBytesOr, d.qTokens, outRow, d.outStride, bytesPer);
  result.outError =
      ref::relativeError(decodeAll(v.qType, result.outBytes), refOut);
  if (v.writeLse) {
    auto lseBytesOr = download(d.lse);
    if (!lseBytesOr)
      return lseBytesOr.takeError();
    result.lseBytes = *lseBytesOr;
    std::vector<float> lse(lseBytesOr->size() / sizeof(float));
    std::memcpy(lse.data(), lseBytesOr->data(), lse.size() * sizeof(float));
    const double inf = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < lse.size(); ++i) {
      double err = std::isnan(lse[i]) ? inf
                   : std::isinf(refLse[i])
                       ? (double(lse[i]) == refLse[i] ? 0 : inf)
                       : std::fabs(lse[i] - refLse[i]);
      result.lseError = std::max(result.lseError, err);
    }
  }
  return result;
}

/// Runs `kernel.run(plan, args)` directly or replayed from a graph.
template <class Kernel, class Plan, class Args>
llvm::Error runOrReplay(const Kernel &kernel, const Plan &plan,
                        const Args &args, CUstream stream, DeviceProblem &d,
                        int graphReplays) {
  if (graphReplays == 0)
    return kernel.run(plan, args, stream);
  return replayInGraph(kernel, plan, args, stream, {&d.out, &d.lse},
                       graphReplays);
}

} // namespace

llvm::Expected<PrefillCheckResult>
checkPrefill(const runtime::PrefillKernel &kernel, const PrefillVariant &v,
             const PrefillCheckOptions &tc) {
  return checkWith(
      v, tc,
      [&](DeviceProblem &d, CUstream stream,
          PrefillCheckResult &result) -> llvm::Error {
        std::optional<runtime::PrefillWorkspace> ownWorkspace;
        if (!tc.workspace) {
          auto wsOr = kernel.createWorkspace(int(tc.qLens.size()), d.qTokens,
                                             tc.splitKV);
          if (!wsOr)
            return wsOr.takeError();
          ownWorkspace.emplace(std::move(*wsOr));
        }
        runtime::PrefillWorkspace &ws =
            tc.workspace ? *tc.workspace : *ownWorkspace;
        const bool forGraph = tc.graphReplays > 0;
        auto planOr = v.paged
                          ? kernel.planPaged(d.cuQ, kvLens32(d.kvLens), ws,
                                             stream, forGraph)
                          : kernel.plan(d.cuQ, d.cuKV, ws, stream, forGraph);
        if (!planOr)
          return planOr.takeError();
        result.gridX = planOr->gridX;
        result.splitItems = planOr->splitItems;
        if (v.paged) {
          runtime::PagedPrefillArgs args;
          fillPaged(args, v, d);
          args.numQTokens = d.qTokens;
          return runOrReplay(kernel, *planOr, args, stream, d, tc.graphReplays);
        }
        runtime::PrefillArgs args;
        fillCommon(args, v, d);
        args.k = d.k.ptr<void>();
        args.v = d.v.ptr<void>();
        args.dtype = v.qType;
        if (v.fp8KV) {
          args.kvType = v.fp8KV->kvType;
          args.kScale = d.kScales.ptr<float>();
          args.vScale = d.vScales.ptr<float>();
          args.numKVScales = d.numKVScales;
        }
        args.numQTokens = d.qTokens;
        args.numKVTokens = d.kvTokens;
        args.numKVHeads = v.numKVHeads;
        args.ropeDim = v.ropeDim;
        if (d.strided) {
          args.kStrideToken = d.kStride;
          args.vStrideToken = d.vStride;
        }
        return runOrReplay(kernel, *planOr, args, stream, d, tc.graphReplays);
      });
}

llvm::Expected<PrefillCheckResult>
checkMixedBatch(const runtime::MixedBatchAttention &mixed,
                const PrefillVariant &v, const PrefillCheckOptions &tc,
                int numPrefills) {
  return checkWith(
      v, tc,
      [&](DeviceProblem &d, CUstream stream,
          PrefillCheckResult &result) -> llvm::Error {
        auto wsOr = mixed.createWorkspace(int(tc.qLens.size()), d.qTokens);
        if (!wsOr)
          return wsOr.takeError();
        auto planOr = mixed.plan(d.cuQ, kvLens32(d.kvLens), numPrefills, *wsOr,
                                 stream, tc.graphReplays > 0);
        if (!planOr)
          return planOr.takeError();
        result.gridX = (planOr->prefill ? planOr->prefill->gridX : 0) +
                       (planOr->decode ? planOr->decode->gridX : 0);
        runtime::MixedBatchArgs args;
        fillPaged(args, v, d);
        args.numQTokens = d.qTokens;
        args.seqLens = d.seqLens.ptr<int32_t>();
        return runOrReplay(mixed, *planOr, args, stream, d, tc.graphReplays);
      });
}

} // namespace attn::check
