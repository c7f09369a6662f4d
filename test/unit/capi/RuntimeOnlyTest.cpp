//===- RuntimeOnlyTest.cpp - attn_c.h through libattn_runtime_c.so --------===//
//
// The runtime-only library: same ABI, no compiler. Its JIT entry points say
// so (ATTN_ERROR_UNSUPPORTED, naming libattn_c.so); everything else works.
//
//===----------------------------------------------------------------------===//
#include "attn_c.h"
#include "test/unit/capi/CApiChecks.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace {

TEST(CApiRuntimeOnly, JitEntriesAreUnsupported) {
  EXPECT_EQ(attn_has_compiler(), 0);
  attn_context *context = reinterpret_cast<attn_context *>(1);
  EXPECT_EQ(attn_context_create_jit(nullptr, &context), ATTN_ERROR_UNSUPPORTED);
  EXPECT_EQ(context, nullptr);
  std::string message = attn_last_error();
  EXPECT_EQ(message.rfind("attn_context_create_jit: ", 0), 0u) << message;
  EXPECT_NE(message.find("libattn_c.so"), std::string::npos) << message;
  EXPECT_NE(message.find("attn_context_create_aot"), std::string::npos);

  attn_decode_variant d;
  attn_decode_variant_init(&d);
  attn_compiled *compiled = reinterpret_cast<attn_compiled *>(1);
  EXPECT_EQ(attn_compile_decode(&d, "sm_90a", &compiled),
            ATTN_ERROR_UNSUPPORTED);
  EXPECT_EQ(compiled, nullptr);
  EXPECT_NE(std::string(attn_last_error()).find("libattn_c.so"),
            std::string::npos);
  attn_prefill_variant p;
  attn_prefill_variant_init(&p);
  EXPECT_EQ(attn_compile_prefill(&p, "sm_90a", &compiled),
            ATTN_ERROR_UNSUPPORTED);
}

TEST(CApiRuntimeOnly, TheRestWorks) {
  EXPECT_STREQ(attn_supported_archs(), "sm_80,sm_89,sm_90a");
  EXPECT_EQ(attn_c_api_version(), ATTN_C_API_VERSION);
  attn_decode_variant d;
  attn_decode_variant_init(&d);
  size_t length = 0;
  EXPECT_EQ(attn_decode_kernel_key(&d, nullptr, 0, &length), ATTN_OK);
  EXPECT_GT(length, 0u);
  EXPECT_STREQ(attn_last_error(), "");
  attn_context *context = nullptr;
  EXPECT_EQ(attn_context_create_aot("/nonexistent/attn-kernels", &context),
            ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(attn_last_error()).find("/nonexistent/attn-kernels"),
            std::string::npos);
}

// The same checks as libattn_c.so's: handles, variants and counts are the
// C layer's, which both libraries share.
TEST(CApiRuntimeOnly, HandlesThatAreNotLiveAreRefused) {
  attn_capi_test::expectDestroysRefuseWhatIsNotLive();
  attn_capi_test::expectCallsRefuseWhatIsNotLive();
}

TEST(CApiRuntimeOnly, BadVariantsAreRefused) {
  attn_capi_test::expectKeysRefuseBadVariants();
  attn_capi_test::expectKeysTakeTheLimits();
}

TEST(CApiRuntimeOnly, CountsNoBufferHoldsAreArgumentErrors) {
  attn_capi_test::expectCountsNoBufferHoldsAreRefused();
}

} // namespace

namespace {

// An AOT context on a GPU host: $ATTN_CAPI_TEST_AOT_LIBRARY names a library
// attn-aot built with the default decode variant at 8/2 heads and
// "cache_ops" (scripts/check-c-api-gpu.sh makes one); skipped otherwise.
TEST(CApiRuntimeOnly, AotContextServesItsKernels) {
  const char *path = std::getenv("ATTN_CAPI_TEST_AOT_LIBRARY");
  if (!path)
    GTEST_SKIP() << "ATTN_CAPI_TEST_AOT_LIBRARY is not set";
  attn_context *context = nullptr;
  ASSERT_EQ(attn_context_create_aot(path, &context), ATTN_OK)
      << attn_last_error();
  attn_decode_variant v;
  attn_decode_variant_init(&v);
  v.num_q_heads = 8;
  v.num_kv_heads = 2;
  attn_decode *decode = nullptr;
  ASSERT_EQ(attn_decode_create(context, &v, 4, &decode), ATTN_OK)
      << attn_last_error();
  int32_t len = 20;
  EXPECT_EQ(attn_decode_plan(decode, &len, 1, 0, nullptr), ATTN_OK)
      << attn_last_error();
  attn_decode_destroy(decode);
  // A variant the library lacks is NOT_FOUND, naming its key.
  v.head_dim = 64;
  EXPECT_EQ(attn_decode_create(context, &v, 4, &decode), ATTN_ERROR_NOT_FOUND)
      << attn_last_error();
  EXPECT_NE(std::string(attn_last_error()).find("dim=64"), std::string::npos)
      << attn_last_error();
  attn_cache_ops *ops = nullptr;
  EXPECT_EQ(attn_cache_ops_create(context, &ops), ATTN_OK) << attn_last_error();
  EXPECT_EQ(attn_cache_ops_destroy(ops), ATTN_OK);
  EXPECT_EQ(attn_cache_ops_destroy(ops), ATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(attn_context_destroy(context), ATTN_OK);
  EXPECT_EQ(attn_context_destroy(context), ATTN_ERROR_INVALID_ARGUMENT);
}

} // namespace
