"""Variants and handles: the C ABI's objects with Python lifetimes.

A variant is a frozen dataclass (hashable: the wrappers cache one handle per
variant) that writes its C struct on demand; the struct mirrors check every
value written (``_lib.CStruct``), so a field that does not fit its C type is
an error naming the field. A handle owns one C object (decode, prefill,
mixed batch, cascade, merge_states, append-KV, cache ops, metadata builder)
and destroys it once: when closed or collected. A closed handle raises on
use; handles cannot be copied or pickled (a copy would destroy the C object
twice). Creating a kernel handle may JIT-compile (NVRTC, seconds on first
use): those calls print the progress line (``_lib.compiling``).
"""

import ctypes
import dataclasses
import threading
from dataclasses import dataclass
from typing import Optional

from . import _lib
from . import _runtime
from ._lib import (KIND_CROSS, KIND_DECODER, KIND_ENCODER, LAYOUT_HND, LAYOUT_NHD)

_SHORT = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float8_e4m3fn": "e4m3",
          "float8_e5m2": "e5m2"}
KINDS = {"decoder": KIND_DECODER, "encoder": KIND_ENCODER, "cross": KIND_CROSS}
LAYOUTS = {"NHD": LAYOUT_NHD, "HND": LAYOUT_HND}


def dtype_code(name, what):
    try:
        return _lib.DTYPE_CODES[name]
    except (KeyError, TypeError):
        raise TypeError("%s: attn does not take dtype %s (float16, bfloat16, float32, "
                        "float8_e4m3fn, float8_e5m2)" % (what, name)) from None


def layout_code(layout, what="kv_layout"):
    if type(layout) is int and layout in (LAYOUT_NHD, LAYOUT_HND):
        return layout
    if not isinstance(layout, str):
        raise TypeError("%s: expected 'NHD' or 'HND', got %r" % (what, layout))
    try:
        return LAYOUTS[layout.upper()]
    except KeyError:
        raise ValueError("%s: expected 'NHD' or 'HND', got %r" % (what, layout)) from None


def _memo_hash(cls):
    """A frozen dataclass whose hash is computed once per object: every
    plan() looks its variants up in dicts, and hashing the fields (the
    knobs' too) costs microseconds each time."""
    fields_hash = cls.__hash__

    def __hash__(self):
        h = self.__dict__.get("_hash")
        if h is None:
            h = fields_hash(self)
            object.__setattr__(self, "_hash", h)
        return h

    cls.__hash__ = __hash__
    return cls


@_memo_hash
@dataclass(frozen=True)
class Knobs:
    """attn_knobs (docs/semantics.md says what each does)."""
    kind: str = "decoder"
    causal: bool = True
    window_left: int = -1
    softcap: float = 0.0
    scale: float = 0.0
    alibi: bool = False
    sinks: bool = False
    fp8_query: bool = False
    write_lse: bool = False
    batch_invariant: bool = False
    score_mod: Optional[str] = None
    mask_mod: Optional[str] = None

    def fill(self, c):
        if not isinstance(self.kind, str) or self.kind not in KINDS:
            raise ValueError("kind: expected 'decoder', 'encoder' or 'cross', got %r"
                             % (self.kind,))
        c.kind = KINDS[self.kind]
        c.causal = self.causal
        # None or any negative value: no window.
        window = -1 if self.window_left is None else _lib.check_int(self.window_left,
                                                                    "window_left")
        c.window_left = max(window, -1)
        # 0 (or None) means off (soft-cap) and 1/sqrt(head_dim) (scale).
        c.softcap = 0.0 if self.softcap is None else _lib.check_float(self.softcap, "softcap",
                                                                      minimum=0.0)
        c.scale = 0.0 if self.scale is None else _lib.check_float(self.scale, "scale",
                                                                  minimum=0.0)
        c.alibi = self.alibi
        c.sinks = self.sinks
        c.fp8_query = self.fp8_query
        c.write_lse = self.write_lse
        c.batch_invariant = self.batch_invariant
        # Region text: a str without NULs ("" is none); ctypes keeps the bytes
        # alive in the struct's _objects.
        c.score_mod = self.score_mod
        c.mask_mod = self.mask_mod

    def describe(self):
        parts = []
        if self.kind != "decoder":
            parts.append(self.kind)
        if not self.causal:
            parts.append("non-causal")
        if self.window_left is not None and self.window_left >= 0:
            parts.append("window")
        if self.softcap:
            parts.append("soft-cap")
        for flag in ("alibi", "sinks", "fp8_query", "write_lse", "batch_invariant"):
            if getattr(self, flag):
                parts.append(flag.replace("write_lse", "lse").replace("alibi", "ALiBi"))
        if self.score_mod:
            parts.append("score_mod")
        if self.mask_mod:
            parts.append("mask_mod")
        return ", ".join(parts)


def _describe(kind, fields, knobs):
    text = ", ".join(f for f in fields if f)
    extra = knobs.describe() if knobs is not None else ""
    return "%s kernel (%s%s)" % (kind, text, (", " + extra) if extra else "")


@_memo_hash
@dataclass(frozen=True)
class DecodeVariant:
    knobs: Knobs = Knobs()
    q_type: str = "bfloat16"
    kv_type: str = "bfloat16"
    num_q_heads: int = 32
    num_kv_heads: int = 8
    head_dim: int = 128
    page_size: int = 16
    layout: str = "NHD"
    query_len: int = 1
    per_head_kv_scale: bool = False

    def to_c(self):
        v = _lib.attn_decode_variant()
        _lib.load().attn_decode_variant_init(ctypes.byref(v))
        self.knobs.fill(v.knobs)
        v.q_type = dtype_code(self.q_type, "q_data_type")
        v.kv_type = dtype_code(self.kv_type, "kv_data_type")
        v.num_q_heads, v.num_kv_heads = self.num_q_heads, self.num_kv_heads
        v.head_dim, v.page_size = self.head_dim, self.page_size
        v.layout = layout_code(self.layout)
        v.query_len = self.query_len
        v.per_head_kv_scale = self.per_head_kv_scale
        return v

    def replace(self, **kw):
        return dataclasses.replace(self, **kw)

    def describe(self):
        return _describe("decode", [
            "q %s" % _SHORT.get(self.q_type, self.q_type),
            "%s cache" % _SHORT.get(self.kv_type, self.kv_type),
            "%d/%d heads" % (self.num_q_heads, self.num_kv_heads),
            "dim %d" % self.head_dim, "page %d" % self.page_size, self.layout,
            "query_len %d" % self.query_len if self.query_len != 1 else ""], self.knobs)


@_memo_hash
@dataclass(frozen=True)
class PrefillVariant:
    knobs: Knobs = Knobs()
    q_type: str = "bfloat16"
    num_q_heads: int = 32
    num_kv_heads: int = 8
    head_dim: int = 128
    paged: bool = False
    kv_type: Optional[str] = None  # None: q_type
    page_size: int = 16
    layout: str = "NHD"
    per_head_kv_scale: bool = False
    fp8_compute: bool = False
    # MLA's prefill: q and k have head_dim + rope_dim dims (128 + 64), v and
    # out head_dim; ragged k/v of q_type only.
    rope_dim: int = 0

    def to_c(self):
        v = _lib.attn_prefill_variant()
        _lib.load().attn_prefill_variant_init(ctypes.byref(v))
        self.knobs.fill(v.knobs)
        v.q_type = dtype_code(self.q_type, "q_data_type")
        v.num_q_heads, v.num_kv_heads, v.head_dim = (self.num_q_heads, self.num_kv_heads,
                                                     self.head_dim)
        v.paged = self.paged
        v.kv_type = dtype_code(self.kv_type or self.q_type, "kv_data_type")
        if v.paged:
            v.page_size = self.page_size
        v.layout = layout_code(self.layout)
        v.per_head_kv_scale = self.per_head_kv_scale
        v.fp8_compute = self.fp8_compute
        v.rope_dim = self.rope_dim
        return v

    @property
    def head_dim_qk(self):
        """Dims of a q or k row per head."""
        return self.head_dim + self.rope_dim

    def replace(self, **kw):
        return dataclasses.replace(self, **kw)

    def describe(self, what=None):
        kv = self.kv_type or self.q_type
        fields = ["q %s" % _SHORT.get(self.q_type, self.q_type)]
        if self.paged:
            fields += ["%s cache" % _SHORT.get(kv, kv), "page %d" % self.page_size, self.layout]
        elif kv != self.q_type:
            fields.append("%s k/v" % _SHORT.get(kv, kv))
        dim = ("dim %d" % self.head_dim if not self.rope_dim else
               "dims %d/%d" % (self.head_dim_qk, self.head_dim))
        fields += ["%d/%d heads" % (self.num_q_heads, self.num_kv_heads), dim,
                   "fp8 compute" if self.fp8_compute else ""]
        return _describe(what or ("paged prefill" if self.paged else "prefill"), fields,
                         self.knobs)


@_memo_hash
@dataclass(frozen=True)
class AppendKVVariant:
    in_type: str = "bfloat16"
    kv_type: str = "bfloat16"
    num_kv_heads: int = 8
    head_dim: int = 128
    page_size: int = 16
    layout: str = "NHD"
    per_head_kv_scale: bool = False

    def to_c(self):
        v = _lib.attn_append_kv_variant()
        _lib.load().attn_append_kv_variant_init(ctypes.byref(v))
        v.in_type = dtype_code(self.in_type, "append_key")
        v.kv_type = dtype_code(self.kv_type, "paged_kv_cache")
        v.num_kv_heads, v.head_dim, v.page_size = self.num_kv_heads, self.head_dim, self.page_size
        v.layout = layout_code(self.layout)
        v.per_head_kv_scale = self.per_head_kv_scale
        return v

    def describe(self):
        return _describe("append-KV", [
            "%s rows" % _SHORT.get(self.in_type, self.in_type),
            "%s cache" % _SHORT.get(self.kv_type, self.kv_type),
            "%d heads" % self.num_kv_heads, "dim %d" % self.head_dim,
            "page %d" % self.page_size, self.layout], None)


@_memo_hash
@dataclass(frozen=True)
class MergeStatesVariant:
    dtype: str = "float32"
    num_heads: int = 32
    head_dim: int = 128

    def to_c(self):
        v = _lib.attn_merge_states_variant()
        _lib.load().attn_merge_states_variant_init(ctypes.byref(v))
        v.dtype = dtype_code(self.dtype, "v")
        v.num_heads, v.head_dim = self.num_heads, self.head_dim
        return v

    def describe(self):
        return _describe("merge_states", [_SHORT.get(self.dtype, self.dtype),
                                          "%d heads" % self.num_heads, "dim %d" % self.head_dim],
                         None)


@_memo_hash
@dataclass(frozen=True)
class MlaDecodeVariant:
    """Absorbed MLA decode (``attn.mla_decode``; docs/semantics.md)."""
    q_type: str = "bfloat16"
    kv_type: Optional[str] = None  # None: q_type; else float8_e4m3fn
    num_q_heads: int = 16
    kv_lora_rank: int = 512
    rope_dim: int = 64
    page_size: int = 64
    query_len: int = 1
    causal: bool = False
    scale: float = 0.0  # 0: 1/sqrt(kv_lora_rank + rope_dim)
    write_lse: bool = False
    batch_invariant: bool = False  # docs/semantics.md, "Batch invariance"

    def to_c(self):
        v = _lib.attn_mla_decode_variant()
        _lib.load().attn_mla_decode_variant_init(ctypes.byref(v))
        v.q_type = dtype_code(self.q_type, "q_data_type")
        v.kv_type = dtype_code(self.kv_type or self.q_type, "kv_data_type")
        v.num_q_heads, v.kv_lora_rank, v.rope_dim = (self.num_q_heads, self.kv_lora_rank,
                                                     self.rope_dim)
        v.page_size, v.query_len = self.page_size, self.query_len
        v.causal, v.scale, v.write_lse = self.causal, self.scale, self.write_lse
        v.batch_invariant = self.batch_invariant
        return v

    def describe(self):
        kv = self.kv_type or self.q_type
        return _describe("MLA decode", [
            "q %s" % _SHORT.get(self.q_type, self.q_type), "%s cache" % _SHORT.get(kv, kv),
            "%d heads" % self.num_q_heads, "rank %d + rope %d" % (self.kv_lora_rank,
                                                                 self.rope_dim),
            "page %d" % self.page_size,
            "%d query tokens" % self.query_len if self.query_len > 1 else "",
            "causal" if self.causal else "", "lse" if self.write_lse else "",
            "batch invariant" if self.batch_invariant else ""], None)


# --- handles ----------------------------------------------------------------


class Handle:
    """Owns one C object; destroys it once, when closed or collected."""

    _destroy = None

    def __init__(self, device):
        self._ptr = None
        self._closed = False
        self.device = device

    @property
    def ptr(self):
        if not self._ptr:
            if getattr(self, "_closed", False):
                raise RuntimeError("attn: this %s handle is closed (used after close())"
                                   % type(self).__name__)
            raise RuntimeError("attn: this %s handle holds no C object (its creation failed)"
                               % type(self).__name__)
        return self._ptr

    @property
    def closed(self):
        """Whether close() has run."""
        return getattr(self, "_closed", False)

    def __copy__(self):
        raise TypeError("attn: a %s handle owns a C object and cannot be copied"
                        % type(self).__name__)

    def __deepcopy__(self, memo):
        return self.__copy__()

    def __reduce__(self):
        raise TypeError("attn: a %s handle owns a C object and cannot be pickled"
                        % type(self).__name__)

    def close(self):
        """Destroys the C object now. A second close() does nothing (the C
        object is destroyed once); any other use after it raises."""
        ptr, self._ptr = getattr(self, "_ptr", None), None
        self._closed = True
        if not ptr or not self._destroy:
            return
        try:
            fn = getattr(_lib._lib, self._destroy)
            with _runtime.on_device(self.device):
                fn(ptr)  # its status: the library refuses a handle that is not live
        except Exception:  # interpreter shutdown (modules torn down): nothing to do
            pass

    def __del__(self):
        self.close()

    def _create(self, function, *args, progress=None, what=""):
        out = ctypes.c_void_p()
        ctx = _runtime.context(self.device)
        desc = None
        if progress is not None:
            desc = "%s for %s" % (progress, _runtime.arch_name(self.device))
        with _runtime.on_device(self.device):
            _lib.call(function, ctx, *args, ctypes.byref(out), progress=desc, what=what)
        self._ptr = out.value


class KernelHandle(Handle):
    """A kernel made from a variant: ``_create_fn(context, &variant,
    *limits, &out)`` (may JIT-compile: the progress line), launched with
    ``_run_fn(handle, &args, *extra, stream)``; ``planned`` is the plan
    generation the wrappers last planned it for."""

    _create_fn = _run_fn = None

    def __init__(self, device, variant, *limits, progress=None):
        super().__init__(device)
        self.variant = variant
        self._c_variant = variant.to_c()
        self._create(self._create_fn, ctypes.byref(self._c_variant), *limits,
                     progress=progress or variant.describe())
        self.planned = None
        self._launch_fn = None

    def launch_function(self):
        """``_run_fn`` taking addresses only (``_lib.launch_function``),
        for the wrappers' cached run path."""
        if self._launch_fn is None:
            self._launch_fn = _lib.launch_function(self._run_fn)
        return self._launch_fn

    def _launch(self, args, stream, *extra):
        if _runtime.other_device(self.device):
            with _runtime.on_device(self.device):
                _lib.call(self._run_fn, self.ptr, ctypes.byref(args), *extra, stream)
        else:
            _lib.call(self._run_fn, self.ptr, ctypes.byref(args), *extra, stream)

    def run(self, args, stream):
        self._launch(args, stream)

    def _plan(self, function, *args):
        if _runtime.other_device(self.device):
            with _runtime.on_device(self.device):
                _lib.call(function, self.ptr, *args)
        else:  # the usual case, without a context manager
            _lib.call(function, self.ptr, *args)


class Decode(KernelHandle):
    _destroy = "attn_decode_destroy"
    _create_fn, _run_fn = "attn_decode_create", "attn_decode_run"

    def __init__(self, device, variant, max_batch):
        super().__init__(device, variant, max_batch)
        self.max_batch = max_batch

    def plan(self, seq_lens, for_graph, stream):
        self._plan("attn_decode_plan", _lib.int32_array(seq_lens, "seq_lens"), len(seq_lens),
                   int(bool(for_graph)), stream)


class Prefill(KernelHandle):
    _destroy = "attn_prefill_destroy"
    _create_fn, _run_fn = "attn_prefill_create", "attn_prefill_run"

    def __init__(self, device, variant, max_batch, max_q_tokens):
        super().__init__(device, variant, max_batch, max_q_tokens)
        self.max_batch = max_batch
        self.max_q_tokens = max_q_tokens

    def plan(self, cu_q, cu_kv, for_graph, stream):
        self._plan("attn_prefill_plan", _lib.int32_array(cu_q, "qo_indptr"),
                   _lib.int32_array(cu_kv, "kv_indptr"), len(cu_q) - 1, int(bool(for_graph)),
                   stream)

    def plan_paged(self, cu_q, seq_lens, for_graph, stream):
        self._plan("attn_prefill_plan_paged", _lib.int32_array(cu_q, "qo_indptr"),
                   _lib.int32_array(seq_lens, "seq_lens"), len(seq_lens), int(bool(for_graph)),
                   stream)


class MixedBatch(KernelHandle):
    _destroy = "attn_mixed_batch_destroy"
    _create_fn, _run_fn = "attn_mixed_batch_create", "attn_mixed_batch_run"

    def __init__(self, device, variant, max_batch, max_q_tokens):
        super().__init__(device, variant, max_batch, max_q_tokens,
                         progress=variant.describe("mixed prefill+decode"))
        self.max_batch = max_batch
        self.max_q_tokens = max_q_tokens

    def plan(self, cu_q, seq_lens, num_prefills, for_graph, stream):
        self._plan("attn_mixed_batch_plan", _lib.int32_array(cu_q, "query_start_loc"),
                   _lib.int32_array(seq_lens, "seq_lens"), len(seq_lens), num_prefills,
                   int(bool(for_graph)), stream)

    def run(self, args, seq_lens_ptr, stream):
        self._launch(args, stream, seq_lens_ptr)


class Cascade(KernelHandle):
    _destroy = "attn_cascade_destroy"
    _create_fn, _run_fn = "attn_cascade_create", "attn_cascade_run"

    def __init__(self, device, variant, max_batch, max_levels):
        super().__init__(device, variant, max_batch, max_levels,
                         progress=variant.describe().replace("decode", "cascade", 1))
        self.max_batch = max_batch
        self.max_levels = max_levels

    def plan(self, levels, suffix_lens, for_graph, stream):
        """levels: [(group_starts, kv_lens)] host lists, outermost first."""
        keep = []
        c_levels = (_lib.attn_cascade_level * max(1, len(levels)))()
        for i, (starts, lens) in enumerate(levels):
            a = _lib.int32_array(starts, "levels[%d] group starts" % i)
            b = _lib.int32_array(lens, "levels[%d] kv lengths" % i)
            keep += [a, b]
            c_levels[i].group_starts = ctypes.cast(a, ctypes.POINTER(ctypes.c_int32))
            c_levels[i].kv_lens = ctypes.cast(b, ctypes.POINTER(ctypes.c_int32))
            c_levels[i].num_groups = len(lens)
        self._plan("attn_cascade_plan", c_levels, len(levels),
                   _lib.int32_array(suffix_lens, "suffix lengths"),
                   len(suffix_lens), int(bool(for_graph)), stream)


class MergeStates(KernelHandle):
    _destroy = "attn_merge_states_destroy"
    _create_fn, _run_fn = "attn_merge_states_create", "attn_merge_states_run"


class MlaDecode(KernelHandle):
    _destroy = "attn_mla_decode_destroy"
    _create_fn, _run_fn = "attn_mla_decode_create", "attn_mla_decode_run"

    def __init__(self, device, variant, max_batch):
        super().__init__(device, variant, max_batch)
        self.max_batch = max_batch

    def plan(self, seq_lens, for_graph, stream):
        self._plan("attn_mla_decode_plan", _lib.int32_array(seq_lens, "seq_lens"),
                   len(seq_lens), int(bool(for_graph)), stream)


class AppendKV(KernelHandle):
    _destroy = "attn_append_kv_destroy"
    _create_fn, _run_fn = "attn_append_kv_create", "attn_append_kv_run"


class CacheOps(Handle):
    _destroy = "attn_cache_ops_destroy"

    def __init__(self, device):
        super().__init__(device)
        self._create("attn_cache_ops_create", progress="cache ops (copy_blocks, advance_step)")

    def copy_blocks(self, layers, pairs, stream):
        flat = [x for p in pairs for x in p]
        arr = _lib.int64_array(flat, "block pairs")
        with _runtime.on_device(self.device):
            _lib.call("attn_copy_blocks", self.ptr, ctypes.byref(layers),
                      ctypes.cast(arr, ctypes.POINTER(ctypes.c_int64)), len(pairs), stream)

    def copy_blocks_device(self, layers, pairs_ptr, num_pairs, stream):
        with _runtime.on_device(self.device):
            _lib.call("attn_copy_blocks_device", self.ptr, ctypes.byref(layers), pairs_ptr,
                      num_pairs, stream)

    def advance_step(self, args, decode, stream):
        with _runtime.on_device(self.device):
            _lib.call("attn_advance_step", self.ptr, ctypes.byref(args),
                      decode.ptr if decode is not None else None, stream)


class MetadataBuilder(Handle):
    _destroy = "attn_metadata_builder_destroy"

    def __init__(self, device, page_size, max_batch, max_tokens, max_pages_per_seq,
                 num_pages=0):
        super().__init__(device)
        limits = _lib.init(_lib.attn_metadata_limits)
        limits.page_size = page_size
        limits.num_pages = num_pages
        limits.max_batch = max_batch
        limits.max_tokens = max_tokens
        limits.max_pages_per_seq = max_pages_per_seq
        self.limits = limits
        out = ctypes.c_void_p()
        with _runtime.on_device(device):
            _lib.call("attn_metadata_builder_create", ctypes.byref(limits), ctypes.byref(out))
        self._ptr = out.value

    def build(self, requests, stream):
        """requests: [(is_prefill, query_len, context_len, page_ids)];
        returns the attn_metadata struct (host arrays valid until the next
        build)."""
        reqs = (_lib.attn_scheduled_request * max(1, len(requests)))()
        keep = []
        for i, (is_prefill, query_len, context_len, pages) in enumerate(requests):
            arr = _lib.int32_array(pages, "block_tables[%d]" % i)
            keep.append(arr)
            reqs[i].is_prefill = is_prefill
            reqs[i].query_len = query_len
            reqs[i].context_len = context_len
            reqs[i].page_table = ctypes.cast(arr, ctypes.POINTER(ctypes.c_int32))
            reqs[i].num_pages = len(pages)
        md = _lib.init(_lib.attn_metadata)
        with _runtime.on_device(self.device):
            _lib.call("attn_metadata_builder_build", self.ptr, reqs, len(requests), stream,
                      ctypes.byref(md))
        return md


# Handles without plans are shared per process (one per device and variant).
_shared_lock = threading.Lock()
_shared = {}


def shared(cls, device, *key):
    """A process-wide handle of ``cls`` for (device, key...)."""
    k = (cls.__name__, device) + key
    h = _shared.get(k)
    if h is None or h.closed:
        with _shared_lock:
            h = _shared.get(k)
            if h is None or h.closed:
                h = cls(device, *key)
                _shared[k] = h
    return h


# --- compiling without a GPU --------------------------------------------------


class Compiled:
    """A compiled variant: ``kernel_name`` (the cubin's entry symbol),
    ``source`` (the generated CUDA C++), ``cubin_size`` (bytes), ``arch``
    and ``key`` (the kernel key, attn-aot's and the JIT's name for it)."""

    __slots__ = ("kernel_name", "source", "cubin_size", "arch", "key")

    def __init__(self, kernel_name, source, cubin_size, arch, key):
        self.kernel_name = kernel_name
        self.source = source
        self.cubin_size = cubin_size
        self.arch = arch
        self.key = key

    def __repr__(self):
        return "Compiled(%s for %s: %d cubin bytes, %d source chars)" % (
            self.kernel_name, self.arch, self.cubin_size, len(self.source))


def kernel_key(variant):
    lib = _lib.load()
    c = variant.to_c()
    fn = ("attn_decode_kernel_key" if isinstance(variant, DecodeVariant)
          else "attn_mla_decode_kernel_key" if isinstance(variant, MlaDecodeVariant)
          else "attn_prefill_kernel_key")
    length = ctypes.c_size_t(0)
    _lib.call(fn, ctypes.byref(c), None, 0, ctypes.byref(length))
    buf = ctypes.create_string_buffer(length.value + 1)
    _lib.call(fn, ctypes.byref(c), buf, len(buf), ctypes.byref(length))
    del lib
    return buf.value.decode()


def compile_variant(variant, arch):
    """Runs the compiler and NVRTC on ``variant`` for ``arch`` (no GPU)."""
    lib = _lib.load()
    c = variant.to_c()
    fn = "attn_compile_decode" if isinstance(variant, DecodeVariant) else "attn_compile_prefill"
    out = ctypes.c_void_p()
    _lib.call(fn, ctypes.byref(c), _lib.cstr(arch, "arch"), ctypes.byref(out),
              progress="%s for %s" % (variant.describe(), arch))
    try:
        name = lib.attn_compiled_kernel_name(out.value) or b""
        source = lib.attn_compiled_source(out.value) or b""
        size = lib.attn_compiled_cubin_size(out.value)
        return Compiled(name.decode(), source.decode("utf-8", "replace"), int(size), arch,
                        kernel_key(variant))
    finally:
        lib.attn_compiled_destroy(out.value)
