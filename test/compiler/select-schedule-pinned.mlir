// RUN: attn-opt %s --attn-select-schedule="arch=sm_90a" | FileCheck %s
// RUN: attn-opt %s --attn-select-schedule="arch=sm_80" --verify-diagnostics

// A pinned sm_90a wgmma schedule prints its mma and is kept on sm_90a; on
// any other target attn-select-schedule rejects it at the op, as it does
// every schedule its template and target cannot run.

// CHECK-LABEL: func.func @prefill_pinned_wgmma
func.func @prefill_pinned_wgmma(%q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>,
    %cu: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  // CHECK: schedule = #attn.prefill_schedule<warps = 12, block_m = 128, block_n = 128, stages = 2, mma = wgmma>
  // expected-error @+1 {{'attn.prefill' op prefill_schedule mma = wgmma needs arch sm_90a, got "sm_80"}}
  %o = attn.prefill %q, %k, %k, %cu, %cu
      {schedule = #attn.prefill_schedule<warps = 12, block_m = 128, block_n = 128, stages = 2, mma = wgmma>}
      : tensor<?x32x128xbf16>, tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
        tensor<?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %o : tensor<?x32x128xbf16>
}
