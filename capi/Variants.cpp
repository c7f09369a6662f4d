//===- Variants.cpp - C variants <-> spec/Variant.h -----------------------===//
//
// One conversion per variant struct, every field, and the rules every
// variant obeys checked there, so no entry point takes a variant unchecked;
// the *_init functions take their defaults from the C++ structs, so the two
// cannot drift apart.
//
//===----------------------------------------------------------------------===//
#include "capi/CApi.h"

#include "attn/runtime/cache/VariantKey.h"
#include "spec/KernelLimits.h"

#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace attn;
using namespace attn::capi;

namespace attn::capi {

namespace {

// attn_knobs names each per-head table of templates/attn/variant_knobs.h;
// a new table needs its field there (and in attn_head_tables).
constexpr int kHeadTables = 0
#define ATTN_HEAD_TABLE(...) +1
#include "templates/attn/variant_knobs.h"
    ;
static_assert(kHeadTables == 3, "attn_knobs / attn_head_tables lack a table "
                                "of variant_knobs.h");
static_assert(ATTN_MAX_AUX_TABLES == kMaxAuxTables, "aux table count");
static_assert(sizeof(attn_aux_table) == sizeof(AuxTable), "aux table layout");
static_assert(ATTN_MAX_MERGE_STATES == kMaxMergeStates, "merge state count");
static_assert(ATTN_MAX_CASCADE_LEVELS == runtime::kMaxCascadeLevels,
              "cascade level count");

llvm::Error toKnobs(const attn_knobs &k, AttentionKnobs &out, const char *v) {
  int kind = enumValue(k.kind);
  if (kind < ATTN_KIND_DECODER || kind > ATTN_KIND_CROSS)
    return argError(
        llvm::formatv("{0}->knobs.kind is {1}, not an attn_kind", v, kind));
  out.kind = AttentionKind(kind);
  out.causal = k.causal != 0;
  out.windowLeft =
      k.window_left < 0 ? std::nullopt : std::optional<int>(k.window_left);
  out.softcap = k.softcap == 0 ? std::nullopt : std::optional<float>(k.softcap);
  out.scale = k.scale == 0 ? std::nullopt : std::optional<float>(k.scale);
  out.alibi = k.alibi != 0;
  out.sinks = k.sinks != 0;
  out.fp8Query = k.fp8_query != 0;
  out.writeLse = k.write_lse != 0;
  out.batchInvariant = k.batch_invariant != 0;
  out.scoreMod = k.score_mod ? k.score_mod : "";
  out.maskMod = k.mask_mod ? k.mask_mod : "";
  return llvm::Error::success();
}

void fromKnobs(const AttentionKnobs &k, attn_knobs &out) {
  out.kind = toC(k.kind);
  out.causal = k.causal;
  out.window_left = k.windowLeft.value_or(-1);
  out.softcap = k.softcap.value_or(0.0f);
  out.scale = k.scale.value_or(0.0f);
  out.alibi = k.alibi;
  out.sinks = k.sinks;
  out.fp8_query = k.fp8Query;
  out.write_lse = k.writeLse;
  out.batch_invariant = k.batchInvariant;
  // Default regions are empty: NULL.
  out.score_mod = nullptr;
  out.mask_mod = nullptr;
}

/// Sets `*out` from `value` or names the field that is out of range.
template <class T> llvm::Error convert(llvm::Expected<T> value, T &out) {
  if (!value)
    return value.takeError();
  out = *value;
  return llvm::Error::success();
}

//===--- What every variant obeys -----------------------------------------===//
//
// The rules of a variant's fields that hold on every arch, as the attention
// ops' verifiers and checkKernelSpec apply them, with spec/KernelLimits.h's
// ranges. toVariant checks them, so a key, a compile and a create refuse the
// same variants, with the compiler or without it (libattn_runtime_c.so),
// naming the C field. What depends on the arch or on the schedule the
// compiler picks for it (fp8_compute's tensor cores, registers, shared
// memory) and the score_mod / mask_mod text are left to compile and create.

llvm::Error checkRange(int64_t value, int64_t lo, int64_t hi,
                       const char *name) {
  if (value >= lo && value <= hi)
    return llvm::Error::success();
  return argError(
      llvm::formatv("{0} is {1}; expected {2} to {3}", name, value, lo, hi));
}

llvm::Error checkHeadDim(int headDim, const char *name) {
  if (isSupportedHeadDim(headDim))
    return llvm::Error::success();
  return argError(llvm::formatv("{0} {1} is not supported; expected a "
                                "multiple of {2} from {3} to {4}",
                                name, headDim, kHeadDimMultiple, kMinHeadDim,
                                kMaxHeadDim));
}

llvm::Error checkPageSize(int pageSize, const char *name) {
  if (isSupportedPageSize(pageSize))
    return llvm::Error::success();
  return argError(llvm::formatv("{0} {1} is not supported; expected {2} to "
                                "{3}",
                                name, pageSize, kMinPageSize, kMaxPageSize));
}

/// Query heads in groups of at most kMaxGroupSize per KV head.
llvm::Error checkHeads(int qHeads, int kvHeads, const char *qName,
                       const char *kvName) {
  if (llvm::Error error = checkRange(qHeads, 1, kMaxHeads, qName))
    return error;
  if (llvm::Error error = checkRange(kvHeads, 1, kMaxHeads, kvName))
    return error;
  if (qHeads % kvHeads != 0)
    return argError(llvm::formatv("{0} ({1}) must be a multiple of {2} ({3})",
                                  qName, qHeads, kvName, kvHeads));
  if (qHeads / kvHeads > kMaxGroupSize)
    return argError(llvm::formatv("{0} / {1} is {2}; at most {3} query heads "
                                  "share a KV head",
                                  qName, kvName, qHeads / kvHeads,
                                  kMaxGroupSize));
  return llvm::Error::success();
}

bool isFP8(ScalarType type) {
  return type == ScalarType::F8E4M3 || type == ScalarType::F8E5M2;
}

/// q and output rows (and what the KV types are measured against).
llvm::Error check16Bit(ScalarType type, const char *name) {
  if (type == ScalarType::F16 || type == ScalarType::BF16)
    return llvm::Error::success();
  return argError(
      llvm::formatv("{0} is {1}; expected f16 or bf16", name, toString(type)));
}

/// Keys and values: of the rows' type, or FP8 with dequantization scales.
llvm::Error checkKVType(ScalarType kvType, ScalarType rowType, const char *name,
                        const char *rowName) {
  if (kvType == rowType || isFP8(kvType))
    return llvm::Error::success();
  return argError(llvm::formatv("{0} is {1}; expected {2} ({3}), e4m3 or "
                                "e5m2",
                                name, toString(kvType), rowName,
                                toString(rowType)));
}

/// An optional f32 knob the C caller leaves 0 for none.
llvm::Error checkPositive(const std::optional<float> &value, const char *name,
                          const char *zero) {
  if (!value || (*value > 0 && std::isfinite(*value)))
    return llvm::Error::success();
  return argError(llvm::formatv("{0} is {1}; expected a positive finite "
                                "value (0: {2})",
                                name, *value, zero));
}

llvm::Error checkKnobs(const AttentionKnobs &k) {
  if (k.causal && k.kind != AttentionKind::Decoder)
    return argError(llvm::formatv(
        "v->knobs.causal is 1 with v->knobs.kind {0}: {1}", toString(k.kind),
        k.kind == AttentionKind::Cross
            ? "queries and keys come from different sequences"
            : "encoder attention is bidirectional"));
  if (k.windowLeft && !k.causal)
    return argError(llvm::formatv("v->knobs.window_left is {0} with "
                                  "v->knobs.causal 0: a sliding window needs "
                                  "a causal mask",
                                  *k.windowLeft));
  if (llvm::Error error = checkPositive(k.softcap, "v->knobs.softcap", "none"))
    return error;
  return checkPositive(k.scale, "v->knobs.scale", "1/sqrt(head_dim)");
}

llvm::Error checkVariant(const DecodeVariant &v) {
  if (llvm::Error error = check16Bit(v.qType, "v->q_type"))
    return error;
  if (llvm::Error error =
          checkKVType(v.kvType, v.qType, "v->kv_type", "q_type"))
    return error;
  if (llvm::Error error = checkHeads(v.numQHeads, v.numKVHeads,
                                     "v->num_q_heads", "v->num_kv_heads"))
    return error;
  if (llvm::Error error = checkHeadDim(v.headDim, "v->head_dim"))
    return error;
  if (llvm::Error error = checkPageSize(v.pageSize, "v->page_size"))
    return error;
  if (llvm::Error error =
          checkRange(v.queryLen, 1, kMaxDecodeQueryLen, "v->query_len"))
    return error;
  if (v.kind == AttentionKind::Encoder)
    return argError("v->knobs.kind is encoder: encoder attention has no "
                    "decode phase");
  if (v.fp8Query)
    return argError("v->knobs.fp8_query is 1: an e4m3 q needs fp8_compute, "
                    "which only prefill has");
  return checkKnobs(v);
}

llvm::Error checkVariant(const PrefillVariant &v, ScalarType kvType) {
  if (llvm::Error error = check16Bit(v.qType, "v->q_type"))
    return error;
  if (llvm::Error error = checkKVType(kvType, v.qType, "v->kv_type", "q_type"))
    return error;
  if (llvm::Error error = checkHeads(v.numQHeads, v.numKVHeads,
                                     "v->num_q_heads", "v->num_kv_heads"))
    return error;
  if (llvm::Error error = checkHeadDim(v.headDim, "v->head_dim"))
    return error;
  if (v.ropeDim != 0) {
    if (v.ropeDim < 0 || v.ropeDim % kHeadDimMultiple != 0 ||
        !isSupportedHeadDim(v.headDim + v.ropeDim))
      return argError(llvm::formatv(
          "v->rope_dim {0} is not supported: q/k head dims (head_dim + "
          "rope_dim = {1}) must be a multiple of {2} up to {3}",
          v.ropeDim, v.headDim + v.ropeDim, kHeadDimMultiple, kMaxHeadDim));
    if (v.paged || isFP8(kvType))
      return argError(llvm::formatv(
          "v->rope_dim {0} is for ragged k/v of q_type; got {1}", v.ropeDim,
          v.paged ? "paged 1" : "kv_type " + std::string(toString(kvType))));
  }
  if (v.paged) {
    if (llvm::Error error = checkPageSize(v.paged->pageSize, "v->page_size"))
      return error;
    if (v.kind == AttentionKind::Encoder)
      return argError("v->knobs.kind is encoder with v->paged 1: encoder "
                      "attention has no KV cache");
  }
  if (v.fp8Compute && !isFP8(kvType))
    return argError(llvm::formatv("v->fp8_compute is 1 with v->kv_type {0}: "
                                  "FP8 compute needs FP8 keys and values "
                                  "(e4m3, e5m2)",
                                  toString(kvType)));
  if (v.fp8Query && !v.fp8Compute)
    return argError("v->knobs.fp8_query is 1: an e4m3 q needs v->fp8_compute");
  return checkKnobs(v);
}

llvm::Error checkVariant(const AppendKVVariant &v) {
  if (llvm::Error error = check16Bit(v.inType, "v->in_type"))
    return error;
  if (llvm::Error error =
          checkKVType(v.kvType, v.inType, "v->kv_type", "in_type"))
    return error;
  if (llvm::Error error =
          checkRange(v.numKVHeads, 1, kMaxHeads, "v->num_kv_heads"))
    return error;
  if (llvm::Error error = checkHeadDim(v.headDim, "v->head_dim"))
    return error;
  return checkPageSize(v.pageSize, "v->page_size");
}

llvm::Error checkVariant(const MergeStatesVariant &v) {
  if (isFP8(v.dtype))
    return argError(llvm::formatv("v->dtype is {0}; expected f16, bf16 or f32",
                                  toString(v.dtype)));
  if (llvm::Error error = checkRange(v.numHeads, 1, kMaxHeads, "v->num_heads"))
    return error;
  return checkHeadDim(v.headDim, "v->head_dim");
}

llvm::Error checkVariant(const MlaDecodeVariant &v) {
  if (llvm::Error error = check16Bit(v.qType, "v->q_type"))
    return error;
  if (v.kvType != v.qType && v.kvType != ScalarType::F8E4M3)
    return argError(llvm::formatv("v->kv_type is {0}; expected q_type ({1}) "
                                  "or e4m3",
                                  toString(v.kvType), toString(v.qType)));
  if (llvm::Error error =
          checkRange(v.numQHeads, 1, kMaxGroupSize, "v->num_q_heads"))
    return error;
  if (v.kvLoraRank < 64 || v.kvLoraRank > 512 || v.kvLoraRank % 64)
    return argError(llvm::formatv("v->kv_lora_rank is {0}; expected a "
                                  "multiple of 64 from 64 to 512",
                                  v.kvLoraRank));
  if (v.ropeDim != 0 && v.ropeDim != 64 && v.ropeDim != 128)
    return argError(
        llvm::formatv("v->rope_dim is {0}; expected 0, 64 or 128", v.ropeDim));
  if (llvm::Error error = checkPageSize(v.pageSize, "v->page_size"))
    return error;
  if (llvm::Error error =
          checkRange(v.queryLen, 1, kMaxDecodeQueryLen, "v->query_len"))
    return error;
  if (v.causal && v.queryLen == 1)
    return argError("v->causal is 1 with v->query_len 1: one query sees "
                    "every cached key anyway");
  return checkPositive(v.scale, "v->scale", "1/sqrt(kv_lora_rank + rope_dim)");
}

} // namespace

llvm::Expected<ScalarType> toScalarType(const attn_dtype &field,
                                        const char *name) {
  int dtype = enumValue(field);
  switch (dtype) {
  case ATTN_DTYPE_F16:
    return ScalarType::F16;
  case ATTN_DTYPE_BF16:
    return ScalarType::BF16;
  case ATTN_DTYPE_F32:
    return ScalarType::F32;
  case ATTN_DTYPE_E4M3:
    return ScalarType::F8E4M3;
  case ATTN_DTYPE_E5M2:
    return ScalarType::F8E5M2;
  }
  return argError(llvm::formatv("{0} is {1}, not an attn_dtype", name, dtype));
}

llvm::Expected<KVLayout> toLayout(const attn_layout &field, const char *name) {
  int layout = enumValue(field);
  switch (layout) {
  case ATTN_LAYOUT_NHD:
    return KVLayout::NHD;
  case ATTN_LAYOUT_HND:
    return KVLayout::HND;
  }
  return argError(
      llvm::formatv("{0} is {1}, not an attn_layout", name, layout));
}

attn_dtype toC(ScalarType type) {
  switch (type) {
  case ScalarType::F16:
    return ATTN_DTYPE_F16;
  case ScalarType::BF16:
    return ATTN_DTYPE_BF16;
  case ScalarType::F32:
    return ATTN_DTYPE_F32;
  case ScalarType::F8E4M3:
    return ATTN_DTYPE_E4M3;
  case ScalarType::F8E5M2:
    return ATTN_DTYPE_E5M2;
  }
  return ATTN_DTYPE_BF16;
}

attn_layout toC(KVLayout layout) {
  return layout == KVLayout::NHD ? ATTN_LAYOUT_NHD : ATTN_LAYOUT_HND;
}

attn_kind toC(AttentionKind kind) {
  switch (kind) {
  case AttentionKind::Decoder:
    return ATTN_KIND_DECODER;
  case AttentionKind::Encoder:
    return ATTN_KIND_ENCODER;
  case AttentionKind::Cross:
    return ATTN_KIND_CROSS;
  }
  return ATTN_KIND_DECODER;
}

llvm::Expected<DecodeVariant> toVariant(const attn_decode_variant *v) {
  ATTN_CHECK_STRUCT(v, attn_decode_variant);
  DecodeVariant out;
  if (llvm::Error error = toKnobs(v->knobs, out, "v"))
    return std::move(error);
  if (llvm::Error error =
          convert(toScalarType(v->q_type, "v->q_type"), out.qType))
    return std::move(error);
  if (llvm::Error error =
          convert(toScalarType(v->kv_type, "v->kv_type"), out.kvType))
    return std::move(error);
  if (llvm::Error error = convert(toLayout(v->layout, "v->layout"), out.layout))
    return std::move(error);
  out.numQHeads = v->num_q_heads;
  out.numKVHeads = v->num_kv_heads;
  out.headDim = v->head_dim;
  out.pageSize = v->page_size;
  out.queryLen = v->query_len;
  out.perHeadKVScale = v->per_head_kv_scale != 0;
  if (llvm::Error error = checkVariant(out))
    return std::move(error);
  return out;
}

llvm::Expected<PrefillVariant> toVariant(const attn_prefill_variant *v) {
  ATTN_CHECK_STRUCT(v, attn_prefill_variant);
  PrefillVariant out;
  if (llvm::Error error = toKnobs(v->knobs, out, "v"))
    return std::move(error);
  if (llvm::Error error =
          convert(toScalarType(v->q_type, "v->q_type"), out.qType))
    return std::move(error);
  ScalarType kvType = ScalarType::BF16;
  if (llvm::Error error =
          convert(toScalarType(v->kv_type, "v->kv_type"), kvType))
    return std::move(error);
  KVLayout layout = KVLayout::NHD;
  if (llvm::Error error = convert(toLayout(v->layout, "v->layout"), layout))
    return std::move(error);
  out.numQHeads = v->num_q_heads;
  out.numKVHeads = v->num_kv_heads;
  out.headDim = v->head_dim;
  out.ropeDim = v->rope_dim;
  out.fp8Compute = v->fp8_compute != 0;
  if (v->paged)
    out.paged =
        PagedKVFormat{kvType, v->page_size, layout, v->per_head_kv_scale != 0};
  else if (isFP8(kvType))
    out.fp8KV = FP8RowsFormat{kvType, v->per_head_kv_scale != 0};
  if (llvm::Error error = checkVariant(out, kvType))
    return std::move(error);
  return out;
}

llvm::Expected<AppendKVVariant> toVariant(const attn_append_kv_variant *v) {
  ATTN_CHECK_STRUCT(v, attn_append_kv_variant);
  AppendKVVariant out;
  if (llvm::Error error =
          convert(toScalarType(v->in_type, "v->in_type"), out.inType))
    return std::move(error);
  if (llvm::Error error =
          convert(toScalarType(v->kv_type, "v->kv_type"), out.kvType))
    return std::move(error);
  if (llvm::Error error = convert(toLayout(v->layout, "v->layout"), out.layout))
    return std::move(error);
  out.numKVHeads = v->num_kv_heads;
  out.headDim = v->head_dim;
  out.pageSize = v->page_size;
  out.perHeadKVScale = v->per_head_kv_scale != 0;
  if (llvm::Error error = checkVariant(out))
    return std::move(error);
  return out;
}

llvm::Expected<MergeStatesVariant>
toVariant(const attn_merge_states_variant *v) {
  ATTN_CHECK_STRUCT(v, attn_merge_states_variant);
  MergeStatesVariant out;
  if (llvm::Error error =
          convert(toScalarType(v->dtype, "v->dtype"), out.dtype))
    return std::move(error);
  out.numHeads = v->num_heads;
  out.headDim = v->head_dim;
  if (llvm::Error error = checkVariant(out))
    return std::move(error);
  return out;
}

llvm::Expected<MlaDecodeVariant> toVariant(const attn_mla_decode_variant *v) {
  ATTN_CHECK_STRUCT(v, attn_mla_decode_variant);
  MlaDecodeVariant out;
  if (llvm::Error error =
          convert(toScalarType(v->q_type, "v->q_type"), out.qType))
    return std::move(error);
  if (llvm::Error error =
          convert(toScalarType(v->kv_type, "v->kv_type"), out.kvType))
    return std::move(error);
  out.numQHeads = v->num_q_heads;
  out.kvLoraRank = v->kv_lora_rank;
  out.ropeDim = v->rope_dim;
  out.pageSize = v->page_size;
  out.queryLen = v->query_len;
  out.causal = v->causal != 0;
  out.scale = v->scale == 0 ? std::nullopt : std::optional<float>(v->scale);
  out.writeLse = v->write_lse != 0;
  out.batchInvariant = v->batch_invariant != 0;
  if (llvm::Error error = checkVariant(out))
    return std::move(error);
  return out;
}

llvm::Expected<runtime::PagedKVView> toView(const attn_paged_kv &c,
                                            const char *name) {
  runtime::PagedKVView view;
  std::string prefix(name);
  if (llvm::Error error = convert(
          toScalarType(c.dtype, (prefix + ".dtype").c_str()), view.dtype))
    return std::move(error);
  if (llvm::Error error = convert(
          toLayout(c.layout, (prefix + ".layout").c_str()), view.layout))
    return std::move(error);
  view.k = c.k;
  view.v = c.v;
  view.numKVHeads = c.num_kv_heads;
  view.headDim = c.head_dim;
  view.pageSize = c.page_size;
  view.numPages = c.num_pages;
  view.pageStride = c.page_stride;
  return view;
}

void setHeadTables(runtime::HeadTables &out, const attn_head_tables &t) {
  out.alibiSlopes = t.alibi_slopes;
  out.sinks = t.sinks;
  out.qScale = t.q_scale;
  for (int i = 0; i < kMaxAuxTables; ++i) {
    out.aux[i].data = t.aux[i].data;
    for (int d = 0; d < 3; ++d)
      out.aux[i].dims[d] = t.aux[i].dims[d];
  }
}

} // namespace attn::capi

extern "C" {

void attn_decode_variant_init(attn_decode_variant *v) {
  if (!v)
    return;
  ATTN_INIT(v);
  const DecodeVariant d;
  fromKnobs(d, v->knobs);
  v->q_type = toC(d.qType);
  v->kv_type = toC(d.kvType);
  v->num_q_heads = d.numQHeads;
  v->num_kv_heads = d.numKVHeads;
  v->head_dim = d.headDim;
  v->page_size = d.pageSize;
  v->layout = toC(d.layout);
  v->query_len = d.queryLen;
  v->per_head_kv_scale = d.perHeadKVScale;
}

void attn_prefill_variant_init(attn_prefill_variant *v) {
  if (!v)
    return;
  ATTN_INIT(v);
  const PrefillVariant p;
  // The fields of a paged cache default to PagedKVFormat's.
  const PagedKVFormat paged;
  fromKnobs(p, v->knobs);
  v->q_type = toC(p.qType);
  v->num_q_heads = p.numQHeads;
  v->num_kv_heads = p.numKVHeads;
  v->head_dim = p.headDim;
  v->paged = p.paged.has_value();
  v->kv_type = toC(paged.kvType);
  v->page_size = paged.pageSize;
  v->layout = toC(paged.layout);
  v->per_head_kv_scale = paged.perHeadKVScale;
  v->fp8_compute = p.fp8Compute;
  v->rope_dim = p.ropeDim;
}

void attn_append_kv_variant_init(attn_append_kv_variant *v) {
  if (!v)
    return;
  ATTN_INIT(v);
  const AppendKVVariant a;
  v->in_type = toC(a.inType);
  v->kv_type = toC(a.kvType);
  v->num_kv_heads = a.numKVHeads;
  v->head_dim = a.headDim;
  v->page_size = a.pageSize;
  v->layout = toC(a.layout);
  v->per_head_kv_scale = a.perHeadKVScale;
}

void attn_merge_states_variant_init(attn_merge_states_variant *v) {
  if (!v)
    return;
  ATTN_INIT(v);
  const MergeStatesVariant m;
  v->dtype = toC(m.dtype);
  v->num_heads = m.numHeads;
  v->head_dim = m.headDim;
}

void attn_mla_decode_variant_init(attn_mla_decode_variant *v) {
  if (!v)
    return;
  ATTN_INIT(v);
  const MlaDecodeVariant m;
  v->q_type = toC(m.qType);
  v->kv_type = toC(m.kvType);
  v->num_q_heads = m.numQHeads;
  v->kv_lora_rank = m.kvLoraRank;
  v->rope_dim = m.ropeDim;
  v->page_size = m.pageSize;
  v->query_len = m.queryLen;
  v->causal = m.causal;
  v->scale = m.scale.value_or(0.0f);
  v->write_lse = m.writeLse;
  v->batch_invariant = m.batchInvariant;
}

} // extern "C"

namespace {
/// A key of a converted variant into the caller's buffer.
template <class CVariant, class KeyFn>
attn_status writeKey(const char *function, const CVariant *v, KeyFn key,
                     char *buffer, size_t capacity, size_t *length) {
  return guard(function, [&]() -> llvm::Error {
    auto variant = toVariant(v);
    if (!variant)
      return variant.takeError();
    return writeString(key(*variant), buffer, capacity, length);
  });
}
} // namespace

extern "C" {

attn_status attn_decode_kernel_key(const attn_decode_variant *v, char *buffer,
                                   size_t capacity, size_t *length) {
  return writeKey(
      __func__, v, [](const DecodeVariant &d) { return runtime::kernelKey(d); },
      buffer, capacity, length);
}

attn_status attn_prefill_kernel_key(const attn_prefill_variant *v, char *buffer,
                                    size_t capacity, size_t *length) {
  return writeKey(
      __func__, v,
      [](const PrefillVariant &p) { return runtime::kernelKey(p); }, buffer,
      capacity, length);
}

attn_status attn_append_kv_kernel_key(const attn_append_kv_variant *v,
                                      char *buffer, size_t capacity,
                                      size_t *length) {
  return writeKey(
      __func__, v,
      [](const AppendKVVariant &a) { return runtime::kernelKey(a); }, buffer,
      capacity, length);
}

attn_status attn_merge_states_kernel_key(const attn_merge_states_variant *v,
                                         char *buffer, size_t capacity,
                                         size_t *length) {
  return writeKey(
      __func__, v,
      [](const MergeStatesVariant &m) { return runtime::kernelKey(m); }, buffer,
      capacity, length);
}

attn_status attn_mla_decode_kernel_key(const attn_mla_decode_variant *v,
                                       char *buffer, size_t capacity,
                                       size_t *length) {
  return writeKey(
      __func__, v,
      [](const MlaDecodeVariant &m) { return runtime::kernelKey(m); }, buffer,
      capacity, length);
}

attn_status attn_decode_variant_key(const attn_decode_variant *v, char *buffer,
                                    size_t capacity, size_t *length) {
  return writeKey(
      __func__, v,
      [](const DecodeVariant &d) { return runtime::variantKey(d); }, buffer,
      capacity, length);
}

attn_status attn_prefill_variant_key(const attn_prefill_variant *v,
                                     char *buffer, size_t capacity,
                                     size_t *length) {
  return writeKey(
      __func__, v,
      [](const PrefillVariant &p) { return runtime::variantKey(p); }, buffer,
      capacity, length);
}

} // extern "C"
