// RUN: attn-opt %s --split-input-file --verify-diagnostics

// Every wrong shape of attn.mla_decode is a located error.

func.func @q_rank(%qn: tensor<?x16x256xbf16>, %ckv: !attn.paged_kv<1x512xbf16, page_size = 64, layout = nhd>, %pt: tensor<?x?xi32>, %l: tensor<?xi32>) {
  // expected-error @+1 {{q_nope head_dim 256 must equal ckv's kv_lora_rank 512}}
  %o = attn.mla_decode %qn, %ckv, %pt, %l : tensor<?x16x256xbf16>, !attn.paged_kv<1x512xbf16, page_size = 64, layout = nhd>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x16x256xbf16>
  return
}

// -----

func.func @two_kv_heads(%qn: tensor<?x16x512xbf16>, %ckv: !attn.paged_kv<2x512xbf16, page_size = 64, layout = nhd>, %pt: tensor<?x?xi32>, %l: tensor<?xi32>) {
  // expected-error @+1 {{ckv must have one (latent) kv head, got 2}}
  %o = attn.mla_decode %qn, %ckv, %pt, %l : tensor<?x16x512xbf16>, !attn.paged_kv<2x512xbf16, page_size = 64, layout = nhd>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x16x512xbf16>
  return
}

// -----

func.func @rank(%qn: tensor<?x16x480xbf16>, %ckv: !attn.paged_kv<1x480xbf16, page_size = 64, layout = nhd>, %pt: tensor<?x?xi32>, %l: tensor<?xi32>) {
  // expected-error @+1 {{ckv head_dim (kv_lora_rank) must be a multiple of 64 from 64 to 512, got 480}}
  %o = attn.mla_decode %qn, %ckv, %pt, %l : tensor<?x16x480xbf16>, !attn.paged_kv<1x480xbf16, page_size = 64, layout = nhd>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x16x480xbf16>
  return
}

// -----

func.func @rope_dim(%qn: tensor<?x16x512xbf16>, %ckv: !attn.paged_kv<1x512xbf16, page_size = 64, layout = nhd>, %pt: tensor<?x?xi32>, %l: tensor<?xi32>, %qr: tensor<?x16x32xbf16>, %kpe: !attn.paged_kv<1x32xbf16, page_size = 64, layout = nhd>) {
  // expected-error @+1 {{kpe head_dim (rope_dim) must be 64 or 128, got 32}}
  %o = attn.mla_decode %qn, %ckv, %pt, %l rope(%qr, %kpe : tensor<?x16x32xbf16>, !attn.paged_kv<1x32xbf16, page_size = 64, layout = nhd>) : tensor<?x16x512xbf16>, !attn.paged_kv<1x512xbf16, page_size = 64, layout = nhd>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x16x512xbf16>
  return
}

// -----

func.func @kpe_paged_apart(%qn: tensor<?x16x512xbf16>, %ckv: !attn.paged_kv<1x512xbf16, page_size = 64, layout = nhd>, %pt: tensor<?x?xi32>, %l: tensor<?xi32>, %qr: tensor<?x16x64xbf16>, %kpe: !attn.paged_kv<1x64xbf16, page_size = 16, layout = nhd>) {
  // expected-error @+1 {{kpe must be paged as ckv with one kv head of ckv's element type}}
  %o = attn.mla_decode %qn, %ckv, %pt, %l rope(%qr, %kpe : tensor<?x16x64xbf16>, !attn.paged_kv<1x64xbf16, page_size = 16, layout = nhd>) : tensor<?x16x512xbf16>, !attn.paged_kv<1x512xbf16, page_size = 64, layout = nhd>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x16x512xbf16>
  return
}

// -----

func.func @q_rope_heads(%qn: tensor<?x16x512xbf16>, %ckv: !attn.paged_kv<1x512xbf16, page_size = 64, layout = nhd>, %pt: tensor<?x?xi32>, %l: tensor<?xi32>, %qr: tensor<?x8x64xbf16>, %kpe: !attn.paged_kv<1x64xbf16, page_size = 64, layout = nhd>) {
  // expected-error @+1 {{q_rope must be tokens x 16 x 64 of q_nope's element type, got 'tensor<?x8x64xbf16>'}}
  %o = attn.mla_decode %qn, %ckv, %pt, %l rope(%qr, %kpe : tensor<?x8x64xbf16>, !attn.paged_kv<1x64xbf16, page_size = 64, layout = nhd>) : tensor<?x16x512xbf16>, !attn.paged_kv<1x512xbf16, page_size = 64, layout = nhd>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x16x512xbf16>
  return
}

// -----

func.func @fp8_without_scale(%qn: tensor<?x16x512xbf16>, %ckv: !attn.paged_kv<1x512xf8E4M3FN, page_size = 64, layout = nhd>, %pt: tensor<?x?xi32>, %l: tensor<?xi32>) {
  // expected-error @+1 {{an e4m3 cache needs kv_scale}}
  %o = attn.mla_decode %qn, %ckv, %pt, %l : tensor<?x16x512xbf16>, !attn.paged_kv<1x512xf8E4M3FN, page_size = 64, layout = nhd>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x16x512xbf16>
  return
}

// -----

func.func @e5m2(%qn: tensor<?x16x512xbf16>, %ckv: !attn.paged_kv<1x512xf8E5M2, page_size = 64, layout = nhd>, %pt: tensor<?x?xi32>, %l: tensor<?xi32>, %s: tensor<1xf32>) {
  // expected-error @+1 {{ckv element type 'f8E5M2' must equal q_nope's ('bf16') or be e4m3}}
  %o = attn.mla_decode %qn, %ckv, %pt, %l kv_scale(%s : tensor<1xf32>) : tensor<?x16x512xbf16>, !attn.paged_kv<1x512xf8E5M2, page_size = 64, layout = nhd>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x16x512xbf16>
  return
}

// -----

func.func @causal_one_query(%qn: tensor<?x16x512xbf16>, %ckv: !attn.paged_kv<1x512xbf16, page_size = 64, layout = nhd>, %pt: tensor<?x?xi32>, %l: tensor<?xi32>) {
  // expected-error @+1 {{a causal mask needs query_len > 1}}
  %o = attn.mla_decode %qn, %ckv, %pt, %l {mask = #attn.mask<causal>} : tensor<?x16x512xbf16>, !attn.paged_kv<1x512xbf16, page_size = 64, layout = nhd>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x16x512xbf16>
  return
}

// -----

func.func @tokens(%qn: tensor<6x16x512xbf16>, %ckv: !attn.paged_kv<1x512xbf16, page_size = 64, layout = nhd>, %pt: tensor<4x?xi32>, %l: tensor<4xi32>) {
  // expected-error @+1 {{q_nope has 6 tokens but 4 requests x query_len 2 = 8}}
  %o = attn.mla_decode %qn, %ckv, %pt, %l {query_len = 2 : i64} : tensor<6x16x512xbf16>, !attn.paged_kv<1x512xbf16, page_size = 64, layout = nhd>, tensor<4x?xi32>, tensor<4xi32> -> tensor<6x16x512xbf16>
  return
}

// -----

func.func @lse_heads(%qn: tensor<?x16x512xbf16>, %ckv: !attn.paged_kv<1x512xbf16, page_size = 64, layout = nhd>, %pt: tensor<?x?xi32>, %l: tensor<?xi32>) {
  // expected-error @+1 {{lse must be tokens x heads of q_nope}}
  %o, %lse = attn.mla_decode %qn, %ckv, %pt, %l : tensor<?x16x512xbf16>, !attn.paged_kv<1x512xbf16, page_size = 64, layout = nhd>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x16x512xbf16>, tensor<?x8xf32>
  return
}

// -----

func.func @heads(%qn: tensor<?x256x512xbf16>, %ckv: !attn.paged_kv<1x512xbf16, page_size = 64, layout = nhd>, %pt: tensor<?x?xi32>, %l: tensor<?xi32>) {
  // expected-error @+1 {{q_nope must have a static 1 to 128 heads}}
  %o = attn.mla_decode %qn, %ckv, %pt, %l : tensor<?x256x512xbf16>, !attn.paged_kv<1x512xbf16, page_size = 64, layout = nhd>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x256x512xbf16>
  return
}

// -----

// Generic form: a q_rope without its kpe.
func.func @rope_alone(%qn: tensor<?x16x512xbf16>, %ckv: !attn.paged_kv<1x512xbf16, page_size = 64, layout = nhd>, %pt: tensor<?x?xi32>, %l: tensor<?xi32>, %qr: tensor<?x16x64xbf16>) {
  // expected-error @+1 {{q_rope and kpe must be given together}}
  %o = "attn.mla_decode"(%qn, %ckv, %pt, %l, %qr) <{operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 0, 0>, query_len = 1 : i64}> : (tensor<?x16x512xbf16>, !attn.paged_kv<1x512xbf16, page_size = 64, layout = nhd>, tensor<?x?xi32>, tensor<?xi32>, tensor<?x16x64xbf16>) -> tensor<?x16x512xbf16>
  return
}
