"""GPU tests of the attn Python package: every wrapper against an fp64
reference written in torch (and, where it applies, against
torch.nn.functional.scaled_dot_product_attention), CUDA graph capture, and
inputs given as __cuda_array_interface__ and DLPack objects.

Skipped, with the reason shown, without torch or a CUDA GPU.

    ATTN_LIBRARY=build/lib/libattn_c.so python3 -m pytest -q python/tests/test_gpu.py
"""
import math
import os
import sys
import types

import pytest

torch = pytest.importorskip("torch", reason="the GPU tests need PyTorch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU (torch.cuda.is_available() is False)", allow_module_level=True)

import attn  # noqa: E402
import attn.flashinfer as fi  # noqa: E402
import attn.vllm_backend as vb  # noqa: E402

DEV = torch.device("cuda", torch.cuda.current_device())
LOG2E = math.log2(math.e)
BF16, F16 = torch.bfloat16, torch.float16
TOL = {BF16: 2e-2, F16: 5e-3}
WS = None


def workspace():
    global WS
    if WS is None:
        WS = torch.empty(1 << 20, dtype=torch.uint8, device=DEV)
    return WS


def gen(seed):
    return torch.Generator(device=DEV).manual_seed(seed)


def randn(shape, dtype, seed, scale=1.0):
    return (torch.randn(shape, generator=gen(seed), device=DEV, dtype=torch.float32)
            * scale).to(dtype)


# --- the fp64 reference ------------------------------------------------------


def reference(q, k, v, causal=True, window_left=-1, softcap=0.0, scale=None, alibi=None,
              sinks=None, fi_alibi=None, mask=None):
    """docs/semantics.md in fp64: q [Lq, Hq, D], k/v [Lk, Hkv, D] ->
    out [Lq, Hq, D], natural-log LSE [Lq, Hq]. ``fi_alibi``: FlashInfer's
    ALiBi instead, slope * (key - i) with i the query's row in its request
    (0 for a decode); ``mask``: a [Lq, Lk] bool mask also applied."""
    q, k, v = q.double(), k.double(), v.double()
    lq, hq, d = q.shape
    lk, hkv = k.shape[0], k.shape[1]
    group = hq // hkv
    k = k.repeat_interleave(group, 1)
    v = v.repeat_interleave(group, 1)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    s = torch.einsum("qhd,khd->hqk", q, k) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    qpos = torch.arange(lq, device=q.device, dtype=torch.float64) + (lk - lq)
    kpos = torch.arange(lk, device=q.device, dtype=torch.float64)
    if alibi is not None:
        a = torch.as_tensor(alibi, dtype=torch.float64, device=q.device)
        s = s - a[:, None, None] * (kpos[None, None, :] - qpos[None, :, None]).abs()
    if fi_alibi is not None:
        a = torch.as_tensor(fi_alibi, dtype=torch.float64, device=q.device)
        rows = torch.arange(lq, device=q.device, dtype=torch.float64)
        s = s + a[:, None, None] * (kpos[None, None, :] - rows[None, :, None])
    custom = mask
    mask = torch.ones(lq, lk, dtype=torch.bool, device=q.device)
    if custom is not None:
        mask &= custom.to(q.device)
    if causal:
        mask &= kpos[None, :] <= qpos[:, None]
    if window_left is not None and window_left >= 0:
        mask &= kpos[None, :] >= qpos[:, None] - window_left
    s = s.masked_fill(~mask[None], float("-inf"))
    if sinks is not None:
        sk = torch.as_tensor(sinks, dtype=torch.float64, device=q.device)
        s = torch.cat([s, sk[:, None, None].expand(hq, lq, 1)], dim=2)
    lse = torch.logsumexp(s, dim=2)  # [Hq, Lq]
    p = torch.exp(s - lse[..., None])
    p = torch.nan_to_num(p, nan=0.0)
    if sinks is not None:
        p = p[..., :lk]
    out = torch.einsum("hqk,khd->qhd", p, v)
    return out, lse.transpose(0, 1)


def sdpa(q, k, v, causal=True, scale=None):
    """torch's SDPA in float32 with bottom-right causal alignment."""
    lq, hq, d = q.shape
    lk, hkv = k.shape[0], k.shape[1]
    k = k.float().repeat_interleave(hq // hkv, 1)
    v = v.float().repeat_interleave(hq // hkv, 1)
    mask = None
    if causal:
        qpos = torch.arange(lq, device=q.device) + (lk - lq)
        mask = torch.arange(lk, device=q.device)[None, :] <= qpos[:, None]
    o = torch.nn.functional.scaled_dot_product_attention(
        q.float().transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None],
        attn_mask=mask, scale=scale)
    return o[0].transpose(0, 1)


def rope_ref(x, first, scale=1.0, theta=1e4):
    """FlashInfer's ROPE_LLAMA in float64: (x_i, x_{i+d/2}) at position p
    turned by p * theta^(-2i/d) / scale, as a complex product."""
    n, d = x.shape[0], x.shape[-1]
    freq = torch.tensor([theta ** (-2.0 * i / d) / scale for i in range(d // 2)],
                        dtype=torch.float64, device=x.device)
    pos = torch.arange(first, first + n, dtype=torch.float64, device=x.device)
    turn = torch.polar(torch.ones(n, 1, d // 2, dtype=torch.float64, device=x.device),
                       pos[:, None, None] * freq)
    z = torch.complex(x[..., :d // 2].double(), x[..., d // 2:].double()) * turn
    return torch.cat([z.real, z.imag], dim=-1)


def assert_close(out, ref, dtype, what, tol=None):
    tol = TOL[dtype] if tol is None else tol
    err = (out.double() - ref.double()).abs().max().item()
    bound = tol * max(1.0, ref.double().abs().max().item())
    assert err <= bound, "%s: max error %.3g > %.3g" % (what, err, bound)


def assert_lse(lse2, ref_lse, what):
    """attn.flashinfer's LSEs are base 2 (FlashInfer's)."""
    ref2 = ref_lse * LOG2E
    finite = torch.isfinite(ref2)
    assert torch.equal(torch.isfinite(lse2.double()), finite), what + ": -inf rows differ"
    err = (lse2.double()[finite] - ref2[finite]).abs().max().item() if finite.any() else 0.0
    assert err <= 2e-2, "%s: LSE max error %.3g" % (what, err)


# --- paged caches --------------------------------------------------------------------


class Paged:
    """A FlashInfer paged cache with random contents and a random page
    assignment, its CSR table and a way back to each request's keys."""

    def __init__(self, lens, page_size, hkv, d, dtype, layout="NHD", seed=0, extra=3,
                 kv_scale=None):
        self.lens, self.page, self.layout = list(lens), page_size, layout
        counts = [-(-n // page_size) for n in lens]
        total = sum(counts) + extra
        perm = torch.randperm(total, generator=torch.Generator().manual_seed(seed)).tolist()
        self.pages, at = [], 0
        for c in counts:
            self.pages.append(perm[at:at + c])
            at += c
        self.indptr = torch.tensor([0] + list(_cumsum(counts)), dtype=torch.int32, device=DEV)
        self.indices = torch.tensor([p for ps in self.pages for p in ps] or [0],
                                    dtype=torch.int32, device=DEV)[:sum(counts)]
        self.last = torch.tensor([n - (c - 1) * page_size if c else 0
                                  for n, c in zip(lens, counts)], dtype=torch.int32, device=DEV)
        page_shape = (page_size, hkv, d) if layout == "NHD" else (hkv, page_size, d)
        data = torch.randn((total, 2) + page_shape, generator=gen(seed + 1), device=DEV)
        if dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
            ks, vs = kv_scale
            scale = torch.tensor([ks, vs], device=DEV).view(1, 2, 1, 1, 1)
            self.cache = (data / scale).to(dtype)
            self.values = self.cache.double() * scale.double()
        else:
            self.cache = data.to(dtype)
            self.values = self.cache.double()

    def kv(self, b):
        sel = self.values[self.pages[b]]
        k, v = sel[:, 0], sel[:, 1]
        if self.layout == "HND":
            k, v = k.transpose(1, 2), v.transpose(1, 2)
        h, d = k.shape[-2], k.shape[-1]
        return k.reshape(-1, h, d)[:self.lens[b]], v.reshape(-1, h, d)[:self.lens[b]]


def _cumsum(xs):
    s = 0
    for x in xs:
        s += x
        yield s


# --- decode ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bf16", "f16"])
@pytest.mark.parametrize("layout", ["NHD", "HND"])
@pytest.mark.parametrize("page_size", [1, 16])
def test_decode(dtype, layout, page_size):
    hq, hkv, d = 8, 2, 128
    lens = [1, 17, 100, 300]
    pc = Paged(lens, page_size, hkv, d, dtype, layout, seed=page_size)
    q = randn((len(lens), hq, d), dtype, 7)
    w = attn.BatchDecodeWithPagedKVCacheWrapper(workspace(), layout)
    w.plan(pc.indptr, pc.indices, pc.last, hq, hkv, d, page_size, q_data_type=dtype,
           kv_data_type=dtype)
    out, lse = w.run(q, pc.cache, return_lse=True)
    out2 = w.run(q, pc.cache)  # the planned LSE-less variant
    assert out.dtype == dtype and out.shape == q.shape and lse.shape == (len(lens), hq)
    for b in range(len(lens)):
        k, v = pc.kv(b)
        ref, ref_lse = reference(q[b:b + 1], k, v)
        assert_close(out[b:b + 1], ref, dtype, "decode request %d" % b)
        assert_close(out2[b:b + 1], ref, dtype, "decode (no LSE) request %d" % b)
        assert_lse(lse[b:b + 1], ref_lse, "decode request %d" % b)
        assert_close(out[b:b + 1], sdpa(q[b:b + 1], k.to(dtype), v.to(dtype)), dtype,
                     "decode vs SDPA, request %d" % b)


@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_rope_llama_in_the_batch_wrappers_is_flashinfers(layout):
    """pos_encoding_mode='ROPE_LLAMA' (rotated before attention): decode,
    paged prefill and ragged prefill
    against the fp64 reference over rotated q and k; q at the positions
    ending at its request's last key, keys at their place in the request;
    the cache is left as it was."""
    hq, hkv, d, page = 8, 2, 128, 16
    lens = [5, 40, 300]
    pc = Paged(lens, page, hkv, d, BF16, layout, seed=211)
    before = pc.cache.clone()
    q = randn((len(lens), hq, d), BF16, 212)
    w = attn.BatchDecodeWithPagedKVCacheWrapper(workspace(), layout)
    w.plan(pc.indptr, pc.indices, pc.last, hq, hkv, d, page, pos_encoding_mode="ROPE_LLAMA",
           rope_theta=5e5, q_data_type=BF16, kv_data_type=BF16)
    out = w.run(q, pc.cache)
    for b, n in enumerate(lens):
        k, v = pc.kv(b)
        ref = reference(rope_ref(q[b:b + 1], n - 1, theta=5e5), rope_ref(k, 0, theta=5e5),
                        v)[0]
        assert_close(out[b:b + 1], ref, BF16, "ROPE_LLAMA decode request %d" % b)
    assert torch.equal(pc.cache, before), "the cache was changed"

    q_lens = [3, 17, 1]
    qo = torch.tensor([0] + list(_cumsum(q_lens)), dtype=torch.int32, device=DEV)
    qp = randn((sum(q_lens), hq, d), BF16, 213)
    w = attn.BatchPrefillWithPagedKVCacheWrapper(workspace(), layout)
    # Requests of different lengths, then of one length (FlashInfer's tests:
    # plan() reads the device arrays back into its staging table in place).
    for name, cache in (("mixed", pc), ("uniform", Paged([40] * 3, page, hkv, d, BF16, layout,
                                                         seed=216))):
        w.plan(qo, cache.indptr, cache.indices, cache.last, hq, hkv, d, page, causal=True,
               pos_encoding_mode="ROPE_LLAMA", rope_scale=4.0, q_data_type=BF16,
               kv_data_type=BF16)
        out = w.run(qp, cache.cache)
        for b, n in enumerate(cache.lens):
            rows = slice(qo[b].item(), qo[b + 1].item())
            k, v = cache.kv(b)
            ref = reference(rope_ref(qp[rows], n - q_lens[b], scale=4.0),
                            rope_ref(k, 0, scale=4.0), v)[0]
            assert_close(out[rows], ref, BF16,
                         "ROPE_LLAMA paged prefill (%s lengths) request %d" % (name, b))

    kvp = torch.tensor([0] + list(_cumsum(lens)), dtype=torch.int32, device=DEV)
    k = randn((sum(lens), hkv, d), BF16, 214)
    v = randn((sum(lens), hkv, d), BF16, 215)
    w = attn.BatchPrefillWithRaggedKVCacheWrapper(workspace(), layout)
    w.plan(qo, kvp, hq, hkv, d, causal=False, pos_encoding_mode="ROPE_LLAMA",
           q_data_type=BF16)
    out = w.run(qp, k, v)
    for b, n in enumerate(lens):
        rows = slice(qo[b].item(), qo[b + 1].item())
        ks = slice(kvp[b].item(), kvp[b + 1].item())
        ref = reference(rope_ref(qp[rows], n - q_lens[b]), rope_ref(k[ks], 0), v[ks],
                        causal=False)[0]
        assert_close(out[rows], ref, BF16, "ROPE_LLAMA ragged prefill request %d" % b)


@pytest.mark.parametrize("kv_dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_rope_llama_over_an_fp8_cache(kv_dtype):
    """ROPE_LLAMA over an FP8 paged cache (decode and paged prefill): the
    keys dequantized, rotated and attended in q's type, k/v scales as
    FlashInfer's, against the fp64 reference over the rotated dequantized
    keys; the cache itself is left as it was."""
    hq, hkv, d, page = 8, 2, 128, 16
    lens = [9, 300]
    pc = Paged(lens, page, hkv, d, kv_dtype, seed=71, kv_scale=(0.5, 2.0))
    before = pc.cache.clone()
    q = randn((len(lens), hq, d), BF16, 72)
    w = attn.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD")
    w.plan(pc.indptr, pc.indices, pc.last, hq, hkv, d, page, pos_encoding_mode="ROPE_LLAMA",
           q_data_type=BF16, kv_data_type=kv_dtype)
    out = w.run(q, pc.cache, k_scale=0.5, v_scale=2.0)
    for b, n in enumerate(lens):
        k, v = pc.kv(b)
        ref = reference(rope_ref(q[b:b + 1], n - 1), rope_ref(k, 0), v)[0]
        assert_close(out[b:b + 1], ref, BF16, "ROPE_LLAMA over %s, decode %d" % (kv_dtype, b))
    qo = torch.tensor([0, 4, 9], dtype=torch.int32, device=DEV)
    qp = randn((9, hq, d), BF16, 73)
    w = attn.BatchPrefillWithPagedKVCacheWrapper(workspace(), "NHD")
    w.plan(qo, pc.indptr, pc.indices, pc.last, hq, hkv, d, page, causal=True,
           pos_encoding_mode="ROPE_LLAMA", q_data_type=BF16, kv_data_type=kv_dtype)
    out = w.run(qp, (pc.cache[:, 0], pc.cache[:, 1]), k_scale=0.5, v_scale=2.0)
    for b, n in enumerate(lens):
        r = slice(qo[b].item(), qo[b + 1].item())
        k, v = pc.kv(b)
        ref = reference(rope_ref(qp[r], n - (r.stop - r.start)), rope_ref(k, 0), v)[0]
        assert_close(out[r], ref, BF16, "ROPE_LLAMA over %s, prefill %d" % (kv_dtype, b))
    assert torch.equal(pc.cache.view(torch.uint8), before.view(torch.uint8)), "cache changed"
    # One request's FP8 k/v (single_decode / single_prefill), scales folded.
    k8 = randn((200, hkv, d), BF16, 74).to(kv_dtype)
    v8 = randn((200, hkv, d), BF16, 75).to(kv_dtype)
    k, v = k8.float() * 0.5, v8.float() * 2.0
    out = fi.single_decode_with_kv_cache(q[0], k8, v8, pos_encoding_mode="ROPE_LLAMA",
                                         k_scale=0.5, v_scale=2.0)
    ref = reference(rope_ref(q[:1], 199), rope_ref(k, 0), v)[0][0]
    assert_close(out, ref, BF16, "ROPE_LLAMA single decode over %s" % kv_dtype)
    out, lse = fi.single_prefill_with_kv_cache(qp, k8, v8, causal=True, return_lse=True,
                                               pos_encoding_mode="ROPE_LLAMA", k_scale=0.5,
                                               v_scale=2.0)
    ref, ref_lse = reference(rope_ref(qp, 200 - 9), rope_ref(k, 0), v)
    assert_close(out, ref, BF16, "ROPE_LLAMA single prefill over %s" % kv_dtype)
    assert_lse(lse, ref_lse, "ROPE_LLAMA single prefill over %s" % kv_dtype)


def test_decode_tuple_cache_and_replan_to_a_larger_batch():
    hq, hkv, d, page = 8, 8, 64, 16
    w = attn.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD")
    for lens in ([5, 40], [3] * 40 + [77]):
        pc = Paged(lens, page, hkv, d, BF16, seed=len(lens))
        k_cache = pc.cache[:, 0].contiguous()
        v_cache = pc.cache[:, 1].contiguous()
        q = randn((len(lens), hq, d), BF16, 3)
        w.plan(pc.indptr, pc.indices, pc.last, hq, hkv, d, page, q_data_type=BF16)
        out = torch.empty_like(q)
        res = w.run(q, (k_cache, v_cache), out=out)
        assert res is out
        for b in (0, len(lens) - 1):
            k, v = pc.kv(b)
            assert_close(out[b:b + 1], reference(q[b:b + 1], k, v)[0], BF16, "tuple cache")


@pytest.mark.parametrize("split", [{"fixed_split_size": 512}, {"disable_split_kv": True}],
                         ids=["fixed_split_size", "disable_split_kv"])
def test_fixed_splits_give_a_request_the_same_bits_in_any_batch(split):
    """As FlashInfer's tensor-core decode with fixed splits: the first
    requests' outputs and LSE, bit for bit, alone and in a larger batch."""
    hq, hkv, d, page = 8, 2, 128, 16
    lens = [9000, 700, 5, 3000]
    pc = Paged(lens, page, hkv, d, BF16, seed=41)
    q = randn((len(lens), hq, d), BF16, 42)
    w = attn.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD", use_tensor_cores=True)
    w.plan(pc.indptr, pc.indices, pc.last, hq, hkv, d, page, q_data_type=BF16, **split)
    out, lse = w.run(q, pc.cache, return_lse=True)
    w.plan(pc.indptr[:3], pc.indices, pc.last[:2], hq, hkv, d, page, q_data_type=BF16, **split)
    out2, lse2 = w.run(q[:2], pc.cache, return_lse=True)
    assert torch.equal(out[:2], out2) and torch.equal(lse[:2], lse2)
    for b in (0, 1):
        k, v = pc.kv(b)
        assert_close(out2[b:b + 1], reference(q[b:b + 1], k, v)[0], BF16, "fixed splits")


@pytest.mark.parametrize("stage", ["decode", "append"])
def test_shared_prefix_wrappers_are_flashinfers(stage):
    """FlashInfer's two-level wrappers: a shared prefix in contiguous k/v
    (non-causal) and each request's pages, against the fp64 reference over
    the concatenated keys; causal append rows are causal within their own
    pages only. Their begin_forward plans f16 queries, as FlashInfer's."""
    hq, hkv, d, page, prefix = 8, 2, 128, 16, 300
    lens = [37, 5, 130]
    pc = Paged(lens, page, hkv, d, F16, seed=51)
    ks = randn((prefix, hkv, d), F16, 52)
    vs = randn((prefix, hkv, d), F16, 53)
    rows = [1] * 3 if stage == "decode" else [4, 5, 1]
    qo = torch.tensor([0] + list(_cumsum(rows)), dtype=torch.int32, device=DEV)
    q = randn((sum(rows), hq, d), F16, 54)
    if stage == "decode":
        w = fi.BatchDecodeWithSharedPrefixPagedKVCacheWrapper(workspace(), "NHD")
        w.begin_forward(pc.indptr, pc.indices, pc.last, hq, hkv, d, page)
        out = w.forward(q, ks, vs, pc.cache)
    else:
        w = fi.BatchPrefillWithSharedPrefixPagedKVCacheWrapper(workspace(), "NHD")
        w.begin_forward(qo, pc.indptr, pc.indices, pc.last, hq, hkv, d, page)
        out = w.forward(q, ks, vs, pc.cache, causal=True)
    for b, n in enumerate(lens):
        r = slice(qo[b].item(), qo[b + 1].item())
        k, v = pc.kv(b)
        kk, vv = torch.cat([ks, k]), torch.cat([vs, v])
        # Causal within the request's pages: the prefix is visible to all.
        ref = reference(q[r], kk, vv, causal=stage == "append")[0]
        assert_close(out[r], ref, F16, "shared prefix %s request %d" % (stage, b))


def test_non_causal_paged_prefill_takes_more_rows_than_keys():
    """Without the causal mask every row sees every cached key, and rows
    may outnumber them (FlashInfer's block-sparse rows, cascade levels):
    a request with no key gives 0 and LSE -inf."""
    hq, hkv, d, page = 8, 2, 64, 16
    lens, rows = [5, 0, 40], [12, 3, 7]
    pc = Paged(lens, page, hkv, d, BF16, seed=61)
    qo = torch.tensor([0] + list(_cumsum(rows)), dtype=torch.int32, device=DEV)
    q = randn((sum(rows), hq, d), BF16, 62)
    w = attn.BatchPrefillWithPagedKVCacheWrapper(workspace(), "NHD")
    w.plan(qo, pc.indptr, pc.indices, pc.last, hq, hkv, d, page, causal=False,
           q_data_type=BF16)
    out, lse = w.run(q, pc.cache, return_lse=True)
    for b, n in enumerate(lens):
        r = slice(qo[b].item(), qo[b + 1].item())
        if n == 0:
            assert torch.equal(out[r], torch.zeros_like(out[r]))
            assert torch.isneginf(lse[r]).all()
            continue
        k, v = pc.kv(b)
        assert_close(out[r], reference(q[r], k, v, causal=False)[0], BF16,
                     "non-causal rows past the keys, request %d" % b)
    with pytest.raises(ValueError, match="12 query rows but 5 cached tokens"):
        w.plan(qo, pc.indptr, pc.indices, pc.last, hq, hkv, d, page, causal=True,
               q_data_type=BF16)


@pytest.mark.parametrize("causal", [False, True])
def test_variable_block_sparse_is_flashinfers(causal):
    """VariableBlockSparseAttentionWrapper against the fp64 reference over
    each row block's listed keys (in order, rows aligned to their end when
    causal); a row block that lists none gives 0."""
    hq, hkv, d = 8, 2, 64
    rows = torch.tensor([[5, 20, 7], [1, 30, 1]], dtype=torch.int32)
    cols = torch.tensor([[16, 4, 30, 14], [1, 60, 1, 2]], dtype=torch.int32)
    g = torch.Generator().manual_seed(81)
    mask = torch.rand(2, 3, 4, generator=g) < 0.6
    mask[1, 1, 1] = True
    if causal:
        mask[:, :, 1:3] = True  # as many keys as rows: causal rows must see one
    else:
        mask[0, 1] = False  # a row block with no keys
    q = randn((hq, 32, d), BF16, 82)
    k = randn((hkv, 64, d), BF16, 83)
    v = randn((hkv, 64, d), BF16, 84)
    w = fi.VariableBlockSparseAttentionWrapper(workspace())
    w.plan(mask.to(DEV), rows.to(DEV), cols.to(DEV), hq, hkv, d, causal=causal,
           q_data_type=BF16)
    out, lse = w.run(q, k, v, return_lse=True)
    group = hq // hkv
    for h in range(hkv):
        r0 = 0
        cstart = [0] + torch.cumsum(cols[h], 0).tolist()
        for r in range(rows.shape[1]):
            n = int(rows[h, r])
            keys = [t for c in range(cols.shape[1]) if mask[h, r, c]
                    for t in range(cstart[c], cstart[c + 1])]
            heads = slice(h * group, (h + 1) * group)
            got = out[heads, r0:r0 + n].transpose(0, 1)
            if not keys:
                r0 += n
                continue  # checked below: 0 and LSE -inf
            kk = k[h, keys][:, None]
            vv = v[h, keys][:, None]
            ref = reference(q[heads, r0:r0 + n].transpose(0, 1), kk, vv, causal=causal)[0]
            assert_close(got, ref, BF16, "head %d row block %d" % (h, r))
            r0 += n
    if not causal:
        assert torch.equal(out[0:group, 5:25], torch.zeros_like(out[0:group, 5:25]))
        assert torch.isneginf(lse[0:group, 5:25]).all()


@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_pages_of_one_token_without_the_page_dim(layout):
    """FlashInfer's caches of one-token pages may leave out the page dim:
    the same output as with it, in the decode and paged prefill wrappers."""
    hq, hkv, d = 8, 2, 64
    pc = Paged([7, 30], 1, hkv, d, BF16, layout, seed=31)
    at = 2 if layout == "NHD" else 3
    both = pc.cache.squeeze(at)
    k, v = pc.cache[:, 0].squeeze(at - 1), pc.cache[:, 1].squeeze(at - 1)
    q = randn((2, hq, d), BF16, 32)
    w = attn.BatchDecodeWithPagedKVCacheWrapper(workspace(), layout)
    w.plan(pc.indptr, pc.indices, pc.last, hq, hkv, d, 1, q_data_type=BF16)
    want = w.run(q, pc.cache)
    assert torch.equal(w.run(q, both), want) and torch.equal(w.run(q, (k, v)), want)
    qo = torch.tensor([0, 2, 5], dtype=torch.int32, device=DEV)
    qp = randn((5, hq, d), BF16, 33)
    w = attn.BatchPrefillWithPagedKVCacheWrapper(workspace(), layout)
    w.plan(qo, pc.indptr, pc.indices, pc.last, hq, hkv, d, 1, causal=True, q_data_type=BF16)
    want = w.run(qp, pc.cache)
    assert torch.equal(w.run(qp, (k, v)), want)
    for b, n in enumerate(pc.lens):
        rows = slice(qo[b].item(), qo[b + 1].item())
        kb, vb = pc.kv(b)
        assert_close(want[rows], reference(qp[rows], kb, vb)[0], BF16, "one-token pages")


@pytest.mark.parametrize("per_head", [False, True], ids=["tensor-scale", "head-scales"])
def test_decode_e4m3_cache_with_scales(per_head):
    hq, hkv, d, page = 8, 2, 128, 16
    lens = [33, 260]
    pc = Paged(lens, page, hkv, d, torch.float8_e4m3fn, seed=11, kv_scale=(0.5, 2.0))
    q = randn((2, hq, d), BF16, 12)
    w = attn.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD")
    w.plan(pc.indptr, pc.indices, pc.last, hq, hkv, d, page, q_data_type=BF16,
           kv_data_type=torch.float8_e4m3fn)
    if per_head:
        ks = torch.full((hkv,), 0.5, device=DEV)
        vs = torch.full((hkv,), 2.0, device=DEV)
        out = w.run(q, pc.cache, k_scale=ks, v_scale=vs)
    else:
        out = w.run(q, pc.cache, k_scale=0.5, v_scale=2.0)
    for b in range(2):
        k, v = pc.kv(b)
        assert_close(out[b:b + 1], reference(q[b:b + 1], k, v)[0], BF16, "e4m3 request %d" % b)


@pytest.mark.parametrize("knob", ["sinks", "softcap", "window", "alibi", "query_len"])
def test_decode_knobs(knob):
    hq, hkv, d, page = 8, 2, 128, 16
    lens = [50, 300]
    pc = Paged(lens, page, hkv, d, BF16, seed=21)
    q_len = 2 if knob == "query_len" else 1
    q = randn((2 * q_len, hq, d), BF16, 22)
    plan_kw, run_kw, ref_kw = {}, {}, {}
    if knob == "sinks":
        sinks = randn((hq,), torch.float32, 23, scale=2.0)
        run_kw["sinks"], ref_kw["sinks"] = sinks, sinks
    elif knob == "softcap":
        plan_kw["logits_soft_cap"], ref_kw["softcap"] = 5.0, 5.0
        q = randn((2, hq, d), BF16, 22, scale=4.0)  # logits that the cap bends
    elif knob == "window":
        plan_kw["window_left"], ref_kw["window_left"] = 37, 37
    elif knob == "alibi":
        # FlashInfer's: the same output as slope * (key - query), and an LSE
        # that counts the query as row 0 (slope * kv_len more per row).
        plan_kw["pos_encoding_mode"] = "ALIBI"
        ref_kw["fi_alibi"] = fi.get_alibi_slopes(hq)
    else:
        plan_kw["q_len_per_req"] = q_len
    # q_len_per_req > 1 needs FlashInfer's tensor-core decode.
    w = attn.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD",
                                                use_tensor_cores=knob == "query_len")
    w.plan(pc.indptr, pc.indices, pc.last, hq, hkv, d, page, q_data_type=BF16, **plan_kw)
    out, lse = w.run(q, pc.cache, return_lse=True, **run_kw)
    for b in range(2):
        k, v = pc.kv(b)
        rows = slice(b * q_len, (b + 1) * q_len)
        ref, ref_lse = reference(q[rows], k, v, **ref_kw)
        assert_close(out[rows], ref, BF16, "%s request %d" % (knob, b))
        assert_lse(lse[rows], ref_lse, "%s request %d" % (knob, b))


ALIBI_REGION = """{
^bb0(%score: f32, %request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32, %s: tensor<8xf32>):
  %slope = attn.aux_load %s[%q_head] : tensor<8xf32>
  %d = arith.subi %k_pos, %q_pos : i32
  %a = math.absi %d : i32
  %af = arith.sitofp %a : i32 to f32
  %bias = arith.mulf %slope, %af : f32
  %r = arith.subf %score, %bias : f32
  attn.yield %r : f32
}"""


def test_decode_score_mod_with_an_aux_table():
    """attn's extension: plan(score_mod=IR text), run(aux=[tables])."""
    hq, hkv, d, page = 8, 2, 128, 16
    pc = Paged([40, 150], page, hkv, d, BF16, seed=25)
    q = randn((2, hq, d), BF16, 26)
    slopes = torch.tensor(fi.get_alibi_slopes(hq), dtype=torch.float32, device=DEV) * 3
    w = attn.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD")
    w.plan(pc.indptr, pc.indices, pc.last, hq, hkv, d, page, q_data_type=BF16,
           score_mod=ALIBI_REGION)
    out = w.run(q, pc.cache, aux=[slopes])
    for b in range(2):
        k, v = pc.kv(b)
        ref = reference(q[b:b + 1], k, v, alibi=slopes.tolist())[0]
        assert_close(out[b:b + 1], ref, BF16, "score_mod request %d" % b)


def test_decode_data_type_is_the_cache_type():
    """FlashInfer's deprecated plan(data_type=...) with the default
    q_data_type: an f16 query over an e4m3 cache."""
    hq, hkv, d, page = 8, 2, 128, 16
    pc = Paged([37, 130], page, hkv, d, torch.float8_e4m3fn, seed=27, kv_scale=(1.0, 1.0))
    q = randn((2, hq, d), F16, 28)
    w = attn.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD")
    w.plan(pc.indptr, pc.indices, pc.last, hq, hkv, d, page, data_type=torch.float8_e4m3fn)
    out = w.run(q, pc.cache)
    assert out.dtype == F16
    for b in range(2):
        k, v = pc.kv(b)
        assert_close(out[b:b + 1], reference(q[b:b + 1], k, v)[0], F16,
                     "data_type e4m3, request %d" % b)


def test_fast_decode_plan_replans():
    import functools
    hq, hkv, d, page = 8, 2, 64, 16
    w = attn.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD")
    pc = Paged([20, 70], page, hkv, d, F16, seed=29)
    w.plan(pc.indptr, pc.indices, pc.last, hq, hkv, d, page, data_type=F16, q_data_type=F16)
    w.plan = functools.partial(fi.fast_decode_plan, w)
    pc = Paged([90, 5, 33], page, hkv, d, F16, seed=30)
    w.plan(pc.indptr, pc.indices, pc.last, hq, hkv, d, page, data_type=F16, q_data_type=F16,
           global_override_indptr_cpu=pc.indptr.cpu())
    q = randn((3, hq, d), F16, 31)
    out, lse = w.run(q, pc.cache, return_lse=True)
    for b in range(3):
        k, v = pc.kv(b)
        ref, ref_lse = reference(q[b:b + 1], k, v)
        assert_close(out[b:b + 1], ref, F16, "fast_decode_plan request %d" % b)
        assert_lse(lse[b:b + 1], ref_lse, "fast_decode_plan request %d" % b)


def test_decode_forward_sets_the_runtime_knobs():
    """FlashInfer's deprecated forward(): its sm_scale (and a planned
    window's new width) replace the planned ones, for later runs too."""
    hq, hkv, d, page = 8, 2, 128, 16
    pc = Paged([60, 200], page, hkv, d, BF16, seed=32)
    q = randn((2, hq, d), BF16, 33)
    w = attn.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD")
    w.plan(pc.indptr, pc.indices, pc.last, hq, hkv, d, page, q_data_type=BF16, window_left=40)
    out, lse = w.forward_return_lse(q, pc.cache, window_left=13, sm_scale=0.05)
    again = w.run(q, pc.cache)
    for b in range(2):
        k, v = pc.kv(b)
        ref, ref_lse = reference(q[b:b + 1], k, v, window_left=13, scale=0.05)
        assert_close(out[b:b + 1], ref, BF16, "forward request %d" % b)
        assert_lse(lse[b:b + 1], ref_lse, "forward request %d" % b)
        assert_close(again[b:b + 1], ref, BF16, "run after forward, request %d" % b)


# --- prefill -------------------------------------------------------------------------


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
def test_ragged_prefill_alibi_is_flashinfers(causal):
    """FlashInfer's ALiBi: slope * (key - i), i the query's row in its
    request (keys after the query weigh more when not causal)."""
    hq, hkv, d = 8, 2, 64
    q_lens, kv_lens = [5, 33, 64], [9, 80, 64]
    qo = torch.tensor([0] + list(_cumsum(q_lens)), dtype=torch.int32, device=DEV)
    kvp = torch.tensor([0] + list(_cumsum(kv_lens)), dtype=torch.int32, device=DEV)
    q = randn((sum(q_lens), hq, d), BF16, 34)
    k = randn((sum(kv_lens), hkv, d), BF16, 35)
    v = randn((sum(kv_lens), hkv, d), BF16, 36)
    slopes = fi.get_alibi_slopes(hq)
    w = attn.BatchPrefillWithRaggedKVCacheWrapper(workspace(), "NHD")
    w.plan(qo, kvp, hq, hkv, d, causal=causal, pos_encoding_mode="ALIBI", q_data_type=BF16)
    out, lse = w.run(q, k, v, return_lse=True)
    for b in range(3):
        qs = slice(qo[b].item(), qo[b + 1].item())
        ks = slice(kvp[b].item(), kvp[b + 1].item())
        ref, ref_lse = reference(q[qs], k[ks], v[ks], causal=causal, fi_alibi=slopes)
        assert_close(out[qs], ref, BF16, "ALiBi ragged request %d" % b)
        assert_lse(lse[qs], ref_lse, "ALiBi ragged request %d" % b)


def test_paged_prefill_alibi_not_causal_and_forward():
    hq, hkv, d, page = 8, 2, 128, 16
    q_lens, seq_lens = [7, 16, 1], [27, 61, 9]
    pc = Paged(seq_lens, page, hkv, d, BF16, seed=37)
    qo = torch.tensor([0] + list(_cumsum(q_lens)), dtype=torch.int32, device=DEV)
    q = randn((sum(q_lens), hq, d), BF16, 38)
    slopes = fi.get_alibi_slopes(hq)
    w = attn.BatchPrefillWithPagedKVCacheWrapper(workspace(), "NHD")
    w.plan(qo, pc.indptr, pc.indices, pc.last, hq, hkv, d, page, causal=True,
           pos_encoding_mode="ALIBI", q_data_type=BF16, kv_data_type=BF16)
    causal_out, causal_lse = w.run(q, pc.cache, return_lse=True)
    # FlashInfer's forward_return_lse() defaults to causal=False.
    out, lse = w.forward_return_lse(q, pc.cache)
    for b in range(3):
        rows = slice(qo[b].item(), qo[b + 1].item())
        k, v = pc.kv(b)
        for c, o, l in ((True, causal_out, causal_lse), (False, out, lse)):
            ref, ref_lse = reference(q[rows], k, v, causal=c, fi_alibi=slopes)
            what = "ALiBi paged (causal=%s) request %d" % (c, b)
            assert_close(o[rows], ref, BF16, what)
            assert_lse(l[rows], ref_lse, what)


SINK_JIT_ARGS = ("batch_prefill_attention_sink_bf16_swa_False_fa2", BF16, BF16, BF16,
                 torch.int32, 128, 128, ["sink"], ["float"], ["sm_scale"], ["double"],
                 "AttentionSink", "/* FlashInfer's variant source: attn uses its sinks */")


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
def test_attention_sink_wrappers_as_flashinfers_tests_use_them(causal):
    """FlashInfer's AttentionSink jit_args on the ragged wrapper and its
    BatchAttentionWithAttentionSinkWrapper: run(q, kv, sink, sm_scale)."""
    hq, hkv, d, batch, seq = 8, 2, 128, 3, 16
    sm_scale = 1.0 / math.sqrt(d)
    qo = torch.arange(0, batch * seq + 1, seq, dtype=torch.int32)
    q = randn((batch * seq, hq, d), BF16, 71)
    k = randn((batch * seq, hkv, d), BF16, 72)
    v = randn((batch * seq, hkv, d), BF16, 73)
    sink = torch.rand(hq, generator=gen(74), device=DEV) * 5
    w = attn.BatchPrefillWithRaggedKVCacheWrapper(workspace(), "NHD", backend="fa2",
                                                  jit_args=SINK_JIT_ARGS,
                                                  jit_kwargs={"use_sliding_window": False})
    w.plan(qo, qo, hq, hkv, d, causal=causal, q_data_type=BF16, kv_data_type=BF16)
    out = w.run(q, k, v, sink, sm_scale)
    paged = attn.BatchAttentionWithAttentionSinkWrapper(
        workspace(), kv_layout="NHD", backend="fa2", q_data_type=BF16, kv_data_type=BF16,
        head_dim_qk=d, head_dim_vo=d)
    paged.plan(qo, qo, torch.arange(batch * seq, dtype=torch.int32),
               torch.ones(batch, dtype=torch.int32), hq, hkv, d, 1, causal=causal,
               q_data_type=BF16, kv_data_type=BF16, non_blocking=True)
    out_paged = paged.run(q, (k[:, None], v[:, None]), sink, sm_scale * 2)
    for b in range(batch):
        rows = slice(b * seq, (b + 1) * seq)
        ref = reference(q[rows], k[rows], v[rows], causal=causal, scale=sm_scale,
                        sinks=sink)[0]
        assert_close(out[rows], ref, BF16, "sink ragged request %d" % b)
        ref2 = reference(q[rows], k[rows], v[rows], causal=causal, scale=sm_scale * 2,
                         sinks=sink)[0]
        assert_close(out_paged[rows], ref2, BF16, "sink paged request %d" % b)


@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_single_prefill_and_decode_are_flashinfers(layout):
    """FlashInfer's single_* functions: one request's prefill (causal or
    not, window + soft-cap + scale, a custom mask, RoPE) and decode (plain,
    window + soft-cap, FlashInfer's ALiBi, RoPE), k/v in either layout."""
    hq, hkv, d, qo_len, kv_len = 8, 2, 128, 37, 300
    q = randn((qo_len, hq, d), BF16, 201)
    k = randn((kv_len, hkv, d), BF16, 202)
    v = randn((kv_len, hkv, d), BF16, 203)
    kk, vv = (k, v) if layout == "NHD" else (k.transpose(0, 1).contiguous(),
                                             v.transpose(0, 1).contiguous())
    for causal in (True, False):
        out, lse = fi.single_prefill_with_kv_cache(q, kk, vv, causal=causal, kv_layout=layout,
                                                   return_lse=True)
        ref, ref_lse = reference(q, k, v, causal=causal)
        assert_close(out, ref, BF16, "single prefill causal=%s" % causal)
        assert_lse(lse, ref_lse, "single prefill causal=%s" % causal)
    out = fi.single_prefill_with_kv_cache(q, kk, vv, causal=True, kv_layout=layout,
                                          window_left=50, logits_soft_cap=30.0, sm_scale=0.1)
    assert_close(out, reference(q, k, v, window_left=50, softcap=30.0, scale=0.1)[0], BF16,
                 "single prefill, window + soft-cap + scale")
    mask = torch.rand(qo_len, kv_len, generator=gen(204), device=DEV) > 0.3
    out, lse = fi.single_prefill_with_kv_cache_return_lse(q, kk, vv, custom_mask=mask,
                                                          kv_layout=layout)
    ref, ref_lse = reference(q, k, v, causal=False, mask=mask)
    assert_close(out, ref, BF16, "single prefill, custom mask")
    assert_lse(lse, ref_lse, "single prefill, custom mask")

    qd = randn((hq, d), BF16, 205)
    out, lse = fi.single_decode_with_kv_cache(qd, kk, vv, kv_layout=layout, return_lse=True)
    assert out.shape == (hq, d) and lse.shape == (hq,)
    ref, ref_lse = reference(qd[None], k, v)
    assert_close(out, ref[0], BF16, "single decode")
    assert_lse(lse, ref_lse[0], "single decode")
    out = fi.single_decode_with_kv_cache(qd, kk, vv, kv_layout=layout, window_left=64,
                                         logits_soft_cap=20.0)
    assert_close(out, reference(qd[None], k, v, window_left=64, softcap=20.0)[0][0], BF16,
                 "single decode, window + soft-cap")
    out, lse = fi.single_decode_with_kv_cache(qd, kk, vv, kv_layout=layout,
                                              pos_encoding_mode="ALIBI", return_lse=True)
    ref, ref_lse = reference(qd[None], k, v, fi_alibi=fi.get_alibi_slopes(hq))
    assert_close(out, ref[0], BF16, "single decode, ALiBi")
    assert_lse(lse, ref_lse[0], "single decode, ALiBi")

    # RoPE inside attention (rotated before it here): q at the positions
    # ending at the last key, k at 0..kv_len-1.
    out = fi.single_prefill_with_kv_cache(q, kk, vv, causal=True, kv_layout=layout,
                                          pos_encoding_mode="ROPE_LLAMA", rope_scale=2.0,
                                          rope_theta=5e5)
    ref = reference(rope_ref(q, kv_len - qo_len, 2.0, 5e5), rope_ref(k, 0, 2.0, 5e5), v)[0]
    assert_close(out, ref, BF16, "single prefill, ROPE_LLAMA")
    out = fi.single_decode_with_kv_cache(qd, kk, vv, kv_layout=layout,
                                         pos_encoding_mode="ROPE_LLAMA")
    ref = reference(rope_ref(qd[None], kv_len - 1), rope_ref(k, 0), v)[0][0]
    assert_close(out, ref, BF16, "single decode, ROPE_LLAMA")


def test_ragged_forward_replaces_causal_and_scale():
    hq, hkv, d = 8, 8, 64
    q_lens, kv_lens = [12, 30], [20, 30]
    qo = torch.tensor([0] + list(_cumsum(q_lens)), dtype=torch.int32, device=DEV)
    kvp = torch.tensor([0] + list(_cumsum(kv_lens)), dtype=torch.int32, device=DEV)
    q = randn((sum(q_lens), hq, d), F16, 39)
    k = randn((sum(kv_lens), hkv, d), F16, 40)
    v = randn((sum(kv_lens), hkv, d), F16, 41)
    w = attn.BatchPrefillWithRaggedKVCacheWrapper(workspace(), "NHD")
    w.plan(qo, kvp, hq, hkv, d, causal=True, q_data_type=F16)
    plain = w.forward(q, k, v)  # FlashInfer's default causal=False
    out, lse = w.forward_return_lse(q, k, v, causal=True, sm_scale=0.2)
    for b in range(2):
        qs = slice(qo[b].item(), qo[b + 1].item())
        ks = slice(kvp[b].item(), kvp[b + 1].item())
        assert_close(plain[qs], reference(q[qs], k[ks], v[ks], causal=False)[0], F16,
                     "forward (not causal) request %d" % b)
        ref, ref_lse = reference(q[qs], k[ks], v[ks], causal=True, scale=0.2)
        assert_close(out[qs], ref, F16, "forward_return_lse request %d" % b)
        assert_lse(lse[qs], ref_lse, "forward_return_lse request %d" % b)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
def test_ragged_prefill(causal):
    hq, hkv, d = 8, 2, 64
    q_lens, kv_lens = [5, 33, 64], [5, 40, 64]
    qo = torch.tensor([0] + list(_cumsum(q_lens)), dtype=torch.int32, device=DEV)
    kvp = torch.tensor([0] + list(_cumsum(kv_lens)), dtype=torch.int32, device=DEV)
    q = randn((sum(q_lens), hq, d), BF16, 31)
    k = randn((sum(kv_lens), hkv, d), BF16, 32)
    v = randn((sum(kv_lens), hkv, d), BF16, 33)
    w = attn.BatchPrefillWithRaggedKVCacheWrapper(workspace(), "NHD")
    w.plan(qo, kvp, hq, hkv, d, causal=causal, q_data_type=BF16)
    out, lse = w.run(q, k, v, return_lse=True)
    for b in range(3):
        qs = slice(qo[b].item(), qo[b + 1].item())
        ks = slice(kvp[b].item(), kvp[b + 1].item())
        ref, ref_lse = reference(q[qs], k[ks], v[ks], causal=causal)
        assert_close(out[qs], ref, BF16, "ragged request %d" % b)
        assert_lse(lse[qs], ref_lse, "ragged request %d" % b)
        assert_close(out[qs], sdpa(q[qs], k[ks], v[ks], causal=causal), BF16,
                     "ragged vs SDPA, request %d" % b)


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
def test_ragged_prefill_mla_qk192_v128(causal):
    """MLA's MHA-mode prefill: q/k of 128 + 64 dims, v of 128 (FlashInfer's
    head_dim_qk / head_dim_vo), default scale 1/sqrt(192), LSE."""
    h, dqk, dv = 16, 192, 128
    q_lens, kv_lens = [7, 130, 64], [300, 130, 64]
    qo = torch.tensor([0] + list(_cumsum(q_lens)), dtype=torch.int32, device=DEV)
    kvp = torch.tensor([0] + list(_cumsum(kv_lens)), dtype=torch.int32, device=DEV)
    q = randn((sum(q_lens), h, dqk), BF16, 41)
    k = randn((sum(kv_lens), h, dqk), BF16, 42)
    v = randn((sum(kv_lens), h, dv), BF16, 43)
    w = attn.BatchPrefillWithRaggedKVCacheWrapper(workspace(), "NHD")
    w.plan(qo, kvp, h, h, dqk, head_dim_vo=dv, causal=causal, q_data_type=BF16)
    out, lse = w.run(q, k, v, return_lse=True)
    assert out.shape == (sum(q_lens), h, dv)
    for b in range(3):
        qs = slice(qo[b].item(), qo[b + 1].item())
        ks = slice(kvp[b].item(), kvp[b + 1].item())
        ref, ref_lse = reference(q[qs], k[ks], v[ks], causal=causal)
        assert_close(out[qs], ref, BF16, "MLA prefill request %d" % b)
        assert_lse(lse[qs], ref_lse, "MLA prefill request %d" % b)


@pytest.mark.parametrize("layout", ["NHD", "HND"])
def test_paged_prefill(layout):
    hq, hkv, d, page = 8, 2, 128, 16
    q_lens, seq_lens = [7, 16, 1], [27, 61, 9]
    pc = Paged(seq_lens, page, hkv, d, BF16, layout, seed=41)
    qo = torch.tensor([0] + list(_cumsum(q_lens)), dtype=torch.int32, device=DEV)
    q = randn((sum(q_lens), hq, d), BF16, 42)
    w = attn.BatchPrefillWithPagedKVCacheWrapper(workspace(), layout)
    w.plan(qo, pc.indptr, pc.indices, pc.last, hq, hkv, d, page, causal=True,
           q_data_type=BF16, kv_data_type=BF16)
    out = w.run(q, pc.cache)
    for b in range(3):
        rows = slice(qo[b].item(), qo[b + 1].item())
        k, v = pc.kv(b)
        assert_close(out[rows], reference(q[rows], k, v)[0], BF16, "paged request %d" % b)
        assert_close(out[rows], sdpa(q[rows], k.to(BF16), v.to(BF16)), BF16,
                     "paged vs SDPA, request %d" % b)


# --- append, merge, cascade ---------------------------------------------------------------


@pytest.mark.parametrize("kv_dtype", [BF16, torch.float8_e4m3fn], ids=["bf16", "e4m3"])
def test_append_paged_kv_cache(kv_dtype):
    hkv, d, page = 2, 64, 16
    seq_lens = [20, 3, 40]
    append_lens = [20, 1, 8]  # a prompt, a decode token, a chunk after 32 cached
    pc = Paged(seq_lens, page, hkv, d, BF16, seed=51)
    cache = torch.zeros(pc.cache.shape, device=DEV, dtype=kv_dtype)
    nnz = sum(append_lens)
    k_new = randn((nnz, hkv, d), BF16, 52)
    v_new = randn((nnz, hkv, d), BF16, 53)
    append_indptr = torch.tensor([0] + list(_cumsum(append_lens)), dtype=torch.int32, device=DEV)
    seq = fi.get_seq_lens(pc.indptr, pc.last, page)
    assert seq.tolist() == seq_lens
    b_idx, pos = fi.get_batch_indices_positions(append_indptr, seq, nnz)
    kw = {"k_scale": 0.5, "v_scale": 2.0} if kv_dtype != BF16 else {}
    fi.append_paged_kv_cache(k_new, v_new, b_idx, pos, cache, pc.indices, pc.indptr, pc.last,
                             "NHD", **kw)
    torch.cuda.synchronize()
    for i in range(nnz):
        b, p = b_idx[i].item(), pos[i].item()
        assert p == seq_lens[b] - append_lens[b] + (i - append_indptr[b].item())
        page_id = pc.pages[b][p // page]
        got_k = cache[page_id, 0, p % page]
        got_v = cache[page_id, 1, p % page]
        if kv_dtype == BF16:
            assert torch.equal(got_k, k_new[i]) and torch.equal(got_v, v_new[i]), i
        else:
            want_k = (k_new[i].float() / 0.5).to(kv_dtype)
            want_v = (v_new[i].float() / 2.0).to(kv_dtype)
            assert torch.equal(got_k.view(torch.uint8), want_k.view(torch.uint8)), i
            assert torch.equal(got_v.view(torch.uint8), want_v.view(torch.uint8)), i
    # Nothing else was written.
    written = torch.zeros(cache.shape[0], page, dtype=torch.bool, device=DEV)
    for i in range(nnz):
        b, p = b_idx[i].item(), pos[i].item()
        written[pc.pages[b][p // page], p % page] = True
    untouched = cache.view(torch.uint8 if kv_dtype != BF16 else torch.int16)
    assert not untouched.permute(0, 2, 1, 3, 4)[~written].any()


def _merge_ref(vs, ss):
    """States (v [n, h, d], base-2 s [n, h]) merged in fp64."""
    s = torch.stack([x.double() for x in ss])  # [k, n, h]
    m = torch.logsumexp(s / LOG2E, dim=0)  # natural
    w = torch.exp(s / LOG2E - m[None])
    v = sum(w[i][..., None] * vs[i].double() for i in range(len(vs)))
    return v, m * LOG2E


def test_merge_state_and_in_place():
    n, h, d = 37, 8, 64
    va, vb_ = randn((n, h, d), F16, 61), randn((n, h, d), F16, 62)
    sa, sb = randn((n, h), torch.float32, 63, 3.0), randn((n, h), torch.float32, 64, 3.0)
    sb[0, 0] = float("-inf")  # an empty partial weighs nothing
    v, s = fi.merge_state(va, sa, vb_, sb)
    ref_v, ref_s = _merge_ref([va, vb_], [sa, sb])
    assert_close(v, ref_v, F16, "merge_state")
    assert (s.double() - ref_s).abs().max().item() < 1e-4
    v2, s2 = va.clone(), sa.clone()
    fi.merge_state_in_place(v2, s2, vb_, sb)
    assert_close(v2, ref_v, F16, "merge_state_in_place")
    assert (s2.double() - ref_s).abs().max().item() < 1e-4


def test_merge_state_in_place_with_mask():
    """FlashInfer's mask: rows where it is False keep their state."""
    n, h, d = 37, 8, 128
    v = randn((n, h, d), F16, 61)
    s = randn((n, h), torch.float32, 62, scale=3.0)
    vo = randn((n, h, d), F16, 63)
    so = randn((n, h), torch.float32, 64, scale=3.0)
    so[5] = float("-inf")  # an empty partial weighs nothing
    mask = torch.rand(n, generator=gen(65), device=DEV) < 0.5
    mask[5] = True
    v0, s0 = v.clone(), s.clone()
    fi.merge_state_in_place(v, s, vo, so, mask=mask)
    ln2 = math.log(2.0)
    a, b = s0.double() * ln2, so.double() * ln2
    m = torch.maximum(a, b)
    wa, wb = torch.exp(a - m), torch.exp(b - m)
    ref_v = (v0.double() * wa[..., None] + vo.double() * wb[..., None]) / (wa + wb)[..., None]
    ref_s = (m + torch.log(wa + wb)) / ln2
    keep = mask[:, None]
    ref_v = torch.where(keep[..., None], ref_v, v0.double())
    ref_s = torch.where(keep, ref_s, s0.double())
    assert torch.equal(v[~mask], v0[~mask]) and torch.equal(s[~mask], s0[~mask])
    assert_close(v, ref_v, F16, "merge_state_in_place(mask) output")
    assert (s.double() - ref_s).abs().max().item() <= 1e-3


@pytest.mark.parametrize("num_states", [3, 20])
def test_merge_states(num_states):
    n, h, d = 9, 4, 128
    v = randn((n, num_states, h, d), BF16, 70 + num_states)
    s = randn((n, num_states, h), torch.float32, 80 + num_states, 2.0)
    vm, sm = fi.merge_states(v, s)
    ref_v, ref_s = _merge_ref([v[:, i] for i in range(num_states)],
                              [s[:, i] for i in range(num_states)])
    assert_close(vm, ref_v, BF16, "merge_states(%d)" % num_states)
    assert (sm.double() - ref_s).abs().max().item() < 1e-3


def test_decode_split_and_merged_equals_whole():
    """Two decodes over halves of each request's keys, merged with their
    (base-2) LSEs, equal one decode over all the keys."""
    hq, hkv, d, page = 8, 2, 128, 16
    lens = [64, 160]
    pc = Paged(lens, page, hkv, d, BF16, seed=91)
    q = randn((2, hq, d), BF16, 92)
    halves = []
    for part in range(2):
        pages = [ps[:len(ps) // 2] if part == 0 else ps[len(ps) // 2:] for ps in pc.pages]
        indptr = torch.tensor([0] + list(_cumsum([len(p) for p in pages])), dtype=torch.int32,
                              device=DEV)
        indices = torch.tensor([x for p in pages for x in p], dtype=torch.int32, device=DEV)
        last = torch.full((2,), page, dtype=torch.int32, device=DEV)
        w = attn.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD")
        w.plan(indptr, indices, last, hq, hkv, d, page, q_data_type=BF16)
        halves.append(w.run(q, pc.cache, return_lse=True))
    v, _ = fi.merge_state(halves[0][0], halves[0][1], halves[1][0], halves[1][1])
    for b in range(2):
        k, vv = pc.kv(b)
        assert_close(v[b:b + 1], reference(q[b:b + 1], k, vv)[0], BF16, "merged request %d" % b)


class _cascade_case:
    """A two-level cascade: ``shared_pages`` pages shared by every request,
    then each request's own ``unique_lens`` tokens; random pages of a
    random cache (``pages`` of them, default as many as needed + 2)."""

    def __init__(self, batch, shared_pages, unique_lens, page, seed, hkv=2, d=128, pages=None):
        counts = [-(-n // page) for n in unique_lens]
        total = pages or shared_pages + sum(counts) + 2
        self.cache = randn((total, 2, page, hkv, d), BF16, seed)
        perm = torch.randperm(total, generator=torch.Generator().manual_seed(seed)).tolist()
        self.shared = perm[:shared_pages]
        self.unique, at = [], shared_pages
        for c in counts:
            self.unique.append(perm[at:at + c])
            at += c
        self.lens = [shared_pages * page + n for n in unique_lens]
        i32 = dict(dtype=torch.int32, device=DEV)
        self.arrays = (
            [torch.tensor([0, batch], **i32), torch.arange(batch + 1, **i32)],
            [torch.tensor([0, shared_pages], **i32),
             torch.tensor([0] + list(_cumsum(counts)), **i32)],
            [torch.tensor(self.shared, **i32),
             torch.tensor([p for ps in self.unique for p in ps], **i32)],
            [torch.tensor([page], **i32),
             torch.tensor([n - (c - 1) * page for n, c in zip(unique_lens, counts)], **i32)])

    def kv(self, b):
        c = self.cache.double()
        pages = self.shared + self.unique[b]
        hkv, d = c.shape[-2], c.shape[-1]
        return (c[pages, 0].reshape(-1, hkv, d)[:self.lens[b]],
                c[pages, 1].reshape(-1, hkv, d)[:self.lens[b]])


def test_cascade():
    hq, hkv, d, page, batch = 8, 2, 128, 16, 5
    case = _cascade_case(batch, 4, [1, 9, 30, 16, 50], page, 101)
    q = randn((batch, hq, d), BF16, 102)
    w = attn.MultiLevelCascadeAttentionWrapper(2, workspace(), "NHD")
    w.plan(*case.arrays, hq, hkv, d, page, q_data_type=BF16)
    out = w.run(q, case.cache)
    for b in range(batch):
        k, v = case.kv(b)
        assert_close(out[b:b + 1], reference(q[b:b + 1], k, v)[0], BF16, "cascade request %d" % b)


def test_cascade_shared_prefix_prefill_level_by_level():
    # FlashInfer's shared-prefix prefill: requests of 5, 20 and 1 query rows
    # under a 40-token shared level that ends inside a page; the cascade
    # kernels do not take it, so it runs one paged prefill per level.
    hq, hkv, d, page = 8, 2, 128, 16
    shared, unique, q_lens = 40, [10, 30, 20], [5, 20, 1]
    counts = [-(-shared // page)] + [-(-n // page) for n in unique]
    total = sum(counts) + 2
    cache = randn((total, 2, page, hkv, d), BF16, 401)
    perm = torch.randperm(total, generator=torch.Generator().manual_seed(401)).tolist()
    tables, at = [], 0
    for c in counts:
        tables.append(perm[at:at + c])
        at += c
    i32 = dict(dtype=torch.int32, device=DEV)
    rows = sum(q_lens)
    arrays = (
        [torch.tensor([0, rows], **i32), torch.tensor([0] + list(_cumsum(q_lens)), **i32)],
        [torch.tensor([0, counts[0]], **i32), torch.tensor([0] + list(_cumsum(counts[1:])), **i32)],
        [torch.tensor(tables[0], **i32), torch.tensor([p for t in tables[1:] for p in t], **i32)],
        [torch.tensor([shared - (counts[0] - 1) * page], **i32),
         torch.tensor([n - (c - 1) * page for n, c in zip(unique, counts[1:])], **i32)])
    q = randn((rows, hq, d), BF16, 402)
    w = attn.MultiLevelCascadeAttentionWrapper(2, workspace(), "NHD")
    w.plan(*arrays, hq, hkv, d, page, causal=True, q_data_type=BF16)
    out, lse = w.run(q, cache, return_lse=True)
    c = cache.double()
    row = 0
    for b, n in enumerate(q_lens):
        k = torch.cat([c[tables[0], 0].reshape(-1, hkv, d)[:shared],
                       c[tables[1 + b], 0].reshape(-1, hkv, d)[:unique[b]]])
        v = torch.cat([c[tables[0], 1].reshape(-1, hkv, d)[:shared],
                       c[tables[1 + b], 1].reshape(-1, hkv, d)[:unique[b]]])
        ref, ref_lse = reference(q[row:row + n], k, v)
        assert_close(out[row:row + n], ref, BF16, "request %d" % b)
        assert_close(lse[row:row + n], ref_lse / math.log(2), torch.float32,
                     "request %d LSE (base 2)" % b, tol=2e-3)
        row += n


# --- graphs, streams, foreign arrays -------------------------------------------------------


def _graph_decode_wrapper(batch, num_indices, max_pages):
    """A decode wrapper in CUDA-graph mode for ``batch`` requests (NHD)."""
    i32 = dict(dtype=torch.int32, device=DEV)
    return attn.BatchDecodeWithPagedKVCacheWrapper(
        workspace(), "NHD", use_cuda_graph=True,
        paged_kv_indptr_buffer=torch.empty(batch + 1, **i32),
        paged_kv_indices_buffer=torch.empty(num_indices, **i32),
        paged_kv_last_page_len_buffer=torch.empty(batch, **i32),
        max_pages_per_request=max_pages)


def test_decode_graph_replayed_after_replan():
    hq, hkv, d, page, batch = 8, 2, 128, 16, 4
    w = _graph_decode_wrapper(batch, 256, 32)
    first = Paged([10, 50, 3, 100], page, hkv, d, BF16, seed=111, extra=40)
    w.plan(first.indptr, first.indices, first.last, hq, hkv, d, page, q_data_type=BF16)
    q_static = randn((batch, hq, d), BF16, 112)
    out_static = torch.empty_like(q_static)
    graph = _capture(lambda: w.run(q_static, first.cache, out=out_static))
    # Re-plan a different batch (same size; new lengths and pages) into the
    # same cache buffer, then replay the captured run.
    second = Paged([200, 7, 64, 1], page, hkv, d, BF16, seed=113, extra=0)
    first.cache[:second.cache.shape[0]].copy_(second.cache)
    w.plan(second.indptr, second.indices, second.last, hq, hkv, d, page, q_data_type=BF16)
    q_new = randn((batch, hq, d), BF16, 114)
    q_static.copy_(q_new)
    graph.replay()
    torch.cuda.synchronize()
    for b in range(batch):
        k, v = second.kv(b)
        assert_close(out_static[b:b + 1], reference(q_new[b:b + 1], k, v)[0], BF16,
                     "replayed request %d" % b)
    with pytest.raises(ValueError, match="fixed at 4"):
        w.plan(second.indptr[:3], second.indices, second.last[:2], hq, hkv, d, page,
               q_data_type=BF16)



def test_rope_llama_decode_graph_replayed_after_replan():
    """ROPE_LLAMA under use_cuda_graph (decode): a captured run rotates q and
    the cache at the positions of the latest plan (kept in place)."""
    hq, hkv, d, page, batch = 8, 2, 128, 16, 4
    w = _graph_decode_wrapper(batch, 256, 32)
    first = Paged([10, 50, 3, 100], page, hkv, d, BF16, seed=121, extra=40)
    w.plan(first.indptr, first.indices, first.last, hq, hkv, d, page, q_data_type=BF16,
           pos_encoding_mode="ROPE_LLAMA")
    q_static = randn((batch, hq, d), BF16, 122)
    out_static = torch.empty_like(q_static)
    graph = _capture(lambda: w.run(q_static, first.cache, out=out_static))
    for lens, seed in (([200, 7, 64, 1], 123), ([33, 90, 17, 250], 125)):
        second = Paged(lens, page, hkv, d, BF16, seed=seed, extra=0)
        first.cache[:second.cache.shape[0]].copy_(second.cache)
        w.plan(second.indptr, second.indices, second.last, hq, hkv, d, page,
               q_data_type=BF16, pos_encoding_mode="ROPE_LLAMA")
        q_new = randn((batch, hq, d), BF16, seed + 1)
        q_static.copy_(q_new)
        graph.replay()
        torch.cuda.synchronize()
        for b, n in enumerate(lens):
            k, v = second.kv(b)
            ref = reference(rope_ref(q_new[b:b + 1], n - 1), rope_ref(k, 0), v)[0]
            assert_close(out_static[b:b + 1], ref, BF16, "replayed ROPE request %d" % b)


def _capture(run):
    """A CUDA graph of ``run()``, warmed up first on a side stream (kernel
    created and planned outside the capture, as torch's docs ask)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    return graph


def test_paged_prefill_graph_replayed_after_replan():
    """A captured paged prefill replays a later plan of the same batch size
    and query rows (other splits, lengths and pages): what a serving loop
    does with FlashInfer's use_cuda_graph wrappers."""
    hq, hkv, d, page, batch = 8, 2, 128, 16, 3
    i32 = dict(dtype=torch.int32, device=DEV)
    w = attn.BatchPrefillWithPagedKVCacheWrapper(
        workspace(), "NHD", use_cuda_graph=True, qo_indptr_buf=torch.empty(batch + 1, **i32),
        paged_kv_indptr_buf=torch.empty(batch + 1, **i32),
        paged_kv_indices_buf=torch.empty(64, **i32),
        paged_kv_last_page_len_buf=torch.empty(batch, **i32), max_pages_per_request=16)
    cases = [([8, 1, 23], [40, 9, 100], 141), ([16, 15, 1], [16, 200, 33], 143)]
    first = Paged(cases[0][1], page, hkv, d, BF16, seed=cases[0][2], extra=30)
    qo = torch.tensor([0] + list(_cumsum(cases[0][0])), **i32)
    w.plan(qo, first.indptr, first.indices, first.last, hq, hkv, d, page, causal=True,
           q_data_type=BF16, kv_data_type=BF16)
    q_static = randn((32, hq, d), BF16, 142)
    out_static = torch.empty_like(q_static)
    graph = _capture(lambda: w.run(q_static, first.cache, out=out_static))
    q_lens, seq_lens, seed = cases[1]
    second = Paged(seq_lens, page, hkv, d, BF16, seed=seed, extra=0)
    first.cache[:second.cache.shape[0]].copy_(second.cache)
    qo = torch.tensor([0] + list(_cumsum(q_lens)), **i32)
    w.plan(qo, second.indptr, second.indices, second.last, hq, hkv, d, page, causal=True,
           q_data_type=BF16, kv_data_type=BF16)
    q_new = randn((32, hq, d), BF16, 144)
    q_static.copy_(q_new)
    graph.replay()
    torch.cuda.synchronize()
    for b in range(batch):
        rows = slice(qo[b].item(), qo[b + 1].item())
        k, v = second.kv(b)
        assert_close(out_static[rows], reference(q_new[rows], k, v)[0], BF16,
                     "replayed paged prefill, request %d" % b)
    with pytest.raises(ValueError, match="more than the 32"):
        w.plan(torch.tensor([0, 1, 2, 40], **i32), second.indptr, second.indices, second.last,
               hq, hkv, d, page, causal=True, q_data_type=BF16, kv_data_type=BF16)


def test_ragged_prefill_graph_replayed_after_replan():
    hq, hkv, d, batch = 8, 2, 64, 2
    i32 = dict(dtype=torch.int32, device=DEV)
    w = attn.BatchPrefillWithRaggedKVCacheWrapper(
        workspace(), "NHD", use_cuda_graph=True, qo_indptr_buf=torch.empty(batch + 1, **i32),
        kv_indptr_buf=torch.empty(batch + 1, **i32))
    q = randn((40, hq, d), BF16, 151)
    k = randn((100, hkv, d), BF16, 152)
    v = randn((100, hkv, d), BF16, 153)
    out = torch.empty_like(q)
    w.plan(torch.tensor([0, 10, 40], **i32), torch.tensor([0, 10, 100], **i32), hq, hkv, d,
           causal=True, q_data_type=BF16)
    graph = _capture(lambda: w.run(q, k, v, out=out))
    qo, kvp = [0, 33, 40], [0, 70, 100]
    w.plan(torch.tensor(qo, **i32), torch.tensor(kvp, **i32), hq, hkv, d, causal=True,
           q_data_type=BF16)
    q.copy_(randn((40, hq, d), BF16, 154))
    graph.replay()
    torch.cuda.synchronize()
    for b in range(batch):
        rows, keys = slice(qo[b], qo[b + 1]), slice(kvp[b], kvp[b + 1])
        assert_close(out[rows], reference(q[rows], k[keys], v[keys])[0], BF16,
                     "replayed ragged prefill, request %d" % b)


@pytest.mark.parametrize("kv_dtype", [torch.float8_e4m3fn, torch.float8_e5m2],
                         ids=["e4m3", "e5m2"])
def test_ragged_prefill_fp8_kv(kv_dtype):
    """Ragged k/v rows in FP8 with per-tensor scales (dequantized in the
    kernel), bf16 queries and output."""
    hq, hkv, d = 8, 2, 128
    q_lens, kv_lens = [9, 64], [30, 64]
    qo = torch.tensor([0] + list(_cumsum(q_lens)), dtype=torch.int32, device=DEV)
    kvp = torch.tensor([0] + list(_cumsum(kv_lens)), dtype=torch.int32, device=DEV)
    q = randn((sum(q_lens), hq, d), BF16, 161)
    k_scale, v_scale = 0.25, 0.5
    k8 = (randn((sum(kv_lens), hkv, d), torch.float32, 162) / k_scale).to(kv_dtype)
    v8 = (randn((sum(kv_lens), hkv, d), torch.float32, 163) / v_scale).to(kv_dtype)
    w = attn.BatchPrefillWithRaggedKVCacheWrapper(workspace(), "NHD")
    w.plan(qo, kvp, hq, hkv, d, causal=True, q_data_type=BF16, kv_data_type=kv_dtype)
    out = w.run(q, k8, v8, k_scale=k_scale, v_scale=v_scale)
    k, v = k8.double() * k_scale, v8.double() * v_scale
    for b in range(2):
        rows, keys = slice(qo[b].item(), qo[b + 1].item()), slice(kvp[b].item(), kvp[b + 1].item())
        assert_close(out[rows], reference(q[rows], k[keys], v[keys])[0], BF16,
                     "ragged FP8 request %d" % b)


def test_cascade_graph_replayed_after_replan():
    hq, hkv, d, page, batch = 8, 2, 128, 16, 4
    i32 = dict(dtype=torch.int32, device=DEV)
    w = attn.MultiLevelCascadeAttentionWrapper(
        2, workspace(), "NHD", use_cuda_graph=True,
        qo_indptr_buf_arr=[torch.empty(2, **i32), torch.empty(batch + 1, **i32)],
        paged_kv_indptr_buf_arr=[torch.empty(2, **i32), torch.empty(batch + 1, **i32)],
        paged_kv_indices_buf_arr=[torch.empty(8, **i32), torch.empty(64, **i32)],
        paged_kv_last_page_len_buf_arr=[torch.empty(1, **i32), torch.empty(batch, **i32)])
    q = randn((batch, hq, d), BF16, 171)
    out = torch.empty_like(q)
    first = _cascade_case(batch, 2, [3, 20, 1, 16], page, 172, pages=16)
    w.plan(*first.arrays, hq, hkv, d, page, q_data_type=BF16)
    graph = _capture(lambda: w.run(q, first.cache, out=out))
    second = _cascade_case(batch, 5, [40, 1, 17, 8], page, 173, pages=16)
    first.cache.copy_(second.cache)
    w.plan(*second.arrays, hq, hkv, d, page, q_data_type=BF16)
    q.copy_(randn((batch, hq, d), BF16, 174))
    graph.replay()
    torch.cuda.synchronize()
    for b in range(batch):
        k, v = second.kv(b)
        assert_close(out[b:b + 1], reference(q[b:b + 1], k, v)[0], BF16,
                     "replayed cascade request %d" % b)


def test_runtime_only_library_serves_an_attn_aot_library(tmp_path):
    """libattn_runtime_c.so (no compiler) from Python: a decode served from a
    library attn-aot builds here, checked against fp64 in a fresh process
    (the library is loaded once per process); a variant the library lacks
    is an error naming it, not a compile."""
    import json
    import os
    import subprocess
    import sys
    from attn import _lib
    lib_dir = os.path.dirname(_lib.loaded_path())
    runtime = os.path.join(lib_dir, "libattn_runtime_c.so")
    tool = os.environ.get("ATTN_AOT_TOOL") or os.path.join(lib_dir, "..", "bin", "attn-aot")
    if not os.path.exists(runtime) or not os.path.exists(tool):
        pytest.skip("needs libattn_runtime_c.so beside %s and attn-aot (ATTN_AOT_TOOL): not found"
                    % _lib.loaded_path())
    major, minor = torch.cuda.get_device_capability()
    arch = {(9, 0): "sm_90a", (8, 9): "sm_89"}.get((major, minor), "sm_80")
    (tmp_path / "kernels.json").write_text(json.dumps(
        {"decode": [{"q_type": "bf16", "kv_type": "bf16", "num_q_heads": 8, "num_kv_heads": 2,
                     "head_dim": 128, "page_size": 16}]}))
    subprocess.run([tool, str(tmp_path / "kernels.json"), "--arch", arch, "-o",
                    str(tmp_path / "lib")], check=True)
    script = """
import math, sys, torch, attn
from attn import _lib
assert not _lib.load().attn_has_compiler(), "the runtime-only library has no compiler"
dev = torch.device("cuda")
g = torch.Generator(device=dev).manual_seed(7)
cache = torch.randn(9, 2, 16, 2, 128, generator=g, device=dev).to(torch.bfloat16)
q = torch.randn(2, 8, 128, generator=g, device=dev).to(torch.bfloat16)
pages, lens = [[4, 0, 7], [2]], [40, 5]
i32 = dict(dtype=torch.int32, device=dev)
w = attn.BatchDecodeWithPagedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8, device=dev))
w.plan(torch.tensor([0, 3, 4], **i32), torch.tensor([4, 0, 7, 2], **i32),
       torch.tensor([8, 5], **i32), 8, 2, 128, 16, q_data_type=torch.bfloat16)
out = w.run(q, cache)
err = 0.0
for b in range(2):
    kv = cache[pages[b]].double()
    k = kv[:, 0].reshape(-1, 2, 128)[:lens[b]].repeat_interleave(4, 1)
    v = kv[:, 1].reshape(-1, 2, 128)[:lens[b]].repeat_interleave(4, 1)
    p = torch.softmax(torch.einsum("hd,khd->hk", q[b].double(), k) / math.sqrt(128), -1)
    err = max(err, (torch.einsum("hk,khd->hd", p, v) - out[b].double()).abs().max().item())
print("runtime-only decode max error", err)
assert err < 2e-2, err
try:
    w.plan(torch.tensor([0, 3, 4], **i32), torch.tensor([4, 0, 7, 2], **i32),
           torch.tensor([8, 5], **i32), 8, 1, 128, 16, q_data_type=torch.bfloat16)
    w.run(q, cache[:, :, :, :1].contiguous())
except (attn.AttnError, NotImplementedError, ValueError) as e:
    print("missing variant:", e)
    sys.exit(0)
sys.exit("a variant missing from the AOT library ran")
"""
    env = dict(os.environ, ATTN_LIBRARY=runtime, ATTN_AOT_LIBRARY=str(tmp_path / "lib"),
               ATTN_CACHE_DISABLE="1")
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "missing variant:" in r.stdout

def test_run_on_a_given_stream():
    hq, hkv, d, page = 8, 2, 64, 16
    pc = Paged([30, 70], page, hkv, d, BF16, seed=121)
    q = randn((2, hq, d), BF16, 122)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    w = attn.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD")
    w.plan(pc.indptr, pc.indices, pc.last, hq, hkv, d, page, q_data_type=BF16, stream=s)
    out = torch.empty_like(q)
    w.run(q, pc.cache, out=out, stream=s)
    s.synchronize()
    for b in range(2):
        k, v = pc.kv(b)
        assert_close(out[b:b + 1], reference(q[b:b + 1], k, v)[0], BF16, "stream request %d" % b)


class CAI:
    """A CUDA array known only by __cuda_array_interface__."""

    def __init__(self, t):
        self._t = t
        self.__cuda_array_interface__ = t.__cuda_array_interface__


class DLPack:
    """A CUDA array known only by DLPack."""

    def __init__(self, t):
        self._t = t

    def __dlpack__(self, stream=None):
        return self._t.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self._t.__dlpack_device__()


def test_foreign_arrays_as_inputs():
    hq, hkv, d, page = 8, 2, 128, 16
    for dtype in (F16, BF16):
        pc = Paged([40, 90], page, hkv, d, dtype, seed=131)
        q = randn((2, hq, d), dtype, 132)
        out = torch.empty_like(q)
        w = attn.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD")
        w.plan(pc.indptr, pc.indices, pc.last, hq, hkv, d, page, q_data_type=dtype)
        # torch has no bfloat16 __cuda_array_interface__: bf16 goes by DLPack.
        q_in = CAI(q) if dtype == F16 else DLPack(q)
        res = w.run(q_in, DLPack(pc.cache), out=DLPack(out))
        assert isinstance(res, DLPack)
        torch.cuda.synchronize()
        for b in range(2):
            k, v = pc.kv(b)
            assert_close(out[b:b + 1], reference(q[b:b + 1], k, v)[0], dtype,
                         "foreign %s request %d" % (dtype, b))
    w2 = attn.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD")
    pc = Paged([4], page, hkv, d, F16, seed=133)
    w2.plan(pc.indptr, pc.indices, pc.last, hq, hkv, d, page, q_data_type=F16)
    with pytest.raises(TypeError, match="q: expected dtype float16, got bfloat16"):
        w2.run(DLPack(randn((1, hq, d), BF16, 1)), pc.cache)
    with pytest.raises(ValueError, match=r"q: expected shape \(1, 8, 128\)"):
        w2.run(randn((2, hq, d), F16, 1), pc.cache)


# --- the vLLM backend ----------------------------------------------------------------------


def _vllm_step(kv_dtype="auto", seed=141):
    """A mixed step: two prefills (a prompt, a chunk after 30 cached tokens)
    then three one-token decodes, over a vLLM cache with history."""
    h, hkv, d, bs, nb = 8, 2, 128, 16, 64
    query_lens = [20, 12, 1, 1, 1]
    context_lens = [0, 30, 40, 7, 16]
    perm = torch.randperm(nb, generator=torch.Generator().manual_seed(seed)).tolist()
    tables, at = [], 0
    for q, c in zip(query_lens, context_lens):
        n = -(-(q + c) // bs)
        tables.append(perm[at:at + n])
        at += n
    fp8 = kv_dtype != "auto"
    cache = torch.zeros((2, nb, bs, hkv, d), dtype=torch.uint8 if fp8 else BF16, device=DEV)
    ks, vs = 0.5, 2.0
    hist_k = randn((sum(context_lens), hkv, d), BF16, seed + 1)
    hist_v = randn((sum(context_lens), hkv, d), BF16, seed + 2)
    flat = cache.view(2, nb * bs, hkv, d)
    at = 0
    for b, c in enumerate(context_lens):
        slots = torch.tensor([tables[b][p // bs] * bs + p % bs for p in range(c)], device=DEV,
                             dtype=torch.long)
        if fp8:
            flat[0, slots] = (hist_k[at:at + c].float() / ks).to(torch.float8_e4m3fn).view(
                torch.uint8)
            flat[1, slots] = (hist_v[at:at + c].float() / vs).to(torch.float8_e4m3fn).view(
                torch.uint8)
        else:
            flat[0, slots] = hist_k[at:at + c]
            flat[1, slots] = hist_v[at:at + c]
        at += c
    tokens = sum(query_lens)
    query = randn((tokens, h, d), BF16, seed + 3)
    # key and value as vLLM slices them out of one qkv projection: padded rows.
    qkv = randn((tokens, (h + 2 * hkv) * d), BF16, seed + 4)
    key = qkv[:, h * d:(h + hkv) * d].view(tokens, hkv, d)
    value = qkv[:, (h + hkv) * d:].view(tokens, hkv, d)
    layer = types.SimpleNamespace(_k_scale=torch.tensor([ks], device=DEV),
                                  _v_scale=torch.tensor([vs], device=DEV))
    return dict(h=h, hkv=hkv, d=d, bs=bs, query_lens=query_lens, context_lens=context_lens,
                tables=tables, cache=cache, query=query, key=key, value=value, layer=layer,
                fp8=fp8, scales=(ks, vs))


def _check_vllm_step(st, out, what, **ref_kw):
    hkv, d, bs = st["hkv"], st["d"], st["bs"]
    cache = st["cache"]
    if st["fp8"]:
        ks, vs = st["scales"]
        vals = cache.view(torch.float8_e4m3fn).double()
        vals = torch.stack([vals[0] * ks, vals[1] * vs])
    else:
        vals = cache.double()
    flat = vals.view(2, -1, hkv, d)
    row = 0
    for b, (q, c) in enumerate(zip(st["query_lens"], st["context_lens"])):
        n = q + c
        slots = torch.tensor([st["tables"][b][p // bs] * bs + p % bs for p in range(n)],
                             device=DEV)
        k, v = flat[0, slots], flat[1, slots]
        new = slice(row, row + q)
        if not st["fp8"]:  # the appended rows are the step's keys and values
            assert torch.equal(cache[0].view(-1, hkv, d)[slots[c:]], st["key"][new]), b
            assert torch.equal(cache[1].view(-1, hkv, d)[slots[c:]], st["value"][new]), b
        else:
            want = (st["key"][new].float() / st["scales"][0]).to(torch.float8_e4m3fn)
            got = cache[0].view(-1, hkv, d)[slots[c:]]
            assert (got == want.view(torch.uint8)).float().mean().item() > 0.999, b
        ref = reference(st["query"][new], k, v, **ref_kw)[0]
        assert_close(out[new], ref, BF16, "%s request %d" % (what, b))
        row += q


@pytest.mark.parametrize("kv_dtype", ["auto", "fp8"])
def test_vllm_forward_mixed_batch(kv_dtype):
    st = _vllm_step(kv_dtype)
    assert vb.AttnBackend.get_kv_cache_shape(64, 16, 2, 128) == tuple(st["cache"].shape)
    builder = vb.AttnMetadataBuilder(block_size=16, max_num_seqs=16, max_num_batched_tokens=256,
                                     max_model_len=1024, dtype=BF16, device=DEV)
    impl = vb.AttnImpl(st["h"], st["d"], 1.0 / math.sqrt(st["d"]), st["hkv"],
                       kv_cache_dtype=kv_dtype)
    md = builder.build_step(st["query_lens"], st["context_lens"], st["tables"])
    assert (md.num_prefills, md.num_decodes) == (2, 3)
    out = torch.empty_like(st["query"])
    res = impl.forward(st["layer"], st["query"], st["key"], st["value"], st["cache"], md,
                       output=out)
    assert res is out
    torch.cuda.synchronize()
    _check_vllm_step(st, out, "vLLM " + kv_dtype)


def _vllm_token_out(invariant, requests, at, seed):
    """One vLLM step through AttnImpl.forward, its mode set by
    VLLM_BATCH_INVARIANT: ``requests`` are (rows [n, 2 + h / hkv, hkv, d]
    of K, V and the q heads for positions 0..n-1, query_len), the last
    query_len rows new; the output of request ``at``'s last token."""
    h, hkv, d, bs = 8, 2, 128, 16
    prev = os.environ.get("VLLM_BATCH_INVARIANT")
    os.environ["VLLM_BATCH_INVARIANT"] = "1" if invariant else "0"
    try:
        pages = sum(-(-rows.shape[0] // bs) for rows, _ in requests)
        perm = torch.randperm(pages + 3, generator=torch.Generator().manual_seed(seed)).tolist()
        cache = torch.zeros((2, pages + 3, bs, hkv, d), dtype=BF16, device=DEV)
        flat = cache.view(2, -1, hkv, d)
        tables, qs, ks, vs, qlens, ctx = [], [], [], [], [], []
        for rows, q_len in requests:
            n = rows.shape[0]
            table = [perm.pop() for _ in range(-(-n // bs))]
            tables.append(table)
            slots = torch.tensor([table[p // bs] * bs + p % bs for p in range(n - q_len)],
                                 device=DEV, dtype=torch.long)
            flat[0, slots] = rows[:n - q_len, 0]
            flat[1, slots] = rows[:n - q_len, 1]
            ks.append(rows[n - q_len:, 0])
            vs.append(rows[n - q_len:, 1])
            qs.append(rows[n - q_len:, 2:].reshape(q_len, h, d))
            qlens.append(q_len)
            ctx.append(n - q_len)
        builder = vb.AttnMetadataBuilder(block_size=bs, max_num_seqs=64,
                                         max_num_batched_tokens=4096, max_model_len=8192,
                                         dtype=BF16, device=DEV)
        impl = vb.AttnImpl(h, d, 1.0 / math.sqrt(d), hkv)
        md = builder.build_step(qlens, ctx, tables)
        query = torch.cat(qs)
        out = torch.empty_like(query)
        layer = types.SimpleNamespace(_k_scale=torch.ones(1, device=DEV),
                                      _v_scale=torch.ones(1, device=DEV))
        impl.forward(layer, query, torch.cat(ks), torch.cat(vs), cache, md, output=out)
        torch.cuda.synchronize()
        return out[sum(qlens[:at + 1]) - 1].clone()
    finally:
        if prev is None:
            os.environ.pop("VLLM_BATCH_INVARIANT", None)
        else:
            os.environ["VLLM_BATCH_INVARIANT"] = prev


def test_vllm_batch_invariant_mode_gives_a_token_the_same_bits(monkeypatch):
    # One request's token at position 3000 decoded alone, as the last row
    # of a 64-token chunk, and as a decode or a chunk among other requests:
    # the same bits with VLLM_BATCH_INVARIANT=1; without it the decode and
    # the chunk differ (the test can fail).
    monkeypatch.delitem(sys.modules, "vllm.envs", raising=False)
    h, hkv, d = 8, 2, 128
    width = 2 + h // hkv  # K, V and the q heads of each KV head
    mine = randn((3001, width, hkv, d), BF16, 301)

    def others(seed, count):
        g = torch.Generator().manual_seed(seed)
        reqs = []
        for i in range(count):
            q_len = 1 if i % 2 else 1 + int(torch.randint(0, 40, (1,), generator=g))
            n = q_len + int(torch.randint(0, 2000, (1,), generator=g))
            reqs.append((randn((n, width, hkv, d), BF16, seed * 100 + i), q_len))
        return reqs

    for invariant in (True, False):
        alone = _vllm_token_out(invariant, [(mine, 1)], 0, 1)
        as_chunk = _vllm_token_out(invariant, [(mine, 64)], 0, 2)
        if not invariant:
            assert not torch.equal(alone, as_chunk), "the default mode could not fail this test"
            continue
        assert torch.equal(alone, as_chunk)
        for trial, q_len in enumerate((1, 64, 1, 17)):
            # Prefills come first in a vLLM step, decodes last.
            reqs = others(10 + trial, 3 + 5 * trial)
            reqs.insert(trial % len(reqs), (mine, q_len))
            reqs.sort(key=lambda r: r[1] == 1)
            at = next(i for i, r in enumerate(reqs) if r[0] is mine)
            got = _vllm_token_out(True, reqs, at, 20 + trial)
            assert torch.equal(got, alone), "trial %d" % trial
        ref = reference(mine[3000:, 2:].reshape(1, h, d), mine[:, 0], mine[:, 1])[0]
        assert_close(alone.view(1, h, d), ref, BF16, "batch-invariant decode")


def test_vllm_forward_with_window_softcap_and_sinks():
    st = _vllm_step(seed=171)
    builder = vb.AttnMetadataBuilder(block_size=16, max_num_seqs=16, max_num_batched_tokens=256,
                                     max_model_len=1024, dtype=BF16, device=DEV)
    sinks = randn((st["h"],), BF16, 172, scale=2.0)  # a model parameter, bf16
    impl = vb.AttnImpl(st["h"], st["d"], 1.0 / math.sqrt(st["d"]), st["hkv"],
                       sliding_window=25, logits_soft_cap=20.0, sinks=sinks)
    md = builder.build_step(st["query_lens"], st["context_lens"], st["tables"])
    out = impl.forward(st["layer"], st["query"], st["key"], st["value"], st["cache"], md)
    torch.cuda.synchronize()
    _check_vllm_step(st, out, "vLLM window/softcap/sinks", window_left=24, softcap=20.0,
                     sinks=sinks.float())


def test_vllm_decode_graph_replayed_after_rebuild():
    """UNIFORM_SINGLE_TOKEN_DECODE: a decode-only step's forward captured in
    a graph replays the next step after build_step() re-planned it."""
    h, hkv, d, bs, nb = 8, 2, 128, 16, 32
    tables = [[3, 9, 4], [0, 1, 2, 5], [7]]
    contexts = [10, 40, 7]
    cache = randn((2, nb, bs, hkv, d), BF16, 181)
    builder = vb.AttnMetadataBuilder(block_size=bs, max_num_seqs=4, max_num_batched_tokens=64,
                                     max_model_len=256, dtype=BF16, device=DEV)
    impl = vb.AttnImpl(h, d, 1.0 / math.sqrt(d), hkv)
    layer = types.SimpleNamespace()
    q = torch.zeros((3, h, d), dtype=BF16, device=DEV)
    k = torch.zeros((3, hkv, d), dtype=BF16, device=DEV)
    v = torch.zeros((3, hkv, d), dtype=BF16, device=DEV)
    out = torch.zeros_like(q)
    md = builder.build_step([1, 1, 1], contexts, tables, for_graph=True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        impl.forward(layer, q, k, v, cache, md, output=out)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        impl.forward(layer, q, k, v, cache, md, output=out)
    # The next step: one more token each (new lengths, same tables).
    contexts = [c + 1 for c in contexts]
    md2 = builder.build_step([1, 1, 1], contexts, tables, for_graph=True)
    assert md2.num_decodes == 3
    q.copy_(randn((3, h, d), BF16, 182))
    k.copy_(randn((3, hkv, d), BF16, 183))
    v.copy_(randn((3, hkv, d), BF16, 184))
    graph.replay()
    torch.cuda.synchronize()
    flat = cache.view(2, -1, hkv, d).double()
    for b in range(3):
        n = contexts[b] + 1
        slots = torch.tensor([tables[b][p // bs] * bs + p % bs for p in range(n)], device=DEV)
        assert torch.equal(cache.view(2, -1, hkv, d)[0, slots[-1]], k[b]), b
        ref = reference(q[b:b + 1], flat[0, slots], flat[1, slots])[0]
        assert_close(out[b:b + 1], ref, BF16, "vLLM graph request %d" % b)


def test_vllm_build_from_common_metadata():
    """The path vLLM takes: CommonAttentionMetadata's tensors, 2-D output."""
    st = _vllm_step(seed=151)
    ql, cl = st["query_lens"], st["context_lens"]
    n = len(ql)
    width = max(len(t) for t in st["tables"])
    bt = torch.zeros((n, width + 3), dtype=torch.int32, device=DEV)
    for b, t in enumerate(st["tables"]):
        bt[b, :len(t)] = torch.tensor(t)
    slots = [st["tables"][b][p // 16] * 16 + p % 16 for b in range(n)
             for p in range(cl[b], cl[b] + ql[b])]
    qsl = torch.tensor([0] + list(_cumsum(ql)), dtype=torch.int32)
    seq = torch.tensor([q + c for q, c in zip(ql, cl)], dtype=torch.int32)
    cm = types.SimpleNamespace(
        num_reqs=n, num_actual_tokens=sum(ql), query_start_loc_cpu=qsl,
        query_start_loc=qsl.to(DEV), seq_lens=seq.to(DEV), _seq_lens_cpu=seq,
        block_table_tensor=bt, slot_mapping=torch.tensor(slots, dtype=torch.int64, device=DEV),
        causal=True)
    vllm_config = types.SimpleNamespace(
        scheduler_config=types.SimpleNamespace(max_num_seqs=8, max_num_batched_tokens=128),
        model_config=types.SimpleNamespace(max_model_len=512, dtype=BF16),
        compilation_config=None)
    spec = types.SimpleNamespace(block_size=16)
    builder = vb.AttnBackend.get_builder_cls()(spec, ["layer.0"], vllm_config, DEV)
    impl = vb.AttnBackend.get_impl_cls()(st["h"], st["d"], 1.0 / math.sqrt(st["d"]), st["hkv"],
                                         None, None, "auto")
    md = builder.build(0, cm)
    assert md.num_prefills == 2 and md.num_decodes == 3
    out = torch.zeros(sum(ql), st["h"] * st["d"], dtype=BF16, device=DEV)
    q2 = st["query"].view(sum(ql), -1)
    impl.forward(st["layer"], q2, st["key"], st["value"], st["cache"], md, output=out)
    torch.cuda.synchronize()
    _check_vllm_step(st, out.view(-1, st["h"], st["d"]), "vLLM common metadata")
    assert impl.forward(st["layer"], q2, None, None, st["cache"], None, output=out) is out


def test_vllm_copy_and_swap_blocks():
    nb, bs, hkv, d = 12, 16, 2, 64
    layers = [randn((2, nb, bs, hkv, d), BF16, 160 + i) for i in range(2)]
    before = [x.clone() for x in layers]
    vb.AttnBackend.copy_blocks(layers, torch.tensor([[1, 5], [2, 6]], dtype=torch.int64))
    dev_pairs = torch.tensor([[3, 9]], dtype=torch.int64, device=DEV)
    vb.AttnBackend.copy_blocks(layers, dev_pairs)
    torch.cuda.synchronize()
    for x, y in zip(layers, before):
        expect = y.clone()
        expect[:, 5], expect[:, 6], expect[:, 9] = y[:, 1], y[:, 2], y[:, 3]
        assert torch.equal(x, expect)
    with pytest.raises(ValueError):
        vb.AttnBackend.copy_blocks(layers, torch.tensor([[1, 5], [2, 5]], dtype=torch.int64))
    host = torch.zeros((2, 4, bs, hkv, d), dtype=BF16).pin_memory()
    vb.AttnBackend.swap_blocks(layers[0], host, torch.tensor([[3, 0], [4, 1], [7, 3]]))
    torch.cuda.synchronize()
    assert torch.equal(host[:, 0], layers[0][:, 3].cpu())
    assert torch.equal(host[:, 1], layers[0][:, 4].cpu())
    assert torch.equal(host[:, 3], layers[0][:, 7].cpu())
    back = torch.zeros_like(layers[0])
    vb.AttnBackend.swap_blocks(host, back, torch.tensor([[0, 10], [1, 11]]))
    torch.cuda.synchronize()
    assert torch.equal(back[:, 10], layers[0][:, 3]) and torch.equal(back[:, 11], layers[0][:, 4])


# --- page ids past the cache, handles after close -------------------------------------------


def _bad_ids(pc, value, at=-1):
    ids = pc.indices.clone()
    ids[at] = value
    return ids


def test_decode_page_ids_past_the_cache_are_refused_before_any_launch():
    """A page id past the cache (or below 0) would be read out of bounds,
    an illegal address that loses the process's CUDA context: plan() checks
    the ids, run() checks them against the cache it is given."""
    hq, hkv, d, page = 8, 2, 128, 16
    pc = Paged([17, 40], page, hkv, d, BF16, seed=201, extra=0)
    pages = pc.cache.shape[0]
    q = randn((2, hq, d), BF16, 202)
    w = attn.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD")
    w.plan(pc.indptr, _bad_ids(pc, pages), pc.last, hq, hkv, d, page, q_data_type=BF16)
    with pytest.raises(ValueError, match=r"indices\[%d\] = %d: past the end of paged_kv_cache, "
                                         r"which has %d pages" % (pc.indices.numel() - 1, pages,
                                                                   pages)):
        w.run(q, pc.cache)
    with pytest.raises(ValueError, match=r"indices\[0\] = -1: a page id must be >= 0"):
        w.plan(pc.indptr, _bad_ids(pc, -1, 0), pc.last, hq, hkv, d, page, q_data_type=BF16)
    wide = pc.indices.to(torch.int64)
    wide[1] = 2 ** 32  # the int32 copy would wrap it to 0
    with pytest.raises(ValueError, match=r"indices\[1\] = 4294967296: a page id must fit int32"):
        w.plan(pc.indptr, wide, pc.last, hq, hkv, d, page, q_data_type=BF16)
    # The process's CUDA context is intact: a good plan runs.
    w.plan(pc.indptr, pc.indices, pc.last, hq, hkv, d, page, q_data_type=BF16)
    out = w.run(q, pc.cache)
    torch.cuda.synchronize()
    for b in range(2):
        k, v = pc.kv(b)
        assert_close(out[b:b + 1], reference(q[b:b + 1], k, v)[0], BF16, "after refusals")


def test_block_tables_are_checked_at_plan():
    hq, hkv, d, page = 8, 2, 128, 16
    pc = Paged([17, 40], page, hkv, d, BF16, seed=203, extra=0)
    pages = pc.cache.shape[0]
    rows = [pc.pages[0] + [0, 0], pc.pages[1] + [0]]
    bt = torch.tensor(rows, dtype=torch.int32, device=DEV)
    lens = torch.tensor([17, 40], dtype=torch.int32)
    q = randn((2, hq, d), BF16, 204)
    w = attn.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD")
    w.plan(None, None, None, hq, hkv, d, page, q_data_type=BF16, block_tables=bt, seq_lens=lens)
    out = w.run(q, pc.cache)
    k, v = pc.kv(1)
    assert_close(out[1:2], reference(q[1:2], k, v)[0], BF16, "block_tables")
    bad = bt.clone()
    bad[1, 2] = pages + 5  # read: request 1 has 3 pages
    w.plan(None, None, None, hq, hkv, d, page, q_data_type=BF16, block_tables=bad, seq_lens=lens)
    with pytest.raises(ValueError, match=r"block_tables\[1, 2\] = %d: past the end" % (pages + 5)):
        w.run(q, pc.cache)
    unread = bt.clone()
    unread[0, 3] = -7  # past request 0's 2 pages: never read
    w.plan(None, None, None, hq, hkv, d, page, q_data_type=BF16, block_tables=unread,
           seq_lens=lens)
    w.run(q, pc.cache)
    unread[0, 1] = -7
    with pytest.raises(ValueError, match=r"block_tables\[0, 1\] = -7: a page id must be >= 0"):
        w.plan(None, None, None, hq, hkv, d, page, q_data_type=BF16, block_tables=unread,
               seq_lens=lens)
    with pytest.raises(ValueError, match=r"seq_lens\[1\] = 65: needs 5 pages of 16 tokens, but "
                                         r"block_tables has 4 columns"):
        w.plan(None, None, None, hq, hkv, d, page, q_data_type=BF16, block_tables=bt,
               seq_lens=torch.tensor([17, 65], dtype=torch.int32))
    torch.cuda.synchronize()


def test_paged_prefill_and_cascade_page_ids_past_the_cache_are_refused():
    hq, hkv, d, page = 8, 2, 128, 16
    pc = Paged([27, 61], page, hkv, d, BF16, seed=205, extra=0)
    pages = pc.cache.shape[0]
    qo = torch.tensor([0, 7, 23], dtype=torch.int32, device=DEV)
    q = randn((23, hq, d), BF16, 206)
    w = attn.BatchPrefillWithPagedKVCacheWrapper(workspace(), "NHD")
    w.plan(qo, pc.indptr, _bad_ids(pc, pages + 1, 2), pc.last, hq, hkv, d, page, causal=True,
           q_data_type=BF16)
    with pytest.raises(ValueError, match=r"paged_kv_indices\[2\] = %d: past the end of "
                                         r"paged_kv_cache" % (pages + 1)):
        w.run(q, pc.cache)
    case = _cascade_case(3, 2, [1, 9, 30], page, 207)
    total = case.cache.shape[0]
    arrays = [list(a) for a in case.arrays]
    arrays[2][1] = arrays[2][1].clone()
    arrays[2][1][0] = total
    c = attn.MultiLevelCascadeAttentionWrapper(2, workspace(), "NHD")
    c.plan(*arrays, hq, hkv, d, page, q_data_type=BF16)
    with pytest.raises(ValueError, match=r"paged_kv_indices_arr\[1\]\[0\] = %d: past the end"
                                         % total):
        c.run(randn((3, hq, d), BF16, 208), case.cache)
    torch.cuda.synchronize()


def test_graph_mode_plan_checks_the_captured_cache():
    """A captured run() replays a later plan with no Python in between:
    under use_cuda_graph, plan() checks the new ids against the cache the
    last run() read."""
    hq, hkv, d, page, batch = 8, 2, 128, 16, 2
    w = _graph_decode_wrapper(batch, 64, 8)
    pc = Paged([17, 40], page, hkv, d, BF16, seed=209, extra=0)
    pages = pc.cache.shape[0]
    w.plan(pc.indptr, pc.indices, pc.last, hq, hkv, d, page, q_data_type=BF16)
    w.run(randn((batch, hq, d), BF16, 210), pc.cache)
    with pytest.raises(ValueError, match=r"indices\[0\] = %d: past the end of the paged cache "
                                         r"this CUDA-graph wrapper's run\(\) reads \(%d pages\)"
                                         % (pages, pages)):
        w.plan(pc.indptr, _bad_ids(pc, pages, 0), pc.last, hq, hkv, d, page, q_data_type=BF16)
    torch.cuda.synchronize()


def test_vllm_forward_refuses_block_ids_past_the_cache():
    st = _vllm_step()
    builder = vb.AttnMetadataBuilder(block_size=16, max_num_seqs=16, max_num_batched_tokens=256,
                                     max_model_len=1024, dtype=BF16, device=DEV)
    impl = vb.AttnImpl(st["h"], st["d"], 1.0 / math.sqrt(st["d"]), st["hkv"])
    md = builder.build_step(st["query_lens"], st["context_lens"], st["tables"])
    small = st["cache"][:, :md.max_page]  # one block short of the largest id
    with pytest.raises(ValueError, match=r"block_tables\[\d+\]\[\d+\] = %d: past the end of "
                                         r"kv_cache, which has %d blocks"
                                         % (md.max_page, md.max_page)):
        impl.forward(st["layer"], st["query"], st["key"], st["value"], small, md)
    torch.cuda.synchronize()


def test_kernel_handles_after_close():
    from attn._kernels import Decode, DecodeVariant
    h = Decode(DEV.index, DecodeVariant(q_type="bfloat16", kv_type="bfloat16", num_q_heads=8,
                                        num_kv_heads=2, head_dim=128, page_size=16), 4)
    h.plan([17], False, 0)
    h.close()
    h.close()  # destroys once
    with pytest.raises(RuntimeError, match=r"this Decode handle is closed"):
        h.plan([17], False, 0)
    with pytest.raises(TypeError, match="cannot be copied"):
        __import__("copy").copy(h)


# --- MLA decode -----------------------------------------------------------------


def mla_reference(q_nope, q_pe, ckv, kpe, lens, q_len, causal, scale):
    """docs/semantics.md's MLA in fp64: q [rows, H, R] / [rows, H, P]
    against each request's latent rows ckv[b] [len, R] and RoPE rows kpe[b]
    [len, P] -> out [rows, H, R], natural-log LSE [rows, H]."""
    outs, lses = [], []
    for b, n in enumerate(lens):
        c, k = ckv[b].double(), kpe[b].double()
        for t in range(q_len):
            row = b * q_len + t
            s = (q_nope[row].double() @ c.T + q_pe[row].double() @ k.T) * scale  # [H, n]
            if causal:
                s[:, n - q_len + t + 1:] = float("-inf")
            lse = torch.logsumexp(s, dim=-1)
            outs.append(torch.softmax(s, dim=-1) @ c)
            lses.append(lse)
    return torch.stack(outs), torch.stack(lses)


@pytest.mark.parametrize("page_size,q_len,one_tensor", [(64, 1, True), (1, 1, False),
                                                        (16, 2, True)])
def test_mla_decode_wrapper(page_size, q_len, one_tensor):
    heads, rank, rope = 16, 512, 64
    lens = [q_len, 200, 1000]
    pages_of = [(n + page_size - 1) // page_size for n in lens]
    num_pages = sum(pages_of) + 3
    perm = torch.randperm(num_pages, generator=torch.Generator().manual_seed(3)).tolist()
    kv_indptr, kv_indices, at = [0], [], 0
    for n in pages_of:
        kv_indices += perm[at:at + n]
        at += n
        kv_indptr.append(at)
    cache = randn((num_pages, page_size, rank + rope), BF16, 1)
    if one_tensor:  # vLLM's layout: views of one tensor
        ckv, kpe = cache[..., :rank], cache[..., rank:]
    else:
        ckv, kpe = cache[..., :rank].contiguous(), cache[..., rank:].contiguous()
    rows = len(lens) * q_len
    q_nope = randn((rows, heads, rank), BF16, 2, 0.1)
    q_pe = randn((rows, heads, rope), BF16, 4, 0.1)
    scale = 1.0 / math.sqrt(192)
    w = fi.BatchMLAPagedAttentionWrapper(workspace())
    w.plan(torch.arange(0, rows + 1, q_len, dtype=torch.int32), torch.tensor(kv_indptr),
           torch.tensor(kv_indices, dtype=torch.int32, device=DEV), torch.tensor(lens),
           heads, rank, rope, page_size, True, scale, BF16, BF16)
    out, lse = w.run(q_nope, q_pe, ckv, kpe, return_lse=True)
    torch.cuda.synchronize()
    per_ckv, per_kpe = [], []
    for b, n in enumerate(lens):
        ids = torch.tensor(kv_indices[kv_indptr[b]:kv_indptr[b + 1]], device=DEV)
        per_ckv.append(ckv[ids].reshape(-1, rank)[:n])
        per_kpe.append(kpe[ids].reshape(-1, rope)[:n])
    want, want_lse = mla_reference(q_nope, q_pe, per_ckv, per_kpe, lens, q_len, q_len > 1,
                                   scale)
    err = (out.double() - want).norm() / want.norm()
    assert err < TOL[BF16], err
    assert (lse.double() - want_lse * LOG2E).abs().max() < 2e-3


# --- the vLLM MLA backend ------------------------------------------------------------

# DeepSeek V3 at TP8 (prefill q/k of 192, v of 128: PrefillVariant.rope_dim), and a
# smaller MLA whose q/k and v are both 128 (nope 64 + rope 64).
MLA_DIMS = {"deepseek": dict(heads=16, rank=512, rope=64, nope=128, v=128),
            "small": dict(heads=32, rank=256, rope=64, nope=64, v=128)}


def _mla_kv_b_proj(d, seed):
    """kv_b_proj as a model holds it: a bias-free linear layer from the
    latent to every head's k_nope and v (bf16, vLLM's [out, in] weight)."""
    h, r, p, v = d["heads"], d["rank"], d["nope"], d["v"]
    lin = torch.nn.Linear(r, h * (p + v), bias=False, device=DEV, dtype=BF16)
    with torch.no_grad():
        lin.weight.copy_(randn((h * (p + v), r), BF16, seed, scale=r ** -0.5))
    return lin


def _mla_impl(d, kv_b_proj, kv_dtype="auto"):
    """AttnMLAImpl as vLLM's MLA layer constructs it."""
    return vb.AttnMLABackend.get_impl_cls()(
        d["heads"], d["rank"] + d["rope"], 1.0 / math.sqrt(d["nope"] + d["rope"]), 1, None,
        None, kv_dtype, None, "decoder", None, q_lora_rank=None, kv_lora_rank=d["rank"],
        qk_nope_head_dim=d["nope"], qk_rope_head_dim=d["rope"], qk_head_dim=d["nope"] + d["rope"],
        v_head_dim=d["v"], kv_b_proj=kv_b_proj)


def _skip_without_rope_dim(impl):
    if impl._pf_rope_dim and "rope_dim" not in vb.PrefillVariant.__dataclass_fields__:
        pytest.skip("PrefillVariant has no rope_dim yet: MLA prefill with q/k of %d and v of %d "
                    "needs it" % (impl.qk_head_dim, impl.v_head_dim))


def mla_mha_reference(d, q, rows, weight, query_len, scale):
    """MLA of one request in MHA form, in fp64 (DeepSeek's formulation, not
    attn's): ``rows`` [seq_len, rank + rope] its cache rows (latent, then
    the RoPE key), ``weight`` kv_b_proj's [H * (nope + v), rank]; keys
    [latent @ W_UK^T, k_pe] per head, values latent @ W_UV^T; ``q``
    [query_len, H, nope + rope], the last query_len positions, causal.
    Returns [query_len, H, v]."""
    h, r, p = d["heads"], d["rank"], d["nope"]
    w = weight.double().view(h, p + d["v"], r)
    lat, pe = rows[:, :r].double(), rows[:, r:].double()
    n = rows.shape[0]
    k = torch.cat([torch.einsum("hpl,jl->jhp", w[:, :p], lat),
                   pe[:, None, :].expand(n, h, pe.shape[-1])], dim=-1)
    vals = torch.einsum("hvl,jl->jhv", w[:, p:], lat)
    s = torch.einsum("qhd,khd->hqk", q.double(), k) * scale
    qpos = torch.arange(query_len, device=DEV) + (n - query_len)
    s = s.masked_fill(torch.arange(n, device=DEV)[None, None, :] > qpos[None, :, None],
                      float("-inf"))
    return torch.einsum("hqk,khv->qhv", torch.softmax(s, dim=-1), vals)


def _mla_check(out, cache, st, what):
    """The step's new cache rows (its latents and RoPE keys, FP8: x /
    k_scale), then every request's output against the reference over the
    cache rows it holds after the step. A prefill's new tokens are its
    latents as given (vLLM's MHA form up-projects them, not the cache's
    FP8 copies); decodes read every token from the cache."""
    d = st["dims"]
    row_dim = d["rank"] + d["rope"]
    bs = cache.shape[1]
    flat = cache.view(-1, row_dim)
    if st["fp8"]:
        vals = flat.view(torch.float8_e4m3fn).double() * st["k_scale"]
    else:
        vals = flat.double()
    new = torch.cat([st["kv_c"], st["k_pe"].reshape(-1, d["rope"])], dim=-1)
    out3 = out.view(out.shape[0], d["heads"], d["v"])
    row = 0
    for b, (ql, c) in enumerate(zip(st["query_lens"], st["context_lens"])):
        slots = torch.tensor([st["tables"][b][x // bs] * bs + x % bs for x in range(c + ql)],
                             device=DEV)
        mine = slice(row, row + ql)
        if st["fp8"]:
            want = (new[mine].float() / st["k_scale"]).to(torch.float8_e4m3fn).view(torch.uint8)
            assert (flat[slots[c:]] == want).float().mean().item() > 0.999, b
        else:
            assert torch.equal(flat[slots[c:]], new[mine]), "%s: cache rows of request %d" % (
                what, b)
        rows = vals[slots]
        if b >= st["num_decodes"]:
            rows[c:] = new[mine].double()
        ref = mla_mha_reference(d, st["q"][mine], rows, st["kv_b_proj"].weight, ql,
                                st["scale"])
        err = ((out3[mine].double() - ref).norm() / ref.norm()).item()
        assert err < 1e-2, "%s: request %d (%d new, %d cached): relative error %.3g" % (
            what, b, ql, c, err)
        row += ql


def _mla_state(d, kv_dtype, block_size, decode_len, seed, decodes_first=True):
    """A mixed step in vLLM's order: three decodes of ``decode_len`` tokens
    each (vLLM moves them to the front), then a prefill after 70 cached
    tokens and a fresh prompt (or those two first); the cache holds every
    request's history."""
    row_dim = d["rank"] + d["rope"]
    query_lens = [decode_len] * 3 + [20, 13]
    context_lens = [37, 5, 64, 70, 0]
    if not decodes_first:
        query_lens, context_lens = query_lens[3:] + query_lens[:3], [70, 0, 37, 5, 64]
    pages_of = [-(-(q + c) // block_size) for q, c in zip(query_lens, context_lens)]
    nb = sum(pages_of) + 3
    perm = torch.randperm(nb, generator=torch.Generator().manual_seed(seed)).tolist()
    tables, at = [], 0
    for n in pages_of:
        tables.append(perm[at:at + n])
        at += n
    fp8 = kv_dtype != "auto"
    k_scale = 0.5  # a power of two: x / scale and back are exact
    cache = torch.zeros((nb, block_size, row_dim), dtype=torch.uint8 if fp8 else BF16,
                        device=DEV)
    flat = cache.view(-1, row_dim)
    hist = randn((sum(context_lens), row_dim), BF16, seed + 1)
    at = 0
    for b, c in enumerate(context_lens):
        slots = torch.tensor([tables[b][x // block_size] * block_size + x % block_size
                              for x in range(c)], dtype=torch.long, device=DEV)
        if fp8:
            flat[slots] = (hist[at:at + c].float() / k_scale).to(torch.float8_e4m3fn).view(
                torch.uint8)
        else:
            flat[slots] = hist[at:at + c]
        at += c
    tokens = sum(query_lens)
    return dict(dims=d, query_lens=query_lens, context_lens=context_lens, tables=tables,
                num_decodes=3 if decodes_first else 0,
                cache=cache, fp8=fp8, k_scale=k_scale, block_size=block_size,
                kv_b_proj=_mla_kv_b_proj(d, seed + 2),
                scale=1.0 / math.sqrt(d["nope"] + d["rope"]),
                q=randn((tokens, d["heads"], d["nope"] + d["rope"]), BF16, seed + 3),
                kv_c=randn((tokens, d["rank"]), BF16, seed + 4),
                k_pe=randn((tokens, 1, d["rope"]), BF16, seed + 5),  # vLLM's [tokens, 1, rope]
                layer=types.SimpleNamespace(
                    _k_scale=torch.tensor([k_scale], dtype=torch.float32, device=DEV),
                    _k_scale_float=k_scale))


def _mla_common_metadata(st):
    """vLLM's CommonAttentionMetadata of the step (tensors as vLLM keeps
    them)."""
    ql, cl, bs = st["query_lens"], st["context_lens"], st["block_size"]
    n = len(ql)
    bt = torch.zeros((n, max(len(t) for t in st["tables"]) + 2), dtype=torch.int32, device=DEV)
    for b, t in enumerate(st["tables"]):
        bt[b, :len(t)] = torch.tensor(t, dtype=torch.int32)
    slots = [st["tables"][b][x // bs] * bs + x % bs for b in range(n)
             for x in range(cl[b], cl[b] + ql[b])]
    qsl = torch.tensor([0] + list(_cumsum(ql)), dtype=torch.int32)
    seq = torch.tensor([q + c for q, c in zip(ql, cl)], dtype=torch.int32)
    return types.SimpleNamespace(
        num_reqs=n, num_actual_tokens=sum(ql), max_query_len=max(ql),
        max_seq_len=int(seq.max()), query_start_loc_cpu=qsl, query_start_loc=qsl.to(DEV),
        seq_lens=seq.to(DEV), _seq_lens_cpu=seq, block_table_tensor=bt,
        slot_mapping=torch.tensor(slots, dtype=torch.int64, device=DEV), causal=True)


@pytest.mark.parametrize("dims,kv_dtype,block_size,decode_len,via", [
    ("deepseek", "auto", 16, 1, "common"), ("deepseek", "fp8", 64, 1, "common"),
    ("deepseek", "auto", 1, 2, "build_step"), ("small", "auto", 32, 1, "common"),
    ("small", "fp8", 16, 3, "build_step")])
def test_vllm_mla_mixed_step(dims, kv_dtype, block_size, decode_len, via):
    """Decodes (absorbed, attn.mla_decode) and prefills (MHA form: a cached
    context in two chunks merged with the new tokens' causal part) of
    one step through AttnMLAImpl.forward, against fp64 MHA-form MLA."""
    d = MLA_DIMS[dims]
    st = _mla_state(d, kv_dtype, block_size, decode_len, seed=401 + block_size)
    impl = _mla_impl(d, st["kv_b_proj"], kv_dtype)
    _skip_without_rope_dim(impl)
    assert vb.AttnMLABackend.get_kv_cache_shape(st["cache"].shape[0], block_size, 1,
                                                d["rank"] + d["rope"], kv_dtype) == \
        tuple(st["cache"].shape)
    vllm_config = types.SimpleNamespace(
        scheduler_config=types.SimpleNamespace(max_num_seqs=8, max_num_batched_tokens=256),
        model_config=types.SimpleNamespace(max_model_len=1024, dtype=BF16),
        compilation_config=None)
    spec = types.SimpleNamespace(block_size=block_size, head_size=d["rank"] + d["rope"])
    # A small workspace: the 70 cached tokens are gathered in two chunks.
    builder = vb.AttnMLABackend.get_builder_cls()(spec, ["model.layers.0.self_attn.attn"],
                                                  vllm_config, DEV,
                                                  chunked_prefill_workspace_size=64)
    impl.process_weights_after_loading(BF16)
    if via == "common":
        md = builder.build(0, _mla_common_metadata(st))
    else:
        md = builder.build_step(st["query_lens"], st["context_lens"], st["tables"],
                                num_pages=st["cache"].shape[0])
    assert (md.num_decodes, md.num_prefills) == (3, 2)
    assert md.num_decode_tokens == 3 * decode_len and md.decode.query_len == decode_len
    ctx = md.prefill.chunked_context
    assert ctx.seq_lens == [[64, 0], [6, 0]] and ctx.cu_seq_lens == [[0, 64, 64], [0, 6, 6]]
    tokens = sum(st["query_lens"])
    out = torch.full((tokens, d["heads"] * d["v"]), float("nan"), dtype=BF16, device=DEV)
    res = impl.forward(st["layer"], st["q"], st["kv_c"], st["k_pe"], st["cache"], md,
                       output=out)
    assert res is out
    torch.cuda.synchronize()
    _mla_check(out, st["cache"], st, "MLA %s %s block %d" % (dims, kv_dtype, block_size))
    # The profiling run (no metadata) zeroes the output.
    assert impl.forward(st["layer"], st["q"], st["kv_c"], st["k_pe"], st["cache"], None,
                        output=out) is out
    assert not out.any()


def test_vllm_mla_step_in_any_order_and_many_context_chunks():
    """Prefills before decodes (a batch vLLM did not reorder): every request
    runs in MHA form, one-token ones too, and is right; a tiny workspace
    cuts the four contexts into 18 chunks (19 partial states: merged in
    rounds of 16)."""
    d = MLA_DIMS["small"]
    st = _mla_state(d, "auto", 1, 1, seed=421, decodes_first=False)
    impl = _mla_impl(d, st["kv_b_proj"])
    _skip_without_rope_dim(impl)
    builder = vb.AttnMLAMetadataBuilder(block_size=1, max_num_seqs=8, max_num_batched_tokens=256,
                                        max_model_len=1024, dtype=BF16, device=DEV,
                                        chunked_prefill_workspace_size=16)
    md = builder.build(0, _mla_common_metadata(st))
    assert (md.num_decodes, md.num_prefills, md.num_decode_tokens) == (0, 5, 0)
    ctx = md.prefill.chunked_context
    assert ctx.chunk_size == 4 and len(ctx.seq_tot) == 18 and ctx.seq_tot[-1] == 2
    out = impl.forward(st["layer"], st["q"], st["kv_c"], st["k_pe"], st["cache"], md)
    torch.cuda.synchronize()
    _mla_check(out, st["cache"], st, "MLA prefills first")


@pytest.mark.parametrize("dims", ["deepseek", "small"])
def test_vllm_mla_forward_mqa_and_mha_as_vllm_calls_them(dims):
    """vLLM's MLA layer: do_kv_cache_update, forward_mha on the prefill
    tokens, the W_UK absorption itself, forward_mqa on the decodes (tuple
    q), W_UV itself; an FP8 cache viewed as e4m3 before attention."""
    d = MLA_DIMS[dims]
    st = _mla_state(d, "fp8", 16, 1, seed=431)
    impl = _mla_impl(d, st["kv_b_proj"], "fp8")
    _skip_without_rope_dim(impl)
    builder = vb.AttnMLAMetadataBuilder(block_size=16, max_num_seqs=8,
                                        max_num_batched_tokens=256, max_model_len=1024,
                                        dtype=BF16, device=DEV)
    md = builder.build(0, _mla_common_metadata(st))
    assert md.prefill.chunked_context is not None and len(md.prefill.chunked_context.slots) == 1
    tokens, nd = sum(st["query_lens"]), md.num_decode_tokens
    cache = st["cache"]
    impl.do_kv_cache_update(st["kv_c"], st["k_pe"], cache, md.slot_mapping, "fp8",
                            st["layer"]._k_scale)
    out = torch.empty((tokens, d["heads"] * d["v"]), dtype=BF16, device=DEV)
    fp8_view = cache.view(torch.float8_e4m3fn)  # vLLM views FP8 caches before attention
    impl.forward_mha(st["q"][nd:], st["kv_c"][nd:], st["k_pe"][nd:], fp8_view, md,
                     st["layer"]._k_scale, output=out[nd:])
    w = st["kv_b_proj"].weight.float().view(d["heads"], d["nope"] + d["v"], d["rank"])
    w_uk_t, w_uv = w[:, :d["nope"]].to(BF16), w[:, d["nope"]:].transpose(1, 2).to(BF16)
    q_nope, q_pe = st["q"][:nd].split([d["nope"], d["rope"]], dim=-1)
    ql_nope = torch.bmm(q_nope.transpose(0, 1), w_uk_t).transpose(0, 1)  # vLLM's layout
    latent, lse = impl.forward_mqa((ql_nope, q_pe), fp8_view, md, st["layer"])
    assert lse is None and tuple(latent.shape) == (nd, d["heads"], d["rank"])
    out.view(tokens, d["heads"], d["v"])[:nd].copy_(
        torch.bmm(latent.transpose(0, 1), w_uv).transpose(0, 1))
    torch.cuda.synchronize()
    _mla_check(out, cache, st, "MLA %s as vLLM calls it" % dims)


def test_vllm_mla_decode_graph_replayed_after_rebuild():
    """UNIFORM_BATCH: a decode-only step's forward (cache write, absorption,
    attn.mla_decode, W_UV) captured in a graph replays the next step
    after build() re-planned it over vLLM's persistent buffers."""
    d = MLA_DIMS["deepseek"]
    bs, nb, batch = 16, 24, 3
    tables = [[3, 9, 4, 11], [0, 1, 2, 5], [7, 8]]
    contexts = [40, 50, 20]
    cache = randn((nb, bs, d["rank"] + d["rope"]), BF16, 451)
    kv_b_proj = _mla_kv_b_proj(d, 452)
    builder = vb.AttnMLAMetadataBuilder(block_size=bs, max_num_seqs=4, max_num_batched_tokens=64,
                                        max_model_len=256, dtype=BF16, device=DEV,
                                        full_cuda_graphs=True)
    impl = _mla_impl(d, kv_b_proj)
    layer = types.SimpleNamespace()
    bt = torch.zeros((batch, 6), dtype=torch.int32, device=DEV)
    for b, t in enumerate(tables):
        bt[b, :len(t)] = torch.tensor(t, dtype=torch.int32)
    seq_dev = torch.zeros(batch, dtype=torch.int32, device=DEV)
    slot_dev = torch.zeros(batch, dtype=torch.int64, device=DEV)
    qsl = torch.arange(batch + 1, dtype=torch.int32)

    def step(ctx):  # vLLM rewrites its persistent device buffers in place
        seq = torch.tensor([c + 1 for c in ctx], dtype=torch.int32)
        seq_dev.copy_(seq)
        slot_dev.copy_(torch.tensor([tables[b][c // bs] * bs + c % bs
                                     for b, c in enumerate(ctx)]))
        return types.SimpleNamespace(
            num_reqs=batch, num_actual_tokens=batch, max_query_len=1,
            max_seq_len=int(seq.max()), query_start_loc_cpu=qsl, query_start_loc=qsl.to(DEV),
            seq_lens=seq_dev, _seq_lens_cpu=seq, block_table_tensor=bt, slot_mapping=slot_dev)

    q = torch.zeros((batch, d["heads"], d["nope"] + d["rope"]), dtype=BF16, device=DEV)
    kv_c = torch.zeros((batch, d["rank"]), dtype=BF16, device=DEV)
    k_pe = torch.zeros((batch, 1, d["rope"]), dtype=BF16, device=DEV)
    out = torch.zeros((batch, d["heads"] * d["v"]), dtype=BF16, device=DEV)
    md = builder.build_for_cudagraph_capture(step(contexts))
    assert md.for_graph and md.num_decodes == batch and md.prefill is None
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up: kernels created, weights absorbed
        impl.forward(layer, q, kv_c, k_pe, cache, md, output=out)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        impl.forward(layer, q, kv_c, k_pe, cache, md, output=out)
    contexts = [c + 1 for c in contexts]  # the next step: one more token each
    md2 = builder.build(0, step(contexts))
    assert md2.for_graph and md2.num_decodes == batch
    q.copy_(randn(tuple(q.shape), BF16, 453))
    kv_c.copy_(randn(tuple(kv_c.shape), BF16, 454))
    k_pe.copy_(randn(tuple(k_pe.shape), BF16, 455))
    graph.replay()
    torch.cuda.synchronize()
    st = dict(dims=d, query_lens=[1] * batch, context_lens=contexts, tables=tables,
              num_decodes=batch, fp8=False,
              k_scale=1.0, kv_c=kv_c, k_pe=k_pe, q=q, kv_b_proj=kv_b_proj,
              scale=1.0 / math.sqrt(d["nope"] + d["rope"]))
    _mla_check(out, cache, st, "MLA graph replay")


# --- FlashInfer's custom masks and non-causal windows (regions of the wrappers') ------


def _random_masks(q_lens, kv_lens, seed):
    """Per request a [qo_len, kv_len] bool mask (about 60% visible), each row
    seeing at least its diagonal key (bottom-right)."""
    g = torch.Generator().manual_seed(seed)
    masks = []
    for ql, kl in zip(q_lens, kv_lens):
        m = torch.rand(ql, kl, generator=g) < 0.6
        m[torch.arange(ql), torch.arange(ql) + kl - ql] = True
        masks.append(m.to(DEV))
    return masks


@pytest.mark.parametrize("paged", [False, True], ids=["ragged", "paged"])
def test_prefill_custom_mask_is_flashinfers(paged):
    """plan(custom_mask=...): each request's qo_len x kv_len mask, flattened
    and concatenated; causal=True is ignored with it (FlashInfer's
    MaskMode.CUSTOM). packed_custom_mask (segment_packbits, little) gives
    the same output."""
    hq, hkv, d, page = 8, 2, 128, 16
    q_lens, kv_lens = [5, 33, 17], [9, 80, 17]
    masks = _random_masks(q_lens, kv_lens, 81)
    flat = torch.cat([m.reshape(-1) for m in masks])
    qo = torch.tensor([0] + list(_cumsum(q_lens)), dtype=torch.int32, device=DEV)
    q = randn((sum(q_lens), hq, d), BF16, 82)
    if paged:
        pc = Paged(kv_lens, page, hkv, d, BF16, seed=83)
        w = attn.BatchPrefillWithPagedKVCacheWrapper(workspace(), "NHD")
        plan_args = (qo, pc.indptr, pc.indices, pc.last, hq, hkv, d, page)
        run_args = (q, pc.cache)
        kv = [pc.kv(b) for b in range(3)]
    else:
        kvp = torch.tensor([0] + list(_cumsum(kv_lens)), dtype=torch.int32, device=DEV)
        k = randn((sum(kv_lens), hkv, d), BF16, 84)
        v = randn((sum(kv_lens), hkv, d), BF16, 85)
        w = attn.BatchPrefillWithRaggedKVCacheWrapper(workspace(), "NHD")
        plan_args = (qo, kvp, hq, hkv, d)
        run_args = (q, k, v)
        kv = [(k[kvp[b]:kvp[b + 1]], v[kvp[b]:kvp[b + 1]]) for b in range(3)]
    w.plan(*plan_args, custom_mask=flat, causal=True, q_data_type=BF16, kv_data_type=BF16)
    out, lse = w.run(*run_args, return_lse=True)
    for b in range(3):
        rows = slice(qo[b].item(), qo[b + 1].item())
        ref, ref_lse = reference(q[rows], kv[b][0], kv[b][1], causal=False, mask=masks[b])
        assert_close(out[rows], ref, BF16, "custom mask request %d" % b)
        assert_lse(lse[rows], ref_lse, "custom mask request %d" % b)
    sizes = torch.tensor([0] + list(_cumsum([a * c for a, c in zip(q_lens, kv_lens)])),
                         dtype=torch.int32, device=DEV)
    packed, mask_indptr = fi.segment_packbits(flat, sizes, bitorder="little")
    assert mask_indptr.tolist() == [0] + list(_cumsum([(a * c + 7) // 8 for a, c in
                                                       zip(q_lens, kv_lens)]))
    w.plan(*plan_args, packed_custom_mask=packed, q_data_type=BF16, kv_data_type=BF16)
    assert torch.equal(w.run(*run_args), out)


def test_ragged_custom_mask_with_alibi_and_window():
    """A custom mask with FlashInfer's ALiBi (slope * (key - row)) and a
    left window: one score_mod and one mask_mod region."""
    hq, hkv, d, window = 8, 8, 64, 6
    q_lens, kv_lens = [12, 30], [20, 30]
    masks = _random_masks(q_lens, kv_lens, 91)
    qo = torch.tensor([0] + list(_cumsum(q_lens)), dtype=torch.int32, device=DEV)
    kvp = torch.tensor([0] + list(_cumsum(kv_lens)), dtype=torch.int32, device=DEV)
    q = randn((sum(q_lens), hq, d), F16, 92)
    k = randn((sum(kv_lens), hkv, d), F16, 93)
    v = randn((sum(kv_lens), hkv, d), F16, 94)
    slopes = fi.get_alibi_slopes(hq)
    w = attn.BatchPrefillWithRaggedKVCacheWrapper(workspace(), "NHD")
    w.plan(qo, kvp, hq, hkv, d, custom_mask=torch.cat([m.reshape(-1) for m in masks]),
           pos_encoding_mode="ALIBI", window_left=window, q_data_type=F16)
    out, lse = w.run(q, k, v, return_lse=True)
    for b in range(2):
        qs = slice(qo[b].item(), qo[b + 1].item())
        ks = slice(kvp[b].item(), kvp[b + 1].item())
        ref, ref_lse = reference(q[qs], k[ks], v[ks], causal=False, window_left=window,
                                 fi_alibi=slopes, mask=masks[b])
        assert_close(out[qs], ref, F16, "custom mask + ALiBi + window request %d" % b)
        assert_lse(lse[qs], ref_lse, "custom mask + ALiBi + window request %d" % b)


def test_paged_prefill_custom_mask_graph_replayed_after_replan():
    """use_cuda_graph with custom_mask_buf / mask_indptr_buf: a captured run
    replays the mask of a later plan."""
    hq, hkv, d, page, batch = 8, 2, 64, 16, 2
    i32 = dict(dtype=torch.int32, device=DEV)
    w = attn.BatchPrefillWithPagedKVCacheWrapper(
        workspace(), "NHD", use_cuda_graph=True, qo_indptr_buf=torch.empty(batch + 1, **i32),
        paged_kv_indptr_buf=torch.empty(batch + 1, **i32),
        paged_kv_indices_buf=torch.empty(32, **i32),
        paged_kv_last_page_len_buf=torch.empty(batch, **i32),
        custom_mask_buf=torch.empty(4096, dtype=torch.uint8, device=DEV),
        mask_indptr_buf=torch.empty(batch + 1, **i32), max_pages_per_request=8)
    cases = [([8, 12], [40, 30], 161), ([15, 5], [20, 60], 163)]
    pcs, qos, masks = [], [], []
    for q_lens, seq_lens, seed in cases:
        pcs.append(Paged(seq_lens, page, hkv, d, BF16, seed=seed, extra=2))
        qos.append(torch.tensor([0] + list(_cumsum(q_lens)), **i32))
        masks.append(_random_masks(q_lens, seq_lens, seed))
    cache = torch.zeros((max(p.cache.shape[0] for p in pcs),) + pcs[0].cache.shape[1:],
                        dtype=BF16, device=DEV)

    def plan(i):
        cache[:pcs[i].cache.shape[0]].copy_(pcs[i].cache)
        w.plan(qos[i], pcs[i].indptr, pcs[i].indices, pcs[i].last, hq, hkv, d, page,
               custom_mask=torch.cat([m.reshape(-1) for m in masks[i]]), q_data_type=BF16,
               kv_data_type=BF16)

    plan(0)
    q = randn((20, hq, d), BF16, 165)
    out = torch.empty_like(q)
    graph = _capture(lambda: w.run(q, cache, out=out))
    plan(1)
    q.copy_(randn((20, hq, d), BF16, 166))
    graph.replay()
    torch.cuda.synchronize()
    for b in range(batch):
        rows = slice(qos[1][b].item(), qos[1][b + 1].item())
        k, v = pcs[1].kv(b)
        ref = reference(q[rows], k, v, causal=False, mask=masks[1][b])[0]
        assert_close(out[rows], ref, BF16, "replayed custom mask, request %d" % b)


@pytest.mark.parametrize("paged", [False, True], ids=["ragged", "paged"])
def test_prefill_window_left_not_causal_with_sinks(paged):
    """FlashInfer's window_left with causal=False (its attention-sink tests'
    case): keys from q_pos - window_left on, every key after the query."""
    hq, hkv, d, page, window = 8, 2, 128, 16, 10
    q_lens, kv_lens = [7, 40, 16], [27, 61, 16]
    qo = torch.tensor([0] + list(_cumsum(q_lens)), dtype=torch.int32, device=DEV)
    q = randn((sum(q_lens), hq, d), BF16, 101)
    sink = torch.rand(hq, generator=gen(102), device=DEV) * 3
    if paged:
        pc = Paged(kv_lens, page, hkv, d, BF16, seed=103)
        w = attn.BatchPrefillWithPagedKVCacheWrapper(workspace(), "NHD")
        w.plan(qo, pc.indptr, pc.indices, pc.last, hq, hkv, d, page, causal=False,
               window_left=window, q_data_type=BF16, kv_data_type=BF16)
        out, lse = w.run(q, pc.cache, sinks=sink, return_lse=True, window_left=window)
        kv = [pc.kv(b) for b in range(3)]
    else:
        kvp = torch.tensor([0] + list(_cumsum(kv_lens)), dtype=torch.int32, device=DEV)
        k = randn((sum(kv_lens), hkv, d), BF16, 104)
        v = randn((sum(kv_lens), hkv, d), BF16, 105)
        w = attn.BatchPrefillWithRaggedKVCacheWrapper(workspace(), "NHD")
        w.plan(qo, kvp, hq, hkv, d, causal=False, window_left=window, q_data_type=BF16)
        out, lse = w.run(q, k, v, sinks=sink, return_lse=True)
        kv = [(k[kvp[b]:kvp[b + 1]], v[kvp[b]:kvp[b + 1]]) for b in range(3)]
    for b in range(3):
        rows = slice(qo[b].item(), qo[b + 1].item())
        ref, ref_lse = reference(q[rows], kv[b][0], kv[b][1], causal=False,
                                 window_left=window, sinks=sink)
        assert_close(out[rows], ref, BF16, "non-causal window request %d" % b)
        assert_lse(lse[rows], ref_lse, "non-causal window request %d" % b)


def test_ragged_forward_switches_a_window_between_causal_and_not():
    """forward(causal=False) on a plan with a window keeps the window (as a
    region), forward(causal=True) makes it attn's knob again."""
    hq, hkv, d, window = 8, 8, 64, 5
    q_lens, kv_lens = [12, 30], [20, 30]
    qo = torch.tensor([0] + list(_cumsum(q_lens)), dtype=torch.int32, device=DEV)
    kvp = torch.tensor([0] + list(_cumsum(kv_lens)), dtype=torch.int32, device=DEV)
    q = randn((sum(q_lens), hq, d), F16, 111)
    k = randn((sum(kv_lens), hkv, d), F16, 112)
    v = randn((sum(kv_lens), hkv, d), F16, 113)
    w = attn.BatchPrefillWithRaggedKVCacheWrapper(workspace(), "NHD")
    w.plan(qo, kvp, hq, hkv, d, causal=True, window_left=window, q_data_type=F16)
    bidir = w.forward(q, k, v, causal=False, window_left=window)
    causal = w.forward(q, k, v, causal=True, window_left=window)
    for b in range(2):
        qs = slice(qo[b].item(), qo[b + 1].item())
        ks = slice(kvp[b].item(), kvp[b + 1].item())
        for c, o in ((False, bidir), (True, causal)):
            ref = reference(q[qs], k[ks], v[ks], causal=c, window_left=window)[0]
            assert_close(o[qs], ref, F16, "forward window causal=%s request %d" % (c, b))


# --- FlashInfer's q_scale / k_scale / v_scale on 16-bit caches --------------------------


def test_decode_scales_on_a_16bit_cache_are_flashinfers():
    """FlashInfer's decode run(): q_scale and k_scale multiply sm_scale, v_scale
    the output (the LSE is that of the scaled scores); a repeated call gives
    the same result (the scaled variant is cached)."""
    hq, hkv, d, page = 8, 2, 128, 16
    lens = [33, 260]
    pc = Paged(lens, page, hkv, d, BF16, seed=121)
    q = randn((2, hq, d), BF16, 122)
    w = attn.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD")
    w.plan(pc.indptr, pc.indices, pc.last, hq, hkv, d, page, q_data_type=BF16, sm_scale=0.1)
    out, lse = w.run(q, pc.cache, q_scale=0.8, k_scale=0.5, v_scale=2.0, return_lse=True)
    again = w.run(q, pc.cache, q_scale=0.8, k_scale=0.5, v_scale=2.0)
    plain = w.run(q, pc.cache)
    for b in range(2):
        k, v = pc.kv(b)
        ref, ref_lse = reference(q[b:b + 1], k, v, scale=0.1 * 0.8 * 0.5)
        assert_close(out[b:b + 1], ref * 2.0, BF16, "scaled decode request %d" % b)
        assert_lse(lse[b:b + 1], ref_lse, "scaled decode request %d" % b)
        assert_close(plain[b:b + 1], reference(q[b:b + 1], k, v, scale=0.1)[0], BF16,
                     "unscaled decode after a scaled one, request %d" % b)
    assert torch.equal(again, out)


def test_paged_prefill_scales_on_a_16bit_cache_are_flashinfers():
    hq, hkv, d, page = 8, 2, 128, 16
    q_lens, seq_lens = [7, 16, 1], [27, 61, 9]
    pc = Paged(seq_lens, page, hkv, d, F16, seed=131)
    qo = torch.tensor([0] + list(_cumsum(q_lens)), dtype=torch.int32, device=DEV)
    q = randn((sum(q_lens), hq, d), F16, 132)
    w = attn.BatchPrefillWithPagedKVCacheWrapper(workspace(), "NHD")
    w.plan(qo, pc.indptr, pc.indices, pc.last, hq, hkv, d, page, causal=True,
           q_data_type=F16, kv_data_type=F16)
    out = torch.empty_like(q)
    res, lse = w.run(q, pc.cache, k_scale=1.5, v_scale=0.25, out=out, return_lse=True)
    assert res is out
    for b in range(3):
        rows = slice(qo[b].item(), qo[b + 1].item())
        k, v = pc.kv(b)
        ref, ref_lse = reference(q[rows], k, v, scale=1.5 / math.sqrt(d))
        assert_close(out[rows], ref * 0.25, F16, "scaled paged prefill request %d" % b)
        assert_lse(lse[rows], ref_lse, "scaled paged prefill request %d" % b)


# --- FlashInfer's block-sparse attention (BSR) --------------------------------


def _bsr(mb, nb, seed, density=0.5):
    """A random BSR pattern of mb row blocks over nb key blocks, the last
    never listed (each row block at least one): indptr, indices (rising per
    row) and the dense [mb, nb] block map."""
    g = torch.Generator().manual_seed(seed)
    dense = torch.rand(mb, nb, generator=g) < density
    dense[:, -1] = False
    dense[torch.arange(mb), torch.randint(nb - 1, (mb,), generator=g)] = True
    indptr = [0]
    indices = []
    for i in range(mb):
        cols = torch.nonzero(dense[i]).flatten().tolist()
        indices += cols
        indptr.append(len(indices))
    return indptr, indices, dense


@pytest.mark.parametrize("case", ["full_blocks", "mask", "causal", "short_last_block"])
def test_block_sparse_is_flashinfers(case):
    """BlockSparseAttentionWrapper: each row block of R query rows attends to
    the keys of its listed C-key blocks, in index order, as FlashInfer's paged
    prefill over those blocks as pages: ``mask`` [nnz, R, C] inside the
    blocks, ``causal`` aligned to the end of the row block's listed keys.
    Checked per row block against the fp64 reference over the gathered keys,
    output and base-2 LSE."""
    hq, hkv, d = 8, 2, 128
    R, C = 16, 16
    mb, nb = 5, 7
    M = mb * R - (9 if case == "short_last_block" else 0)
    N = nb * C
    ip, ids, _ = _bsr(mb, nb, 301)
    q = randn((M, hq, d), BF16, 302)
    k = randn((N, hkv, d), BF16, 303)
    v = randn((N, hkv, d), BF16, 304)
    mask = None
    if case == "mask":
        g = torch.Generator().manual_seed(305)
        mask = (torch.rand(len(ids), R, C, generator=g) < 0.7).to(DEV)
    w = fi.BlockSparseAttentionWrapper(workspace())
    w.plan(torch.tensor(ip, dtype=torch.int32, device=DEV),
           torch.tensor(ids, dtype=torch.int32, device=DEV), M, N, R, C, hq, hkv, d,
           mask=mask, causal=case == "causal", q_data_type=BF16, kv_data_type=BF16)
    out, lse = w.run(q, k, v, return_lse=True)
    for i in range(mb):
        rows = slice(i * R, min((i + 1) * R, M))
        keys = torch.cat([torch.arange(j * C, (j + 1) * C) for j in ids[ip[i]:ip[i + 1]]])
        elem = None
        if mask is not None:
            # Row r sees key c of its b-th listed block where mask[ip[i] + b, r, c].
            elem = torch.cat([mask[ip[i] + b] for b in range(ip[i + 1] - ip[i])], dim=1)
        ref, ref_lse = reference(q[rows], k[keys.to(DEV)], v[keys.to(DEV)],
                                 causal=case == "causal", mask=elem)
        assert_close(out[rows], ref, BF16, "%s: row block %d" % (case, i))
        assert_lse(lse[rows], ref_lse, "%s: row block %d" % (case, i))
    # Keys of blocks not listed are never read: NaNs there change nothing.
    k2, v2 = k.clone(), v.clone()
    for j in set(range(nb)) - set(ids):
        k2[j * C:(j + 1) * C] = float("nan")
        v2[j * C:(j + 1) * C] = float("nan")
    assert torch.equal(w.run(q, k2, v2), out)


# --- torch.compile --------------------------------------------------------------


def test_wrappers_run_under_torch_compile_without_graph_breaks():
    """Decode, ragged and paged prefill run() inside torch.compile(fullgraph=
    True): one attn::wrapper_run op each, the same bits as eager run(), and
    the fp64 reference; a (k, v) cache tuple and return_lse included."""
    hq, hkv, d, page = 8, 2, 128, 16
    lens = [40, 300]
    pc = Paged(lens, page, hkv, d, BF16, seed=401)
    qd = randn((2, hq, d), BF16, 402)
    dec = attn.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD")
    dec.plan(pc.indptr, pc.indices, pc.last, hq, hkv, d, page, q_data_type=BF16,
             kv_data_type=BF16)
    cu_q = torch.tensor([0, 5, 25], dtype=torch.int32, device=DEV)
    cu_kv = torch.tensor([0, 40, 340], dtype=torch.int32, device=DEV)
    qp = randn((25, hq, d), BF16, 403)
    k = randn((340, hkv, d), BF16, 404)
    v = randn((340, hkv, d), BF16, 405)
    rag = attn.BatchPrefillWithRaggedKVCacheWrapper(workspace(), "NHD")
    rag.plan(cu_q, cu_kv, hq, hkv, d, causal=True, q_data_type=BF16)
    paged = attn.BatchPrefillWithPagedKVCacheWrapper(workspace(), "NHD")
    paged.plan(cu_q, pc.indptr, pc.indices, pc.last, hq, hkv, d, page, causal=True,
               q_data_type=BF16, kv_data_type=BF16)
    kv_tuple = (pc.cache[:, 0].contiguous(), pc.cache[:, 1].contiguous())

    def step(qd, qp, k, v):
        a = dec.run(qd, pc.cache)
        b, b_lse = rag.run(qp, k, v, return_lse=True)
        c = paged.run(qp, kv_tuple)
        return a, b, b_lse, c

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    got = torch.compile(step, backend=backend, fullgraph=True)(qd, qp, k, v)
    ops = [n for n in graphs[0].graph.nodes if "wrapper_run" in str(n.target)]
    assert len(graphs) == 1 and len(ops) == 3
    want = step(qd, qp, k, v)
    for g, w_, what in zip(got, want, ("decode", "ragged", "ragged lse", "paged")):
        assert torch.equal(g, w_), what + ": compiled differs from eager"
    for b in range(2):
        kb, vb_ = pc.kv(b)
        ref, _ = reference(qd[b:b + 1], kb, vb_)
        assert_close(got[0][b:b + 1], ref, BF16, "compiled decode %d" % b)
        rows = slice(cu_q[b].item(), cu_q[b + 1].item())
        ref, ref_lse = reference(qp[rows], k[cu_kv[b]:cu_kv[b + 1]], v[cu_kv[b]:cu_kv[b + 1]])
        assert_close(got[1][rows], ref, BF16, "compiled ragged %d" % b)
        assert_lse(got[2][rows], ref_lse, "compiled ragged %d" % b)
        ref, _ = reference(qp[rows], kb, vb_)
        assert_close(got[3][rows], ref, BF16, "compiled paged %d" % b)


def test_decode_under_torch_compile_reduce_overhead_replays():
    """mode='reduce-overhead' (CUDA graphs): replays with new q values give
    what eager run() gives."""
    hq, hkv, d, page = 8, 2, 128, 16
    pc = Paged([33, 129], page, hkv, d, BF16, seed=411)
    w = attn.BatchDecodeWithPagedKVCacheWrapper(workspace(), "NHD")
    w.plan(pc.indptr, pc.indices, pc.last, hq, hkv, d, page, q_data_type=BF16,
           kv_data_type=BF16)
    f = torch.compile(lambda q: w.run(q, pc.cache) * 1.0, mode="reduce-overhead",
                      fullgraph=True)
    for seed in range(412, 416):
        q = randn((2, hq, d), BF16, seed)
        got = f(q).clone()
        assert torch.equal(got, w.run(q, pc.cache) * 1.0), "replay %d" % seed
