//===- AttnEnums.td - attn dialect enums -------------------*- tablegen -*-===//
//
// Enumerations used by attn attributes and types.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_DIALECT_IR_ATTNENUMS_TD
#define ATTN_DIALECT_IR_ATTNENUMS_TD

include "mlir/IR/EnumAttr.td"

def Attn_MaskKind_None : I32EnumAttrCase<"none", 0>;
def Attn_MaskKind_Causal : I32EnumAttrCase<"causal", 1>;
def Attn_MaskKind : I32EnumAttr<"MaskKind",
    "which keys a query may see: all of them, or those at or before it",
    [Attn_MaskKind_None, Attn_MaskKind_Causal]> {
  let cppNamespace = "::mlir::attn";
  let genSpecializedAttr = 0;
}

// The attention kind and the KV-cache page order are the spec's enums
// (attn::AttentionKind, attn::KVLayout in spec/KernelSpec.h), held by the
// IR as they are: Attn_SpecEnumParameter (AttnAttrs.td).

#endif // ATTN_DIALECT_IR_ATTNENUMS_TD
