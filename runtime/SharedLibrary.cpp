//===- SharedLibrary.cpp - libattn_runtime.so -----------------------------===//
//
// The shared runtime is the static runtime linked whole, with the codegen,
// template and LLVM Support objects it uses inside; this file only gives the
// target a source of its own.
//
//===----------------------------------------------------------------------===//
