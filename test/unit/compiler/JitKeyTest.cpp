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

using ::attn::DecodeVariant;
using ::attn::KVLayout;
using ::attn::PagedKVFormat;
using ::attn::PrefillVariant;
using ::attn::ScalarType;
using ::attn::runtime::kernelKey;
using ::attn::runtime::regionKey;
using ::attn::runtime::variantKey;

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

TEST(JitKeyTest, RegionTextKeysIgnoreLayoutAndComments) {
  DecodeVariant a, b, c;
  a.maskMod =
      "{\n^bb0(%r: i32, %q: i32, %k: i32, %qh: i32, %kh: i32):\n"
      "  // same chunk\n  %c = arith.constant 64 : i32\n"
      "  %x = arith.divsi %q, %c : i32\n  %y = arith.divsi %k, %c : i32\n"
      "  %s = arith.cmpi eq, %x, %y : i32\n  attn.yield %s : i1\n}";
  b.maskMod = "{ ^bb0(%r: i32, %q: i32, %k: i32, %qh: i32, %kh: i32): "
              "%c = arith.constant 64 : i32 %x = arith.divsi %q, %c : i32 "
              "%y = arith.divsi %k, %c : i32 %s = arith.cmpi eq, %x, %y : i32 "
              "attn.yield %s : i1 }";
  EXPECT_EQ(kernelKey(a), kernelKey(b));
  EXPECT_EQ(variantKey(a), variantKey(b));
  c = b;
  c.maskMod.replace(c.maskMod.find("64"), 2, "65");
  EXPECT_NE(kernelKey(b), kernelKey(c));
  // Spaces inside a string literal are content; a "//" inside one is not
  // a comment.
  EXPECT_EQ(regionKey("  a   \"x  // y\"\n  b // note\n"), "a \"x  // y\" b");
  EXPECT_NE(regionKey("\"a b\""), regionKey("\"a  b\""));
}

} // namespace
