//===- BlockAllocator.cpp - KV-cache blocks: free list, sharing -----------===//
#include "attn/runtime/serving/BlockAllocator.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cassert>

namespace attn::runtime {

namespace {

llvm::Error allocError(const llvm::Twine &message) {
  return llvm::createStringError("block allocator: " + message.str());
}

} // namespace

BlockAllocator::BlockAllocator(int32_t numBlocks) {
  assert(numBlocks >= 0 && "block count must not be negative");
  refCounts.assign(numBlocks, 0);
  freeList.reserve(numBlocks);
  for (int32_t b = numBlocks - 1; b >= 0; --b)
    freeList.push_back(b);
}

llvm::Error BlockAllocator::checkAllocated(int32_t block,
                                           const char *what) const {
  if (block < 0 || block >= numBlocks())
    return allocError(llvm::formatv("{0}: block {1} is outside [0, {2})", what,
                                    block, numBlocks()));
  if (refCounts[block] == 0)
    return allocError(llvm::formatv("{0} of block {1}, which is free", what,
                                    block));
  return llvm::Error::success();
}

llvm::Expected<std::vector<int32_t>> BlockAllocator::allocate(int32_t n) {
  if (n < 0)
    return allocError(llvm::formatv("cannot allocate {0} blocks", n));
  if (n > numFree())
    return allocError(llvm::formatv(
        "out of blocks: {0} asked for, {1} of {2} free", n, numFree(),
        numBlocks()));
  std::vector<int32_t> blocks(freeList.end() - n, freeList.end());
  std::reverse(blocks.begin(), blocks.end());
  freeList.resize(freeList.size() - n);
  for (int32_t b : blocks)
    refCounts[b] = 1;
  return blocks;
}

llvm::Error BlockAllocator::incRef(int32_t block) {
  if (llvm::Error error = checkAllocated(block, "incRef"))
    return error;
  ++refCounts[block];
  return llvm::Error::success();
}

llvm::Error BlockAllocator::free(int32_t block) {
  if (block < 0 || block >= numBlocks())
    return allocError(llvm::formatv("free: block {0} is outside [0, {1})",
                                    block, numBlocks()));
  if (refCounts[block] == 0)
    return allocError(llvm::formatv("double free of block {0}", block));
  if (--refCounts[block] == 0)
    freeList.push_back(block);
  return llvm::Error::success();
}

llvm::Error BlockAllocator::free(llvm::ArrayRef<int32_t> blocks) {
  // Check everything first so a bad entry leaves the counts untouched.
  llvm::DenseMap<int32_t, int32_t> uses;
  for (int32_t b : blocks) {
    if (b < 0 || b >= numBlocks())
      return allocError(llvm::formatv("free: block {0} is outside [0, {1})",
                                      b, numBlocks()));
    if (++uses[b] > refCounts[b])
      return allocError(llvm::formatv("double free of block {0}", b));
  }
  for (int32_t b : blocks)
    if (llvm::Error error = free(b))
      return error; // unreachable after the check above
  return llvm::Error::success();
}

llvm::Expected<WriteTarget> BlockAllocator::prepareWrite(int32_t block) {
  if (llvm::Error error = checkAllocated(block, "prepareWrite"))
    return std::move(error);
  if (refCounts[block] == 1)
    return WriteTarget{block, std::nullopt};
  auto fresh = allocate(1);
  if (!fresh)
    return fresh.takeError();
  --refCounts[block]; // still >= 1: the other users keep it
  return WriteTarget{fresh->front(), block};
}

//===----------------------------------------------------------------------===//
// BlockTable
//===----------------------------------------------------------------------===//

llvm::Expected<std::optional<BlockCopy>>
BlockTable::append(BlockAllocator &allocator, int64_t n) {
  if (n < 0)
    return allocError(llvm::formatv("cannot append {0} tokens", n));
  const int64_t needed = (tokens + n + blockSize - 1) / blockSize;
  const bool writesShared = n > 0 && tokens % blockSize != 0 &&
                            allocator.refCount(table.back()) > 1;
  const int64_t fresh = needed - int64_t(table.size());
  // Count the copy's block too, so neither step can fail halfway.
  if (fresh + writesShared > allocator.numFree())
    return allocError(llvm::formatv(
        "out of blocks: {0} asked for, {1} of {2} free",
        fresh + writesShared, allocator.numFree(), allocator.numBlocks()));
  std::optional<BlockCopy> copy;
  if (writesShared) {
    auto target = allocator.prepareWrite(table.back());
    if (!target)
      return target.takeError();
    copy = BlockCopy{*target->copyFrom, target->block};
    table.back() = target->block;
  }
  auto blocks = allocator.allocate(int32_t(fresh));
  if (!blocks)
    return blocks.takeError();
  table.insert(table.end(), blocks->begin(), blocks->end());
  tokens += n;
  return copy;
}

llvm::Expected<BlockTable> BlockTable::fork(BlockAllocator &allocator) const {
  for (size_t i = 0; i < table.size(); ++i)
    if (llvm::Error error = allocator.incRef(table[i])) {
      // Undo the references taken so far.
      for (size_t j = 0; j < i; ++j)
        llvm::consumeError(allocator.free(table[j]));
      return std::move(error);
    }
  return *this;
}

llvm::Error BlockTable::release(BlockAllocator &allocator) {
  if (llvm::Error error = allocator.free(table))
    return error;
  table.clear();
  tokens = 0;
  return llvm::Error::success();
}

} // namespace attn::runtime
