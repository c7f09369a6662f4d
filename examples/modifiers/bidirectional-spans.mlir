// Bidirectional spans inside causal attention (Gemma 3 / PaliGemma image
// tokens; vLLM's mm_prefix ranges): aux table [requests, positions] of span
// ids, 0 for text. Text is causal; the tokens of one span see each other.
//
//   build/bin/attn-opt examples/modifiers/bidirectional-spans.mlir --attn-pipeline=arch=sm_90a \
//     | build/bin/attn-translate --attn-to-cuda
//
// The same region, as text, is what a host passes in AttentionKnobs::scoreMod
// or maskMod (docs/semantics.md, "Programmable variants").
func.func @bidirectional_spans(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>,
    %v: tensor<?x8x128xbf16>, %cu_q: tensor<?xi32>, %cu_kv: tensor<?xi32>, %spans: tensor<?x?xi32>)
    -> tensor<?x32x128xbf16> {
  %out = attn.prefill %q, %k, %v, %cu_q, %cu_kv aux(%spans : tensor<?x?xi32>)
      : tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  mask_mod {
  ^bb0(%request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32, %s: tensor<?x?xi32>):
    %causal = arith.cmpi sle, %k_pos, %q_pos : i32
    %a = attn.aux_load %s[%request, %q_pos] : tensor<?x?xi32>
    %b = attn.aux_load %s[%request, %k_pos] : tensor<?x?xi32>
    %zero = arith.constant 0 : i32
    %inSpan = arith.cmpi ne, %a, %zero : i32
    %same = arith.cmpi eq, %a, %b : i32
    %span = arith.andi %inSpan, %same : i1
    %visible = arith.ori %causal, %span : i1
    attn.yield %visible : i1
  }
  return %out : tensor<?x32x128xbf16>
}
