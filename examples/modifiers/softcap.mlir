// Soft-cap (Gemma 2's logit cap) written as a score_mod: 30 * tanh(score / 30).
// It runs as fast as the `softcap` attribute (docs/performance.md).
//
//   build/bin/attn-opt examples/modifiers/softcap.mlir --attn-pipeline=arch=sm_90a \
//     | build/bin/attn-translate --attn-to-cuda
//
// The same region, as text, is what a host passes in AttentionKnobs::scoreMod
// or maskMod (docs/semantics.md, "Programmable variants").
func.func @softcap(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>,
    %v: tensor<?x8x128xbf16>, %cu_q: tensor<?xi32>, %cu_kv: tensor<?xi32>)
    -> tensor<?x32x128xbf16> {
  %out = attn.prefill %q, %k, %v, %cu_q, %cu_kv {mask = #attn.mask<causal>}
      : tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  score_mod {
  ^bb0(%score: f32, %request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32):
    %cap = arith.constant 30.0 : f32
    %x = arith.divf %score, %cap : f32
    %t = math.tanh %x : f32
    %y = arith.mulf %t, %cap : f32
    attn.yield %y : f32
  }
  return %out : tensor<?x32x128xbf16>
}
