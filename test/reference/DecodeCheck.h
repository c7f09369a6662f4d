//===- DecodeCheck.h - run a decode kernel against the reference -*- C++
//-*-===//
//
// One end-to-end check of a loaded decode kernel: random q and paged K/V in
// their storage formats (pages shuffled), poisoned outputs, plan + run on the
// GPU, and the relative error against the fp64 reference. Shared by the GPU
// tests and the example host program.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEST_REFERENCE_DECODECHECK_H
#define ATTN_TEST_REFERENCE_DECODECHECK_H

#include "attn/runtime/kernels/Decode.h"
#include "attn/runtime/support/Error.h"
#include "test/reference/Modifiers.h"
#include "test/reference/Reference.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace attn::check {

/// Values in a storage format: the raw bits (what the GPU reads) and their
/// exact values (what the reference reads).
struct Quantized {
  std::vector<uint8_t> bytes;
  std::vector<double> values;
};

/// `n` values drawn from N(0, sigma) and rounded to `type`; FP8 values are
/// stored as value / scale, and `values` holds stored * scale.
Quantized randomValues(std::mt19937 &rng, ScalarType type, size_t n,
                       double sigma, double scale = 1.0);

/// What a pinned request's values are keyed by (batch-invariance tests):
/// a q row by its position in the sequence, a page or a key/value row by
/// its index, so that the same token has the same values in any batch, as
/// a decode or inside a prefill chunk.
enum class PinnedStream : uint32_t {
  QRow,
  KPage,
  VPage,
  KRow,
  VRow,
  QRopeRow, ///< MLA: q_rope by position (q_nope is QRow, the latent KRow)
  KRopeRow,
};

/// `n` N(0, 1) values in `type` (FP8: stored as value / scale), drawn from
/// (seed, stream, index) alone.
Quantized pinnedValues(uint32_t seed, PinnedStream stream, int64_t index,
                       ScalarType type, size_t n, double scale = 1.0);

/// Overwrites elements [first, first + n) of (`bytes`, `values`), stored
/// in `type`, with pinnedValues(seed, stream, index, type, n).
void overwritePinned(std::vector<uint8_t> &bytes, std::vector<double> &values,
                     ScalarType type, int64_t first, int64_t n, uint32_t seed,
                     PinnedStream stream, int64_t index, double scale = 1.0);

/// Decodes every element of `type` in raw bytes.
std::vector<double> decodeAll(ScalarType type,
                              const std::vector<uint8_t> &bytes);

/// A device buffer holding a copy of `bytes`.
llvm::Expected<runtime::DeviceBuffer> upload(const void *bytes, size_t size);
template <class T>
llvm::Expected<runtime::DeviceBuffer> upload(const std::vector<T> &data) {
  return upload(data.data(), data.size() * sizeof(T));
}

/// A device buffer of `bytes` filled with 0xFF: NaN in every float format,
/// so an element a kernel forgot to write fails the comparison.
llvm::Expected<runtime::DeviceBuffer> poisoned(size_t bytes);

/// The buffer's contents, after the device has finished its work.
llvm::Expected<std::vector<uint8_t>>
download(const runtime::DeviceBuffer &buffer);

/// Captures one `kernel.run(plan, args, stream)` in a CUDA graph and replays
/// it `replays` times, filling each of `poison` with 0xFF (NaN) before every
/// replay, so that the last replay alone must have written the outputs.
/// Works for any kernel class with decode's run() signature.
template <class Kernel, class Plan, class Args>
llvm::Error replayInGraph(const Kernel &kernel, const Plan &plan,
                          const Args &args, CUstream stream,
                          llvm::ArrayRef<const runtime::DeviceBuffer *> poison,
                          int replays) {
  ATTN_CU_CHECK(cuStreamSynchronize(stream));
  CUgraph graph;
  ATTN_CU_CHECK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  llvm::Error runErr = kernel.run(plan, args, stream);
  ATTN_CU_CHECK(cuStreamEndCapture(stream, &graph));
  if (runErr)
    return runErr;
  CUgraphExec exec;
  ATTN_CU_CHECK(cuGraphInstantiate(&exec, graph, 0));
  for (int r = 0; r < replays; ++r) {
    for (const runtime::DeviceBuffer *buffer : poison)
      if (buffer->size())
        ATTN_CU_CHECK(cuMemsetD8(buffer->get(), 0xFF, buffer->size()));
    ATTN_CU_CHECK(cuCtxSynchronize());
    ATTN_CU_CHECK(cuGraphLaunch(exec, stream));
    ATTN_CU_CHECK(cuStreamSynchronize(stream));
  }
  ATTN_CU_CHECK(cuGraphExecDestroy(exec));
  ATTN_CU_CHECK(cuGraphDestroy(graph));
  return llvm::Error::success();
}

/// The score fields of a reference problem (Decode- or PrefillProblem) from
/// a variant: its scale (default 1/sqrt(headDim)), mask and modifiers, with
/// ALiBi slopes as ALiBi defines them for a power-of-two head count.
template <class Problem, class Variant>
void setScoreMods(Problem &prob, const Variant &v) {
  prob.scale = v.scale ? *v.scale : 1.0 / std::sqrt(double(v.headDim));
  prob.causal = v.causal;
  prob.windowLeft = v.windowLeft;
  if (v.softcap)
    prob.softcap = *v.softcap;
  if (v.alibi)
    for (int h = 0; h < v.numQHeads; ++h)
      prob.alibiSlopes.push_back(std::pow(2.0, -8.0 * (h + 1) / v.numQHeads));
  // Sinks around the scores' range, and one dominant sink in four heads
  // (the output shrinks toward 0; no overflow).
  if (v.sinks)
    for (int h = 0; h < v.numQHeads; ++h)
      prob.sinks.push_back(h % 4 == 3 ? 8.0 : -1.0 + 0.75 * (h % 4));
}

/// Uploads `m`'s aux tables into `buffers` and points `tables` at them.
llvm::Error uploadAux(const TestModifiers &m,
                      std::vector<runtime::DeviceBuffer> &buffers,
                      AuxTable *tables);

/// A random paged KV cache holding `seqLens` tokens per request on
/// shuffled pages (plus a few unused ones), with its exact values.
struct RandomPagedCache {
  int totalPages = 0;
  int pageTableStride = 0;             ///< pages per page-table row
  int64_t pageStride = 0;              ///< elements between pages
  int64_t pageElems = 0;               ///< elements of K (or V) in one page
  std::vector<int32_t> pageTables;     ///< [batch, pageTableStride]
  std::vector<float> kScales, vScales; ///< FP8: [1] or [numKVHeads]
  /// Cache bytes as the GPU reads them. Interleaved: V in the second half
  /// of each page of kBytes, vBytes unused by the kernel.
  std::vector<uint8_t> kBytes, vBytes;
  /// Dequantized values (stored times scale), indexed like the cache's K.
  std::vector<double> k, v;
};

struct PagedCacheShape {
  ScalarType kvType = ScalarType::BF16;
  int numKVHeads = 8;
  int headDim = 128;
  int pageSize = 16;
  KVLayout layout = KVLayout::NHD;
  bool perHeadKVScale = false;
  double kvScale = 1.0;       ///< FP8 scale (KV head h: kvScale * (1 + h/8))
  bool interleavedKV = false; ///< K and V of a page side by side (FlashInfer)
};

RandomPagedCache randomPagedCache(std::mt19937 &rng,
                                  const PagedCacheShape &shape,
                                  const std::vector<int> &seqLens);

/// The first seqLens[b] tokens of each request gathered from `cache` into
/// dense [sum(seqLens), numKVHeads, headDim] K and V (for the ragged
/// reference).
void gatherPages(const RandomPagedCache &cache, const PagedCacheShape &shape,
                 const std::vector<int> &seqLens, std::vector<double> &k,
                 std::vector<double> &v);

/// The cache's device buffers and a view of them for launch arguments.
struct DeviceCache {
  runtime::DeviceBuffer k, v, pageTables, kScales, vScales;
  runtime::PagedKVView view;
};
llvm::Expected<DeviceCache> uploadCache(const RandomPagedCache &cache,
                                        const PagedCacheShape &shape);

/// How to draw one decode problem.
struct DecodeCheckOptions {
  std::vector<int> seqLens; ///< one request each
  /// The variant's score_mod / mask_mod (their text is the variant's), for
  /// the reference and the aux tables; null: none.
  const TestModifiers *modifiers = nullptr;
  double kvScale = 1.0;       ///< FP8 scale (KV head h: kvScale * (1 + h/8))
  bool interleavedKV = false; ///< K and V of a page side by side (FlashInfer)
  uint32_t seed = 1;
  /// 0: one direct run. N > 0: plan for graphs, capture run() in a CUDA
  /// graph and replay it N times, re-poisoning the output before each
  /// replay; the last replay is checked.
  int graphReplays = 0;
  /// >= 0: that request's q rows and its pages of K and V hold values drawn
  /// from `pinnedSeed` alone, the same whatever the rest of the batch is
  /// (16-bit caches: batch-invariance tests compare its output bytes).
  int pinnedRequest = -1;
  uint32_t pinnedSeed = 0;
};

struct DecodeCheckResult {
  double outError = 0;           ///< relative L2 error of the output
  std::vector<uint8_t> outBytes; ///< the output as the kernel wrote it
  double lseError = 0;           ///< worst absolute LSE error (0 without LSE)
  int chunkTokens = 0;           ///< split-KV chunk the plan chose
};

/// Runs `kernel` (compiled for `variant`) on one random problem.
llvm::Expected<DecodeCheckResult>
checkDecode(const runtime::DecodeKernel &kernel, const DecodeVariant &variant,
            const DecodeCheckOptions &options);

} // namespace attn::check

#endif // ATTN_TEST_REFERENCE_DECODECHECK_H
