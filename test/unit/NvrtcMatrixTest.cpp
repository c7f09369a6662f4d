//===- NvrtcMatrixTest.cpp - every kernel variant compiles with NVRTC -----===//
//
// The compile matrix: decode and append-KV variants across head dims, dtypes,
// head ratios, page sizes, layouts and feature flags go through the real JIT
// path (variant -> attn IR -> attn-pipeline -> CUDA C++ -> NVRTC) for sm_80,
// sm_89 and sm_90a. NVRTC needs no GPU, so this runs in CI. Each case checks
// that the cubin is an ELF image holding the kernel's entry points.
//
//===----------------------------------------------------------------------===//
#include "codegen/EmitCuda.h"
#include "compiler/Jit/Jit.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace attn;

namespace attn {
/// Test names and failure messages show the arch by name.
inline void PrintTo(Arch arch, std::ostream *os) { *os << toString(arch); }
} // namespace attn

namespace {

struct MatrixCase {
  std::string name;
  std::optional<DecodeVariant> decode;
  std::optional<AppendKVVariant> append;
};

std::vector<MatrixCase> matrixCases() {
  using S = ScalarType;
  std::vector<MatrixCase> cases;
  auto addDecode = [&](std::string name, DecodeVariant v) {
    cases.push_back({std::move(name), v, std::nullopt});
  };
  // Every head dim the kernels document, for each q/cache dtype pairing.
  struct Types {
    const char *name;
    S q, kv;
  };
  for (Types t : {Types{"bf16", S::BF16, S::BF16}, Types{"f16", S::F16, S::F16},
                  Types{"bf16_e4m3", S::BF16, S::F8E4M3},
                  Types{"f16_e5m2", S::F16, S::F8E5M2}})
    for (int d : {64, 80, 96, 112, 128, 192, 256}) {
      DecodeVariant v;
      v.qType = t.q;
      v.kvType = t.kv;
      v.headDim = d;
      addDecode(std::string("decode_") + t.name + "_d" + std::to_string(d), v);
    }
  // Head ratios, page sizes and layouts.
  for (auto [hq, hkv] : {std::pair{32, 32}, std::pair{64, 1}, std::pair{8, 2}})
    for (int page : {1, 8, 32, 64, 128}) {
      DecodeVariant v;
      v.numQHeads = hq;
      v.numKVHeads = hkv;
      v.pageSize = page;
      v.layout = page % 16 ? KVLayout::HND : KVLayout::NHD;
      addDecode("decode_h" + std::to_string(hq) + "x" + std::to_string(hkv) +
                    "_p" + std::to_string(page),
                v);
    }
  // Feature flags, alone and together.
  {
    DecodeVariant v;
    v.windowLeft = 1024;
    v.alibi = true;
    v.softcap = 30.f;
    v.writeLse = true;
    v.queryLen = 4;
    addDecode("decode_all_features", v);
    v.kvType = S::F8E4M3;
    v.perHeadKVScale = true;
    v.headDim = 40; // 8-byte FP8 rows
    addDecode("decode_all_features_e4m3_d40", v);
  }
  for (S kv : {S::BF16, S::F8E4M3, S::F8E5M2})
    for (KVLayout layout : {KVLayout::NHD, KVLayout::HND}) {
      AppendKVVariant v;
      v.kvType = kv;
      v.layout = layout;
      v.perHeadKVScale = kv != S::BF16;
      cases.push_back({std::string("append_") + std::string(toString(kv)) + "_" +
                           std::string(toString(layout)),
                       std::nullopt, v});
    }
  return cases;
}

void PrintTo(const MatrixCase &c, std::ostream *os) { *os << c.name; }

class NvrtcMatrix
    : public ::testing::TestWithParam<std::tuple<MatrixCase, Arch>> {};

TEST_P(NvrtcMatrix, Compiles) {
  const auto &[tc, arch] = GetParam();
  // A private cache without disk: this test is about NVRTC, not the cache.
  static runtime::KernelCache cache([] {
    runtime::KernelCache::Options o;
    o.useDisk = false;
    return o;
  }());
  Jit jit({arch, &cache});
  auto compiled = tc.decode ? jit.compile(*tc.decode, arch)
                            : jit.compile(*tc.append, arch);
  ASSERT_TRUE(bool(compiled)) << llvm::toString(compiled.takeError());
  const std::string &cubin = *compiled->cubin;
  ASSERT_GT(cubin.size(), 4u);
  EXPECT_EQ(cubin.substr(0, 4), "\x7f" "ELF");
  EXPECT_NE(cubin.find(kernelSymbol(compiled->spec)), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    Variants, NvrtcMatrix,
    ::testing::Combine(::testing::ValuesIn(matrixCases()),
                       ::testing::Values(Arch::SM80, Arch::SM89, Arch::SM90a)),
    [](const auto &info) {
      std::string arch(toString(std::get<1>(info.param)));
      return std::get<0>(info.param).name + "_" + arch.substr(3);
    });

} // namespace
