// RUN: attn-opt %s --split-input-file --attn-select-schedule="arch=sm_90a" | FileCheck %s --check-prefix=SM90
// RUN: attn-opt %s --split-input-file --attn-select-schedule="arch=sm_80" | FileCheck %s --check-prefix=SM80
// RUN: attn-opt %s --split-input-file --attn-pipeline="arch=sm_90a" | FileCheck %s --check-prefix=SPEC

// Ragged FP8 k/v with their kv_scales: the wgmma template on sm_90a (16-bit
// MMAs over widened tiles), the mma.sync one elsewhere; the spec carries
// the k/v type and the per-head scales.
// SM90-LABEL: func.func @ragged_e4m3
// SM90: mma = wgmma
// SM80-LABEL: func.func @ragged_e4m3
// SM80-NOT: wgmma
// SPEC-LABEL: func.func @ragged_e4m3
// SPEC: kind = prefill, arch = "sm_90a", q_type = bf16, kv_type = f8E4M3FN, num_q_heads = 32, num_kv_heads = 8, head_dim = 128
// SPEC-SAME: per_head_kv_scale = true
func.func @ragged_e4m3(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xf8E4M3FN>, %v: tensor<?x8x128xf8E4M3FN>,
                       %cu: tensor<?xi32>, %cukv: tensor<?xi32>, %s: tensor<8xf32>) -> tensor<?x32x128xbf16> {
  %o = attn.prefill %q, %k, %v, %cu, %cukv kv_scales(%s, %s : tensor<8xf32>, tensor<8xf32>) {mask = #attn.mask<causal>}
      : tensor<?x32x128xbf16>, tensor<?x8x128xf8E4M3FN>, tensor<?x8x128xf8E4M3FN>, tensor<?xi32>, tensor<?xi32>
        -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

