"""Contexts, streams, devices and the PyTorch helpers the wrappers share.

Nothing here imports torch at module level: a function that needs it
imports it then (``require_torch``), and those that merely cooperate with
it (streams, the current device) look for an already loaded torch in
``sys.modules``.
"""

import contextlib
import ctypes
import os
import sys
import threading

from . import _lib
from ._tensors import Tensor

_context_lock = threading.Lock()
_contexts = {}  # device index (-1: current) -> context pointer


def torch_or_none():
    """The torch module when it is already imported, else None."""
    return sys.modules.get("torch")


def require_torch(what):
    """Imports torch, or raises ImportError saying ``what`` needs it."""
    try:
        import importlib
        importlib.import_module("torch")
    except ImportError as e:  # pragma: no cover - depends on the host
        raise ImportError("attn: %s needs PyTorch (it allocates its outputs and tables "
                          "with torch); install torch, or pass every output buffer"
                          % what) from e
    return sys.modules["torch"]


# --- devices ----------------------------------------------------------------


def current_device():
    torch = torch_or_none()
    if torch is not None:
        try:
            if torch.cuda.is_available():
                return torch.cuda.current_device()
        except Exception:
            pass
    return -1


def other_device(device):
    """Whether ``device`` is not the current one (torch loaded): calls on it
    need ``on_device``."""
    torch = torch_or_none()
    return torch is not None and device is not None and device >= 0 and \
        torch.cuda.current_device() != device


@contextlib.contextmanager
def on_device(device):
    """Makes ``device`` current for the calls inside (through torch when it
    is loaded: attn launches in the context current on the thread, which is
    the device's primary context, as torch's)."""
    torch = torch_or_none()
    if torch is None or device is None or device < 0:
        yield
        return
    if torch.cuda.current_device() == device:
        yield
        return
    with torch.cuda.device(device):
        yield


_ARCH_NAMES = {(9, 0): "sm_90a", (8, 9): "sm_89"}


def arch_name(device):
    """The arch attn compiles for on ``device`` (for messages)."""
    torch = torch_or_none()
    if torch is not None and device is not None and device >= 0:
        try:
            cc = torch.cuda.get_device_capability(device)
            if cc in _ARCH_NAMES:
                return _ARCH_NAMES[cc]
            if cc[0] == 8:
                return "sm_80"
            return "sm_%d%d" % cc
        except Exception:
            pass
    return "this GPU"


def has_gpu():
    """Whether a CUDA GPU is usable (through torch when loaded, else the
    CUDA driver); never raises."""
    torch = torch_or_none()
    if torch is not None:
        try:
            return bool(torch.cuda.is_available())
        except Exception:
            return False
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    try:
        if cuda.cuInit(0) != 0:
            return False
        count = ctypes.c_int(0)
        if cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return False
        return count.value > 0
    except Exception:
        return False


def context(device):
    """The attn context kernels on ``device`` come from (one per device,
    for the process's lifetime): the JIT with libattn_c.so; with
    libattn_runtime_c.so, the attn-aot library named by
    ``$ATTN_AOT_LIBRARY`` (its first entry)."""
    key = device if device is not None else -1
    ctx = _contexts.get(key)
    if ctx is not None:
        return ctx
    with _context_lock:
        ctx = _contexts.get(key)
        if ctx is not None:
            return ctx
        lib = _lib.load()
        out = ctypes.c_void_p()
        with on_device(device):
            if lib.attn_has_compiler():
                options = _lib.init(_lib.attn_jit_options)
                _lib.call("attn_context_create_jit", ctypes.byref(options), ctypes.byref(out))
            else:
                paths = [p for p in os.environ.get("ATTN_AOT_LIBRARY", "").split(":") if p]
                if not paths:
                    raise NotImplementedError(
                        "attn: %s has no compiler (the runtime-only library): set "
                        "ATTN_AOT_LIBRARY to an attn-aot kernel library directory, or load "
                        "libattn_c.so" % _lib.loaded_path())
                _lib.call("attn_context_create_aot", paths[0].encode(), ctypes.byref(out))
        _contexts[key] = out.value
        return out.value


# --- streams ----------------------------------------------------------------


def stream_handle(stream, device=-1):
    """The CUstream to launch on: ``stream`` when given (an int, a
    torch.cuda.Stream, anything with ``.cuda_stream``, ``.ptr`` or
    ``__cuda_stream__``), else torch's current stream on ``device`` when
    torch is loaded, else 0 (the legacy default stream)."""
    if stream is None:
        torch = torch_or_none()
        if torch is not None:
            try:
                if device is None or device < 0:
                    device = torch.cuda.current_device()
                raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
                if raw is not None:
                    return raw(device)
                return torch.cuda.current_stream(device).cuda_stream
            except Exception:
                return 0
        return 0
    if isinstance(stream, bool):
        raise TypeError("stream: expected a CUDA stream, got a bool")
    if isinstance(stream, int):
        return _lib.check_pointer(stream, "stream")
    if hasattr(stream, "__cuda_stream__"):
        value = stream.__cuda_stream__()
        return _lib.check_pointer(value[1] if isinstance(value, tuple) and len(value) == 2
                                  else value, "stream")
    for attr in ("cuda_stream", "ptr", "handle"):
        value = getattr(stream, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return _lib.check_pointer(value, "stream")
    if isinstance(stream, ctypes.c_void_p):
        return stream.value or 0
    raise TypeError("stream: expected a CUDA stream (an int CUstream, torch.cuda.Stream, or an "
                    "object with .cuda_stream or __cuda_stream__), got %s" % type(stream).__name__)


def device_queries():
    """(current device index, current CUstream of a device) as torch's own
    C functions, the cheapest way to ask, for the wrappers' cached run
    path; None without torch or when this torch lacks them."""
    torch = torch_or_none()
    if torch is None:
        return None
    get_device = getattr(torch._C, "_cuda_getDevice", None)
    get_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if get_device is None or get_stream is None:
        return None
    return get_device, get_stream


_SAME_STREAM = contextlib.nullcontext()


def torch_stream(handle, device):
    """Runs torch work inside on the CUstream ``handle`` (so that uploads
    and small ops the wrappers do are ordered with their launches)."""
    torch = torch_or_none()
    if torch is None:
        return _SAME_STREAM
    dev = device if device is not None and device >= 0 else None
    # The usual case, torch's current stream, asked the cheapest way
    # (torch.cuda.current_stream() builds a Stream object).
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        current = raw(dev if dev is not None else torch.cuda.current_device())
    else:
        current = torch.cuda.current_stream(dev).cuda_stream
    if current == handle:
        return _SAME_STREAM
    return _on_stream(torch, handle, dev)


@contextlib.contextmanager
def _on_stream(torch, handle, device):
    ext = torch.cuda.ExternalStream(handle, device=device)
    with torch.cuda.stream(ext):
        yield


def capturing():
    """Whether torch's current stream is capturing a CUDA graph."""
    torch = torch_or_none()
    if torch is None:
        return False
    fn = getattr(torch.cuda, "is_current_stream_capturing", None)
    try:
        return bool(fn()) if fn is not None else False
    except Exception:
        return False


# --- torch helpers ------------------------------------------------------------

_TORCH_DTYPES = {
    "float16": "float16", "bfloat16": "bfloat16", "float32": "float32",
    "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2", "int32": "int32",
    "int64": "int64", "uint8": "uint8",
}


def torch_dtype(name):
    torch = require_torch("this call")
    return getattr(torch, _TORCH_DTYPES[name])


def empty(shape, dtype, device, what="this call"):
    torch = require_torch(what)
    return torch.empty(tuple(shape), dtype=torch_dtype(dtype), device=_torch_device(device))


def _torch_device(device):
    if device is None or device < 0:
        return "cuda"
    return "cuda:%d" % device


def host_ints(x, name, minimum=-2 ** 31, maximum=_lib.INT32_MAX):
    """The Python ints of a 1-D index array given as a list/tuple, a numpy
    array, a torch tensor (any device; a CUDA one is copied back, which
    synchronizes, as FlashInfer's plan does), or any CUDA array (through
    torch). Every value must be an int (not a bool or a float: TypeError)
    in ``[minimum, maximum]`` (int32 by default: ValueError naming
    ``name[i]``)."""
    if x is None:
        raise TypeError("%s: expected an index array, got None" % name)
    if isinstance(x, (list, tuple, range)):
        values = list(x)
    else:
        torch = torch_or_none()
        if torch is not None and isinstance(x, torch.Tensor):
            if x.dim() != 1:
                raise ValueError("%s: expected a 1-D array, got shape %s" % (name, tuple(x.shape)))
            values = x.tolist()
            if x.dtype == torch.int32 and minimum <= -2 ** 31 and maximum >= _lib.INT32_MAX:
                return values  # ints in range by their dtype
        elif hasattr(x, "tolist") and not hasattr(x, "__cuda_array_interface__") \
                and getattr(x, "__array_interface__", None) is not None:
            values = x.tolist()
            if values and isinstance(values[0], list):
                raise ValueError("%s: expected a 1-D array" % name)
        elif hasattr(x, "__cuda_array_interface__") or hasattr(x, "__dlpack__"):
            torch = require_torch("reading %s from the device" % name)
            if hasattr(x, "__cuda_array_interface__"):
                t = torch.as_tensor(x, device="cuda")
            else:
                t = torch.from_dlpack(x)
            if t.dim() != 1:
                raise ValueError("%s: expected a 1-D array, got shape %s" % (name, tuple(t.shape)))
            values = t.tolist()
        else:
            raise TypeError("%s: expected an index array (list, numpy array or tensor), got %s"
                            % (name, type(x).__name__))
    return _lib.check_ints(values, name, minimum, maximum)


class DeviceInts:
    """A device int32/int64 buffer at a fixed address (grown on demand
    unless ``fixed``), filled from host ints by ``upload``."""

    def __init__(self, dtype, device, capacity=0, fixed=False, what="this call"):
        self.dtype = dtype
        self.device = device
        self.fixed = fixed
        self.what = what
        self.buf = None
        if capacity:
            self._alloc(capacity)

    def _alloc(self, n):
        torch = require_torch(self.what)
        self.buf = torch.zeros(max(1, n), dtype=torch_dtype(self.dtype),
                               device=_torch_device(self.device))

    @property
    def capacity(self):
        return 0 if self.buf is None else self.buf.numel()

    def ensure(self, n, name="table"):
        if self.buf is not None and n <= self.buf.numel():
            return
        if self.fixed and self.buf is not None:
            raise ValueError("%s: needs %d entries, more than the %d this wrapper holds at a "
                             "fixed address (use_cuda_graph)" % (name, n, self.buf.numel()))
        grow = n if self.buf is None else max(n, 2 * self.buf.numel())
        self._alloc(grow)

    def upload(self, values, stream, name="table"):
        """Copies ``values`` to the start of the buffer on ``stream``."""
        torch = require_torch(self.what)
        values = list(values)
        self.ensure(len(values), name)
        if not values:
            return
        host = torch.tensor(values, dtype=torch_dtype(self.dtype))
        with torch_stream(stream, self.device):
            self.buf[:len(values)].copy_(host, non_blocking=True)

    @property
    def ptr(self):
        return 0 if self.buf is None else self.buf.data_ptr()


def as_result(t):
    """The object to return for an output given as a Tensor (its original
    object)."""
    return t.obj if isinstance(t, Tensor) else t
