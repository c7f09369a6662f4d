//===- PageAllocator.cpp - KV-cache pages: free list, sharing -----------===//
#include "attn/runtime/serving/PageAllocator.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cassert>

namespace attn::runtime {

namespace {

llvm::Error allocError(const llvm::Twine &message) {
  return llvm::createStringError("page allocator: " + message.str());
}

} // namespace

PageAllocator::PageAllocator(int32_t numPages) {
  assert(numPages >= 0 && "page count must not be negative");
  refCounts.assign(numPages, 0);
  freeList.reserve(numPages);
  for (int32_t b = numPages - 1; b >= 0; --b)
    freeList.push_back(b);
}

llvm::Error PageAllocator::checkAllocated(int32_t page,
                                          const char *what) const {
  if (page < 0 || page >= numPages())
    return allocError(llvm::formatv("{0}: page {1} is outside [0, {2})", what,
                                    page, numPages()));
  if (refCounts[page] == 0)
    return allocError(
        llvm::formatv("{0} of page {1}, which is free", what, page));
  return llvm::Error::success();
}

llvm::Expected<std::vector<int32_t>> PageAllocator::allocate(int32_t n) {
  if (n < 0)
    return allocError(llvm::formatv("cannot allocate {0} pages", n));
  if (n > numFree())
    return allocError(
        llvm::formatv("out of pages: {0} asked for, {1} of {2} free", n,
                      numFree(), numPages()));
  std::vector<int32_t> pages(freeList.end() - n, freeList.end());
  std::reverse(pages.begin(), pages.end());
  freeList.resize(freeList.size() - n);
  for (int32_t b : pages)
    refCounts[b] = 1;
  return pages;
}

llvm::Error PageAllocator::incRef(int32_t page) {
  if (llvm::Error error = checkAllocated(page, "incRef"))
    return error;
  ++refCounts[page];
  return llvm::Error::success();
}

llvm::Error PageAllocator::free(int32_t page) {
  if (page < 0 || page >= numPages())
    return allocError(
        llvm::formatv("free: page {0} is outside [0, {1})", page, numPages()));
  if (refCounts[page] == 0)
    return allocError(llvm::formatv("double free of page {0}", page));
  if (--refCounts[page] == 0)
    freeList.push_back(page);
  return llvm::Error::success();
}

llvm::Error PageAllocator::free(llvm::ArrayRef<int32_t> pages) {
  // Check everything first so a bad entry leaves the counts untouched.
  llvm::DenseMap<int32_t, int32_t> uses;
  for (int32_t b : pages) {
    if (b < 0 || b >= numPages())
      return allocError(
          llvm::formatv("free: page {0} is outside [0, {1})", b, numPages()));
    if (++uses[b] > refCounts[b])
      return allocError(llvm::formatv("double free of page {0}", b));
  }
  for (int32_t b : pages)
    if (llvm::Error error = free(b))
      return error; // unreachable after the check above
  return llvm::Error::success();
}

llvm::Expected<WriteTarget> PageAllocator::prepareWrite(int32_t page) {
  if (llvm::Error error = checkAllocated(page, "prepareWrite"))
    return std::move(error);
  if (refCounts[page] == 1)
    return WriteTarget{page, std::nullopt};
  auto fresh = allocate(1);
  if (!fresh)
    return fresh.takeError();
  --refCounts[page]; // still >= 1: the other users keep it
  return WriteTarget{fresh->front(), page};
}

//===----------------------------------------------------------------------===//
// PageTable
//===----------------------------------------------------------------------===//

llvm::Expected<std::optional<PageCopy>>
PageTable::append(PageAllocator &allocator, int64_t n) {
  if (n < 0)
    return allocError(llvm::formatv("cannot append {0} tokens", n));
  const int64_t needed = (tokens + n + pageSize - 1) / pageSize;
  const bool writesShared =
      n > 0 && tokens % pageSize != 0 && allocator.refCount(table.back()) > 1;
  const int64_t fresh = needed - int64_t(table.size());
  // Count the copy's page too, so neither step can fail halfway.
  if (fresh + writesShared > allocator.numFree())
    return allocError(llvm::formatv(
        "out of pages: {0} asked for, {1} of {2} free", fresh + writesShared,
        allocator.numFree(), allocator.numPages()));
  std::optional<PageCopy> copy;
  if (writesShared) {
    auto target = allocator.prepareWrite(table.back());
    if (!target)
      return target.takeError();
    copy = PageCopy{*target->copyFrom, target->page};
    table.back() = target->page;
  }
  auto pages = allocator.allocate(int32_t(fresh));
  if (!pages)
    return pages.takeError();
  table.insert(table.end(), pages->begin(), pages->end());
  tokens += n;
  return copy;
}

llvm::Expected<PageTable> PageTable::fork(PageAllocator &allocator) const {
  for (size_t i = 0; i < table.size(); ++i)
    if (llvm::Error error = allocator.incRef(table[i])) {
      // Undo the references taken so far.
      for (size_t j = 0; j < i; ++j)
        llvm::consumeError(allocator.free(table[j]));
      return std::move(error);
    }
  return *this;
}

llvm::Error PageTable::release(PageAllocator &allocator) {
  if (llvm::Error error = allocator.free(table))
    return error;
  table.clear();
  tokens = 0;
  return llvm::Error::success();
}

} // namespace attn::runtime
