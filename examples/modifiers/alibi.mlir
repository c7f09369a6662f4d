// ALiBi written as a score_mod over an aux table of per-head slopes:
// score - slope[q_head] * |k_pos - q_pos|, FlashAttention's definition.
// fastmath<contract> lets the multiply and the subtraction fuse into one
// fma, as the built-in ALiBi knob does; without it each rounds on its own.
//
//   build/bin/attn-opt examples/modifiers/alibi.mlir --attn-pipeline=arch=sm_90a \
//     | build/bin/attn-translate --attn-to-cuda
//
// The same region, as text, is what a host passes in AttentionKnobs::scoreMod
// or maskMod (docs/semantics.md, "Programmable variants").
func.func @alibi(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>,
    %v: tensor<?x8x128xbf16>, %cu_q: tensor<?xi32>, %cu_kv: tensor<?xi32>, %slopes: tensor<32xf32>)
    -> tensor<?x32x128xbf16> {
  %out = attn.prefill %q, %k, %v, %cu_q, %cu_kv aux(%slopes : tensor<32xf32>) {mask = #attn.mask<causal>}
      : tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  score_mod {
  ^bb0(%score: f32, %request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32, %s: tensor<32xf32>):
    %slope = attn.aux_load %s[%q_head] : tensor<32xf32>
    %d = arith.subi %k_pos, %q_pos : i32
    %a = math.absi %d : i32
    %af = arith.sitofp %a : i32 to f32
    %bias = arith.mulf %slope, %af fastmath<contract> : f32
    %r = arith.subf %score, %bias fastmath<contract> : f32
    attn.yield %r : f32
  }
  return %out : tensor<?x32x128xbf16>
}
