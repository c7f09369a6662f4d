/*===- decode.c - paged decode from C through attn_c.h ---------------------===*
 *
 * A C99 host of libattn_c.so: a JIT context, a decode handle for a bf16 GQA
 * variant (8 query heads over 2 KV heads, head dim 128, pages of 16), a
 * small paged cache and q filled with random values, plan, run, and a check
 * of every output against an fp64 reference computed here.
 *
 * The CUDA driver is opened with dlopen, as attn's runtime does, so the
 * program also starts where there is none: it then compiles the variant for
 * sm_90a (attn_compile_decode), prints the kernel's name and cubin size and
 * says it skipped the run. Exit status 0 only if everything checks out.
 *
 *   build/bin/attn-example-c-decode
 *
 *===----------------------------------------------------------------------===*/
#define _POSIX_C_SOURCE 200809L

#include <attn_c.h>

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*===--- The few driver calls the host makes itself
 * ------------------------===*/

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;

static struct {
  CUresult (*init)(unsigned);
  CUresult (*deviceGetCount)(int *);
  CUresult (*deviceGet)(CUdevice *, int);
  CUresult (*primaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*ctxSetCurrent)(CUcontext);
  CUresult (*ctxSynchronize)(void);
  CUresult (*memAlloc)(CUdeviceptr *, size_t);
  CUresult (*memFree)(CUdeviceptr);
  CUresult (*memcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*memcpyDtoH)(void *, CUdeviceptr, size_t);
} cu;

/* Loads the driver and makes device 0's primary context current (the
 * context attn's kernels then load in); 0 when there is no usable GPU. */
static int openGpu(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  CUdevice device;
  CUcontext context;
  int count = 0;
  if (!lib)
    return 0;
  /* POSIX's way to turn dlsym's object pointer into a function pointer. */
#define LOAD(field, symbol)                                                    \
  if (!(*(void **)(&cu.field) = dlsym(lib, symbol)))                           \
    return 0;
  LOAD(init, "cuInit")
  LOAD(deviceGetCount, "cuDeviceGetCount")
  LOAD(deviceGet, "cuDeviceGet")
  LOAD(primaryCtxRetain, "cuDevicePrimaryCtxRetain")
  LOAD(ctxSetCurrent, "cuCtxSetCurrent")
  LOAD(ctxSynchronize, "cuCtxSynchronize")
  LOAD(memAlloc, "cuMemAlloc_v2")
  LOAD(memFree, "cuMemFree_v2")
  LOAD(memcpyHtoD, "cuMemcpyHtoD_v2")
  LOAD(memcpyDtoH, "cuMemcpyDtoH_v2")
#undef LOAD
  if (cu.init(0) || cu.deviceGetCount(&count) || count < 1)
    return 0;
  if (cu.deviceGet(&device, 0) || cu.primaryCtxRetain(&context, device) ||
      cu.ctxSetCurrent(context))
    return 0;
  return 1;
}

static CUdeviceptr upload(const void *data, size_t bytes) {
  CUdeviceptr p = 0;
  if (cu.memAlloc(&p, bytes) || cu.memcpyHtoD(p, data, bytes)) {
    fprintf(stderr, "decode.c: cannot allocate or copy %zu device bytes\n",
            bytes);
    exit(1);
  }
  return p;
}

/*===--- bf16 and random numbers
 * -------------------------------------------===*/

static uint16_t toBf16(float x) {
  uint32_t bits;
  memcpy(&bits, &x, 4);
  return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

static double fromBf16(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float x;
  memcpy(&x, &bits, 4);
  return x;
}

static uint32_t rng = 12345u;
/* Uniform in [-1, 1), rounded to bf16 (the values the kernel reads). */
static uint16_t randomBf16(void) {
  rng = rng * 1664525u + 1013904223u;
  return toBf16((float)((rng >> 8) * (2.0 / 16777216.0) - 1.0));
}

/*===--- The example
 * -------------------------------------------------------===*/

enum { kQHeads = 8, kKVHeads = 2, kDim = 128, kPage = 16, kBatch = 3 };

static int failed(const char *what, attn_status status) {
  fprintf(stderr, "decode.c: %s failed (status %d): %s\n", what, (int)status,
          attn_last_error());
  return 1;
}

static int compileOnly(const attn_decode_variant *v) {
  attn_compiled *compiled = NULL;
  attn_status status = attn_compile_decode(v, "sm_90a", &compiled);
  if (status != ATTN_OK)
    return failed("attn_compile_decode", status);
  printf("decode.c: no GPU: compiled %s for sm_90a (%zu-byte cubin); "
         "skipped the run\n",
         attn_compiled_kernel_name(compiled),
         attn_compiled_cubin_size(compiled));
  attn_compiled_destroy(compiled);
  return 0;
}

int main(void) {
  const int32_t seqLens[kBatch] = {37, 100, 16};
  enum { kPagesPerSeq = 7, kNumPages = 16 };
  /* Pages spread over the cache, not in order. */
  const int32_t pageTables[kBatch][kPagesPerSeq] = {
      {9, 2, 14, 0, 0, 0, 0}, {4, 11, 1, 15, 7, 12, 5}, {3, 0, 0, 0, 0, 0, 0}};
  const size_t cacheElems = (size_t)kNumPages * kPage * kKVHeads * kDim;
  const size_t qElems = (size_t)kBatch * kQHeads * kDim;
  attn_decode_variant v;
  attn_context *context = NULL;
  attn_decode *decode = NULL;
  attn_decode_args args;
  attn_status status;
  uint16_t *k, *val, *q, *out;
  CUdeviceptr dK, dV, dQ, dOut, dTables, dLens;
  double maxError = 0;
  size_t i;
  int b, h, d, t;

  attn_decode_variant_init(&v);
  v.q_type = ATTN_DTYPE_BF16;
  v.kv_type = ATTN_DTYPE_BF16;
  v.num_q_heads = kQHeads;
  v.num_kv_heads = kKVHeads;
  v.head_dim = kDim;
  v.page_size = kPage;
  v.layout = ATTN_LAYOUT_NHD;
  printf("decode.c: attn %s (C API %d)\n", attn_version(),
         attn_c_api_version());
  if (!openGpu())
    return compileOnly(&v);

  k = malloc(cacheElems * 2);
  val = malloc(cacheElems * 2);
  q = malloc(qElems * 2);
  out = malloc(qElems * 2);
  if (!k || !val || !q || !out)
    return 1;
  for (i = 0; i < cacheElems; ++i) {
    k[i] = randomBf16();
    val[i] = randomBf16();
  }
  for (i = 0; i < qElems; ++i)
    q[i] = randomBf16();
  dK = upload(k, cacheElems * 2);
  dV = upload(val, cacheElems * 2);
  dQ = upload(q, qElems * 2);
  dOut = upload(q, qElems * 2); /* overwritten by the kernel */
  dTables = upload(pageTables, sizeof pageTables);
  dLens = upload(seqLens, sizeof seqLens);

  if ((status = attn_context_create_jit(NULL, &context)) != ATTN_OK)
    return failed("attn_context_create_jit", status);
  if ((status = attn_decode_create(context, &v, kBatch, &decode)) != ATTN_OK)
    return failed("attn_decode_create", status);
  if ((status = attn_decode_plan(decode, seqLens, kBatch, 0, NULL)) != ATTN_OK)
    return failed("attn_decode_plan", status);

  ATTN_INIT(&args);
  args.q = (const void *)(uintptr_t)dQ;
  args.out = (void *)(uintptr_t)dOut;
  args.cache.k = (const void *)(uintptr_t)dK;
  args.cache.v = (const void *)(uintptr_t)dV;
  args.cache.dtype = ATTN_DTYPE_BF16;
  args.cache.num_kv_heads = kKVHeads;
  args.cache.head_dim = kDim;
  args.cache.page_size = kPage;
  args.cache.layout = ATTN_LAYOUT_NHD;
  args.cache.num_pages = kNumPages;
  args.page_tables = (const int32_t *)(uintptr_t)dTables;
  args.page_table_stride = kPagesPerSeq;
  args.seq_lens = (const int32_t *)(uintptr_t)dLens;
  if ((status = attn_decode_run(decode, &args, NULL)) != ATTN_OK)
    return failed("attn_decode_run", status);
  if (cu.ctxSynchronize() || cu.memcpyDtoH(out, dOut, qElems * 2)) {
    fprintf(stderr, "decode.c: the run or the copy back failed\n");
    return 1;
  }

  /* The reference: each request's one query row sees all its tokens
   * (causal, aligned to the end), softmax scale 1/sqrt(head_dim). */
  for (b = 0; b < kBatch; ++b)
    for (h = 0; h < kQHeads; ++h) {
      const int kvHead = h / (kQHeads / kKVHeads);
      const uint16_t *qRow = q + ((size_t)b * kQHeads + h) * kDim;
      double scores[kPagesPerSeq * kPage], maxScore = -INFINITY, sum = 0;
      double ref[kDim];
      for (t = 0; t < seqLens[b]; ++t) {
        size_t row =
            (((size_t)pageTables[b][t / kPage] * kPage + t % kPage) * kKVHeads +
             kvHead) *
            kDim;
        double s = 0;
        for (d = 0; d < kDim; ++d)
          s += fromBf16(qRow[d]) * fromBf16(k[row + d]);
        scores[t] = s / sqrt((double)kDim);
        if (scores[t] > maxScore)
          maxScore = scores[t];
      }
      for (d = 0; d < kDim; ++d)
        ref[d] = 0;
      for (t = 0; t < seqLens[b]; ++t) {
        size_t row =
            (((size_t)pageTables[b][t / kPage] * kPage + t % kPage) * kKVHeads +
             kvHead) *
            kDim;
        double p = exp(scores[t] - maxScore);
        sum += p;
        for (d = 0; d < kDim; ++d)
          ref[d] += p * fromBf16(val[row + d]);
      }
      for (d = 0; d < kDim; ++d) {
        double got = fromBf16(out[((size_t)b * kQHeads + h) * kDim + d]);
        double error = fabs(got - ref[d] / sum);
        if (!(error <= maxError)) /* NaN too */
          maxError = isnan(error) ? INFINITY : error;
      }
    }
  printf("decode.c: %d requests x %d heads x %d dims: max |out - fp64 "
         "reference| = %.3g\n",
         kBatch, kQHeads, kDim, maxError);

  attn_decode_destroy(decode);
  attn_context_destroy(context);
  cu.memFree(dK);
  cu.memFree(dV);
  cu.memFree(dQ);
  cu.memFree(dOut);
  cu.memFree(dTables);
  cu.memFree(dLens);
  free(k);
  free(val);
  free(q);
  free(out);
  /* bf16 output: half an ulp of values below 1 is 2^-9; leave room for
   * the inputs' rounding through the sums. */
  if (!(maxError < 1e-2)) {
    fprintf(stderr, "decode.c: error %.3g exceeds 1e-2\n", maxError);
    return 1;
  }
  printf("decode.c: ok\n");
  return 0;
}
