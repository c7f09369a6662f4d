//===- AotLibraryFuzzer.cpp - AOT library reader, libFuzzer ---------------===//
//
// Arbitrary bytes as an attn-aot kernel library, through what a host does
// with one (runtime/include/attn/runtime/cache/AotLibrary.h): open it, read the
// manifest, look every kernel up by AOT key and kernel key, read its cubin
// (checked against the manifest's size and checksum and, by its ELF header,
// the kernel's arch) and check which GPUs run it. Bytes that start with
// the packed magic are a packed .attnlib file; anything else is the
// manifest.json of a directory library, whose cubin paths resolve inside a
// scratch directory. A rejected library is fine; a crash, a sanitizer
// report, a hang or a runaway allocation is a bug.
//
// Through AotLibrary::open, which reads from a path (so each input goes
// through a scratch file), rather than parseAotManifest alone: the file
// checks and the cubin reads are fuzzed with the parser.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/cache/AotLibrary.h"
#include "attn/runtime/support/InputFiles.h"
#include "test/fuzz/FuzzScratch.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdlib>
#include <string>

using namespace attn;
using namespace attn::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  // What AotLibrary::open recognizes as a packed file (AotLibrary.cpp).
  bool packed = bytes.starts_with("ATTNLIB1");
  std::string path =
      fuzz::scratchDir("attn-fuzz-aot") + (packed ? "/lib.attnlib" : "/dir");
  if (packed) {
    fuzz::writeFile(path, bytes);
  } else {
    llvm::sys::fs::create_directories(path);
    fuzz::writeFile(path + "/manifest.json", bytes);
  }

  auto library = AotLibrary::open(path);
  if (!library) {
    llvm::consumeError(library.takeError());
    return 0;
  }
  for (const AotKernel &kernel : (*library)->kernels()) {
    // Every kernel is found under its own keys.
    if (!(*library)->findByAotKey(kernel.key))
      __builtin_trap();
    for (const std::string &key : kernel.kernelKeys)
      if (!(*library)->find(key, kernel.spec.arch))
        __builtin_trap();
    llvm::Expected<std::string> cubin = (*library)->readCubin(kernel);
    if (!cubin) {
      llvm::consumeError(cubin.takeError());
      continue;
    }
    if (cubin->size() != kernel.size ||
        cubinChecksum(*cubin) != kernel.checksum)
      __builtin_trap();
    // Only a cubin of the kernel's arch is served, and the GPUs that would
    // load it are the ones that run that arch.
    if (llvm::Error error =
            checkCubinArch(*cubin, kernel.spec.arch, kernel.name)) {
      llvm::consumeError(std::move(error));
      __builtin_trap();
    }
    for (Arch device : {Arch::SM80, Arch::SM89, Arch::SM90a}) {
      llvm::Error error = checkCubinRunsOn(*cubin, device, kernel.name);
      if (bool(error) == deviceRunsArch(device, kernel.spec.arch))
        __builtin_trap();
      llvm::consumeError(std::move(error));
    }
  }
  return 0;
}
