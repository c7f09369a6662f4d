//===- SourceLimits.cpp - bounds on IR text before MLIR parses it ---------===//
#include "compiler/Frontend/SourceLimits.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

namespace mlir::attn {

/// True for the characters MLIR's lexer allows in a `%name` after its first.
static bool isSSANameChar(char c) {
  return llvm::isAlnum(c) || c == '$' || c == '.' || c == '_' || c == '-';
}

llvm::Error checkIRText(llvm::StringRef text, llvm::StringRef name,
                        unsigned maxDepth) {
  // Open brackets, innermost last. A closer pops its own opener and any
  // `<` left open above it; a closer with no opener to match is the
  // parser's error to report, and counts for nothing here. A stray `>`
  // (as in an affine `>=`) only closes a `<`, so no text can hide a level.
  llvm::SmallVector<char, 64> open;
  unsigned line = 1, column = 1;
  auto advance = [&](size_t &i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
    ++i;
  };
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c == '/' && text.substr(i).starts_with("//")) {
      while (i < text.size() && text[i] != '\n')
        advance(i);
      continue;
    }
    if (c == '"') {
      advance(i);
      while (i < text.size() && text[i] != '"' && text[i] != '\n') {
        if (text[i] == '\\' && i + 1 < text.size())
          advance(i);
        advance(i);
      }
      if (i < text.size())
        advance(i);
      continue;
    }
    if (c == '%') {
      // `%name#N` names result N of an op; MLIR 19 sizes a table by N before
      // it checks N, so a large N allocates gigabytes, and N = 2^32-1 wraps
      // to 0 and writes out of bounds (an upstream bug).
      size_t end = i + 1;
      while (end < text.size() && isSSANameChar(text[end]))
        ++end;
      if (end + 1 < text.size() && text[end] == '#' &&
          llvm::isDigit(text[end + 1])) {
        size_t digits = end + 1;
        uint64_t number = 0;
        for (; digits < text.size() && llvm::isDigit(text[digits]); ++digits)
          number = std::min<uint64_t>(number * 10 + (text[digits] - '0'),
                                      kMaxResultNumber + 1);
        if (number > kMaxResultNumber)
          return llvm::createStringError(llvm::formatv(
              "{0}:{1}:{2}: refers to result {3} of an op; attn parses "
              "result numbers up to {4}",
              name, line, column + (end - i) + 1,
              text.substr(end + 1, std::min<size_t>(digits - end - 1, 24)),
              kMaxResultNumber));
      }
    }
    switch (c) {
    case '{':
    case '(':
    case '[':
    case '<':
      if (open.size() >= maxDepth)
        return llvm::createStringError(llvm::formatv(
            "{0}:{1}:{2}: nests deeper than {3} levels of brackets, more than "
            "attn parses",
            name, line, column, maxDepth));
      open.push_back(c);
      break;
    case '>':
      if (i > 0 && text[i - 1] == '-')
        break; // `->`
      if (!open.empty() && open.back() == '<')
        open.pop_back();
      break;
    case '}':
    case ')':
    case ']': {
      char opener = c == '}' ? '{' : c == ')' ? '(' : '[';
      size_t at = open.size();
      while (at > 0 && open[at - 1] == '<')
        --at;
      if (at > 0 && open[at - 1] == opener)
        open.resize(at - 1);
      break;
    }
    default:
      break;
    }
    advance(i);
  }
  return llvm::Error::success();
}

LogicalResult rejectMalformedBoolArrays(Operation *root) {
  bool malformed = false;
  auto check = [&](Operation *op, StringRef name, Attribute value) {
    value.walk([&](DenseArrayAttr array) {
      if (!array.getElementType().isInteger(1) ||
          array.getRawData().size() == size_t(array.getSize()))
        return;
      // Not op->emitError: its note would print the op, and crash.
      emitError(op->getLoc())
          << "attribute '" << name
          << "' is an i1 array written with integers, which MLIR 19 cannot "
             "hold (an upstream bug); write true and false";
      malformed = true;
    });
  };
  root->walk([&](Operation *op) {
    // Inherent attributes (properties) and discardable ones; an
    // unregistered op keeps its properties as one attribute.
    for (NamedAttribute named : op->getAttrDictionary())
      check(op, named.getName().getValue(), named.getValue());
    if (Attribute properties = op->getPropertiesAsAttribute()) {
      if (auto dict = dyn_cast<DictionaryAttr>(properties))
        for (NamedAttribute named : dict)
          check(op, named.getName().getValue(), named.getValue());
      else
        check(op, "<properties>", properties);
    }
  });
  return failure(malformed);
}

} // namespace mlir::attn
