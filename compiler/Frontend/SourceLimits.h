//===- SourceLimits.h - bounds on IR text before MLIR parses it -*- C++ -*-===//
//
// MLIR's parser, verifier and printer recurse once per nesting level of
// regions, types and attributes, so deeply nested text overflows the stack
// of whichever thread parses it (a host's worker thread may have 256 KiB).
// Every place attn parses IR it did not write itself (region text from
// hosts, attn-aot's files, attn-opt's input) checks the text here first, as
// the JSON readers bound their nesting (runtime/support/InputFiles.h). Then,
// once parsed and before it is verified or printed, the IR is checked for
// the attributes MLIR 19 cannot print.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_COMPILER_FRONTEND_SOURCELIMITS_H
#define ATTN_COMPILER_FRONTEND_SOURCELIMITS_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>

namespace mlir::attn {

/// Deepest bracket nesting ({, (, [, < together) accepted in IR text:
/// attn's own IR nests about 12 levels and a modifier region with a few
/// nested scf.if about 20; at 64 the parser stays within 256 KiB of stack.
constexpr unsigned kMaxIRNesting = 64;

/// Largest result number accepted in a `%name#N` reference: attn's ops have
/// a handful of results, and MLIR 19's parser allocates a slot per number
/// up to N before it checks N against the op.
constexpr uint64_t kMaxResultNumber = 63;

/// An error naming `name`, the line and column of the first bracket that
/// opens a level past `maxDepth`, if `text` nests deeper, of the first
/// `%name#N` with N past kMaxResultNumber, or of a `%name` used before it is
/// defined in a region nested deeper than the use (invalid, and MLIR 19's
/// parser then writes through a deleted value). Text is read as MLIR's
/// lexer reads it: nothing inside string literals or `//` comments counts,
/// nor the `>` of `->`.
llvm::Error checkIRText(llvm::StringRef text, llvm::StringRef name,
                        unsigned maxDepth = kMaxIRNesting);

/// Fails, after an error located at the op and naming the attribute, if an
/// op in `root` holds an i1 dense array written with integers: MLIR 19
/// parses `array<i1: 1>` into an attribute with no data, and printing it
/// (in the output, or in a diagnostic that shows its op) reads past its end
/// and crashes, an upstream bug. Run it on IR parsed without verification,
/// before anything verifies or prints it.
LogicalResult rejectMalformedBoolArrays(Operation *root);

} // namespace mlir::attn

#endif // ATTN_COMPILER_FRONTEND_SOURCELIMITS_H
