//===- GpuTestUtil.h - shared pieces of the GPU tests -----------*- C++ -*-===//
//
// Skipping without a GPU (visibly, never passing by doing nothing) and
// turning llvm::Error into test failures; data helpers come from
// test/reference/DecodeCheck.h.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEST_GPU_GPUTESTUTIL_H
#define ATTN_TEST_GPU_GPUTESTUTIL_H

#include "attn/runtime/support/CudaHandles.h"
#include "attn/runtime/support/Error.h"
#include "test/reference/DecodeCheck.h"

#include "llvm/Support/Error.h"

#include <gtest/gtest.h>

#include <string>

namespace attn::test {

/// Skips the current test, saying why, when there is no usable GPU.
#define ATTN_REQUIRE_GPU()                                                     \
  do {                                                                         \
    if (llvm::Error attnGpuErr = ::attn::runtime::initCuda())                  \
      GTEST_SKIP() << "no GPU: " << llvm::toString(std::move(attnGpuErr));     \
  } while (false)

/// Fails the test with the error's message (and returns) if `expr` failed.
#define ATTN_ASSERT_OK(expr)                                                   \
  do {                                                                         \
    if (llvm::Error attnErr = (expr))                                          \
      FAIL() << llvm::toString(std::move(attnErr));                            \
  } while (false)

/// Unwraps an Expected into `var`, failing the test on error.
#define ATTN_ASSIGN_OR_FAIL(var, expr)                                         \
  auto var##OrErr = (expr);                                                    \
  if (!var##OrErr)                                                             \
    FAIL() << llvm::toString(var##OrErr.takeError());                          \
  auto &var = *var##OrErr

using check::decodeAll;
using check::download;
using check::poisoned;
using check::Quantized;
using check::randomValues;
using check::upload;

} // namespace attn::test

#endif // ATTN_TEST_GPU_GPUTESTUTIL_H
