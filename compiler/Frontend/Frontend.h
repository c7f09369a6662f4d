//===- Frontend.h - host variants -> attn IR -> kernel specs ----*- C++ -*-===//
//
// The compiler's entry for the JIT and attn-aot: a variant a C++ host
// describes (spec/Variant.h) becomes a module
// with one attn op, is verified, runs through attn-pipeline, and comes back
// as the attn::KernelSpec codegen and the runtime take. Errors are
// llvm::Error values carrying the diagnostics (verifier messages included).
//
//===----------------------------------------------------------------------===//
#ifndef ATTN_COMPILER_FRONTEND_FRONTEND_H
#define ATTN_COMPILER_FRONTEND_FRONTEND_H

#include "spec/KernelSpec.h"
#include "spec/Variant.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <vector>

namespace mlir::attn {

/// A module with one func.func @decode holding the attn.decode of `variant`:
/// q/out are tensor<?xHxDxT>, the cache is !attn.paged_kv, page tables and
/// seq_lens are i32; an FP8 cache adds kv_scales of 1 or numKVHeads elements
/// (perHeadKVScale; ignored for a non-FP8 cache, which has no scales),
/// `alibi` adds the slopes operand, `writeLse` the lse result. causal,
/// windowLeft, kind, softcap, scale and a pinned schedule become
/// the op's mask, kind, softcap, scale and schedule. The module is not
/// verified. Returns null, after
/// emitting the error to `context`, when a type or attribute cannot be built
/// (a head dim or page size no kernel runs, a negative size or window, an
/// invalid pinned schedule).
OwningOpRef<ModuleOp> buildDecodeModule(MLIRContext &context,
                                        const ::attn::DecodeVariant &variant);

/// A module with one func.func @append_kv holding the attn.append_kv of
/// `variant` (i64 slot mapping; FP8 caches get kv_scales as for decode).
/// Same contract as buildDecodeModule.
OwningOpRef<ModuleOp>
buildAppendKVModule(MLIRContext &context,
                    const ::attn::AppendKVVariant &variant);

/// A module with one func.func @merge_states holding an attn.merge_states
/// of two states of `variant`'s outputs (tensor<?xnumHeadsxheadDimxT>) and
/// LSEs (tensor<?xnumHeadsxf32>): its kernel merges any number. Same
/// contract as buildDecodeModule.
OwningOpRef<ModuleOp>
buildMergeStatesModule(MLIRContext &context,
                       const ::attn::MergeStatesVariant &variant);

/// A module with one func.func @mla_decode holding the attn.mla_decode of
/// `variant`: q_nope and out tensor<?xnumQHeadsxkvLoraRankxT>, the latent
/// cache !attn.paged_kv<1xkvLoraRank...> (nhd), page_tables and seq_lens;
/// with a ropeDim, q_rope and the RoPE cache (rope(...)); an e4m3 cache
/// adds kv_scale (tensor<1xf32>), `writeLse` the lse result. Same contract
/// as buildDecodeModule.
OwningOpRef<ModuleOp>
buildMlaDecodeModule(MLIRContext &context,
                     const ::attn::MlaDecodeVariant &variant);

/// A module with one func.func @prefill holding the attn.prefill of
/// `variant`: q/out are tensor<?xnumQHeadsxheadDimxT>, k and v
/// tensor<?xnumKVHeadsxheadDimxT>, cu_seqlens_q and cu_seqlens_kv
/// tensor<?xi32>; `alibi` adds the slopes operand, `writeLse` the lse result.
/// causal and windowLeft become the mask (#attn.mask<causal[, window]>),
/// kind the op's kind, and softcap, scale and a pinned
/// schedule the op's attributes. With `variant.paged` set, the module holds
/// func.func @paged_prefill with the attn.paged_prefill instead: k and v
/// become the !attn.paged_kv cache of `paged`, cu_seqlens_kv becomes
/// page_tables (tensor<?x?xi32>) and seq_lens (tensor<?xi32>), and an FP8
/// cache adds kv_scales as for decode. Same contract as buildDecodeModule;
/// an encoder variant with a paged cache fails verification (encoders have
/// no KV cache).
OwningOpRef<ModuleOp> buildPrefillModule(MLIRContext &context,
                                         const ::attn::PrefillVariant &variant);

/// The one region `text` spells (`{ ^bb0(...): ... }`, as a variant's
/// scoreMod / maskMod holds it), parsed as the only region of a holder op
/// (an unregistered one, not verified: the attention op the region moves
/// into verifies it); `name` (score_mod, mask_mod) locates its errors.
/// Text that is anything else — no region, two, a region plus more IR
/// spliced after it, nesting deeper than kMaxIRNesting, more than
/// kMaxModifierBytes — fails after an error, so that what a host wrote is
/// exactly what the kernel computes.
FailureOr<OwningOpRef<Operation *>>
parseModifierRegion(MLIRContext &context, StringRef text, StringRef name);

/// Verifies `module`, runs attn-pipeline for `arch` on it (in place) and
/// returns the spec of every attn.kernel_launch, in IR order. Diagnostics
/// become the llvm::Error's text.
llvm::Expected<std::vector<::attn::KernelSpec>>
lowerToKernelSpecs(ModuleOp module, ::attn::Arch arch);

/// The kernel spec of a decode variant on `arch`: build the module, verify,
/// run the pipeline. An invalid variant gives an llvm::Error carrying the
/// verifier message. Thread-safe: each call uses its own MLIRContext.
llvm::Expected<::attn::KernelSpec>
compileDecodeVariant(const ::attn::DecodeVariant &variant, ::attn::Arch arch);

/// The kernel spec of an append-KV variant on `arch`; as compileDecodeVariant.
llvm::Expected<::attn::KernelSpec>
compileAppendKVVariant(const ::attn::AppendKVVariant &variant,
                       ::attn::Arch arch);

/// The kernel spec of a merge_states variant on `arch`; as
/// compileDecodeVariant.
llvm::Expected<::attn::KernelSpec>
compileMergeStatesVariant(const ::attn::MergeStatesVariant &variant,
                          ::attn::Arch arch);

/// The kernel spec of an MLA decode variant on `arch`; as
/// compileDecodeVariant.
llvm::Expected<::attn::KernelSpec>
compileMlaDecodeVariant(const ::attn::MlaDecodeVariant &variant,
                        ::attn::Arch arch);

/// The kernel spec of a ragged- or paged-prefill variant on `arch`; as
/// compileDecodeVariant.
llvm::Expected<::attn::KernelSpec>
compilePrefillVariant(const ::attn::PrefillVariant &variant, ::attn::Arch arch);

/// compile<Type>Variant for a variant of any op of spec/Ops.h, by overload.
#define ATTN_OP(Type, member, name)                                            \
  inline llvm::Expected<::attn::KernelSpec> compileVariant(                    \
      const ::attn::Type##Variant &variant, ::attn::Arch arch) {               \
    return compile##Type##Variant(variant, arch);                              \
  }
#include "spec/Ops.h"

} // namespace mlir::attn

#endif // ATTN_COMPILER_FRONTEND_FRONTEND_H
