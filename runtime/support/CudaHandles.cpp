//===- CudaHandles.cpp - RAII owners of CUDA driver resources -------------===//
//
// Driver initialization, the device -> Arch mapping and the handle classes.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/support/CudaHandles.h"

#include "llvm/Support/FormatVariadic.h"

#include "attn/runtime/support/Error.h"
#include "runtime/support/CudaDriver.h"

#include <cassert>
#include <string>
#include <utility>

namespace attn::runtime {
namespace {

/// The outcome of a process-wide, run-once step: a failure is kept as text
/// so that every later caller gets the same Error.
struct OnceOutcome {
  std::string failure;
  CUcontext context = nullptr;

  llvm::Error error() const {
    if (failure.empty())
      return llvm::Error::success();
    return llvm::createStringError(llvm::inconvertibleErrorCode(), failure);
  }
};

OnceOutcome outcomeOf(llvm::Error error) {
  OnceOutcome outcome;
  if (error)
    outcome.failure = llvm::toString(std::move(error));
  return outcome;
}

llvm::Error initDriver() {
  if (llvm::Error error = loadCudaDriver())
    return error;
  ATTN_CU_CHECK(cuInit(0));
  return llvm::Error::success();
}

llvm::Error retainPrimaryContext(CUcontext &context) {
  CUdevice device;
  ATTN_CU_CHECK(cuDeviceGet(&device, 0));
  ATTN_CU_CHECK(cuDevicePrimaryCtxRetain(&context, device));
  return llvm::Error::success();
}

/// Releases a handle in a destructor: failures are logged, except during
/// process teardown, when the driver may already be gone and there is nothing
/// left to release.
void release(CUresult result, const char *call) {
  if (result != CUDA_SUCCESS && result != CUDA_ERROR_DEINITIALIZED)
    logError(cudaError(result, call));
}

} // namespace

llvm::Error initCuda() {
  static const OnceOutcome driver = outcomeOf(initDriver());
  if (llvm::Error error = driver.error())
    return error;

  // Context currency is per thread, so this part runs on every call.
  CUcontext current = nullptr;
  ATTN_CU_CHECK(cuCtxGetCurrent(&current));
  if (current)
    return llvm::Error::success();
  // Retained only when some thread needs it: a host that brings its own
  // context should not pay for a second one on device 0. Never released; it
  // lives as long as the process, as the CUDA runtime's does.
  static const OnceOutcome primary = [] {
    CUcontext context = nullptr;
    OnceOutcome outcome = outcomeOf(retainPrimaryContext(context));
    outcome.context = context;
    return outcome;
  }();
  if (llvm::Error error = primary.error())
    return error;
  ATTN_CU_CHECK(cuCtxSetCurrent(primary.context));
  return llvm::Error::success();
}

llvm::Expected<Arch> currentDeviceArch() {
  if (llvm::Error error = initCuda())
    return std::move(error);
  CUdevice device;
  int major = 0, minor = 0;
  ATTN_CU_CHECK(cuCtxGetDevice(&device));
  ATTN_CU_CHECK(cuDeviceGetAttribute(
      &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device));
  ATTN_CU_CHECK(cuDeviceGetAttribute(
      &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device));
  // sm_80 cubins run on every 8.x device; sm_89 adds FP8 conversions; sm_90a
  // (wgmma, TMA) runs only on 9.0 itself.
  if (major == 9 && minor == 0)
    return Arch::SM90a;
  if (major == 8)
    return minor == 9 ? Arch::SM89 : Arch::SM80;
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      "GPU compute capability %d.%d is not supported: attn targets sm_80 "
      "(8.x), sm_89 and sm_90a (9.0)",
      major, minor);
}

//===- CudaLibrary --------------------------------------------------------===//

llvm::Expected<CudaLibrary> CudaLibrary::load(llvm::StringRef image) {
  if (llvm::Error error = initCuda())
    return std::move(error);
  CUlibrary library = nullptr;
  ATTN_CU_CHECK(cuLibraryLoadData(&library, image.data(), nullptr, nullptr, 0,
                                  nullptr, nullptr, 0));
  return CudaLibrary(library);
}

CudaLibrary::CudaLibrary(CudaLibrary &&other) noexcept
    : library(std::exchange(other.library, nullptr)) {}

CudaLibrary &CudaLibrary::operator=(CudaLibrary &&other) noexcept {
  std::swap(library, other.library);
  return *this;
}

CudaLibrary::~CudaLibrary() {
  if (library)
    release(cuLibraryUnload(library), "cuLibraryUnload");
}

llvm::Expected<CUkernel> CudaLibrary::getKernel(llvm::StringRef name) const {
  std::string symbol = name.str();
  CUkernel kernel = nullptr;
  if (CUresult result = cuLibraryGetKernel(&kernel, library, symbol.c_str());
      result != CUDA_SUCCESS)
    return cudaError(result, "cuLibraryGetKernel(\"" + symbol + "\")");
  return kernel;
}

//===- DeviceBuffer -------------------------------------------------------===//

llvm::Error copyHostToDevice(CUdeviceptr dst, const void *src, size_t bytes) {
  if (bytes == 0)
    return llvm::Error::success();
  ATTN_CU_CHECK(cuMemcpyHtoD(dst, src, bytes));
  // The copy was queued on the legacy default stream; once that stream is
  // idle, the DMA of a pageable source has landed too.
  ATTN_CU_CHECK(cuStreamSynchronize(CU_STREAM_LEGACY));
  return llvm::Error::success();
}

llvm::Expected<DeviceBuffer> DeviceBuffer::allocate(size_t bytes) {
  if (bytes == 0)
    return DeviceBuffer();
  if (llvm::Error error = initCuda())
    return std::move(error);
  CUdeviceptr address = 0;
  ATTN_CU_CHECK(cuMemAlloc(&address, bytes));
  return DeviceBuffer(address, bytes);
}

/// An error unless [offset, offset + count) lies within `size` bytes.
static llvm::Error checkRange(size_t offset, size_t count, size_t size) {
  if (offset <= size && count <= size - offset)
    return llvm::Error::success();
  return llvm::createStringError(
      llvm::formatv("copy of {0} bytes at offset {1} runs past the end of a "
                    "{2}-byte device buffer",
                    count, offset, size));
}

llvm::Error DeviceBuffer::copyFromHost(const void *data, size_t count,
                                       size_t offset) {
  if (llvm::Error error = checkRange(offset, count, bytes))
    return error;
  return copyHostToDevice(address + offset, data, count);
}

llvm::Error DeviceBuffer::copyToHost(void *data, size_t count,
                                     size_t offset) const {
  if (llvm::Error error = checkRange(offset, count, bytes))
    return error;
  if (count)
    ATTN_CU_CHECK(cuMemcpyDtoH(data, address + offset, count));
  return llvm::Error::success();
}

DeviceBuffer::DeviceBuffer(DeviceBuffer &&other) noexcept
    : address(std::exchange(other.address, 0)),
      bytes(std::exchange(other.bytes, 0)) {}

DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&other) noexcept {
  std::swap(address, other.address);
  std::swap(bytes, other.bytes);
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (address)
    release(cuMemFree(address), "cuMemFree");
}

//===- PinnedBuffer -------------------------------------------------------===//

llvm::Expected<PinnedBuffer> PinnedBuffer::allocate(size_t bytes) {
  if (bytes == 0)
    return PinnedBuffer();
  if (llvm::Error error = initCuda())
    return std::move(error);
  void *hostData = nullptr;
  ATTN_CU_CHECK(cuMemHostAlloc(&hostData, bytes, 0));
  return PinnedBuffer(hostData, bytes);
}

PinnedBuffer::PinnedBuffer(PinnedBuffer &&other) noexcept
    : hostData(std::exchange(other.hostData, nullptr)),
      bytes(std::exchange(other.bytes, 0)) {}

PinnedBuffer &PinnedBuffer::operator=(PinnedBuffer &&other) noexcept {
  std::swap(hostData, other.hostData);
  std::swap(bytes, other.bytes);
  return *this;
}

PinnedBuffer::~PinnedBuffer() {
  if (hostData)
    release(cuMemFreeHost(hostData), "cuMemFreeHost");
}

//===- Stream and Event ---------------------------------------------------===//

llvm::Expected<Stream> Stream::create(unsigned flags) {
  if (llvm::Error error = initCuda())
    return std::move(error);
  CUstream stream = nullptr;
  ATTN_CU_CHECK(cuStreamCreate(&stream, flags));
  return Stream(stream);
}

llvm::Error Stream::synchronize() const {
  ATTN_CU_CHECK(cuStreamSynchronize(stream));
  return llvm::Error::success();
}

Stream::Stream(Stream &&other) noexcept
    : stream(std::exchange(other.stream, nullptr)) {}

Stream &Stream::operator=(Stream &&other) noexcept {
  std::swap(stream, other.stream);
  return *this;
}

Stream::~Stream() {
  if (stream)
    release(cuStreamDestroy(stream), "cuStreamDestroy");
}

llvm::Expected<Event> Event::create(unsigned flags) {
  if (llvm::Error error = initCuda())
    return std::move(error);
  CUevent event = nullptr;
  ATTN_CU_CHECK(cuEventCreate(&event, flags));
  return Event(event);
}

Event::Event(Event &&other) noexcept
    : event(std::exchange(other.event, nullptr)) {}

Event &Event::operator=(Event &&other) noexcept {
  std::swap(event, other.event);
  return *this;
}

Event::~Event() {
  if (event)
    release(cuEventDestroy(event), "cuEventDestroy");
}

//===- StagedBuffer -------------------------------------------------------===//

llvm::Expected<StagedBuffer> StagedBuffer::allocate(size_t deviceBytes,
                                                    size_t stagedBytes) {
  assert(stagedBytes <= deviceBytes && "staged part must fit the device");
  StagedBuffer buffer;
  auto device = DeviceBuffer::allocate(deviceBytes);
  if (!device)
    return device.takeError();
  auto staging = PinnedBuffer::allocate(stagedBytes);
  if (!staging)
    return staging.takeError();
  auto event = Event::create(CU_EVENT_DISABLE_TIMING);
  if (!event)
    return event.takeError();
  buffer.deviceMemory = std::move(*device);
  buffer.staging = std::move(*staging);
  buffer.uploaded = std::move(*event);
  return std::move(buffer);
}

llvm::Expected<char *> StagedBuffer::beginWrite() {
  ATTN_CU_CHECK(cuEventSynchronize(uploaded.get()));
  return staging.ptr<char>();
}

llvm::Error StagedBuffer::upload(CUstream stream) {
  ATTN_CU_CHECK(cuMemcpyHtoDAsync(deviceMemory.get(), staging.data(),
                                  staging.size(), stream));
  ATTN_CU_CHECK(cuEventRecord(uploaded.get(), stream));
  return llvm::Error::success();
}

} // namespace attn::runtime
