//===- AttnOps.td - attn dialect ops -----------------------*- tablegen -*-===//
//
// The attention ops: ragged prefill, paged prefill, paged decode, append to a
// paged KV cache, and merging partial states. Variant knobs are attributes and
// optional operands shared by the attention ops, not separate ops.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_DIALECT_IR_ATTNOPS_TD
#define ATTN_DIALECT_IR_ATTNOPS_TD

include "dialect/IR/AttnBase.td"
include "dialect/IR/AttnAttrs.td"
include "dialect/IR/AttnTypes.td"
include "dialect/IR/AttnInterfaces.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

/// Attention sinks: one learned logit per q head, in the units of the scaled
/// scores, that joins every row's softmax denominator and contributes no
/// value: out = sum_j e^{s_j} v_j / (e^{sink_h} + sum_j e^{s_j}); the LSE
/// includes it (docs/semantics.md).
def Attn_SinkVector : TensorRankOf<[F32], [1]>;

/// Score modifiers every attention op takes. Absent `mask` means none; absent
/// `scale` means 1/sqrt(head_dim); `softcap` c replaces a score s by
/// c * tanh(s / c) (Gemma 2, Grok).
/// Tables a score_mod or mask_mod region reads (attn.aux_load): small
/// per-head, per-request or per-token tensors of f32 or i32, rank 1-3.
def Attn_AuxTensor : TensorRankOf<[F32, I32], [1, 2, 3]>;

/// The programmable modifiers of an attention op (docs/semantics.md,
/// "Programmable variants"): an optional `score_mod` region, which maps each
/// scaled score to a new one, and an optional `mask_mod` region, which says
/// whether a query may see a key. Both take (request, q_pos, k_pos, q_head,
/// kv_head) as i32 (score_mod takes the f32 score first), then one argument
/// per `aux` operand, and yield f32 / i1 through attn.yield.
defvar Attn_ModifierRegions = (region MaxSizedRegion<1>:$score_mod,
                                      MaxSizedRegion<1>:$mask_mod);

/// `batch_invariant`: a request's result does not depend on the rest of its
/// batch (docs/semantics.md, "Batch invariance").
defvar Attn_ScoreModAttrs = (ins
  OptionalAttr<Attn_MaskAttr>:$mask,
  DefaultValuedAttr<Attn_AttentionKindAttr,
                    "::attn::AttentionKind::Decoder">:$kind,
  OptionalAttr<F32Attr>:$scale,
  OptionalAttr<F32Attr>:$softcap,
  UnitAttr:$batch_invariant);

/// What every attention op takes after its own operands, in this order:
/// FP8 k/v scales, the per-query-head tables of templates/attn/
/// variant_knobs.h (ALiBi slopes, sinks, an e4m3 q's scales), the aux
/// tables of its modifier regions; and how they are spelled.
defvar Attn_AttentionOptionalOperands = (ins
    Optional<Attn_ScaleVector>:$k_scale,
    Optional<Attn_ScaleVector>:$v_scale,
    Optional<Attn_SlopeVector>:$alibi_slopes,
    Optional<Attn_SinkVector>:$sinks,
    Optional<Attn_ScaleVector>:$q_scale,
    Variadic<Attn_AuxTensor>:$aux);
defvar Attn_AttentionOptionalFormat = [{
    (`kv_scales` `(` $k_scale^ `,` $v_scale `:` type($k_scale) `,`
                    type($v_scale) `)`)?
    (`alibi` `(` $alibi_slopes^ `:` type($alibi_slopes) `)`)?
    (`sinks` `(` $sinks^ `:` type($sinks) `)`)?
    (`q_scale` `(` $q_scale^ `:` type($q_scale) `)`)?
    (`aux` `(` $aux^ `:` type($aux) `)`)?
}];

/// An attention op: its own operands and attributes, then every attention
/// op's optional operands, score attributes, `out` (and optionally `lse`)
/// results, score_mod / mask_mod regions and the assembly around them.
/// `operandFormat` spells the op's own operands; `typeFormat` their types.
class Attn_AttentionOp<string mnemonic, dag operands, dag attrs,
                       string operandFormat, string typeFormat>
    : Attn_Op<mnemonic, [Pure, AttrSizedOperandSegments, IsolatedFromAbove,
                         DeclareOpInterfaceMethods<OpAsmOpInterface,
                             ["getAsmBlockArgumentNames", "getAsmResultNames"]>,
                         Attn_AttentionOpInterface]> {
  let arguments = !con(operands, Attn_AttentionOptionalOperands, attrs,
                       Attn_ScoreModAttrs);
  let results = (outs
    Attn_ActivationTensor:$out,
    Optional<Attn_LseTensor>:$lse);
  let regions = Attn_ModifierRegions;
  let hasRegionVerifier = 1;
  let assemblyFormat = !strconcat(operandFormat, Attn_AttentionOptionalFormat,
      [{ attr-dict `:` }], typeFormat, [{ `->` type($out)
      (`,` type($lse)^)? (`score_mod` $score_mod^)? (`mask_mod` $mask_mod^)?
  }]);
}

//===----------------------------------------------------------------------===//
// attn.prefill
//===----------------------------------------------------------------------===//

def Attn_PrefillOp : Attn_AttentionOp<"prefill",
    (ins Attn_QueryTensor:$q, Attn_KVRowsTensor:$k, Attn_KVRowsTensor:$v,
         Attn_IndexVector:$cu_seqlens_q, Attn_IndexVector:$cu_seqlens_kv),
    (ins OptionalAttr<Attn_PrefillScheduleAttr>:$schedule,
         UnitAttr:$fp8_compute),
    [{ $q `,` $k `,` $v `,` $cu_seqlens_q `,` $cu_seqlens_kv }],
    [{ type($q) `,` type($k) `,` type($v) `,` type($cu_seqlens_q) `,`
       type($cu_seqlens_kv) }]> {
  let summary = "attention over ragged (variable-length) q/k/v";
  let description = [{
    Each request `b` owns query rows `cu_seqlens_q[b] .. cu_seqlens_q[b+1]` and
    key/value rows `cu_seqlens_kv[b] .. cu_seqlens_kv[b+1]`. Decoder self
    attention is usually causal; encoder attention is bidirectional; cross
    attention reads keys and values of the encoder sequences. Query heads are
    grouped over KV heads (MHA, GQA, MQA). The optional second result is the
    log-sum-exp of each row's scores. k and v are of q's type, or FP8
    (e4m3, e5m2) with `kv_scales`: one dequantization scale per tensor or
    one per KV head (stored value = x / scale). v (and so the output) may
    have fewer dims per head than q and k, as MLA's prefill has (q/k 192: 128
    plus a 64-dim RoPE part; v 128); such k and v are 16-bit.
    `fp8_compute` and an e4m3
    `q` with its `q_scale` are as on attn.paged_prefill (FP8 k/v only).
    `schedule` is how the kernel is laid out on the GPU;
    attn-select-schedule picks one unless it is already set (pinned).

    ```mlir
    %o = attn.prefill %q, %k, %v, %cu_q, %cu_kv {mask = #attn.mask<causal>}
        : tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
          tensor<?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// attn.paged_prefill
//===----------------------------------------------------------------------===//

def Attn_PagedPrefillOp : Attn_AttentionOp<"paged_prefill",
    (ins Attn_QueryTensor:$q, Attn_PagedKVType:$cache,
         Attn_IndexVector:$cu_seqlens_q, Attn_PageTable:$page_tables,
         Attn_IndexVector:$seq_lens),
    (ins OptionalAttr<Attn_PrefillScheduleAttr>:$schedule,
         UnitAttr:$fp8_compute),
    [{ $q `,` $cache `,` $cu_seqlens_q `,` $page_tables `,` $seq_lens }],
    [{ type($q) `,` qualified(type($cache)) `,` type($cu_seqlens_q) `,`
       type($page_tables) `,` type($seq_lens) }]> {
  let summary = "new tokens attending to their paged prefix and themselves";
  let description = [{
    Chunked prefill and prefix caching: request `b` has query rows
    `cu_seqlens_q[b] .. cu_seqlens_q[b+1]`, whose keys and values are already
    appended to the cache, and attends to all `seq_lens[b]` cached tokens
    (prefix plus new) through its row of `page_tables`. With a causal mask the
    queries are aligned to the last `q_len` keys. An FP8 cache needs
    `kv_scales`: one dequantization scale per tensor or one per KV head.
    `fp8_compute` (FP8 caches only) runs Q K^T and P V as FP8 tensor-core
    MMAs: the kernel quantizes each q row to e4m3 with its own scale, P is
    e4m3 and O is accumulated in fp32 outside the MMAs (docs/semantics.md,
    "FP8 compute"); it needs arch sm_90a and head dim 128 or 256. Over an
    e4m3 `q` the caller quantized, `q_scale` holds its dequantization
    scale per q head and the kernel uses q as given (vLLM's quantized
    query); the result is then f16 or bf16.
    `schedule` is how the kernel (the prefill template, reading K/V pages)
    is laid out on the GPU; attn-select-schedule picks one unless it is
    already set (pinned).

    ```mlir
    %o = attn.paged_prefill %q, %cache, %cu_q, %page_tables, %seq_lens
        {mask = #attn.mask<causal>}
        : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
          tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// attn.decode
//===----------------------------------------------------------------------===//

def Attn_DecodeOp : Attn_AttentionOp<"decode",
    (ins Attn_QueryTensor:$q, Attn_PagedKVType:$cache,
         Attn_PageTable:$page_tables, Attn_IndexVector:$seq_lens),
    (ins DefaultValuedAttr<I64Attr, "1">:$query_len,
         OptionalAttr<Attn_DecodeScheduleAttr>:$schedule),
    [{ $q `,` $cache `,` $page_tables `,` $seq_lens }],
    [{ type($q) `,` qualified(type($cache)) `,` type($page_tables) `,`
       type($seq_lens) }]> {
  let summary = "paged decode: a few new query tokens per request";
  let description = [{
    Each request contributes `query_len` query rows (1, or 1 + draft tokens
    for speculative decoding; causal among themselves when the mask is causal)
    and attends to its `seq_lens[b]` cached tokens through its row of
    `page_tables`. An FP8 cache needs `kv_scales`: one dequantization scale
    per tensor or one per KV head. `schedule` is how the kernel is laid out
    on the GPU; attn-select-schedule picks one unless it is already set
    (pinned).

    ```mlir
    %o = attn.decode %q, %cache, %page_tables, %seq_lens
        : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
          tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// attn.mla_decode
//===----------------------------------------------------------------------===//

def Attn_MlaDecodeOp : Attn_Op<"mla_decode", [Pure, AttrSizedOperandSegments]> {
  let summary = "absorbed multi-head latent attention decode (DeepSeek, Kimi, GLM)";
  let description = [{
    Every query head attends to one shared cache row per token: the latent
    `ckv` (kv_lora_rank values, the cache's head dim) and, with `rope`, the
    decoupled RoPE key `kpe`. A query row's score against token `j` is
    `scale * (q_nope . ckv[j] + q_rope . kpe[j])`; the output is the
    softmax-weighted sum of the latent rows `ckv[j]`, so it has
    kv_lora_rank dims per head (the values are the latent: there is no V
    cache). `scale` defaults to `1/sqrt(kv_lora_rank + rope_dim)`; models
    set their own (DeepSeek: `1/sqrt(192)` times a YaRN factor). Each
    request contributes `query_len` query tokens (1, or more with
    multi-token prediction; causal among themselves with
    `mask = #attn.mask<causal>`) and attends to its `seq_lens[b]` cached
    tokens through its row of `page_tables`; both caches are paged alike
    and have one KV head. An e4m3 cache needs `kv_scale` (one f32, stored
    value = x / scale, for the latent and RoPE parts). The optional second
    result is each row's log-sum-exp (natural log). `batch_invariant`: a
    request's result does not depend on the rest of its batch
    (docs/semantics.md, "Batch invariance").

    ```mlir
    %o = attn.mla_decode %q_nope, %ckv, %page_tables, %seq_lens
        rope(%q_rope, %kpe : tensor<?x16x64xbf16>, !attn.paged_kv<1x64xbf16, page_size = 64, layout = nhd>)
        {scale = 0.0721 : f32}
        : tensor<?x16x512xbf16>, !attn.paged_kv<1x512xbf16, page_size = 64, layout = nhd>,
          tensor<?x?xi32>, tensor<?xi32> -> tensor<?x16x512xbf16>
    ```
  }];
  let arguments = (ins Attn_ActivationTensor:$q_nope,
      Attn_PagedKVType:$ckv, Attn_PageTable:$page_tables,
      Attn_IndexVector:$seq_lens,
      Optional<Attn_ActivationTensor>:$q_rope,
      Optional<Attn_PagedKVType>:$kpe,
      Optional<Attn_ScaleVector>:$kv_scale,
      DefaultValuedAttr<I64Attr, "1">:$query_len,
      OptionalAttr<Attn_MaskAttr>:$mask,
      OptionalAttr<F32Attr>:$scale,
      OptionalAttr<Attn_DecodeScheduleAttr>:$schedule,
      UnitAttr:$batch_invariant);
  let results = (outs Attn_ActivationTensor:$out,
                      Optional<Attn_LseTensor>:$lse);
  let assemblyFormat = [{
    $q_nope `,` $ckv `,` $page_tables `,` $seq_lens
    (`rope` `(` $q_rope^ `,` $kpe `:` type($q_rope) `,` qualified(type($kpe))
            `)`)?
    (`kv_scale` `(` $kv_scale^ `:` type($kv_scale) `)`)?
    attr-dict `:` type($q_nope) `,` qualified(type($ckv)) `,`
    type($page_tables) `,` type($seq_lens) `->` type($out) (`,` type($lse)^)?
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// attn.yield, attn.aux_load: inside score_mod and mask_mod
//===----------------------------------------------------------------------===//

def Attn_YieldOp : Attn_Op<"yield", [Pure, Terminator, ReturnLike,
    ParentOneOf<["PrefillOp", "PagedPrefillOp", "DecodeOp"]>]> {
  let summary = "the result of a score_mod (f32) or mask_mod (i1) region";
  let arguments = (ins AnyTypeOf<[F32, I1]>:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
  // Its type is checked against the region it ends (verifyModifiers).
  let hasVerifier = 0;
}

def Attn_AuxLoadOp : Attn_Op<"aux_load", [Pure,
    TypesMatchWith<"result is the table's element type", "table", "result",
                   "::llvm::cast<::mlir::TensorType>($_self).getElementType()">]> {
  let summary = "one element of an auxiliary table, inside a modifier region";
  let description = [{
    Reads `table[indices]`, where `table` is the region argument of one of
    the op's `aux` operands and there is one i32 index per dimension. An
    index outside the table's shape reads 0 on the GPU (never memory outside
    the table); the shapes a launch passes are checked by the runtime.

    ```mlir
    %b = attn.aux_load %bias[%head, %bucket] : tensor<32x32xf32>
    ```
  }];
  let arguments = (ins Attn_AuxTensor:$table, Variadic<I32>:$indices);
  let results = (outs AnyTypeOf<[F32, I32]>:$result);
  let assemblyFormat = "$table `[` $indices `]` attr-dict `:` type($table)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// attn.append_kv
//===----------------------------------------------------------------------===//

def Attn_AppendKVOp : Attn_Op<"append_kv", [Pure, AttrSizedOperandSegments,
    AllTypesMatch<["cache", "result"]>]> {
  let summary = "write new keys and values into a paged cache";
  let description = [{
    Reshape-and-cache: row `t` of `k` and `v` goes to cache slot
    `slot_mapping[t]` (page `slot / page_size`, offset `slot % page_size`); a
    negative slot skips the row (padding). An FP8 cache quantizes with
    `kv_scales` (the stored value is `x / scale`).

    ```mlir
    %c1 = attn.append_kv %k, %v into %c0 at %slots
        : tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
          !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?xi64>
    ```
  }];
  let arguments = (ins
    Attn_ActivationTensor:$k,
    Attn_ActivationTensor:$v,
    Attn_PagedKVType:$cache,
    Attn_SlotMapping:$slot_mapping,
    Optional<Attn_ScaleVector>:$k_scale,
    Optional<Attn_ScaleVector>:$v_scale);
  let results = (outs Attn_PagedKVType:$result);
  let assemblyFormat = [{
    $k `,` $v `into` $cache `at` $slot_mapping
    (`kv_scales` `(` $k_scale^ `,` $v_scale `:` type($k_scale) `,`
                    type($v_scale) `)`)?
    attr-dict `:` type($k) `,` type($v) `,` qualified(type($cache)) `,`
    type($slot_mapping)
  }];
}

//===----------------------------------------------------------------------===//
// attn.merge_states
//===----------------------------------------------------------------------===//

def Attn_MergeStatesOp : Attn_Op<"merge_states", [Pure]> {
  let summary = "combine partial attention states by their log-sum-exp";
  let description = [{
    Given attention over N >= 2 disjoint key sets, as partial outputs and
    their LSEs `(out_i, lse_i)` (natural log, as every attention op writes
    it), returns attention over their union:
    `lse = log(sum_i exp(lse_i))`, `out = sum_i out_i * exp(lse_i - lse)`.
    A partial with LSE `-inf` saw no key and weighs nothing; when every
    partial has, the row's output is 0 and its LSE `-inf`. Split-KV
    merges, cascade attention over a shared prefix and context-parallel
    decode are built on it.

    ```mlir
    %o, %l = attn.merge_states %oa, %la, %ob, %lb
        : tensor<?x32x128xf32>, tensor<?x32xf32>
    ```

    The operands are (output, LSE) pairs, at most 16, all of the result
    types: outputs tokens x heads x head_dim in f16, bf16 or f32, LSEs
    tokens x heads in f32.
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$states);
  let results = (outs Attn_PartialTensor:$out, Attn_LseTensor:$lse);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The number of (output, LSE) pairs merged.
    unsigned getNumStates() { return getStates().size() / 2; }
    ::mlir::Value getStateOut(unsigned i) { return getStates()[2 * i]; }
    ::mlir::Value getStateLse(unsigned i) { return getStates()[2 * i + 1]; }
  }];
}

//===----------------------------------------------------------------------===//
// attn.kernel_launch
//===----------------------------------------------------------------------===//

def Attn_KernelLaunchOp : Attn_Op<"kernel_launch", [Pure]> {
  let summary = "a launch of one specialized kernel (lowered attn IR)";
  let description = [{
    What attn-lower-to-kernel turns `attn.decode`, `attn.prefill`,
    `attn.paged_prefill`, `attn.mla_decode` and `attn.append_kv` into: the
    kernel that runs the op, and nothing that codegen does not read.

    - `spec`: the full `attn::KernelSpec` (spec/KernelSpec.h), the
      compile-time parameters of the kernel: codegen emits its translation
      unit from this alone (`attn-translate --attn-to-cuda`, the JIT,
      attn-aot). The template, entry, launch-parameter struct and threads
      per CTA follow from it (`attn::kernelTemplate`).
    - `@kernel`: the extern "C" entry of that translation unit,
      `"attn_" + spec.uri()`; the verifier checks the two agree.

    Runtime values (softmax scale, soft-cap value, window size) are not
    here: the runtime takes them from the host's variant at launch.
    Operands and results are those of the lowered op, in its order, so the
    IR stays well typed.

    ```mlir
    %c1 = attn.kernel_launch @attn_append_kv_qbf16_kvbf16_h8x8_d128_p16nhd
        spec #attn.kernel_spec<kind = append_kv, arch = "sm_90a", q_type = bf16,
            kv_type = bf16, num_q_heads = 8, num_kv_heads = 8, head_dim = 128,
            page_size = 16, layout = nhd>
        (%k, %v, %c0, %slots) : (tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
           !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
           tensor<?xi64>) -> !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>
    ```
  }];
  let arguments = (ins
    FlatSymbolRefAttr:$kernel,
    Attn_KernelSpecAttr:$spec,
    Variadic<AnyType>:$args);
  let results = (outs Variadic<AnyType>:$outs);
  let assemblyFormat = [{
    $kernel `spec` qualified($spec) ` ` `(` $args `)` attr-dict `:`
    functional-type($args, $outs)
  }];
}

#endif // ATTN_DIALECT_IR_ATTNOPS_TD
