//===- AotLibrary.h - ahead-of-time kernel libraries ------------*- C++ -*-===//
//
// A kernel library written by attn-aot: cubins for a set of variants and
// archs plus a manifest, as a directory (manifest.json, <arch>/<name>.cu,
// <arch>/<name>-<key16>.cubin) or packed into one file (".attnlib": a
// header, the manifest, the cubins). Each kernel is filed two ways:
//
//  - by its AOT key (aotKey in KernelCache.h: a hash of the generated source
//    and everything else that makes the cubin), which a KernelCache given
//    the library checks before its disk cache, so a JIT host gets the very
//    kernel it would have compiled;
//  - by its variant's kernel key (VariantKey.h) and arch, with the kernel
//    spec the compiler chose, so a host linked to the runtime alone (no
//    MLIR, no compiler, NVRTC optional) gets loaded kernels straight from
//    its variants.
//
// A library is trusted code, as a shared library is: its cubins run on the
// GPU with the host's rights, so ATTN_AOT_LIBRARY (and any path given to
// open) must name a library only its user (or root) can write, built by
// attn-aot from sources the user trusts. Nothing here can tell a hostile
// kernel from an honest one; the checks below catch accidents: a damaged,
// truncated or mixed-up library, or one built for another GPU.
//
// Every cubin is checked against the size and checksum in the manifest
// before use, and must have a well-formed CUDA ELF header naming its
// kernel's arch (checkCubinArch, InputFiles.h), so random bytes never reach
// the driver; a kernel is loaded only if the current GPU runs that arch
// (checkCubinRunsOn), with an error naming the kernel and both archs
// otherwise. The manifest and each cubin are read only from regular files
// and within size bounds, a packed library's cubins by their byte range
// alone, and a manifest must be well formed down to its integers' ranges
// and its file names (exactly <arch>/<name>.cu and
// <arch>/<name>-<key16>.cubin).
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_AOTLIBRARY_H
#define ATTN_RUNTIME_AOTLIBRARY_H

#include "attn/runtime/cache/VariantKey.h"
#include "attn/runtime/kernels/Kernels.h"
#include "attn/runtime/support/InputFiles.h"
#include "spec/KernelSpec.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace attn::runtime {

/// One kernel of a library, as its manifest describes it.
struct AotKernel {
  std::string key;  ///< AOT key (64 hex digits)
  std::string name; ///< KernelSpec::uri(); the symbol is "attn_" + name
  /// The kernel keys of the variants it serves (variants that differ only
  /// in what does not change the kernel share it); empty for .mlir configs.
  std::vector<std::string> kernelKeys;
  KernelSpec spec;       ///< spec.arch is the kernel's arch
  std::string source;    ///< directory libraries: the .cu file, relative
  std::string cubin;     ///< directory libraries: the cubin file, relative
  uint64_t offset = 0;   ///< packed libraries: the cubin's offset in the blob
  uint64_t size = 0;     ///< cubin bytes
  uint64_t checksum = 0; ///< xxh3-64 of the cubin
  double compileSeconds = 0;
};

/// The manifest of `kernels` as JSON text.
std::string manifestJson(llvm::ArrayRef<AotKernel> kernels);
/// The kernels of manifest `text` (of a packed library's if `packed`, else
/// of a directory library's manifest.json), fully checked; errors name
/// `path`, the kernel and the field. Reads no files: the entry point for
/// fuzzing manifests.
llvm::Expected<std::vector<AotKernel>>
parseAotManifest(llvm::StringRef text, llvm::StringRef path, bool packed);
/// Writes one kernel's source and cubin into the directory library at `dir`
/// (<arch>/<name>.cu, <arch>/<name>-<key16>.cubin) and sets `kernel`'s
/// paths, size and checksum; `kernel.key`, `name` and `spec` must be set.
/// Files are written whole or not at all.
llvm::Error writeKernelFiles(llvm::StringRef dir, AotKernel &kernel,
                             llvm::StringRef source, llvm::StringRef cubin);
/// Writes <dir>/manifest.json listing `kernels`.
llvm::Error writeManifest(llvm::StringRef dir,
                          llvm::ArrayRef<AotKernel> kernels);
/// An error unless `file` may receive the packed form of the directory
/// library `dir`: it must not lie inside `dir` (real paths compared) and
/// must not exist unless it is a packed attn library (by its magic), so
/// packing never overwrites a file it did not write.
llvm::Error checkPackTarget(llvm::StringRef dir, llvm::StringRef file);
/// Packs the directory library at `dir` into one file at `file`, after
/// checkPackTarget.
llvm::Error packLibrary(llvm::StringRef dir, llvm::StringRef file);
/// xxh3-64 of a cubin, as manifests record it.
uint64_t cubinChecksum(llvm::StringRef cubin);

class AotLibrary {
public:
  /// Opens a directory library or a packed file; the manifest is read and
  /// checked, cubins are read on use (a packed file is held open).
  static llvm::Expected<std::shared_ptr<const AotLibrary>>
  open(llvm::StringRef path);

  const std::string &path() const { return libraryPath; }
  llvm::ArrayRef<AotKernel> kernels() const { return entries; }

  const AotKernel *findByAotKey(llvm::StringRef key) const;
  const AotKernel *find(llvm::StringRef kernelKey, Arch arch) const;
  /// The kernel's cubin, checked against the manifest (size, checksum) and
  /// its arch (the ELF header's).
  llvm::Expected<std::string> readCubin(const AotKernel &kernel) const;

  /// The loaded kernel of `variant` (of any op, spec/Ops.h), for hosts
  /// without the compiler (needs a GPU). An error names the variant's
  /// kernel key when the library has no kernel for it on `arch`.
  template <class Variant>
  llvm::Expected<std::shared_ptr<const KernelFor<Variant>>>
  load(const Variant &variant, Arch arch) const {
    auto found = loadKey(kernelKey(variant), arch);
    if (!found)
      return found.takeError();
    auto kernel =
        KernelFor<Variant>::create(found->first->spec, variant, found->second);
    if (!kernel)
      return kernel.takeError();
    return std::make_shared<const KernelFor<Variant>>(std::move(*kernel));
  }
  /// load() under each op's name: decode(variant, arch), ...
#define ATTN_OP(Type, member, name)                                            \
  llvm::Expected<std::shared_ptr<const Type##Kernel>> member(                  \
      const Type##Variant &variant, Arch arch) const {                         \
    return load(variant, arch);                                                \
  }
#include "spec/Ops.h"

private:
  AotLibrary() = default;
  /// The kernel of `kernelKey` on `arch`, its cubin loaded.
  llvm::Expected<std::pair<const AotKernel *, std::shared_ptr<CudaLibrary>>>
  loadKey(llvm::StringRef kernelKey, Arch arch) const;
  std::string libraryPath;
  bool packed = false;
  uint64_t blobOffset = 0; ///< packed: where the cubins start in the file
  std::optional<RegularFile> packedFile; ///< packed: the file, held open
  std::vector<AotKernel> entries;
};

} // namespace attn::runtime

#endif // ATTN_RUNTIME_AOTLIBRARY_H
