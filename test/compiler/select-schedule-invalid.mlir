// RUN: attn-opt %s --split-input-file --attn-select-schedule="arch=sm_90a" --verify-diagnostics

// One target per module: schedules already in a module were chosen for the
// target it names.
// expected-error @+1 {{module targets "sm_80" but attn-select-schedule was asked for "sm_90a"}}
module attributes {attn.arch = "sm_80"} {
}

// -----

// The heuristic needs the spec, and the spec needs scale vectors of known length.
func.func @dynamic_scales(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
                          %bt: tensor<?x?xi32>, %lens: tensor<?xi32>, %s: tensor<?xf32>) -> tensor<?x32x128xbf16> {
  // expected-error @+1 {{'attn.decode' op kv_scales need static lengths (1 per tensor, or one per kv head) for a kernel to be chosen}}
  %o = attn.decode %q, %c, %bt, %lens kv_scales(%s, %s : tensor<?xf32>, tensor<?xf32>)
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

// -----

// The same for a paged prefill over an FP8 cache.
func.func @paged_prefill_mixed_scales(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
                                      %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>,
                                      %ks: tensor<1xf32>, %vs: tensor<8xf32>) -> tensor<?x32x128xbf16> {
  // expected-error @+1 {{'attn.paged_prefill' op k_scale and v_scale must have the same length for one kernel (per tensor or per kv head), got 1 and 8}}
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens kv_scales(%ks, %vs : tensor<1xf32>, tensor<8xf32>)
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
        tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}
