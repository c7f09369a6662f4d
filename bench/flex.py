#!/usr/bin/env python3
"""Compares attn's score_mod / mask_mod variants with FlexAttention.

    python3 bench/flex.py ATTN_MODIFIERS_JSON [--quick] [--only TEXT]
                          [--out JSON]

ATTN_MODIFIERS_JSON is the output of `attn-bench modifiers --json` (bf16,
32 q heads over 8 KV heads, head dim 128): causal prefill of one 8k or 32k
request, and decode of 1 or 16 requests of one query token over 32k keys.
For each of its rows this times torch.compile'd flex_attention with the same
modifier on the same shape, in the same process:

  causal                 the causal mask (a BlockMask: hidden tiles skipped)
  softcap, *_region      30 * tanh(score / 30), causal
  alibi, alibi_region    score - slope_h * |k - q| (slopes 2^(-8 (h + 1) / 32)),
                         causal
  chunked_local_region   causal within 8192-token chunks (Llama 4's
                         attention_chunk; a BlockMask)
  t5_bias_region         score + bias[h, bucket(q - k)], T5's causal buckets
                         (exact below 16, logarithmic to 128), causal
  window_8192            decode's floor for chunked local in attn-bench; here
                         the last 8192 keys

Decode: the query token sits at position context - 1 (it sees every key; the
masks above are evaluated at that position). flex_attention is given q of
[batch, 32, query tokens, 128] and K/V of [batch, 8, keys, 128] with
enable_gqa. Scores are scaled by 1 / sqrt(128) before the modifier in both.

Each variant is compiled once per shape (torch.compile, dynamic=False); the
first call's time (compile and autotune included) is reported as `compile_s`,
attn's JIT time is in `attn-bench jit`. Dynamo's recompile limit is raised so
that the many shapes and modifiers here are never run eagerly. Timing: CUDA
events around single calls, median of repeats.
"""

import argparse
import json
import math
import sys
import time

from sdpa import raise_recompile_limit, time_median_ms  # bench/, beside this script

HQ, HKV, D = 32, 8, 128
CHUNK = 8192


def parse_shape(shape):
    """'1x32768 32/8 d128' -> (batch, tokens)."""
    dims = shape.split()[0]
    batch, tokens = dims.split("x")
    return int(batch), int(tokens)


def t5_table(torch):
    """attn-bench's T5 bias table: head h, bucket b holds (b - 16) / 64 -
    h / 256."""
    b = torch.arange(32, device="cuda", dtype=torch.float32)
    h = torch.arange(HQ, device="cuda", dtype=torch.float32)
    return (b[None, :] - 16) / 64 - h[:, None] / 256


def modifiers(torch, variant, q_offset, slopes, t5):
    """(score_mod, mask_mod) of attn-bench's variant; positions of queries
    are q_idx + q_offset (decode: the last position)."""
    def causal(b, h, q_idx, kv_idx):
        return q_idx + q_offset >= kv_idx

    def softcap(score, b, h, q_idx, kv_idx):
        return 30.0 * torch.tanh(score / 30.0)

    def alibi(score, b, h, q_idx, kv_idx):
        return score - slopes[h] * (kv_idx - q_idx - q_offset).abs()

    def t5_bias(score, b, h, q_idx, kv_idx):
        n = (q_idx + q_offset - kv_idx).clamp(min=0)
        far = 16 + (torch.log(n.float() / 16) / math.log(8) * 16).to(
            torch.int32)
        bucket = torch.where(n < 16, n, far.clamp(max=31))
        return score + t5[h, bucket]

    def chunked(b, h, q_idx, kv_idx):
        q = q_idx + q_offset
        return (q >= kv_idx) & (q // CHUNK == kv_idx // CHUNK)

    def window(b, h, q_idx, kv_idx):
        q = q_idx + q_offset
        return (q >= kv_idx) & (q - kv_idx < CHUNK)

    if variant == "causal":
        return None, causal
    if variant.startswith("softcap"):
        return softcap, causal
    if variant.startswith("alibi"):
        return alibi, causal
    if variant == "chunked_local_region":
        return None, chunked
    if variant == "t5_bias_region":
        return t5_bias, causal
    if variant == "window_8192":
        return None, window
    return None, None


def bench_row(torch, flex, create_block_mask, row, repeats):
    """(ms, compile_s, reason) of flex_attention on one attn-bench row."""
    batch, tokens = parse_shape(row["shape"])
    decode = row["call"] == "decode"
    q_len = 1 if decode else tokens
    q_offset = tokens - 1 if decode else 0
    slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / HQ) for h in range(HQ)],
                          device="cuda", dtype=torch.float32)
    score_mod, mask_mod = modifiers(torch, row["variant"], q_offset, slopes,
                                    t5_table(torch))
    if mask_mod is None:
        return None, None, f"no FlexAttention form of {row['variant']}"
    gen = torch.Generator(device="cuda").manual_seed(1)

    def tensor(heads, length):
        return torch.randn(batch, heads, length, D, device="cuda",
                           dtype=torch.bfloat16, generator=gen)

    q, k, v = tensor(HQ, q_len), tensor(HKV, tokens), tensor(HKV, tokens)
    start = time.perf_counter()
    block_mask = create_block_mask(mask_mod, None, None, q_len, tokens,
                                   device="cuda")
    compiled = torch.compile(flex, dynamic=False)

    def call():
        return compiled(q, k, v, score_mod=score_mod, block_mask=block_mask,
                        scale=1.0 / math.sqrt(D), enable_gqa=True)

    try:
        call()
        torch.cuda.synchronize()
    except Exception as err:  # a refused shape or modifier: report why
        return None, None, str(err).strip().splitlines()[0][:200]
    compile_s = time.perf_counter() - start
    return time_median_ms(torch, lambda i: call(), repeats), compile_s, ""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("attn_json", help="output of attn-bench modifiers --json")
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--only", default="",
                        help="only rows whose call and shape contain this "
                        "text, e.g. 'decode 16x' (each variant compiles per "
                        "shape: about 10-60 s each)")
    parser.add_argument("--out", help="also write the results as JSON here")
    args = parser.parse_args()
    try:
        with open(args.attn_json) as f:
            rows = json.load(f)
        rows = [r for r in rows if "shape" in r and "variant" in r and
                args.only in f"{r['call']} {r['shape']}"]
    except (OSError, ValueError) as err:
        sys.exit(f"flex.py: cannot read attn-bench modifiers JSON "
                 f"'{args.attn_json}': {err}")
    if not rows:
        sys.exit(f"flex.py: '{args.attn_json}' holds no modifier rows")

    import torch
    if not torch.cuda.is_available():
        sys.exit("flex.py: no CUDA device visible to torch")
    from torch.nn.attention.flex_attention import (create_block_mask,
                                                   flex_attention)
    raise_recompile_limit(torch)
    repeats = 7 if args.quick else 21
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; "
          "attn from attn-bench modifiers (same device)")
    print(f"{'call':<8} {'shape':<20} {'variant':<22} {'attn_ms':>9} "
          f"{'flex_ms':>9} {'flex/attn':>9} {'compile_s':>9}")
    results = []
    for row in rows:
        ms, compile_s, reason = bench_row(torch, flex_attention,
                                          create_block_mask, row, repeats)
        results.append({**row, "flex_ms": ms, "flex_compile_s": compile_s,
                        "flex_reason": reason})
        ratio = "-" if ms is None else f"{ms / row['ms']:.2f}"
        print(f"{row['call']:<8} {row['shape']:<20} {row['variant']:<22} "
              f"{row['ms']:>9.4f} {'-' if ms is None else f'{ms:.4f}':>9} "
              f"{ratio:>9} {'-' if compile_s is None else f'{compile_s:.1f}':>9}"
              + (f"  ({reason})" if reason else ""), flush=True)
        torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(),
                       "torch": torch.__version__, "rows": results}, f,
                      indent=1)


if __name__ == "__main__":
    main()
