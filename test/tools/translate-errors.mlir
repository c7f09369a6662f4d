// RUN: attn-translate %s --split-input-file --verify-diagnostics --attn-to-cuda

// attn-translate takes lowered IR only.

func.func @not_lowered(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                       %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  // expected-error @+1 {{'attn.decode' is not lowered to a kernel launch; run attn-opt --attn-pipeline first}}
  %o = attn.decode %q, %c, %bt, %lens
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}

// -----

// expected-error @+1 {{no attn.kernel_launch to translate; run attn-opt --attn-pipeline first}}
module {
  func.func @nothing(%x: i32) -> i32 {
    return %x : i32
  }
}
