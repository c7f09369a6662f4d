//===- AppendKVGpuTest.cpp - reshape-and-cache against the reference ------===//
//
// Appends random rows through a random slot mapping (with skipped -1 slots)
// into a poisoned cache and checks every written element bit-exactly: a copy
// for 16-bit caches, round-to-nearest-even of x * (1/scale) with saturation
// for FP8 ones. Untouched slots must keep their poison.
//
//===----------------------------------------------------------------------===//
#include "compiler/Jit/Jit.h"
#include "test/gpu/GpuTestUtil.h"

#include <algorithm>
#include <cstring>
#include <numeric>

using namespace attn;
using namespace attn::test;

namespace {

struct AppendCase {
  std::string name;
  AppendKVVariant variant;
};

std::vector<AppendCase> appendCases() {
  using S = ScalarType;
  auto make = [](S in, S kv, int heads, int d, int page, KVLayout layout,
                 bool perHead) {
    AppendKVVariant v;
    v.inType = in;
    v.kvType = kv;
    v.numKVHeads = heads;
    v.headDim = d;
    v.pageSize = page;
    v.layout = layout;
    v.perHeadKVScale = perHead;
    return v;
  };
  return {
      {"bf16_nhd_d128_p16",
       make(S::BF16, S::BF16, 8, 128, 16, KVLayout::NHD, false)},
      {"f16_hnd_d64_p1", make(S::F16, S::F16, 4, 64, 1, KVLayout::HND, false)},
      {"bf16_to_e4m3_nhd",
       make(S::BF16, S::F8E4M3, 8, 128, 16, KVLayout::NHD, false)},
      {"f16_to_e4m3_hnd_headscale",
       make(S::F16, S::F8E4M3, 4, 256, 32, KVLayout::HND, true)},
      {"bf16_to_e5m2_d80_p8",
       make(S::BF16, S::F8E5M2, 2, 80, 8, KVLayout::NHD, false)},
  };
}

void PrintTo(const AppendCase &c, std::ostream *os) { *os << c.name; }

class AppendKVGpuTest : public ::testing::TestWithParam<AppendCase> {};

TEST_P(AppendKVGpuTest, WritesEverySlotExactly) {
  ATTN_REQUIRE_GPU();
  const AppendKVVariant &v = GetParam().variant;
  ATTN_ASSIGN_OR_FAIL(kernel, Jit::global().appendKV(v));
  std::mt19937 rng(7);
  const int tokens = 300;
  const int numPages = tokens / v.pageSize + 16; // more slots than tokens
  const int64_t pageElems = int64_t(v.pageSize) * v.numKVHeads * v.headDim;
  const size_t rowElems = size_t(v.numKVHeads) * v.headDim;
  const bool fp8 = sizeOf(v.kvType) == 1;

  // Distinct random slots; every 7th token is padding (-1).
  std::vector<int64_t> slots(int64_t(numPages) * v.pageSize);
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  slots.resize(tokens);
  for (int t = 0; t < tokens; t += 7)
    slots[t] = -1;

  const int numScales = v.perHeadKVScale ? v.numKVHeads : 1;
  std::vector<float> kScales(numScales), vScales(numScales);
  for (int h = 0; h < numScales; ++h) {
    kScales[h] = 0.01f * (1 + h);
    vScales[h] = 0.03f * (1 + h);
  }
  // Rows large enough that some FP8 values saturate.
  Quantized k = randomValues(rng, v.inType, tokens * rowElems, 2.0);
  Quantized vals = randomValues(rng, v.inType, tokens * rowElems, 2.0);

  ATTN_ASSIGN_OR_FAIL(dk, upload(k.bytes));
  ATTN_ASSIGN_OR_FAIL(dv, upload(vals.bytes));
  ATTN_ASSIGN_OR_FAIL(dSlots, upload(slots));
  ATTN_ASSIGN_OR_FAIL(dKScale, upload(kScales));
  ATTN_ASSIGN_OR_FAIL(dVScale, upload(vScales));
  const size_t cacheBytes = numPages * pageElems * sizeOf(v.kvType);
  ATTN_ASSIGN_OR_FAIL(kCache, poisoned(cacheBytes));
  ATTN_ASSIGN_OR_FAIL(vCache, poisoned(cacheBytes));

  runtime::AppendKVArgs args;
  args.k = dk.ptr<void>();
  args.v = dv.ptr<void>();
  args.inType = v.inType;
  args.numTokens = tokens;
  args.numKVHeads = v.numKVHeads;
  args.headDim = v.headDim;
  args.cache = {kCache.ptr<void>(), vCache.ptr<void>(), v.kvType,
                v.numKVHeads,       v.headDim,          v.pageSize,
                v.layout,           numPages,           0};
  args.slotMapping = dSlots.ptr<int64_t>();
  if (fp8) {
    args.kScale = dKScale.ptr<float>();
    args.vScale = dVScale.ptr<float>();
    args.numKVScales = numScales;
  }
  ATTN_ASSERT_OK(kernel->run(args, nullptr));
  ATTN_ASSIGN_OR_FAIL(kOut, download(kCache));
  ATTN_ASSIGN_OR_FAIL(vOut, download(vCache));

  const int bytesPer = sizeOf(v.kvType);
  std::vector<bool> written(numPages * pageElems, false);
  size_t mismatches = 0;
  for (int t = 0; t < tokens; ++t) {
    if (slots[t] < 0)
      continue;
    int64_t page = slots[t] / v.pageSize;
    int off = int(slots[t] % v.pageSize);
    for (int h = 0; h < v.numKVHeads; ++h)
      for (int d = 0; d < v.headDim; ++d) {
        int64_t at = ref::kvOffset(v.layout, page, off, h, v.numKVHeads,
                                   v.pageSize, v.headDim, pageElems) +
                     d;
        written[at] = true;
        size_t src = t * rowElems + h * v.headDim + d;
        for (int which = 0; which < 2; ++which) {
          const Quantized &in = which ? vals : k;
          const std::vector<uint8_t> &out = which ? vOut : kOut;
          uint32_t want;
          if (fp8) {
            // The kernel multiplies by the f32 reciprocal of the scale.
            float inv =
                1.f / (which ? vScales : kScales)[v.perHeadKVScale ? h : 0];
            want = ref::encode(v.kvType, double(float(in.values[src]) * inv));
          } else {
            want = 0;
            std::memcpy(&want, &in.bytes[src * bytesPer], bytesPer);
          }
          uint32_t got = 0;
          std::memcpy(&got, &out[at * bytesPer], bytesPer);
          mismatches += got != want;
        }
      }
  }
  EXPECT_EQ(mismatches, 0u) << GetParam().name;
  // Slots nobody owns keep the 0xFF poison.
  size_t clobbered = 0;
  for (int64_t i = 0; i < int64_t(written.size()); ++i)
    if (!written[i])
      for (int b = 0; b < bytesPer; ++b)
        clobbered +=
            kOut[i * bytesPer + b] != 0xFF || vOut[i * bytesPer + b] != 0xFF;
  EXPECT_EQ(clobbered, 0u) << GetParam().name;
}

INSTANTIATE_TEST_SUITE_P(Matrix, AppendKVGpuTest,
                         ::testing::ValuesIn(appendCases()),
                         [](const auto &info) { return info.param.name; });

} // namespace
