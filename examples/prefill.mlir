// One decoder layer's prompt prefill for a Llama-3-8B-shaped model (32 query
// heads over 8 KV heads, head dim 128, bf16): a batch of prompts of different
// lengths packed back to back (ragged q/k/v; request b owns rows
// cu_seqlens[b] .. cu_seqlens[b+1]), causal self attention. The LSE result
// lets a later chunk be merged with attn.merge_states.
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
