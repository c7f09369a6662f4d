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

def Attn_AttentionKind_Decoder : I32EnumAttrCase<"decoder", 0>;
def Attn_AttentionKind_Encoder : I32EnumAttrCase<"encoder", 1>;
def Attn_AttentionKind_Cross : I32EnumAttrCase<"cross", 2>;
def Attn_AttentionKind : I32EnumAttr<"AttentionKind",
    "decoder self attention, bidirectional encoder self attention, or "
    "encoder-decoder cross attention",
    [Attn_AttentionKind_Decoder, Attn_AttentionKind_Encoder,
     Attn_AttentionKind_Cross]> {
  let cppNamespace = "::mlir::attn";
  let genSpecializedAttr = 0;
}

def Attn_KVLayout_NHD : I32EnumAttrCase<"nhd", 0>;
def Attn_KVLayout_HND : I32EnumAttrCase<"hnd", 1>;
def Attn_KVLayout : I32EnumAttr<"KVLayout",
    "order of one KV-cache page: tokens x heads x dim (nhd) or "
    "heads x tokens x dim (hnd)",
    [Attn_KVLayout_NHD, Attn_KVLayout_HND]> {
  let cppNamespace = "::mlir::attn";
  let genSpecializedAttr = 0;
}

#endif // ATTN_DIALECT_IR_ATTNENUMS_TD
