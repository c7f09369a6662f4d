// Every region of examples/modifiers lowers to a kernel whose Config holds
// it as a device function, one call of templates/attn/region_ops.h per op;
// a mask_mod also gets its interval form. Cheap regions are inlined at every
// score; costly ones (t5-bias: IEEE divisions and a float-to-int cast) run
// over a row's scores of a tile in one out-of-line call, so NVRTC compiles
// them once.
// RUN: attn-opt %S/../../examples/modifiers/softcap.mlir --attn-pipeline="arch=sm_90a" | attn-translate --attn-to-cuda | FileCheck %s --check-prefix=SOFTCAP
// RUN: attn-opt %S/../../examples/modifiers/alibi.mlir --attn-pipeline="arch=sm_80" | attn-translate --attn-to-cuda | FileCheck %s --check-prefix=ALIBI
// RUN: attn-opt %S/../../examples/modifiers/chunked-local.mlir --attn-pipeline="arch=sm_90a" | attn-translate --attn-to-cuda | FileCheck %s --check-prefix=CHUNKED
// RUN: attn-opt %S/../../examples/modifiers/document-mask.mlir --attn-pipeline="arch=sm_89" | attn-translate --attn-to-cuda | FileCheck %s --check-prefix=DOCS
// RUN: attn-opt %S/../../examples/modifiers/bidirectional-spans.mlir --attn-pipeline="arch=sm_90a" | attn-translate --attn-to-cuda | FileCheck %s --check-prefix=SPANS
// RUN: attn-opt %S/../../examples/modifiers/t5-bias.mlir --attn-pipeline="arch=sm_90a" | attn-translate --attn-to-cuda | FileCheck %s --check-prefix=T5

// SOFTCAP: static constexpr bool kScoreMod = true;
// SOFTCAP-NEXT: static constexpr bool kMaskMod = false;
// SOFTCAP: static __device__ __forceinline__ float
// SOFTCAP-NEXT: scoreMod(float score, int32_t request, int32_t q_pos, int32_t k_pos, int32_t q_head, int32_t kv_head, const attn::AuxTable *aux, const ScoreModHead &head) {
// SOFTCAP: const float v0 = 0x1.ep+4f;
// SOFTCAP-NEXT: const float v1 = attn::region::divf(score, v0);
// SOFTCAP-NEXT: const float v2 = attn::region::tanh(v1);
// SOFTCAP-NEXT: const float v3 = attn::region::mulf(v2, v0);
// SOFTCAP-NEXT: return v3;

// The slope read depends on the head alone: it moves to scoreModHead, which
// the kernel runs once per row.
// ALIBI: struct ScoreModHead {
// ALIBI-NEXT: float v0;
// ALIBI: head.v0 = auxLoad<float>(aux[0], q_head);
// ALIBI: scoreMod(
// ALIBI: const int32_t v1 = attn::region::subi(k_pos, q_pos);
// ALIBI-NEXT: const int32_t v2 = attn::region::absi(v1);
// ALIBI-NEXT: const float v3 = attn::region::sitofp<float>(v2);
// ALIBI-NEXT: const float v4 = (head.v0 * v3);
// ALIBI-NEXT: const float v5 = (score - v4);

// CHUNKED: static __device__ __forceinline__ bool
// CHUNKED-NEXT: maskMod(int32_t request
// CHUNKED: const bool v3 = attn::region::cmpiEq(v1, v2);
// CHUNKED: attn::BoolRange
// CHUNKED-NEXT: maskModTile(attn::Range request, attn::Range q_pos, attn::Range k_pos, attn::Range q_head, attn::Range kv_head) {
// CHUNKED-NEXT: const attn::Range r0 = attn::Range{8192, 8192};
// CHUNKED-NEXT: const attn::Range r1 = attn::rangeDiv(q_pos, r0);
// CHUNKED-NEXT: const attn::Range r2 = attn::rangeDiv(k_pos, r0);
// CHUNKED-NEXT: const attn::BoolRange r3 = attn::rangeEq(r1, r2);
// CHUNKED-NEXT: return r3;

// An aux read is unbounded: the interval form cannot skip a tile.
// DOCS: const int32_t v0 = auxLoad<int32_t>(aux[0], request, q_pos);
// DOCS: maskModTile(
// DOCS-NEXT: const attn::BoolRange r0 = attn::rangeEq(attn::Range::full(), attn::Range::full());
// DOCS-NEXT: return r0;

// SPANS: const bool v7 = attn::region::ori(v0, v6);
// SPANS: maskModTile(
// SPANS-NEXT: const attn::BoolRange r0 = attn::rangeLe(k_pos, q_pos);

// log(8) depends on no position: computed once per row.
// T5: head.v5 = attn::region::log(v4);
// T5: kScoreModOutOfLine = true;
// T5: static __device__ __forceinline__ float
// T5-NEXT: scoreMod(
// T5: const float v10 = attn::region::mulf(v9, 0x1p-4f);
// T5: const float v11 = attn::region::log(v10);
// T5: const float v12 = attn::region::divf(v11, head.v5);
// T5: const int32_t v14 = attn::region::fptosi<int32_t>(v13);
// T5: const int32_t v17 = (v8 ? v7 : v16);
// T5-NEXT: const float v18 = auxLoad<float>(aux[0], q_head, v17);
// T5: static __device__ __noinline__ void
// T5-NEXT: scoreModRow(
// T5-NEXT: const attn::AuxTable tables[1] = {aux[0]};
// T5: score[i] = scoreMod(score[i], request, q_pos, k_pos[i], q_head, kv_head, tables, head);
