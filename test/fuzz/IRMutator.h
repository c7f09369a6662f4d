//===- IRMutator.h - grammar-aware mutations of MLIR text -------*- C++ -*-===//
//
// libFuzzer's byte mutations and a dictionary of tokens rarely build what
// breaks an IR front end: deep nesting, and the constants where integer
// arithmetic wraps or a float has no integer. A share of the mutations here
// make those edits on purpose; the rest are libFuzzer's own. The IR and
// region targets use it as their LLVMFuzzerCustomMutator.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEST_FUZZ_IRMUTATOR_H
#define ATTN_TEST_FUZZ_IRMUTATOR_H

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

namespace attn::fuzz {

/// Values at the edges of i1/i32/i64 and f32/f64, as MLIR spells them.
inline const std::vector<const char *> &edgeConstants() {
  static const std::vector<const char *> values = {"0",
                                                   "1",
                                                   "-1",
                                                   "2",
                                                   "31",
                                                   "32",
                                                   "63",
                                                   "64",
                                                   "2147483647",
                                                   "-2147483648",
                                                   "2147483648",
                                                   "4294967295",
                                                   "4294967296",
                                                   "9223372036854775807",
                                                   "-9223372036854775808",
                                                   "0x7FC00000",
                                                   "0x7F800000",
                                                   "0xFF800000",
                                                   "0x80000000",
                                                   "0x00000001",
                                                   "0x7F7FFFFF",
                                                   "0x7FF8000000000000",
                                                   "0x0000000000000001",
                                                   "-0.0",
                                                   "1.0e+39",
                                                   "3.0e+9",
                                                   "1.0e-45",
                                                   "0.5",
                                                   "-2.5",
                                                   "true",
                                                   "false"};
  return values;
}

inline const std::vector<const char *> &regionOps() {
  static const std::vector<const char *> ops = {
      "arith.addi",       "arith.subi",      "arith.muli",
      "arith.divsi",      "arith.divui",     "arith.remsi",
      "arith.remui",      "arith.ceildivsi", "arith.ceildivui",
      "arith.floordivsi", "arith.shli",      "arith.shrsi",
      "arith.shrui",      "arith.minsi",     "arith.maxui",
      "arith.andi",       "arith.ori",       "arith.xori",
      "arith.addf",       "arith.mulf",      "arith.divf",
      "arith.remf",       "arith.maximumf",  "arith.minnumf",
      "arith.negf",       "arith.sitofp",    "arith.uitofp",
      "arith.fptosi",     "arith.fptoui",    "arith.extsi",
      "arith.extui",      "arith.trunci",    "arith.truncf",
      "arith.extf",       "arith.bitcast",   "arith.select",
      "arith.cmpi",       "arith.cmpf",      "math.absi",
      "math.ctlz",        "math.ctpop",      "math.tanh",
      "math.exp",         "math.log",        "math.sqrt",
      "math.fma",         "math.powf",       "math.ipowi",
      "math.fpowi",       "scf.if"};
  return ops;
}

inline const std::vector<const char *> &scalarTypes() {
  static const std::vector<const char *> types = {"i1",  "i32", "i64",   "f32",
                                                  "f64", "f16", "index", "i8"};
  return types;
}

/// Replaces one occurrence of a token that `isToken(text, at)` says starts
/// at `at` (ending where `tokenEnd` says) with `by`; false if none.
template <class Start, class End>
bool replaceOne(std::string &text, std::minstd_rand &rng, Start isToken,
                End tokenEnd, const std::string &by) {
  std::vector<size_t> starts;
  for (size_t i = 0; i < text.size(); ++i)
    if (isToken(text, i))
      starts.push_back(i);
  if (starts.empty())
    return false;
  size_t at = starts[rng() % starts.size()];
  text.replace(at, tokenEnd(text, at) - at, by);
  return true;
}

inline bool isWordChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}

/// One mutation of `data` (MLIR text) into at most `maxSize` bytes.
inline size_t mutateIR(uint8_t *data, size_t size, size_t maxSize,
                       unsigned seed) {
  std::minstd_rand rng(seed);
  std::string text(reinterpret_cast<const char *>(data), size);
  bool edited = false;
  switch (rng() % 10) {
  case 0: { // a run of nested brackets, shallow or far too deep
    static const char *const kOpen[] = {
        "{", "[", "(", "<", "tuple<", "scf.if %c -> (f32) {\n", "[[", "{{"};
    static const char *const kClose[] = {"}", "]",   ")",  ">",
                                         ">", "}\n", "]]", "}}"};
    size_t kind = rng() % 8;
    size_t depth = 1 + rng() % (rng() % 2 ? 8 : 400);
    size_t open = text.empty() ? 0 : rng() % (text.size() + 1);
    size_t close =
        open + (text.size() > open ? rng() % (text.size() - open + 1) : 0);
    std::string closers, openers;
    for (size_t i = 0; i < depth; ++i) {
      openers += kOpen[kind];
      closers += kClose[kind];
    }
    text.insert(close, closers);
    text.insert(open, openers);
    edited = true;
    break;
  }
  case 1: { // an integer or float literal becomes an edge value
    const char *value = edgeConstants()[rng() % edgeConstants().size()];
    edited = replaceOne(
        text, rng,
        [](const std::string &t, size_t i) {
          return (std::isdigit(static_cast<unsigned char>(t[i])) ||
                  (t[i] == '-' && i + 1 < t.size() &&
                   std::isdigit(static_cast<unsigned char>(t[i + 1])))) &&
                 (i == 0 || !isWordChar(t[i - 1]));
        },
        [](const std::string &t, size_t i) {
          size_t j = i + 1;
          while (j < t.size() && (isWordChar(t[j]) || t[j] == '+' ||
                                  (t[j] == '-' && (t[j - 1] == 'e'))))
            ++j;
          return j;
        },
        value);
    break;
  }
  case 2: { // an op swapped for another a region may (or may not) hold
    const char *op = regionOps()[rng() % regionOps().size()];
    edited = replaceOne(
        text, rng,
        [](const std::string &t, size_t i) {
          return (t.compare(i, 6, "arith.") == 0 ||
                  t.compare(i, 5, "math.") == 0) &&
                 (i == 0 || !isWordChar(t[i - 1]));
        },
        [](const std::string &t, size_t i) {
          size_t j = i;
          while (j < t.size() && isWordChar(t[j]))
            ++j;
          return j;
        },
        op);
    break;
  }
  case 3: { // a scalar type swapped for another
    const char *type = scalarTypes()[rng() % scalarTypes().size()];
    edited = replaceOne(
        text, rng,
        [](const std::string &t, size_t i) {
          if (i > 0 && isWordChar(t[i - 1]))
            return false;
          for (const char *name : scalarTypes()) {
            size_t n = std::strlen(name);
            if (t.compare(i, n, name) == 0 &&
                (i + n == t.size() || !isWordChar(t[i + n])))
              return true;
          }
          return false;
        },
        [](const std::string &t, size_t i) {
          size_t j = i;
          while (j < t.size() && isWordChar(t[j]))
            ++j;
          return j;
        },
        type);
    break;
  }
  default:
    break;
  }
  if (!edited)
    return LLVMFuzzerMutate(data, size, maxSize);
  size_t length = std::min(text.size(), maxSize);
  std::memcpy(data, text.data(), length);
  return length;
}

} // namespace attn::fuzz

#endif // ATTN_TEST_FUZZ_IRMUTATOR_H
