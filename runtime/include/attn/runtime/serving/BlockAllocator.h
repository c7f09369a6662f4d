//===- BlockAllocator.h - KV-cache blocks: free list, sharing ---*- C++ -*-===//
//
// Which KV-cache blocks are in use, by how many sequences. Sequences that
// share a prefix share its blocks (incRef); a block is free again when its
// last user frees it. Writing into a shared block first copies it
// (copy-on-write): prepareWrite hands back a private block and the copy the
// caller must queue (copyBlocks). Pure host code, no GPU.
//
// Thread-compatible, not thread-safe: const calls may run concurrently, any
// other call needs exclusive access (an engine's scheduler owns one).
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_BLOCKALLOCATOR_H
#define ATTN_RUNTIME_BLOCKALLOCATOR_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace attn::runtime {

/// Where a write to a block may go.
struct WriteTarget {
  int32_t block = 0; ///< the block to write (the old one if it was private)
  /// Set when `block` is a new copy: the caller copies this block's contents
  /// to `block` (K and V, every layer) before writing.
  std::optional<int32_t> copyFrom;
};

/// Reference-counted blocks 0 .. numBlocks-1 with a free list.
class BlockAllocator {
public:
  explicit BlockAllocator(int32_t numBlocks);

  int32_t numBlocks() const { return int32_t(refCounts.size()); }
  int32_t numFree() const { return int32_t(freeList.size()); }
  /// Users of `block` (0 when free). `block` must be in range.
  int32_t refCount(int32_t block) const { return refCounts[block]; }

  /// `n` blocks, each with one user; all or nothing. The lowest ids come
  /// first on a fresh allocator; freed blocks are reused first (LIFO).
  /// Exhaustion is an Error naming the blocks asked for and free.
  llvm::Expected<std::vector<int32_t>> allocate(int32_t n);
  /// One more user of an allocated block (a sequence sharing it).
  llvm::Error incRef(int32_t block);
  /// One user fewer; the block returns to the free list at zero. Freeing a
  /// free block is an Error ("double free of block N").
  llvm::Error free(int32_t block);
  /// Frees each listed block once (duplicates twice); all or nothing.
  llvm::Error free(llvm::ArrayRef<int32_t> blocks);
  /// Copy-on-write: `block` itself if it has one user, else a new block
  /// (the old one loses this user) and copyFrom = `block`.
  llvm::Expected<WriteTarget> prepareWrite(int32_t block);

private:
  llvm::Error checkAllocated(int32_t block, const char *what) const;
  std::vector<int32_t> refCounts;
  std::vector<int32_t> freeList; ///< a stack: back() is handed out next
};

/// A copy of one block into another (a copyBlocks pair).
struct BlockCopy {
  int32_t src = 0;
  int32_t dst = 0;
};

/// One sequence's blocks: grows as tokens are appended, forks for prefix
/// sharing, copies a shared last block before appending into it.
class BlockTable {
public:
  explicit BlockTable(int blockSize) : blockSize(blockSize) {}

  int64_t numTokens() const { return tokens; }
  llvm::ArrayRef<int32_t> blocks() const { return table; }
  /// The cache slot of token `index` (< numTokens()): block * blockSize +
  /// offset, as slot_mapping has it.
  int64_t slot(int64_t index) const {
    return int64_t(table[index / blockSize]) * blockSize + index % blockSize;
  }

  /// Makes room for `n` more tokens: new blocks as the last one fills and,
  /// if the partly filled last block is shared, a private copy of it (the
  /// returned pair, for copyBlocks). All or nothing.
  llvm::Expected<std::optional<BlockCopy>> append(BlockAllocator &allocator,
                                                  int64_t n);
  /// A second sequence with the same tokens, sharing every block.
  llvm::Expected<BlockTable> fork(BlockAllocator &allocator) const;
  /// Gives every block back; the table is empty afterwards.
  llvm::Error release(BlockAllocator &allocator);

private:
  int blockSize;
  int64_t tokens = 0;
  std::vector<int32_t> table;
};

} // namespace attn::runtime

#endif // ATTN_RUNTIME_BLOCKALLOCATOR_H
