#!/usr/bin/env python3
"""Compares attn's prefill and decode with PyTorch's SDPA backends.

(attn's paged prefill figures from the same JSON are printed beside it.)

    python3 bench/sdpa.py ATTN_BENCH_JSON [--quick] [--flex] [--out SDPA_JSON]

ATTN_BENCH_JSON is the output of `attn-bench prefill --json` or
`attn-bench decode --json` (decode: see below). For each prefill config of its
configs this times torch.nn.functional.scaled_dot_product_attention pinned to
one backend at a time (FLASH_ATTENTION, CUDNN_ATTENTION, EFFICIENT_ATTENTION,
through torch.nn.attention.sdpa_kernel) on the same shapes: bf16, batch x seq
with every request of the same length (so the dense batch is the ragged one),
32 q heads, the config's KV heads and head dim, is_causal as the config.
Tensors are laid out [batch, seq, heads, dim] as attn's [tokens, heads, dim]
and passed as the transposed view SDPA expects.

GQA/MQA: each backend is first called with enable_gqa=True (K/V keep their
own heads); a backend that refuses it is called again with K/V heads repeated
to the q head count (repeat_interleave outside the timed region), and the
table marks that result with '*'. As of PyTorch 2.5-2.11 only the flash
backend takes enable_gqa; the repeated K/V read more memory, but prefill at
these sizes is bound by the tensor cores, not by memory.

Timing: CUDA events around single calls, median of repeats, rotating over
copies of q/k/v when one copy is smaller than 4x a 60 MB L2 (as attn-bench
does). FLOPs = 4 * batch * heads * seq^2 * dim, halved for causal. The
ceiling is the bf16 GEMM rate of torch.matmul on 8192^3 measured in the same
run.

--flex (prefill): also FlexAttention, torch.compile'd flex_attention on the
same shapes ([batch, heads, seq, dim], enable_gqa; causal as a BlockMask, so
hidden tiles are skipped), compiled once per shape (dynamic=False); its
compile time is reported too.

Decode: for each bf16 config (SDPA takes no FP8 K/V), batch requests of
`query_len` query tokens (one for plain decode) against `context` keys, no
mask, head dim 128, K/V contiguous [batch, heads, context, dim] (the layout
SDPA reads best; attn reads a paged cache), cuDNN first. Bytes per call are
attn-bench's (K and V once, plus q and out), so the percentage of the read
roof (measured by attn-bench on the same device) compares like with like; a
'*' result read group-times those bytes (K/V heads repeated).
"""

import argparse
import json
import math
import statistics
import sys
import warnings

L2_BYTES = 60 << 20
BACKENDS = ["FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION"]
SHORT = {"FLASH_ATTENTION": "flash", "CUDNN_ATTENTION": "cudnn",
         "EFFICIENT_ATTENTION": "effic"}


def time_median_ms(torch, fn, repeats, warmup=3):
    """Median of event-timed calls of fn(i), i counting up (for rotation)."""
    for i in range(warmup):
        fn(i)
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(repeats):
        start.record()
        fn(warmup + i)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def gemm_tflops(torch, repeats):
    """bf16 tensor-core rate of a large square GEMM: the practical ceiling."""
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    ms = time_median_ms(torch, lambda i: torch.matmul(a, b, out=c), repeats)
    return 2.0 * n ** 3 / (ms * 1e-3) / 1e12


def flops(cfg):
    f = 4.0 * cfg["batch"] * cfg["q_heads"] * cfg["seq"] ** 2 * cfg["head_dim"]
    return f / 2 if cfg["causal"] else f


def run_pinned(torch, backend, kinds, make_call, repeats):
    """(ms, kind, reason): the median time of the first of `kinds` whose
    call (make_call(kind), taking the rotation index) `backend` accepts, or
    (None, None, why the last refused)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    reason = ""
    with sdpa_kernel([getattr(SDPBackend, backend)]):
        for kind in kinds:
            call = make_call(kind)
            if call is None:
                reason = f"K/V heads repeated ({kind}) would not fit"
                continue
            # A refused config raises "No available kernel" after warnings
            # that say why; keep the first of those as the reason.
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    call(0)
                    torch.cuda.synchronize()
                    ok = True
                except (RuntimeError, ValueError) as err:
                    ok = False
                    reason = str(err).strip().splitlines()[0]
                    if caught:
                        reason = str(caught[0].message).strip().splitlines()[0]
            if ok:
                return time_median_ms(torch, call, repeats), kind, ""
    return None, None, reason


def sdpa_calls(torch, data, group, copies, **kwargs):
    """make_call for run_pinned over (q, k, v) copies laid out [b, h, s, d]:
    K/V heads as they are (gqa / mha) or repeated to the q heads."""
    import torch.nn.functional as F

    def make_call(kind):
        use = data
        if kind == "repeat":
            use = [(q, k.repeat_interleave(group, dim=1),
                    v.repeat_interleave(group, dim=1)) for q, k, v in data]

        def call(i):
            q, k, v = use[i % copies]
            return F.scaled_dot_product_attention(
                q, k, v, enable_gqa=(kind == "gqa"), **kwargs)
        return call
    return make_call


def bench_backend(torch, cfg, backend, repeats):
    """TFLOP/s of one backend on cfg and how K/V heads were passed; None and
    the reason when the backend cannot run the config."""
    b, s, hq = cfg["batch"], cfg["seq"], cfg["q_heads"]
    hkv, d = cfg["kv_heads"], cfg["head_dim"]
    copy_bytes = 2 * b * s * d * (2 * hq + 2 * hkv)  # q, out, k, v
    copies = max(1, min(3, math.ceil(4 * L2_BYTES / copy_bytes)))
    gen = torch.Generator(device="cuda").manual_seed(1)

    def tensor(heads):  # [batch, seq, heads, dim] viewed as [b, h, s, d]
        t = torch.randn(b, s, heads, d, device="cuda", dtype=torch.bfloat16,
                        generator=gen)
        return t.transpose(1, 2)

    data = [(tensor(hq), tensor(hkv), tensor(hkv)) for _ in range(copies)]
    kinds = ["gqa", "repeat"] if hkv != hq else ["mha"]
    ms, kind, reason = run_pinned(
        torch, backend, kinds,
        sdpa_calls(torch, data, hq // hkv, copies, is_causal=cfg["causal"]),
        repeats)
    return (None if ms is None else flops(cfg) / (ms * 1e-3) / 1e12), kind, reason


def raise_recompile_limit(torch):
    """Lets torch.compile keep one graph per shape and modifier here
    (past its default limit it would fall back to eager)."""
    import torch._dynamo
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 1024)


def bench_flex(torch, cfg, repeats):
    """(TFLOP/s, compile seconds, reason) of torch.compile'd flex_attention
    on cfg; None and the reason when it cannot run it."""
    import time
    from torch.nn.attention.flex_attention import (create_block_mask,
                                                   flex_attention)
    b, s, hq = cfg["batch"], cfg["seq"], cfg["q_heads"]
    hkv, d = cfg["kv_heads"], cfg["head_dim"]
    gen = torch.Generator(device="cuda").manual_seed(1)

    def tensor(heads):
        return torch.randn(b, heads, s, d, device="cuda", dtype=torch.bfloat16,
                           generator=gen)

    q, k, v = tensor(hq), tensor(hkv), tensor(hkv)
    start = time.perf_counter()
    block_mask = None
    if cfg["causal"]:
        block_mask = create_block_mask(lambda b_, h_, qi, ki: qi >= ki, None,
                                       None, s, s, device="cuda")
    compiled = torch.compile(flex_attention, dynamic=False)

    def call(i):
        return compiled(q, k, v, block_mask=block_mask, enable_gqa=hkv != hq)

    try:
        call(0)
        torch.cuda.synchronize()
    except Exception as err:  # a refused shape: report why
        return None, None, str(err).strip().splitlines()[0][:200]
    compile_s = time.perf_counter() - start
    ms = time_median_ms(torch, call, repeats)
    return flops(cfg) / (ms * 1e-3) / 1e12, compile_s, ""


def bench_decode_backend(torch, cfg, backend, repeats):
    """(us, how K/V heads were passed, reason) of one backend on decode
    config cfg (bf16, head dim 128); us None when it cannot run it."""
    b, ctx, ql = cfg["batch"], cfg["context"], cfg.get("query_len", 1)
    hq, hkv, d = cfg["q_heads"], cfg["kv_heads"], 128
    kv_bytes = 2 * b * hkv * ctx * d * 2
    copies = max(1, min(3, math.ceil(4 * L2_BYTES / kv_bytes)))
    gen = torch.Generator(device="cuda").manual_seed(1)

    def tensor(heads, tokens):
        return torch.randn(b, heads, tokens, d, device="cuda",
                           dtype=torch.bfloat16, generator=gen)

    data = [(tensor(hq, ql), tensor(hkv, ctx), tensor(hkv, ctx))
            for _ in range(copies)]
    calls = sdpa_calls(torch, data, hq // hkv, copies)
    fits = kv_bytes * copies * hq // hkv <= (24 << 30)
    kinds = ["gqa", "repeat"] if hkv != hq else ["mha"]
    ms, kind, reason = run_pinned(
        torch, backend, kinds,
        lambda kind: calls(kind) if kind != "repeat" or fits else None,
        repeats)
    return (None if ms is None else 1e3 * ms), kind, reason


def report_failures(failures):
    """One line per backend that refused some config, with its first reason."""
    for backend, reason in failures.items():
        print(f"{SHORT.get(backend, backend.lower())}: some configs did not run; first reason: "
              f"{reason[:200]}")


def write_out(path, torch, rows, **ceilings):
    """The rows and the run's ceilings as JSON at `path` (if given)."""
    if path:
        with open(path, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(),
                       "torch": torch.__version__, **ceilings, "rows": rows},
                      f, indent=1)


def fmt(x, spec="{:.1f}"):
    return "-" if x is None else spec.format(x)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("attn_json",
                        help="output of attn-bench prefill --json or decode --json")
    parser.add_argument("--quick", action="store_true",
                        help="fewer repeats (and the GEMM timed fewer times)")
    parser.add_argument("--flex", action="store_true",
                        help="prefill: also FlexAttention (torch.compile'd)")
    parser.add_argument("--out", help="also write the results as JSON here")
    args = parser.parse_args()

    try:
        with open(args.attn_json) as f:
            attn = json.load(f)
        if "decode" in attn:
            return main_decode(attn, args)
        configs = attn["prefill"]
    except (OSError, ValueError, KeyError) as err:
        sys.exit(f"sdpa.py: cannot read attn-bench prefill or decode JSON "
                 f"'{args.attn_json}': {err}")
    if not configs:
        sys.exit(f"sdpa.py: '{args.attn_json}' holds no prefill configs")

    import torch
    if not torch.cuda.is_available():
        sys.exit("sdpa.py: no CUDA device visible to torch")
    repeats = 5 if args.quick else 15
    gemm = gemm_tflops(torch, repeats)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"cuDNN {torch.backends.cudnn.version()}; attn-bench on "
          f"{attn.get('arch')}, {attn.get('sms')} SMs")
    print(f"bf16 GEMM 8192^3 (torch.matmul): {gemm:.1f} TFLOP/s\n")

    if args.flex:
        raise_recompile_limit(torch)
    rows, failures = [], {}
    for cfg in configs:
        row = {"config": cfg, "attn_tflops": cfg["tflops"], "backends": {}}
        for backend in BACKENDS:
            tflops, kind, reason = bench_backend(torch, cfg, backend, repeats)
            row["backends"][backend] = {"tflops": tflops, "kv_heads_as": kind}
            if tflops is None:
                failures.setdefault(backend, reason)
        if args.flex:
            tflops, compile_s, reason = bench_flex(torch, cfg, repeats)
            row["flex"] = {"tflops": tflops, "compile_s": compile_s}
            if tflops is None:
                failures.setdefault("FLEX", reason)
        rows.append(row)
        torch.cuda.empty_cache()

    head = (f"{'batch x seq':<12} {'heads':<6} {'dim':>3} {'mask':<6} "
            f"{'attn':>6} {'%gemm':>6} {'paged':>6} {'xragd':>6} {'pg_fp8':>6}")
    for backend in BACKENDS:
        name = SHORT[backend]
        head += f" {name:>7} {'x' + name:>7}"
    if args.flex:
        head += f" {'flex':>7} {'xflex':>7} {'flex_s':>6}"
    print("TFLOP/s; xNAME = attn / NAME; * = K/V heads repeated (no enable_gqa);\n"
          "paged / pg_fp8 = attn's paged prefill over a page-16 bf16 / e4m3 cache, "
          "xragd = paged / ragged")
    print(head)
    for row in rows:
        c = row["config"]
        line = (f"{str(c['batch']) + ' x ' + str(c['seq']):<12} "
                f"{str(c['q_heads']) + '/' + str(c['kv_heads']):<6} "
                f"{c['head_dim']:>3} {'causal' if c['causal'] else 'full':<6} "
                f"{row['attn_tflops']:>6.1f} {100 * row['attn_tflops'] / gemm:>5.1f}%")
        paged = c.get("paged_p16_tflops")
        paged_fp8 = c.get("paged_p16_e4m3_tflops")
        line += (f" {fmt(paged):>6} "
                 f"{fmt(paged and paged / row['attn_tflops'], '{:.2f}'):>6} "
                 f"{fmt(paged_fp8):>6}")
        for backend in BACKENDS:
            r = row["backends"][backend]
            mark = "*" if r["kv_heads_as"] == "repeat" else ""
            ratio = None if r["tflops"] is None else row["attn_tflops"] / r["tflops"]
            line += f" {fmt(r['tflops']) + mark:>7} {fmt(ratio, '{:.2f}'):>7}"
        if args.flex:
            r = row["flex"]
            ratio = None if r["tflops"] is None else row["attn_tflops"] / r["tflops"]
            line += (f" {fmt(r['tflops']):>7} {fmt(ratio, '{:.2f}'):>7} "
                     f"{fmt(r['compile_s']):>6}")
        print(line)
    report_failures(failures)

    write_out(args.out, torch, rows, gemm_tflops=gemm)


def main_decode(attn, args):
    roof = attn["read_bandwidth_gbps"]
    configs = [c for c in attn["decode"] if c["kv"] == "bf16"]
    if not configs:
        sys.exit(f"sdpa.py: '{args.attn_json}' holds no bf16 decode configs")
    import torch
    if not torch.cuda.is_available():
        sys.exit("sdpa.py: no CUDA device visible to torch")
    repeats = 7 if args.quick else 21
    order = ["CUDNN_ATTENTION", "FLASH_ATTENTION", "EFFICIENT_ATTENTION"]
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"cuDNN {torch.backends.cudnn.version()}; read roof {roof:.1f} GB/s "
          "(attn-bench, same device)")
    print("% of the read roof at attn-bench's bytes per call; * = K/V heads "
          "repeated (no enable_gqa: group-times the bytes)")
    head = (f"{'heads':<6} {'batch':>5} {'context':>7} {'ql':>2} "
            f"{'attn_us':>8} {'attn%':>6}")
    for backend in order:
        head += f" {SHORT[backend] + '_us':>9} {SHORT[backend] + '%':>7}"
    print(head)
    rows, failures = [], {}
    for cfg in configs:
        row = {"config": cfg, "backends": {}}
        line = (f"{str(cfg['q_heads']) + '/' + str(cfg['kv_heads']):<6} "
                f"{cfg['batch']:>5} {cfg['context']:>7} "
                f"{cfg.get('query_len', 1):>2} {cfg['time_us']:>8.1f} "
                f"{100 * cfg['fraction_of_read']:>5.1f}%")
        for backend in order:
            us, kind, reason = bench_decode_backend(torch, cfg, backend, repeats)
            frac = (None if us is None
                    else cfg["bytes"] / (us * 1e-6) / 1e9 / roof)
            row["backends"][backend] = {"time_us": us, "fraction_of_read": frac,
                                        "kv_heads_as": kind}
            if us is None:
                failures.setdefault(backend, reason)
            mark = "*" if kind == "repeat" else ""
            line += (f" {fmt(us):>9} "
                     f"{fmt(None if frac is None else 100 * frac) + mark:>7}")
        rows.append(row)
        print(line, flush=True)
        torch.cuda.empty_cache()
    report_failures(failures)
    write_out(args.out, torch, rows, read_bandwidth_gbps=roof)


if __name__ == "__main__":
    main()
