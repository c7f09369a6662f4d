//===- AttnAsanNoUserPoisoning.h - no manual ASan poisoning -----*- C++ -*-===//
//
// Force-included into every attn source in the sanitizer build
// (cmake/AttnSanitize.cmake). Under ASan, LLVM's headers poison and unpoison
// BumpPtrAllocator slabs by hand (llvm/Support/Compiler.h,
// LLVM_ADDRESS_SANITIZER_BUILD). That is only sound when all code using an
// allocator is instrumented; here Debian's LLVM and MLIR are not, so a slab
// poisoned by an inline function compiled into attn is then used by MLIR's
// uninstrumented copy of the same function, which never unpoisons it: a
// false use-after-poison on the first MLIRContext. Compiled-in poisoning is
// turned off; ASan's own redzones and quarantine are unaffected.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_CMAKE_ATTNASANNOUSERPOISONING_H
#define ATTN_CMAKE_ATTNASANNOUSERPOISONING_H

// Declares the functions first, so the macros below cannot break the
// declarations when llvm/Support/Compiler.h includes this header again.
#include <sanitizer/asan_interface.h>

#undef __asan_poison_memory_region
#undef __asan_unpoison_memory_region
#define __asan_poison_memory_region(addr, size) ((void)(addr), (void)(size))
#define __asan_unpoison_memory_region(addr, size) ((void)(addr), (void)(size))

#endif // ATTN_CMAKE_ATTNASANNOUSERPOISONING_H
