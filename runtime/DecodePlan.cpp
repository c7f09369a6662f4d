//===- DecodePlan.cpp - split-KV partition of a decode batch --------------===//
//
// Pure host arithmetic, no CUDA: which KV chunk of which request each CTA
// column takes, and which partial slots a split request's chunks fill.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/Decode.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

namespace attn::runtime {

namespace {

/// Query rows per KV head are spread over this many CTAs along grid.z.
int rowBlocks(const KernelSpec &spec) {
  int rows = spec.groupSize() * spec.queryLen;
  int perCta = 16 * spec.schedule.rowTiles;
  return (rows + perCta - 1) / perCta;
}

/// Chunks stay multiples of one 16-token tile per warp.
int chunkGranule(const KernelSpec &spec) { return 16 * spec.schedule.warps; }

int roundUp(int64_t x, int m) { return int((x + m - 1) / m * m); }

} // namespace

int maxDecodeWorkItems(const KernelSpec &spec, int maxBatch, int numSMs) {
  // chunk >= total * columns / target, so sum(ceil(len / chunk)) is at most
  // target / columns + one extra chunk per request.
  int columns = spec.numKVHeads * rowBlocks(spec);
  int target = spec.schedule.ctasPerSM * numSMs;
  return maxBatch + (target + columns - 1) / columns + 1;
}

llvm::Expected<DecodePartition>
partitionDecode(llvm::ArrayRef<int32_t> seqLens, const KernelSpec &spec,
                std::optional<int> windowLeft, int numSMs) {
  if (seqLens.empty())
    return llvm::createStringError("decode plan: the batch is empty");
  // The first key any query of a request can see.
  auto firstKey = [&](int32_t len) -> int {
    if (!windowLeft)
      return 0;
    int first = std::max(0, len - spec.queryLen - *windowLeft);
    return first / 16 * 16;
  };
  int64_t totalTokens = 0;
  for (size_t b = 0; b < seqLens.size(); ++b) {
    if (seqLens[b] < spec.queryLen)
      return llvm::createStringError(llvm::formatv(
          "decode plan: seq_lens[{0}] = {1}, but each request needs at least "
          "query_len = {2} cached tokens (its new ones)",
          b, seqLens[b], spec.queryLen));
    totalTokens += seqLens[b] - firstKey(seqLens[b]);
  }

  const int columns = spec.numKVHeads * rowBlocks(spec);
  const int64_t target = int64_t(spec.schedule.ctasPerSM) * numSMs;
  int64_t wanted = (totalTokens * columns + target - 1) / target;
  int chunk = roundUp(std::max<int64_t>(wanted, spec.schedule.minChunkTokens),
                      chunkGranule(spec));

  DecodePartition partition;
  partition.chunkTokens = chunk;
  for (size_t b = 0; b < seqLens.size(); ++b) {
    int begin = firstKey(seqLens[b]), end = seqLens[b];
    int pieces = (end - begin + chunk - 1) / chunk;
    if (pieces == 1) {
      partition.workItems.push_back({int32_t(b), begin, end, -1, -1, 1});
      continue;
    }
    int first = partition.numPartials;
    for (int i = 0; i < pieces; ++i)
      partition.workItems.push_back({int32_t(b), begin + i * chunk,
                                     std::min(end, begin + (i + 1) * chunk),
                                     first + i, first, pieces});
    partition.numPartials += pieces;
    ++partition.numSplitRequests;
  }
  return partition;
}

} // namespace attn::runtime
