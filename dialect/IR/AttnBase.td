//===- AttnBase.td - attn dialect base ---------------------*- tablegen -*-===//
//
// The attn dialect, the base op class every attention op derives from, and the
// operand constraints the ops share.
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_DIALECT_IR_ATTNBASE_TD
#define ATTN_DIALECT_IR_ATTNBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Attn_Dialect : Dialect {
  let name = "attn";
  let summary = "Attention variants for LLM inference";
  let description = [{
    The attn dialect describes attention as an inference engine runs it:
    ragged prefill, prefill over a paged prefix (chunked prefill, prefix
    caching), paged decode, appending new keys and values to a paged KV cache,
    and merging partial attention states. Variant knobs (mask, sliding window,
    ALiBi, soft-cap, scale, attention kind, FP8 KV) are attributes and optional
    operands of a small set of ops; shapes and dtypes come from builtin types.
    Later passes pick a schedule for a GPU and lower each op to a specialized
    CUDA kernel.
  }];
  let cppNamespace = "::mlir::attn";
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  // score_mod and mask_mod regions are written in these (AttnOps.td).
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::scf::SCFDialect"];
  let extraClassDeclaration = [{
    void registerAttributes();
    void registerTypes();

    /// Module attribute naming the GPU the module is compiled for, e.g.
    /// `attn.arch = "sm_90a"`; attn-select-schedule sets it, and
    /// attn-lower-to-kernel reads it. One target per module: a compilation
    /// targets one GPU, and every schedule in the module was chosen for it.
    static constexpr ::llvm::StringLiteral getArchAttrName() {
      return ::llvm::StringLiteral("attn.arch");
    }
  }];
}

/// Base of every attn op: each one has a verifier for the rules no kernel can
/// honour.
class Attn_Op<string mnemonic, list<Trait> traits = []>
    : Op<Attn_Dialect, mnemonic, traits> {
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Operand constraints
//===----------------------------------------------------------------------===//

/// Query, key, value and output rows: tokens x heads x head_dim.
def Attn_ActivationTensor : TensorRankOf<[F16, BF16], [3]>;
/// Queries: activations, or e4m3 rows with their q_scale (fp8_compute).
def Attn_QueryTensor : TensorRankOf<[F16, BF16, F8E4M3FN], [3]>;
/// Ragged keys and values: activations, or FP8 with their kv_scales.
def Attn_KVRowsTensor : TensorRankOf<[F16, BF16, F8E4M3FN, F8E5M2], [3]>;
/// Partial outputs for merge_states may also be kept in f32.
def Attn_PartialTensor : TensorRankOf<[F16, BF16, F32], [3]>;
/// Log-sum-exp of the scores: tokens x heads, f32.
def Attn_LseTensor : TensorRankOf<[F32], [2]>;
/// Per-request lengths and offsets (seq_lens, cu_seqlens).
def Attn_IndexVector : TensorRankOf<[I32], [1]>;
/// Page indices per request, padded: batch x max_pages.
def Attn_PageTable : TensorRankOf<[I32], [2]>;
/// Cache slot of each new token (page * page_size + offset); -1 skips it.
/// i64, as inference engines keep it (a cache may exceed 2^31 slots).
def Attn_SlotMapping : TensorRankOf<[I64], [1]>;
/// FP8 dequantization scales: one per tensor, or one per KV head.
def Attn_ScaleVector : TensorRankOf<[F32], [1]>;
/// ALiBi slopes, one per query head.
def Attn_SlopeVector : TensorRankOf<[F32], [1]>;

/// A parameter holding one of the spec's enums (spec/KernelSpec.h) as a
/// keyword: printed by attn::toString, parsed by `parseFn` (the spec's
/// inverse of toString), so the IR and the spec share one enum and no
/// mapping between them exists.
class Attn_SpecEnumParameter<string cppType, string parseFn, string expected>
    : AttrParameter<cppType, "one of " # expected> {
  let parser = "::mlir::attn::parseSpecKeyword<" # cppType # ">($_parser, "
               # parseFn # ", \"" # expected # "\")";
  let printer = "$_printer << ::llvm::StringRef(::attn::toString($_self))";
}

#endif // ATTN_DIALECT_IR_ATTNBASE_TD
