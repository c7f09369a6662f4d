//===- ModifiersGpuTest.cpp - score_mod / mask_mod against the reference --===//
//
// Each programmable modifier of test/reference/Modifiers.h (soft-cap, ALiBi
// over an aux table of slopes, causal and sliding window as regions,
// chunked local attention, bidirectional spans in causal attention,
// document masking over an aux table of ids, T5
// relative-position bias from an aux bucket table, ALiBi costly enough to
// run out of line) JIT-compiled
// into decode, the mma.sync prefill (head dim 96 takes it on every arch),
// the default prefill at head dim 128 (wgmma on sm_90a), paged prefill and
// mixed batches,
// run on random data and compared with the fp64 reference evaluating the
// same modifier in C++. Tolerances as in DecodeGpuTest / PrefillGpuTest.
//
// Then every op a region may hold, on edge values, compiled by NVRTC as the
// kernels compile it and compared with MLIR's folder: the device half of
// test/unit/compiler/RegionOpsTest.cpp.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime/cache/KernelCache.h"
#include "compiler/Jit/Jit.h"
#include "test/gpu/GpuTestUtil.h"
#include "test/reference/Modifiers.h"
#include "test/reference/PrefillCheck.h"
#include "test/unit/compiler/RegionOpsCases.h"

#include <functional>

using namespace attn;
using namespace attn::test;

namespace {

/// Builds a modifier for the keys of each request (document ids need them).
using MakeModifiers = std::function<check::TestModifiers(
    std::mt19937 &, const std::vector<int> &)>;

struct ModifierCase {
  std::string name;
  std::optional<DecodeVariant> decode;
  std::optional<PrefillVariant> prefill;
  std::vector<int> qLens;  ///< prefill: query rows per request
  std::vector<int> kvLens; ///< keys per request (decode: seq_lens)
  MakeModifiers make;
  /// With `prefill` paged: the first numPrefills requests are prefills of a
  /// mixed batch and the rest one-row decodes (MixedBatchAttention).
  std::optional<int> numPrefills;
};

std::vector<std::pair<std::string, MakeModifiers>> modifierKinds() {
  return {
      {"softcap_region",
       [](std::mt19937 &, const std::vector<int> &) {
         return check::softcapRegion(1.5);
       }},
      {"softcap_region_arcp",
       [](std::mt19937 &, const std::vector<int> &) {
         return check::softcapRegion(1.5, true);
       }},
      {"chunked_local",
       [](std::mt19937 &, const std::vector<int> &) {
         return check::chunkedLocal(256);
       }},
      {"document_mask",
       [](std::mt19937 &rng, const std::vector<int> &kvLens) {
         return check::documentMask(rng, kvLens);
       }},
      {"t5_bias",
       [](std::mt19937 &rng, const std::vector<int> &) {
         return check::t5Bias(rng, 16);
       }},
      {"alibi_region",
       [](std::mt19937 &, const std::vector<int> &) {
         return check::alibiRegion(16);
       }},
      {"out_of_line_region",
       [](std::mt19937 &, const std::vector<int> &) {
         return check::outOfLineRegion(16);
       }},
      {"causal_region",
       [](std::mt19937 &, const std::vector<int> &) {
         return check::causalRegion();
       }},
      {"bidirectional_spans",
       [](std::mt19937 &rng, const std::vector<int> &kvLens) {
         return check::bidirectionalSpans(rng, kvLens);
       }},
      {"window_region",
       [](std::mt19937 &, const std::vector<int> &) {
         return check::windowRegion(200);
       }},
  };
}

template <class Variant>
Variant withModifiers(Variant v, const check::TestModifiers &m) {
  v.scoreMod = m.scoreMod;
  v.maskMod = m.maskMod;
  if (m.replacesCausal)
    v.causal = false;
  return v;
}

std::vector<ModifierCase> cases() {
  using S = ScalarType;
  std::vector<ModifierCase> c;
  for (auto &[kind, make] : modifierKinds()) {
    DecodeVariant d;
    d.numQHeads = 16;
    d.numKVHeads = 4;
    c.push_back(
        {"decode_bf16_" + kind, d, std::nullopt, {}, {3000, 17, 700}, make});
    // Two q heads per KV head: the CUDA-core path at two rows.
    DecodeVariant pair = d;
    pair.numKVHeads = 8;
    c.push_back(
        {"decode_gqa2_" + kind, pair, std::nullopt, {}, {2500, 9}, make});
    d.kvType = S::F8E4M3;
    d.queryLen = 3;
    c.push_back(
        {"decode_e4m3_ql3_" + kind, d, std::nullopt, {}, {1500, 40}, make});
    for (int headDim : {96, 128}) {
      PrefillVariant p;
      p.numQHeads = 16;
      p.numKVHeads = 4;
      p.headDim = headDim;
      c.push_back({"prefill_d" + std::to_string(headDim) + "_" + kind,
                   std::nullopt,
                   p,
                   {300, 1000, 17},
                   {300, 1000, 17},
                   make});
    }
    PrefillVariant p;
    p.numQHeads = 16;
    p.numKVHeads = 4;
    p.paged = PagedKVFormat{S::BF16, 16, KVLayout::NHD, false};
    c.push_back({"paged_prefill_" + kind,
                 std::nullopt,
                 p,
                 {100, 500},
                 {1200, 500},
                 make});
    // Per-request aux rows must follow the batch index into the decodes.
    c.push_back({"mixed_" + kind,
                 std::nullopt,
                 p,
                 {100, 300, 1, 1, 1},
                 {1200, 300, 3000, 17, 700},
                 make,
                 /*numPrefills=*/2});
  }
  // One long request split over many CTAs: its chunks spread over the keys
  // the mask leaves (decode.cuh), alone and under a sliding window.
  DecodeVariant d;
  d.numQHeads = 32;
  d.numKVHeads = 8;
  auto chunked = [](std::mt19937 &, const std::vector<int> &) {
    return check::chunkedLocal(4096);
  };
  c.push_back(
      {"decode_split_chunked_local", d, std::nullopt, {}, {20000}, chunked});
  d.windowLeft = 3000;
  c.push_back({"decode_split_window_chunked_local",
               d,
               std::nullopt,
               {},
               {20000, 4100},
               chunked});
  return c;
}

void PrintTo(const ModifierCase &c, std::ostream *os) { *os << c.name; }

class ModifiersGpuTest : public ::testing::TestWithParam<ModifierCase> {};

TEST_P(ModifiersGpuTest, MatchesReference) {
  ATTN_REQUIRE_GPU();
  const ModifierCase &tc = GetParam();
  std::mt19937 rng(uint32_t(std::hash<std::string>()(tc.name)));
  const check::TestModifiers m = tc.make(rng, tc.kvLens);
  if (tc.decode) {
    DecodeVariant v = withModifiers(*tc.decode, m);
    ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().decode(v));
    ASSERT_TRUE(kernel->spec().hasModifiers());
    check::DecodeCheckOptions options;
    options.seqLens = tc.kvLens;
    options.kvScale = 0.1;
    options.modifiers = &m;
    options.seed = rng();
    ATTN_ASSIGN_OR_FAIL(result, check::checkDecode(*kernel, v, options));
    EXPECT_LT(result.outError, v.qType == ScalarType::BF16 ? 1e-2 : 4e-3)
        << tc.name;
    return;
  }
  PrefillVariant v = withModifiers(*tc.prefill, m);
  if (tc.numPrefills) {
    ATTN_ASSIGN_OR_FAIL(mixed, Jit::global().mixedBatch(v));
    check::PrefillCheckOptions options;
    options.qLens = tc.qLens;
    options.kvLens = tc.kvLens;
    options.modifiers = &m;
    options.seed = rng();
    ATTN_ASSIGN_OR_FAIL(
        result, check::checkMixedBatch(mixed, v, options, *tc.numPrefills));
    EXPECT_LT(result.outError, 1e-2) << tc.name;
    return;
  }
  ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().prefill(v));
  ASSERT_TRUE(kernel->spec().hasModifiers());
  check::PrefillCheckOptions options;
  options.qLens = tc.qLens;
  options.kvLens = tc.kvLens;
  options.modifiers = &m;
  options.seed = rng();
  ATTN_ASSIGN_OR_FAIL(result, check::checkPrefill(*kernel, v, options));
  EXPECT_LT(result.outError, v.qType == ScalarType::BF16 ? 1e-2 : 4e-3)
      << tc.name << " (" << toString(kernel->spec().prefillSchedule.mma) << ")";
}

INSTANTIATE_TEST_SUITE_P(Matrix, ModifiersGpuTest, ::testing::ValuesIn(cases()),
                         [](const auto &info) { return info.param.name; });

TEST(RegionOpsGpuTest, EmittedCodeMatchesMLIRFolderOnTheDevice) {
  ATTN_REQUIRE_GPU();
  ATTN_ASSIGN_OR_FAIL(arch, runtime::currentDeviceArch());
  std::vector<regiontest::OpCase> cases = regiontest::regionOpCases();
  std::string error;
  std::optional<regiontest::Harness> harness =
      regiontest::buildHarness(cases, regiontest::HarnessTarget::Device, error);
  ASSERT_TRUE(harness) << error;
  runtime::KernelCache::Options options;
  options.useDisk = false;
  runtime::KernelCache cache(options);
  ATTN_ASSIGN_OR_FAIL(library,
                      cache.getLibrary({"region_ops", harness->source, arch}));
  ATTN_ASSIGN_OR_FAIL(kernel, library->getKernel("evaluateRegionOps"));

  const std::vector<regiontest::Evaluation> &evaluations = harness->evaluations;
  int count = int(evaluations.size());
  std::vector<int32_t> words, caseOf;
  for (const regiontest::Evaluation &e : evaluations) {
    words.insert(words.end(), e.words,
                 e.words + regiontest::kWordsPerEvaluation);
    caseOf.push_back(e.caseIndex);
  }
  ATTN_ASSIGN_OR_FAIL(wordsBuffer,
                      runtime::DeviceBuffer::allocate(words.size() * 4));
  ATTN_ASSIGN_OR_FAIL(casesBuffer,
                      runtime::DeviceBuffer::allocate(caseOf.size() * 4));
  ATTN_ASSIGN_OR_FAIL(resultsBuffer,
                      runtime::DeviceBuffer::allocate(size_t(count) * 4));
  ATTN_ASSERT_OK(wordsBuffer.copyFromHost(words.data(), words.size() * 4));
  ATTN_ASSERT_OK(casesBuffer.copyFromHost(caseOf.data(), caseOf.size() * 4));
  CUdeviceptr wordsPtr = wordsBuffer.get(), casesPtr = casesBuffer.get(),
              resultsPtr = resultsBuffer.get();
  void *params[] = {&wordsPtr, &casesPtr, &resultsPtr, &count};
  constexpr unsigned kThreads = 128;
  ASSERT_EQ(cuLaunchKernel(reinterpret_cast<CUfunction>(kernel),
                           (count + kThreads - 1) / kThreads, 1, 1, kThreads, 1,
                           1, 0, nullptr, params, nullptr),
            CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  std::vector<uint32_t> bits(count);
  ATTN_ASSERT_OK(resultsBuffer.copyToHost(bits.data(), bits.size() * 4));
  std::vector<uint64_t> results(bits.begin(), bits.end());

  regiontest::Comparison comparison =
      regiontest::compareWithFolder(cases, *harness, results);
  for (const std::string &mismatch : comparison.mismatches)
    ADD_FAILURE() << mismatch;
  EXPECT_EQ(comparison.unchecked, 0u);
  EXPECT_GT(comparison.folded, 25000u);
  std::printf("%zu device results compared with MLIR's folder, %zu with the "
              "documented value\n",
              comparison.folded, comparison.documented);
}

} // namespace
