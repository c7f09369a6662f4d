#!/usr/bin/env python3
"""FP8 ceilings and peers for attn's FP8 compute (docs/perf-log/history.md,
"FP8 compute"), measured in the run that times attn.

    python3 bench/fp8_peers.py

Prints the dense FP8 GEMM rate of torch._scaled_mm (e4m3 x e4m3 -> bf16,
8192^3, per-tensor scales 1), next to the bf16 torch.matmul rate, and, for
the prefill shapes of `attn-bench prefill` at head dims 128 and 256 (32 q
heads, 8 KV heads, 16k tokens), cuDNN's FP8 SDPA where the installed torch
exposes it (scaled_dot_product_attention on float8_e4m3fn tensors with the
CUDNN_ATTENTION backend); otherwise it says so.
"""

import statistics


def time_ms(torch, fn, repeats=20, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    import torch
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    ms = time_ms(torch, lambda: a @ b)
    print(f"bf16 GEMM (torch.matmul, {n}^3): {2 * n**3 / ms / 1e9:.1f} TFLOP/s")
    a8 = a.to(torch.float8_e4m3fn)
    b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()  # column-major B
    one = torch.ones((), device="cuda", dtype=torch.float32)
    ms = time_ms(torch, lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one,
                                                 out_dtype=torch.bfloat16))
    print(f"e4m3 GEMM (torch._scaled_mm, {n}^3): {2 * n**3 / ms / 1e9:.1f} TFLOP/s")

    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F
    for dim in (128, 256):
        for batch, seq in ((16, 1024), (4, 4096), (1, 16384)):
            for causal in (False, True):
                q = torch.randn(batch, 32, seq, dim, device="cuda").to(torch.float8_e4m3fn)
                k = torch.randn(batch, 8, seq, dim, device="cuda").to(torch.float8_e4m3fn)
                v = torch.randn(batch, 8, seq, dim, device="cuda").to(torch.float8_e4m3fn)
                k, v = (t.repeat_interleave(4, dim=1) for t in (k, v))
                flops = 4 * batch * 32 * seq * seq * dim / (2 if causal else 1)
                try:
                    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                        ms = time_ms(torch, lambda: F.scaled_dot_product_attention(
                            q, k, v, is_causal=causal))
                    result = f"{flops / ms / 1e9:.1f} TFLOP/s"
                except Exception as e:  # not exposed for FP8 by this torch
                    result = "n/a (" + str(e).splitlines()[0][:70] + ")"
                print(f"cuDNN FP8 SDPA d{dim} {batch}x{seq} "
                      f"{'causal' if causal else 'full'}: {result}")
    print(f"torch {torch.__version__}")


if __name__ == "__main__":
    main()
