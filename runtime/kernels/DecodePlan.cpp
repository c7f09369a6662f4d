//===- DecodePlan.cpp - split-KV partition of a decode batch --------------===//
//
// Pure host arithmetic, no CUDA: which KV chunk of which request each CTA
// column takes, and which partial slots a split request's chunks fill.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/kernels/Decode.h"
#include "templates/attn/decode_layout.h"

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

/// Request b's keys [begin, end) as work items of `chunk` keys: one item, or
/// a split whose partials take the next slots.
void addRequest(DecodePartition &partition, int32_t b, int begin, int end,
                int chunk) {
  int pieces = std::max(1, (end - begin + chunk - 1) / chunk);
  if (pieces == 1) {
    partition.workItems.push_back({b, begin, end, -1, -1, 1, end});
    return;
  }
  int first = partition.numPartials;
  for (int i = 0; i < pieces; ++i)
    partition.workItems.push_back({b, begin + i * chunk,
                                   std::min(end, begin + (i + 1) * chunk),
                                   first + i, first, pieces, end});
  partition.numPartials += pieces;
  ++partition.numSplitRequests;
}

} // namespace

/// Splitting stops once the grid holds this many waves of resident CTAs:
/// beyond it the last wave's idle share is small anyway.
constexpr int kMaxSplitWaves = 8;

/// A CTA's cost beyond its tokens (start-up, first loads, epilogue), in
/// token-equivalents; it keeps the planner from splitting into slivers.
constexpr int64_t kFixedCostTokens = 128;

/// Batch-invariant plans (KernelSpec::batchInvariant) cut a request's
/// visible keys every kInvariantChunkTokens from its first visible key, or,
/// past kInvariantMaxPieces such chunks, into that many chunks of a
/// multiple of it: boundaries set by the request's own keys, never by the
/// batch or the device, so its partials and their merge are the same in
/// any batch. A multiple of every chunk granule (16 tokens x up to 16
/// warps).
constexpr int kInvariantChunkTokens = 2048;
constexpr int kInvariantMaxPieces = 16;

static int invariantChunk(int visible) {
  int pieces = (visible + kInvariantChunkTokens - 1) / kInvariantChunkTokens;
  if (pieces <= kInvariantMaxPieces)
    return kInvariantChunkTokens;
  int chunk = (visible + kInvariantMaxPieces - 1) / kInvariantMaxPieces;
  return roundUp(chunk, kInvariantChunkTokens);
}

int maxDecodeWorkItems(const KernelSpec &spec, int maxBatch, int numSMs,
                       int ctasPerSM) {
  if (spec.batchInvariant)
    return maxBatch * kInvariantMaxPieces;
  // Unsplit: one item per request; split: at most kMaxSplitWaves of CTAs.
  int columns = spec.numKVHeads * rowBlocks(spec);
  int slots = numSMs * ctasPerSM;
  return maxBatch + (kMaxSplitWaves * slots + columns - 1) / columns + 1;
}

llvm::Expected<DecodePartition> partitionDecode(llvm::ArrayRef<int32_t> seqLens,
                                                const KernelSpec &spec,
                                                std::optional<int> windowLeft,
                                                int numSMs, int ctasPerSM) {
  if (seqLens.empty())
    return llvm::createStringError("decode plan: the batch is empty");
  // The first key any query of a request can see.
  auto firstKey = [&](int32_t len) -> int {
    return windowLeft ? decodeFirstKey(len, spec.queryLen, *windowLeft) : 0;
  };
  int maxVisible = 0;
  for (size_t b = 0; b < seqLens.size(); ++b) {
    if (seqLens[b] < spec.queryLen)
      return llvm::createStringError(llvm::formatv(
          "decode plan: seq_lens[{0}] = {1}, but each request needs at least "
          "query_len = {2} cached tokens (its new ones)",
          b, seqLens[b], spec.queryLen));
    maxVisible = std::max(maxVisible, seqLens[b] - firstKey(seqLens[b]));
  }

  DecodePartition partition;
  if (spec.batchInvariant) {
    for (size_t b = 0; b < seqLens.size(); ++b) {
      int begin = firstKey(seqLens[b]), end = seqLens[b];
      int chunk = invariantChunk(end - begin);
      partition.chunkTokens = std::max(partition.chunkTokens, chunk);
      addRequest(partition, int32_t(b), begin, end, chunk);
    }
    return partition;
  }

  // Pick the chunk: for each split count p of the longest request, estimate
  // the grid's time as waves x (chunk + fixed cost) and keep the best.
  const int64_t columns = int64_t(spec.numKVHeads) * rowBlocks(spec);
  const int64_t slots = int64_t(numSMs) * ctasPerSM;
  auto itemsFor = [&](int chunk) {
    int64_t items = 0;
    for (int32_t len : seqLens)
      items += std::max(1, (len - firstKey(len) + chunk - 1) / chunk);
    return items;
  };
  int bestChunk = roundUp(maxVisible, chunkGranule(spec));
  int64_t bestCost = INT64_MAX;
  for (int p = 1;; ++p) {
    int chunk = roundUp((int64_t(maxVisible) + p - 1) / p, chunkGranule(spec));
    if (p > 1 && chunk < spec.schedule.minChunkTokens)
      break;
    int64_t ctas = itemsFor(chunk) * columns;
    if (p > 1 && ctas > kMaxSplitWaves * slots)
      break;
    int64_t cost = (ctas + slots - 1) / slots * (chunk + kFixedCostTokens);
    if (cost < bestCost) {
      bestCost = cost;
      bestChunk = chunk;
    }
  }

  partition.chunkTokens = bestChunk;
  for (size_t b = 0; b < seqLens.size(); ++b)
    addRequest(partition, int32_t(b), firstKey(seqLens[b]), seqLens[b],
               bestChunk);
  return partition;
}

} // namespace attn::runtime
