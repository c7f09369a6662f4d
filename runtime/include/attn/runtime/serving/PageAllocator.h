//===- PageAllocator.h - KV-cache pages: free list, sharing ---*- C++ -*-===//
//
// Which KV-cache pages are in use, by how many sequences. Sequences that
// share a prefix share its pages (incRef); a page is free again when its
// last user frees it. Writing into a shared page first copies it
// (copy-on-write): prepareWrite hands back a private page and the copy the
// caller must queue (copyPages). Pure host code, no GPU.
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

/// Where a write to a page may go.
struct WriteTarget {
  int32_t page = 0; ///< the page to write (the old one if it was private)
  /// Set when `page` is a new copy: the caller copies this page's contents
  /// to `page` (K and V, every layer) before writing.
  std::optional<int32_t> copyFrom;
};

/// Reference-counted pages 0 .. numPages-1 with a free list.
class PageAllocator {
public:
  explicit PageAllocator(int32_t numPages);

  int32_t numPages() const { return int32_t(refCounts.size()); }
  int32_t numFree() const { return int32_t(freeList.size()); }
  /// Users of `page` (0 when free). `page` must be in range.
  int32_t refCount(int32_t page) const { return refCounts[page]; }

  /// `n` pages, each with one user; all or nothing. The lowest ids come
  /// first on a fresh allocator; freed pages are reused first (LIFO).
  /// Exhaustion is an Error naming the pages asked for and free.
  llvm::Expected<std::vector<int32_t>> allocate(int32_t n);
  /// One more user of an allocated page (a sequence sharing it).
  llvm::Error incRef(int32_t page);
  /// One user fewer; the page returns to the free list at zero. Freeing a
  /// free page is an Error ("double free of page N").
  llvm::Error free(int32_t page);
  /// Frees each listed page once (duplicates twice); all or nothing.
  llvm::Error free(llvm::ArrayRef<int32_t> pages);
  /// Copy-on-write: `page` itself if it has one user, else a new page
  /// (the old one loses this user) and copyFrom = `page`.
  llvm::Expected<WriteTarget> prepareWrite(int32_t page);

private:
  llvm::Error checkAllocated(int32_t page, const char *what) const;
  std::vector<int32_t> refCounts;
  std::vector<int32_t> freeList; ///< a stack: back() is handed out next
};

/// A copy of one page into another (a copyPages pair).
struct PageCopy {
  int32_t src = 0;
  int32_t dst = 0;
};

/// One sequence's pages: grows as tokens are appended, forks for prefix
/// sharing, copies a shared last page before appending into it.
class PageTable {
public:
  explicit PageTable(int pageSize) : pageSize(pageSize) {}

  int64_t numTokens() const { return tokens; }
  llvm::ArrayRef<int32_t> pages() const { return table; }
  /// The cache slot of token `index` (< numTokens()): page * pageSize +
  /// offset, as slot_mapping has it.
  int64_t slot(int64_t index) const {
    return int64_t(table[index / pageSize]) * pageSize + index % pageSize;
  }

  /// Makes room for `n` more tokens: new pages as the last one fills and,
  /// if the partly filled last page is shared, a private copy of it (the
  /// returned pair, for copyPages). All or nothing.
  llvm::Expected<std::optional<PageCopy>> append(PageAllocator &allocator,
                                                 int64_t n);
  /// A second sequence with the same tokens, sharing every page.
  llvm::Expected<PageTable> fork(PageAllocator &allocator) const;
  /// Gives every page back; the table is empty afterwards.
  llvm::Error release(PageAllocator &allocator);

private:
  int pageSize;
  int64_t tokens = 0;
  std::vector<int32_t> table;
};

} // namespace attn::runtime

#endif // ATTN_RUNTIME_BLOCKALLOCATOR_H
