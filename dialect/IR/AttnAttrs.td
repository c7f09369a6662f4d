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
    the keys, so a chunk of new tokens sees the whole cached prefix. `window`
    (causal only) additionally limits query `i` to the `window` keys before
    its diagonal position, as Mistral-style sliding-window attention does.

    ```mlir
    #attn.mask<none>
    #attn.mask<causal>
    #attn.mask<causal, window = 4096>
    ```
  }];
  let parameters = (ins
    EnumParameter<Attn_MaskKind>:$kind,
    OptionalParameter<"std::optional<int64_t>">:$window);
  let assemblyFormat = "`<` $kind (`,` `window` `=` $window^)? `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    bool isCausal() const { return getKind() == MaskKind::causal; }
    bool hasWindow() const { return getWindow().has_value(); }
  }];
}

def Attn_AttentionKindAttr
    : EnumAttr<Attn_Dialect, Attn_AttentionKind, "kind"> {
  let summary = "decoder, encoder or cross attention";
  let assemblyFormat = "`<` $value `>`";
}

#endif // ATTN_DIALECT_IR_ATTNATTRS_TD
