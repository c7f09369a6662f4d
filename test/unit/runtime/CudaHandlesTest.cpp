//===- CudaHandlesTest.cpp - driver errors, init, handles -----------------===//
//
// Driver failures become Errors that name the call; without a GPU (or
// without a driver at all) initialization is an Error, never a crash. The GPU
// test runs a JIT-compiled kernel end to end and reports itself skipped on a
// machine without a GPU.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/support/CudaHandles.h"

#include "attn/runtime/cache/KernelCache.h"
#include "attn/runtime/support/Error.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

using namespace attn;
using namespace attn::runtime;

namespace {

llvm::Error checked(CUresult result) {
  ATTN_CU_CHECK(result);
  return llvm::Error::success();
}

TEST(CudaError, NamesTheCallAndTheResult) {
  std::string message = llvm::toString(
      cudaError(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc(&ptr, bytes)"));
  EXPECT_TRUE(
      llvm::StringRef(message).starts_with("cuMemAlloc(&ptr, bytes) failed: "))
      << message;
  // By name where a driver is installed, by number where none is.
  EXPECT_TRUE(llvm::StringRef(message).contains("CUDA_ERROR_OUT_OF_MEMORY") ||
              llvm::StringRef(message).contains("CUresult 2"))
      << message;
}

TEST(CudaError, CheckMacroReturnsTheFailure) {
  EXPECT_FALSE(bool(checked(CUDA_SUCCESS)));
  llvm::Error error = checked(CUDA_ERROR_INVALID_VALUE);
  ASSERT_TRUE(bool(error));
  EXPECT_TRUE(llvm::StringRef(llvm::toString(std::move(error)))
                  .starts_with("result failed: "));
}

TEST(CudaInit, WithoutGpuIsAnErrorWithGpuGivesAKnownArch) {
  llvm::Error init = initCuda();
  llvm::Expected<Arch> arch = currentDeviceArch();
  if (init) {
    // No driver or no device: every GPU entry point says so cleanly.
    EXPECT_FALSE(llvm::toString(std::move(init)).empty());
    ASSERT_FALSE(bool(arch));
    llvm::consumeError(arch.takeError());
    llvm::Expected<DeviceBuffer> buffer = DeviceBuffer::allocate(256);
    ASSERT_FALSE(bool(buffer));
    EXPECT_FALSE(llvm::toString(buffer.takeError()).empty());
    return;
  }
  if (!arch) {
    // A GPU attn has no target for (e.g. Blackwell): the error says which.
    EXPECT_TRUE(llvm::StringRef(llvm::toString(arch.takeError()))
                    .contains("compute capability"));
    return;
  }
  EXPECT_TRUE(*arch == Arch::SM80 || *arch == Arch::SM89 ||
              *arch == Arch::SM90a);
}

TEST(DeviceBuffer, ZeroBytesNeedsNoGpu) {
  llvm::Expected<DeviceBuffer> buffer = DeviceBuffer::allocate(0);
  ASSERT_TRUE(bool(buffer)) << llvm::toString(buffer.takeError());
  EXPECT_EQ(buffer->get(), 0u);
  EXPECT_EQ(buffer->size(), 0u);
}

TEST(DeviceBuffer, UploadsOfNothingNeedNoGpuAndOthersNameTheCall) {
  EXPECT_FALSE(bool(copyHostToDevice(0, nullptr, 0)));
  DeviceBuffer empty;
  EXPECT_FALSE(bool(empty.copyFromHost(nullptr, 0)));
  if (llvm::Error init = initCuda()) {
    llvm::consumeError(std::move(init));
    int value = 1;
    llvm::Error error = copyHostToDevice(0x1000, &value, sizeof(value));
    ASSERT_TRUE(bool(error));
    EXPECT_TRUE(llvm::StringRef(llvm::toString(std::move(error)))
                    .contains("cuMemcpyHtoD"));
  }
}

TEST(CudaGpu, UploadIsCompleteForNonBlockingStreams) {
  if (llvm::Expected<Arch> arch = currentDeviceArch(); !arch)
    GTEST_SKIP() << "no usable GPU: " << llvm::toString(arch.takeError());
  // Large and pageable: the case where cuMemcpyHtoD may return before the
  // DMA lands. Read back at once on a stream that does not wait for the
  // legacy default stream.
  std::vector<uint32_t> values(16 << 20);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = uint32_t(i * 2654435761u);
  auto device = DeviceBuffer::allocate(values.size() * sizeof(uint32_t));
  auto host = PinnedBuffer::allocate(device ? device->size() : 0);
  auto stream = Stream::create(CU_STREAM_NON_BLOCKING);
  ASSERT_TRUE(device && host && stream);
  ASSERT_FALSE(bool(device->copyFromHost(values.data(), device->size())));
  ASSERT_EQ(cuMemcpyDtoHAsync(host->data(), device->get(), device->size(),
                              stream->get()),
            CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(stream->get()), CUDA_SUCCESS);
  EXPECT_EQ(std::memcmp(host->data(), values.data(), device->size()), 0);
}

TEST(CudaGpu, JitCompiledKernelRuns) {
  llvm::Expected<Arch> arch = currentDeviceArch();
  if (!arch)
    GTEST_SKIP() << "no usable GPU: " << llvm::toString(arch.takeError());

  KernelCache::Options options;
  options.useDisk = false;
  KernelCache cache(options);
  CompileRequest request{
      "gpu_probe",
      "extern \"C\" __global__ void attn_gpu_probe(int *out) "
      "{ out[threadIdx.x] = 2 * threadIdx.x + 1; }",
      *arch};
  auto library = cache.getLibrary(request);
  ASSERT_TRUE(bool(library)) << llvm::toString(library.takeError());
  auto again = cache.getLibrary(request);
  ASSERT_TRUE(bool(again));
  EXPECT_EQ(library->get(), again->get()) << "library not memoized";

  llvm::Expected<CUkernel> missing = (*library)->getKernel("attn_missing");
  ASSERT_FALSE(bool(missing));
  EXPECT_TRUE(llvm::StringRef(llvm::toString(missing.takeError()))
                  .contains("attn_missing"));
  llvm::Expected<CUkernel> kernel = (*library)->getKernel("attn_gpu_probe");
  ASSERT_TRUE(bool(kernel)) << llvm::toString(kernel.takeError());

  constexpr unsigned kThreads = 64;
  auto stream = Stream::create();
  auto device = DeviceBuffer::allocate(kThreads * sizeof(int));
  auto host = PinnedBuffer::allocate(kThreads * sizeof(int));
  ASSERT_TRUE(stream && device && host);
  CUdeviceptr out = device->get();
  void *params[] = {&out};
  ASSERT_EQ(cuLaunchKernel(reinterpret_cast<CUfunction>(*kernel), 1, 1, 1,
                           kThreads, 1, 1, 0, stream->get(), params, nullptr),
            CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoHAsync(host->data(), out, device->size(), stream->get()),
            CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(stream->get()), CUDA_SUCCESS);
  for (unsigned i = 0; i < kThreads; ++i)
    EXPECT_EQ(host->ptr<int>()[i], static_cast<int>(2 * i + 1)) << i;
}

TEST(CudaGpu, CubinForAnotherArchIsRefusedBeforeTheDriver) {
  llvm::Expected<Arch> arch = currentDeviceArch();
  if (!arch)
    GTEST_SKIP() << "no usable GPU: " << llvm::toString(arch.takeError());
  // An arch this GPU does not run: sm_80 SASS on a 9.0 device, sm_90a on
  // an 8.x one.
  Arch other = *arch == Arch::SM90a ? Arch::SM80 : Arch::SM90a;
  KernelCache::Options options;
  options.useDisk = false;
  KernelCache cache(options);
  CompileRequest request{
      "gpu_probe_other_arch",
      "extern \"C\" __global__ void attn_gpu_probe(int *out) { *out = 1; }",
      other};
  auto library = cache.getLibrary(request);
  ASSERT_FALSE(bool(library));
  std::string error = llvm::toString(library.takeError());
  EXPECT_NE(error.find("gpu_probe_other_arch"), std::string::npos) << error;
  EXPECT_NE(error.find(std::string(toString(other))), std::string::npos)
      << error;
  EXPECT_NE(error.find(std::string(toString(*arch))), std::string::npos)
      << error;
}

} // namespace
