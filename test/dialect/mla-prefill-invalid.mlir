// RUN: attn-opt %s --split-input-file --verify-diagnostics

// attn.prefill with v narrower than q/k: every wrong shape is a located
// error.

func.func @v_wider_than_k(%q: tensor<?x16x128xbf16>, %v: tensor<?x16x192xbf16>, %cu: tensor<?xi32>) {
  // expected-error @+1 {{'attn.prefill' op k 'tensor<?x16x128xbf16>' and v 'tensor<?x16x192xbf16>' must have the same tokens and heads, and v at most k's head_dim}}
  %o = attn.prefill %q, %q, %v, %cu, %cu : tensor<?x16x128xbf16>, tensor<?x16x128xbf16>, tensor<?x16x192xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x16x192xbf16>
  return
}

// -----

func.func @v_other_heads(%q: tensor<?x16x192xbf16>, %v: tensor<?x8x128xbf16>, %cu: tensor<?xi32>) {
  // expected-error @+1 {{must have the same tokens and heads, and v at most k's head_dim}}
  %o = attn.prefill %q, %q, %v, %cu, %cu : tensor<?x16x192xbf16>, tensor<?x16x192xbf16>, tensor<?x8x128xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x16x128xbf16>
  return
}

// -----

func.func @out_of_q_dims(%q: tensor<?x16x192xbf16>, %v: tensor<?x16x128xbf16>, %cu: tensor<?xi32>) {
  // expected-error @+1 {{'attn.prefill' op out type 'tensor<?x16x192xbf16>' must match q type 'tensor<?x16x192xbf16>' with v's head_dim (128)}}
  %o = attn.prefill %q, %q, %v, %cu, %cu : tensor<?x16x192xbf16>, tensor<?x16x192xbf16>, tensor<?x16x128xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x16x192xbf16>
  return
}

// -----

func.func @fp8(%q: tensor<?x16x192xbf16>, %k: tensor<?x16x192xf8E4M3FN>, %v: tensor<?x16x128xf8E4M3FN>, %cu: tensor<?xi32>, %s: tensor<1xf32>) {
  // expected-error @+1 {{'attn.prefill' op k and v of different head dims (192, 128) must be 16-bit, got 'f8E4M3FN'}}
  %o = attn.prefill %q, %k, %v, %cu, %cu kv_scales(%s, %s : tensor<1xf32>, tensor<1xf32>) : tensor<?x16x192xbf16>, tensor<?x16x192xf8E4M3FN>, tensor<?x16x128xf8E4M3FN>, tensor<?xi32>, tensor<?xi32> -> tensor<?x16x128xbf16>
  return
}

// -----

func.func @q_not_k(%q: tensor<?x16x128xbf16>, %k: tensor<?x16x192xbf16>, %v: tensor<?x16x128xbf16>, %cu: tensor<?xi32>) {
  // expected-error @+1 {{'attn.prefill' op q head_dim (128) must equal k head_dim (192)}}
  %o = attn.prefill %q, %k, %v, %cu, %cu : tensor<?x16x128xbf16>, tensor<?x16x192xbf16>, tensor<?x16x128xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x16x128xbf16>
  return
}
