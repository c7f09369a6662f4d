#!/usr/bin/env python3
"""Context-parallel decode over GPUs with attn: a long context's KV cache is
split into contiguous shards, one per GPU; each GPU decodes the batch's
queries against its shard (output and LSE), the partial states are
all-gathered through torch.distributed (NCCL), and attn.merge_states combines
them. The result must equal one GPU decoding the whole context.

    torchrun --nproc-per-node 2 examples/python/context_parallel.py \
        --batch 1 --context 1048576
    python3 examples/python/context_parallel.py --simulate 2   # one GPU

--simulate N runs the same shards one after another on one GPU (no NCCL), to
check the arithmetic where only one GPU exists. Prints, per configuration,
the error against the single-GPU result and the time per decode step of one
GPU (whole context) against the sharded step (decode + all-gather + merge).

NCCL's NVLink multicast (NVLS) stays off (NCCL_NVLS_ENABLE=0): on a shared
host it can take GPUs out of service.
"""
import argparse
import json
import math
import os
import sys

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

import torch  # noqa: E402

import attn  # noqa: E402


def make_cache(batch, tokens, kv_heads, head_dim, page_size, seed, device):
    """A paged cache (FlashInfer's NHD layout) holding `tokens` random keys
    and values per request, pages in order."""
    g = torch.Generator(device=device).manual_seed(seed)
    pages = math.ceil(tokens / page_size)
    cache = torch.randn(batch * pages, 2, page_size, kv_heads, head_dim, generator=g,
                        device=device, dtype=torch.bfloat16)
    indptr = torch.arange(batch + 1, dtype=torch.int32, device=device) * pages
    indices = torch.arange(batch * pages, dtype=torch.int32, device=device)
    last = torch.full((batch,), tokens - (pages - 1) * page_size, dtype=torch.int32,
                      device=device)
    return cache, indptr, indices, last


def decoder(args, cache_parts, device):
    workspace = torch.empty(128 << 20, dtype=torch.uint8, device=device)
    w = attn.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD")
    cache, indptr, indices, last = cache_parts
    w.plan(indptr, indices, last, args.q_heads, args.kv_heads, args.head_dim, args.page_size,
           q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
    return lambda q: w.run(q, cache, return_lse=True)


def bench(fn, iters):
    """Median milliseconds of fn() over iters runs (CUDA events)."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def shard_tokens(context, parts, page_size):
    """Tokens of each shard: equal, whole pages, the rest to the last."""
    per = (context // parts) // page_size * page_size
    return [per] * (parts - 1) + [context - per * (parts - 1)]


def run_config(args, batch, context, rank, world, group):
    device = torch.device("cuda", torch.cuda.current_device())
    parts = args.simulate or world
    lens = shard_tokens(context, parts, args.page_size)
    g = torch.Generator(device=device).manual_seed(7)
    q = torch.randn(batch, args.q_heads, args.head_dim, generator=g, device=device,
                    dtype=torch.bfloat16)
    # Shard r's keys are tokens [sum(lens[:r]), ...) of the context: seeds per shard.
    mine = range(parts) if args.simulate else [rank]
    shards = {r: make_cache(batch, lens[r], args.kv_heads, args.head_dim, args.page_size,
                            100 + r, device) for r in mine}
    runs = {r: decoder(args, shards[r], device) for r in mine}

    def gather(o, s):
        """Every rank's (output, LSE) as merge_states takes them: [batch,
        ranks, ...]. One all-gather of both as bytes (each NCCL call costs
        its latency), then one reorder each."""
        nv = o.numel() * o.element_size()
        packed = torch.cat([o.reshape(-1).view(torch.uint8), s.reshape(-1).view(torch.uint8)])
        every = torch.empty(world, packed.numel(), dtype=torch.uint8, device=device)
        torch.distributed.all_gather_into_tensor(every, packed, group=group)
        v = every[:, :nv].contiguous().view(o.dtype).view(world, *o.shape)
        lse = every[:, nv:].contiguous().view(s.dtype).view(world, *s.shape)
        return v.transpose(0, 1).contiguous(), lse.transpose(0, 1).contiguous()

    def gather_separately(o, s):
        """The same with one all-gather per tensor (the A/B of gather)."""
        vs = [torch.empty_like(o) for _ in range(world)]
        ss = [torch.empty_like(s) for _ in range(world)]
        torch.distributed.all_gather(vs, o, group=group)
        torch.distributed.all_gather(ss, s, group=group)
        return torch.stack(vs, 1), torch.stack(ss, 1)

    def partial_states(gather_fn=gather):
        if args.simulate:
            outs = [runs[r](q) for r in range(parts)]
            return torch.stack([o for o, _ in outs], 1), torch.stack([s for _, s in outs], 1)
        return gather_fn(*runs[rank](q))

    def sharded_step(gather_fn=gather):
        return attn.merge_states(*partial_states(gather_fn))

    out, lse = sharded_step()
    result = {"batch": batch, "context": context, "shards": parts}
    t_sharded = bench(sharded_step, args.iters)
    if not args.simulate:
        result["sharded_separately_ms"] = bench(lambda: sharded_step(gather_separately),
                                                args.iters)
    # Where the sharded step's time goes: this rank's decode alone, the
    # gather of every rank's states, and the merge.
    o_mine, s_mine = runs[rank if not args.simulate else 0](q)
    t_decode = bench(lambda: runs[rank if not args.simulate else 0](q), args.iters)
    states = partial_states()
    t_merge = bench(lambda: attn.merge_states(*states), args.iters)
    if not args.simulate:
        result["gather_ms"] = bench(lambda: gather(o_mine, s_mine), args.iters)
        result["gather_separately_ms"] = bench(lambda: gather_separately(o_mine, s_mine),
                                               args.iters)
    result.update({"shard_decode_ms": t_decode, "merge_ms": t_merge})
    if rank == 0:
        # The whole context on one GPU: the shards' pages back to back, per
        # request (so the same keys in the same order).
        full = [shards[r] if r in shards else make_cache(batch, lens[r], args.kv_heads,
                                                         args.head_dim, args.page_size,
                                                         100 + r, device)
                for r in range(parts)]
        caches = [c[0].view(batch, -1, *c[0].shape[1:]) for c in full]
        whole = torch.cat(caches, 1)
        # Every shard but the last fills its pages: concatenation keeps token order.
        pages = whole.shape[1]
        cache = whole.reshape(batch * pages, *whole.shape[2:])
        indptr = torch.arange(batch + 1, dtype=torch.int32, device=device) * pages
        indices = torch.arange(batch * pages, dtype=torch.int32, device=device)
        last = full[-1][3]
        one = decoder(args, (cache, indptr, indices, last), device)
        ref_out, ref_lse = one(q)
        t_one = bench(lambda: one(q), args.iters)
        err = ((out.float() - ref_out.float()).abs().amax() / ref_out.float().abs().amax()).item()
        lse_err = (lse - ref_lse).abs().amax().item()
        gbytes = 2 * batch * context * args.kv_heads * args.head_dim * 2 / 1e9
        result.update({"max_rel_error": err, "max_lse_error": lse_err,
                       "one_gpu_ms": t_one, "sharded_ms": t_sharded,
                       "speedup": t_one / t_sharded, "kv_gb": gbytes})
        print(f"batch {batch} x {context} tokens ({gbytes:.1f} GB of KV), {parts} shards"
              f"{' simulated on one GPU' if args.simulate else ''}: "
              f"error {err:.2e} (out, relative), {lse_err:.2e} (LSE); "
              f"one GPU {t_one:.3f} ms, sharded {t_sharded:.3f} ms ({t_one / t_sharded:.2f}x"
              + (f"; {result['sharded_separately_ms']:.3f} ms with two all-gathers"
                 if not args.simulate else "") + "); "
              f"alone: shard decode {t_decode:.3f} ms, "
              + (f"gather {result['gather_ms']:.3f} ms (two all-gathers: "
                 f"{result['gather_separately_ms']:.3f} ms), " if not args.simulate else "")
              + f"merge {t_merge:.3f} ms", flush=True)
        del whole, cache
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", default="1x1048576,8x262144",
                    help="comma-separated BATCHxCONTEXT")
    ap.add_argument("--q-heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--page-size", type=int, default=16)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--tol", type=float, default=2e-2)
    ap.add_argument("--simulate", type=int, default=0, metavar="N",
                    help="N shards on one GPU, no torch.distributed")
    ap.add_argument("--json", help="write the figures here (rank 0)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("context_parallel: no CUDA GPU; nothing run", file=sys.stderr)
        return 2
    rank, world, group = 0, 1, None
    if not args.simulate:
        torch.distributed.init_process_group("nccl")
        rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
        group = torch.distributed.group.WORLD
    results = []
    for spec in args.configs.split(","):
        b, n = (int(x) for x in spec.lower().split("x"))
        results.append(run_config(args, b, n, rank, world, group))
        torch.cuda.empty_cache()
    ok = all(r.get("max_rel_error", 0) <= args.tol for r in results)
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "world": world,
                       "simulate": args.simulate, "results": results}, f, indent=1)
    if not args.simulate:
        torch.distributed.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
