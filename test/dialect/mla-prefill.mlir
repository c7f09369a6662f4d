// RUN: attn-opt %s --split-input-file | attn-opt --split-input-file | FileCheck %s
// RUN: attn-opt %s --split-input-file --attn-pipeline="arch=sm_90a" | FileCheck %s --check-prefix=SM90
// RUN: attn-opt %s --split-input-file --attn-pipeline="arch=sm_80" | FileCheck %s --check-prefix=SM80

// MLA's prefill (DeepSeek's MHA mode): q/k of 128 + 64 dims, v and out of
// 128. The spec's head_dim is v's, rope_dim the rest of q/k's.
// CHECK-LABEL: func.func @deepseek
// CHECK: attn.prefill {{.*}} : tensor<?x16x192xbf16>, tensor<?x16x192xbf16>, tensor<?x16x128xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x16x128xbf16>, tensor<?x16xf32>
// SM90-LABEL: func.func @deepseek
// SM90: kernel_spec<kind = prefill, arch = "sm_90a", q_type = bf16, kv_type = bf16, num_q_heads = 16, num_kv_heads = 16, head_dim = 128, rope_dim = 64, {{.*}}mma = wgmma
// SM80-LABEL: func.func @deepseek
// SM80: kernel_spec<kind = prefill, arch = "sm_80", {{.*}}head_dim = 128, rope_dim = 64, {{.*}}block_n = 32
func.func @deepseek(%q: tensor<?x16x192xbf16>, %k: tensor<?x16x192xbf16>,
                    %v: tensor<?x16x128xbf16>, %cu_q: tensor<?xi32>,
                    %cu_kv: tensor<?xi32>)
    -> (tensor<?x16x128xbf16>, tensor<?x16xf32>) {
  %o, %lse = attn.prefill %q, %k, %v, %cu_q, %cu_kv {mask = #attn.mask<causal>}
      : tensor<?x16x192xbf16>, tensor<?x16x192xbf16>, tensor<?x16x128xbf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x16x128xbf16>, tensor<?x16xf32>
  return %o, %lse : tensor<?x16x128xbf16>, tensor<?x16xf32>
}

// -----

// q/k of 96 dims (not whole 64-dim TMA boxes): the mma.sync template on
// sm_90a too.
// SM90-LABEL: func.func @qk96_v64
// SM90: kernel_spec<kind = prefill, {{.*}}head_dim = 64, rope_dim = 32, {{.*}}stages = 2>>
func.func @qk96_v64(%q: tensor<?x8x96xf16>, %k: tensor<?x8x96xf16>,
                    %v: tensor<?x8x64xf16>, %cu: tensor<?xi32>)
    -> tensor<?x8x64xf16> {
  %o = attn.prefill %q, %k, %v, %cu, %cu {kind = #attn.kind<encoder>, mask = #attn.mask<none>}
      : tensor<?x8x96xf16>, tensor<?x8x96xf16>, tensor<?x8x64xf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x8x64xf16>
  return %o : tensor<?x8x64xf16>
}
