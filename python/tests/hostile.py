"""Array producers that lie: DLPack capsules and __cuda_array_interface__
objects with whatever fields a test asks for, including addresses that lead
nowhere. Shared by test_cpu.py and test_fuzz.py (no GPU, no torch).
"""
import ctypes
import sys

from attn import _tensors as _t

_PyCapsule_New = ctypes.pythonapi["PyCapsule_New"]
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
_PyCapsule_GetName = ctypes.pythonapi["PyCapsule_GetName"]
_PyCapsule_GetName.restype = ctypes.c_char_p
_PyCapsule_GetName.argtypes = [ctypes.py_object]
_Py_IncRef = ctypes.pythonapi["Py_IncRef"]
_Py_IncRef.argtypes = [ctypes.py_object]

# An address no process maps (the kernel's half of the address space).
UNMAPPED = 0xFFFF800000000000
# One below the first page, never mapped either.
LOW = 0x10

DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _immortal(thunk):
    """A callback that lives for the process (a capsule may outlive its
    producer, even the interpreter's teardown of this module)."""
    _Py_IncRef(thunk)
    return thunk

# CPython's PyCapsule: PyObject_HEAD, then pointer, name, context, destructor.
_HEAD = 2 * ctypes.sizeof(ctypes.c_void_p)


def _capsule_fields_at_expected_offsets():
    name = ctypes.create_string_buffer(b"probe")
    cap = _PyCapsule_New(0x1234, ctypes.addressof(name), None)
    pointer = ctypes.c_void_p.from_address(id(cap) + _HEAD).value
    named = ctypes.c_void_p.from_address(id(cap) + _HEAD + 8).value
    return pointer == 0x1234 and named == ctypes.addressof(name)


CAPSULE_LAYOUT_KNOWN = _capsule_fields_at_expected_offsets()


def capsule_name(capsule):
    name = _PyCapsule_GetName(capsule)
    return name.decode() if name is not None else None


class Producer:
    """A DLPack producer over one DLManagedTensor whose every field is the
    caller's: ``shape``/``strides`` a tuple (held here), an int (a raw
    address) or None (NULL); ``capsule_pointer``/``capsule_name`` override
    what the capsule holds (an int address, or bytes for the name);
    ``device`` what ``__dlpack_device__`` returns (a callable raises);
    ``dlpack_result`` replaces the capsule. Its capsules follow DLPack: the
    destructor calls the tensor's deleter unless the capsule was renamed
    (consumed); ``deleted`` counts the deleter's calls."""

    def __init__(self, shape=(4, 8), strides=None, ndim=None, code=2, bits=16, lanes=1,
                 device_type=2, device_id=0, data=0x7F0000001000, byte_offset=0,
                 capsule_pointer=None, capsule_name=b"dltensor", device=None,
                 dlpack_result=None, with_deleter=True):
        self.keep = []
        mt = _t.DLManagedTensor()
        t = mt.dl_tensor
        t.data = data
        t.device.device_type, t.device.device_id = device_type, device_id
        t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, lanes
        t.ndim = len(shape) if ndim is None and isinstance(shape, tuple) else (ndim or 0)
        t.shape = self._array(shape)
        t.strides = self._array(strides)
        t.byte_offset = byte_offset
        self.deleted = 0
        if with_deleter:
            deleter = _immortal(DELETER(self._delete))
            mt.deleter = ctypes.cast(deleter, ctypes.c_void_p).value
        self.mt = mt
        self.capsule_pointer = ctypes.addressof(mt) if capsule_pointer is None else capsule_pointer
        self.named_dltensor = capsule_name == b"dltensor"
        if isinstance(capsule_name, bytes):
            buf = ctypes.create_string_buffer(capsule_name)
            self.keep.append(buf)
            self.capsule_name = ctypes.addressof(buf)
        else:
            self.capsule_name = capsule_name  # an address, or None
        self._destructor = _immortal(CAPSULE_DESTRUCTOR(self._destroy_capsule))
        self.device = (device_type, device_id) if device is None else device
        self.dlpack_result = dlpack_result
        self.capsules = []

    def _array(self, values):
        if values is None:
            return None
        if isinstance(values, int):
            return ctypes.cast(values, ctypes.POINTER(ctypes.c_int64))
        arr = (ctypes.c_int64 * max(1, len(values)))(*values)
        self.keep.append(arr)
        return ctypes.cast(arr, ctypes.POINTER(ctypes.c_int64))

    def _delete(self, _managed):
        self.deleted += 1

    def _destroy_capsule(self, address):
        # What a C producer's destructor does (reading the capsule's fields:
        # no Python object may be made of a capsule being destroyed).
        name = ctypes.c_void_p.from_address(address + _HEAD + 8).value
        if self.named_dltensor and name == self.capsule_name and self.mt.deleter:
            DELETER(self.mt.deleter)(ctypes.addressof(self.mt))

    def __dlpack_device__(self):
        if callable(self.device):
            return self.device()
        return self.device

    def __dlpack__(self, stream=None):
        if self.dlpack_result is not None:
            if callable(self.dlpack_result):
                return self.dlpack_result()
            return self.dlpack_result
        destructor = ctypes.cast(self._destructor, ctypes.c_void_p).value \
            if CAPSULE_LAYOUT_KNOWN else None
        cap = _PyCapsule_New(self.capsule_pointer, self.capsule_name, destructor)
        self.capsules.append(cap)
        return cap


class CAI:
    """An object whose __cuda_array_interface__ is whatever it is given."""

    def __init__(self, interface):
        self.__cuda_array_interface__ = interface


def cai(typestr="<f2", shape=(4, 8), strides=None, data=(0x7F0000000000, False), **extra):
    d = {"typestr": typestr, "shape": shape, "strides": strides, "data": data, "version": 3}
    d.update(extra)
    return CAI(d)


# The producers that crashed the interpreter before attn read DLPack through
# the kernel: run_crashers() tries each in a child process.
CRASHERS = {
    "ndim 2**31-1 over an unmapped shape": dict(shape=UNMAPPED, ndim=2 ** 31 - 1),
    "ndim 3 over an unmapped shape": dict(shape=UNMAPPED, ndim=3),
    "strides at an unmapped address": dict(shape=(4, 8), strides=LOW),
    "the capsule pointing nowhere": dict(capsule_pointer=UNMAPPED),
    "the capsule's name pointing nowhere": dict(capsule_name=UNMAPPED),
}


def run_crashers():
    """Adapts every CRASHERS producer as argument "q" and prints one line
    per case: its name, then the exception's type and message."""
    for case, kw in CRASHERS.items():
        print(case, end=": ", flush=True)
        try:
            _t.adapt(Producer(**kw), "q")
            print("accepted")
        except Exception as e:  # the parent checks the type
            print("%s: %s" % (type(e).__name__, e))
        sys.stdout.flush()


if __name__ == "__main__":
    run_crashers()
