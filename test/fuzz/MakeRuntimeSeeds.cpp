//===- MakeRuntimeSeeds.cpp - seed files for the runtime fuzzers ----------===//
//
//   attn-fuzz-make-seeds OUT
//
// Writes valid inputs for the runtime's readers, made by the runtime's own
// writers so they follow the formats as they change:
//   OUT/aot-library/manifest.json  a directory library's manifest (2 kernels)
//   OUT/aot-library/packed.attnlib the same library packed
//   OUT/cache-entry/entry          a kernel cache disk entry
//   OUT/cache-entry/cubin          the cubin it holds
// The cubins are stand-ins (test/unit/runtime/TestFiles.h's cubinImage): a
// well-formed CUDA ELF header for their arch, which the readers check, and
// no kernel.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/cache/AotLibrary.h"
#include "attn/runtime/cache/KernelCache.h"
#include "attn/runtime/cache/VariantKey.h"
#include "codegen/EmitCuda.h"
#include "test/unit/runtime/TestFiles.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

using namespace attn;
using namespace attn::runtime;

static int fail(llvm::Error error) {
  llvm::errs() << "attn-fuzz-make-seeds: " << llvm::toString(std::move(error))
               << "\n";
  return 1;
}

static llvm::Error copyFile(const std::string &from, const std::string &to) {
  if (std::error_code ec = llvm::sys::fs::copy_file(from, to))
    return llvm::createStringError("cannot copy " + from + " to " + to + ": " +
                                   ec.message());
  return llvm::Error::success();
}

int main(int argc, char **argv) {
  if (argc != 2) {
    llvm::errs() << "usage: attn-fuzz-make-seeds OUT\n";
    return 2;
  }
  std::string out = argv[1];
  std::string library = out + "/aot-library", cache = out + "/cache-entry";
  std::string work = out + "/work";
  llvm::sys::fs::remove_directories(out);
  for (const std::string &dir : {library, cache, work})
    if (std::error_code ec = llvm::sys::fs::create_directories(dir))
      return fail(llvm::createStringError("cannot create " + dir + ": " +
                                          ec.message()));

  // A decode kernel for sm_90a and an append-KV kernel for sm_80.
  std::vector<AotKernel> kernels;
  KernelSpec decode;
  decode.kind = KernelKind::Decode;
  decode.arch = Arch::SM90a;
  KernelSpec append;
  append.kind = KernelKind::AppendKV;
  append.arch = Arch::SM80;
  append.numQHeads = append.numKVHeads; // append_kv's canonical spec
  std::pair<KernelSpec, std::string> entries[] = {
      {decode, kernelKey(DecodeVariant{})},
      {append, kernelKey(AppendKVVariant{})}};
  for (auto &[spec, variantKey] : entries) {
    CompileRequest request{spec.uri(), emitCuda(spec), spec.arch};
    AotKernel kernel;
    kernel.key = aotKey(request).hash;
    kernel.name = spec.uri();
    kernel.kernelKeys = {variantKey};
    kernel.spec = spec;
    if (llvm::Error error = writeKernelFiles(
            work, kernel, request.source,
            test::cubinImage(spec.arch, "stand-in " + spec.uri())))
      return fail(std::move(error));
    kernels.push_back(kernel);
  }
  if (llvm::Error error = writeManifest(work, kernels))
    return fail(std::move(error));
  if (llvm::Error error = packLibrary(work, library + "/packed.attnlib"))
    return fail(std::move(error));
  if (llvm::Error error =
          copyFile(work + "/manifest.json", library + "/manifest.json"))
    return fail(std::move(error));

  // A disk entry, written by a cache with a stand-in compiler.
  KernelCache::Options options;
  options.diskDir = work + "/cache";
  options.compiler =
      [](const CompileRequest &request) -> llvm::Expected<std::string> {
    return test::cubinImage(request.arch, "stand-in cubin");
  };
  KernelCache writer(options);
  CompileRequest request{"decode_fuzz", "// fuzz source\n", Arch::SM90a};
  auto cubin = writer.getCubin(request);
  if (!cubin)
    return fail(cubin.takeError());
  std::optional<std::string> entry = writer.diskPath(request);
  if (!entry)
    return fail(
        llvm::createStringError("the disk cache is off (ATTN_CACHE_DISABLE?)"));
  if (llvm::Error error = copyFile(*entry, cache + "/entry"))
    return fail(std::move(error));
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(cache + "/cubin", ec);
    if (ec)
      return fail(llvm::createStringError("cannot write " + cache +
                                          "/cubin: " + ec.message()));
    os << **cubin;
    os.close();
    if (os.has_error()) {
      std::error_code error = os.error();
      os.clear_error();
      return fail(llvm::createStringError("cannot write " + cache +
                                          "/cubin: " + error.message()));
    }
  }

  llvm::sys::fs::remove_directories(work);
  return 0;
}
