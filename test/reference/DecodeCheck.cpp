//===- DecodeCheck.cpp - run a decode kernel against the reference --------===//
#include "test/reference/DecodeCheck.h"
#include "attn/runtime/support/Error.h"

#include <algorithm>
#include <cassert>
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

Quantized pinnedValues(uint32_t seed, PinnedStream stream, int64_t index,
                       ScalarType type, size_t n, double scale) {
  std::seed_seq seq{seed, uint32_t(stream), uint32_t(index),
                    uint32_t(uint64_t(index) >> 32)};
  std::mt19937 rng(seq);
  return randomValues(rng, type, n, 1.0, scale);
}

void overwritePinned(std::vector<uint8_t> &bytes, std::vector<double> &values,
                     ScalarType type, int64_t first, int64_t n, uint32_t seed,
                     PinnedStream stream, int64_t index, double scale) {
  Quantized fresh = pinnedValues(seed, stream, index, type, size_t(n), scale);
  std::memcpy(&bytes[first * sizeOf(type)], fresh.bytes.data(),
              fresh.bytes.size());
  std::copy(fresh.values.begin(), fresh.values.end(), values.begin() + first);
}

std::vector<double> decodeAll(ScalarType type,
                              const std::vector<uint8_t> &bytes) {
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
  if (llvm::Error error = buffer->copyFromHost(bytes, size))
    return std::move(error);
  return std::move(*buffer);
}

llvm::Expected<runtime::DeviceBuffer> poisoned(size_t bytes) {
  auto buffer = runtime::DeviceBuffer::allocate(bytes);
  if (!buffer)
    return buffer.takeError();
  ATTN_CU_CHECK(cuMemsetD8(buffer->get(), 0xFF, bytes));
  // The memset runs on the legacy stream, which the kernels' non-blocking
  // streams do not wait for: left running, it could land after a kernel's
  // writes (seen once as a kitchen-sink LSE of NaN with 12 test processes
  // sharing the GPU).
  ATTN_CU_CHECK(cuCtxSynchronize());
  return std::move(*buffer);
}

llvm::Expected<std::vector<uint8_t>>
download(const runtime::DeviceBuffer &buffer) {
  std::vector<uint8_t> data(buffer.size());
  ATTN_CU_CHECK(cuCtxSynchronize());
  if (!data.empty())
    ATTN_CU_CHECK(cuMemcpyDtoH(data.data(), buffer.get(), buffer.size()));
  return data;
}

RandomPagedCache randomPagedCache(std::mt19937 &rng, const PagedCacheShape &sh,
                                  const std::vector<int> &seqLens) {
  RandomPagedCache c;
  const int batch = int(seqLens.size());
  c.pageElems = int64_t(sh.pageSize) * sh.numKVHeads * sh.headDim;
  c.pageStride = sh.interleavedKV ? 2 * c.pageElems : c.pageElems;

  // Pages of all requests in a shuffled order, plus a few unused ones.
  std::vector<int> pagesPer(batch);
  int maxPages = 0;
  c.totalPages = 3;
  for (int b = 0; b < batch; ++b) {
    pagesPer[b] = (seqLens[b] + sh.pageSize - 1) / sh.pageSize;
    c.totalPages += pagesPer[b];
    maxPages = std::max(maxPages, pagesPer[b]);
  }
  std::vector<int> order(c.totalPages);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  c.pageTableStride = maxPages + 1;
  c.pageTables.assign(size_t(batch) * c.pageTableStride, 0);
  for (int b = 0, next = 0; b < batch; ++b)
    for (int i = 0; i < pagesPer[b]; ++i)
      c.pageTables[size_t(b) * c.pageTableStride + i] = order[next++];

  // Per-KV-head FP8 scales (all equal unless the variant is per head).
  const bool fp8 =
      sh.kvType == ScalarType::F8E4M3 || sh.kvType == ScalarType::F8E5M2;
  const int numScales = sh.perHeadKVScale ? sh.numKVHeads : 1;
  c.kScales.resize(numScales);
  c.vScales.resize(numScales);
  for (int h = 0; h < numScales; ++h) {
    c.kScales[h] = float(sh.kvScale * (1 + h / 8.0));
    c.vScales[h] = float(sh.kvScale * (1.5 + h / 8.0));
  }

  // Element (page, token, head) gets its head's scale.
  const int kvBytes = sizeOf(sh.kvType);
  const int64_t cacheElems = int64_t(c.totalPages) * c.pageStride;
  c.kBytes.assign(cacheElems * kvBytes, 0);
  c.vBytes.assign(cacheElems * kvBytes, 0);
  c.k.assign(cacheElems, 0.0);
  c.v.assign(cacheElems, 0.0);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (int64_t page = 0; page < c.totalPages; ++page)
    for (int off = 0; off < sh.pageSize; ++off)
      for (int h = 0; h < sh.numKVHeads; ++h) {
        int64_t at = ref::kvOffset(sh.layout, page, off, h, sh.numKVHeads,
                                   sh.pageSize, sh.headDim, c.pageStride);
        double ks = fp8 ? c.kScales[sh.perHeadKVScale ? h : 0] : 1.0;
        double vs = fp8 ? c.vScales[sh.perHeadKVScale ? h : 0] : 1.0;
        for (int d = 0; d < sh.headDim; ++d) {
          uint32_t kb = ref::encode(sh.kvType, normal(rng) / ks);
          uint32_t vb = ref::encode(sh.kvType, normal(rng) / vs);
          std::memcpy(&c.kBytes[(at + d) * kvBytes], &kb, kvBytes);
          std::memcpy(&c.vBytes[(at + d) * kvBytes], &vb, kvBytes);
          c.k[at + d] = ref::decode(sh.kvType, kb) * ks;
          c.v[at + d] = ref::decode(sh.kvType, vb) * vs;
        }
      }
  if (sh.interleavedKV) {
    // V lives in the second half of each page of the K buffer; the reference
    // indexes V from that half's start with the same page stride.
    for (int64_t page = 0; page < c.totalPages; ++page)
      std::memcpy(&c.kBytes[(page * c.pageStride + c.pageElems) * kvBytes],
                  &c.vBytes[(page * c.pageStride) * kvBytes],
                  c.pageElems * kvBytes);
  }
  return c;
}

void gatherPages(const RandomPagedCache &c, const PagedCacheShape &sh,
                 const std::vector<int> &seqLens, std::vector<double> &k,
                 std::vector<double> &v) {
  const int64_t row = int64_t(sh.numKVHeads) * sh.headDim;
  k.clear();
  v.clear();
  for (size_t b = 0; b < seqLens.size(); ++b)
    for (int pos = 0; pos < seqLens[b]; ++pos) {
      int page = c.pageTables[b * c.pageTableStride + pos / sh.pageSize];
      for (int h = 0; h < sh.numKVHeads; ++h) {
        int64_t at =
            ref::kvOffset(sh.layout, page, pos % sh.pageSize, h, sh.numKVHeads,
                          sh.pageSize, sh.headDim, c.pageStride);
        k.insert(k.end(), c.k.begin() + at, c.k.begin() + at + sh.headDim);
        v.insert(v.end(), c.v.begin() + at, c.v.begin() + at + sh.headDim);
      }
    }
  assert(int64_t(k.size()) % row == 0);
  (void)row;
}

llvm::Expected<DeviceCache> uploadCache(const RandomPagedCache &c,
                                        const PagedCacheShape &sh) {
  DeviceCache d;
  for (auto [buffer, bytes, size] :
       {std::tuple{&d.k, static_cast<const void *>(c.kBytes.data()),
                   c.kBytes.size()},
        {&d.v, c.vBytes.data(), c.vBytes.size()},
        {&d.pageTables, c.pageTables.data(),
         c.pageTables.size() * sizeof(int32_t)},
        {&d.kScales, c.kScales.data(), c.kScales.size() * sizeof(float)},
        {&d.vScales, c.vScales.data(), c.vScales.size() * sizeof(float)}}) {
    auto uploaded = upload(bytes, size);
    if (!uploaded)
      return uploaded.takeError();
    *buffer = std::move(*uploaded);
  }
  const int kvBytes = sizeOf(sh.kvType);
  d.view.k = d.k.ptr<void>();
  d.view.v = sh.interleavedKV ? d.k.ptr<char>() + c.pageElems * kvBytes
                              : d.v.ptr<void>();
  d.view.dtype = sh.kvType;
  d.view.numKVHeads = sh.numKVHeads;
  d.view.headDim = sh.headDim;
  d.view.pageSize = sh.pageSize;
  d.view.layout = sh.layout;
  d.view.numPages = c.totalPages;
  d.view.pageStride = c.pageStride;
  return std::move(d);
}

llvm::Error uploadAux(const TestModifiers &m,
                      std::vector<runtime::DeviceBuffer> &buffers,
                      AuxTable *tables) {
  for (size_t i = 0; i < m.aux.size(); ++i) {
    const AuxData &a = m.aux[i];
    auto uploaded = a.f32.empty() ? upload(a.i32) : upload(a.f32);
    if (!uploaded)
      return uploaded.takeError();
    buffers.push_back(std::move(*uploaded));
    tables[i].data = buffers.back().ptr<void>();
    for (int d = 0; d < 3; ++d)
      tables[i].dims[d] = a.dims[d];
  }
  return llvm::Error::success();
}

llvm::Expected<DecodeCheckResult>
checkDecode(const runtime::DecodeKernel &kernel, const DecodeVariant &v,
            const DecodeCheckOptions &tc) {
  std::mt19937 rng(tc.seed);
  const int batch = int(tc.seqLens.size());
  const int64_t tokens = int64_t(batch) * v.queryLen;
  PagedCacheShape shape;
  shape.kvType = v.kvType;
  shape.numKVHeads = v.numKVHeads;
  shape.headDim = v.headDim;
  shape.pageSize = v.pageSize;
  shape.layout = v.layout;
  shape.perHeadKVScale = v.perHeadKVScale;
  shape.kvScale = tc.kvScale;
  shape.interleavedKV = tc.interleavedKV;
  RandomPagedCache cache = randomPagedCache(rng, shape, tc.seqLens);
  const bool fp8 =
      v.kvType == ScalarType::F8E4M3 || v.kvType == ScalarType::F8E5M2;

  ref::DecodeProblem prob;
  prob.numQHeads = v.numQHeads;
  prob.numKVHeads = v.numKVHeads;
  prob.headDim = v.headDim;
  prob.pageSize = v.pageSize;
  prob.layout = v.layout;
  prob.queryLen = v.queryLen;
  prob.seqLens = tc.seqLens;
  prob.pageTables = cache.pageTables;
  prob.pageTableStride = cache.pageTableStride;
  prob.pageStride = cache.pageStride;
  setScoreMods(prob, v);
  if (tc.modifiers) {
    prob.scoreMod = tc.modifiers->refScore;
    prob.maskMod = tc.modifiers->refMask;
  }

  Quantized q =
      randomValues(rng, v.qType, tokens * v.numQHeads * v.headDim, 1.0);
  if (tc.pinnedRequest >= 0) {
    if ((fp8 && v.perHeadKVScale) || tc.interleavedKV ||
        tc.pinnedRequest >= batch)
      return llvm::createStringError(
          "pinnedRequest: a request of the batch, over a cache of one k and "
          "one v scale");
    // Its q rows by their positions, its pages by their indices.
    const int b = tc.pinnedRequest;
    const int64_t row = int64_t(v.numQHeads) * v.headDim;
    for (int i = 0; i < v.queryLen; ++i)
      overwritePinned(q.bytes, q.values, v.qType,
                      (int64_t(b) * v.queryLen + i) * row, row, tc.pinnedSeed,
                      PinnedStream::QRow, tc.seqLens[b] - v.queryLen + i);
    const int pages = (tc.seqLens[b] + v.pageSize - 1) / v.pageSize;
    for (int i = 0; i < pages; ++i) {
      const int64_t page =
          cache.pageTables[size_t(b) * cache.pageTableStride + i];
      overwritePinned(cache.kBytes, cache.k, v.kvType, page * cache.pageStride,
                      cache.pageElems, tc.pinnedSeed, PinnedStream::KPage, i,
                      fp8 ? cache.kScales[0] : 1.0);
      overwritePinned(cache.vBytes, cache.v, v.kvType, page * cache.pageStride,
                      cache.pageElems, tc.pinnedSeed, PinnedStream::VPage, i,
                      fp8 ? cache.vScales[0] : 1.0);
    }
  }
  prob.q = q.values;
  prob.k = cache.k;
  prob.v = cache.v;

  std::vector<double> refOut, refLse;
  ref::decodeReference(prob, refOut, refLse);

  auto dqOr = upload(q.bytes);
  if (!dqOr)
    return dqOr.takeError();
  auto &dq = *dqOr;
  auto dCacheOr = uploadCache(cache, shape);
  if (!dCacheOr)
    return dCacheOr.takeError();
  DeviceCache &dCache = *dCacheOr;
  std::vector<int32_t> lens(tc.seqLens.begin(), tc.seqLens.end());
  auto dLensOr = upload(lens);
  if (!dLensOr)
    return dLensOr.takeError();
  auto &dLens = *dLensOr;
  std::vector<float> slopes(prob.alibiSlopes.begin(), prob.alibiSlopes.end());
  auto dSlopesOr = upload(slopes);
  if (!dSlopesOr)
    return dSlopesOr.takeError();
  auto &dSlopes = *dSlopesOr;
  std::vector<float> sinks(prob.sinks.begin(), prob.sinks.end());
  auto dSinksOr = upload(sinks);
  if (!dSinksOr)
    return dSinksOr.takeError();
  auto &dSinks = *dSinksOr;
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
  args.cache = dCache.view;
  args.pageTables = dCache.pageTables.ptr<int32_t>();
  args.pageTableStride = cache.pageTableStride;
  args.seqLens = dLens.ptr<int32_t>();
  if (fp8) {
    args.kScale = dCache.kScales.ptr<float>();
    args.vScale = dCache.vScales.ptr<float>();
    args.numKVScales = int(cache.kScales.size());
  }
  args.alibiSlopes = v.alibi ? dSlopes.ptr<float>() : nullptr;
  args.sinks = v.sinks ? dSinks.ptr<float>() : nullptr;
  std::vector<runtime::DeviceBuffer> auxBuffers;
  if (tc.modifiers)
    if (llvm::Error err = uploadAux(*tc.modifiers, auxBuffers, args.aux))
      return std::move(err);
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
  result.outBytes = outBytes;
  result.chunkTokens = plan.chunkTokens;
  if (v.writeLse) {
    auto lseBytesOr = download(dLse);
    if (!lseBytesOr)
      return lseBytesOr.takeError();
    std::vector<float> lse(lseBytesOr->size() / sizeof(float));
    std::memcpy(lse.data(), lseBytesOr->data(), lse.size() * sizeof(float));
    for (size_t i = 0; i < lse.size(); ++i)
      result.lseError = std::max(
          result.lseError,
          std::isnan(lse[i]) ? INFINITY : std::fabs(lse[i] - refLse[i]));
  }
  return result;
}

} // namespace attn::check
