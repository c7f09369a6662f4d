// attn-aot: the example config builds a library for two archs; its manifest
// lists every kernel; a second run recompiles nothing; a bad variant fails
// alone, named by where it came from; and this file is itself a .mlir
// config (its two ops lower to two kernels).

// RUN: rm -rf %t && mkdir -p %t
// RUN: attn-aot %S/../../examples/aot/serving.json --arch sm_80,sm_90a \
// RUN:   -o %t/lib --pack %t/lib.attnlib | FileCheck %s --check-prefix=BUILD
// BUILD: attn-aot: 38 kernels in {{.*}}lib (38 compiled, 0 up to date)
// BUILD-NEXT: sm_80 19 kernels
// BUILD-NEXT: sm_90a 19 kernels
// BUILD-NEXT: total 38 kernels
// BUILD: variants per minute
// BUILD-NEXT: packed into {{.*}}lib.attnlib

// RUN: FileCheck %s --check-prefix=MANIFEST < %t/lib/manifest.json
// MANIFEST: "format": "attn-aot-4"
// MANIFEST-DAG: "decode q=bf16 kv=e4m3 heads=32/8 dim=128 page=16 layout=nhd qlen=1 per_head_kv_scale=0 kind=decoder causal=1 window_left=1 softcap=0 alibi=0 sinks=0 fp8_query=0 write_lse=0 batch_invariant=0"
// MANIFEST-DAG: "prefill paged kv=e4m3 page=16 layout=nhd per_head_kv_scale=0 q=bf16 heads=32/8 dim=128 kind=decoder causal=1 window_left=0 softcap=0 alibi=0 sinks=0 fp8_query=0 write_lse=0 batch_invariant=0"
// MANIFEST-DAG: "append_kv in=f16 kv=e4m3 kv_heads=8 dim=128 page=16 layout=nhd per_head_kv_scale=0"
// MANIFEST-DAG: "cubin": "sm_90a/paged_prefill_qbf16_kve4m3_h32x8_d128_p16nhd_causal_m{{[0-9]+}}n{{[0-9]+}}w12s2_wgmma-{{[0-9a-f]+}}.cubin"
// MANIFEST-DAG: "source": "sm_80/decode_qf16_kvf16_h32x8_d128_p16nhd_sliding_window_w{{.*}}.cu"
// MANIFEST-DAG: "cubin": "sm_90a/copy_pages-{{[0-9a-f]+}}.cubin"
// MANIFEST-DAG: "cubin": "sm_90a/advance_step-{{[0-9a-f]+}}.cubin"

// RUN: ls %t/lib/sm_80/*.cubin | count 19
// RUN: ls %t/lib/sm_90a/*.cu | count 19

// RUN: attn-aot %S/../../examples/aot/serving.json --arch sm_80,sm_90a \
// RUN:   -o %t/lib | FileCheck %s --check-prefix=AGAIN
// AGAIN: attn-aot: 38 kernels in {{.*}} (0 compiled, 38 up to date)

// RUN: not attn-aot %S/Inputs/aot-bad.json --arch sm_90a -o %t/bad 2> %t/bad.err \
// RUN:   | FileCheck %s --check-prefix=PARTIAL
// RUN: FileCheck %s --check-prefix=BAD < %t/bad.err
// PARTIAL: attn-aot: 1 kernels in {{.*}}bad (1 compiled, 0 up to date)
// BAD-DAG: error: {{.*}}aot-bad.json: decode[0] {head_dim=100, num_kv_heads=8, num_q_heads=8} on sm_90a: {{.*}}head_dim 100 is not supported
// BAD-DAG: error: {{.*}}aot-bad.json: decode[1]: unknown field "head_dmi"
// BAD: 2 problem(s); the library holds the 1 kernels that built

// One-token decodes are the same kernel causal or not: one kernel, filed
// under both variants' keys.
// RUN: attn-aot %S/Inputs/aot-dedup.json --arch sm_90a -o %t/dedup | FileCheck %s --check-prefix=DEDUP
// RUN: FileCheck %s --check-prefix=DEDUP-KEYS < %t/dedup/manifest.json
// DEDUP: attn-aot: 1 kernels in {{.*}}dedup (1 compiled, 0 up to date)
// DEDUP-KEYS: "kernel_keys": [
// DEDUP-KEYS-DAG: "decode q=bf16 kv=bf16 heads=8/8 dim=128 page=16 layout=nhd qlen=1 per_head_kv_scale=0 kind=decoder causal=0
// DEDUP-KEYS-DAG: "decode q=bf16 kv=bf16 heads=8/8 dim=128 page=16 layout=nhd qlen=1 per_head_kv_scale=0 kind=decoder causal=1

// Modifier regions from .mlir files named by the config (relative to it):
// each file's regions go into every variant of its entry, and the keys hold
// the region text.
// RUN: attn-aot %S/../../examples/modifiers/aot.json --arch sm_90a -o %t/mods \
// RUN:   | FileCheck %s --check-prefix=MODS
// RUN: FileCheck %s --check-prefix=MODS-KEYS < %t/mods/manifest.json
// MODS: attn-aot: 6 kernels in {{.*}}mods (6 compiled, 0 up to date)
// MODS-KEYS-DAG: "decode q=bf16 kv=e4m3 {{.*}} mask_mod={{[{][{]}} ^bb0(%request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32): %c = arith.constant 8192 : i32
// MODS-KEYS-DAG: "prefill paged kv=bf16 {{.*}} score_mod={{[{][{]}} ^bb0(%score: f32,
// MODS-KEYS-DAG: "mask_mod_tiles":

// RUN: not attn-aot %s --arch sm_75 -o %t/x 2>&1 | FileCheck %s --check-prefix=ARCH
// ARCH: unknown arch 'sm_75'

// RUN: attn-aot %s --arch sm_89 -o %t/mlir | FileCheck %s --check-prefix=MLIR
// MLIR: attn-aot: 2 kernels in {{.*}}mlir (2 compiled, 0 up to date)

func.func @step(
    %q: tensor<?x32x128xbf16>, %k: tensor<?x8x128xbf16>, %v: tensor<?x8x128xbf16>,
    %cache: !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
    %slot_mapping: tensor<?xi64>, %page_tables: tensor<?x?xi32>,
    %seq_lens: tensor<?xi32>) -> tensor<?x32x128xbf16> {
  %updated = attn.append_kv %k, %v into %cache at %slot_mapping
      : tensor<?x8x128xbf16>, tensor<?x8x128xbf16>,
        !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>, tensor<?xi64>
  %out = attn.decode %q, %updated, %page_tables, %seq_lens
      : tensor<?x32x128xbf16>, !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>,
        tensor<?x?xi32>, tensor<?xi32> -> tensor<?x32x128xbf16>
  return %out : tensor<?x32x128xbf16>
}
