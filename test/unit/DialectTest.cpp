//===- DialectTest.cpp - attn dialect C++ API tests -----------------------===//
//
// The dialect as a C++ host sees it: parse and verify from text, typed
// accessors and defaults, and the checked builders of the attribute and type
// rejecting what no kernel runs.
//
//===----------------------------------------------------------------------===//
#include "dialect/IR/AttnOps.h"
#include "spec/KernelLimits.h"
#include "tools/RegisterAttn.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::attn;

namespace {

class DialectTest : public ::testing::Test {
protected:
  DialectTest() {
    DialectRegistry registry;
    registerAttnDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  /// Parses `source`, collecting diagnostics instead of printing them.
  OwningOpRef<ModuleOp> parse(StringRef source) {
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      diagnostics += diag.str() + "\n";
      return success();
    });
    return parseSourceString<ModuleOp>(source, &context);
  }

  MLIRContext context;
  std::string diagnostics;
};

constexpr const char *kDecode = R"mlir(
func.func @decode(%q: tensor<?x32x128xbf16>,
                  %cache: !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = hnd>,
                  %bt: tensor<?x?xi32>, %lens: tensor<?xi32>,
                  %ks: tensor<1xf32>, %vs: tensor<1xf32>) -> tensor<?x32x128xbf16> {
  %o = attn.decode %q, %cache, %bt, %lens kv_scales(%ks, %vs : tensor<1xf32>, tensor<1xf32>)
      {mask = #attn.mask<causal, window_left = 1024>, softcap = 30.0 : f32}
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = hnd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}
)mlir";

TEST_F(DialectTest, ParsesDecodeAndExposesVariantKnobs) {
  OwningOpRef<ModuleOp> module = parse(kDecode);
  ASSERT_TRUE(module) << diagnostics;
  DecodeOp decode;
  module->walk([&](DecodeOp op) { decode = op; });
  ASSERT_TRUE(decode);

  PagedKVType cache = decode.getCache().getType();
  EXPECT_EQ(cache.getNumKvHeads(), 8);
  EXPECT_EQ(cache.getHeadDim(), 128);
  EXPECT_EQ(cache.getPageSize(), 16);
  EXPECT_EQ(cache.getLayout(), ::attn::KVLayout::HND);
  EXPECT_TRUE(cache.isFP8());

  ASSERT_TRUE(decode.getMask());
  EXPECT_TRUE(decode.getMask()->isCausal());
  EXPECT_EQ(decode.getMask()->getWindowLeft(), std::optional<int64_t>(1024));
  EXPECT_FLOAT_EQ(decode.getSoftcap()->convertToFloat(), 30.0f);
  // Defaults a host relies on: one query per request, decoder attention,
  // scale left to the kernel (1/sqrt(head_dim)), no LSE output.
  EXPECT_EQ(decode.getQueryLen(), 1);
  EXPECT_EQ(decode.getKind(), ::attn::AttentionKind::Decoder);
  EXPECT_FALSE(decode.getScale());
  EXPECT_FALSE(decode.getLse());
}

TEST_F(DialectTest, RejectsFP8CacheWithoutScales) {
  std::string source = kDecode;
  // Drop the kv_scales clause.
  size_t begin = source.find(" kv_scales(");
  size_t end = source.find(")", begin) + 1;
  source.erase(begin, end - begin);
  OwningOpRef<ModuleOp> module = parse(source);
  EXPECT_FALSE(module);
  EXPECT_NE(diagnostics.find("an FP8 cache ('f8E4M3FN') needs kv_scales"),
            std::string::npos)
      << diagnostics;
}

TEST_F(DialectTest, CheckedTypeBuilderRejectsUnsupportedHeadDim) {
  Type bf16 = BFloat16Type::get(&context);
  auto emit = [&]() { return emitError(UnknownLoc::get(&context)); };
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    diagnostics += diag.str();
    return success();
  });
  auto pagedKV = [&](int64_t headDim, Type elementType, int64_t pageSize) {
    return PagedKVType::getChecked(emit, &context, /*numKvHeads=*/int64_t{8},
                                   headDim, elementType, pageSize,
                                   ::attn::KVLayout::NHD);
  };
  EXPECT_TRUE(pagedKV(128, bf16, 16));
  EXPECT_FALSE(pagedKV(100, bf16, 16));
  EXPECT_NE(diagnostics.find("head_dim 100 is not supported"),
            std::string::npos)
      << diagnostics;
  EXPECT_FALSE(pagedKV(128, IntegerType::get(&context, 8), 16));
  EXPECT_FALSE(pagedKV(128, bf16, 0));
}

TEST_F(DialectTest, CheckedMaskBuilderRejectsNegativeWindow) {
  auto emit = [&]() { return emitError(UnknownLoc::get(&context)); };
  ScopedDiagnosticHandler handler(&context,
                                  [](Diagnostic &) { return success(); });
  auto mask = [&](MaskKind kind, int64_t window) {
    return MaskAttr::getChecked(emit, &context, kind,
                                std::optional<int64_t>(window));
  };
  EXPECT_TRUE(mask(MaskKind::causal, 0));
  EXPECT_FALSE(mask(MaskKind::causal, -1));
  EXPECT_FALSE(mask(MaskKind::none, 128));
}

TEST(KernelLimitsTest, HeadDimsAreMultiplesOfEightFrom32To256) {
  for (int64_t d : {32, 40, 64, 80, 96, 112, 128, 192, 256})
    EXPECT_TRUE(::attn::isSupportedHeadDim(d)) << d;
  for (int64_t d : {0, 24, 100, 130, 264, -64})
    EXPECT_FALSE(::attn::isSupportedHeadDim(d)) << d;
  EXPECT_TRUE(::attn::isSupportedPageSize(1));
  EXPECT_TRUE(::attn::isSupportedPageSize(256));
  EXPECT_FALSE(::attn::isSupportedPageSize(0));
  EXPECT_FALSE(::attn::isSupportedPageSize(512));
}

} // namespace
