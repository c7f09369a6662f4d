//===- CacheChecksTest.cpp - launch checks of the cache kernels -----------===//
#include "runtime/kernels/CacheChecks.h"

#include <gtest/gtest.h>

using namespace attn;
using namespace attn::runtime;

namespace {

KernelSpec cacheSpec(ScalarType kvType, int headDim) {
  KernelSpec spec;
  spec.qType = ScalarType::BF16;
  spec.kvType = kvType;
  spec.numQHeads = 8;
  spec.numKVHeads = 2;
  spec.headDim = headDim;
  spec.pageSize = 16;
  return spec;
}

PagedKVView cacheOf(const KernelSpec &s, uintptr_t k, uintptr_t v) {
  PagedKVView c;
  c.k = reinterpret_cast<const void *>(k);
  c.v = reinterpret_cast<const void *>(v);
  c.dtype = s.kvType;
  c.numKVHeads = s.numKVHeads;
  c.headDim = s.headDim;
  c.pageSize = s.pageSize;
  c.numPages = 4;
  return c;
}

TEST(CacheChecksTest, CacheRowsMoveIn16Or8BytePieces) {
  EXPECT_EQ(cacheAlignment(cacheSpec(ScalarType::BF16, 128)), 16);
  EXPECT_EQ(cacheAlignment(cacheSpec(ScalarType::BF16, 72)), 16);
  EXPECT_EQ(cacheAlignment(cacheSpec(ScalarType::F8E4M3, 128)), 16);
  // 72 FP8 bytes per row: rows are only 8-byte aligned, copied 8 at a time.
  EXPECT_EQ(cacheAlignment(cacheSpec(ScalarType::F8E4M3, 72)), 8);
}

TEST(CacheChecksTest, MisalignedBuffersAreNamed) {
  EXPECT_FALSE(misalignedBuffer({{"q", reinterpret_cast<void *>(0x1000), 16},
                                 {"lse", reinterpret_cast<void *>(0x2004), 4},
                                 {"out", nullptr, 16}}));
  auto problem =
      misalignedBuffer({{"q", reinterpret_cast<void *>(0x1000), 16},
                        {"out", reinterpret_cast<void *>(0x1008), 16}});
  ASSERT_TRUE(problem);
  EXPECT_NE(problem->find("out must be 16-byte aligned"), std::string::npos)
      << *problem;
}

TEST(CacheChecksTest, PagedArgsRejectAMisalignedCache) {
  KernelSpec s = cacheSpec(ScalarType::BF16, 128);
  EXPECT_FALSE(pagedArgsProblem(cacheOf(s, 0x10000, 0x20000), s, 4));
  auto problem = pagedArgsProblem(cacheOf(s, 0x10000, 0x20008), s, 4);
  ASSERT_TRUE(problem);
  EXPECT_NE(problem->find("cache.v must be 16-byte aligned"), std::string::npos)
      << *problem;
  // An FP8 cache of 72-byte rows is read 8 bytes at a time.
  KernelSpec f = cacheSpec(ScalarType::F8E4M3, 72);
  EXPECT_FALSE(pagedArgsProblem(cacheOf(f, 0x10008, 0x20000), f, 4));
  EXPECT_TRUE(pagedArgsProblem(cacheOf(f, 0x10004, 0x20000), f, 4));
}

} // namespace
