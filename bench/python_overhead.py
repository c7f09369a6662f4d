#!/usr/bin/env python3
"""Host time per call of attn's Python wrappers, against torch's own launch.

Times N back-to-back calls on the host (no synchronization inside the loop,
tiny problems so the GPU never holds the host back) of:
  - BatchDecodeWithPagedKVCacheWrapper.run (checks + the C ABI's run),
  - the same run under a captured CUDA graph (graph.replay()),
  - plan() of a 64-request batch, its index arrays on the device (one read
    back) and, as FlashInfer's and vLLM's callers pass them, indptr and
    last_page_len on the host with the page ids on the device,
  - BatchPrefillWithPagedKVCacheWrapper.run (16 query rows) and its plan()
    of 64 requests (the same two ways),
  - torch's cheapest kernel launch (x.add_(1) on a one-element tensor),
and prints microseconds per call (median of 5 repetitions). The C++ run()
and the driver's empty launch are in `attn-bench jit` (docs/performance.md).

    python3 bench/python_overhead.py [--json out.json] [--profile]

--profile: also prints where the host time of decode run() and of plan()
of 64 requests (host indptr) goes (cProfile, top functions by own time).
"""
import argparse
import json
import statistics
import sys
import time

import torch

import attn


def per_call_us(fn, calls=2000, reps=5):
    fn()
    torch.cuda.synchronize()
    res = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        res.append((time.perf_counter() - t) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(res)


def profile(what, fn, calls):
    """Prints the functions that take the most own time over ``calls``."""
    import cProfile
    import pstats
    fn()
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    print("--- %s: %d calls" % (what, calls))
    pstats.Stats(prof).sort_stats("tottime").print_stats(22)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("python_overhead: no CUDA GPU; nothing run", file=sys.stderr)
        return 2
    dev = "cuda"
    hq, hkv, d, page = 32, 8, 128, 16
    batch, pages_per_req = 1, 1
    cache = torch.randn(batch * pages_per_req, 2, page, hkv, d, device=dev, dtype=torch.bfloat16)
    indptr = torch.tensor([0, 1], dtype=torch.int32, device=dev)
    indices = torch.tensor([0], dtype=torch.int32, device=dev)
    last = torch.tensor([page], dtype=torch.int32, device=dev)
    q = torch.randn(batch, hq, d, device=dev, dtype=torch.bfloat16)
    ws = torch.empty(16 << 20, dtype=torch.uint8, device=dev)
    w = attn.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD")
    w.plan(indptr, indices, last, hq, hkv, d, page, q_data_type=torch.bfloat16,
           kv_data_type=torch.bfloat16)
    out = torch.empty_like(q)
    figures = {}
    figures["decode_run_us"] = per_call_us(lambda: w.run(q, cache, out=out))
    figures["decode_run_alloc_out_us"] = per_call_us(lambda: w.run(q, cache))

    # A graph of one run, replayed.
    gw = attn.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_cuda_graph=True,
                                                 paged_kv_indptr_buffer=indptr.clone(),
                                                 paged_kv_indices_buffer=indices.clone(),
                                                 paged_kv_last_page_len_buffer=last.clone())
    gw.plan(indptr, indices, last, hq, hkv, d, page, q_data_type=torch.bfloat16,
            kv_data_type=torch.bfloat16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        gw.run(q, cache, out=out)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gw.run(q, cache, out=out)
    figures["graph_replay_us"] = per_call_us(graph.replay)

    # plan() of 64 requests of 16 pages each.
    n = 64
    cache64 = torch.empty(n * 16, 2, page, hkv, d, device=dev, dtype=torch.bfloat16)
    indptr64 = torch.arange(n + 1, dtype=torch.int32, device=dev) * 16
    indices64 = torch.arange(n * 16, dtype=torch.int32, device=dev)
    last64 = torch.full((n,), page, dtype=torch.int32, device=dev)
    del cache64
    figures["decode_plan_64_us"] = per_call_us(
        lambda: w.plan(indptr64, indices64, last64, hq, hkv, d, page,
                       q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16), calls=200)
    indptr64_h, last64_h = indptr64.cpu(), last64.cpu()
    figures["decode_plan_64_host_indptr_us"] = per_call_us(
        lambda: w.plan(indptr64_h, indices64, last64_h, hq, hkv, d, page,
                       q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16), calls=200)

    # Paged prefill: 16 query rows over the one page; plan() of 64 one-row requests.
    pw = attn.BatchPrefillWithPagedKVCacheWrapper(ws, "NHD")
    qo = torch.tensor([0, page], dtype=torch.int32, device=dev)
    pw.plan(qo, indptr, indices, last, hq, hkv, d, page, causal=True,
            q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
    q16 = torch.randn(page, hq, d, device=dev, dtype=torch.bfloat16)
    out16 = torch.empty_like(q16)
    figures["prefill_run_us"] = per_call_us(lambda: pw.run(q16, cache, out=out16))
    qo64 = torch.arange(n + 1, dtype=torch.int32, device=dev)
    figures["prefill_plan_64_us"] = per_call_us(
        lambda: pw.plan(qo64, indptr64, indices64, last64, hq, hkv, d, page, causal=True,
                        q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16), calls=200)
    qo64_h = qo64.cpu()
    figures["prefill_plan_64_host_indptr_us"] = per_call_us(
        lambda: pw.plan(qo64_h, indptr64_h, indices64, last64_h, hq, hkv, d, page, causal=True,
                        q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16), calls=200)

    if args.profile:
        profile("decode plan(), 64 requests, host indptr",
                lambda: w.plan(indptr64_h, indices64, last64_h, hq, hkv, d, page,
                               q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16), 500)
        w.plan(indptr, indices, last, hq, hkv, d, page, q_data_type=torch.bfloat16,
               kv_data_type=torch.bfloat16)
        profile("decode run()", lambda: w.run(q, cache, out=out), 5000)
        profile("paged prefill plan(), 64 requests, host indptr",
                lambda: pw.plan(qo64_h, indptr64_h, indices64, last64_h, hq, hkv, d, page,
                                causal=True, q_data_type=torch.bfloat16,
                                kv_data_type=torch.bfloat16), 500)

    x = torch.zeros(1, device=dev)
    figures["torch_add_us"] = per_call_us(lambda: x.add_(1))
    for k, v in figures.items():
        print(f"{k}: {v:.2f} us")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                       **figures}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
