//===- Status.cpp - errors and queries of the C ABI -----------------------===//
//
// The error boundary (this thread's last message, the status of a C++
// error) and the calls that only answer questions: version, archs, head
// sizes, the KV-cache shape.
//
//===----------------------------------------------------------------------===//
#include "capi/CApi.h"

#include "attn/runtime/serving/KVCache.h"
#include "attn/runtime/support/Error.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstring>

using namespace attn;

namespace attn::capi {

char StatusError::ID = 0;

namespace {
/// One message per thread: attn_last_error() must not race with another
/// thread's failure.
thread_local std::string lastError;

/// What a runtime message says went wrong, when it says so; the runtime's
/// errors are strings, so the C layer reads the parts every such message
/// has (cudaError's "<call> failed: CUDA_ERROR_...", AotLibrary's "no
/// kernel for", the NVRTC loader's and compiler's texts).
std::optional<attn_status> statusOfMessage(llvm::StringRef m) {
  if (m.contains("cannot load the CUDA driver") ||
      m.contains(" failed: CUDA_ERROR") || m.contains(" failed: CUresult"))
    return ATTN_ERROR_CUDA;
  if (m.contains("GPU compute capability") && m.contains("is not supported"))
    return ATTN_ERROR_UNSUPPORTED;
  if (m.starts_with("AOT library '") && m.contains("': no kernel for"))
    return ATTN_ERROR_NOT_FOUND;
  if (m.contains("cannot load NVRTC") || m.contains("NVRTC failed") ||
      m.contains("cannot find the CUDA headers") ||
      (m.starts_with("nvrtc") && m.contains(" failed: ")))
    return ATTN_ERROR_COMPILE;
  // The compiler's own failures: the pipeline, or IR the variant's
  // score_mod / mask_mod text makes (its diagnostics are located in the
  // region's name).
  if (m.contains("attn-pipeline failed") || m.contains("loc(\"score_mod\"") ||
      m.contains("loc(\"mask_mod\"") || m.contains("modifiers:"))
    return ATTN_ERROR_COMPILE;
  return std::nullopt;
}
} // namespace

llvm::Error argError(const llvm::Twine &message, attn_status status) {
  return llvm::make_error<StatusError>(status, message.str());
}

void clearError() { lastError.clear(); }

attn_status fail(const char *function, attn_status status,
                 const std::string &message) {
  // Assigning may throw; the boundary must not.
  try {
    lastError = std::string(function) + ": " + message;
  } catch (...) {
    lastError.clear();
  }
  return status;
}

attn_status fromError(const char *function, llvm::Error error,
                      attn_status fallback) {
  attn_status status = fallback;
  std::string message;
  llvm::handleAllErrors(
      std::move(error),
      [&](const StatusError &e) {
        status = e.status;
        message = e.text;
      },
      [&](const runtime::NvrtcError &e) {
        status = ATTN_ERROR_COMPILE;
        message = e.message();
      },
      [&](const llvm::ErrorInfoBase &e) {
        message = e.message();
        if (std::optional<attn_status> s = statusOfMessage(message))
          status = *s;
      });
  return fail(function, status, message);
}

llvm::Error requireNonNull(const void *p, const char *name) {
  if (p)
    return llvm::Error::success();
  return argError(llvm::Twine(name) + " is null");
}

llvm::Error checkBytes(int64_t count, int64_t itemBytes, const char *name,
                       const char *items) {
  if (count >= 0 && itemBytes > 0 && count <= kMaxBufferBytes / itemBytes)
    return llvm::Error::success();
  return argError(llvm::formatv("{0} is {1}: {1} {2} of {3} bytes are more "
                                "than any buffer holds ({4} bytes)",
                                name, count, items, itemBytes,
                                kMaxBufferBytes));
}

llvm::Error checkStructSize(const void *, uint32_t structSize, size_t v1Size,
                            const char *name, const char *type) {
  if (structSize >= v1Size)
    return llvm::Error::success();
  return argError(llvm::formatv(
      "{0}->struct_size is {1}, smaller than {2} ({3} of this API's first "
      "release); set it with ATTN_INIT or the *_init function",
      name, structSize, v1Size, type));
}

llvm::Expected<Arch> parseArchArg(const char *name, const char *what) {
  if (!name)
    return argError(llvm::Twine(what) + " is null");
  if (std::optional<Arch> arch = parseArch(name))
    return *arch;
  return argError(llvm::formatv("{0} \"{1}\" is not an arch attn targets "
                                "({2})",
                                what, name, attn_supported_archs()));
}

llvm::Error writeString(const std::string &text, char *buffer, size_t capacity,
                        size_t *length) {
  if (!length)
    return argError("length is null");
  if (!buffer && capacity)
    return argError("buffer is null with a capacity of " +
                    std::to_string(capacity));
  *length = text.size();
  if (capacity) {
    size_t n = std::min(capacity - 1, text.size());
    std::memcpy(buffer, text.data(), n);
    buffer[n] = '\0';
  }
  return llvm::Error::success();
}

} // namespace attn::capi

using namespace attn::capi;

extern "C" {

const char *attn_last_error(void) { return lastError.c_str(); }

const char *attn_version(void) { return ATTN_C_VERSION; }

int attn_c_api_version(void) { return ATTN_C_API_VERSION; }

const char *attn_supported_archs(void) {
  // Built once (never freed: callers keep the pointer) from every value of
  // spec's Arch, as parseArch lists them.
  static const std::string archs = [] {
    std::string text;
    for (Arch arch : {Arch::SM80, Arch::SM89, Arch::SM90a})
      text += (text.empty() ? "" : ",") + std::string(toString(arch));
    return text;
  }();
  return archs.c_str();
}

attn_status attn_supported_head_sizes(int *sizes, int capacity, int *count) {
  return guard(__func__, [&]() -> llvm::Error {
    if (llvm::Error error = requireNonNull(count, "count"))
      return error;
    if (capacity < 0)
      return argError("capacity is " + std::to_string(capacity));
    if (!sizes && capacity > 0)
      return argError("sizes is null with a capacity of " +
                      std::to_string(capacity));
    std::vector<int> all = runtime::supportedHeadSizes();
    for (int i = 0; i < capacity && i < int(all.size()); ++i)
      sizes[i] = all[i];
    *count = int(all.size());
    return llvm::Error::success();
  });
}

attn_status attn_kv_cache_shape(int64_t num_pages, int page_size,
                                int num_kv_heads, int head_dim,
                                attn_layout layout, int64_t shape[5]) {
  return guard(__func__, [&]() -> llvm::Error {
    if (llvm::Error error = requireNonNull(shape, "shape"))
      return error;
    auto kvLayout = toLayout(layout, "layout");
    if (!kvLayout)
      return kvLayout.takeError();
    runtime::KVCacheConfig config;
    config.numPages = num_pages;
    config.pageSize = page_size;
    config.numKVHeads = num_kv_heads;
    config.headDim = head_dim;
    config.layout = *kvLayout;
    if (llvm::Error error = runtime::checkConfig(config))
      return error;
    std::array<int64_t, 5> dims = runtime::kvCacheShape(config);
    std::copy(dims.begin(), dims.end(), shape);
    return llvm::Error::success();
  });
}

} // extern "C"
