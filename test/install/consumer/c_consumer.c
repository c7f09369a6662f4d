/* A C host of an installed attn: linked to attn::c (libattn_c.so) alone, it
 * asks the library a few questions, compiles a decode variant for sm_90a
 * (no GPU needed) and opens the kernel library the build made as an AOT
 * context. Exit status 0 only if everything checks out. */
#include <attn_c.h>

#include <stdio.h>
#include <string.h>

static int fail(const char *what, attn_status status) {
  fprintf(stderr, "c_consumer: %s failed (%d): %s\n", what, (int)status,
          attn_last_error());
  return 1;
}

int main(void) {
  int count = 0;
  attn_status status;
  attn_decode_variant v;
  attn_compiled *compiled = NULL;
  attn_context *context = NULL;

  if (attn_c_api_version() != ATTN_C_API_VERSION || !attn_has_compiler()) {
    fprintf(stderr, "c_consumer: unexpected library (api %d, compiler %d)\n",
            attn_c_api_version(), attn_has_compiler());
    return 1;
  }
  if ((status = attn_supported_head_sizes(NULL, 0, &count)) != ATTN_OK)
    return fail("attn_supported_head_sizes", status);
  printf("c_consumer: attn %s, archs %s, %d head sizes\n", attn_version(),
         attn_supported_archs(), count);

  attn_decode_variant_init(&v);
  v.num_q_heads = 8;
  v.num_kv_heads = 2;
  if ((status = attn_compile_decode(&v, "sm_90a", &compiled)) != ATTN_OK)
    return fail("attn_compile_decode", status);
  if (attn_compiled_cubin_size(compiled) == 0 ||
      strncmp(attn_compiled_kernel_name(compiled), "attn_decode", 11) != 0) {
    fprintf(stderr, "c_consumer: bad compile result %s (%zu bytes)\n",
            attn_compiled_kernel_name(compiled),
            attn_compiled_cubin_size(compiled));
    return 1;
  }
  printf("c_consumer: compiled %s for sm_90a: %zu-byte cubin\n",
         attn_compiled_kernel_name(compiled),
         attn_compiled_cubin_size(compiled));
  attn_compiled_destroy(compiled);

  if ((status = attn_context_create_aot(KERNEL_LIBRARY, &context)) != ATTN_OK)
    return fail("attn_context_create_aot", status);
  attn_context_destroy(context);

  /* Errors are statuses with a message, never crashes. */
  v.head_dim = 0;
  status = attn_compile_decode(&v, "sm_90a", &compiled);
  if (status != ATTN_ERROR_INVALID_ARGUMENT ||
      !strstr(attn_last_error(), "head_dim")) {
    fprintf(stderr, "c_consumer: head_dim 0 gave %d: %s\n", (int)status,
            attn_last_error());
    return 1;
  }
  printf("c_consumer: ok\n");
  return 0;
}
