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

namespace mlir::attn {

/// Deepest bracket nesting ({, (, [, < together) accepted in IR text:
/// attn's own IR nests about 12 levels and a modifier region with a few
/// nested scf.if about 20; at 64 the parser stays within 256 KiB of stack.
constexpr unsigned kMaxIRNesting = 64;

/// An error naming `name`, the line and column of the first bracket that
/// opens a level past `maxDepth`, if `text` nests deeper. Brackets are
/// counted as MLIR's lexer reads the text: not inside string literals or
/// `//` comments, and not the `>` of `->`.
llvm::Error checkIRNesting(llvm::StringRef text, llvm::StringRef name,
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
