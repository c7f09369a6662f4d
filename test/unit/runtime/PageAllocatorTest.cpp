//===- PageAllocatorTest.cpp - free list, refcounts, copy-on-write -------===//
//
// The allocator's bookkeeping on the host: allocation order and reuse,
// exhaustion and double free as clear Errors that leave the state alone,
// shared pages, copy-on-write, and PageTable growing and forking.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/serving/PageAllocator.h"

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

using Pages = std::vector<int32_t>;

TEST(PageAllocator, AllocatesLowestFirstAndReusesFreedBlocks) {
  PageAllocator a(8);
  EXPECT_EQ(a.numPages(), 8);
  EXPECT_EQ(a.numFree(), 8);
  EXPECT_EQ(take(a.allocate(3)), (Pages{0, 1, 2}));
  EXPECT_EQ(a.numFree(), 5);
  EXPECT_EQ(a.refCount(1), 1);
  EXPECT_EQ(a.refCount(3), 0);
  EXPECT_OK(a.free(1));
  EXPECT_EQ(a.refCount(1), 0);
  EXPECT_EQ(a.numFree(), 6);
  // The page freed last is handed out first.
  EXPECT_EQ(take(a.allocate(2)), (Pages{1, 3}));
  EXPECT_EQ(take(a.allocate(0)), Pages{});
  EXPECT_EQ(a.numFree(), 4);
}

TEST(PageAllocator, ExhaustionIsAnErrorAndAllocatesNothing) {
  PageAllocator a(8);
  ASSERT_EQ(take(a.allocate(4)).size(), 4u);
  EXPECT_EQ(errorText(a.allocate(5)),
            "page allocator: out of pages: 5 asked for, 4 of 8 free");
  EXPECT_EQ(a.numFree(), 4);
  EXPECT_EQ(take(a.allocate(4)), (Pages{4, 5, 6, 7}));
  EXPECT_EQ(errorText(a.allocate(1)),
            "page allocator: out of pages: 1 asked for, 0 of 8 free");
  EXPECT_FALSE(a.allocate(-1));
}

TEST(PageAllocator, DoubleFreeIsAnError) {
  PageAllocator a(4);
  ASSERT_EQ(take(a.allocate(3)), (Pages{0, 1, 2}));
  EXPECT_OK(a.free(2));
  EXPECT_EQ(errorText(a.free(2)), "page allocator: double free of page 2");
  EXPECT_EQ(a.numFree(), 2); // not pushed twice
  EXPECT_EQ(errorText(a.free(3)), "page allocator: double free of page 3");
}

TEST(PageAllocator, OutOfRangeBlocksAreErrors) {
  PageAllocator a(4);
  ASSERT_TRUE(bool(a.allocate(4)));
  EXPECT_EQ(errorText(a.free(4)),
            "page allocator: free: page 4 is outside [0, 4)");
  EXPECT_EQ(errorText(a.free(-1)),
            "page allocator: free: page -1 is outside [0, 4)");
  EXPECT_EQ(errorText(a.incRef(7)),
            "page allocator: incRef: page 7 is outside [0, 4)");
  EXPECT_EQ(errorText(a.prepareWrite(4)),
            "page allocator: prepareWrite: page 4 is outside [0, 4)");
  EXPECT_EQ(errorText(a.free(Pages{0, 9})),
            "page allocator: free: page 9 is outside [0, 4)");
  EXPECT_EQ(a.refCount(0), 1); // the list was rejected as a whole
}

TEST(PageAllocator, SharedBlocksAreFreedByTheirLastUser) {
  PageAllocator a(4);
  ASSERT_EQ(take(a.allocate(2)), (Pages{0, 1}));
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
            "page allocator: incRef of page 0, which is free");
}

TEST(PageAllocator, FreeingAListIsAllOrNothing) {
  PageAllocator a(4);
  ASSERT_EQ(take(a.allocate(2)), (Pages{0, 1}));
  EXPECT_OK(a.incRef(1));
  // Page 0 has one user: freeing it twice in one list is a double free.
  EXPECT_EQ(errorText(a.free(Pages{1, 0, 0})),
            "page allocator: double free of page 0");
  EXPECT_EQ(a.refCount(0), 1);
  EXPECT_EQ(a.refCount(1), 2);
  EXPECT_OK(a.free(Pages{1, 1, 0}));
  EXPECT_EQ(a.numFree(), 4);
}

TEST(PageAllocator, PrepareWriteKeepsAPrivateBlock) {
  PageAllocator a(4);
  ASSERT_EQ(take(a.allocate(1)), Pages{0});
  WriteTarget t = take(a.prepareWrite(0));
  EXPECT_EQ(t.page, 0);
  EXPECT_FALSE(t.copyFrom.has_value());
  EXPECT_EQ(a.refCount(0), 1);
  EXPECT_EQ(a.numFree(), 3);
  EXPECT_EQ(errorText(a.prepareWrite(2)),
            "page allocator: prepareWrite of page 2, which is free");
}

TEST(PageAllocator, PrepareWriteCopiesASharedBlock) {
  PageAllocator a(3);
  ASSERT_EQ(take(a.allocate(1)), Pages{0});
  EXPECT_OK(a.incRef(0));
  WriteTarget t = take(a.prepareWrite(0));
  EXPECT_EQ(t.page, 1);
  ASSERT_TRUE(t.copyFrom.has_value());
  EXPECT_EQ(*t.copyFrom, 0);
  EXPECT_EQ(a.refCount(0), 1); // the other user keeps it
  EXPECT_EQ(a.refCount(1), 1);
  // Now private to its remaining user.
  EXPECT_FALSE(take(a.prepareWrite(0)).copyFrom.has_value());
}

TEST(PageAllocator, PrepareWriteWithoutAFreeBlockChangesNothing) {
  PageAllocator a(2);
  ASSERT_EQ(take(a.allocate(2)), (Pages{0, 1}));
  EXPECT_OK(a.incRef(1));
  EXPECT_EQ(errorText(a.prepareWrite(1)),
            "page allocator: out of pages: 1 asked for, 0 of 2 free");
  EXPECT_EQ(a.refCount(1), 2);
}

TEST(PageTable, AppendAllocatesAsBlocksFill) {
  PageAllocator a(8);
  PageTable t(4);
  EXPECT_FALSE(take(t.append(a, 3)).has_value());
  EXPECT_EQ(t.pages(), llvm::ArrayRef<int32_t>({0}));
  EXPECT_FALSE(take(t.append(a, 1)).has_value()); // fills page 0 exactly
  EXPECT_EQ(t.pages().size(), 1u);
  EXPECT_FALSE(take(t.append(a, 6)).has_value()); // 10 tokens: 3 pages
  EXPECT_EQ(t.pages(), llvm::ArrayRef<int32_t>({0, 1, 2}));
  EXPECT_EQ(t.numTokens(), 10);
  EXPECT_EQ(t.slot(0), 0);
  EXPECT_EQ(t.slot(5), 1 * 4 + 1);
  EXPECT_EQ(t.slot(9), 2 * 4 + 1);
  EXPECT_EQ(a.numFree(), 5);
}

TEST(PageTable, ForkSharesAndAppendCopiesThePartlyFilledLastBlock) {
  PageAllocator a(8);
  PageTable parent(4);
  ASSERT_TRUE(bool(parent.append(a, 6))); // pages 0, 1 (1 half full)
  ASSIGN_OR_FAIL(child, parent.fork(a));
  EXPECT_EQ(child.pages(), parent.pages());
  EXPECT_EQ(a.refCount(0), 2);
  EXPECT_EQ(a.refCount(1), 2);

  // The child writes token 6 into the shared page 1: it gets a copy.
  std::optional<PageCopy> copy = take(child.append(a, 1));
  ASSERT_TRUE(copy.has_value());
  EXPECT_EQ(copy->src, 1);
  EXPECT_EQ(copy->dst, 2);
  EXPECT_EQ(child.pages(), llvm::ArrayRef<int32_t>({0, 2}));
  EXPECT_EQ(a.refCount(1), 1);
  EXPECT_EQ(a.refCount(0), 2); // the full prefix page stays shared
  // The parent's page 1 is private again: no copy.
  EXPECT_FALSE(take(parent.append(a, 1)).has_value());
  EXPECT_EQ(parent.pages(), llvm::ArrayRef<int32_t>({0, 1}));

  EXPECT_OK(child.release(a));
  EXPECT_TRUE(child.pages().empty());
  EXPECT_EQ(child.numTokens(), 0);
  EXPECT_EQ(a.refCount(0), 1);
  EXPECT_EQ(a.refCount(2), 0);
  EXPECT_OK(parent.release(a));
  EXPECT_EQ(a.numFree(), 8);
}

TEST(PageTable, ForkAtABlockBoundaryNeedsNoCopy) {
  PageAllocator a(4);
  PageTable parent(4);
  ASSERT_TRUE(bool(parent.append(a, 4)));
  ASSIGN_OR_FAIL(child, parent.fork(a));
  EXPECT_FALSE(take(child.append(a, 1)).has_value());
  EXPECT_EQ(child.pages(), llvm::ArrayRef<int32_t>({0, 1}));
  EXPECT_EQ(a.refCount(0), 2);
}

TEST(PageTable, AppendIsAllOrNothing) {
  PageAllocator a(3);
  PageTable parent(4);
  ASSERT_TRUE(bool(parent.append(a, 6))); // pages 0, 1
  ASSIGN_OR_FAIL(child, parent.fork(a));
  // Needs a copy of page 1 and one more page: 2 pages, 1 free.
  EXPECT_EQ(errorText(child.append(a, 4)),
            "page allocator: out of pages: 2 asked for, 1 of 3 free");
  EXPECT_EQ(child.pages(), llvm::ArrayRef<int32_t>({0, 1}));
  EXPECT_EQ(child.numTokens(), 6);
  EXPECT_EQ(a.refCount(1), 2);
  EXPECT_EQ(a.numFree(), 1);
}

} // namespace
