// Document masking for packed sequences: aux table [requests, positions] of
// document ids; a query sees the keys of its own document, causally.
//
//   build/bin/attn-opt examples/modifiers/document-mask.mlir --attn-pipeline=arch=sm_90a \
//     | build/bin/attn-translate --attn-to-cuda
//
// The same region, as text, is what a host passes in AttentionKnobs::scoreMod
// or maskMod (docs/semantics.md, "Programmable variants").
func.func @document_mask(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>,
    %v: tensor<?x8x128xbf16>, %cu_q: tensor<?xi32>, %cu_kv: tensor<?xi32>, %docs: tensor<?x?xi32>)
    -> tensor<?x32x128xbf16> {
  %out = attn.prefill %q, %k, %v, %cu_q, %cu_kv aux(%docs : tensor<?x?xi32>) {mask = #attn.mask<causal>}
      : tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  mask_mod {
  ^bb0(%request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32, %d: tensor<?x?xi32>):
    %a = attn.aux_load %d[%request, %q_pos] : tensor<?x?xi32>
    %b = attn.aux_load %d[%request, %k_pos] : tensor<?x?xi32>
    %same = arith.cmpi eq, %a, %b : i32
    attn.yield %same : i1
  }
  return %out : tensor<?x32x128xbf16>
}
