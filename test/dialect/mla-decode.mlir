// RUN: attn-opt %s --split-input-file | attn-opt --split-input-file | FileCheck %s
// RUN: attn-opt %s --split-input-file --attn-pipeline="arch=sm_90a" | FileCheck %s --check-prefix=KERNEL

// DeepSeek's absorbed MLA: a 512 latent and a 64 RoPE cache, 16 heads.
// CHECK-LABEL: func.func @deepseek
// CHECK: attn.mla_decode %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} rope(%{{.*}}, %{{.*}} : tensor<?x16x64xbf16>, !attn.paged_kv<1x64xbf16, page_size = 64, layout = nhd>) {scale = 1.352000e-01 : f32}
// KERNEL-LABEL: func.func @deepseek
// KERNEL: attn.kernel_launch @attn_mla_decode_qbf16_kvbf16_h16x1_d512r64_p64nhd_w4s2r1 spec #attn.kernel_spec<kind = mla_decode, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 16, num_kv_heads = 1, head_dim = 512, rope_dim = 64, page_size = 64, layout = nhd, schedule = #attn.decode_schedule<warps = 4, stages = 2, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>>
func.func @deepseek(%qn: tensor<?x16x512xbf16>,
                    %ckv: !attn.paged_kv<1x512xbf16, page_size = 64, layout = nhd>,
                    %pt: tensor<?x?xi32>, %lens: tensor<?xi32>,
                    %qr: tensor<?x16x64xbf16>,
                    %kpe: !attn.paged_kv<1x64xbf16, page_size = 64, layout = nhd>)
    -> tensor<?x16x512xbf16> {
  %o = attn.mla_decode %qn, %ckv, %pt, %lens
      rope(%qr, %kpe : tensor<?x16x64xbf16>, !attn.paged_kv<1x64xbf16, page_size = 64, layout = nhd>)
      {scale = 0.1352 : f32}
      : tensor<?x16x512xbf16>, !attn.paged_kv<1x512xbf16, page_size = 64, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x16x512xbf16>
  return %o : tensor<?x16x512xbf16>
}

// -----

// NoPE MLA over an e4m3 cache, 3 causal query tokens per request, LSE,
// batch-invariant.
// CHECK-LABEL: func.func @nope_fp8_mtp
// CHECK: attn.mla_decode {{.*}} kv_scale(%{{.*}} : tensor<1xf32>) {batch_invariant, mask = #attn.mask<causal>, query_len = 3 : i64}
// KERNEL-LABEL: func.func @nope_fp8_mtp
// KERNEL: attn.kernel_launch @attn_mla_decode_qf16_kve4m3_h128x1_d512_p1nhd_ql3_causal_write_lse_batch_invariant_w4s2r1 spec #attn.kernel_spec<kind = mla_decode, {{.*}}kv_type = f8E4M3FN, num_q_heads = 128, num_kv_heads = 1, head_dim = 512, page_size = 1, layout = nhd, query_len = 3, causal = true, write_lse = true, batch_invariant = true
func.func @nope_fp8_mtp(%qn: tensor<?x128x512xf16>,
                        %ckv: !attn.paged_kv<1x512xf8E4M3FN, page_size = 1, layout = nhd>,
                        %pt: tensor<?x?xi32>, %lens: tensor<?xi32>,
                        %s: tensor<1xf32>)
    -> (tensor<?x128x512xf16>, tensor<?x128xf32>) {
  %o, %l = attn.mla_decode %qn, %ckv, %pt, %lens kv_scale(%s : tensor<1xf32>)
      {batch_invariant, mask = #attn.mask<causal>, query_len = 3 : i64}
      : tensor<?x128x512xf16>, !attn.paged_kv<1x512xf8E4M3FN, page_size = 1, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x128x512xf16>, tensor<?x128xf32>
  return %o, %l : tensor<?x128x512xf16>, tensor<?x128xf32>
}
