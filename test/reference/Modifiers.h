//===- Modifiers.h - programmable modifiers for the tests ------*- C++ -*-===//
//
// Each modifier the tests run: its score_mod / mask_mod region as a variant
// carries it (IR text), its fp64 meaning for the reference, and the aux
// tables it reads. The regions are the forms examples/modifiers/ documents.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEST_REFERENCE_MODIFIERS_H
#define ATTN_TEST_REFERENCE_MODIFIERS_H

#include "test/reference/Reference.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace attn::check {

/// An aux table's host data (f32 or i32, row-major) and its dimensions, 1
/// past its rank.
struct AuxData {
  std::vector<float> f32;
  std::vector<int32_t> i32;
  int32_t dims[3] = {1, 1, 1};
};

/// An i32 table [requests, positions] of zeros, as wide as the longest
/// request: per-token ids for a mask_mod to read by (request, position).
inline AuxData perPositionTable(const std::vector<int> &kvLens) {
  AuxData table;
  int maxLen = 1;
  for (int len : kvLens)
    maxLen = std::max(maxLen, len);
  table.dims[0] = int32_t(kvLens.size());
  table.dims[1] = maxLen;
  table.i32.assign(kvLens.size() * size_t(maxLen), 0);
  return table;
}

struct TestModifiers {
  std::string name;
  std::string scoreMod, maskMod; ///< region text; empty: none
  ref::ScoreMod refScore;
  ref::MaskMod refMask;
  std::vector<AuxData> aux;
  /// The region is the causal mask itself: the variant has causal = false.
  bool replacesCausal = false;
};

/// Soft-cap written as a score_mod: cap * tanh(score / cap); with
/// `reciprocal`, the division allows it (fastmath<arcp>: score * (1 / cap)).
inline TestModifiers softcapRegion(double cap, bool reciprocal = false) {
  TestModifiers m;
  m.name = reciprocal ? "softcap_region_arcp" : "softcap_region";
  m.scoreMod = R"({
^bb0(%score: f32, %request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32):
  %cap = arith.constant )" +
               std::to_string(cap) + R"( : f32
  %x = arith.divf %score, %cap)" +
               (reciprocal ? " fastmath<arcp>" : "") + R"( : f32
  %t = math.tanh %x : f32
  %y = arith.mulf %t, %cap : f32
  attn.yield %y : f32
})";
  m.refScore = [cap](double s, int, int, int, int, int) {
    return cap * std::tanh(s / cap);
  };
  return m;
}

/// The start of both ALiBi score_mods below: the slope of the row's head
/// from the aux table, and %af = |k_pos - q_pos| as f32.
constexpr const char *kAlibiDistance =
    R"({
^bb0(%score: f32, %request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32, %slopes: tensor<?xf32>):
  %slope = attn.aux_load %slopes[%q_head] : tensor<?xf32>
  %d = arith.subi %k_pos, %q_pos : i32
  %a = math.absi %d : i32
  %af = arith.sitofp %a : i32 to f32)";

/// ALiBi written as a score_mod over an aux table of per-head slopes:
/// score - slope[q_head] * |k_pos - q_pos| (FlashAttention's definition).
inline TestModifiers alibiRegion(int numQHeads) {
  TestModifiers m;
  m.name = "alibi_region";
  AuxData slopes;
  slopes.dims[0] = numQHeads;
  for (int h = 0; h < numQHeads; ++h)
    slopes.f32.push_back(float(std::pow(2.0, -8.0 * (h + 1) / numQHeads)));
  m.scoreMod = std::string(kAlibiDistance) + R"(
  %bias = arith.mulf %slope, %af fastmath<contract> : f32
  %r = arith.subf %score, %bias fastmath<contract> : f32
  attn.yield %r : f32
})";
  std::vector<float> values = slopes.f32;
  m.refScore = [values](double s, int, int q, int k, int h, int) {
    return s - double(values[h]) * std::abs(double(k - q));
  };
  m.aux.push_back(std::move(slopes));
  return m;
}

/// ALiBi over an aux table again, but costly enough to run out of line
/// (compiler/Transforms/Modifiers.cpp: past 8 IEEE divisions' worth, a row
/// of scores per call): the score is divided 8 times by 1 + |k - q| / 64
/// and multiplied back (within a few ulp of itself), then biased.
/// Its aux table exercises the descriptors' copy in the out-of-line call.
inline TestModifiers outOfLineRegion(int numQHeads) {
  TestModifiers m = alibiRegion(numQHeads);
  m.name = "out_of_line_region";
  m.scoreMod = std::string(kAlibiDistance) + R"(
  %inv64 = arith.constant 0.015625 : f32
  %one = arith.constant 1.0 : f32
  %ad = arith.mulf %af, %inv64 : f32
  %c = arith.addf %ad, %one : f32
  %x1 = arith.divf %score, %c : f32
  %x2 = arith.divf %x1, %c : f32
  %x3 = arith.divf %x2, %c : f32
  %x4 = arith.divf %x3, %c : f32
  %x5 = arith.divf %x4, %c : f32
  %x6 = arith.divf %x5, %c : f32
  %x7 = arith.divf %x6, %c : f32
  %x8 = arith.divf %x7, %c : f32
  %x9 = arith.mulf %x8, %c : f32
  %x10 = arith.mulf %x9, %c : f32
  %x11 = arith.mulf %x10, %c : f32
  %x12 = arith.mulf %x11, %c : f32
  %x13 = arith.mulf %x12, %c : f32
  %x14 = arith.mulf %x13, %c : f32
  %x15 = arith.mulf %x14, %c : f32
  %x16 = arith.mulf %x15, %c : f32
  %bias = arith.mulf %slope, %af : f32
  %r = arith.subf %x16, %bias : f32
  attn.yield %r : f32
})";
  return m;
}

/// The causal mask as a mask_mod: k_pos <= q_pos.
inline TestModifiers causalRegion() {
  TestModifiers m;
  m.name = "causal_region";
  m.replacesCausal = true;
  m.maskMod = R"({
^bb0(%request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32):
  %v = arith.cmpi sle, %k_pos, %q_pos : i32
  attn.yield %v : i1
})";
  m.refMask = [](int, int q, int k, int, int) { return k <= q; };
  return m;
}

/// A sliding window as a mask_mod on top of causal: k_pos >= q_pos - w
/// (window_left = w).
inline TestModifiers windowRegion(int w) {
  TestModifiers m;
  m.name = "window_region";
  m.maskMod = R"({
^bb0(%request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32):
  %w = arith.constant )" +
              std::to_string(w) + R"( : i32
  %first = arith.subi %q_pos, %w : i32
  %v = arith.cmpi sge, %k_pos, %first : i32
  attn.yield %v : i1
})";
  m.refMask = [w](int, int q, int k, int, int) { return k >= q - w; };
  return m;
}

/// Chunked local attention (Llama 4's attention_chunk): a query sees only
/// keys of its own chunk of `chunk` positions (with a causal mask on top).
inline TestModifiers chunkedLocal(int chunk) {
  TestModifiers m;
  m.name = "chunked_local";
  m.maskMod = R"({
^bb0(%request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32):
  %c = arith.constant )" +
              std::to_string(chunk) + R"( : i32
  %qc = arith.divsi %q_pos, %c : i32
  %kc = arith.divsi %k_pos, %c : i32
  %same = arith.cmpi eq, %qc, %kc : i32
  attn.yield %same : i1
})";
  m.refMask = [chunk](int, int q, int k, int, int) {
    return q / chunk == k / chunk;
  };
  return m;
}

/// Document masking over packed sequences: aux table [requests, positions]
/// of document ids; a query sees the keys of its own document. Ids are
/// runs of random lengths.
inline TestModifiers documentMask(std::mt19937 &rng,
                                  const std::vector<int> &kvLens) {
  TestModifiers m;
  m.name = "document_mask";
  AuxData docs = perPositionTable(kvLens);
  const int maxLen = docs.dims[1];
  for (size_t b = 0; b < kvLens.size(); ++b) {
    int id = 0, left = 0;
    for (int pos = 0; pos < maxLen; ++pos) {
      if (left == 0) {
        ++id;
        left = 1 + int(rng() % 300);
      }
      --left;
      docs.i32[b * maxLen + pos] = id;
    }
  }
  m.maskMod = R"({
^bb0(%request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32, %docs: tensor<?x?xi32>):
  %a = attn.aux_load %docs[%request, %q_pos] : tensor<?x?xi32>
  %b = attn.aux_load %docs[%request, %k_pos] : tensor<?x?xi32>
  %same = arith.cmpi eq, %a, %b : i32
  attn.yield %same : i1
})";
  std::vector<int32_t> ids = docs.i32;
  m.refMask = [ids, maxLen](int b, int q, int k, int, int) {
    return ids[size_t(b) * maxLen + q] == ids[size_t(b) * maxLen + k];
  };
  m.aux.push_back(std::move(docs));
  return m;
}

/// Bidirectional spans inside causal attention (image tokens of a
/// multimodal prompt): aux table [requests, positions] of span ids, 0 for
/// text; text is causal, the tokens of one span see each other. Spans of
/// 20-200 tokens between runs of text.
inline TestModifiers bidirectionalSpans(std::mt19937 &rng,
                                        const std::vector<int> &kvLens) {
  TestModifiers m;
  m.name = "bidirectional_spans";
  m.replacesCausal = true;
  AuxData spans = perPositionTable(kvLens);
  const int maxLen = spans.dims[1];
  for (size_t b = 0; b < kvLens.size(); ++b)
    for (int pos = int(rng() % 50), id = 1; pos < maxLen; ++id) {
      int len = 20 + int(rng() % 180);
      for (int i = pos; i < std::min(pos + len, maxLen); ++i)
        spans.i32[b * maxLen + i] = id;
      pos += len + int(rng() % 200);
    }
  m.maskMod = R"({
^bb0(%request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32, %spans: tensor<?x?xi32>):
  %causal = arith.cmpi sle, %k_pos, %q_pos : i32
  %a = attn.aux_load %spans[%request, %q_pos] : tensor<?x?xi32>
  %b = attn.aux_load %spans[%request, %k_pos] : tensor<?x?xi32>
  %zero = arith.constant 0 : i32
  %inSpan = arith.cmpi ne, %a, %zero : i32
  %same = arith.cmpi eq, %a, %b : i32
  %span = arith.andi %inSpan, %same : i1
  %visible = arith.ori %causal, %span : i1
  attn.yield %visible : i1
})";
  std::vector<int32_t> ids = spans.i32;
  m.refMask = [ids, maxLen](int b, int q, int k, int, int) {
    int32_t a = ids[size_t(b) * maxLen + q], c = ids[size_t(b) * maxLen + k];
    return k <= q || (a != 0 && a == c);
  };
  m.aux.push_back(std::move(spans));
  return m;
}

/// The T5 relative-position bucket of a causal distance n >= 0: exact below
/// 16, logarithmic up to 128, 31 beyond; in f32, as the region computes it.
inline int t5Bucket(int n) {
  if (n < 16)
    return n;
  float x = std::log(float(n) / 16.0f) / std::log(8.0f) * 16.0f;
  return std::min(16 + int(x), 31);
}

/// T5-style relative position bias: score + table[q_head, bucket(q_pos -
/// k_pos)] from an aux table [heads, 32] of f32.
inline TestModifiers t5Bias(std::mt19937 &rng, int numQHeads) {
  TestModifiers m;
  m.name = "t5_bias";
  AuxData table;
  table.dims[0] = numQHeads;
  table.dims[1] = 32;
  std::normal_distribution<float> normal(0.f, 1.f);
  for (int i = 0; i < numQHeads * 32; ++i)
    table.f32.push_back(normal(rng));
  m.scoreMod = R"({
^bb0(%score: f32, %request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32, %bias: tensor<?x32xf32>):
  %zero = arith.constant 0 : i32
  %d = arith.subi %q_pos, %k_pos : i32
  %n = arith.maxsi %d, %zero : i32
  %c16 = arith.constant 16 : i32
  %c31 = arith.constant 31 : i32
  %exact = arith.cmpi slt, %n, %c16 : i32
  %nf = arith.sitofp %n : i32 to f32
  %f16 = arith.constant 16.0 : f32
  %ratio = arith.divf %nf, %f16 : f32
  %log = math.log %ratio : f32
  %f8 = arith.constant 8.0 : f32
  %log8 = math.log %f8 : f32
  %q = arith.divf %log, %log8 : f32
  %scaled = arith.mulf %q, %f16 : f32
  %si = arith.fptosi %scaled : f32 to i32
  %far = arith.addi %si, %c16 : i32
  %farc = arith.minsi %far, %c31 : i32
  %bucket = arith.select %exact, %n, %farc : i32
  %b = attn.aux_load %bias[%q_head, %bucket] : tensor<?x32xf32>
  %r = arith.addf %score, %b : f32
  attn.yield %r : f32
})";
  std::vector<float> values = table.f32;
  m.refScore = [values](double s, int, int q, int k, int h, int) {
    return s + values[size_t(h) * 32 + t5Bucket(std::max(q - k, 0))];
  };
  m.aux.push_back(std::move(table));
  return m;
}

} // namespace attn::check

#endif // ATTN_TEST_REFERENCE_MODIFIERS_H
