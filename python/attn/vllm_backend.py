"""vLLM's attention-backend interface over attn, without importing vLLM.

An engine registers ``attn.vllm_backend.AttnBackend`` as a custom attention
backend (in vLLM: ``register_backend(AttentionBackendEnum.CUSTOM,
"attn.vllm_backend.AttnBackend")`` from
``vllm.v1.attention.backends.registry``, or a platform plugin returning
that class path). The names follow vLLM's v1 interface
(``vllm/v1/attention/backend.py``), checked against vLLM's own classes of
the release ``CHECKED_VLLM_VERSION`` names (python/tests/test_vllm.py):

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
  (``output_scale``), MLA (``AttnMLABackend`` below).
- The classes are duck-typed (no vLLM base classes): an engine that checks
  ``issubclass`` can derive ``class B(AttnBackend, AttentionBackend)``.

MLA (multi-head latent attention: DeepSeek V2/V3/R1, Kimi K2, GLM) has its
own classes, after vLLM's MLA interface (``MLACommonBackend``,
``MLACommonMetadata``, ``MLACommonMetadataBuilder``, ``MLACommonImpl`` in
``vllm/v1/attention/backends/mla/common.py``, since moved to
``vllm/model_executor/layers/attention/mla_attention.py``; FlashMLA's
``vllm/v1/attention/backends/mla/flashmla.py`` for decode). Register
``"attn.vllm_backend.AttnMLABackend"`` the same way:

- ``AttnMLABackend``: ``get_name()`` ("ATTN_MLA"), ``is_mla()`` (True),
  ``get_kv_cache_shape(num_blocks, block_size, num_kv_heads, head_size,
  cache_dtype_str="auto")`` -> ``(num_blocks, block_size, head_size)``: one
  latent row per token (``num_kv_heads`` 1), ``head_size`` =
  kv_lora_rank + RoPE dims (576 = 512 + 64, 512, 320, 256), the RoPE key
  after the latent; KV dtypes "auto", "float16", "bfloat16", "fp8",
  "fp8_e4m3"; blocks of 1, 16, 32 or 64 tokens; ``validate_configuration``
  and the ``supports_*`` queries.
- ``AttnMLAMetadataBuilder`` (same constructor and ``build`` as
  ``AttnMetadataBuilder``; ``build_step`` for other engines) and
  ``AttnMLAMetadata``: vLLM's MLA split of a step. Decodes come first
  (vLLM moves requests of at most ``reorder_batch_threshold`` tokens to
  the front: 4, or 1 + the speculative tokens, at most 16): the leading
  requests of one query length. Every later request is a prefill;
  ``prefill.chunked_context`` cuts their cached prefixes into chunks of a
  bounded number of tokens (vLLM's workspace size and rule).
- ``AttnMLAImpl(num_heads, head_size, scale, num_kv_heads, alibi_slopes,
  sliding_window, kv_cache_dtype, logits_soft_cap, attn_type,
  kv_sharing_target_layer_name, q_lora_rank, kv_lora_rank,
  qk_nope_head_dim, qk_rope_head_dim, qk_head_dim, v_head_dim,
  kv_b_proj)``:
  ``do_kv_cache_update(kv_c_normed, k_pe, kv_cache, slot_mapping,
  kv_cache_dtype, k_scale)`` (vLLM's ``concat_and_cache_mla``; FP8 caches
  hold ``x / k_scale``); ``forward_mqa(q, kv_c_and_k_pe_cache,
  attn_metadata, layer)`` (also ``_forward_decode``): absorbed decode,
  ``attn.mla_decode`` over the latent cache, returning ``(out
  [tokens, num_heads, kv_lora_rank], None)``; ``forward_mha(q,
  kv_c_normed, k_pe, kv_c_and_k_pe_cache, attn_metadata, k_scale,
  output)`` (also ``_forward_prefill``): prefill in MHA form, latents
  up-projected by ``kv_b_proj`` to keys of qk_head_dim and values of
  v_head_dim, attn's ragged prefill over the new tokens (causal) and over
  each context chunk (gathered from the cache, with LSEs), merged by
  attn's ``merge_states``; and ``forward(layer, q, kv_c_normed, k_pe,
  kv_cache, attn_metadata, output)``, the whole step (cache write, q
  absorption through W_UK, decode, W_UV) as vLLM's earlier MLA impls did.

Differences from vLLM's own MLA backends (and why):

- Any order is right: a batch vLLM did not reorder runs every request
  after the leading decodes in MHA form, one-token ones too (vLLM's
  backends assume its reorder).
- One prefill kernel: attn's ragged prefill (vLLM picks FlashAttention,
  FlashInfer, cuDNN or TRT-LLM through its MLA prefill selector; the
  metadata's ``prefill_backend`` is not used).
- Host lengths: planning reads the decodes' sequence lengths on the host
  (``_seq_lens_cpu``, else read back), as the backend above does.
- Chunked context: ``cu_seq_lens``, ``starts``, ``seq_lens`` are host
  lists per chunk and ``slots`` each chunk's cache rows (int64, device);
  the latents are gathered with torch indexing and dequantized in torch,
  not by ``gather_and_maybe_dequant_cache`` into a fixed workspace.
- The cache write is attn's append kernel over each row cut in equal
  pieces (graph-capturable; slot -1 skips a token).
- Decode queries stay 16-bit over FP8 caches
  (``supports_quant_query_input`` False); decode returns no LSE
  (``can_return_lse_for_decode`` False).
- CUDA graphs: ``UNIFORM_BATCH`` (FlashMLA's): decode-only steps of one
  query length, planned for replay when full graphs are on.
- Not supported (``NotImplementedError`` naming it): sparse MLA (an
  ``indexer``, ``topk_indices_buffer``, ``use_sparse``, "fp8_ds_mla"
  caches), decode context parallelism (``dcp_world_size`` > 1), ALiBi,
  sliding windows, soft-cap, sinks, KV sharing, "fp8_e5m2" caches, fused
  output quantization (``output_scale``).
"""

import dataclasses
import enum
import itertools
import os
import sys
import threading
import weakref
from typing import Any, List, Optional

from . import _lib
from . import _runtime
from . import _tensors as _t
from ._kernels import (AppendKVVariant, CacheOps, Knobs, MergeStates, MergeStatesVariant,
                       MetadataBuilder, MixedBatch, MlaDecode, MlaDecodeVariant, Prefill,
                       PrefillVariant, shared)
from .flashinfer import append_rows

#: The vLLM release python/tests/test_vllm.py checks these classes against
#: (scripts/check-vllm.sh). Releases after 0.28 allocate the KV cache in
#: their own layouts (K and V side by side per token and head) instead of
#: asking the backend for its shape, which attn's kernels do not read yet.
CHECKED_VLLM_VERSION = "0.28.0"

try:  # vLLM always has torch; the CPU tests may not.
    import torch as _torch
    _SUPPORTED_DTYPES = [_torch.float16, _torch.bfloat16]
except ImportError:  # pragma: no cover - depends on the host
    _torch = None
    _SUPPORTED_DTYPES = ["float16", "bfloat16"]

__all__ = ["AttnBackend", "AttnImpl", "AttnMetadata", "AttnMetadataBuilder",
           "AttnMLABackend", "AttnMLAImpl", "AttnMLAMetadata", "AttnMLAMetadataBuilder",
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


def _batch_invariant():
    """vLLM's batch-invariant mode (``VLLM_BATCH_INVARIANT=1``): attn's
    kernels are then built with ``batch_invariant`` (docs/semantics.md,
    "Batch invariance")."""
    envs = sys.modules.get("vllm.envs")
    if envs is not None and hasattr(envs, "VLLM_BATCH_INVARIANT"):
        return bool(envs.VLLM_BATCH_INVARIANT)
    return os.environ.get("VLLM_BATCH_INVARIANT", "0").strip().lower() in ("1", "true")


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
    requires_block_table_width = False
    supports_draft_decode_metadata_update = False

    def update_block_table(self, metadata, blk_table, slot_mapping):
        """Not supported (``supports_update_block_table`` is False): vLLM
        builds the metadata of each KV-cache group instead."""
        raise NotImplementedError("attn: update_block_table (supports_update_block_table "
                                  "is False)")

    def update_draft_decode_metadata(self, metadata):
        """Not supported (``supports_draft_decode_metadata_update`` is
        False): vLLM builds each draft step's metadata."""
        raise NotImplementedError("attn: update_draft_decode_metadata "
                                  "(supports_draft_decode_metadata_update is False)")

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


class _ImplCommon:
    """What vLLM's ``AttentionImplBase`` declares that both impls share:
    no sparse attention, no decode or prefill context parallelism, LSEs in
    natural-log units (attn's)."""

    is_sparse = False
    lse_base_on_e = True
    supports_dcp = False
    supports_pcp = False
    supports_dense_mha_prefill = True
    supports_mtp_with_cp_non_trivial_interleave_size = False
    supports_quant_query_input = False
    can_return_lse_for_decode = False
    need_to_return_lse_for_decode = False
    dcp_world_size = 1
    dcp_rank = 0
    pcp_world_size = 1
    pcp_rank = 0
    total_cp_world_size = 1
    total_cp_rank = 0

    @property
    def kv_quant_mode(self):
        """vLLM's ``KVQuantMode`` of the cache dtype when vLLM is loaded,
        else the dtype's name."""
        fn = getattr(sys.modules.get("vllm.v1.kv_cache_interface"), "get_kv_quant_mode", None)
        return fn(self.kv_cache_dtype) if fn else self.kv_cache_dtype

    def do_rope_and_kv_cache_update(self, *args, **kwargs):
        """Not supported (``fused_rope_kvcache_supported`` is False)."""
        raise NotImplementedError("attn: do_rope_and_kv_cache_update "
                                  "(fused_rope_kvcache_supported is False)")

    def do_qk_norm_rope_kvcache_update(self, *args, **kwargs):
        """Not supported (``fused_qk_norm_rope_kvcache_supported`` is
        False)."""
        raise NotImplementedError("attn: do_qk_norm_rope_kvcache_update "
                                  "(fused_qk_norm_rope_kvcache_supported is False)")


class AttnImpl(_ImplCommon):
    """One attention layer's implementation (vLLM's ``AttentionImpl``).

    ``sliding_window`` is vLLM's (keys counted with the query's own:
    attn's ``window_left = sliding_window - 1``), ``alibi_slopes`` a list
    of per-head floats, ``logits_soft_cap`` a float, ``sinks`` a
    ``[num_heads]`` tensor (gpt-oss). ``attn_type``: "decoder" (paged
    cache), "encoder_only"/"encoder" (bidirectional over the step's own
    rows, no cache)."""

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
                          alibi=self.alibi_slopes is not None, sinks=self.sinks is not None,
                          batch_invariant=_batch_invariant())
            return PrefillVariant(knobs=knobs, q_type=q_type, num_q_heads=self.num_heads,
                                  num_kv_heads=self.num_kv_heads, head_dim=self.head_size,
                                  paged=True, kv_type=kv, page_size=page_size, layout=layout)
        knobs = Knobs(kind="encoder", causal=False, softcap=self.logits_soft_cap,
                      scale=self.scale, alibi=self.alibi_slopes is not None,
                      sinks=self.sinks is not None, batch_invariant=_batch_invariant())
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


class _BackendCommon:
    """What vLLM's ``AttentionBackend`` declares that both backends share."""

    supports_kv_cache_update_bypass = False

    @classmethod
    def customize_spec(cls, spec):
        """``spec`` unchanged: attn reads the cache vLLM's spec describes."""
        return spec

    @classmethod
    def indexes_kv_by_block_stride(cls):
        """False: page strides come from the cache's shape, not a runtime
        block stride."""
        return False

    @classmethod
    def supports_device_cpu_query_lens_mismatch(cls):
        """False: plans come from the host's query lengths."""
        return False

    @classmethod
    def supports_pcp(cls):
        """False: no prefill context parallelism."""
        return False

    @classmethod
    def supports_dcp(cls):
        """False: no decode context parallelism."""
        return False

    @classmethod
    def supports_rswa(cls):
        """False."""
        return False

    @classmethod
    def validate_configuration(cls, head_size, dtype, kv_cache_dtype, block_size, use_mla=False,
                               has_sink=False, use_sparse=False, use_mm_prefix=False,
                               use_per_head_quant_scales=False, device_capability=None,
                               attn_type=AttentionType.DECODER, has_sliding_window=False,
                               use_non_causal=False, use_batch_invariant=False,
                               use_kv_connector=False, use_pcp=False,
                               use_adaptive_verification=False, use_dcp=False, use_rswa=False,
                               **flags):
        """vLLM's check: the reasons this configuration cannot run (empty
        when it can), from the ``supports_*`` queries, in vLLM's words and
        order. A flag this release does not know is refused when set."""
        reasons = []
        if not cls.supports_head_size(head_size):
            reasons.append("head_size not supported")
        if not cls.supports_dtype(dtype):
            reasons.append("dtype not supported")
        if not cls.supports_kv_cache_dtype(kv_cache_dtype):
            reasons.append("kv_cache_dtype not supported")
        if not cls.supports_block_size(block_size):
            reasons.append("block_size not supported")
        if use_mm_prefix and not cls.supports_mm_prefix():
            reasons.append("partial multimodal token full attention not supported")
        if bool(use_mla) != cls.is_mla():
            reasons.append("MLA not supported" if use_mla else "non-MLA not supported")
        if has_sink and not cls.supports_sink():
            reasons.append("attention sinks not supported")
        if bool(use_sparse) != cls.is_sparse():
            reasons.append("sparse not supported" if use_sparse else "non-sparse not supported")
        if use_per_head_quant_scales and not cls.supports_per_head_quant_scales():
            reasons.append("per-head quant scales not supported")
        if device_capability is not None and not cls.supports_compute_capability(
                device_capability):
            reasons.append("compute capability not supported")
        if not cls.supports_attn_type(attn_type):
            reasons.append("attention type %s not supported" % attn_type)
        if has_sliding_window and (
                not cls.supports_sliding_window()
                or str(getattr(attn_type, "value", attn_type)) != AttentionType.DECODER):
            reasons.append("sliding window not supported")
        for flag, supported, what in [
                (use_rswa, cls.supports_rswa, "R-SWA"),
                (use_non_causal, cls.supports_non_causal, "non-causal attention"),
                (use_batch_invariant, cls.supports_batch_invariance, "batch invariance"),
                (use_kv_connector, cls.supports_kv_connector, "KV connector"),
                (use_pcp, cls.supports_pcp, "PCP"), (use_dcp, cls.supports_dcp, "DCP")]:
            if flag and not supported():
                reasons.append("%s not supported" % what)
        if use_adaptive_verification and not cls.supports_device_cpu_query_lens_mismatch():
            reasons.append("device-cpu query lens mismatch not supported, this is needed "
                           "for adaptive verification")
        reasons += ["%s not supported" % name for name, value in sorted(flags.items())
                    if value]
        return reasons


class AttnBackend(_BackendCommon):
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
    def supports_sliding_window(cls):
        """True: windows on decoder layers (not on encoder-only ones)."""
        return True

    @classmethod
    def supports_batch_invariance(cls):
        """True: under ``VLLM_BATCH_INVARIANT=1`` every kernel is built
        batch-invariant, and each step's tokens, decodes included, run
        through the paged-prefill kernel, so a token's bits do not depend on
        its batch nor on whether it is decoded or prefilled."""
        return True

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


# --- MLA: multi-head latent attention (DeepSeek V2/V3/R1, Kimi K2, GLM) --------------

MLA_KV_CACHE_DTYPES = {"auto": None, "float16": "float16", "bfloat16": "bfloat16",
                       "fp8": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn"}
# kv_lora_rank + RoPE dims: 512 + 64 (DeepSeek V3, Kimi K2, GLM), 512 + 0, 256 + 64, 256 + 0.
MLA_HEAD_SIZES = (256, 320, 512, 576)
MLA_BLOCK_SIZES = (1, 16, 32, 64)
MLA_DECODE_QUERY_LEN = 4  # reorder_batch_threshold without speculative decoding
MLA_MAX_DECODE_QUERY_LEN = 16  # attn.mla_decode's query_len limit
MLA_MAX_HEADS = 128  # attn.mla_decode's query heads per latent head


def _mla_kv_type(cache_dtype_str, q_type):
    s = str(cache_dtype_str or "auto")
    if s.startswith("torch."):
        s = s[len("torch."):]
    if s == "float8_e4m3fn":
        s = "fp8_e4m3"
    if s not in MLA_KV_CACHE_DTYPES:
        raise NotImplementedError("kv_cache_dtype %r: attn's MLA backend takes %s (attn.mla_decode "
                                  "reads caches of q's dtype or e4m3)"
                                  % (cache_dtype_str, ", ".join(MLA_KV_CACHE_DTYPES)))
    return MLA_KV_CACHE_DTYPES[s] or q_type


def _mla_split(query_lens, threshold, num_tokens=None):
    """num_decodes by vLLM's rule (``split_decodes_and_prefills`` with
    ``require_uniform``) for a batch it reordered decodes-first: the
    leading requests of the first request's query length, when that is 1
    to ``threshold``. Zero-length requests after them are padding of a
    full CUDA graph (decodes too) when ``num_tokens`` counts them as
    whole."""
    n = len(query_lens)
    if not n or not 1 <= query_lens[0] <= threshold:
        return 0
    q0 = query_lens[0]
    i = 1
    while i < n and query_lens[i] == q0:
        i += 1
    if i < n and num_tokens == n * q0 and all(x == 0 for x in query_lens[i:]):
        return n
    return i


def _mla_workspace_size(max_model_len, max_num_seqs, block_size):
    """vLLM's chunked-prefill workspace (tokens of context up-projected at
    once): 8 whole requests or 4 pages per request, at most 64Ki tokens,
    at least a page per request."""
    size = min(max(8 * max_model_len, 4 * max_num_seqs * block_size), 64 * 1024)
    return max(size, max_num_seqs * block_size)


def _mla_context_chunks(context_lens, workspace, page_size):
    """vLLM's chunks of the prefills' cached prefixes: each chunk takes up
    to ``workspace // (prefills with a context)`` tokens (rounded down to
    whole pages) of every prefill, from the same start. Returns
    ``(chunk_size, [(starts, lens)])``, one pair of per-prefill lists per
    chunk."""
    with_context = sum(1 for c in context_lens if c > 0)
    if not with_context:
        return 0, []
    chunk = workspace // with_context
    chunk = max(page_size, chunk - chunk % page_size)
    chunks = []
    for i in range(-(-max(context_lens) // chunk)):
        start = i * chunk
        lens = [max(0, min(c, start + chunk) - start) for c in context_lens]
        chunks.append(([start] * len(context_lens), lens))
    return chunk, chunks


def _cumsum0(xs):
    out = [0]
    for x in xs:
        out.append(out[-1] + x)
    return out


class _MlaRegistry:
    """Per process: the live AttnMLAImpl instances (weakly), each device's
    limits and one kernel handle per (role, device, variant) shared by
    every layer of that variant, planned once per step."""

    def __init__(self):
        self.impls = weakref.WeakSet()
        self.limits = {}  # device -> (max_batch, max_tokens)
        self.entries = {}
        self.steps = itertools.count(1)

    def entry(self, key, device, batch, tokens, make):
        e = self.entries.get(key)
        if e is not None and (batch > e.handle.max_batch
                              or tokens > getattr(e.handle, "max_q_tokens", tokens)):
            e = None
        if e is None:
            if _runtime.capturing():
                raise RuntimeError("attn: a new MLA kernel (%s) was needed during CUDA graph "
                                   "capture; warm up before capturing" % key[2].describe())
            max_batch, max_tokens = self.limits.get(device, (256, 8192))
            e = _Entry(make(max(batch, max_batch), max(tokens, max_tokens)))
            self.entries[key] = e
        return e


_MLA_REGISTRY = _MlaRegistry()


def _plan_once(entry, step, plan):
    if entry.planned_step == step:
        return
    if _runtime.capturing():
        raise RuntimeError("attn: planning during CUDA graph capture (an MLA layer's kernel was "
                           "not planned when the step's metadata was built); warm up first")
    plan(entry.handle)
    entry.planned_step = step


_MLA_SCALES = {}


def _mla_scale_ptr(value, name, device, stream):
    """A float32 CUDA pointer of a per-tensor FP8 scale: the tensor itself
    (vLLM's ``layer._k_scale``), or a cached one-element copy of a
    number (None: 1)."""
    torch = _runtime.torch_or_none()
    if value is not None and torch is not None and isinstance(value, torch.Tensor) and \
            value.is_cuda and value.dtype == torch.float32 and value.numel() >= 1:
        return value.data_ptr()
    x = 1.0
    if value is not None:
        try:
            x = float(value)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError("%s: expected a float32 CUDA tensor or a number, got %s"
                            % (name, type(value).__name__)) from None
        x = _lib.check_float(x, name, above=0.0)
    buf = _MLA_SCALES.get((device, x))
    if buf is None:
        if _runtime.capturing():
            raise RuntimeError("attn: %s first converted during CUDA graph capture; warm up "
                               "first" % name)
        torch = _runtime.require_torch("FP8 scales")
        with _runtime.torch_stream(stream, device):
            buf = torch.full((1,), x, dtype=torch.float32, device="cuda:%d" % device)
        _MLA_SCALES[(device, x)] = buf
    return buf.data_ptr()


def _mla_cache(kv_cache, head_size, kv_type, name="kv_c_and_k_pe_cache"):
    """The Tensor of an MLA layer cache ``[num_blocks, block_size,
    head_size]`` (rows dense; pages may be padded), with its page and
    row strides."""
    t = _t.tensor(kv_cache, name, dtype=kv_type, dense=False)
    _t.check_shape(t, (None, None, head_size),
                   "num_blocks, block_size, kv_lora_rank + qk_rope_head_dim")
    nb, bs, d = t.shape
    row = t.strides[1] if bs > 1 else d
    page = t.strides[0] if nb > 1 else bs * row
    if t.strides[2] != 1 or row != d or page < bs * d:
        raise ValueError("%s: each block must be dense [block_size, head_size]; got strides %s "
                         "for shape %s" % (name, t.strides, t.shape))
    return t, page, row


def _heads_dense(x, dim):
    """``x`` [tokens, heads, dim] with dense heads (the C ABI takes a token
    stride only): itself, or a contiguous copy."""
    if x.stride(-1) == 1 and (x.shape[1] <= 1 or x.stride(1) == dim) and \
            (x.shape[0] <= 1 or x.stride(0) % 8 == 0):
        return x
    return x.contiguous()


def _merge_into(states, out, device, stream):
    """attn's merge_states of partial states ``[(o [T, H, D], lse [T, H])]``
    (dense, natural-log LSEs) into ``out`` [T, H, D] (token stride
    free), in rounds of at most 16 states."""
    torch = _runtime.require_torch("merge_states")
    tokens, heads, dim = out.shape
    if not tokens:
        return
    dtype = str(out.dtype).replace("torch.", "")
    h = shared(MergeStates, device, MergeStatesVariant(dtype=dtype, num_heads=heads,
                                                       head_dim=dim))
    keep = list(states)

    def merge(group, o, o_stride, lse):
        a = _lib.init(_lib.attn_merge_states_args)
        a.num_tokens = tokens
        a.num_states = len(group)
        for i, (so, sl) in enumerate(group):
            a.outs[i] = so.data_ptr()
            a.lses[i] = sl.data_ptr()
        a.states_stride_token = heads * dim
        a.out, a.out_stride_token = o.data_ptr(), o_stride
        a.lse = lse.data_ptr() if lse is not None else None
        h.run(a, stream)

    while len(states) > _lib.MAX_MERGE_STATES:
        o = torch.empty((tokens, heads, dim), dtype=out.dtype, device=out.device)
        lse = torch.empty((tokens, heads), dtype=torch.float32, device=out.device)
        merge(states[:_lib.MAX_MERGE_STATES], o, heads * dim, lse)
        keep += [(o, lse)]
        states = [(o, lse)] + states[_lib.MAX_MERGE_STATES:]
    merge(states, out, out.stride(0) if tokens > 1 else heads * dim, None)
    del keep  # the partials stay alive until their merges are queued


# --- MLA metadata --------------------------------------------------------------------


@dataclasses.dataclass
class AttnMLADecodeMetadata:
    """The step's decodes (vLLM's ``MLACommonDecodeMetadata``):
    ``block_table`` and ``seq_lens`` of the first ``num_decodes``
    requests (device), their ``query_len`` (tokens each), and the
    lengths the decode kernel was planned with (host; at least
    ``query_len``: padding requests of a full CUDA graph read one
    page)."""

    block_table: Any
    seq_lens: Any
    dcp_tot_seq_lens: Any = None
    query_len: int = 1
    seq_lens_cpu: List[int] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class AttnMLAChunkedContext:
    """The prefills' cached prefixes in chunks (vLLM's
    ``ChunkedContextMetadata``; host lists per chunk): chunk ``i`` takes
    ``seq_lens[i][r]`` tokens of prefill ``r`` from ``starts[i][r]``;
    ``cu_seq_lens[i]`` their prefix sums, ``seq_tot[i]`` their total,
    ``max_seq_lens[i]`` the longest; ``slots[i]`` the cache rows (block *
    block_size + offset) in that order, an int64 device tensor."""

    cu_seq_lens: List[List[int]]
    starts: List[List[int]]
    seq_tot: List[int]
    max_seq_lens: List[int]
    seq_lens: List[List[int]]
    slots: List[Any]
    chunk_size: int
    workspace: Any = None


@dataclasses.dataclass
class AttnMLAPrefillMetadata:
    """The step's prefills (vLLM's ``MLACommonPrefillMetadata``): requests
    ``num_decodes`` onward; ``query_start_loc`` rebased to their first
    token (device, and ``query_start_loc_cpu`` on the host),
    ``context_lens_cpu`` their cached tokens before the step."""

    block_table: Any
    query_start_loc: Any
    max_query_len: int
    chunked_context: Optional[AttnMLAChunkedContext] = None
    query_start_loc_cpu: List[int] = dataclasses.field(default_factory=list)
    context_lens_cpu: List[int] = dataclasses.field(default_factory=list)
    num_tokens: int = 0


@dataclasses.dataclass
class AttnMLAMetadata:
    """One step's MLA metadata (vLLM's ``MLACommonMetadata`` fields): the
    first ``num_decodes`` requests (``num_decode_tokens`` tokens) run as
    absorbed decodes (``decode``), the rest in MHA form (``prefill``)."""

    num_reqs: int
    max_query_len: int
    max_seq_len: int
    num_actual_tokens: int
    query_start_loc: Any
    slot_mapping: Any
    num_decodes: int
    num_decode_tokens: int
    num_prefills: int
    head_dim: Optional[int] = None
    prefill: Optional[AttnMLAPrefillMetadata] = None
    decode: Optional[AttnMLADecodeMetadata] = None
    num_prefill_tokens: int = 0
    query_start_loc_cpu: List[int] = dataclasses.field(default_factory=list)
    seq_lens_cpu: List[int] = dataclasses.field(default_factory=list)
    for_graph: bool = False
    step: int = 0
    device: int = -1


class AttnMLAMetadataBuilder(AttnMetadataBuilder):
    """Builds ``AttnMLAMetadata`` (vLLM's ``MLACommonMetadataBuilder``)
    and plans every live ``AttnMLAImpl`` variant once per step.

    Constructor as ``AttnMetadataBuilder``'s, plus
    ``num_speculative_tokens`` (else vLLM's ``speculative_config``) and
    ``chunked_prefill_workspace_size`` (tokens of context up-projected at
    once; else vLLM's rule from ``max_model_len``, ``max_num_seqs`` and
    the block size). ``reorder_batch_threshold``: the longest query that
    vLLM moves to the front as a decode.
    """

    _cudagraph_support = AttentionCGSupport.UNIFORM_BATCH
    cudagraph_support = _cudagraph_support
    query_len_support = "uniform"
    reorder_batch_threshold = MLA_DECODE_QUERY_LEN

    def __init__(self, kv_cache_spec=None, layer_names=None, vllm_config=None, device=None, *,
                 block_size=None, max_num_seqs=None, max_num_batched_tokens=None,
                 max_model_len=None, dtype=None, full_cuda_graphs=None,
                 num_speculative_tokens=None, chunked_prefill_workspace_size=None):
        super().__init__(kv_cache_spec, layer_names, vllm_config, device, block_size=block_size,
                         max_num_seqs=max_num_seqs,
                         max_num_batched_tokens=max_num_batched_tokens,
                         max_model_len=max_model_len, dtype=dtype,
                         full_cuda_graphs=full_cuda_graphs)
        if num_speculative_tokens is None:
            spec = getattr(vllm_config, "speculative_config", None)
            num_speculative_tokens = getattr(spec, "num_speculative_tokens", None) or 0
        spec_tokens = _lib.check_int(num_speculative_tokens, "num_speculative_tokens", 0,
                                     _lib.INT32_MAX)
        self.reorder_batch_threshold = min(MLA_MAX_DECODE_QUERY_LEN,
                                           max(MLA_DECODE_QUERY_LEN, 1 + spec_tokens))
        if chunked_prefill_workspace_size is None:
            chunked_prefill_workspace_size = _mla_workspace_size(
                self.max_model_len, self.max_num_seqs, self.block_size)
        self.chunked_prefill_workspace_size = _lib.check_int(
            chunked_prefill_workspace_size, "chunked_prefill_workspace_size", 1, _lib.INT32_MAX)
        _MLA_REGISTRY.limits[self.device] = (self.max_num_seqs, self.max_num_batched_tokens)

    def build_for_cudagraph_capture(self, common_attn_metadata):
        """``build`` of a decode-only step for a full CUDA graph, planned
        for replay."""
        md = self.build(0, common_attn_metadata, for_graph=True)
        if md.num_prefills:
            raise ValueError("common_attn_metadata: %d prefills; MLA's CUDA graphs hold "
                             "decode-only steps (query lengths up to %d, all one length)"
                             % (md.num_prefills, self.reorder_batch_threshold))
        return md

    def build(self, common_prefix_len, common_attn_metadata, fast_build=False, *,
              for_graph=None, stream=None):
        """Metadata of a vLLM step (``CommonAttentionMetadata``:
        ``num_reqs``, ``num_actual_tokens``, ``query_start_loc`` (+
        ``_cpu``), ``seq_lens`` (+ host copy), ``block_table_tensor``,
        ``slot_mapping``), and the plans of every live MLA layer
        variant."""
        torch = _runtime.require_torch("AttnMLAMetadataBuilder.build")
        cm = common_attn_metadata
        num_reqs = _lib.check_int(cm.num_reqs, "num_reqs", 0, _lib.INT32_MAX)
        num_tokens = _lib.check_int(cm.num_actual_tokens, "num_actual_tokens", 0,
                                    _lib.INT32_MAX)
        qsl = _runtime.host_ints(cm.query_start_loc_cpu[:num_reqs + 1], "query_start_loc_cpu")
        seq_cpu = getattr(cm, "_seq_lens_cpu", None)
        if seq_cpu is None:
            seq_cpu = cm.seq_lens[:num_reqs]
        seq_lens = _runtime.host_ints(seq_cpu[:num_reqs], "seq_lens", 0)
        if len(qsl) != num_reqs + 1 or len(seq_lens) != num_reqs:
            raise ValueError("query_start_loc_cpu, seq_lens: expected %d and %d entries "
                             "(num_reqs %d), got %d and %d"
                             % (num_reqs + 1, num_reqs, num_reqs, len(qsl), len(seq_lens)))
        query_lens = [qsl[i + 1] - qsl[i] for i in range(num_reqs)]
        for i, q in enumerate(query_lens):
            if q < 0:
                raise ValueError("query_start_loc_cpu: decreases at request %d (%d > %d)"
                                 % (i, qsl[i], qsl[i + 1]))
        nd = _mla_split(query_lens, self.reorder_batch_threshold, num_tokens)
        np_ = num_reqs - nd
        q_len = query_lens[0] if nd else 0
        num_decode_tokens = nd * q_len
        if num_decode_tokens > num_tokens:
            raise ValueError("num_actual_tokens %d: fewer than the %d decodes' %d tokens"
                             % (num_tokens, nd, num_decode_tokens))
        if for_graph is None:
            for_graph = self.full_cuda_graphs and np_ == 0
        bt = cm.block_table_tensor
        decode = None
        if nd:
            decode = AttnMLADecodeMetadata(
                block_table=bt[:nd], seq_lens=cm.seq_lens[:nd], query_len=q_len,
                seq_lens_cpu=[max(s, q_len) for s in seq_lens[:nd]])
        prefill = None
        if np_:
            pq = [x - qsl[nd] for x in qsl[nd:]]
            context = [max(0, s - q) for s, q in zip(seq_lens[nd:], query_lens[nd:])]
            qsl_dev = cm.query_start_loc
            if isinstance(qsl_dev, torch.Tensor):
                qsl_dev = qsl_dev[nd:num_reqs + 1] - qsl_dev[nd]
            prefill = AttnMLAPrefillMetadata(
                block_table=bt[nd:], query_start_loc=qsl_dev,
                max_query_len=max(query_lens[nd:]), query_start_loc_cpu=pq,
                context_lens_cpu=context, num_tokens=pq[-1],
                chunked_context=self._chunks(torch, bt, nd, context))
        md = AttnMLAMetadata(
            num_reqs=num_reqs, max_query_len=max(query_lens, default=0),
            max_seq_len=max(seq_lens, default=0), num_actual_tokens=num_tokens,
            query_start_loc=cm.query_start_loc, slot_mapping=cm.slot_mapping, num_decodes=nd,
            num_decode_tokens=num_decode_tokens, num_prefills=np_,
            num_prefill_tokens=(qsl[-1] - qsl[nd]) if np_ else 0,
            head_dim=getattr(self.kv_cache_spec, "head_size", None), prefill=prefill,
            decode=decode, query_start_loc_cpu=qsl, seq_lens_cpu=seq_lens,
            for_graph=_lib.check_flag(for_graph, "for_graph") == 1,
            step=next(_MLA_REGISTRY.steps), device=self.device)
        self._plan_registered(md, stream)
        return md

    def _chunks(self, torch, block_table, first, context):
        """The chunked context of prefills ``first``.. and each chunk's
        cache rows, computed on the device from the block table."""
        size, chunks = _mla_context_chunks(context, self.chunked_prefill_workspace_size,
                                           self.block_size)
        if not chunks:
            return None
        device = block_table.device
        bs = self.block_size
        reqs = torch.arange(first, first + len(context), dtype=torch.long, device=device)
        slots = []
        for starts, lens in chunks:
            total = sum(lens)
            lens_t = torch.tensor(lens, dtype=torch.long, device=device)
            which = torch.repeat_interleave(torch.arange(len(lens), device=device), lens_t,
                                            output_size=total)
            first_row = torch.cumsum(lens_t, 0) - lens_t
            pos = torch.arange(total, dtype=torch.long, device=device) - first_row[which] + \
                torch.tensor(starts, dtype=torch.long, device=device)[which]
            pages = block_table[reqs[which], torch.div(pos, bs, rounding_mode="floor")]
            slots.append(pages.long() * bs + torch.remainder(pos, bs))
        return AttnMLAChunkedContext(
            cu_seq_lens=[_cumsum0(lens) for _, lens in chunks],
            starts=[starts for starts, _ in chunks], seq_tot=[sum(lens) for _, lens in chunks],
            max_seq_lens=[max(lens) for _, lens in chunks],
            seq_lens=[lens for _, lens in chunks], slots=slots, chunk_size=size)

    def build_step(self, query_lens, context_lens, block_tables, *, stream=None,
                   for_graph=False, num_pages=0):
        """Metadata of a step from per-request ``query_lens`` (new tokens),
        ``context_lens`` (tokens cached before the step) and
        ``block_tables`` (page-id lists, each covering its request), for
        engines that are not vLLM: order the requests decodes first, as
        vLLM does. The device tables are new tensors each step (a CUDA
        graph needs vLLM's persistent ones)."""
        torch = _runtime.require_torch("AttnMLAMetadataBuilder.build_step")
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
        bs = self.block_size
        tables = []
        for i in range(n):
            row = _runtime.host_ints(block_tables[i], "block_tables[%d]" % i, 0)
            need = -(-(ql[i] + cl[i]) // bs)
            if len(row) < need:
                raise ValueError("block_tables[%d]: %d pages for %d tokens of blocks of %d "
                                 "(needs %d)" % (i, len(row), ql[i] + cl[i], bs, need))
            for j, page in enumerate(row):
                if num_pages and page >= num_pages:
                    raise ValueError("block_tables[%d][%d] = %d: past the end of the cache's "
                                     "%d pages (num_pages)" % (i, j, page, num_pages))
            tables.append(row)
        dev = "cuda:%d" % self.device
        width = max([1] + [len(t) for t in tables])
        bt = torch.zeros((n, width), dtype=torch.int32)
        for i, row in enumerate(tables):
            bt[i, :len(row)] = torch.tensor(row, dtype=torch.int32)
        slots = [tables[i][p // bs] * bs + p % bs for i in range(n)
                 for p in range(cl[i], cl[i] + ql[i])]
        qsl = _cumsum0(ql)
        seq = [q + c for q, c in zip(ql, cl)]
        cm = _MlaStep(num_reqs=n, num_actual_tokens=qsl[-1], query_start_loc_cpu=qsl,
                      query_start_loc=torch.tensor(qsl, dtype=torch.int32, device=dev),
                      seq_lens=torch.tensor(seq, dtype=torch.int32, device=dev),
                      _seq_lens_cpu=seq, block_table_tensor=bt.to(dev),
                      slot_mapping=torch.tensor(slots, dtype=torch.int64, device=dev))
        return self.build(0, cm, for_graph=for_graph, stream=stream)

    def _plan_registered(self, md, stream):
        """Plans every live AttnMLAImpl's kernels for this step (once per
        variant: layers of one variant share them)."""
        s = _runtime.stream_handle(stream, md.device)
        for impl in list(_MLA_REGISTRY.impls):
            impl._plans(md, impl._q_type or self.dtype, impl._page_size or self.block_size, s)


@dataclasses.dataclass
class _MlaStep:
    """build_step's stand-in for vLLM's CommonAttentionMetadata."""
    num_reqs: int
    num_actual_tokens: int
    query_start_loc_cpu: List[int]
    query_start_loc: Any
    seq_lens: Any
    _seq_lens_cpu: List[int]
    block_table_tensor: Any
    slot_mapping: Any


# --- MLA implementation ---------------------------------------------------------------


class AttnMLAImpl(_ImplCommon):
    """One MLA layer's implementation (vLLM's ``MLACommonImpl``; its
    docstring has the math).

    ``kv_b_proj`` is vLLM's ``ColumnParallelLinear`` (called on latents:
    ``[tokens, kv_lora_rank]`` -> ``[tokens, num_heads * (qk_nope_head_dim +
    v_head_dim)]``, a tensor or an ``(output, bias)`` tuple), any such
    module, or its weight tensor ``[num_heads * (qk_nope_head_dim +
    v_head_dim), kv_lora_rank]``. ``scale`` is the softmax scale of both
    forms (DeepSeek: 1/sqrt(qk_head_dim) times its YaRN factor).
    """

    def __init__(self, num_heads, head_size, scale, num_kv_heads=1, alibi_slopes=None,
                 sliding_window=None, kv_cache_dtype="auto", logits_soft_cap=None,
                 attn_type=AttentionType.DECODER, kv_sharing_target_layer_name=None,
                 q_lora_rank=None, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
                 qk_head_dim=None, v_head_dim=128, kv_b_proj=None, indexer=None,
                 q_pad_num_heads=None, topk_indices_buffer=None, sinks=None, **kwargs):
        for value, name in ((alibi_slopes, "alibi_slopes"), (sliding_window, "sliding_window"),
                            (sinks, "sinks")):
            if value is not None:
                raise NotImplementedError("%s: attn's MLA backend has no %s (attn.mla_decode "
                                          "takes a plain softmax)" % (name, name))
        if logits_soft_cap:
            raise NotImplementedError("logits_soft_cap=%r: attn's MLA backend has no soft-cap"
                                      % (logits_soft_cap,))
        if indexer is not None or topk_indices_buffer is not None or kwargs.get("use_sparse"):
            raise NotImplementedError("sparse MLA (an indexer's top-k tokens, DeepSeek V3.2): "
                                      "attn's MLA backend attends to every cached token")
        if kv_sharing_target_layer_name is not None:
            raise NotImplementedError("kv_sharing_target_layer_name=%r: KV sharing is not "
                                      "supported for MLA" % (kv_sharing_target_layer_name,))
        attn_type = str(getattr(attn_type, "value", attn_type))
        if attn_type != AttentionType.DECODER:
            raise NotImplementedError("attn_type=%r: MLA layers are decoder attention"
                                      % attn_type)
        self.num_heads = _lib.check_int(num_heads, "num_heads", 1, MLA_MAX_HEADS)
        self.head_size = _lib.check_int(head_size, "head_size", 1, _lib.INT32_MAX)
        self.scale = _lib.check_float(scale, "scale", above=0.0)
        self.num_kv_heads = _lib.check_int(num_kv_heads if num_kv_heads is not None else 1,
                                           "num_kv_heads", 1, _lib.INT32_MAX)
        if self.num_kv_heads != 1:
            raise ValueError("num_kv_heads %d: an MLA cache holds one latent head (1)"
                             % self.num_kv_heads)
        self.q_lora_rank = q_lora_rank
        self.kv_lora_rank = _lib.check_int(kv_lora_rank, "kv_lora_rank", 1, _lib.INT32_MAX)
        if self.kv_lora_rank % 64 or self.kv_lora_rank > 512:
            raise ValueError("kv_lora_rank %d: attn.mla_decode takes multiples of 64 up to 512"
                             % self.kv_lora_rank)
        self.qk_rope_head_dim = _lib.check_int(qk_rope_head_dim, "qk_rope_head_dim", 0,
                                               _lib.INT32_MAX)
        if self.qk_rope_head_dim not in (0, 64, 128):
            raise ValueError("qk_rope_head_dim %d: attn.mla_decode takes 0, 64 or 128"
                             % self.qk_rope_head_dim)
        if self.head_size != self.kv_lora_rank + self.qk_rope_head_dim:
            raise ValueError("head_size %d: an MLA cache row is kv_lora_rank + qk_rope_head_dim "
                             "(%d + %d)" % (self.head_size, self.kv_lora_rank,
                                            self.qk_rope_head_dim))
        self.qk_nope_head_dim = _lib.check_int(qk_nope_head_dim, "qk_nope_head_dim", 0,
                                               _lib.INT32_MAX)
        want = self.qk_nope_head_dim + self.qk_rope_head_dim
        self.qk_head_dim = want if qk_head_dim is None else \
            _lib.check_int(qk_head_dim, "qk_head_dim", 1, _lib.INT32_MAX)
        if self.qk_head_dim != want:
            raise ValueError("qk_head_dim %d: expected qk_nope_head_dim + qk_rope_head_dim "
                             "(%d + %d)" % (self.qk_head_dim, self.qk_nope_head_dim,
                                            self.qk_rope_head_dim))
        self.v_head_dim = _lib.check_int(v_head_dim, "v_head_dim", 1, _lib.INT32_MAX)
        # Prefill in MHA form: v and out of v_head_dim; q and k of v_head_dim +
        # rope_dim (q/k shorter than v are zero-padded: the scores are the same).
        self._pf_head_dim = self.v_head_dim
        self._pf_rope_dim = max(0, self.qk_head_dim - self.v_head_dim)
        for dim, name in ((self.v_head_dim, "v_head_dim"),
                          (self._pf_head_dim + self._pf_rope_dim, "qk_head_dim")):
            if dim % 8 or not 32 <= dim <= 256:
                raise ValueError("%s %d: attn's prefill runs head dims that are multiples of 8 "
                                 "from 32 to 256" % (name, dim))
        if kv_b_proj is None:
            raise ValueError("kv_b_proj: required (the up-projection of latents to keys and "
                             "values, [num_heads * (qk_nope_head_dim + v_head_dim), "
                             "kv_lora_rank])")
        self.kv_b_proj = kv_b_proj
        self.kv_cache_dtype = str(kv_cache_dtype or "auto")
        _mla_kv_type(self.kv_cache_dtype, "bfloat16")  # validates
        self.indexer = None
        self.q_pad_num_heads = None  # no padded heads: attn takes 1 to 128
        self.supports_quant_query_input = False
        self.dcp_world_size = self._vllm_dcp_world_size()
        if self.dcp_world_size > 1:
            self._check_dcp()
        self.W_UK_T = self.W_UV = None
        self._q_type = None
        self._page_size = None
        _MLA_REGISTRY.impls.add(self)

    @staticmethod
    def _vllm_dcp_world_size():
        """vLLM's decode-context-parallel size when vLLM is loaded and
        initialized, else -1 (vLLM's MLA layer fills it in)."""
        m = sys.modules.get("vllm.distributed.parallel_state")
        fn = getattr(m, "get_dcp_group", None) if m is not None else None
        if fn is None:
            return -1
        try:
            return int(fn().world_size)
        except Exception:
            return -1

    def _check_dcp(self):
        if self.dcp_world_size is not None and self.dcp_world_size > 1:
            raise NotImplementedError("decode context parallelism (dcp_world_size %d): attn's MLA "
                                      "backend reads each layer's whole cache on one GPU"
                                      % self.dcp_world_size)

    # -- vLLM's optional hooks --

    def fused_output_quant_supported(self, quant_key=None):
        """False: attn writes unquantized outputs."""
        return False

    def process_weights_after_loading(self, act_dtype=None):
        """W_UK_T (num_heads, qk_nope_head_dim, kv_lora_rank) and W_UV
        (num_heads, kv_lora_rank, v_head_dim) from ``kv_b_proj`` in
        ``act_dtype``: the absorption ``forward`` applies around decode."""
        torch = _runtime.require_torch("AttnMLAImpl.process_weights_after_loading")
        dtype = act_dtype or torch.bfloat16
        n, p, v, r = self.num_heads, self.qk_nope_head_dim, self.v_head_dim, self.kv_lora_rank
        w = self._kv_b_weight(torch, dtype).to(torch.float32).reshape(n, p + v, r)
        self.W_UK_T = w[:, :p, :].to(dtype).contiguous()
        self.W_UV = w[:, p:, :].transpose(1, 2).to(dtype).contiguous()

    def _kv_b_weight(self, torch, dtype):
        """kv_b_proj's weight [num_heads * (qk_nope + v), kv_lora_rank]: the
        tensor, a 16/32-bit ``.weight``, else (quantized) the layer applied
        to the identity, as vLLM dequantizes it."""
        kv_b = self.kv_b_proj
        n, p, v, r = self.num_heads, self.qk_nope_head_dim, self.v_head_dim, self.kv_lora_rank
        w = kv_b if isinstance(kv_b, torch.Tensor) else getattr(kv_b, "weight", None)
        if not (isinstance(w, torch.Tensor) and
                w.dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64)):
            device = w.device if isinstance(w, torch.Tensor) else \
                next(iter(kv_b.parameters())).device if hasattr(kv_b, "parameters") else "cuda"
            w = self._up_proj(torch, torch.eye(r, dtype=dtype, device=device)).T
        if tuple(w.shape) != (n * (p + v), r):
            raise ValueError("kv_b_proj: expected a weight of shape (%d, %d) [num_heads * "
                             "(qk_nope_head_dim + v_head_dim), kv_lora_rank], got %s"
                             % (n * (p + v), r, tuple(w.shape)))
        return w

    def _up_proj(self, torch, x):
        """kv_b_proj(x): latents [tokens, kv_lora_rank] -> [tokens,
        num_heads * (qk_nope_head_dim + v_head_dim)] in x's dtype."""
        kv_b = self.kv_b_proj
        if isinstance(kv_b, torch.Tensor):
            y = torch.nn.functional.linear(x.to(kv_b.dtype), kv_b)
        elif callable(kv_b):
            w = getattr(kv_b, "weight", None)
            xin = x
            if isinstance(w, torch.Tensor) and w.dtype != x.dtype and \
                    w.dtype in (torch.float16, torch.bfloat16, torch.float32):
                xin = x.to(w.dtype)
            y = kv_b(xin)
            if isinstance(y, (tuple, list)):
                y = y[0]
        else:
            raise TypeError("kv_b_proj: expected a linear layer (vLLM's ColumnParallelLinear) or "
                            "its weight tensor, got %s" % type(kv_b).__name__)
        width = self.num_heads * (self.qk_nope_head_dim + self.v_head_dim)
        if y.dim() != 2 or y.shape[1] != width or y.shape[0] != x.shape[0]:
            raise ValueError("kv_b_proj: returned shape %s for %d latents; expected (%d, %d) "
                             "[tokens, num_heads * (qk_nope_head_dim + v_head_dim)]"
                             % (tuple(y.shape), x.shape[0], x.shape[0], width))
        return y.to(x.dtype)

    # -- variants and plans --

    def _kv_type(self, q_type):
        kv = _mla_kv_type(self.kv_cache_dtype, q_type)
        if kv not in (q_type, "float8_e4m3fn"):
            raise NotImplementedError("kv_cache_dtype %r with %s queries: attn.mla_decode reads "
                                      "caches of q's dtype or e4m3" % (self.kv_cache_dtype, q_type))
        return kv

    def _decode_variant(self, q_type, page_size, query_len):
        kv = self._kv_type(q_type)
        return MlaDecodeVariant(q_type=q_type, kv_type=None if kv == q_type else kv,
                                num_q_heads=self.num_heads, kv_lora_rank=self.kv_lora_rank,
                                rope_dim=self.qk_rope_head_dim, page_size=page_size,
                                query_len=query_len, causal=query_len > 1, scale=self.scale,
                                batch_invariant=_batch_invariant())

    def _prefill_variant(self, q_type, causal, lse):
        """Ragged prefill in MHA form: ``head_dim`` v_head_dim and
        ``rope_dim`` the rest of qk_head_dim (q/k rows of head_dim +
        rope_dim, v and out rows of head_dim)."""
        knobs = Knobs(kind="decoder", causal=causal, scale=self.scale, write_lse=lse,
                      batch_invariant=_batch_invariant())
        kw = dict(knobs=knobs, q_type=q_type, num_q_heads=self.num_heads,
                  num_kv_heads=self.num_heads, head_dim=self._pf_head_dim)
        if self._pf_rope_dim:
            if "rope_dim" not in getattr(PrefillVariant, "__dataclass_fields__", {}):
                raise NotImplementedError(
                    "qk_head_dim %d != v_head_dim %d: this attn has no PrefillVariant.rope_dim "
                    "(ragged prefill with q/k rows longer than v's)"
                    % (self.qk_head_dim, self.v_head_dim))
            kw["rope_dim"] = self._pf_rope_dim
        return PrefillVariant(**kw)

    def _plans(self, md, q_type, page_size, stream, decode=True, prefill=True):
        """The step's kernels for this layer's variants, each planned once
        per step: {"decode": MlaDecode, "prefill": Prefill (new tokens,
        causal), "context": [Prefill per context chunk]}."""
        reg, dev, out = _MLA_REGISTRY, md.device, {}
        if decode and md.num_decodes:
            dec = md.decode
            v = self._decode_variant(q_type, page_size, dec.query_len)
            e = reg.entry(("decode", dev, v), dev, md.num_decodes, 0,
                          lambda b, t, v=v: MlaDecode(dev, v, b))
            _plan_once(e, md.step,
                       lambda h: h.plan(dec.seq_lens_cpu, md.for_graph, stream))
            out["decode"] = e.handle
        pf = md.prefill
        if prefill and md.num_prefills and pf is not None and pf.num_tokens:
            ctx = pf.chunked_context
            cu_q = pf.query_start_loc_cpu
            v = self._prefill_variant(q_type, True, ctx is not None)
            e = reg.entry(("prefill", dev, v), dev, md.num_prefills, pf.num_tokens,
                          lambda b, t, v=v: Prefill(dev, v, b, t))
            _plan_once(e, md.step, lambda h: h.plan(cu_q, cu_q, False, stream))
            out["prefill"] = e.handle
            out["context"] = []
            if ctx is not None:
                v = self._prefill_variant(q_type, False, True)
                for i, cu_kv in enumerate(ctx.cu_seq_lens):
                    e = reg.entry(("context", dev, v, i), dev, md.num_prefills, pf.num_tokens,
                                  lambda b, t, v=v: Prefill(dev, v, b, t))
                    _plan_once(e, md.step,
                               lambda h, cu_kv=cu_kv: h.plan(cu_q, cu_kv, False, stream))
                    out["context"].append(e.handle)
        return out

    # -- the cache --

    def do_kv_cache_update(self, kv_c_normed, k_pe, kv_cache, slot_mapping, kv_cache_dtype=None,
                           k_scale=None):
        """vLLM's ``concat_and_cache_mla``: writes ``kv_c_normed`` [tokens,
        kv_lora_rank] and ``k_pe`` [tokens, (1,) qk_rope_head_dim] as rows
        of ``kv_cache`` [num_blocks, block_size, kv_lora_rank +
        qk_rope_head_dim] at ``slot_mapping`` (int64; -1 skips a token; its
        length is the number of tokens written). FP8 caches hold ``x /
        k_scale`` (saturated to e4m3's range)."""
        if kv_cache is None or slot_mapping is None:
            return
        torch = _runtime.require_torch("AttnMLAImpl.do_kv_cache_update")
        if kv_cache.numel() == 0:
            return
        r, p = self.kv_lora_rank, self.qk_rope_head_dim
        d = r + p
        slots = _t.tensor(slot_mapping.reshape(-1), "slot_mapping", dtype="int64")
        n = min(slots.shape[0], kv_c_normed.shape[0])
        if n == 0:
            return
        in_type = str(kv_c_normed.dtype).replace("torch.", "")
        if in_type not in ("float16", "bfloat16"):
            raise TypeError("kv_c_normed: expected dtype float16 or bfloat16, got %s" % in_type)
        kv_type = _mla_kv_type(kv_cache_dtype or self.kv_cache_dtype, in_type)
        if kv_type not in (in_type, "float8_e4m3fn"):
            raise NotImplementedError("kv_cache_dtype %r with %s latents: attn's MLA cache holds "
                                      "the latents' dtype or e4m3"
                                      % (kv_cache_dtype or self.kv_cache_dtype, in_type))
        cache_t, page_stride, _ = _mla_cache(kv_cache, d, kv_type, "kv_cache")
        nb, bs, _ = cache_t.shape
        rows = kv_c_normed[:n]
        if p:
            pe = k_pe[:n].reshape(n, p)
            if pe.dtype != rows.dtype:
                raise TypeError("k_pe: expected dtype %s (kv_c_normed's), got %s"
                                % (in_type, str(pe.dtype).replace("torch.", "")))
            rows = torch.cat([rows, pe], dim=-1)
        elif rows.stride(-1) != 1:
            rows = rows.contiguous()
        # attn's append kernel writes each row as `pieces` heads of `piece`
        # values (a head dim it runs); K and V are the same rows and cache.
        piece = next(x for x in range(256, 31, -8) if d % x == 0)
        pieces = d // piece
        src = _t.tensor(rows.view(n, pieces, piece), "kv_c_normed", dtype=in_type,
                        token_stride=True)
        device = cache_t.device if cache_t.device >= 0 else max(0, _runtime.current_device())
        _t.same_device([src, slots, cache_t])
        s = _runtime.stream_handle(None, device)
        c = _lib.attn_paged_kv()
        c.k = c.v = cache_t.ptr
        c.dtype = _lib.DTYPE_CODES[kv_type]
        c.num_kv_heads, c.head_dim, c.page_size = pieces, piece, bs
        c.layout = _lib.LAYOUT_NHD
        c.num_pages = nb
        c.page_stride = page_stride
        if kv_type in _t.FP8_DTYPES:
            c.k_scale = c.v_scale = _mla_scale_ptr(k_scale, "k_scale", device, s)
            c.num_kv_scales = 1
        av = AppendKVVariant(in_type=in_type, kv_type=kv_type, num_kv_heads=pieces,
                             head_dim=piece, page_size=bs, layout="NHD")
        append_rows(av, src, src, c, slots.ptr, n, s, device)

    # -- decode: MQA over the latent cache --

    def forward_mqa(self, q, kv_c_and_k_pe_cache, attn_metadata, layer=None):
        """Absorbed decode of the step's ``num_decode_tokens`` first
        tokens: ``q`` is ``(ql_nope [tokens, num_heads, kv_lora_rank], q_pe
        [tokens, num_heads, qk_rope_head_dim])`` or one tensor of both;
        ``kv_c_and_k_pe_cache`` [num_blocks, block_size, kv_lora_rank +
        qk_rope_head_dim] (FP8: scaled by ``layer._k_scale``). Returns
        ``(out [tokens, num_heads, kv_lora_rank], None)``."""
        md = attn_metadata
        dec = getattr(md, "decode", None)
        if dec is None or not md.num_decodes:
            raise ValueError("attn_metadata: the step has no decodes (forward_mqa runs the "
                             "first num_decode_tokens tokens)")
        self._check_dcp()
        torch = _runtime.require_torch("AttnMLAImpl.forward_mqa")
        h, r, p = self.num_heads, self.kv_lora_rank, self.qk_rope_head_dim
        if isinstance(q, (tuple, list)):
            q_nope, q_pe = q
        else:
            if q.dim() != 3 or q.shape[-1] != r + p:
                raise ValueError("q: expected shape (tokens, %d, %d) [tokens, num_heads, "
                                 "kv_lora_rank + qk_rope_head_dim], got %s"
                                 % (h, r + p, tuple(q.shape)))
            q_nope, q_pe = q[..., :r], q[..., r:]
        rows = md.num_decode_tokens
        if q_nope.shape[0] < rows:
            raise ValueError("q: %d tokens, fewer than the step's %d decode tokens"
                             % (q_nope.shape[0], rows))
        q_type = str(q_nope.dtype).replace("torch.", "")
        qn = _t.tensor(_heads_dense(q_nope[:rows], r), "q_nope", dtype=("float16", "bfloat16"),
                       shape=(rows, h, r), token_stride=True,
                       what="num_decode_tokens, num_heads, kv_lora_rank")
        qr = None
        if p:
            qr = _t.tensor(_heads_dense(q_pe[:rows], p), "q_pe", dtype=q_type, shape=(rows, h, p),
                           token_stride=True, what="num_decode_tokens, num_heads, qk_rope_head_dim")
        kv_type = self._kv_type(q_type)
        cache_t, page_stride, row_stride = _mla_cache(kv_c_and_k_pe_cache, r + p, kv_type)
        nb, bs, _ = cache_t.shape
        device = md.device if md.device >= 0 else qn.device
        s = _runtime.stream_handle(None, device)
        self._q_type, self._page_size = q_type, bs
        handle = self._plans(md, q_type, bs, s, prefill=False)["decode"]
        out = torch.empty((rows, h, r), dtype=q_nope.dtype, device=q_nope.device)
        ot = _t.tensor(out, "out")
        bt = _t.tensor(dec.block_table, "block_table", dtype="int32", token_stride=True)
        _t.same_device([qn, qr, ot, bt, cache_t])
        a = _lib.init(_lib.attn_mla_decode_args)
        a.q_nope, a.q_nope_stride_token = qn.ptr, qn.token_stride()
        if qr is not None:
            a.q_rope, a.q_rope_stride_token = qr.ptr, qr.token_stride()
        a.out, a.out_stride_token = ot.ptr, ot.token_stride()
        a.ckv, a.ckv_page_stride, a.ckv_token_stride = cache_t.ptr, page_stride, row_stride
        a.num_pages = nb
        a.page_tables, a.page_table_stride = bt.ptr, bt.token_stride()
        if kv_type in _t.FP8_DTYPES:
            a.kv_scale = _mla_scale_ptr(getattr(layer, "_k_scale", None), "layer._k_scale",
                                        device, s)
        handle.run(a, s)
        return out, None

    _forward_decode = forward_mqa

    # -- prefill: MHA over up-projected latents --

    def forward_mha(self, q, kv_c_normed, k_pe, kv_c_and_k_pe_cache, attn_metadata, k_scale,
                    output, output_scale=None):
        """Prefill of the step's tokens after its decodes in MHA form:
        ``q`` [tokens, num_heads, qk_head_dim] (nope then RoPE part),
        ``kv_c_normed`` [tokens, kv_lora_rank] and ``k_pe`` [tokens, (1,)
        qk_rope_head_dim] of the same tokens; keys and values up-projected
        by ``kv_b_proj``; the cached prefix (``attn_metadata.prefill.
        chunked_context``) gathered from ``kv_c_and_k_pe_cache`` chunk by
        chunk (FP8: times ``k_scale``). Writes ``output`` [tokens,
        num_heads * v_head_dim] (or [tokens, num_heads, v_head_dim])."""
        if output_scale is not None:
            raise NotImplementedError("output_scale: attn writes unquantized outputs (fused "
                                      "output quantization is not supported)")
        md = attn_metadata
        pf = getattr(md, "prefill", None)
        if pf is None or not md.num_prefills:
            raise ValueError("attn_metadata: the step has no prefills (forward_mha runs the "
                             "tokens after the decodes)")
        self._check_dcp()
        torch = _runtime.require_torch("AttnMLAImpl.forward_mha")
        h, v_dim, qk = self.num_heads, self.v_head_dim, self.qk_head_dim
        tokens = pf.num_tokens
        if tokens == 0:
            return
        if q.shape[0] < tokens or kv_c_normed.shape[0] < tokens or k_pe.shape[0] < tokens:
            raise ValueError("q, kv_c_normed, k_pe: expected the step's %d prefill tokens, got "
                             "%d, %d and %d" % (tokens, q.shape[0], kv_c_normed.shape[0],
                                                k_pe.shape[0]))
        q3 = q[:tokens]
        if q3.dim() == 2:
            q3 = q3.view(tokens, h, qk)
        q_type = str(q3.dtype).replace("torch.", "")
        _t.tensor(q3, "q", dtype=("float16", "bfloat16"), shape=(tokens, h, qk), dense=False,
                  what="prefill tokens, num_heads, qk_head_dim")
        out3 = output[:tokens]
        out3 = out3.view(tokens, h, v_dim) if out3.dim() == 2 else out3
        ot = _t.tensor(out3, "output", dtype=q_type, shape=(tokens, h, v_dim), token_stride=True,
                       what="prefill tokens, num_heads, v_head_dim")
        device = md.device if md.device >= 0 else ot.device
        s = _runtime.stream_handle(None, device)
        self._q_type = q_type
        plans = self._plans(md, q_type, None, s, decode=False)
        q_in = self._mha_q(torch, q3)
        k, v = self._mha_kv(torch, kv_c_normed[:tokens], k_pe[:tokens], q3.dtype)
        ctx = pf.chunked_context
        if ctx is None:
            self._run_prefill(plans["prefill"], q_in, k, v, ot, None, s)
            return
        cache = kv_c_and_k_pe_cache
        kv_type = self._kv_type(q_type)
        _mla_cache(cache, self.head_size, kv_type)
        scale = self._dequant_scale(torch, k_scale, kv_type)
        r = self.kv_lora_rank
        states = []
        for i, handle in enumerate(plans["context"]):
            rows = self._gather(torch, cache, ctx.slots[i], kv_type, scale, q3.dtype)
            kc, vc = self._mha_kv(torch, rows[:, :r], rows[:, r:], q3.dtype)
            o = torch.empty((tokens, h, v_dim), dtype=q3.dtype, device=q3.device)
            lse = torch.empty((tokens, h), dtype=torch.float32, device=q3.device)
            self._run_prefill(handle, q_in, kc, vc, _t.tensor(o, "o"), lse, s)
            states.append((o, lse))
        o = torch.empty((tokens, h, v_dim), dtype=q3.dtype, device=q3.device)
        lse = torch.empty((tokens, h), dtype=torch.float32, device=q3.device)
        self._run_prefill(plans["prefill"], q_in, k, v, _t.tensor(o, "o"), lse, s)
        states.append((o, lse))
        _merge_into(states, out3, device, s)

    def _forward_prefill(self, q, kv_c_normed, k_pe, kv_c_and_k_pe_cache, attn_metadata,
                         k_scale):
        """``forward_mha`` into a new output [tokens, num_heads *
        v_head_dim] (vLLM's earlier name and return)."""
        torch = _runtime.require_torch("AttnMLAImpl._forward_prefill")
        tokens = attn_metadata.prefill.num_tokens
        out = torch.empty((tokens, self.num_heads * self.v_head_dim), dtype=q.dtype,
                          device=q.device)
        self.forward_mha(q, kv_c_normed, k_pe, kv_c_and_k_pe_cache, attn_metadata, k_scale, out)
        return out

    def _mha_q(self, torch, q3):
        """q rows for the prefill kernel: dense heads, zero-padded to
        v_head_dim when qk_head_dim is shorter."""
        pad = self._pf_head_dim + self._pf_rope_dim - self.qk_head_dim
        if pad:
            return torch.nn.functional.pad(q3, (0, pad))
        return _heads_dense(q3, self.qk_head_dim)

    def _mha_kv(self, torch, kv_c, pe, dtype):
        """Keys [tokens, num_heads, qk (padded)] and values [tokens,
        num_heads, v_head_dim] of latents ``kv_c`` [tokens, kv_lora_rank]
        and RoPE keys ``pe`` [tokens, (1,) qk_rope_head_dim] (shared by
        every head)."""
        n = kv_c.shape[0]
        h, nope, rope, v_dim = (self.num_heads, self.qk_nope_head_dim, self.qk_rope_head_dim,
                                self.v_head_dim)
        kv = self._up_proj(torch, kv_c.to(dtype)).view(n, h, nope + v_dim)
        width = self._pf_head_dim + self._pf_rope_dim
        k = torch.empty((n, h, width), dtype=dtype, device=kv.device)
        k[..., :nope] = kv[..., :nope]
        if rope:
            k[..., nope:nope + rope] = pe.reshape(n, 1, rope).to(dtype)
        if width > nope + rope:
            k[..., nope + rope:] = 0
        return k, kv[..., nope:].contiguous()

    @staticmethod
    def _dequant_scale(torch, k_scale, kv_type):
        if kv_type not in _t.FP8_DTYPES or k_scale is None:
            return 1.0
        if isinstance(k_scale, torch.Tensor):
            if k_scale.is_cuda:
                return k_scale.to(torch.float32).reshape(-1)[:1]
            return float(k_scale.reshape(-1)[0])
        return _lib.check_float(k_scale, "k_scale", above=0.0)

    @staticmethod
    def _gather(torch, cache, slots, kv_type, scale, dtype):
        """Cache rows at ``slots`` [n] -> [n, head_size] in ``dtype`` (FP8
        rows times ``scale``)."""
        bs = cache.shape[1]
        rows = cache[torch.div(slots, bs, rounding_mode="floor"), torch.remainder(slots, bs)]
        if kv_type in _t.FP8_DTYPES:
            if rows.dtype == torch.uint8:
                rows = rows.view(torch.float8_e4m3fn)
            return (rows.to(torch.float32) * scale).to(dtype)
        return rows.to(dtype)

    @staticmethod
    def _run_prefill(handle, q, k, v, out_t, lse, stream):
        a = _lib.init(_lib.attn_prefill_args)
        qt = _t.tensor(q, "q", token_stride=True)
        kt = _t.tensor(k, "k", token_stride=True)
        vt = _t.tensor(v, "v", token_stride=True)
        _t.same_device([qt, kt, vt, out_t])
        a.q, a.q_stride_token = qt.ptr, qt.token_stride()
        a.out, a.out_stride_token = out_t.ptr, out_t.token_stride()
        a.lse = lse.data_ptr() if lse is not None else None
        a.k, a.v = kt.ptr, vt.ptr
        a.k_stride_token, a.v_stride_token = kt.token_stride(), vt.token_stride()
        handle.run(a, stream)

    # -- the whole step --

    def forward(self, layer, q, k_c_normed, k_pe, kv_cache, attn_metadata, output=None,
                output_scale=None, output_block_scale=None):
        """The whole step, as vLLM's earlier MLA impls ran it: writes
        ``k_c_normed``/``k_pe`` to ``kv_cache`` (``do_kv_cache_update``),
        then the prefills (``forward_mha``) and the decodes: ``q``'s nope
        part absorbed through W_UK, ``forward_mqa``, W_UV. ``q``
        [tokens, num_heads, qk_head_dim] (or 2-D); writes and returns
        ``output`` [tokens, num_heads * v_head_dim] (allocated when None).
        ``attn_metadata`` None is vLLM's profiling run: output zeroed."""
        if output_scale is not None or output_block_scale is not None:
            raise NotImplementedError("output_scale: attn writes unquantized outputs (fused "
                                      "output quantization is not supported)")
        torch = _runtime.require_torch("AttnMLAImpl.forward")
        h, qk, v_dim, nope = self.num_heads, self.qk_head_dim, self.v_head_dim, \
            self.qk_nope_head_dim
        q3 = q.view(q.shape[0], h, qk) if q.dim() == 2 else q
        if output is None:
            output = torch.zeros((q.shape[0], h * v_dim), dtype=q.dtype, device=q.device)
        md = attn_metadata
        if md is None:
            return output.fill_(0)
        if isinstance(md, dict):
            raise TypeError("attn_metadata: expected this layer's AttnMLAMetadata, got a dict")
        out3 = output.view(output.shape[0], h, v_dim) if output.dim() == 2 else output
        n = md.num_actual_tokens
        k_scale = getattr(layer, "_k_scale", None)
        self.do_kv_cache_update(k_c_normed, k_pe, kv_cache, md.slot_mapping,
                                self.kv_cache_dtype, k_scale)
        nd = md.num_decode_tokens
        if md.num_prefills and n > nd:
            self.forward_mha(q3[nd:n], k_c_normed[nd:n], k_pe[nd:n], kv_cache, md, k_scale,
                             out3[nd:n])
        if md.num_decodes:
            if self.W_UV is None or self.W_UV.dtype != q.dtype:
                self.process_weights_after_loading(q.dtype)
            # (N, B, P) x (N, P, L) -> (N, B, L): q_nope absorbed into latent space
            ql_nope = torch.bmm(q3[:nd, :, :nope].transpose(0, 1), self.W_UK_T).transpose(0, 1)
            latent, _ = self.forward_mqa((ql_nope, q3[:nd, :, nope:]), kv_cache, md, layer)
            # (N, B, L) x (N, L, V) -> (N, B, V)
            out3[:nd].copy_(torch.bmm(latent.transpose(0, 1), self.W_UV).transpose(0, 1))
        return output


# --- the MLA backend ---------------------------------------------------------------------


class AttnMLABackend(_BackendCommon):
    """vLLM's MLA ``AttentionBackend`` for attn's kernels (vLLM's
    ``MLACommonBackend``; static and class methods only)."""

    accept_output_buffer = True
    # vLLM's MLA layer writes the cache through do_kv_cache_update.
    forward_includes_kv_cache_update = False
    supported_dtypes = _SUPPORTED_DTYPES
    supported_kv_cache_dtypes = list(MLA_KV_CACHE_DTYPES)

    @staticmethod
    def get_name():
        """The backend's name: "ATTN_MLA"."""
        return "ATTN_MLA"

    @staticmethod
    def get_impl_cls():
        """``AttnMLAImpl``."""
        return AttnMLAImpl

    @staticmethod
    def get_metadata_cls():
        """``AttnMLAMetadata``."""
        return AttnMLAMetadata

    @staticmethod
    def get_builder_cls():
        """``AttnMLAMetadataBuilder``."""
        return AttnMLAMetadataBuilder

    @staticmethod
    def get_kv_cache_shape(num_blocks, block_size, num_kv_heads, head_size,
                           cache_dtype_str="auto"):
        """``(num_blocks, block_size, head_size)``: one row of kv_lora_rank
        latent values then the RoPE key per token (``num_kv_heads`` must
        be 1). Raises ValueError for a size attn does not run."""
        num_blocks = _lib.check_int(num_blocks, "num_blocks", 0, _lib.INT32_MAX)
        block_size = _lib.check_int(block_size, "block_size", 1, _lib.INT32_MAX)
        num_kv_heads = _lib.check_int(num_kv_heads, "num_kv_heads", 1, _lib.INT32_MAX)
        head_size = _lib.check_int(head_size, "head_size", 1, _lib.INT32_MAX)
        if num_kv_heads != 1:
            raise ValueError("num_kv_heads %d: an MLA cache holds one latent head (1)"
                             % num_kv_heads)
        if block_size not in MLA_BLOCK_SIZES:
            raise ValueError("block_size %d: attn's MLA backend takes blocks of %s tokens"
                             % (block_size, ", ".join(map(str, MLA_BLOCK_SIZES))))
        if head_size not in MLA_HEAD_SIZES:
            raise ValueError("head_size %d: attn's MLA backend takes kv_lora_rank + RoPE dims of "
                             "%s" % (head_size, ", ".join(map(str, MLA_HEAD_SIZES))))
        _mla_kv_type(cache_dtype_str, "bfloat16")
        return (int(num_blocks), int(block_size), int(head_size))

    @staticmethod
    def get_kv_cache_stride_order(include_num_layers_dimension=False):
        """The identity (the cache is laid out as its shape says)."""
        return tuple(range(4 if include_num_layers_dimension else 3))

    @classmethod
    def get_kv_cache_block_dim(cls, block_size=64, num_kv_heads=1, head_size=576,
                               cache_dtype_str="auto"):
        """0: the block dimension of ``get_kv_cache_shape``."""
        return 0

    @classmethod
    def full_cls_name(cls):
        """(module, qualified name) of the class."""
        return (cls.__module__, cls.__qualname__)

    @classmethod
    def get_supported_head_sizes(cls):
        """kv_lora_rank + RoPE dims: 256, 320, 512, 576."""
        return list(MLA_HEAD_SIZES)

    @staticmethod
    def get_supported_kernel_block_sizes():
        """Blocks of 64, 32, 16 or 1 tokens."""
        return sorted(MLA_BLOCK_SIZES, reverse=True)

    @classmethod
    def supports_head_size(cls, head_size):
        """Whether attn runs MLA rows of ``head_size``."""
        return head_size in MLA_HEAD_SIZES

    @classmethod
    def supports_dtype(cls, dtype):
        """float16 and bfloat16 models."""
        return dtype in cls.supported_dtypes or str(dtype).replace("torch.", "") in (
            "float16", "bfloat16")

    @classmethod
    def supports_kv_cache_dtype(cls, kv_cache_dtype):
        """Whether ``kv_cache_dtype`` is one of supported_kv_cache_dtypes."""
        return kv_cache_dtype is None or str(kv_cache_dtype) in MLA_KV_CACHE_DTYPES

    @classmethod
    def supports_block_size(cls, block_size):
        """Blocks of 1, 16, 32 or 64 tokens."""
        return block_size is None or block_size in MLA_BLOCK_SIZES

    @classmethod
    def get_preferred_block_size(cls, default_block_size=64):
        """``default_block_size`` when supported, else 64."""
        return default_block_size if cls.supports_block_size(default_block_size) else 64

    @classmethod
    def is_mla(cls):
        """True."""
        return True

    @classmethod
    def is_sparse(cls):
        """False: every cached token is attended to."""
        return False

    @classmethod
    def is_ssm(cls):
        """False."""
        return False

    @classmethod
    def supports_sink(cls):
        """False."""
        return False

    @classmethod
    def supports_alibi_sqrt(cls):
        """False."""
        return False

    @classmethod
    def supports_mm_prefix(cls):
        """False."""
        return False

    @classmethod
    def supports_per_head_quant_scales(cls):
        """False: one FP8 scale per cache."""
        return False

    @classmethod
    def supports_non_causal(cls):
        """False."""
        return False

    @classmethod
    def supports_sliding_window(cls):
        """False: MLA runs without windows."""
        return False

    @classmethod
    def supports_batch_invariance(cls):
        """True: under ``VLLM_BATCH_INVARIANT=1`` MLA decode splits each
        request's keys at fixed positions and the MHA-form prefill never
        splits, so neither depends on the batch (a token decoded and the
        same token prefilled are two different computations, as in vLLM's
        own MLA backends)."""
        return True

    @classmethod
    def supports_kv_connector(cls):
        """True: the cache is vLLM's MLA layout."""
        return True

    @classmethod
    def supports_attn_type(cls, attn_type):
        """decoder only."""
        return str(getattr(attn_type, "value", attn_type)) == AttentionType.DECODER

    @classmethod
    def supports_compute_capability(cls, capability):
        """sm_80 and newer."""
        return AttnBackend.supports_compute_capability(capability)

    @classmethod
    def supports_combination(cls, *args, **kwargs):
        """None: no combination of supported values is refused."""
        return None

    @classmethod
    def get_required_kv_cache_layout(cls):
        """None."""
        return None

