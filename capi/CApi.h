//===- CApi.h - what the C ABI's files share --------------------*- C++ -*-===//
//
// Private to capi/: the objects behind attn_c.h's opaque handles (reached
// only through Handles.h's registry), the error boundary (status + this
// thread's message, every C++ exception caught) and the conversions of the
// C structs to the C++ API's. Both libraries (libattn_c.so,
// libattn_runtime_c.so) compile the same files; only the JIT entry points
// differ (CompilerJit.cpp, NoCompiler.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_CAPI_CAPI_H
#define ATTN_CAPI_CAPI_H

#include "attn_c.h"

#include "capi/Handles.h"

#include "attn/runtime/cache/AotLibrary.h"
#include "attn/runtime/cache/KernelCache.h"
#include "attn/runtime/kernels/Cascade.h"
#include "attn/runtime/kernels/MixedBatch.h"
#include "attn/runtime/serving/AttentionMetadata.h"
#include "attn/runtime/serving/Backend.h"
#include "attn/runtime/serving/CacheOps.h"
#include "spec/Variant.h"

#include "llvm/Support/Error.h"

#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>

namespace attn::capi {

//===--- Errors -----------------------------------------------------------===//

/// An error the C layer reports with a status of its own choosing.
class StatusError : public llvm::ErrorInfo<StatusError> {
public:
  static char ID;
  StatusError(attn_status status, std::string message)
      : status(status), text(std::move(message)) {}
  void log(llvm::raw_ostream &os) const override { os << text; }
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }
  attn_status status;
  std::string text;
};

/// A StatusError (ATTN_ERROR_INVALID_ARGUMENT unless given).
llvm::Error argError(const llvm::Twine &message,
                     attn_status status = ATTN_ERROR_INVALID_ARGUMENT);

/// Records `message` as this thread's last error (prefixed by `function`)
/// and returns `status`.
attn_status fail(const char *function, attn_status status,
                 const std::string &message);

/// Records `error` for `function`: StatusError keeps its status, an
/// NvrtcError is ATTN_ERROR_COMPILE, and the runtime's string errors are
/// sorted by what they name (a failed driver call, a missing kernel of an
/// AOT library, NVRTC); anything else is `fallback`.
attn_status fromError(const char *function, llvm::Error error,
                      attn_status fallback = ATTN_ERROR_INVALID_ARGUMENT);

/// Clears this thread's last error.
void clearError();

/// The boundary every status-returning entry point goes through: clears the
/// last error, runs `body` and turns its llvm::Error into a status; a C++
/// exception (std::bad_alloc, ...) never crosses into C.
template <class Body>
attn_status guard(const char *function, Body &&body,
                  attn_status fallback = ATTN_ERROR_INVALID_ARGUMENT) noexcept {
  try {
    clearError();
    llvm::Error error = body();
    if (!error)
      return ATTN_OK;
    return fromError(function, std::move(error), fallback);
  } catch (const std::bad_alloc &) {
    return fail(function, ATTN_ERROR_INTERNAL, "out of host memory");
  } catch (const std::exception &e) {
    return fail(function, ATTN_ERROR_INTERNAL,
                std::string("unexpected C++ exception: ") + e.what());
  } catch (...) {
    return fail(function, ATTN_ERROR_INTERNAL, "unexpected C++ exception");
  }
}

/// An error unless `p` is non-null; names it ("args->q is null").
llvm::Error requireNonNull(const void *p, const char *name);

/// The most bytes one buffer can hold, device or pinned host: 2^50, far
/// above the memory of any GPU or host. A count whose bytes exceed it (or
/// overflow int64) is an argument error, not a failed allocation.
constexpr int64_t kMaxBufferBytes = int64_t(1) << 50;

/// An error unless `count` >= 0 items of `itemBytes` (> 0) bytes fit
/// kMaxBufferBytes; it names `name` and what the items are.
llvm::Error checkBytes(int64_t count, int64_t itemBytes, const char *name,
                       const char *items);

/// An error unless `s` is non-null with struct_size >= `v1Size` (the size
/// of the struct in this API's first release), naming `name` and `type`.
llvm::Error checkStructSize(const void *s, uint32_t structSize, size_t v1Size,
                            const char *name, const char *type);
#define ATTN_CHECK_STRUCT(ptr, type)                                           \
  do {                                                                         \
    if (!(ptr))                                                                \
      return ::attn::capi::argError(#ptr " is null");                          \
    if (llvm::Error attnStructError = ::attn::capi::checkStructSize(           \
            (ptr), (ptr)->struct_size, sizeof(type), #ptr, #type))             \
      return std::move(attnStructError);                                       \
  } while (false)

//===--- Conversions ------------------------------------------------------===//

/// The int a C caller stored in an enum field or parameter. C enums hold
/// any int, but in C++ loading a value outside the enumerators' range as
/// the enum type is undefined: read the bytes instead, then range-check.
template <class Enum> int enumValue(const Enum &value) {
  static_assert(sizeof(Enum) == sizeof(int), "C enums are ints");
  int raw;
  std::memcpy(&raw, &value, sizeof raw);
  return raw;
}

/// Enum fields by reference, so that only enumValue reads them.
llvm::Expected<ScalarType> toScalarType(const attn_dtype &dtype,
                                        const char *name);
llvm::Expected<KVLayout> toLayout(const attn_layout &layout, const char *name);
attn_dtype toC(ScalarType type);
attn_layout toC(KVLayout layout);
attn_kind toC(AttentionKind kind);

/// The C variants as the C++ API's (every field; the knobs' unset values
/// become nullopt: window_left < 0, softcap 0, scale 0).
llvm::Expected<DecodeVariant> toVariant(const attn_decode_variant *v);
llvm::Expected<PrefillVariant> toVariant(const attn_prefill_variant *v);
llvm::Expected<AppendKVVariant> toVariant(const attn_append_kv_variant *v);
llvm::Expected<MergeStatesVariant>
toVariant(const attn_merge_states_variant *v);
llvm::Expected<MlaDecodeVariant> toVariant(const attn_mla_decode_variant *v);

/// A paged cache layer as the kernels take it; `name` prefixes errors.
llvm::Expected<runtime::PagedKVView> toView(const attn_paged_kv &cache,
                                            const char *name);
void setHeadTables(runtime::HeadTables &out, const attn_head_tables &tables);

/// Writes `text` into a caller's buffer as attn_c.h's key functions do.
llvm::Error writeString(const std::string &text, char *buffer, size_t capacity,
                        size_t *length);

//===--- Arch -------------------------------------------------------------===//

/// `name` as an Arch, or an error listing the supported ones.
llvm::Expected<Arch> parseArchArg(const char *name, const char *what);

} // namespace attn::capi

//===--- Handles ----------------------------------------------------------===//

namespace attn::capi {

/// Where kernels come from: the JIT (compiler inside) or an AOT library.
struct Context {
  /// The JIT, type-erased so that libattn_runtime_c.so needs no compiler
  /// symbol to destroy a context.
  std::shared_ptr<void> jit;
  /// A cache of the context's own (JIT cache_dir; AOT: the library's
  /// kernels for CacheOps), else null.
  std::unique_ptr<runtime::KernelCache> ownedCache;
  /// The cache CacheOps gets its kernels through.
  runtime::KernelCache *cache = nullptr;
  /// The JIT's fixed target; none: the current device's.
  std::optional<Arch> arch;
  std::shared_ptr<const runtime::AotLibrary> library;

  /// The kernel source of the context. AOT contexts bind the library to the
  /// current device's arch on first use, so one opens without a GPU.
  llvm::Expected<const runtime::KernelSource *> kernels();
  /// The arch kernels are loaded for.
  llvm::Expected<Arch> targetArch();

  std::mutex mutex;
  std::optional<runtime::KernelSource> source;
};

struct Compiled {
  std::string name; ///< the kernel symbol
  std::string source;
  std::shared_ptr<const std::string> cubin;
};

struct Decode {
  std::shared_ptr<const runtime::DecodeKernel> kernel;
  runtime::DecodeWorkspace workspace;
  std::optional<runtime::DecodePlan> plan;
};

struct Prefill {
  std::shared_ptr<const runtime::PrefillKernel> kernel;
  runtime::PrefillWorkspace workspace;
  std::optional<runtime::PrefillPlan> plan;
};

struct MixedBatch {
  runtime::MixedBatchAttention attention;
  runtime::MixedBatchWorkspace workspace;
  std::optional<runtime::MixedBatchPlan> plan;
};

struct MergeStates {
  std::shared_ptr<const runtime::MergeStatesKernel> kernel;
  MergeStatesVariant variant;
};

struct MlaDecode {
  std::shared_ptr<const runtime::MlaDecodeKernel> kernel;
  runtime::DecodeWorkspace workspace;
  std::optional<runtime::DecodePlan> plan;
};

struct Cascade {
  DecodeVariant variant;
  runtime::CascadeAttention attention;
  runtime::CascadeWorkspace workspace;
  int maxLevels = 0;
  std::optional<runtime::CascadePlan> plan;
};

struct AppendKV {
  std::shared_ptr<const runtime::AppendKVKernel> kernel;
  AppendKVVariant variant;
};

struct CacheOps {
  runtime::CacheOps ops;
};

struct MetadataBuilder {
  runtime::AttentionMetadataBuilder builder;
  /// The last build: the host arrays attn_metadata points into.
  std::optional<runtime::AttentionMetadata> metadata;
};

/// Every opaque handle of attn_c.h and the object behind it.
ATTN_C_HANDLE(attn_context, Context)
ATTN_C_HANDLE(attn_compiled, Compiled)
ATTN_C_HANDLE(attn_decode, Decode)
ATTN_C_HANDLE(attn_prefill, Prefill)
ATTN_C_HANDLE(attn_mixed_batch, MixedBatch)
ATTN_C_HANDLE(attn_merge_states, MergeStates)
ATTN_C_HANDLE(attn_mla_decode, MlaDecode)
ATTN_C_HANDLE(attn_cascade, Cascade)
ATTN_C_HANDLE(attn_append_kv, AppendKV)
ATTN_C_HANDLE(attn_cache_ops, CacheOps)
ATTN_C_HANDLE(attn_metadata_builder, MetadataBuilder)

} // namespace attn::capi

#endif // ATTN_CAPI_CAPI_H
