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
