//===- CudaHandles.h - RAII owners of CUDA driver resources -----*- C++ -*-===//
//
// Move-only owners of driver objects: a loaded kernel library, device and
// pinned host memory, a stream, an event. Creation returns llvm::Expected;
// destruction releases and logs a failure to llvm::errs() instead of failing,
// since a destructor has no one to report to.
//
// Nothing here touches the GPU until called: the driver is opened on first
// use, so binaries start and GPU-free paths work on machines without one.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_RUNTIME_CUDAHANDLES_H
#define ATTN_RUNTIME_CUDAHANDLES_H

#include "spec/KernelSpec.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cuda.h>

#include <cstddef>

namespace attn::runtime {

/// Initializes the driver (cuInit, once per process) and makes sure the
/// calling thread has a current context: the host's own context if it set
/// one, else device 0's primary context, as the CUDA runtime would use. An
/// Error (never a crash) when there is no driver or no GPU.
llvm::Error initCuda();

/// The attn target for the current context's device: compute capability 9.0
/// -> SM90a, 8.9 -> SM89, other 8.x -> SM80; an Error for any other
/// capability. Calls initCuda().
llvm::Expected<Arch> currentDeviceArch();

/// Copies `bytes` from host memory (pageable or pinned) to device address
/// `dst` in the current context and returns once the bytes are in device
/// memory, so any stream may read them, non-blocking ones included.
/// cuMemcpyHtoD alone may return as soon as pageable source memory is
/// staged, with the DMA still in flight on the legacy default stream, which
/// non-blocking streams do not wait for. Every host-to-device upload that is
/// not a stream-ordered async copy goes through here. It does not wait for
/// work queued on non-blocking streams either: kernels still reading `dst`
/// must be waited for (their stream synchronized) before it is overwritten.
llvm::Error copyHostToDevice(CUdeviceptr dst, const void *src, size_t bytes);

/// A cubin loaded with cuLibraryLoadData. Context-independent: its kernels
/// are valid on every device and context, so one load serves the process.
class CudaLibrary {
public:
  /// Loads `image` (a cubin); the bytes are not needed after the call.
  static llvm::Expected<CudaLibrary> load(llvm::StringRef image);

  CudaLibrary(CudaLibrary &&other) noexcept;
  CudaLibrary &operator=(CudaLibrary &&other) noexcept;
  ~CudaLibrary();

  /// The kernel named `name` (an extern "C" entry, e.g. "attn_<uri>"); valid
  /// while this library is alive.
  llvm::Expected<CUkernel> getKernel(llvm::StringRef name) const;
  CUlibrary get() const { return library; }

private:
  explicit CudaLibrary(CUlibrary library) : library(library) {}
  CUlibrary library = nullptr;
};

/// Device memory from cuMemAlloc.
class DeviceBuffer {
public:
  /// `bytes` of device memory in the current context; 0 bytes gives an empty
  /// buffer with a null pointer.
  static llvm::Expected<DeviceBuffer> allocate(size_t bytes);

  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer &&other) noexcept;
  DeviceBuffer &operator=(DeviceBuffer &&other) noexcept;
  ~DeviceBuffer();

  CUdeviceptr get() const { return address; }
  /// The buffer as a typed device pointer (for kernel parameter structs).
  template <typename T> T *ptr() const {
    return reinterpret_cast<T *>(address);
  }
  size_t size() const { return bytes; }

  /// Synchronous copies between the host and the buffer (setup and reading
  /// results; hosts need no driver calls of their own). Copies past the end
  /// are errors.
  ///
  /// copyFromHost returns once the bytes are in device memory; any stream
  /// may read them (copyHostToDevice). Kernels on other streams that still
  /// read the buffer must be waited for first.
  llvm::Error copyFromHost(const void *data, size_t count, size_t offset = 0);
  /// Returns once the bytes are in `data`. Work on other streams that writes
  /// the buffer must be waited for first.
  llvm::Error copyToHost(void *data, size_t count, size_t offset = 0) const;

private:
  DeviceBuffer(CUdeviceptr address, size_t bytes)
      : address(address), bytes(bytes) {}
  CUdeviceptr address = 0;
  size_t bytes = 0;
};

/// Page-locked host memory from cuMemHostAlloc: the source or target of
/// asynchronous copies.
class PinnedBuffer {
public:
  /// `bytes` of pinned host memory; 0 bytes gives an empty buffer.
  static llvm::Expected<PinnedBuffer> allocate(size_t bytes);

  PinnedBuffer() = default;
  PinnedBuffer(PinnedBuffer &&other) noexcept;
  PinnedBuffer &operator=(PinnedBuffer &&other) noexcept;
  ~PinnedBuffer();

  void *data() const { return hostData; }
  template <typename T> T *ptr() const { return static_cast<T *>(hostData); }
  size_t size() const { return bytes; }

private:
  PinnedBuffer(void *hostData, size_t bytes)
      : hostData(hostData), bytes(bytes) {}
  void *hostData = nullptr;
  size_t bytes = 0;
};

/// A stream from cuStreamCreate.
class Stream {
public:
  /// A new stream; non-blocking by default so it does not synchronize with
  /// the legacy default stream.
  static llvm::Expected<Stream> create(unsigned flags = CU_STREAM_NON_BLOCKING);

  Stream(Stream &&other) noexcept;
  Stream &operator=(Stream &&other) noexcept;
  ~Stream();

  CUstream get() const { return stream; }
  /// Waits for the work queued so far.
  llvm::Error synchronize() const;

private:
  explicit Stream(CUstream stream) : stream(stream) {}
  CUstream stream = nullptr;
};

/// An event from cuEventCreate.
class Event {
public:
  /// A new event; CU_EVENT_DEFAULT records timing.
  static llvm::Expected<Event> create(unsigned flags = CU_EVENT_DEFAULT);

  Event() = default;
  Event(Event &&other) noexcept;
  Event &operator=(Event &&other) noexcept;
  ~Event();

  CUevent get() const { return event; }

private:
  explicit Event(CUevent event) : event(event) {}
  CUevent event = nullptr;
};

/// Device memory whose front is written from the host through a pinned
/// staging buffer, as a plan's work lists are: the device addresses never
/// move (CUDA graphs capture them), and the next write waits only for the
/// previous copy, not for the kernels that read it.
class StagedBuffer {
public:
  /// `deviceBytes` of device memory, the first `stagedBytes` of them staged.
  static llvm::Expected<StagedBuffer> allocate(size_t deviceBytes,
                                               size_t stagedBytes);

  StagedBuffer() = default;

  /// The staging buffer, once the previous upload has left it.
  llvm::Expected<char *> beginWrite();
  /// Copies the whole staging buffer to the device front on `stream`.
  llvm::Error upload(CUstream stream);

  const DeviceBuffer &device() const { return deviceMemory; }

private:
  DeviceBuffer deviceMemory;
  PinnedBuffer staging;
  Event uploaded; ///< recorded after the last upload's copy
};

} // namespace attn::runtime

#endif // ATTN_RUNTIME_CUDAHANDLES_H
