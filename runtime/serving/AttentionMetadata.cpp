//===- AttentionMetadata.cpp - one engine step's attention metadata -------===//
#include "attn/runtime/serving/AttentionMetadata.h"
#include "spec/KernelLimits.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace attn::runtime {

namespace {

llvm::Error metadataError(const llvm::Twine &message) {
  return llvm::createStringError("attention metadata: " + message.str());
}

size_t alignUp(size_t x) { return (x + 255) / 256 * 256; }

/// Checks a page table against the tokens it must hold and copies it into
/// its padded row.
llvm::Error copyTable(llvm::ArrayRef<int32_t> table, int64_t tokens, int width,
                      const MetadataLimits &limits, int request,
                      const char *name, int32_t *row) {
  const int64_t needed = (tokens + limits.pageSize - 1) / limits.pageSize;
  if (int64_t(table.size()) < needed)
    return metadataError(
        llvm::formatv("request {0}: {1} has {2} pages, {3} tokens need {4}",
                      request, name, table.size(), tokens, needed));
  if (int64_t(table.size()) > width)
    return metadataError(llvm::formatv(
        "request {0}: {1} has {2} pages, more than the limit of {3}", request,
        name, table.size(), width));
  for (size_t i = 0; i < table.size(); ++i)
    if (table[i] < 0 || (limits.numPages > 0 && table[i] >= limits.numPages))
      return metadataError(
          llvm::formatv("request {0}: {1}[{2}] = {3} is outside [0, {4})",
                        request, name, i, table[i], limits.numPages));
  std::copy(table.begin(), table.end(), row);
  return llvm::Error::success();
}

/// Slots of tokens [first, first + count) of a request.
void appendSlots(llvm::ArrayRef<int32_t> table, int64_t first, int64_t count,
                 int pageSize, std::vector<int64_t> &slots) {
  for (int64_t t = first; t < first + count; ++t)
    slots.push_back(int64_t(table[t / pageSize]) * pageSize + t % pageSize);
}

template <typename T>
llvm::ArrayRef<T> slice(const std::vector<T> &v, size_t first, size_t count) {
  return llvm::ArrayRef<T>(v).slice(first, count);
}

template <typename T> T *offsetOrNull(T *p, int64_t n) {
  return p ? p + n : nullptr;
}

} // namespace

llvm::Error checkLimits(const MetadataLimits &l) {
  auto positive = [](const char *name, int64_t value) -> llvm::Error {
    if (value < 1)
      return metadataError(
          llvm::formatv("limit {0} must be >= 1, got {1}", name, value));
    return llvm::Error::success();
  };
  if (llvm::Error e = positive("pageSize", l.pageSize))
    return e;
  if (llvm::Error e = positive("maxBatch", l.maxBatch))
    return e;
  if (llvm::Error e = positive("maxTokens", l.maxTokens))
    return e;
  if (llvm::Error e = positive("maxPagesPerSeq", l.maxPagesPerSeq))
    return e;
  if (l.numPages < 0 || l.maxEncoderTokens < 0 || l.maxCrossPagesPerSeq < 0)
    return metadataError("limits numPages, maxEncoderTokens and "
                         "maxCrossPagesPerSeq must not be negative");
  // query_start_loc and the slot arithmetic are int32 in the kernels.
  if (l.maxTokens > std::numeric_limits<int32_t>::max())
    return metadataError(
        llvm::formatv("limit maxTokens = {0} exceeds int32", l.maxTokens));
  return llvm::Error::success();
}

llvm::Expected<AttentionMetadata>
buildAttentionMetadata(llvm::ArrayRef<ScheduledRequest> requests,
                       const MetadataLimits &limits) {
  if (llvm::Error error = checkLimits(limits))
    return std::move(error);
  const int batch = int(requests.size());
  if (int64_t(requests.size()) > limits.maxBatch)
    return metadataError(llvm::formatv("{0} requests exceed the limit of {1}",
                                       requests.size(), limits.maxBatch));

  AttentionMetadata md;
  md.pageTableStride = limits.maxPagesPerSeq;
  md.crossPageTableStride = limits.maxCrossPagesPerSeq;
  md.pageTables.assign(size_t(batch) * md.pageTableStride, 0);
  md.crossPageTables.assign(size_t(batch) * md.crossPageTableStride, 0);
  md.queryStartLoc.push_back(0);
  md.seqStartLoc.push_back(0);
  md.encoderSeqStartLoc.push_back(0);

  int64_t tokens = 0, kvTokens = 0, encoderTokens = 0;
  for (int r = 0; r < batch; ++r) {
    const ScheduledRequest &req = requests[r];
    if (req.isPrefill && md.numDecodes > 0)
      return metadataError(llvm::formatv(
          "request {0} is a prefill after decode request {1}; prefills come "
          "first",
          r, r - 1));
    if (req.queryLen < 1 || req.contextLen < 0 || req.encoderLen < 0)
      return metadataError(llvm::formatv(
          "request {0}: queryLen = {1} must be >= 1, contextLen = {2} and "
          "encoderLen = {3} >= 0",
          r, req.queryLen, req.contextLen, req.encoderLen));
    const int64_t seqLen = int64_t(req.contextLen) + req.queryLen;
    if (seqLen > std::numeric_limits<int32_t>::max())
      return metadataError(
          llvm::formatv("request {0}: {1} tokens exceed int32", r, seqLen));
    if (!req.isPrefill) {
      if (req.queryLen > kMaxDecodeQueryLen)
        return metadataError(llvm::formatv(
            "request {0}: a decode of {1} query tokens (at most {2})", r,
            req.queryLen, kMaxDecodeQueryLen));
      if (md.numDecodes > 0 && req.queryLen != md.maxDecodeQueryLen)
        return metadataError(llvm::formatv(
            "request {0}: decode query length {1} differs from the first "
            "decode's {2}; one step's decodes share one length",
            r, req.queryLen, md.maxDecodeQueryLen));
    }
    if (tokens + req.queryLen > limits.maxTokens)
      return metadataError(llvm::formatv(
          "the requests up to {0} have {1} query tokens, more than the limit "
          "of {2}",
          r, tokens + req.queryLen, limits.maxTokens));
    if (llvm::Error error = copyTable(
            req.pageTable, seqLen, md.pageTableStride, limits, r, "page table",
            md.pageTables.data() + size_t(r) * md.pageTableStride))
      return std::move(error);
    appendSlots(req.pageTable, req.contextLen, req.queryLen, limits.pageSize,
                md.slotMapping);

    if (req.encoderLen > 0) {
      if (md.crossPageTableStride == 0)
        return metadataError(llvm::formatv(
            "request {0} has encoder tokens but the limits allow no cross "
            "attention (maxCrossPagesPerSeq = 0)",
            r));
      if (llvm::Error error = copyTable(
              req.crossPageTable, req.encoderLen, md.crossPageTableStride,
              limits, r, "cross page table",
              md.crossPageTables.data() + size_t(r) * md.crossPageTableStride))
        return std::move(error);
      if (req.isPrefill && req.contextLen == 0) {
        if (int64_t(md.crossSlotMapping.size()) + req.encoderLen >
            limits.maxEncoderTokens)
          return metadataError(llvm::formatv(
              "the requests up to {0} write {1} encoder tokens, more than "
              "the limit of {2}",
              r, md.crossSlotMapping.size() + req.encoderLen,
              limits.maxEncoderTokens));
        appendSlots(req.crossPageTable, 0, req.encoderLen, limits.pageSize,
                    md.crossSlotMapping);
      }
    }

    tokens += req.queryLen;
    kvTokens += seqLen;
    encoderTokens += req.encoderLen;
    if (kvTokens > std::numeric_limits<int32_t>::max() ||
        encoderTokens > std::numeric_limits<int32_t>::max())
      return metadataError(llvm::formatv(
          "the requests up to {0} hold more than 2^31 tokens", r));
    md.seqLens.push_back(int32_t(seqLen));
    md.contextLens.push_back(req.contextLen);
    md.queryStartLoc.push_back(int32_t(tokens));
    md.seqStartLoc.push_back(int32_t(kvTokens));
    md.encoderSeqLens.push_back(req.encoderLen);
    md.encoderSeqStartLoc.push_back(int32_t(encoderTokens));
    md.maxQueryLen = std::max(md.maxQueryLen, req.queryLen);
    md.maxEncoderSeqLen = std::max(md.maxEncoderSeqLen, req.encoderLen);
    if (req.isPrefill) {
      ++md.numPrefills;
      md.numPrefillTokens += req.queryLen;
      md.maxPrefillSeqLen = std::max(md.maxPrefillSeqLen, int32_t(seqLen));
    } else {
      ++md.numDecodes;
      md.numDecodeTokens += req.queryLen;
      md.maxDecodeQueryLen = req.queryLen;
      md.maxDecodeSeqLen = std::max(md.maxDecodeSeqLen, int32_t(seqLen));
    }
  }
  md.numEncoderTokens = encoderTokens;
  for (int r = md.numPrefills; r <= batch; ++r) {
    md.decodeQueryStartLoc.push_back(md.queryStartLoc[r] -
                                     md.queryStartLoc[md.numPrefills]);
    md.decodeSeqStartLoc.push_back(md.seqStartLoc[r] -
                                   md.seqStartLoc[md.numPrefills]);
  }
  return std::move(md);
}

AttentionMetadataView AttentionMetadata::view(int first, int count) const {
  AttentionMetadataView v;
  v.firstRequest = first;
  v.numRequests = count;
  v.firstToken = queryStartLoc[first];
  v.numTokens = queryStartLoc[first + count] - queryStartLoc[first];
  v.pageTableStride = pageTableStride;
  v.crossPageTableStride = crossPageTableStride;
  for (int r = first; r < first + count; ++r) {
    v.maxQueryLen =
        std::max(v.maxQueryLen, queryStartLoc[r + 1] - queryStartLoc[r]);
    v.maxSeqLen = std::max(v.maxSeqLen, seqLens[r]);
  }
  v.seqLens = slice(seqLens, first, count);
  v.contextLens = slice(contextLens, first, count);
  v.pageTables = slice(pageTables, size_t(first) * pageTableStride,
                       size_t(count) * pageTableStride);
  v.encoderSeqLens = slice(encoderSeqLens, first, count);
  v.crossPageTables =
      slice(crossPageTables, size_t(first) * crossPageTableStride,
            size_t(count) * crossPageTableStride);
  v.slotMapping = slice(slotMapping, v.firstToken, v.numTokens);
  const DeviceMetadata &d = device;
  v.device.seqLens = offsetOrNull(d.seqLens, first);
  v.device.contextLens = offsetOrNull(d.contextLens, first);
  v.device.pageTables =
      offsetOrNull(d.pageTables, int64_t(first) * pageTableStride);
  v.device.slotMapping = offsetOrNull(d.slotMapping, v.firstToken);
  v.device.encoderSeqLens = offsetOrNull(d.encoderSeqLens, first);
  v.device.crossPageTables =
      offsetOrNull(d.crossPageTables, int64_t(first) * crossPageTableStride);
  return v;
}

AttentionMetadataView AttentionMetadata::prefillView() const {
  AttentionMetadataView v = view(0, numPrefills);
  // Prefills start the step, so their cumulative arrays start at 0 already.
  v.queryStartLoc = slice(queryStartLoc, 0, numPrefills + 1);
  v.seqStartLoc = slice(seqStartLoc, 0, numPrefills + 1);
  v.crossSlotMapping = crossSlotMapping; // only prefills write encoder K/V
  v.device.queryStartLoc = device.queryStartLoc;
  v.device.seqStartLoc = device.seqStartLoc;
  v.device.crossSlotMapping = device.crossSlotMapping;
  return v;
}

AttentionMetadataView AttentionMetadata::decodeView() const {
  AttentionMetadataView v = view(numPrefills, numDecodes);
  v.queryStartLoc = decodeQueryStartLoc;
  v.seqStartLoc = decodeSeqStartLoc;
  v.device.queryStartLoc = deviceDecodeQueryStartLoc;
  v.device.seqStartLoc = deviceDecodeSeqStartLoc;
  return v;
}

//===----------------------------------------------------------------------===//
// AttentionMetadataBuilder
//===----------------------------------------------------------------------===//

AttentionMetadataBuilder::Layout
AttentionMetadataBuilder::layoutFor(const MetadataLimits &l) {
  const size_t batch = size_t(l.maxBatch), i32 = sizeof(int32_t),
               i64 = sizeof(int64_t);
  Layout o{};
  size_t at = 0;
  auto place = [&](size_t &field, size_t bytes) {
    field = at;
    at = alignUp(at + bytes);
  };
  place(o.seqLens, batch * i32);
  place(o.contextLens, batch * i32);
  place(o.queryStartLoc, (batch + 1) * i32);
  place(o.seqStartLoc, (batch + 1) * i32);
  place(o.pageTables, batch * l.maxPagesPerSeq * i32);
  place(o.slotMapping, size_t(l.maxTokens) * i64);
  place(o.decodeQueryStartLoc, (batch + 1) * i32);
  place(o.decodeSeqStartLoc, (batch + 1) * i32);
  place(o.encoderSeqLens, batch * i32);
  place(o.encoderSeqStartLoc, (batch + 1) * i32);
  place(o.crossPageTables, batch * l.maxCrossPagesPerSeq * i32);
  place(o.crossSlotMapping, size_t(l.maxEncoderTokens) * i64);
  o.total = at;
  return o;
}

llvm::Expected<AttentionMetadataBuilder>
AttentionMetadataBuilder::create(const MetadataLimits &limits) {
  if (llvm::Error error = checkLimits(limits))
    return std::move(error);
  AttentionMetadataBuilder builder;
  builder.metadataLimits = limits;
  builder.layout = layoutFor(limits);
  // All staged: each step rewrites every array, padding included.
  auto buffer =
      StagedBuffer::allocate(builder.layout.total, builder.layout.total);
  if (!buffer)
    return buffer.takeError();
  builder.buffer = std::move(*buffer);
  return std::move(builder);
}

llvm::Expected<AttentionMetadata>
AttentionMetadataBuilder::build(llvm::ArrayRef<ScheduledRequest> requests,
                                CUstream stream) {
  auto md = buildAttentionMetadata(requests, metadataLimits);
  if (!md)
    return md.takeError();
  auto host = buffer.beginWrite();
  if (!host)
    return host.takeError();
  char *base = *host;
  const Layout &o = layout;
  std::memset(base, 0, o.total);
  // All-ones bytes are -1 in every int64: the padding slot append-KV skips.
  std::memset(base + o.slotMapping, 0xff,
              o.decodeQueryStartLoc - o.slotMapping);
  std::memset(base + o.crossSlotMapping, 0xff, o.total - o.crossSlotMapping);
  auto put = [&](size_t offset, const auto &values) {
    std::memcpy(base + offset, values.data(),
                values.size() * sizeof(values[0]));
  };
  put(o.seqLens, md->seqLens);
  put(o.contextLens, md->contextLens);
  put(o.queryStartLoc, md->queryStartLoc);
  put(o.seqStartLoc, md->seqStartLoc);
  put(o.pageTables, md->pageTables);
  put(o.slotMapping, md->slotMapping);
  put(o.decodeQueryStartLoc, md->decodeQueryStartLoc);
  put(o.decodeSeqStartLoc, md->decodeSeqStartLoc);
  put(o.encoderSeqLens, md->encoderSeqLens);
  put(o.encoderSeqStartLoc, md->encoderSeqStartLoc);
  put(o.crossPageTables, md->crossPageTables);
  put(o.crossSlotMapping, md->crossSlotMapping);
  if (llvm::Error error = buffer.upload(stream))
    return std::move(error);

  const char *dev = buffer.device().ptr<const char>();
  auto i32 = [&](size_t offset) {
    return reinterpret_cast<const int32_t *>(dev + offset);
  };
  auto i64 = [&](size_t offset) {
    return reinterpret_cast<const int64_t *>(dev + offset);
  };
  DeviceMetadata &d = md->device;
  d.seqLens = i32(o.seqLens);
  d.contextLens = i32(o.contextLens);
  d.queryStartLoc = i32(o.queryStartLoc);
  d.seqStartLoc = i32(o.seqStartLoc);
  d.pageTables = i32(o.pageTables);
  d.slotMapping = i64(o.slotMapping);
  d.encoderSeqLens = i32(o.encoderSeqLens);
  d.encoderSeqStartLoc = i32(o.encoderSeqStartLoc);
  const bool cross = metadataLimits.maxCrossPagesPerSeq > 0;
  d.crossPageTables = cross ? i32(o.crossPageTables) : nullptr;
  d.crossSlotMapping = cross ? i64(o.crossSlotMapping) : nullptr;
  md->deviceDecodeQueryStartLoc = i32(o.decodeQueryStartLoc);
  md->deviceDecodeSeqStartLoc = i32(o.decodeSeqStartLoc);
  return md;
}

//===----------------------------------------------------------------------===//
// Binding to the kernels' arguments
//===----------------------------------------------------------------------===//

void bindMetadata(MixedBatchArgs &args, const AttentionMetadata &md,
                  bool crossAttention) {
  args.numQTokens = md.numTokens();
  if (crossAttention) {
    args.pageTables = md.device.crossPageTables;
    args.pageTableStride = md.crossPageTableStride;
    args.seqLens = md.device.encoderSeqLens;
  } else {
    args.pageTables = md.device.pageTables;
    args.pageTableStride = md.pageTableStride;
    args.seqLens = md.device.seqLens;
  }
}

void bindMetadata(DecodeArgs &args, const AttentionMetadataView &decode,
                  bool crossAttention) {
  args.numTokens = decode.numTokens;
  if (crossAttention) {
    args.pageTables = decode.device.crossPageTables;
    args.pageTableStride = decode.crossPageTableStride;
    args.seqLens = decode.device.encoderSeqLens;
  } else {
    args.pageTables = decode.device.pageTables;
    args.pageTableStride = decode.pageTableStride;
    args.seqLens = decode.device.seqLens;
  }
}

void bindSlots(AppendKVArgs &args, const AttentionMetadata &md,
               bool crossAttention) {
  if (crossAttention) {
    args.numTokens = int64_t(md.crossSlotMapping.size());
    args.slotMapping = md.device.crossSlotMapping;
  } else {
    args.numTokens = md.numTokens();
    args.slotMapping = md.device.slotMapping;
  }
}

} // namespace attn::runtime
