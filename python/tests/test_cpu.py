"""CPU tests of the attn Python package: no GPU and no torch needed.

Import and version, the C ABI binding (every function declared, every
struct's layout equal to the C compiler's), queries, argument errors that
name the argument (fake __cuda_array_interface__ and DLPack objects),
NVRTC compiles for sm_80/sm_89/sm_90a without a GPU, errors of bad variants,
and the compile progress line.

    ATTN_LIBRARY=build/lib/libattn_c.so /usr/bin/python3 -m pytest -q python/tests/test_cpu.py
"""
import copy
import ctypes
import dataclasses
import gc
import math
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import types
import time

import pytest

import attn
import attn.flashinfer as fi
import attn.vllm_backend as vb
from attn import _lib, _runtime
from attn import _tensors as _t
from attn._kernels import DecodeVariant, Handle, Knobs

import hostile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
HEADER = os.path.join(REPO, "capi", "include", "attn_c.h")


def _library_available():
    try:
        _lib.load()
        return True
    except OSError:
        return False


# Without $ATTN_LIBRARY, tests that need the library skip when it is not
# found (a checkout before its build); with it (ctest), they must run.
needs_lib = pytest.mark.skipif(
    not os.environ.get("ATTN_LIBRARY") and not _library_available(),
    reason="the attn C library is not built (set ATTN_LIBRARY to build/lib/libattn_c.so)")

SOFTCAP_REGION = """{
^bb0(%score: f32, %request: i32, %q_pos: i32, %k_pos: i32, %q_head: i32, %kv_head: i32):
  %cap = arith.constant 30.0 : f32
  %x = arith.divf %score, %cap : f32
  %t = math.tanh %x : f32
  %y = arith.mulf %t, %cap : f32
  attn.yield %y : f32
}"""


# --- fakes ------------------------------------------------------------------


class FakeCAI:
    """A CUDA array by __cuda_array_interface__ (no memory behind it)."""

    def __init__(self, typestr, shape, strides=None, ptr=0x7F0000000000, version=3):
        self.__cuda_array_interface__ = {
            "typestr": typestr, "shape": tuple(shape), "strides": strides,
            "data": (ptr, False), "version": version}


_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]


class FakeDLPack:
    """A DLPack producer over a ctypes DLManagedTensor (no memory behind
    it, no deleter)."""

    def __init__(self, code, bits, shape, strides=None, device_type=2, device_id=0,
                 ptr=0x7F0000001000, byte_offset=0):
        n = len(shape)
        self._shape = (ctypes.c_int64 * n)(*shape)
        self._strides = (ctypes.c_int64 * n)(*strides) if strides is not None else None
        self._name = ctypes.create_string_buffer(b"dltensor")
        mt = _t.DLManagedTensor()
        mt.dl_tensor.data = ptr
        mt.dl_tensor.device.device_type = device_type
        mt.dl_tensor.device.device_id = device_id
        mt.dl_tensor.ndim = n
        mt.dl_tensor.dtype.code, mt.dl_tensor.dtype.bits, mt.dl_tensor.dtype.lanes = code, bits, 1
        mt.dl_tensor.shape = ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64))
        if self._strides is not None:
            mt.dl_tensor.strides = ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_int64))
        mt.dl_tensor.byte_offset = byte_offset
        self._mt = mt
        self.device_type = device_type
        self.streams = []

    def __dlpack_device__(self):
        return (self.device_type, 0)

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return _PyCapsule_New(ctypes.addressof(self._mt), ctypes.addressof(self._name), None)


# --- import, version, docs ----------------------------------------------------


def test_version_matches_cmake():
    text = open(os.path.join(REPO, "CMakeLists.txt")).read()
    m = re.search(r"project\(attn\s+VERSION\s+([0-9.]+)", text)
    assert m, "CMakeLists.txt has no project(attn VERSION ...)"
    assert attn.__version__ == m.group(1)


def test_import_needs_no_library_gpu_or_torch():
    env = dict(os.environ, ATTN_LIBRARY="/nonexistent/libattn_c.so")
    code = ("import sys, attn; print(attn.__version__); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=os.path.dirname(HERE))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [attn.__version__, "False"]


def test_missing_library_is_a_clear_oserror():
    env = dict(os.environ, ATTN_LIBRARY="/nonexistent/libattn_c.so")
    code = "import attn\ntry:\n    attn.supported_archs()\nexcept OSError as e:\n    print(e)\n"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=os.path.dirname(HERE))
    assert out.returncode == 0, out.stderr
    assert "/nonexistent/libattn_c.so (not found)" in out.stdout
    assert "ATTN_LIBRARY" in out.stdout


def _public_objects():
    objs = []
    for mod in (attn, fi, vb):
        names = [n for n in getattr(mod, "__all__") if n != "__version__"]
        for n in names:
            obj = getattr(mod, n)
            objs.append(("%s.%s" % (mod.__name__, n), obj))
            if isinstance(obj, type):
                for m, member in vars(obj).items():
                    if m.startswith("_") or not callable(member) and not isinstance(
                            member, (staticmethod, classmethod, property)):
                        continue
                    objs.append(("%s.%s.%s" % (mod.__name__, n, m), getattr(obj, m)))
    return objs


def test_every_public_name_has_a_docstring():
    missing = [name for name, obj in _public_objects()
               if not (getattr(obj, "__doc__", None) or "").strip()
               and not isinstance(obj, (int, float, str, list, tuple, dict))]
    assert not missing, "no docstring: " + ", ".join(missing)


def test_help_renders():
    import pydoc
    text = pydoc.render_doc(attn, renderer=pydoc.plaintext)
    assert "BatchDecodeWithPagedKVCacheWrapper" in text
    assert "compile_decode" in text
    for mod in (fi, vb):
        assert pydoc.render_doc(mod, renderer=pydoc.plaintext)


def test_has_gpu_is_a_bool():
    assert isinstance(attn.has_gpu(), bool)


# --- the binding ---------------------------------------------------------------


def _header_functions():
    text = open(HEADER).read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return set(re.findall(r"ATTN_C_EXPORT\s+[^;{(]*?\b(attn_\w+)\s*\(", text))


@pytest.mark.skipif(not os.path.exists(HEADER), reason="capi/include/attn_c.h not in this tree")
def test_every_header_function_is_declared():
    header = _header_functions()
    assert len(header) > 40
    assert header == set(_lib.PROTOTYPES), (
        "missing: %s; extra: %s" % (sorted(header - set(_lib.PROTOTYPES)),
                                    sorted(set(_lib.PROTOTYPES) - header)))


@pytest.mark.skipif(not os.path.exists(HEADER), reason="capi/include/attn_c.h not in this tree")
def test_every_function_returns_what_the_header_says():
    text = re.sub(r"/\*.*?\*/", "", open(HEADER).read(), flags=re.S)
    ctypes_of = {"attn_status": ctypes.c_int, "int": ctypes.c_int, "void": None,
                 "const char *": ctypes.c_char_p, "size_t": ctypes.c_size_t}
    for m in re.finditer(r"ATTN_C_EXPORT\s+([^;{(]*?)\b(attn_\w+)\s*\(", text):
        returns, name = " ".join(m.group(1).split()), m.group(2)
        assert _lib.PROTOTYPES[name][0] is ctypes_of[returns], (name, returns)


@pytest.mark.skipif(not os.path.exists(HEADER), reason="capi/include/attn_c.h not in this tree")
def test_every_header_struct_is_mirrored():
    text = re.sub(r"/\*.*?\*/", "", open(HEADER).read(), flags=re.S)
    header = set(re.findall(r"typedef\s+struct\s+(attn_\w+)\s*\{", text))
    assert header == {s.__name__ for s in _lib.STRUCTS}


@pytest.mark.skipif(not os.path.exists(HEADER), reason="capi/include/attn_c.h not in this tree")
@pytest.mark.skipif(not shutil.which("cc"), reason="no C compiler (cc) to compare layouts with")
def test_struct_layouts_match_the_c_compiler():
    lines = ["#include <stdio.h>", "#include <stddef.h>", '#include "attn_c.h"',
             "int main(void) {"]
    expect = []
    for s in _lib.STRUCTS:
        n = s.__name__
        lines.append('printf("%%s %%zu\\n", "%s", sizeof(%s));' % (n, n))
        expect.append("%s %d" % (n, ctypes.sizeof(s)))
        for f, _ in s._fields_:
            lines.append('printf("%%s.%%s %%zu\\n", "%s", "%s", offsetof(%s, %s));'
                         % (n, f, n, f))
            expect.append("%s.%s %d" % (n, f, getattr(s, f).offset))
    lines.append("return 0; }")
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "layout.c"), os.path.join(d, "layout")
        open(src, "w").write("\n".join(lines))
        subprocess.check_call(["cc", "-I", os.path.dirname(HEADER), "-o", exe, src])
        got = subprocess.check_output([exe]).decode().splitlines()
    assert got == expect


@needs_lib
def test_too_small_struct_size_is_rejected():
    v = _lib.attn_decode_variant()
    _lib.load().attn_decode_variant_init(ctypes.byref(v))
    assert v.struct_size == ctypes.sizeof(_lib.attn_decode_variant)
    v.struct_size = 8
    length = ctypes.c_size_t()
    with pytest.raises(ValueError, match="struct_size is 8"):
        _lib.call("attn_decode_kernel_key", ctypes.byref(v), None, 0, ctypes.byref(length))


@needs_lib
def test_library_version_and_queries():
    release, api = attn.library_version()
    assert release == attn.__version__
    if os.path.exists(HEADER):  # the header the library was built from
        m = re.search(r"#define\s+ATTN_C_API_VERSION\s+(\d+)", open(HEADER).read())
        assert m and api == int(m.group(1))
    assert api >= 1
    assert attn.supported_archs() == ["sm_80", "sm_89", "sm_90a"]
    assert attn.supported_head_sizes() == list(range(32, 257, 8))
    assert attn.kv_cache_shape(10, 16, 8, 128) == (2, 10, 16, 8, 128)
    assert attn.kv_cache_shape(10, 16, 8, 128, layout="HND") == (2, 10, 8, 16, 128)
    with pytest.raises(ValueError, match="head"):
        attn.kv_cache_shape(10, 16, 8, 100)
    with pytest.raises(ValueError, match="layout"):
        attn.kv_cache_shape(10, 16, 8, 128, layout="XYZ")


# --- the argument adapter ------------------------------------------------------------


def test_cuda_array_interface_is_read():
    q = _t.tensor(FakeCAI("<f2", (4, 32, 128)), "q", dtype="float16", shape=(4, 32, 128))
    assert (q.dtype, q.shape, q.strides, q.ptr) == ("float16", (4, 32, 128), (4096, 128, 1),
                                                     0x7F0000000000)
    # A padded token stride (in bytes in the interface) is allowed where asked for.
    padded = FakeCAI("<f2", (4, 32, 128), strides=(2 * 6144, 256, 2))
    t = _t.tensor(padded, "q", dtype="float16", shape=(4, 32, 128), token_stride=True)
    assert t.token_stride() == 6144
    with pytest.raises(ValueError, match="q: every dimension must be dense"):
        _t.tensor(padded, "q", dtype="float16")


def test_wrong_dtype_names_the_argument():
    with pytest.raises(TypeError, match="q: expected dtype bfloat16, got float16"):
        _t.tensor(FakeCAI("<f2", (4, 32, 128)), "q", dtype="bfloat16")
    with pytest.raises(TypeError, match="lse: expected dtype float32, got int32"):
        _t.tensor(FakeCAI("<i4", (4, 32)), "lse", dtype="float32")


def test_ambiguous_typestrs_are_taken_as_expected():
    # '<V2' (ml_dtypes' bfloat16) where bfloat16 is expected; never as float16.
    t = _t.tensor(FakeCAI("<V2", (2, 8)), "q", dtype="bfloat16")
    assert t.itemsize == 2
    with pytest.raises(TypeError, match="q: expected dtype float16, got void16"):
        _t.tensor(FakeCAI("<V2", (2, 8)), "q", dtype="float16")
    # One-byte data where an FP8 format is expected (vLLM's uint8 caches).
    _t.tensor(FakeCAI("|u1", (2, 8)), "kv_cache", dtype="float8_e4m3fn")
    _t.tensor(FakeCAI("|V1", (2, 8)), "kv_cache", dtype="float8_e5m2")


def test_wrong_shape_and_strides_name_the_argument():
    with pytest.raises(ValueError, match=r"q: expected shape \(4, 32, 128\).*got \(4, 32, 64\)"):
        _t.tensor(FakeCAI("<f2", (4, 32, 64)), "q", dtype="float16", shape=(4, 32, 128))
    # Inner dimensions must be dense even where the token stride may be padded.
    inner = FakeCAI("<f2", (4, 32, 128), strides=(2 * 8192, 2 * 256, 2))
    with pytest.raises(ValueError, match="q: dimensions 1..2 must be dense"):
        _t.tensor(inner, "q", dtype="float16", token_stride=True)
    short = FakeCAI("<f2", (4, 32, 128), strides=(2 * 100, 2 * 128, 2))
    with pytest.raises(ValueError, match="q: token stride 100 is smaller than a row"):
        _t.tensor(short, "q", dtype="float16", token_stride=True)
    with pytest.raises(ValueError, match="not a multiple of the element size"):
        _t.tensor(FakeCAI("<f2", (4, 8), strides=(17, 2)), "q")


def test_not_a_cuda_array_is_a_type_error():
    with pytest.raises(TypeError, match=r"q: expected a CUDA tensor .*got list"):
        _t.tensor([1, 2, 3], "q")
    with pytest.raises(TypeError, match="q: expected a CUDA tensor, got None"):
        _t.tensor(None, "q")
    with pytest.raises(TypeError, match="unsupported __cuda_array_interface__ typestr"):
        _t.tensor(FakeCAI(">f2", (4,)), "q")


def test_dlpack_capsules_are_parsed():
    # bfloat16 and FP8 travel by DLPack with their own type codes.
    obj = FakeDLPack(4, 16, (3, 8, 64), strides=(1024, 64, 1), byte_offset=256)
    t = _t.tensor(obj, "q", dtype="bfloat16", shape=(3, 8, 64), token_stride=True, stream=7)
    assert (t.dtype, t.shape, t.strides, t.token_stride()) == ("bfloat16", (3, 8, 64),
                                                               (1024, 64, 1), 1024)
    assert t.ptr == 0x7F0000001000 + 256
    assert obj.streams == [7]
    e4m3 = _t.tensor(FakeDLPack(10, 8, (5, 2)), "cache", dtype="float8_e4m3fn")
    assert e4m3.strides == (2, 1)
    assert _t.adapt(FakeDLPack(12, 8, (1,)), "cache").dtype == "float8_e5m2"
    with pytest.raises(ValueError, match="k: expected a CUDA array, got one on cpu"):
        _t.tensor(FakeDLPack(2, 16, (2,), device_type=1), "k")
    with pytest.raises(TypeError, match=r"v: unsupported DLPack dtype \(code 5, 64 bits\)"):
        _t.tensor(FakeDLPack(5, 64, (2,)), "v")


def test_device_mismatch_names_the_argument():
    a = _t.Tensor("q", 1, "float16", (2,), (1,), 0, None)
    b = _t.Tensor("out", 1, "float16", (2,), (1,), 1, None)
    with pytest.raises(ValueError, match=r"out: expected a tensor on cuda:0 \(where q is\)"):
        _t.same_device([a, None, b])


def test_streams():
    assert _runtime.stream_handle(5) == 5

    class S:
        cuda_stream = 1234

    class P:
        def __cuda_stream__(self):
            return (0, 99)

    assert _runtime.stream_handle(S()) == 1234
    assert _runtime.stream_handle(P()) == 99
    with pytest.raises(TypeError, match="stream"):
        _runtime.stream_handle(True)
    with pytest.raises(TypeError, match="stream"):
        _runtime.stream_handle("s")
    if "torch" not in sys.modules:
        assert _runtime.stream_handle(None) == 0


def test_dtype_names():
    assert _t.dtype_name("bf16") == "bfloat16"
    assert _t.dtype_name("half") == "float16"
    assert _t.dtype_name("fp8_e4m3") == "float8_e4m3fn"
    with pytest.raises(TypeError, match="q_data_type: unknown dtype 'float7'"):
        _t.dtype_name("float7", "q_data_type")


# --- FlashInfer-style wrappers: errors before any GPU work ------------------------------


def test_decode_plan_argument_errors():
    w = fi.BatchDecodeWithPagedKVCacheWrapper(None, "NHD")
    ip, idx, last = [0, 2, 3], [0, 1, 2], [16, 5]
    with pytest.raises(ValueError, match=r"num_qo_heads \(12\) must be a multiple of "
                                         r"num_kv_heads \(8\)"):
        w.plan(ip, idx, last, 12, 8, 128, 16)
    with pytest.raises(NotImplementedError, match="ROPE_LLAMA': attn rotates 16-bit ragged "
                                                  "keys only"):
        fi.BatchPrefillWithRaggedKVCacheWrapper(None, "NHD").plan(
            [0, 4], [0, 4], 32, 8, 128, pos_encoding_mode="ROPE_LLAMA",
            kv_data_type="float8_e4m3fn")
    with pytest.raises(NotImplementedError, match="q_data_type float8_e4m3fn"):
        w.plan(ip, idx, last, 32, 8, 128, 16, q_data_type="float8_e4m3fn")
    with pytest.raises(TypeError, match="kv_data_type: expected bfloat16"):
        w.plan(ip, idx, last, 32, 8, 128, 16, q_data_type="bfloat16", kv_data_type="float32")
    with pytest.raises(NotImplementedError, match="o_data_type float32"):
        w.plan(ip, idx, last, 32, 8, 128, 16, o_data_type="float32")
    with pytest.raises(NotImplementedError, match="window_right"):
        w.plan(ip, idx, last, 32, 8, 128, 16, window_right=4)
    with pytest.raises(ValueError, match=r"last_page_len\[1\] = 17: expected 1 to page_size"):
        w.plan(ip, idx, [16, 17], 32, 8, 128, 16)
    with pytest.raises(ValueError, match="indptr: expected 3 entries"):
        w.plan([0, 2], idx, last, 32, 8, 128, 16)
    with pytest.raises(ValueError, match="indptr: decreases at request 1"):
        w.plan([0, 2, 1], idx, last, 32, 8, 128, 16)
    with pytest.raises(TypeError, match="page_size: expected an int"):
        w.plan(ip, idx, last, 32, 8, 128, 16.0)
    with pytest.raises(RuntimeError, match=r"run\(\) before plan\(\)"):
        w.run(FakeCAI("<f2", (2, 32, 128)), FakeCAI("<f2", (4, 2, 16, 8, 128)))


def test_wrapper_constructor_errors():
    with pytest.raises(NotImplementedError, match="backend='trtllm-gen'"):
        fi.BatchDecodeWithPagedKVCacheWrapper(None, "NHD", backend="trtllm-gen")
    with pytest.raises(NotImplementedError, match="jit_args"):
        fi.BatchPrefillWithRaggedKVCacheWrapper(None, "NHD", jit_args=[1])
    with pytest.raises(ValueError, match="kv_layout: expected 'NHD' or 'HND'"):
        fi.BatchDecodeWithPagedKVCacheWrapper(None, "NDH")
    with pytest.raises(ValueError, match="paged_kv_indptr_buffer"):
        fi.BatchDecodeWithPagedKVCacheWrapper(None, "NHD", use_cuda_graph=True)
    with pytest.raises(ValueError, match="num_levels"):
        fi.MultiLevelCascadeAttentionWrapper(17, None, use_cuda_graph=True)
    fi.MultiLevelCascadeAttentionWrapper(17, None)  # runs level by level


def test_prefill_plan_argument_errors():
    w = fi.BatchPrefillWithRaggedKVCacheWrapper(None, "NHD")
    with pytest.raises(NotImplementedError, match=r"head_dim_vo \(128\) > head_dim_qk \(64\)"):
        w.plan([0, 4], [0, 4], 8, 8, 64, head_dim_vo=128)
    with pytest.raises(NotImplementedError, match=r"head_dim_vo \(64\) != head_dim_qk \(128\)"):
        fi.BatchPrefillWithPagedKVCacheWrapper(None, "NHD").plan(
            [0, 4], [0, 1], [0], [4], 8, 8, 128, 16, head_dim_vo=64)
    with pytest.raises(ValueError, match="kv_indptr: expected 2 entries"):
        w.plan([0, 4], [0, 4, 8], 8, 8, 64)
    with pytest.raises(ValueError, match=r"qo_indptr\[0\]: expected 0"):
        w.plan([1, 4], [0, 4], 8, 8, 64)
    with pytest.raises(ValueError, match="logits_soft_cap"):
        w.plan([0, 4], [0, 4], 8, 8, 64, logits_soft_cap=-1.0)


def test_paged_cache_errors_name_the_cache():
    ok = FakeCAI("<f2", (10, 2, 16, 8, 128))
    c, _ = fi.paged_kv(ok, "NHD", 8, 128, 16, "float16")
    assert c.page_stride == 2 * 16 * 8 * 128
    assert c.v - c.k == 2 * 16 * 8 * 128  # FlashInfer's interleaved K, V
    with pytest.raises(ValueError, match=r"paged_kv_cache: expected shape \(\*, 2, 16, 8, 128\)"):
        fi.paged_kv(FakeCAI("<f2", (10, 2, 32, 8, 128)), "NHD", 8, 128, 16, "float16")
    with pytest.raises(TypeError, match="paged_kv_cache: expected dtype bfloat16, got float16"):
        fi.paged_kv(ok, "NHD", 8, 128, 16, "bfloat16")
    hnd = FakeCAI("<f2", (10, 2, 8, 16, 128))
    c, _ = fi.paged_kv(hnd, "HND", 8, 128, 16, "float16")
    assert c.layout == _lib.LAYOUT_HND
    k = FakeCAI("<f2", (10, 16, 8, 128), strides=(2 * 16 * 8 * 128, 2 * 8 * 128, 256, 2))
    v = FakeCAI("<f2", (10, 16, 8, 128), strides=(4 * 16 * 8 * 128, 2 * 8 * 128, 256, 2))
    with pytest.raises(ValueError, match="identical strides"):
        fi.paged_kv((k, v), "NHD", 8, 128, 16, "float16")


def test_shared_prefix_wrappers_plan_through_the_batch_wrappers():
    """FlashInfer's two-level wrappers are in flashinfer.cascade too, and
    their begin_forward checks as the batch wrappers' plan does."""
    for name in ("BatchDecodeWithSharedPrefixPagedKVCacheWrapper",
                 "BatchPrefillWithSharedPrefixPagedKVCacheWrapper"):
        assert getattr(fi.cascade, name) is getattr(fi, name) and name in fi.__all__
    w = fi.BatchDecodeWithSharedPrefixPagedKVCacheWrapper(None, "NHD")
    with pytest.raises(ValueError, match="num_qo_heads"):
        w.begin_forward([0, 1], [0], [4], 6, 4, 128, 16)
    w = fi.BatchPrefillWithSharedPrefixPagedKVCacheWrapper(None, "NHD")
    with pytest.raises(ValueError, match="num_qo_heads"):
        w.begin_forward([0, 4], [0, 1], [0], [4], 6, 4, 128, 16)


def test_fixed_splits_are_attns_batch_invariance():
    """FlashInfer's fixed_split_size / disable_split_kv: attn's batch
    invariance; neither given: the default plan."""
    assert not fi._split_fixed(None, False) and not fi._split_fixed(-1, False)
    assert fi._split_fixed(4096, False) and fi._split_fixed(None, True)
    assert fi._knobs(invariant=True).batch_invariant
    assert not fi._knobs().batch_invariant
    with pytest.raises(TypeError, match="fixed_split_size"):
        fi._split_fixed("big", False)


def test_caches_of_one_token_pages_may_leave_out_the_page_dim():
    """As FlashInfer's: k/v [pages, heads, dim] (or [pages, 2, heads, dim])
    are pages of one token, the page dim given back as a view where the
    layout puts it; anything else is left to the shape checks."""
    torch = pytest.importorskip("torch")
    k = torch.zeros(10, 8, 128)
    got = fi._with_page_dim((k, k), "NHD")
    assert isinstance(got, tuple) and [t.shape for t in got] == [(10, 1, 8, 128)] * 2
    assert fi._with_page_dim([k, k], "HND")[0].shape == (10, 8, 1, 128)
    both = torch.zeros(10, 2, 8, 128)
    assert fi._with_page_dim(both, "NHD").shape == (10, 2, 1, 8, 128)
    assert fi._with_page_dim(both, "HND").shape == (10, 2, 8, 1, 128)
    full = torch.zeros(10, 2, 16, 8, 128)
    assert fi._with_page_dim(full, "NHD") is full
    cai = FakeCAI("<f2", (10, 2, 8, 128))
    assert fi._with_page_dim(cai, "NHD") is cai
    with pytest.raises(ValueError, match=r"paged_kv_cache: expected shape \(\*, 2, 16, 8, 128\)"):
        fi.paged_kv(cai, "NHD", 8, 128, 16, "float16")


def test_merge_state_argument_errors():
    va, vb_ = FakeCAI("<f2", (4, 8, 64)), FakeCAI("<f2", (4, 8, 64))
    sa, sb = FakeCAI("<f4", (4, 8)), FakeCAI("<f4", (4, 8))
    with pytest.raises(TypeError, match="s_a: expected dtype float32, got float16"):
        fi.merge_state(va, FakeCAI("<f2", (4, 8)), vb_, sb)
    with pytest.raises(ValueError, match=r"v_b: expected shape \(4, 8, 64\)"):
        fi.merge_state(va, sa, FakeCAI("<f2", (4, 8, 32)), sb)
    with pytest.raises(ValueError, match=r"s_b: expected shape \(4, 8\)"):
        fi.merge_state(va, sa, vb_, FakeCAI("<f4", (4, 9)))
    with pytest.raises(ValueError, match=r"v: expected shape \(seq_len, num_states"):
        fi.merge_states(va, sa)
    with pytest.raises(ValueError, match=r"s: expected shape \(4, 3, 8\)"):
        fi.merge_states(FakeCAI("<f2", (4, 3, 8, 64)), FakeCAI("<f4", (4, 8)))
    with pytest.raises((TypeError, ImportError), match="mask|PyTorch"):
        fi.merge_state_in_place(va, sa, vb_, sb, mask=[1])


def test_append_argument_errors():
    cache = FakeCAI("<f2", (10, 2, 16, 8, 128))
    k = FakeCAI("<f2", (5, 8, 128))
    with pytest.raises(TypeError, match="append_value: expected dtype float16, got bfloat16"):
        fi.append_paged_kv_cache(k, FakeDLPack(4, 16, (5, 8, 128)), [0] * 5, list(range(5)),
                                 cache, [0], [0, 1], [5])
    with pytest.raises(ValueError, match=r"append_key: expected shape \(\*, 8, 128\)"):
        fi.append_paged_kv_cache(FakeCAI("<f2", (5, 4, 128)), k, [0] * 5, list(range(5)), cache,
                                 [0], [0, 1], [5])
    with pytest.raises(ValueError, match="paged_kv_cache: expected a 5-D tensor"):
        fi.append_paged_kv_cache(k, k, [0] * 5, list(range(5)), FakeCAI("<f2", (10, 16, 8, 128)),
                                 [0], [0, 1], [5])


def test_alibi_slopes():
    assert fi.get_alibi_slopes(8) == [2.0 ** (-i) for i in range(1, 9)]
    s = fi.get_alibi_slopes(12)
    assert len(s) == 12 and s[:8] == fi.get_alibi_slopes(8)


# --- the vLLM backend ----------------------------------------------------------------


def test_vllm_backend_static_interface():
    B = vb.AttnBackend
    assert B.get_name() == "ATTN"
    assert B.get_impl_cls() is vb.AttnImpl
    assert B.get_metadata_cls() is vb.AttnMetadata
    assert B.get_builder_cls() is vb.AttnMetadataBuilder
    assert B.get_kv_cache_shape(100, 16, 8, 128) == (2, 100, 16, 8, 128)
    assert B.get_kv_cache_shape(100, 16, 8, 128, cache_dtype_str="fp8") == (2, 100, 16, 8, 128)
    with pytest.raises(ValueError, match="block_size 512"):
        B.get_kv_cache_shape(100, 512, 8, 128)
    with pytest.raises(ValueError, match="head_size 100"):
        B.get_kv_cache_shape(100, 16, 8, 100)
    with pytest.raises(NotImplementedError, match="kv_cache_dtype 'fp4'"):
        B.get_kv_cache_shape(100, 16, 8, 128, cache_dtype_str="fp4")
    assert B.get_kv_cache_stride_order() == (0, 1, 2, 3, 4)
    assert set(B.supported_kv_cache_dtypes) >= {"auto", "fp8", "fp8_e4m3", "fp8_e5m2"}
    assert B.supports_sink() and not B.is_mla()
    assert B.supports_attn_type("decoder") and not B.supports_attn_type("encoder_decoder")
    assert B.validate_configuration(128, "bfloat16", "fp8", 16) == []
    assert "head_size not supported" in B.validate_configuration(100, "bfloat16", "auto", 16)
    # Windows on decoder layers only; what the backend does not run is
    # refused in vLLM's words, and so is a flag this release does not know.
    assert B.validate_configuration(128, "bfloat16", "auto", 16, has_sliding_window=True) == []
    assert B.validate_configuration(128, "bfloat16", "auto", 16, has_sliding_window=True,
                                    attn_type="encoder_only") == ["sliding window not supported"]
    assert B.validate_configuration(128, "bfloat16", "auto", 16, use_pcp=True, use_dcp=True,
                                    use_adaptive_verification=True, use_future_thing=True) == [
        "PCP not supported", "DCP not supported",
        "device-cpu query lens mismatch not supported, this is needed for adaptive "
        "verification", "use_future_thing not supported"]
    assert not B.supports_device_cpu_query_lens_mismatch() and B.supports_sliding_window()
    assert B.customize_spec("spec") == "spec"
    support = vb.AttnMetadataBuilder.get_cudagraph_support(None, None)
    assert support.name == "UNIFORM_SINGLE_TOKEN_DECODE" and support.value == 1


@needs_lib
def test_vllm_supported_head_sizes():
    assert vb.AttnBackend.get_supported_head_sizes() == attn.supported_head_sizes()


def test_vllm_impl_argument_errors():
    with pytest.raises(ValueError, match=r"num_heads \(12\) must be a multiple of num_kv_heads"):
        vb.AttnImpl(12, 128, 0.1, 8)
    with pytest.raises(ValueError, match="head_size 100"):
        vb.AttnImpl(8, 100, 0.1, 8)
    with pytest.raises(NotImplementedError, match="encoder_decoder"):
        vb.AttnImpl(8, 128, 0.1, 8, attn_type="encoder_decoder")
    with pytest.raises(NotImplementedError, match="sliding_window on encoder_only"):
        vb.AttnImpl(8, 128, 0.1, 8, sliding_window=128, attn_type="encoder_only")
    with pytest.raises(ValueError, match=r"alibi_slopes: expected 8 slopes"):
        vb.AttnImpl(8, 128, 0.1, 8, alibi_slopes=[0.5])
    with pytest.raises(NotImplementedError, match="kv_cache_dtype 'int8'"):
        vb.AttnImpl(8, 128, 0.1, 8, kv_cache_dtype="int8")
    impl = vb.AttnImpl(8, 128, 0.1, 2, sliding_window=4096, logits_soft_cap=30.0)
    assert impl.window_left == 4095  # vLLM counts the query's own key
    v = impl._variant("bfloat16", 16, "NHD")
    assert v.paged and v.knobs.window_left == 4095 and v.knobs.softcap == 30.0
    assert v.kv_type == "bfloat16" and v.page_size == 16
    fp8 = vb.AttnImpl(8, 128, 0.1, 2, kv_cache_dtype="fp8_e5m2")._variant("float16", 32, "HND")
    assert (fp8.kv_type, fp8.layout, fp8.page_size) == ("float8_e5m2", "HND", 32)
    enc = vb.AttnImpl(8, 64, 0.1, 8, attn_type="encoder_only")._variant("float16", 16, "NHD")
    assert not enc.paged and enc.knobs.kind == "encoder" and not enc.knobs.causal
    assert not v.knobs.batch_invariant and not enc.knobs.batch_invariant


def test_vllm_batch_invariant_mode(monkeypatch):
    # VLLM_BATCH_INVARIANT=1 (read from vllm.envs when vLLM is loaded)
    # builds every kernel batch-invariant; both backends declare it.
    assert vb.AttnBackend.supports_batch_invariance()
    assert vb.AttnMLABackend.supports_batch_invariance()
    assert vb.AttnBackend.validate_configuration(128, "bfloat16", "auto", 16,
                                                 use_batch_invariant=True) == []
    monkeypatch.delitem(sys.modules, "vllm.envs", raising=False)
    monkeypatch.setenv("VLLM_BATCH_INVARIANT", "1")
    impl = vb.AttnImpl(8, 128, 0.1, 2)
    assert impl._variant("bfloat16", 16, "NHD").knobs.batch_invariant
    assert vb.AttnImpl(8, 64, 0.1, 8, attn_type="encoder_only")._variant(
        "float16", 16, "NHD").knobs.batch_invariant
    mla = _mla_impl()
    assert mla._decode_variant("bfloat16", 64, 1).batch_invariant
    small = _mla_impl(num_heads=32, head_size=320, kv_lora_rank=256, qk_nope_head_dim=64,
                      qk_head_dim=None, v_head_dim=128)
    assert small._prefill_variant("float16", False, True).knobs.batch_invariant
    monkeypatch.setenv("VLLM_BATCH_INVARIANT", "0")
    assert not impl._variant("bfloat16", 16, "NHD").knobs.batch_invariant
    assert not mla._decode_variant("bfloat16", 64, 1).batch_invariant


def test_mixed_batch_split_rule():
    # The trailing run of one-token requests with a context runs as decodes.
    assert vb._split([5, 3, 1, 1], [0, 10, 7, 9]) == 2
    assert vb._split([1, 5, 1], [4, 0, 3]) == 2
    assert vb._split([1, 1], [0, 3]) == 1  # a one-token prompt is a prefill
    assert vb._split([1, 1], None) == 0


# --- compiling without a GPU -----------------------------------------------------------


@needs_lib
@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_90a"])
def test_compile_decode_without_gpu(arch):
    plain = attn.compile_decode(arch, q_dtype="float16", num_q_heads=8, num_kv_heads=2,
                                head_dim=64, page_size=16)
    assert plain.arch == arch and plain.cubin_size > 0
    assert plain.kernel_name in plain.source
    knobs = attn.compile_decode(arch, num_q_heads=8, num_kv_heads=2, head_dim=64,
                                kv_dtype="float8_e4m3fn", sinks=True, softcap=30.0,
                                window_left=127, score_mod=SOFTCAP_REGION, write_lse=True)
    assert knobs.cubin_size > 0 and knobs.kernel_name != plain.kernel_name
    assert "tanh" in knobs.source
    for word in ("kv=e4m3", "softcap=1", "sinks=1", "write_lse=1", "score_mod="):
        assert word in knobs.key, (word, knobs.key)
    invariant = attn.compile_decode(arch, q_dtype="float16", num_q_heads=8, num_kv_heads=2,
                                    head_dim=64, page_size=16, batch_invariant=True)
    assert "batch_invariant=1" in invariant.key and "batch_invariant=0" in plain.key
    assert invariant.kernel_name != plain.kernel_name


@needs_lib
@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_90a"])
def test_compile_prefill_without_gpu(arch):
    ragged = attn.compile_prefill(arch, num_q_heads=8, num_kv_heads=8, head_dim=64,
                                  causal=True, alibi=True)
    assert ragged.cubin_size > 0 and "alibi=1" in ragged.key
    paged = attn.compile_prefill(arch, num_q_heads=8, num_kv_heads=2, head_dim=64, paged=True,
                                 kv_dtype="float8_e5m2", page_size=16, layout="HND")
    assert paged.cubin_size > 0 and "paged" in paged.key and "hnd" in paged.key


@needs_lib
def test_bad_variants_raise_naming_the_problem():
    with pytest.raises(ValueError, match="head_dim 100"):
        attn.compile_decode("sm_90a", head_dim=100)
    with pytest.raises(ValueError, match=r"\(12\) must be a multiple of .*\(8\)"):
        attn.compile_decode("sm_90a", num_q_heads=12, num_kv_heads=8)
    with pytest.raises(ValueError, match='arch "sm_75" is not an arch attn targets'):
        attn.compile_decode("sm_75")
    # Region text that does not parse: a compile error, or a bad argument
    # where the library checks regions before compiling.
    with pytest.raises((attn.AttnError, ValueError)) as e:
        attn.compile_decode("sm_90a", score_mod="{ garbage }")
    assert "garbage" in str(e.value)
    assert not isinstance(e.value, attn.AttnError) or e.value.status == "ATTN_ERROR_COMPILE"
    with pytest.raises(TypeError, match="q_dtype: unknown dtype"):
        attn.compile_decode("sm_90a", q_dtype="float7")


@needs_lib
def test_kernel_key():
    a = attn.kernel_key("decode", num_q_heads=32, num_kv_heads=8)
    b = attn.kernel_key("decode", num_q_heads=32, num_kv_heads=8, window_left=10)
    assert a != b and a.startswith("decode ")
    assert attn.kernel_key("prefill", paged=True).startswith("prefill paged")
    with pytest.raises(ValueError, match="kind"):
        attn.kernel_key("merge")


@needs_lib
def test_mla_prefill_kernel_key():
    base = attn.kernel_key("prefill", num_q_heads=16, num_kv_heads=16)
    mla = attn.kernel_key("prefill", num_q_heads=16, num_kv_heads=16, rope_dim=64)
    assert mla != base and " dim=128 rope=64" in mla
    with pytest.raises(ValueError, match="v->rope_dim 64 is for ragged k/v of q_type; got paged 1"):
        attn.kernel_key("prefill", rope_dim=64, paged=True)
    with pytest.raises(ValueError, match=r"v->rope_dim 192 is not supported"):
        attn.kernel_key("prefill", rope_dim=192)


@needs_lib
def test_mla_decode_kernel_key():
    base = attn.kernel_key("mla_decode")
    assert base.startswith("mla_decode q=bf16 kv=bf16 heads=16 rank=512 rope=64 page=64")
    assert attn.kernel_key("mla_decode", kv_type="float8_e4m3fn") != base
    assert attn.kernel_key("mla_decode", num_q_heads=128, rope_dim=0) != base
    with pytest.raises(ValueError, match="v->rope_dim is 32"):
        attn.kernel_key("mla_decode", rope_dim=32)
    with pytest.raises(ValueError, match="v->kv_type is e5m2"):
        attn.kernel_key("mla_decode", kv_type="float8_e5m2")


@needs_lib
def test_runtime_library_has_no_compiler():
    lib = _lib.loaded_path()
    runtime = os.path.join(os.path.dirname(lib), "libattn_runtime_c.so")
    if not os.path.exists(runtime):
        pytest.skip("no libattn_runtime_c.so next to %s" % lib)
    env = dict(os.environ, ATTN_LIBRARY=runtime)
    code = ("import attn\ntry:\n    attn.compile_decode('sm_90a')\n"
            "except NotImplementedError as e:\n    print('unsupported:', e)\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=os.path.dirname(HERE))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("unsupported:")


@needs_lib
@pytest.mark.skipif(attn.has_gpu(), reason="checks the error without a GPU")
def test_kernels_without_gpu_raise_attn_error():
    from attn._kernels import Decode, DecodeVariant
    with pytest.raises((attn.AttnError, NotImplementedError)) as e:
        Decode(-1, DecodeVariant(), 16)
    assert str(e.value)


# --- hostile and out-of-range arguments ---------------------------------------------


def test_hostile_dlpack_producers_are_errors_not_crashes():
    """Each producer crashed the interpreter while its structs were read in
    place; read through the kernel they are errors naming the argument."""
    path = os.pathsep.join([os.path.dirname(os.path.dirname(attn.__file__)), HERE])
    out = subprocess.run([sys.executable, os.path.join(HERE, "hostile.py")],
                         env=dict(os.environ, PYTHONPATH=path), capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, "exit %d after:\n%s%s" % (out.returncode, out.stdout, out.stderr)
    lines = out.stdout.splitlines()
    assert len(lines) == len(hostile.CRASHERS), out.stdout
    for line in lines:
        assert re.match(r"[^:]+: (TypeError|ValueError): q: ", line), line


def _raises(error):
    def fn():
        raise error
    return fn


@pytest.mark.parametrize("kw, error, match", [
    (dict(dlpack_result=5), TypeError, r"q: __dlpack__\(\) must return a 'dltensor' capsule, "
                                       r"got int"),
    (dict(dlpack_result=_raises(RuntimeError("busy"))), TypeError,
     r"q: __dlpack__\(\) failed: RuntimeError: busy"),
    (dict(capsule_name=b"used_dltensor"), TypeError, r"'used_dltensor' \(already consumed\)"),
    (dict(capsule_name=b"dltensor_versioned"), TypeError, "versioned form"),
    (dict(capsule_name=b"dltensorX"), TypeError, "a capsule named 'dltensorX'"),
    (dict(capsule_name=None), TypeError, "an unnamed capsule"),
    (dict(device="cuda:0"), TypeError, r"q: __dlpack_device__\(\) must return \(device_type, "
                                       r"device_id\) ints, got 'cuda:0'"),
    (dict(device=(2.0, 0)), TypeError, r"__dlpack_device__\(\) must return"),
    (dict(device=(True, 0)), TypeError, r"__dlpack_device__\(\) must return"),
    (dict(device=(2, 0, 0)), TypeError, r"__dlpack_device__\(\) must return"),
    (dict(device=_raises(KeyError("x"))), TypeError, r"q: __dlpack_device__\(\) failed: KeyError"),
    (dict(device=(1, 0)), ValueError, r"q: expected a CUDA array, got one on cpu"),
    (dict(device_type=1, device=(2, 0)), ValueError, r"q: expected a CUDA array, got one on cpu"),
    (dict(device_id=-1), ValueError, "q: DLPack device id -1"),
    (dict(lanes=4), TypeError, r"q: vector dtypes \(DLPack lanes 4\)"),
    (dict(code=2, bits=7), TypeError, r"q: unsupported DLPack dtype \(code 2, 7 bits\)"),
    (dict(shape=(4,), ndim=-1), ValueError, r"q: DLPack ndim -1 \(attn takes 0 to 64\)"),
    (dict(shape=(1,) * 65), ValueError, r"q: DLPack ndim 65"),
    (dict(shape=None, ndim=2), ValueError, "q: DLPack shape is NULL for 2 dimensions"),
    (dict(shape=(-1, 8)), ValueError, "q: size -1 of dimension 0 is out of range"),
    (dict(shape=(4, 8), strides=(2 ** 62, 1)), ValueError, "q: the array's bytes .* fall outside"),
    (dict(data=2 ** 64 - 16), ValueError, "q: the array's bytes"),
    (dict(byte_offset=2 ** 64 - 1), ValueError, "q: data pointer .* is not an address"),
])
def test_hostile_dlpack_fields_are_errors_naming_the_argument(kw, error, match):
    with pytest.raises(error, match=match):
        _t.adapt(hostile.Producer(**kw), "q")


@pytest.mark.skipif(not hostile.CAPSULE_LAYOUT_KNOWN, reason="unknown PyCapsule layout")
def test_dlpack_capsules_stay_with_their_producer():
    """attn never consumes a capsule: its destructor calls the producer's
    deleter exactly once, whether the array was taken or refused."""
    ok = hostile.Producer()
    t = _t.adapt(ok, "q")
    assert hostile.capsule_name(ok.capsules[0]) == "dltensor" and ok.deleted == 0
    del t
    ok.capsules.clear()
    gc.collect()
    assert ok.deleted == 1
    bad = hostile.Producer(shape=(1,) * 70)
    with pytest.raises(ValueError, match="ndim 70"):
        _t.adapt(bad, "q")
    bad.capsules.clear()
    gc.collect()
    assert bad.deleted == 1


@pytest.mark.parametrize("obj, error, match", [
    (hostile.CAI([1, 2]), TypeError, "q: __cuda_array_interface__ must be a dict, got list"),
    (hostile.cai(typestr=5), TypeError, "q: __cuda_array_interface__ typestr must be a str"),
    (hostile.cai(typestr="<f3"), TypeError, "q: unsupported __cuda_array_interface__ typestr"),
    (hostile.cai(shape="abc"), TypeError, "q: __cuda_array_interface__ shape must be a tuple"),
    (hostile.cai(shape=(True, 8)), TypeError, "shape must be a tuple of ints"),
    (hostile.cai(shape=(4.0, 8)), TypeError, "shape must be a tuple of ints"),
    (hostile.cai(shape=(-1, 8)), ValueError, "q: size -1 of dimension 0 is out of range"),
    (hostile.cai(shape=(2 ** 63, 1)), ValueError, "q: size 9223372036854775808 of dimension 0"),
    (hostile.cai(shape=(2 ** 40, 2 ** 40)), ValueError, "more than int64 counts"),
    (hostile.cai(shape=(1,) * 65), ValueError, "shape has 65 entries, more than 64"),
    (hostile.cai(strides=(16,)), ValueError, "q: __cuda_array_interface__ has 1 strides for 2"),
    (hostile.cai(strides=(16.0, 2)), TypeError, "strides must be a tuple of ints"),
    (hostile.cai(strides=(2 ** 64, 2)), ValueError, "q: stride 9223372036854775808 of dimension"),
    (hostile.cai(strides=(-16, 2), data=(0x10, False)), ValueError, "q: the array's bytes"),
    (hostile.cai(data="0x7f00"), TypeError, r"q: __cuda_array_interface__ data must be a "
                                            r"\(pointer, read_only\) tuple"),
    (hostile.cai(data=(1.5, False)), TypeError, "data must be a"),
    (hostile.cai(data=(True, False)), TypeError, "data must be a"),
    (hostile.cai(data=(2 ** 64, False)), ValueError, "q: data pointer 18446744073709551616"),
    (hostile.cai(data=(-5, False)), ValueError, "q: data pointer -5 is not an address"),
    (hostile.cai(data=(2 ** 64 - 8, False)), ValueError, "q: the array's bytes"),
])
def test_garbage_cuda_array_interfaces_are_errors_naming_the_argument(obj, error, match):
    with pytest.raises(error, match=match):
        _t.adapt(obj, "q")


@pytest.mark.parametrize("kind", ["decode", "prefill"])
@pytest.mark.parametrize("kw, error, match", [
    (dict(score_mod=5), TypeError, "score_mod: expected a str, got int 5"),
    (dict(score_mod=True), TypeError, "score_mod: expected a str, got bool True"),
    (dict(mask_mod=False), TypeError, "mask_mod: expected a str, got bool False"),
    (dict(score_mod=SOFTCAP_REGION + "\0}"), ValueError, "score_mod: embedded NUL character"),
    (dict(head_dim=2 ** 32 + 64), ValueError,
     "head_dim: expected an int from 1 to 2147483647, got 4294967360"),
    (dict(num_q_heads=2 ** 32 + 32), ValueError, "num_q_heads: expected an int from 1 to"),
    (dict(num_kv_heads=2 ** 33 + 8), ValueError, "num_kv_heads: expected an int from 1 to"),
    (dict(page_size=2 ** 32 + 16), ValueError, "page_size: expected an int from 1 to"),
    (dict(window_left=2 ** 31), ValueError, "window_left: expected an int <= 2147483647"),
    (dict(head_dim=True), TypeError, "head_dim: expected an int, got bool True"),
    (dict(head_dim=128.0), TypeError, "head_dim: expected an int, got float 128.0"),
    (dict(head_dim="128"), TypeError, "head_dim: expected an int, got str '128'"),
    (dict(softcap=float("nan")), ValueError, "softcap: expected a finite float32 number"),
    (dict(softcap=float("inf")), ValueError, "softcap: expected a finite"),
    (dict(softcap=-1.0), ValueError, "softcap: expected >= 0"),
    (dict(scale=1e39), ValueError, "scale: expected a finite float32 number"),
    (dict(scale="0.1"), TypeError, "scale: expected a number, got str"),
    (dict(causal="no"), TypeError, "causal: expected a bool, got str 'no'"),
    (dict(sinks=2), ValueError, "sinks: expected a bool, got int 2"),
    (dict(layout=1.0), TypeError, "layout: expected 'NHD' or 'HND'"),
])
def test_variant_arguments_are_exact_or_errors(kind, kw, error, match):
    with pytest.raises(error, match=match):
        attn.kernel_key(kind, **kw)


@needs_lib
def test_variant_values_reach_c_exactly():
    v = attn._decode_variant(32, 8, 128, 16, "bfloat16", None, "NHD", 1, True, 2 ** 31 - 1,
                             None, None, False, False, False, None, None, False, "decoder")
    c = v.to_c()
    assert (c.knobs.window_left, c.head_dim, c.num_q_heads) == (2 ** 31 - 1, 128, 32)
    # Any negative window is no window.
    assert attn.kernel_key("decode", window_left=-2 ** 40) == attn.kernel_key("decode")
    with pytest.raises(ValueError, match="query_len: expected an int from 1 to"):
        attn.kernel_key("decode", query_len=2 ** 32 + 1)


@needs_lib
def test_compile_takes_no_mistyped_region_or_arch():
    """Both compiled before: score_mod=5 without its region, the arch up to
    its NUL."""
    with pytest.raises(TypeError, match="score_mod: expected a str, got int 5"):
        attn.compile_decode("sm_80", score_mod=5)
    with pytest.raises(ValueError, match="arch: embedded NUL character at index 6"):
        attn.compile_decode("sm_90a\0junk")
    with pytest.raises(TypeError, match="arch: expected a str, got int 5"):
        attn.compile_decode(5)


@needs_lib
def test_c_call_arguments_are_range_checked():
    with pytest.raises(ValueError, match=r"attn_kv_cache_shape: argument 2: expected an int from "
                                         r"-2147483648 to 2147483647, got 4294967312"):
        _lib.call("attn_kv_cache_shape", 10, 2 ** 32 + 16, 8, 128, 0, (ctypes.c_int64 * 5)())
    with pytest.raises(ValueError, match="page_size: expected an int from 1 to 2147483647"):
        attn.kv_cache_shape(10, 2 ** 32 + 16, 8, 128)
    with pytest.raises(TypeError, match="num_pages: expected an int, got float"):
        attn.kv_cache_shape(10.0, 16, 8, 128)
    with pytest.raises(ValueError, match=r"seq_lens\[1\]: expected an int from -2147483648 to "
                                         r"2147483647, got 2147483648"):
        _lib.int32_array([1, 2 ** 31], "seq_lens")
    with pytest.raises(ValueError, match="stream: expected an int from 0 to"):
        _runtime.stream_handle(2 ** 64)


def test_every_struct_field_takes_only_what_its_c_type_holds():
    checked = 0
    for struct in _lib.STRUCTS:
        obj = struct()
        for name, _ in struct._fields_:
            rule = struct._rules_.get(name)
            if rule is None:
                continue
            lo, hi, kind = rule
            checked += 1
            if kind in (_lib._INT, _lib._POINTER):
                setattr(obj, name, hi)
                assert getattr(obj, name) == hi, (struct.__name__, name)
                for bad in (hi + 1, lo - 1):
                    with pytest.raises(ValueError, match="^%s: expected an int from" % name):
                        setattr(obj, name, bad)
                for bad in (True, 1.0, "1"):
                    with pytest.raises(TypeError, match="^%s: expected an int" % name):
                        setattr(obj, name, bad)
            elif kind == _lib._FLAG:
                setattr(obj, name, True)
                assert getattr(obj, name) == 1
                with pytest.raises(ValueError, match="^%s: expected a bool" % name):
                    setattr(obj, name, 2)
                with pytest.raises(TypeError, match="^%s: expected a bool" % name):
                    setattr(obj, name, "yes")
            elif kind == _lib._FLOAT:
                setattr(obj, name, 0.5)
                assert getattr(obj, name) == 0.5
                for bad in (float("nan"), float("-inf"), 1e39):
                    with pytest.raises(ValueError, match="^%s: expected a finite" % name):
                        setattr(obj, name, bad)
                with pytest.raises(TypeError, match="^%s: expected a number" % name):
                    setattr(obj, name, True)
            else:
                setattr(obj, name, "abc")
                assert getattr(obj, name) == b"abc"
                with pytest.raises(ValueError, match="^%s: embedded NUL" % name):
                    setattr(obj, name, "ab\0c")
                with pytest.raises(TypeError, match="^%s: expected a str" % name):
                    setattr(obj, name, 5)
    assert checked > 100


@pytest.mark.parametrize("args, kw, error, match", [
    ((32, 8, 2 ** 32 + 128, 16), {}, ValueError,
     "head_dim: expected an int from 1 to 2147483647, got 4294967424"),
    ((2 ** 32 + 32, 8, 128, 16), {}, ValueError, "num_qo_heads: expected an int from 1"),
    ((32, 8, 128, 2 ** 32 + 16), {}, ValueError, "page_size: expected an int from 1"),
    ((32, 8, True, 16), {}, TypeError, "head_dim: expected an int, got bool True"),
    ((32, 8, 128, 16), dict(window_left=2 ** 31), ValueError, "window_left: expected an int <="),
    ((32, 8, 128, 16), dict(window_left=4.5), TypeError, "window_left: expected an int"),
    ((32, 8, 128, 16), dict(q_len_per_req=2 ** 32 + 1), ValueError, "q_len_per_req"),
    ((32, 8, 128, 16), dict(logits_soft_cap=float("nan")), ValueError, "logits_soft_cap"),
    ((32, 8, 128, 16), dict(sm_scale=float("inf")), ValueError, "sm_scale: expected a finite"),
    ((32, 8, 128, 16), dict(sm_scale="0.1"), TypeError, "sm_scale: expected a number"),
    ((32, 8, 128, 16), dict(score_mod=5), TypeError, "score_mod: expected a str"),
    ((32, 8, 128, 16), dict(mask_mod="{\0}"), ValueError, "mask_mod: embedded NUL"),
    ((32, 8, 128, 16), dict(pos_encoding_mode=0), TypeError, "pos_encoding_mode"),
    ((32, 8, 128, 16), dict(window_right=True), TypeError, "window_right: expected an int"),
])
def test_decode_plan_arguments_are_exact_or_errors(args, kw, error, match):
    w = fi.BatchDecodeWithPagedKVCacheWrapper(None, "NHD")
    with pytest.raises(error, match=match):
        w.plan([0, 1], [0], [1], *args, **kw)


def test_prefill_plan_arguments_are_exact_or_errors():
    w = fi.BatchPrefillWithRaggedKVCacheWrapper(None, "NHD")
    with pytest.raises(ValueError, match="head_dim: expected an int from 1"):
        w.plan([0, 4], [0, 4], 8, 8, 2 ** 32 + 64)
    with pytest.raises(ValueError, match="window_left: expected an int <="):
        w.plan([0, 4], [0, 4], 8, 8, 64, causal=True, window_left=2 ** 31)
    with pytest.raises(TypeError, match="causal: expected a bool"):
        w.plan([0, 4], [0, 4], 8, 8, 64, causal="yes")
    with pytest.raises(ValueError, match=r"qo_indptr\[1\]: expected an int from"):
        w.plan([0, 2 ** 32 + 4], [0, 4], 8, 8, 64)
    with pytest.raises(TypeError, match=r"kv_indptr\[1\]: expected an int, got float"):
        w.plan([0, 4], [0, 4.0], 8, 8, 64)


def test_sizes_that_allocate_up_front_are_bounded():
    def graph_decode(**kw):
        return fi.BatchDecodeWithPagedKVCacheWrapper(
            None, "NHD", use_cuda_graph=True, paged_kv_indptr_buffer=[0, 0],
            paged_kv_last_page_len_buffer=[1], **kw)

    with pytest.raises(ValueError, match="max_pages_per_request: expected an int from 1 to"):
        graph_decode(max_pages_per_request=2 ** 33)
    with pytest.raises(ValueError, match=r"max_pages_per_request \(2147483647\) x batch size "
                                         r"\(1\): asks attn to allocate 8.0 GiB ahead of use"):
        graph_decode(max_pages_per_request=2 ** 31 - 1)
    with pytest.raises(ValueError, match="max_num_tokens: expected an int from 1 to"):
        fi.BatchPrefillWithRaggedKVCacheWrapper(None, "NHD", max_num_tokens=2 ** 33)
    with pytest.raises(TypeError, match="paged_kv_indices_buffer: expected an array, got int"):
        fi.BatchDecodeWithPagedKVCacheWrapper(
            None, "NHD", use_cuda_graph=True, paged_kv_indptr_buffer=[0, 0],
            paged_kv_last_page_len_buffer=[1], paged_kv_indices_buffer=5)
    with pytest.raises(ValueError, match="max_num_seqs: expected an int from 1 to"):
        vb.AttnMetadataBuilder(max_num_seqs=2 ** 33, device=0)
    builder = vb.AttnMetadataBuilder(block_size=1, max_num_seqs=4, max_num_batched_tokens=64,
                                     max_model_len=2 ** 31 - 1, dtype="bfloat16", device=0)
    with pytest.raises(ValueError, match=r"max_num_seqs \(4\) x max_model_len \(2147483647\)"):
        builder.build_step([1], [0], [[0]])
    with pytest.raises(ValueError, match=r"n_heads: expected an int from 1 to 1024"):
        fi.get_alibi_slopes(2 ** 31 - 1)


def test_max_heads_matches_the_kernel_limit():
    text = open(os.path.join(REPO, "spec", "KernelLimits.h")).read()
    m = re.search(r"kMaxHeads\s*=\s*(\d+)", text)
    assert m and int(m.group(1)) == fi.MAX_HEADS


def test_vllm_arguments_are_exact_or_errors():
    with pytest.raises(ValueError, match="num_heads: expected an int from 1 to"):
        vb.AttnImpl(2 ** 32 + 8, 128, 0.1, 8)
    with pytest.raises(ValueError, match="scale: expected a finite"):
        vb.AttnImpl(8, 128, float("nan"), 8)
    with pytest.raises(ValueError, match="sliding_window: expected an int from 1 to 2147483648"):
        vb.AttnImpl(8, 128, 0.1, 8, sliding_window=2 ** 32 + 5)
    with pytest.raises(TypeError, match=r"alibi_slopes\[1\]: expected a number"):
        vb.AttnImpl(2, 128, 0.1, 2, alibi_slopes=[0.5, "x"])
    impl = vb.AttnImpl(8, 128, 0.1, 8, sliding_window=2 ** 31)
    assert impl._variant("bfloat16", 16, "NHD").to_c().knobs.window_left == 2 ** 31 - 1
    with pytest.raises(ValueError, match="num_blocks: expected an int from 0 to 2147483647"):
        vb.AttnBackend.get_kv_cache_shape(2 ** 40, 16, 8, 128)
    with pytest.raises(TypeError, match="block_size: expected an int, got float"):
        vb.AttnBackend.get_kv_cache_shape(10, 16.0, 8, 128)
    with pytest.raises(ValueError, match=r"src_to_dists\[0\]: expected an int from 0"):
        vb._pairs([(-1, 2)], "src_to_dists")
    builder = vb.AttnMetadataBuilder(block_size=16, max_num_seqs=4, max_num_batched_tokens=64,
                                     max_model_len=256, dtype="bfloat16", device=0)
    with pytest.raises(ValueError, match=r"block_tables\[1\]\[0\]: expected an int from 0"):
        builder.build_step([1, 1], [3, 3], [[0], [-2]])
    with pytest.raises(ValueError, match=r"block_tables\[1\]\[1\] = 99: past the end of the "
                                         r"cache's 10 pages"):
        builder.build_step([1, 1], [3, 20], [[0], [1, 99]], num_pages=10)


def test_page_tables_are_checked_at_plan():
    w = fi.BatchDecodeWithPagedKVCacheWrapper(None, "NHD")
    with pytest.raises(ValueError, match=r"indices\[1\] = -3: a page id must be >= 0"):
        w.plan([0, 2, 3], [0, -3, 2], [16, 5], 32, 8, 128, 16)
    with pytest.raises(ValueError, match=r"indices\[2\]: expected an int from -2147483648 to "
                                         r"2147483647, got 4294967296"):
        w.plan([0, 2, 3], [0, 1, 2 ** 32], [16, 5], 32, 8, 128, 16)
    with pytest.raises(ValueError, match=r"indptr\[0\] = -1: expected >= 0"):
        w.plan([-1, 2, 3], [0, 1, 2], [16, 5], 32, 8, 128, 16)
    with pytest.raises(ValueError, match=r"last_page_len\[0\] = 0: expected 1 to page_size"):
        w.plan([0, 2, 3], [0, 1, 2], [0, 5], 32, 8, 128, 16)
    with pytest.raises(ValueError, match=r"indptr: request 0 holds 4294967312 tokens "
                                         r"\(268435457 pages of 16\)"):
        w.plan([0, 2 ** 28 + 1], [0], [16], 32, 8, 128, 2 ** 4)
    p = fi.BatchPrefillWithPagedKVCacheWrapper(None, "NHD")
    with pytest.raises(ValueError, match=r"paged_kv_indices\[0\] = -1: a page id must be >= 0"):
        p.plan([0, 1], [0, 1], [-1], [1], 8, 8, 64, 16)


def test_page_ids_past_the_cache_are_refused_before_any_launch():
    """run() compares the largest page id plan() recorded with the pages
    of the cache it is given, before anything launches."""
    w = fi.BatchDecodeWithPagedKVCacheWrapper(None, "NHD")
    v = DecodeVariant(q_type="float16", kv_type="float16", num_q_heads=32, num_kv_heads=8,
                      head_dim=128, page_size=16)
    w._plan = fi._Plan(gen=1, batch=1, seq_lens=[64], variant=v, for_graph=False,
                       num_q_tokens=1, stride=4, page_tables_ptr=0x1000, seq_lens_ptr=0x2000,
                       window_left=-1, device=0, max_page=9, max_page_at="indices[3]")
    launched = []
    w._run_handle = lambda *args: launched.append(args)
    with pytest.raises(ValueError, match=r"indices\[3\] = 9: past the end of paged_kv_cache, "
                                         r"which has 4 pages \(ids 0 to 3\)"):
        w.run(FakeCAI("<f2", (1, 32, 128)), FakeCAI("<f2", (4, 2, 16, 8, 128)))
    assert not launched


# --- the wrappers' cached run path (a stand-in torch: no torch needed) ---------------


class _Dtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name


class FakeTorchTensor:
    """What attn reads of a torch.Tensor, without memory behind it."""

    next_ptr = [0x7F0000100000]

    def __init__(self, shape, dtype, strides=None, device=0):
        self.shape, self.dtype, self._device = tuple(shape), dtype, device
        self._strides = tuple(strides) if strides is not None else _t._dense_strides(self.shape)
        self.is_cuda = device >= 0
        self._ptr = FakeTorchTensor.next_ptr[0]
        FakeTorchTensor.next_ptr[0] += 1 << 20

    def stride(self):
        return self._strides

    def data_ptr(self):
        return self._ptr

    def get_device(self):
        return self._device

    @property
    def device(self):
        return "cuda:%d" % self._device if self.is_cuda else "cpu"


def _fake_torch(current):
    """A module standing in for torch: its Tensor, dtypes, empty, device
    and the CUDA device and stream queries (current device: current[0])."""
    import types
    m = types.ModuleType("torch")
    m.Tensor = FakeTorchTensor
    for name in ("float16", "bfloat16", "float32", "int32", "int64", "uint8"):
        setattr(m, name, _Dtype(name))
    m.dtype = _Dtype
    m.device = lambda kind, index=None: (kind, index)
    m.empty = lambda shape, dtype=None, device=None: FakeTorchTensor(shape, dtype)
    m.cuda = types.SimpleNamespace(current_device=lambda: current[0],
                                   is_current_stream_capturing=lambda: False,
                                   is_available=lambda: True)
    m._C = types.SimpleNamespace(_cuda_getDevice=lambda: current[0],
                                 _cuda_getCurrentRawStream=lambda device: 0x5000 + device)
    return m


class FakeRunHandle:
    """A planned kernel handle that records its launches: ``runs`` through
    the checked path, ``launches`` through the cached one."""

    def __init__(self, variant, run_fn, status=0):
        self.variant, self._run_fn, self.ptr, self.status = variant, run_fn, 0x9000, status
        self.runs, self.launches = [], []

    def run(self, args, stream):
        self.runs.append((ctypes.addressof(args), stream))

    def launch_function(self):
        def launch(handle, args, stream):
            self.launches.append((handle, args, stream))
            return self.status
        return launch


@pytest.fixture
def fake_torch(monkeypatch):
    current = [0]
    torch = _fake_torch(current)
    monkeypatch.setitem(sys.modules, "torch", torch)
    torch.current = current
    return torch


def _decode_wrapper(torch, num_q_tokens=2, max_page=3):
    w = fi.BatchDecodeWithPagedKVCacheWrapper(None, "NHD")
    v = DecodeVariant(q_type="bfloat16", kv_type="bfloat16", num_q_heads=32, num_kv_heads=8,
                      head_dim=128, page_size=16)
    w._plan = fi._Plan(gen=1, batch=num_q_tokens, seq_lens=[64] * num_q_tokens, variant=v,
                       for_graph=False, num_q_tokens=num_q_tokens, stride=4,
                       page_tables_ptr=0x1000, seq_lens_ptr=0x2000, window_left=-1, device=0,
                       max_page=max_page, max_page_at="indices[3]")
    h = FakeRunHandle(v, "attn_decode_run")
    w._run_handle = lambda *args: h
    return w, h


def _decode_tensors(torch, num_q_tokens=2):
    """q, paged_kv_cache and out that fit _decode_wrapper's plan."""
    bf = torch.bfloat16
    return (FakeTorchTensor((num_q_tokens, 32, 128), bf),
            FakeTorchTensor((4, 2, 16, 8, 128), bf),
            FakeTorchTensor((num_q_tokens, 32, 128), bf))


def test_cached_run_launches_the_checked_call_with_new_pointers(fake_torch):
    torch = fake_torch
    bf = torch.bfloat16
    w, h = _decode_wrapper(torch)
    q, cache, out = _decode_tensors(torch)
    assert w.run(q, cache, out=out) is out
    assert len(h.runs) == 1 and not h.launches and w._plan.fast is not None
    q2, cache2, out2 = _decode_tensors(torch)
    assert w.run(q2, cache2, out=out2) is out2
    assert len(h.runs) == 1 and len(h.launches) == 1
    handle, at, stream = h.launches[0]
    a = _lib.attn_decode_args.from_address(at)
    assert (handle, stream) == (0x9000, 0x5000)
    assert (a.q, a.out, a.q_stride_token, a.out_stride_token) == \
        (q2.data_ptr(), out2.data_ptr(), 32 * 128, 32 * 128)
    assert (a.cache.k, a.cache.v) == (cache2.data_ptr(), cache2.data_ptr() + 2 * 16 * 8 * 128)
    assert (a.cache.num_pages, a.page_tables, a.seq_lens) == (4, 0x1000, 0x2000)
    # An output allocated by run() (dense) takes the cached path too.
    fresh = w.run(q2, cache2)
    assert fresh.shape == (2, 32, 128) and fresh.dtype is bf and len(h.launches) == 2
    assert a.out == fresh.data_ptr() and a.out_stride_token == 32 * 128


def test_cached_run_still_refuses_what_the_checks_refuse(fake_torch):
    torch = fake_torch
    bf = torch.bfloat16
    w, h = _decode_wrapper(torch)
    q, cache, out = _decode_tensors(torch)
    w.run(q, cache, out=out)
    bad = [
        (dict(q=FakeTorchTensor((3, 32, 128), bf)), ValueError, r"q: expected shape \(2, 32, 128\)"),
        (dict(q=FakeTorchTensor((2, 32, 128), torch.float16)), TypeError,
         "q: expected dtype bfloat16, got float16"),
        (dict(q=FakeTorchTensor((2, 32, 128), bf, strides=(4096, 1, 32))), ValueError,
         "q: dimensions 1..2 must be dense"),
        (dict(q=FakeTorchTensor((2, 32, 128), bf, device=-1)), ValueError,
         "q: expected a CUDA tensor"),
        (dict(cache=FakeTorchTensor((4, 2, 16, 4, 128), bf)), ValueError,
         r"paged_kv_cache: expected shape \(\*, 2, 16, 8, 128\)"),
        (dict(cache=FakeTorchTensor((3, 2, 16, 8, 128), bf)), ValueError,
         r"indices\[3\] = 3: past the end of paged_kv_cache, which has 3 pages"),
        (dict(out=FakeTorchTensor((2, 32, 128), torch.float32)), TypeError,
         "out: expected dtype bfloat16"),
        (dict(out=FakeTorchTensor((2, 32, 64), bf)), ValueError, "out: expected shape"),
        (dict(out=FakeTorchTensor((2, 32, 128), bf, device=1)), ValueError,
         "out: expected a tensor on cuda:0"),
        (dict(cache=(FakeTorchTensor((4, 16, 8, 128), bf), FakeTorchTensor((4, 16, 8, 64), bf))),
         ValueError, r"paged_kv_cache\[1\]: expected shape"),
    ]
    for change, error, message in bad:
        args = dict(q=q, cache=cache, out=out)
        args.update(change)
        with pytest.raises(error, match=message):
            w.run(args["q"], args["cache"], out=args["out"])
        # The failed call launched nothing and the record still serves good calls.
        launches = len(h.launches) + len(h.runs)
        w.run(q, cache, out=out)
        assert len(h.launches) + len(h.runs) == launches + 1
    assert len(h.runs) == 1 + len(bad)  # each good call after a refusal re-checked
    # Another current device: the checked path (which makes the plan's current).
    runs = len(h.runs)
    torch.current[0] = 1
    w.run(q, cache, out=out)
    assert len(h.runs) == runs + 1
    torch.current[0] = 0


def test_cached_run_drops_its_record_for_other_calls(fake_torch):
    torch = fake_torch
    w, h = _decode_wrapper(torch)
    q, cache, out = _decode_tensors(torch)
    w.run(q, cache, out=out)
    w.run(q, cache, out=out, aux=[FakeTorchTensor((4,), torch.float32)])
    assert len(h.runs) == 2 and w._plan.fast is None
    a = _lib.attn_decode_args.from_address(h.runs[-1][0])
    assert a.tables.aux[0].data
    w.run(q, cache, out=out)  # checked: clears the aux table, records again
    w.run(q, cache, out=out)
    assert len(h.runs) == 3 and len(h.launches) == 1 and not a.tables.aux[0].data
    w.run(q, cache, out=out, stream=0x77)  # an explicit stream: checked (and recorded)
    assert h.runs[-1][1] == 0x77 and len(h.runs) == 4
    w.run(q, cache, out=out)
    w.run(q, cache, out=out, return_lse=False, enable_pdl=True)
    assert len(h.runs) == 4 and len(h.launches) == 3 and h.launches[-1][2] == 0x5000
    # A float scale the record did not check is checked (16-bit caches: floats only,
    # folded as FlashInfer's).
    with pytest.raises(ValueError, match="k_scale"):
        w.run(q, cache, out=out, k_scale=-2.0)
    w.run(q, cache, out=out, k_scale=1.0)
    w.run(q, cache, out=out, k_scale=1.0)
    with pytest.raises(NotImplementedError, match="v_scale: a tensor of scales"):
        w.run(q, cache, out=out, k_scale=1.0, v_scale=FakeCAI("<f4", (1,)))
    assert len(h.runs) == 5 and len(h.launches) == 4


def test_a_new_plan_drops_the_cached_run(fake_torch):
    torch = fake_torch
    bf = torch.bfloat16
    w, h = _decode_wrapper(torch)
    q, cache, _ = _decode_tensors(torch)
    w.run(q, cache)
    w.run(q, cache)
    assert len(h.launches) == 1
    # A plan() that fails leaves the wrapper unplanned: no cached run.
    with pytest.raises(ValueError, match="indptr: decreases at request 1"):
        w.plan([0, 2, 1], [0, 1, 2], [16, 5], 32, 8, 128, 16, q_data_type="bfloat16")
    with pytest.raises(RuntimeError, match=r"run\(\) before plan\(\)"):
        w.run(q, cache)
    # A plan of three requests: the old q no longer fits, a new one does.
    w, h = _decode_wrapper(torch, num_q_tokens=3)
    with pytest.raises(ValueError, match=r"q: expected shape \(3, 32, 128\)"):
        w.run(q, cache)
    q3 = FakeTorchTensor((3, 32, 128), bf)
    w.run(q3, cache)
    w.run(q3, cache)
    assert len(h.runs) == 1 and len(h.launches) == 1


@needs_lib
def test_cached_run_raises_a_failed_launch(fake_torch):
    torch = fake_torch
    w, h = _decode_wrapper(torch)
    q, cache, _ = _decode_tensors(torch)
    w.run(q, cache)
    h.status = _lib.ATTN_ERROR_INVALID_ARGUMENT
    with pytest.raises(ValueError):
        w.run(q, cache)


def test_cached_prefill_runs(fake_torch):
    from attn._kernels import PrefillVariant
    torch = fake_torch
    bf = torch.bfloat16
    v = PrefillVariant(q_type="bfloat16", num_q_heads=8, num_kv_heads=2, head_dim=64)
    r = fi.BatchPrefillWithRaggedKVCacheWrapper(None, "NHD")
    r._plan = fi._Plan(gen=1, batch=1, cu_q=[0, 4], seq_lens=[0, 6], variant=v,
                       for_graph=False, num_q_tokens=4, device=0)
    h = FakeRunHandle(v, "attn_prefill_run")
    r._run_handle = lambda *args: h
    q, k, vv = (FakeTorchTensor((4, 8, 64), bf), FakeTorchTensor((6, 2, 64), bf),
                FakeTorchTensor((6, 2, 64), bf))
    r.run(q, k, vv)
    k2, v2 = FakeTorchTensor((6, 2, 64), bf), FakeTorchTensor((6, 2, 64), bf)
    out = r.run(q, k2, v2)
    a = _lib.attn_prefill_args.from_address(h.launches[-1][1])
    assert (a.q, a.k, a.v, a.out) == (q.data_ptr(), k2.data_ptr(), v2.data_ptr(), out.data_ptr())
    with pytest.raises(ValueError, match=r"k: expected shape \(6, 2, 64\)"):
        r.run(q, FakeTorchTensor((5, 2, 64), bf), vv)
    with pytest.raises(TypeError, match="v: expected dtype bfloat16"):
        r.run(q, k, FakeTorchTensor((6, 2, 64), torch.float16))
    with pytest.raises(ValueError, match="v: token stride 64 is smaller than a row"):
        r.run(q, k, FakeTorchTensor((6, 2, 64), bf, strides=(64, 64, 1)))
    pv = PrefillVariant(q_type="bfloat16", num_q_heads=8, num_kv_heads=2, head_dim=64,
                        paged=True, kv_type="bfloat16", page_size=16)
    p = fi.BatchPrefillWithPagedKVCacheWrapper(None, "NHD")
    p._plan = fi._Plan(gen=1, batch=1, cu_q=[0, 4], seq_lens=[20], variant=pv,
                       for_graph=False, num_q_tokens=4, stride=2, page_tables_ptr=0x1000,
                       seq_lens_ptr=0x2000, device=0, max_page=1, max_page_at="indices[1]")
    ph = FakeRunHandle(pv, "attn_prefill_run")
    p._run_handle = lambda *args: ph
    cache = FakeTorchTensor((2, 2, 16, 2, 64), bf)
    p.run(q, cache)
    cache2 = FakeTorchTensor((2, 2, 16, 2, 64), bf)
    p.run(q, cache2)
    a = _lib.attn_prefill_args.from_address(ph.launches[-1][1])
    assert (a.cache.k, a.cache.v, a.page_tables) == \
        (cache2.data_ptr(), cache2.data_ptr() + 2 * 16 * 2 * 64, 0x1000)
    with pytest.raises(ValueError, match=r"indices\[1\] = 1: past the end of paged_kv_cache"):
        p.run(q, FakeTorchTensor((1, 2, 16, 2, 64), bf))
    with pytest.raises(ValueError, match="paged_kv_cache: dimensions 2..4 must be dense"):
        p.run(q, FakeTorchTensor((2, 2, 16, 2, 64), bf, strides=(4096, 2048, 64, 1024, 1)))


def test_handles_destroy_once_and_refuse_use_after_close(monkeypatch):
    destroyed = []

    class Lib:
        def attn_fake_destroy(self, ptr):
            destroyed.append(ptr)

    class Fake(Handle):
        _destroy = "attn_fake_destroy"

    monkeypatch.setattr(_lib, "_lib", Lib())
    h = Fake(-1)
    h._ptr = 0x1234
    assert h.ptr == 0x1234 and not h.closed
    with pytest.raises(TypeError, match="a Fake handle owns a C object and cannot be copied"):
        copy.copy(h)
    with pytest.raises(TypeError, match="cannot be copied"):
        copy.deepcopy([h])
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(h)
    h.close()
    h.close()
    assert destroyed == [0x1234] and h.closed
    with pytest.raises(RuntimeError, match=r"this Fake handle is closed \(used after close"):
        h.ptr
    del h
    gc.collect()
    assert destroyed == [0x1234]
    never = Fake(-1)
    with pytest.raises(RuntimeError, match="holds no C object"):
        never.ptr


# --- the progress line -------------------------------------------------------------


def test_progress_line_for_a_slow_call(capsys, monkeypatch):
    monkeypatch.delenv("ATTN_QUIET", raising=False)
    result = _lib.compiling("decode kernel (test) for sm_90a", lambda: time.sleep(1.3) or 7)
    assert result == 7
    err = capsys.readouterr().err.splitlines()
    assert err[0] == ("attn: compiling decode kernel (test) for sm_90a (first use; cached "
                      "afterwards)...")
    assert re.fullmatch(r"attn: compiling decode kernel \(test\) for sm_90a \.\.\. done in "
                        r"1\.[0-9] s", err[1])


def test_no_progress_line_for_a_fast_call_or_when_quiet(capsys, monkeypatch):
    monkeypatch.delenv("ATTN_QUIET", raising=False)
    _lib.compiling("fast", lambda: None)
    monkeypatch.setenv("ATTN_QUIET", "1")
    _lib.compiling("quiet", lambda: time.sleep(1.2))
    assert capsys.readouterr().err == ""


def test_progress_line_when_the_slow_call_fails(capsys, monkeypatch):
    monkeypatch.delenv("ATTN_QUIET", raising=False)

    def slow_failure():
        time.sleep(1.2)
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        _lib.compiling("x for sm_80", slow_failure)
    err = capsys.readouterr().err
    assert "attn: compiling x for sm_80 (first use" in err and "done in" in err


@needs_lib
def test_progress_line_of_a_real_compile(capsys, monkeypatch):
    monkeypatch.delenv("ATTN_QUIET", raising=False)
    monkeypatch.setattr(_lib, "PROGRESS_DELAY_S", 0.0)
    attn.compile_decode("sm_80", num_q_heads=4, num_kv_heads=4, head_dim=32, page_size=8)
    err = capsys.readouterr().err
    assert re.search(r"attn: compiling decode kernel \(q bf16, bf16 cache, 4/4 heads, dim 32, "
                     r"page 8, NHD\) for sm_80 \(first use; cached afterwards\)\.\.\.", err), err
    assert re.search(r"for sm_80 \.\.\. done in [0-9.]+ s", err), err


@needs_lib
def test_progress_line_through_a_slow_c_call(capsys, monkeypatch):
    """A C call that takes over a second (monkeypatched) prints the line
    before its error surfaces."""
    monkeypatch.delenv("ATTN_QUIET", raising=False)
    lib = _lib.load()
    real = lib.attn_compile_decode

    def slow(*args):
        time.sleep(1.2)
        return _lib.ATTN_ERROR_UNSUPPORTED

    monkeypatch.setattr(lib, "attn_compile_decode", slow)
    try:
        with pytest.raises(NotImplementedError):
            attn.compile_decode("sm_90a")
    finally:
        monkeypatch.setattr(lib, "attn_compile_decode", real)
    err = capsys.readouterr().err
    assert "attn: compiling decode kernel (q bf16, bf16 cache, 32/8 heads, dim 128, page 16, " \
           "NHD) for sm_90a (first use; cached afterwards)..." in err
    assert "done in 1." in err


@needs_lib
def test_mla_wrapper_refuses_what_it_cannot_run_before_needing_torch():
    import attn.flashinfer as fi
    w = fi.BatchMLAPagedAttentionWrapper()
    base = dict(qo_indptr=[0, 1, 2], kv_indptr=[0, 1, 3], kv_indices=[0, 1, 2],
                kv_len_arr=[10, 70], num_heads=16, head_dim_ckv=512, head_dim_kpe=64,
                page_size=64, causal=False, sm_scale=0.1, q_data_type="bfloat16",
                kv_data_type="bfloat16")

    def plan(**kw):
        return w.plan(**dict(base, **kw))

    with pytest.raises(NotImplementedError, match="requests have \\[1, 2\\] query tokens"):
        plan(qo_indptr=[0, 1, 3])
    with pytest.raises(ValueError, match="request 1 has 1 pages for kv_len_arr\\[1\\] = 70"):
        plan(kv_indptr=[0, 1, 2])
    with pytest.raises(NotImplementedError, match="kv_data_type float8_e4m3fn"):
        plan(kv_data_type="float8_e4m3fn")
    with pytest.raises(ValueError, match="sm_scale"):
        plan(sm_scale=0)
    with pytest.raises(ValueError, match="at least its 1 query tokens"):
        plan(kv_len_arr=[0, 70])
    with pytest.raises(ValueError, match="qo_indptr: expected 3 entries"):
        plan(qo_indptr=[0, 1])
    with pytest.raises(RuntimeError, match="before plan"):
        w.run(None, None, None, None)
    with pytest.raises(NotImplementedError, match="backend='cutlass'"):
        fi.BatchMLAPagedAttentionWrapper(backend="cutlass")


# --- the vLLM MLA backend ----------------------------------------------------------


def _mla_impl(**kw):
    """A DeepSeek-like MLA layer's impl as vLLM constructs it (positional
    AttentionImpl arguments, MLA keywords); kv_b_proj only needs to exist
    here."""
    args = dict(num_heads=16, head_size=576, scale=192 ** -0.5, num_kv_heads=1,
                alibi_slopes=None, sliding_window=None, kv_cache_dtype="auto",
                logits_soft_cap=None, attn_type="decoder", kv_sharing_target_layer_name=None,
                q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
                qk_head_dim=192, v_head_dim=128, kv_b_proj=object())
    args.update(kw)
    return vb.AttnMLABackend.get_impl_cls()(**args)


def test_vllm_mla_backend_static_interface():
    B = vb.AttnMLABackend
    assert B.get_name() == "ATTN_MLA" and B.is_mla() and not B.is_sparse()
    assert B.get_impl_cls() is vb.AttnMLAImpl
    assert B.get_metadata_cls() is vb.AttnMLAMetadata
    assert B.get_builder_cls() is vb.AttnMLAMetadataBuilder
    assert B.get_kv_cache_shape(100, 64, 1, 576) == (100, 64, 576)
    for bs, hs in [(1, 576), (16, 512), (32, 320), (64, 256)]:
        assert B.get_kv_cache_shape(7, bs, 1, hs, cache_dtype_str="fp8") == (7, bs, hs)
    assert B.get_kv_cache_shape(7, 64, 1, 576, "fp8_e4m3") == (7, 64, 576)
    with pytest.raises(ValueError, match="num_kv_heads 8: an MLA cache holds one latent head"):
        B.get_kv_cache_shape(100, 64, 8, 576)
    with pytest.raises(ValueError, match="block_size 128: attn's MLA backend takes blocks of "
                                         "1, 16, 32, 64 tokens"):
        B.get_kv_cache_shape(100, 128, 1, 576)
    with pytest.raises(ValueError, match="head_size 192"):
        B.get_kv_cache_shape(100, 64, 1, 192)
    with pytest.raises(NotImplementedError, match="kv_cache_dtype 'fp8_e5m2'"):
        B.get_kv_cache_shape(100, 64, 1, 576, cache_dtype_str="fp8_e5m2")
    with pytest.raises(NotImplementedError, match="kv_cache_dtype 'fp8_ds_mla'"):
        B.get_kv_cache_shape(100, 64, 1, 576, cache_dtype_str="fp8_ds_mla")
    with pytest.raises(TypeError, match="block_size: expected an int, got float"):
        B.get_kv_cache_shape(100, 64.0, 1, 576)
    assert B.get_kv_cache_stride_order() == (0, 1, 2)
    assert B.get_kv_cache_stride_order(include_num_layers_dimension=True) == (0, 1, 2, 3)
    assert B.get_kv_cache_block_dim() == 0
    assert B.get_supported_head_sizes() == [256, 320, 512, 576]
    assert B.get_supported_kernel_block_sizes() == [64, 32, 16, 1]
    assert set(B.supported_kv_cache_dtypes) == {"auto", "float16", "bfloat16", "fp8",
                                                "fp8_e4m3"}
    assert B.supports_block_size(16) and not B.supports_block_size(128)
    assert B.get_preferred_block_size(16) == 16 and B.get_preferred_block_size(128) == 64
    assert B.supports_dtype("bfloat16") and not B.supports_dtype("float32")
    assert not B.supports_sink() and B.supports_attn_type("decoder")
    assert not B.supports_attn_type("encoder_only")
    assert B.supports_compute_capability((9, 0)) and not B.supports_compute_capability((7, 5))
    assert B.full_cls_name() == ("attn.vllm_backend", "AttnMLABackend")
    assert B.validate_configuration(576, "bfloat16", "fp8", 64, use_mla=True) == []
    assert B.validate_configuration(576, "float16", "auto", 1, True) == []
    assert B.validate_configuration(576, "bfloat16", "auto", 64, use_mla=False) == \
        ["non-MLA not supported"]
    bad = B.validate_configuration(192, "bfloat16", "fp8_e5m2", 128, use_mla=True,
                                   has_sink=True, use_sparse=True, use_dcp=True,
                                   attn_type="encoder_only")
    assert bad == ["head_size not supported", "kv_cache_dtype not supported",
                   "block_size not supported", "attention sinks not supported",
                   "sparse not supported", "attention type encoder_only not supported",
                   "DCP not supported"]
    support = vb.AttnMLAMetadataBuilder.get_cudagraph_support(None, None)
    assert support.name == "UNIFORM_BATCH" and support.value == 2
    # The non-MLA backend still refuses MLA.
    assert "MLA not supported" in vb.AttnBackend.validate_configuration(
        576, "bfloat16", "auto", 16, use_mla=True)
    assert {"AttnMLABackend", "AttnMLAImpl", "AttnMLAMetadata",
            "AttnMLAMetadataBuilder"} <= set(vb.__all__)


def test_vllm_mla_impl_refusals_name_the_argument():
    cases = [
        (dict(alibi_slopes=[0.5] * 16), NotImplementedError, "alibi_slopes"),
        (dict(sliding_window=4096), NotImplementedError, "sliding_window"),
        (dict(logits_soft_cap=30.0), NotImplementedError, "logits_soft_cap=30.0"),
        (dict(sinks=[0.0] * 16), NotImplementedError, "sinks"),
        (dict(indexer=object()), NotImplementedError, "sparse MLA"),
        (dict(topk_indices_buffer=object()), NotImplementedError, "sparse MLA"),
        (dict(kv_sharing_target_layer_name="model.layers.0.attn"), NotImplementedError,
         "kv_sharing_target_layer_name"),
        (dict(attn_type="encoder_only"), NotImplementedError, "attn_type='encoder_only'"),
        (dict(kv_cache_dtype="fp8_e5m2"), NotImplementedError, "kv_cache_dtype 'fp8_e5m2'"),
        (dict(kv_cache_dtype="fp8_ds_mla"), NotImplementedError, "kv_cache_dtype 'fp8_ds_mla'"),
        (dict(num_kv_heads=8), ValueError, "num_kv_heads 8"),
        (dict(num_heads=256), ValueError, "num_heads: expected an int from 1 to 128"),
        (dict(head_size=512), ValueError, r"head_size 512: an MLA cache row is kv_lora_rank "
                                          r"\+ qk_rope_head_dim \(512 \+ 64\)"),
        (dict(kv_lora_rank=500, head_size=564), ValueError, "kv_lora_rank 500"),
        (dict(qk_rope_head_dim=32, head_size=544), ValueError, "qk_rope_head_dim 32"),
        (dict(qk_head_dim=200), ValueError, r"qk_head_dim 200: expected qk_nope_head_dim \+ "
                                            r"qk_rope_head_dim \(128 \+ 64\)"),
        (dict(qk_nope_head_dim=256, qk_head_dim=320), ValueError,
         "qk_head_dim 320: attn's prefill runs head dims"),
        (dict(v_head_dim=100), ValueError, "v_head_dim 100"),
        (dict(kv_b_proj=None), ValueError, "kv_b_proj: required"),
        (dict(scale=0.0), ValueError, "scale: expected > 0"),
    ]
    for kw, error, message in cases:
        with pytest.raises(error, match=message):
            _mla_impl(**kw)
    impl = _mla_impl()
    assert impl.dcp_world_size == -1  # vLLM's MLA layer fills it in
    impl.dcp_world_size = 2
    with pytest.raises(NotImplementedError, match=r"decode context parallelism "
                                                  r"\(dcp_world_size 2\)"):
        impl.forward_mqa(None, None, vb.AttnMLAMetadata(
            num_reqs=1, max_query_len=1, max_seq_len=5, num_actual_tokens=1,
            query_start_loc=None, slot_mapping=None, num_decodes=1, num_decode_tokens=1,
            num_prefills=0, decode=vb.AttnMLADecodeMetadata(None, None)), None)
    assert not impl.supports_quant_query_input and not impl.can_return_lse_for_decode
    assert impl.q_pad_num_heads is None and not impl.fused_output_quant_supported(None)


def test_vllm_mla_variants():
    impl = _mla_impl()
    d = impl._decode_variant("bfloat16", 64, 1)
    assert (d.q_type, d.kv_type, d.num_q_heads, d.kv_lora_rank, d.rope_dim, d.page_size,
            d.query_len, d.causal, d.scale) == ("bfloat16", None, 16, 512, 64, 64, 1, False,
                                                impl.scale)
    mtp = _mla_impl(kv_cache_dtype="fp8")._decode_variant("float16", 16, 3)
    assert (mtp.kv_type, mtp.query_len, mtp.causal) == ("float8_e4m3fn", 3, True)
    with pytest.raises(NotImplementedError, match="kv_cache_dtype 'float16' with bfloat16 "
                                                  "queries"):
        _mla_impl(kv_cache_dtype="float16")._decode_variant("bfloat16", 64, 1)
    # MHA-form prefill: v of v_head_dim; q/k of v_head_dim + rope_dim.
    if "rope_dim" in vb.PrefillVariant.__dataclass_fields__:
        p = impl._prefill_variant("bfloat16", True, True)
        assert (p.head_dim, p.rope_dim, p.num_q_heads, p.num_kv_heads, p.paged) == \
            (128, 64, 16, 16, False)
        assert p.knobs.causal and p.knobs.write_lse and p.knobs.scale == impl.scale
    else:
        with pytest.raises(NotImplementedError, match="PrefillVariant.rope_dim"):
            impl._prefill_variant("bfloat16", True, True)
    # qk_head_dim == v_head_dim (nope 64 + rope 64, v 128): no rope_dim needed.
    small = _mla_impl(num_heads=32, head_size=320, kv_lora_rank=256, qk_nope_head_dim=64,
                      qk_head_dim=None, v_head_dim=128)
    p = small._prefill_variant("float16", False, True)
    assert p.head_dim == 128 and not p.knobs.causal and p.knobs.write_lse
    assert getattr(p, "rope_dim", 0) == 0
    # qk_head_dim < v_head_dim: q and k are zero-padded to v_head_dim.
    short = _mla_impl(head_size=512, qk_rope_head_dim=0, qk_nope_head_dim=64, qk_head_dim=64,
                      v_head_dim=128)
    assert (short._pf_head_dim, short._pf_rope_dim) == (128, 0)


def test_vllm_mla_split_and_context_chunks():
    # Decodes come first (vLLM reorders them to the front): the leading
    # requests of one query length up to the threshold.
    assert vb._mla_split([1, 1, 1, 20, 12], 4) == 3
    assert vb._mla_split([2, 2, 1, 30], 4) == 2  # uniform: the 1-token one is a prefill
    assert vb._mla_split([3, 3], 4) == 2
    assert vb._mla_split([5, 1, 1], 4) == 0  # the first request is a prefill
    assert vb._mla_split([1, 9, 1], 4) == 1  # decodes after a prefill run as prefills
    assert vb._mla_split([], 4) == 0 and vb._mla_split([0, 1], 4) == 0
    # A full CUDA graph's padded uniform batch: zero-length requests are decodes.
    assert vb._mla_split([2, 2, 0, 0], 4, num_tokens=8) == 4
    assert vb._mla_split([2, 2, 0, 0], 4, num_tokens=4) == 2
    # vLLM's workspace rule and chunks: every prefill gets workspace //
    # (prefills with a context) tokens per chunk, whole pages.
    assert vb._mla_workspace_size(4096, 256, 16) == 32768
    assert vb._mla_workspace_size(163840, 256, 64) == 65536
    assert vb._mla_workspace_size(16, 1024, 128) == 131072
    size, chunks = vb._mla_context_chunks([100, 0, 300], 300, 16)
    assert size == 144  # 300 // 2 = 150, rounded down to pages of 16
    assert chunks == [([0, 0, 0], [100, 0, 144]), ([144, 144, 144], [0, 0, 144]),
                      ([288, 288, 288], [0, 0, 12])]
    assert vb._mla_context_chunks([0, 0], 300, 16) == (0, [])
    assert vb._mla_context_chunks([70], 64, 16) == (64, [([0], [64]), ([64], [6])])
    assert vb._mla_context_chunks([5], 8, 16)[0] == 16  # at least a page


def test_vllm_mla_builder_without_a_gpu():
    import types
    b = vb.AttnMLAMetadataBuilder(block_size=64, max_num_seqs=8, max_num_batched_tokens=512,
                                  max_model_len=1024, dtype="bfloat16", device=0)
    assert b.reorder_batch_threshold == 4 and b.chunked_prefill_workspace_size == 8192
    cfg = types.SimpleNamespace(
        speculative_config=types.SimpleNamespace(num_speculative_tokens=6),
        scheduler_config=types.SimpleNamespace(max_num_seqs=4, max_num_batched_tokens=256),
        model_config=types.SimpleNamespace(max_model_len=512, dtype="bfloat16"),
        compilation_config=None)
    spec = types.SimpleNamespace(block_size=16, head_size=576)
    b = vb.AttnMLABackend.get_builder_cls()(spec, ["layers.0.attn"], cfg, 0)
    assert b.reorder_batch_threshold == 7 and b.block_size == 16
    b = vb.AttnMLAMetadataBuilder(spec, ["l"], cfg, 0, num_speculative_tokens=40,
                                  chunked_prefill_workspace_size=100)
    assert b.reorder_batch_threshold == 16 and b.chunked_prefill_workspace_size == 100
    with pytest.raises(ValueError, match="chunked_prefill_workspace_size: expected an int "
                                         "from 1"):
        vb.AttnMLAMetadataBuilder(spec, ["l"], cfg, 0, chunked_prefill_workspace_size=0)


# --- plan()'s page tables with CPU torch (host and stand-in device arrays) ----


@pytest.fixture
def cpu_tables(monkeypatch):
    """CPU torch, with attn's device buffers on the host: the tables
    plan() builds can be read back and compared."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(_runtime, "_torch_device", lambda device: "cpu")
    monkeypatch.setattr(_runtime, "torch_stream", lambda handle, device: _runtime._SAME_STREAM)
    return torch


def _on_device(torch):
    """A torch.Tensor subclass that says it is a CUDA tensor and counts
    its copies to the host (``reads``: .cpu(), or copy_ into a host
    tensor)."""
    class OnDevice(torch.Tensor):
        reads = [0]
        is_cuda = property(lambda self: True)

        def cpu(self):
            OnDevice.reads[0] += 1
            return self.as_subclass(torch.Tensor).clone()

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func is torch.Tensor.copy_ and not isinstance(args[0], cls):
                cls.reads[0] += 1
            return super().__torch_function__(func, types, args, kwargs or {})

    return OnDevice


def _table_rows(tables, batch):
    buf = tables.buf.buf
    lens = buf[:batch].tolist()
    pages = buf[tables.pages_at:tables.pages_at + batch * tables.stride].view(batch, tables.stride)
    return lens, buf[batch:tables.pages_at].tolist(), pages


def _csr_args(torch, form, counts, first, page, salt=1):
    ip = [first]
    for c in counts:
        ip.append(ip[-1] + c)
    ids = [(7 * i + salt) % 50 for i in range(ip[-1] + 2)]
    last = [(5 * b + salt) % page + 1 for b in range(len(counts))]
    on_device = _on_device(torch)
    i32 = lambda x, dt=torch.int32: torch.tensor(x, dtype=dt)  # noqa: E731
    dev = lambda x: i32(x).as_subclass(on_device)  # noqa: E731
    args = {"lists": (ip, ids, last),
            "host": (i32(ip), i32(ids), i32(last)),
            "host_int64": (i32(ip, torch.int64), i32(ids, torch.int64), i32(last, torch.int64)),
            "device": (dev(ip), dev(ids), dev(last)),
            "host_indptr": (i32(ip), dev(ids), i32(last))}[form]
    return ip, ids, last, args, on_device


@pytest.mark.parametrize("fixed", [0, 8])
@pytest.mark.parametrize("first", [3, 0])  # indices may start past 0
@pytest.mark.parametrize("counts", [[16] * 8, [3, 1, 7, 2], [2, 0, 5], []])
@pytest.mark.parametrize("form", ["lists", "host", "host_int64", "device", "host_indptr"])
def test_csr_tables_from_host_and_device_arrays(cpu_tables, counts, form, first, fixed):
    torch = cpu_tables
    page = 16
    tables = fi._PageTables(0, fixed, 16) if fixed else fi._PageTables(0)
    # An earlier plan's table in the same (reused) buffers first.
    for earlier in ([5] * 3, [16] * 8, [1, 9]):
        _, _, _, args, _ = _csr_args(torch, form, earlier, 0, page, salt=4)
        tables.fill_csr(*args, page, 0)
    ip, ids, last, args, on_device = _csr_args(torch, form, counts, first, page)
    lens = tables.fill_csr(*args, page, 0)
    want = [(c - 1) * page + lp if c else 0 for c, lp in zip(counts, last)]
    assert lens == want
    got_lens, pad, pages = _table_rows(tables, len(counts))
    assert got_lens == want and not any(pad)
    for b, c in enumerate(counts):
        assert pages[b, :c].tolist() == ids[ip[b]:ip[b + 1]]
        assert not pages[b, c:].any()  # unused entries are zeros
    # One read back, whichever arrays are on the device (with host indptr,
    # none when the requests use no page).
    reads = {"device": 1, "host_indptr": 1 if sum(counts) else 0}.get(form, 0)
    assert on_device.reads[0] == reads
    used = ids[ip[0]:ip[-1]]
    assert tables.max_page == (max(used) if used else -1)
    if used:  # where the largest id is, found in what this plan read
        i = int(re.fullmatch(r"indices\[(\d+)\]", str(tables.max_page_at)).group(1))
        assert ids[i] == max(used) and ip[0] <= i < ip[-1]


@pytest.mark.parametrize("form", ["host", "device", "host_indptr"])
def test_csr_table_errors_name_the_argument_from_tensors(cpu_tables, form):
    torch = cpu_tables
    on_device = _on_device(torch)
    i32 = lambda x: torch.tensor(x, dtype=torch.int32)  # noqa: E731
    dev = (lambda x: i32(x).as_subclass(on_device)) if form == "device" else i32
    ids_of = (lambda x: i32(x).as_subclass(on_device)) if form != "host" else i32
    w = fi.BatchDecodeWithPagedKVCacheWrapper(None, "NHD")
    with pytest.raises(ValueError, match=r"indices\[1\] = -3: a page id must be >= 0"):
        w.plan(dev([0, 2, 3]), ids_of([0, -3, 2]), dev([16, 5]), 32, 8, 128, 16)
    with pytest.raises(ValueError, match=r"indptr: decreases at request 1 \(2 > 1\)"):
        w.plan(dev([0, 2, 1]), ids_of([0, 1, 2]), dev([16, 5]), 32, 8, 128, 16)
    with pytest.raises(ValueError, match=r"last_page_len\[1\] = 17: expected 1 to page_size"):
        w.plan(dev([0, 2, 3]), ids_of([0, 1, 2]), dev([16, 17]), 32, 8, 128, 16)
    with pytest.raises(ValueError, match=r"indices: has 2 entries, but indptr\[-1\] is 3"):
        w.plan(dev([0, 2, 3]), ids_of([0, 1]), dev([16, 5]), 32, 8, 128, 16)
    with pytest.raises(TypeError, match=r"indices: expected an integer tensor"):
        w.plan(dev([0, 2, 3]), torch.zeros(3), dev([16, 5]), 32, 8, 128, 16)
    assert w._plan is None


def test_host_ints_of_tensors(cpu_tables):
    torch = cpu_tables
    assert _runtime.host_ints(torch.tensor([0, -5, 2 ** 31 - 1], dtype=torch.int32), "x") == \
        [0, -5, 2 ** 31 - 1]
    with pytest.raises(ValueError, match=r"x\[1\]: expected an int from 0"):
        _runtime.host_ints(torch.tensor([0, -5], dtype=torch.int32), "x", 0)
    with pytest.raises(ValueError, match=r"x\[1\]: expected an int from -2147483648"):
        _runtime.host_ints(torch.tensor([0, 2 ** 31], dtype=torch.int64), "x")
    with pytest.raises(TypeError, match=r"x\[0\]: expected an int"):
        _runtime.host_ints(torch.tensor([True, False]), "x")
    with pytest.raises(TypeError, match=r"x\[0\]: expected an int"):
        _runtime.host_ints(torch.tensor([1.0]), "x")


def test_int32_array_of_c_ints():
    import array
    a = _lib.int32_array(array.array("i", [3, -1, 2 ** 31 - 1]), "x")
    assert list(a) == [3, -1, 2 ** 31 - 1]
    assert len(_lib.int32_array(array.array("i"), "x")) == 1  # a valid pointer for none
    with pytest.raises(ValueError, match=r"x\[0\]"):
        _lib.int32_array([2 ** 31], "x")


def test_variant_hash_is_kept_and_equal_to_a_fresh_one():
    v = DecodeVariant(num_q_heads=16)
    w = v.replace(num_q_heads=16)
    assert hash(v) == hash(w) and v == w and v is not w
    assert hash(v) == hash(v)  # computed once, then kept
    assert v.replace(num_q_heads=32) != v and {v: 1}[w] == 1
    assert "_hash" not in repr(v) and copy.copy(v) == v and pickle.loads(pickle.dumps(v)) == v


# --- FlashInfer compatibility without new kernels -------------------------------------


class _ReachedTorch(Exception):
    pass


def _planned(w, *args, **kw):
    """The variant ``w.plan(*args, **kw)`` makes: plan() runs up to the
    tables (which need torch), with no GPU."""
    def reached(what):
        raise _ReachedTorch(what)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_runtime, "require_torch", reached)
        with pytest.raises(_ReachedTorch):
            w.plan(*args, **kw)
    return w._variant_memo[1]


DECODE_ARGS = ([0, 2, 3], [0, 1, 2], [16, 5], 32, 8, 128, 16)


def test_decode_data_type_fills_only_the_missing_dtypes():
    """FlashInfer's deprecated data_type fills whichever of q_data_type and
    kv_data_type is None; the default q_data_type is float16."""
    w = fi.BatchDecodeWithPagedKVCacheWrapper(None, "NHD")
    v = _planned(w, *DECODE_ARGS, data_type="float8_e4m3fn")
    assert (v.q_type, v.kv_type) == ("float16", "float8_e4m3fn")
    v = _planned(w, *DECODE_ARGS, data_type="float8_e5m2", q_data_type="bfloat16")
    assert (v.q_type, v.kv_type) == ("bfloat16", "float8_e5m2")
    v = _planned(w, *DECODE_ARGS, data_type="bfloat16", q_data_type=None)
    assert (v.q_type, v.kv_type) == ("bfloat16", "bfloat16")
    v = _planned(w, *DECODE_ARGS, data_type="float8_e4m3fn", q_data_type="bfloat16",
                 kv_data_type="bfloat16")
    assert (v.q_type, v.kv_type) == ("bfloat16", "bfloat16")
    # The legacy positional order (pos_encoding_mode ... data_type) reaches the same place.
    v = _planned(w, *DECODE_ARGS, "NONE", -1, None, "float16", None, None, "float8_e4m3fn")
    assert (v.q_type, v.kv_type) == ("float16", "float8_e4m3fn")
    with pytest.raises(NotImplementedError, match="data_type float8_e4m3fn: FP8 queries"):
        w.plan(*DECODE_ARGS, q_data_type=None, data_type="float8_e4m3fn")
    with pytest.raises(TypeError, match="data_type: expected float16"):
        w.plan(*DECODE_ARGS, q_data_type=None, data_type="float32")
    with pytest.raises(TypeError, match="data_type: unknown dtype"):
        w.plan(*DECODE_ARGS, data_type="float7")


def test_decode_tensor_core_arguments_are_checked_as_flashinfers():
    w = fi.BatchDecodeWithPagedKVCacheWrapper(None, "NHD")
    with pytest.raises(ValueError, match="use_tensor_cores"):
        w.plan(*DECODE_ARGS, q_len_per_req=2)
    with pytest.raises(ValueError, match="fixed_split_size"):
        w.plan(*DECODE_ARGS, fixed_split_size=4)
    with pytest.raises(ValueError, match="q_len_per_req"):
        w.plan(*DECODE_ARGS, q_len_per_req=0)
    tc = fi.BatchDecodeWithPagedKVCacheWrapper(None, "NHD", use_tensor_cores=True)
    assert _planned(tc, *DECODE_ARGS, q_len_per_req=2, fixed_split_size=4).query_len == 2
    fa3 = fi.BatchDecodeWithPagedKVCacheWrapper(None, "NHD", use_tensor_cores=True,
                                                backend="fa3")
    with pytest.raises(NotImplementedError, match="fa2"):
        fa3.plan(*DECODE_ARGS, q_len_per_req=2)
    g = fi.BatchDecodeWithPagedKVCacheWrapper(
        None, "NHD", use_cuda_graph=True, use_tensor_cores=True,
        paged_kv_indptr_buffer=[0, 0, 0], paged_kv_indices_buffer=[0] * 4,
        paged_kv_last_page_len_buffer=[0, 0])
    g._planned_variant = DecodeVariant(query_len=2)  # as a successful plan leaves it
    with pytest.raises(ValueError, match="frozen"):
        g.plan(*DECODE_ARGS, q_len_per_req=3)


def test_decode_plan_refuses_requests_shorter_than_their_queries(cpu_tables, monkeypatch):
    monkeypatch.setattr(fi._Wrapper, "_replan_all", lambda self, stream: None)
    monkeypatch.setattr(fi._Wrapper, "_plan_device", lambda self, stream, *a: (0, 0))
    w = fi.BatchDecodeWithPagedKVCacheWrapper(None, "NHD", use_tensor_cores=True)
    w.plan([0, 1, 2], [0, 1], [16, 3], 32, 8, 128, 16, q_len_per_req=3)
    assert w._planned_variant.query_len == 3
    with pytest.raises(ValueError, match="empty KV range"):
        w.plan([0, 1, 2], [0, 1], [16, 2], 32, 8, 128, 16, q_len_per_req=3)
    assert w._plan is None


def test_fast_decode_plan_is_plan(monkeypatch):
    import functools
    calls = []
    monkeypatch.setattr(fi.BatchDecodeWithPagedKVCacheWrapper, "plan",
                        lambda self, *a, **kw: calls.append((a, kw)))
    w = fi.BatchDecodeWithPagedKVCacheWrapper(None, "NHD")
    w.plan = functools.partial(fi.fast_decode_plan, w)  # FlashInfer's usage: no recursion
    w.plan([0, 1], [0], [1], 32, 8, 128, 16, data_type="float8_e4m3fn",
           q_data_type="bfloat16", global_override_indptr_cpu=[0, 1], non_blocking=True)
    a, kw = calls[-1]
    assert a[0] == [0, 1] and kw["q_data_type"] == "bfloat16"
    assert kw["data_type"] == "float8_e4m3fn" and kw["kv_data_type"] is None
    # Without dtypes the last plan's stay, as FlashInfer's planned kernel does.
    w._planned_variant = DecodeVariant(q_type="bfloat16", kv_type="float8_e5m2")
    w.plan([0, 1], [0], [1], 32, 8, 128, 16)
    assert (calls[-1][1]["q_data_type"], calls[-1][1]["kv_data_type"]) == \
        ("bfloat16", "float8_e5m2")
    with pytest.raises(ValueError, match="use_tensor_cores"):
        w.plan([0, 1], [0], [1], 32, 8, 128, 16, q_len_per_req=2)
    tc = fi.BatchDecodeWithPagedKVCacheWrapper(None, "NHD", use_tensor_cores=True)
    with pytest.raises(ValueError, match="prior plan"):
        fi.fast_decode_plan(tc, [0, 1], [0], [1], 32, 8, 128, 16, q_len_per_req=2)
    with pytest.raises(TypeError, match="self: expected a BatchDecodeWithPagedKVCacheWrapper"):
        fi.fast_decode_plan(object(), [0, 1], [0], [1], 32, 8, 128, 16)


def test_dtype_errors_are_type_and_value_errors():
    with pytest.raises(ValueError, match="q: expected dtype float16"):
        _t.tensor(FakeCAI("<f4", (2, 4)), "q", dtype="float16")
    with pytest.raises(TypeError, match="q: expected dtype float16"):
        _t.tensor(FakeCAI("<f4", (2, 4)), "q", dtype="float16")


def _fake_plan(variant):
    return fi._Plan(gen=1, batch=1, seq_lens=[8], variant=variant, num_q_tokens=4,
                    window_left=variant.knobs.window_left, device=0)


def test_forward_replaces_the_planned_knobs_as_flashinfers():
    from attn._kernels import Knobs, PrefillVariant
    w = fi.BatchPrefillWithRaggedKVCacheWrapper(None, "NHD")
    planned = PrefillVariant(knobs=Knobs(causal=True, window_left=7, softcap=5.0, alibi=False))
    w._plan = _fake_plan(planned)
    ran = []
    w.run = lambda *a, **kw: ran.append((a, kw)) or "out"
    assert w.forward("q", "k", "v") == "out"  # FlashInfer's default: causal=False, no window
    k = w._plan.variant.knobs
    assert (k.causal, k.window_left, k.softcap, k.scale) == (False, -1, 0.0, 0.0)
    assert w._plan.planned is planned
    w.forward_return_lse("q", "k", "v", causal=True, window_left=3, logits_soft_cap=2.0,
                         sm_scale=0.5)
    k = w._plan.variant.knobs
    assert (k.causal, k.window_left, k.softcap, k.scale) == (True, 3, 2.0, 0.5)
    assert ran[-1][1] == {"return_lse": True}
    # A knob plan() did not enable stays off; the planned pos_encoding_mode stays.
    w._plan = _fake_plan(PrefillVariant(knobs=Knobs(causal=True)))
    w.forward("q", "k", "v", causal=True, window_left=3, logits_soft_cap=2.0,
              pos_encoding_mode="ALIBI")
    k = w._plan.variant.knobs
    assert (k.window_left, k.softcap, k.alibi, k.score_mod) == (-1, 0.0, False, None)
    with pytest.raises(ValueError, match="pos_encoding_mode"):
        w.forward("q", "k", "v", pos_encoding_mode="XPOS")
    # FlashInfer's window without causal: a mask_mod region of the wrapper's.
    w._plan = _fake_plan(planned)
    w.forward("q", "k", "v", causal=False, window_left=3)
    k = w._plan.variant.knobs
    assert (k.causal, k.window_left, fi._fi_window(k)) == (False, -1, 3)
    assert fi._fi_spec(k) == fi._FiRegions(window=3) and k.score_mod is None
    d = fi.BatchDecodeWithPagedKVCacheWrapper(None, "NHD")
    d._plan = _fake_plan(DecodeVariant(knobs=Knobs(window_left=9)))
    d.run = lambda *a, **kw: ran.append((a, kw))
    d.forward_return_lse("q", "cache", k_scale=0.5)
    assert d._plan.window_left == -1 and d._plan.variant.knobs.window_left == -1
    assert ran[-1][1]["return_lse"] is True and ran[-1][1]["k_scale"] == 0.5
    p = fi.BatchPrefillWithPagedKVCacheWrapper(None, "NHD")
    p._plan = _fake_plan(PrefillVariant(knobs=Knobs(causal=True), paged=True))
    p.run = lambda *a, **kw: ran.append((a, kw))
    p.forward_return_lse("q", "cache", k_scale=0.1, v_scale=0.1)
    assert not p._plan.variant.knobs.causal
    assert ran[-1][1] == {"k_scale": 0.1, "v_scale": 0.1, "return_lse": True}


def test_alibi_is_flashinfers_for_attention_that_is_not_causal():
    causal = fi._knobs("ALIBI", causal=True)
    assert causal.alibi and causal.score_mod is None
    bidir = fi._knobs("ALIBI", causal=False)
    assert not bidir.alibi and bidir.score_mod == fi._ALIBI_REGION
    assert fi._has_alibi(bidir) and not fi._has_alibi(fi._knobs("NONE", causal=False))
    with pytest.raises(NotImplementedError, match="score_mod/mask_mod"):
        fi._knobs("ALIBI", causal=False, mask_mod=SOFTCAP_REGION)
    # forward() switching causal moves ALiBi between the knob and the region.
    from attn._kernels import PrefillVariant
    w = fi.BatchPrefillWithRaggedKVCacheWrapper(None, "NHD")
    w._plan = _fake_plan(PrefillVariant(knobs=causal))
    w.run = lambda *a, **kw: None
    w.forward("q", "k", "v")
    assert w._plan.variant.knobs.score_mod == fi._ALIBI_REGION
    assert not w._plan.variant.knobs.alibi
    w.forward("q", "k", "v", causal=True)
    assert w._plan.variant.knobs == causal
    # Per query row, kv_len - q_len of its request (FlashInfer's LSE constant).
    assert fi._alibi_offsets([0, 2, 2, 5], [4, 3, 3]) == [2, 2, 0, 0, 0]
    v = _planned(fi.BatchPrefillWithPagedKVCacheWrapper(None, "NHD"), [0, 4], [0, 1], [0], [4],
                 8, 8, 64, 16, pos_encoding_mode="ALIBI")
    assert v.knobs.score_mod == fi._ALIBI_REGION
    with pytest.raises(NotImplementedError, match="cascades have no ALiBi"):
        fi.MultiLevelCascadeAttentionWrapper(2, None).plan(
            [[0, 1], [0, 1]], [[0, 1], [0, 1]], [[0], [1]], [[16], [1]], 8, 8, 64, 16,
            pos_encoding_mode="ALIBI")


def test_cascade_runs_level_by_level_what_its_kernels_do_not_take():
    w = fi.MultiLevelCascadeAttentionWrapper(2, None)
    ok = ([[0, 2], [0, 1, 2]], [[0, 1], [0, 1, 2]], [[16], [1, 1]])
    assert w._not_for_kernels(ok[0], ok[1], ok[2], 16) is None
    # Query rows of several lengths, more than 16, a group splitting a
    # request, a shared level ending inside a page.
    assert "[1, 2] query rows" in w._not_for_kernels([[0, 3], [0, 1, 3]], ok[1], ok[2], 16)
    assert "[17] query rows" in w._not_for_kernels([[0, 34], [0, 17, 34]], ok[1], ok[2], 16)
    assert "splits a request" in w._not_for_kernels([[0, 3, 4], [0, 2, 4]],
                                                   [[0, 1, 2], [0, 1, 2]],
                                                   [[16, 16], [1, 1]], 16)
    assert "inside a page" in w._not_for_kernels(ok[0], ok[1], [[9], [1, 1]], 16)
    assert "16 shared levels" in fi.MultiLevelCascadeAttentionWrapper(17, None)._not_for_kernels(
        [[0, 1]] * 17, [[0, 1]] * 17, [[16]] * 17, 16)
    # Those plan one paged prefill per level, causal on the last one only
    # (FlashInfer's cascade), except under use_cuda_graph.
    seen = []

    def plan(self, qo, kvp, kvi, last, *args, **kw):
        seen.append((qo, kw["causal"]))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fi.BatchPrefillWithPagedKVCacheWrapper, "plan", plan)
        w.plan([[0, 3], [0, 1, 3]], ok[1], [[0], [1, 2]], ok[2], 8, 8, 64, 16, causal=True)
    assert seen == [([0, 3], False), ([0, 1, 3], True)] and w._per_level_planned
    g = fi.MultiLevelCascadeAttentionWrapper(
        2, None, use_cuda_graph=True, paged_kv_last_page_len_buf_arr=[[0], [0, 0]],
        paged_kv_indices_buf_arr=[[0], [0, 0]])
    with pytest.raises(NotImplementedError, match="use_cuda_graph=True"):
        g.plan([[0, 3], [0, 1, 3]], ok[1], [[0], [1, 2]], ok[2], 8, 8, 64, 16)
    with pytest.raises(NotImplementedError, match="window_left=127: attn's cascades have no"):
        w.plan([[0, 3], [0, 1, 3]], ok[1], [[0], [1, 2]], ok[2], 8, 8, 64, 16,
               window_left=127)


@needs_lib
@pytest.mark.parametrize("paged", [False, True])
def test_alibi_region_compiles(paged):
    c = attn.compile_prefill("sm_90a", num_q_heads=8, num_kv_heads=2, head_dim=64,
                             causal=False, score_mod=fi._ALIBI_REGION, paged=paged,
                             page_size=16)
    assert c.cubin_size > 0 and "score_mod=" in c.key


def test_merge_state_in_place_mask_errors_name_it():
    torch = pytest.importorskip("torch")
    va, vb_ = FakeCAI("<f2", (4, 8, 64)), FakeCAI("<f2", (4, 8, 64))
    sa, sb = FakeCAI("<f4", (4, 8)), FakeCAI("<f4", (4, 8))
    with pytest.raises(TypeError, match="mask: expected a bool tensor, got list"):
        fi.merge_state_in_place(va, sa, vb_, sb, mask=[True] * 4)
    with pytest.raises(ValueError, match="mask: expected dtype bool, got torch.int32"):
        fi.merge_state_in_place(va, sa, vb_, sb, mask=torch.ones(4, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"mask: expected shape \(4,\) \[seq_len\], got \(5,\)"):
        fi.merge_state_in_place(va, sa, vb_, sb, mask=torch.ones(5, dtype=torch.bool))
    with pytest.raises(ValueError, match="mask: expected a CUDA tensor on v's device"):
        fi.merge_state_in_place(va, sa, vb_, sb, mask=torch.ones(4, dtype=torch.bool))


def _sink_jit_args(dtype="bfloat16"):
    """FlashInfer's AttentionSink jit_args (its tests' and
    BatchAttentionWithAttentionSinkWrapper's form)."""
    return ("batch_prefill_attention_sink_bf16_swa_False_fa2", dtype, dtype, dtype, "int32",
            128, 128, ["sink"], ["float"], ["sm_scale"], ["double"], "AttentionSink",
            "struct AttentionSink : AttentionVariantBase { /* FlashInfer's CUDA */ };")


def test_attention_sink_jit_args_map_onto_sinks():
    from attn._kernels import Knobs, PrefillVariant
    w = fi.BatchPrefillWithRaggedKVCacheWrapper(None, "NHD", backend="fa2",
                                                jit_args=_sink_jit_args(),
                                                jit_kwargs={"use_sliding_window": False})
    assert w._sink_jit
    with pytest.raises(NotImplementedError, match="jit_args"):
        fi.BatchPrefillWithRaggedKVCacheWrapper(None, "NHD", jit_args=_sink_jit_args()[:7] +
                                                (["bias"], ["float"], [], [], "Custom", ""))
    with pytest.raises(NotImplementedError, match="soft-cap"):
        fi.BatchPrefillWithRaggedKVCacheWrapper(None, "NHD", jit_args=_sink_jit_args(),
                                                jit_kwargs={"use_logits_soft_cap": True})
    d = fi.BatchDecodeWithPagedKVCacheWrapper(None, "NHD", jit_args=_sink_jit_args())
    assert d._sink_jit
    w._plan = _fake_plan(PrefillVariant(knobs=Knobs(causal=True)))
    assert w._sink_args(("sink", 0.125), None) == ((), "sink")
    assert w._plan.variant.knobs.scale == 0.125 and w._plan.planned.knobs.scale == 0.0
    assert w._sink_args(("sink2",), None) == ((), "sink2")
    assert w._sink_args((), "sink3") == ((), "sink3")
    with pytest.raises(ValueError, match="sink: FlashInfer's AttentionSink variant takes"):
        w._sink_args((), None)
    with pytest.raises(ValueError, match="sm_scale"):
        w._sink_args(("sink", -1.0), None)
    plain = fi.BatchPrefillWithRaggedKVCacheWrapper(None, "NHD")
    assert plain._sink_args(("x",), None) == (("x",), None)  # refused later, as before
    s = fi.BatchAttentionWithAttentionSinkWrapper(None, kv_layout="NHD", backend="fa3",
                                                  q_data_type="bfloat16", head_dim_qk=64,
                                                  window_left=16)
    assert s._sink_jit and isinstance(s, fi.BatchPrefillWithPagedKVCacheWrapper)
    with pytest.raises(NotImplementedError, match="pos_encoding_mode"):
        fi.BatchAttentionWithAttentionSinkWrapper(None, pos_encoding_mode="ALIBI")
    with pytest.raises(NotImplementedError, match="backend"):
        fi.BatchAttentionWithAttentionSinkWrapper(None, backend="trtllm-gen")


# --- FlashInfer's custom masks and non-causal windows -----------------------------


def _cpu_tables(monkeypatch, *args):
    """fi._mask_tables on the CPU (torch ops only)."""
    import contextlib
    monkeypatch.setattr(_runtime, "torch_stream", lambda s, d: contextlib.nullcontext())
    monkeypatch.setattr(_runtime, "_torch_device", lambda d: "cpu")
    return fi._mask_tables(types.SimpleNamespace(_mask_bufs=None), *args)


def _region_bit(words, meta, request, q_pos, k_pos):
    """What _CUSTOM_MASK_BODY computes, in Python."""
    off, delta, kv_len = meta[request]
    bit = 8 * off + (q_pos - delta) * kv_len + k_pos
    return (words[bit >> 5] & 0xFFFFFFFF) >> (bit & 31) & 1


def test_packbits_and_segment_packbits_are_flashinfers():
    torch = pytest.importorskip("torch")
    x = torch.tensor([1, 0, 1, 1, 0, 0, 1, 1], dtype=torch.bool)
    assert fi.packbits(x).tolist() == [0b10110011]
    assert fi.packbits(x, bitorder="little").tolist() == [0b11001101]
    x = torch.tensor([1, 0, 1, 1, 0, 0, 1, 1, 1, 0, 1], dtype=torch.bool)
    packed, indptr = fi.segment_packbits(x, torch.tensor([0, 4, 7, 11]), bitorder="big")
    assert packed.tolist() == [0b10110000, 0b100000, 0b11010000]
    assert indptr.tolist() == [0, 1, 2, 3] and indptr.dtype == torch.int32
    with pytest.raises(ValueError, match="bitorder: expected 'big' or 'little'"):
        fi.packbits(x, bitorder="middle")
    with pytest.raises(TypeError, match="x: expected a torch.Tensor, got list"):
        fi.packbits([1, 0])


def test_custom_mask_tables_hold_flashinfers_bits(monkeypatch):
    torch = pytest.importorskip("torch")
    q_lens, kv_lens = [3, 5, 1, 4], [7, 9, 4, 4]
    g = torch.Generator().manual_seed(5)
    masks = [torch.rand(a, b, generator=g) < 0.5 for a, b in zip(q_lens, kv_lens)]
    flat = torch.cat([m.reshape(-1) for m in masks])
    words, meta = _cpu_tables(monkeypatch, flat, None, q_lens, kv_lens, -1, 0)
    assert words.dtype == torch.int32 and meta.shape == (4, 3)
    sizes = [a * b for a, b in zip(q_lens, kv_lens)]
    packed, offsets = fi.segment_packbits(flat, torch.tensor([0] + list(_cumsum_ints(sizes))),
                                          bitorder="little")
    assert meta[:, 0].tolist() == offsets[:-1].tolist()  # FlashInfer's mask_indptr
    w, m = words.tolist(), meta.tolist()
    for b, mask in enumerate(masks):
        for i in range(q_lens[b]):
            q_pos = i + kv_lens[b] - q_lens[b]  # attn's bottom-right position
            for j in range(kv_lens[b]):
                assert _region_bit(w, m, b, q_pos, j) == int(mask[i, j]), (b, i, j)
    # packed_custom_mask (segment_packbits' layout) makes the same tables.
    words2, meta2 = _cpu_tables(monkeypatch, None, packed, q_lens, kv_lens, -1, 0)
    assert torch.equal(words, words2) and torch.equal(meta, meta2)


def _cumsum_ints(xs):
    s = 0
    for x in xs:
        s += x
        yield s


def test_custom_mask_errors_name_the_argument(monkeypatch):
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError, match=r"custom_mask: expected sum\(qo_len \* kv_len\) = 12 "
                                         "elements, got 11"):
        _cpu_tables(monkeypatch, torch.ones(11, dtype=torch.bool), None, [3], [4], -1, 0)
    with pytest.raises(TypeError, match="custom_mask: expected a torch.Tensor, got list"):
        _cpu_tables(monkeypatch, [True] * 12, None, [3], [4], -1, 0)
    with pytest.raises(ValueError, match="packed_custom_mask: expected 3 bytes"):
        _cpu_tables(monkeypatch, None, torch.zeros(2, dtype=torch.uint8), [3, 1], [4, 4], -1, 0)
    with pytest.raises(ValueError, match="packed_custom_mask: expected dtype torch.uint8"):
        _cpu_tables(monkeypatch, None, torch.zeros(2, dtype=torch.int32), [3], [4], -1, 0)
    # Graph mode needs FlashInfer's buffers.
    w = fi.BatchPrefillWithRaggedKVCacheWrapper(None, "NHD", use_cuda_graph=True,
                                                qo_indptr_buf=[0, 1, 2])
    with pytest.raises(ValueError, match="custom_mask_buf must be initialized with a "
                                         "torch.Tensor in cuda graph mode"):
        w._plan_mask(torch.ones(2, dtype=torch.bool), None, [0, 1, 2], [1, 1], 0, 0)


def test_custom_mask_and_non_causal_window_knobs():
    spec = fi._fi_spec
    # A custom mask replaces causal (FlashInfer's MaskMode.CUSTOM); the window stays.
    k = fi._knobs(causal=True, custom=True)
    assert not k.causal and k.score_mod is None and spec(k) == fi._FiRegions(custom=True)
    k = fi._knobs(causal=True, window_left=4, custom=True)
    assert (k.causal, k.window_left, spec(k)) == (False, -1, fi._FiRegions(window=4, custom=True))
    k = fi._knobs("ALIBI", causal=True, custom=True)
    assert not k.alibi and spec(k) == fi._FiRegions(alibi=True, custom=True)
    assert k.score_mod and k.mask_mod and fi._has_alibi(k)
    # Without causal a window is a mask_mod region; with causal attn's knob.
    k = fi._knobs(causal=False, window_left=7)
    assert (k.window_left, spec(k), fi._fi_window(k)) == (-1, fi._FiRegions(window=7), 7)
    assert fi._knobs(causal=True, window_left=7).window_left == 7
    assert fi._knobs(causal=False, window_left=-1).mask_mod is None
    with pytest.raises(NotImplementedError, match="custom_mask: attn runs it as a region"):
        fi._knobs(custom=True, mask_mod=SOFTCAP_REGION)
    with pytest.raises(NotImplementedError, match="window_left with causal=False"):
        fi._knobs(causal=False, window_left=3, score_mod=SOFTCAP_REGION)
    with pytest.raises(ValueError, match="window_left: this wrapper applies a sliding window"):
        fi._knobs(causal=False, window_left=3, regions=False)
    # A caller's regions are not taken for the wrapper's.
    assert spec(fi._knobs(causal=False, score_mod=SOFTCAP_REGION)) is None
    v = _planned(fi.BatchPrefillWithRaggedKVCacheWrapper(None, "NHD"), [0, 4], [0, 4], 8, 8, 64,
                 causal=True, custom_mask=object())
    assert spec(v.knobs) == fi._FiRegions(custom=True)
    v = _planned(fi.BatchPrefillWithPagedKVCacheWrapper(None, "NHD"), [0, 4], [0, 1], [0], [4],
                 8, 8, 64, 16, causal=False, window_left=2, packed_custom_mask=object())
    assert spec(v.knobs) == fi._FiRegions(window=2, custom=True)


@needs_lib
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("spec", [dict(window=5), dict(custom=True),
                                  dict(alibi=True, window=0, custom=True)],
                         ids=["window", "custom", "alibi-window-custom"])
def test_flashinfer_regions_compile(arch, spec):
    score, mask = fi._fi_regions(fi._FiRegions(**spec))
    for paged in (False, True):
        c = attn.compile_prefill(arch, num_q_heads=8, num_kv_heads=2, head_dim=64,
                                 causal=False, score_mod=score, mask_mod=mask, paged=paged,
                                 page_size=16)
        assert c.cubin_size > 0 and "mask_mod=" in c.key


# --- FlashInfer's scales on 16-bit caches -------------------------------------------------


def test_scales_on_16bit_caches_fold_as_flashinfers():
    f = fi._folded_scales
    assert f("bfloat16", None, None, None) == (1.0, None)
    assert f("bfloat16", None, 0.5, 2.0) == (0.5, 2.0)
    assert f("float16", 0.25, 0.5, 1.0) == (0.125, None)
    assert f("float16", None, 1, 1) == (1.0, None)  # a multiply by 1 changes nothing
    # FP8 caches take k/v scales in the kernel; q_scale folds either way.
    assert f("float8_e4m3fn", 0.5, 0.25, 4.0) == (0.5, None)
    with pytest.raises(ValueError, match="k_scale"):
        f("bfloat16", None, -1.0, None)
    with pytest.raises(NotImplementedError, match="k_scale: a tensor of scales applies to FP8"):
        f("bfloat16", None, FakeCAI("<f4", (1,)), None)
    with pytest.raises(NotImplementedError, match="q_scale: a float here"):
        f("bfloat16", FakeCAI("<f4", (1,)), None, None)
    # The scaled variant is of the planned one's family (replanned with it).
    from attn._kernels import DecodeVariant
    v = DecodeVariant(knobs=Knobs(scale=0.0))
    assert fi._same_family(v, v.replace(knobs=Knobs(scale=0.3, write_lse=True)))


def test_scaled_run_handle_multiplies_the_planned_scale():
    from attn._kernels import DecodeVariant, PrefillVariant
    w = fi.BatchDecodeWithPagedKVCacheWrapper(None, "NHD")
    made = []
    w._handle = lambda variant, stream: made.append(variant) or variant
    plan = _fake_plan(DecodeVariant(knobs=Knobs(), head_dim=64))
    assert w._run_handle(plan, False, False, False, 0, 0.5).knobs.scale == \
        pytest.approx(0.5 / 8)
    plan = _fake_plan(PrefillVariant(knobs=Knobs(scale=0.2), head_dim=128, rope_dim=64))
    assert w._run_handle(plan, True, False, False, 0, 2.0).knobs.scale == pytest.approx(0.4)
    plan = _fake_plan(PrefillVariant(knobs=Knobs(), head_dim=128, rope_dim=64))
    assert w._run_handle(plan, False, False, False, 0, 2.0).knobs.scale == \
        pytest.approx(2.0 / math.sqrt(192))


def test_flashinfer_submodule_paths():
    import importlib
    assert fi.decode.BatchDecodeWithPagedKVCacheWrapper is fi.BatchDecodeWithPagedKVCacheWrapper
    assert fi.decode.fast_decode_plan is fi.fast_decode_plan
    assert fi.prefill.BatchPrefillWithRaggedKVCacheWrapper is \
        fi.BatchPrefillWithRaggedKVCacheWrapper
    assert fi.cascade.merge_state_in_place is fi.merge_state_in_place
    assert fi.page.append_paged_kv_cache is fi.append_paged_kv_cache
    assert fi.mla.BatchMLAPagedAttentionWrapper is fi.BatchMLAPagedAttentionWrapper
    assert fi.quantization.segment_packbits is fi.segment_packbits
    assert fi.utils.get_alibi_slopes is fi.get_alibi_slopes
    assert importlib.import_module("attn.flashinfer.prefill") is fi.prefill
    from attn.flashinfer.attention import BatchAttentionWithAttentionSinkWrapper
    assert BatchAttentionWithAttentionSinkWrapper is fi.BatchAttentionWithAttentionSinkWrapper


# --- BlockSparseAttentionWrapper: what plan() and run() refuse, the BSR mask --


def test_block_sparse_refuses_what_it_cannot_serve():
    with pytest.raises(NotImplementedError, match="backend='vsa_sm100_blk128'"):
        fi.BlockSparseAttentionWrapper(None, backend="vsa_sm100_blk128")
    w = fi.BlockSparseAttentionWrapper(None)
    args = ([0, 1], [0], 16, 32, 16, 16, 8, 2, 128)
    with pytest.raises(ValueError, match="block_mask: only FlashInfer's VSA backends"):
        w.plan(*args, block_mask=object())
    with pytest.raises(ValueError, match="indptr and indices: both are required"):
        w.plan(None, None, *args[2:])
    with pytest.raises(ValueError, match="N: 40 keys do not divide into blocks of C = 16"):
        w.plan([0, 1], [0], 16, 40, 16, 16, 8, 2, 128)
    with pytest.raises(ValueError, match="R: "):
        w.plan([0, 1], [0], 16, 32, 0, 16, 8, 2, 128)
    with pytest.raises(RuntimeError, match=r"run\(\) before plan\(\)"):
        w.run(None, None, None)
    w._blocks = (32, 16)  # as a plan leaves it
    with pytest.raises(NotImplementedError, match="scale_k: FlashInfer's FP8"):
        w.run(None, None, None, scale_k=1.0)


def test_single_functions_refuse_what_they_cannot_serve():
    torch = pytest.importorskip("torch")
    bf16 = torch.bfloat16
    q = torch.zeros(4, 8, 64, dtype=bf16)
    k = v = torch.zeros(16, 2, 64, dtype=bf16)
    single = fi.single_prefill_with_kv_cache
    with pytest.raises(NotImplementedError, match="scale_q"):
        single(q, k, v, scale_q=torch.ones(8))
    with pytest.raises(NotImplementedError, match="kv_cache_sf"):
        single(q, k, v, kv_cache_sf=(k, v))
    with pytest.raises(NotImplementedError, match="o_dtype torch.float32"):
        single(q, k, v, o_dtype=torch.float32)
    with pytest.raises(NotImplementedError, match="backend='cudnn'"):
        single(q, k, v, backend="cudnn")
    with pytest.raises(ValueError, match="kv_layout: expected 'NHD' or 'HND'"):
        single(q, k, v, kv_layout="NDH")
    with pytest.raises(ValueError, match="differ in kv_len or num_kv_heads"):
        single(q, k, v[:8])
    with pytest.raises(ValueError, match="k's head_dim 32 differs from q's 64"):
        single(q, k[..., :32], v[..., :32])
    with pytest.raises(ValueError, match=r"custom_mask expected \[qo_len, kv_len\] = \[4, 16\]"):
        single(q, k, v, custom_mask=torch.ones(4 * 16, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"k expected a 3-D tensor"):
        single(q, k[0], v)
    with pytest.raises(ValueError, match=r"single_decode_with_kv_cache: q expected "
                                         r"\[num_qo_heads, head_dim\]"):
        fi.single_decode_with_kv_cache(q, k, v)
    with pytest.raises(NotImplementedError, match="q_scale=2.0"):
        fi.single_decode_with_kv_cache(q[0], k, v, q_scale=2.0)
    # FlashInfer's module paths reach the same functions.
    assert fi.decode.single_decode_with_kv_cache is fi.single_decode_with_kv_cache
    assert fi.prefill.single_prefill_with_kv_cache is single
    assert fi.prefill.single_prefill_with_kv_cache_return_lse is \
        fi.single_prefill_with_kv_cache_return_lse


def test_rope_llama_rotates_halves_by_position_as_flashinfer():
    """FlashInfer's ROPE_LLAMA: (x_i, x_{i+d/2}) at position p turn by
    p * theta^(-2i/d) / scale; checked against the complex-number form in
    float64."""
    torch = pytest.importorskip("torch")
    n, heads, d, first = 5, 3, 16, 7
    x = torch.randn(n, heads, d, generator=torch.Generator().manual_seed(3))
    for scale, theta in ((None, None), (2.0, 5e5)):
        got = fi._rope_llama(x, first, scale, theta, torch).double()
        s, t = scale or 1.0, theta or 1e4
        freq = torch.tensor([t ** (-2.0 * i / d) / s for i in range(d // 2)],
                            dtype=torch.float64)
        pos = torch.arange(first, first + n, dtype=torch.float64)
        turn = torch.polar(torch.ones(n, 1, d // 2, dtype=torch.float64),
                           pos[:, None, None] * freq)
        z = torch.complex(x[..., :d // 2].double(), x[..., d // 2:].double()) * turn
        want = torch.cat([z.real, z.imag], dim=-1)
        assert (got - want).abs().max().item() < 1e-4
    assert torch.equal(fi._rope_llama(x[:1], 0, None, None, torch), x[:1])  # position 0
    with pytest.raises(ValueError, match="head_dim 15 is odd"):
        fi._rope_llama(x[..., :15], 0, None, None, torch)
    with pytest.raises(ValueError, match="rope_theta"):
        fi._rope_llama(x, 0, None, -1.0, torch)
    k32 = torch.zeros(16, 2, 64)  # FP8 k/v are widened to q's type; f32 ones are not
    with pytest.raises(NotImplementedError, match="ROPE_LLAMA' with torch.float32"):
        fi.single_prefill_with_kv_cache(torch.zeros(4, 8, 64, dtype=torch.bfloat16), k32, k32,
                                        pos_encoding_mode="ROPE_LLAMA")
    k8 = k32.to(torch.float8_e4m3fn)
    with pytest.raises(TypeError, match="v's dtype torch.bfloat16 differs"):
        fi.single_prefill_with_kv_cache(torch.zeros(4, 8, 64, dtype=torch.bfloat16), k8,
                                        k32.bfloat16(), pos_encoding_mode="ROPE_LLAMA")


def test_rope_positions_and_rotated_cache_follow_the_page_table():
    """The batch wrappers' ROPE_LLAMA: each page read gets its keys rotated
    at its place in its request (CSR or block tables), in a copy of the
    cache in either layout and form; a page read at two places is refused;
    CUDA-graph wrappers refuse it."""
    torch = pytest.importorskip("torch")
    cpu = torch.device("cpu")
    page = 4
    pages, pos = fi._Rope.paged_positions([0, 2, 3], [5, 1, 7], None, None, page, cpu, torch)
    assert pages.tolist() == [5, 1, 7] and pos.tolist() == [0, 4, 0]
    pages, pos = fi._Rope.paged_positions(None, None, [[2, 3, 9], [4, 9, 9]], [6, 3], page,
                                          cpu, torch)
    assert pages.tolist() == [2, 3, 4] and pos.tolist() == [0, 4, 0]
    with pytest.raises(NotImplementedError, match="read at two positions"):
        fi._Rope.paged_positions([0, 2, 3], [5, 1, 1], None, None, page, cpu, torch)
    fi._Rope.paged_positions([0, 1, 2], [5, 5], None, None, page, cpu, torch)  # same place
    rope = fi._Rope(2.0, 5e4, torch.tensor([3]), pages=torch.tensor([3, 0]),
                    page_pos=torch.tensor([0, 4]))
    g = torch.Generator().manual_seed(5)
    k = torch.randn(5, page, 2, 8, generator=g)  # NHD: [pages, page, heads, dim]
    v = torch.randn(5, page, 2, 8, generator=g)

    def want(layout_k, layout):
        out = layout_k.clone()
        for p, base in ((3, 0), (0, 4)):
            for t in range(page):
                rows = out[p, t] if layout == "NHD" else out[p, :, t]
                rows.copy_(fi._rope_llama(rows[None], base + t, 2.0, 5e4, torch)[0])
        return out
    got_k, got_v = rope.rotate_cache((k, v), "NHD", k.dtype, torch)
    assert torch.allclose(got_k, want(k, "NHD")) and got_v is v
    assert torch.equal(got_k[1], k[1])  # pages not read stay as they are
    hnd = k.transpose(1, 2).contiguous()
    assert torch.allclose(rope.rotate_cache((hnd, v), "HND", k.dtype, torch)[0], want(hnd, "HND"))
    both = torch.stack([k, v], dim=1)  # [pages, 2, page, heads, dim]
    got = rope.rotate_cache(both, "NHD", k.dtype, torch)
    assert torch.allclose(got[:, 0], want(k, "NHD")) and torch.equal(got[:, 1], v)
    # An FP8 cache: copied in q's type (exact), v too, the keys rotated there.
    rope.fp8 = "float8_e4m3fn"
    k8, v8 = k.to(torch.float8_e4m3fn), v.to(torch.float8_e4m3fn)
    got_k, got_v = rope.rotate_cache((k8, v8), "NHD", torch.bfloat16, torch)
    assert got_k.dtype == got_v.dtype == torch.bfloat16
    assert torch.equal(got_v, v8.to(torch.bfloat16))
    assert torch.equal(got_k, want(k8.to(torch.bfloat16), "NHD"))
    with pytest.raises(TypeError, match="paged_kv_cache: expected dtype float8_e4m3fn"):
        rope.rotate_cache((k, v), "NHD", torch.bfloat16, torch)
    for variant in (fi.DecodeVariant(q_type="bfloat16", kv_type="float8_e5m2"),
                    fi.PrefillVariant(q_type="float16", kv_type="float8_e4m3fn", paged=True)):
        widened, fp8 = fi._Rope.cache_variant(variant)
        assert fp8 == variant.kv_type and (widened.kv_type or widened.q_type) == variant.q_type
        assert dataclasses.replace(widened, kv_type=variant.kv_type) == variant
    plain = fi.DecodeVariant(q_type="bfloat16", kv_type="bfloat16")
    assert fi._Rope.cache_variant(plain) == (plain, None)

    class Graphed:
        _use_cuda_graph, _what = True, "BatchDecodeWithPagedKVCacheWrapper"
    with pytest.raises(NotImplementedError, match="use_cuda_graph"):
        fi._Rope.plan("ROPE_LLAMA", None, None, Graphed())
    Graphed._use_cuda_graph = False
    assert fi._Rope.plan("rope_llama", 2.0, None, Graphed()) == ((2.0, 1e4), "NONE")
    assert fi._Rope.plan("ALIBI", 2.0, None, Graphed()) == (None, "ALIBI")


def test_rope_positions_under_graphs_are_refilled_in_place():
    """A graph-mode decode wrapper's ROPE_LLAMA positions: every plan refills
    the same tensors (a captured run keeps their addresses), one table per
    cache size met, pages not read at 0."""
    torch = pytest.importorskip("torch")
    g = fi._RopeGraph()
    g.set(torch.tensor([9, 40]), torch.tensor([3, 1]), torch.tensor([0, 16]), torch)
    q_pos = g.q_pos
    table = g.page_positions(6, torch.device("cpu"), torch)
    assert table.tolist() == [0, 16, 0, 0, 0, 0]
    g.set(torch.tensor([20, 5]), torch.tensor([5, 0, 2]), torch.tensor([0, 16, 32]), torch)
    assert g.q_pos is q_pos and q_pos.tolist() == [20, 5]
    assert g.page_positions(6, torch.device("cpu"), torch) is table
    assert table.tolist() == [16, 0, 32, 0, 0, 0]
    small = g.page_positions(4, torch.device("cpu"), torch)  # page 5 is not in it
    assert small.tolist() == [0, 0, 0, 0] and g.tables[6] is table


def test_variable_blocks_become_requests_of_one_token_pages():
    """VariableBlockSparseAttentionWrapper's plan: requests (KV head, row
    block), each reading the tokens of its listed key blocks as one-token
    pages of its head's keys (FlashInfer's docstring example, then a
    second head and an empty row block)."""
    torch = pytest.importorskip("torch")
    mask = torch.tensor([[[0, 0, 1], [1, 0, 1], [0, 1, 1]]], dtype=torch.bool)
    rows, cols = torch.tensor([[1, 2, 3]]), torch.tensor([[3, 1, 2]])
    assert fi._variable_blocks(mask, rows, cols, torch) == (
        [0, 1, 3, 6], [0, 2, 7, 10], [4, 5, 0, 1, 2, 4, 5, 3, 4, 5])
    mask2 = torch.cat([mask, torch.zeros(1, 3, 3, dtype=torch.bool)])
    mask2[1, 2, 0] = True  # head 1: only its last row block, one key block
    got = fi._variable_blocks(mask2, torch.cat([rows, torch.tensor([[4, 1, 1]])]),
                              torch.cat([cols, torch.tensor([[4, 1, 1]])]), torch)
    assert got[0] == [0, 1, 3, 6, 10, 11, 12]
    assert got[1] == [0, 2, 7, 10, 10, 10, 14]
    assert got[2][10:] == [6, 7, 8, 9]  # head 1's keys start at page kv_len = 6
    w = fi.VariableBlockSparseAttentionWrapper(None)
    with pytest.raises(ValueError, match="block_mask_map: expected shape"):
        w.plan(mask[:, :2], rows, cols, 4, 1, 64)
    with pytest.raises(ValueError, match="block_col_sz: every KV head's blocks"):
        w.plan(mask2, torch.cat([rows, rows]), torch.cat([cols, torch.tensor([[1, 1, 1]])]),
               4, 2, 64)
    with pytest.raises(RuntimeError, match="run\\(\\) before plan\\(\\)"):
        w.run(None, None, None)
    assert fi.sparse.VariableBlockSparseAttentionWrapper is fi.VariableBlockSparseAttentionWrapper


def test_block_sparse_rows_follow_m_and_r():
    assert fi._bsr_rows([0, 2, 3, 5], 40, 16) == [0, 16, 32, 40]
    assert fi._bsr_rows([0, 1, 2], 32, 16) == [0, 16, 32]
    with pytest.raises(ValueError, match="indptr: has 3 row blocks, but M = 32 rows in "
                                         "blocks of R = 16 make 2"):
        fi._bsr_rows([0, 1, 2, 3], 32, 16)
    with pytest.raises(ValueError, match="indptr: has 2 row blocks, but M = 33"):
        fi._bsr_rows([0, 1, 2], 33, 16)
    with pytest.raises(ValueError, match="indptr: needs at least 2 entries"):
        fi._bsr_rows([0], 16, 16)


def test_block_sparse_mask_is_per_row_block_rows_over_its_blocks():
    """mask[b, r, c] (block b of the BSR, its row r, key c) lands at row r,
    key (b - first block of the row) * C + c of its row block's mask, as
    FlashInfer's convert_bsr_mask_layout; a short last row block keeps its
    first rows."""
    torch = pytest.importorskip("torch")
    R, C = 3, 2
    ip = [0, 2, 3]
    rows = [0, 3, 5]  # M = 5: the last row block has 2 rows
    g = torch.Generator().manual_seed(7)
    mask = torch.rand(3, R, C, generator=g) < 0.5
    flat = fi._bsr_mask(mask, ip, rows, R, C, torch).tolist()
    want = []
    for i in range(2):
        for r in range(rows[i + 1] - rows[i]):
            for b in range(ip[i], ip[i + 1]):
                for c in range(C):
                    want.append(bool(mask[b, r, c]))
    assert flat == want
    with pytest.raises(ValueError, match=r"mask: expected a tensor of shape \(nnz, R, C\) = "
                                         r"\(3, 3, 2\), got \(3, 2, 2\)"):
        fi._bsr_mask(mask[:, :2], ip, rows, R, C, torch)


# --- torch.compile: run() traced as the attn::wrapper_run custom op -----------


def test_compiled_run_is_one_custom_op_with_the_plans_shapes():
    """A wrapper's run() under torch.compile(fullgraph=True) is traced as
    attn::wrapper_run (no graph break), whose fake gives out [rows, heads,
    head_dim_vo] and a float32 LSE from the plan, and whose eager form is the
    wrapper's own run() (here a probe's); a (k, v) cache tuple is passed
    through flattened."""
    torch = pytest.importorskip("torch")
    from attn import _compile

    class Probe(fi._Wrapper):
        def __init__(self):
            super().__init__(None, "NHD", False)
            self.calls = []

        def _need_plan(self):
            return types.SimpleNamespace(variant=types.SimpleNamespace(head_dim=3))

        def run(self, q, cache, return_lse=False):
            if _compile.tracing(self):
                return _compile.run(self, (q, cache), return_lse)
            self.calls.append(type(cache).__name__)
            k, v = cache
            out = (q[..., :3] + k.sum() - v.sum()).contiguous()
            return (out, q.sum(-1).float()) if return_lse else out

    w = Probe()
    assert w._op_id is not None
    q = torch.randn(5, 2, 4, dtype=torch.bfloat16)
    k, v = torch.randn(7), torch.randn(7)

    def step(q, k, v):
        out, lse = w.run(q, (k, v), return_lse=True)
        return out * 2, lse

    compiled = torch.compile(step, backend="aot_eager", fullgraph=True)
    out, lse = compiled(q, k, v)
    want_out, want_lse = step(q, k, v)
    assert torch.equal(out, want_out) and torch.equal(lse, want_lse)
    assert out.shape == (5, 2, 3) and out.dtype == torch.bfloat16 and lse.dtype == torch.float32
    assert w.calls == ["tuple", "tuple"]  # the op's eager run rebuilt the tuple
    gm = []
    torch.compile(step, backend=lambda g, _: gm.append(g) or g, fullgraph=True)(q, k, v)
    nodes = [n for n in gm[0].graph.nodes if "wrapper_run" in str(n.target)]
    assert len(nodes) == 1
    fake_out, fake_lse = nodes[0].meta["example_value"]
    assert fake_out.shape == (5, 2, 3) and fake_out.dtype == torch.bfloat16
    assert fake_lse.shape == (5, 2) and fake_lse.dtype == torch.float32
