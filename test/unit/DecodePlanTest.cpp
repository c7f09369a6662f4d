//===- DecodePlanTest.cpp - split-KV partition of decode batches ----------===//
#include "attn/runtime/kernels/Cascade.h"
#include "attn/runtime/kernels/Decode.h"
#include "llvm/Support/FormatVariadic.h"

#include <gtest/gtest.h>

#include <random>
#include <tuple>

using namespace attn;
using namespace attn::runtime;

namespace {

KernelSpec gqa4() {
  KernelSpec spec;
  spec.numQHeads = 32;
  spec.numKVHeads = 8;
  return spec;
}

/// Every request's KV range is covered exactly once, in order.
void expectCovers(const DecodePartition &p, const std::vector<int32_t> &lens,
                  const std::vector<int> &firstKeys) {
  std::vector<int> next = firstKeys;
  for (const DecodeWorkItem &w : p.workItems) {
    ASSERT_EQ(w.kvBegin, next[w.request]) << "request " << w.request;
    ASSERT_GT(w.kvEnd, w.kvBegin);
    next[w.request] = w.kvEnd;
  }
  for (size_t b = 0; b < lens.size(); ++b)
    EXPECT_EQ(next[b], lens[b]) << "request " << b;
}

TEST(DecodePlan, LargeBatchIsNotSplit) {
  std::vector<int32_t> lens(256, 4096);
  auto p = partitionDecode(lens, gqa4(), std::nullopt, 132, 2);
  ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
  EXPECT_EQ(p->workItems.size(), 256u);
  EXPECT_EQ(p->numSplitRequests, 0);
  for (const DecodeWorkItem &w : p->workItems)
    EXPECT_EQ(w.partialIdx, -1);
  expectCovers(*p, lens, std::vector<int>(256, 0));
}

TEST(DecodePlan, SmallBatchIsSplitToFillTheGpu) {
  std::vector<int32_t> lens = {32768};
  KernelSpec spec = gqa4();
  auto p = partitionDecode(lens, spec, std::nullopt, 132, 2);
  ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
  // 8 KV heads x pieces should fill the 264 resident CTAs.
  int ctas = int(p->workItems.size()) * spec.numKVHeads;
  EXPECT_GE(ctas, 264 * 9 / 10);
  EXPECT_EQ(p->numSplitRequests, 1);
  // The chunks fill consecutive partial slots and all know how many.
  for (size_t i = 0; i < p->workItems.size(); ++i) {
    EXPECT_EQ(p->workItems[i].partialIdx, int(i));
    EXPECT_EQ(p->workItems[i].firstPartial, 0);
    EXPECT_EQ(p->workItems[i].numPartials, int(p->workItems.size()));
  }
  EXPECT_EQ(p->chunkTokens % (16 * spec.schedule.warps), 0);
  expectCovers(*p, lens, {0});
  EXPECT_LE(int(p->workItems.size()), maxDecodeWorkItems(spec, 1, 132, 2));
}

TEST(DecodePlan, AvoidsANearlyEmptyLastWave) {
  // 512 CTAs of 4096 tokens on 396 slots would run a second wave 29% full;
  // three chunks per request fill four waves almost completely instead.
  KernelSpec mha = gqa4();
  mha.numKVHeads = 32;
  std::vector<int32_t> lens(16, 4096);
  auto p = partitionDecode(lens, mha, std::nullopt, 132, 3);
  ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
  EXPECT_EQ(p->workItems.size(), 48u);
  EXPECT_EQ(p->numSplitRequests, 16);
  // On 264 slots the same batch is 1.94 waves unsplit: no split pays.
  auto q = partitionDecode(lens, mha, std::nullopt, 132, 2);
  ASSERT_TRUE(bool(q)) << llvm::toString(q.takeError());
  EXPECT_EQ(q->workItems.size(), 16u);
}

TEST(DecodePlan, SlidingWindowSkipsInvisibleKeys) {
  std::vector<int32_t> lens = {10000, 100};
  auto p = partitionDecode(lens, gqa4(), 1000, 132, 2);
  ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
  // Query at 9999 sees keys >= 8999; the first chunk starts at a tile edge.
  expectCovers(*p, lens, {8992, 0});
}

TEST(DecodePlan, WorkItemBoundHoldsForSkewedBatches) {
  KernelSpec spec = gqa4();
  std::vector<int32_t> lens = {1, 100000, 3, 7, 60000, 1, 1, 20000};
  auto p = partitionDecode(lens, spec, std::nullopt, 132, 2);
  ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
  EXPECT_LE(int(p->workItems.size()), maxDecodeWorkItems(spec, 8, 132, 2));
  expectCovers(*p, lens, std::vector<int>(8, 0));
}

TEST(DecodePlan, RejectsEmptyAndShortSequences) {
  KernelSpec spec = gqa4();
  spec.queryLen = 4;
  std::vector<int32_t> none;
  EXPECT_FALSE(bool(partitionDecode(none, spec, std::nullopt, 132, 2)));
  std::vector<int32_t> lens = {10, 3};
  auto p = partitionDecode(lens, spec, std::nullopt, 132, 2);
  ASSERT_FALSE(bool(p));
  std::string message = llvm::toString(p.takeError());
  EXPECT_NE(message.find("seq_lens[1] = 3"), std::string::npos) << message;
}

/// Request `b`'s work items, with the partial slots counted from its first.
std::vector<std::tuple<int, int, int, int>> itemsOf(const DecodePartition &p,
                                                    int b) {
  std::vector<std::tuple<int, int, int, int>> out;
  for (const DecodeWorkItem &w : p.workItems)
    if (w.request == b)
      out.emplace_back(w.kvBegin, w.kvEnd,
                       w.partialIdx < 0 ? -1 : w.partialIdx - w.firstPartial,
                       w.numPartials);
  return out;
}

TEST(DecodePlan, BatchInvariantSplitsDependOnTheRequestOnly) {
  KernelSpec spec = gqa4();
  spec.batchInvariant = true;
  std::mt19937 rng(7);
  // Speculative steps too: query_len new rows per request.
  for (int32_t len : {17, 2048, 2049, 9000, 32768, 40000, 131072}) {
    spec.queryLen = len % 3 == 0 ? 4 : len % 3 == 1 ? 16 : 1;
    SCOPED_TRACE(
        llvm::formatv("len {0}, query_len {1}", len, spec.queryLen).str());
    auto alone = partitionDecode({len}, spec, std::nullopt, 132, 2);
    ASSERT_TRUE(bool(alone)) << llvm::toString(alone.takeError());
    const auto want = itemsOf(*alone, 0);
    // Chunks of 2048 keys, or, past 16 of them, 16 chunks of a multiple.
    const int chunk =
        len <= 16 * 2048 ? 2048 : (((len + 15) / 16 + 2047) / 2048) * 2048;
    EXPECT_EQ(int(want.size()), (len + chunk - 1) / chunk);
    EXPECT_LE(int(want.size()), 16);
    for (size_t i = 0; i + 1 < want.size(); ++i)
      EXPECT_EQ(std::get<1>(want[i]) - std::get<0>(want[i]), chunk);
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<int32_t> lens;
      int batch = 1 + int(rng() % 64), at = int(rng() % batch);
      for (int b = 0; b < batch; ++b)
        lens.push_back(b == at ? len : 16 + int32_t(rng() % 70000));
      int sms = 1 + int(rng() % 200), perSm = 1 + int(rng() % 4);
      auto p = partitionDecode(lens, spec, std::nullopt, sms, perSm);
      ASSERT_TRUE(bool(p)) << llvm::toString(p.takeError());
      EXPECT_EQ(itemsOf(*p, at), want) << "batch " << batch << " at " << at;
      expectCovers(*p, lens, std::vector<int>(lens.size(), 0));
      EXPECT_LE(int(p->workItems.size()),
                maxDecodeWorkItems(spec, batch, sms, perSm));
    }
  }
}

TEST(DecodePlan, BatchInvariantWindowSplitsFromTheFirstVisibleKey) {
  KernelSpec spec = gqa4();
  spec.batchInvariant = true;
  spec.slidingWindow = true;
  auto alone = partitionDecode({30000}, spec, 4095, 132, 2);
  auto batched = partitionDecode({100, 30000, 5}, spec, 4095, 8, 1);
  ASSERT_TRUE(alone && batched);
  EXPECT_EQ(itemsOf(*alone, 0), itemsOf(*batched, 1));
  // Keys from (30000 - 1 - 4095) rounded down to 16, in 2048-key chunks.
  EXPECT_EQ(std::get<0>(itemsOf(*alone, 0).front()),
            (30000 - 1 - 4095) / 16 * 16);
}

TEST(DecodePlan, CascadeRefusesBatchInvariance) {
  // Its shared levels are cut by the size of their group.
  DecodeVariant v;
  EXPECT_FALSE(cascadeProblem(v));
  v.batchInvariant = true;
  auto problem = cascadeProblem(v);
  ASSERT_TRUE(problem);
  EXPECT_NE(problem->find("batch_invariant"), std::string::npos) << *problem;
}

} // namespace
