// One decoder layer's prompt prefill for a Llama-3-8B-shaped model (32 query
// heads over 8 KV heads, head dim 128, bf16): a batch of prompts of different
// lengths packed back to back (ragged q/k/v; request b owns rows
// cu_seqlens[b] .. cu_seqlens[b+1]), causal self attention. The LSE result
// lets a later chunk be merged with attn.merge_states. Below it, chunked
// prefill over a paged KV cache (attn.paged_prefill), in bf16 and FP8.
//
//   build/bin/attn-opt examples/prefill.mlir --attn-pipeline
func.func @llama3_8b_prefill(
    %q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>, %v: tensor<?x8x128xbf16>,
    %cu_seqlens_q: tensor<?xi32>, %cu_seqlens_kv: tensor<?xi32>)
    -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  %out, %lse = attn.prefill %q, %k, %v, %cu_seqlens_q, %cu_seqlens_kv
      {mask = #attn.mask<causal>}
      : tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %out, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}

// Chunked prefill with prefix caching, same model: each request's new
// tokens (rows cu_seqlens_q[b] .. cu_seqlens_q[b+1] of q), already appended
// to a bf16 paged cache (NHD pages of 16 tokens), attend causally to all
// seq_lens[b] cached tokens, prefix and new, through the request's row of
// page_tables.
func.func @llama3_8b_chunked_prefill(
    %q: tensor<?x32x128xbf16>,
    %cache: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
    %cu_seqlens_q: tensor<?xi32>, %page_tables: tensor<?x?xi32>,
    %seq_lens: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  %out = attn.paged_prefill %q, %cache, %cu_seqlens_q, %page_tables, %seq_lens
      {mask = #attn.mask<causal>}
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
        tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %out : tensor<?x32x128xbf16>
}

// The same over an FP8 (e4m3) cache with head-major (HND) pages and one
// dequantization scale per KV head for k and for v.
func.func @llama3_8b_chunked_prefill_fp8(
    %q: tensor<?x32x128xbf16>,
    %cache: !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = hnd>,
    %cu_seqlens_q: tensor<?xi32>, %page_tables: tensor<?x?xi32>,
    %seq_lens: tensor<?xi32>, %k_scale: tensor<8xf32>, %v_scale: tensor<8xf32>)
    -> tensor<?x32x128xbf16> {
  %out = attn.paged_prefill %q, %cache, %cu_seqlens_q, %page_tables, %seq_lens
      kv_scales(%k_scale, %v_scale : tensor<8xf32>, tensor<8xf32>)
      {mask = #attn.mask<causal>}
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = hnd>,
        tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %out : tensor<?x32x128xbf16>
}
