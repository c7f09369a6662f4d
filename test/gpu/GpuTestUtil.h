//===- GpuTestUtil.h - shared pieces of the GPU tests -----------*- C++ -*-===//
//
// Skipping without a GPU (visibly, never passing by doing nothing), random
// data in storage formats, and host <-> device copies.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEST_GPU_GPUTESTUTIL_H
#define ATTN_TEST_GPU_GPUTESTUTIL_H

#include "attn/runtime/CudaHandles.h"
#include "attn/runtime/Error.h"
#include "test/reference/Reference.h"

#include "llvm/Support/Error.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

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

/// Values in a storage format: the raw bits (what the GPU reads) and their
/// exact values (what the reference reads).
struct Quantized {
  std::vector<uint8_t> bytes;
  std::vector<double> values;
};

/// `n` values drawn from N(0, sigma) and rounded to `type`; FP8 values are
/// stored as value / scale, and `values` holds stored * scale.
inline Quantized randomValues(std::mt19937 &rng, ScalarType type, size_t n,
                              double sigma, double scale = 1.0) {
  std::normal_distribution<double> dist(0.0, sigma);
  int bytesPer = sizeOf(type);
  Quantized q;
  q.bytes.resize(n * bytesPer);
  q.values.resize(n);
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits = ref::encode(type, dist(rng) / scale);
    std::memcpy(&q.bytes[i * bytesPer], &bits, bytesPer); // little endian
    q.values[i] = ref::decode(type, bits) * scale;
  }
  return q;
}

/// Decodes `n` elements of `type` from raw bytes.
inline std::vector<double> decodeAll(ScalarType type,
                                     const std::vector<uint8_t> &bytes) {
  int bytesPer = sizeOf(type);
  std::vector<double> out(bytes.size() / bytesPer);
  for (size_t i = 0; i < out.size(); ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, &bytes[i * bytesPer], bytesPer);
    out[i] = ref::decode(type, bits);
  }
  return out;
}

/// A device buffer holding a copy of `data`.
template <class T>
llvm::Expected<runtime::DeviceBuffer> upload(const std::vector<T> &data) {
  auto buffer = runtime::DeviceBuffer::allocate(data.size() * sizeof(T));
  if (!buffer)
    return buffer.takeError();
  if (!data.empty())
    ATTN_CU_CHECK(cuMemcpyHtoD(buffer->get(), data.data(), data.size() * sizeof(T)));
  return std::move(*buffer);
}

/// A device buffer of `bytes` filled with 0xFF: NaN in every float format,
/// so an element the kernel forgot to write fails the comparison.
inline llvm::Expected<runtime::DeviceBuffer> poisoned(size_t bytes) {
  auto buffer = runtime::DeviceBuffer::allocate(bytes);
  if (!buffer)
    return buffer.takeError();
  ATTN_CU_CHECK(cuMemsetD8(buffer->get(), 0xFF, bytes));
  return std::move(*buffer);
}

template <class T>
llvm::Expected<std::vector<T>> download(const runtime::DeviceBuffer &buffer) {
  std::vector<T> data(buffer.size() / sizeof(T));
  ATTN_CU_CHECK(cuCtxSynchronize());
  if (!data.empty())
    ATTN_CU_CHECK(cuMemcpyDtoH(data.data(), buffer.get(), buffer.size()));
  return data;
}

} // namespace attn::test

#endif // ATTN_TEST_GPU_GPUTESTUTIL_H
