//===- PrefillCheck.h - a prefill kernel against the reference --*- C++ -*-===//
//
// One end-to-end check of a loaded ragged-prefill kernel: random q/k/v in the
// storage dtype, poisoned out and LSE, plan + run on the GPU (optionally as
// replays of a captured CUDA graph), and the errors against the fp64
// reference. Shared by the GPU tests; the data helpers are DecodeCheck's.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_TEST_REFERENCE_PREFILLCHECK_H
#define ATTN_TEST_REFERENCE_PREFILLCHECK_H

#include "attn/runtime/kernels/MixedBatch.h"
#include "attn/runtime/kernels/Prefill.h"
#include "test/reference/DecodeCheck.h"
#include "test/reference/Reference.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace attn::check {

/// How to draw one prefill problem.
struct PrefillCheckOptions {
  std::vector<int> qLens; ///< query rows of each request
  /// Keys of each request; empty: qLens (self). Paged variants: the
  /// request's cached tokens, its new rows (the last qLens[b]) included.
  std::vector<int> kvLens;
  /// The variant's score_mod / mask_mod, as DecodeCheckOptions::modifiers.
  const TestModifiers *modifiers = nullptr;
  double kvScale = 1.0; ///< paged FP8: as DecodeCheckOptions
  /// Standard deviation of q's entries: above 1 the logits spread, and a
  /// few large ones (needles) dominate many small ones.
  double qStd = 1.0;
  bool interleavedKV = false; ///< paged: K and V of a page side by side
  uint32_t seed = 1;
  /// Elements added to every token stride of q, (ragged) k, v and out (a
  /// multiple of 8), as when q/k/v are slices of a fused QKV projection; 0:
  /// dense.
  int extraTokenStride = 0;
  /// 0: one direct run. N > 0: plan for graphs, capture run() in a CUDA
  /// graph and replay it N times, re-poisoning out and LSE before each
  /// replay; the last replay is checked.
  int graphReplays = 0;
  /// Plan into this workspace (it must fit the batch) instead of a fresh
  /// one sized for it, to check that plans replace each other.
  runtime::PrefillWorkspace *workspace = nullptr;
  /// The fresh workspace lets plans split keys (sm_90a kernels).
  bool splitKV = true;
  /// >= 0: that request's q rows and its keys and values (ragged rows, or
  /// its pages) hold values drawn from `pinnedSeed` alone, the same whatever
  /// the rest of the batch is (16-bit q/k/v: batch-invariance tests).
  int pinnedRequest = -1;
  uint32_t pinnedSeed = 0;
};

struct PrefillCheckResult {
  double outError = 0;           ///< relative L2 error of the output
  std::vector<uint8_t> outBytes; ///< the output as the kernel wrote it
  std::vector<uint8_t> lseBytes; ///< the LSE as it wrote it (writeLse)
  /// Worst absolute LSE error (0 without LSE). A row that sees no key must
  /// be -inf, as in the reference; anything else there counts as inf.
  double lseError = 0;
  int gridX = 0;      ///< CTAs the plan launched (diagnostics)
  int splitItems = 0; ///< the plan's split items (PrefillPlan::splitItems)
};

/// The cumulative offsets {0, l0, l0 + l1, ...} of `lens`.
std::vector<int32_t> cumulative(const std::vector<int> &lens);

/// Runs `kernel` (compiled for `variant`, ragged or paged) on one random
/// problem. Paged problems are checked against the ragged reference on the
/// keys and values gathered from their pages.
llvm::Expected<PrefillCheckResult>
checkPrefill(const runtime::PrefillKernel &kernel,
             const PrefillVariant &variant, const PrefillCheckOptions &options);

/// Runs a mixed batch through `mixed` (whose prefill kernel is compiled for
/// the paged `variant`): the first `numPrefills` requests are prefills, the
/// rest decodes of one new row (qLens[b] == 1) each.
llvm::Expected<PrefillCheckResult>
checkMixedBatch(const runtime::MixedBatchAttention &mixed,
                const PrefillVariant &variant,
                const PrefillCheckOptions &options, int numPrefills);

} // namespace attn::check

#endif // ATTN_TEST_REFERENCE_PREFILLCHECK_H
