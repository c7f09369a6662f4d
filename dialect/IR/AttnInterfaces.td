//===- AttnInterfaces.td - attn op interfaces --------------*- tablegen -*-===//
//
// AttentionOpInterface: what every attention op (prefill, paged_prefill,
// decode) has, so verifiers, passes and the kernel-spec derivation walk
// one interface instead of a dyn_cast chain per op.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_DIALECT_IR_ATTNINTERFACES_TD
#define ATTN_DIALECT_IR_ATTNINTERFACES_TD

include "mlir/IR/OpBase.td"

def Attn_AttentionOpInterface : OpInterface<"AttentionOpInterface"> {
  let description = [{
    An op computing softmax(scale * q k^T + modifiers) v over some keys: its
    queries, output and optional log-sum-exp, its mask, attention kind,
    scale and soft-cap, its per-query-head tables (ALiBi slopes and the
    other rows of templates/attn/variant_knobs.h) and its schedule.
  }];
  let cppNamespace = "::mlir::attn";
  let methods = [
    InterfaceMethod<"The queries: tokens x q heads x head_dim.",
      "::mlir::Value", "getQ">,
    InterfaceMethod<"The output, shaped as q.", "::mlir::Value", "getOut">,
    InterfaceMethod<"The log-sum-exp result (natural log), or null.",
      "::mlir::Value", "getLse">,
    InterfaceMethod<"The mask, or null for none.",
      "::mlir::attn::MaskAttr", "getMaskAttr">,
    InterfaceMethod<"Decoder, encoder or cross attention.",
      "::attn::AttentionKind", "getKind">,
    InterfaceMethod<"The softmax scale, or null for 1/sqrt(head_dim).",
      "::mlir::FloatAttr", "getScaleAttr">,
    InterfaceMethod<"The soft-cap, or null for none.",
      "::mlir::FloatAttr", "getSoftcapAttr">,
    InterfaceMethod<"Whether the result may not depend on the batch.",
      "bool", "getBatchInvariant">,
    InterfaceMethod<[{
        The per-query-head table operand named `operand` in
        templates/attn/variant_knobs.h (e.g. "alibi_slopes"), or null.
      }], "::mlir::Value", "getHeadTable", (ins "::llvm::StringRef":$operand),
      [{}], [{
        return ::mlir::attn::getHeadTableOf($_op, operand);
      }]>,
    InterfaceMethod<"The auxiliary tables the modifier regions read.",
      "::mlir::OperandRange", "getAux">,
    InterfaceMethod<"The score_mod region (empty when the op has none).",
      "::mlir::Region &", "getScoreMod">,
    InterfaceMethod<"The mask_mod region (empty when the op has none).",
      "::mlir::Region &", "getMaskMod">,
    InterfaceMethod<"The pinned or chosen schedule attribute, or null.",
      "::mlir::Attribute", "getScheduleAttr">,
    InterfaceMethod<[{
        Records a schedule: the #attn.decode_schedule or
        #attn.prefill_schedule the op's kernel template takes.
      }], "void", "recordSchedule", (ins "::mlir::Attribute":$schedule),
      [{}], [{
        $_op->setAttr($_op.getScheduleAttrName(), schedule);
      }]>,
  ];
}

#endif // ATTN_DIALECT_IR_ATTNINTERFACES_TD
