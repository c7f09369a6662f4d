// RUN: attn-opt %s --split-input-file --verify-diagnostics

// One case per verifier rule: each rejects something no attn kernel can run
// and names the operand or attribute at fault.

//===----------------------------------------------------------------------===//
// !attn.paged_kv
//===----------------------------------------------------------------------===//

// expected-error @+1 {{paged_kv head_dim 100 is not supported; expected a multiple of 8 from 32 to 512}}
func.func @kv_head_dim(%c: !attn.paged_kv<8x100xbf16, page_size = 16, layout = nhd>)

// -----

// expected-error @+1 {{paged_kv element type 'i8' is not allowed; expected f16, bf16, f8E4M3FN or f8E5M2}}
func.func @kv_element_type(%c: !attn.paged_kv<8x128xi8, page_size = 16, layout = nhd>)

// -----

// expected-error @+1 {{paged_kv page_size 512 is not supported; expected 1 to 256}}
func.func @kv_page_size(%c: !attn.paged_kv<8x128xbf16, page_size = 512, layout = nhd>)

// -----

// expected-error @+1 {{paged_kv must have 1 to 1024 kv heads, got 0}}
func.func @kv_no_heads(%c: !attn.paged_kv<0x128xbf16, page_size = 16, layout = nhd>)

// -----

// Head counts stay small ints: 2^32 heads would truncate to 0 downstream.
// expected-error @+1 {{paged_kv must have 1 to 1024 kv heads, got 4294967296}}
func.func @kv_huge_heads(%c: !attn.paged_kv<4294967296x128xbf16, page_size = 16, layout = nhd>)

// -----

// expected-error @+1 {{expected <kv_heads>x<head_dim>x<type>, got 3 dimensions}}
func.func @kv_rank(%c: !attn.paged_kv<2x8x128xbf16, page_size = 16, layout = nhd>)

// -----

//===----------------------------------------------------------------------===//
// #attn.mask
//===----------------------------------------------------------------------===//

// expected-error @+1 {{window_left must be from 0 to 2147483647, got -1}}
func.func @mask_negative_window() attributes {m = #attn.mask<causal, window_left = -1>}

// -----

// The kernels take the window as a 32-bit launch parameter: no silent
// truncation.
// expected-error @+1 {{window_left must be from 0 to 2147483647, got 4294967296}}
func.func @mask_huge_window() attributes {m = #attn.mask<causal, window_left = 4294967296>}

// -----

// expected-error @+1 {{a sliding window needs a causal mask}}
func.func @mask_window_not_causal() attributes {m = #attn.mask<none, window_left = 128>}

// -----

// The parameter is named for what it counts: the keys left of the diagonal.
// expected-error @+1 {{expected 'window_left'}}
func.func @mask_old_window_spelling() attributes {m = #attn.mask<causal, window = 128>}

// -----

//===----------------------------------------------------------------------===//
// Attention ops: shapes and heads
//===----------------------------------------------------------------------===//

func.func @element_type(%q: tensor<?x32x128xf32>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                        %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) {
  // expected-error @+1 {{'attn.decode' op operand #0 must be 3D tensor of 16-bit float or bfloat16 type or f8E4M3FN type values, but got 'tensor<?x32x128xf32>'}}
  %o = attn.decode %q, %c, %bt, %lens : tensor<?x32x128xf32>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xf32>
  return
}

// -----

func.func @page_table_type(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                            %bt: tensor<?x?xi64>, %lens: tensor<?xi32>) {
  // expected-error @+1 {{'attn.decode' op operand #2 must be 2D tensor of 32-bit signless integer values, but got 'tensor<?x?xi64>'}}
  %o = attn.decode %q, %c, %bt, %lens : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?x?xi64>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return
}

// -----

func.func @q_dynamic_heads(%q: tensor<?x?x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                           %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) {
  // expected-error @+1 {{'attn.decode' op q must have static head and head_dim sizes, got 'tensor<?x?x128xbf16>'}}
  %o = attn.decode %q, %c, %bt, %lens : tensor<?x?x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x?x128xbf16>
  return
}

// -----

func.func @q_head_dim(%q: tensor<?x8x100xbf16>, %k: tensor<?x8x128xbf16>, %cu: tensor<?xi32>) {
  // expected-error @+1 {{'attn.prefill' op q head_dim 100 is not supported; expected a multiple of 8 from 32 to 256}}
  %o = attn.prefill %q, %k, %k, %cu, %cu : tensor<?x8x100xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x100xbf16>
  return
}

// -----

func.func @heads_not_multiple(%q: tensor<?x12x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                              %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) {
  // expected-error @+1 {{'attn.decode' op q heads (12) must be a multiple of cache heads (8)}}
  %o = attn.decode %q, %c, %bt, %lens : tensor<?x12x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x12x128xbf16>
  return
}

// -----

func.func @decode_huge_q_heads(%q: tensor<?x4096x128xbf16>, %c: !attn.paged_kv<32x128xbf16, page_size = 16, layout = nhd>,
                               %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) {
  // expected-error @+1 {{'attn.decode' op q must have 1 to 1024 heads, got 4096}}
  %o = attn.decode %q, %c, %bt, %lens : tensor<?x4096x128xbf16>, !attn.paged_kv<32x128xbf16, page_size = 16, layout = nhd>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x4096x128xbf16>
  return
}

// -----

func.func @group_too_large(%q: tensor<?x256x64xbf16>, %k: tensor<?x1x64xbf16>, %cu: tensor<?xi32>) {
  // expected-error @+1 {{'attn.prefill' op q heads per kv head (256) exceeds the supported group size 128}}
  %o = attn.prefill %q, %k, %k, %cu, %cu : tensor<?x256x64xbf16>, tensor<?x1x64xbf16>, tensor<?x1x64xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x256x64xbf16>
  return
}

// -----

func.func @head_dim_mismatch(%q: tensor<?x32x64xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                             %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) {
  // expected-error @+1 {{'attn.decode' op q head_dim (64) must equal cache head_dim (128)}}
  %o = attn.decode %q, %c, %bt, %lens : tensor<?x32x64xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x64xbf16>
  return
}

// -----

func.func @out_type(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) {
  // expected-error @+1 {{'attn.decode' op out type 'tensor<?x32x128xf16>' must match q type 'tensor<?x32x128xbf16>'}}
  %o = attn.decode %q, %c, %bt, %lens : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xf16>
  return
}

// -----

func.func @lse_shape(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                     %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) {
  // expected-error @+1 {{'attn.decode' op lse must be q tokens x q heads, got 'tensor<?x8xf32>'}}
  %o, %l = attn.decode %q, %c, %bt, %lens : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>, tensor<?x8xf32>
  return
}

// -----

func.func @alibi_count(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                       %bt: tensor<?x?xi32>, %lens: tensor<?xi32>, %a: tensor<16xf32>) {
  // expected-error @+1 {{'attn.decode' op alibi_slopes must have one value per q head (32), got 16}}
  %o = attn.decode %q, %c, %bt, %lens alibi(%a : tensor<16xf32>) : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return
}

// -----

func.func @sinks_count(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>,
                       %cu: tensor<?xi32>, %s: tensor<8xf32>) {
  // expected-error @+1 {{'attn.prefill' op sinks must have one value per q head (32), got 8}}
  %o = attn.prefill %q, %k, %k, %cu, %cu sinks(%s : tensor<8xf32>) : tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Attention ops: masks and score modifiers
//===----------------------------------------------------------------------===//

func.func @cross_causal(%q: tensor<?x8x64xbf16>, %kv: tensor<?x8x64xbf16>, %cu: tensor<?xi32>) {
  // expected-error @+1 {{'attn.prefill' op cross attention cannot be causal: queries and keys come from different sequences}}
  %o = attn.prefill %q, %kv, %kv, %cu, %cu {kind = #attn.kind<cross>, mask = #attn.mask<causal>} : tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x64xbf16>
  return
}

// -----

func.func @encoder_causal(%q: tensor<?x8x64xbf16>, %cu: tensor<?xi32>) {
  // expected-error @+1 {{'attn.prefill' op encoder attention is bidirectional and cannot be causal}}
  %o = attn.prefill %q, %q, %q, %cu, %cu {kind = #attn.kind<encoder>, mask = #attn.mask<causal>} : tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x64xbf16>
  return
}

// -----

func.func @scale_not_positive(%q: tensor<?x8x64xbf16>, %cu: tensor<?xi32>) {
  // expected-error @+1 {{'attn.prefill' op scale must be positive and finite, got -1}}
  %o = attn.prefill %q, %q, %q, %cu, %cu {scale = -1.0 : f32} : tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x64xbf16>
  return
}

// -----

func.func @softcap_not_positive(%q: tensor<?x8x64xbf16>, %cu: tensor<?xi32>) {
  // expected-error @+1 {{'attn.prefill' op softcap must be positive and finite, got 0}}
  %o = attn.prefill %q, %q, %q, %cu, %cu {softcap = 0.0 : f32} : tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x64xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// KV cache element types and FP8 scales
//===----------------------------------------------------------------------===//

func.func @fp8_without_scales(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
                              %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) {
  // expected-error @+1 {{'attn.decode' op an FP8 cache ('f8E4M3FN') needs kv_scales}}
  %o = attn.decode %q, %c, %bt, %lens : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return
}

// -----

func.func @scales_without_fp8(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                              %bt: tensor<?x?xi32>, %lens: tensor<?xi32>, %s: tensor<1xf32>) {
  // expected-error @+1 {{'attn.decode' op kv_scales given, but the cache stores 'bf16', not FP8}}
  %o = attn.decode %q, %c, %bt, %lens kv_scales(%s, %s : tensor<1xf32>, tensor<1xf32>) : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return
}

// -----

func.func @scale_count(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xf8E5M2, page_size = 16, layout = nhd>,
                       %bt: tensor<?x?xi32>, %lens: tensor<?xi32>, %s: tensor<3xf32>) {
  // expected-error @+1 {{'attn.decode' op k_scale must have 1 element (per tensor) or 8 (one per kv head), got 3}}
  %o = attn.decode %q, %c, %bt, %lens kv_scales(%s, %s : tensor<3xf32>, tensor<3xf32>) : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xf8E5M2, page_size = 16, layout = nhd>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return
}

// -----

func.func @k_scale_alone(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
                         %bt: tensor<?x?xi32>, %lens: tensor<?xi32>, %s: tensor<1xf32>) {
  // expected-error @+1 {{'attn.decode' op k_scale and v_scale must be given together}}
  %o = "attn.decode"(%q, %c, %bt, %lens, %s) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0, 0, 0, 0>}> ({}, {}) : (tensor<?x32x128xbf16>, !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>, tensor<?x?xi32>, tensor<?xi32>, tensor<1xf32>) -> tensor<?x32x128xbf16>
  return
}

// -----

func.func @cache_dtype_mismatch(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xf16, page_size = 16, layout = nhd>,
                                %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) {
  // expected-error @+1 {{'attn.decode' op cache element type 'f16' must equal the q element type ('bf16') or be FP8}}
  %o = attn.decode %q, %c, %bt, %lens : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xf16, page_size = 16, layout = nhd>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// attn.decode
//===----------------------------------------------------------------------===//

func.func @page_tables_rows(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                             %bt: tensor<4x?xi32>, %lens: tensor<8xi32>) {
  // expected-error @+1 {{'attn.decode' op page_tables has 4 rows but seq_lens has 8 entries; both need one per request}}
  %o = attn.decode %q, %c, %bt, %lens : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<4x?xi32>, tensor<8xi32> -> tensor<?x32x128xbf16>
  return
}

// -----

func.func @decode_encoder(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                          %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) {
  // expected-error @+1 {{'attn.decode' op encoder attention has no decode phase}}
  %o = attn.decode %q, %c, %bt, %lens {kind = #attn.kind<encoder>} : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return
}

// -----

func.func @query_len_range(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                           %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) {
  // expected-error @+1 {{'attn.decode' op query_len must be from 1 to 16, got 17}}
  %o = attn.decode %q, %c, %bt, %lens {query_len = 17} : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return
}

// -----

func.func @decode_token_count(%q: tensor<6x32x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                              %bt: tensor<4x?xi32>, %lens: tensor<4xi32>) {
  // expected-error @+1 {{'attn.decode' op q has 6 tokens but 4 requests x query_len 2 = 8}}
  %o = attn.decode %q, %c, %bt, %lens {query_len = 2} : tensor<6x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<4x?xi32>, tensor<4xi32> -> tensor<6x32x128xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// attn.prefill
//===----------------------------------------------------------------------===//

func.func @kv_shape(%q: tensor<?x8x128xbf16>, %k: tensor<?x8x128xbf16>, %v: tensor<?x4x128xbf16>, %cu: tensor<?xi32>) {
  // expected-error @+1 {{'attn.prefill' op k 'tensor<?x8x128xbf16>' and v 'tensor<?x4x128xbf16>' must have the same tokens and heads, and v at most k's head_dim}}
  %o = attn.prefill %q, %k, %v, %cu, %cu : tensor<?x8x128xbf16>, tensor<?x8x128xbf16>, tensor<?x4x128xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x128xbf16>
  return
}

// -----

func.func @kv_element_type(%q: tensor<?x8x128xbf16>, %k: tensor<?x8x128xf16>, %cu: tensor<?xi32>) {
  // expected-error @+1 {{'attn.prefill' op k and v must both be of the output's element type ('bf16') or both FP8, got 'f16' and 'f16'}}
  %o = attn.prefill %q, %k, %k, %cu, %cu : tensor<?x8x128xbf16>, tensor<?x8x128xf16>, tensor<?x8x128xf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x128xbf16>
  return
}

// -----

func.func @cu_seqlens_too_short(%q: tensor<?x8x128xbf16>, %cu: tensor<1xi32>, %cu_kv: tensor<?xi32>) {
  // expected-error @+1 {{'attn.prefill' op cu_seqlens_q needs batch + 1 >= 2 entries, got 1}}
  %o = attn.prefill %q, %q, %q, %cu, %cu_kv : tensor<?x8x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>, tensor<1xi32>, tensor<?xi32> -> tensor<?x8x128xbf16>
  return
}

// -----

func.func @cu_seqlens_batch(%q: tensor<?x8x128xbf16>, %cu_q: tensor<3xi32>, %cu_kv: tensor<5xi32>) {
  // expected-error @+1 {{'attn.prefill' op cu_seqlens_q (3) and cu_seqlens_kv (5) must both have batch + 1 entries}}
  %o = attn.prefill %q, %q, %q, %cu_q, %cu_kv : tensor<?x8x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>, tensor<3xi32>, tensor<5xi32> -> tensor<?x8x128xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// attn.paged_prefill
//===----------------------------------------------------------------------===//

func.func @paged_prefill_encoder(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                                 %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) {
  // expected-error @+1 {{'attn.paged_prefill' op encoder attention has no KV cache; use attn.prefill}}
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens {kind = #attn.kind<encoder>} : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return
}

// -----

func.func @paged_prefill_batch(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                               %cu: tensor<4xi32>, %bt: tensor<?x?xi32>, %lens: tensor<4xi32>) {
  // expected-error @+1 {{'attn.paged_prefill' op cu_seqlens_q has 4 entries but seq_lens has 4; expected seq_lens + 1}}
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<4xi32>, tensor<?x?xi32>, tensor<4xi32> -> tensor<?x32x128xbf16>
  return
}

// -----

func.func @paged_prefill_fp8_no_scales(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
                                       %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) {
  // expected-error @+1 {{'attn.paged_prefill' op an FP8 cache ('f8E4M3FN') needs kv_scales}}
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>, tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return
}

// -----

func.func @paged_prefill_scales_not_fp8(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                                        %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>, %s: tensor<1xf32>) {
  // expected-error @+1 {{'attn.paged_prefill' op kv_scales given, but the cache stores 'bf16', not FP8}}
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens kv_scales(%s, %s : tensor<1xf32>, tensor<1xf32>) : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return
}

// -----

func.func @paged_prefill_scale_length(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xf8E5M2, page_size = 16, layout = nhd>,
                                      %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>, %s: tensor<4xf32>) {
  // expected-error @+1 {{'attn.paged_prefill' op k_scale must have 1 element (per tensor) or 8 (one per kv head), got 4}}
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens kv_scales(%s, %s : tensor<4xf32>, tensor<4xf32>) : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xf8E5M2, page_size = 16, layout = nhd>, tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return
}

// -----

func.func @paged_prefill_cache_type(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xf16, page_size = 16, layout = nhd>,
                                    %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) {
  // expected-error @+1 {{'attn.paged_prefill' op cache element type 'f16' must equal the q element type ('bf16') or be FP8}}
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xf16, page_size = 16, layout = nhd>, tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return
}

// -----

func.func @paged_prefill_head_dim(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x64xbf16, page_size = 16, layout = nhd>,
                                  %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) {
  // expected-error @+1 {{'attn.paged_prefill' op q head_dim (128) must equal cache head_dim (64)}}
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens : tensor<?x32x128xbf16>, !attn.paged_kv<8x64xbf16, page_size = 16, layout = nhd>, tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return
}

// -----

func.func @paged_prefill_page_tables(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                                      %cu: tensor<?xi32>, %bt: tensor<3x?xi32>, %lens: tensor<2xi32>) {
  // expected-error @+1 {{'attn.paged_prefill' op page_tables has 3 rows but seq_lens has 2 entries; both need one per request}}
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?xi32>, tensor<3x?xi32>, tensor<2xi32> -> tensor<?x32x128xbf16>
  return
}

// -----

func.func @paged_prefill_cross_causal(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                                      %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) {
  // expected-error @+1 {{'attn.paged_prefill' op cross attention cannot be causal: queries and keys come from different sequences}}
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens {kind = #attn.kind<cross>, mask = #attn.mask<causal>} : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return
}

// -----

func.func @paged_prefill_schedule(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                                  %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) {
  // expected-error @+1 {{prefill_schedule block_n must be a multiple of 16 from 16 to 256, got 24}}
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens {schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 24, stages = 2>} : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// attn.append_kv
//===----------------------------------------------------------------------===//

func.func @append_kv_slot_type(%k: tensor<?x8x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                                %slots: tensor<?xi32>) {
  // expected-error @+1 {{'attn.append_kv' op operand #3 must be 1D tensor of 64-bit signless integer values, but got 'tensor<?xi32>'}}
  %r = attn.append_kv %k, %k into %c at %slots : tensor<?x8x128xbf16>, tensor<?x8x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?xi32>
  return
}

// -----

func.func @append_kv_types(%k: tensor<?x8x128xbf16>, %v: tensor<?x8x128xf16>,
                           %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, %slots: tensor<?xi64>) {
  // expected-error @+1 {{'attn.append_kv' op k 'tensor<?x8x128xbf16>' and v 'tensor<?x8x128xf16>' must have the same type}}
  %r = attn.append_kv %k, %v into %c at %slots : tensor<?x8x128xbf16>, tensor<?x8x128xf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?xi64>
  return
}

// -----

func.func @append_kv_heads(%k: tensor<?x4x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                           %slots: tensor<?xi64>) {
  // expected-error @+1 {{'attn.append_kv' op k and v must be tokens x 8 x 128 to match the cache, got 'tensor<?x4x128xbf16>'}}
  %r = attn.append_kv %k, %k into %c at %slots : tensor<?x4x128xbf16>, tensor<?x4x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?xi64>
  return
}

// -----

func.func @append_kv_slots(%k: tensor<4x8x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                           %slots: tensor<3xi64>) {
  // expected-error @+1 {{'attn.append_kv' op slot_mapping has 3 entries but k has 4 tokens}}
  %r = attn.append_kv %k, %k into %c at %slots : tensor<4x8x128xbf16>, tensor<4x8x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<3xi64>
  return
}

// -----

func.func @append_kv_fp8(%k: tensor<?x8x128xbf16>, %c: !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
                         %slots: tensor<?xi64>) {
  // expected-error @+1 {{'attn.append_kv' op an FP8 cache ('f8E4M3FN') needs kv_scales}}
  %r = attn.append_kv %k, %k into %c at %slots : tensor<?x8x128xbf16>, tensor<?x8x128xbf16>, !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>, tensor<?xi64>
  return
}

// -----

func.func @append_kv_dtype(%k: tensor<?x8x128xf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                           %slots: tensor<?xi64>) {
  // expected-error @+1 {{'attn.append_kv' op cache element type 'bf16' must equal the k element type ('f16') or be FP8}}
  %r = attn.append_kv %k, %k into %c at %slots : tensor<?x8x128xf16>, tensor<?x8x128xf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?xi64>
  return
}

// -----

//===----------------------------------------------------------------------===//
// attn.merge_states
//===----------------------------------------------------------------------===//

func.func @merge_lse_shape(%o: tensor<?x32x128xf32>, %l: tensor<?x16xf32>) {
  // expected-error @+1 {{'attn.merge_states' op lse must be tokens x heads of out ('tensor<?x32x128xf32>'), got 'tensor<?x16xf32>'}}
  %r, %s = attn.merge_states %o, %l, %o, %l : tensor<?x32x128xf32>, tensor<?x16xf32>
  return
}

// -----

func.func @merge_one_state(%o: tensor<?x32x128xf32>, %l: tensor<?x32xf32>) {
  // expected-error @+1 {{'attn.merge_states' op merges 2 to 16 (output, lse) pairs, got 2 operands}}
  %r, %s = attn.merge_states %o, %l : tensor<?x32x128xf32>, tensor<?x32xf32>
  return
}

// -----

func.func @merge_unpaired(%o: tensor<?x32x128xf32>, %l: tensor<?x32xf32>) {
  // expected-error @+1 {{expected (output, lse) pairs, got 3 operands}}
  %r, %s = attn.merge_states %o, %l, %o : tensor<?x32x128xf32>, tensor<?x32xf32>
  return
}

// -----

func.func @merge_fp8(%o: tensor<?x32x128xf8E4M3FN>, %l: tensor<?x32xf32>) {
  // expected-error @+1 {{'attn.merge_states' op result #0 must be 3D tensor of 16-bit float or bfloat16 type or 32-bit float values}}
  %r, %s = attn.merge_states %o, %l, %o, %l : tensor<?x32x128xf8E4M3FN>, tensor<?x32xf32>
  return
}

// -----

func.func @merge_head_dim(%o: tensor<?x32x100xf32>, %l: tensor<?x32xf32>) {
  // expected-error @+1 {{'attn.merge_states' op out head_dim 100 is not supported}}
  %r, %s = attn.merge_states %o, %l, %o, %l : tensor<?x32x100xf32>, tensor<?x32xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// #attn.decode_schedule, #attn.kernel_spec
//===----------------------------------------------------------------------===//

// expected-error @+1 {{decode_schedule warps must be from 1 to 32, got 0}}
func.func @schedule_warps() attributes {s = #attn.decode_schedule<warps = 0, stages = 4, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>}

// -----

// expected-error @+1 {{decode_schedule stages must be from 2 to 16, got 1 (the cp.async ring)}}
func.func @schedule_stages() attributes {s = #attn.decode_schedule<warps = 4, stages = 1, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>}

// -----

// Every field is bounded from above too, so nothing computed from a
// hand-written schedule overflows or takes NVRTC minutes.
// expected-error @+1 {{decode_schedule stages must be from 2 to 16, got 1000 (the cp.async ring)}}
func.func @schedule_stages_huge() attributes {s = #attn.decode_schedule<warps = 4, stages = 1000, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>}

// -----

// expected-error @+1 {{decode_schedule row_tiles must be from 1 to 8, got 268435456 (fp32 accumulators in registers)}}
func.func @schedule_row_tiles_huge() attributes {s = #attn.decode_schedule<warps = 4, stages = 2, row_tiles = 268435456, min_chunk_tokens = 256, ctas_per_sm = 2>}

// -----

// expected-error @+1 {{decode_schedule min_chunk_tokens must be from 1 to 16777216, got 2147483647 (tokens)}}
func.func @schedule_min_chunk() attributes {s = #attn.decode_schedule<warps = 4, stages = 2, row_tiles = 1, min_chunk_tokens = 2147483647, ctas_per_sm = 2>}

// -----

// expected-error @+1 {{decode_schedule ctas_per_sm must be from 1 to 32, got 64 (resident CTAs per SM)}}
func.func @schedule_ctas_per_sm() attributes {s = #attn.decode_schedule<warps = 4, stages = 2, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 64>}

// -----

// The entry's __launch_bounds__ asks for ctas_per_sm CTAs of 32 warps.
// expected-error @+1 {{decode_schedule ctas_per_sm must be from 1 to 2, got 4 (CTAs of `warps` warps an SM runs at once: 2048 threads)}}
func.func @schedule_threads_per_sm() attributes {s = #attn.decode_schedule<warps = 32, stages = 2, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 4>}

// -----

//===----------------------------------------------------------------------===//
// #attn.prefill_schedule
//===----------------------------------------------------------------------===//

// expected-error @+1 {{prefill_schedule warps must be from 1 to 32, got 64}}
func.func @prefill_schedule_warps() attributes {s = #attn.prefill_schedule<warps = 64, block_m = 1024, block_n = 64, stages = 2>}

// -----

// expected-error @+1 {{prefill_schedule block_m must be 16 * warps = 64 or 32 * warps = 128 (each warp owns 16 or 32 query rows), got 96}}
func.func @prefill_schedule_block_m() attributes {s = #attn.prefill_schedule<warps = 4, block_m = 96, block_n = 64, stages = 2>}

// -----

// expected-error @+1 {{prefill_schedule block_n must be a multiple of 16 from 16 to 256, got 24}}
func.func @prefill_schedule_block_n() attributes {s = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 24, stages = 2>}

// -----

// expected-error @+1 {{prefill_schedule stages must be from 2 to 16, got 0 (the cp.async ring)}}
func.func @prefill_schedule_stages() attributes {s = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 0>}

// -----

// expected-error @+1 {{prefill_schedule block_n must be a multiple of 16 from 16 to 256, got 4096}}
func.func @prefill_schedule_block_n_huge() attributes {s = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 4096, stages = 2>}

// -----

// expected-error @+1 {{prefill_schedule stages must be from 1 to 16, got 17 (K/V tiles in flight)}}
func.func @prefill_schedule_wgmma_stages() attributes {s = #attn.prefill_schedule<warps = 12, block_m = 128, block_n = 128, stages = 17, mma = wgmma>}

// -----

// expected-error @+1 {{prefill_schedule with mma = wgmma needs warps = 8, 12 or 16 (a producer warpgroup and 1 to 3 consumer warpgroups), got 4}}
func.func @prefill_schedule_wgmma_warps() attributes {s = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2, mma = wgmma>}

// -----

// expected-error @+1 {{prefill_schedule with mma = wgmma needs block_m = 16 * (warps - 4) = 128 (64 rows per consumer warpgroup), got 64}}
func.func @prefill_schedule_wgmma_block_m() attributes {s = #attn.prefill_schedule<warps = 12, block_m = 64, block_n = 64, stages = 2, mma = wgmma>}

// -----

// expected-error @+1 {{prefill_schedule with mma = wgmma needs block_n 64 or 128, got 96}}
func.func @prefill_schedule_wgmma_block_n() attributes {s = #attn.prefill_schedule<warps = 12, block_m = 128, block_n = 96, stages = 2, mma = wgmma>}

// -----

func.func @prefill_schedule_kind(%q: tensor<?x8x64xbf16>, %cu: tensor<?xi32>) {
  // expected-error @+1 {{'attn.prefill' op attribute 'schedule' failed to satisfy constraint}}
  %o = attn.prefill %q, %q, %q, %cu, %cu {schedule = #attn.decode_schedule<warps = 4, stages = 4, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>} : tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x64xbf16>
  return
}

// -----

// expected-error @+1 {{kernel_spec arch "sm_70" is not a target; expected sm_80, sm_89 or sm_90a}}
func.func @spec_arch() attributes {s = #attn.kernel_spec<kind = append_kv, arch = "sm_70", q_type = bf16, kv_type = bf16, num_q_heads = 8, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd>}

// -----

// expected-error @+1 {{kernel_spec kv_type must be q_type (f16) or FP8 (e4m3, e5m2), got bf16}}
func.func @spec_kv_type() attributes {s = #attn.kernel_spec<kind = append_kv, arch = "sm_80", q_type = f16, kv_type = bf16, num_q_heads = 8, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd>}

// -----

// expected-error @+1 {{kernel_spec of a decode kernel needs a schedule}}
func.func @spec_decode_schedule() attributes {s = #attn.kernel_spec<kind = decode, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd>}

// -----

// expected-error @+1 {{kernel_spec of an append_kv kernel has num_q_heads == num_kv_heads, no query_len and no attention flags (got alibi)}}
func.func @spec_append_flags() attributes {s = #attn.kernel_spec<kind = append_kv, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 8, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd, alibi = true>}

// -----

// expected-error @+1 {{kernel_spec per_head_kv_scale needs an FP8 kv_type}}
func.func @spec_head_scale() attributes {s = #attn.kernel_spec<kind = append_kv, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 8, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd, per_head_kv_scale = true>}

// -----

// The runtime's cache ops have enum values but no IR form.
// expected-error @+1 {{kernel_spec kind copy_pages is a runtime utility kernel; the compiler does not lower to it}}
func.func @spec_cache_op() attributes {s = #attn.kernel_spec<kind = copy_pages, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 8, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd>}

// -----

// A prefill kernel reads no cache: its cache fields have one value.
// expected-error @+1 {{kernel_spec of a prefill kernel reads no KV cache: it has layout = nhd and no page_size or query_len}}
func.func @spec_prefill_page_size() attributes {s = #attn.kernel_spec<kind = prefill, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd, prefill_schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2>>}

// -----

// Ragged k/v are of q's type or FP8.
// expected-error @+1 {{kernel_spec kv_type must be q_type (bf16) or FP8 (e4m3, e5m2), got f16}}
func.func @spec_prefill_kv_type() attributes {s = #attn.kernel_spec<kind = prefill, arch = "sm_90a", q_type = bf16, kv_type = f16, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, layout = nhd, prefill_schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2>>}

// -----

// expected-error @+1 {{kernel_spec of a prefill kernel reads no KV cache: it has layout = nhd and no page_size or query_len}}
func.func @spec_prefill_layout() attributes {s = #attn.kernel_spec<kind = prefill, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, layout = hnd, prefill_schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2>>}

// -----

// expected-error @+1 {{kernel_spec of a prefill kernel reads no KV cache: it has layout = nhd and no page_size or query_len}}
func.func @spec_prefill_query_len() attributes {s = #attn.kernel_spec<kind = prefill, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, layout = nhd, query_len = 4, prefill_schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2>>}

// -----

// expected-error @+1 {{kernel_spec of a prefill kernel needs a prefill_schedule}}
func.func @spec_prefill_no_schedule() attributes {s = #attn.kernel_spec<kind = prefill, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, layout = nhd>}

// -----

// expected-error @+1 {{kernel_spec schedule is for decode kernels; a prefill kernel has a prefill_schedule}}
func.func @spec_prefill_decode_schedule() attributes {s = #attn.kernel_spec<kind = prefill, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, layout = nhd, schedule = #attn.decode_schedule<warps = 4, stages = 3, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>, prefill_schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2>>}

// -----

// expected-error @+1 {{kernel_spec prefill_schedule is for prefill kernels only}}
func.func @spec_decode_prefill_schedule() attributes {s = #attn.kernel_spec<kind = decode, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd, schedule = #attn.decode_schedule<warps = 4, stages = 3, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>, prefill_schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2>>}

// -----

// Prefill queries are many: a window needs the causal flag.
// expected-error @+1 {{kernel_spec sliding_window needs causal}}
func.func @spec_prefill_window() attributes {s = #attn.kernel_spec<kind = prefill, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, layout = nhd, sliding_window = true, prefill_schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2>>}

// -----

// A paged prefill reads a cache: it needs a page size, like decode.
// expected-error @+1 {{kernel_spec page_size 0 is not supported}}
func.func @spec_paged_prefill_no_page_size() attributes {s = #attn.kernel_spec<kind = paged_prefill, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, layout = nhd, prefill_schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2>>}

// -----

// expected-error @+1 {{kernel_spec of a paged_prefill kernel takes its query rows from cu_seqlens: it has no query_len}}
func.func @spec_paged_prefill_query_len() attributes {s = #attn.kernel_spec<kind = paged_prefill, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd, query_len = 2, prefill_schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2>>}

// -----

// expected-error @+1 {{kernel_spec of a paged_prefill kernel needs a prefill_schedule}}
func.func @spec_paged_prefill_no_schedule() attributes {s = #attn.kernel_spec<kind = paged_prefill, arch = "sm_90a", q_type = bf16, kv_type = f8E4M3FN, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd>}

// -----

// expected-error @+1 {{kernel_spec schedule is for decode kernels; a paged_prefill kernel has a prefill_schedule}}
func.func @spec_paged_prefill_decode_schedule() attributes {s = #attn.kernel_spec<kind = paged_prefill, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd, schedule = #attn.decode_schedule<warps = 4, stages = 3, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>, prefill_schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2>>}

// -----

// expected-error @+1 {{kernel_spec sliding_window needs causal}}
func.func @spec_paged_prefill_window() attributes {s = #attn.kernel_spec<kind = paged_prefill, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd, sliding_window = true, prefill_schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2>>}

// -----

// A cache-reading spec still needs a page size (left out, it reads as 0).
// expected-error @+1 {{kernel_spec page_size 0 is not supported}}
func.func @spec_decode_no_page_size() attributes {s = #attn.kernel_spec<kind = append_kv, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 8, num_kv_heads = 8, head_dim = 128, layout = nhd>}

// -----

// expected-error @+1 {{expected 'true' or 'false', got 'yes'}}
func.func @spec_flag_syntax() attributes {s = #attn.kernel_spec<kind = append_kv, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 8, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd, causal = yes>}

// -----

// Every field of attn::KernelSpec has a name; others are errors.
// expected-error @+1 {{unknown kernel_spec field 'sinkz'}}
func.func @spec_unknown_field() attributes {s = #attn.kernel_spec<kind = append_kv, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 8, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd, sinkz = true>}

// -----

// expected-error @+1 {{kernel_spec needs 'head_dim'}}
func.func @spec_missing_field() attributes {s = #attn.kernel_spec<kind = append_kv, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 8, num_kv_heads = 8, page_size = 16, layout = nhd>}

// -----

//===----------------------------------------------------------------------===//
// attn.arch
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'attn.arch' must name a target (sm_80, sm_89 or sm_90a), got "sm_75"}}
module attributes {attn.arch = "sm_75"} {
}

// -----

// expected-error @+1 {{'attn.arch' belongs on a builtin.module: one target per compilation}}
func.func @arch_on_func() attributes {attn.arch = "sm_90a"}

// -----

//===----------------------------------------------------------------------===//
// attn.kernel_launch
//===----------------------------------------------------------------------===//

func.func @launch_symbol(%k: tensor<?x8x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, %slots: tensor<?xi64>) {
  // expected-error @+1 {{'attn.kernel_launch' op kernel @attn_append_kv does not match its spec; expected @attn_append_kv_qbf16_kvbf16_h8x8_d128_p16nhd}}
  %r = attn.kernel_launch @attn_append_kv spec #attn.kernel_spec<kind = append_kv, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 8, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd> (%k, %k, %c, %slots) : (tensor<?x8x128xbf16>, tensor<?x8x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?xi64>) -> !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>
  return
}

// -----

func.func @launch_operands(%k: tensor<?x8x128xbf16>, %c: !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>, %slots: tensor<?xi64>) {
  // expected-error @+1 {{'attn.kernel_launch' op takes 6 operands for its append_kv spec (k, v, cache, slot_mapping, k_scale, v_scale), got 4}}
  %r = attn.kernel_launch @attn_append_kv_qbf16_kve4m3_h8x8_d128_p16nhd spec #attn.kernel_spec<kind = append_kv, arch = "sm_90a", q_type = bf16, kv_type = f8E4M3FN, num_q_heads = 8, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd> (%k, %k, %c, %slots) : (tensor<?x8x128xbf16>, tensor<?x8x128xbf16>, !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>, tensor<?xi64>) -> !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>
  return
}

// -----

// A kernel_spec's schedule must fit its variant and arch: registers ...
// expected-error @+1 {{kernel_spec decode_schedule row_tiles = 4 at head_dim 128 needs 256 fp32 accumulator registers per thread; at most 128 (row_tiles <= 2)}}
func.func @spec_decode_registers() attributes {s = #attn.kernel_spec<kind = decode, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd, schedule = #attn.decode_schedule<warps = 4, stages = 3, row_tiles = 4, min_chunk_tokens = 256, ctas_per_sm = 2>>}

// -----

// ... and shared memory per CTA.
// expected-error @+1 {{kernel_spec decode_schedule (warps = 32, stages = 16, row_tiles = 1) at head_dim 128 with a 2-byte cache needs 4460544 bytes of shared memory per CTA; sm_89 allows 101376}}
func.func @spec_decode_shared_memory() attributes {s = #attn.kernel_spec<kind = decode, arch = "sm_89", q_type = bf16, kv_type = bf16, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd, schedule = #attn.decode_schedule<warps = 32, stages = 16, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>>}

// -----

// expected-error @+1 {{kernel_spec prefill_schedule (block_m = 128, warps = 4, block_n = 256) at head_dim 128 needs 384 fp32 accumulator registers per thread; at most 192}}
func.func @spec_prefill_registers() attributes {s = #attn.kernel_spec<kind = prefill, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, layout = nhd, prefill_schedule = #attn.prefill_schedule<warps = 4, block_m = 128, block_n = 256, stages = 2>>}

// -----

// expected-error @+1 {{kernel_spec prefill_schedule (mma = wgmma, block_m = 128, block_n = 128, stages = 4) at head_dim 128 needs 296080 bytes of shared memory per CTA; sm_90a allows 232448}}
func.func @spec_wgmma_shared_memory() attributes {s = #attn.kernel_spec<kind = prefill, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, layout = nhd, prefill_schedule = #attn.prefill_schedule<warps = 12, block_m = 128, block_n = 128, stages = 4, mma = wgmma>>}

// -----

// expected-error @+1 {{kernel_spec causal needs query_len > 1 (one query sees every cached key anyway)}}
func.func @spec_causal_single_query() attributes {s = #attn.kernel_spec<kind = decode, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd, causal = true, schedule = #attn.decode_schedule<warps = 4, stages = 3, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>>}

// -----

func.func @launch_prefill_operands(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>, %cu: tensor<?xi32>) {
  // expected-error @+1 {{'attn.kernel_launch' op takes 6 operands for its prefill spec (q, k, v, cu_seqlens_q, cu_seqlens_kv, alibi_slopes), got 5}}
  %o = attn.kernel_launch @attn_prefill_qbf16_kvbf16_h32x8_d128_alibi_m64n64w4s2 spec #attn.kernel_spec<kind = prefill, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, layout = nhd, alibi = true, prefill_schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2>> (%q, %k, %k, %cu, %cu)
      : (tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>, tensor<?xi32>, tensor<?xi32>) -> tensor<?x32x128xbf16>
  return
}

// -----

func.func @launch_paged_prefill_operands(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
                                         %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) {
  // expected-error @+1 {{'attn.kernel_launch' op takes 7 operands for its paged_prefill spec (q, cache, cu_seqlens_q, page_tables, seq_lens, k_scale, v_scale), got 5}}
  %o = attn.kernel_launch @attn_paged_prefill_qbf16_kve4m3_h32x8_d128_p16nhd_m64n64w4s2 spec #attn.kernel_spec<kind = paged_prefill, arch = "sm_90a", q_type = bf16, kv_type = f8E4M3FN, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd, prefill_schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2>> (%q, %c, %cu, %bt, %lens)
      : (tensor<?x32x128xbf16>, !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>, tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32>) -> tensor<?x32x128xbf16>
  return
}

// -----

// expected-error @+1 {{prefill_schedule persistent_max_q_len must be from 0 to 16777216, got -1 (query tokens per request)}}
func.func @prefill_schedule_persistent() attributes {s = #attn.prefill_schedule<warps = 12, block_m = 128, block_n = 128, stages = 2, mma = wgmma, persistent_max_q_len = -1>}

// -----

// FP8 compute needs FP8 keys and values.
func.func @fp8_compute_bf16_cache(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                                  %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  // expected-error @+1 {{'attn.paged_prefill' op fp8_compute needs an FP8 cache (e4m3, e5m2), got 'bf16'}}
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens {fp8_compute}
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
        tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

// -----

// expected-error @+1 {{kernel_spec fp8_compute needs a prefill over FP8 k/v (e4m3, e5m2)}}
func.func @spec_fp8_compute_decode() attributes {s = #attn.kernel_spec<kind = decode, arch = "sm_90a", q_type = bf16, kv_type = f8E4M3FN, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd, fp8_compute = true, schedule = #attn.decode_schedule<warps = 4, stages = 2, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>>}

// -----

// An e4m3 q (quantized by the caller) comes with its per-head scales.
func.func @fp8_query_without_scale(%q: tensor<?x32x128xf8E4M3FN>, %c: !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
                                   %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>, %s: tensor<1xf32>) -> tensor<?x32x128xbf16> {
  // expected-error @+1 {{'attn.paged_prefill' op an e4m3 q needs its q_scale}}
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens kv_scales(%s, %s : tensor<1xf32>, tensor<1xf32>) {fp8_compute}
      : tensor<?x32x128xf8E4M3FN>, !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
        tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

// -----

func.func @q_scale_on_bf16_q(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
                             %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>, %s: tensor<1xf32>,
                             %qs: tensor<32xf32>) -> tensor<?x32x128xbf16> {
  // expected-error @+1 {{'attn.paged_prefill' op q_scale is for an e4m3 q, got q of 'bf16'}}
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens kv_scales(%s, %s : tensor<1xf32>, tensor<1xf32>) q_scale(%qs : tensor<32xf32>) {fp8_compute}
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
        tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

// -----

// The output of an e4m3 q is 16-bit.
func.func @fp8_query_fp8_out(%q: tensor<?x32x128xf8E4M3FN>, %c: !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
                             %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>, %s: tensor<1xf32>,
                             %qs: tensor<32xf32>) -> tensor<?x32x128xf8E4M3FN> {
  // expected-error @+1 {{'attn.paged_prefill' op result #0 must be 3D tensor of 16-bit float or bfloat16 type values, but got 'tensor<?x32x128xf8E4M3FN>'}}
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens kv_scales(%s, %s : tensor<1xf32>, tensor<1xf32>) q_scale(%qs : tensor<32xf32>) {fp8_compute}
      : tensor<?x32x128xf8E4M3FN>, !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
        tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xf8E4M3FN>
  return %o : tensor<?x32x128xf8E4M3FN>
}

// -----

// q_scale is a per-head table: one value per q head.
func.func @q_scale_length(%q: tensor<?x32x128xf8E4M3FN>, %c: !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
                          %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>, %s: tensor<1xf32>) -> tensor<?x32x128xbf16> {
  // expected-error @+1 {{'attn.paged_prefill' op q_scale must have one value per q head (32), got 1}}
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens kv_scales(%s, %s : tensor<1xf32>, tensor<1xf32>) q_scale(%s : tensor<1xf32>) {fp8_compute}
      : tensor<?x32x128xf8E4M3FN>, !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
        tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

// -----

// expected-error @+1 {{kernel_spec an e4m3 q (fp8_query, q_scale) needs fp8_compute}}
func.func @spec_fp8_query_without_fp8_compute() attributes {s = #attn.kernel_spec<kind = paged_prefill, arch = "sm_90a", q_type = bf16, kv_type = f8E4M3FN, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd, fp8_query = true, prefill_schedule = #attn.prefill_schedule<mma = wgmma, block_m = 128, block_n = 128, warps = 12, stages = 2>>}

// -----

// Ragged FP8 k/v need their scales.
func.func @ragged_fp8_without_scales(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xf8E4M3FN>, %v: tensor<?x8x128xf8E4M3FN>,
                                     %cu: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  // expected-error @+1 {{'attn.prefill' op an FP8 k/v ('f8E4M3FN') needs kv_scales}}
  %o = attn.prefill %q, %k, %v, %cu, %cu
      : tensor<?x32x128xbf16>, tensor<?x8x128xf8E4M3FN>, tensor<?x8x128xf8E4M3FN>, tensor<?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

// -----

func.func @ragged_mixed_kv(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xf8E4M3FN>, %v: tensor<?x8x128xf8E5M2>,
                           %cu: tensor<?xi32>, %s: tensor<1xf32>) -> tensor<?x32x128xbf16> {
  // expected-error @+1 {{'attn.prefill' op k and v must both be of the output's element type ('bf16') or both FP8, got 'f8E4M3FN' and 'f8E5M2'}}
  %o = attn.prefill %q, %k, %v, %cu, %cu kv_scales(%s, %s : tensor<1xf32>, tensor<1xf32>)
      : tensor<?x32x128xbf16>, tensor<?x8x128xf8E4M3FN>, tensor<?x8x128xf8E5M2>, tensor<?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

// -----

func.func @ragged_fp8_compute_bf16(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>, %cu: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  // expected-error @+1 {{'attn.prefill' op fp8_compute needs FP8 k/v (e4m3, e5m2), got 'bf16'}}
  %o = attn.prefill %q, %k, %k, %cu, %cu {fp8_compute}
      : tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}
