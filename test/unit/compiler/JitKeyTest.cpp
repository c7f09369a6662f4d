//===- JitKeyTest.cpp - the JIT's memo keys and AOT kernel keys -----------===//
//
// The JIT memoizes loaded kernels by variant key: two variants may share a
// key only when they are equal, or a host would get a kernel compiled for
// another cache. AOT libraries index kernels by kernel key, which leaves
// out the values every launch passes. No GPU needed.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/cache/VariantKey.h"

#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <vector>

using ::attn::runtime::kernelKey;
using ::attn::runtime::variantKey;
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
  std::set<std::string> keys = {variantKey(ragged), variantKey(paged)};
  for (const auto &edit : edits) {
    PrefillVariant v = paged;
    edit(*v.paged);
    keys.insert(variantKey(v));
  }
  EXPECT_EQ(keys.size(), 2 + edits.size());
}

TEST(JitKeyTest, EqualVariantsShareAKey) {
  PrefillVariant a;
  a.paged = PagedKVFormat{ScalarType::F8E4M3, 16, KVLayout::HND, true};
  PrefillVariant b = a;
  EXPECT_EQ(variantKey(a), variantKey(b));
  // A pinned schedule is part of the variant too.
  b.schedule = ::attn::PrefillSchedule{};
  EXPECT_NE(variantKey(a), variantKey(b));
}

TEST(JitKeyTest, KernelKeyLeavesOutLaunchValues) {
  PrefillVariant a;
  a.windowLeft = 100;
  a.softcap = 30.f;
  PrefillVariant b = a;
  b.windowLeft = 4096;
  b.softcap = 50.f;
  b.scale = 0.1f;
  EXPECT_EQ(kernelKey(a), kernelKey(b));
  EXPECT_NE(variantKey(a), variantKey(b));
  // Whether there is a window or a soft-cap changes the kernel.
  PrefillVariant c = a;
  c.windowLeft.reset();
  EXPECT_NE(kernelKey(a), kernelKey(c));
  c = a;
  c.softcap.reset();
  EXPECT_NE(kernelKey(a), kernelKey(c));
}

} // namespace
