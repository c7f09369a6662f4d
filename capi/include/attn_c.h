/*===- attn_c.h - attn's stable C interface -----------------------*- C -*-===*
 *
 * The C face of attn for hosts that are not C++ built in attn's tree: the
 * Python package (python/attn, through ctypes), engines written in other
 * languages, and programs linked to an installed attn (find_package(attn):
 * attn::c). Nothing C++ crosses it: opaque handles, plain structs, status
 * codes.
 *
 * Two libraries implement this header:
 *   libattn_c.so          the JIT (the compiler inside, as in attn-opt): any
 *                         variant is compiled on first use with NVRTC and
 *                         cached;
 *   libattn_runtime_c.so  the runtime alone, for hosts without the compiler:
 *                         kernels come from attn-aot libraries
 *                         (attn_context_create_aot); attn_context_create_jit
 *                         and attn_compile_* return ATTN_ERROR_UNSUPPORTED.
 *
 * Conventions
 *  - Every call returns an attn_status. On failure, attn_last_error() gives
 *    this thread's message naming what is wrong (the argument, the request,
 *    the field); it stays valid until this thread's next attn call.
 *  - Every struct a caller fills starts with `struct_size`; set it with
 *    ATTN_INIT (zeroes the rest) or the *_init functions (which also set the
 *    defaults). A library accepts any struct_size from its first release up
 *    to its own, so structs only grow at their end.
 *  - Pointers in *_args structs are device memory (or host-mapped memory
 *    the device can read) unless the field says host. Strides are in
 *    elements; 0 means dense.
 *  - `stream` is a CUstream (cudaStream_t); NULL is the legacy default
 *    stream. Kernels launch in the context current on the calling thread
 *    (the device's primary context, as PyTorch's), which must be the
 *    context the handle was created in.
 *  - *_run calls allocate nothing and never synchronize: they can be
 *    captured in a CUDA graph. *_plan calls do host work and one
 *    asynchronous upload into the handle's workspace; plan outside capture
 *    (with for_graph = 1 the grid is the workspace's capacity, so a
 *    captured run stays valid for any later plan of a batch that fits).
 *  - Handles (attn_context, attn_decode, ...) are live from their
 *    attn_*_create to their attn_*_destroy. Every call checks the handles
 *    it takes: a destroyed one, one never created or one of another type
 *    is ATTN_ERROR_INVALID_ARGUMENT naming the argument ("decode is not a
 *    live attn_decode handle (destroyed, or never created)"), never a read
 *    of freed memory; no handle value is ever given out twice. Destroying
 *    NULL does nothing and returns ATTN_OK (as free(NULL)); destroying a
 *    handle that is not live is that error and frees nothing.
 *  - Handles are not thread-safe; contexts are. Destroying a handle while
 *    another thread's call uses it is a bug of the caller's, but the object
 *    is freed only once that call returns.
 *
 *===----------------------------------------------------------------------===*/
#ifndef ATTN_C_H
#define ATTN_C_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define ATTN_C_EXPORT __attribute__((visibility("default")))
#else
#define ATTN_C_EXPORT
#endif

/* This header's interface version; attn_c_api_version() gives the
 * library's. 2: the attn_*_destroy functions return an attn_status (1:
 * void; a caller that ignores the result works with either). */
#define ATTN_C_API_VERSION 2

/* Zeroes *p and sets its struct_size. */
#define ATTN_INIT(p)                                                           \
  (memset((p), 0, sizeof(*(p))), (p)->struct_size = sizeof(*(p)))

/*===--- Status, errors, queries
 * -------------------------------------------===*/

typedef enum attn_status {
  ATTN_OK = 0,
  ATTN_ERROR_INVALID_ARGUMENT = 1, /* a value attn cannot take */
  ATTN_ERROR_UNSUPPORTED = 2,      /* valid, but not in this build or GPU */
  ATTN_ERROR_COMPILE = 3,          /* compiling a variant failed (IR, NVRTC) */
  ATTN_ERROR_CUDA = 4,             /* a CUDA driver call failed */
  ATTN_ERROR_NOT_FOUND = 5,        /* a kernel an AOT library does not hold */
  ATTN_ERROR_INTERNAL = 6          /* a bug in attn; please report it */
} attn_status;

/* This thread's message for its last failed call ("" after success). */
ATTN_C_EXPORT const char *attn_last_error(void);
/* "0.3.0"-style release of the library. */
ATTN_C_EXPORT const char *attn_version(void);
ATTN_C_EXPORT int attn_c_api_version(void);
/* 1 in libattn_c.so (JIT), 0 in libattn_runtime_c.so. */
ATTN_C_EXPORT int attn_has_compiler(void);
/* The archs kernels are generated for, comma-separated: "sm_80,sm_89,sm_90a".
 */
ATTN_C_EXPORT const char *attn_supported_archs(void);
/* Head sizes the kernels run, ascending. Writes min(capacity, count) of them
 * to sizes (may be NULL) and the count to *count. */
ATTN_C_EXPORT attn_status attn_supported_head_sizes(int *sizes, int capacity,
                                                    int *count);

typedef enum attn_dtype {
  ATTN_DTYPE_F16 = 0,
  ATTN_DTYPE_BF16 = 1,
  ATTN_DTYPE_F32 = 2,
  ATTN_DTYPE_E4M3 = 3, /* float8_e4m3fn */
  ATTN_DTYPE_E5M2 = 4  /* float8_e5m2 */
} attn_dtype;

/* Paged-cache layouts (per layer; index 0 of the first dimension is K):
 *   NHD: [2, num_pages, page_size, num_kv_heads, head_dim] (vLLM's)
 *   HND: [2, num_pages, num_kv_heads, page_size, head_dim]  */
typedef enum attn_layout {
  ATTN_LAYOUT_NHD = 0,
  ATTN_LAYOUT_HND = 1
} attn_layout;

typedef enum attn_kind {
  ATTN_KIND_DECODER = 0, /* causal self attention (the causal knob) */
  ATTN_KIND_ENCODER = 1, /* bidirectional self attention */
  ATTN_KIND_CROSS = 2    /* encoder-decoder cross attention */
} attn_kind;

/* The per-layer shape of a paged KV cache (the comment on attn_layout). */
ATTN_C_EXPORT attn_status attn_kv_cache_shape(int64_t num_pages, int page_size,
                                              int num_kv_heads, int head_dim,
                                              attn_layout layout,
                                              int64_t shape[5]);

/*===--- Contexts: where kernels come from
 * ---------------------------------===*/

typedef struct attn_context attn_context;

typedef struct attn_jit_options {
  uint32_t struct_size;
  /* "sm_80", "sm_89", "sm_90a"; NULL: the current device's. */
  const char *arch;
  /* Directory of the on-disk cubin cache; NULL: $ATTN_CACHE_DIR, else
   * $XDG_CACHE_HOME/attn, else ~/.cache/attn (KernelCache::global()'s).
   * attn creates it private (0700) and uses it only while it is the
   * user's own and writable by no one else; otherwise it warns once and
   * compiles in memory (README, "the kernel cache"). */
  const char *cache_dir;
} attn_jit_options;

/* A JIT context (libattn_c.so only). options may be NULL. */
ATTN_C_EXPORT attn_status
attn_context_create_jit(const attn_jit_options *options, attn_context **out);
/* A context over an attn-aot library (either library). */
ATTN_C_EXPORT attn_status attn_context_create_aot(const char *library_path,
                                                  attn_context **out);
ATTN_C_EXPORT attn_status attn_context_destroy(attn_context *context);

/*===--- Variants
 * ----------------------------------------------------------===*/

/* Knobs decode and prefill variants share (spec/Variant.h's AttentionKnobs;
 * docs/semantics.md says what each does). */
typedef struct attn_knobs {
  attn_kind kind;  /* default ATTN_KIND_DECODER */
  int causal;      /* default 1 */
  int window_left; /* FlashAttention's window_left; < 0: none (default) */
  float softcap;   /* logit soft-cap; 0: none */
  float scale;     /* softmax scale; 0: 1/sqrt(head_dim) */
  int alibi;       /* args carry alibi_slopes */
  int sinks;       /* args carry sinks */
  int fp8_query;   /* prefill fp8_compute only: q in e4m3, args q_scale */
  int write_lse;   /* args carry lse (natural log) */
  /* a request's output and LSE do not depend on the rest of its batch
   * (docs/semantics.md, "Batch invariance") */
  int batch_invariant;
  /* score_mod / mask_mod regions as attn IR text (NULL or "": none). */
  const char *score_mod;
  const char *mask_mod;
} attn_knobs;

typedef struct attn_decode_variant {
  uint32_t struct_size;
  attn_knobs knobs;
  attn_dtype q_type;  /* f16 or bf16; also the output's (default bf16) */
  attn_dtype kv_type; /* q_type, e4m3 or e5m2 (default bf16) */
  int num_q_heads, num_kv_heads, head_dim, page_size; /* 32, 8, 128, 16 */
  attn_layout layout;
  int query_len;         /* 1, or 1 + draft tokens (default 1) */
  int per_head_kv_scale; /* FP8 scales per KV head, else one */
} attn_decode_variant;

typedef struct attn_prefill_variant {
  uint32_t struct_size;
  attn_knobs knobs;
  attn_dtype q_type; /* f16 or bf16: q, out (and ragged k, v) */
  int num_q_heads, num_kv_heads, head_dim;
  /* Paged (chunked prefill, prefix caching): keys come from a paged cache
   * of this format; else ragged k / v rows. */
  int paged;
  attn_dtype kv_type; /* paged: the cache's; ragged: q_type, or e4m3/e5m2 */
  int page_size;
  attn_layout layout;
  int per_head_kv_scale;
  int fp8_compute; /* sm_90a: FP8 MMAs over an FP8 cache or FP8 rows */
  /* MLA's prefill: q and k have head_dim + rope_dim dims (128 + 64), v and
   * out head_dim; ragged k/v of q_type only (default 0) */
  int rope_dim;
} attn_prefill_variant;

typedef struct attn_append_kv_variant {
  uint32_t struct_size;
  attn_dtype in_type; /* f16 or bf16 rows */
  attn_dtype kv_type; /* in_type, e4m3 or e5m2 */
  int num_kv_heads, head_dim, page_size;
  attn_layout layout;
  int per_head_kv_scale;
} attn_append_kv_variant;

typedef struct attn_merge_states_variant {
  uint32_t struct_size;
  attn_dtype dtype; /* of the outputs: f16, bf16 or f32 */
  int num_heads, head_dim;
} attn_merge_states_variant;

/* Absorbed MLA decode (docs/semantics.md, "MLA decode"): one latent cache
 * row of kv_lora_rank values and a RoPE key of rope_dim per token, shared
 * by every query head; output kv_lora_rank values per head. */
typedef struct attn_mla_decode_variant {
  uint32_t struct_size;
  attn_dtype q_type;   /* f16 or bf16; also the output's (default bf16) */
  attn_dtype kv_type;  /* q_type or e4m3 (default bf16) */
  int num_q_heads;     /* 1 to 128 (default 16) */
  int kv_lora_rank;    /* multiple of 64, up to 512 (default 512) */
  int rope_dim;        /* 0, 64 or 128 (default 64) */
  int page_size;       /* default 64 */
  int query_len;       /* query tokens per request (default 1) */
  int causal;          /* among a request's query tokens (default 0) */
  float scale;         /* softmax scale; 0: 1/sqrt(kv_lora_rank + rope_dim) */
  int write_lse;       /* args carry lse (natural log) */
  int batch_invariant; /* as attn_knobs' */
} attn_mla_decode_variant;

/* struct_size and the C++ API's defaults. */
ATTN_C_EXPORT void attn_decode_variant_init(attn_decode_variant *variant);
ATTN_C_EXPORT void attn_prefill_variant_init(attn_prefill_variant *variant);
ATTN_C_EXPORT void attn_append_kv_variant_init(attn_append_kv_variant *variant);
ATTN_C_EXPORT void
attn_merge_states_variant_init(attn_merge_states_variant *variant);
ATTN_C_EXPORT void
attn_mla_decode_variant_init(attn_mla_decode_variant *variant);

/* Kernel keys (what selects a compiled kernel; attn-aot's and the JIT's
 * names). Writes at most capacity bytes with a terminating NUL and the
 * full length (without NUL) to *length. */
ATTN_C_EXPORT attn_status attn_decode_kernel_key(const attn_decode_variant *v,
                                                 char *buffer, size_t capacity,
                                                 size_t *length);
ATTN_C_EXPORT attn_status attn_prefill_kernel_key(const attn_prefill_variant *v,
                                                  char *buffer, size_t capacity,
                                                  size_t *length);
ATTN_C_EXPORT attn_status
attn_append_kv_kernel_key(const attn_append_kv_variant *v, char *buffer,
                          size_t capacity, size_t *length);
ATTN_C_EXPORT attn_status
attn_merge_states_kernel_key(const attn_merge_states_variant *v, char *buffer,
                             size_t capacity, size_t *length);
ATTN_C_EXPORT attn_status
attn_mla_decode_kernel_key(const attn_mla_decode_variant *v, char *buffer,
                           size_t capacity, size_t *length);
/* Variant keys: the kernel key plus the values every launch passes (scale,
 * soft-cap, window size); the JIT memoizes loaded kernels by them. Same
 * buffer contract. */
ATTN_C_EXPORT attn_status attn_decode_variant_key(const attn_decode_variant *v,
                                                  char *buffer, size_t capacity,
                                                  size_t *length);
ATTN_C_EXPORT attn_status
attn_prefill_variant_key(const attn_prefill_variant *v, char *buffer,
                         size_t capacity, size_t *length);

/*===--- Compiling without a GPU (libattn_c.so only)
 * -----------------------===*/

typedef struct attn_compiled attn_compiled;
/* Spec, CUDA source and cubin of a variant for `arch` ("sm_80", "sm_89",
 * "sm_90a"); runs the compiler and NVRTC, touches no GPU. */
ATTN_C_EXPORT attn_status attn_compile_decode(const attn_decode_variant *v,
                                              const char *arch,
                                              attn_compiled **out);
ATTN_C_EXPORT attn_status attn_compile_prefill(const attn_prefill_variant *v,
                                               const char *arch,
                                               attn_compiled **out);
/* The kernel symbol, CUDA source and cubin size of a compiled variant, valid
 * until it is destroyed; "" (0) for a handle that is not live, with
 * attn_last_error() saying why. */
ATTN_C_EXPORT const char *
attn_compiled_kernel_name(const attn_compiled *compiled);
ATTN_C_EXPORT const char *attn_compiled_source(const attn_compiled *compiled);
ATTN_C_EXPORT size_t attn_compiled_cubin_size(const attn_compiled *compiled);
ATTN_C_EXPORT attn_status attn_compiled_destroy(attn_compiled *compiled);

/*===--- Shared argument pieces
 * --------------------------------------------===*/

/* One layer of a paged cache (the layout comment above); k and v are the
 * two halves of the layer's buffer, or any two buffers of that shape. */
typedef struct attn_paged_kv {
  const void *k, *v;
  attn_dtype dtype;
  int num_kv_heads, head_dim, page_size;
  attn_layout layout;
  int64_t num_pages;
  int64_t page_stride; /* elements between pages; 0: dense */
  /* FP8: dequantization scales, [1] or [num_kv_heads] f32 each (stored
   * value = x / scale); NULL for 16-bit caches. */
  const float *k_scale, *v_scale;
  int num_kv_scales;
} attn_paged_kv;

/* The per-query-head f32 tables a variant's knobs ask for ([num_q_heads]
 * each; set exactly those the variant has) and the aux tables its
 * score_mod / mask_mod regions read, in the order of the regions' aux
 * arguments (row-major device data with their dimensions). */
#define ATTN_MAX_AUX_TABLES 4
typedef struct attn_aux_table {
  const void *data;
  int32_t dims[3];
} attn_aux_table;
typedef struct attn_head_tables {
  const float *alibi_slopes;
  const float *sinks;
  const float *q_scale; /* fp8_query */
  attn_aux_table aux[ATTN_MAX_AUX_TABLES];
} attn_head_tables;

/*===--- Paged decode
 * ------------------------------------------------------===*/

typedef struct attn_decode attn_decode;

/* A decode kernel with a workspace for batches of up to max_batch requests. */
ATTN_C_EXPORT attn_status attn_decode_create(attn_context *context,
                                             const attn_decode_variant *v,
                                             int max_batch, attn_decode **out);
ATTN_C_EXPORT attn_status attn_decode_destroy(attn_decode *decode);
/* Plans a batch from the host lengths (tokens cached per request, new ones
 * included). */
ATTN_C_EXPORT attn_status attn_decode_plan(attn_decode *decode,
                                           const int32_t *seq_lens /* host */,
                                           int batch, int for_graph,
                                           void *stream);

typedef struct attn_decode_args {
  uint32_t struct_size;
  const void *q; /* [num_tokens, num_q_heads, head_dim], num_tokens = batch *
                    query_len */
  int64_t q_stride_token;
  void *out; /* like q */
  int64_t out_stride_token;
  float *lse; /* [num_tokens, num_q_heads] iff write_lse */
  attn_paged_kv cache;
  const int32_t *page_tables; /* [batch, page_table_stride] */
  int page_table_stride;
  const int32_t *seq_lens; /* [batch] device copy of the planned lengths */
  attn_head_tables tables;
  int first_request; /* modifier regions' request index of request 0 */
} attn_decode_args;

/* Launches the planned batch (the last attn_decode_plan). */
ATTN_C_EXPORT attn_status attn_decode_run(attn_decode *decode,
                                          const attn_decode_args *args,
                                          void *stream);

/*===--- Ragged and paged prefill
 * ------------------------------------------===*/

typedef struct attn_prefill attn_prefill;

/* A prefill kernel (ragged or paged, as the variant says) with a workspace
 * for up to max_batch requests and max_q_tokens query rows. */
ATTN_C_EXPORT attn_status attn_prefill_create(attn_context *context,
                                              const attn_prefill_variant *v,
                                              int max_batch,
                                              int64_t max_q_tokens,
                                              attn_prefill **out);
ATTN_C_EXPORT attn_status attn_prefill_destroy(attn_prefill *prefill);
/* Ragged: cu_seqlens_q and cu_seqlens_kv, batch + 1 host offsets each. */
ATTN_C_EXPORT attn_status attn_prefill_plan(attn_prefill *prefill,
                                            const int32_t *cu_seqlens_q,
                                            const int32_t *cu_seqlens_kv,
                                            int batch, int for_graph,
                                            void *stream);
/* Paged: cu_seqlens_q (batch + 1) and each request's cached tokens, new
 * rows included (batch), host arrays. */
ATTN_C_EXPORT attn_status attn_prefill_plan_paged(attn_prefill *prefill,
                                                  const int32_t *cu_seqlens_q,
                                                  const int32_t *seq_lens,
                                                  int batch, int for_graph,
                                                  void *stream);

typedef struct attn_prefill_args {
  uint32_t struct_size;
  /* [num_q_tokens, num_q_heads, head_dim + rope_dim] (e4m3 with
   * fp8_query) */
  const void *q;
  int64_t q_stride_token;
  void *out; /* [num_q_tokens, num_q_heads, head_dim] in q_type */
  int64_t out_stride_token;
  float *lse; /* [num_q_tokens, num_q_heads] iff write_lse */
  /* Ragged: [num_kv_tokens, num_kv_heads, head_dim] rows (in kv_type; k's
   * head_dim + rope_dim), with FP8 scales in k_scale / v_scale. */
  const void *k, *v;
  int64_t k_stride_token, v_stride_token;
  const float *k_scale, *v_scale;
  int num_kv_scales;
  /* Paged: the cache (its scales inside) and page tables. */
  attn_paged_kv cache;
  const int32_t *page_tables;
  int page_table_stride;
  attn_head_tables tables;
} attn_prefill_args;

ATTN_C_EXPORT attn_status attn_prefill_run(attn_prefill *prefill,
                                           const attn_prefill_args *args,
                                           void *stream);

/*===--- Mixed prefill + decode batches
 * ------------------------------------===*/

/* A paged prefill variant's prefill kernel with its decode twin: the first
 * num_prefills requests are prefills (vLLM's order), every later one a
 * decode of one query row. */
typedef struct attn_mixed_batch attn_mixed_batch;
ATTN_C_EXPORT attn_status attn_mixed_batch_create(attn_context *context,
                                                  const attn_prefill_variant *v,
                                                  int max_batch,
                                                  int64_t max_q_tokens,
                                                  attn_mixed_batch **out);
ATTN_C_EXPORT attn_status attn_mixed_batch_destroy(attn_mixed_batch *mixed);
ATTN_C_EXPORT attn_status attn_mixed_batch_plan(attn_mixed_batch *mixed,
                                                const int32_t *cu_seqlens_q,
                                                const int32_t *seq_lens,
                                                int batch, int num_prefills,
                                                int for_graph, void *stream);
/* args as for a paged prefill (k, v unused); seq_lens [batch] on the
 * device. */
ATTN_C_EXPORT attn_status attn_mixed_batch_run(attn_mixed_batch *mixed,
                                               const attn_prefill_args *args,
                                               const int32_t *seq_lens,
                                               void *stream);

/*===--- merge_states and cascade
 * ------------------------------------------===*/

#define ATTN_MAX_MERGE_STATES 16
typedef struct attn_merge_states attn_merge_states;
ATTN_C_EXPORT attn_status attn_merge_states_create(
    attn_context *context, const attn_merge_states_variant *v,
    attn_merge_states **out);
ATTN_C_EXPORT attn_status attn_merge_states_destroy(attn_merge_states *merge);

typedef struct attn_merge_states_args {
  uint32_t struct_size;
  int64_t num_tokens;
  int num_states; /* 2 to ATTN_MAX_MERGE_STATES */
  const void
      *outs[ATTN_MAX_MERGE_STATES]; /* [num_tokens, num_heads, head_dim] */
  const float
      *lses[ATTN_MAX_MERGE_STATES]; /* [num_tokens, num_heads], natural log */
  int64_t states_stride_token;
  void *out; /* may be outs[i] (in place) */
  int64_t out_stride_token;
  float *lse; /* may be NULL */
} attn_merge_states_args;

ATTN_C_EXPORT attn_status attn_merge_states_run(attn_merge_states *merge,
                                                const attn_merge_states_args *a,
                                                void *stream);

/*===--- MLA decode ------------------------------------------------------===*/

/* The plan/run split of attn_decode: plan from host lengths (once per
 * step), run per layer (graph-capturable). */
typedef struct attn_mla_decode attn_mla_decode;
ATTN_C_EXPORT attn_status
attn_mla_decode_create(attn_context *context, const attn_mla_decode_variant *v,
                       int max_batch, attn_mla_decode **out);
ATTN_C_EXPORT attn_status attn_mla_decode_destroy(attn_mla_decode *mla);
ATTN_C_EXPORT attn_status attn_mla_decode_plan(attn_mla_decode *mla,
                                               const int32_t *seq_lens,
                                               int batch, int for_graph,
                                               void *stream);

/* Strides in elements; 0: dense. kpe NULL: the cache is one tensor
 * [pages, page_size, kv_lora_rank + rope_dim] (vLLM, FlashMLA) whose rows
 * hold the RoPE key after the latent; else ckv [pages, page_size,
 * kv_lora_rank] and kpe [pages, page_size, rope_dim] (FlashInfer). */
typedef struct attn_mla_decode_args {
  uint32_t struct_size;
  const void *q_nope; /* [batch * query_len, num_q_heads, kv_lora_rank] */
  int64_t q_nope_stride_token;
  const void *q_rope; /* [batch * query_len, num_q_heads, rope_dim] */
  int64_t q_rope_stride_token;
  void *out; /* like q_nope */
  int64_t out_stride_token;
  float *lse; /* [batch * query_len, num_q_heads] iff write_lse */
  const void *ckv;
  int64_t ckv_page_stride, ckv_token_stride;
  const void *kpe;
  int64_t kpe_page_stride, kpe_token_stride;
  int64_t num_pages;
  const int32_t *page_tables; /* [batch, page_table_stride] */
  int page_table_stride;
  const float *kv_scale; /* e4m3 cache: [1] */
} attn_mla_decode_args;

/* Launches the planned batch (the last attn_mla_decode_plan). */
ATTN_C_EXPORT attn_status attn_mla_decode_run(attn_mla_decode *mla,
                                              const attn_mla_decode_args *args,
                                              void *stream);

/* Cascade decode: requests sharing prefixes read each shared level once per
 * group (runtime/kernels/Cascade.h). Level l's groups: group g holds
 * requests [group_starts[g], group_starts[g + 1]) and shares kv_lens[g]
 * tokens beyond the levels before (a multiple of the page size). */
typedef struct attn_cascade attn_cascade;
typedef struct attn_cascade_level {
  const int32_t *group_starts; /* host, num_groups + 1 */
  const int32_t *kv_lens;      /* host, num_groups */
  int num_groups;
} attn_cascade_level;

ATTN_C_EXPORT attn_status attn_cascade_create(attn_context *context,
                                              const attn_decode_variant *v,
                                              int max_batch, int max_levels,
                                              attn_cascade **out);
ATTN_C_EXPORT attn_status attn_cascade_destroy(attn_cascade *cascade);
/* suffix_lens: each request's tokens past every shared level (host). */
ATTN_C_EXPORT attn_status attn_cascade_plan(
    attn_cascade *cascade, const attn_cascade_level *levels, int num_levels,
    const int32_t *suffix_lens, int batch, int for_graph, void *stream);

#define ATTN_MAX_CASCADE_LEVELS (ATTN_MAX_MERGE_STATES - 1)
typedef struct attn_cascade_args {
  uint32_t struct_size;
  const void *q;
  int64_t q_stride_token; /* a multiple of 8 */
  void *out;
  int64_t out_stride_token;
  float *lse; /* may be NULL */
  attn_paged_kv cache;
  /* Level l's page tables: [num_groups, level_page_table_strides[l]]. */
  const int32_t *level_page_tables[ATTN_MAX_CASCADE_LEVELS];
  int level_page_table_strides[ATTN_MAX_CASCADE_LEVELS];
  const int32_t *suffix_page_tables; /* [batch, suffix_page_table_stride] */
  int suffix_page_table_stride;
} attn_cascade_args;

ATTN_C_EXPORT attn_status attn_cascade_run(attn_cascade *cascade,
                                           const attn_cascade_args *args,
                                           void *stream);

/*===--- Writing the cache: append-KV, copy, swap, advance_step
 * -------------===*/

typedef struct attn_append_kv attn_append_kv;
ATTN_C_EXPORT attn_status attn_append_kv_create(attn_context *context,
                                                const attn_append_kv_variant *v,
                                                attn_append_kv **out);
ATTN_C_EXPORT attn_status attn_append_kv_destroy(attn_append_kv *append);

typedef struct attn_append_kv_args {
  uint32_t struct_size;
  const void *k, *v; /* [num_tokens, num_kv_heads, head_dim] */
  int64_t num_tokens;
  int64_t k_stride_token, v_stride_token;
  attn_paged_kv cache; /* written through; FP8 caches quantize by its scales */
  const int64_t
      *slot_mapping; /* [num_tokens] page * page_size + offset; < 0 skips */
} attn_append_kv_args;

ATTN_C_EXPORT attn_status attn_append_kv_run(attn_append_kv *append,
                                             const attn_append_kv_args *args,
                                             void *stream);

/* copy_pages and advance_step kernels (one per arch). */
typedef struct attn_cache_ops attn_cache_ops;
ATTN_C_EXPORT attn_status attn_cache_ops_create(attn_context *context,
                                                attn_cache_ops **out);
ATTN_C_EXPORT attn_status attn_cache_ops_destroy(attn_cache_ops *ops);

/* Every layer of a paged cache: layer_table is a device array of
 * num_layers uint64 addresses, each the start of a layer's
 * [2, num_pages, ...] buffer (the layout comment above). */
typedef struct attn_cache_layers {
  uint32_t struct_size;
  const uint64_t *layer_table;
  int num_layers;
  int64_t num_pages;
  int page_size, num_kv_heads, head_dim;
  attn_dtype dtype;
  attn_layout layout;
} attn_cache_layers;

/* vLLM's copy_blocks: pairs (src, dst) of pages copied in K and V of every
 * layer in one launch. host_pairs: [num_pairs, 2] int64 on the host
 * (checked: in range, no destination written twice or also read; so at
 * most cache->num_pages pairs). */
ATTN_C_EXPORT attn_status attn_copy_blocks(attn_cache_ops *ops,
                                           const attn_cache_layers *cache,
                                           const int64_t *host_pairs,
                                           int64_t num_pairs, void *stream);
/* The same from device pairs (graph-capturable; unchecked: they must obey
 * the rules above). */
ATTN_C_EXPORT attn_status attn_copy_blocks_device(
    attn_cache_ops *ops, const attn_cache_layers *cache,
    const int64_t *device_pairs, int64_t num_pairs, void *stream);

/* vLLM's swap_blocks for one buffer: page src of `src` to page dst of
 * `dst` (device or pinned host memory, each num_*_pages pages of
 * page_bytes; page ids are int32, as in every attn cache), host pairs
 * [num_pairs, 2], at most num_dst_pages of them (more would write a page
 * twice); consecutive pairs are coalesced into one copy. Asynchronous on
 * stream. */
ATTN_C_EXPORT attn_status attn_swap_blocks(const void *src,
                                           int64_t num_src_pages, void *dst,
                                           int64_t num_dst_pages,
                                           int64_t page_bytes,
                                           const int64_t *host_pairs,
                                           int64_t num_pairs, void *stream);

/* Multi-step decoding: moves a decode batch one token forward in place
 * (runtime/serving/CacheOps.h, AdvanceStepArgs), and the planned work of
 * `decode` with it when given (NULL: none). */
typedef struct attn_advance_step_args {
  uint32_t struct_size;
  int num_queries, num_seqs, page_size;
  int32_t *seq_lens;          /* [num_seqs] */
  int64_t *slot_mapping;      /* [num_seqs] out */
  const int32_t *page_tables; /* [num_queries, page_table_stride] */
  int page_table_stride;
  int64_t *input_tokens;            /* optional, [num_seqs] out */
  const int64_t *sampled_token_ids; /* with input_tokens, [num_queries] */
  int64_t *positions;               /* optional, [num_seqs] out */
} attn_advance_step_args;

ATTN_C_EXPORT attn_status attn_advance_step(attn_cache_ops *ops,
                                            const attn_advance_step_args *args,
                                            attn_decode *decode, void *stream);

/*===--- The metadata builder
 * ----------------------------------------------===*/

/* One request of a step (runtime/serving/AttentionMetadata.h): prefills
 * first, then decodes of one query length. */
typedef struct attn_scheduled_request {
  int is_prefill;
  int32_t query_len;         /* new tokens this step */
  int32_t context_len;       /* tokens cached before this step */
  const int32_t *page_table; /* host, num_pages entries covering the tokens */
  int32_t num_pages;
} attn_scheduled_request;

typedef struct attn_metadata_limits {
  uint32_t struct_size;
  int page_size;
  int64_t num_pages; /* 0: page ids unchecked */
  int max_batch;
  int64_t max_tokens;
  int max_pages_per_seq;
} attn_metadata_limits;

/* The step's arrays, on the host (pointers into the builder, valid until
 * its next build) and on the device (fixed addresses across builds). */
typedef struct attn_metadata {
  uint32_t struct_size;
  int num_prefills, num_decodes;
  int64_t num_prefill_tokens, num_decode_tokens;
  int32_t max_query_len, max_decode_query_len;
  int32_t max_prefill_seq_len, max_decode_seq_len;
  int page_table_stride;
  int batch;
  const int32_t *seq_lens, *context_lens, *query_start_loc, *seq_start_loc,
      *page_tables;            /* host */
  const int64_t *slot_mapping; /* host, [num_tokens] */
  const int32_t *device_seq_lens, *device_context_lens, *device_query_start_loc,
      *device_seq_start_loc, *device_page_tables;
  const int64_t *device_slot_mapping; /* [max_tokens], -1 beyond the step */
} attn_metadata;

typedef struct attn_metadata_builder attn_metadata_builder;
ATTN_C_EXPORT attn_status attn_metadata_builder_create(
    const attn_metadata_limits *limits, attn_metadata_builder **out);
ATTN_C_EXPORT attn_status
attn_metadata_builder_destroy(attn_metadata_builder *builder);
/* Builds a step (errors name the request and the rule) and uploads it on
 * stream; *out's struct_size must be set. */
ATTN_C_EXPORT attn_status attn_metadata_builder_build(
    attn_metadata_builder *builder, const attn_scheduled_request *requests,
    int num_requests, void *stream, attn_metadata *out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ATTN_C_H */
