"""Argument fuzzing of the attn Python package (hypothesis; no GPU, no torch).

Every public entry point, given arguments from the whole range (ints past
int32 and int64, negatives, bools, NaN and infinities, strings with NULs,
wrong types, lying DLPack and __cuda_array_interface__ producers), either
takes exactly the value it was given (a variant's C struct and kernel key
say that value) or raises TypeError or ValueError (NotImplementedError for
a valid request attn does not serve). Never another exception, a crash or
a silently changed value. Kernel keys need no NVRTC; a few samples compile.

    ATTN_LIBRARY=build/lib/libattn_c.so /usr/bin/python3 -m pytest -q python/tests/test_fuzz.py
"""
import ctypes
import operator
import os
import tempfile

import pytest

# Hypothesis keeps caches (its Unicode tables) in ./.hypothesis unless told
# otherwise: not in the source tree.
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY",
                      os.path.join(tempfile.gettempdir(), "attn-hypothesis-%d" % os.getuid()))
hypothesis = pytest.importorskip("hypothesis", reason="the fuzz tests need hypothesis "
                                                      "(apt install python3-hypothesis)")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import attn  # noqa: E402
import attn.flashinfer as fi  # noqa: E402
import attn.vllm_backend as vb  # noqa: E402
from attn import _lib, _runtime  # noqa: E402
from attn import _tensors as _t  # noqa: E402

import hostile  # noqa: E402

ERRORS = (TypeError, ValueError)
REFUSALS = ERRORS + (NotImplementedError,)


# $ATTN_FUZZ_SCALE multiplies every test's examples (longer local runs).
SCALE = float(os.environ.get("ATTN_FUZZ_SCALE", "1"))


def fuzz(examples):
    """A modest run per test (all of them take seconds in CI), no example
    database in the source tree."""
    return settings(max_examples=max(1, int(examples * SCALE)), deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _library_available():
    try:
        _lib.load()
        return True
    except OSError:
        return False


needs_lib = pytest.mark.skipif(
    not os.environ.get("ATTN_LIBRARY") and not _library_available(),
    reason="the attn C library is not built (set ATTN_LIBRARY to build/lib/libattn_c.so)")


class Index:
    """An integer scalar that is not an int (numpy's and torch's are such)."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value

    def __repr__(self):
        return "Index(%d)" % self.value


EDGES = [0, 1, -1, 2, 8, 16, 64, 128, 2 ** 31 - 1, 2 ** 31, -2 ** 31, -2 ** 31 - 1, 2 ** 32,
         2 ** 32 + 64, 2 ** 33, 2 ** 63 - 1, 2 ** 63, -2 ** 63, -2 ** 63 - 1, 2 ** 64 - 1, 2 ** 64]
INTS = st.one_of(st.sampled_from(EDGES), st.integers(-2 ** 70, 2 ** 70), st.integers(-4, 300))
FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                   st.sampled_from([0.0, -0.0, 1e-46, 1e-45, 3.4e38, 3.5e38, 1e300]))
TEXT = st.one_of(st.text(max_size=8), st.sampled_from(["", "\0", "a\0b", "NHD", "HND", "sm_90a"]))
HOSTILE = st.one_of(INTS, INTS.map(Index), st.booleans(), FLOATS, TEXT, st.binary(max_size=4),
                    st.none(), st.just([1]), st.just((1, 2)), st.just(object()))


def exact_int(value):
    """The int a value stands for when attn takes it (None: not an int)."""
    if isinstance(value, bool) or isinstance(value, (float, str, bytes)) or value is None:
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


# --- variants: kernel keys and C structs ---------------------------------------------

DECODE_DEFAULTS = dict(num_q_heads=32, num_kv_heads=8, head_dim=128, page_size=16,
                       q_dtype="bfloat16", kv_dtype=None, layout="NHD", query_len=1,
                       causal=True, window_left=None, softcap=None, scale=None, alibi=False,
                       sinks=False, write_lse=False, score_mod=None, mask_mod=None,
                       per_head_kv_scale=False, kind="decoder")
PREFILL_DEFAULTS = dict(num_q_heads=32, num_kv_heads=8, head_dim=128, q_dtype="bfloat16",
                        paged=False, kv_dtype=None, page_size=16, layout="NHD", causal=True,
                        window_left=None, softcap=None, scale=None, alibi=False, sinks=False,
                        write_lse=False, score_mod=None, mask_mod=None, per_head_kv_scale=False,
                        fp8_compute=False, fp8_query=False, kind="decoder")
VALID = dict(
    num_q_heads=st.sampled_from([1, 8, 32, 64]), num_kv_heads=st.sampled_from([1, 2, 8]),
    head_dim=st.sampled_from([64, 128, 256]), page_size=st.sampled_from([1, 16, 256]),
    query_len=st.sampled_from([1, 2, 4]), window_left=st.one_of(st.none(), INTS),
    softcap=st.one_of(st.none(), FLOATS), scale=st.one_of(st.none(), FLOATS),
    causal=st.booleans(), alibi=st.booleans(), sinks=st.booleans(), write_lse=st.booleans(),
    per_head_kv_scale=st.booleans(), paged=st.booleans(), fp8_compute=st.booleans(),
    fp8_query=st.booleans(), layout=st.sampled_from(["NHD", "HND", "nhd"]),
    score_mod=st.one_of(st.none(), TEXT), mask_mod=st.one_of(st.none(), TEXT),
    q_dtype=st.sampled_from(["bfloat16", "float16", "bf16"]),
    kv_dtype=st.sampled_from([None, "float8_e4m3fn", "float8_e5m2"]),
    kind=st.sampled_from(["decoder", "encoder", "cross"]))


def variant_kwargs(defaults):
    fields = {k: st.one_of(VALID[k], HOSTILE) for k in defaults if k in VALID}
    return st.fixed_dictionaries({}, optional=fields)


def flag(value):
    """0 or 1 for a flag attn takes (a bool, or an int that is 0 or 1)."""
    return int(value) if isinstance(value, bool) else exact_int(value)


def _flag(key, name, value):
    return "%s=%d" % (name, value) in key


def check_variant(kind, kw, key, c):
    """An accepted variant's C struct and kernel key hold exactly ``kw``."""
    defaults = DECODE_DEFAULTS if kind == "decode" else PREFILL_DEFAULTS
    v = dict(defaults, **kw)
    ints = {k: exact_int(v[k]) for k in ("num_q_heads", "num_kv_heads", "head_dim", "page_size",
                                         "query_len") if k in v}
    assert None not in ints.values(), (kw, ints)
    assert (c.num_q_heads, c.num_kv_heads, c.head_dim) == \
        (ints["num_q_heads"], ints["num_kv_heads"], ints["head_dim"])
    assert "heads=%d/%d dim=%d" % (c.num_q_heads, c.num_kv_heads, c.head_dim) in key, key
    paged = kind == "decode" or flag(v["paged"])
    if paged:
        assert c.page_size == ints["page_size"] and "page=%d " % c.page_size in key, key
        layout = ("nhd", "hnd")[v["layout"]] if isinstance(v["layout"], int) else \
            v["layout"].lower()
        assert "layout=%s" % layout in key, key
    if kind == "decode":
        assert c.query_len == ints["query_len"] and "qlen=%d " % c.query_len in key, key
    k = c.knobs
    window = v["window_left"]
    if window is None or exact_int(window) < 0:
        assert k.window_left == -1 and "window_left=0" in key, key
    else:
        assert k.window_left == exact_int(window) and "window_left=1" in key, (window, key)
    for name in ("softcap", "scale"):
        given_value = v[name]
        stored = getattr(k, name)
        if given_value is None:
            assert stored == 0.0
        else:
            assert stored == ctypes.c_float(float(given_value)).value, (name, given_value)
            assert (stored == 0.0) == (float(given_value) == 0.0), (name, given_value)
    assert _flag(key, "softcap", 1 if k.softcap else 0)
    flags = [("causal", "causal"), ("alibi", "alibi"), ("sinks", "sinks"),
             ("write_lse", "write_lse")]
    if paged:
        flags.append(("per_head_kv_scale", "per_head_kv_scale"))
    for name, word in flags:
        assert _flag(key, word, flag(v[name])), (name, v[name], key)
        assert getattr(k if hasattr(k, name) else c, name) == flag(v[name])
    for region in ("score_mod", "mask_mod"):
        text = v[region]
        stored = getattr(k, region)
        if not text:
            assert stored is None and region + "=" not in key
        else:
            want = text.encode("utf-8") if isinstance(text, str) else text
            assert stored == want and region + "={" in key, (region, key)


@needs_lib
@fuzz(1000)
@given(kind=st.sampled_from(["decode", "prefill"]), data=st.data())
def test_kernel_keys_hold_exactly_the_variant_given(kind, data):
    defaults = DECODE_DEFAULTS if kind == "decode" else PREFILL_DEFAULTS
    kw = data.draw(variant_kwargs(defaults))
    try:
        key = attn.kernel_key(kind, **kw)
    except REFUSALS:
        return
    make = attn._decode_variant if kind == "decode" else attn._prefill_variant
    check_variant(kind, kw, key, make(**dict(defaults, **kw)).to_c())


@needs_lib
@fuzz(3)
@given(head_dim=st.sampled_from([64, 128]), window_left=st.integers(0, 2 ** 31 - 1),
       softcap=st.floats(1e-30, 3e38))
def test_a_few_accepted_variants_compile(head_dim, window_left, softcap):
    c = attn.compile_decode("sm_80", num_q_heads=4, num_kv_heads=4, head_dim=head_dim,
                            window_left=window_left, softcap=softcap)
    assert c.cubin_size > 0 and "dim=%d " % head_dim in c.key
    assert "window_left=1" in c.key and "softcap=1" in c.key


# --- the C boundary itself ------------------------------------------------------------

FIELDS = [(s, name) for s in _lib.STRUCTS for name, _ in s._fields_ if name in s._rules_]


@fuzz(1500)
@given(field=st.sampled_from(FIELDS), value=HOSTILE)
def test_struct_fields_hold_exactly_what_they_take(field, value):
    struct, name = field
    obj = struct()
    try:
        setattr(obj, name, value)
    except ERRORS:
        return
    kind = struct._rules_[name][2]
    stored = getattr(obj, name)
    if kind == _lib._INT:
        assert stored == exact_int(value), (name, value, stored)
    elif kind == _lib._FLAG:
        assert stored == flag(value) and stored in (0, 1), (name, value)
    elif kind == _lib._POINTER:
        assert (stored or 0) == (exact_int(value) or 0), (name, value, stored)
    elif kind == _lib._FLOAT:
        assert stored == ctypes.c_float(float(value)).value and (stored == 0) == (value == 0)
    else:
        want = value.encode("utf-8") if isinstance(value, str) else value
        assert stored == (want or None), (name, value, stored)


ARGS = [(fn, i) for fn, rules in _lib.ARG_RULES.items() for i, _, _ in rules]


@fuzz(600)
@given(arg=st.sampled_from(ARGS), value=HOSTILE)
def test_c_call_arguments_pass_exactly_or_are_refused(arg, value):
    function, index = arg
    args = [0] * (index + 1)
    args[index] = value
    try:
        out = _lib.check_args(function, args)
    except ERRORS:
        return
    rule = [r for i, r, _ in _lib.ARG_RULES[function] if i == index][0]
    if rule[2] == _lib._STRING:
        want = value.encode("utf-8") if isinstance(value, str) else value
        assert out[index] == (want or None)
    else:
        assert out[index] == exact_int(value) and rule[0] <= out[index] <= rule[1]


@needs_lib
@fuzz(500)
@given(num_pages=HOSTILE, page_size=st.one_of(st.sampled_from([1, 16]), HOSTILE),
       heads=st.one_of(st.just(8), HOSTILE), dim=st.one_of(st.just(128), HOSTILE),
       layout=st.one_of(st.sampled_from(["NHD", "HND"]), HOSTILE))
def test_kv_cache_shape_is_exact_or_refused(num_pages, page_size, heads, dim, layout):
    try:
        shape = attn.kv_cache_shape(num_pages, page_size, heads, dim, layout)
    except REFUSALS:
        return
    nhd = layout == 0 if isinstance(layout, int) else layout.upper() == "NHD"
    inner = (page_size, heads) if nhd else (heads, page_size)
    assert shape == (2, exact_int(num_pages)) + tuple(exact_int(x) for x in inner) + \
        (exact_int(dim),)


# --- arrays a producer describes ------------------------------------------------------

TYPESTRS = st.one_of(st.sampled_from(["<f2", "<f4", "<i4", "<i8", "|u1", "<V2", ">f2", "f2",
                                      "<f3", ""]), TEXT, HOSTILE)
DIMS = st.lists(st.one_of(st.integers(0, 64), INTS, st.integers(0, 64).map(Index),
                          st.booleans(), FLOATS), max_size=6)
SHAPES = st.one_of(DIMS, DIMS.map(tuple), HOSTILE)
STRIDES = st.one_of(st.none(), DIMS.map(tuple), HOSTILE)
DATA = st.one_of(st.tuples(st.one_of(st.integers(0, 2 ** 48), INTS), st.booleans()), HOSTILE)


@fuzz(1500)
@given(typestr=TYPESTRS, shape=SHAPES, strides=STRIDES, data=DATA,
       mask=st.one_of(st.none(), HOSTILE))
def test_cuda_array_interfaces_are_read_exactly_or_refused(typestr, shape, strides, data, mask):
    obj = hostile.cai(typestr=typestr, shape=shape, strides=strides, data=data, mask=mask)
    try:
        t = _t.adapt(obj, "q")
    except ERRORS as e:
        assert str(e).startswith("q: "), e
        return
    assert t.shape == tuple(exact_int(x) for x in shape)
    assert t.ptr == ((data[0] or 0) if data is not None else 0)
    if strides is not None:
        assert tuple(s * t.itemsize for s in t.strides) == tuple(exact_int(x) for x in strides)
    assert 0 <= t.ptr < 2 ** 64 and all(0 <= s < 2 ** 63 for s in t.shape)


ADDRESSES = st.sampled_from([hostile.UNMAPPED, hostile.LOW, 0xDEAD0000])
SMALL_SHAPES = st.lists(st.one_of(st.integers(0, 64), INTS), max_size=5).map(tuple)


@fuzz(1200)
@given(shape=st.one_of(SMALL_SHAPES, st.none(), ADDRESSES),
       strides=st.one_of(st.none(), SMALL_SHAPES, ADDRESSES),
       ndim=st.one_of(st.none(), st.sampled_from([0, 1, 3, 64, 65, -1, 2 ** 31 - 1, -2 ** 31])),
       code=st.integers(0, 255), bits=st.sampled_from([8, 16, 32, 64, 0, 7, 255]),
       lanes=st.sampled_from([1, 0, 2, 65535]), device_type=st.sampled_from([2, 1, 13, 0, -1]),
       device_id=st.sampled_from([0, 1, -1, 2 ** 31 - 1]),
       data=st.sampled_from([0x7F0000001000, 0, 2 ** 64 - 2, 1]),
       byte_offset=st.sampled_from([0, 256, 2 ** 63, 2 ** 64 - 1]),
       capsule_pointer=st.one_of(st.none(), ADDRESSES),
       capsule_name=st.one_of(st.sampled_from([b"dltensor", b"used_dltensor",
                                               b"dltensor_versioned", b"", None]), ADDRESSES),
       device=st.one_of(st.none(), HOSTILE, st.tuples(st.sampled_from([2, 1]), INTS)))
def test_dlpack_producers_are_read_exactly_or_refused(shape, strides, ndim, code, bits, lanes,
                                                      device_type, device_id, data, byte_offset,
                                                      capsule_pointer, capsule_name, device):
    if isinstance(shape, tuple) and ndim is None:
        ndim = len(shape)
    producer = hostile.Producer(shape=shape, strides=strides, ndim=ndim or 0, code=code,
                                bits=bits, lanes=lanes, device_type=device_type,
                                device_id=device_id, data=data, byte_offset=byte_offset,
                                capsule_pointer=capsule_pointer, capsule_name=capsule_name,
                                device=device)
    try:
        t = _t.adapt(producer, "q")
    except ERRORS as e:
        assert str(e).startswith("q: "), e
        return
    assert 0 <= t.ptr < 2 ** 64
    if isinstance(shape, tuple) and ndim == len(shape) and capsule_pointer is None:
        assert t.shape == shape and t.ptr == data + byte_offset
        if isinstance(strides, tuple) and len(strides) == len(shape):
            assert t.strides == strides


# --- the FlashInfer-style wrappers ------------------------------------------------------


class ReachedTorch(Exception):
    """plan() got past every argument check (the rest needs torch)."""


INDEX_LISTS = st.one_of(st.lists(st.one_of(st.integers(0, 8), INTS, HOSTILE), max_size=4),
                        HOSTILE)


@fuzz(1000)
@given(indptr=st.one_of(st.just([0, 1, 3]), INDEX_LISTS),
       indices=st.one_of(st.just([0, 1, 2]), INDEX_LISTS),
       last_page_len=st.one_of(st.just([16, 5]), INDEX_LISTS),
       heads=st.one_of(st.just((32, 8)), st.tuples(HOSTILE, HOSTILE)),
       head_dim=st.one_of(st.just(128), HOSTILE), page_size=st.one_of(st.just(16), HOSTILE),
       kw=st.fixed_dictionaries({}, optional=dict(
           window_left=HOSTILE, logits_soft_cap=HOSTILE, sm_scale=HOSTILE, q_len_per_req=HOSTILE,
           pos_encoding_mode=st.one_of(st.sampled_from(["NONE", "ALIBI"]), HOSTILE),
           q_data_type=st.one_of(st.sampled_from(["float16", "bfloat16"]), HOSTILE),
           kv_data_type=st.one_of(st.sampled_from(["float8_e4m3fn"]), HOSTILE),
           score_mod=TEXT, mask_mod=HOSTILE, window_right=HOSTILE, stream=HOSTILE)))
def test_decode_plan_takes_exact_arguments_or_refuses(indptr, indices, last_page_len, heads,
                                                      head_dim, page_size, kw):
    made = []

    def record(**variant):
        made.append(variant)
        return real(**variant)

    def reached(what):
        raise ReachedTorch(what)

    real = fi.DecodeVariant
    w = fi.BatchDecodeWithPagedKVCacheWrapper(None, "NHD")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fi, "DecodeVariant", record)
        mp.setattr(_runtime, "require_torch", reached)
        try:
            w.plan(indptr, indices, last_page_len, heads[0], heads[1], head_dim, page_size, **kw)
        except REFUSALS:
            return
        except ReachedTorch:
            pass
    v = made[-1]
    assert (v["num_q_heads"], v["num_kv_heads"], v["head_dim"], v["page_size"]) == \
        (exact_int(heads[0]), exact_int(heads[1]), exact_int(head_dim), exact_int(page_size))
    window = kw.get("window_left", -1)
    assert v["knobs"].window_left == (-1 if window is None or exact_int(window) < 0
                                      else exact_int(window))
    assert v["query_len"] == exact_int(kw.get("q_len_per_req", 1))


@fuzz(400)
@given(kw=st.fixed_dictionaries({}, optional=dict(
    use_cuda_graph=HOSTILE, max_pages_per_request=HOSTILE, kv_layout=HOSTILE,
    paged_kv_indptr_buffer=st.one_of(st.just([0, 0]), HOSTILE),
    paged_kv_last_page_len_buffer=st.one_of(st.just([1]), HOSTILE),
    paged_kv_indices_buffer=st.one_of(st.just([0] * 8), HOSTILE))))
def test_wrapper_constructors_take_exact_sizes_or_refuse(kw):
    try:
        w = fi.BatchDecodeWithPagedKVCacheWrapper(None, **kw)
    except REFUSALS:
        return
    if w.is_cuda_graph_enabled and "max_pages_per_request" in kw:
        assert w._fixed_stride == exact_int(kw["max_pages_per_request"])
    assert 4 * w._fixed_batch * w._fixed_stride <= _lib.MAX_PREALLOCATION_BYTES


# --- the vLLM backend ----------------------------------------------------------------


@fuzz(600)
@given(num_heads=st.one_of(st.just(8), HOSTILE), head_size=st.one_of(st.just(128), HOSTILE),
       scale=st.one_of(st.just(0.1), HOSTILE), kw=st.fixed_dictionaries({}, optional=dict(
           num_kv_heads=HOSTILE, sliding_window=HOSTILE, logits_soft_cap=HOSTILE,
           alibi_slopes=st.one_of(st.lists(HOSTILE, max_size=8), HOSTILE),
           kv_cache_dtype=st.one_of(st.sampled_from(["auto", "fp8"]), TEXT),
           attn_type=st.one_of(st.sampled_from(["decoder", "encoder_only"]), HOSTILE))))
def test_vllm_impl_takes_exact_arguments_or_refuses(num_heads, head_size, scale, kw):
    try:
        impl = vb.AttnImpl(num_heads, head_size, scale, **kw)
    except REFUSALS:
        return
    assert (impl.num_heads, impl.head_size) == (exact_int(num_heads), exact_int(head_size))
    if kw.get("sliding_window") is not None:
        assert impl.window_left == exact_int(kw["sliding_window"]) - 1
    c = impl._variant("bfloat16", 16, "NHD").to_c()
    assert (c.num_q_heads, c.head_dim) == (impl.num_heads, impl.head_size)
    assert c.knobs.window_left == impl.window_left


@fuzz(500)
@given(args=st.tuples(*(st.one_of(st.sampled_from([1, 16, 128]), HOSTILE) for _ in range(4))),
       dtype=st.one_of(st.just("auto"), HOSTILE))
def test_vllm_cache_shape_is_exact_or_refused(args, dtype):
    try:
        shape = vb.AttnBackend.get_kv_cache_shape(*args, cache_dtype_str=dtype)
    except REFUSALS:
        return
    assert shape == (2,) + tuple(exact_int(a) for a in args)


@fuzz(400)
@given(kw=st.fixed_dictionaries({}, optional=dict(
    block_size=HOSTILE, max_num_seqs=HOSTILE, max_num_batched_tokens=HOSTILE,
    max_model_len=HOSTILE)),
    step=st.tuples(st.lists(st.one_of(st.integers(0, 4), HOSTILE), max_size=3),
                   st.lists(st.one_of(st.integers(0, 40), HOSTILE), max_size=3),
                   st.lists(st.lists(st.one_of(st.integers(0, 9), HOSTILE), max_size=3),
                            max_size=3)),
    num_pages=st.one_of(st.just(0), st.just(10), HOSTILE))
def test_vllm_builder_takes_exact_sizes_or_refuses(kw, step, num_pages):
    try:
        b = vb.AttnMetadataBuilder(device=0, dtype="bfloat16", **kw)
    except REFUSALS:
        return
    for name, value in kw.items():
        if value is not None:  # None: vLLM's config, else the default
            assert getattr(b, name) == exact_int(value)

    class Reached(Exception):
        pass

    def reached(*args, **kwargs):
        raise Reached()

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(vb, "MetadataBuilder", reached)  # the C builder needs a GPU
        try:
            b.build_step(*step, num_pages=num_pages)
        except REFUSALS:
            return
        except Reached:
            pass
