// RUN: attn-opt %s --split-input-file --attn-select-schedule | FileCheck %s --check-prefixes=CHECK,SM90
// RUN: attn-opt %s --split-input-file --attn-select-schedule="arch=sm_90a" | FileCheck %s --check-prefixes=CHECK,SM90
// RUN: attn-opt %s --split-input-file --attn-select-schedule="arch=sm_80" | FileCheck %s --check-prefixes=CHECK,SM80
// RUN: attn-opt %s --split-input-file --attn-select-schedule="arch=sm_89" | FileCheck %s --check-prefixes=CHECK,SM89
// RUN: not attn-opt %s --split-input-file --attn-select-schedule="arch=sm_70" 2>&1 | FileCheck %s --check-prefix=ERR

// The schedule chooseDecodeSchedule picks per arch and shape class:
//   row_tiles = min(ceil(group * query_len / 16), head_dim <= 128 ? 2 : 1)
//   warps = 8 and stages = 2 when such a CTA (templates/attn/decode_layout.h)
//           fits an SM's shared memory (228/164/100 KiB), else warps = 4
//   ctas_per_sm = how many of those CTAs the SM's shared memory holds, at
//           most 64K registers / (threads x 128) (2 for 8 warps) while
//           row_tiles x head_dim <= 128 and no modifier region, else 1
// and choosePrefillSchedule: on sm_90a, ragged attn.prefill at head dim 64,
// 128 or 256, and attn.paged_prefill there over a cache of q's type with
// pages of a multiple of 16 tokens, take the wgmma template (mma = wgmma:
// warps = 12, block_m = 128, block_n = 128, 64 at head dim 256, stages = 2;
// at head dim 64 without a causal mask warps = 16, block_m = 192);
// every other prefill, the mma.sync template:
//   warps = 4; block_n = 64 up to head dim 128, 32 above; stages = 2
//   block_m = 32 * warps = 128 (two 16-row tiles per warp) up to head dim 128
//             when the CTA (templates/attn/prefill_layout.h: Q tile, K/V
//             ring, and for FP8 caches the widened K/V tiles) fits the SM's
//             shared memory less 1 KiB, else 16 * warps = 64

// ERR: error: attn-select-schedule: unknown arch 'sm_70'; expected sm_80, sm_89 or sm_90a

// The target is recorded on the module.
// SM90: module attributes {attn.arch = "sm_90a"}
// SM80: module attributes {attn.arch = "sm_80"}
// SM89: module attributes {attn.arch = "sm_89"}
// CHECK-LABEL: func.func @mha_bf16_d128
func.func @mha_bf16_d128(%q: tensor<?x32x128xbf16>,
    %c: !attn.paged_kv<32x128xbf16, page_size = 16, layout = nhd>,
    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  // One row per CTA: the CUDA-core path, no ring (4 KiB of merge scratch),
  // so eight warps everywhere and two CTAs per SM by registers.
  // SM90: attn.decode {{.*}}schedule = #attn.decode_schedule<warps = 8, stages = 2, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>
  // SM80: attn.decode {{.*}}schedule = #attn.decode_schedule<warps = 8, stages = 2, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>
  // SM89: attn.decode {{.*}}schedule = #attn.decode_schedule<warps = 8, stages = 2, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>
  %o = attn.decode %q, %c, %bt, %lens
      : tensor<?x32x128xbf16>, !attn.paged_kv<32x128xbf16, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

// -----

// CHECK-LABEL: func.func @gqa8_bf16_d128
func.func @gqa8_bf16_d128(%q: tensor<?x64x128xbf16>,
    %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x64x128xbf16> {
  // 8 rows fit one 16-row tile; same budget as MHA.
  // SM90: schedule = #attn.decode_schedule<warps = 8, stages = 2, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 1>
  // SM80: schedule = #attn.decode_schedule<warps = 8, stages = 2, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 1>
  // SM89: schedule = #attn.decode_schedule<warps = 4, stages = 2, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 1>
  %o = attn.decode %q, %c, %bt, %lens {mask = #attn.mask<causal>}
      : tensor<?x64x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x64x128xbf16>
  return %o : tensor<?x64x128xbf16>
}

// -----

// CHECK-LABEL: func.func @mqa_f16_d128
func.func @mqa_f16_d128(%q: tensor<?x32x128xf16>,
    %c: !attn.paged_kv<1x128xf16, page_size = 16, layout = hnd>,
    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x32x128xf16> {
  // 32 rows: two tiles (the register cap at head dim 128); Q takes 8 KiB.
  // SM90: schedule = #attn.decode_schedule<warps = 8, stages = 2, row_tiles = 2, min_chunk_tokens = 256, ctas_per_sm = 1>
  // SM80: schedule = #attn.decode_schedule<warps = 8, stages = 2, row_tiles = 2, min_chunk_tokens = 256, ctas_per_sm = 1>
  // SM89: schedule = #attn.decode_schedule<warps = 4, stages = 2, row_tiles = 2, min_chunk_tokens = 256, ctas_per_sm = 1>
  %o = attn.decode %q, %c, %bt, %lens
      : tensor<?x32x128xf16>, !attn.paged_kv<1x128xf16, page_size = 16, layout = hnd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xf16>
  return %o : tensor<?x32x128xf16>
}

// -----

// CHECK-LABEL: func.func @mqa_bf16_d256
func.func @mqa_bf16_d256(%q: tensor<?x32x256xbf16>,
    %c: !attn.paged_kv<1x256xbf16, page_size = 16, layout = nhd>,
    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x32x256xbf16> {
  // Head dim 256: one tile per CTA whatever the group; a stage is 64 KiB, so
  // every arch gets the minimum of 2, and sm_89's 99 KiB per CTA fits two
  // warps of them, not four.
  // SM90: schedule = #attn.decode_schedule<warps = 4, stages = 2, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 1>
  // SM80: schedule = #attn.decode_schedule<warps = 4, stages = 2, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 1>
  // SM89: schedule = #attn.decode_schedule<warps = 2, stages = 2, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 1>
  %o = attn.decode %q, %c, %bt, %lens
      : tensor<?x32x256xbf16>, !attn.paged_kv<1x256xbf16, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x256xbf16>
  return %o : tensor<?x32x256xbf16>
}

// -----

// CHECK-LABEL: func.func @fp8_cache_d128
func.func @fp8_cache_d128(%q: tensor<?x32x128xbf16>,
    %c: !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>, %s: tensor<8xf32>) -> tensor<?x32x128xbf16> {
  // One-byte KV halves a stage (16 KiB): (110K - 4K) / 16K = 6; 76K / 16K = 4; 44K / 16K = 2.
  // SM90: schedule = #attn.decode_schedule<warps = 8, stages = 2, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>
  // SM80: schedule = #attn.decode_schedule<warps = 8, stages = 2, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>
  // SM89: schedule = #attn.decode_schedule<warps = 8, stages = 2, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 1>
  %o = attn.decode %q, %c, %bt, %lens kv_scales(%s, %s : tensor<8xf32>, tensor<8xf32>)
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

// -----

// CHECK-LABEL: func.func @query_len4_gqa8
func.func @query_len4_gqa8(%q: tensor<?x64x128xbf16>,
    %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x64x128xbf16> {
  // Speculative decoding: 8 heads x 4 tokens = 32 rows, two tiles.
  // SM90: schedule = #attn.decode_schedule<warps = 8, stages = 2, row_tiles = 2, min_chunk_tokens = 256, ctas_per_sm = 1>
  // SM80: schedule = #attn.decode_schedule<warps = 8, stages = 2, row_tiles = 2, min_chunk_tokens = 256, ctas_per_sm = 1>
  // SM89: schedule = #attn.decode_schedule<warps = 4, stages = 2, row_tiles = 2, min_chunk_tokens = 256, ctas_per_sm = 1>
  %o = attn.decode %q, %c, %bt, %lens {mask = #attn.mask<causal>, query_len = 4}
      : tensor<?x64x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x64x128xbf16>
  return %o : tensor<?x64x128xbf16>
}

// -----

// CHECK-LABEL: func.func @gqa4_bf16_d64
func.func @gqa4_bf16_d64(%q: tensor<?x32x64xbf16>,
    %c: !attn.paged_kv<8x64xbf16, page_size = 16, layout = nhd>,
    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x32x64xbf16> {
  // Head dim 64: shared memory holds 3 CTAs on sm_90a; registers 2.
  // SM90: schedule = #attn.decode_schedule<warps = 8, stages = 2, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>
  // SM80: schedule = #attn.decode_schedule<warps = 8, stages = 2, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>
  // SM89: schedule = #attn.decode_schedule<warps = 8, stages = 2, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 1>
  %o = attn.decode %q, %c, %bt, %lens
      : tensor<?x32x64xbf16>, !attn.paged_kv<8x64xbf16, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x64xbf16>
  return %o : tensor<?x32x64xbf16>
}

// -----

// CHECK-LABEL: func.func @fp8_d64_deepest
func.func @fp8_d64_deepest(%q: tensor<?x8x64xf16>,
    %c: !attn.paged_kv<8x64xf8E5M2, page_size = 32, layout = hnd>,
    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>, %s: tensor<1xf32>) -> tensor<?x8x64xf16> {
  // Shared memory holds 5 CTAs on sm_90a, 3 on sm_80; registers 2.
  // SM90: schedule = #attn.decode_schedule<warps = 8, stages = 2, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>
  // SM80: schedule = #attn.decode_schedule<warps = 8, stages = 2, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>
  // SM89: schedule = #attn.decode_schedule<warps = 8, stages = 2, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>
  %o = attn.decode %q, %c, %bt, %lens kv_scales(%s, %s : tensor<1xf32>, tensor<1xf32>)
      : tensor<?x8x64xf16>, !attn.paged_kv<8x64xf8E5M2, page_size = 32, layout = hnd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x8x64xf16>
  return %o : tensor<?x8x64xf16>
}

// -----

// CHECK-LABEL: func.func @pinned
func.func @pinned(%q: tensor<?x32x128xbf16>,
    %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  // A schedule the user wrote is kept on every arch.
  // CHECK: schedule = #attn.decode_schedule<warps = 2, stages = 5, row_tiles = 2, min_chunk_tokens = 512, ctas_per_sm = 1>
  // CHECK-NOT: #attn.decode_schedule
  %o = attn.decode %q, %c, %bt, %lens {schedule = #attn.decode_schedule<warps = 2, stages = 5, row_tiles = 2, min_chunk_tokens = 512, ctas_per_sm = 1>}
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

// -----

// CHECK-LABEL: func.func @prefill_gqa_bf16_d128
func.func @prefill_gqa_bf16_d128(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>,
    %v: tensor<?x8x128xbf16>, %cu_q: tensor<?xi32>, %cu_kv: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  // Llama-style causal GQA prefill: sm_90a's wgmma template (a producer and
  // two 64-row consumer warpgroups, 128-key tiles); elsewhere mma.sync with
  // 64-key K/V tiles.
  // SM90: attn.prefill {{.*}}schedule = #attn.prefill_schedule<warps = 12, block_m = 128, block_n = 128, stages = 2, mma = wgmma>
  // SM80: attn.prefill {{.*}}schedule = #attn.prefill_schedule<warps = 4, block_m = 128, block_n = 64, stages = 2, pack_gqa = true>
  // SM89: attn.prefill {{.*}}schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2, pack_gqa = true>
  %o = attn.prefill %q, %k, %v, %cu_q, %cu_kv {mask = #attn.mask<causal>}
      : tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

// -----

// CHECK-LABEL: func.func @prefill_encoder_f16_d64
func.func @prefill_encoder_f16_d64(%q: tensor<?x12x64xf16>, %cu: tensor<?xi32>) -> tensor<?x12x64xf16> {
  // Small heads without a causal mask: on sm_90a three 64-row consumer
  // warpgroups (160 registers each fit head dim 64); elsewhere the same
  // tiles as at head dim 128.
  // SM90: attn.prefill {{.*}}schedule = #attn.prefill_schedule<warps = 16, block_m = 192, block_n = 128, stages = 2, mma = wgmma>
  // SM80: attn.prefill {{.*}}schedule = #attn.prefill_schedule<warps = 4, block_m = 128, block_n = 64, stages = 2>
  // SM89: attn.prefill {{.*}}schedule = #attn.prefill_schedule<warps = 4, block_m = 128, block_n = 64, stages = 2>
  %o = attn.prefill %q, %q, %q, %cu, %cu {kind = #attn.kind<encoder>}
      : tensor<?x12x64xf16>, tensor<?x12x64xf16>, tensor<?x12x64xf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x12x64xf16>
  return %o : tensor<?x12x64xf16>
}

// -----

// CHECK-LABEL: func.func @prefill_causal_bf16_d64
func.func @prefill_causal_bf16_d64(%q: tensor<?x32x64xbf16>, %k: tensor<?x8x64xbf16>,
    %cu: tensor<?xi32>) -> tensor<?x32x64xbf16> {
  // Causal at head dim 64: two consumers (192-row tiles waste more of the
  // diagonal on short prompts).
  // SM90: attn.prefill {{.*}}schedule = #attn.prefill_schedule<warps = 12, block_m = 128, block_n = 128, stages = 2, mma = wgmma>
  // SM80: attn.prefill {{.*}}schedule = #attn.prefill_schedule<warps = 4, block_m = 128, block_n = 64, stages = 2, pack_gqa = true>
  // SM89: attn.prefill {{.*}}schedule = #attn.prefill_schedule<warps = 4, block_m = 128, block_n = 64, stages = 2, pack_gqa = true>
  %o = attn.prefill %q, %k, %k, %cu, %cu {mask = #attn.mask<causal>}
      : tensor<?x32x64xbf16>, tensor<?x8x64xbf16>, tensor<?x8x64xbf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x32x64xbf16>
  return %o : tensor<?x32x64xbf16>
}

// -----

// CHECK-LABEL: func.func @prefill_bf16_d256
func.func @prefill_bf16_d256(%q: tensor<?x16x256xbf16>, %k: tensor<?x8x256xbf16>,
    %cu: tensor<?xi32>) -> tensor<?x16x256xbf16> {
  // Head dim 256 (Gemma 2): on sm_90a the wgmma template with 64-key tiles
  // (O takes 128 of a consumer's 240 registers; Q 64 KiB + ring 128 KiB);
  // elsewhere 32 keys per tile keep the mma.sync accumulators in registers
  // and the K/V ring at 64 KiB.
  // SM90: attn.prefill {{.*}}schedule = #attn.prefill_schedule<warps = 12, block_m = 128, block_n = 64, stages = 2, mma = wgmma>
  // SM80: attn.prefill {{.*}}schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 32, stages = 2, pack_gqa = true>
  // SM89: attn.prefill {{.*}}schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 32, stages = 2, pack_gqa = true>
  %o = attn.prefill %q, %k, %k, %cu, %cu {mask = #attn.mask<causal, window_left = 4096>, softcap = 50.0 : f32}
      : tensor<?x16x256xbf16>, tensor<?x8x256xbf16>, tensor<?x8x256xbf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x16x256xbf16>
  return %o : tensor<?x16x256xbf16>
}

// -----

// CHECK-LABEL: func.func @prefill_d136
func.func @prefill_d136(%q: tensor<?x8x136xbf16>, %cu: tensor<?xi32>) -> tensor<?x8x136xbf16> {
  // Just above 128: already the narrow K/V tile.
  // CHECK: attn.prefill {{.*}}schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 32, stages = 2>
  %o = attn.prefill %q, %q, %q, %cu, %cu
      : tensor<?x8x136xbf16>, tensor<?x8x136xbf16>, tensor<?x8x136xbf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x8x136xbf16>
  return %o : tensor<?x8x136xbf16>
}

// -----

// CHECK-LABEL: func.func @prefill_pinned
func.func @prefill_pinned(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>,
    %cu: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  // A prefill schedule the user wrote is kept on every arch.
  // CHECK: schedule = #attn.prefill_schedule<warps = 8, block_m = 128, block_n = 32, stages = 3>
  // CHECK-NOT: #attn.prefill_schedule
  %o = attn.prefill %q, %k, %k, %cu, %cu
      {schedule = #attn.prefill_schedule<warps = 8, block_m = 128, block_n = 32, stages = 3>}
      : tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

// -----

// CHECK-LABEL: func.func @paged_prefill_bf16_d128
func.func @paged_prefill_bf16_d128(%q: tensor<?x32x128xbf16>,
    %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
    %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  // Chunked prefill over a bf16 cache: the ragged prefill's choice (sm_90a:
  // the wgmma template, 8 TMA boxes of 16-token pages per K/V tile). 128
  // rows: Q 34 KiB + ring 68 KiB = 102 KiB, over sm_89's 99 KiB.
  // SM90: attn.paged_prefill {{.*}}schedule = #attn.prefill_schedule<warps = 12, block_m = 128, block_n = 128, stages = 2, mma = wgmma>
  // SM80: attn.paged_prefill {{.*}}schedule = #attn.prefill_schedule<warps = 4, block_m = 128, block_n = 64, stages = 2, pack_gqa = true>
  // SM89: attn.paged_prefill {{.*}}schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2, pack_gqa = true>
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens {mask = #attn.mask<causal>}
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
        tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

// -----

// CHECK-LABEL: func.func @paged_prefill_f16_p8_d64
func.func @paged_prefill_f16_p8_d64(%q: tensor<?x32x64xf16>,
    %c: !attn.paged_kv<8x64xf16, page_size = 8, layout = hnd>,
    %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x32x64xf16> {
  // Pages of 8 tokens (16 TMA boxes per tile) keep the mma.sync template,
  // which gathers rows with cp.async; so do FP8 caches (below).
  // SM90: attn.paged_prefill {{.*}}schedule = #attn.prefill_schedule<warps = 4, block_m = 128, block_n = 64, stages = 2, pack_gqa = true>
  // SM80: attn.paged_prefill {{.*}}schedule = #attn.prefill_schedule<warps = 4, block_m = 128, block_n = 64, stages = 2, pack_gqa = true>
  // SM89: attn.paged_prefill {{.*}}schedule = #attn.prefill_schedule<warps = 4, block_m = 128, block_n = 64, stages = 2, pack_gqa = true>
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens {mask = #attn.mask<causal>}
      : tensor<?x32x64xf16>, !attn.paged_kv<8x64xf16, page_size = 8, layout = hnd>,
        tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x64xf16>
  return %o : tensor<?x32x64xf16>
}

// -----

// CHECK-LABEL: func.func @paged_prefill_fp8_d128
func.func @paged_prefill_fp8_d128(%q: tensor<?x32x128xbf16>,
    %c: !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = hnd>,
    %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>, %s: tensor<8xf32>) -> tensor<?x32x128xbf16> {
  // FP8 cache: a 32 KiB ring of raw rows plus 34 KiB of widened K/V tiles;
  // with the 34 KiB Q tile 100 KiB, still over sm_89's 99 KiB. sm_90a
  // takes the wgmma template, widening in shared memory.
  // SM90: attn.paged_prefill {{.*}}schedule = #attn.prefill_schedule<warps = 12, block_m = 128, block_n = 128, stages = 2, mma = wgmma>
  // SM80: attn.paged_prefill {{.*}}schedule = #attn.prefill_schedule<warps = 4, block_m = 128, block_n = 64, stages = 2, pack_gqa = true>
  // SM89: attn.paged_prefill {{.*}}schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2, pack_gqa = true>
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens kv_scales(%s, %s : tensor<8xf32>, tensor<8xf32>)
      {mask = #attn.mask<causal>}
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = hnd>,
        tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

// -----

// CHECK-LABEL: func.func @paged_prefill_bf16_d256
func.func @paged_prefill_bf16_d256(%q: tensor<?x16x256xbf16>,
    %c: !attn.paged_kv<8x256xbf16, page_size = 16, layout = nhd>,
    %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x16x256xbf16> {
  // Head dim 256: Q 33 KiB + ring 66 KiB = 99 KiB, which just fits sm_89;
  // sm_90a takes the wgmma template with 64-key tiles (4 TMA boxes of
  // 16-token pages per column block).
  // SM90: attn.paged_prefill {{.*}}schedule = #attn.prefill_schedule<warps = 12, block_m = 128, block_n = 64, stages = 2, mma = wgmma>
  // SM80: attn.paged_prefill {{.*}}schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 32, stages = 2, pack_gqa = true>
  // SM89: attn.paged_prefill {{.*}}schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 32, stages = 2, pack_gqa = true>
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens {mask = #attn.mask<causal, window_left = 4096>, softcap = 50.0 : f32}
      : tensor<?x16x256xbf16>, !attn.paged_kv<8x256xbf16, page_size = 16, layout = nhd>,
        tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x16x256xbf16>
  return %o : tensor<?x16x256xbf16>
}

// -----

// CHECK-LABEL: func.func @paged_prefill_fp8_d256
func.func @paged_prefill_fp8_d256(%q: tensor<?x16x256xf16>,
    %c: !attn.paged_kv<8x256xf8E5M2, page_size = 32, layout = hnd>,
    %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>, %s: tensor<1xf32>) -> tensor<?x16x256xf16> {
  // FP8 at head dim 256: Q 33 KiB + ring 32 KiB + widened 33 KiB = 98 KiB,
  // within sm_89's 99 KiB; the wgmma template on sm_90a.
  // SM90: attn.paged_prefill {{.*}}schedule = #attn.prefill_schedule<warps = 12, block_m = 128, block_n = 64, stages = 2, mma = wgmma>
  // SM80: attn.paged_prefill {{.*}}schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 32, stages = 2, pack_gqa = true>
  // SM89: attn.paged_prefill {{.*}}schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 32, stages = 2, pack_gqa = true>
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens kv_scales(%s, %s : tensor<1xf32>, tensor<1xf32>)
      {mask = #attn.mask<causal>}
      : tensor<?x16x256xf16>, !attn.paged_kv<8x256xf8E5M2, page_size = 32, layout = hnd>,
        tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x16x256xf16>
  return %o : tensor<?x16x256xf16>
}

// -----

// CHECK-LABEL: func.func @paged_prefill_pinned
func.func @paged_prefill_pinned(%q: tensor<?x32x128xbf16>,
    %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
    %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  // A paged-prefill schedule the user wrote is kept on every arch.
  // CHECK: schedule = #attn.prefill_schedule<warps = 8, block_m = 128, block_n = 32, stages = 3>
  // CHECK-NOT: #attn.prefill_schedule
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens
      {schedule = #attn.prefill_schedule<warps = 8, block_m = 128, block_n = 32, stages = 3>}
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
        tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

