"""FlashInfer's Python API over attn's kernels.

Switching is one line::

    import attn.flashinfer as flashinfer     # was: import flashinfer

The wrappers keep FlashInfer's names, constructor and ``plan``/``run``
signatures: ``BatchDecodeWithPagedKVCacheWrapper``,
``BatchPrefillWithRaggedKVCacheWrapper``,
``BatchPrefillWithPagedKVCacheWrapper``, ``MultiLevelCascadeAttentionWrapper``,
``BlockSparseAttentionWrapper``, ``append_paged_kv_cache``, ``merge_state``, ``merge_state_in_place``,
``merge_states``, ``get_seq_lens``, ``get_batch_indices_positions``.

How it maps onto attn
---------------------
- Page tables: FlashInfer's CSR tables (``indptr``, ``indices``,
  ``last_page_len``) become attn's dense ``[batch, max_pages]`` tables and
  per-request lengths in ``plan()`` (the lengths are read back to the host,
  which synchronizes, as FlashInfer's plan does). The dense tables live in
  the wrapper at fixed device addresses.
- Paged cache: a single ``[num_pages, 2, page_size, heads, dim]`` (NHD) or
  ``[num_pages, 2, heads, page_size, dim]`` (HND) tensor, or a ``(k, v)``
  tuple of ``[num_pages, ...]`` tensors. attn reads K and V through one page
  stride, so the interleaved layout needs no copy.
- Kernels: ``plan()`` creates (JIT-compiles on first use, then cached on
  disk) the kernel of the planned variant; a ``run()`` that asks for
  another variant (``return_lse``, ``sinks``, per-head scales) creates it
  on its first call. One handle per variant is cached in the wrapper.
- ``float_workspace_buffer`` is accepted for compatibility and only tells
  the device: attn owns its workspaces (sized for the batch, grown as
  needed, fixed under ``use_cuda_graph``).
- LSE: FlashInfer's LSEs are base 2; so are this module's (``run(...,
  return_lse=True)`` returns ``log2(sum exp(s))`` and ``merge_state(s)``
  take and return base-2 LSEs). attn's kernels and C ABI use the natural
  log (docs/semantics.md); the wrappers convert.
- Streams: every ``plan``/``run`` launches on ``torch.cuda.current_stream()``
  unless given ``stream=`` (an attn extension).
- CUDA graphs: with ``use_cuda_graph=True`` the batch size and the table
  capacity are fixed at construction (as FlashInfer's), ``plan()`` plans
  for graph replay, and a captured ``run()`` stays valid for any later
  ``plan()`` of the same batch size. Run every variant once before
  capturing (its kernel is created and planned outside capture).

Extensions (keyword-only, not in FlashInfer): ``stream=`` on plan/run;
``score_mod=`` / ``mask_mod=`` (attn IR regions, docs/semantics.md) on plan
and ``aux=`` (their tables) on run; ``k_scale`` / ``v_scale`` may be
tensors (``[1]`` or ``[num_kv_heads]`` float32, per-head FP8 scales);
``max_pages_per_request=`` on the decode and paged-prefill constructors
(graph mode's table width, default the indices buffer's length),
``max_num_tokens=`` on the prefill constructors (graph mode's query-row
capacity); ``k_scale``/``v_scale`` on ``append_paged_kv_cache`` (FP8 caches
quantize by them).

FlashInfer's semantics where attn has the means: ``data_type`` fills the
missing q/kv dtype; ``forward()``/``forward_return_lse()`` set their knobs
as FlashInfer's; ``fast_decode_plan``; ALiBi is FlashInfer's ``slope *
(key - i)`` (the alibi knob when causal, a score_mod region otherwise; the
LSE carries FlashInfer's row constant); ``merge_state_in_place(mask=)``;
the AttentionSink ``jit_args`` and ``BatchAttentionWithAttentionSinkWrapper``
as attn's sinks; the prefill wrappers' ``custom_mask`` /
``packed_custom_mask`` (aux tables of the packed bits read by a mask_mod
region: no tile is skipped) and ``window_left`` with ``causal=False`` (a
mask_mod region); ``packbits`` / ``segment_packbits``; FlashInfer's RoPE
inside attention (``pos_encoding_mode='ROPE_LLAMA'``) in the decode, paged
and ragged prefill wrappers and ``single_*``, as copies of q and k rotated
before attention (not fused; 16-bit caches, no CUDA graphs). docs/python.md
lists each.

What attn does not do raises ``NotImplementedError`` naming it: RoPE in the
other wrappers, ``head_dim_vo != head_dim_qk``,
``window_right``, an output dtype other than q's, FP8 queries, NVFP4 caches
(``kv_cache_sf``), other jit_args, other backends.
"""

import array
import ctypes
import dataclasses
import math
import numbers
import operator
from collections import OrderedDict

from . import _compile
from . import _runtime
from . import _tensors as _t
from ._kernels import (AppendKV, AppendKVVariant, Cascade, Decode, DecodeVariant, Knobs,
                       MergeStates, MergeStatesVariant, MlaDecode, MlaDecodeVariant, Prefill,
                       PrefillVariant, shared)
from . import _lib

LOG2E = 1.4426950408889634  # log2(e): natural-log LSE -> base 2
LN2 = 0.6931471805599453    # ln(2): base 2 -> natural log

_BACKENDS = ("auto", "fa2", "fa3")
_MAX_HANDLES = 8
# The most query heads a kernel takes (kMaxHeads, spec/KernelLimits.h).
MAX_HEADS = 1024

__all__ = [
    "BatchDecodeWithPagedKVCacheWrapper",
    "CUDAGraphBatchDecodeWithPagedKVCacheWrapper",
    "BatchPrefillWithRaggedKVCacheWrapper",
    "BatchPrefillWithPagedKVCacheWrapper",
    "MultiLevelCascadeAttentionWrapper",
    "BatchDecodeWithSharedPrefixPagedKVCacheWrapper",
    "BatchPrefillWithSharedPrefixPagedKVCacheWrapper",
    "BatchMLAPagedAttentionWrapper",
    "BatchAttentionWithAttentionSinkWrapper",
    "BlockSparseAttentionWrapper",
    "VariableBlockSparseAttentionWrapper",
    "append_paged_kv_cache",
    "merge_state",
    "merge_state_in_place",
    "merge_states",
    "get_seq_lens",
    "get_batch_indices_positions",
    "get_alibi_slopes",
    "fast_decode_plan",
    "packbits",
    "segment_packbits",
    "single_decode_with_kv_cache",
    "single_prefill_with_kv_cache",
    "single_prefill_with_kv_cache_return_lse",
]


# --- argument helpers -----------------------------------------------------


def _check_layout(kv_layout):
    if not isinstance(kv_layout, str):
        raise TypeError("kv_layout: expected 'NHD' or 'HND', got %r" % (kv_layout,))
    s = kv_layout.upper()
    if s not in ("NHD", "HND"):
        raise ValueError("kv_layout: expected 'NHD' or 'HND', got %r" % (kv_layout,))
    return s


def _check_backend(backend, cls):
    if backend not in _BACKENDS:
        raise NotImplementedError(
            "backend=%r: attn generates its own kernels; %s takes backend 'auto' ('fa2' and "
            "'fa3' are accepted and mean the same)" % (backend, cls))


def _no_jit(jit_args, jit_kwargs=None):
    """True for FlashInfer's attention-sink variant (``jit_args`` naming the
    ``AttentionSink`` variant with the ``sink`` table and ``sm_scale``
    scalar, as FlashInfer's BatchAttentionWithAttentionSinkWrapper builds
    them), which maps onto attn's sinks; any other custom module raises."""
    if jit_args is None and not jit_kwargs:
        return False
    try:
        sink = (jit_args is not None and len(jit_args) >= 12 and
                list(jit_args[7]) == ["sink"] and list(jit_args[9]) == ["sm_scale"] and
                jit_args[11] == "AttentionSink")
    except TypeError:
        sink = False
    if not sink:
        raise NotImplementedError(
            "jit_args: FlashInfer's custom JIT modules do not apply to attn (its AttentionSink "
            "variant does: attn's sinks); attn's programmable variants are "
            "plan(score_mod=..., mask_mod=...) (docs/semantics.md)")
    kw = dict(jit_kwargs or {})
    if kw.get("use_logits_soft_cap") or kw.get("pos_encoding_mode", 0) not in (0, "NONE"):
        raise NotImplementedError("jit_kwargs: FlashInfer's AttentionSink variant in attn takes "
                                  "no soft-cap and no pos_encoding_mode")
    return True


def _int(value, name, minimum=1, maximum=_lib.INT32_MAX):
    """An int argument (TypeError for a bool, a float, a string...), within
    ``[minimum, maximum]`` (ValueError): every size here is a C int."""
    return _lib.check_int(value, name, minimum, maximum)


def _flag(value, name):
    return bool(_lib.check_flag(value, name))


def _length(buf, name):
    """len() of a buffer argument (TypeError naming it when it has none)."""
    try:
        return len(buf)
    except Exception:
        raise TypeError("%s: expected an array, got %s" % (name, type(buf).__name__)) from None


def _buffer_device(buf):
    if buf is None:
        return -1
    torch = _runtime.torch_or_none()
    if torch is not None and isinstance(buf, torch.Tensor):
        return buf.device.index if buf.device.type == "cuda" else -1
    try:
        return _t.adapt(buf, "float_workspace_buffer").device
    except Exception:
        return -1


def _array_device(x):
    torch = _runtime.torch_or_none()
    if torch is not None and isinstance(x, torch.Tensor) and x.device.type == "cuda":
        return x.device.index
    return -1


def _resolve_dtypes(q_data_type, kv_data_type, o_data_type=None, data_type=None):
    # FlashInfer's deprecated data_type only fills whichever of q_data_type and
    # kv_data_type is missing (None): plan(data_type=e4m3) with the default
    # q_data_type is an f16 query over an e4m3 cache.
    q_name = kv_name = "data_type"
    if q_data_type is not None or data_type is None:
        q_name = "q_data_type"
        if q_data_type is None:
            q_data_type = "float16"
    else:
        q_data_type = data_type
    if kv_data_type is not None or data_type is None:
        kv_name = "kv_data_type"
    else:
        kv_data_type = data_type
    q = _t.dtype_name(q_data_type, q_name)
    kv = _t.dtype_name(kv_data_type, kv_name) if kv_data_type is not None else q
    if q in _t.FP8_DTYPES:
        raise NotImplementedError(
            "%s %s: FP8 queries need FP8-query kernels that attn's decode and paged "
            "prefill do not have; these wrappers take float16 or bfloat16 queries (FP8 "
            "caches are fine: kv_data_type)" % (q_name, q))
    if q not in ("float16", "bfloat16"):
        raise TypeError("%s: expected float16 or bfloat16, got %s" % (q_name, q))
    if kv not in (q,) + _t.FP8_DTYPES:
        raise TypeError("%s: expected %s (q's dtype), float8_e4m3fn or float8_e5m2, got %s"
                        % (kv_name, q, kv))
    if o_data_type is not None:
        o = _t.dtype_name(o_data_type, "o_data_type")
        if o != q:
            raise NotImplementedError("o_data_type %s: attn writes the output in q's dtype (%s)"
                                      % (o, q))
    return q, kv


def _check_heads(num_qo_heads, num_kv_heads, head_dim):
    hq = _int(num_qo_heads, "num_qo_heads")
    hkv = _int(num_kv_heads, "num_kv_heads")
    d = _int(head_dim, "head_dim")
    if hq % hkv:
        raise ValueError("num_qo_heads (%d) must be a multiple of num_kv_heads (%d)" % (hq, hkv))
    return hq, hkv, d


def get_alibi_slopes(n_heads):
    """The standard ALiBi slopes for ``n_heads`` heads (FlashInfer's
    ``get_alibi_slopes``: ``2^(-8 (h + 1) / n)`` for a power of two n, the
    interleaved extension otherwise), as a list of floats."""
    n_heads = _int(n_heads, "n_heads", maximum=MAX_HEADS)
    n = 2 ** int(math.floor(math.log2(n_heads)))
    m0 = 2.0 ** (-8.0 / n)
    slopes = [m0 ** i for i in range(1, n + 1)]
    if n < n_heads:
        m_hat0 = 2.0 ** (-4.0 / n)
        slopes += [m_hat0 ** i for i in range(1, 1 + 2 * (n_heads - n), 2)]
    return slopes


def _pos_mode(pos_encoding_mode):
    """FlashInfer's pos_encoding_mode, upper-cased (ValueError/TypeError
    unless one of its three)."""
    if not isinstance(pos_encoding_mode, str):
        raise TypeError("pos_encoding_mode: expected 'NONE', 'ALIBI' or 'ROPE_LLAMA', got %r"
                        % (pos_encoding_mode,))
    mode = pos_encoding_mode.upper()
    if mode not in ("NONE", "ALIBI", "ROPE_LLAMA"):
        raise ValueError("pos_encoding_mode: expected 'NONE', 'ALIBI' or 'ROPE_LLAMA', got %r"
                         % (pos_encoding_mode,))
    return mode


# FlashInfer features attn runs as regions (docs/semantics.md, "Programmable
# variants"), generated here so the wrappers can tell their own regions from
# a caller's: ALiBi when not causal (a score_mod), a window when not causal
# and a custom mask (one mask_mod). Both regions take the same aux tables:
# the slopes when ALiBi is a region, then the mask's bits and per-request
# table when there is a custom mask (_FiRegions.aux_kinds).


@dataclasses.dataclass(frozen=True)
class _FiRegions:
    alibi: bool = False   # FlashInfer's ALiBi, slope * (key - query): a score_mod
    window: int = -1      # window_left when not causal: a mask_mod
    custom: bool = False  # custom_mask / packed_custom_mask: a mask_mod


_REGION_HEAD = ("%request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32")

# The custom mask as tables: bits, FlashInfer's packed uint8 segments read
# as little-endian int32 words (bit n of the bytes is bit n & 31 of word
# n >> 5); meta, per request (segment's byte offset, kv_len - qo_len,
# kv_len). FlashInfer's row is qo_idx = q_pos - (kv_len - qo_len) (attn's
# query positions are bottom-right aligned), its bit
# 8 * offset + qo_idx * kv_len + kv_idx, computed in i64.
_CUSTOM_MASK_BODY = """
  %mc0 = arith.constant 0 : i32
  %mc1 = arith.constant 1 : i32
  %mc2 = arith.constant 2 : i32
  %off = attn.aux_load %meta[%request, %mc0] : tensor<?x3xi32>
  %delta = attn.aux_load %meta[%request, %mc1] : tensor<?x3xi32>
  %kvlen = attn.aux_load %meta[%request, %mc2] : tensor<?x3xi32>
  %row = arith.subi %q_pos, %delta : i32
  %off64 = arith.extsi %off : i32 to i64
  %row64 = arith.extsi %row : i32 to i64
  %kv64 = arith.extsi %kvlen : i32 to i64
  %k64 = arith.extsi %k_pos : i32 to i64
  %m3 = arith.constant 3 : i64
  %m5 = arith.constant 5 : i64
  %m31 = arith.constant 31 : i64
  %start = arith.shli %off64, %m3 : i64
  %rowbits = arith.muli %row64, %kv64 : i64
  %rowstart = arith.addi %start, %rowbits : i64
  %bit = arith.addi %rowstart, %k64 : i64
  %word64 = arith.shrsi %bit, %m5 : i64
  %word = arith.trunci %word64 : i64 to i32
  %shift64 = arith.andi %bit, %m31 : i64
  %shift = arith.trunci %shift64 : i64 to i32
  %w = attn.aux_load %bits[%word] : tensor<?xi32>
  %wb = arith.shrui %w, %shift : i32
  %b = arith.andi %wb, %mc1 : i32
  %custom = arith.cmpi ne, %b, %mc0 : i32"""

# FlashInfer's window without causal: kv_idx + qo_len + W >= kv_len + qo_idx,
# i.e. k_pos >= q_pos - W; keys right of the query stay visible.
_WINDOW_BODY = """
  %win = arith.constant WINDOW : i32
  %lo = arith.subi %q_pos, %win : i32
  %window = arith.cmpi sge, %k_pos, %lo : i32"""

# FlashInfer's ALiBi for attention that is not causal: bias slope[h] * (key -
# query), positive for keys after the query, where attn's alibi knob takes
# FlashAttention's -slope * |key - query|. Positions here are bottom-right
# aligned; FlashInfer counts a query from its request's first row, which
# adds slope * (kv_len - q_len) to every score of a row: the softmax drops it,
# the wrappers add it to the LSE (_alibi_lse).
_ALIBI_BODY = """
  %slope = attn.aux_load %slopes[%q_head] : tensor<?xf32>
  %d = arith.subi %k_pos, %q_pos : i32
  %df = arith.sitofp %d : i32 to f32
  %bias = arith.mulf %slope, %df fastmath<contract> : f32
  %r = arith.addf %score, %bias fastmath<contract> : f32
  attn.yield %r : f32
}"""

_REGIONS = {}  # _FiRegions -> (score_mod, mask_mod)
_REGION_SPECS = {}  # (score_mod, mask_mod) -> _FiRegions


def _fi_regions(spec):
    """(score_mod, mask_mod) text of ``spec`` (None where it has none)."""
    texts = _REGIONS.get(spec)
    if texts is not None:
        return texts
    args = []
    if spec.alibi:
        args.append("%slopes: tensor<?xf32>")
    if spec.custom:
        args += ["%bits: tensor<?xi32>", "%meta: tensor<?x3xi32>"]
    tail = "".join(",\n     " + a for a in args)
    score = mask = None
    if spec.alibi:
        score = ("{\n^bb0(%score: f32, " + _REGION_HEAD + tail + "):" + _ALIBI_BODY)
    if spec.window >= 0 or spec.custom:
        body, parts = "", []
        if spec.custom:
            body += _CUSTOM_MASK_BODY
            parts.append("%custom")
        if spec.window >= 0:
            body += _WINDOW_BODY.replace("WINDOW", str(spec.window))
            parts.append("%window")
        if len(parts) == 2:
            body += "\n  %visible = arith.andi %custom, %window : i1"
            parts = ["%visible"]
        mask = ("{\n^bb0(" + _REGION_HEAD + tail + "):" + body + "\n  attn.yield " + parts[0] +
                " : i1\n}")
    _REGIONS[spec] = (score, mask)
    _REGION_SPECS[(score, mask)] = spec
    return score, mask


def _fi_spec(knobs):
    """The _FiRegions whose regions ``knobs`` carry, or None (no region, or
    a caller's)."""
    if not knobs.score_mod and not knobs.mask_mod:
        return None
    return _REGION_SPECS.get((knobs.score_mod, knobs.mask_mod))


_ALIBI_REGION = _fi_regions(_FiRegions(alibi=True))[0]


def _alibi_region(knobs):
    """Whether ``knobs`` carry FlashInfer's non-causal ALiBi region (its
    aux table is the slopes, supplied by the wrapper)."""
    spec = _fi_spec(knobs)
    return spec is not None and spec.alibi


def _fi_window(knobs):
    """FlashInfer's window_left of ``knobs`` (attn's window, or the region's)."""
    if knobs.window_left >= 0:
        return knobs.window_left
    spec = _fi_spec(knobs)
    return spec.window if spec is not None else -1


def _compose(knobs, causal, window, alibi, custom):
    """``knobs`` (soft-cap, scale, a caller's regions) with FlashInfer's
    causal, window_left, ALiBi and custom mask: attn's knobs where they
    mean the same (causal, a causal window, causal ALiBi), regions for the
    rest. As in FlashInfer, a custom mask replaces causal."""
    if custom:
        causal = False
    spec = _FiRegions(alibi=alibi and not causal, window=window if not causal else -1,
                      custom=custom)
    user = (None, None) if _fi_spec(knobs) is not None else (knobs.score_mod, knobs.mask_mod)
    base = dict(causal=causal, window_left=window if causal else -1, alibi=alibi and causal)
    if spec == _FiRegions():
        return dataclasses.replace(knobs, score_mod=user[0], mask_mod=user[1], **base)
    if user[0] or user[1]:
        what = ("pos_encoding_mode='ALIBI' with causal=False" if spec.alibi else
                "custom_mask" if spec.custom else "window_left with causal=False")
        raise NotImplementedError(
            "%s: attn runs it as a region (score_mod/mask_mod) of the wrapper's, which cannot "
            "be combined with score_mod/mask_mod" % what)
    score, mask = _fi_regions(spec)
    return dataclasses.replace(knobs, score_mod=score, mask_mod=mask, **base)


def _has_alibi(knobs):
    return knobs.alibi or _alibi_region(knobs)


def _knobs(pos_encoding_mode="NONE", window_left=-1, logits_soft_cap=None, sm_scale=None,
           causal=True, score_mod=None, mask_mod=None, window_right=0, custom=False,
           regions=True, invariant=False):
    """Knobs of FlashInfer's plan() arguments; ``custom``: a custom mask;
    ``regions``: whether the kernel takes regions for what attn's knobs do
    not hold (a window or ALiBi without causal, custom masks);
    ``invariant``: attn's batch invariance (_split_fixed)."""
    mode = _pos_mode(pos_encoding_mode)
    if mode == "ROPE_LLAMA":
        raise NotImplementedError(
            "pos_encoding_mode=%r: this wrapper does not apply RoPE (attn's decode, paged and "
            "ragged prefill wrappers and single_* do); rotate q and k before and "
            "plan with pos_encoding_mode='NONE'" % pos_encoding_mode)
    if window_right is not None and _lib.check_int(window_right, "window_right") != 0:
        raise NotImplementedError("window_right=%r: attn's windows look left only "
                                  "(window_left)" % (window_right,))
    causal = _flag(causal, "causal")
    window = _window(window_left)
    if window >= 0 and not causal and not custom and not regions:
        raise ValueError("window_left: this wrapper applies a sliding window to causal "
                         "attention only (causal=False here)")
    softcap = 0.0 if logits_soft_cap is None else \
        _lib.check_float(logits_soft_cap, "logits_soft_cap", minimum=0.0)
    scale = 0.0 if sm_scale is None else _lib.check_float(sm_scale, "sm_scale", above=0.0)
    knobs = Knobs(causal=causal, window_left=-1, softcap=softcap, scale=scale,
                  score_mod=_lib.check_str(score_mod, "score_mod") or None,
                  mask_mod=_lib.check_str(mask_mod, "mask_mod") or None,
                  batch_invariant=invariant)
    return _compose(knobs, causal, window, mode == "ALIBI", custom)


def _split_fixed(fixed_split_size, disable_split_kv):
    """FlashInfer's ``fixed_split_size`` / ``disable_split_kv`` ask that a
    request's splits, and so its output bits, not depend on the rest of the
    batch: attn's batch invariance (docs/semantics.md), whose splits are its
    own (every 2048 keys), whatever size is asked."""
    fixed = fixed_split_size is not None and \
        _lib.check_int(fixed_split_size, "fixed_split_size") > 0  # FlashInfer's -1: none
    return fixed or _flag(disable_split_kv, "disable_split_kv")


def _window(window_left):
    """FlashInfer's window_left as attn's: -1 (None or any negative) is no
    window; a window must fit a C int (a larger one is an error, never a
    wrapped value that turns the window off)."""
    if window_left is None:
        return -1
    return max(-1, _lib.check_int(window_left, "window_left", None, _lib.INT32_MAX))


def _unsupported_run_args(args, kv_cache_sf=None, skip_softmax_threshold_scale_factor=None,
                          q_scale=None):
    if args:
        raise NotImplementedError("run(*args): FlashInfer's custom-kernel arguments do not "
                                  "apply to attn (aux tables: run(aux=...))")
    if kv_cache_sf is not None:
        raise NotImplementedError("kv_cache_sf: attn has no NVFP4 caches (FP8 e4m3/e5m2 with "
                                  "k_scale/v_scale)")
    if skip_softmax_threshold_scale_factor is not None:
        raise NotImplementedError("skip_softmax_threshold_scale_factor: attn computes exact "
                                  "softmax")
    if not _is_one(q_scale):
        raise NotImplementedError("q_scale: these wrappers take 16-bit queries; q_scale must "
                                  "be None or 1.0")


def _as_torch(obj):
    torch = _runtime.require_torch("converting an LSE")
    if isinstance(obj, torch.Tensor):
        return obj
    if hasattr(obj, "__cuda_array_interface__"):
        return torch.as_tensor(obj, device="cuda")
    return torch.from_dlpack(obj)


def _to_base2(lse, stream, device):
    """Natural-log LSE (attn's) to base 2 (FlashInfer's), in place."""
    t = _as_torch(lse)
    with _runtime.torch_stream(stream, device):
        t.mul_(LOG2E)


# --- shared pieces: scales, tables, the paged cache ----------------------------


class _Scale:
    """One FP8 dequantization scale as a device float32 at a fixed
    address; a float argument is written into it (only when it changes, so
    a captured graph replays with the value it was captured with)."""

    def __init__(self, device, what):
        torch = _runtime.require_torch(what)
        self.buf = torch.ones(1, dtype=torch.float32, device=_runtime._torch_device(device))
        self.value = 1.0
        self.device = device

    def pointer(self, value, stream):
        if value != self.value:
            with _runtime.torch_stream(stream, self.device):
                self.buf.fill_(float(value))
            self.value = value
        return self.buf.data_ptr()


def _folded_scales(kv_type, q_scale, k_scale, v_scale):
    """FlashInfer's decode and paged-prefill run(): ``q_scale`` and, on a
    16-bit cache, ``k_scale`` multiply sm_scale; on a 16-bit cache
    ``v_scale`` multiplies the output (FP8 caches take k/v scales in the
    kernel: _scales). Returns (score factor, output factor or None)."""
    factor, out_factor = 1.0, None
    if q_scale is not None:
        if not _is_number(q_scale):
            raise NotImplementedError("q_scale: a float here (FlashInfer folds it into sm_scale); "
                                      "a tensor of scales would need FP8-query kernels")
        factor *= _scale(q_scale, "q_scale")
    if kv_type in _t.FP8_DTYPES:
        return factor, None
    for name, s in (("k_scale", k_scale), ("v_scale", v_scale)):
        if s is not None and not _is_number(s):
            _t.tensor(s, name, dtype="float32")  # TypeError unless an array of scales
            raise NotImplementedError("%s: a tensor of scales applies to FP8 caches; on a %s "
                                      "cache FlashInfer takes a float" % (name, kv_type))
    if k_scale is not None:
        factor *= _scale(k_scale, "k_scale")
    # FlashInfer skips only a float 1.0; any other 1 multiplies by 1.
    if v_scale is not None and not (isinstance(v_scale, float) and v_scale == 1.0):
        out_factor = _scale(v_scale, "v_scale")
        if out_factor == 1:
            out_factor = None
    return factor, out_factor


def _scale_output(out_t, factor, stream, device):
    """``out *= v_scale`` on the stream (FlashInfer's 16-bit v_scale)."""
    if factor is not None:
        with _runtime.torch_stream(stream, device):
            _as_torch(out_t.obj).mul_(factor)


def _scales(wrapper, k_scale, v_scale, num_kv_heads, kv_type, stream, device, folded=False):
    """(k pointer, v pointer, count, per_head) for attn_paged_kv / prefill
    args. 16-bit caches take no scales (1.0 or None only; ``folded``: any,
    _folded_scales applies them)."""
    fp8 = kv_type in _t.FP8_DTYPES
    if not fp8 and folded:
        return None, None, 0, False
    if not fp8:
        for name, s in (("k_scale", k_scale), ("v_scale", v_scale)):
            if s is None or (_is_number(s) and _scale(s, name) == 1.0):
                continue
            if not _is_number(s):
                _t.tensor(s, name, dtype="float32")  # TypeError unless an array of scales
            raise NotImplementedError("%s: attn applies dequantization scales to FP8 caches "
                                      "only (this one is %s)" % (name, kv_type))
        return None, None, 0, False
    ptrs, counts = [], []
    for name, s in (("k_scale", k_scale), ("v_scale", v_scale)):
        if s is None or _is_number(s):
            holder = wrapper._scale_bufs.get(name)
            if holder is None:
                if _runtime.capturing():
                    raise RuntimeError("attn: %s's first use came during CUDA graph capture; "
                                       "run once before capturing" % name)
                holder = _Scale(device, "FP8 scales")
                wrapper._scale_bufs[name] = holder
            ptrs.append(holder.pointer(1.0 if s is None else _scale(s, name), stream))
            counts.append(1)
        else:
            t = _t.tensor(s, name, dtype="float32")
            if t.numel() not in (1, num_kv_heads):
                raise ValueError("%s: expected 1 or num_kv_heads (%d) float32 scales, got shape %s"
                                 % (name, num_kv_heads, t.shape))
            ptrs.append(t.ptr)
            counts.append(t.numel())
    if counts[0] != counts[1]:
        raise ValueError("k_scale and v_scale: expected the same number of scales, got %d and %d"
                         % tuple(counts))
    return ptrs[0], ptrs[1], counts[0], counts[0] > 1


def _is_number(x):
    return isinstance(x, numbers.Real)


def _is_one(scale):
    """None or the number 1 (a scale these wrappers accept and ignore)."""
    return scale is None or (_is_number(scale) and not isinstance(scale, bool) and scale == 1)


def _scale(value, name):
    """A float FP8 scale: finite and > 0 (a tensor of scales is checked as
    an array)."""
    return _lib.check_float(value, name, above=0.0)


def _page_shape(layout, page_size, num_kv_heads, head_dim):
    if layout == "NHD":
        return (page_size, num_kv_heads, head_dim), "page_size, num_kv_heads, head_dim"
    return (num_kv_heads, page_size, head_dim), "num_kv_heads, page_size, head_dim"


def _with_page_dim(cache, layout):
    """FlashInfer's caches of pages of one token may leave out the page
    dim (k/v [pages, heads, dim], or [pages, 2, heads, dim] for both): the
    same memory as pages of one token, given that dim back as a view."""
    at = -3 if layout == "NHD" else -2

    def expand(t, ndim):
        dim = getattr(t, "dim", None)
        return t.unsqueeze(at) if dim is not None and dim() == ndim else t

    if isinstance(cache, (tuple, list)) and len(cache) == 2:
        return type(cache)(expand(t, 3) for t in cache)
    return expand(cache, 4)


def paged_kv(cache, layout, num_kv_heads, head_dim, page_size, kv_type, name="paged_kv_cache",
             into=None):
    """The attn_paged_kv (without scales) of a FlashInfer paged cache, and
    the tensors read (for device checks). ``into``: an attn_paged_kv that
    already holds this geometry (``set_geometry``), of which only the
    arrays are set."""
    cache = _with_page_dim(cache, layout)
    shape, dims = _page_shape(layout, page_size, num_kv_heads, head_dim)
    c = _lib.attn_paged_kv() if into is None else into
    if isinstance(cache, (tuple, list)):
        if len(cache) != 2:
            raise ValueError("%s: expected a tensor or a (k_cache, v_cache) tuple, got %d items"
                             % (name, len(cache)))
        k = _t.tensor(cache[0], name + "[0]", dtype=kv_type, dense=False)
        v = _t.tensor(cache[1], name + "[1]", dtype=kv_type, dense=False)
        for t in (k, v):
            if t.shape[1:] != shape or len(t.shape) != 4:
                _t.check_shape(t, (None,) + shape, "num_pages, " + dims)
            _t.check_dense(t, token_stride=True)
        if k.shape != v.shape:
            raise ValueError("%s: k_cache %s and v_cache %s differ in shape"
                             % (name, k.shape, v.shape))
        if k.shape[0] > 1 and k.strides[0] != v.strides[0]:
            raise ValueError("%s: k_cache and v_cache must have identical strides (page strides "
                             "%d and %d elements: attn reads both through one)"
                             % (name, k.strides[0], v.strides[0]))
        c.k, c.v = k.ptr, v.ptr
        c.page_stride = k.token_stride()
        c.num_pages = k.shape[0]
        tensors = (k, v)
    else:
        t = _t.tensor(cache, name, dtype=kv_type, dense=False)
        if len(t.shape) != 5 or t.shape[1:] != (2,) + shape:
            _t.check_shape(t, (None, 2) + shape, "num_pages, 2, " + dims)
        if t.strides[2:] != _t._dense_cached(shape):
            _t.check_dense(t, from_dim=2)
        c.k = t.ptr
        c.v = t.offset(t.strides[1])
        c.page_stride = t.strides[0] if t.shape[0] > 1 else t.row_elements()
        c.num_pages = t.shape[0]
        tensors = (t,)
    if into is None:
        set_geometry(c, layout, num_kv_heads, head_dim, page_size, kv_type)
    return c, tensors


def set_geometry(c, layout, num_kv_heads, head_dim, page_size, kv_type):
    """The fields of an attn_paged_kv that a plan fixes."""
    c.dtype = _lib.DTYPE_CODES[kv_type]
    c.num_kv_heads, c.head_dim, c.page_size = num_kv_heads, head_dim, page_size
    c.layout = _lib.LAYOUT_NHD if layout == "NHD" else _lib.LAYOUT_HND


def _set_scales(c, k_ptr, v_ptr, count):
    if count:  # a fresh attn_paged_kv has none
        c.k_scale = k_ptr
        c.v_scale = v_ptr
        c.num_kv_scales = count


def _fill_tables(tables, alibi_ptr, sinks_ptr, aux, stream):
    tables.alibi_slopes = alibi_ptr
    tables.sinks = sinks_ptr
    if aux is not None and not isinstance(aux, (list, tuple)):
        raise TypeError("aux: expected a list of tables, got %s" % type(aux).__name__)
    if aux:
        if len(aux) > _lib.MAX_AUX_TABLES:
            raise ValueError("aux: at most %d tables, got %d" % (_lib.MAX_AUX_TABLES, len(aux)))
        for i, a in enumerate(aux):
            t = _t.tensor(a, "aux[%d]" % i, dtype=("float32", "int32"), stream=stream)
            if not 1 <= t.ndim <= 3:
                raise ValueError("aux[%d]: expected 1 to 3 dimensions, got %d" % (i, t.ndim))
            tables.aux[i].data = t.ptr
            # 1 past the rank; each size a C int.
            tables.aux[i].dims = tuple(_lib.check_int(t.shape[d], "aux[%d]: size of dimension %d"
                                                      % (i, d), 0, _lib.INT32_MAX)
                                       if d < t.ndim else 1 for d in range(3))
    _clear_aux(tables, len(aux) if aux else 0)


def _clear_aux(tables, start=0):
    for i in range(start, _lib.MAX_AUX_TABLES):
        if tables.aux[i].data:
            tables.aux[i].data = None
            for d in range(3):
                tables.aux[i].dims[d] = 0


def _check_fixed_tables(batch, stride):
    """Graph mode's page tables are allocated up front (fixed addresses):
    batch x max_pages_per_request int32 entries."""
    _lib.check_preallocation(4 * batch * stride, "max_pages_per_request (%d) x batch size (%d)"
                             % (stride, batch))


# The pages start at a multiple of this many int32 entries (128 bytes) into
# the tables' buffer, after the lengths.
_TABLE_ALIGN = 32

# plan() reads an index array back in one copy with the others when it holds
# at most this many entries (larger page-id buffers: the entries the requests
# use, once indptr says which).
_FUSED_READ_IDS = 1 << 14


def _lens_room(batch):
    return -(-max(1, batch) // _TABLE_ALIGN) * _TABLE_ALIGN


class _PageAt:
    """Where a table's largest page id is (``name[i]``), found when a
    message needs it: plan() records the id, run() names its place only
    when it is past the cache."""

    __slots__ = ("name", "ids", "value", "offset")

    def __init__(self, name, ids, value, offset):
        self.name, self.ids, self.value, self.offset = name, ids, value, offset

    def __str__(self):
        if isinstance(self.ids, list):
            i = self.ids.index(self.value)
        else:
            i = int((self.ids == self.value).nonzero()[0, 0])
        return "%s[%d]" % (self.name, i + self.offset)


class _PageTables:
    """Dense ``[batch, stride]`` int32 page tables and ``[batch]`` lengths
    on the device, in one buffer (the lengths, then the pages from a
    128-byte boundary: one upload per plan), at fixed addresses (fixed
    sizes under use_cuda_graph). After a fill, ``max_page`` is the largest
    page id the table holds (-1: none) and ``max_page_at`` where the caller
    gave it: run() checks it against the cache's pages before any launch."""

    def __init__(self, device, fixed_batch=0, fixed_stride=0, what="plan()"):
        fixed = fixed_batch > 0
        self.device = device
        self.fixed_stride = fixed_stride
        self.lens_room = _lens_room(fixed_batch) if fixed else 0
        self.buf = _runtime.DeviceInts("int32", device,
                                       self.lens_room + fixed_batch * fixed_stride if fixed else 0,
                                       fixed, what)
        self.pages_at = self.lens_room  # entries from the start of buf
        self.stride = max(1, fixed_stride)
        self.max_page, self.max_page_at = -1, None
        self.c_lens = None  # the last fill's lengths as C ints
        self.stage = self.stage_t = self.cols = self.upload_views = None
        self.read_end = 0  # entries of stage the last read_back filled
        self.range = self.range_out = None  # _range's output
        # Pages of the cache a captured graph reads (use_cuda_graph, after a
        # run()): ids are checked against it before the tables change.
        self.page_limit = None

    def _staging(self, n):
        """The host int32 array plan() builds the tables in (and reads
        device arrays into), kept with its torch view for the plans after,
        grown to ``n`` entries; returns (array, tensor, grown). Reusing it is
        safe: a copy from pageable memory has taken its data when copy_
        returns, and a read into it has landed."""
        arr = self.stage
        if arr is not None and n <= len(arr):
            return arr, self.stage_t, False
        torch = _runtime.require_torch("plan()")
        # array('i') refuses a resize while torch holds its buffer.
        arr = array.array("i", bytes(4 * max(n, 2 * len(arr) if arr is not None else 0, 4096)))
        self.stage, self.stage_t = arr, torch.frombuffer(arr, dtype=torch.int32)
        self.read_end = 0
        return arr, self.stage_t, True

    def read_back(self, arrays, batch=0):
        """``_read_back`` of ``arrays`` (the page ids last) into the staging
        array: one copy, no new host tensor, laid out so that the page ids
        start at a 128-byte boundary past room for ``batch`` lengths and
        the arrays before them, where ``fill_csr`` finds a table of
        requests with the same number of pages already in place."""
        self.read_end = 0
        torch = _runtime.torch_or_none()
        if torch is None:
            return arrays
        picked = _fused_reads(arrays, torch)
        if not picked or picked == [len(arrays) - 1]:
            return arrays  # the page ids alone: read where the requests use them (_read_ids)
        sizes = [arrays[i].numel() for i in picked]
        if arrays[picked[0]].dtype != torch.int32:
            return _read_back(*arrays)  # int64 ids: checked before any narrowing
        head = sum(sizes[:-1])
        at = _lens_room(max(head, batch))  # where the last one starts
        _, stage, _ = self._staging(at + sizes[-1])
        dst = stage.narrow(0, at - head, head + sizes[-1])
        if len(picked) == 1:
            dst.copy_(arrays[picked[0]])
        else:
            dst.copy_(torch.cat([arrays[i] for i in picked]))
        out = list(arrays)
        pos = at - head
        for i, n in zip(picked, sizes):
            out[i] = stage.narrow(0, pos, n)
            pos += n
        self.read_end = pos
        return out

    def fill_csr(self, indptr, indices, last_page_len, page_size, stream,
                 names=("indptr", "indices", "last_page_len"), check_batch=None, read=True):
        """FlashInfer's CSR page table -> dense rows; returns the host
        lengths (tokens per request; as C ints in ``c_lens``). Checks the
        table as it passes through the host: indptr from 0 up,
        last_page_len 1..page_size, lengths within int32, and every page id
        the requests use >= 0 and within int32; ``check_batch(batch)``
        before the tables change. CUDA tensors are read back in one copy
        (``read_back``; ``read=False``: the caller did), the tables
        uploaded in one."""
        if read:
            indptr, last_page_len, indices = self.read_back(
                (indptr, last_page_len, indices), _size(last_page_len, _runtime.torch_or_none()))
        ip, lp, ids, ids_at, ids_len = _read_csr(indptr, indices, last_page_len, names)
        seq_lens, counts, max_pages = _csr_lens_of(ip, lp, page_size, names[0], names[2])
        batch = len(seq_lens)
        if check_batch is not None:
            check_batch(batch)
        stride = self.fixed_stride or max(1, max_pages)
        if max_pages > stride:
            raise ValueError("%s: a request has %d pages, more than the %d per request this "
                             "wrapper holds (max_pages_per_request)"
                             % (names[1], max_pages, stride))
        if batch and ids_len < ip[-1]:
            raise ValueError("%s: has %d entries, but %s[-1] is %d"
                             % (names[1], ids_len, names[0], ip[-1]))
        start, end = (ip[0], ip[-1]) if batch else (0, 0)
        n = end - start
        full = n == batch * stride  # every request has stride pages
        lens_room = self.lens_room or _lens_room(batch)
        low = high = None
        if not n:
            used = []
        elif isinstance(ids, list):
            used = ids[start - ids_at:end - ids_at]
            low, high = min(used), max(used)  # each checked as an int32 (host_ints)
        else:
            if ids is None or not ids_at <= start or end - ids_at > ids.numel():  # not read yet
                ids, ids_at = self._read_ids(indices, start, n, lens_room, full), start
            used = ids if ids_at == start and ids.numel() == n else \
                ids[start - ids_at:end - ids_at]
            low, high = self._range(used)
        if low is not None:
            if low < 0:
                at = used.index(low) if isinstance(used, list) else \
                    int((used == low).nonzero()[0, 0])
                raise ValueError("%s[%d] = %d: a page id must be >= 0"
                                 % (names[1], at + start, low))
            where = _PageAt(names[1], used, high, start)
            if high > _lib.INT32_MAX:
                raise ValueError("%s = %d: a page id must fit int32" % (where, high))
            self._check_limit(high, where)
        torch = _runtime.require_torch("plan()")
        c_lens = array.array("i", seq_lens)
        # The table goes where the pages already are (a full table read
        # into place), else after what was read into the staging array.
        base = -(-self.read_end // _TABLE_ALIGN) * _TABLE_ALIGN
        if full and n and not isinstance(used, list) and self.stage is not None and \
                used.dtype == torch.int32:
            at = (used.data_ptr() - self.stage_t.data_ptr()) // 4
            # Fixed tables keep their lengths' room (a captured graph reads them).
            if 0 <= at < len(self.stage) and at % _TABLE_ALIGN == 0 and \
                    (at == lens_room if self.lens_room else at >= lens_room):
                base, lens_room = 0, at
        total = lens_room + batch * stride
        self.buf.ensure(total, names[1])
        arr, stage, grown = self._staging(base + total + (0 if full else n))
        if grown:
            base = 0
        arr[base:base + batch] = c_lens
        arr[base + batch:base + lens_room] = _zeros(lens_room - batch)
        pages_at = base + lens_room
        if full:
            if isinstance(used, list):
                if n:
                    arr[pages_at:pages_at + n] = array.array("i", used)
            elif used.data_ptr() != stage.data_ptr() + 4 * pages_at:  # not in place
                stage.narrow(0, pages_at, n).copy_(used)
        else:
            pages = stage.narrow(0, pages_at, batch * stride)
            pages.zero_()
            if n:
                if isinstance(used, list):
                    arr[pages_at + batch * stride:pages_at + batch * stride + n] = \
                        array.array("i", used)
                    used = stage.narrow(0, pages_at + batch * stride, n)
                mask = self._columns(stride, torch) < _int32_tensor(counts, torch)[:, None]
                pages.view(batch, stride).masked_scatter_(mask, used.to(torch.int32))
        # The upload's views are kept while the buffers and sizes stay.
        views = self.upload_views
        if views is None or views[0] is not self.buf.buf or views[1] is not stage or \
                views[2] != base or views[3] != total:
            views = self.upload_views = (self.buf.buf, stage, base, total,
                                         self.buf.buf.narrow(0, 0, total),
                                         stage.narrow(0, base, total))
        with _runtime.torch_stream(stream, self.device):
            views[4].copy_(views[5], non_blocking=True)
        self.pages_at, self.stride = lens_room, stride
        self.max_page = -1 if high is None else high
        self.max_page_at = None if high is None else where
        self.c_lens = c_lens
        return seq_lens

    def _range(self, ids):
        """(min, max) of a host tensor of ids: an int32 one's written into
        two kept C ints (no item() per value)."""
        torch = _runtime.torch_or_none()
        if ids.dtype != torch.int32:
            return tuple(int(x) for x in ids.aminmax())
        if self.range_out is None:
            self.range = array.array("i", (0, 0))
            t = torch.frombuffer(self.range, dtype=torch.int32)
            self.range_out = (t[0], t[1])
        torch.aminmax(ids, out=self.range_out)
        return self.range[0], self.range[1]

    def _read_ids(self, indices, start, n, lens_room, full):
        """The ``n`` page ids from ``start`` of a CUDA ``indices`` the fused
        read left out, read back: int32 ones into the staging array (where
        the table's pages go when ``full``)."""
        torch = _runtime.torch_or_none()
        part = indices if start == 0 and indices.numel() == n else indices.narrow(0, start, n)
        if indices.dtype != torch.int32:
            return _host_tensor(part)
        at = lens_room if full else -(-max(self.read_end, lens_room) // _TABLE_ALIGN) * \
            _TABLE_ALIGN
        _, stage, _ = self._staging(at + n)
        dst = stage.narrow(0, at, n)
        dst.copy_(part)
        self.read_end = at + n
        return dst

    def _columns(self, stride, torch):
        """0 .. stride - 1 as a host tensor (kept)."""
        cols = self.cols
        if cols is None or cols.numel() < stride:
            cols = self.cols = torch.arange(max(stride, 64))
        return cols.narrow(0, 0, stride)

    def upload_lens(self, lens, stream, name="seq_lens"):
        """The lengths alone (plan(block_tables=...): the caller's table)."""
        self.buf.upload(lens, stream, name)

    def check_direct(self, table, lens, page_size, names=("block_tables", "seq_lens")):
        """Checks a caller's dense ``[rows, width]`` page table (an attn
        Tensor) before plan() uses it: the width holds every request's
        pages and every page id a request reads is >= 0 (one reduction on
        the device). Sets ``max_page`` like ``fill_csr``."""
        torch = _runtime.require_torch("plan()")
        width = table.shape[1]
        needed = []
        for b, n in enumerate(lens):
            if n < 0:
                raise ValueError("%s[%d] = %d: expected >= 0" % (names[1], b, n))
            pages = -(-n // page_size)
            if pages > width:
                raise ValueError("%s[%d] = %d: needs %d pages of %d tokens, but %s has %d "
                                 "columns" % (names[1], b, n, pages, page_size, names[0], width))
            needed.append(pages)
        self.max_page, self.max_page_at = -1, None
        if not needed or not max(needed):
            return
        t = _as_torch(table.obj)[:len(needed)]
        col = torch.arange(width, device=t.device)
        mask = col[None, :] < torch.tensor(needed, device=t.device)[:, None]
        low, high = _page_range(t, 0, torch, mask)
        row = lambda flat: "%s[%d, %d]" % (names[0], flat // width, flat % width)  # noqa: E731
        if low[0] < 0:
            raise ValueError("%s = %d: a page id must be >= 0" % (row(low[1]), low[0]))
        self._check_limit(high[0], row(high[1]))
        self.max_page, self.max_page_at = high[0], row(high[1])

    def _check_limit(self, page, where):
        if self.page_limit is not None and page >= self.page_limit:
            raise ValueError("%s = %d: past the end of the paged cache this CUDA-graph wrapper's "
                             "run() reads (%d pages)" % (where, page, self.page_limit))

    @property
    def pages_ptr(self):
        return self.buf.ptr + 4 * self.pages_at if self.buf.buf is not None else 0

    @property
    def lens_ptr(self):
        return self.buf.ptr


def _int32_tensor(values, torch):
    """A host int32 tensor of checked int32s (through array('i'): a copy in
    C, where torch.tensor() converts item by item)."""
    if not values:
        return torch.zeros(0, dtype=torch.int32)
    return torch.frombuffer(array.array("i", values), dtype=torch.int32)


def _host_tensor(t):
    """A torch tensor on the host (one copy back from a device)."""
    return t.cpu() if t.is_cuda else t


def _index_tensor(x, name, torch):
    """ValueError or TypeError naming ``name`` unless ``x`` is a 1-D tensor
    of integers."""
    if x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool:
        raise TypeError("%s: expected an integer tensor, got dtype %s" % (name, x.dtype))
    if x.dim() != 1:
        raise ValueError("%s: expected a 1-D array, got shape %s" % (name, tuple(x.shape)))


def _fused_reads(arrays, torch):
    """The positions of ``arrays`` that one read back takes: CUDA index
    tensors, 1-D, of the first one's integer dtype and device, at most
    _FUSED_READ_IDS entries."""
    picked, first = [], None
    for i, x in enumerate(arrays):
        if isinstance(x, torch.Tensor) and x.is_cuda and x.dim() == 1 and \
                x.numel() <= _FUSED_READ_IDS and x.dtype in (torch.int32, torch.int64) and \
                (first is None or (x.dtype == first.dtype and x.device == first.device)):
            first = first if first is not None else x
            picked.append(i)
    return picked


def _read_back(*arrays):
    """``arrays`` with their CUDA index tensors (``_fused_reads``) replaced
    by host copies made in one read back (one cat, one synchronization, as
    FlashInfer's plan has); anything else as it is, for the checks that
    name it."""
    torch = _runtime.torch_or_none()
    if torch is None:
        return arrays
    picked = _fused_reads(arrays, torch)
    if not picked:
        return arrays
    out = list(arrays)
    if len(picked) == 1:  # host indptr (FlashInfer's usual): no cat to launch
        out[picked[0]] = arrays[picked[0]].cpu()
        return out
    host = torch.cat([arrays[i] for i in picked]).cpu()
    at = 0
    for i in picked:
        n = arrays[i].numel()
        out[i] = host.narrow(0, at, n)
        at += n
    return out


def _is_cuda(x, torch):
    return torch is not None and isinstance(x, torch.Tensor) and x.is_cuda


def _size(x, torch):
    """Entries of a 1-D index array (a hint: 0 when unknown)."""
    if isinstance(x, (list, tuple)):
        return len(x)
    if torch is not None and isinstance(x, torch.Tensor):
        return x.numel()
    return 0


_ZEROS = array.array("i")


def _zeros(n):
    """``n`` C int zeros (an array('i'), from a kept one)."""
    global _ZEROS
    if len(_ZEROS) < n:
        _ZEROS = array.array("i", bytes(4 * max(n, 2 * len(_ZEROS), 256)))
    return _ZEROS[:n]


def _read_csr(indptr, indices, last_page_len, names):
    """(indptr ints, last_page_len ints, page ids, the index of the first
    id held, the number of ids) of a CSR page table on the host. The ids
    are a list (host input, each checked) or a host tensor (a torch tensor:
    its dtype checked here, its values where they are used; a CUDA one is
    read where the requests use it)."""
    ip = _runtime.host_ints(indptr, names[0])
    lp = _runtime.host_ints(last_page_len, names[2])
    torch = _runtime.torch_or_none()
    if torch is not None and isinstance(indices, torch.Tensor):
        _index_tensor(indices, names[1], torch)
        if not indices.is_cuda:
            return ip, lp, indices, 0, indices.numel()
        # Read once indptr says which entries the requests use (fill_csr).
        return ip, lp, None, 0, indices.numel()
    ids = _runtime.host_ints(indices, names[1])
    return ip, lp, ids, 0, len(ids)


def _check_rising(indptr, name):
    """ValueError unless ``indptr`` (host ints) never decreases; returns
    its steps."""
    steps = list(map(operator.sub, indptr[1:], indptr[:-1]))
    if steps and min(steps) < 0:
        b = next(b for b, n in enumerate(steps) if n < 0)
        raise ValueError("%s: decreases at request %d (%d > %d)"
                         % (name, b, indptr[b], indptr[b + 1]))
    return steps


def _csr_lens(indptr, last_page_len, page_size, indptr_name, last_name):
    """(indptr, tokens per request, pages per request) of a CSR page table,
    checked: indptr from >= 0 up, batch + 1 entries, last_page_len 1 to
    page_size where a request has pages, lengths within int32."""
    ip = _runtime.host_ints(indptr, indptr_name)
    lp = _runtime.host_ints(last_page_len, last_name)
    seq_lens, counts, _ = _csr_lens_of(ip, lp, page_size, indptr_name, last_name)
    return ip, seq_lens, counts


def _csr_lens_of(ip, lp, page_size, indptr_name, last_name):
    """``_csr_lens`` of host ints: (tokens per request, pages per request,
    the most pages of a request)."""
    batch = len(lp)
    if len(ip) != batch + 1:
        raise ValueError("%s: expected %d entries (the batch size %d of %s, + 1), got %d"
                         % (indptr_name, batch + 1, batch, last_name, len(ip)))
    if ip[0] < 0:
        raise ValueError("%s[0] = %d: expected >= 0" % (indptr_name, ip[0]))
    if not batch:
        return [], [], 0
    counts = list(map(operator.sub, ip[1:], ip[:-1]))
    most = max(counts)
    # Every request with pages and a last page in range, and no length past
    # int32 (each is at most pages x page_size): a batch's usual form, in
    # C-level passes; anything else is found request by request.
    if min(counts) > 0 and min(lp) >= 1 and max(lp) <= page_size and \
            most * page_size <= _lib.INT32_MAX:
        return [n * page_size + l - page_size for n, l in zip(counts, lp)], counts, most
    seq_lens = []
    for b in range(batch):
        n = counts[b]
        if n < 0:
            raise ValueError("%s: decreases at request %d (%d > %d)"
                             % (indptr_name, b, ip[b], ip[b + 1]))
        if n == 0:
            seq_lens.append(0)
        else:
            if not 1 <= lp[b] <= page_size:
                raise ValueError("%s[%d] = %d: expected 1 to page_size (%d)"
                                 % (last_name, b, lp[b], page_size))
            tokens = (n - 1) * page_size + lp[b]
            if tokens > _lib.INT32_MAX:
                raise ValueError("%s: request %d holds %d tokens (%d pages of %d), more than "
                                 "int32 lengths count" % (indptr_name, b, tokens, n, page_size))
            seq_lens.append(tokens)
    return seq_lens, counts, most


def _direct_lens(seq_lens, indptr, last_page_len, page_size, names):
    """Tokens per request for plan(block_tables=...): ``seq_lens``, else
    from the CSR lengths."""
    if seq_lens is not None:
        return _runtime.host_ints(seq_lens, "seq_lens", 0)
    return _csr_lens(indptr, last_page_len, page_size, names[0], names[1])[1]


def _direct_tables(wrapper, block_tables, lens, page_size, stream):
    """plan(block_tables=..., seq_lens=...): the caller's dense int32 page
    table, checked (rows, width, page ids), used in place; returns
    (lens, table pointer, row stride)."""
    bt = _t.tensor(block_tables, "block_tables", dtype="int32", shape=(None, None))
    if bt.shape[0] < len(lens):
        raise ValueError("block_tables: %d rows for a batch of %d" % (bt.shape[0], len(lens)))
    stride = _int(bt.token_stride(), "block_tables: row stride", 0)
    wrapper._tables.check_direct(bt, lens, page_size)
    wrapper._tables.upload_lens(lens, stream)
    wrapper._direct = bt  # keep it alive with the plan
    return lens, bt.ptr, stride


def _page_range(ids, offset, torch, mask=None):
    """((min, index), (max, index)) of a tensor of page ids (only where
    ``mask``; indexes from ``offset``), or (None, None) when there are
    none, in one read back (plan() synchronizes anyway)."""
    if ids.numel() == 0:
        return None, None
    flat = ids.reshape(-1).long()
    if mask is None:
        lows = highs = flat
        low, high = flat.min(), flat.max()
    else:
        m = mask.reshape(-1)
        lows = torch.where(m, flat, torch.full_like(flat, _lib.INT64_MAX))
        highs = torch.where(m, flat, torch.full_like(flat, -1))
        low, high = lows.min(), highs.max()
    low, high, j = torch.stack([low, high, torch.argmax(highs)]).tolist()
    i = int(torch.argmin(lows)) if low < 0 else 0  # where, for the error only
    return (low, i + offset), (high, j + offset)


class _Plan:
    # Class-level defaults and one dict update: a plan() makes one of these,
    # and a setattr per field cost more than the rest of _Plan's work.
    gen = batch = seq_lens = cu_q = variant = for_graph = num_q_tokens = stride = None
    page_tables_ptr = seq_lens_ptr = window_left = keep = levels = level_tables = None
    num_levels = device = run_args = max_page_at = cache = fast = mask_aux = None
    c_seq_lens = c_cu_q = None
    rope = None  # _Rope: ROPE_LLAMA's positions
    planned = None  # the plan()'s variant once forward() has replaced some knobs
    max_page = -1  # no paged tables (ragged prefill)

    def __init__(self, **kw):
        self.__dict__.update(kw)
        if self.max_page is None:
            self.max_page = -1
        self.run_handles = {}  # (lse, sinks, per-head scales) -> planned handle


# The args fields every run() writes first: q, its token stride, out, its
# token stride, lse (adjacent in attn_decode_args and attn_prefill_args).
_IO_FIELDS = ("q", "q_stride_token", "out", "out_stride_token", "lse")


class _Fast:
    """A run() that passed every check, kept with its plan for the calls
    that repeat it: no stream, sinks, aux, LSE or scale tensors (a float
    scale the same as its), and torch tensors with the same dtype, shape,
    strides and CUDA device as its, on the same current device. Such a
    call passes the same checks, so it only writes its data pointers into
    that call's args struct and launches (``_run_fast``). Any other call
    takes the checked path, which drops the record and may make a new
    one."""

    __slots__ = ("tensor", "device", "tdevice", "metas", "out_shape", "out_dtype",
                 "out_strides", "out_stride", "dense_row", "k_scale", "v_scale", "write",
                 "launch", "function", "handle_ptr", "args_ptr", "get_device", "get_stream",
                 "empty")


def _record_fast(plan, h, a, tensors, out_t, k_scale, v_scale, write):
    """plan.fast for a run() that launched ``h`` with ``a`` after checking
    ``tensors`` (the inputs, as ``_t.Tensor``) and ``out_t``; ``write(a)``
    makes the pointer writer. Nothing when the call was not one the cached
    path can repeat."""
    torch = _runtime.torch_or_none()
    queries = _runtime.device_queries()
    if torch is None or queries is None or plan.device is None or plan.device < 0:
        return
    for s in (k_scale, v_scale):
        if s is not None and type(s) is not float:
            return
    objs = [t.obj for t in tensors] + [out_t.obj]
    if any(type(o) is not torch.Tensor for o in objs) or \
            any(t.device != plan.device for t in tensors) or out_t.device != plan.device:
        return
    objs.pop()
    f = _Fast()
    f.tensor, f.device = torch.Tensor, plan.device
    f.tdevice = torch.device("cuda", plan.device)
    f.metas = [(o.dtype, o.shape, o.stride()) for o in objs]
    out = out_t.obj
    f.out_shape, f.out_dtype, f.out_strides = out.shape, out.dtype, out.stride()
    f.out_stride = out_t.token_stride()
    f.dense_row = out_t.row_elements()
    f.k_scale, f.v_scale = k_scale, v_scale
    f.write = write(a)
    f.launch, f.function = h.launch_function(), h._run_fn
    f.handle_ptr, f.args_ptr = h.ptr, ctypes.addressof(a)
    f.get_device, f.get_stream = queries
    f.empty = torch.empty
    plan.fast = f


def _same_scales(f, k_scale, v_scale):
    """Whether a run()'s k/v scales are the recorded call's (``_Fast``):
    the same object, or a float of the same value."""
    return (k_scale is f.k_scale or (type(k_scale) is float and k_scale == f.k_scale)) and \
        (v_scale is f.v_scale or (type(v_scale) is float and v_scale == f.v_scale))


def _run_fast(f, tensors, out):
    """run() through the record ``f`` (``_Fast``): the output, or None when
    this call is not the recorded one's repeat (the caller then takes the
    checked path)."""
    T, dev = f.tensor, f.device
    ptrs = []
    for t, (dtype, shape, strides) in zip(tensors, f.metas):
        if type(t) is not T or t.dtype is not dtype or t.shape != shape or \
                t.stride() != strides or not t.is_cuda or t.get_device() != dev:
            return None
        ptrs.append(t.data_ptr())
    if out is None:
        out = f.empty(f.out_shape, dtype=f.out_dtype, device=f.tdevice)
        out_stride = f.dense_row
    elif type(out) is T and out.dtype is f.out_dtype and out.shape == f.out_shape and \
            out.stride() == f.out_strides and out.is_cuda and out.get_device() == dev:
        out_stride = f.out_stride
    else:
        return None
    if f.get_device() != dev:  # the launch needs the plan's device current
        return None
    f.write(ptrs, out.data_ptr(), out_stride)
    status = f.launch(f.handle_ptr, f.args_ptr, f.get_stream(dev))
    if status:
        _lib.raise_for(status, f.function)
    return out


def _ragged_writer(q_t):
    """The pointer writer of a ragged prefill run: q, out, k and v."""
    q_stride = q_t.token_stride()

    def make(a):
        io = _lib.field_writer(a, _IO_FIELDS)
        kv = _lib.field_writer(a, ("k", "v"))

        def write(ptrs, out_ptr, out_stride):
            io(ptrs[0], q_stride, out_ptr, out_stride, 0)
            kv(ptrs[1], ptrs[2])
        return write
    return make


def _cache_writer(q_t, cache):
    """The pointer writer of a run over one paged-cache tensor (decode,
    paged prefill): q, out and the cache's k and v (v at the validated
    call's offset from k)."""
    q_stride = q_t.token_stride()
    v_offset = cache.v - cache.k

    def make(a):
        io = _lib.field_writer(a, _IO_FIELDS)
        kv = _lib.field_writer(a, ("cache.k", "cache.v"))

        def write(ptrs, out_ptr, out_stride):
            io(ptrs[0], q_stride, out_ptr, out_stride, 0)
            kv(ptrs[1], ptrs[1] + v_offset)
        return write
    return make


class _Wrapper:
    """What the wrappers share: device, handle cache (one handle per
    variant), lazy planning of new variants, ALiBi slopes."""

    _what = "wrapper"

    def __init__(self, float_workspace_buffer, kv_layout, use_cuda_graph):
        self._kv_layout = _check_layout(kv_layout)
        self._device = _buffer_device(float_workspace_buffer)
        self._workspace = float_workspace_buffer
        self._use_cuda_graph = _flag(use_cuda_graph, "use_cuda_graph")
        self._handles = OrderedDict()
        self._plan = None
        self._gen = 0
        self._scale_bufs = {}
        self._alibi = {}
        self._cache_pages = None  # pages of the cache the last run() read
        self._variant_memo = None  # (plain arguments, variant) of the last plan()
        self._alibi_rows = None  # per query row, kv_len - q_len of its request (_alibi_lse)
        self._sink_jit = False  # FlashInfer's AttentionSink jit_args (_sink_args)
        self._op_id = None  # run() as a custom op under torch.compile (_compile)
        self._rope_graph = None  # ROPE_LLAMA's positions a captured run() reads (_RopeGraph)
        _compile.register(self)

    def _check_cache_pages(self, plan, num_pages):
        """run(): the plan's page ids against the cache given (before any
        launch); remembered for plans under use_cuda_graph."""
        if plan.max_page >= num_pages:
            raise ValueError("%s = %d: past the end of paged_kv_cache, which has %d pages (ids 0 "
                             "to %d)" % (plan.max_page_at, plan.max_page, num_pages,
                                         num_pages - 1))
        self._cache_pages = num_pages

    def _start_tables(self, tables):
        """plan() is about to rewrite the page tables: the old plan goes (a
        plan() that fails leaves the wrapper unplanned, never an old plan
        over new tables). Under use_cuda_graph a captured run() replays the
        new tables with no Python in between, so their ids are checked
        against the cache the last run() read before they change."""
        self._plan = None
        for t in tables:
            t.page_limit = self._cache_pages if self._use_cuda_graph else None

    @property
    def is_cuda_graph_enabled(self):
        """Whether the wrapper was built with use_cuda_graph=True."""
        return self._use_cuda_graph

    def reset_workspace_buffer(self, float_workspace_buffer, int_workspace_buffer=None):
        """Accepted for compatibility: attn owns its workspaces (the
        buffers only tell the device)."""
        dev = _buffer_device(float_workspace_buffer)
        if dev >= 0:
            self._device = dev

    def end_forward(self):
        """Accepted for compatibility (nothing to release)."""

    def _plan_device(self, stream, *arrays):
        """A plan's device (the wrapper's, else the first array's) and
        stream; plan() is refused during graph capture."""
        device = self._resolve_device(*arrays)
        s = _runtime.stream_handle(stream, device)
        if _runtime.capturing():
            raise RuntimeError("attn: plan() during CUDA graph capture; plan before capturing "
                               "(a captured run() stays valid for later plans)")
        return device, s

    def _start_page_tables(self, device):
        """The wrapper's page tables (made on the first plan), about to be
        rewritten (_start_tables)."""
        if self._tables is None:
            self._tables = _PageTables(device, self._fixed_batch, self._fixed_stride,
                                       self._what + ".plan()")
        self._start_tables([self._tables])

    def _resolve_device(self, *arrays):
        if self._device >= 0:
            return self._device
        for a in arrays:
            d = _array_device(a)
            if d >= 0:
                self._device = d
                return d
        self._device = max(0, _runtime.current_device())
        return self._device

    def _alibi_ptr(self, num_heads, stream):
        buf = self._alibi.get(num_heads)
        if buf is None:
            torch = _runtime.require_torch(self._what)
            buf = torch.tensor(get_alibi_slopes(num_heads), dtype=torch.float32)
            with _runtime.torch_stream(stream, self._device):
                buf = buf.to(_runtime._torch_device(self._device))
            self._alibi[num_heads] = buf
        return buf.data_ptr()

    def _alibi_slopes(self, num_heads, stream):
        """FlashInfer's slopes as a device float32 tensor (made once)."""
        self._alibi_ptr(num_heads, stream)
        return self._alibi[num_heads]

    def _plan_alibi_rows(self, offsets, stream, capacity=0):
        """Uploads, per query row, ``kv_len - q_len`` of its request: the
        constant FlashInfer's ALiBi adds to that row's scores (it counts a
        query from its request's first row, attn from the end of the keys),
        which the LSE carries (``_lse_to_base2``). A fixed buffer under
        use_cuda_graph (a captured run() replays it after later plans)."""
        rows = self._alibi_rows
        if rows is None:
            rows = self._alibi_rows = _runtime.DeviceInts(
                "int32", self._device, 0, self._use_cuda_graph, self._what + ".plan()")
        rows.ensure(max(len(offsets), capacity), "ALiBi query rows")
        rows.upload(offsets, stream, "ALiBi query rows")

    def _lse_to_base2(self, lse, stream, device, knobs, num_heads):
        """attn's natural-log LSE as FlashInfer's: base 2, and with ALiBi
        FlashInfer's row constant ``slope * (kv_len - q_len)`` added."""
        t = _as_torch(lse)
        with _runtime.torch_stream(stream, device):
            t.mul_(LOG2E)
            if _has_alibi(knobs) and self._alibi_rows is not None and t.shape[0]:
                off = self._alibi_rows.buf.narrow(0, 0, t.shape[0])
                slopes = self._alibi[num_heads]
                t.add_((off[:, None] * slopes[None, :]).mul_(LOG2E))

    def _forward_knobs(self, pos_encoding_mode, window_left, logits_soft_cap, sm_scale,
                       causal=None):
        """FlashInfer's deprecated forward()/forward_return_lse() set
        window_left, logits_soft_cap, sm_scale (and causal on the prefill
        wrappers) on the wrapper for this run and later ones, until the next
        plan(). As in FlashInfer, whose plan() compiles them into its kernel,
        pos_encoding_mode stays the planned one (forward's is only checked),
        and a window or soft-cap that plan() did not enable stays off."""
        plan = self._need_plan()
        _pos_mode(pos_encoding_mode)
        planned = plan.planned or plan.variant
        k = planned.knobs
        window = _window(window_left) if _fi_window(k) >= 0 else -1
        softcap = 0.0
        if k.softcap and logits_soft_cap is not None:
            softcap = _lib.check_float(logits_soft_cap, "logits_soft_cap", minimum=0.0)
        scale = 0.0 if sm_scale is None else _lib.check_float(sm_scale, "sm_scale", above=0.0)
        causal = k.causal if causal is None else _flag(causal, "causal")
        spec = _fi_spec(k)
        # A planned custom mask stays (FlashInfer's kernel keeps it; causal
        # is ignored with it).
        knobs = _compose(dataclasses.replace(k, softcap=softcap, scale=scale), causal, window,
                         _has_alibi(k), spec is not None and spec.custom)
        _replace_knobs(plan, planned, knobs)

    def _sink_args(self, args, sinks):
        """run()'s positional arguments of FlashInfer's AttentionSink
        variant: ``(sink, sm_scale)``, the sink logits as attn's ``sinks``
        and sm_scale (the variant's, in FlashInfer's place of the planned
        one) as the scale for this run and later ones until the next
        plan()."""
        if not self._sink_jit:
            return args, sinks
        if len(args) > 2 or (not args and sinks is None) or (args and sinks is not None):
            raise ValueError("sink: FlashInfer's AttentionSink variant takes run(..., sink, "
                             "sm_scale) (sink: [num_qo_heads] float32), got %d extra arguments"
                             "%s" % (len(args), " and sinks=" if sinks is not None else ""))
        if not args:
            return (), sinks
        if len(args) == 2:
            plan = self._need_plan()
            scale = _lib.check_float(args[1], "sm_scale", above=0.0)
            planned = plan.planned or plan.variant
            knobs = plan.variant.knobs
            if knobs.scale != scale:
                _replace_knobs(plan, planned, dataclasses.replace(knobs, scale=scale))
        return (), args[0]

    def _variant_for(self, args, make):
        """``make()``: plan()'s checks of the arguments a variant comes from
        (``args``), and the variant; or, when ``args`` are the last plan's
        and each a plain value (an int, float, str, bool, None or torch
        dtype, compared with its type), that plan's variant, which passed
        the same checks."""
        key = _plain_key(args)
        memo = self._variant_memo
        if key is not None and memo is not None and memo[0] == key:
            return memo[1]
        self._variant_memo = None
        variant = make()
        if key is not None:
            self._variant_memo = (key, variant)
        return variant

    def _rope_inputs(self, q, keys, stream):
        """q and ``keys`` (ragged k or the paged cache), rotated where the
        plan holds ROPE_LLAMA (_Rope), else as they are."""
        plan = self._plan
        if plan is None or plan.rope is None:
            return q, keys
        torch = _runtime.require_torch("pos_encoding_mode='ROPE_LLAMA'")
        s = _runtime.stream_handle(stream, plan.device)
        return plan.rope.run_inputs(q, keys, self._kv_layout, s, plan.device, torch)

    def _plan_rope(self, rope, q_pos, device, stream, k_pos=None, paged=None, fp8=None):
        """The plan's _Rope: positions of the query rows (``q_pos``) and of
        the keys (ragged ``k_pos``, or ``paged`` = (indptr, indices,
        block_tables, lens, page_size)) as device tensors; ``fp8``: the
        paged cache's FP8 type, widened to q's in the rotated copy."""
        torch = _runtime.require_torch("pos_encoding_mode='ROPE_LLAMA'")
        dev = torch.device("cuda", device)
        with _runtime.torch_stream(stream, device):
            q_t = torch.tensor(q_pos, device=dev)
            if paged is None:
                self._plan.rope = _Rope(*rope, q_t, k_pos=torch.tensor(k_pos, device=dev))
                return
            pages, page_pos = _Rope.paged_positions(*paged, dev, torch)
            graph = None
            if self._use_cuda_graph:
                if self._rope_graph is None:
                    self._rope_graph = _RopeGraph()
                graph = self._rope_graph
                graph.set(q_t, pages, page_pos, torch)
        self._plan.rope = _Rope(*rope, q_t, pages=pages, page_pos=page_pos, fp8=fp8, graph=graph)

    def _need_plan(self):
        if self._plan is None:
            raise RuntimeError("attn: %s.run() before plan(): call plan() first" % self._what)
        return self._plan

    def _make_handle(self, variant, plan):
        raise NotImplementedError

    def _plan_handle(self, handle, plan, stream):
        raise NotImplementedError

    def _handle(self, variant, stream):
        """The planned handle of ``variant`` (created and planned now when
        new: never during graph capture)."""
        plan = self._plan
        h = self._handles.get(variant)
        if h is not None and not self._fits(h, plan):
            self._handles.pop(variant)
            h = None
        if h is None or h.planned != plan.gen:
            if _runtime.capturing():
                raise RuntimeError(
                    "attn: %s.run() needs a kernel it has not planned (a new variant: "
                    "return_lse, sinks, scales) during CUDA graph capture; run it once with "
                    "the same arguments before capturing" % self._what)
            if h is None:
                h = self._make_handle(variant, plan)
                self._handles[variant] = h
                while len(self._handles) > _MAX_HANDLES:
                    self._handles.popitem(last=False)
            self._plan_handle(h, plan, stream)
            h.planned = plan.gen
        self._handles.move_to_end(variant)
        return h

    def _fits(self, h, plan):
        return plan.batch <= h.max_batch

    def _run_handle(self, plan, want_lse, sinks, per_head, stream, scale_factor=1.0):
        """The planned handle run() launches: the plan's variant with the
        LSE, sinks and per-head scales this call asks for, its softmax scale
        times ``scale_factor`` (FlashInfer's q_scale / k_scale folded into
        sm_scale) (looked up once per plan)."""
        key = (want_lse, sinks, per_head, scale_factor)
        h = plan.run_handles.get(key)
        if h is None:
            base = plan.variant
            knobs = base.knobs
            if want_lse or sinks:
                knobs = dataclasses.replace(knobs, write_lse=want_lse, sinks=sinks)
            if scale_factor != 1.0:
                d = getattr(base, "head_dim_qk", base.head_dim)
                knobs = dataclasses.replace(
                    knobs, scale=(knobs.scale or 1.0 / math.sqrt(d)) * scale_factor)
            h = self._handle(base.replace(knobs=knobs, per_head_kv_scale=per_head), stream)
            plan.run_handles[key] = h
        return h

    def _replan_all(self, stream):
        """Plans every cached handle of the new plan's variant family (a
        captured graph of any of them stays valid after a re-plan)."""
        plan = self._plan
        base = plan.variant
        for variant in list(self._handles):
            if _same_family(variant, base):
                h = self._handles[variant]
                if self._fits(h, plan):
                    self._plan_handle(h, plan, stream)
                    h.planned = plan.gen
                else:
                    self._handles.pop(variant)
            else:
                self._handles.pop(variant)
        self._handle(base, stream)

    def _sinks(self, sinks, num_qo_heads):
        if sinks is None:
            return 0
        t = _t.tensor(sinks, "sinks", dtype="float32", shape=(num_qo_heads,))
        return t.ptr


def _replace_knobs(plan, planned, knobs):
    """``plan`` runs ``knobs`` in place of ``planned``'s (forward(), the
    sink variant's sm_scale) until the next plan()."""
    if knobs != plan.variant.knobs:
        plan.planned = planned
        plan.variant = planned.replace(knobs=knobs)
        plan.run_handles = {}
        plan.run_args = None
        plan.fast = None
        plan.window_left = knobs.window_left


_PLAIN_TYPES = frozenset((int, float, str, bool, type(None)))


def _plain_key(values):
    """``values`` and their types as a key, or None unless every value is
    plain (``_Wrapper._variant_for``)."""
    torch = _runtime.torch_or_none()
    dtype = torch.dtype if torch is not None else None
    types = tuple(map(type, values))
    for t in types:
        if t not in _PLAIN_TYPES and t is not dtype:
            return None
    return types, values


_FAMILIES = {}


def _family(v):
    # Memoized: every plan() compares each cached handle's variant with the
    # plan's, and dataclasses.replace costs microseconds.
    f = _FAMILIES.get(v)
    if f is None:
        if len(_FAMILIES) > 1024:
            _FAMILIES.clear()
        f = _FAMILIES[v] = v.replace(knobs=dataclasses.replace(v.knobs, write_lse=False,
                                                                sinks=False, scale=0.0),
                                     per_head_kv_scale=False)
    return f


def _same_family(a, b):
    """Variants that differ only in what run() chooses (LSE, sinks,
    per-head scales, a softmax scale)."""
    fa, fb = _family(a), _family(b)
    return fa is fb or fa == fb


def _capacity(n, minimum=16):
    c = minimum
    while c < n:
        c *= 2
    return c


def _out_and_lse(out, lse, want_lse, q_shape, q_type, num_q_heads, device, what):
    rows = q_shape[0]
    if out is None:
        out_t = _t.adapt(_runtime.empty(q_shape, q_type, device, what), "out")
    else:
        out_t = _t.tensor(out, "out", dtype=q_type, shape=q_shape, token_stride=True)
    lse_t = None
    if want_lse:
        if lse is None:
            lse_t = _t.adapt(_runtime.empty((rows, num_q_heads), "float32", device, what), "lse")
        else:
            lse_t = _t.tensor(lse, "lse", dtype="float32", shape=(rows, num_q_heads))
    return out_t, lse_t


# --- decode ------------------------------------------------------------------


class BatchDecodeWithPagedKVCacheWrapper(_Wrapper):
    """Batch decode over a paged KV cache (FlashInfer's wrapper of the same
    name): ``plan()`` once per step, ``run()`` per layer.

    Parameters follow FlashInfer's: ``float_workspace_buffer`` (accepted;
    tells the device: attn owns its workspaces), ``kv_layout`` ('NHD' or
    'HND'), ``use_cuda_graph`` (fixed batch size ``len(
    paged_kv_last_page_len_buffer)`` and table width; plan for graph
    replay), ``use_tensor_cores`` and ``backend`` (accepted, ignored: attn
    picks its schedule), the ``paged_kv_*_buffer`` arguments (graph mode
    sizes; attn keeps its own dense tables), ``jit_args`` (not supported).
    Extension: ``max_pages_per_request`` (graph mode's table width; default
    ``len(paged_kv_indices_buffer)``).
    """

    _what = "BatchDecodeWithPagedKVCacheWrapper"

    def __init__(self, float_workspace_buffer=None, kv_layout="NHD", use_cuda_graph=False,
                 use_tensor_cores=False, paged_kv_indptr_buffer=None,
                 paged_kv_indices_buffer=None, paged_kv_last_page_len_buffer=None,
                 backend="auto", jit_args=None, *, max_pages_per_request=None):
        _check_backend(backend, self._what)
        sink_jit = _no_jit(jit_args)
        super().__init__(float_workspace_buffer, kv_layout, use_cuda_graph)
        self._use_tensor_cores = _flag(use_tensor_cores, "use_tensor_cores")
        self._fixed_batch = 0
        self._fixed_stride = 0
        if self._use_cuda_graph:
            if paged_kv_last_page_len_buffer is None or paged_kv_indptr_buffer is None:
                raise ValueError("paged_kv_indptr_buffer and paged_kv_last_page_len_buffer: "
                                 "required with use_cuda_graph=True (they fix the batch size)")
            self._fixed_batch = _length(paged_kv_last_page_len_buffer,
                                        "paged_kv_last_page_len_buffer")
            indptr_len = _length(paged_kv_indptr_buffer, "paged_kv_indptr_buffer")
            if indptr_len != self._fixed_batch + 1:
                raise ValueError("paged_kv_indptr_buffer: expected batch size + 1 = %d entries, "
                                 "got %d" % (self._fixed_batch + 1, indptr_len))
            if max_pages_per_request is None:
                if paged_kv_indices_buffer is None:
                    raise ValueError("paged_kv_indices_buffer (or max_pages_per_request): "
                                     "required with use_cuda_graph=True")
                max_pages_per_request = _length(paged_kv_indices_buffer, "paged_kv_indices_buffer")
            self._fixed_stride = _int(max_pages_per_request, "max_pages_per_request")
            _check_fixed_tables(self._fixed_batch, self._fixed_stride)
            for buf in (paged_kv_indptr_buffer, paged_kv_last_page_len_buffer,
                        paged_kv_indices_buffer):
                if self._device < 0:
                    self._device = _array_device(buf)
        self._buffers = (paged_kv_indptr_buffer, paged_kv_indices_buffer,
                         paged_kv_last_page_len_buffer)
        self._tables = None
        self._backend = backend
        self._planned_variant = None  # the last successful plan's (fast_decode_plan's dtypes)
        self._sink_jit = sink_jit

    @property
    def use_tensor_cores(self):
        """Accepted for compatibility (attn picks its own schedule)."""
        return self._use_tensor_cores

    def plan(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim,
             page_size, pos_encoding_mode="NONE", window_left=-1, logits_soft_cap=None,
             q_data_type="float16", kv_data_type=None, o_data_type=None, data_type=None,
             sm_scale=None, rope_scale=None, rope_theta=None, non_blocking=True,
             block_tables=None, seq_lens=None, fixed_split_size=None, disable_split_kv=False,
             q_len_per_req=1, *, window_right=0, stream=None, score_mod=None, mask_mod=None):
        """Plans a decode batch (host work and one upload; not under graph
        capture).

        ``indptr`` [batch + 1], ``indices`` [indptr[-1]] and
        ``last_page_len`` [batch] (1..page_size) are FlashInfer's CSR page
        table; ``block_tables`` [batch, pages] int32 with ``seq_lens``
        [batch] may replace it. ``pos_encoding_mode`` 'NONE', 'ALIBI'
        (standard slopes) or 'ROPE_LLAMA' (``rope_scale``, ``rope_theta``;
        each run() rotates copies of q and of the pages read: _Rope),
        ``window_left`` (FlashInfer's: W keys before the
        query and its own), ``logits_soft_cap``, ``sm_scale`` (default
        1/sqrt(head_dim)), ``q_data_type`` float16/bfloat16,
        ``kv_data_type`` q's or float8_e4m3fn/float8_e5m2,
        ``q_len_per_req`` (speculative decoding: query rows per request,
        causal among them). ``non_blocking`` is accepted and ignored;
        ``fixed_split_size`` or ``disable_split_kv`` make the plan batch
        invariant, as FlashInfer means them (attn's mode: _split_fixed).
        Extensions: ``stream``, ``score_mod``/``mask_mod``.

        As FlashInfer's: ``q_len_per_req > 1`` needs ``use_tensor_cores=True``
        and, under ``use_cuda_graph``, stays the first plan's; every request
        must hold at least ``q_len_per_req`` tokens; ``fixed_split_size``
        needs ``use_tensor_cores=True`` (each a ValueError).
        """
        if q_len_per_req != 1 or fixed_split_size is not None:
            self._check_tensor_core_args(q_len_per_req, fixed_split_size)
        rope, pos_encoding_mode = _Rope.plan(pos_encoding_mode, rope_scale, rope_theta, self)

        def make():
            hq, hkv, d = _check_heads(num_qo_heads, num_kv_heads, head_dim)
            page = _int(page_size, "page_size")
            q_len = _int(q_len_per_req, "q_len_per_req")
            q_type, kv_type = _resolve_dtypes(q_data_type, kv_data_type, o_data_type, data_type)
            knobs = _knobs(pos_encoding_mode, window_left, logits_soft_cap, sm_scale, True,
                           score_mod, mask_mod, window_right,
                           invariant=_split_fixed(fixed_split_size, disable_split_kv))
            return DecodeVariant(knobs=knobs, q_type=q_type, kv_type=kv_type, num_q_heads=hq,
                                 num_kv_heads=hkv, head_dim=d, page_size=page,
                                 layout=self._kv_layout, query_len=q_len)

        variant = self._variant_for(
            (num_qo_heads, num_kv_heads, head_dim, page_size, q_len_per_req, q_data_type,
             kv_data_type, o_data_type, data_type, pos_encoding_mode, window_left,
             logits_soft_cap, sm_scale, window_right, score_mod, mask_mod, fixed_split_size,
             disable_split_kv), make)
        hq, page_size, q_len, knobs = (variant.num_q_heads, variant.page_size,
                                       variant.query_len, variant.knobs)
        if rope:
            variant, rope_fp8 = _Rope.cache_variant(variant)
        device, s = self._plan_device(stream, indptr, indices, last_page_len, block_tables)
        self._start_page_tables(device)
        if block_tables is not None:
            lens, pt_ptr, stride = self._direct_tables(block_tables, seq_lens, indptr,
                                                       last_page_len, page_size, s)
            c_lens = array.array("i", lens)
        else:
            lens = self._tables.fill_csr(indptr, indices, last_page_len, page_size, s,
                                         check_batch=self._check_batch)
            pt_ptr, stride, c_lens = self._tables.pages_ptr, self._tables.stride, \
                self._tables.c_lens
        batch = len(lens)
        self._check_batch(batch)
        if q_len > 1 and lens and min(lens) < q_len:
            b = lens.index(min(lens))
            raise ValueError("q_len_per_req=%d requires kv_len >= q_len_per_req for every request "
                             "(the new tokens must already be in the cache), but request %d has "
                             "kv_len=%d: its earlier rows would attend to an empty KV range"
                             % (q_len, b, lens[b]))
        self._gen += 1
        # c_seq_lens: the checked lengths as C ints, once for every handle planned.
        self._plan = _Plan(gen=self._gen, batch=batch, seq_lens=lens, variant=variant,
                           c_seq_lens=c_lens,
                           for_graph=self._use_cuda_graph, num_q_tokens=batch * q_len,
                           stride=stride, page_tables_ptr=pt_ptr,
                           seq_lens_ptr=self._tables.lens_ptr, window_left=knobs.window_left,
                           device=device, max_page=self._tables.max_page,
                           max_page_at=self._tables.max_page_at)
        if rope:
            self._plan_rope(rope, [n - q_len + i for n in lens for i in range(q_len)], device,
                            s, paged=(indptr, indices, block_tables, lens, page_size),
                            fp8=rope_fp8)
        if knobs.alibi:
            self._alibi_ptr(hq, s)
            self._plan_alibi_rows([n - q_len for n in lens for _ in range(q_len)], s)
        self._replan_all(s)
        self._planned_variant = variant

    begin_forward = plan

    def _check_tensor_core_args(self, q_len_per_req, fixed_split_size):
        """FlashInfer's checks of the arguments its tensor-core decode serves."""
        q_len = _int(q_len_per_req, "q_len_per_req")
        if fixed_split_size is not None and not self._use_tensor_cores:
            raise ValueError("fixed_split_size: only supported by tensor core decode "
                             "(use_tensor_cores=True), as FlashInfer's")
        if q_len == 1:
            return
        if not self._use_tensor_cores:
            raise ValueError("q_len_per_req > 1 requires tensor-core decode "
                             "(use_tensor_cores=True), as FlashInfer's")
        if self._backend == "fa3":
            raise NotImplementedError("q_len_per_req > 1: FlashInfer serves it on the fa2 "
                                      "tensor-core backend only (backend='fa2' or 'auto')")
        planned = self._planned_variant
        if self._use_cuda_graph and planned is not None and planned.query_len != q_len:
            raise ValueError("q_len_per_req is part of the frozen cudagraph shape: this wrapper "
                             "was planned with %d, got %d; use a separate wrapper per "
                             "q_len_per_req" % (planned.query_len, q_len))

    def _check_batch(self, batch):
        if self._use_cuda_graph and batch != self._fixed_batch:
            raise ValueError("last_page_len: the batch size is fixed at %d in CUDA graph mode, "
                             "got %d" % (self._fixed_batch, batch))

    def _direct_tables(self, block_tables, seq_lens, indptr, last_page_len, page_size, stream):
        return _direct_tables(self, block_tables, _direct_lens(
            seq_lens, indptr, last_page_len, page_size, ("indptr", "last_page_len")),
            page_size, stream)

    def _make_handle(self, variant, plan):
        cap = self._fixed_batch if self._use_cuda_graph else _capacity(plan.batch)
        return Decode(plan.device, variant, cap)

    def _plan_handle(self, handle, plan, stream):
        handle.plan(plan.c_seq_lens, plan.for_graph, stream)

    def forward(self, q, paged_kv_cache, pos_encoding_mode="NONE", q_scale=None, k_scale=None,
                v_scale=None, window_left=-1, logits_soft_cap=None, sm_scale=None,
                rope_scale=None, rope_theta=None):
        """Deprecated in FlashInfer (``run()``): as FlashInfer's, its
        ``window_left``, ``logits_soft_cap`` and ``sm_scale`` replace the
        planned ones for this and later runs until the next plan() (a window
        or soft-cap plan() did not enable stays off; ``pos_encoding_mode``
        stays the planned one)."""
        self._forward_knobs(pos_encoding_mode, window_left, logits_soft_cap, sm_scale)
        return self.run(q, paged_kv_cache, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale)

    def forward_return_lse(self, q, paged_kv_cache, pos_encoding_mode="NONE", q_scale=None,
                           k_scale=None, v_scale=None, window_left=-1, logits_soft_cap=None,
                           sm_scale=None, rope_scale=None, rope_theta=None):
        """Deprecated in FlashInfer (``run_return_lse()``): ``forward()``
        returning ``(out, lse)``."""
        self._forward_knobs(pos_encoding_mode, window_left, logits_soft_cap, sm_scale)
        return self.run(q, paged_kv_cache, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale,
                        return_lse=True)

    def run(self, q, paged_kv_cache, *args, q_scale=None, k_scale=None, v_scale=None, out=None,
            lse=None, return_lse=False, enable_pdl=None, window_left=None, sinks=None,
            q_len_per_req=None, skip_softmax_threshold_scale_factor=None, kv_cache_sf=None,
            stream=None, aux=None):
        """Decode attention of ``q`` [batch * q_len_per_req, num_qo_heads,
        head_dim] over ``paged_kv_cache`` (the planned batch).

        ``k_scale``/``v_scale``: FP8 dequantization scales (float, or a
        float32 tensor of 1 or num_kv_heads); on a 16-bit cache floats, as
        FlashInfer's: ``q_scale`` and ``k_scale`` multiply sm_scale,
        ``v_scale`` the output; ``out`` [like q] and ``lse``
        [rows, num_qo_heads] float32 are written when given, else
        allocated; ``return_lse`` returns ``(out, lse)`` with base-2 LSEs
        (FlashInfer's); ``sinks`` [num_qo_heads] float32 attention-sink
        logits; ``window_left`` must be None or the planned one;
        ``enable_pdl`` is ignored. Extensions: ``stream``, ``aux``.
        """
        q, paged_kv_cache = self._rope_inputs(q, paged_kv_cache, stream)
        if _compile.tracing(self) and not args and out is None and lse is None and \
                q_scale is None and k_scale is None and v_scale is None and \
                window_left is None and sinks is None and q_len_per_req is None and \
                skip_softmax_threshold_scale_factor is None and kv_cache_sf is None and \
                stream is None and aux is None:
            return _compile.run(self, (q, paged_kv_cache), return_lse)
        plan = self._plan
        f = plan.fast if plan is not None else None
        if f is not None and stream is None and lse is None and return_lse is False and \
                sinks is None and aux is None and not args and q_scale is None and \
                window_left is None and q_len_per_req is None and kv_cache_sf is None and \
                skip_softmax_threshold_scale_factor is None and \
                _same_scales(f, k_scale, v_scale):
            result = _run_fast(f, (q, paged_kv_cache), out)
            if result is not None:
                return result
        plan = self._need_plan()
        plan.fast = None
        args, sinks = self._sink_args(args, sinks)
        _unsupported_run_args(args, kv_cache_sf, skip_softmax_threshold_scale_factor, None)
        if window_left is not None and _window(window_left) != plan.window_left:
            raise ValueError("window_left: %d differs from the planned %d (plan() sets it)"
                             % (window_left, plan.window_left))
        base = plan.variant
        if q_len_per_req is not None and _int(q_len_per_req, "q_len_per_req") != base.query_len:
            raise ValueError("q_len_per_req: %d differs from the planned %d"
                             % (q_len_per_req, base.query_len))
        device = plan.device
        s = _runtime.stream_handle(stream, device)
        hq, d = base.num_q_heads, base.head_dim
        q_shape = (plan.num_q_tokens, hq, d)
        q_t = _t.tensor(q, "q", dtype=base.q_type, shape=q_shape, token_stride=True, stream=s,
                        what="batch * q_len_per_req, num_qo_heads, head_dim")
        cache = plan.cache
        if cache is None:  # the plan's geometry, set once (each field set is checked)
            cache = plan.cache = _lib.attn_paged_kv()
            set_geometry(cache, self._kv_layout, base.num_kv_heads, d, base.page_size,
                         base.kv_type)
        cache, cache_ts = paged_kv(paged_kv_cache, self._kv_layout, base.num_kv_heads, d,
                                   base.page_size, base.kv_type, into=cache)
        self._check_cache_pages(plan, cache.num_pages)
        factor, out_factor = _folded_scales(base.kv_type, q_scale, k_scale, v_scale)
        ks, vs, nscales, per_head = _scales(self, k_scale, v_scale, base.num_kv_heads,
                                            base.kv_type, s, device, folded=True)
        _set_scales(cache, ks, vs, nscales)
        sinks_ptr = self._sinks(sinks, hq)
        want_lse = _flag(return_lse, "return_lse") or lse is not None
        out_t, lse_t = _out_and_lse(out, lse, want_lse, q_shape, base.q_type, hq, device,
                                    self._what)
        _t.same_device([q_t, out_t, lse_t] + list(cache_ts))
        h = self._run_handle(plan, want_lse, bool(sinks_ptr), per_head, s, factor)
        # One args struct per plan and variant: the plan's fields are set
        # once, each call sets its arrays (the C call reads it only while it
        # runs; wrappers, like handles, are not for concurrent threads).
        a = plan.run_args.get(h) if plan.run_args is not None else None
        if a is None:
            a = _lib.init(_lib.attn_decode_args)
            a.page_tables, a.page_table_stride = plan.page_tables_ptr, plan.stride
            a.seq_lens = plan.seq_lens_ptr
            _fill_tables(a.tables, self._alibi_ptr(hq, s) if h.variant.knobs.alibi else None,
                         None, None, s)
            plan.run_args = plan.run_args or {}
            plan.run_args[h] = a
        a.q, a.q_stride_token = q_t.ptr, q_t.token_stride()
        a.out, a.out_stride_token = out_t.ptr, out_t.token_stride()
        a.lse = lse_t.ptr if lse_t is not None else None
        a.cache = cache
        a.tables.sinks = sinks_ptr or None
        if aux:
            _fill_tables(a.tables, a.tables.alibi_slopes, sinks_ptr or None, aux, s)
        elif a.tables.aux[0].data:
            _clear_aux(a.tables)
        h.run(a, s)
        _scale_output(out_t, out_factor, s, device)
        if not (aux or sinks_ptr or want_lse or per_head) and len(cache_ts) == 1 and \
                factor == 1.0 and out_factor is None:
            _record_fast(plan, h, a, (q_t, cache_ts[0]), out_t, k_scale, v_scale,
                         _cache_writer(q_t, cache))
        result = _runtime.as_result(out_t)
        if lse_t is not None:
            self._lse_to_base2(lse_t.obj, s, device, h.variant.knobs, hq)
            if return_lse:
                return result, lse_t.obj
        return result

    def run_return_lse(self, q, paged_kv_cache, *args, **kwargs):
        """``run(..., return_lse=True)``."""
        kwargs["return_lse"] = True
        return self.run(q, paged_kv_cache, *args, **kwargs)


class CUDAGraphBatchDecodeWithPagedKVCacheWrapper(BatchDecodeWithPagedKVCacheWrapper):
    """FlashInfer's CUDA-graph decode wrapper: the decode wrapper with
    ``use_cuda_graph=True`` and the buffers given positionally."""

    def __init__(self, workspace_buffer, indptr_buffer, indices_buffer, last_page_len_buffer,
                 kv_layout="NHD", use_tensor_cores=False, *, max_pages_per_request=None):
        super().__init__(workspace_buffer, kv_layout, use_cuda_graph=True,
                         use_tensor_cores=use_tensor_cores,
                         paged_kv_indptr_buffer=indptr_buffer,
                         paged_kv_indices_buffer=indices_buffer,
                         paged_kv_last_page_len_buffer=last_page_len_buffer,
                         max_pages_per_request=max_pages_per_request)


def fast_decode_plan(self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim,
                     page_size, pos_encoding_mode="NONE", window_left=-1, logits_soft_cap=None,
                     q_data_type=None, kv_data_type=None, data_type=None, sm_scale=None,
                     rope_scale=None, rope_theta=None, non_blocking=True, fixed_split_size=None,
                     disable_split_kv=False, q_len_per_req=1, global_override_indptr_cpu=None,
                     *, stream=None):
    """FlashInfer's faster re-plan of a decode wrapper (``wrapper.plan =
    functools.partial(fast_decode_plan, wrapper)``): here the decode
    wrapper's ``plan()`` with the same arguments, whose host-side tables
    already avoid device copies. ``global_override_indptr_cpu`` is a host
    copy of ``indptr`` (used in its place: no read back). As in FlashInfer,
    ``data_type`` fills whichever of ``q_data_type``/``kv_data_type`` is
    None, and with neither given the dtypes of the wrapper's last plan()
    stay (FlashInfer keeps its planned kernel); ``q_len_per_req > 1`` needs
    ``use_tensor_cores=True`` and a prior plan()."""
    if not isinstance(self, BatchDecodeWithPagedKVCacheWrapper):
        raise TypeError("self: expected a BatchDecodeWithPagedKVCacheWrapper, got %s"
                        % type(self).__name__)
    q_len = _int(q_len_per_req, "q_len_per_req")
    if q_len > 1:
        self._check_tensor_core_args(q_len, None)
        if self._planned_variant is None:
            raise ValueError("fast_decode_plan with q_len_per_req > 1 requires a prior plan() "
                             "call that resolves the backend")
    last = self._planned_variant
    if q_data_type is None and data_type is None and last is not None:
        q_data_type = last.q_type
        if kv_data_type is None:
            kv_data_type = last.kv_type
    if global_override_indptr_cpu is not None:
        indptr = global_override_indptr_cpu
    # The class's plan(): callers replace the instance's plan with this function.
    return BatchDecodeWithPagedKVCacheWrapper.plan(
        self, indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
        pos_encoding_mode=pos_encoding_mode, window_left=window_left,
        logits_soft_cap=logits_soft_cap, q_data_type=q_data_type, kv_data_type=kv_data_type,
        data_type=data_type, sm_scale=sm_scale, rope_scale=rope_scale, rope_theta=rope_theta,
        non_blocking=non_blocking, fixed_split_size=fixed_split_size,
        disable_split_kv=disable_split_kv, q_len_per_req=q_len, stream=stream)


# --- prefill -------------------------------------------------------------------


class _PrefillBase(_Wrapper):

    def __init__(self, float_workspace_buffer, kv_layout, use_cuda_graph, qo_indptr_buf,
                 backend, jit_args, jit_kwargs, custom_mask_buf, mask_indptr_buf,
                 max_num_tokens):
        _check_backend(backend, self._what)
        sink_jit = _no_jit(jit_args, jit_kwargs)
        super().__init__(float_workspace_buffer, kv_layout, use_cuda_graph)
        # Graph mode's custom masks: their sizes fix the mask tables.
        self._custom_mask_buf, self._mask_indptr_buf = custom_mask_buf, mask_indptr_buf
        self._mask_bufs = None
        self._sink_jit = sink_jit
        self._fixed_batch = 0
        # Query rows are int32 in the kernels.
        self._max_num_tokens = None if max_num_tokens is None else \
            _int(max_num_tokens, "max_num_tokens")
        if self._use_cuda_graph:
            if qo_indptr_buf is None:
                raise ValueError("qo_indptr_buf: required with use_cuda_graph=True (it fixes the "
                                 "batch size)")
            self._fixed_batch = _length(qo_indptr_buf, "qo_indptr_buf") - 1
            if self._fixed_batch < 1:
                raise ValueError("qo_indptr_buf: expected batch size + 1 >= 2 entries, got %d"
                                 % (self._fixed_batch + 1))
            if self._device < 0:
                self._device = _array_device(qo_indptr_buf)

    def _fits(self, h, plan):
        return plan.batch <= h.max_batch and plan.num_q_tokens <= h.max_q_tokens

    def _plan_mask(self, custom_mask, packed_custom_mask, cu_q, kv_lens, device, stream):
        """plan()'s custom mask as aux tables (_mask_tables), or None."""
        if custom_mask is None and packed_custom_mask is None:
            return None
        torch = _runtime.require_torch("custom_mask")
        if self._use_cuda_graph and self._mask_bufs is None:
            for name, buf in (("custom_mask_buf", self._custom_mask_buf),
                              ("mask_indptr_buf", self._mask_indptr_buf)):
                if not isinstance(buf, torch.Tensor):
                    raise ValueError("%s must be initialized with a torch.Tensor in cuda graph "
                                     "mode if we use custom mask in attention computation" % name)
            dev = _runtime._torch_device(device)
            self._mask_bufs = (
                torch.zeros(max(1, -(-self._custom_mask_buf.numel() // 4)), dtype=torch.int32,
                            device=dev),
                torch.zeros((self._fixed_batch, 3), dtype=torch.int32, device=dev))
        q_lens = list(map(operator.sub, cu_q[1:], cu_q[:-1]))
        return _mask_tables(self, custom_mask, packed_custom_mask, q_lens, kv_lens, device,
                            stream)

    def _make_handle(self, variant, plan):
        if self._use_cuda_graph:
            batch = self._fixed_batch
            tokens = max(plan.num_q_tokens, self._max_num_tokens or 0)
            if self._max_tokens_fixed is None:
                self._max_tokens_fixed = tokens
            tokens = self._max_tokens_fixed
        else:
            batch = _capacity(plan.batch)
            tokens = _capacity(plan.num_q_tokens, 256)
        return Prefill(plan.device, variant, batch, tokens)

    _max_tokens_fixed = None

    def _alibi_capacity(self):
        """Query rows the ALiBi row buffer holds under use_cuda_graph (the
        kernels' fixed row capacity)."""
        if not self._use_cuda_graph:
            return 0
        return max(self._max_tokens_fixed or 0, self._max_num_tokens or 0)

    def _cu_q(self, qo_indptr):
        """qo_indptr's host ints, checked, and the query rows per request."""
        cu_q = _runtime.host_ints(qo_indptr, "qo_indptr")
        if not cu_q:
            raise ValueError("qo_indptr: expected batch size + 1 entries, got none")
        rows = _check_rising(cu_q, "qo_indptr")
        if cu_q[0] != 0:
            raise ValueError("qo_indptr[0]: expected 0, got %d" % cu_q[0])
        if self._use_cuda_graph and len(cu_q) - 1 != self._fixed_batch:
            raise ValueError("qo_indptr: the batch size is fixed at %d in CUDA graph mode, got %d"
                             % (self._fixed_batch, len(cu_q) - 1))
        if self._use_cuda_graph and self._max_tokens_fixed is not None and \
                cu_q[-1] > self._max_tokens_fixed:
            # A larger workspace would move what a captured graph reads.
            raise ValueError("qo_indptr: %d query rows, more than the %d this CUDA-graph wrapper "
                             "holds (its first plan's, or max_num_tokens)"
                             % (cu_q[-1], self._max_tokens_fixed))
        return cu_q, rows

    def _run(self, q, out, lse, return_lse, sinks, aux, stream, fill_args, k_scale, v_scale,
             folded=(1.0, None)):
        """run() on the checked path: ``fill_args(a, s)`` writes the k/v
        or cache fields of ``a`` and returns (per-head scales, the tensors
        it read, the pointer writer for ``_record_fast``); ``folded``:
        _folded_scales' factors."""
        factor, out_factor = folded
        plan = self._need_plan()
        plan.fast = None
        base = plan.variant
        device = plan.device
        s = _runtime.stream_handle(stream, device)
        hq = base.num_q_heads
        # q rows have head_dim_qk dims, out rows head_dim_vo (MLA: 192, 128).
        q_shape = (plan.num_q_tokens, hq, base.head_dim_qk)
        q_t = _t.tensor(q, "q", dtype=base.q_type, shape=q_shape, token_stride=True, stream=s,
                        what="qo_indptr[-1], num_qo_heads, head_dim_qk")
        a = _lib.init(_lib.attn_prefill_args)
        per_head, tensors, writer = fill_args(a, s)
        sinks_ptr = self._sinks(sinks, hq)
        want_lse = _flag(return_lse, "return_lse") or lse is not None
        out_t, lse_t = _out_and_lse(out, lse, want_lse, (plan.num_q_tokens, hq, base.head_dim),
                                    base.q_type, hq, device, self._what)
        _t.same_device([q_t, out_t, lse_t] + list(tensors))
        h = self._run_handle(plan, want_lse, bool(sinks_ptr), per_head, s, factor)
        knobs = h.variant.knobs
        a.q, a.q_stride_token = q_t.ptr, q_t.token_stride()
        a.out, a.out_stride_token = out_t.ptr, out_t.token_stride()
        a.lse = lse_t.ptr if lse_t is not None else None
        spec = _fi_spec(knobs)
        if spec is not None:
            if aux:
                raise NotImplementedError(
                    "aux: the wrapper's own regions (FlashInfer's ALiBi or window_left with "
                    "causal=False, custom_mask) take the aux tables")
            aux = ([self._alibi_slopes(hq, s)] if spec.alibi else []) + \
                (list(plan.mask_aux) if spec.custom else [])
        _fill_tables(a.tables, self._alibi_ptr(hq, s) if knobs.alibi else None, sinks_ptr or None,
                     aux, s)
        h.run(a, s)
        _scale_output(out_t, out_factor, s, device)
        if not (aux or sinks_ptr or want_lse or per_head) and writer is not None and \
                factor == 1.0 and out_factor is None:
            _record_fast(plan, h, a, (q_t,) + tuple(tensors), out_t, k_scale, v_scale,
                         writer(q_t))
        result = _runtime.as_result(out_t)
        if lse_t is not None:
            self._lse_to_base2(lse_t.obj, s, device, knobs, hq)
            if return_lse:
                return result, lse_t.obj
        return result


class BatchPrefillWithRaggedKVCacheWrapper(_PrefillBase):
    """Batch prefill over ragged (contiguous) k/v (FlashInfer's wrapper of
    the same name): request b's query rows ``qo_indptr[b]..[b+1]`` attend
    to its key/value rows ``kv_indptr[b]..[b+1]`` (causal: aligned to the
    end of the keys).

    ``float_workspace_buffer`` is accepted (tells the device), ``kv_layout``
    is accepted (ragged rows are ``[tokens, heads, dim]`` either way), with
    ``use_cuda_graph`` the batch size is ``len(qo_indptr_buf) - 1`` and the
    query-row capacity the first plan's (or ``max_num_tokens``, an
    extension). ``custom_mask``/``packed_custom_mask`` in plan() are
    FlashInfer's (with ``custom_mask_buf``/``mask_indptr_buf`` under
    use_cuda_graph); ``jit_args``: FlashInfer's AttentionSink variant only.
    """

    _what = "BatchPrefillWithRaggedKVCacheWrapper"

    def __init__(self, float_workspace_buffer=None, kv_layout="NHD", use_cuda_graph=False,
                 qo_indptr_buf=None, kv_indptr_buf=None, custom_mask_buf=None,
                 mask_indptr_buf=None, backend="auto", jit_args=None, jit_kwargs=None, *,
                 max_num_tokens=None):
        super().__init__(float_workspace_buffer, kv_layout, use_cuda_graph, qo_indptr_buf,
                         backend, jit_args, jit_kwargs, custom_mask_buf, mask_indptr_buf,
                         max_num_tokens)

    def plan(self, qo_indptr, kv_indptr, num_qo_heads, num_kv_heads, head_dim_qk,
             head_dim_vo=None, custom_mask=None, packed_custom_mask=None, causal=False,
             pos_encoding_mode="NONE", use_fp16_qk_reduction=False, window_left=-1,
             logits_soft_cap=None, sm_scale=None, rope_scale=None, rope_theta=None,
             q_data_type="float16", kv_data_type=None, o_data_type=None, non_blocking=True,
             prefix_len_ptr=None, token_pos_in_items_ptr=None, token_pos_in_items_len=0,
             max_item_len_ptr=None, fixed_split_size=None, disable_split_kv=False,
             seq_lens=None, seq_lens_q=None, max_token_per_sequence=None, max_sequence_kv=None,
             v_indptr=None, o_indptr=None, *, stream=None, score_mod=None, mask_mod=None):
        """Plans a ragged prefill batch from ``qo_indptr`` and ``kv_indptr``
        ([batch + 1] each; host or device). ``causal`` (default False, as
        FlashInfer's), ``pos_encoding_mode`` 'NONE'/'ALIBI',
        ``window_left``, ``logits_soft_cap``, ``sm_scale``,
        ``q_data_type`` float16/bfloat16, ``kv_data_type`` q's or FP8
        (k/v rows in e4m3/e5m2 with run's k_scale/v_scale).
        """
        custom = _check_mask_args(custom_mask, packed_custom_mask)
        _check_no_items(prefix_len_ptr, token_pos_in_items_ptr, max_item_len_ptr,
                        v_indptr, o_indptr)
        rope, pos_encoding_mode = _Rope.plan(pos_encoding_mode, rope_scale, rope_theta, self)

        def make():
            hq, hkv, d = _check_heads(num_qo_heads, num_kv_heads, head_dim_qk)
            # v narrower than q/k (MLA's prefill, 192/128): the variant's
            # head_dim is v's, rope_dim the rest.
            dv = d if head_dim_vo is None else _int(head_dim_vo, "head_dim_vo")
            if dv > d:
                raise NotImplementedError("head_dim_vo (%d) > head_dim_qk (%d): attn's v rows "
                                          "have at most q/k's dims" % (dv, d))
            q_type, kv_type = _resolve_dtypes(q_data_type, kv_data_type, o_data_type)
            knobs = _knobs(pos_encoding_mode, window_left, logits_soft_cap, sm_scale, causal,
                           score_mod, mask_mod, custom=custom,
                           invariant=_split_fixed(fixed_split_size, disable_split_kv))
            return PrefillVariant(knobs=knobs, q_type=q_type, num_q_heads=hq, num_kv_heads=hkv,
                                  head_dim=dv, rope_dim=d - dv, paged=False,
                                  kv_type=kv_type if kv_type != q_type else None,
                                  layout=self._kv_layout)

        variant = self._variant_for(
            (num_qo_heads, num_kv_heads, head_dim_qk, head_dim_vo, q_data_type, kv_data_type,
             o_data_type, pos_encoding_mode, window_left, logits_soft_cap, sm_scale, causal,
             score_mod, mask_mod, custom, fixed_split_size, disable_split_kv), make)
        hq, knobs = variant.num_q_heads, variant.knobs
        if rope:
            _Rope.check_kv(variant, self)
        host_q, host_kv = _read_back(qo_indptr, kv_indptr)
        cu_q = self._cu_q(host_q)[0]
        cu_kv = _runtime.host_ints(host_kv, "kv_indptr")
        if len(cu_kv) != len(cu_q):
            raise ValueError("kv_indptr: expected %d entries (as qo_indptr), got %d"
                             % (len(cu_q), len(cu_kv)))
        _check_rising(cu_kv, "kv_indptr")
        device, s = self._plan_device(stream, qo_indptr, kv_indptr)
        mask_aux = self._plan_mask(custom_mask, packed_custom_mask, cu_q,
                                   list(map(operator.sub, cu_kv[1:], cu_kv[:-1])), device, s)
        self._gen += 1
        self._plan = _Plan(gen=self._gen, batch=len(cu_q) - 1, cu_q=cu_q, seq_lens=cu_kv,
                           variant=variant, for_graph=self._use_cuda_graph,
                           num_q_tokens=cu_q[-1], device=device, mask_aux=mask_aux)
        self._num_kv_tokens = cu_kv[-1] - cu_kv[0]
        if rope:
            kv_lens = [cu_kv[b + 1] - cu_kv[b] for b in range(len(cu_q) - 1)]
            q_pos = [n - (cu_q[b + 1] - cu_q[b]) + i for b, n in enumerate(kv_lens)
                     for i in range(cu_q[b + 1] - cu_q[b])]
            k_pos = [0] * cu_kv[0] + [i for n in kv_lens for i in range(n)]
            self._plan_rope(rope, q_pos, device, s, k_pos=k_pos)
        if _has_alibi(knobs):
            self._alibi_ptr(hq, s)
            self._plan_alibi_rows(_alibi_offsets(cu_q, [cu_kv[b + 1] - cu_kv[b]
                                                        for b in range(len(cu_q) - 1)]),
                                  s, self._alibi_capacity())
        self._replan_all(s)

    begin_forward = plan

    def _plan_handle(self, handle, plan, stream):
        handle.plan(plan.cu_q, plan.seq_lens, plan.for_graph, stream)

    def forward(self, q, k, v, causal=False, pos_encoding_mode="NONE", use_fp16_qk_reduction=False,
                window_left=-1, logits_soft_cap=None, sm_scale=None, rope_scale=None,
                rope_theta=None):
        """Deprecated in FlashInfer (``run()``): as FlashInfer's, its
        ``causal`` (default False), ``window_left``, ``logits_soft_cap`` and
        ``sm_scale`` replace the planned ones for this and later runs until
        the next plan() (a window or soft-cap plan() did not enable stays
        off; ``pos_encoding_mode`` stays the planned one)."""
        self._forward_knobs(pos_encoding_mode, window_left, logits_soft_cap, sm_scale, causal)
        return self.run(q, k, v)

    def forward_return_lse(self, q, k, v, causal=False, pos_encoding_mode="NONE",
                           use_fp16_qk_reduction=False, window_left=-1, logits_soft_cap=None,
                           sm_scale=None, rope_scale=None, rope_theta=None):
        """Deprecated in FlashInfer (``run_return_lse()``): ``forward()``
        returning ``(out, lse)``."""
        self._forward_knobs(pos_encoding_mode, window_left, logits_soft_cap, sm_scale, causal)
        return self.run(q, k, v, return_lse=True)

    def run(self, q, k, v, *args, q_scale=None, k_scale=None, v_scale=None, o_scale=None,
            out=None, lse=None, return_lse=False, enable_pdl=None, kv_cache_sf=None,
            sinks=None, stream=None, aux=None):
        """Prefill of ``q`` [qo_indptr[-1], num_qo_heads, head_dim] over
        ``k``, ``v`` [kv_indptr[-1], num_kv_heads, head_dim] (token strides
        may be padded). ``return_lse`` returns ``(out, lse)``, base 2.
        ``k_scale``/``v_scale``: FP8 k/v scales. ``sinks``, ``stream``,
        ``aux``: as the decode wrapper's.
        """
        q, k = self._rope_inputs(q, k, stream)
        if _compile.tracing(self) and not args and out is None and lse is None and \
                q_scale is None and k_scale is None and v_scale is None and \
                o_scale is None and kv_cache_sf is None and sinks is None and \
                stream is None and aux is None:
            return _compile.run(self, (q, k, v), return_lse)
        plan = self._plan
        f = plan.fast if plan is not None else None
        if f is not None and stream is None and lse is None and return_lse is False and \
                sinks is None and aux is None and not args and q_scale is None and \
                o_scale is None and kv_cache_sf is None and \
                _same_scales(f, k_scale, v_scale):
            result = _run_fast(f, (q, k, v), out)
            if result is not None:
                return result
        args, sinks = self._sink_args(args, sinks)
        _unsupported_run_args(args, kv_cache_sf, None, q_scale)
        if not _is_one(o_scale):
            raise NotImplementedError("o_scale: attn writes unscaled outputs")
        plan = self._need_plan()
        base = plan.variant
        kv_type = base.kv_type or base.q_type
        rows = plan.seq_lens[-1]

        def fill(a, s):
            kt = _t.tensor(k, "k", dtype=kv_type,
                           shape=(rows, base.num_kv_heads, base.head_dim_qk), token_stride=True,
                           stream=s, what="kv_indptr[-1], num_kv_heads, head_dim_qk")
            vt = _t.tensor(v, "v", dtype=kv_type,
                           shape=(rows, base.num_kv_heads, base.head_dim), token_stride=True,
                           stream=s, what="kv_indptr[-1], num_kv_heads, head_dim_vo")
            a.k, a.v = kt.ptr, vt.ptr
            a.k_stride_token, a.v_stride_token = kt.token_stride(), vt.token_stride()
            ks, vs, n, per_head = _scales(self, k_scale, v_scale, base.num_kv_heads, kv_type, s,
                                          plan.device)
            a.k_scale, a.v_scale, a.num_kv_scales = ks, vs, n
            return per_head, (kt, vt), _ragged_writer

        return self._run(q, out, lse, return_lse, sinks, aux, stream, fill, k_scale, v_scale)

    def run_return_lse(self, q, k, v, *args, **kwargs):
        """``run(..., return_lse=True)``."""
        kwargs["return_lse"] = True
        return self.run(q, k, v, *args, **kwargs)


def _alibi_offsets(cu_q, kv_lens):
    """kv_len - q_len of each query row's request (_Wrapper._plan_alibi_rows)."""
    rows = []
    for b, n in enumerate(kv_lens):
        q_len = cu_q[b + 1] - cu_q[b]
        rows += [n - q_len] * q_len
    return rows


def _bitorder(bitorder):
    if bitorder not in ("big", "little"):
        raise ValueError("bitorder: expected 'big' or 'little', got %r" % (bitorder,))
    return bitorder


def _pack_bytes(bits, bitorder, torch):
    """A bool tensor whose length is a multiple of 8 as uint8 (numpy's
    packbits: 'little' puts element 8j + i at bit i of byte j)."""
    weights = [1 << i for i in range(8)]
    if bitorder == "big":
        weights.reverse()
    w = torch.tensor(weights, dtype=torch.int32, device=bits.device)
    return (bits.view(-1, 8).to(torch.int32) * w).sum(1).to(torch.uint8)


def _bool_1d(x, name, torch):
    if not isinstance(x, torch.Tensor):
        raise TypeError("%s: expected a torch.Tensor, got %s" % (name, type(x).__name__))
    return x.contiguous().view(-1).to(torch.bool)


def packbits(x, bitorder="big"):
    """FlashInfer's ``packbits`` (numpy's): the 1-D binary tensor ``x``
    packed into a uint8 tensor of ``(len(x) + 7) // 8`` bytes, on x's
    device (torch ops: no kernel of attn's)."""
    torch = _runtime.require_torch("packbits")
    bitorder = _bitorder(bitorder)
    bits = _bool_1d(x, "x", torch)
    pad = -bits.numel() % 8
    if pad:
        bits = torch.cat([bits, bits.new_zeros(pad)])
    return _pack_bytes(bits, bitorder, torch)


def segment_packbits(x, indptr, bitorder="big"):
    """FlashInfer's ``segment_packbits``: each segment ``x[indptr[i]:
    indptr[i + 1]]`` packed on its own (padded to whole bytes); returns
    ``(packed, new_indptr)``, new_indptr the segments' byte offsets (int32,
    on indptr's device)."""
    torch = _runtime.require_torch("segment_packbits")
    bitorder = _bitorder(bitorder)
    bits = _bool_1d(x, "x", torch)
    ip = _runtime.host_ints(indptr, "indptr")
    if not ip:
        raise ValueError("indptr: expected batch size + 1 entries, got none")
    _check_rising(ip, "indptr")
    if ip[-1] > bits.numel():
        raise ValueError("indptr[-1] = %d: x has %d elements" % (ip[-1], bits.numel()))
    packed, offsets = _segment_pack(bits, ip, bitorder, torch)
    dev = indptr.device if isinstance(indptr, torch.Tensor) else "cpu"
    return packed, torch.tensor(offsets, dtype=torch.int32, device=dev)


def _segment_pack(bits, ip, bitorder, torch):
    """(uint8 tensor, byte offsets) of the segments ``bits[ip[b]:ip[b+1]]``
    each packed to whole bytes (FlashInfer's segment_packbits layout)."""
    lens = list(map(operator.sub, ip[1:], ip[:-1]))
    offsets = [0]
    for n in lens:
        offsets.append(offsets[-1] + (n + 7) // 8)
    out = torch.zeros(8 * offsets[-1], dtype=torch.bool, device=bits.device)
    n_lens = torch.tensor(lens, dtype=torch.int64, device=bits.device)
    if ip[-1] > ip[0]:
        seg = torch.repeat_interleave(torch.arange(len(lens), device=bits.device), n_lens)
        shift = torch.tensor([8 * o - s for o, s in zip(offsets, ip)], dtype=torch.int64,
                             device=bits.device)
        dest = torch.arange(ip[0], ip[-1], device=bits.device) + shift[seg]
        out[dest] = bits[ip[0]:ip[-1]]
    return _pack_bytes(out, bitorder, torch), offsets


def _check_mask_args(custom_mask, packed_custom_mask):
    """Whether plan() has a custom mask (FlashInfer's: packed_custom_mask
    wins over custom_mask)."""
    return custom_mask is not None or packed_custom_mask is not None


def _mask_tables(wrapper, custom_mask, packed_custom_mask, q_lens, kv_lens, device, stream):
    """The custom mask's aux tables (_CUSTOM_MASK_BODY): the packed bits as
    int32 words and, per request, (byte offset, kv_len - qo_len, kv_len).
    Each request's qo_len x kv_len mask (row-major) is packed on its own,
    little-endian, padded to whole bytes: FlashInfer's segment_packbits of
    ``custom_mask``, whose byte offsets its kernels read through
    mask_indptr. A ``packed_custom_mask`` is taken in that layout (FlashInfer
    computes its offsets from the unpacked sizes; the same for one
    request)."""
    torch = _runtime.require_torch("custom_mask")
    sizes = [a * b for a, b in zip(q_lens, kv_lens)]
    ip = [0]
    for n in sizes:
        ip.append(ip[-1] + n)
    offsets = [0]
    for n in sizes:
        offsets.append(offsets[-1] + (n + 7) // 8)
    with _runtime.torch_stream(stream, device):
        if packed_custom_mask is not None:
            if not isinstance(packed_custom_mask, torch.Tensor):
                raise TypeError("packed_custom_mask: expected a torch.Tensor, got %s"
                                % type(packed_custom_mask).__name__)
            if packed_custom_mask.dtype != torch.uint8:
                raise ValueError("packed_custom_mask: expected dtype torch.uint8, got %s"
                                 % packed_custom_mask.dtype)
            packed = packed_custom_mask.contiguous().view(-1)
            if packed.numel() < offsets[-1]:
                raise ValueError(
                    "packed_custom_mask: expected %d bytes (each request's qo_len * kv_len bits "
                    "packed to whole bytes, as segment_packbits), got %d"
                    % (offsets[-1], packed.numel()))
            packed = packed[:offsets[-1]]
        else:
            bits = _bool_1d(custom_mask, "custom_mask", torch)
            if bits.numel() != ip[-1]:
                raise ValueError("custom_mask: expected sum(qo_len * kv_len) = %d elements, got %d"
                                 % (ip[-1], bits.numel()))
            packed = _segment_pack(bits, ip, "little", torch)[0]
        if offsets[-1] > _lib.INT32_MAX:
            raise ValueError("custom_mask: %d bytes packed, more than attn's tables hold (2^31 - 1)"
                             % offsets[-1])
        pad = -packed.numel() % 4 or (4 if not packed.numel() else 0)
        if pad:
            packed = torch.cat([packed, packed.new_zeros(pad)])
        words = packed.to(_runtime._torch_device(device)).view(torch.int32)
        meta = torch.tensor([[o, k - q, k] for o, q, k in zip(offsets, q_lens, kv_lens)],
                            dtype=torch.int32).to(_runtime._torch_device(device))
        fixed = wrapper._mask_bufs
        if fixed is not None:
            # Graph mode: the tables stay where a captured run() reads them.
            if words.numel() > fixed[0].numel():
                raise ValueError("custom_mask: %d bytes packed, more than custom_mask_buf's %d "
                                 "(CUDA graph mode)" % (offsets[-1], 4 * fixed[0].numel()))
            fixed[0][:words.numel()].copy_(words)
            fixed[1].copy_(meta)
            return list(fixed)
    return [words, meta]


def _check_no_items(*ptrs):
    if any(p is not None for p in ptrs):
        raise NotImplementedError("prefix_len_ptr / token_pos_in_items_ptr / max_item_len_ptr / "
                                  "v_indptr / o_indptr: FlashInfer's multi-item scoring is not "
                                  "in attn")


class BatchPrefillWithPagedKVCacheWrapper(_PrefillBase):
    """Batch prefill over a paged KV cache (FlashInfer's wrapper of the
    same name; chunked prefill, prefix caching): request b's query rows
    ``qo_indptr[b]..[b+1]`` attend to all its cached tokens (new ones
    appended first: ``append_paged_kv_cache``), queries aligned to the end
    of the keys when ``causal``.

    Constructor as FlashInfer's; with ``use_cuda_graph`` the batch size is
    ``len(qo_indptr_buf) - 1``, the table width ``max_pages_per_request``
    (an extension; default ``len(paged_kv_indices_buf)``) and the
    query-row capacity the first plan's (or ``max_num_tokens``).
    """

    _what = "BatchPrefillWithPagedKVCacheWrapper"

    def __init__(self, float_workspace_buffer=None, kv_layout="NHD", use_cuda_graph=False,
                 qo_indptr_buf=None, paged_kv_indptr_buf=None, paged_kv_indices_buf=None,
                 paged_kv_last_page_len_buf=None, custom_mask_buf=None, mask_indptr_buf=None,
                 backend="auto", jit_args=None, jit_kwargs=None, *, max_pages_per_request=None,
                 max_num_tokens=None):
        super().__init__(float_workspace_buffer, kv_layout, use_cuda_graph, qo_indptr_buf,
                         backend, jit_args, jit_kwargs, custom_mask_buf, mask_indptr_buf,
                         max_num_tokens)
        self._fixed_stride = 0
        if self._use_cuda_graph:
            if max_pages_per_request is None:
                if paged_kv_indices_buf is None:
                    raise ValueError("paged_kv_indices_buf (or max_pages_per_request): required "
                                     "with use_cuda_graph=True")
                max_pages_per_request = _length(paged_kv_indices_buf, "paged_kv_indices_buf")
            self._fixed_stride = _int(max_pages_per_request, "max_pages_per_request")
            _check_fixed_tables(self._fixed_batch, self._fixed_stride)
        self._tables = None

    def plan(self, qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len,
             num_qo_heads, num_kv_heads, head_dim_qk, page_size, head_dim_vo=None,
             custom_mask=None, packed_custom_mask=None, causal=False, pos_encoding_mode="NONE",
             use_fp16_qk_reduction=False, sm_scale=None, window_left=-1, logits_soft_cap=None,
             rope_scale=None, rope_theta=None, q_data_type="float16", kv_data_type=None,
             o_data_type=None, non_blocking=True, prefix_len_ptr=None,
             token_pos_in_items_ptr=None, token_pos_in_items_len=0, max_item_len_ptr=None,
             seq_lens=None, seq_lens_q=None, block_tables=None, max_token_per_sequence=None,
             max_sequence_kv=None, fixed_split_size=None, disable_split_kv=False, *,
             stream=None, score_mod=None, mask_mod=None):
        """Plans a paged prefill batch: ``qo_indptr`` [batch + 1] query
        rows, FlashInfer's CSR page table (``paged_kv_indptr``,
        ``paged_kv_indices``, ``paged_kv_last_page_len``) counting every
        cached token, new ones included. Knobs as the ragged wrapper's;
        ``kv_data_type`` q's or FP8 (the cache's)."""
        custom = _check_mask_args(custom_mask, packed_custom_mask)
        if head_dim_vo is not None and head_dim_vo != head_dim_qk:
            raise NotImplementedError("head_dim_vo (%s) != head_dim_qk (%s): a paged cache has one "
                                      "head dim (q/k wider than v is for the ragged wrapper)"
                                      % (head_dim_vo, head_dim_qk))
        _check_no_items(prefix_len_ptr, token_pos_in_items_ptr, max_item_len_ptr)
        rope, pos_encoding_mode = _Rope.plan(pos_encoding_mode, rope_scale, rope_theta, self)

        def make():
            hq, hkv, d = _check_heads(num_qo_heads, num_kv_heads, head_dim_qk)
            page = _int(page_size, "page_size")
            q_type, kv_type = _resolve_dtypes(q_data_type, kv_data_type, o_data_type)
            knobs = _knobs(pos_encoding_mode, window_left, logits_soft_cap, sm_scale, causal,
                           score_mod, mask_mod, custom=custom,
                           invariant=_split_fixed(fixed_split_size, disable_split_kv))
            return PrefillVariant(knobs=knobs, q_type=q_type, num_q_heads=hq, num_kv_heads=hkv,
                                  head_dim=d, paged=True, kv_type=kv_type, page_size=page,
                                  layout=self._kv_layout)

        variant = self._variant_for(
            (num_qo_heads, num_kv_heads, head_dim_qk, page_size, q_data_type, kv_data_type,
             o_data_type, pos_encoding_mode, window_left, logits_soft_cap, sm_scale, causal,
             score_mod, mask_mod, custom, fixed_split_size, disable_split_kv), make)
        hq, page_size, knobs = variant.num_q_heads, variant.page_size, variant.knobs
        if rope:
            variant, rope_fp8 = _Rope.cache_variant(variant)
        device, s = self._plan_device(stream, qo_indptr, paged_kv_indptr, paged_kv_indices)
        # The old plan goes first: its largest page id's place is in the
        # staging array the read below reuses.
        self._start_page_tables(device)
        # One read back for the query rows and the CSR table.
        if block_tables is None:
            torch = _runtime.torch_or_none()
            host_q, kv_indptr, kv_last, kv_indices = self._tables.read_back(
                (qo_indptr, paged_kv_indptr, paged_kv_last_page_len, paged_kv_indices),
                _size(paged_kv_last_page_len, torch))
        else:
            host_q, kv_indptr, kv_last = _read_back(qo_indptr, paged_kv_indptr,
                                                    paged_kv_last_page_len)
        cu_q, rows = self._cu_q(host_q)
        if block_tables is not None:
            lens, pt_ptr, stride = _direct_tables(self, block_tables, _direct_lens(
                seq_lens, kv_indptr, kv_last, page_size,
                ("paged_kv_indptr", "paged_kv_last_page_len")), page_size, s)
        else:
            lens = self._tables.fill_csr(kv_indptr, kv_indices, kv_last, page_size, s,
                                         ("paged_kv_indptr", "paged_kv_indices",
                                          "paged_kv_last_page_len"), read=False)
            pt_ptr, stride = self._tables.pages_ptr, self._tables.stride
        if len(lens) != len(cu_q) - 1:
            raise ValueError("paged_kv_last_page_len: %d requests, qo_indptr has %d"
                             % (len(lens), len(cu_q) - 1))
        # Causal rows are the last cached tokens; without the causal mask
        # every row sees every key, and rows may outnumber them (FlashInfer).
        if knobs.causal and any(map(operator.gt, rows, lens)):
            b = next(b for b, (r, n) in enumerate(zip(rows, lens)) if r > n)
            raise ValueError("request %d: %d query rows but %d cached tokens (append the new "
                             "tokens to the cache before planning)" % (b, rows[b], lens[b]))
        mask_aux = self._plan_mask(custom_mask, packed_custom_mask, cu_q, lens, device, s)
        self._gen += 1
        self._plan = _Plan(gen=self._gen, batch=len(lens), cu_q=cu_q, seq_lens=lens,
                           c_cu_q=array.array("i", cu_q),
                           c_seq_lens=array.array("i", lens) if block_tables is not None
                           else self._tables.c_lens,
                           variant=variant, for_graph=self._use_cuda_graph,
                           num_q_tokens=cu_q[-1], stride=stride, page_tables_ptr=pt_ptr,
                           seq_lens_ptr=self._tables.lens_ptr, device=device,
                           max_page=self._tables.max_page, max_page_at=self._tables.max_page_at,
                           mask_aux=mask_aux)
        if rope:
            # The caller's CSR arrays: the read-back views of kv_indptr share
            # the staging array that fill_csr has since overwritten.
            q_pos = [n - r + i for r, n in zip(rows, lens) for i in range(r)]
            self._plan_rope(rope, q_pos, device, s, paged=(
                paged_kv_indptr, paged_kv_indices, block_tables, lens, page_size), fp8=rope_fp8)
        if _has_alibi(knobs):
            self._alibi_ptr(hq, s)
            self._plan_alibi_rows(_alibi_offsets(cu_q, lens), s, self._alibi_capacity())
        self._replan_all(s)

    begin_forward = plan

    def _plan_handle(self, handle, plan, stream):
        handle.plan_paged(plan.c_cu_q, plan.c_seq_lens, plan.for_graph, stream)

    def forward(self, q, paged_kv_cache, causal=False, pos_encoding_mode="NONE",
                use_fp16_qk_reduction=False, k_scale=None, v_scale=None, window_left=-1,
                logits_soft_cap=None, sm_scale=None, rope_scale=None, rope_theta=None):
        """Deprecated in FlashInfer (``run()``): its knobs replace the
        planned ones as the ragged wrapper's ``forward()`` says."""
        self._forward_knobs(pos_encoding_mode, window_left, logits_soft_cap, sm_scale, causal)
        return self.run(q, paged_kv_cache, k_scale=k_scale, v_scale=v_scale)

    def forward_return_lse(self, q, paged_kv_cache, causal=False, pos_encoding_mode="NONE",
                           use_fp16_qk_reduction=False, k_scale=None, v_scale=None,
                           window_left=-1, logits_soft_cap=None, sm_scale=None,
                           rope_scale=None, rope_theta=None):
        """Deprecated in FlashInfer (``run_return_lse()``): ``forward()``
        returning ``(out, lse)``."""
        self._forward_knobs(pos_encoding_mode, window_left, logits_soft_cap, sm_scale, causal)
        return self.run(q, paged_kv_cache, k_scale=k_scale, v_scale=v_scale, return_lse=True)

    def run(self, q, paged_kv_cache, *args, q_scale=None, k_scale=None, v_scale=None, out=None,
            lse=None, return_lse=False, enable_pdl=None, window_left=None, sinks=None,
            kv_cache_sf=None, skip_softmax_threshold_scale_factor=None, use_fp16_softmax=None,
            uses_spcompress=None, stream=None, aux=None):
        """Prefill of ``q`` [qo_indptr[-1], num_qo_heads, head_dim] over
        ``paged_kv_cache`` (the decode wrapper's forms). Keywords as the
        decode wrapper's run."""
        q, paged_kv_cache = self._rope_inputs(q, paged_kv_cache, stream)
        if _compile.tracing(self) and not args and out is None and lse is None and \
                q_scale is None and k_scale is None and v_scale is None and \
                window_left is None and sinks is None and kv_cache_sf is None and \
                skip_softmax_threshold_scale_factor is None and use_fp16_softmax is None and \
                uses_spcompress is None and stream is None and aux is None:
            return _compile.run(self, (q, paged_kv_cache), return_lse)
        plan = self._plan
        f = plan.fast if plan is not None else None
        if f is not None and stream is None and lse is None and return_lse is False and \
                sinks is None and aux is None and not args and q_scale is None and \
                window_left is None and kv_cache_sf is None and \
                skip_softmax_threshold_scale_factor is None and \
                _same_scales(f, k_scale, v_scale):
            result = _run_fast(f, (q, paged_kv_cache), out)
            if result is not None:
                return result
        args, sinks = self._sink_args(args, sinks)
        _unsupported_run_args(args, kv_cache_sf, skip_softmax_threshold_scale_factor, None)
        plan = self._need_plan()
        base = plan.variant
        folded = _folded_scales(base.kv_type, q_scale, k_scale, v_scale)
        if window_left is not None and _window(window_left) != _fi_window(base.knobs):
            raise ValueError("window_left: %d differs from the planned %d"
                             % (window_left, _fi_window(base.knobs)))

        def fill(a, s):
            cache, ts = paged_kv(paged_kv_cache, self._kv_layout, base.num_kv_heads,
                                 base.head_dim, base.page_size, base.kv_type)
            self._check_cache_pages(plan, cache.num_pages)
            ks, vs, n, per_head = _scales(self, k_scale, v_scale, base.num_kv_heads,
                                          base.kv_type, s, plan.device, folded=True)
            _set_scales(cache, ks, vs, n)
            a.cache = cache
            a.page_tables, a.page_table_stride = plan.page_tables_ptr, plan.stride
            writer = None
            if len(ts) == 1:
                writer = lambda q_t: _cache_writer(q_t, cache)  # noqa: E731
            return per_head, ts, writer

        return self._run(q, out, lse, return_lse, sinks, aux, stream, fill, k_scale, v_scale,
                         folded)

    def run_return_lse(self, q, paged_kv_cache, *args, **kwargs):
        """``run(..., return_lse=True)``."""
        kwargs["return_lse"] = True
        return self.run(q, paged_kv_cache, *args, **kwargs)


class BatchAttentionWithAttentionSinkWrapper(BatchPrefillWithPagedKVCacheWrapper):
    """FlashInfer's attention-sink wrapper: the paged prefill wrapper
    whose ``run(q, paged_kv_cache, sink, sm_scale)`` takes the per-head
    sink logits ([num_qo_heads] float32, in units of the scaled scores:
    each row's softmax denominator gains ``exp(sink[h])``) and the softmax
    scale, as attn's ``sinks`` (docs/semantics.md). The constructor takes
    FlashInfer's arguments; ``q_data_type``, ``kv_data_type``,
    ``head_dim_qk``/``head_dim_vo`` and ``window_left`` only named the
    kernel FlashInfer compiles (plan() sets them here), ``backend`` is
    'auto', 'fa2' or 'fa3' (all attn), ``pos_encoding_mode`` 'NONE'."""

    _what = "BatchAttentionWithAttentionSinkWrapper"

    def __init__(self, float_workspace_buffer=None, kv_layout="NHD", use_cuda_graph=False,
                 qo_indptr_buf=None, paged_kv_indptr_buf=None, paged_kv_indices_buf=None,
                 paged_kv_last_page_len_buf=None, custom_mask_buf=None, mask_indptr_buf=None,
                 backend="auto", pos_encoding_mode="NONE", use_fp16_qk_reduction=False,
                 q_data_type=None, kv_data_type=None, head_dim_qk=128, head_dim_vo=128,
                 window_left=-1, *, max_pages_per_request=None, max_num_tokens=None):
        if _pos_mode(pos_encoding_mode) != "NONE":
            raise NotImplementedError("pos_encoding_mode=%r: FlashInfer's AttentionSink variant "
                                      "has no position encoding" % (pos_encoding_mode,))
        super().__init__(float_workspace_buffer, kv_layout, use_cuda_graph, qo_indptr_buf,
                         paged_kv_indptr_buf, paged_kv_indices_buf, paged_kv_last_page_len_buf,
                         custom_mask_buf, mask_indptr_buf, backend,
                         max_pages_per_request=max_pages_per_request,
                         max_num_tokens=max_num_tokens)
        self._sink_jit = True


# --- cascade -------------------------------------------------------------------


class MultiLevelCascadeAttentionWrapper(_Wrapper):
    """Multi-level cascade decode (FlashInfer's wrapper of the same name)
    over attn's cascade kernels: levels ``0 .. num_levels - 2`` are shared
    prefixes, each read once per group of requests; the last level is each
    request's own suffix; partial states are merged by their LSEs.

    attn's cascade kernels run a decode: every request has the same number
    of query rows (``qo_indptr_arr[-1]`` uniform, at most 16), a shared
    level's groups are consecutive requests and each shares whole pages
    (``paged_kv_last_page_len`` of a shared level must be ``page_size``),
    at most 15 shared levels. Other cascades (shared-prefix prefill: any
    query rows per request, partial pages) run as FlashInfer runs every
    cascade: one paged prefill per level (causal on the last level only)
    merged with ``merge_state_in_place``. ``use_cuda_graph`` fixes the
    batch size at the last level's ``len(paged_kv_last_page_len_buf_arr[-1])``
    and takes the cascade kernels' cases only. No ALiBi.
    """

    _what = "MultiLevelCascadeAttentionWrapper"

    def __init__(self, num_levels, float_workspace_buffer=None, kv_layout="NHD",
                 use_cuda_graph=False, qo_indptr_buf_arr=None, paged_kv_indptr_buf_arr=None,
                 paged_kv_indices_buf_arr=None, paged_kv_last_page_len_buf_arr=None, *,
                 max_pages_per_request=None):
        num_levels = _int(num_levels, "num_levels", minimum=1)
        if use_cuda_graph and num_levels - 1 > _lib.MAX_CASCADE_LEVELS:
            raise ValueError("num_levels: attn's cascade kernels (use_cuda_graph=True) take at "
                             "most %d shared levels (+1 suffix), got %d levels"
                             % (_lib.MAX_CASCADE_LEVELS, num_levels))
        super().__init__(float_workspace_buffer, kv_layout, use_cuda_graph)
        self._per_level = None  # paged prefill wrappers of a per-level plan
        self._per_level_planned = False
        self._num_levels = num_levels
        self._fixed_batch = 0
        self._fixed_strides = [0] * num_levels
        if self._use_cuda_graph:
            if not paged_kv_last_page_len_buf_arr or not paged_kv_indices_buf_arr:
                raise ValueError("paged_kv_last_page_len_buf_arr and paged_kv_indices_buf_arr: "
                                 "required with use_cuda_graph=True")
            if _length(paged_kv_last_page_len_buf_arr, "paged_kv_last_page_len_buf_arr") != \
                    num_levels or _length(paged_kv_indices_buf_arr,
                                          "paged_kv_indices_buf_arr") != num_levels:
                raise ValueError("paged_kv_last_page_len_buf_arr and paged_kv_indices_buf_arr: "
                                 "expected %d levels (num_levels) each" % num_levels)
            self._fixed_groups = [_length(b, "paged_kv_last_page_len_buf_arr[%d]" % l)
                                  for l, b in enumerate(paged_kv_last_page_len_buf_arr)]
            self._fixed_batch = self._fixed_groups[-1]
            self._fixed_strides = [
                _int(max_pages_per_request, "max_pages_per_request")
                if max_pages_per_request is not None else
                _int(_length(b, "paged_kv_indices_buf_arr[%d]" % l),
                     "len(paged_kv_indices_buf_arr[%d])" % l)
                for l, b in enumerate(paged_kv_indices_buf_arr)]
            for groups, stride in zip(self._fixed_groups, self._fixed_strides):
                _check_fixed_tables(groups, stride)
        self._tables = None

    def plan(self, qo_indptr_arr, paged_kv_indptr_arr, paged_kv_indices_arr,
             paged_kv_last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size,
             causal=False, pos_encoding_mode="NONE", use_fp16_qk_reduction=False, sm_scale=None,
             window_left=-1, logits_soft_cap=None, rope_scale=None, rope_theta=None,
             q_data_type="float16", kv_data_type=None, *, stream=None):
        """Plans the levels: per level its ``qo_indptr`` (query rows per
        group), CSR page table and last-page lengths, outermost first, the
        last level per request. ``causal`` applies to the last level (with
        several query rows per request)."""
        n = self._num_levels
        for name, arr in (("qo_indptr_arr", qo_indptr_arr),
                          ("paged_kv_indptr_arr", paged_kv_indptr_arr),
                          ("paged_kv_indices_arr", paged_kv_indices_arr),
                          ("paged_kv_last_page_len", paged_kv_last_page_len)):
            if _length(arr, name) != n:
                raise ValueError("%s: expected %d levels (num_levels), got %d"
                                 % (name, n, len(arr)))
        hq, hkv, d = _check_heads(num_qo_heads, num_kv_heads, head_dim)
        page_size = _int(page_size, "page_size")
        q_type, kv_type = _resolve_dtypes(q_data_type, kv_data_type)
        if _pos_mode(pos_encoding_mode) == "ALIBI":
            raise NotImplementedError("pos_encoding_mode='ALIBI': attn's cascades have no ALiBi "
                                      "(a level's key positions are not the sequence's)")
        if window_left is not None and _int(window_left, "window_left", minimum=-1) >= 0:
            raise NotImplementedError("window_left=%d: attn's cascades have no windows (a "
                                      "level's key positions are not the sequence's)"
                                      % window_left)
        why = self._not_for_kernels(qo_indptr_arr, paged_kv_indptr_arr, paged_kv_last_page_len,
                                    page_size)
        if why is not None:
            if self._use_cuda_graph:
                raise NotImplementedError("%s; with use_cuda_graph=True attn runs only what its "
                                          "cascade kernels take" % why)
            self._plan = None
            if self._per_level is None:
                self._per_level = [BatchPrefillWithPagedKVCacheWrapper(self._workspace,
                                                                       self._kv_layout)
                                   for _ in range(n)]
            for l, w in enumerate(self._per_level):
                w.plan(qo_indptr_arr[l], paged_kv_indptr_arr[l], paged_kv_indices_arr[l],
                       paged_kv_last_page_len[l], hq, hkv, d, page_size,
                       causal=_flag(causal, "causal") if l == n - 1 else False,
                       sm_scale=sm_scale, logits_soft_cap=logits_soft_cap, q_data_type=q_type,
                       kv_data_type=kv_type, stream=stream)
            self._per_level_planned = True
            return
        self._per_level_planned = False
        device, s = self._plan_device(stream, *qo_indptr_arr)
        last_q = _runtime.host_ints(qo_indptr_arr[-1], "qo_indptr_arr[%d]" % (n - 1))
        batch = len(last_q) - 1
        if batch < 1:
            raise ValueError("qo_indptr_arr[%d]: expected batch size + 1 entries" % (n - 1))
        q_len = last_q[1] - last_q[0]
        for b in range(batch):
            if last_q[b + 1] - last_q[b] != q_len or q_len < 1:
                raise NotImplementedError(
                    "qo_indptr_arr[%d]: attn's cascade is a decode: every request needs the same "
                    "number of query rows (request 0 has %d, request %d has %d)"
                    % (n - 1, q_len, b, last_q[b + 1] - last_q[b]))
        if self._use_cuda_graph and batch != self._fixed_batch:
            raise ValueError("qo_indptr_arr[%d]: the batch size is fixed at %d in CUDA graph mode, "
                             "got %d" % (n - 1, self._fixed_batch, batch))
        if self._tables is None:
            self._tables = [_PageTables(device, self._fixed_groups[l] if self._use_cuda_graph
                                        else 0, self._fixed_strides[l], self._what + ".plan()")
                            for l in range(n)]
        self._start_tables(self._tables)
        levels = []
        for l in range(n):
            names = ("paged_kv_indptr_arr[%d]" % l, "paged_kv_indices_arr[%d]" % l,
                     "paged_kv_last_page_len[%d]" % l)
            lens = self._tables[l].fill_csr(paged_kv_indptr_arr[l], paged_kv_indices_arr[l],
                                            paged_kv_last_page_len[l], page_size, s, names)
            if l == n - 1:
                if len(lens) != batch:
                    raise ValueError("%s: %d requests, qo_indptr_arr[%d] has %d"
                                     % (names[2], len(lens), l, batch))
                suffix = lens
                continue
            qo = _runtime.host_ints(qo_indptr_arr[l], "qo_indptr_arr[%d]" % l)
            if len(qo) != len(lens) + 1:
                raise ValueError("qo_indptr_arr[%d]: expected %d entries (groups + 1), got %d"
                                 % (l, len(lens) + 1, len(qo)))
            starts = []
            for g, row in enumerate(qo):
                if row % q_len:
                    raise NotImplementedError(
                        "qo_indptr_arr[%d][%d] = %d: a group must hold whole requests (%d query "
                        "rows each)" % (l, g, row, q_len))
                starts.append(row // q_len)
            if starts[0] != 0 or starts[-1] != batch:
                raise ValueError("qo_indptr_arr[%d]: expected groups covering requests 0..%d, "
                                 "got %s..%s" % (l, batch, starts[0], starts[-1]))
            for g, tokens in enumerate(lens):
                if tokens % page_size:
                    raise NotImplementedError(
                        "%s[%d]: attn's cascade shares whole pages: a shared level's last page "
                        "must be full (page_size %d, this group shares %d tokens)"
                        % (names[2], g, page_size, tokens))
            levels.append((starts, lens))
        causal = _flag(causal, "causal")
        knobs = _knobs(pos_encoding_mode, window_left, logits_soft_cap, sm_scale,
                       causal if q_len > 1 else True, regions=False)
        variant = DecodeVariant(knobs=knobs, q_type=q_type, kv_type=kv_type, num_q_heads=hq,
                                num_kv_heads=hkv, head_dim=d, page_size=page_size,
                                layout=self._kv_layout, query_len=q_len)
        self._gen += 1
        worst = max(self._tables, key=lambda t: t.max_page)
        self._plan = _Plan(gen=self._gen, batch=batch, seq_lens=suffix, variant=variant,
                           for_graph=self._use_cuda_graph, num_q_tokens=batch * q_len,
                           levels=levels, num_levels=n - 1, device=device,
                           max_page=worst.max_page, max_page_at=worst.max_page_at)
        self._replan_all(s)

    begin_forward = plan

    def _not_for_kernels(self, qo_indptr_arr, kv_indptr_arr, last_page_len_arr, page_size):
        """Why attn's cascade kernels cannot take these levels (None if
        they can): their requests' query rows, groups or partial pages."""
        n = self._num_levels
        if n - 1 > _lib.MAX_CASCADE_LEVELS:
            return "%d shared levels (the kernels take %d)" % (n - 1, _lib.MAX_CASCADE_LEVELS)
        last_q = _runtime.host_ints(qo_indptr_arr[-1], "qo_indptr_arr[%d]" % (n - 1))
        q_lens = {last_q[b + 1] - last_q[b] for b in range(len(last_q) - 1)}
        if len(q_lens) != 1 or not 1 <= min(q_lens) <= _lib.MAX_DECODE_QUERY_LEN:
            return ("qo_indptr_arr[%d]: requests of %s query rows (the kernels take the same "
                    "number, 1 to %d, for every request)"
                    % (n - 1, sorted(q_lens), _lib.MAX_DECODE_QUERY_LEN))
        q_len = q_lens.pop()
        for l in range(n - 1):
            qo = _runtime.host_ints(qo_indptr_arr[l], "qo_indptr_arr[%d]" % l)
            if any(row % q_len for row in qo):
                return "qo_indptr_arr[%d]: a group splits a request" % l
            last = _runtime.host_ints(last_page_len_arr[l], "paged_kv_last_page_len[%d]" % l)
            kv = _runtime.host_ints(kv_indptr_arr[l], "paged_kv_indptr_arr[%d]" % l)
            if any(kv[g + 1] > kv[g] and last[g] != page_size for g in range(len(last))):
                return ("paged_kv_last_page_len[%d]: a shared level ends inside a page" % l)
        return None

    def _fits(self, h, plan):
        return plan.batch <= h.max_batch and plan.num_levels <= h.max_levels

    def _make_handle(self, variant, plan):
        cap = self._fixed_batch if self._use_cuda_graph else _capacity(plan.batch)
        return Cascade(plan.device, variant, cap, max(1, self._num_levels - 1))

    def _plan_handle(self, handle, plan, stream):
        handle.plan(plan.levels, plan.seq_lens, plan.for_graph, stream)

    def run(self, q, paged_kv_cache, *, k_scale=None, v_scale=None, out=None, lse=None,
            return_lse=False, stream=None):
        """Cascade attention of ``q`` [query rows, num_qo_heads, head_dim]
        over ``paged_kv_cache``; returns the output (and, with
        ``return_lse``, the base-2 LSE: extensions)."""
        if self._per_level_planned:
            # FlashInfer's order: the last level, then each shared level
            # merged into it.
            last = self._per_level[-1]
            out, lse_out = last.run(q, paged_kv_cache, k_scale=k_scale, v_scale=v_scale,
                                    out=out, lse=lse, return_lse=True, stream=stream)
            for w in self._per_level[:-1]:
                out_l, lse_l = w.run(q, paged_kv_cache, k_scale=k_scale, v_scale=v_scale,
                                     return_lse=True, stream=stream)
                merge_state_in_place(out, lse_out, out_l, lse_l, stream=stream)
            return (out, lse_out) if _flag(return_lse, "return_lse") else out
        plan = self._need_plan()
        base = plan.variant
        device = plan.device
        s = _runtime.stream_handle(stream, device)
        hq, d = base.num_q_heads, base.head_dim
        q_shape = (plan.num_q_tokens, hq, d)
        q_t = _t.tensor(q, "q", dtype=base.q_type, shape=q_shape, token_stride=True, stream=s)
        cache, cache_ts = paged_kv(paged_kv_cache, self._kv_layout, base.num_kv_heads, d,
                                   base.page_size, base.kv_type)
        self._check_cache_pages(plan, cache.num_pages)
        ks, vs, n, per_head = _scales(self, k_scale, v_scale, base.num_kv_heads, base.kv_type, s,
                                      device)
        _set_scales(cache, ks, vs, n)
        want_lse = _flag(return_lse, "return_lse") or lse is not None
        out_t, lse_t = _out_and_lse(out, lse, want_lse, q_shape, base.q_type, hq, device,
                                    self._what)
        _t.same_device([q_t, out_t, lse_t] + list(cache_ts))
        h = self._run_handle(plan, False, False, per_head, s)
        a = _lib.init(_lib.attn_cascade_args)
        a.q, a.q_stride_token = q_t.ptr, q_t.token_stride()
        a.out, a.out_stride_token = out_t.ptr, out_t.token_stride()
        a.lse = lse_t.ptr if lse_t is not None else None
        a.cache = cache
        for l in range(plan.num_levels):
            a.level_page_tables[l] = self._tables[l].pages_ptr
            a.level_page_table_strides[l] = self._tables[l].stride
        a.suffix_page_tables = self._tables[-1].pages_ptr
        a.suffix_page_table_stride = self._tables[-1].stride
        h.run(a, s)
        result = _runtime.as_result(out_t)
        if lse_t is not None:
            _to_base2(lse_t.obj, s, device)
            if return_lse:
                return result, lse_t.obj
        return result

    forward = run


# --- append ---------------------------------------------------------------------


# --- MLA ---------------------------------------------------------------------


def _bsr_rows(ip, M, R):
    """Query rows of each row block of a BSR matrix with M rows in blocks of
    R (the last block may be short), as FlashInfer's qo_indptr."""
    blocks = len(ip) - 1
    if blocks < 1:
        raise ValueError("indptr: needs at least 2 entries (one row block), got %d" % len(ip))
    if -(-M // R) != blocks:
        raise ValueError("indptr: has %d row blocks, but M = %d rows in blocks of R = %d "
                         "make %d" % (blocks, M, R, -(-M // R)))
    return [min(R * i, M) for i in range(blocks)] + [M]


def _bsr_mask(mask, ip, rows, R, C, torch):
    """A BSR mask [nnz, R, C] (block j of row block i: its R x C elements)
    as the paged prefill's custom_mask: per row block, its rows over the
    concatenated keys of its blocks. A short last row block keeps its
    first rows."""
    nnz = ip[-1] - ip[0]
    if not isinstance(mask, torch.Tensor) or tuple(mask.shape) != (nnz, R, C):
        raise ValueError("mask: expected a tensor of shape (nnz, R, C) = (%d, %d, %d), got %s"
                         % (nnz, R, C, tuple(getattr(mask, "shape", ())) or type(mask).__name__))
    parts = [mask[ip[i] - ip[0]:ip[i + 1] - ip[0], :rows[i + 1] - rows[i]]
             .transpose(0, 1).reshape(-1) for i in range(len(ip) - 1)]
    return torch.cat(parts) if parts else mask.reshape(-1)


class BlockSparseAttentionWrapper:
    """FlashInfer's block-sparse attention: ``q`` [M, num_qo_heads,
    head_dim] attends to ``k``/``v`` [N, num_kv_heads, head_dim] where a
    BSR matrix of R x C blocks (``indptr`` [MB + 1] over row blocks,
    ``indices`` [nnz] key blocks) says which keys each row block sees.

    As FlashInfer's (non-VSA backends), a paged prefill: row block i is a
    request of R query rows (the last one M - (MB - 1) R) whose cache pages
    are its key blocks, K and V read in place as pages of C tokens, so
    blocks not listed are never read. ``causal`` is that prefill's (rows
    aligned to the end of the row block's concatenated keys), as are
    ``pos_encoding_mode`` 'ALIBI' and ``logits_soft_cap``; ``mask`` [nnz, R,
    C] or ``packed_mask`` (FlashInfer's layout) masks inside the blocks.
    ``block_mask`` (FlashInfer's VSA backends) is refused.
    """

    _what = "BlockSparseAttentionWrapper"

    def __init__(self, float_workspace_buffer=None, backend="auto"):
        _check_backend(backend, self._what)
        self._paged = BatchPrefillWithPagedKVCacheWrapper(float_workspace_buffer, "NHD")
        self._blocks = None  # (N, C) of the plan

    def plan(self, indptr, indices, M, N, R, C, num_qo_heads, num_kv_heads, head_dim,
             mask=None, packed_mask=None, causal=False, pos_encoding_mode="NONE",
             use_fp16_qk_reduction=False, logits_soft_cap=None, sm_scale=None,
             rope_scale=None, rope_theta=None, q_data_type="float16", kv_data_type=None,
             o_data_type=None, non_blocking=True, block_mask=None, *, stream=None):
        """Plans the BSR matrix (host work and one upload, as the paged
        prefill's plan())."""
        self._blocks = None
        if block_mask is not None:
            raise ValueError("block_mask: only FlashInfer's VSA backends take it; give indptr "
                             "and indices")
        if indptr is None or indices is None:
            raise ValueError("indptr and indices: both are required")
        M, N = _int(M, "M"), _int(N, "N")
        R, C = _int(R, "R"), _int(C, "C")
        if N % C:
            raise ValueError("N: %d keys do not divide into blocks of C = %d" % (N, C))
        torch = _runtime.require_torch("BlockSparseAttentionWrapper.plan()")
        ip = [int(x) for x in (indptr.tolist() if hasattr(indptr, "tolist") else indptr)]
        _check_rising(ip, "indptr")
        rows = _bsr_rows(ip, M, R)
        custom = None
        if mask is not None and packed_mask is None:
            custom = _bsr_mask(mask, ip, rows, R, C, torch)
        self._paged.plan(rows, ip, indices, [C] * (len(ip) - 1), num_qo_heads,
                         num_kv_heads, head_dim, C, custom_mask=custom,
                         packed_custom_mask=packed_mask, causal=causal,
                         pos_encoding_mode=pos_encoding_mode,
                         use_fp16_qk_reduction=use_fp16_qk_reduction, sm_scale=sm_scale,
                         logits_soft_cap=logits_soft_cap, rope_scale=rope_scale,
                         rope_theta=rope_theta, q_data_type=q_data_type,
                         kv_data_type=kv_data_type, o_data_type=o_data_type,
                         non_blocking=non_blocking, stream=stream)
        self._blocks = (N, C)

    begin_forward = plan

    def run(self, q, k, v, scale_q=None, scale_k=None, scale_v=None, out=None, lse=None,
            return_lse=False, enable_pdl=None, *, stream=None):
        """Attention of ``q`` over the planned blocks of ``k`` and ``v``;
        ``out``, ``lse``, ``return_lse`` (base-2 LSEs) as the paged
        prefill's. ``scale_q``/``scale_k``/``scale_v`` (FlashInfer's FP8
        path) are refused."""
        if self._blocks is None:
            raise RuntimeError("%s: run() before plan()" % self._what)
        for name, scale in (("scale_q", scale_q), ("scale_k", scale_k), ("scale_v", scale_v)):
            if scale is not None:
                raise NotImplementedError("%s: FlashInfer's FP8 block-sparse path is not "
                                          "supported" % name)
        N, C = self._blocks
        torch = _runtime.require_torch("BlockSparseAttentionWrapper.run()")
        pages = []
        for name, x in (("k", k), ("v", v)):
            if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[0] != N:
                raise ValueError("%s: expected a tensor of shape (N = %d, num_kv_heads, "
                                 "head_dim), got %s" % (name, N, tuple(getattr(x, "shape", ()))
                                                        or type(x).__name__))
            pages.append(x.reshape(N // C, C, x.shape[1], x.shape[2]))
        return self._paged.run(q, tuple(pages), out=out, lse=lse, return_lse=return_lse,
                               enable_pdl=enable_pdl, stream=stream)

    def reset_workspace_buffer(self, float_workspace_buffer, int_workspace_buffer=None):
        """Accepted for compatibility: attn owns its workspaces."""
        self._paged.reset_workspace_buffer(float_workspace_buffer, int_workspace_buffer)

    def end_forward(self):
        """Accepted for compatibility (nothing to release)."""


class VariableBlockSparseAttentionWrapper:
    """FlashInfer's block-sparse attention with blocks of any size, per KV
    head: ``q`` [num_qo_heads, qo_len, head_dim] over ``k``/``v``
    [num_kv_heads, kv_len, head_dim]; KV head h cuts the query rows into
    blocks of ``block_row_sz[h]`` and the keys into blocks of
    ``block_col_sz[h]``, and ``block_mask_map[h, r, c]`` says whether row
    block r sees key block c. As FlashInfer's, a paged prefill: each (KV
    head, row block) is a request of its rows (the q heads of that KV head
    as its heads), its cache the listed keys as pages of one token, read in
    place; keys not listed are never read, a row block that lists none
    gives 0 (LSE -inf). ``causal`` is that prefill's (rows aligned to the
    end of the row block's concatenated keys), as are ``logits_soft_cap``
    and ``sm_scale``. Output and LSE in q's layout.
    """

    _what = "VariableBlockSparseAttentionWrapper"

    def __init__(self, float_workspace_buffer=None, backend="auto"):
        _check_backend(backend, self._what)
        self._paged = BatchPrefillWithPagedKVCacheWrapper(float_workspace_buffer, "NHD")
        self._shape = None  # (num_qo_heads, num_kv_heads, qo_len, kv_len) of the plan

    def plan(self, block_mask_map, block_row_sz, block_col_sz, num_qo_heads, num_kv_heads,
             head_dim, causal=False, pos_encoding_mode="NONE", use_fp16_qk_reduction=False,
             logits_soft_cap=None, sm_scale=None, rope_scale=None, rope_theta=None,
             non_blocking=True, q_data_type="float16", kv_data_type=None, *, stream=None):
        """Plans the blocks (host work and one upload, as the paged
        prefill's plan())."""
        self._shape = None
        hq, hkv, d = _check_heads(num_qo_heads, num_kv_heads, head_dim)
        torch = _runtime.require_torch("%s.plan()" % self._what)
        rows = torch.as_tensor(block_row_sz).to("cpu", torch.int64)
        cols = torch.as_tensor(block_col_sz).to("cpu", torch.int64)
        mask = torch.as_tensor(block_mask_map).to("cpu").bool()
        if rows.dim() != 2 or rows.shape[0] != hkv:
            raise ValueError("block_row_sz: expected shape (num_kv_heads = %d, row blocks), "
                             "got %s" % (hkv, tuple(rows.shape)))
        if cols.dim() != 2 or cols.shape[0] != hkv:
            raise ValueError("block_col_sz: expected shape (num_kv_heads = %d, key blocks), "
                             "got %s" % (hkv, tuple(cols.shape)))
        if tuple(mask.shape) != (hkv, rows.shape[1], cols.shape[1]):
            raise ValueError("block_mask_map: expected shape %s, got %s"
                             % ((hkv, rows.shape[1], cols.shape[1]), tuple(mask.shape)))
        for name, sizes in (("block_row_sz", rows), ("block_col_sz", cols)):
            if sizes.numel() and int(sizes.min()) < 1:
                raise ValueError("%s: block sizes must be at least 1" % name)
            if bool((sizes.sum(1) != sizes[0].sum()).any()):
                raise ValueError("%s: every KV head's blocks must cover the same length, got "
                                 "%s" % (name, sizes.sum(1).tolist()))
        qo_indptr, kv_indptr, indices = _variable_blocks(mask, rows, cols, torch)
        self._paged.plan(qo_indptr, kv_indptr, indices or [0], [1] * (len(kv_indptr) - 1),
                         hq // hkv, 1, d, 1, causal=causal,
                         pos_encoding_mode=pos_encoding_mode,
                         use_fp16_qk_reduction=use_fp16_qk_reduction, sm_scale=sm_scale,
                         logits_soft_cap=logits_soft_cap, rope_scale=rope_scale,
                         rope_theta=rope_theta, q_data_type=q_data_type,
                         kv_data_type=kv_data_type, non_blocking=non_blocking, stream=stream)
        self._shape = (hq, hkv, int(rows[0].sum()), int(cols[0].sum()))

    def run(self, q, k, v, out=None, lse=None, return_lse=False, enable_pdl=None, *,
            stream=None):
        """Attention of ``q`` [num_qo_heads, qo_len, head_dim] over the planned
        blocks of ``k``/``v`` [num_kv_heads, kv_len, head_dim]: ``out`` like
        q (and ``lse`` [num_qo_heads, qo_len], base 2, with
        ``return_lse``)."""
        if self._shape is None:
            raise RuntimeError("%s: run() before plan()" % self._what)
        hq, hkv, qo_len, kv_len = self._shape
        torch = _runtime.require_torch("%s.run()" % self._what)
        for name, x, heads, n in (("q", q, hq, qo_len), ("k", k, hkv, kv_len),
                                  ("v", v, hkv, kv_len)):
            if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[:2] != (heads, n):
                raise ValueError("%s: expected a tensor of shape (%d, %d, head_dim), got %s"
                                 % (name, heads, n, tuple(getattr(x, "shape", ()))
                                    or type(x).__name__))
        d, g = q.shape[2], hq // hkv
        # Rows (h, token) with the group's q heads; keys as [pages, 1, 1, d].
        rows = q.reshape(hkv, g, qo_len, d).transpose(1, 2).reshape(hkv * qo_len, g, d)
        pages = tuple(x.reshape(hkv * kv_len, 1, 1, d) for x in (k, v))
        res = self._paged.run(rows.contiguous(), pages, return_lse=return_lse,
                              enable_pdl=enable_pdl, stream=stream)
        o, l_ = res if return_lse else (res, None)
        o = o.reshape(hkv, qo_len, g, d).transpose(1, 2).reshape(hq, qo_len, d)
        if out is not None:
            _check_like(out, o, "out")
            out.copy_(o)
            o = out
        if not return_lse:
            return o
        l_ = l_.reshape(hkv, qo_len, g).transpose(1, 2).reshape(hq, qo_len)
        if lse is not None:
            _check_like(lse, l_, "lse")
            lse.copy_(l_)
            l_ = lse
        return o, l_

    def reset_workspace_buffer(self, float_workspace_buffer, int_workspace_buffer=None):
        """Accepted for compatibility: attn owns its workspaces."""
        self._paged.reset_workspace_buffer(float_workspace_buffer, int_workspace_buffer)


def _variable_blocks(mask, rows, cols, torch):
    """The paged prefill of variable blocks (VariableBlockSparseAttentionWrapper):
    requests (KV head h, row block r) in that order, of block_row_sz[h, r]
    rows; their keys the tokens of the listed key blocks, as one-token
    pages of head h's keys (page h * kv_len + token). Returns (qo_indptr,
    kv_indptr, page ids) as lists."""
    kv_len = int(cols[0].sum())
    qo_indptr = [0] + torch.cumsum(rows.flatten(), 0).tolist()
    col_start = torch.cumsum(cols, 1) - cols  # [H, C]
    lengths = (mask * cols[:, None, :]).sum(-1).flatten()  # [H * R]
    kv_indptr = [0] + torch.cumsum(lengths, 0).tolist()
    h_idx, _, c_idx = mask.nonzero(as_tuple=True)
    size = cols[h_idx, c_idx]
    base = h_idx * kv_len + col_start[h_idx, c_idx]
    starts = torch.repeat_interleave(torch.cumsum(size, 0) - size, size)
    ids = torch.repeat_interleave(base, size) + torch.arange(int(size.sum())) - starts
    return qo_indptr, kv_indptr, ids.tolist()


def _check_like(t, want, name):
    """``t`` (a caller's out/lse) has ``want``'s shape, dtype and device."""
    if tuple(t.shape) != tuple(want.shape) or t.dtype != want.dtype or t.device != want.device:
        raise ValueError("%s: expected %s %s on %s, got %s %s on %s"
                         % (name, tuple(want.shape), want.dtype, want.device, tuple(t.shape),
                            t.dtype, t.device))


def _mla_cache(cache, name, dtype, page_size, dims):
    """A [num_pages, page_size, dims] cache, possibly a view of a wider row
    (vLLM slices one [.., kv_lora_rank + rope] tensor in two): the last
    dimension contiguous, rows and pages at any stride."""
    t = _t.tensor(cache, name, dtype=dtype, shape=(None, page_size, dims), dense=False)
    if dims > 1 and t.strides[2] != 1:
        raise ValueError("%s: the last dimension must be contiguous, got strides %s"
                         % (name, t.strides))
    return t


class BatchMLAPagedAttentionWrapper(_Wrapper):
    """Absorbed MLA decode over a paged latent cache (FlashInfer's wrapper
    of the same name; ``attn.mla_decode``, docs/semantics.md): ``plan()``
    once per step, ``run()`` per layer.

    ``float_workspace_buffer`` tells the device (attn owns its
    workspaces); ``use_cuda_graph`` with ``kv_indices`` and ``kv_len_arr``
    fixes the batch size (``len(kv_len_arr)``) and the page-table width
    (``len(kv_indices)``); ``qo_indptr`` and ``kv_indptr`` are accepted;
    ``backend`` 'auto' ('fa2', 'fa3' mean the same: attn generates its own
    kernel).
    """

    _what = "BatchMLAPagedAttentionWrapper"

    def __init__(self, float_workspace_buffer=None, use_cuda_graph=False, qo_indptr=None,
                 kv_indptr=None, kv_indices=None, kv_len_arr=None, backend="auto"):
        _check_backend(backend, self._what)
        super().__init__(float_workspace_buffer, "NHD", use_cuda_graph)
        self._fixed_batch = self._fixed_stride = 0
        if self._use_cuda_graph:
            if kv_indices is None or kv_len_arr is None:
                raise ValueError("kv_indices and kv_len_arr: required with use_cuda_graph=True "
                                 "(they fix the batch size and the page-table width)")
            self._fixed_batch = _length(kv_len_arr, "kv_len_arr")
            self._fixed_stride = _length(kv_indices, "kv_indices")
            _check_fixed_tables(self._fixed_batch, self._fixed_stride)
        self._tables = None

    def plan(self, qo_indptr, kv_indptr, kv_indices, kv_len_arr, num_heads, head_dim_ckv,
             head_dim_kpe, page_size, causal, sm_scale, q_data_type, kv_data_type,
             use_profiler=False, *, stream=None):
        """Plans a batch (host work and one upload; not under graph
        capture).

        ``qo_indptr`` [batch + 1]: every request the same number of query
        tokens (1, or more with multi-token prediction, causal among them
        when ``causal``); ``kv_indptr`` [batch + 1] and ``kv_indices`` the
        CSR page table, ``kv_len_arr`` [batch] the cached tokens (new ones
        included), each request holding exactly ceil(len / page_size)
        pages; ``num_heads``, ``head_dim_ckv`` (kv_lora_rank),
        ``head_dim_kpe`` (RoPE dims, 0 for NoPE MLA), ``page_size``,
        ``sm_scale``; ``q_data_type`` float16/bfloat16 and ``kv_data_type``
        the same. Extension: ``stream``.
        """
        heads = _int(num_heads, "num_heads")
        rank = _int(head_dim_ckv, "head_dim_ckv")
        rope = _int(head_dim_kpe, "head_dim_kpe", minimum=0)
        page_size = _int(page_size, "page_size")
        causal = _flag(causal, "causal")
        if _flag(use_profiler, "use_profiler"):
            raise NotImplementedError("use_profiler: attn has no in-kernel profiler")
        q_type, kv_type = _resolve_dtypes(q_data_type, kv_data_type)
        if kv_type != q_type:
            raise NotImplementedError(
                "kv_data_type %s: this wrapper reads caches of q's dtype (%s); e4m3 MLA caches "
                "are in the C ABI (attn_mla_decode, kv_scale)" % (kv_type, q_type))
        if isinstance(sm_scale, bool) or not isinstance(sm_scale, numbers.Real) or \
                not (math.isfinite(sm_scale) and sm_scale > 0):
            raise ValueError("sm_scale: expected a positive finite number, got %r" % (sm_scale,))
        arrays = (kv_indices, kv_len_arr, qo_indptr, kv_indptr)
        host_ids, host_lens, host_qo, host_kp = _read_back(*arrays)
        qo = _runtime.host_ints(host_qo, "qo_indptr")
        lens = _runtime.host_ints(host_lens, "kv_len_arr")
        kp = _runtime.host_ints(host_kp, "kv_indptr")
        batch = len(lens)
        for arr, name in ((qo, "qo_indptr"), (kp, "kv_indptr")):
            if len(arr) != batch + 1:
                raise ValueError("%s: expected %d entries (the batch size %d of kv_len_arr, "
                                 "+ 1), got %d" % (name, batch + 1, batch, len(arr)))
        if batch < 1:
            raise ValueError("kv_len_arr: the batch is empty")
        if qo[0] != 0:
            raise ValueError("qo_indptr[0] = %d: expected 0" % qo[0])
        q_lens = sorted({qo[b + 1] - qo[b] for b in range(batch)})
        if len(q_lens) != 1:
            raise NotImplementedError(
                "qo_indptr: requests have %s query tokens; attn's MLA decode takes the same "
                "number for every request" % q_lens)
        q_len = _int(q_lens[0], "query tokens per request (qo_indptr)",
                     maximum=_lib.MAX_DECODE_QUERY_LEN)
        last = []
        for b in range(batch):
            pages = kp[b + 1] - kp[b]
            need = (lens[b] + page_size - 1) // page_size
            if lens[b] < q_len:
                raise ValueError("kv_len_arr[%d] = %d: a request holds at least its %d query "
                                 "tokens" % (b, lens[b], q_len))
            if pages != need:
                raise ValueError("kv_indptr: request %d has %d pages for kv_len_arr[%d] = %d "
                                 "tokens of pages of %d (expected %d)"
                                 % (b, pages, b, lens[b], page_size, need))
            last.append(lens[b] - (pages - 1) * page_size)
        if self._use_cuda_graph and batch != self._fixed_batch:
            raise ValueError("kv_len_arr: the batch size is fixed at %d in CUDA graph mode, "
                             "got %d" % (self._fixed_batch, batch))
        variant = MlaDecodeVariant(q_type=q_type, kv_type=kv_type, num_q_heads=heads,
                                   kv_lora_rank=rank, rope_dim=rope, page_size=page_size,
                                   query_len=q_len, causal=causal and q_len > 1,
                                   scale=float(sm_scale))
        device, s = self._plan_device(stream, *arrays)
        self._start_page_tables(device)
        seq_lens = self._tables.fill_csr(kp, host_ids, last, page_size, s,
                                         names=("kv_indptr", "kv_indices", "kv_len_arr"))
        self._gen += 1
        self._plan = _Plan(gen=self._gen, batch=batch, seq_lens=seq_lens, variant=variant,
                           for_graph=self._use_cuda_graph, num_q_tokens=batch * q_len,
                           stride=self._tables.stride, page_tables_ptr=self._tables.pages_ptr,
                           device=device, max_page=self._tables.max_page,
                           max_page_at=self._tables.max_page_at)
        for key in list(self._handles):
            if dataclasses.replace(key, write_lse=False) != variant:
                self._handles.pop(key)
        self._handle(variant, s)

    def _make_handle(self, variant, plan):
        cap = self._fixed_batch if self._use_cuda_graph else _capacity(plan.batch)
        return MlaDecode(plan.device, variant, cap)

    def _plan_handle(self, handle, plan, stream):
        handle.plan(plan.seq_lens, plan.for_graph, stream)

    def run(self, q_nope, q_pe, ckv_cache, kpe_cache, out=None, lse=None, return_lse=False,
            profiler_buffer=None, kv_len=None, page_table=None, return_lse_base_on_e=False, *,
            stream=None):
        """MLA decode of ``q_nope`` [batch * q_len, num_heads, head_dim_ckv]
        and ``q_pe`` [.., head_dim_kpe] over ``ckv_cache`` [num_pages,
        page_size, head_dim_ckv] and ``kpe_cache`` [num_pages, page_size,
        head_dim_kpe] (views of one wider tensor are fine) for the planned
        batch. ``out`` [like q_nope] and ``lse`` [rows, num_heads] float32
        are written when given, else allocated; ``return_lse`` returns
        ``(out, lse)`` with base-2 LSEs (FlashInfer's), natural-log with
        ``return_lse_base_on_e``. ``profiler_buffer``, ``kv_len`` and
        ``page_table`` (run-time tables) are not supported. Extension:
        ``stream``.
        """
        plan = self._need_plan()
        for value, name in ((profiler_buffer, "profiler_buffer"), (kv_len, "kv_len"),
                            (page_table, "page_table")):
            if value is not None:
                raise NotImplementedError("%s: not supported by attn's MLA wrapper (plan() "
                                          "sets the tables)" % name)
        v = plan.variant
        device = plan.device
        s = _runtime.stream_handle(stream, device)
        rows = plan.num_q_tokens
        q_shape = (rows, v.num_q_heads, v.kv_lora_rank)
        qn = _t.tensor(q_nope, "q_nope", dtype=v.q_type, shape=q_shape, token_stride=True,
                       stream=s, what="batch * q_len, num_heads, head_dim_ckv")
        qr = None
        if v.rope_dim:
            qr = _t.tensor(q_pe, "q_pe", dtype=v.q_type,
                           shape=(rows, v.num_q_heads, v.rope_dim), token_stride=True,
                           stream=s, what="batch * q_len, num_heads, head_dim_kpe")
        ckv = _mla_cache(ckv_cache, "ckv_cache", v.kv_type, v.page_size, v.kv_lora_rank)
        kpe = None
        if v.rope_dim:
            kpe = _mla_cache(kpe_cache, "kpe_cache", v.kv_type, v.page_size, v.rope_dim)
            if kpe.shape[0] != ckv.shape[0]:
                raise ValueError("kpe_cache: %d pages, but ckv_cache has %d"
                                 % (kpe.shape[0], ckv.shape[0]))
        num_pages = ckv.shape[0]
        self._check_cache_pages(plan, num_pages)
        want_lse = _flag(return_lse, "return_lse") or lse is not None
        out_t, lse_t = _out_and_lse(out, lse, want_lse, q_shape, v.q_type, v.num_q_heads,
                                    device, self._what)
        _t.same_device([qn, qr, ckv, kpe, out_t, lse_t])
        h = self._handle(dataclasses.replace(v, write_lse=want_lse), s)
        a = _lib.init(_lib.attn_mla_decode_args)
        a.q_nope, a.q_nope_stride_token = qn.ptr, qn.token_stride()
        if qr is not None:
            a.q_rope, a.q_rope_stride_token = qr.ptr, qr.token_stride()
        a.out, a.out_stride_token = out_t.ptr, out_t.token_stride()
        a.lse = lse_t.ptr if lse_t is not None else None
        a.ckv, a.ckv_page_stride, a.ckv_token_stride = ckv.ptr, ckv.strides[0], ckv.strides[1]
        if kpe is not None:
            a.kpe, a.kpe_page_stride, a.kpe_token_stride = (kpe.ptr, kpe.strides[0],
                                                            kpe.strides[1])
        a.num_pages = num_pages
        a.page_tables, a.page_table_stride = plan.page_tables_ptr, plan.stride
        h.run(a, s)
        result = _runtime.as_result(out_t)
        if lse_t is not None:
            if not _flag(return_lse_base_on_e, "return_lse_base_on_e"):
                _to_base2(lse_t.obj, s, device)
            if return_lse:
                return result, lse_t.obj
        return result


def _cache_geometry(paged_kv_cache, layout):
    """(num_kv_heads, head_dim, page_size, dtype) of a FlashInfer paged
    cache (a 5-D tensor or a (k, v) tuple)."""
    first = paged_kv_cache[0] if isinstance(paged_kv_cache, (tuple, list)) else paged_kv_cache
    t = _t.adapt(first, "paged_kv_cache")
    tuple_form = isinstance(paged_kv_cache, (tuple, list))
    want = 4 if tuple_form else 5
    if t.ndim != want:
        raise ValueError("paged_kv_cache: expected a %d-D %s, got shape %s"
                         % (want, "k/v tensor" if tuple_form else "tensor", t.shape))
    page_dims = t.shape[1:] if tuple_form else t.shape[2:]
    if layout == "NHD":
        page_size, heads, dim = page_dims
    else:
        heads, page_size, dim = page_dims
    return heads, dim, page_size, t.dtype


def _torch_index(x, name, torch, device):
    if isinstance(x, torch.Tensor):
        return x.to(device=device)
    if hasattr(x, "__cuda_array_interface__"):
        return torch.as_tensor(x, device=device)
    if hasattr(x, "__dlpack__"):
        return torch.from_dlpack(x).to(device=device)
    return torch.tensor(_runtime.host_ints(x, name), dtype=torch.int64, device=device)


def append_paged_kv_cache(append_key, append_value, batch_indices, positions, paged_kv_cache,
                          kv_indices, kv_indptr, kv_last_page_len, kv_layout="NHD", *,
                          k_scale=None, v_scale=None, kv_data_type=None, stream=None):
    """Writes ``append_key``/``append_value`` [nnz, num_kv_heads, head_dim]
    into ``paged_kv_cache`` at request ``batch_indices[i]``, position
    ``positions[i]`` (FlashInfer's function; the page table must already
    cover the new tokens). The slots are computed on the device (no
    synchronization: graph-capturable). Extensions: FP8 caches quantize by
    ``k_scale``/``v_scale`` (stored = x / scale; default 1), whose format
    ``kv_data_type`` names when the cache is uint8; ``stream``."""
    layout = _check_layout(kv_layout)
    heads, dim, page_size, cache_dtype = _cache_geometry(paged_kv_cache, layout)
    if kv_data_type is not None:
        kv_type = _t.dtype_name(kv_data_type, "kv_data_type")
    elif cache_dtype in ("uint8", "void8"):
        kv_type = "float8_e4m3fn"
    else:
        kv_type = cache_dtype
    k = _t.tensor(append_key, "append_key", dtype=("float16", "bfloat16"),
                  shape=(None, heads, dim), token_stride=True)
    in_type = k.dtype
    v = _t.tensor(append_value, "append_value", dtype=in_type, shape=k.shape, token_stride=True)
    if kv_type not in (in_type,) + _t.FP8_DTYPES:
        raise TypeError("paged_kv_cache: expected dtype %s (append_key's) or an FP8 dtype, got %s"
                        % (in_type, kv_type))
    cache, cache_ts = paged_kv(paged_kv_cache, layout, heads, dim, page_size, kv_type)
    device = _t.same_device([k, v] + list(cache_ts))
    if device < 0:
        device = max(0, _runtime.current_device())
    torch = _runtime.require_torch("append_paged_kv_cache")
    s = _runtime.stream_handle(stream, device)
    tdev = _runtime._torch_device(device)
    nnz = k.shape[0]
    with _runtime.torch_stream(s, device):
        b = _torch_index(batch_indices, "batch_indices", torch, tdev).long()
        pos = _torch_index(positions, "positions", torch, tdev).long()
        if b.shape != (nnz,) or pos.shape != (nnz,):
            raise ValueError("batch_indices, positions: expected shape (%d,) each (append_key's "
                             "rows), got %s and %s" % (nnz, tuple(b.shape), tuple(pos.shape)))
        indptr = _torch_index(kv_indptr, "kv_indptr", torch, tdev).long()
        indices = _torch_index(kv_indices, "kv_indices", torch, tdev).long()
        page = indices[indptr[b] + torch.div(pos, page_size, rounding_mode="floor")]
        slots = page * page_size + torch.remainder(pos, page_size)
    per_head = False
    if kv_type in _t.FP8_DTYPES:
        holder = _AppendScales.get(device)
        ks, vs, n, per_head = _scales(holder, k_scale, v_scale, heads, kv_type, s, device)
        _set_scales(cache, ks, vs, n)
    else:
        _scales(None, k_scale, v_scale, heads, kv_type, s, device)
    variant = AppendKVVariant(in_type=in_type, kv_type=kv_type, num_kv_heads=heads,
                              head_dim=dim, page_size=page_size, layout=layout,
                              per_head_kv_scale=per_head)
    append_rows(variant, k, v, cache, slots.data_ptr(), nnz, s, device)
    del kv_last_page_len  # FlashInfer's argument; the slots need only indptr and indices


class _AppendScales:
    _holders = {}

    def __init__(self):
        self._scale_bufs = {}

    @classmethod
    def get(cls, device):
        h = cls._holders.get(device)
        if h is None:
            h = cls._holders[device] = cls()
        return h


def append_rows(variant, k, v, cache, slot_mapping_ptr, num_tokens, stream, device):
    """attn_append_kv_run of rows ``k``/``v`` (Tensors) into ``cache`` (an
    attn_paged_kv with its scales) through an int64 slot mapping."""
    h = shared(AppendKV, device, variant)
    a = _lib.init(_lib.attn_append_kv_args)
    a.k, a.v = k.ptr, v.ptr
    a.num_tokens = int(num_tokens)
    a.k_stride_token, a.v_stride_token = k.token_stride(), v.token_stride()
    a.cache = cache
    a.slot_mapping = slot_mapping_ptr
    if num_tokens:
        h.run(a, stream)


def get_seq_lens(kv_indptr, kv_last_page_len, page_size):
    """Tokens per request of a CSR page table (FlashInfer's helper)."""
    torch = _runtime.require_torch("get_seq_lens")
    return (torch.clamp(kv_indptr[1:] - kv_indptr[:-1] - 1, min=0) * page_size
            + kv_last_page_len)


def get_batch_indices_positions(append_indptr, seq_lens, nnz, batch_indices=None,
                                positions=None):
    """For each of ``nnz`` appended rows (ragged by ``append_indptr``), its
    request and its position in the request's sequence of ``seq_lens``
    tokens (new ones included): FlashInfer's helper, on the device."""
    torch = _runtime.require_torch("get_batch_indices_positions")
    device = append_indptr.device
    counts = (append_indptr[1:] - append_indptr[:-1]).long()
    batch = counts.numel()
    b = torch.repeat_interleave(torch.arange(batch, device=device), counts, output_size=nnz)
    rank = torch.arange(nnz, device=device) - append_indptr.long()[b]
    pos = seq_lens.to(device).long()[b] - counts[b] + rank
    if batch_indices is None:
        batch_indices = b.to(torch.int32)
    else:
        batch_indices.copy_(b)
    if positions is None:
        positions = pos.to(torch.int32)
    else:
        positions.copy_(pos)
    return batch_indices, positions


# --- merge states -------------------------------------------------------------


def _merge(outs, lses, stride, out, lse_ptr, num_tokens, dtype, heads, dim, device, stream):
    """One attn_merge_states_run over up to 16 states (natural-log LSEs)."""
    h = shared(MergeStates, device, MergeStatesVariant(dtype=dtype, num_heads=heads,
                                                       head_dim=dim))
    a = _lib.init(_lib.attn_merge_states_args)
    a.num_tokens = int(num_tokens)
    a.num_states = len(outs)
    for i, (o, s) in enumerate(zip(outs, lses)):
        a.outs[i] = o
        a.lses[i] = s
    a.states_stride_token = stride
    a.out, a.out_stride_token = out, 0
    a.lse = lse_ptr
    if num_tokens:
        h.run(a, stream)


def _state(v, s, vname, sname, shape=None):
    vt = _t.tensor(v, vname, dtype=("float16", "bfloat16", "float32"), shape=shape)
    if vt.ndim != 3 and shape is None:
        raise ValueError("%s: expected shape (seq_len, num_heads, head_dim), got %s"
                         % (vname, vt.shape))
    st = _t.tensor(s, sname, dtype="float32", shape=vt.shape[:2], what="seq_len, num_heads")
    return vt, st


def merge_state(v_a, s_a, v_b, s_b, *, stream=None):
    """Merges two partial attention states (FlashInfer's ``merge_state``):
    ``v_*`` [seq_len, num_heads, head_dim] (f16, bf16 or f32), ``s_*``
    [seq_len, num_heads] float32 base-2 LSEs. Returns ``(v, s)``."""
    va, sa = _state(v_a, s_a, "v_a", "s_a")
    vb, sb = _state(v_b, s_b, "v_b", "s_b", shape=va.shape)
    _t.check_dtype(vb, va.dtype)
    device = _t.same_device([va, sa, vb, sb])
    torch = _runtime.require_torch("merge_state")
    st = _runtime.stream_handle(stream, device)
    n, heads, dim = va.shape
    v_out = _runtime.empty(va.shape, va.dtype, device, "merge_state")
    with _runtime.torch_stream(st, device):
        ln = torch.empty((2, n, heads), dtype=torch.float32, device=v_out.device)
        ln[0].copy_(_as_torch(s_a)).mul_(LN2)
        ln[1].copy_(_as_torch(s_b)).mul_(LN2)
        s_out = torch.empty((n, heads), dtype=torch.float32, device=v_out.device)
    _merge([va.ptr, vb.ptr], [ln[0].data_ptr(), ln[1].data_ptr()], 0, v_out.data_ptr(),
           s_out.data_ptr(), n, va.dtype, heads, dim, device, st)
    with _runtime.torch_stream(st, device):
        s_out.mul_(LOG2E)
    return v_out, s_out


def merge_state_in_place(v, s, v_other, s_other, mask=None, *, stream=None):
    """Merges ``(v_other, s_other)`` into ``(v, s)`` in place
    (FlashInfer's ``merge_state_in_place``; base-2 LSEs). ``mask``
    [seq_len] bool (FlashInfer's, for CUDA graphs): rows where it is False
    are left unchanged; with a mask the rows are merged into a temporary
    and copied where it is True (torch ops on the same stream, no
    synchronization)."""
    vt, st_ = _state(v, s, "v", "s")
    vo, so = _state(v_other, s_other, "v_other", "s_other", shape=vt.shape)
    _t.check_dtype(vo, vt.dtype)
    device = _t.same_device([vt, st_, vo, so])
    torch = _runtime.require_torch("merge_state_in_place")
    stream_h = _runtime.stream_handle(stream, device)
    n, heads, dim = vt.shape
    if mask is not None:
        m = _merge_mask(mask, n, device, torch)
        v_m, s_m = merge_state(v, s, v_other, s_other, stream=stream_h)
        v_t, s_t = _as_torch(v), _as_torch(s)
        with _runtime.torch_stream(stream_h, device):
            keep = m[:, None]
            s_t.copy_(torch.where(keep, s_m, s_t))
            v_t.copy_(torch.where(keep[..., None], v_m, v_t))
        return
    s_t = _as_torch(s)
    with _runtime.torch_stream(stream_h, device):
        other = _as_torch(s_other).mul(LN2)
        s_t.mul_(LN2)
    _merge([vt.ptr, vo.ptr], [st_.ptr, other.data_ptr()], 0, vt.ptr, st_.ptr, n, vt.dtype,
           heads, dim, device, stream_h)
    with _runtime.torch_stream(stream_h, device):
        s_t.mul_(LOG2E)


def _merge_mask(mask, n, device, torch):
    """merge_state_in_place's mask as a torch bool tensor of [n] rows on
    ``device`` (errors name it)."""
    if not isinstance(mask, torch.Tensor):
        if not (hasattr(mask, "__cuda_array_interface__") or hasattr(mask, "__dlpack__")):
            raise TypeError("mask: expected a bool tensor, got %s" % type(mask).__name__)
        try:
            mask = _as_torch(mask)
        except Exception as e:
            raise TypeError("mask: not readable as a tensor: %s" % e) from None
    if mask.dtype != torch.bool:
        raise _t.DtypeError("mask: expected dtype bool, got %s" % mask.dtype)
    if tuple(mask.shape) != (n,):
        raise ValueError("mask: expected shape (%d,) [seq_len], got %s"
                         % (n, tuple(mask.shape)))
    if mask.device.type != "cuda" or (device >= 0 and mask.device.index != device):
        raise ValueError("mask: expected a CUDA tensor on v's device%s, got %s"
                         % (" (cuda:%d)" % device if device >= 0 else "", mask.device))
    return mask


def merge_states(v, s, *, stream=None):
    """Merges ``num_states`` partial states per row (FlashInfer's
    ``merge_states``): ``v`` [seq_len, num_states, num_heads, head_dim],
    ``s`` [seq_len, num_states, num_heads] float32 base-2 LSEs. Returns
    ``(v_merged [seq_len, num_heads, head_dim], s_merged [seq_len,
    num_heads])``. More than 16 states merge in rounds of 16."""
    vt = _t.tensor(v, "v", dtype=("float16", "bfloat16", "float32"))
    if vt.ndim != 4:
        raise ValueError("v: expected shape (seq_len, num_states, num_heads, head_dim), got %s"
                         % (vt.shape,))
    n, k, heads, dim = vt.shape
    _t.tensor(s, "s", dtype="float32", shape=(n, k, heads), what="seq_len, num_states, num_heads")
    device = _t.same_device([vt])
    st = _runtime.stream_handle(stream, device)
    if k < 1:
        raise ValueError("v: expected at least one state, got num_states 0")
    torch = _runtime.require_torch("merge_states")
    v_t = _as_torch(v)
    with _runtime.torch_stream(st, device):
        # Each state's LSEs dense [seq_len, num_heads] (the C ABI's lses have
        # no stride), in natural log.
        lse_states = _as_torch(s).transpose(0, 1).mul(LN2).contiguous()
        if k == 1:
            return v_t[:, 0].clone(), lse_states[0].mul(LOG2E)
    states = [(vt.offset(i * heads * dim), lse_states[i].data_ptr()) for i in range(k)]
    stride = k * heads * dim
    keep = [lse_states]
    while len(states) > _lib.MAX_MERGE_STATES:
        # Even groups (every group >= 2 states), merged into dense partials.
        groups = -(-len(states) // _lib.MAX_MERGE_STATES)
        bounds = [len(states) * g // groups for g in range(groups + 1)]
        outs = torch.empty((groups, n, heads, dim), dtype=v_t.dtype, device=v_t.device)
        lses = torch.empty((groups, n, heads), dtype=torch.float32, device=v_t.device)
        keep += [outs, lses]
        for g in range(groups):
            part = states[bounds[g]:bounds[g + 1]]
            _merge([o for o, _ in part], [l for _, l in part], stride, outs[g].data_ptr(),
                   lses[g].data_ptr(), n, vt.dtype, heads, dim, device, st)
        states = [(outs[g].data_ptr(), lses[g].data_ptr()) for g in range(groups)]
        stride = heads * dim
    v_out = torch.empty((n, heads, dim), dtype=v_t.dtype, device=v_t.device)
    s_out = torch.empty((n, heads), dtype=torch.float32, device=v_t.device)
    _merge([o for o, _ in states], [l for _, l in states], stride, v_out.data_ptr(),
           s_out.data_ptr(), n, vt.dtype, heads, dim, device, st)
    with _runtime.torch_stream(st, device):
        s_out.mul_(LOG2E)
    del keep  # the partials stay alive until here (the stream orders their reuse)
    return v_out, s_out


# --- one request: FlashInfer's single_* functions ---------------------------------


def _single_kv(k, v, kv_layout, what):
    """k/v of one request as [kv_len, num_kv_heads, dim] rows: HND's
    [num_kv_heads, kv_len, dim] is transposed and copied (the ragged
    kernel reads heads of a row side by side)."""
    layout = _check_layout(kv_layout)
    for t, name in ((k, "k"), (v, "v")):
        if getattr(t, "dim", None) is None or t.dim() != 3:
            raise ValueError("%s: %s expected a 3-D tensor ([kv_len, num_kv_heads, dim] "
                             "for NHD, [num_kv_heads, kv_len, dim] for HND), got %r"
                             % (what, name, getattr(t, "shape", type(t).__name__)))
    if layout == "HND":
        k, v = k.transpose(0, 1).contiguous(), v.transpose(0, 1).contiguous()
    if k.shape[:2] != v.shape[:2]:
        raise ValueError("%s: k %s and v %s differ in kv_len or num_kv_heads"
                         % (what, tuple(k.shape), tuple(v.shape)))
    return k, v


def _rope_params(rope_scale, rope_theta):
    """ROPE_LLAMA's (scale, theta): FlashInfer's defaults 1 and 1e4."""
    scale = 1.0 if rope_scale is None else _lib.check_float(rope_scale, "rope_scale",
                                                            above=0.0)
    theta = 1e4 if rope_theta is None else _lib.check_float(rope_theta, "rope_theta",
                                                            above=0.0)
    return scale, theta


def _rope_llama(x, pos, rope_scale, rope_theta, torch):
    """FlashInfer's ROPE_LLAMA of ``x`` [..., dim] at positions ``pos`` (an
    int or a tensor broadcast against x's dims but the last): dims i and
    i + dim/2 rotate by the angle pos * rope_theta^(-2i/dim) / rope_scale,
    in f32, the result in x's dtype (as FlashInfer rotates q and k in
    shared memory). An int ``pos`` is the first of x's rows (dim 0)."""
    d = x.shape[-1]
    if d % 2:
        raise ValueError("pos_encoding_mode='ROPE_LLAMA': head_dim %d is odd" % d)
    scale, theta = _rope_params(rope_scale, rope_theta)
    half = d // 2
    i = torch.arange(half, device=x.device, dtype=torch.float32)
    freq = torch.pow(torch.full_like(i, 1.0 / theta), 2.0 * i / d) / scale
    if isinstance(pos, int):
        pos = torch.arange(pos, pos + x.shape[0], device=x.device)
        pos = pos.reshape((-1,) + (1,) * (x.dim() - 2))
    angle = pos.to(device=x.device, dtype=torch.float32)[..., None] * freq
    cos, sin = torch.cos(angle), torch.sin(angle)
    lo, hi = x[..., :half].float(), x[..., half:].float()
    return torch.cat([lo * cos - hi * sin, hi * cos + lo * sin], dim=-1).to(x.dtype)


class _Rope:
    """FlashInfer's ROPE_LLAMA for the batch wrappers, applied before
    attention (FlashInfer fuses it; attn does not): each run() rotates a
    copy of q (row r at ``q_pos[r]``) and of the keys the plan reads, ragged
    rows at ``k_pos`` or cache pages ``pages`` whose first token sits at
    ``page_pos`` (in a copy of the whole cache). An FP8 paged cache
    (``fp8``) is copied in q's type, where each of its values is exact, and
    the kernel reads that copy as a 16-bit cache (cache_variant). Not under
    CUDA graphs (a replan would leave a captured run with the old
    positions) nor over FP8 ragged k/v."""

    def __init__(self, scale, theta, q_pos, k_pos=None, pages=None, page_pos=None, fp8=None,
                 graph=None):
        self.scale, self.theta = scale, theta
        self.q_pos, self.k_pos, self.pages, self.page_pos = q_pos, k_pos, pages, page_pos
        self.fp8, self.graph = fp8, graph

    @staticmethod
    def plan(pos_encoding_mode, rope_scale, rope_theta, wrapper):
        """(rope params or None, the mode the kernel's knobs take)."""
        if _pos_mode(pos_encoding_mode) != "ROPE_LLAMA":
            return None, pos_encoding_mode
        if wrapper._use_cuda_graph and not isinstance(wrapper, BatchDecodeWithPagedKVCacheWrapper):
            raise NotImplementedError("%s: pos_encoding_mode='ROPE_LLAMA' with use_cuda_graph: "
                                      "attn rotates q and k before attention, at positions a "
                                      "captured run keeps in the decode wrapper only"
                                      % wrapper._what)
        return _rope_params(rope_scale, rope_theta), "NONE"

    @staticmethod
    def check_kv(variant, wrapper):
        """Ragged k/v: 16-bit only (a paged FP8 cache is widened instead)."""
        kv = variant.kv_type or variant.q_type
        if kv in _t.FP8_DTYPES:
            raise NotImplementedError("%s: pos_encoding_mode='ROPE_LLAMA': attn rotates "
                                      "16-bit ragged keys only (kv_data_type %s)"
                                      % (wrapper._what, kv))

    @staticmethod
    def cache_variant(variant):
        """(the variant the kernel runs, the FP8 type run() widens or None):
        over an FP8 paged cache, the same variant over a cache of q's type
        (its k/v scales then fold in as FlashInfer's 16-bit scales do)."""
        kv = variant.kv_type or variant.q_type
        if kv not in _t.FP8_DTYPES:
            return variant, None
        return dataclasses.replace(variant, kv_type=variant.q_type), kv

    def run_inputs(self, q, keys, layout, stream, device, torch):
        """Rotated copies of q and of ``keys`` (ragged k, or a paged cache)
        on the run's stream."""
        with _runtime.torch_stream(stream, device):
            q = self.rotate_q(q, torch)
            if self.pages is None:
                return q, self.rotate_ragged(keys, torch)
            return q, self.rotate_cache(keys, layout, q.dtype, torch)

    @staticmethod
    def paged_positions(indptr, indices, block_tables, lens, page_size, device, torch):
        """(page ids, position of each page's first token) of the pages the
        requests read: FlashInfer's CSR table or block_tables [batch, n]
        with ``lens``. A page read at two positions is refused."""
        if block_tables is not None:
            bt = torch.as_tensor(block_tables, device=device)
            n_pages = [(n + page_size - 1) // page_size for n in lens]
            rows = torch.repeat_interleave(torch.arange(len(lens), device=device),
                                           torch.tensor(n_pages, device=device))
            cols = torch.cat([torch.arange(n, device=device) for n in n_pages]) \
                if n_pages else torch.zeros(0, dtype=torch.int64, device=device)
            pages = bt[rows, cols].long()
            pos = cols * page_size
        else:
            ip = torch.as_tensor(indptr, device=device).long()
            nnz = int(ip[-1].item()) - int(ip[0].item())
            entry = torch.arange(nnz, device=device) + ip[0]
            req = torch.searchsorted(ip, entry, right=True) - 1
            pages = torch.as_tensor(indices, device=device).long()[entry]
            pos = (entry - ip[req]) * page_size
        if pages.numel():
            pairs = torch.unique(torch.stack([pages, pos]), dim=1)
            if pairs.shape[1] != torch.unique(pages).numel():
                raise NotImplementedError(
                    "pos_encoding_mode='ROPE_LLAMA': a cache page is read at two positions "
                    "(shared by requests at different offsets); attn rotates each page's keys "
                    "once per run")
        return pages, pos

    def rotate_q(self, q, torch):
        pos = self.graph.q_pos if self.graph is not None else self.q_pos
        return _rope_llama(q, pos[:, None], self.scale, self.theta, torch)

    def rotate_ragged(self, k, torch):
        n = self.k_pos.numel()
        out = k.clone()
        out[:n] = _rope_llama(k[:n], self.k_pos[:, None], self.scale, self.theta, torch)
        return out

    def rotate_cache(self, cache, layout, dtype, torch):
        """A copy of ``cache`` (a [pages, 2, ...] tensor or a (k, v) pair)
        with the planned pages' keys rotated; an FP8 cache copied in
        ``dtype`` (q's), v included."""
        cache = _with_page_dim(cache, layout)

        def copy(t):
            if self.fp8 is None:
                return t.clone()
            if t.dtype != getattr(torch, self.fp8):
                raise TypeError("paged_kv_cache: expected dtype %s (the plan's kv_data_type), "
                                "got %s" % (self.fp8, t.dtype))
            return t.to(dtype)
        if isinstance(cache, (tuple, list)):
            out_k, v = copy(cache[0]), cache[1]
            out = (out_k, v if self.fp8 is None else copy(v))
        else:
            out = copy(cache)
            out_k = out[:, 0]
        page = out_k.shape[1] if layout == "NHD" else out_k.shape[2]
        if self.graph is not None:
            # Every page at its planned position (0 if not read): the same
            # ops whatever the plan, as a captured run replays them.
            first = self.graph.page_positions(out_k.shape[0], out_k.device, torch)
        else:
            first = self.page_pos
        pos = first[:, None] + torch.arange(page, device=out_k.device)
        # NHD pages are [page, heads, dim], HND [heads, page, dim].
        pos = pos[:, :, None] if layout == "NHD" else pos[:, None, :]
        if self.graph is not None:
            out_k.copy_(_rope_llama(out_k, pos, self.scale, self.theta, torch))
        else:
            out_k[self.pages] = _rope_llama(out_k[self.pages], pos, self.scale, self.theta,
                                            torch)
        return out


class _RopeGraph:
    """ROPE_LLAMA's positions in a decode wrapper with use_cuda_graph:
    tensors whose addresses a captured run() keeps, refilled in place by
    each plan(): q's rows, and per cache size met, the first position of
    every page (0 for pages the plan does not read: rotated too, never
    read). Tables are kept for the wrapper's life, so that no captured run
    reads a freed one."""

    def __init__(self):
        self.q_pos = self.pages = self.pos = None
        self.tables = {}  # number of pages of a cache -> its position table

    def set(self, q_pos, pages, pos, torch):
        if self.q_pos is None or self.q_pos.shape != q_pos.shape:
            self.q_pos = q_pos  # the fixed batch: one shape once planned
        else:
            self.q_pos.copy_(q_pos)
        self.pages, self.pos = pages, pos
        for table in self.tables.values():
            self._fill(table)

    def _fill(self, table):
        if self.pages.numel() and int(self.pages.max().item()) >= table.numel():
            table.zero_()  # this cache is not the one read: no position of it holds
            return
        table.zero_()
        table[self.pages] = self.pos

    def page_positions(self, num_pages, device, torch):
        """The position table for a cache of ``num_pages`` (made at the
        first run over such a cache, which must not be a capture)."""
        table = self.tables.get(num_pages)
        if table is None:
            if _runtime.capturing():
                raise RuntimeError("attn: pos_encoding_mode='ROPE_LLAMA' under CUDA graph "
                                   "capture needs one run() with this cache before capturing")
            table = torch.zeros(num_pages, dtype=torch.int64, device=device)
            self.tables[num_pages] = table
            self._fill(table)
        return table


def _single_prefill(q, k, v, what, causal, kv_layout, pos_encoding_mode, sm_scale,
                    window_left, logits_soft_cap, custom_mask, packed_custom_mask, k_scale,
                    v_scale, return_lse, rope_scale=None, rope_theta=None):
    """q [qo_len, num_qo_heads, head_dim_qk] over one request's k/v: a
    ragged prefill of one request (FlashInfer's single_* functions)."""
    torch = _runtime.require_torch(what)
    if getattr(q, "dim", None) is None or q.dim() != 3:
        raise ValueError("%s: q expected [qo_len, num_qo_heads, head_dim], got %r"
                         % (what, getattr(q, "shape", type(q).__name__)))
    k, v = _single_kv(k, v, kv_layout, what)
    qo_len, hq, dqk = q.shape
    kv_len, hkv = k.shape[0], k.shape[1]
    if k.shape[2] != dqk:
        raise ValueError("%s: k's head_dim %d differs from q's %d" % (what, k.shape[2], dqk))
    out_factor = None
    if _pos_mode(pos_encoding_mode) == "ROPE_LLAMA":
        # Rotated here, before attention (not fused): q at the positions
        # that end at the last key, k at 0..kv_len-1.
        if _t.dtype_name(k.dtype, "k") in _t.FP8_DTYPES:
            # Rotated in q's type, where every FP8 value is exact; the k/v
            # scales then fold in as FlashInfer's 16-bit scales do.
            if v.dtype != k.dtype:
                raise TypeError("%s: v's dtype %s differs from k's %s" % (what, v.dtype, k.dtype))
            factor, out_factor = _folded_scales(_t.dtype_name(q.dtype, "q"), None,
                                                k_scale, v_scale)
            if factor != 1.0:
                sm_scale = (dqk ** -0.5 if sm_scale is None else sm_scale) * factor
            k, v, k_scale, v_scale = k.to(q.dtype), v.to(q.dtype), None, None
        elif k.dtype not in (torch.float16, torch.bfloat16):
            raise NotImplementedError("%s: pos_encoding_mode='ROPE_LLAMA' with %s k/v: attn "
                                      "rotates 16-bit or FP8 keys only" % (what, k.dtype))
        q = _rope_llama(q, kv_len - qo_len, rope_scale, rope_theta, torch)
        k = _rope_llama(k, 0, rope_scale, rope_theta, torch)
        pos_encoding_mode = "NONE"
    if custom_mask is not None and packed_custom_mask is None:
        if tuple(getattr(custom_mask, "shape", ())) != (qo_len, kv_len):
            raise ValueError("%s: custom_mask expected [qo_len, kv_len] = [%d, %d], got %r"
                             % (what, qo_len, kv_len, getattr(custom_mask, "shape", None)))
        custom_mask = custom_mask.reshape(-1)  # the wrapper's flat form, one request
    w = BatchPrefillWithRaggedKVCacheWrapper(kv_layout="NHD")
    w.plan(torch.tensor([0, qo_len], dtype=torch.int32),
           torch.tensor([0, kv_len], dtype=torch.int32), hq, hkv, dqk,
           head_dim_vo=v.shape[2], custom_mask=custom_mask,
           packed_custom_mask=packed_custom_mask, causal=causal,
           pos_encoding_mode=pos_encoding_mode, window_left=window_left,
           logits_soft_cap=logits_soft_cap, sm_scale=sm_scale, q_data_type=q.dtype,
           kv_data_type=k.dtype)
    got = w.run(q, k, v, k_scale=k_scale, v_scale=v_scale, return_lse=return_lse)
    if out_factor is not None:
        (got[0] if return_lse else got).mul_(out_factor)
    return got


def single_prefill_with_kv_cache(q, k, v, scale_q=None, scale_k=None, scale_v=None,
                                 o_dtype=None, custom_mask=None, packed_custom_mask=None,
                                 causal=False, kv_layout="NHD", pos_encoding_mode="NONE",
                                 use_fp16_qk_reduction=False, sm_scale=None, window_left=-1,
                                 logits_soft_cap=None, rope_scale=None, rope_theta=None,
                                 backend="auto", return_lse=False, kv_cache_sf=None,
                                 k_scale=None, v_scale=None):
    """FlashInfer's single-request prefill: ``q`` [qo_len, num_qo_heads,
    head_dim_qk] over ``k`` [kv_len, num_kv_heads, head_dim_qk] and ``v``
    (``kv_layout`` 'HND': [num_kv_heads, kv_len, dim], copied to rows);
    ``causal`` (default False) aligned to the end of the keys,
    ``custom_mask`` [qo_len, kv_len] or ``packed_custom_mask``,
    ``window_left``, ``logits_soft_cap``, ``sm_scale``, ALiBi;
    ``k_scale``/``v_scale`` for FP8 k/v. ``return_lse``: ``(out, lse)``,
    lse [qo_len, num_qo_heads] in base 2. ``use_fp16_qk_reduction`` is
    accepted (attn reduces in f32). ``pos_encoding_mode='ROPE_LLAMA'``
    (``rope_scale``, ``rope_theta``) rotates copies of q and k first (not
    fused; FP8 k/v copied in q's type). Per-head FP8 scales (``scale_q``, ``scale_k``,
    ``scale_v``), another ``o_dtype`` and NVFP4 (``kv_cache_sf``) are
    refused."""
    what = "single_prefill_with_kv_cache"
    _check_backend(backend, what)
    for value, name in ((scale_q, "scale_q"), (scale_k, "scale_k"), (scale_v, "scale_v"),
                        (kv_cache_sf, "kv_cache_sf")):
        if value is not None:
            raise NotImplementedError("%s: %s (per-head FP8 or NVFP4 scales) is not supported "
                                      "by attn; pass k_scale/v_scale for FP8 k/v"
                                      % (what, name))
    if o_dtype is not None and o_dtype != getattr(q, "dtype", None):
        raise NotImplementedError("%s: o_dtype %s: attn writes the output in q's type (%s)"
                                  % (what, o_dtype, getattr(q, "dtype", None)))
    return _single_prefill(q, k, v, what, causal, kv_layout, pos_encoding_mode, sm_scale,
                           window_left, logits_soft_cap, custom_mask, packed_custom_mask,
                           k_scale, v_scale, return_lse, rope_scale, rope_theta)


def single_prefill_with_kv_cache_return_lse(*args, **kwargs):
    """single_prefill_with_kv_cache(..., return_lse=True)."""
    kwargs["return_lse"] = True
    return single_prefill_with_kv_cache(*args, **kwargs)


def single_decode_with_kv_cache(q, k, v, kv_layout="NHD", pos_encoding_mode="NONE",
                                use_tensor_cores=False, q_scale=None, k_scale=None,
                                v_scale=None, window_left=-1, logits_soft_cap=None,
                                sm_scale=None, rope_scale=None, rope_theta=None,
                                return_lse=False):
    """FlashInfer's single-request decode: ``q`` [num_qo_heads, head_dim]
    at the position after the last key attends to ``k``/``v``
    [kv_len, num_kv_heads, head_dim] (``kv_layout`` 'HND': [num_kv_heads,
    kv_len, head_dim], copied to rows), with ``window_left``,
    ``logits_soft_cap``, ``sm_scale``, ALiBi, ``k_scale``/``v_scale`` for
    FP8 k/v. ``return_lse``: ``(out, lse)``, lse [num_qo_heads] in base 2.
    ``use_tensor_cores`` is accepted (attn picks its kernel);
    ``pos_encoding_mode='ROPE_LLAMA'`` rotates copies of q (at position
    kv_len - 1) and k first, as single_prefill_with_kv_cache does; an FP8
    query scale other than 1 is refused."""
    what = "single_decode_with_kv_cache"
    if q_scale is not None and not _is_one(q_scale):
        raise NotImplementedError("%s: q_scale=%r: attn's single decode takes a 16-bit q"
                                  % (what, q_scale))
    if getattr(q, "dim", None) is None or q.dim() != 2:
        raise ValueError("%s: q expected [num_qo_heads, head_dim], got %r"
                         % (what, getattr(q, "shape", type(q).__name__)))
    # One query row after the keys: causal (aligned to the end of the
    # keys) sees them all, and a window counts back from it.
    got = _single_prefill(q.unsqueeze(0), k, v, what, True, kv_layout, pos_encoding_mode,
                          sm_scale, window_left, logits_soft_cap, None, None, k_scale,
                          v_scale, return_lse, rope_scale, rope_theta)
    if return_lse:
        return got[0][0], got[1][0]
    return got[0]


# --- FlashInfer's shared-prefix wrappers (deprecated there) --------------------
# Both compose what FlashInfer composes: the prefix in contiguous k/v through
# a non-causal single prefill, the unique pages through a batch wrapper,
# merged by LSE. MultiLevelCascadeAttentionWrapper is the form to use.

class _SharedPrefix:
    """The prefix part of a shared-prefix call, then the merge."""

    def __init__(self, inner, kv_layout):
        self._inner, self._kv_layout = inner, kv_layout

    def reset_workspace_buffer(self, float_workspace_buffer, int_workspace_buffer=None):
        """Accepted for compatibility: attn owns its workspaces."""
        self._inner.reset_workspace_buffer(float_workspace_buffer, int_workspace_buffer)

    def end_forward(self):
        """Accepted for compatibility (nothing to release)."""

    def _merged(self, q, k_shared, v_shared, unique, sm_scale, rope_scale, rope_theta):
        out, lse = single_prefill_with_kv_cache(
            q, k_shared, v_shared, causal=False, kv_layout=self._kv_layout, sm_scale=sm_scale,
            rope_scale=rope_scale, rope_theta=rope_theta, return_lse=True)
        merge_state_in_place(out, lse, *unique)
        return out


class BatchDecodeWithSharedPrefixPagedKVCacheWrapper(_SharedPrefix):
    """FlashInfer's two-level decode: every request's query attends to one
    shared prefix (``k_shared``/``v_shared`` [prefix_len, num_kv_heads,
    head_dim]) and to its own pages; as FlashInfer computes it, the prefix
    through a non-causal single prefill, the pages through the decode
    wrapper, merged by LSE."""

    def __init__(self, float_workspace_buffer, kv_layout="NHD"):
        super().__init__(BatchDecodeWithPagedKVCacheWrapper(float_workspace_buffer, kv_layout),
                         kv_layout)

    def begin_forward(self, unique_kv_indptr, unique_kv_indices, unique_kv_last_page_len,
                      num_qo_heads, num_kv_heads, head_dim, page_size, data_type="float16"):
        """Plans the unique pages (FlashInfer's CSR table) for decode."""
        self._inner.plan(unique_kv_indptr, unique_kv_indices, unique_kv_last_page_len,
                         num_qo_heads, num_kv_heads, head_dim, page_size,
                         pos_encoding_mode="NONE", data_type=data_type)

    def forward(self, q, k_shared, v_shared, unique_kv_cache):
        """``q`` [batch, num_qo_heads, head_dim] over the prefix, then its
        request's pages."""
        return self._merged(q, k_shared, v_shared,
                            self._inner.forward_return_lse(q, unique_kv_cache),
                            None, None, None)


class BatchPrefillWithSharedPrefixPagedKVCacheWrapper(_SharedPrefix):
    """FlashInfer's two-level prefill/append: rows of ``qo_indptr`` attend
    to one shared prefix (non-causal) and to their request's pages
    (``causal`` as asked), merged by LSE."""

    def __init__(self, float_workspace_buffer, kv_layout="NHD"):
        super().__init__(BatchPrefillWithPagedKVCacheWrapper(float_workspace_buffer, kv_layout),
                         kv_layout)

    def begin_forward(self, qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len,
                      num_qo_heads, num_kv_heads, head_dim, page_size):
        """Plans the unique pages (FlashInfer's CSR table) for the rows of
        ``qo_indptr``."""
        self._inner.plan(qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len,
                         num_qo_heads, num_kv_heads, head_dim, page_size)

    def forward(self, q, k_shared, v_shared, unique_kv_cache, causal=False,
                use_fp16_qk_reduction=False, sm_scale=None, rope_scale=None, rope_theta=None):
        """``q`` [qo_indptr[-1], num_qo_heads, head_dim] over the prefix,
        then its request's pages."""
        unique = self._inner.forward_return_lse(q, unique_kv_cache, causal=causal,
                                                sm_scale=sm_scale, rope_scale=rope_scale,
                                                rope_theta=rope_theta)
        return self._merged(q, k_shared, v_shared, unique, sm_scale, rope_scale, rope_theta)


# --- FlashInfer's submodule paths -------------------------------------------------
# flashinfer.decode.X, flashinfer.prefill.X, ... (FlashInfer's tests and
# engines reach names there): small modules holding this module's objects,
# registered so that ``import attn.flashinfer.decode`` works too.

def _submodules():
    import sys
    import types
    names = {
        "decode": ("BatchDecodeWithPagedKVCacheWrapper",
                   "CUDAGraphBatchDecodeWithPagedKVCacheWrapper", "fast_decode_plan",
                   "single_decode_with_kv_cache"),
        "prefill": ("BatchPrefillWithRaggedKVCacheWrapper",
                    "BatchPrefillWithPagedKVCacheWrapper", "single_prefill_with_kv_cache",
                    "single_prefill_with_kv_cache_return_lse"),
        "cascade": ("MultiLevelCascadeAttentionWrapper", "merge_state", "merge_state_in_place",
                    "merge_states", "BatchDecodeWithSharedPrefixPagedKVCacheWrapper",
                    "BatchPrefillWithSharedPrefixPagedKVCacheWrapper"),
        "page": ("append_paged_kv_cache", "get_seq_lens", "get_batch_indices_positions"),
        "mla": ("BatchMLAPagedAttentionWrapper",),
        "attention": ("BatchAttentionWithAttentionSinkWrapper",),
        "sparse": ("BlockSparseAttentionWrapper", "VariableBlockSparseAttentionWrapper"),
        "quantization": ("packbits", "segment_packbits"),
        "utils": ("get_alibi_slopes",),
    }
    this = sys.modules[__name__]
    for sub, members in names.items():
        full = __name__ + "." + sub
        m = types.ModuleType(full, "FlashInfer's flashinfer.%s names, as %s has them."
                             % (sub, __name__))
        for n in members:
            setattr(m, n, getattr(this, n))
        m.__all__ = list(members)
        sys.modules[full] = m
        setattr(this, sub, m)


_submodules()
del _submodules
