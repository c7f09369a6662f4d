//===- AttnAttrs.td - attn dialect attributes --------------*- tablegen -*-===//
//
// Attributes carrying the variant knobs of attention ops.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_DIALECT_IR_ATTNATTRS_TD
#define ATTN_DIALECT_IR_ATTNATTRS_TD

include "dialect/IR/AttnBase.td"
include "dialect/IR/AttnEnums.td"
include "mlir/IR/EnumAttr.td"

class Attn_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Attn_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Attn_MaskAttr : Attn_Attr<"Mask", "mask"> {
  let summary = "attention mask: none or causal, with an optional sliding window";
  let description = [{
    `none` lets every query see every key of its request. `causal` lets query
    `i` see keys `j <= i + (kv_len - q_len)`: queries are aligned to the end of
    the keys, so a chunk of new tokens sees the whole cached prefix.
    `window_left = W` (causal only) additionally limits query `i` to keys
    `j >= i + (kv_len - q_len) - W`: the W keys before its diagonal position
    and that position itself, W + 1 keys in all (FlashAttention's and
    FlashInfer's `window_left`). A model config's `sliding_window = N`
    (N keys in all, as Mistral and vLLM count it) is `window_left = N - 1`
    (docs/semantics.md).

    ```mlir
    #attn.mask<none>
    #attn.mask<causal>
    #attn.mask<causal, window_left = 4095>
    ```
  }];
  let parameters = (ins
    EnumParameter<Attn_MaskKind>:$kind,
    OptionalParameter<"std::optional<int64_t>">:$window_left);
  let assemblyFormat = "`<` $kind (`,` `window_left` `=` $window_left^)? `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    bool isCausal() const { return getKind() == MaskKind::causal; }
    bool hasWindow() const { return getWindowLeft().has_value(); }
  }];
}

def Attn_AttentionKindAttr : Attn_Attr<"AttentionKind", "kind"> {
  let summary = "decoder, encoder or cross attention";
  let parameters = (ins Attn_SpecEnumParameter<"::attn::AttentionKind",
                        "::attn::parseAttentionKind",
                        "decoder, encoder or cross">:$value);
  let assemblyFormat = "`<` $value `>`";
  // Ops read the kind as the spec's enum.
  let returnType = "::attn::AttentionKind";
  let convertFromStorage = "$_self.getValue()";
  let constBuilderCall =
      "::mlir::attn::AttentionKindAttr::get($_builder.getContext(), $0)";
}

//===----------------------------------------------------------------------===//
// Schedule and kernel-level attributes
//===----------------------------------------------------------------------===//

def Attn_DecodeScheduleAttr : Attn_Attr<"DecodeSchedule", "decode_schedule"> {
  let summary = "how the paged-decode kernel is laid out on the GPU";
  let description = [{
    The schedule the attn-select-schedule pass picks for an `attn.decode`
    (or a user pins by writing it on the op); mirrors `attn::DecodeSchedule`
    in spec/KernelSpec.h field by field.

    - `warps`: warps per CTA (each streams its own share of the KV chunk).
    - `stages`: cp.async pipeline depth per warp (stages - 1 tiles in flight).
    - `row_tiles`: 16-row MMA tiles per CTA; a row is one (query token, q
      head of the KV head's group) pair, so a CTA covers 16 * row_tiles rows.
    - `min_chunk_tokens`: the smallest KV chunk a CTA takes when the planner
      splits a request (split-KV).
    - `ctas_per_sm`: the planner splits KV until it has this many CTAs per SM.

    ```mlir
    #attn.decode_schedule<warps = 4, stages = 4, row_tiles = 1, min_chunk_tokens = 256, ctas_per_sm = 2>
    ```
  }];
  let parameters = (ins "::attn::DecodeSchedule":$schedule);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Attn_PrefillScheduleAttr : Attn_Attr<"PrefillSchedule", "prefill_schedule"> {
  let summary = "how the prefill kernel is laid out on the GPU";
  let description = [{
    The schedule the attn-select-schedule pass picks for an `attn.prefill`
    or `attn.paged_prefill` (or a user pins by writing it on the op); both
    instantiate the one prefill template. Mirrors `attn::PrefillSchedule`
    in spec/KernelSpec.h field by field.

    - `warps`: warps per CTA; with mma.sync each owns 16 or 32 query rows,
      so `block_m` is 16 * `warps` or 32 * `warps`; with wgmma warpgroup 0
      loads and every further warpgroup owns 64 rows, so `block_m` is
      16 * (`warps` - 4), with 8, 12 or 16 warps (16, three consumers with
      160 registers each, at head dim 64 only).
    - `block_m`: query rows per CTA (one query tile): of one q head, or
      with `pack_gqa` `block_m` / group tokens of each q head of one KV
      head.
    - `block_n`: keys per K/V tile, a multiple of 16 (one MMA k-step of
      P * V); 64 or 128 with wgmma (64 at head dim 256).
    - `stages`: K/V tiles in flight in the shared-memory ring.
    - `mma`: `sync` (mma.sync, templates/attn/prefill.cuh; the default,
      left out when printed) or `wgmma` (sm_90a only,
      templates/attn/prefill_sm90.cuh).
    - `persistent_max_q_len` (wgmma): the runtime launches a persistent
      grid when a batch averages at most this many query tokens per
      request, else one CTA per (work item, q head); 0 never. 2048 by
      default (left out when printed). It does not change the binary.
    - `pack_gqa` (mma.sync): a tile takes the q heads of one KV head
      together, so short queries fill it and each K/V tile serves the
      group; for variants without per-head values (ALiBi, sinks, modifier
      regions) and `block_m` >= the group. The pass sets it wherever it
      applies; false by default (left out when printed).

    ```mlir
    #attn.prefill_schedule<warps = 4, block_m = 64, block_n = 64, stages = 2>
    #attn.prefill_schedule<warps = 12, block_m = 128, block_n = 128,
                           stages = 2, mma = wgmma>
    ```
  }];
  let parameters = (ins "::attn::PrefillSchedule":$schedule);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Attn_KernelSpecAttr : Attn_Attr<"KernelSpec", "kernel_spec"> {
  let summary = "one kernel variant: everything that changes its binary";
  let description = [{
    Holds an `attn::KernelSpec` (spec/KernelSpec.h), so lowered IR converts
    to the struct codegen and the runtime take and back without loss. Its
    text lists the spec's fields by `attn::forEachSpecField`, the one list
    of what a spec holds, in any order: element types are builtin types
    (`f8E4M3FN` is `attn::ScalarType::F8E4M3`); `arch` is `"sm_80"`,
    `"sm_89"` or `"sm_90a"`; the variant flags of
    templates/attn/variant_knobs.h (`causal`, `alibi`, ...), `query_len`
    and `page_size` are printed only when they differ from their default
    (false, 1, 0); `schedule` is present exactly for decode kernels,
    `prefill_schedule` exactly for prefill and paged_prefill kernels.

    The form is canonical, so two equal specs are one attribute: an
    append_kv spec has `num_q_heads == num_kv_heads`, `query_len = 1` and no
    decode flags; `per_head_kv_scale` needs an FP8 `kv_type`. A prefill
    kernel reads contiguous k/v, not a cache, and takes its query rows from
    cu_seqlens, so its cache and decode fields have fixed values:
    `kv_type = q_type`, `page_size = 0` (left out), `layout = nhd`,
    `query_len = 1` (left out) and no `per_head_kv_scale`. A paged_prefill
    kernel reads a cache as decode does (kv_type, page_size, layout,
    per_head_kv_scale) and takes its query rows from cu_seqlens as prefill
    does: `query_len = 1` (left out). The rules are attn::checkKernelSpec's
    (spec/KernelLimits.h), shared with the runtime.

    ```mlir
    #attn.kernel_spec<kind = decode, arch = "sm_90a", q_type = bf16,
        kv_type = f8E4M3FN, num_q_heads = 32, num_kv_heads = 8, head_dim = 128,
        page_size = 16, layout = nhd, causal = true,
        schedule = #attn.decode_schedule<warps = 4, stages = 6, row_tiles = 1,
                                         min_chunk_tokens = 256, ctas_per_sm = 2>>
    #attn.kernel_spec<kind = prefill, arch = "sm_90a", q_type = bf16,
        kv_type = bf16, num_q_heads = 32, num_kv_heads = 8, head_dim = 128,
        layout = nhd, causal = true,
        prefill_schedule = #attn.prefill_schedule<warps = 4, block_m = 64,
                                                  block_n = 64, stages = 2>>
    ```
  }];
  let parameters = (ins "::attn::KernelSpec":$spec);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Runs verify() on this attribute's spec, for attributes built with
    /// the unchecked get().
    ::llvm::LogicalResult
    verifyParameters(::llvm::function_ref<::mlir::InFlightDiagnostic()>
                         emitError) const {
      return verify(emitError, getSpec());
    }
  }];
}

#endif // ATTN_DIALECT_IR_ATTNATTRS_TD
