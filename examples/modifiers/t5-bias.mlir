// T5-style relative position bias: score + bias[q_head, bucket], with T5's
// causal buckets of the distance (exact below 16, logarithmic up to 128).
//
//   build/bin/attn-opt examples/modifiers/t5-bias.mlir --attn-pipeline=arch=sm_90a \
//     | build/bin/attn-translate --attn-to-cuda
//
// The same region, as text, is what a host passes in AttentionKnobs::scoreMod
// or maskMod (docs/semantics.md, "Programmable variants").
func.func @t5_bias(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>,
    %v: tensor<?x8x128xbf16>, %cu_q: tensor<?xi32>, %cu_kv: tensor<?xi32>, %bias: tensor<32x32xf32>)
    -> tensor<?x32x128xbf16> {
  %out = attn.prefill %q, %k, %v, %cu_q, %cu_kv aux(%bias : tensor<32x32xf32>) {mask = #attn.mask<causal>}
      : tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  score_mod {
  ^bb0(%score: f32, %request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32, %t: tensor<32x32xf32>):
    %zero = arith.constant 0 : i32
    %d = arith.subi %q_pos, %k_pos : i32
    %n = arith.maxsi %d, %zero : i32
    %c16 = arith.constant 16 : i32
    %c31 = arith.constant 31 : i32
    %exact = arith.cmpi slt, %n, %c16 : i32
    %nf = arith.sitofp %n : i32 to f32
    %f16 = arith.constant 16.0 : f32
    %ratio = arith.divf %nf, %f16 : f32
    %log = math.log %ratio : f32
    %f8 = arith.constant 8.0 : f32
    %log8 = math.log %f8 : f32
    %quot = arith.divf %log, %log8 : f32
    %scaled = arith.mulf %quot, %f16 : f32
    %si = arith.fptosi %scaled : f32 to i32
    %far = arith.addi %si, %c16 : i32
    %farc = arith.minsi %far, %c31 : i32
    %bucket = arith.select %exact, %n, %farc : i32
    %b = attn.aux_load %t[%q_head, %bucket] : tensor<32x32xf32>
    %r = arith.addf %score, %b : f32
    attn.yield %r : f32
  }
  return %out : tensor<?x32x128xbf16>
}
