//===- DecodePlanTest.cpp - split-KV partition of decode batches ----------===//
#include "attn/runtime/kernels/Decode.h"

#include <gtest/gtest.h>

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

} // namespace
