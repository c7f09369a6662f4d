//===- VariantKey.cpp - names of variants for lookups ---------------------===//
#include "attn/runtime/VariantKey.h"

#include <fmt/format.h>

namespace attn::runtime {

namespace {

int flag(bool b) { return b ? 1 : 0; }

/// An optional runtime value, exactly (floats in hex).
template <class T> std::string valueOf(const std::optional<T> &value) {
  if (!value)
    return "none";
  if constexpr (std::is_floating_point_v<T>)
    return fmt::format("{:a}", *value);
  else
    return std::to_string(*value);
}

std::string scheduleOf(const std::optional<DecodeSchedule> &s) {
  return s ? fmt::format(" schedule={},{},{},{},{}", s->warps, s->stages,
                         s->rowTiles, s->minChunkTokens, s->ctasPerSM)
           : "";
}

std::string scheduleOf(const std::optional<PrefillSchedule> &s) {
  return s ? fmt::format(" schedule={},{},{},{},{}", s->warps, s->blockM,
                         s->blockN, s->stages, toString(s->mma))
           : "";
}

} // namespace

std::string kernelKey(const DecodeVariant &v) {
  return fmt::format(
      "decode q={} kv={} heads={}/{} dim={} page={} layout={} qlen={} causal={} "
      "cross={} window={} softcap={} alibi={} headscale={} lse={}{}",
      toString(v.qType), toString(v.kvType), v.numQHeads, v.numKVHeads,
      v.headDim, v.pageSize, toString(v.layout), v.queryLen, flag(v.causal),
      flag(v.crossAttention), flag(v.windowLeft.has_value()),
      flag(v.softcap.has_value()), flag(v.alibi), flag(v.perHeadKVScale),
      flag(v.writeLse), scheduleOf(v.schedule));
}

std::string kernelKey(const PrefillVariant &v) {
  std::string paged = "ragged";
  if (v.paged)
    paged = fmt::format("paged kv={} page={} layout={} headscale={}",
                        toString(v.paged->kvType), v.paged->pageSize,
                        toString(v.paged->layout), flag(v.paged->perHeadKVScale));
  return fmt::format(
      "prefill {} q={} heads={}/{} dim={} causal={} cross={} encoder={} "
      "window={} softcap={} alibi={} lse={}{}",
      paged, toString(v.qType), v.numQHeads, v.numKVHeads, v.headDim,
      flag(v.causal), flag(v.crossAttention), flag(v.encoder),
      flag(v.windowLeft.has_value()), flag(v.softcap.has_value()),
      flag(v.alibi), flag(v.writeLse), scheduleOf(v.schedule));
}

std::string kernelKey(const AppendKVVariant &v) {
  return fmt::format("append_kv in={} kv={} kv_heads={} dim={} page={} "
                     "layout={} headscale={}",
                     toString(v.inType), toString(v.kvType), v.numKVHeads,
                     v.headDim, v.pageSize, toString(v.layout),
                     flag(v.perHeadKVScale));
}

std::string variantKey(const DecodeVariant &v) {
  return fmt::format("{} | scale={} softcap={} window={}", kernelKey(v),
                     valueOf(v.scale), valueOf(v.softcap), valueOf(v.windowLeft));
}

std::string variantKey(const PrefillVariant &v) {
  return fmt::format("{} | scale={} softcap={} window={}", kernelKey(v),
                     valueOf(v.scale), valueOf(v.softcap), valueOf(v.windowLeft));
}

std::string variantKey(const AppendKVVariant &v) { return kernelKey(v); }

} // namespace attn::runtime
