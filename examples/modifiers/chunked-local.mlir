// Chunked local attention (Llama 4's attention_chunk = 8192): a query sees
// the keys of its own 8192-token chunk, causally. The compiler's interval
// form of the mask skips every tile outside the chunk.
//
//   build/bin/attn-opt examples/modifiers/chunked-local.mlir --attn-pipeline=arch=sm_90a \
//     | build/bin/attn-translate --attn-to-cuda
//
// The same region, as text, is what a host passes in AttentionKnobs::scoreMod
// or maskMod (docs/semantics.md, "Programmable variants").
func.func @chunked_local(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>,
    %v: tensor<?x8x128xbf16>, %cu_q: tensor<?xi32>, %cu_kv: tensor<?xi32>)
    -> tensor<?x32x128xbf16> {
  %out = attn.prefill %q, %k, %v, %cu_q, %cu_kv {mask = #attn.mask<causal>}
      : tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  mask_mod {
  ^bb0(%request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32):
    %c = arith.constant 8192 : i32
    %qc = arith.divsi %q_pos, %c : i32
    %kc = arith.divsi %k_pos, %c : i32
    %same = arith.cmpi eq, %qc, %kc : i32
    attn.yield %same : i1
  }
  return %out : tensor<?x32x128xbf16>
}
