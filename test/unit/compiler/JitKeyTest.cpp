//===- JitKeyTest.cpp - the JIT's memo keys -------------------------------===//
//
// The JIT memoizes loaded kernels by variant: two variants may share a key
// only when they are equal, or a host would get a kernel compiled for
// another cache. No GPU needed: the keys are computed on the host.
//
//===----------------------------------------------------------------------===//
#include "compiler/Jit/Jit.h"

#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <vector>

using ::attn::jitKey;
using ::attn::KVLayout;
using ::attn::PagedKVFormat;
using ::attn::PrefillVariant;
using ::attn::ScalarType;

namespace {

TEST(JitKeyTest, PagedPrefillFieldsSeparateKernels) {
  // The ragged variant, then one variant per paged field changed from the
  // default paged one: every key differs from every other.
  PrefillVariant ragged;
  PrefillVariant paged;
  paged.paged = PagedKVFormat{};
  std::vector<std::function<void(PagedKVFormat &)>> edits = {
      [](PagedKVFormat &p) { p.kvType = ScalarType::F8E4M3; },
      [](PagedKVFormat &p) { p.kvType = ScalarType::F8E5M2; },
      [](PagedKVFormat &p) { p.pageSize = 32; },
      [](PagedKVFormat &p) { p.layout = KVLayout::HND; },
      [](PagedKVFormat &p) {
        p.kvType = ScalarType::F8E4M3;
        p.perHeadKVScale = true;
      },
  };
  std::set<std::string> keys = {jitKey(ragged), jitKey(paged)};
  for (const auto &edit : edits) {
    PrefillVariant v = paged;
    edit(*v.paged);
    keys.insert(jitKey(v));
  }
  EXPECT_EQ(keys.size(), 2 + edits.size());
}

TEST(JitKeyTest, EqualVariantsShareAKey) {
  PrefillVariant a;
  a.paged = PagedKVFormat{ScalarType::F8E4M3, 16, KVLayout::HND, true};
  PrefillVariant b = a;
  EXPECT_EQ(jitKey(a), jitKey(b));
  // A pinned schedule is part of the variant too.
  b.schedule = ::attn::PrefillSchedule{};
  EXPECT_NE(jitKey(a), jitKey(b));
}

} // namespace
