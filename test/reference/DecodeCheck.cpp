//===- DecodeCheck.cpp - run a decode kernel against the reference --------===//
#include "test/reference/DecodeCheck.h"
#include "attn/runtime/Error.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace attn::check {

Quantized randomValues(std::mt19937 &rng, ScalarType type, size_t n,
                       double sigma, double scale) {
  std::normal_distribution<double> dist(0.0, sigma);
  int bytesPer = sizeOf(type);
  Quantized q;
  q.bytes.resize(n * bytesPer);
  q.values.resize(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits = ref::encode(type, dist(rng) / scale);
    std::memcpy(&q.bytes[i * bytesPer], &bits, bytesPer); // little endian
    q.values[i] = ref::decode(type, bits) * scale;
  }
  return q;
}

std::vector<double> decodeAll(ScalarType type, const std::vector<uint8_t> &bytes) {
  int bytesPer = sizeOf(type);
  std::vector<double> out(bytes.size() / bytesPer);
  for (size_t i = 0; i < out.size(); ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, &bytes[i * bytesPer], bytesPer);
    out[i] = ref::decode(type, bits);
  }
  return out;
}

llvm::Expected<runtime::DeviceBuffer> upload(const void *bytes, size_t size) {
  auto buffer = runtime::DeviceBuffer::allocate(size);
  if (!buffer)
    return buffer.takeError();
  if (size)
    ATTN_CU_CHECK(cuMemcpyHtoD(buffer->get(), bytes, size));
  return std::move(*buffer);
}

llvm::Expected<runtime::DeviceBuffer> poisoned(size_t bytes) {
  auto buffer = runtime::DeviceBuffer::allocate(bytes);
  if (!buffer)
    return buffer.takeError();
  ATTN_CU_CHECK(cuMemsetD8(buffer->get(), 0xFF, bytes));
  return std::move(*buffer);
}

llvm::Expected<std::vector<uint8_t>> download(const runtime::DeviceBuffer &buffer) {
  std::vector<uint8_t> data(buffer.size());
  ATTN_CU_CHECK(cuCtxSynchronize());
  if (!data.empty())
    ATTN_CU_CHECK(cuMemcpyDtoH(data.data(), buffer.get(), buffer.size()));
  return data;
}

llvm::Expected<DecodeCheckResult> checkDecode(const runtime::DecodeKernel &kernel,
                                              const DecodeVariant &v,
                                              const DecodeCheckOptions &tc) {
  std::mt19937 rng(tc.seed);
  const int batch = int(tc.seqLens.size());
  const int64_t tokens = int64_t(batch) * v.queryLen;
  const int64_t pageElems = int64_t(v.pageSize) * v.numKVHeads * v.headDim;
  const int64_t pageStride = tc.interleavedKV ? 2 * pageElems : pageElems;

  // Pages of all requests in a shuffled order, plus a few unused ones.
  std::vector<int> pagesPer(batch);
  int totalPages = 3, maxPages = 0;
  for (int b = 0; b < batch; ++b) {
    pagesPer[b] = (tc.seqLens[b] + v.pageSize - 1) / v.pageSize;
    totalPages += pagesPer[b];
    maxPages = std::max(maxPages, pagesPer[b]);
  }
  std::vector<int> order(totalPages);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  const int stride = maxPages + 1;
  std::vector<int> blockTables(size_t(batch) * stride, 0);
  for (int b = 0, next = 0; b < batch; ++b)
    for (int i = 0; i < pagesPer[b]; ++i)
      blockTables[size_t(b) * stride + i] = order[next++];

  // Per-KV-head FP8 scales (all equal unless the variant is per head).
  const bool fp8 = v.kvType == ScalarType::F8E4M3 || v.kvType == ScalarType::F8E5M2;
  const int numScales = v.perHeadKVScale ? v.numKVHeads : 1;
  std::vector<float> kScales(numScales), vScales(numScales);
  for (int h = 0; h < numScales; ++h) {
    kScales[h] = float(tc.kvScale * (1 + h / 8.0));
    vScales[h] = float(tc.kvScale * (1.5 + h / 8.0));
  }

  ref::DecodeProblem prob;
  prob.numQHeads = v.numQHeads;
  prob.numKVHeads = v.numKVHeads;
  prob.headDim = v.headDim;
  prob.pageSize = v.pageSize;
  prob.layout = v.layout;
  prob.queryLen = v.queryLen;
  prob.seqLens = tc.seqLens;
  prob.blockTables = blockTables;
  prob.blockTableStride = stride;
  prob.pageStride = pageStride;
  prob.scale = v.scale ? *v.scale : 1.0 / std::sqrt(double(v.headDim));
  prob.causal = v.causal;
  prob.windowLeft = v.windowLeft;
  if (v.softcap)
    prob.softcap = *v.softcap;
  if (v.alibi)
    for (int h = 0; h < v.numQHeads; ++h)
      prob.alibiSlopes.push_back(std::pow(2.0, -8.0 * (h + 1) / v.numQHeads));

  Quantized q = randomValues(rng, v.qType, tokens * v.numQHeads * v.headDim, 1.0);
  prob.q = q.values;

  // K and V in one buffer when interleaved; element (page, token, head) gets
  // its head's scale.
  const int kvBytes = sizeOf(v.kvType);
  const int64_t cacheElems = int64_t(totalPages) * pageStride;
  std::vector<uint8_t> kBytes(cacheElems * kvBytes), vBytes(cacheElems * kvBytes);
  prob.k.assign(cacheElems, 0.0);
  prob.v.assign(cacheElems, 0.0);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int64_t page = 0; page < totalPages; ++page)
    for (int off = 0; off < v.pageSize; ++off)
      for (int h = 0; h < v.numKVHeads; ++h) {
        int64_t at = ref::kvOffset(v.layout, page, off, h, v.numKVHeads,
                                   v.pageSize, v.headDim, pageStride);
        double ks = fp8 ? kScales[v.perHeadKVScale ? h : 0] : 1.0;
        double vs = fp8 ? vScales[v.perHeadKVScale ? h : 0] : 1.0;
        for (int d = 0; d < v.headDim; ++d) {
          uint32_t kb = ref::encode(v.kvType, normal(rng) / ks);
          uint32_t vb = ref::encode(v.kvType, normal(rng) / vs);
          std::memcpy(&kBytes[(at + d) * kvBytes], &kb, kvBytes);
          std::memcpy(&vBytes[(at + d) * kvBytes], &vb, kvBytes);
          prob.k[at + d] = ref::decode(v.kvType, kb) * ks;
          prob.v[at + d] = ref::decode(v.kvType, vb) * vs;
        }
      }
  if (tc.interleavedKV) {
    // V lives in the second half of each page of the K buffer; the reference
    // indexes V from that half's start with the same page stride.
    for (int64_t page = 0; page < totalPages; ++page)
      std::memcpy(&kBytes[(page * pageStride + pageElems) * kvBytes],
                  &vBytes[(page * pageStride) * kvBytes], pageElems * kvBytes);
  }

  std::vector<double> refOut, refLse;
  ref::decodeReference(prob, refOut, refLse);

  auto dqOr = upload(q.bytes);
  if (!dqOr)
    return dqOr.takeError();
  auto &dq = *dqOr;
  auto dkOr = upload(kBytes);
  if (!dkOr)
    return dkOr.takeError();
  auto &dk = *dkOr;
  auto dvOr = upload(vBytes);
  if (!dvOr)
    return dvOr.takeError();
  auto &dv = *dvOr;
  auto dTablesOr = upload(blockTables);
  if (!dTablesOr)
    return dTablesOr.takeError();
  auto &dTables = *dTablesOr;
  std::vector<int32_t> lens(tc.seqLens.begin(), tc.seqLens.end());
  auto dLensOr = upload(lens);
  if (!dLensOr)
    return dLensOr.takeError();
  auto &dLens = *dLensOr;
  auto dKScaleOr = upload(kScales);
  if (!dKScaleOr)
    return dKScaleOr.takeError();
  auto &dKScale = *dKScaleOr;
  auto dVScaleOr = upload(vScales);
  if (!dVScaleOr)
    return dVScaleOr.takeError();
  auto &dVScale = *dVScaleOr;
  std::vector<float> slopes(prob.alibiSlopes.begin(), prob.alibiSlopes.end());
  auto dSlopesOr = upload(slopes);
  if (!dSlopesOr)
    return dSlopesOr.takeError();
  auto &dSlopes = *dSlopesOr;
  auto dOutOr = poisoned(q.bytes.size());
  if (!dOutOr)
    return dOutOr.takeError();
  auto &dOut = *dOutOr;
  auto dLseOr = poisoned(tokens * v.numQHeads * sizeof(float));
  if (!dLseOr)
    return dLseOr.takeError();
  auto &dLse = *dLseOr;

  auto wsOr = kernel.createWorkspace(batch);
  if (!wsOr)
    return wsOr.takeError();
  auto &ws = *wsOr;
  auto streamOr = runtime::Stream::create();
  if (!streamOr)
    return streamOr.takeError();
  CUstream stream = streamOr->get();
  auto planOr = kernel.plan(lens, ws, stream, /*forGraph=*/tc.graphReplays > 0);
  if (!planOr)
    return planOr.takeError();
  auto &plan = *planOr;
  runtime::DecodeArgs args;
  args.q = dq.ptr<void>();
  args.qType = v.qType;
  args.numTokens = tokens;
  args.numQHeads = v.numQHeads;
  args.headDim = v.headDim;
  args.out = dOut.ptr<void>();
  args.lse = v.writeLse ? dLse.ptr<float>() : nullptr;
  args.cache.k = dk.ptr<void>();
  args.cache.v = tc.interleavedKV ? dk.ptr<char>() + pageElems * kvBytes
                                  : dv.ptr<void>();
  args.cache.dtype = v.kvType;
  args.cache.numKVHeads = v.numKVHeads;
  args.cache.headDim = v.headDim;
  args.cache.pageSize = v.pageSize;
  args.cache.layout = v.layout;
  args.cache.numPages = totalPages;
  args.cache.pageStride = pageStride;
  args.blockTables = dTables.ptr<int32_t>();
  args.blockTableStride = stride;
  args.seqLens = dLens.ptr<int32_t>();
  if (fp8) {
    args.kScale = dKScale.ptr<float>();
    args.vScale = dVScale.ptr<float>();
    args.numKVScales = numScales;
  }
  args.alibiSlopes = v.alibi ? dSlopes.ptr<float>() : nullptr;
  if (tc.graphReplays == 0) {
    if (llvm::Error err = kernel.run(plan, args, stream))
      return std::move(err);
  } else if (llvm::Error err = replayInGraph(kernel, plan, args, stream,
                                             {&dOut}, tc.graphReplays)) {
    return std::move(err);
  }

  auto outBytesOr = download(dOut);
  if (!outBytesOr)
    return outBytesOr.takeError();
  auto &outBytes = *outBytesOr;
  DecodeCheckResult result;
  result.outError = ref::relativeError(decodeAll(v.qType, outBytes), refOut);
  result.chunkTokens = plan.chunkTokens;
  if (v.writeLse) {
    auto lseBytesOr = download(dLse);
    if (!lseBytesOr)
      return lseBytesOr.takeError();
    std::vector<float> lse(lseBytesOr->size() / sizeof(float));
    std::memcpy(lse.data(), lseBytesOr->data(), lse.size() * sizeof(float));
    for (size_t i = 0; i < lse.size(); ++i)
      result.lseError = std::max(result.lseError,
                                 std::isnan(lse[i]) ? INFINITY
                                                    : std::fabs(lse[i] - refLse[i]));
  }
  return result;
}

} // namespace attn::check
