//===- SourceLimits.cpp - bounds on IR text before MLIR parses it ---------===//
#include "compiler/Frontend/SourceLimits.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

namespace mlir::attn {

/// True for the characters MLIR's lexer allows in a `%name` after its first.
static bool isSSANameChar(char c) {
  return llvm::isAlnum(c) || c == '$' || c == '.' || c == '_' || c == '-';
}

/// The first offset from `at` that MLIR's lexer does not skip: whitespace,
/// NUL characters and `//` comments.
static size_t skipTrivia(llvm::StringRef text, size_t at) {
  while (at < text.size()) {
    if (llvm::isSpace(text[at]) || text[at] == '\0') {
      ++at;
    } else if (text.substr(at).starts_with("//")) {
      while (at < text.size() && text[at] != '\n')
        ++at;
    } else {
      break;
    }
  }
  return at;
}

/// Whether the `%name` ending at `end` is defined there as an op's result:
/// `%a = `, `%a:2 = `, or one of `%a, %b = `.
static bool isResultDefinition(llvm::StringRef text, size_t end) {
  size_t at = end;
  while (true) {
    if (at < text.size() && text[at] == ':') { // `%a:2`
      size_t digits = at + 1;
      while (digits < text.size() && llvm::isDigit(text[digits]))
        ++digits;
      if (digits == at + 1)
        return false;
      at = digits;
    }
    at = skipTrivia(text, at);
    if (at >= text.size())
      return false;
    if (text[at] == '=')
      return at + 1 >= text.size() || text[at + 1] != '=';
    if (text[at] != ',')
      return false;
    at = skipTrivia(text, at + 1);
    if (at >= text.size() || text[at] != '%')
      return false;
    ++at;
    while (at < text.size() && isSSANameChar(text[at]))
      ++at;
  }
}

llvm::Error checkIRText(llvm::StringRef text, llvm::StringRef name,
                        unsigned maxDepth) {
  // Open brackets, innermost last. A closer pops its own opener and any
  // `<` left open above it; a closer with no opener to match is the
  // parser's error to report, and counts for nothing here. A stray `>`
  // (as in an affine `>=`) only closes a `<`, so no text can hide a level.
  llvm::SmallVector<char, 64> open;
  // SSA names by their first occurrence in the regions open now (brace
  // depth, whether it defines the name, where); names first seen in a
  // region are forgotten when it closes.
  struct FirstOccurrence {
    unsigned depth;
    bool defines;
    unsigned line, column;
  };
  llvm::StringMap<FirstOccurrence> names;
  llvm::SmallVector<llvm::SmallVector<llvm::StringRef, 4>, 16> namesAtDepth(1);
  unsigned braces = 0;
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
      size_t end = i + 1;
      while (end < text.size() && isSSANameChar(text[end]))
        ++end;
      // A name used and then defined inside a region nested deeper than the
      // use (a forward reference into a region of the using op): MLIR 19's
      // parser then keeps an operand pointing at a deleted placeholder and
      // writes through it (an upstream bug). Such a use is invalid anyway:
      // a region's values are not visible outside it.
      llvm::StringRef ssaName = text.slice(i + 1, end);
      // A definition: an op's result, or an argument (`%a: type` right
      // inside the parentheses of a signature or a block label).
      const size_t next = skipTrivia(text, end);
      const bool argument = !open.empty() && open.back() == '(' &&
                            next < text.size() && text[next] == ':' &&
                            (next + 1 >= text.size() || text[next + 1] != ':');
      const bool defines = argument || isResultDefinition(text, end);
      auto [entry, first] = names.try_emplace(
          ssaName, FirstOccurrence{braces, defines, line, column});
      if (first)
        namesAtDepth.back().push_back(ssaName);
      else if (!entry->second.defines && defines &&
               braces > entry->second.depth)
        return llvm::createStringError(llvm::formatv(
            "{0}:{1}:{2}: uses %{3} before it is defined in a region nested "
            "inside ({4}:{5}); a value defined in a region is not visible "
            "outside it",
            name, entry->second.line, entry->second.column, ssaName, line,
            column));
      // `%name#N` names result N of an op; MLIR 19 sizes a table by N before
      // it checks N, so a large N allocates gigabytes, and N = 2^32-1 wraps
      // to 0 and writes out of bounds (an upstream bug). Its lexer lets
      // whitespace, NULs and comments stand between the name and `#N`.
      const size_t hash = skipTrivia(text, end);
      if (hash + 1 < text.size() && text[hash] == '#' &&
          llvm::isDigit(text[hash + 1])) {
        size_t digits = hash + 1;
        uint64_t number = 0;
        for (; digits < text.size() && llvm::isDigit(text[digits]); ++digits)
          number = std::min<uint64_t>(number * 10 + (text[digits] - '0'),
                                      kMaxResultNumber + 1);
        if (number > kMaxResultNumber) {
          unsigned atLine = line, atColumn = column;
          for (size_t k = i; k <= hash; ++k)
            text[k] == '\n' ? (++atLine, atColumn = 1) : ++atColumn;
          return llvm::createStringError(llvm::formatv(
              "{0}:{1}:{2}: refers to result {3} of an op; attn parses "
              "result numbers up to {4}",
              name, atLine, atColumn,
              text.substr(hash + 1, std::min<size_t>(digits - hash - 1, 24)),
              kMaxResultNumber));
        }
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
      if (c == '{') {
        ++braces;
        namesAtDepth.emplace_back();
      }
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
      if (at > 0 && open[at - 1] == opener) {
        // Every `{` popped with it (the opener and the `<` above it hold
        // none) closes a region: forget the names first seen there.
        for (size_t k = at - 1; k < open.size(); ++k)
          if (open[k] == '{') {
            for (llvm::StringRef forgotten : namesAtDepth.back())
              names.erase(forgotten);
            namesAtDepth.pop_back();
            --braces;
          }
        open.resize(at - 1);
      }
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
