//===- AttnTypes.td - attn dialect types -------------------*- tablegen -*-===//
//
// The paged KV cache type.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_DIALECT_IR_ATTNTYPES_TD
#define ATTN_DIALECT_IR_ATTNTYPES_TD

include "dialect/IR/AttnBase.td"
include "dialect/IR/AttnEnums.td"

def Attn_PagedKVType : TypeDef<Attn_Dialect, "PagedKV"> {
  let mnemonic = "paged_kv";
  let summary = "a paged key/value cache";
  let description = [{
    Keys and values of one attention layer, stored in fixed-size pages (vLLM's
    blocks). Parameters: KV heads x head dim x element type (f16, bf16, or FP8
    f8E4M3FN / f8E5M2 with dequantization scales on the ops that read or write
    it), tokens per page, and the order inside a page: `nhd` (page_size x
    heads x head_dim) or `hnd` (heads x page_size x head_dim). The number of
    pages is a runtime quantity.

    ```mlir
    !attn.paged_kv<8x128xbf16, page_size = 16, layout = nhd>
    !attn.paged_kv<1x64xf8E4M3FN, page_size = 1, layout = hnd>
    ```
  }];
  let parameters = (ins
    "int64_t":$numKvHeads,
    "int64_t":$headDim,
    "::mlir::Type":$elementType,
    "int64_t":$pageSize,
    Attn_SpecEnumParameter<"::attn::KVLayout", "::attn::parseKVLayout",
                           "nhd or hnd">:$layout);
  let assemblyFormat = [{
    `<` custom<KVShape>($numKvHeads, $headDim, $elementType) `,`
    `page_size` `=` $pageSize `,` `layout` `=` $layout `>`
  }];
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// True when the cache stores FP8 and needs dequantization scales.
    bool isFP8() const;
  }];
}

#endif // ATTN_DIALECT_IR_ATTNTYPES_TD
