//===- PrefillCheck.cpp - run a prefill kernel against the reference ------===//
#include "test/reference/PrefillCheck.h"
#include "attn/runtime/Error.h"

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

} // namespace

llvm::Expected<PrefillCheckResult>
checkPrefill(const runtime::PrefillKernel &kernel, const PrefillVariant &v,
             const PrefillCheckOptions &tc) {
  assert(tc.kvLens.empty() || tc.kvLens.size() == tc.qLens.size());
  assert(tc.extraTokenStride % 8 == 0);
  std::mt19937 rng(tc.seed);
  const int batch = int(tc.qLens.size());
  const std::vector<int32_t> cuQ = cumulative(tc.qLens);
  const std::vector<int32_t> cuKV =
      cumulative(tc.kvLens.empty() ? tc.qLens : tc.kvLens);
  const int64_t qTokens = cuQ.back(), kvTokens = cuKV.back();
  const int64_t qRow = int64_t(v.numQHeads) * v.headDim;
  const int64_t kvRow = int64_t(v.numKVHeads) * v.headDim;
  const int64_t qStride = qRow + tc.extraTokenStride;
  const int64_t kvStride = kvRow + tc.extraTokenStride;
  const int bytesPer = sizeOf(v.qType);

  ref::PrefillProblem prob;
  prob.numQHeads = v.numQHeads;
  prob.numKVHeads = v.numKVHeads;
  prob.headDim = v.headDim;
  prob.cuSeqlensQ.assign(cuQ.begin(), cuQ.end());
  prob.cuSeqlensKV.assign(cuKV.begin(), cuKV.end());
  prob.scale = v.scale ? *v.scale : 1.0 / std::sqrt(double(v.headDim));
  prob.causal = v.causal;
  prob.windowLeft = v.windowLeft;
  if (v.softcap)
    prob.softcap = *v.softcap;
  // Slopes as ALiBi defines them for a power-of-two head count.
  if (v.alibi)
    for (int h = 0; h < v.numQHeads; ++h)
      prob.alibiSlopes.push_back(std::pow(2.0, -8.0 * (h + 1) / v.numQHeads));

  // N(0, 1) entries: with the 1/sqrt(d) scale, logits are O(1) and the
  // softmax is neither uniform nor one-hot, so both P and V errors show.
  Quantized q = randomValues(rng, v.qType, size_t(qTokens * qRow), 1.0);
  Quantized k = randomValues(rng, v.qType, size_t(kvTokens * kvRow), 1.0);
  Quantized val = randomValues(rng, v.qType, size_t(kvTokens * kvRow), 1.0);
  prob.q = q.values;
  prob.k = k.values;
  prob.v = val.values;
  std::vector<double> refOut, refLse;
  ref::prefillReference(prob, refOut, refLse);

  auto dqOr = upload(spread(q.bytes, qTokens, qRow, qStride, bytesPer));
  if (!dqOr)
    return dqOr.takeError();
  auto dkOr = upload(spread(k.bytes, kvTokens, kvRow, kvStride, bytesPer));
  if (!dkOr)
    return dkOr.takeError();
  auto dvOr = upload(spread(val.bytes, kvTokens, kvRow, kvStride, bytesPer));
  if (!dvOr)
    return dvOr.takeError();
  std::vector<float> slopes(prob.alibiSlopes.begin(), prob.alibiSlopes.end());
  auto dSlopesOr = upload(slopes);
  if (!dSlopesOr)
    return dSlopesOr.takeError();
  auto dOutOr = poisoned(size_t(qTokens * qStride * bytesPer));
  if (!dOutOr)
    return dOutOr.takeError();
  auto &dOut = *dOutOr;
  auto dLseOr = poisoned(size_t(qTokens * v.numQHeads) * sizeof(float));
  if (!dLseOr)
    return dLseOr.takeError();
  auto &dLse = *dLseOr;

  std::optional<runtime::PrefillWorkspace> ownWorkspace;
  if (!tc.workspace) {
    auto wsOr = kernel.createWorkspace(batch, qTokens);
    if (!wsOr)
      return wsOr.takeError();
    ownWorkspace.emplace(std::move(*wsOr));
  }
  runtime::PrefillWorkspace &ws = tc.workspace ? *tc.workspace : *ownWorkspace;
  auto streamOr = runtime::Stream::create();
  if (!streamOr)
    return streamOr.takeError();
  CUstream stream = streamOr->get();
  auto planOr = kernel.plan(cuQ, cuKV, ws, stream,
                            /*forGraph=*/tc.graphReplays > 0);
  if (!planOr)
    return planOr.takeError();
  const runtime::PrefillPlan &plan = *planOr;

  runtime::PrefillArgs args;
  args.q = dqOr->ptr<void>();
  args.k = dkOr->ptr<void>();
  args.v = dvOr->ptr<void>();
  args.dtype = v.qType;
  args.numQTokens = qTokens;
  args.numKVTokens = kvTokens;
  args.numQHeads = v.numQHeads;
  args.numKVHeads = v.numKVHeads;
  args.headDim = v.headDim;
  if (tc.extraTokenStride) {
    args.qStrideToken = args.outStrideToken = qStride;
    args.kStrideToken = args.vStrideToken = kvStride;
  }
  args.out = dOut.ptr<void>();
  args.lse = v.writeLse ? dLse.ptr<float>() : nullptr;
  args.alibiSlopes = v.alibi ? dSlopesOr->ptr<float>() : nullptr;
  if (tc.graphReplays == 0) {
    if (llvm::Error err = kernel.run(plan, args, stream))
      return std::move(err);
  } else if (llvm::Error err = replayInGraph(kernel, plan, args, stream,
                                             {&dOut, &dLse}, tc.graphReplays)) {
    return std::move(err);
  }

  auto outBytesOr = download(dOut);
  if (!outBytesOr)
    return outBytesOr.takeError();
  PrefillCheckResult result;
  result.gridX = plan.gridX;
  result.outError = ref::relativeError(
      decodeAll(v.qType, gather(*outBytesOr, qTokens, qRow, qStride, bytesPer)),
      refOut);
  if (v.writeLse) {
    auto lseBytesOr = download(dLse);
    if (!lseBytesOr)
      return lseBytesOr.takeError();
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

} // namespace attn::check
