// RUN: attn-opt %s --split-input-file --attn-lower-to-kernel --verify-diagnostics

// What attn-lower-to-kernel refuses, each at the op's location; the module is
// left unchanged.

module attributes {attn.arch = "sm_90a"} {
func.func @unscheduled_prefill(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>, %cu: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  // expected-error @+1 {{'attn.prefill' op has no schedule; run attn-select-schedule first}}
  %o = attn.prefill %q, %k, %k, %cu, %cu
      : tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}
}

// -----

module attributes {attn.arch = "sm_90a"} {
func.func @unscheduled_paged_prefill(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                                     %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  // expected-error @+1 {{'attn.paged_prefill' op has no schedule; run attn-select-schedule first}}
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
        tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}
}

// -----

module attributes {attn.arch = "sm_90a"} {
func.func @unscheduled(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                       %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  // expected-error @+1 {{'attn.decode' op has no schedule; run attn-select-schedule first}}
  %o = attn.decode %q, %c, %bt, %lens
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}
}

// -----

func.func @no_target(%k: tensor<?x8x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                     %slots: tensor<?xi64>) -> !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd> {
  // expected-error @+1 {{no target for 'attn.append_kv': the module has no 'attn.arch'; run attn-select-schedule first}}
  %c1 = attn.append_kv %k, %k into %c at %slots
      : tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
        !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?xi64>
  return %c1 : !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>
}

// -----

module attributes {attn.arch = "sm_90a"} {
func.func @dynamic_scales(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
                          %bt: tensor<?x?xi32>, %lens: tensor<?xi32>, %s: tensor<?xf32>) -> tensor<?x32x128xbf16> {
  // Per tensor or per head is a compile-time choice.
  // expected-error @+1 {{'attn.decode' op kv_scales need static lengths (1 per tensor, or one per kv head) for a kernel to be chosen, got 'tensor<?xf32>' and 'tensor<?xf32>'}}
  %o = attn.decode %q, %c, %bt, %lens kv_scales(%s, %s : tensor<?xf32>, tensor<?xf32>)
      {schedule = #attn.decode_schedule<warps = 4, stages = 6, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>}
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}
}

// -----

module attributes {attn.arch = "sm_90a"} {
func.func @paged_prefill_dynamic_scales(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xf8E5M2, page_size = 16, layout = nhd>,
                                        %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>,
                                        %ks: tensor<1xf32>, %vs: tensor<?xf32>) -> tensor<?x32x128xbf16> {
  // expected-error @+1 {{'attn.paged_prefill' op kv_scales need static lengths (1 per tensor, or one per kv head) for a kernel to be chosen, got 'tensor<1xf32>' and 'tensor<?xf32>'}}
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens kv_scales(%ks, %vs : tensor<1xf32>, tensor<?xf32>)
      {schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2>}
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xf8E5M2, page_size = 16, layout = nhd>,
        tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}
}

// -----

module attributes {attn.arch = "sm_90a"} {
func.func @mixed_scales(%k: tensor<?x8x128xbf16>, %c: !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
                        %slots: tensor<?xi64>, %ks: tensor<1xf32>, %vs: tensor<8xf32>)
    -> !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd> {
  // expected-error @+1 {{'attn.append_kv' op k_scale and v_scale must have the same length for one kernel (per tensor or per kv head), got 1 and 8}}
  %c1 = attn.append_kv %k, %k into %c at %slots kv_scales(%ks, %vs : tensor<1xf32>, tensor<8xf32>)
      : tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
        !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>, tensor<?xi64>
  return %c1 : !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>
}
}

// -----

// The wgmma prefill template is sm_90a-only.
module attributes {attn.arch = "sm_80"} {
func.func @wgmma_prefill_on_sm80(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>, %cu: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  // expected-error @+1 {{'attn.prefill' op prefill_schedule mma = wgmma needs arch sm_90a, got "sm_80"}}
  %o = attn.prefill %q, %k, %k, %cu, %cu
      {schedule = #attn.prefill_schedule<warps = 12, block_m = 128, block_n = 128, stages = 2, mma = wgmma>}
      : tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}
}

// -----

// ... and reads contiguous 16-bit k/v at head dim 64, 128 or 256 only.
module attributes {attn.arch = "sm_90a"} {
func.func @wgmma_prefill_d96(%q: tensor<?x32x96xbf16>, %k: tensor<?x8x96xbf16>, %cu: tensor<?xi32>) -> tensor<?x32x96xbf16> {
  // expected-error @+1 {{'attn.prefill' op prefill_schedule mma = wgmma needs head_dim 64, 128 or 256, got 96}}
  %o = attn.prefill %q, %k, %k, %cu, %cu
      {schedule = #attn.prefill_schedule<warps = 12, block_m = 128, block_n = 128, stages = 2, mma = wgmma>}
      : tensor<?x32x96xbf16>, tensor<?x8x96xbf16>, tensor<?x8x96xbf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x32x96xbf16>
  return %o : tensor<?x32x96xbf16>
}
}

// -----

// At head dim 256 the wgmma template takes 64-key tiles (registers).
module attributes {attn.arch = "sm_90a"} {
func.func @wgmma_prefill_d256_n128(%q: tensor<?x32x256xbf16>, %k: tensor<?x8x256xbf16>, %cu: tensor<?xi32>) -> tensor<?x32x256xbf16> {
  // expected-error @+1 {{'attn.prefill' op prefill_schedule mma = wgmma needs block_n 64 at head_dim 256, got 128}}
  %o = attn.prefill %q, %k, %k, %cu, %cu
      {schedule = #attn.prefill_schedule<warps = 12, block_m = 128, block_n = 128, stages = 2, mma = wgmma>}
      : tensor<?x32x256xbf16>, tensor<?x8x256xbf16>, tensor<?x8x256xbf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x32x256xbf16>
  return %o : tensor<?x32x256xbf16>
}
}

// -----

// Three consumer warpgroups (160 registers each) are for head dim 64 only.
module attributes {attn.arch = "sm_90a"} {
func.func @wgmma_prefill_d128_three_consumers(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>, %cu: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  // expected-error @+1 {{'attn.prefill' op prefill_schedule mma = wgmma with warps = 16 needs head_dim 64, got 128}}
  %o = attn.prefill %q, %k, %k, %cu, %cu
      {schedule = #attn.prefill_schedule<warps = 16, block_m = 192, block_n = 128, stages = 2, mma = wgmma>}
      : tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}
}
