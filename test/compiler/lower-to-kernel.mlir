// RUN: attn-opt %s --split-input-file --attn-lower-to-kernel | FileCheck %s
// The lowered IR round-trips, in the custom and the generic form.
// RUN: attn-opt %s --split-input-file --attn-lower-to-kernel | attn-opt --split-input-file | FileCheck %s
// RUN: attn-opt %s --split-input-file --attn-lower-to-kernel --mlir-print-op-generic | attn-opt --split-input-file | FileCheck %s

// Each scheduled attn.decode and attn.prefill, each attn.append_kv and each
// attn.merge_states becomes
// the launch of its kernel: symbol and full spec (what codegen reads); the
// operands and results are kept.

module attributes {attn.arch = "sm_90a"} {
// CHECK-LABEL: func.func @decode_gqa_bf16
// CHECK-SAME: (%[[Q:.+]]: tensor<?x32x128xbf16>, %[[C:.+]]: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, %[[BT:.+]]: tensor<?x?xi32>, %[[LENS:.+]]: tensor<?xi32>)
func.func @decode_gqa_bf16(%q: tensor<?x32x128xbf16>,
    %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  // symbol = "attn_" + spec.uri()
  // CHECK: %[[OUT:.+]] = attn.kernel_launch @attn_decode_qbf16_kvbf16_h32x8_d128_p16nhd_w4s3r1
  // Compile-time parameters; flags that are off are left out.
  // CHECK-SAME: spec #attn.kernel_spec<kind = decode, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd, schedule = #attn.decode_schedule<warps = 4, stages = 3, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>>
  // CHECK-SAME: (%[[Q]], %[[C]], %[[BT]], %[[LENS]])
  // CHECK-SAME: : (tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?x?xi32>, tensor<?xi32>) -> tensor<?x32x128xbf16>
  // CHECK-NOT: {{= attn\.decode }}
  // CHECK: return %[[OUT]]
  %o = attn.decode %q, %c, %bt, %lens
      {mask = #attn.mask<causal>, schedule = #attn.decode_schedule<warps = 4, stages = 3, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>}
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}
}

// -----

module attributes {attn.arch = "sm_80"} {
// CHECK-LABEL: func.func @decode_every_flag
// CHECK-SAME: (%[[Q:[^:]+]]: {{[^,]+}}, %[[C:[^:]+]]: {{.+}}, %[[BT:[^:]+]]: {{[^,]+}}, %[[LENS:[^:]+]]: {{[^,]+}}, %[[KS:[^:]+]]: tensor<8xf32>, %[[VS:[^:]+]]: tensor<8xf32>, %[[SLOPES:[^:]+]]: tensor<64xf32>)
func.func @decode_every_flag(%q: tensor<?x64x96xf16>,
    %c: !attn.paged_kv<8x96xf8E4M3FN, page_size = 32, layout = hnd>,
    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>, %ks: tensor<8xf32>, %vs: tensor<8xf32>,
    %slopes: tensor<64xf32>) -> (tensor<?x64x96xf16>, tensor<?x64xf32>) {
  // FP8 cache with per-head scales (8 = num_kv_heads), ALiBi, soft-cap, a
  // sliding window, 2 query tokens, an LSE output and batch invariance:
  // every flag is on.
  // CHECK: %[[OUT:.+]]:2 = attn.kernel_launch @attn_decode_qf16_kve4m3_h64x8_d96_p32hnd_ql2_causal_sliding_window_alibi_softcap_per_head_kv_scale_write_lse_batch_invariant_w4s5r1
  // CHECK-SAME: spec #attn.kernel_spec<kind = decode, arch = "sm_80", q_type = f16, kv_type = f8E4M3FN, num_q_heads = 64, num_kv_heads = 8, head_dim = 96, page_size = 32, layout = hnd, query_len = 2, causal = true, sliding_window = true, alibi = true, softcap = true, per_head_kv_scale = true, write_lse = true, batch_invariant = true, schedule = #attn.decode_schedule<warps = 4, stages = 5, row_tiles = 1, min_chunk_tokens = 128, ctas_per_sm = 2>>
  // CHECK-SAME: (%[[Q]], %[[C]], %[[BT]], %[[LENS]], %[[KS]], %[[VS]], %[[SLOPES]])
  // CHECK-SAME: -> (tensor<?x64x96xf16>, tensor<?x64xf32>)
  // CHECK: return %[[OUT]]#0, %[[OUT]]#1
  %o, %lse = attn.decode %q, %c, %bt, %lens kv_scales(%ks, %vs : tensor<8xf32>, tensor<8xf32>)
      alibi(%slopes : tensor<64xf32>)
      {batch_invariant, mask = #attn.mask<causal, window_left = 1024>, query_len = 2, scale = 0.125 : f32, softcap = 30.0 : f32,
       schedule = #attn.decode_schedule<warps = 4, stages = 5, row_tiles = 1, min_chunk_tokens = 128, ctas_per_sm = 2>}
      : tensor<?x64x96xf16>, !attn.paged_kv<8x96xf8E4M3FN, page_size = 32, layout = hnd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x64x96xf16>, tensor<?x64xf32>
  return %o, %lse : tensor<?x64x96xf16>, tensor<?x64xf32>
}
}

// -----

module attributes {attn.arch = "sm_89"} {
// CHECK-LABEL: func.func @decode_cross_mqa
func.func @decode_cross_mqa(%q: tensor<?x48x128xbf16>,
    %c: !attn.paged_kv<1x128xbf16, page_size = 16, layout = nhd>,
    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x48x128xbf16> {
  // Cross attention decodes like non-causal self attention. 48 rows over
  // 2-tile CTAs: grid.z = ceil(48 / 32) = 2.
  // CHECK: attn.kernel_launch @attn_decode_qbf16_kvbf16_h48x1_d128_p16nhd_w4s2r2
  // CHECK-SAME: spec #attn.kernel_spec<kind = decode, arch = "sm_89", q_type = bf16, kv_type = bf16, num_q_heads = 48, num_kv_heads = 1, head_dim = 128, page_size = 16, layout = nhd, schedule =
  %o = attn.decode %q, %c, %bt, %lens
      {kind = #attn.kind<cross>, schedule = #attn.decode_schedule<warps = 4, stages = 2, row_tiles = 2, min_chunk_tokens = 256, ctas_per_sm = 2>}
      : tensor<?x48x128xbf16>, !attn.paged_kv<1x128xbf16, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x48x128xbf16>
  return %o : tensor<?x48x128xbf16>
}
}

// -----

module attributes {attn.arch = "sm_90a"} {
// CHECK-LABEL: func.func @append_kv_fp8_then_decode
// CHECK-SAME: (%[[K:[^:]+]]: {{[^,]+}}, %[[V:[^:]+]]: {{[^,]+}}, %[[C:[^:]+]]: {{.+}}, %[[SLOTS:[^:]+]]: tensor<?xi64>, %[[S:[^:]+]]: tensor<1xf32>
func.func @append_kv_fp8_then_decode(%k: tensor<?x8x128xbf16>, %v: tensor<?x8x128xbf16>,
    %c: !attn.paged_kv<8x128xf8E5M2, page_size = 16, layout = nhd>, %slots: tensor<?xi64>,
    %s: tensor<1xf32>, %q: tensor<?x32x128xbf16>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>)
    -> tensor<?x32x128xbf16> {
  // Per-tensor scales (one element): no per_head_kv_scale; append_kv specs
  // repeat the KV heads as q heads and carry no decode fields.
  // CHECK: %[[C1:.+]] = attn.kernel_launch @attn_append_kv_qbf16_kve5m2_h8x8_d128_p16nhd
  // CHECK-SAME: spec #attn.kernel_spec<kind = append_kv, arch = "sm_90a", q_type = bf16, kv_type = f8E5M2, num_q_heads = 8, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd>
  // CHECK-SAME: (%[[K]], %[[V]], %[[C]], %[[SLOTS]], %[[S]], %[[S]])
  // CHECK-SAME: : (tensor<?x8x128xbf16>, tensor<?x8x128xbf16>, !attn.paged_kv<8x128xf8E5M2, page_size = 16, layout = nhd>, tensor<?xi64>, tensor<1xf32>, tensor<1xf32>) -> !attn.paged_kv<8x128xf8E5M2, page_size = 16, layout = nhd>
  // The decode reads the cache the append produced.
  // CHECK: attn.kernel_launch @attn_decode_qbf16_kve5m2_h32x8_d128_p16nhd_w4s6r1
  // CHECK-SAME: (%{{.+}}, %[[C1]],
  %c1 = attn.append_kv %k, %v into %c at %slots kv_scales(%s, %s : tensor<1xf32>, tensor<1xf32>)
      : tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
        !attn.paged_kv<8x128xf8E5M2, page_size = 16, layout = nhd>, tensor<?xi64>
  %o = attn.decode %q, %c1, %bt, %lens kv_scales(%s, %s : tensor<1xf32>, tensor<1xf32>)
      {schedule = #attn.decode_schedule<warps = 4, stages = 6, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>}
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xf8E5M2, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}
}

// -----

module attributes {attn.arch = "sm_90a"} {
// CHECK-LABEL: func.func @prefill_gqa_causal
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<?x32x128xbf16>, %[[K:[^:]+]]: tensor<?x8x128xbf16>, %[[V:[^:]+]]: tensor<?x8x128xbf16>, %[[CUQ:[^:]+]]: tensor<?xi32>, %[[CUKV:[^:]+]]: tensor<?xi32>)
func.func @prefill_gqa_causal(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>,
    %v: tensor<?x8x128xbf16>, %cu_q: tensor<?xi32>, %cu_kv: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  // A ragged prefill reads no cache: no page part in the symbol, and the
  // spec's cache fields take their canonical values (kv_type = q_type,
  // page_size left out, layout = nhd).
  // CHECK: %[[OUT:.+]] = attn.kernel_launch @attn_prefill_qbf16_kvbf16_h32x8_d128_causal_m64n64w4s2
  // CHECK-SAME: spec #attn.kernel_spec<kind = prefill, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, layout = nhd, causal = true, prefill_schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2>>
  // CHECK-SAME: (%[[Q]], %[[K]], %[[V]], %[[CUQ]], %[[CUKV]])
  // CHECK-SAME: : (tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>, tensor<?xi32>, tensor<?xi32>) -> tensor<?x32x128xbf16>
  // CHECK-NOT: {{= attn\.prefill }}
  // CHECK: return %[[OUT]]
  %o = attn.prefill %q, %k, %v, %cu_q, %cu_kv
      {mask = #attn.mask<causal>, schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2>}
      : tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}
}

// -----

module attributes {attn.arch = "sm_80"} {
// CHECK-LABEL: func.func @prefill_every_flag
// CHECK-SAME: %[[SLOPES:[^:]+]]: tensor<16xf32>)
func.func @prefill_every_flag(%q: tensor<?x16x256xf16>, %k: tensor<?x2x256xf16>,
    %cu_q: tensor<?xi32>, %cu_kv: tensor<?xi32>, %slopes: tensor<16xf32>)
    -> (tensor<?x16x256xf16>, tensor<?x16xf32>) {
  // Window, ALiBi, soft-cap and LSE; a pinned schedule of 8 warps.
  // CHECK: %[[OUT:.+]]:2 = attn.kernel_launch @attn_prefill_qf16_kvf16_h16x2_d256_causal_sliding_window_alibi_softcap_write_lse_m128n32w8s2
  // CHECK-SAME: spec #attn.kernel_spec<kind = prefill, arch = "sm_80", q_type = f16, kv_type = f16, num_q_heads = 16, num_kv_heads = 2, head_dim = 256, layout = nhd, causal = true, sliding_window = true, alibi = true, softcap = true, write_lse = true, prefill_schedule = #attn.prefill_schedule<warps = 8, block_m = 128, block_n = 32, stages = 2>>
  // CHECK-SAME: ({{.*}}, %[[SLOPES]])
  // CHECK-SAME: -> (tensor<?x16x256xf16>, tensor<?x16xf32>)
  // CHECK: return %[[OUT]]#0, %[[OUT]]#1
  %o, %lse = attn.prefill %q, %k, %k, %cu_q, %cu_kv alibi(%slopes : tensor<16xf32>)
      {mask = #attn.mask<causal, window_left = 4096>, scale = 0.0625 : f32, softcap = 50.0 : f32,
       schedule = #attn.prefill_schedule<warps = 8, block_m = 128, block_n = 32, stages = 2>}
      : tensor<?x16x256xf16>, tensor<?x2x256xf16>, tensor<?x2x256xf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x16x256xf16>, tensor<?x16xf32>
  return %o, %lse : tensor<?x16x256xf16>, tensor<?x16xf32>
}
}

// -----

module attributes {attn.arch = "sm_90a"} {
// CHECK-LABEL: func.func @paged_prefill_gqa_causal
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<?x32x128xbf16>, %[[C:[^:]+]]: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, %[[CUQ:[^:]+]]: tensor<?xi32>, %[[BT:[^:]+]]: tensor<?x?xi32>, %[[LENS:[^:]+]]: tensor<?xi32>)
func.func @paged_prefill_gqa_causal(%q: tensor<?x32x128xbf16>,
    %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
    %cu_q: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  // Chunked prefill over a paged cache: the prefill template (kPaged), the
  // cache fields in the symbol and spec as for decode, a prefill schedule.
  // CHECK: %[[OUT:.+]] = attn.kernel_launch @attn_paged_prefill_qbf16_kvbf16_h32x8_d128_p16nhd_causal_m128n64w4s2
  // CHECK-SAME: spec #attn.kernel_spec<kind = paged_prefill, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd, causal = true, prefill_schedule = #attn.prefill_schedule<warps = 4, block_m = 128, block_n = 64, stages = 2>>
  // CHECK-SAME: (%[[Q]], %[[C]], %[[CUQ]], %[[BT]], %[[LENS]])
  // CHECK-SAME: : (tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32>) -> tensor<?x32x128xbf16>
  // CHECK-NOT: {{= attn\.paged_prefill }}
  // CHECK: return %[[OUT]]
  %o = attn.paged_prefill %q, %c, %cu_q, %bt, %lens
      {mask = #attn.mask<causal>, schedule = #attn.prefill_schedule<warps = 4, block_m = 128, block_n = 64, stages = 2>}
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
        tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}
}

// -----

module attributes {attn.arch = "sm_89"} {
// CHECK-LABEL: func.func @paged_prefill_fp8_every_flag
// CHECK-SAME: %[[KS:[^:]+]]: tensor<8xf32>, %[[VS:[^:]+]]: tensor<8xf32>, %[[SLOPES:[^:]+]]: tensor<32xf32>)
func.func @paged_prefill_fp8_every_flag(%q: tensor<?x32x128xf16>,
    %c: !attn.paged_kv<8x128xf8E4M3FN, page_size = 32, layout = hnd>,
    %cu_q: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>,
    %ks: tensor<8xf32>, %vs: tensor<8xf32>, %slopes: tensor<32xf32>)
    -> (tensor<?x32x128xf16>, tensor<?x32xf32>) {
  // An e4m3 HND cache with per-head scales, window, ALiBi, soft-cap, LSE:
  // operands in the op's order (q, cache, cu_seqlens_q, page_tables,
  // seq_lens, k_scale, v_scale, slopes).
  // CHECK: %[[OUT:.+]]:2 = attn.kernel_launch @attn_paged_prefill_qf16_kve4m3_h32x8_d128_p32hnd_causal_sliding_window_alibi_softcap_per_head_kv_scale_write_lse_m64n64w4s2
  // CHECK-SAME: spec #attn.kernel_spec<kind = paged_prefill, arch = "sm_89", q_type = f16, kv_type = f8E4M3FN, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, page_size = 32, layout = hnd, causal = true, sliding_window = true, alibi = true, softcap = true, per_head_kv_scale = true, write_lse = true, prefill_schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2>>
  // CHECK-SAME: ({{.*}}, %[[KS]], %[[VS]], %[[SLOPES]])
  // CHECK-SAME: -> (tensor<?x32x128xf16>, tensor<?x32xf32>)
  // CHECK: return %[[OUT]]#0, %[[OUT]]#1
  %o, %lse = attn.paged_prefill %q, %c, %cu_q, %bt, %lens
      kv_scales(%ks, %vs : tensor<8xf32>, tensor<8xf32>) alibi(%slopes : tensor<32xf32>)
      {mask = #attn.mask<causal, window_left = 1024>, scale = 0.125 : f32, softcap = 30.0 : f32,
       schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2>}
      : tensor<?x32x128xf16>, !attn.paged_kv<8x128xf8E4M3FN, page_size = 32, layout = hnd>,
        tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xf16>, tensor<?x32xf32>
}
}

// -----

// merge_states needs no schedule: three bf16 partial states, merged in
// place of the op by one launch whose spec holds the dtype, heads and
// head_dim alone.
module attributes {attn.arch = "sm_90a"} {
// CHECK-LABEL: func.func @merge_three_states
func.func @merge_three_states(%oa: tensor<?x8x64xbf16>, %la: tensor<?x8xf32>,
    %ob: tensor<?x8x64xbf16>, %lb: tensor<?x8xf32>,
    %oc: tensor<?x8x64xbf16>, %lc: tensor<?x8xf32>)
    -> (tensor<?x8x64xbf16>, tensor<?x8xf32>) {
  // CHECK: %[[M:.+]]:2 = attn.kernel_launch @attn_merge_states_bf16_h8_d64
  // CHECK-SAME: spec #attn.kernel_spec<kind = merge_states, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 8, num_kv_heads = 8, head_dim = 64, layout = nhd>
  // CHECK-SAME: -> (tensor<?x8x64xbf16>, tensor<?x8xf32>)
  %o, %l = attn.merge_states %oa, %la, %ob, %lb, %oc, %lc
      : tensor<?x8x64xbf16>, tensor<?x8xf32>
  return %o, %l : tensor<?x8x64xbf16>, tensor<?x8xf32>
}
}

// -----

// CHECK-LABEL: func.func @nothing_to_lower
// A module without attn ops needs no target and is left as it is.
// CHECK-NEXT: arith.constant
func.func @nothing_to_lower() -> i32 {
  %c = arith.constant 1 : i32
  return %c : i32
}
