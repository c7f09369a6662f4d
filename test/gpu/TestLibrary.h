//===- TestLibrary.h - an AOT kernel library built inside a GPU test
//-------===//
//
// The JIT's compile step for one arch, written with the runtime's library
// writer as attn-aot does, into a temporary directory removed afterwards.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEST_GPU_TESTLIBRARY_H
#define ATTN_TEST_GPU_TESTLIBRARY_H

#include "attn/runtime/cache/AotLibrary.h"
#include "attn/runtime/cache/VariantKey.h"
#include "compiler/Jit/Jit.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"

#include <string>
#include <vector>

namespace attn::test {

/// A temporary directory library holding `variants`' kernels for `arch`.
class TestLibrary {
public:
  ~TestLibrary() {
    if (!dir.empty())
      llvm::sys::fs::remove_directories(dir);
  }
  template <class... Variants>
  llvm::Error build(Arch arch, const Variants &...variants) {
    if (std::error_code ec =
            llvm::sys::fs::createUniqueDirectory("attn-aot-test", dir))
      return llvm::createStringError(ec.message());
    std::vector<runtime::AotKernel> kernels;
    llvm::Error error = llvm::Error::success();
    auto add = [&](const auto &variant) {
      if (error)
        return;
      auto compiled = Jit::global().compile(variant, arch);
      if (!compiled) {
        error = compiled.takeError();
        return;
      }
      runtime::AotKernel k;
      k.name = compiled->spec.uri();
      k.key = runtime::aotKey({k.name, compiled->source, arch}).hash;
      k.kernelKeys = {runtime::kernelKey(variant)};
      k.spec = compiled->spec;
      error =
          runtime::writeKernelFiles(dir, k, compiled->source, *compiled->cubin);
      kernels.push_back(k);
    };
    (add(variants), ...);
    if (error)
      return error;
    return runtime::writeManifest(dir, kernels);
  }
  std::string path() const { return dir.str().str(); }

private:
  llvm::SmallString<128> dir;
};

} // namespace attn::test

#endif // ATTN_TEST_GPU_TESTLIBRARY_H
