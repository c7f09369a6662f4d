//===- Handles.cpp - the registry of live C handles -----------------------===//
//
// One map from id to (handle type, object) behind a mutex. Handles.h says
// what the ids guarantee.
//
//===----------------------------------------------------------------------===//
#include "capi/Handles.h"

#include "capi/CApi.h"

#include "llvm/Support/FormatVariadic.h"

#include <cstdint>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace attn::capi {

namespace {

static_assert(sizeof(void *) == 8, "handle ids are 64-bit");

/// Ids are this tag | a 48-bit counter: the top bits make the value an
/// address no process maps, and the counter lasts 2^48 handles before it
/// wraps (and then skips ids still live).
constexpr uintptr_t kIdTag = uintptr_t(0xa77e) << 48;
constexpr uintptr_t kCounterMask = (uintptr_t(1) << 48) - 1;

struct Registry {
  struct Entry {
    const char *type; ///< HandleTraits<...>::name
    std::shared_ptr<void> object;
  };
  std::mutex mutex;
  std::unordered_map<uintptr_t, Entry> live;
  uintptr_t next = 1;
};

/// Never destroyed: at exit the handles a host did not destroy stay
/// allocated, as they would without the registry, instead of being freed
/// in an unknown order after the CUDA driver may be gone.
Registry &registry() {
  static Registry *instance = new Registry;
  return *instance;
}

} // namespace

void *addHandle(const char *type, std::shared_ptr<void> object) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  uintptr_t id;
  do
    id = kIdTag | (r.next++ & kCounterMask);
  while (id == kIdTag || r.live.count(id));
  r.live.emplace(id, Registry::Entry{type, std::move(object)});
  return reinterpret_cast<void *>(id);
}

llvm::Expected<std::shared_ptr<void>> findHandle(const void *handle,
                                                 const char *type,
                                                 const char *name,
                                                 bool remove) {
  if (!handle)
    return argError(llvm::Twine(name) + " is null");
  Registry &r = registry();
  const char *found = nullptr;
  bool sameType = false;
  std::shared_ptr<void> object;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.live.find(reinterpret_cast<uintptr_t>(handle));
    if (it != r.live.end()) {
      found = it->second.type;
      sameType = std::strcmp(found, type) == 0;
      if (sameType) {
        // Copied even when removed: the object is freed outside the lock.
        object = it->second.object;
        if (remove)
          r.live.erase(it);
      }
    }
  }
  if (!found)
    return argError(llvm::formatv(
        "{0} is not a live {1} handle (destroyed, or never created)", name,
        type));
  if (!sameType)
    return argError(
        llvm::formatv("{0} is an {1} handle, not an {2}", name, found, type));
  return object;
}

} // namespace attn::capi
