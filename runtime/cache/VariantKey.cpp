//===- VariantKey.cpp - names of variants for lookups ---------------------===//
#include "attn/runtime/cache/VariantKey.h"

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
  return s ? fmt::format(" schedule={},{},{},{},{}{}", s->warps, s->blockM,
                         s->blockN, s->stages, toString(s->mma),
                         s->packGqa ? ",pack_gqa" : "")
           : "";
}

/// The knobs that choose the kernel: the kind, flags, and whether each
/// runtime value (window, soft-cap) is on; the scale never changes it.
std::string knobsKey(const AttentionKnobs &knobs) {
  std::string key;
  forEachKnob(
      [&](const char *name, const auto &knob) {
        using T = std::decay_t<decltype(knob)>;
        if constexpr (std::is_same_v<T, AttentionKind>)
          key += fmt::format(" kind={}", toString(knob));
        else if constexpr (std::is_same_v<T, bool>)
          key += fmt::format(" {}={}", name, flag(knob));
        else if constexpr (std::is_same_v<T, std::string>)
          key += knob.empty()
                     ? ""
                     : fmt::format(" {}={{{}}}", name, regionKey(knob));
        else if (std::string_view(name) != "scale")
          key += fmt::format(" {}={}", name, flag(knob.has_value()));
      },
      knobs);
  return key;
}

/// The runtime values of the knobs, exactly.
std::string valuesKey(const AttentionKnobs &knobs) {
  return fmt::format(" | scale={} softcap={} window={}", valueOf(knobs.scale),
                     valueOf(knobs.softcap), valueOf(knobs.windowLeft));
}

} // namespace

std::string regionKey(std::string_view text) {
  std::string key;
  bool space = false; // a white space run (or comment) is pending
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i < text.size() && text[i] != '\n')
        ++i;
      space = true;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
        c == '\v') {
      space = true;
      continue;
    }
    if (space && !key.empty())
      key += ' ';
    space = false;
    key += c;
    if (c == '"') // a string literal, kept as written
      for (++i; i < text.size(); ++i) {
        key += text[i];
        if (text[i] == '\\' && i + 1 < text.size())
          key += text[++i];
        else if (text[i] == '"')
          break;
      }
  }
  return key;
}

std::string kernelKey(const DecodeVariant &v) {
  return fmt::format("decode q={} kv={} heads={}/{} dim={} page={} layout={} "
                     "qlen={} per_head_kv_scale={}{}{}",
                     toString(v.qType), toString(v.kvType), v.numQHeads,
                     v.numKVHeads, v.headDim, v.pageSize, toString(v.layout),
                     v.queryLen, flag(v.perHeadKVScale), knobsKey(v),
                     scheduleOf(v.schedule));
}

std::string kernelKey(const PrefillVariant &v) {
  std::string paged = "ragged";
  if (v.paged)
    paged =
        fmt::format("paged kv={} page={} layout={} per_head_kv_scale={}",
                    toString(v.paged->kvType), v.paged->pageSize,
                    toString(v.paged->layout), flag(v.paged->perHeadKVScale));
  else if (v.fp8KV)
    paged =
        fmt::format("ragged kv={} per_head_kv_scale={}",
                    toString(v.fp8KV->kvType), flag(v.fp8KV->perHeadKVScale));
  if (v.fp8Compute)
    paged += " fp8mma=1";
  // MLA's q/k dims past v's; absent when 0, so other keys stay as they were.
  std::string rope = v.ropeDim ? fmt::format(" rope={}", v.ropeDim) : "";
  return fmt::format("prefill {} q={} heads={}/{} dim={}{}{}{}", paged,
                     toString(v.qType), v.numQHeads, v.numKVHeads, v.headDim,
                     rope, knobsKey(v), scheduleOf(v.schedule));
}

std::string kernelKey(const AppendKVVariant &v) {
  return fmt::format("append_kv in={} kv={} kv_heads={} dim={} page={} "
                     "layout={} per_head_kv_scale={}",
                     toString(v.inType), toString(v.kvType), v.numKVHeads,
                     v.headDim, v.pageSize, toString(v.layout),
                     flag(v.perHeadKVScale));
}

std::string variantKey(const DecodeVariant &v) {
  return kernelKey(v) + valuesKey(v);
}

std::string variantKey(const PrefillVariant &v) {
  return kernelKey(v) + valuesKey(v);
}

std::string variantKey(const AppendKVVariant &v) { return kernelKey(v); }

std::string kernelKey(const MergeStatesVariant &v) {
  return fmt::format("merge_states dtype={} heads={} dim={}", toString(v.dtype),
                     v.numHeads, v.headDim);
}

std::string variantKey(const MergeStatesVariant &v) { return kernelKey(v); }

std::string kernelKey(const MlaDecodeVariant &v) {
  return fmt::format("mla_decode q={} kv={} heads={} rank={} rope={} page={} "
                     "query_len={} causal={} write_lse={} batch_invariant={}{}",
                     toString(v.qType), toString(v.kvType), v.numQHeads,
                     v.kvLoraRank, v.ropeDim, v.pageSize, v.queryLen,
                     flag(v.causal), flag(v.writeLse), flag(v.batchInvariant),
                     scheduleOf(v.schedule));
}

std::string variantKey(const MlaDecodeVariant &v) {
  return kernelKey(v) + fmt::format(" | scale={}", valueOf(v.scale));
}

} // namespace attn::runtime
