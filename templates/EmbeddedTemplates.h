//===- EmbeddedTemplates.h - templates built into the binary ----*- C++ -*-===//
//
// The files under templates/attn/, embedded at build time
// (templates/CMakeLists.txt). The runtime hands them to NVRTC as in-memory
// headers, so generated kernels compile without the source tree, and their
// hash goes into the kernel cache key so editing a template invalidates cached
// binaries.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEMPLATES_EMBEDDEDTEMPLATES_H
#define ATTN_TEMPLATES_EMBEDDEDTEMPLATES_H

#include "llvm/ADT/ArrayRef.h"

#include <cstddef>

namespace attn {

/// One embedded template file.
struct EmbeddedFile {
  const char *name;     ///< include name, e.g. "attn/params.h"
  const char *contents; ///< file bytes followed by a NUL
  size_t size;          ///< bytes, without the NUL
};

/// Every template, sorted by name.
llvm::ArrayRef<EmbeddedFile> embeddedTemplates();

/// SHA-256 (hex) over the sorted template names and their contents.
const char *templatesHash();

} // namespace attn

#endif // ATTN_TEMPLATES_EMBEDDEDTEMPLATES_H
