// RUN: attn-opt %s --attn-select-schedule="arch=sm_90a" | FileCheck %s
// RUN: not attn-opt %s --attn-select-schedule="arch=sm_80" 2>&1 | FileCheck %s --check-prefix=SM80

// FP8 compute takes the wgmma template on sm_90a, pages of 8 included (it
// has no mma.sync template); elsewhere and at head dim 64 it is an error.
// CHECK-LABEL: func.func @fp8_compute_p8
// CHECK: fp8_compute
// CHECK-SAME: mma = wgmma
// SM80: fp8_compute needs the FP8 tensor cores of the wgmma schedule (arch sm_90a, head_dim 128 or 256, pages of a multiple of 8 tokens), got arch sm_80, head_dim 128, page_size 8
func.func @fp8_compute_p8(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xf8E4M3FN, page_size = 8, layout = nhd>,
                          %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>, %s: tensor<1xf32>) -> tensor<?x32x128xbf16> {
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens kv_scales(%s, %s : tensor<1xf32>, tensor<1xf32>) {fp8_compute}
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xf8E4M3FN, page_size = 8, layout = nhd>,
        tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

// An e4m3 q with its per-head scales (fp8_query in the spec): the same
// schedule; the kernel spec's q_type is the output's.
// CHECK-LABEL: func.func @fp8_query
// CHECK: q_scale(%{{.*}} : tensor<32xf32>) {fp8_compute
// CHECK-SAME: mma = wgmma
func.func @fp8_query(%q: tensor<?x32x128xf8E4M3FN>, %c: !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
                     %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>, %s: tensor<1xf32>,
                     %qs: tensor<32xf32>) -> tensor<?x32x128xbf16> {
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens kv_scales(%s, %s : tensor<1xf32>, tensor<1xf32>) q_scale(%qs : tensor<32xf32>) {fp8_compute}
      : tensor<?x32x128xf8E4M3FN>, !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
        tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

// FP8 compute over ragged e5m2 k/v and an e4m3 q with its q_scale: the
// output is bf16.
// CHECK-LABEL: func.func @ragged_fp8_compute
// CHECK: q_scale(%{{.*}} : tensor<32xf32>) {fp8_compute
// CHECK-SAME: mma = wgmma
func.func @ragged_fp8_compute(%q: tensor<?x32x256xf8E4M3FN>, %k: tensor<?x8x256xf8E5M2>, %v: tensor<?x8x256xf8E5M2>,
                              %cu: tensor<?xi32>, %cukv: tensor<?xi32>, %s: tensor<1xf32>,
                              %qs: tensor<32xf32>) -> tensor<?x32x256xbf16> {
  %o = attn.prefill %q, %k, %v, %cu, %cukv kv_scales(%s, %s : tensor<1xf32>, tensor<1xf32>) q_scale(%qs : tensor<32xf32>) {fp8_compute}
      : tensor<?x32x256xf8E4M3FN>, tensor<?x8x256xf8E5M2>, tensor<?x8x256xf8E5M2>, tensor<?xi32>, tensor<?xi32>
        -> tensor<?x32x256xbf16>
  return %o : tensor<?x32x256xbf16>
}
