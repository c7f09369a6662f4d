// One decoder layer's attention step for a Llama-3-8B-shaped model (32 query
// heads over 8 KV heads, head dim 128) serving from a bf16 paged KV cache:
// append this step's keys and values, then decode one token per request.
//
//   build/bin/attn-opt examples/decode.mlir
func.func @llama3_8b_decode_step(
    %q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>, %v: tensor<?x8x128xbf16>,
    %cache: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
    %slot_mapping: tensor<?xi64>, %page_tables: tensor<?x?xi32>,
    %seq_lens: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  %updated = attn.append_kv %k, %v into %cache at %slot_mapping
      : tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
        !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?xi64>
  %out = attn.decode %q, %updated, %page_tables, %seq_lens
      {mask = #attn.mask<causal>}
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %out : tensor<?x32x128xbf16>
}
