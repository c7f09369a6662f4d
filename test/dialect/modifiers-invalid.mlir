// RUN: attn-opt %s --split-input-file --verify-diagnostics

// One case per rule of score_mod, mask_mod, aux operands and attn.aux_load:
// each names the region or the op inside it that is wrong.

func.func @score_mod_arity(%q: tensor<?x8x64xbf16>, %k: tensor<?x8x64xbf16>, %v: tensor<?x8x64xbf16>,
                           %cu: tensor<?xi32>) -> tensor<?x8x64xbf16> {
  // expected-error @+1 {{'attn.prefill' op score_mod must take 6 arguments (f32 score, i32 request, i32 q_pos, i32 k_pos, i32 q_head, i32 kv_head, then one per aux operand), got 5}}
  %o = attn.prefill %q, %k, %v, %cu, %cu
      : tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x64xbf16>
  score_mod {
  ^bb0(%s: f32, %req: i32, %qp: i32, %kp: i32, %qh: i32):
    attn.yield %s : f32
  }
  return %o : tensor<?x8x64xbf16>
}

// -----

func.func @mask_mod_argument_type(%q: tensor<?x8x64xbf16>, %k: tensor<?x8x64xbf16>, %v: tensor<?x8x64xbf16>,
                                  %cu: tensor<?xi32>) -> tensor<?x8x64xbf16> {
  // expected-error @+1 {{'attn.prefill' op mask_mod argument 1 must be 'i32' (i32 request, i32 q_pos, i32 k_pos, i32 q_head, i32 kv_head, then one per aux operand), got 'i64'}}
  %o = attn.prefill %q, %k, %v, %cu, %cu
      : tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x64xbf16>
  mask_mod {
  ^bb0(%req: i32, %qp: i64, %kp: i32, %qh: i32, %kvh: i32):
    %t = arith.constant true
    attn.yield %t : i1
  }
  return %o : tensor<?x8x64xbf16>
}

// -----

func.func @aux_argument_type(%q: tensor<?x8x64xbf16>, %k: tensor<?x8x64xbf16>, %v: tensor<?x8x64xbf16>,
                             %cu: tensor<?xi32>, %bias: tensor<8xf32>) -> tensor<?x8x64xbf16> {
  // expected-error @+1 {{'attn.prefill' op score_mod argument 6 must be 'tensor<8xf32>' (f32 score, i32 request, i32 q_pos, i32 k_pos, i32 q_head, i32 kv_head, then one per aux operand), got 'tensor<4xf32>'}}
  %o = attn.prefill %q, %k, %v, %cu, %cu aux(%bias : tensor<8xf32>)
      : tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x64xbf16>
  score_mod {
  ^bb0(%s: f32, %req: i32, %qp: i32, %kp: i32, %qh: i32, %kvh: i32, %t: tensor<4xf32>):
    attn.yield %s : f32
  }
  return %o : tensor<?x8x64xbf16>
}

// -----

func.func @score_mod_yields_i1(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                               %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  %o = attn.decode %q, %c, %bt, %lens
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  score_mod {
  ^bb0(%s: f32, %req: i32, %qp: i32, %kp: i32, %qh: i32, %kvh: i32):
    %t = arith.constant true
    // expected-error @+1 {{'attn.yield' op in score_mod must yield 'f32', got 'i1'}}
    attn.yield %t : i1
  }
  return %o : tensor<?x32x128xbf16>
}

// -----

func.func @mask_mod_yields_f32(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                               %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  %o = attn.decode %q, %c, %bt, %lens
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  mask_mod {
  ^bb0(%req: i32, %qp: i32, %kp: i32, %qh: i32, %kvh: i32):
    %f = arith.constant 1.0 : f32
    // expected-error @+1 {{'attn.yield' op in mask_mod must yield 'i1', got 'f32'}}
    attn.yield %f : f32
  }
  return %o : tensor<?x32x128xbf16>
}

// -----

func.func private @bias(i32) -> f32

func.func @op_not_allowed(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                          %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
        tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  score_mod {
  ^bb0(%s: f32, %req: i32, %qp: i32, %kp: i32, %qh: i32, %kvh: i32):
    // expected-error @+1 {{'func.call' op is not allowed in score_mod of 'attn.paged_prefill': it holds scalar arith and math ops (but index casts, the extended-result ops and math.ipowi/fpowi), scf.if and attn.aux_load}}
    %b = func.call @bias(%qh) : (i32) -> f32
    attn.yield %b : f32
  }
  return %o : tensor<?x32x128xbf16>
}

// -----

func.func @index_type(%q: tensor<?x32x128xbf16>, %c: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
                      %cu: tensor<?xi32>, %bt: tensor<?x?xi32>, %lens: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  %o = attn.paged_prefill %q, %c, %cu, %bt, %lens
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
        tensor<?xi32>, tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  mask_mod {
  ^bb0(%req: i32, %qp: i32, %kp: i32, %qh: i32, %kvh: i32):
    // expected-error @+1 {{'arith.index_cast' op is not allowed in mask_mod}}
    %i = arith.index_cast %qp : i32 to index
    %t = arith.constant true
    attn.yield %t : i1
  }
  return %o : tensor<?x32x128xbf16>
}

// -----

func.func @aux_load_rank(%q: tensor<?x8x64xbf16>, %k: tensor<?x8x64xbf16>, %v: tensor<?x8x64xbf16>,
                         %cu: tensor<?xi32>, %bias: tensor<8x32xf32>) -> tensor<?x8x64xbf16> {
  %o = attn.prefill %q, %k, %v, %cu, %cu aux(%bias : tensor<8x32xf32>)
      : tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x64xbf16>
  score_mod {
  ^bb0(%s: f32, %req: i32, %qp: i32, %kp: i32, %qh: i32, %kvh: i32, %t: tensor<8x32xf32>):
    // expected-error @+1 {{'attn.aux_load' op needs one index per dimension of 'tensor<8x32xf32>' (2), got 1}}
    %b = attn.aux_load %t[%qh] : tensor<8x32xf32>
    attn.yield %b : f32
  }
  return %o : tensor<?x8x64xbf16>
}

// -----

func.func @aux_load_outside(%t: tensor<8xf32>, %i: i32) -> f32 {
  // expected-error @+1 {{'attn.aux_load' op reads a table that is not an aux argument of an enclosing score_mod or mask_mod}}
  %b = attn.aux_load %t[%i] : tensor<8xf32>
  return %b : f32
}

// -----

func.func @aux_element_type(%q: tensor<?x8x64xbf16>, %k: tensor<?x8x64xbf16>, %v: tensor<?x8x64xbf16>,
                            %cu: tensor<?xi32>, %bias: tensor<8xf16>) -> tensor<?x8x64xbf16> {
  // expected-error @+1 {{'attn.prefill' op operand #5 must be variadic of 1D/2D/3D tensor of 32-bit float or 32-bit signless integer values, but got 'tensor<8xf16>'}}
  %o = attn.prefill %q, %k, %v, %cu, %cu aux(%bias : tensor<8xf16>)
      : tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x64xbf16>
  return %o : tensor<?x8x64xbf16>
}

// -----

func.func @yield_outside(%x: f32) -> f32 {
  // expected-error @+1 {{'attn.yield' op expects parent op to be one of 'attn.prefill, attn.paged_prefill, attn.decode'}}
  attn.yield %x : f32
}

// -----

// f16 has no scalar in a kernel's region code.
func.func @half_math(%q: tensor<?x8x64xbf16>, %k: tensor<?x8x64xbf16>, %v: tensor<?x8x64xbf16>,
                     %cu: tensor<?xi32>) -> tensor<?x8x64xbf16> {
  %o = attn.prefill %q, %k, %v, %cu, %cu
      : tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x64xbf16>
  score_mod {
  ^bb0(%s: f32, %req: i32, %qp: i32, %kp: i32, %qh: i32, %kvh: i32):
    // expected-error @+1 {{'arith.truncf' op in score_mod computes on a type a kernel has no scalar for; use i1, i32, i64, f32 or f64}}
    %h = arith.truncf %s : f32 to f16
    attn.yield %s : f32
  }
  return %o : tensor<?x8x64xbf16>
}

// -----

// Integer powers have no faithful form (MLIR's meaning for negative
// exponents and overflow); they are refused where they stand.
func.func @ipowi(%q: tensor<?x8x64xbf16>, %k: tensor<?x8x64xbf16>, %v: tensor<?x8x64xbf16>,
                 %cu: tensor<?xi32>) -> tensor<?x8x64xbf16> {
  %o = attn.prefill %q, %k, %v, %cu, %cu
      : tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x64xbf16>
  mask_mod {
  ^bb0(%req: i32, %qp: i32, %kp: i32, %qh: i32, %kvh: i32):
    // expected-error @+1 {{'math.ipowi' op is not allowed in mask_mod}}
    %p = math.ipowi %qp, %kp : i32
    %c = arith.cmpi slt, %p, %kp : i32
    attn.yield %c : i1
  }
  return %o : tensor<?x8x64xbf16>
}

// -----

// No launch can pass a table of 3e9 rows (dimensions are int32) or of none.
func.func @aux_too_large(%q: tensor<?x8x64xbf16>, %k: tensor<?x8x64xbf16>, %v: tensor<?x8x64xbf16>,
                         %cu: tensor<?xi32>, %t: tensor<3000000000xf32>) -> tensor<?x8x64xbf16> {
  // expected-error @+1 {{'attn.prefill' op aux table 0 has a dimension of 3000000000; a launch can pass only 1 to 2147483647 (or ?)}}
  %o = attn.prefill %q, %k, %v, %cu, %cu aux(%t : tensor<3000000000xf32>)
      : tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x64xbf16>
  score_mod {
  ^bb0(%s: f32, %req: i32, %qp: i32, %kp: i32, %qh: i32, %kvh: i32, %a: tensor<3000000000xf32>):
    %b = attn.aux_load %a[%kp] : tensor<3000000000xf32>
    %r = arith.addf %s, %b : f32
    attn.yield %r : f32
  }
  return %o : tensor<?x8x64xbf16>
}

// -----

func.func @aux_empty(%q: tensor<?x8x64xbf16>, %k: tensor<?x8x64xbf16>, %v: tensor<?x8x64xbf16>,
                     %cu: tensor<?xi32>, %t: tensor<8x0xi32>) -> tensor<?x8x64xbf16> {
  // expected-error @+1 {{'attn.prefill' op aux table 0 has a dimension of 0; a launch can pass only 1 to 2147483647 (or ?)}}
  %o = attn.prefill %q, %k, %v, %cu, %cu aux(%t : tensor<8x0xi32>)
      : tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?x8x64xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x64xbf16>
  mask_mod {
  ^bb0(%req: i32, %qp: i32, %kp: i32, %qh: i32, %kvh: i32, %a: tensor<8x0xi32>):
    %c = arith.cmpi slt, %qp, %kp : i32
    attn.yield %c : i1
  }
  return %o : tensor<?x8x64xbf16>
}
