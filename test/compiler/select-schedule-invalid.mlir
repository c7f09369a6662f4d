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

// -----

// Hand-written schedules are checked against the template and the target
// like chosen ones: the decode accumulators of 4 row tiles at head dim 128
// do not fit the registers ...
func.func @pinned_decode_registers(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                                   %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  // expected-error @+1 {{'attn.decode' op decode_schedule row_tiles = 4 at head_dim 128 needs 256 fp32 accumulator registers per thread; at most 128 (row_tiles <= 2)}}
  %o = attn.decode %q, %c, %bt, %lens {schedule = #attn.decode_schedule<warps = 4, stages = 2, row_tiles = 4, min_chunk_tokens = 256, ctas_per_sm = 2>}
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

// -----

// ... 32 warps of 16 stages need more shared memory than an sm_90a CTA has ...
func.func @pinned_decode_shared_memory(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                                       %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  // expected-error @+1 {{'attn.decode' op decode_schedule (warps = 32, stages = 16, row_tiles = 1) at head_dim 128 with a 2-byte cache needs 4460544 bytes of shared memory per CTA; sm_90a allows 232448}}
  %o = attn.decode %q, %c, %bt, %lens {schedule = #attn.decode_schedule<warps = 32, stages = 16, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>}
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

// -----

// ... nor does a prefill K/V ring of 16 stages of 256 keys at head dim 256.
func.func @pinned_prefill_shared_memory(%q: tensor<?x8x256xbf16>, %k: tensor<?x8x256xbf16>,
                                        %cu: tensor<?xi32>) -> tensor<?x8x256xbf16> {
  // expected-error @+1 {{'attn.prefill' op prefill_schedule (block_m = 16, block_n = 32, stages = 16) at head_dim 256 with a 2-byte cache needs 549120 bytes of shared memory per CTA; sm_90a allows 232448}}
  %o = attn.prefill %q, %k, %k, %cu, %cu
      {schedule = #attn.prefill_schedule<warps = 1, block_m = 16, block_n = 32, stages = 16>}
      : tensor<?x8x256xbf16>, tensor<?x8x256xbf16>, tensor<?x8x256xbf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x8x256xbf16>
  return %o : tensor<?x8x256xbf16>
}

// -----

// Packing a KV head's q heads into one tile needs rows that share their
// per-head values: ALiBi's slopes differ per head.
func.func @pinned_pack_gqa_with_alibi(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>,
                                      %cu: tensor<?xi32>, %slopes: tensor<32xf32>) -> tensor<?x32x128xbf16> {
  // expected-error @+1 {{'attn.prefill' op prefill_schedule pack_gqa needs a variant without per-head values; this one has alibi_slopes}}
  %o = attn.prefill %q, %k, %k, %cu, %cu alibi(%slopes : tensor<32xf32>)
      {schedule = #attn.prefill_schedule<warps = 4, block_m = 128, block_n = 64, stages = 2, pack_gqa = true>}
      : tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

// -----

// A row_tiles past every bound is refused where it is written, before any
// rule divides by it.
func.func @pinned_decode_row_tiles_huge(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                                        %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  // expected-error @+1 {{decode_schedule row_tiles must be from 1 to 8, got 268435456 (fp32 accumulators in registers)}}
  %o = attn.decode %q, %c, %bt, %lens {schedule = #attn.decode_schedule<warps = 4, stages = 2, row_tiles = 268435456, min_chunk_tokens = 256, ctas_per_sm = 2>}
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

