"""One adapter from a caller's array to what the C ABI takes.

``adapt(obj, name)`` turns an argument into a ``Tensor``: device pointer,
dtype name, shape, strides (in elements), device index. It accepts

- ``torch.Tensor`` (read through its attributes; torch is never imported
  here: a tensor is recognized only when torch is already loaded);
- any object with ``__cuda_array_interface__`` (versions 2 and 3: CuPy,
  Numba, ...);
- any object with ``__dlpack__`` / ``__dlpack_device__`` (the capsule is
  parsed with ctypes: no torch needed, any producer).

Dtype names are torch's spelling: ``float16``, ``bfloat16``, ``float32``,
``float8_e4m3fn``, ``float8_e5m2``, ``int32``, ``int64``, ``uint8``, ...

Two cases are ambiguous by nature and taken as the call expects:

- ``__cuda_array_interface__`` has no bfloat16 typestr: producers write
  ``'<V2'`` (2 opaque bytes; ml_dtypes' bfloat16 does). Such data is
  accepted where bfloat16 is expected, and nowhere else (``'<f2'`` is
  float16). torch exposes bfloat16 tensors only through DLPack and its own
  attributes, never this interface.
- FP8 data often travels as ``uint8`` (vLLM allocates FP8 caches as uint8
  tensors; the interface has no FP8 typestr: ``'|u1'`` or ``'|V1'``). One-byte
  data is accepted where an FP8 dtype is expected, and read as that format
  (the variant, e.g. ``kv_data_type``, decides between e4m3 and e5m2).

Checks raise an exception whose message starts with the argument's name:
``TypeError`` for something that is not a CUDA array or has the wrong dtype,
``ValueError`` for a wrong device, shape or strides.

What a producer says is checked before it is used, whatever it is: the
interface's dict and every entry's type, DLPack's device, capsule name,
ndim, dtype and lanes; shapes and strides must fit int64 and the array's
bytes the address space. DLPack's structs are read through the kernel
(``read_memory``: write(2) from the address into a pipe), so a capsule whose
pointers lead nowhere is a ``ValueError`` naming the argument, never a
crash. The capsule is never consumed: when the ``Tensor`` goes, the
capsule's destructor calls the producer's deleter, as DLPack asks.
"""

import ctypes
import math
import operator
import os
import sys
import threading
from ctypes import (POINTER, Structure, c_int, c_int32, c_int64, c_uint8, c_uint16, c_uint64,
                    c_void_p)

from ._lib import INT64_MAX, UINT64_MAX

FP8_DTYPES = ("float8_e4m3fn", "float8_e5m2")

_TYPESTR = {
    "f2": "float16", "f4": "float32", "f8": "float64",
    "i1": "int8", "i2": "int16", "i4": "int32", "i8": "int64",
    "u1": "uint8", "u2": "uint16", "u4": "uint32", "u8": "uint64",
    "b1": "bool", "V2": "void16", "V1": "void8",
}

_ITEMSIZE = {
    "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "int16": 2,
    "int32": 4, "int64": 8, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8,
    "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "void16": 2, "void8": 1,
}

# DLPack (code, bits) -> dtype name (dlpack.h's DLDataTypeCode).
_DLPACK = {
    (0, 8): "int8", (0, 16): "int16", (0, 32): "int32", (0, 64): "int64",
    (1, 8): "uint8", (1, 16): "uint16", (1, 32): "uint32", (1, 64): "uint64",
    (2, 16): "float16", (2, 32): "float32", (2, 64): "float64",
    (4, 16): "bfloat16", (6, 8): "bool", (10, 8): "float8_e4m3fn", (12, 8): "float8_e5m2",
}
KDL_CUDA = 2
_DL_DEVICE_NAMES = {1: "cpu", 2: "cuda", 3: "cuda_host", 10: "rocm", 13: "cuda_managed"}


class DLDevice(Structure):
    _fields_ = [("device_type", c_int), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    # shape and strides are read through read_memory, never indexed.
    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", c_int32),
        ("dtype", DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


class DLManagedTensor(Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", c_void_p)]


# More dimensions than any array attn takes (numpy's limit).
MAX_NDIM = 64


def _api(name, restype, argtypes):
    # pythonapi[name] is a function object of our own: pythonapi.name is
    # shared with every module, which may set other argtypes or restype.
    fn = ctypes.pythonapi[name]
    fn.restype, fn.argtypes = restype, argtypes
    return fn


_capsule_get_pointer = _api("PyCapsule_GetPointer", c_void_p, [ctypes.py_object, ctypes.c_char_p])
_capsule_get_name = _api("PyCapsule_GetName", c_void_p, [ctypes.py_object])
_capsule_new = _api("PyCapsule_New", ctypes.py_object, [c_void_p, ctypes.c_char_p, c_void_p])
_CAPSULE_TYPE = type(_capsule_new(1, None, None))

_DLTENSOR_NAME = b"dltensor\0"

# --- reading memory a producer points at --------------------------------------

_libc = None
_pipe_lock = threading.Lock()
_pipe_fds = None  # (read end, write end, pid)


def _pipe():
    """The process's non-blocking pipe (a new one after a fork); call with
    _pipe_lock held."""
    global _pipe_fds
    if _pipe_fds is None or _pipe_fds[2] != os.getpid():
        rfd, wfd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        _pipe_fds = (rfd, wfd, os.getpid())
    return _pipe_fds[0], _pipe_fds[1]


def _drop_pipe():
    """Closes the pipe (it may hold bytes of an interrupted read)."""
    global _pipe_fds
    if _pipe_fds is not None and _pipe_fds[2] == os.getpid():
        for fd in _pipe_fds[:2]:
            os.close(fd)
    _pipe_fds = None


def read_memory(address, size, name, what):
    """The ``size`` bytes (at most 4096) at ``address`` in this process,
    copied by the kernel (write(2) from the address into a pipe, then read
    back), so an unmapped address is an error (EFAULT), never a crash:
    ValueError starting with ``name`` and saying ``what`` was read."""
    global _libc
    if size == 0:
        return b""
    if not address or address < 0 or address + size - 1 > UINT64_MAX:
        raise ValueError("%s: %s at address 0x%x is not readable memory"
                         % (name, what, address or 0))
    assert size <= 4096  # PIPE_BUF: the pipe takes it whole
    if _libc is None:
        libc = ctypes.CDLL(None, use_errno=True)  # our own: its write's argtypes are ours
        libc.write.argtypes = [c_int, c_void_p, ctypes.c_size_t]
        libc.write.restype = ctypes.c_ssize_t
        _libc = libc
    with _pipe_lock:
        try:
            rfd, wfd = _pipe()
            ctypes.set_errno(0)
            n = _libc.write(wfd, address, size)
            err = ctypes.get_errno()
            data = os.read(rfd, n) if n > 0 else b""
        except BaseException:
            _drop_pipe()
            raise
    if n != size:
        reason = os.strerror(err) if n < 0 and err else \
            "%d of %d bytes readable" % (max(n, 0), size)
        raise ValueError("%s: %s at address 0x%x is not readable memory (%s)"
                         % (name, what, address, reason))
    return data


def _read_int64s(address, count, name, what):
    if count == 0:
        return ()
    data = read_memory(address, 8 * count, name, what)
    return tuple(int.from_bytes(data[8 * i:8 * i + 8], sys.byteorder, signed=True)
                 for i in range(count))


class Tensor:
    """What attn reads of an array: pointer, dtype, shape, strides
    (elements), CUDA device index (-1: unknown), and the original object
    (``obj``) kept alive for the call."""

    __slots__ = ("name", "ptr", "dtype", "shape", "strides", "device", "obj", "keepalive")

    def __init__(self, name, ptr, dtype, shape, strides, device, obj, keepalive=None):
        self.name = name
        self.ptr = int(ptr or 0)
        self.dtype = dtype
        self.shape = tuple(shape)
        self.strides = tuple(strides)
        self.device = device
        self.obj = obj
        self.keepalive = keepalive

    @property
    def itemsize(self):
        return _ITEMSIZE.get(self.dtype, 0)

    @property
    def ndim(self):
        return len(self.shape)

    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    def row_elements(self):
        """Elements of one row of the first dimension (dense)."""
        n = 1
        for s in self.shape[1:]:
            n *= s
        return n

    def token_stride(self):
        """Stride of the first dimension, in elements (dense when the
        dimension has at most one entry)."""
        if not self.shape:
            return 0
        if self.shape[0] <= 1:
            return self.row_elements()
        return self.strides[0]

    def offset(self, elements):
        """The device address ``elements`` elements past the start."""
        return self.ptr + elements * self.itemsize

    def __repr__(self):
        return "Tensor(%s: %s %s strides %s on cuda:%s)" % (
            self.name, self.dtype, self.shape, self.strides, self.device)


def _check_array(name, ptr, shape, strides, itemsize):
    """ValueError unless the array a producer describes is one attn can
    take as it is: at most MAX_NDIM dimensions, sizes and strides that fit
    int64, and every byte it spans inside the address space."""
    if len(shape) > MAX_NDIM:
        raise ValueError("%s: %d dimensions, more than %d" % (name, len(shape), MAX_NDIM))
    if len(strides) != len(shape):
        raise ValueError("%s: %d strides for %d dimensions" % (name, len(strides), len(shape)))
    if not 0 <= ptr <= UINT64_MAX:
        raise ValueError("%s: data pointer %d is not an address" % (name, ptr))
    if shape and (min(shape) < 0 or max(shape) > INT64_MAX or min(strides) < -INT64_MAX - 1
                  or max(strides) > INT64_MAX):
        for dim, (size, stride) in enumerate(zip(shape, strides)):
            if not 0 <= size <= INT64_MAX:
                raise ValueError("%s: size %d of dimension %d is out of range" % (name, size, dim))
            if not -INT64_MAX - 1 <= stride <= INT64_MAX:
                raise ValueError("%s: stride %d of dimension %d is out of range"
                                 % (name, stride, dim))
    numel = math.prod(shape)
    if numel > INT64_MAX:
        raise ValueError("%s: %d elements, more than int64 counts" % (name, numel))
    if not numel:
        return
    # Byte offsets of the lowest and highest element from ptr (every size >= 1 here).
    if not shape or min(strides) >= 0:
        low, high = 0, (sum(map(operator.mul, shape, strides)) - sum(strides)) * itemsize
    else:
        spans = [(size - 1) * stride * itemsize for size, stride in zip(shape, strides)]
        low, high = sum(x for x in spans if x < 0), sum(x for x in spans if x > 0)
    if ptr + low < 0 or ptr + high + itemsize - 1 > UINT64_MAX:
        raise ValueError("%s: the array's bytes (pointer 0x%x, shape %s, strides %s) fall outside "
                         "the address space" % (name, ptr, tuple(shape), tuple(strides)))


def _int_list(value, name, what):
    """A producer's tuple of ints (shape, strides) as a tuple of Python ints."""
    if not isinstance(value, (tuple, list)):
        raise TypeError("%s: __cuda_array_interface__ %s must be a tuple of ints, got %s"
                        % (name, what, type(value).__name__))
    if len(value) > MAX_NDIM:
        raise ValueError("%s: __cuda_array_interface__ %s has %d entries, more than %d"
                         % (name, what, len(value), MAX_NDIM))
    value = tuple(value)
    if value and set(map(type, value)) != _INT_ONLY:
        try:  # integer scalars (numpy's) are ints; bools and floats are not
            if any(isinstance(v, bool) for v in value):
                raise TypeError
            value = tuple(operator.index(v) for v in value)
        except TypeError:
            raise TypeError("%s: __cuda_array_interface__ %s must be a tuple of ints, got %r"
                            % (name, what, value)) from None
    return value


_INT_ONLY = {int}


def _dense_strides(shape):
    strides = []
    acc = 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= s
    return tuple(reversed(strides))


def _torch_module():
    return sys.modules.get("torch")


def is_torch_tensor(obj):
    torch = _torch_module()
    return torch is not None and isinstance(obj, torch.Tensor)


_TORCH_DTYPE_NAMES = {}


def _from_torch(obj, name):
    if not obj.is_cuda:
        raise ValueError("%s: expected a CUDA tensor, got a tensor on %s" % (name, obj.device))
    dt = obj.dtype
    dtype = _TORCH_DTYPE_NAMES.get(dt)
    if dtype is None:
        dtype = _TORCH_DTYPE_NAMES[dt] = str(dt).replace("torch.", "")
    return Tensor(name, obj.data_ptr(), dtype, obj.shape, obj.stride(), obj.get_device(), obj)


def _from_cai(obj, cai, name):
    if not isinstance(cai, dict):
        raise TypeError("%s: __cuda_array_interface__ must be a dict, got %s"
                        % (name, type(cai).__name__))
    typestr = cai.get("typestr", "")
    if not isinstance(typestr, str):
        raise TypeError("%s: __cuda_array_interface__ typestr must be a str, got %r"
                        % (name, typestr))
    if not typestr or typestr[0] == ">":
        raise TypeError("%s: unsupported __cuda_array_interface__ typestr %r" % (name, typestr))
    code = typestr[1:] if typestr[0] in "<=|" else typestr
    dtype = _TYPESTR.get(code)
    if dtype is None:
        raise TypeError("%s: unsupported __cuda_array_interface__ typestr %r" % (name, typestr))
    shape = _int_list(cai.get("shape", ()), name, "shape")
    if cai.get("mask") is not None:
        raise ValueError("%s: masked arrays (__cuda_array_interface__ 'mask') are not supported"
                         % name)
    itemsize = _ITEMSIZE[dtype]
    byte_strides = cai.get("strides")
    if byte_strides is None:
        strides = _dense_cached(shape)
    else:
        byte_strides = _int_list(byte_strides, name, "strides")
        if len(byte_strides) != len(shape):
            raise ValueError("%s: __cuda_array_interface__ has %d strides for %d dimensions"
                             % (name, len(byte_strides), len(shape)))
        strides = []
        for dim, bs in enumerate(byte_strides):
            if bs % itemsize:
                raise ValueError("%s: stride %d of dimension %d is not a multiple of the "
                                 "element size (%d bytes)" % (name, bs, dim, itemsize))
            strides.append(bs // itemsize)
    data = cai.get("data")
    if data is None:
        ptr = 0
    elif isinstance(data, (tuple, list)) and len(data) == 2 and \
            (data[0] is None or type(data[0]) is int):
        ptr = data[0] or 0
    else:
        raise TypeError("%s: __cuda_array_interface__ data must be a (pointer, read_only) "
                        "tuple, got %r" % (name, data))
    _check_array(name, ptr, shape, strides, itemsize)
    device = -1
    try:
        dev_id = getattr(getattr(obj, "device", None), "id", None)
    except Exception:  # a producer's device property that fails: the device is unknown
        dev_id = None
    if type(dev_id) is int and 0 <= dev_id <= 2 ** 31 - 1:
        device = dev_id
    return Tensor(name, ptr, dtype, shape, strides, device, obj)


def _dlpack_device(obj, name):
    """(device type, device id) from ``__dlpack_device__()``, checked."""
    try:
        dev = obj.__dlpack_device__()
    except Exception as e:
        raise TypeError("%s: __dlpack_device__() failed: %s: %s"
                        % (name, type(e).__name__, e)) from e
    if not isinstance(dev, tuple) or len(dev) != 2 or \
            any(isinstance(v, bool) or not isinstance(v, int) for v in dev):
        raise TypeError("%s: __dlpack_device__() must return (device_type, device_id) ints, "
                        "got %r" % (name, dev))
    return int(dev[0]), int(dev[1])


def _capsule_name(capsule, name):
    """Whether ``capsule`` is named "dltensor" (its name read safely), and
    what its name is, for messages."""
    try:
        address = _capsule_get_name(capsule)
    except Exception:
        return False, "an invalid capsule"
    if not address:
        return False, "an unnamed capsule"
    try:
        exact = read_memory(address, len(_DLTENSOR_NAME), name, "the capsule's name")
    except ValueError:
        exact = b""
    if exact == _DLTENSOR_NAME:
        return True, "dltensor"
    text = b""
    for i in range(64):  # byte by byte: the name may end just before unmapped memory
        try:
            byte = read_memory(address + i, 1, name, "the capsule's name")
        except ValueError:
            return False, "a capsule whose name (at 0x%x) is not readable memory" % address
        if byte == b"\0":
            break
        text += byte
    text = text.decode("utf-8", "replace")
    hint = {"used_dltensor": " (already consumed)",
            "dltensor_versioned": " (DLPack 1.0's versioned form, which attn does not ask "
                                  "for)"}.get(text, "")
    return False, "a capsule named %r%s" % (text, hint)


def _has(obj, attr):
    """hasattr() that takes any exception of a producer's attribute as
    "absent" (hasattr lets all but AttributeError through)."""
    try:
        getattr(obj, attr)
        return True
    except Exception:
        return False


def _from_dlpack(obj, name, stream):
    if _has(obj, "__dlpack_device__"):
        dev_type, _ = _dlpack_device(obj, name)
        if dev_type != KDL_CUDA:
            raise ValueError("%s: expected a CUDA array, got one on %s (DLPack device type %d)"
                             % (name, _DL_DEVICE_NAMES.get(dev_type, "another device"),
                                dev_type))
    # DLPack's stream argument for CUDA: 1 is the legacy default stream.
    try:
        try:
            capsule = obj.__dlpack__(stream=(stream or 1))
        except TypeError:
            capsule = obj.__dlpack__()
    except Exception as e:
        raise TypeError("%s: __dlpack__() failed: %s: %s" % (name, type(e).__name__, e)) from e
    if type(capsule) is not _CAPSULE_TYPE:
        raise TypeError("%s: __dlpack__() must return a 'dltensor' capsule, got %s"
                        % (name, type(capsule).__name__))
    named, what = _capsule_name(capsule, name)
    if not named:
        raise TypeError("%s: __dlpack__() must return a 'dltensor' capsule, got %s"
                        % (name, what))
    ptr = _capsule_get_pointer(capsule, b"dltensor")
    raw = read_memory(ptr, ctypes.sizeof(DLManagedTensor), name, "the DLPack tensor")
    t = DLManagedTensor.from_buffer_copy(raw).dl_tensor
    if t.device.device_type != KDL_CUDA:
        raise ValueError("%s: expected a CUDA array, got one on %s" % (
            name, _DL_DEVICE_NAMES.get(t.device.device_type, "another device")))
    if t.device.device_id < 0:
        raise ValueError("%s: DLPack device id %d" % (name, t.device.device_id))
    if t.dtype.lanes != 1:
        raise TypeError("%s: vector dtypes (DLPack lanes %d) are not supported"
                        % (name, t.dtype.lanes))
    dtype = _DLPACK.get((t.dtype.code, t.dtype.bits))
    if dtype is None:
        raise TypeError("%s: unsupported DLPack dtype (code %d, %d bits)"
                        % (name, t.dtype.code, t.dtype.bits))
    if not 0 <= t.ndim <= MAX_NDIM:
        raise ValueError("%s: DLPack ndim %d (attn takes 0 to %d)" % (name, t.ndim, MAX_NDIM))
    shape_at = ctypes.cast(t.shape, c_void_p).value
    strides_at = ctypes.cast(t.strides, c_void_p).value
    if t.ndim and not shape_at:
        raise ValueError("%s: DLPack shape is NULL for %d dimensions" % (name, t.ndim))
    shape = _read_int64s(shape_at, t.ndim, name, "the DLPack shape")
    if strides_at:
        strides = _read_int64s(strides_at, t.ndim, name, "the DLPack strides")
    else:
        strides = _dense_strides(shape)
    data = (t.data or 0) + int(t.byte_offset)
    _check_array(name, data, shape, strides, _ITEMSIZE[dtype])
    # The capsule stays alive with the Tensor and is never renamed: when it
    # goes, its destructor calls the producer's deleter.
    return Tensor(name, data, dtype, shape, strides, t.device.device_id, obj, keepalive=capsule)


def adapt(obj, name, stream=None):
    """The ``Tensor`` for a caller's CUDA array (see the module docstring)."""
    if obj is None:
        raise TypeError("%s: expected a CUDA tensor, got None" % name)
    if isinstance(obj, Tensor):
        return obj
    if is_torch_tensor(obj):
        return _from_torch(obj, name)
    cai = None
    try:
        cai = obj.__cuda_array_interface__
    except AttributeError:
        cai = None
    except Exception:  # a producer that refuses (e.g. a dtype it cannot say)
        cai = None
    if cai is not None:
        return _from_cai(obj, cai, name)
    if _has(obj, "__dlpack__"):
        return _from_dlpack(obj, name, stream)
    raise TypeError("%s: expected a CUDA tensor (torch.Tensor, or an object with "
                    "__cuda_array_interface__ or __dlpack__), got %s"
                    % (name, type(obj).__name__))


def dtype_matches(actual, expected):
    """Whether data of dtype ``actual`` can be taken as ``expected``
    (the ambiguous cases of the module docstring)."""
    if actual == expected:
        return True
    if expected == "bfloat16" and actual == "void16":
        return True
    if expected in FP8_DTYPES and actual in ("uint8", "void8"):
        return True
    return False


def _fmt_dtypes(expected):
    if isinstance(expected, str):
        return expected
    return " or ".join(expected)


class DtypeError(TypeError, ValueError):
    """An array of the wrong dtype: a TypeError, and a ValueError as
    FlashInfer's wrappers raise for a dtype other than the planned one."""


def check_dtype(t, expected):
    """Raises DtypeError unless ``t``'s dtype is (one of) ``expected``."""
    options = (expected,) if isinstance(expected, str) else tuple(expected)
    if not any(dtype_matches(t.dtype, e) for e in options):
        raise DtypeError("%s: expected dtype %s, got %s"
                         % (t.name, _fmt_dtypes(expected), t.dtype))


def _fmt_shape(shape):
    return "(" + ", ".join("*" if s is None else str(s) for s in shape) + \
        ("," if len(shape) == 1 else "") + ")"


def check_shape(t, expected, what=None):
    """Raises ValueError unless ``t.shape`` matches ``expected`` (None
    entries match any size). ``what`` names the dimensions in the message."""
    ok = len(t.shape) == len(expected) and all(
        e is None or e == s for s, e in zip(t.shape, expected))
    if not ok:
        extra = " [%s]" % what if what else ""
        raise ValueError("%s: expected shape %s%s, got %s"
                         % (t.name, _fmt_shape(expected), extra, _fmt_shape(t.shape)))


def check_dense(t, token_stride=False, from_dim=None):
    """Raises ValueError unless ``t`` is dense. With ``token_stride`` the
    first dimension may be padded (stride >= one dense row; the C ABI takes
    that stride); the inner dimensions must be dense either way. Dimensions
    of size 1 may have any stride."""
    shape, strides = t.shape, t.strides
    start = 1 if token_stride else 0
    if from_dim is not None:
        start = from_dim
    dense = (0,) * start + _dense_strides(shape[start:])
    for dim in range(start, len(shape)):
        if shape[dim] <= 1:
            continue
        if strides[dim] != dense[dim]:
            which = "every dimension" if start == 0 else \
                "dimensions %d..%d" % (start, len(shape) - 1)
            raise ValueError(
                "%s: %s must be dense (row-major): expected stride %d for dimension %d, got "
                "strides %s for shape %s" % (t.name, which, dense[dim], dim, t.strides, t.shape))
    if token_stride and shape and shape[0] > 1:
        row = t.row_elements()
        if strides[0] < row:
            raise ValueError("%s: token stride %d is smaller than a row (%d elements)"
                             % (t.name, strides[0], row))


_DENSE = {}


def _dense_cached(shape):
    d = _DENSE.get(shape)
    if d is None:
        if len(_DENSE) > 4096:
            _DENSE.clear()
        d = _DENSE[shape] = _dense_strides(shape)
    return d


def tensor(obj, name, dtype=None, shape=None, token_stride=False, dense=True, stream=None,
           what=None):
    """``adapt`` plus the checks: dtype (a name or a tuple of names), shape
    (None entries match any size), and density (``token_stride``: the first
    dimension may be padded)."""
    t = adapt(obj, name, stream)
    if dtype is not None and t.dtype != dtype:
        check_dtype(t, dtype)
    if shape is not None and t.shape != shape:
        check_shape(t, shape, what)
    if dense:
        # Fast path: exactly row-major (a padded first dimension allowed);
        # anything else goes through check_dense, which knows the rules for
        # size-1 dimensions and says what is wrong.
        d = _dense_cached(t.shape)
        st = t.strides
        if token_stride:
            if st[1:] != d[1:] or (t.shape and t.shape[0] > 1 and st[0] < d[0]):
                check_dense(t, token_stride=True)
        elif st != d:
            check_dense(t)
    return t


def optional(obj, name, **kw):
    """``tensor`` for an optional argument (None stays None)."""
    if obj is None:
        return None
    return tensor(obj, name, **kw)


def same_device(tensors):
    """Raises ValueError unless every given tensor (None skipped) is on one
    CUDA device; returns that device index (-1 when none says)."""
    device = -1
    first = None
    for t in tensors:
        if t is None or t.device is None or t.device < 0:
            continue
        if device < 0:
            device, first = t.device, t
        elif t.device != device:
            raise ValueError("%s: expected a tensor on cuda:%d (where %s is), got one on cuda:%d"
                             % (t.name, device, first.name, t.device))
    return device


def dtype_name(dtype, name="dtype"):
    """A dtype argument (torch.dtype, numpy dtype, or a string such as
    "bfloat16", "bf16", "half", "fp8_e4m3") as the package's dtype name."""
    if dtype is None:
        return None
    if isinstance(dtype, bool) or isinstance(dtype, (int, float)):
        raise TypeError("%s: unknown dtype %r" % (name, dtype))
    try:
        s = str(dtype)
    except Exception:
        raise TypeError("%s: unknown dtype (str() of a %s failed)"
                        % (name, type(dtype).__name__)) from None
    if s.startswith("torch."):
        s = s[len("torch."):]
    s = s.lower()
    aliases = {
        "half": "float16", "fp16": "float16", "f16": "float16",
        "bf16": "bfloat16", "float": "float32", "fp32": "float32", "f32": "float32",
        "fp8": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn", "e4m3": "float8_e4m3fn",
        "float8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2", "e5m2": "float8_e5m2",
        "int": "int32",
    }
    s = aliases.get(s, s)
    if s not in _ITEMSIZE or s.startswith("void"):
        raise TypeError("%s: unknown dtype %r" % (name, dtype))
    return s
