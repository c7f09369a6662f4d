//===- variant_knobs.h - the knobs of an attention variant, once -*- C++
//-*-===//
//
// The one list of the binary-changing knobs of attention kernels: an X-macro
// table (no include guard: include it after defining the macros you need;
// undefined ones are ignored). Host and device include it, so a knob added
// here appears at once in
//   - attn::KernelSpec (spec/KernelSpec.h): a bool member, its uri() tag,
//     equality, #attn.kernel_spec's text, the AOT manifest's JSON;
//   - the generated Config block (codegen/EmitCuda.cpp): `constexpr bool`;
//   - a per-query-head table's launch argument: the host's HeadTables
//     (attn/runtime/kernels/HeadTables.h), the argument checks, the kernels'
//     parameter structs (templates/attn/params.h), and the attn-aot key.
// What a knob does on the device lives in templates/attn/variant.cuh; its
// IR operand (a head table) in dialect/IR/AttnOps.td.
//
// ATTN_FLAG(member, name, cudaConstant)
//   A bool compiled into the kernel: KernelSpec::member; `name` wherever the
//   knob is named outside C++ (IR, JSON, the kernel name when set, kernel
//   keys, attn-aot configs, the C ABI's and Python's fields);
//   Config::cudaConstant.
// ATTN_HEAD_TABLE(flag, pointer, operand, accessor)
//   A [num_q_heads] f32 table the kernel reads when `flag` is set: the
//   launch argument `pointer` (host and device), the attention ops' optional
//   operand `operand` and its ODS getter `accessor`.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_FLAG
#define ATTN_FLAG(member, name, cudaConstant)
#endif
#ifndef ATTN_HEAD_TABLE
#define ATTN_HEAD_TABLE(flag, pointer, operand, accessor)
#endif

/// Causal among a request's queries (aligned to the end of its keys).
ATTN_FLAG(causal, "causal", kCausal)
/// Keys limited to `window_left` before the query's diagonal.
ATTN_FLAG(slidingWindow, "sliding_window", kSlidingWindow)
/// ALiBi: -slope[h] * |key - query| added to the scaled score.
ATTN_FLAG(alibi, "alibi", kAlibi)
/// Logit soft-cap: c * tanh(s / c).
ATTN_FLAG(softcap, "softcap", kSoftcap)
/// Attention sinks: a learned logit per q head that joins the softmax
/// denominator and adds no value (gpt-oss; vLLM's and FlashInfer's `sinks`).
ATTN_FLAG(sinks, "sinks", kSinks)
/// FP8 dequantization scales per KV head (else one per tensor).
ATTN_FLAG(perHeadKVScale, "per_head_kv_scale", kPerHeadKVScale)
/// Paged prefill on sm_90a: Q K^T and P V as FP8 MMAs (q and P in e4m3,
/// K and V in the cache's FP8 type; docs/semantics.md, "FP8 compute").
ATTN_FLAG(fp8Compute, "fp8_compute", kFP8Compute)
/// With fp8Compute: q arrives already quantized to e4m3, with one
/// dequantization scale per q head (vLLM's quantized query), instead of
/// in q_type (which is then the output's type) for the kernel to quantize.
ATTN_FLAG(fp8Query, "fp8_query", kFP8Query)
/// The log-sum-exp of each row is written too.
ATTN_FLAG(writeLse, "write_lse", kWriteLse)
/// Batch-invariant: a request's output and LSE do not depend on the other
/// requests of its batch (docs/semantics.md, "Batch invariance"): the
/// planners split its keys at positions fixed by its own length only.
ATTN_FLAG(batchInvariant, "batch_invariant", kBatchInvariant)

ATTN_HEAD_TABLE(alibi, alibiSlopes, "alibi_slopes", getAlibiSlopes)
ATTN_HEAD_TABLE(sinks, sinks, "sinks", getSinks)
ATTN_HEAD_TABLE(fp8Query, qScale, "q_scale", getQScale)

#undef ATTN_FLAG
#undef ATTN_HEAD_TABLE
