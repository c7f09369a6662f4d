// RUN: attn-opt %s --attn-pipeline | FileCheck %s --check-prefixes=CHECK,SM90
// RUN: attn-opt %s --attn-pipeline="arch=sm_89" | FileCheck %s --check-prefixes=CHECK,SM89
// RUN: attn-opt %s --pass-pipeline="builtin.module(attn-pipeline{arch=sm_80})" | FileCheck %s --check-prefixes=CHECK,SM80
// RUN: not attn-opt %s --attn-pipeline="arch=sm_100" 2>&1 | FileCheck %s --check-prefix=ERR

// attn-pipeline = attn-select-schedule{arch} + attn-lower-to-kernel: the
// target lands on the module and in every kernel spec.

// ERR: error: attn-select-schedule: unknown arch 'sm_100'; expected sm_80, sm_89 or sm_90a

// SM90: module attributes {attn.arch = "sm_90a"}
// SM89: module attributes {attn.arch = "sm_89"}
// SM80: module attributes {attn.arch = "sm_80"}
// CHECK-LABEL: func.func @gemma2_decode
func.func @gemma2_decode(%q: tensor<?x16x256xbf16>,
    %cache: !attn.paged_kv<8x256xbf16, page_size = 16, layout = nhd>,
    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x16x256xbf16> {
  // Gemma-2 style: head dim 256, soft-cap 50, sliding window 4096. Two q
  // heads per KV head take the CUDA-core path, which has no ring: eight
  // warps on every arch.
  // SM90: attn.kernel_launch @attn_decode_qbf16_kvbf16_h16x8_d256_p16nhd_sliding_window_softcap_w8s2r1
  // SM90-SAME: arch = "sm_90a"
  // SM89: attn.kernel_launch @attn_decode_qbf16_kvbf16_h16x8_d256_p16nhd_sliding_window_softcap_w8s2r1
  // SM89-SAME: arch = "sm_89"
  // SM80: attn.kernel_launch @attn_decode_qbf16_kvbf16_h16x8_d256_p16nhd_sliding_window_softcap_w8s2r1
  // SM80-SAME: arch = "sm_80"
  %o = attn.decode %q, %cache, %bt, %lens
      {mask = #attn.mask<causal, window_left = 4096>, softcap = 50.0 : f32}
      : tensor<?x16x256xbf16>, !attn.paged_kv<8x256xbf16, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x16x256xbf16>
  return %o : tensor<?x16x256xbf16>
}

// CHECK-LABEL: func.func @llama3_chunked_prefill_fp8
func.func @llama3_chunked_prefill_fp8(%q: tensor<?x32x128xbf16>,
    %cache: !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
    %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>, %s: tensor<1xf32>) -> tensor<?x32x128xbf16> {
  // A chunk of new tokens over an FP8 paged prefix: scheduled and lowered in
  // one go; the wgmma template on sm_90a, elsewhere two 16-row tiles per
  // warp where the CTA fits (not sm_89).
  // SM90: attn.kernel_launch @attn_paged_prefill_qbf16_kve4m3_h32x8_d128_p16nhd_causal_m128n128w12s2_wgmma
  // SM90-SAME: kind = paged_prefill, arch = "sm_90a"
  // SM89: attn.kernel_launch @attn_paged_prefill_qbf16_kve4m3_h32x8_d128_p16nhd_causal_m64n64w4s2
  // SM89-SAME: kind = paged_prefill, arch = "sm_89"
  // SM80: attn.kernel_launch @attn_paged_prefill_qbf16_kve4m3_h32x8_d128_p16nhd_causal_m128n64w4s2
  // SM80-SAME: kind = paged_prefill, arch = "sm_80"
  // CHECK-NOT: attn.paged_prefill
  %o = attn.paged_prefill %q, %cache, %cu, %bt, %lens kv_scales(%s, %s : tensor<1xf32>, tensor<1xf32>)
      {mask = #attn.mask<causal>}
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
        tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}
