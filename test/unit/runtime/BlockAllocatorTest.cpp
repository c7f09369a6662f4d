//===- BlockAllocatorTest.cpp - free list, refcounts, copy-on-write -------===//
//
// The allocator's bookkeeping on the host: allocation order and reuse,
// exhaustion and double free as clear Errors that leave the state alone,
// shared blocks, copy-on-write, and BlockTable growing and forking.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/serving/BlockAllocator.h"

#include <gtest/gtest.h>

using namespace attn::runtime;

namespace {

/// The error's message; fails the test if there was none.
std::string errorText(llvm::Error error) {
  EXPECT_TRUE(bool(error)) << "expected an error";
  return llvm::toString(std::move(error));
}

template <typename T> std::string errorText(llvm::Expected<T> value) {
  EXPECT_FALSE(bool(value)) << "expected an error";
  return value ? std::string() : llvm::toString(value.takeError());
}

template <typename T> T take(llvm::Expected<T> value) {
  if (!value) {
    ADD_FAILURE() << llvm::toString(value.takeError());
    return T();
  }
  return std::move(*value);
}

/// Unwraps an Expected into `var`, failing the test on error.
#define ASSIGN_OR_FAIL(var, expr)                                              \
  auto var##OrErr = (expr);                                                    \
  if (!var##OrErr)                                                             \
    FAIL() << llvm::toString(var##OrErr.takeError());                          \
  auto &var = *var##OrErr

#define EXPECT_OK(expr)                                                        \
  do {                                                                         \
    if (llvm::Error attnErr = (expr))                                          \
      ADD_FAILURE() << llvm::toString(std::move(attnErr));                     \
  } while (false)

using Blocks = std::vector<int32_t>;

TEST(BlockAllocator, AllocatesLowestFirstAndReusesFreedBlocks) {
  BlockAllocator a(8);
  EXPECT_EQ(a.numBlocks(), 8);
  EXPECT_EQ(a.numFree(), 8);
  EXPECT_EQ(take(a.allocate(3)), (Blocks{0, 1, 2}));
  EXPECT_EQ(a.numFree(), 5);
  EXPECT_EQ(a.refCount(1), 1);
  EXPECT_EQ(a.refCount(3), 0);
  EXPECT_OK(a.free(1));
  EXPECT_EQ(a.refCount(1), 0);
  EXPECT_EQ(a.numFree(), 6);
  // The block freed last is handed out first.
  EXPECT_EQ(take(a.allocate(2)), (Blocks{1, 3}));
  EXPECT_EQ(take(a.allocate(0)), Blocks{});
  EXPECT_EQ(a.numFree(), 4);
}

TEST(BlockAllocator, ExhaustionIsAnErrorAndAllocatesNothing) {
  BlockAllocator a(8);
  ASSERT_EQ(take(a.allocate(4)).size(), 4u);
  EXPECT_EQ(errorText(a.allocate(5)),
            "block allocator: out of blocks: 5 asked for, 4 of 8 free");
  EXPECT_EQ(a.numFree(), 4);
  EXPECT_EQ(take(a.allocate(4)), (Blocks{4, 5, 6, 7}));
  EXPECT_EQ(errorText(a.allocate(1)),
            "block allocator: out of blocks: 1 asked for, 0 of 8 free");
  EXPECT_FALSE(a.allocate(-1));
}

TEST(BlockAllocator, DoubleFreeIsAnError) {
  BlockAllocator a(4);
  ASSERT_EQ(take(a.allocate(3)), (Blocks{0, 1, 2}));
  EXPECT_OK(a.free(2));
  EXPECT_EQ(errorText(a.free(2)), "block allocator: double free of block 2");
  EXPECT_EQ(a.numFree(), 2); // not pushed twice
  EXPECT_EQ(errorText(a.free(3)), "block allocator: double free of block 3");
}

TEST(BlockAllocator, OutOfRangeBlocksAreErrors) {
  BlockAllocator a(4);
  ASSERT_TRUE(bool(a.allocate(4)));
  EXPECT_EQ(errorText(a.free(4)),
            "block allocator: free: block 4 is outside [0, 4)");
  EXPECT_EQ(errorText(a.free(-1)),
            "block allocator: free: block -1 is outside [0, 4)");
  EXPECT_EQ(errorText(a.incRef(7)),
            "block allocator: incRef: block 7 is outside [0, 4)");
  EXPECT_EQ(errorText(a.prepareWrite(4)),
            "block allocator: prepareWrite: block 4 is outside [0, 4)");
  EXPECT_EQ(errorText(a.free(Blocks{0, 9})),
            "block allocator: free: block 9 is outside [0, 4)");
  EXPECT_EQ(a.refCount(0), 1); // the list was rejected as a whole
}

TEST(BlockAllocator, SharedBlocksAreFreedByTheirLastUser) {
  BlockAllocator a(4);
  ASSERT_EQ(take(a.allocate(2)), (Blocks{0, 1}));
  EXPECT_OK(a.incRef(0));
  EXPECT_OK(a.incRef(0));
  EXPECT_EQ(a.refCount(0), 3);
  EXPECT_OK(a.free(0));
  EXPECT_OK(a.free(0));
  EXPECT_EQ(a.refCount(0), 1);
  EXPECT_EQ(a.numFree(), 2);
  EXPECT_OK(a.free(0));
  EXPECT_EQ(a.numFree(), 3);
  EXPECT_EQ(errorText(a.incRef(0)),
            "block allocator: incRef of block 0, which is free");
}

TEST(BlockAllocator, FreeingAListIsAllOrNothing) {
  BlockAllocator a(4);
  ASSERT_EQ(take(a.allocate(2)), (Blocks{0, 1}));
  EXPECT_OK(a.incRef(1));
  // Block 0 has one user: freeing it twice in one list is a double free.
  EXPECT_EQ(errorText(a.free(Blocks{1, 0, 0})),
            "block allocator: double free of block 0");
  EXPECT_EQ(a.refCount(0), 1);
  EXPECT_EQ(a.refCount(1), 2);
  EXPECT_OK(a.free(Blocks{1, 1, 0}));
  EXPECT_EQ(a.numFree(), 4);
}

TEST(BlockAllocator, PrepareWriteKeepsAPrivateBlock) {
  BlockAllocator a(4);
  ASSERT_EQ(take(a.allocate(1)), Blocks{0});
  WriteTarget t = take(a.prepareWrite(0));
  EXPECT_EQ(t.block, 0);
  EXPECT_FALSE(t.copyFrom.has_value());
  EXPECT_EQ(a.refCount(0), 1);
  EXPECT_EQ(a.numFree(), 3);
  EXPECT_EQ(errorText(a.prepareWrite(2)),
            "block allocator: prepareWrite of block 2, which is free");
}

TEST(BlockAllocator, PrepareWriteCopiesASharedBlock) {
  BlockAllocator a(3);
  ASSERT_EQ(take(a.allocate(1)), Blocks{0});
  EXPECT_OK(a.incRef(0));
  WriteTarget t = take(a.prepareWrite(0));
  EXPECT_EQ(t.block, 1);
  ASSERT_TRUE(t.copyFrom.has_value());
  EXPECT_EQ(*t.copyFrom, 0);
  EXPECT_EQ(a.refCount(0), 1); // the other user keeps it
  EXPECT_EQ(a.refCount(1), 1);
  // Now private to its remaining user.
  EXPECT_FALSE(take(a.prepareWrite(0)).copyFrom.has_value());
}

TEST(BlockAllocator, PrepareWriteWithoutAFreeBlockChangesNothing) {
  BlockAllocator a(2);
  ASSERT_EQ(take(a.allocate(2)), (Blocks{0, 1}));
  EXPECT_OK(a.incRef(1));
  EXPECT_EQ(errorText(a.prepareWrite(1)),
            "block allocator: out of blocks: 1 asked for, 0 of 2 free");
  EXPECT_EQ(a.refCount(1), 2);
}

TEST(BlockTable, AppendAllocatesAsBlocksFill) {
  BlockAllocator a(8);
  BlockTable t(4);
  EXPECT_FALSE(take(t.append(a, 3)).has_value());
  EXPECT_EQ(t.blocks(), llvm::ArrayRef<int32_t>({0}));
  EXPECT_FALSE(take(t.append(a, 1)).has_value()); // fills block 0 exactly
  EXPECT_EQ(t.blocks().size(), 1u);
  EXPECT_FALSE(take(t.append(a, 6)).has_value()); // 10 tokens: 3 blocks
  EXPECT_EQ(t.blocks(), llvm::ArrayRef<int32_t>({0, 1, 2}));
  EXPECT_EQ(t.numTokens(), 10);
  EXPECT_EQ(t.slot(0), 0);
  EXPECT_EQ(t.slot(5), 1 * 4 + 1);
  EXPECT_EQ(t.slot(9), 2 * 4 + 1);
  EXPECT_EQ(a.numFree(), 5);
}

TEST(BlockTable, ForkSharesAndAppendCopiesThePartlyFilledLastBlock) {
  BlockAllocator a(8);
  BlockTable parent(4);
  ASSERT_TRUE(bool(parent.append(a, 6))); // blocks 0, 1 (1 half full)
  ASSIGN_OR_FAIL(child, parent.fork(a));
  EXPECT_EQ(child.blocks(), parent.blocks());
  EXPECT_EQ(a.refCount(0), 2);
  EXPECT_EQ(a.refCount(1), 2);

  // The child writes token 6 into the shared block 1: it gets a copy.
  std::optional<BlockCopy> copy = take(child.append(a, 1));
  ASSERT_TRUE(copy.has_value());
  EXPECT_EQ(copy->src, 1);
  EXPECT_EQ(copy->dst, 2);
  EXPECT_EQ(child.blocks(), llvm::ArrayRef<int32_t>({0, 2}));
  EXPECT_EQ(a.refCount(1), 1);
  EXPECT_EQ(a.refCount(0), 2); // the full prefix block stays shared
  // The parent's block 1 is private again: no copy.
  EXPECT_FALSE(take(parent.append(a, 1)).has_value());
  EXPECT_EQ(parent.blocks(), llvm::ArrayRef<int32_t>({0, 1}));

  EXPECT_OK(child.release(a));
  EXPECT_TRUE(child.blocks().empty());
  EXPECT_EQ(child.numTokens(), 0);
  EXPECT_EQ(a.refCount(0), 1);
  EXPECT_EQ(a.refCount(2), 0);
  EXPECT_OK(parent.release(a));
  EXPECT_EQ(a.numFree(), 8);
}

TEST(BlockTable, ForkAtABlockBoundaryNeedsNoCopy) {
  BlockAllocator a(4);
  BlockTable parent(4);
  ASSERT_TRUE(bool(parent.append(a, 4)));
  ASSIGN_OR_FAIL(child, parent.fork(a));
  EXPECT_FALSE(take(child.append(a, 1)).has_value());
  EXPECT_EQ(child.blocks(), llvm::ArrayRef<int32_t>({0, 1}));
  EXPECT_EQ(a.refCount(0), 2);
}

TEST(BlockTable, AppendIsAllOrNothing) {
  BlockAllocator a(3);
  BlockTable parent(4);
  ASSERT_TRUE(bool(parent.append(a, 6))); // blocks 0, 1
  ASSIGN_OR_FAIL(child, parent.fork(a));
  // Needs a copy of block 1 and one more block: 2 blocks, 1 free.
  EXPECT_EQ(errorText(child.append(a, 4)),
            "block allocator: out of blocks: 2 asked for, 1 of 3 free");
  EXPECT_EQ(child.blocks(), llvm::ArrayRef<int32_t>({0, 1}));
  EXPECT_EQ(child.numTokens(), 6);
  EXPECT_EQ(a.refCount(1), 2);
  EXPECT_EQ(a.numFree(), 1);
}

} // namespace
