//===- DynamicLibrary.h - libraries opened on first use ---------*- C++ -*-===//
//
// Private to the runtime: the CUDA driver and NVRTC are opened with dlopen
// on first use rather than linked, so binaries start, and hosts run from AOT
// libraries, where one of them is missing.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_DYNAMICLIBRARY_H
#define ATTN_RUNTIME_DYNAMICLIBRARY_H

#include <dlfcn.h>

#include <initializer_list>
#include <string>

namespace attn::runtime {

struct DynamicLibrary {
  void *handle = nullptr;
  std::string name;      ///< the first candidate, for messages
  std::string loadError; ///< dlerror() text of the first candidate

  /// The first of `candidates` (file names or paths) that opens.
  static DynamicLibrary open(std::initializer_list<std::string> candidates) {
    DynamicLibrary library;
    for (const std::string &candidate : candidates) {
      if (candidate.empty())
        continue;
      if (library.name.empty())
        library.name = candidate;
      library.handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (library.handle)
        return library;
      const char *message = dlerror();
      if (library.loadError.empty())
        library.loadError = message ? message : "unknown dlopen error";
    }
    return library;
  }

  /// `symbol` in the library; null when it is not open or lacks it.
  void *symbol(const char *symbol) const {
    return handle ? dlsym(handle, symbol) : nullptr;
  }
};

} // namespace attn::runtime

#endif // ATTN_RUNTIME_DYNAMICLIBRARY_H
