//===- PrefillPlanTest.cpp - query tiles and split-KV of prefill ----------===//
#include "attn/runtime/kernels/Prefill.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

using namespace attn;
using namespace attn::runtime;

namespace {

/// An sm_90a prefill spec: 128-row tiles of 128 keys, causal unless told.
KernelSpec wgmmaSpec(int qHeads, bool causal = true) {
  KernelSpec spec;
  spec.kind = KernelKind::Prefill;
  spec.numQHeads = qHeads;
  spec.numKVHeads = 1;
  spec.causal = causal;
  spec.prefillSchedule.mma = PrefillMma::Wgmma;
  spec.prefillSchedule.warps = 12;
  spec.prefillSchedule.blockM = 128;
  spec.prefillSchedule.blockN = 128;
  return spec;
}

std::vector<PrefillWorkItem> tiles(std::vector<int32_t> qLens,
                                   std::vector<int32_t> kvLens,
                                   const KernelSpec &spec) {
  std::vector<int32_t> cuQ = {0}, cuKV = {0};
  for (size_t b = 0; b < qLens.size(); ++b) {
    cuQ.push_back(cuQ.back() + qLens[b]);
    cuKV.push_back(cuKV.back() + kvLens[b]);
  }
  auto items = partitionPrefill(cuQ, cuKV, spec);
  EXPECT_TRUE(bool(items)) << llvm::toString(items.takeError());
  return items ? *items : std::vector<PrefillWorkItem>{};
}

/// Each tile's splits tile its keys: from 0 to kvLen in key-tile steps, in
/// consecutive slots that all know the group, at most `slots` in all.
void expectSplitsCoverTiles(const std::vector<PrefillWorkItem> &items,
                            const KernelSpec &spec, int slots) {
  std::map<std::pair<int, int>, std::vector<PrefillWorkItem>> groups;
  int splitItems = 0;
  for (const PrefillWorkItem &w : items) {
    groups[{w.qStart, w.tileBegin}].push_back(w);
    splitItems += w.split >= 0;
  }
  EXPECT_LE(splitItems, slots);
  for (auto &[key, group] : groups) {
    std::sort(group.begin(), group.end(),
              [](auto &a, auto &b) { return a.keyBegin < b.keyBegin; });
    const PrefillWorkItem &first = group.front();
    EXPECT_EQ(first.keyBegin, 0);
    EXPECT_EQ(group.back().keyEnd, first.kvLen);
    if (group.size() == 1) {
      EXPECT_EQ(first.split, -1);
      continue;
    }
    for (size_t i = 0; i < group.size(); ++i) {
      const PrefillWorkItem &w = group[i];
      EXPECT_EQ(w.numSplits, int(group.size()));
      EXPECT_EQ(w.firstSplit, first.firstSplit);
      EXPECT_EQ(w.split, first.firstSplit + int(i));
      EXPECT_LT(w.keyBegin, w.keyEnd);
      EXPECT_EQ(w.keyBegin % spec.prefillSchedule.blockN, 0);
      if (i > 0)
        EXPECT_EQ(w.keyBegin, group[i - 1].keyEnd);
    }
  }
}

TEST(PrefillPlan, TensorParallelChunkIsSplitToFillTheGpu) {
  // A 256-token chunk over 32k keys with 8 q heads: 16 pairs on 132 SMs.
  KernelSpec spec = wgmmaSpec(8);
  auto items = splitPrefillKeys(tiles({256}, {32768}, spec), spec, std::nullopt,
                                132, 64);
  EXPECT_GE(int(items.size()) * spec.numQHeads, 132 * 8 / 10);
  EXPECT_LE(int(items.size()) * spec.numQHeads, 2 * 132);
  expectSplitsCoverTiles(items, spec, 64);
}

TEST(PrefillPlan, BatchInvariantTilesAreNeverSplit) {
  // The chunk that splits above, batch-invariant: whether it splits would
  // depend on what else fills the GPU.
  KernelSpec spec = wgmmaSpec(8);
  spec.batchInvariant = true;
  auto whole = tiles({256}, {32768}, spec);
  auto items = splitPrefillKeys(whole, spec, std::nullopt, 132, 64);
  ASSERT_EQ(items.size(), whole.size());
  for (const PrefillWorkItem &w : items)
    EXPECT_EQ(w.split, -1);
}

TEST(PrefillPlan, FullGpuIsNotSplit) {
  KernelSpec spec = wgmmaSpec(32);
  auto whole = tiles({4096, 4096}, {4096, 4096}, spec);
  auto items = splitPrefillKeys(whole, spec, std::nullopt, 132, 64);
  ASSERT_EQ(items.size(), whole.size());
  for (const PrefillWorkItem &w : items)
    EXPECT_EQ(w.split, -1);
}

TEST(PrefillPlan, ShortKeysAreNotSplit) {
  // Fewer than 512 keys a split would be left: the merge is not worth it.
  KernelSpec spec = wgmmaSpec(1, /*causal=*/false);
  auto items =
      splitPrefillKeys(tiles({64}, {600}, spec), spec, std::nullopt, 132, 64);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0].split, -1);
}

TEST(PrefillPlan, SplitsStayWithinTheSlots) {
  KernelSpec spec = wgmmaSpec(1, /*causal=*/false);
  auto items =
      splitPrefillKeys(tiles({100, 100, 100}, {60000, 9000, 300}, spec), spec,
                       std::nullopt, 132, 10);
  expectSplitsCoverTiles(items, spec, 10);
  int splits = 0;
  for (const PrefillWorkItem &w : items)
    splits += w.split >= 0;
  EXPECT_GT(splits, 0);
}

TEST(PrefillPlan, CausalSplitsEndAtTheDiagonal) {
  // Tiles of a long causal prompt see different key counts; only the keys
  // up to a tile's last row are split, and the heaviest items come first.
  KernelSpec spec = wgmmaSpec(2);
  auto items = splitPrefillKeys(tiles({1024}, {1024}, spec), spec, std::nullopt,
                                132, 64);
  expectSplitsCoverTiles(items, spec, 64);
  for (const PrefillWorkItem &w : items) {
    const int lastRow = std::min(w.tileBegin + 128, w.qLen) - 1;
    if (w.split >= 0 && w.split != w.firstSplit + w.numSplits - 1)
      EXPECT_LE(w.keyEnd, lastRow + 1) << "split " << w.split;
  }
}

TEST(PrefillPlan, WindowedSplitsStartAtTheWindow) {
  // Keys before the window are read by no split but the first, which
  // starts at key 0 (it adds the sink) and is narrowed by the kernel.
  KernelSpec spec = wgmmaSpec(1);
  auto items =
      splitPrefillKeys(tiles({128}, {40000}, spec), spec, 8192, 132, 64);
  expectSplitsCoverTiles(items, spec, 64);
  for (const PrefillWorkItem &w : items)
    if (w.split > w.firstSplit)
      EXPECT_GE(w.keyBegin, 40000 - 128 - 8192 - 128);
}

TEST(PrefillPlan, RandomBatchesKeepTheInvariants) {
  // Random batches, specs, windows, devices and slot counts: every tile's
  // keys covered once by consecutive splits, slots within the capacity.
  std::mt19937 rng(7);
  auto uniform = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  int splitItems = 0;
  for (int round = 0; round < 500; ++round) {
    KernelSpec spec = wgmmaSpec(1 << uniform(0, 5), uniform(0, 1) == 1);
    spec.prefillSchedule.blockN = uniform(0, 1) ? 64 : 128;
    std::vector<int32_t> qLens, kvLens;
    for (int b = uniform(1, 6); b > 0; --b) {
      qLens.push_back(uniform(1, 700));
      kvLens.push_back(qLens.back() + uniform(0, 1) * uniform(0, 40000));
    }
    std::optional<int> window;
    if (uniform(0, 3) == 0)
      window = uniform(0, 5000);
    const int slots = uniform(0, 300);
    auto items = splitPrefillKeys(tiles(qLens, kvLens, spec), spec, window,
                                  uniform(1, 264), slots);
    expectSplitsCoverTiles(items, spec, slots);
    for (const PrefillWorkItem &w : items)
      splitItems += w.split >= 0;
    if (HasFailure()) {
      ADD_FAILURE() << "round " << round;
      return;
    }
  }
  EXPECT_GT(splitItems, 500) << "the rounds hardly split";
}

} // namespace
