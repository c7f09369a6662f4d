"""vLLM's attention-backend interface over attn, without importing vLLM.

An engine registers ``attn.vllm_backend.AttnBackend`` as a custom attention
backend (in vLLM: ``register_backend(AttentionBackendEnum.CUSTOM,
"attn.vllm_backend.AttnBackend")`` from
``vllm.v1.attention.backends.registry``, or a platform plugin returning
that class path). The names follow vLLM's v1 interface
(``vllm/v1/attention/backend.py``) as documented:

- ``AttnBackend``: ``get_name()`` ("ATTN"), ``get_impl_cls()``,
  ``get_metadata_cls()``, ``get_builder_cls()``,
  ``get_kv_cache_shape(num_blocks, block_size, num_kv_heads, head_size,
  cache_dtype_str="auto")`` -> ``(2, num_blocks, block_size, num_kv_heads,
  head_size)``, ``get_kv_cache_stride_order()``,
  ``get_supported_head_sizes()``, ``supported_dtypes``,
  ``supported_kv_cache_dtypes`` ("auto", "float16", "bfloat16", "fp8",
  "fp8_e4m3", "fp8_e5m2"), ``validate_configuration(...)`` and the
  ``supports_*`` queries, and the cache ops ``swap_blocks(src_kv_cache,
  dst_kv_cache, src_to_dst)`` and ``copy_blocks(kv_caches, src_to_dists)``.
- ``AttnMetadataBuilder``: ``__init__(kv_cache_spec, layer_names,
  vllm_config, device)``, ``build(common_prefix_len,
  common_attn_metadata, fast_build=False)``,
  ``build_for_cudagraph_capture(common_attn_metadata)``,
  ``get_cudagraph_support(vllm_config, kv_cache_spec)`` ->
  ``UNIFORM_SINGLE_TOKEN_DECODE``; and, for engines that are not vLLM,
  ``build_step(query_lens, context_lens, block_tables)`` through attn's C
  metadata builder.
- ``AttnMetadata``: the step (vLLM's names: ``num_actual_tokens``,
  ``num_prefills``, ``num_decodes``, ``query_start_loc``, ``seq_lens``,
  ``block_table``, ``slot_mapping``, ...).
- ``AttnImpl(num_heads, head_size, scale, num_kv_heads, alibi_slopes,
  sliding_window, kv_cache_dtype, logits_soft_cap, attn_type,
  kv_sharing_target_layer_name, sinks)`` with ``forward(layer, query, key,
  value, kv_cache, attn_metadata, output=None)``: appends the step's keys
  and values to the layer's cache (``slot_mapping``; FP8 caches quantize by
  ``layer._k_scale``/``layer._v_scale``), then runs the step as one mixed
  prefill + decode batch.

Differences from vLLM's own backends (and why):

- Order of a step: attn's mixed batch runs prefills first, then one-token
  decodes (vLLM v0's order). The builder does not ask vLLM to reorder
  (``reorder_batch_threshold = None``): a step's trailing run of one-token
  requests runs as decodes, every request before it through the prefill
  kernel (correct in any order; fastest when decodes come last).
- Host lengths: planning needs the step's sequence lengths on the host
  (``seq_lens_cpu``; read back from the device when vLLM has no host copy).
- CUDA graphs: ``UNIFORM_SINGLE_TOKEN_DECODE`` (full graphs of decode-only
  steps; steps with prefills run eagerly or piecewise). A decode-only
  step is planned for graph replay when full graphs are on.
- The support level and ``AttentionType`` are vLLM's own objects when
  vLLM is already imported (looked up in ``sys.modules``), else this
  module's equivalents (same names and values).
- Not supported (``NotImplementedError`` naming it): cascade attention
  through vLLM's ``common_prefix_len`` (``use_cascade_attention`` returns
  False), encoder-decoder cross attention (``attn_type="encoder_decoder"``),
  a sliding window on encoder-only layers, fused output quantization
  (``output_scale``), MLA.
- The classes are duck-typed (no vLLM base classes): an engine that checks
  ``issubclass`` can derive ``class B(AttnBackend, AttentionBackend)``.
"""

import dataclasses
import enum
import itertools
import sys
import threading
import weakref
from typing import Any, List

from . import _lib
from . import _runtime
from . import _tensors as _t
from ._kernels import (AppendKVVariant, CacheOps, Knobs, MetadataBuilder, MixedBatch, Prefill,
                       PrefillVariant, shared)
from .flashinfer import append_rows

try:  # vLLM always has torch; the CPU tests may not.
    import torch as _torch
    _SUPPORTED_DTYPES = [_torch.float16, _torch.bfloat16]
except ImportError:  # pragma: no cover - depends on the host
    _torch = None
    _SUPPORTED_DTYPES = ["float16", "bfloat16"]

__all__ = ["AttnBackend", "AttnImpl", "AttnMetadata", "AttnMetadataBuilder",
           "AttentionCGSupport", "AttentionType"]

KV_CACHE_DTYPES = {"auto": None, "float16": "float16", "bfloat16": "bfloat16",
                   "fp8": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn",
                   "fp8_e5m2": "float8_e5m2"}
MAX_BLOCK_SIZE = 256


class AttentionType:
    """vLLM's attention types (it compares them as strings)."""
    DECODER = "decoder"
    ENCODER = "encoder"
    ENCODER_ONLY = "encoder_only"
    ENCODER_DECODER = "encoder_decoder"


class AttentionCGSupport(enum.Enum):
    """vLLM's CUDA-graph support levels (same names and values)."""
    ALWAYS = 3
    UNIFORM_BATCH = 2
    UNIFORM_SINGLE_TOKEN_DECODE = 1
    NEVER = 0


def _vllm_cg_support(name):
    """vLLM's own AttentionCGSupport member when vLLM is loaded, else
    ours."""
    for mod in ("vllm.v1.attention.backend", "vllm.v1.attention.backends.utils"):
        m = sys.modules.get(mod)
        enum_cls = getattr(m, "AttentionCGSupport", None) if m is not None else None
        if enum_cls is not None:
            try:
                return enum_cls[name]
            except KeyError:
                pass
    return AttentionCGSupport[name]


def _kv_type(cache_dtype_str, q_type):
    s = str(cache_dtype_str or "auto")
    if s.startswith("torch."):
        s = s[len("torch."):]
    if s == "float8_e4m3fn":
        s = "fp8_e4m3"
    if s == "float8_e5m2":
        s = "fp8_e5m2"
    if s not in KV_CACHE_DTYPES:
        raise NotImplementedError("kv_cache_dtype %r: attn takes %s"
                                  % (cache_dtype_str, ", ".join(KV_CACHE_DTYPES)))
    return KV_CACHE_DTYPES[s] or q_type


def _dense(shape):
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return tuple(reversed(out))


def _layer_cache(kv_cache, num_kv_heads, head_size, kv_type, name="kv_cache"):
    """attn_paged_kv (no scales) of a vLLM layer cache ``[2, num_blocks,
    block_size, num_kv_heads, head_size]`` whose pages are NHD or, by its
    strides, HND (vLLM's HND stride order); and its layout and page size."""
    t = _t.tensor(kv_cache, name, dtype=kv_type, dense=False)
    _t.check_shape(t, (2, None, None, num_kv_heads, head_size),
                   "2, num_blocks, block_size, num_kv_heads, head_size")
    _, nb, bs, h, d = t.shape
    st = t.strides
    if st[2:] == _dense((bs, h, d)) or bs * h == 1:
        layout = "NHD"
    elif st[4] == 1 and st[2] == d and st[3] == bs * d:
        layout = "HND"
    else:
        raise ValueError("%s: each page must be dense NHD [block_size, num_kv_heads, head_size] or "
                         "HND [num_kv_heads, block_size, head_size]; got strides %s for shape %s"
                         % (name, st, t.shape))
    c = _lib.attn_paged_kv()
    c.k = t.ptr
    c.v = t.offset(st[0])
    c.dtype = _lib.DTYPE_CODES[kv_type]
    c.num_kv_heads, c.head_dim, c.page_size = h, d, bs
    c.layout = _lib.LAYOUT_NHD if layout == "NHD" else _lib.LAYOUT_HND
    c.num_pages = nb
    c.page_stride = st[1] if nb > 1 else bs * h * d
    return c, layout, bs, t


# --- the registry: mixed-batch handles shared by layers of one variant ------


class _Entry:
    __slots__ = ("handle", "planned_step")

    def __init__(self, handle):
        self.handle = handle
        self.planned_step = -1


class _Registry:
    """Per process: the AttnImpl instances (weakly), each device's limits
    (from its builder) and one planned kernel handle per (device, variant)
    that every layer of that variant runs."""

    def __init__(self):
        self.lock = threading.Lock()
        self.impls = weakref.WeakSet()
        self.limits = {}  # device -> (max_batch, max_tokens)
        self.entries = {}  # (device, variant) -> _Entry
        self.steps = itertools.count(1)

    def limits_for(self, device):
        return self.limits.get(device, (256, 8192))

    def entry(self, device, variant, batch, tokens, make):
        key = (device, variant)
        e = self.entries.get(key)
        if e is not None and (batch > e.handle.max_batch or tokens > e.handle.max_q_tokens):
            e = None
        if e is None:
            if _runtime.capturing():
                raise RuntimeError("attn: a new attention kernel (%s) was needed during CUDA "
                                   "graph capture; warm up before capturing"
                                   % variant.describe())
            max_batch, max_tokens = self.limits_for(device)
            e = _Entry(make(device, variant, max(batch, max_batch), max(tokens, max_tokens)))
            self.entries[key] = e
        return e


_REGISTRY = _Registry()


def _plan_entry(entry, md, stream):
    if entry.planned_step == md.step:
        return
    if _runtime.capturing():
        raise RuntimeError("attn: planning during CUDA graph capture (a layer's kernel was not "
                           "planned when the step's metadata was built); warm up first")
    h = entry.handle
    if isinstance(h, MixedBatch):
        h.plan(md.query_start_loc_cpu, md.seq_lens_cpu, md.num_prefills, md.for_graph, stream)
    else:  # encoder-only: ragged prefill over the step's own rows
        h.plan(md.query_start_loc_cpu, md.query_start_loc_cpu, md.for_graph, stream)
    entry.planned_step = md.step


# --- metadata ------------------------------------------------------------------


@dataclasses.dataclass
class AttnMetadata:
    """One step's attention metadata (vLLM's field names).

    Host: ``query_start_loc_cpu`` [num_reqs + 1] and ``seq_lens_cpu``
    [num_reqs] (tokens cached per request, new ones included). Device:
    ``query_start_loc``, ``seq_lens`` (int32), ``block_table`` (int32
    [num_reqs, max_blocks]) and ``slot_mapping`` (int64 [num_tokens], -1
    skips a row): torch tensors from vLLM, or ``attn`` Tensors over the C
    metadata builder's buffers (``build_step``)."""

    num_actual_tokens: int
    num_reqs: int
    num_prefills: int
    num_decodes: int
    num_prefill_tokens: int
    num_decode_tokens: int
    max_query_len: int
    max_seq_len: int
    query_start_loc_cpu: List[int]
    seq_lens_cpu: List[int]
    query_start_loc: Any = None
    seq_lens: Any = None
    block_table: Any = None
    slot_mapping: Any = None
    for_graph: bool = False
    causal: bool = True
    step: int = 0
    device: int = -1
    use_cascade: bool = False
    common_prefix_len: int = 0
    # The largest page id of block_table when the step's tables passed
    # through the host (build_step), and where: forward() checks it against
    # the layer's cache. -1: not known (vLLM's device tables).
    max_page: int = -1
    max_page_at: Any = None


def _split(query_lens, context_lens=None):
    """num_prefills by attn's rule: the trailing run of one-token requests
    (with a cached context, when given) are decodes."""
    n = len(query_lens)
    i = n
    while i > 0 and query_lens[i - 1] == 1 and (context_lens is None or context_lens[i - 1] > 0):
        i -= 1
    return i


class AttnMetadataBuilder:
    """Builds ``AttnMetadata`` for a step and plans every registered
    layer variant once (layers of one variant share the plan).

    vLLM calls ``__init__(kv_cache_spec, layer_names, vllm_config, device)``
    and ``build(common_prefix_len, common_attn_metadata)``; other engines
    construct it with keywords (``block_size``, ``max_num_seqs``,
    ``max_num_batched_tokens``, ``max_model_len``, ``dtype``, ``device``)
    and call ``build_step``.
    """

    _cudagraph_support = AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE
    cudagraph_support = _cudagraph_support
    reorder_batch_threshold = None
    supports_update_block_table = False

    def __init__(self, kv_cache_spec=None, layer_names=None, vllm_config=None, device=None, *,
                 block_size=None, max_num_seqs=None, max_num_batched_tokens=None,
                 max_model_len=None, dtype=None, full_cuda_graphs=None):
        self.kv_cache_spec = kv_cache_spec
        self.layer_names = layer_names
        self.vllm_config = vllm_config
        sched = getattr(vllm_config, "scheduler_config", None)
        model = getattr(vllm_config, "model_config", None)

        def size(value, name, config, default, maximum=_lib.INT32_MAX):
            if value is None:
                value = getattr(config, name, None) or default
            return _lib.check_int(value, name, 1, maximum)

        self.block_size = size(block_size, "block_size", kv_cache_spec, 16, MAX_BLOCK_SIZE)
        self.max_num_seqs = size(max_num_seqs, "max_num_seqs", sched, 256)
        # Tokens (a step's and a request's) are int32 in the kernels.
        self.max_num_batched_tokens = size(max_num_batched_tokens, "max_num_batched_tokens",
                                           sched, 8192)
        self.max_model_len = size(max_model_len, "max_model_len", model, 32768)
        self.dtype = _t.dtype_name(dtype or getattr(model, "dtype", None) or "bfloat16", "dtype")
        self.device = self._device_index(device)
        if full_cuda_graphs is None:
            full_cuda_graphs = False
            mode = getattr(getattr(vllm_config, "compilation_config", None), "cudagraph_mode",
                           None)
            fn = getattr(mode, "has_full_cudagraphs", None)
            if callable(fn):
                try:
                    full_cuda_graphs = bool(fn())
                except Exception:
                    full_cuda_graphs = False
        self.full_cuda_graphs = full_cuda_graphs
        _REGISTRY.limits[self.device] = (self.max_num_seqs, self.max_num_batched_tokens)
        self._c_builder = None

    @staticmethod
    def _device_index(device):
        if device is None:
            return max(0, _runtime.current_device())
        if isinstance(device, int):
            return _lib.check_int(device, "device", 0, _lib.INT32_MAX)
        index = getattr(device, "index", None)
        if index is not None:
            return index
        s = str(device)
        return int(s.split(":")[1]) if ":" in s else max(0, _runtime.current_device())

    @classmethod
    def get_cudagraph_support(cls, vllm_config=None, kv_cache_spec=None):
        """UNIFORM_SINGLE_TOKEN_DECODE: full CUDA graphs of decode-only
        steps (vLLM's enum member when vLLM is loaded)."""
        return _vllm_cg_support(cls._cudagraph_support.name)

    def use_cascade_attention(self, *args, **kwargs):
        """False: vLLM's common-prefix cascade is not wired to attn's
        cascade kernels in this backend."""
        return False

    def build_for_cudagraph_capture(self, common_attn_metadata):
        """``build`` for a captured (decode-only) step, planned for
        replay."""
        return self.build(0, common_attn_metadata, for_graph=True)

    def build_for_drafting(self, common_attn_metadata, draft_index=0):
        """``build`` for a draft model's step."""
        return self.build(0, common_attn_metadata, fast_build=True)

    def build(self, common_prefix_len, common_attn_metadata, fast_build=False, *,
              for_graph=None, stream=None):
        """Metadata of a vLLM step (``CommonAttentionMetadata``: its
        ``query_start_loc_cpu``, ``seq_lens`` (+ host copy),
        ``block_table_tensor``, ``slot_mapping``, ``num_reqs``,
        ``num_actual_tokens``), and the plans of every registered layer
        variant."""
        cm = common_attn_metadata
        num_reqs = _lib.check_int(cm.num_reqs, "num_reqs", 0, _lib.INT32_MAX)
        qsl = _runtime.host_ints(cm.query_start_loc_cpu[:num_reqs + 1], "query_start_loc_cpu")
        seq_cpu = getattr(cm, "_seq_lens_cpu", None)
        if seq_cpu is None:
            seq_cpu = cm.seq_lens[:num_reqs]
        seq_lens = _runtime.host_ints(seq_cpu[:num_reqs], "seq_lens")
        query_lens = [qsl[i + 1] - qsl[i] for i in range(num_reqs)]
        context = [s - q for s, q in zip(seq_lens, query_lens)]
        num_prefills = _split(query_lens, context)
        if for_graph is None:
            for_graph = self.full_cuda_graphs and num_prefills == 0
        md = AttnMetadata(
            num_actual_tokens=_lib.check_int(cm.num_actual_tokens, "num_actual_tokens", 0,
                                             _lib.INT32_MAX), num_reqs=num_reqs,
            num_prefills=num_prefills, num_decodes=num_reqs - num_prefills,
            num_prefill_tokens=qsl[num_prefills] if num_reqs else 0,
            num_decode_tokens=(qsl[-1] - qsl[num_prefills]) if num_reqs else 0,
            max_query_len=max(query_lens, default=0), max_seq_len=max(seq_lens, default=0),
            query_start_loc_cpu=qsl, seq_lens_cpu=seq_lens,
            query_start_loc=cm.query_start_loc, seq_lens=cm.seq_lens,
            block_table=cm.block_table_tensor, slot_mapping=cm.slot_mapping,
            for_graph=_lib.check_flag(for_graph, "for_graph") == 1,
            causal=_lib.check_flag(getattr(cm, "causal", True), "causal") == 1,
            step=next(_REGISTRY.steps), device=self.device,
            common_prefix_len=_lib.check_int(common_prefix_len or 0, "common_prefix_len", 0))
        self._plan_registered(md, stream)
        return md

    def build_step(self, query_lens, context_lens, block_tables, *, stream=None,
                   for_graph=False, num_pages=0):
        """Metadata of a step from per-request ``query_lens`` (new tokens),
        ``context_lens`` (tokens cached before the step) and
        ``block_tables`` (each request's page ids, host lists), through
        attn's C metadata builder (prefills first, then decodes of one
        query length: errors name the request and rule). Device arrays live
        in the builder at fixed addresses (graph-friendly)."""
        ql = _runtime.host_ints(query_lens, "query_lens", 0)
        cl = _runtime.host_ints(context_lens, "context_lens", 0)
        n = len(ql)
        if not isinstance(block_tables, (list, tuple)):
            raise TypeError("block_tables: expected a list of page-id lists, got %s"
                            % type(block_tables).__name__)
        if len(cl) != n or len(block_tables) != n:
            raise ValueError("query_lens, context_lens, block_tables: expected one entry per "
                             "request each, got %d, %d and %d" % (n, len(cl), len(block_tables)))
        num_pages = _lib.check_int(num_pages, "num_pages", 0, _lib.INT32_MAX)
        tables = [_runtime.host_ints(block_tables[i], "block_tables[%d]" % i, 0)
                  for i in range(n)]
        max_page, max_page_at = -1, None
        for i, row in enumerate(tables):
            if row and max(row) > max_page:
                max_page = max(row)
                max_page_at = "block_tables[%d][%d]" % (i, row.index(max_page))
        if num_pages and max_page >= num_pages:
            raise ValueError("%s = %d: past the end of the cache's %d pages (num_pages)"
                             % (max_page_at, max_page, num_pages))
        if self._c_builder is None:
            # The C builder holds its host and device arrays for these limits.
            max_pages = -(-self.max_model_len // self.block_size)
            _lib.check_preallocation(
                self.max_num_seqs * (4 * max_pages + 64) + 8 * self.max_num_batched_tokens,
                "max_num_seqs (%d) x max_model_len (%d) / block_size (%d) page table and "
                "max_num_batched_tokens (%d) slots"
                % (self.max_num_seqs, self.max_model_len, self.block_size,
                   self.max_num_batched_tokens))
            self._c_builder = MetadataBuilder(self.device, self.block_size, self.max_num_seqs,
                                              self.max_num_batched_tokens, max_pages, num_pages)
        num_prefills = _split(ql, cl)
        reqs = [(i < num_prefills, ql[i], cl[i], tables[i]) for i in range(n)]
        s = _runtime.stream_handle(stream, self.device)
        c = self._c_builder.build(reqs, s)
        batch = c.batch
        qsl = [c.query_start_loc[i] for i in range(batch + 1)]
        seq_lens = [c.seq_lens[i] for i in range(batch)]
        tokens = qsl[-1] if batch else 0
        dev = self.device

        def dev_tensor(name, ptr, dtype, shape):
            return _t.Tensor(name, ptr, dtype, shape, _dense(shape), dev, None)

        md = AttnMetadata(
            num_actual_tokens=tokens, num_reqs=batch, num_prefills=c.num_prefills,
            num_decodes=c.num_decodes, num_prefill_tokens=int(c.num_prefill_tokens),
            num_decode_tokens=int(c.num_decode_tokens), max_query_len=int(c.max_query_len),
            max_seq_len=max(seq_lens, default=0), query_start_loc_cpu=qsl,
            seq_lens_cpu=seq_lens,
            query_start_loc=dev_tensor("query_start_loc", c.device_query_start_loc, "int32",
                                       (batch + 1,)),
            seq_lens=dev_tensor("seq_lens", c.device_seq_lens, "int32", (batch,)),
            block_table=dev_tensor("block_table", c.device_page_tables, "int32",
                                   (batch, max(1, c.page_table_stride))),
            slot_mapping=dev_tensor("slot_mapping", c.device_slot_mapping, "int64", (tokens,)),
            for_graph=_lib.check_flag(for_graph, "for_graph") == 1,
            step=next(_REGISTRY.steps), device=dev, max_page=max_page, max_page_at=max_page_at)
        self._plan_registered(md, stream)
        return md

    def _plan_registered(self, md, stream):
        """Plans the handle of every live AttnImpl's variant on this
        device (once per variant) so that layers run without planning."""
        s = _runtime.stream_handle(stream, md.device)
        seen = set()
        for impl in list(_REGISTRY.impls):
            try:
                key = impl._key(md.device, self)
            except Exception:
                continue
            if key is None or key in seen:
                continue
            seen.add(key)
            entry = impl._entry(md, key)
            _plan_entry(entry, md, s)


# --- the implementation ------------------------------------------------------------


class AttnImpl:
    """One attention layer's implementation (vLLM's ``AttentionImpl``).

    ``sliding_window`` is vLLM's (keys counted with the query's own:
    attn's ``window_left = sliding_window - 1``), ``alibi_slopes`` a list
    of per-head floats, ``logits_soft_cap`` a float, ``sinks`` a
    ``[num_heads]`` tensor (gpt-oss). ``attn_type``: "decoder" (paged
    cache), "encoder_only"/"encoder" (bidirectional over the step's own
    rows, no cache)."""

    can_return_lse_for_decode = False
    need_to_return_lse_for_decode = False
    supports_quant_query_input = False
    supports_pcp = False
    dcp_world_size = 1
    dcp_rank = 0
    pcp_world_size = 1
    pcp_rank = 0
    total_cp_world_size = 1
    total_cp_rank = 0

    def __init__(self, num_heads, head_size, scale, num_kv_heads=None, alibi_slopes=None,
                 sliding_window=None, kv_cache_dtype="auto", logits_soft_cap=None,
                 attn_type=AttentionType.DECODER, kv_sharing_target_layer_name=None,
                 sinks=None, **kwargs):
        self.num_heads = _lib.check_int(num_heads, "num_heads", 1, _lib.INT32_MAX)
        self.head_size = _lib.check_int(head_size, "head_size", 1, _lib.INT32_MAX)
        self.scale = _lib.check_float(scale, "scale", above=0.0)
        self.num_kv_heads = self.num_heads if num_kv_heads is None else \
            _lib.check_int(num_kv_heads, "num_kv_heads", 1, _lib.INT32_MAX)
        if self.num_heads % self.num_kv_heads:
            raise ValueError("num_heads (%d) must be a multiple of num_kv_heads (%d)"
                             % (self.num_heads, self.num_kv_heads))
        if self.head_size % 8 or not 32 <= self.head_size <= 256:
            raise ValueError("head_size %d: attn runs head sizes %s"
                             % (self.head_size, "the multiples of 8 from 32 to 256"))
        self.alibi_slopes = None if alibi_slopes is None else [
            _lib.check_float(x, "alibi_slopes[%d]" % i) for i, x in enumerate(alibi_slopes)]
        if self.alibi_slopes is not None and len(self.alibi_slopes) != self.num_heads:
            raise ValueError("alibi_slopes: expected %d slopes (num_heads), got %d"
                             % (self.num_heads, len(self.alibi_slopes)))
        attn_type = str(getattr(attn_type, "value", attn_type))
        if attn_type == AttentionType.ENCODER_DECODER:
            raise NotImplementedError("attn_type='encoder_decoder': cross attention is not wired "
                                      "into attn's vLLM backend")
        if attn_type not in (AttentionType.DECODER, AttentionType.ENCODER,
                             AttentionType.ENCODER_ONLY):
            raise ValueError("attn_type: expected 'decoder', 'encoder' or 'encoder_only', got %r"
                             % attn_type)
        self.attn_type = attn_type
        self.sliding_window = sliding_window
        if sliding_window is not None:
            if attn_type != AttentionType.DECODER:
                raise NotImplementedError("sliding_window on %s attention: attn's windows are "
                                          "causal (decoder) only" % attn_type)
            # window_left = sliding_window - 1 is a C int.
            sliding_window = _lib.check_int(sliding_window, "sliding_window", 1,
                                            _lib.INT32_MAX + 1)
        self.window_left = -1 if sliding_window is None else sliding_window - 1
        self.kv_cache_dtype = str(kv_cache_dtype or "auto")
        _kv_type(self.kv_cache_dtype, "bfloat16")  # validates
        self.logits_soft_cap = 0.0 if logits_soft_cap is None else \
            _lib.check_float(logits_soft_cap, "logits_soft_cap", minimum=0.0)
        self.kv_sharing_target_layer_name = kv_sharing_target_layer_name
        self.sinks = sinks
        if sinks is not None:
            shape = tuple(getattr(sinks, "shape", (len(sinks),)))
            if shape != (self.num_heads,):
                raise ValueError("sinks: expected shape (%d,) (num_heads), got %s"
                                 % (self.num_heads, shape))
        self.num_queries_per_kv = self.num_heads // self.num_kv_heads
        self._sinks_f32 = None
        self._alibi_dev = {}
        self._ones = {}
        self._q_type = None
        self._layout = "NHD"
        self._page_size = None
        _REGISTRY.impls.add(self)

    # -- vLLM's optional hooks --

    def process_weights_after_loading(self, act_dtype=None):
        """Refreshes the float32 copy of ``sinks`` (loaded after
        construction)."""
        self._sinks_f32 = None

    def fused_output_quant_supported(self, quant_key=None):
        """False: attn writes unquantized outputs."""
        return False

    def fused_rope_kvcache_supported(self):
        """False."""
        return False

    def fused_qk_norm_rope_kvcache_supported(self):
        """False."""
        return False

    # -- variants --

    def _variant(self, q_type, page_size, layout):
        kv = _kv_type(self.kv_cache_dtype, q_type)
        if self.attn_type == AttentionType.DECODER:
            knobs = Knobs(kind="decoder", causal=True, window_left=self.window_left,
                          softcap=self.logits_soft_cap, scale=self.scale,
                          alibi=self.alibi_slopes is not None, sinks=self.sinks is not None)
            return PrefillVariant(knobs=knobs, q_type=q_type, num_q_heads=self.num_heads,
                                  num_kv_heads=self.num_kv_heads, head_dim=self.head_size,
                                  paged=True, kv_type=kv, page_size=page_size, layout=layout)
        knobs = Knobs(kind="encoder", causal=False, softcap=self.logits_soft_cap,
                      scale=self.scale, alibi=self.alibi_slopes is not None,
                      sinks=self.sinks is not None)
        return PrefillVariant(knobs=knobs, q_type=q_type, num_q_heads=self.num_heads,
                              num_kv_heads=self.num_kv_heads, head_dim=self.head_size)

    def _key(self, device, builder):
        q_type = self._q_type or builder.dtype
        page = self._page_size or builder.block_size
        if self.kv_sharing_target_layer_name is not None and self._q_type is None:
            return None
        return self._variant(q_type, page, self._layout)

    def _entry(self, md, variant):
        tokens = md.query_start_loc_cpu[-1] if md.query_start_loc_cpu else 0
        if variant.paged:
            make = MixedBatch
        else:
            make = Prefill
        return _REGISTRY.entry(md.device, variant, md.num_reqs, tokens, make)

    # -- tables --

    def _sinks_ptr(self, device, stream):
        if self.sinks is None:
            return None
        torch = _runtime.require_torch("sinks")
        s = self.sinks
        if isinstance(s, torch.Tensor) and s.dtype == torch.float32 and s.is_cuda:
            return s.data_ptr()
        if self._sinks_f32 is None:
            if _runtime.capturing():
                raise RuntimeError("attn: sinks first converted during CUDA graph capture; warm "
                                   "up first")
            with _runtime.torch_stream(stream, device):
                self._sinks_f32 = torch.as_tensor(s).to(device="cuda:%d" % device,
                                                        dtype=torch.float32).contiguous()
        return self._sinks_f32.data_ptr()

    def _alibi_ptr(self, device, stream):
        if self.alibi_slopes is None:
            return None
        buf = self._alibi_dev.get(device)
        if buf is None:
            torch = _runtime.require_torch("alibi_slopes")
            with _runtime.torch_stream(stream, device):
                buf = torch.tensor(self.alibi_slopes, dtype=torch.float32).to("cuda:%d" % device)
            self._alibi_dev[device] = buf
        return buf.data_ptr()

    def _scale_ptr(self, layer, attr, device, stream):
        t = getattr(layer, attr, None)
        torch = _runtime.torch_or_none()
        if t is not None and torch is not None and isinstance(t, torch.Tensor) and t.is_cuda \
                and t.dtype == torch.float32 and t.numel() >= 1:
            return t.data_ptr()
        value = 1.0
        if t is not None:
            try:
                value = float(t)
            except (TypeError, ValueError, RuntimeError):
                raise TypeError("layer.%s: expected a float32 CUDA tensor or a number, got %s"
                                % (attr, type(t).__name__)) from None
            value = _lib.check_float(value, "layer." + attr, above=0.0)
        buf = self._ones.get((device, attr, value))
        if buf is None:
            torch = _runtime.require_torch("FP8 scales")
            with _runtime.torch_stream(stream, device):
                buf = torch.full((1,), value, dtype=torch.float32, device="cuda:%d" % device)
            self._ones[(device, attr, value)] = buf
        return buf.data_ptr()

    # -- forward --

    def forward(self, layer, query, key, value, kv_cache, attn_metadata, output=None,
                output_scale=None, output_block_scale=None):
        """Appends ``key``/``value`` [num_tokens, num_kv_heads, head_size]
        into ``kv_cache`` [2, num_blocks, block_size, num_kv_heads,
        head_size] at ``attn_metadata.slot_mapping``, then attention of
        ``query`` [num_tokens, num_heads, head_size] (or [num_tokens,
        num_heads * head_size]) over the cache: the step's prefills, then
        its one-token decodes, in one call. Writes and returns ``output``
        (allocated when None). ``attn_metadata`` None is vLLM's profiling
        run: nothing is computed."""
        if output_scale is not None or output_block_scale is not None:
            raise NotImplementedError("output_scale: attn writes unquantized outputs "
                                      "(fused output quantization is not supported)")
        torch = _runtime.require_torch("AttnImpl.forward")
        h, d, hkv = self.num_heads, self.head_size, self.num_kv_heads
        q3 = query.view(query.shape[0], h, d) if query.dim() == 2 else query
        if output is None:
            output = torch.zeros_like(q3)
        out3 = output.view(output.shape[0], h, d) if output.dim() == 2 else output
        md = attn_metadata
        if md is None:
            return output
        if isinstance(md, dict):  # vLLM passes a dict of layer name -> metadata sometimes
            raise TypeError("attn_metadata: expected this layer's AttnMetadata, got a dict")
        n = int(md.num_actual_tokens)
        device = md.device if md.device >= 0 else q3.device.index
        s = _runtime.stream_handle(None, device)
        q_t = _t.tensor(q3[:n], "query", dtype=("float16", "bfloat16"), shape=(n, h, d),
                        token_stride=True)
        self._q_type = q_t.dtype
        out_t = _t.tensor(out3[:n], "output", dtype=q_t.dtype, shape=(n, h, d), token_stride=True)
        if self.attn_type != AttentionType.DECODER:
            self._forward_encoder(layer, q_t, key, value, out_t, md, device, s)
            return output
        kv_type = _kv_type(self.kv_cache_dtype, q_t.dtype)
        if kv_cache is None or kv_cache.numel() == 0:
            raise ValueError("kv_cache: empty (decoder attention reads the paged cache)")
        cache, layout, page_size, cache_t = _layer_cache(kv_cache, hkv, d, kv_type)
        max_page = getattr(md, "max_page", -1)
        if max_page >= cache.num_pages:
            raise ValueError("%s = %d: past the end of kv_cache, which has %d blocks"
                             % (md.max_page_at, max_page, cache.num_pages))
        self._layout, self._page_size = layout, page_size
        if kv_type in _t.FP8_DTYPES:
            cache.k_scale = self._scale_ptr(layer, "_k_scale", device, s)
            cache.v_scale = self._scale_ptr(layer, "_v_scale", device, s)
            cache.num_kv_scales = 1
        # 1. append the step's keys and values
        if self.kv_sharing_target_layer_name is None and key is not None and value is not None:
            slots = _t.tensor(md.slot_mapping, "slot_mapping", dtype="int64")
            rows = min(slots.numel(), key.shape[0])
            if rows:
                k_t = _t.tensor(key[:rows], "key", dtype=q_t.dtype, shape=(rows, hkv, d),
                                token_stride=True)
                v_t = _t.tensor(value[:rows], "value", dtype=q_t.dtype, shape=(rows, hkv, d),
                                token_stride=True)
                av = AppendKVVariant(in_type=q_t.dtype, kv_type=kv_type, num_kv_heads=hkv,
                                     head_dim=d, page_size=page_size, layout=layout)
                append_rows(av, k_t, v_t, cache, slots.ptr, rows, s, device)
        if n == 0:
            return output
        # 2. prefills, then decodes
        variant = self._variant(q_t.dtype, page_size, layout)
        entry = self._entry(md, variant)
        _plan_entry(entry, md, s)
        bt = _t.tensor(md.block_table, "block_table", dtype="int32", token_stride=True)
        seq = _t.tensor(md.seq_lens, "seq_lens", dtype="int32")
        _t.same_device([q_t, out_t, bt, seq, cache_t])
        a = _lib.init(_lib.attn_prefill_args)
        a.q, a.q_stride_token = q_t.ptr, q_t.token_stride()
        a.out, a.out_stride_token = out_t.ptr, out_t.token_stride()
        a.cache = cache
        a.page_tables = bt.ptr
        a.page_table_stride = bt.token_stride()
        a.tables.alibi_slopes = self._alibi_ptr(device, s)
        a.tables.sinks = self._sinks_ptr(device, s)
        entry.handle.run(a, seq.ptr, s)
        return output

    def _forward_encoder(self, layer, q_t, key, value, out_t, md, device, s):
        n, hkv, d = q_t.shape[0], self.num_kv_heads, self.head_size
        if n == 0:
            return
        k_t = _t.tensor(key[:n], "key", dtype=q_t.dtype, shape=(n, hkv, d), token_stride=True)
        v_t = _t.tensor(value[:n], "value", dtype=q_t.dtype, shape=(n, hkv, d), token_stride=True)
        variant = self._variant(q_t.dtype, 0, "NHD")
        entry = self._entry(md, variant)
        _plan_entry(entry, md, s)
        a = _lib.init(_lib.attn_prefill_args)
        a.q, a.q_stride_token = q_t.ptr, q_t.token_stride()
        a.out, a.out_stride_token = out_t.ptr, out_t.token_stride()
        a.k, a.v = k_t.ptr, v_t.ptr
        a.k_stride_token, a.v_stride_token = k_t.token_stride(), v_t.token_stride()
        a.tables.alibi_slopes = self._alibi_ptr(device, s)
        a.tables.sinks = self._sinks_ptr(device, s)
        entry.handle.run(a, s)


# --- the backend ----------------------------------------------------------------


class AttnBackend:
    """vLLM's ``AttentionBackend`` for attn's kernels (static and class
    methods only, as vLLM calls them)."""

    accept_output_buffer = True
    forward_includes_kv_cache_update = True
    supported_dtypes = _SUPPORTED_DTYPES
    supported_kv_cache_dtypes = list(KV_CACHE_DTYPES)

    @staticmethod
    def get_name():
        """The backend's name: "ATTN"."""
        return "ATTN"

    @staticmethod
    def get_impl_cls():
        """``AttnImpl``."""
        return AttnImpl

    @staticmethod
    def get_metadata_cls():
        """``AttnMetadata``."""
        return AttnMetadata

    @staticmethod
    def get_builder_cls():
        """``AttnMetadataBuilder``."""
        return AttnMetadataBuilder

    @staticmethod
    def get_kv_cache_shape(num_blocks, block_size, num_kv_heads, head_size,
                           cache_dtype_str="auto"):
        """``(2, num_blocks, block_size, num_kv_heads, head_size)``: one
        buffer per layer, K at index 0 (attn's NHD layout, vLLM's). Raises
        ValueError for a size attn does not run."""
        # Page ids are int32 in the page tables; the rest are C ints.
        num_blocks = _lib.check_int(num_blocks, "num_blocks", 0, _lib.INT32_MAX)
        block_size = _lib.check_int(block_size, "block_size", 1, _lib.INT32_MAX)
        num_kv_heads = _lib.check_int(num_kv_heads, "num_kv_heads", 1, _lib.INT32_MAX)
        head_size = _lib.check_int(head_size, "head_size", 1, _lib.INT32_MAX)
        if block_size > MAX_BLOCK_SIZE:
            raise ValueError("block_size %d: attn's pages hold 1 to %d tokens"
                             % (block_size, MAX_BLOCK_SIZE))
        if head_size % 8 or not 32 <= head_size <= 256:
            raise ValueError("head_size %d: attn runs the multiples of 8 from 32 to 256"
                             % head_size)
        _kv_type(cache_dtype_str, "bfloat16")
        return (2, int(num_blocks), int(block_size), int(num_kv_heads), int(head_size))

    @staticmethod
    def get_kv_cache_stride_order(include_num_layers_dimension=False):
        """The identity: the cache is laid out as its shape says (NHD).
        With ``include_num_layers_dimension`` the layers dimension stays
        first."""
        return tuple(range(6 if include_num_layers_dimension else 5))

    @classmethod
    def get_kv_cache_block_dim(cls, block_size=16, num_kv_heads=1, head_size=128,
                               cache_dtype_str="auto"):
        """1: the block dimension of ``get_kv_cache_shape``."""
        return 1

    @classmethod
    def full_cls_name(cls):
        """(module, qualified name) of the class."""
        return (cls.__module__, cls.__qualname__)

    @classmethod
    def get_supported_head_sizes(cls):
        """The head sizes attn runs (from the C library when loadable,
        else this release's: the multiples of 8 from 32 to 256)."""
        try:
            from . import supported_head_sizes
            return supported_head_sizes()
        except OSError:
            return list(range(32, 257, 8))

    @staticmethod
    def get_supported_kernel_block_sizes():
        """Block sizes the kernels take (any block size up to 256 is a
        multiple of one of these; vLLM picks the largest that divides)."""
        return [256, 128, 64, 32, 16, 8, 4, 2, 1]

    @classmethod
    def supports_head_size(cls, head_size):
        """Whether attn runs ``head_size``."""
        return head_size in cls.get_supported_head_sizes()

    @classmethod
    def supports_dtype(cls, dtype):
        """float16 and bfloat16 models."""
        return dtype in cls.supported_dtypes or str(dtype).replace("torch.", "") in (
            "float16", "bfloat16")

    @classmethod
    def supports_kv_cache_dtype(cls, kv_cache_dtype):
        """Whether ``kv_cache_dtype`` is one of supported_kv_cache_dtypes."""
        return kv_cache_dtype is None or str(kv_cache_dtype) in KV_CACHE_DTYPES

    @classmethod
    def supports_block_size(cls, block_size):
        """Block sizes 1 to 256."""
        return block_size is None or 1 <= int(block_size) <= MAX_BLOCK_SIZE

    @classmethod
    def get_preferred_block_size(cls, default_block_size=16):
        """``default_block_size`` when supported, else 16."""
        return default_block_size if cls.supports_block_size(default_block_size) else 16

    @classmethod
    def is_mla(cls):
        """False: attn is not an MLA backend."""
        return False

    @classmethod
    def is_sparse(cls):
        """False."""
        return False

    @classmethod
    def is_ssm(cls):
        """False."""
        return False

    @classmethod
    def supports_sink(cls):
        """True: attention sinks (gpt-oss) are an attn knob."""
        return True

    @classmethod
    def supports_alibi_sqrt(cls):
        """False."""
        return False

    @classmethod
    def supports_mm_prefix(cls):
        """False: no PrefixLM multimodal ranges."""
        return False

    @classmethod
    def supports_per_head_quant_scales(cls):
        """False: vLLM's per-tensor FP8 scales."""
        return False

    @classmethod
    def supports_non_causal(cls):
        """False: decoder layers are causal."""
        return False

    @classmethod
    def supports_batch_invariance(cls):
        """False."""
        return False

    @classmethod
    def supports_kv_connector(cls):
        """True: the cache is vLLM's plain layout."""
        return True

    @classmethod
    def supports_attn_type(cls, attn_type):
        """decoder, encoder_only and encoder (not encoder_decoder)."""
        return str(getattr(attn_type, "value", attn_type)) in (
            AttentionType.DECODER, AttentionType.ENCODER_ONLY, AttentionType.ENCODER)

    @classmethod
    def supports_compute_capability(cls, capability):
        """sm_80 and newer."""
        major = getattr(capability, "major", None)
        if major is None:
            major = capability[0] if isinstance(capability, tuple) else int(capability) // 10
        return major >= 8

    @classmethod
    def supports_combination(cls, *args, **kwargs):
        """None: no combination of supported values is refused."""
        return None

    @classmethod
    def get_required_kv_cache_layout(cls):
        """None: vLLM's default (NHD) layout."""
        return None

    @classmethod
    def validate_configuration(cls, head_size, dtype, kv_cache_dtype, block_size, use_mla=False,
                               has_sink=False, use_sparse=False, use_mm_prefix=False,
                               use_per_head_quant_scales=False, device_capability=None,
                               attn_type=AttentionType.DECODER, use_non_causal=False,
                               use_batch_invariant=False, use_kv_connector=False, **kwargs):
        """vLLM's check: the reasons this configuration cannot run (empty
        when it can)."""
        reasons = []
        if not cls.supports_head_size(head_size):
            reasons.append("head_size not supported")
        if not cls.supports_dtype(dtype):
            reasons.append("dtype not supported")
        if not cls.supports_kv_cache_dtype(kv_cache_dtype):
            reasons.append("kv_cache_dtype not supported")
        if not cls.supports_block_size(block_size):
            reasons.append("block_size not supported")
        if use_mla:
            reasons.append("MLA not supported")
        if use_sparse:
            reasons.append("sparse not supported")
        if use_mm_prefix:
            reasons.append("partial multimodal token full attention not supported")
        if use_per_head_quant_scales:
            reasons.append("per-head quant scales not supported")
        if device_capability is not None and not cls.supports_compute_capability(
                device_capability):
            reasons.append("compute capability not supported")
        if not cls.supports_attn_type(attn_type):
            reasons.append("attention type %s not supported" % attn_type)
        if use_non_causal:
            reasons.append("non-causal attention not supported")
        if use_batch_invariant:
            reasons.append("batch invariance not supported")
        return reasons

    @staticmethod
    def swap_blocks(src_kv_cache, dst_kv_cache, src_to_dst, stream=None):
        """Copies pages ``src_to_dst[i, 0]`` of ``src_kv_cache`` to pages
        ``src_to_dst[i, 1]`` of ``dst_kv_cache`` (K and V; each cache a
        ``[2, num_blocks, ...]`` tensor on the GPU or in pinned host memory),
        asynchronously on the current stream; consecutive pairs coalesce."""
        pairs = _pairs(src_to_dst, "src_to_dst")
        src = _host_or_device(src_kv_cache, "src_kv_cache")
        dst = _host_or_device(dst_kv_cache, "dst_kv_cache")
        if src.shape[2:] != dst.shape[2:] or src.itemsize != dst.itemsize:
            raise ValueError("src_kv_cache %s and dst_kv_cache %s: pages differ in shape or dtype"
                             % (src.shape, dst.shape))
        page = 1
        for x in src.shape[2:]:
            page *= x
        device = dst.device if dst.device >= 0 else src.device
        s = _runtime.stream_handle(stream, device)
        flat = _lib.int64_array([v for p in pairs for v in p])
        with _runtime.on_device(device):
            for half in (0, 1):
                _lib.call("attn_swap_blocks", src.offset(half * src.strides[0]), src.shape[1],
                          dst.offset(half * dst.strides[0]), dst.shape[1],
                          page * src.itemsize, flat, len(pairs), s)

    @staticmethod
    def copy_blocks(kv_caches, src_to_dists, stream=None):
        """Copies pages ``src_to_dists[i, 0]`` to ``src_to_dists[i, 1]`` in
        K and V of every layer's cache in one launch. Host pairs are
        checked (in range, no destination written twice or also read);
        device pairs (an int64 CUDA tensor) are used as they are (graph
        capturable)."""
        if not kv_caches:
            return
        first = None
        addrs = []
        for i, c in enumerate(kv_caches):
            t = _t.tensor(c, "kv_caches[%d]" % i, dense=False)
            if t.ndim != 5 or t.shape[0] != 2:
                raise ValueError("kv_caches[%d]: expected shape (2, num_blocks, block_size, "
                                 "num_kv_heads, head_size), got %s" % (i, t.shape))
            if first is None:
                first = t
            elif t.shape != first.shape or t.dtype != first.dtype or t.strides != first.strides:
                raise ValueError("kv_caches[%d]: shape %s / dtype %s differ from kv_caches[0]'s "
                                 "%s / %s" % (i, t.shape, t.dtype, first.shape, first.dtype))
            addrs.append(t.ptr)
        _, nb, bs, h, d = first.shape
        st = first.strides
        if st == _dense(first.shape):
            layout = _lib.LAYOUT_NHD
        elif st == (nb * bs * h * d, bs * h * d, d, bs * d, 1):
            layout = _lib.LAYOUT_HND
        else:
            raise ValueError("kv_caches: each layer's cache must be one dense buffer (NHD, or HND "
                             "by its strides); got strides %s" % (st,))
        dtype = {"uint8": "float8_e4m3fn", "void8": "float8_e4m3fn"}.get(first.dtype, first.dtype)
        if dtype not in _lib.DTYPE_CODES:
            raise TypeError("kv_caches: unsupported dtype %s" % first.dtype)
        device = first.device if first.device >= 0 else max(0, _runtime.current_device())
        s = _runtime.stream_handle(stream, device)
        layers = _lib.init(_lib.attn_cache_layers)
        layers.layer_table = _layer_table(addrs, device, s)
        layers.num_layers = len(addrs)
        layers.num_pages = nb
        layers.page_size, layers.num_kv_heads, layers.head_dim = bs, h, d
        layers.dtype = _lib.DTYPE_CODES[dtype]
        layers.layout = layout
        ops = shared(CacheOps, device)
        torch = _runtime.torch_or_none()
        if torch is not None and isinstance(src_to_dists, torch.Tensor) and src_to_dists.is_cuda:
            p = _t.tensor(src_to_dists, "src_to_dists", dtype="int64", shape=(None, 2))
            ops.copy_blocks_device(layers, p.ptr, p.shape[0], s)
        else:
            pairs = _pairs(src_to_dists, "src_to_dists")
            if pairs:
                ops.copy_blocks(layers, pairs, s)


_layer_tables = {}


def _layer_table(addrs, device, stream):
    """A device uint64 array of the layers' addresses (cached per list)."""
    key = (device, tuple(addrs))
    buf = _layer_tables.get(key)
    if buf is None:
        if _runtime.capturing():
            raise RuntimeError("attn: copy_blocks over a new list of caches during CUDA graph "
                               "capture; call it once before capturing")
        table = _runtime.DeviceInts("int64", device, len(addrs), what="copy_blocks")
        table.upload([a if a < 2 ** 63 else a - 2 ** 64 for a in addrs], stream, "kv_caches")
        _layer_tables[key] = buf = table
    return buf.ptr


def _pairs(x, name):
    torch = _runtime.torch_or_none()
    if torch is not None and isinstance(x, torch.Tensor):
        if x.dim() != 2 or x.shape[1] != 2:
            raise ValueError("%s: expected shape (num_pairs, 2), got %s" % (name, tuple(x.shape)))
        x = x.tolist()
    try:
        rows = [tuple(row) for row in x]
    except TypeError:
        raise TypeError("%s: expected (src, dst) block pairs, got %s"
                        % (name, type(x).__name__)) from None
    for i, r in enumerate(rows):
        if len(r) != 2:
            raise ValueError("%s[%d]: expected a (src, dst) pair, got %r" % (name, i, r))
        rows[i] = tuple(_lib.check_int(v, "%s[%d]" % (name, i), 0, _lib.INT64_MAX) for v in r)
    return rows


def _host_or_device(x, name):
    """A Tensor of a swap buffer: a CUDA array, or a pinned host torch
    tensor (its host pointer)."""
    torch = _runtime.torch_or_none()
    if torch is not None and isinstance(x, torch.Tensor) and not x.is_cuda:
        if not x.is_pinned():
            raise ValueError("%s: a host buffer must be pinned (torch.empty(..., "
                             "pin_memory=True))" % name)
        t = _t.Tensor(name, x.data_ptr(), str(x.dtype).replace("torch.", ""), x.shape,
                      x.stride(), -1, x)
    else:
        t = _t.tensor(x, name, dense=False)
    if t.ndim < 3 or t.shape[0] != 2:
        raise ValueError("%s: expected shape (2, num_blocks, ...), got %s" % (name, t.shape))
    page = 1
    for v in t.shape[2:]:
        page *= v
    if t.shape[1] > 1 and t.strides[1] != page:
        raise ValueError("%s: pages must be contiguous (stride %d for dimension 1, expected %d)"
                         % (name, t.strides[1], page))
    return t

