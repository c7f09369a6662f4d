// RUN: attn-opt %s | attn-opt | FileCheck %s
// Lowered, every op of it re-reads: the kernel_launch specs print as they parse.
// RUN: attn-opt %s --attn-pipeline | attn-opt | attn-opt --attn-pipeline | FileCheck %s --check-prefix=LOWERED
// LOWERED: kernel_spec<kind = merge_states, arch = "sm_90a", q_type = f32
// RUN: attn-opt %s --mlir-print-op-generic | attn-opt | FileCheck %s

// Every op, type and attribute of the attn dialect survives print -> parse ->
// print, in the custom and the generic form.

// CHECK-LABEL: func.func @prefill_causal_gqa
func.func @prefill_causal_gqa(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>,
                              %v: tensor<?x8x128xbf16>, %cu_q: tensor<?xi32>,
                              %cu_kv: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  // CHECK: attn.prefill %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {mask = #attn.mask<causal>}
  // CHECK-SAME: : tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  %o = attn.prefill %q, %k, %v, %cu_q, %cu_kv {mask = #attn.mask<causal>}
      : tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

// CHECK-LABEL: func.func @prefill_encoder_lse
func.func @prefill_encoder_lse(%q: tensor<64x12x64xf16>, %cu: tensor<3xi32>)
    -> (tensor<64x12x64xf16>, tensor<64x12xf32>) {
  // Bidirectional encoder attention with an explicit scale and LSE output.
  // CHECK: %[[OUT:.+]], %[[LSE:.+]] = attn.prefill
  // CHECK-SAME: kind = #attn.kind<encoder>
  // CHECK-SAME: mask = #attn.mask<none>
  // CHECK-SAME: scale = 1.250000e-01 : f32
  // CHECK-SAME: -> tensor<64x12x64xf16>, tensor<64x12xf32>
  %o, %lse = attn.prefill %q, %q, %q, %cu, %cu
      {kind = #attn.kind<encoder>, mask = #attn.mask<none>, scale = 0.125 : f32}
      : tensor<64x12x64xf16>, tensor<64x12x64xf16>, tensor<64x12x64xf16>,
        tensor<3xi32>, tensor<3xi32> -> tensor<64x12x64xf16>, tensor<64x12xf32>
  return %o, %lse : tensor<64x12x64xf16>, tensor<64x12xf32>
}

// CHECK-LABEL: func.func @prefill_cross_alibi_softcap
func.func @prefill_cross_alibi_softcap(%q: tensor<?x16x80xbf16>, %kv: tensor<?x16x80xbf16>,
                                       %cu_q: tensor<?xi32>, %cu_kv: tensor<?xi32>,
                                       %slopes: tensor<16xf32>) -> tensor<?x16x80xbf16> {
  // Cross attention: queries from the decoder, keys/values from the encoder.
  // CHECK: attn.prefill {{.*}} alibi(%{{.*}} : tensor<16xf32>)
  // CHECK-SAME: kind = #attn.kind<cross>
  // CHECK-SAME: softcap = 5.000000e+01 : f32
  %o = attn.prefill %q, %kv, %kv, %cu_q, %cu_kv alibi(%slopes : tensor<16xf32>)
      {kind = #attn.kind<cross>, softcap = 50.0 : f32}
      : tensor<?x16x80xbf16>, tensor<?x16x80xbf16>, tensor<?x16x80xbf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x16x80xbf16>
  return %o : tensor<?x16x80xbf16>
}

// CHECK-LABEL: func.func @paged_prefill_window_fp8
func.func @paged_prefill_window_fp8(
    %q: tensor<?x32x128xbf16>,
    %cache: !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
    %cu_q: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>,
    %ks: tensor<8xf32>, %vs: tensor<8xf32>) -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  // Chunked prefill over an FP8 cache with per-head scales and a window.
  // CHECK: attn.paged_prefill {{.*}} kv_scales(%{{.*}}, %{{.*}} : tensor<8xf32>, tensor<8xf32>)
  // CHECK-SAME: mask = #attn.mask<causal, window_left = 4096>
  // CHECK-SAME: !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>
  %o, %lse = attn.paged_prefill %q, %cache, %cu_q, %bt, %lens
      kv_scales(%ks, %vs : tensor<8xf32>, tensor<8xf32>)
      {mask = #attn.mask<causal, window_left = 4096>}
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
        tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>, tensor<?x32xf32>
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}

// CHECK-LABEL: func.func @decode_mqa_hnd
func.func @decode_mqa_hnd(
    %q: tensor<?x64x256xf16>,
    %cache: !attn.paged_kv<1x256xf16, page_size = 1, layout = hnd>,
    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x64x256xf16> {
  // MQA (64 q heads over one kv head), page size 1, head-major pages.
  // CHECK: attn.decode
  // CHECK-SAME: !attn.paged_kv<1x256xf16, page_size = 1, layout = hnd>
  %o = attn.decode %q, %cache, %bt, %lens
      : tensor<?x64x256xf16>, !attn.paged_kv<1x256xf16, page_size = 1, layout = hnd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x64x256xf16>
  return %o : tensor<?x64x256xf16>
}

// CHECK-LABEL: func.func @decode_speculative_e5m2_alibi
func.func @decode_speculative_e5m2_alibi(
    %q: tensor<16x32x96xbf16>,
    %cache: !attn.paged_kv<32x96xf8E5M2, page_size = 128, layout = nhd>,
    %bt: tensor<4x?xi32>, %lens: tensor<4xi32>, %s: tensor<1xf32>,
    %slopes: tensor<32xf32>) -> tensor<16x32x96xbf16> {
  // Four requests with four query tokens each (speculative decoding), causal
  // among the new tokens, an e5m2 cache with per-tensor scales, and ALiBi.
  // CHECK: attn.decode {{.*}} kv_scales(%{{.*}}, %{{.*}} : tensor<1xf32>, tensor<1xf32>) alibi(%{{.*}} : tensor<32xf32>)
  // CHECK-SAME: query_len = 4 : i64
  // CHECK-SAME: !attn.paged_kv<32x96xf8E5M2, page_size = 128, layout = nhd>
  %o = attn.decode %q, %cache, %bt, %lens kv_scales(%s, %s : tensor<1xf32>, tensor<1xf32>)
      alibi(%slopes : tensor<32xf32>) {mask = #attn.mask<causal>, query_len = 4}
      : tensor<16x32x96xbf16>, !attn.paged_kv<32x96xf8E5M2, page_size = 128, layout = nhd>,
        tensor<4x?xi32>, tensor<4xi32> -> tensor<16x32x96xbf16>
  return %o : tensor<16x32x96xbf16>
}

// CHECK-LABEL: func.func @gpt_oss_sinks
func.func @gpt_oss_sinks(
    %q: tensor<?x64x64xbf16>,
    %cache: !attn.paged_kv<8x64xbf16, page_size = 16, layout = nhd>,
    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>, %sinks: tensor<64xf32>,
    %cu: tensor<?xi32>) -> (tensor<?x64x64xbf16>, tensor<?x64x64xbf16>, tensor<?x64xf32>) {
  // gpt-oss: a sink logit per q head, on a sliding (128-key) layer.
  // CHECK: attn.decode {{.*}} sinks(%{{.*}} : tensor<64xf32>) {mask = #attn.mask<causal, window_left = 127>}
  %o = attn.decode %q, %cache, %bt, %lens sinks(%sinks : tensor<64xf32>)
      {mask = #attn.mask<causal, window_left = 127>}
      : tensor<?x64x64xbf16>, !attn.paged_kv<8x64xbf16, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x64x64xbf16>
  // CHECK: attn.paged_prefill {{.*}} sinks(%{{.*}} : tensor<64xf32>)
  %p, %lse = attn.paged_prefill %q, %cache, %cu, %bt, %lens sinks(%sinks : tensor<64xf32>)
      {mask = #attn.mask<causal>}
      : tensor<?x64x64xbf16>, !attn.paged_kv<8x64xbf16, page_size = 16, layout = nhd>,
        tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x64x64xbf16>, tensor<?x64xf32>
  return %o, %p, %lse : tensor<?x64x64xbf16>, tensor<?x64x64xbf16>, tensor<?x64xf32>
}

// CHECK-LABEL: func.func @decode_cross
func.func @decode_cross(
    %q: tensor<?x8x64xbf16>,
    %cache: !attn.paged_kv<8x64xbf16, page_size = 32, layout = nhd>,
    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x8x64xbf16> {
  // A decoder step reading cached encoder keys (encoder-decoder models).
  // CHECK: attn.decode {{.*}} {kind = #attn.kind<cross>}
  %o = attn.decode %q, %cache, %bt, %lens {kind = #attn.kind<cross>}
      : tensor<?x8x64xbf16>, !attn.paged_kv<8x64xbf16, page_size = 32, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x8x64xbf16>
  return %o : tensor<?x8x64xbf16>
}

// CHECK-LABEL: func.func @append_kv_quantize
func.func @append_kv_quantize(
    %k: tensor<?x8x128xbf16>, %v: tensor<?x8x128xbf16>,
    %cache: !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = hnd>,
    %slots: tensor<?xi64>, %ks: tensor<1xf32>, %vs: tensor<1xf32>)
    -> !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = hnd> {
  // Reshape-and-cache into an FP8 cache; the result is the updated cache.
  // CHECK: %{{.+}} = attn.append_kv %{{.*}}, %{{.*}} into %{{.*}} at %{{.*}} kv_scales(%{{.*}}, %{{.*}} : tensor<1xf32>, tensor<1xf32>)
  // CHECK-SAME: : tensor<?x8x128xbf16>, tensor<?x8x128xbf16>, !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = hnd>, tensor<?xi64>
  %c = attn.append_kv %k, %v into %cache at %slots
      kv_scales(%ks, %vs : tensor<1xf32>, tensor<1xf32>)
      : tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
        !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = hnd>, tensor<?xi64>
  return %c : !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = hnd>
}

// CHECK-LABEL: func.func @append_then_decode
func.func @append_then_decode(
    %q: tensor<?x32x128xf16>, %k: tensor<?x8x128xf16>, %v: tensor<?x8x128xf16>,
    %cache: !attn.paged_kv<8x128xf16, page_size = 16, layout = nhd>,
    %slots: tensor<?xi64>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x32x128xf16> {
  // The decode reads the cache that append_kv produced.
  // CHECK: %[[C:.+]] = attn.append_kv
  // CHECK: attn.decode %{{.*}}, %[[C]],
  %c = attn.append_kv %k, %v into %cache at %slots
      : tensor<?x8x128xf16>, tensor<?x8x128xf16>,
        !attn.paged_kv<8x128xf16, page_size = 16, layout = nhd>, tensor<?xi64>
  %o = attn.decode %q, %c, %bt, %lens
      : tensor<?x32x128xf16>, !attn.paged_kv<8x128xf16, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xf16>
  return %o : tensor<?x32x128xf16>
}

// CHECK-LABEL: func.func @merge_states
func.func @merge_states(%oa: tensor<?x32x128xf32>, %la: tensor<?x32xf32>,
                        %ob: tensor<?x32x128xf32>, %lb: tensor<?x32xf32>)
    -> (tensor<?x32x128xf32>, tensor<?x32xf32>) {
  // lse = log(exp(lse_a) + exp(lse_b)); out = weighted sum of out_a, out_b.
  // CHECK: %{{.+}}, %{{.+}} = attn.merge_states %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x32x128xf32>, tensor<?x32xf32>
  %o, %l = attn.merge_states %oa, %la, %ob, %lb : tensor<?x32x128xf32>, tensor<?x32xf32>
  return %o, %l : tensor<?x32x128xf32>, tensor<?x32xf32>
}

// CHECK-LABEL: func.func @merge_four_bf16_states
func.func @merge_four_bf16_states(%o: tensor<?x8x64xbf16>, %l: tensor<?x8xf32>)
    -> (tensor<?x8x64xbf16>, tensor<?x8xf32>) {
  // CHECK: attn.merge_states %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<?x8x64xbf16>, tensor<?x8xf32>
  %m, %lm = attn.merge_states %o, %l, %o, %l, %o, %l, %o, %l : tensor<?x8x64xbf16>, tensor<?x8xf32>
  return %m, %lm : tensor<?x8x64xbf16>, tensor<?x8xf32>
}

// CHECK-LABEL: func.func @decode_pinned_schedule
func.func @decode_pinned_schedule(
    %q: tensor<?x32x128xbf16>,
    %cache: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  // A schedule written on the op (pinned; attn-select-schedule keeps it).
  // CHECK: attn.decode
  // CHECK-SAME: schedule = #attn.decode_schedule<warps = 4, stages = 4, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>
  %o = attn.decode %q, %cache, %bt, %lens
      {schedule = #attn.decode_schedule<warps = 4, stages = 4, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>}
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

// CHECK-LABEL: func.func @kernel_launches
func.func @kernel_launches(
    %q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>,
    %cache: !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
    %slots: tensor<?xi64>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>,
    %s: tensor<8xf32>) -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  // Lowered IR: kernel launches with their full specs and runtime values.
  // CHECK: %[[C:.+]] = attn.kernel_launch @attn_append_kv_qbf16_kve4m3_h8x8_d128_p16nhd_per_head_kv_scale
  // CHECK-SAME: spec #attn.kernel_spec<kind = append_kv, arch = "sm_89", q_type = bf16, kv_type = f8E4M3FN, num_q_heads = 8, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd, per_head_kv_scale = true>
  // CHECK-SAME: (%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})
  %c = attn.kernel_launch @attn_append_kv_qbf16_kve4m3_h8x8_d128_p16nhd_per_head_kv_scale spec #attn.kernel_spec<kind = append_kv, arch = "sm_89", q_type = bf16, kv_type = f8E4M3FN,
                             num_q_heads = 8, num_kv_heads = 8, head_dim = 128, page_size = 16,
                             layout = nhd, per_head_kv_scale = true> (%k, %k, %cache, %slots, %s, %s): (tensor<?x8x128xbf16>, tensor<?x8x128xbf16>, !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
         tensor<?xi64>, tensor<8xf32>, tensor<8xf32>) -> !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>
  // CHECK: %{{.+}}:2 = attn.kernel_launch @attn_decode_qbf16_kve4m3_h32x8_d128_p16nhd_ql4_causal_sliding_window_softcap_per_head_kv_scale_write_lse_w4s4r1
  // CHECK-SAME: spec #attn.kernel_spec<kind = decode, arch = "sm_89", q_type = bf16, kv_type = f8E4M3FN, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, page_size = 16, layout = nhd, query_len = 4, causal = true, sliding_window = true, softcap = true, per_head_kv_scale = true, write_lse = true, schedule = #attn.decode_schedule<warps = 4, stages = 4, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>>
  // CHECK-SAME: (%{{.*}}, %[[C]],
  %o, %lse = attn.kernel_launch @attn_decode_qbf16_kve4m3_h32x8_d128_p16nhd_ql4_causal_sliding_window_softcap_per_head_kv_scale_write_lse_w4s4r1 spec #attn.kernel_spec<kind = decode, arch = "sm_89", q_type = bf16, kv_type = f8E4M3FN,
                             num_q_heads = 32, num_kv_heads = 8, head_dim = 128, page_size = 16,
                             layout = nhd, query_len = 4, causal = true, sliding_window = true,
                             softcap = true, per_head_kv_scale = true, write_lse = true,
                             schedule = #attn.decode_schedule<warps = 4, stages = 4, row_tiles = 1,
                                                              min_chunk_tokens = 256, ctas_per_sm = 2>> (%q, %c, %bt, %lens, %s, %s)
      : (tensor<?x32x128xbf16>, !attn.paged_kv<8x128xf8E4M3FN, page_size = 16, layout = nhd>,
         tensor<?x?xi32>, tensor<?xi32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<?x32x128xbf16>, tensor<?x32xf32>)
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}

// CHECK-LABEL: func.func @prefill_pinned_schedule
func.func @prefill_pinned_schedule(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>,
                                   %v: tensor<?x8x128xbf16>, %cu_q: tensor<?xi32>,
                                   %cu_kv: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  // A prefill schedule written on the op (pinned; attn-select-schedule keeps
  // it), taking a KV head's 4 q heads per tile.
  // CHECK: attn.prefill
  // CHECK-SAME: schedule = #attn.prefill_schedule<warps = 8, block_m = 128, block_n = 32, stages = 3, pack_gqa = true>
  %o = attn.prefill %q, %k, %v, %cu_q, %cu_kv
      {mask = #attn.mask<causal>, schedule = #attn.prefill_schedule<warps = 8, block_m = 128, block_n = 32, stages = 3, pack_gqa = true>}
      : tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

// CHECK-LABEL: func.func @prefill_kernel_launch
func.func @prefill_kernel_launch(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>,
                                 %cu: tensor<?xi32>, %slopes: tensor<32xf32>)
    -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  // A lowered prefill: no cache, so the spec has no page_size and kv_type is
  // q_type; the schedule is a prefill_schedule.
  // CHECK: %{{.+}}:2 = attn.kernel_launch @attn_prefill_qbf16_kvbf16_h32x8_d128_causal_sliding_window_alibi_write_lse_m64n64w4s2
  // CHECK-SAME: spec #attn.kernel_spec<kind = prefill, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, layout = nhd, causal = true, sliding_window = true, alibi = true, write_lse = true, prefill_schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2>>
  // CHECK-SAME: (%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})
  %o, %lse = attn.kernel_launch @attn_prefill_qbf16_kvbf16_h32x8_d128_causal_sliding_window_alibi_write_lse_m64n64w4s2 spec #attn.kernel_spec<kind = prefill, arch = "sm_90a", q_type = bf16, kv_type = bf16,
                             num_q_heads = 32, num_kv_heads = 8, head_dim = 128, layout = nhd,
                             causal = true, sliding_window = true, alibi = true, write_lse = true,
                             prefill_schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2>> (%q, %k, %k, %cu, %cu, %slopes)
      : (tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>, tensor<?xi32>, tensor<?xi32>,
         tensor<32xf32>) -> (tensor<?x32x128xbf16>, tensor<?x32xf32>)
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}

// CHECK-LABEL: func.func @paged_prefill_pinned_schedule
func.func @paged_prefill_pinned_schedule(
    %q: tensor<?x32x128xbf16>,
    %cache: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
    %cu_q: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>,
    %slopes: tensor<32xf32>) -> tensor<?x32x128xbf16> {
  // A paged prefill with ALiBi and a pinned prefill schedule.
  // CHECK: attn.paged_prefill {{.*}} alibi(%{{.*}} : tensor<32xf32>)
  // CHECK-SAME: schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 32, stages = 3>
  %o = attn.paged_prefill %q, %cache, %cu_q, %bt, %lens alibi(%slopes : tensor<32xf32>)
      {mask = #attn.mask<causal>, schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 32, stages = 3>}
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
        tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

// CHECK-LABEL: func.func @paged_prefill_kernel_launch
func.func @paged_prefill_kernel_launch(
    %q: tensor<?x32x128xbf16>,
    %cache: !attn.paged_kv<8x128xf8E5M2, page_size = 32, layout = hnd>,
    %cu_q: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>,
    %s: tensor<1xf32>) -> (tensor<?x32x128xbf16>, tensor<?x32xf32>) {
  // A lowered paged prefill: the cache fields as for decode, a
  // prefill_schedule as for prefill.
  // CHECK: %{{.+}}:2 = attn.kernel_launch @attn_paged_prefill_qbf16_kve5m2_h32x8_d128_p32hnd_causal_write_lse_m64n64w4s2
  // CHECK-SAME: spec #attn.kernel_spec<kind = paged_prefill, arch = "sm_89", q_type = bf16, kv_type = f8E5M2, num_q_heads = 32, num_kv_heads = 8, head_dim = 128, page_size = 32, layout = hnd, causal = true, write_lse = true, prefill_schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2>>
  // CHECK-SAME: (%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})
  %o, %lse = attn.kernel_launch @attn_paged_prefill_qbf16_kve5m2_h32x8_d128_p32hnd_causal_write_lse_m64n64w4s2 spec #attn.kernel_spec<kind = paged_prefill, arch = "sm_89", q_type = bf16, kv_type = f8E5M2,
                             num_q_heads = 32, num_kv_heads = 8, head_dim = 128, page_size = 32,
                             layout = hnd, causal = true, write_lse = true,
                             prefill_schedule = #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2>> (%q, %cache, %cu_q, %bt, %lens, %s, %s)
      : (tensor<?x32x128xbf16>, !attn.paged_kv<8x128xf8E5M2, page_size = 32, layout = hnd>,
         tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32>, tensor<1xf32>, tensor<1xf32>)
        -> (tensor<?x32x128xbf16>, tensor<?x32xf32>)
  return %o, %lse : tensor<?x32x128xbf16>, tensor<?x32xf32>
}

// The persistent-grid threshold is part of the schedule (left out at its
// default, 2048; 0: never persistent).
// CHECK-LABEL: func.func @persistent_threshold
// CHECK-SAME: #attn.prefill_schedule<warps = 12, block_m = 128, block_n = 128, stages = 2, mma = wgmma, persistent_max_q_len = 0>
// CHECK-SAME: #attn.prefill_schedule<warps = 12, block_m = 128, block_n = 128, stages = 2, mma = wgmma>}
func.func @persistent_threshold() attributes {
    never = #attn.prefill_schedule<warps = 12, block_m = 128, block_n = 128, stages = 2, mma = wgmma, persistent_max_q_len = 0>,
    usual = #attn.prefill_schedule<warps = 12, block_m = 128, block_n = 128, stages = 2, mma = wgmma, persistent_max_q_len = 2048>} {
  return
}

// Programmable modifiers: a T5-style bias from an aux table (score_mod) and
// chunked local attention (mask_mod) on prefill; soft-cap written as a
// score_mod and document masking over per-token ids on decode.
// CHECK-LABEL: func.func @prefill_modifiers
func.func @prefill_modifiers(%q: tensor<?x8x64xbf16>, %k: tensor<?x8x64xbf16>,
                             %v: tensor<?x8x64xbf16>, %cu_q: tensor<?xi32>,
                             %cu_kv: tensor<?xi32>, %bias: tensor<8x32xf32>)
    -> tensor<?x8x64xbf16> {
  // CHECK: attn.prefill {{.*}} aux(%{{.*}} : tensor<8x32xf32>) {mask = #attn.mask<causal>}
  // CHECK: score_mod {
  // CHECK-NEXT: ^bb0(%{{.*}}: f32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %[[T:.*]]: tensor<8x32xf32>):
  // CHECK: attn.aux_load %[[T]][%{{.*}}, %{{.*}}] : tensor<8x32xf32>
  // CHECK: attn.yield %{{.*}} : f32
  // CHECK: mask_mod {
  // CHECK: arith.divsi
  // CHECK: attn.yield %{{.*}} : i1
  %o = attn.prefill %q, %k, %v, %cu_q, %cu_kv aux(%bias : tensor<8x32xf32>)
      {mask = #attn.mask<causal>}
      : tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?x8x64xbf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x8x64xbf16>
  score_mod {
  ^bb0(%s: f32, %req: i32, %qp: i32, %kp: i32, %qh: i32, %kvh: i32, %t: tensor<8x32xf32>):
    %d = arith.subi %qp, %kp : i32
    %c31 = arith.constant 31 : i32
    %bucket = arith.minsi %d, %c31 : i32
    %b = attn.aux_load %t[%qh, %bucket] : tensor<8x32xf32>
    %r = arith.addf %s, %b : f32
    attn.yield %r : f32
  } mask_mod {
  ^bb0(%req: i32, %qp: i32, %kp: i32, %qh: i32, %kvh: i32, %t: tensor<8x32xf32>):
    %c = arith.constant 8192 : i32
    %qc = arith.divsi %qp, %c : i32
    %kc = arith.divsi %kp, %c : i32
    %same = arith.cmpi eq, %qc, %kc : i32
    attn.yield %same : i1
  }
  return %o : tensor<?x8x64xbf16>
}

// CHECK-LABEL: func.func @decode_modifiers
func.func @decode_modifiers(
    %q: tensor<?x32x128xbf16>,
    %cache: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
    %bt: tensor<?x?xi32>, %lens: tensor<?xi32>, %docs: tensor<?xi32>)
    -> tensor<?x32x128xbf16> {
  // CHECK: attn.decode {{.*}} aux(%{{.*}} : tensor<?xi32>)
  // CHECK: score_mod {
  // CHECK: scf.if
  // CHECK: math.tanh
  // CHECK: mask_mod {
  %o = attn.decode %q, %cache, %bt, %lens aux(%docs : tensor<?xi32>)
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  score_mod {
  ^bb0(%s: f32, %req: i32, %qp: i32, %kp: i32, %qh: i32, %kvh: i32, %d: tensor<?xi32>):
    %cap = arith.constant 30.0 : f32
    %zero = arith.constant 0 : i32
    %odd = arith.cmpi ne, %qh, %zero : i32
    %r = scf.if %odd -> f32 {
      %x = arith.divf %s, %cap : f32
      %t = math.tanh %x : f32
      %y = arith.mulf %t, %cap : f32
      scf.yield %y : f32
    } else {
      scf.yield %s : f32
    }
    attn.yield %r : f32
  } mask_mod {
  ^bb0(%req: i32, %qp: i32, %kp: i32, %qh: i32, %kvh: i32, %d: tensor<?xi32>):
    %a = attn.aux_load %d[%qp] : tensor<?xi32>
    %b = attn.aux_load %d[%kp] : tensor<?xi32>
    %same = arith.cmpi eq, %a, %b : i32
    attn.yield %same : i1
  }
  return %o : tensor<?x32x128xbf16>
}
