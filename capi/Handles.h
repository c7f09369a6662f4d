//===- Handles.h - the C ABI's handles: live ids, not addresses -*- C++ -*-===//
//
// What a C caller holds as an `attn_decode *` (or any other opaque handle of
// attn_c.h) is not an object's address but an id that one registry maps to
// the object and its handle type. Every entry point looks its handles up,
// so a handle that was destroyed, never created, or is of another type is
// an error naming the argument: nothing reads freed memory, and a second
// destroy frees nothing. Ids are never reused, so a stale handle cannot
// reach an object created later at the same address (ABA), and no id is an
// address a process maps, so a pointer passed by mistake is never live.
//
// The C types stay incomplete in C++: code cannot dereference a handle, only
// look it up. HandleTraits, specialized once per handle type with
// ATTN_C_HANDLE, gives the object behind it.
//
// The registry holds each object by shared_ptr and a lookup returns a share
// of it, so a destroy racing with a call on the same handle in another
// thread (the caller's bug) unregisters the id at once and frees the object
// when that call returns, never under it. Lookups take one mutex.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_CAPI_HANDLES_H
#define ATTN_CAPI_HANDLES_H

#include "llvm/Support/Error.h"

#include <memory>

namespace attn::capi {

/// The object behind the C handle type CHandle (`Object`) and the type's C
/// name (`name`, whose address also identifies the type). Specialized by
/// ATTN_C_HANDLE.
template <class CHandle> struct HandleTraits;

#define ATTN_C_HANDLE(CType, ObjectType)                                       \
  template <> struct HandleTraits<CType> {                                     \
    using Object = ObjectType;                                                 \
    static constexpr char name[] = #CType;                                     \
  };

/// Registers `object` as a live handle of type `type` and returns its id as
/// the C caller holds it.
void *addHandle(const char *type, std::shared_ptr<void> object);

/// The object of `handle` when it is live and of `type`; unregisters it too
/// when `remove` is set. Errors name `name`: null, not live, another type.
llvm::Expected<std::shared_ptr<void>>
findHandle(const void *handle, const char *type, const char *name, bool remove);

/// A new live handle of `object`, for a create call's `*out`.
template <class CHandle>
CHandle *
newHandle(std::unique_ptr<typename HandleTraits<CHandle>::Object> object) {
  return static_cast<CHandle *>(
      addHandle(HandleTraits<CHandle>::name, std::move(object)));
}

/// The object of the argument `name`, `handle`, for the length of a call.
template <class CHandle>
llvm::Expected<std::shared_ptr<typename HandleTraits<CHandle>::Object>>
lookup(const CHandle *handle, const char *name) {
  auto object =
      findHandle(handle, HandleTraits<CHandle>::name, name, /*remove=*/false);
  if (!object)
    return object.takeError();
  return std::static_pointer_cast<typename HandleTraits<CHandle>::Object>(
      std::move(*object));
}

/// Every attn_*_destroy: NULL is a no-op (as free(NULL)); a live handle is
/// unregistered and its object freed (after any call on it in another
/// thread returns); anything else is an error and frees nothing.
template <class CHandle>
llvm::Error destroyHandle(CHandle *handle, const char *name) {
  if (!handle)
    return llvm::Error::success();
  auto object =
      findHandle(handle, HandleTraits<CHandle>::name, name, /*remove=*/true);
  if (!object)
    return object.takeError();
  object->reset();
  return llvm::Error::success();
}

} // namespace attn::capi

#endif // ATTN_CAPI_HANDLES_H
