"""ctypes binding of attn's C ABI (capi/include/attn_c.h).

Loads the library lazily on first use (so ``import attn`` works on a machine
without a GPU, and without the library), declares every function's argtypes
and restype, mirrors every struct of the header as a ``ctypes.Structure``
(field order exactly as the header's), and turns a failed call's status into
an exception carrying ``attn_last_error()``:

    ATTN_ERROR_INVALID_ARGUMENT  -> ValueError
    ATTN_ERROR_UNSUPPORTED       -> NotImplementedError
    anything else                -> attn.AttnError (a RuntimeError)

It is also where Python values become C values, and checks them there:
every struct mirror's fields and every integer or string argument of a C
call take only a value their C type holds exactly (``check_int``,
``check_float``, ``check_flag``, ``check_str``): a bool where an int is
due, a float, a string with a NUL or an integer past the type's range is a
TypeError or ValueError naming the field, never a truncated value.

Where the library comes from, first match wins:

1. ``$ATTN_LIBRARY`` (a path to libattn_c.so or libattn_runtime_c.so; an
   error if it does not exist: never a silent fallback);
2. ``libattn_c.so`` next to the package (``attn/lib/``, where the installer
   stages it), then in the source tree's ``build/lib/`` (development);
3. ``libattn_runtime_c.so`` (kernels from attn-aot libraries only) the same
   two ways.
"""

import array
import ctypes
import functools
import math
import numbers
import operator
import os
import struct
import sys
import threading
import time
from ctypes import (POINTER, Structure, c_char_p, c_float, c_int,
                    c_int32, c_int64, c_size_t, c_uint32, c_void_p)

# --- status codes and enums (attn_c.h) -------------------------------------

ATTN_OK = 0
ATTN_ERROR_INVALID_ARGUMENT = 1
ATTN_ERROR_UNSUPPORTED = 2
ATTN_ERROR_COMPILE = 3
ATTN_ERROR_CUDA = 4
ATTN_ERROR_NOT_FOUND = 5
ATTN_ERROR_INTERNAL = 6

STATUS_NAMES = {
    ATTN_OK: "ATTN_OK",
    ATTN_ERROR_INVALID_ARGUMENT: "ATTN_ERROR_INVALID_ARGUMENT",
    ATTN_ERROR_UNSUPPORTED: "ATTN_ERROR_UNSUPPORTED",
    ATTN_ERROR_COMPILE: "ATTN_ERROR_COMPILE",
    ATTN_ERROR_CUDA: "ATTN_ERROR_CUDA",
    ATTN_ERROR_NOT_FOUND: "ATTN_ERROR_NOT_FOUND",
    ATTN_ERROR_INTERNAL: "ATTN_ERROR_INTERNAL",
}

DTYPE_F16, DTYPE_BF16, DTYPE_F32, DTYPE_E4M3, DTYPE_E5M2 = 0, 1, 2, 3, 4
LAYOUT_NHD, LAYOUT_HND = 0, 1
KIND_DECODER, KIND_ENCODER, KIND_CROSS = 0, 1, 2

MAX_AUX_TABLES = 4
MAX_MERGE_STATES = 16
MAX_CASCADE_LEVELS = MAX_MERGE_STATES - 1
MAX_DECODE_QUERY_LEN = 16  # query tokens per request of a decode kernel

# attn dtype names (the package's canonical names, torch's spelling) <-> enum.
DTYPE_CODES = {
    "float16": DTYPE_F16,
    "bfloat16": DTYPE_BF16,
    "float32": DTYPE_F32,
    "float8_e4m3fn": DTYPE_E4M3,
    "float8_e5m2": DTYPE_E5M2,
}
DTYPE_NAMES = {v: k for k, v in DTYPE_CODES.items()}


class AttnError(RuntimeError):
    """A failed attn call other than a bad argument or an unsupported
    request: a compile error (NVRTC), a CUDA driver error, a kernel an AOT
    library does not hold, or an internal error.

    ``status`` is the C status name (e.g. ``"ATTN_ERROR_CUDA"``) and
    ``function`` the C function that failed; ``str(e)`` includes the
    library's message (``attn_last_error()``).
    """

    def __init__(self, message, status="ATTN_ERROR_INTERNAL", function=""):
        super().__init__(message)
        self.status = status
        self.function = function


# --- checking values on their way to C ----------------------------------------

INT32_MAX = 2 ** 31 - 1
INT64_MAX = 2 ** 63 - 1
UINT64_MAX = 2 ** 64 - 1
_FLT_MAX = 3.4028234663852886e38

# Bytes a single argument may make attn allocate ahead of use (fixed page
# tables, the metadata builder's arrays): far above any real batch, far
# below a size that exhausts host or device memory.
MAX_PREALLOCATION_BYTES = 1 << 32


def _describe(value):
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return "%s %s" % (type(value).__name__, text)


def _bounds_text(minimum, maximum):
    if minimum is not None and maximum is not None:
        return "an int from %d to %d" % (minimum, maximum)
    if minimum is not None:
        return "an int >= %d" % minimum
    if maximum is not None:
        return "an int <= %d" % maximum
    return "an int"


def check_int(value, name, minimum=None, maximum=None):
    """``value`` as a Python int, or TypeError (a bool, a float, a string,
    anything but an int or an integer scalar such as numpy's or torch's,
    through ``operator.index``) or ValueError (outside ``[minimum,
    maximum]``); the message starts with ``name``."""
    if type(value) is not int:
        if isinstance(value, bool) or value is None:
            raise TypeError("%s: expected an int, got %s" % (name, _describe(value)))
        try:
            value = operator.index(value)
        except TypeError:
            raise TypeError("%s: expected an int, got %s" % (name, _describe(value))) from None
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError("%s: expected %s, got %d" % (name, _bounds_text(minimum, maximum), value))
    return value


_INT_ONLY = {int}


def check_ints(values, name, minimum=-2 ** 31, maximum=INT32_MAX):
    """``check_int`` of every item of a list (``name[i]`` in messages);
    the list itself when every item is a plain int in range."""
    # set(map(type)) and min/max run in C: plan() checks every page id.
    if not values or (set(map(type, values)) == _INT_ONLY and min(values) >= minimum
                      and max(values) <= maximum):
        return values
    return [check_int(v, "%s[%d]" % (name, i), minimum, maximum) for i, v in enumerate(values)]


def check_flag(value, name):
    """A boolean argument as 0 or 1: a bool, or an int that is 0 or 1
    (TypeError for anything else: a string or None is not silently
    true or false)."""
    if value is True or value is False:
        return int(value)
    if type(value).__name__ == "bool_":  # numpy's
        return int(bool(value))
    if type(value) is int and value in (0, 1):
        return value
    try:
        index = operator.index(value)
    except TypeError:
        index = None
    if index in (0, 1):
        return index
    error = TypeError if index is None else ValueError
    raise error("%s: expected a bool, got %s" % (name, _describe(value)))


def check_float(value, name, minimum=None, above=None, f32=True):
    """``value`` as a finite Python float, or TypeError (not a real number,
    or a bool) or ValueError (NaN, infinite, past float32's range with
    ``f32``, below ``minimum`` or not above ``above``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError("%s: expected a number, got %s" % (name, _describe(value)))
    value = float(value)
    if not math.isfinite(value) or (f32 and abs(value) > _FLT_MAX):
        raise ValueError("%s: expected a finite%s number, got %r"
                         % (name, " float32" if f32 else "", value))
    if f32 and value and not ctypes.c_float(value).value:
        # It would arrive as 0, which means "off" or "default" for attn's knobs.
        raise ValueError("%s: %r is 0 in float32" % (name, value))
    if minimum is not None and value < minimum:
        raise ValueError("%s: expected >= %g, got %r" % (name, minimum, value))
    if above is not None and not value > above:
        raise ValueError("%s: expected > %g, got %r" % (name, above, value))
    return value


def check_str(value, name):
    """A str (or bytes) without NUL characters, as given; None stays None.
    TypeError for anything else (a bool, a number), ValueError for an
    embedded NUL, which would end the C string early."""
    if value is None:
        return None
    if isinstance(value, str):
        if "\0" in value:
            raise ValueError("%s: embedded NUL character at index %d" % (name, value.index("\0")))
        return value
    if isinstance(value, (bytes, bytearray)):
        if b"\0" in value:
            raise ValueError("%s: embedded NUL byte at index %d" % (name, value.index(b"\0")))
        return bytes(value)
    raise TypeError("%s: expected a str, got %s" % (name, _describe(value)))


def cstr(text, name="string"):
    """bytes for a char* (None, and the empty string, stay NULL)."""
    text = check_str(text, name)
    if not text:
        return None
    return text.encode("utf-8") if isinstance(text, str) else text


def check_pointer(value, name):
    """An address for a void*: None or an int in [0, 2**64)."""
    if value is None:
        return None
    if isinstance(value, ctypes.c_void_p):
        return value.value
    return check_int(value, name, 0, UINT64_MAX)


def check_preallocation(nbytes, what):
    """ValueError unless ``nbytes`` (what an argument makes attn allocate
    ahead of use; ``what`` names it) is within MAX_PREALLOCATION_BYTES."""
    if nbytes > MAX_PREALLOCATION_BYTES:
        raise ValueError("%s: asks attn to allocate %.1f GiB ahead of use, more than its limit of "
                         "%d GiB" % (what, nbytes / 2.0 ** 30, MAX_PREALLOCATION_BYTES >> 30))


_INT_TYPES = (ctypes.c_int, ctypes.c_int32, ctypes.c_int64, ctypes.c_uint32, ctypes.c_uint8,
              ctypes.c_uint16, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_int8, ctypes.c_int16)


def _int_range(ctype):
    bits = 8 * ctypes.sizeof(ctype)
    if ctype(-1).value == -1:
        return -2 ** (bits - 1), 2 ** (bits - 1) - 1
    return 0, 2 ** bits - 1


# A field's or argument's rule: (minimum, maximum, kind). A plain int in
# range passes without a call (the launch path sets a dozen fields a call).
_FLAG, _INT, _POINTER, _FLOAT, _STRING = range(5)


def _rule(ctype, flag=False):
    if flag:
        return (0, 1, _FLAG)
    if ctype in _INT_TYPES:
        return _int_range(ctype) + (_INT,)
    if ctype is ctypes.c_void_p:
        return (0, UINT64_MAX, _POINTER)
    if ctype in (ctypes.c_float, ctypes.c_double):
        return (math.inf, -math.inf, _FLOAT)
    if ctype is ctypes.c_char_p:
        return (math.inf, -math.inf, _STRING)
    return None  # pointers, arrays, nested structs: ctypes checks their types


def convert(rule, value, name, ctype=None):
    """``value`` checked against ``rule`` (see ``_rule``), as C takes it."""
    minimum, maximum, kind = rule
    if kind == _FLAG:
        return check_flag(value, name)
    if kind == _INT:
        return check_int(value, name, minimum, maximum)
    if kind == _POINTER:
        return check_pointer(value, name)
    if kind == _FLOAT:
        return check_float(value, name, f32=ctype is not ctypes.c_double)
    return cstr(value, name)


class CStruct(Structure):
    """A struct mirror whose fields check what they are set to (``_rules_``
    from ``_fields_``; ``_flags_`` lists int fields that are booleans)."""

    _flags_ = ()

    def __setattr__(self, name, value, _set=Structure.__setattr__):
        rule = self._rules_.get(name)
        if rule is not None and not (type(value) is int and rule[0] <= value <= rule[1]) and \
                not (value is None and rule[2] == _POINTER):
            value = convert(rule, value, name, self._ctypes_.get(name))
        _set(self, name, value)


def _finish(cls):
    """Derives a CStruct's rules from its fields."""
    cls._rules_ = {}
    cls._ctypes_ = {}
    for name, ctype in cls._fields_:
        rule = _rule(ctype, name in cls._flags_)
        if rule is not None:
            cls._rules_[name] = rule
            cls._ctypes_[name] = ctype


# --- struct mirrors ---------------------------------------------------------
# Enums are C ints (GCC/Clang on Linux give every enum of attn_c.h 4 bytes).


class attn_jit_options(CStruct):
    _fields_ = [("struct_size", c_uint32), ("arch", c_char_p), ("cache_dir", c_char_p)]


class attn_knobs(CStruct):
    _flags_ = ("causal", "alibi", "sinks", "fp8_query", "write_lse", "batch_invariant")
    _fields_ = [
        ("kind", c_int),
        ("causal", c_int),
        ("window_left", c_int),
        ("softcap", c_float),
        ("scale", c_float),
        ("alibi", c_int),
        ("sinks", c_int),
        ("fp8_query", c_int),
        ("write_lse", c_int),
        ("batch_invariant", c_int),
        ("score_mod", c_char_p),
        ("mask_mod", c_char_p),
    ]


class attn_decode_variant(CStruct):
    _flags_ = ("per_head_kv_scale",)
    _fields_ = [
        ("struct_size", c_uint32),
        ("knobs", attn_knobs),
        ("q_type", c_int),
        ("kv_type", c_int),
        ("num_q_heads", c_int),
        ("num_kv_heads", c_int),
        ("head_dim", c_int),
        ("page_size", c_int),
        ("layout", c_int),
        ("query_len", c_int),
        ("per_head_kv_scale", c_int),
    ]


class attn_prefill_variant(CStruct):
    _flags_ = ("paged", "per_head_kv_scale", "fp8_compute")
    _fields_ = [
        ("struct_size", c_uint32),
        ("knobs", attn_knobs),
        ("q_type", c_int),
        ("num_q_heads", c_int),
        ("num_kv_heads", c_int),
        ("head_dim", c_int),
        ("paged", c_int),
        ("kv_type", c_int),
        ("page_size", c_int),
        ("layout", c_int),
        ("per_head_kv_scale", c_int),
        ("fp8_compute", c_int),
        ("rope_dim", c_int),
    ]


class attn_append_kv_variant(CStruct):
    _flags_ = ("per_head_kv_scale",)
    _fields_ = [
        ("struct_size", c_uint32),
        ("in_type", c_int),
        ("kv_type", c_int),
        ("num_kv_heads", c_int),
        ("head_dim", c_int),
        ("page_size", c_int),
        ("layout", c_int),
        ("per_head_kv_scale", c_int),
    ]


class attn_merge_states_variant(CStruct):
    _fields_ = [
        ("struct_size", c_uint32),
        ("dtype", c_int),
        ("num_heads", c_int),
        ("head_dim", c_int),
    ]


class attn_mla_decode_variant(CStruct):
    _flags_ = ("causal", "write_lse", "batch_invariant")
    _fields_ = [
        ("struct_size", c_uint32),
        ("q_type", c_int),
        ("kv_type", c_int),
        ("num_q_heads", c_int),
        ("kv_lora_rank", c_int),
        ("rope_dim", c_int),
        ("page_size", c_int),
        ("query_len", c_int),
        ("causal", c_int),
        ("scale", c_float),
        ("write_lse", c_int),
        ("batch_invariant", c_int),
    ]


class attn_paged_kv(CStruct):
    _fields_ = [
        ("k", c_void_p),
        ("v", c_void_p),
        ("dtype", c_int),
        ("num_kv_heads", c_int),
        ("head_dim", c_int),
        ("page_size", c_int),
        ("layout", c_int),
        ("num_pages", c_int64),
        ("page_stride", c_int64),
        ("k_scale", c_void_p),
        ("v_scale", c_void_p),
        ("num_kv_scales", c_int),
    ]


class attn_aux_table(CStruct):
    _fields_ = [("data", c_void_p), ("dims", c_int32 * 3)]


class attn_head_tables(CStruct):
    _fields_ = [
        ("alibi_slopes", c_void_p),
        ("sinks", c_void_p),
        ("q_scale", c_void_p),
        ("aux", attn_aux_table * MAX_AUX_TABLES),
    ]


class attn_decode_args(CStruct):
    _fields_ = [
        ("struct_size", c_uint32),
        ("q", c_void_p),
        ("q_stride_token", c_int64),
        ("out", c_void_p),
        ("out_stride_token", c_int64),
        ("lse", c_void_p),
        ("cache", attn_paged_kv),
        ("page_tables", c_void_p),
        ("page_table_stride", c_int),
        ("seq_lens", c_void_p),
        ("tables", attn_head_tables),
        ("first_request", c_int),
    ]


class attn_prefill_args(CStruct):
    _fields_ = [
        ("struct_size", c_uint32),
        ("q", c_void_p),
        ("q_stride_token", c_int64),
        ("out", c_void_p),
        ("out_stride_token", c_int64),
        ("lse", c_void_p),
        ("k", c_void_p),
        ("v", c_void_p),
        ("k_stride_token", c_int64),
        ("v_stride_token", c_int64),
        ("k_scale", c_void_p),
        ("v_scale", c_void_p),
        ("num_kv_scales", c_int),
        ("cache", attn_paged_kv),
        ("page_tables", c_void_p),
        ("page_table_stride", c_int),
        ("tables", attn_head_tables),
    ]


class attn_merge_states_args(CStruct):
    _fields_ = [
        ("struct_size", c_uint32),
        ("num_tokens", c_int64),
        ("num_states", c_int),
        ("outs", c_void_p * MAX_MERGE_STATES),
        ("lses", c_void_p * MAX_MERGE_STATES),
        ("states_stride_token", c_int64),
        ("out", c_void_p),
        ("out_stride_token", c_int64),
        ("lse", c_void_p),
    ]


class attn_mla_decode_args(CStruct):
    _fields_ = [
        ("struct_size", c_uint32),
        ("q_nope", c_void_p),
        ("q_nope_stride_token", c_int64),
        ("q_rope", c_void_p),
        ("q_rope_stride_token", c_int64),
        ("out", c_void_p),
        ("out_stride_token", c_int64),
        ("lse", c_void_p),
        ("ckv", c_void_p),
        ("ckv_page_stride", c_int64),
        ("ckv_token_stride", c_int64),
        ("kpe", c_void_p),
        ("kpe_page_stride", c_int64),
        ("kpe_token_stride", c_int64),
        ("num_pages", c_int64),
        ("page_tables", c_void_p),
        ("page_table_stride", c_int),
        ("kv_scale", c_void_p),
    ]


class attn_cascade_level(CStruct):
    _fields_ = [
        ("group_starts", POINTER(c_int32)),
        ("kv_lens", POINTER(c_int32)),
        ("num_groups", c_int),
    ]


class attn_cascade_args(CStruct):
    _fields_ = [
        ("struct_size", c_uint32),
        ("q", c_void_p),
        ("q_stride_token", c_int64),
        ("out", c_void_p),
        ("out_stride_token", c_int64),
        ("lse", c_void_p),
        ("cache", attn_paged_kv),
        ("level_page_tables", c_void_p * MAX_CASCADE_LEVELS),
        ("level_page_table_strides", c_int * MAX_CASCADE_LEVELS),
        ("suffix_page_tables", c_void_p),
        ("suffix_page_table_stride", c_int),
    ]


class attn_append_kv_args(CStruct):
    _fields_ = [
        ("struct_size", c_uint32),
        ("k", c_void_p),
        ("v", c_void_p),
        ("num_tokens", c_int64),
        ("k_stride_token", c_int64),
        ("v_stride_token", c_int64),
        ("cache", attn_paged_kv),
        ("slot_mapping", c_void_p),
    ]


class attn_cache_layers(CStruct):
    _fields_ = [
        ("struct_size", c_uint32),
        ("layer_table", c_void_p),
        ("num_layers", c_int),
        ("num_pages", c_int64),
        ("page_size", c_int),
        ("num_kv_heads", c_int),
        ("head_dim", c_int),
        ("dtype", c_int),
        ("layout", c_int),
    ]


class attn_advance_step_args(CStruct):
    _fields_ = [
        ("struct_size", c_uint32),
        ("num_queries", c_int),
        ("num_seqs", c_int),
        ("page_size", c_int),
        ("seq_lens", c_void_p),
        ("slot_mapping", c_void_p),
        ("page_tables", c_void_p),
        ("page_table_stride", c_int),
        ("input_tokens", c_void_p),
        ("sampled_token_ids", c_void_p),
        ("positions", c_void_p),
    ]


class attn_scheduled_request(CStruct):
    _flags_ = ("is_prefill",)
    _fields_ = [
        ("is_prefill", c_int),
        ("query_len", c_int32),
        ("context_len", c_int32),
        ("page_table", POINTER(c_int32)),
        ("num_pages", c_int32),
    ]


class attn_metadata_limits(CStruct):
    _fields_ = [
        ("struct_size", c_uint32),
        ("page_size", c_int),
        ("num_pages", c_int64),
        ("max_batch", c_int),
        ("max_tokens", c_int64),
        ("max_pages_per_seq", c_int),
    ]


class attn_metadata(CStruct):
    _fields_ = [
        ("struct_size", c_uint32),
        ("num_prefills", c_int),
        ("num_decodes", c_int),
        ("num_prefill_tokens", c_int64),
        ("num_decode_tokens", c_int64),
        ("max_query_len", c_int32),
        ("max_decode_query_len", c_int32),
        ("max_prefill_seq_len", c_int32),
        ("max_decode_seq_len", c_int32),
        ("page_table_stride", c_int),
        ("batch", c_int),
        ("seq_lens", POINTER(c_int32)),
        ("context_lens", POINTER(c_int32)),
        ("query_start_loc", POINTER(c_int32)),
        ("seq_start_loc", POINTER(c_int32)),
        ("page_tables", POINTER(c_int32)),
        ("slot_mapping", POINTER(c_int64)),
        ("device_seq_lens", c_void_p),
        ("device_context_lens", c_void_p),
        ("device_query_start_loc", c_void_p),
        ("device_seq_start_loc", c_void_p),
        ("device_page_tables", c_void_p),
        ("device_slot_mapping", c_void_p),
    ]


# Every struct of the header (the CPU test compares their layout with a C
# compiler's where one exists).
STRUCTS = [
    attn_jit_options, attn_knobs, attn_decode_variant, attn_prefill_variant,
    attn_append_kv_variant, attn_merge_states_variant, attn_mla_decode_variant,
    attn_paged_kv,
    attn_aux_table, attn_head_tables, attn_decode_args, attn_prefill_args,
    attn_merge_states_args, attn_mla_decode_args, attn_cascade_level, attn_cascade_args,
    attn_append_kv_args, attn_cache_layers, attn_advance_step_args,
    attn_scheduled_request, attn_metadata_limits, attn_metadata,
]


for _struct in STRUCTS:
    _finish(_struct)

_SIZED = {t: ctypes.sizeof(t) for t in STRUCTS
          if any(name == "struct_size" for name, _ in t._fields_)}


def init(struct_type):
    """A zeroed struct with struct_size set (the header's ATTN_INIT)."""
    s = struct_type()
    size = _SIZED.get(struct_type)
    if size is not None:
        s.struct_size = size
    return s


# --- prototypes -------------------------------------------------------------
_p = c_void_p
_i32p = POINTER(c_int32)
_i64p = POINTER(c_int64)
_status = c_int

# name: (restype, argtypes)
PROTOTYPES = {
    "attn_last_error": (c_char_p, []),
    "attn_version": (c_char_p, []),
    "attn_c_api_version": (c_int, []),
    "attn_has_compiler": (c_int, []),
    "attn_supported_archs": (c_char_p, []),
    "attn_supported_head_sizes": (_status, [POINTER(c_int), c_int, POINTER(c_int)]),
    "attn_kv_cache_shape": (_status, [c_int64, c_int, c_int, c_int, c_int, _i64p]),
    "attn_context_create_jit": (_status, [POINTER(attn_jit_options), POINTER(_p)]),
    "attn_context_create_aot": (_status, [c_char_p, POINTER(_p)]),
    "attn_context_destroy": (_status, [_p]),
    "attn_decode_variant_init": (None, [POINTER(attn_decode_variant)]),
    "attn_prefill_variant_init": (None, [POINTER(attn_prefill_variant)]),
    "attn_append_kv_variant_init": (None, [POINTER(attn_append_kv_variant)]),
    "attn_merge_states_variant_init": (None, [POINTER(attn_merge_states_variant)]),
    "attn_mla_decode_variant_init": (None, [POINTER(attn_mla_decode_variant)]),
    "attn_decode_kernel_key": (_status, [POINTER(attn_decode_variant), c_char_p, c_size_t,
                                         POINTER(c_size_t)]),
    "attn_prefill_kernel_key": (_status, [POINTER(attn_prefill_variant), c_char_p, c_size_t,
                                          POINTER(c_size_t)]),
    "attn_append_kv_kernel_key": (_status, [POINTER(attn_append_kv_variant), c_char_p,
                                            c_size_t, POINTER(c_size_t)]),
    "attn_merge_states_kernel_key": (_status, [POINTER(attn_merge_states_variant), c_char_p,
                                               c_size_t, POINTER(c_size_t)]),
    "attn_mla_decode_kernel_key": (_status, [POINTER(attn_mla_decode_variant), c_char_p,
                                             c_size_t, POINTER(c_size_t)]),
    "attn_decode_variant_key": (_status, [POINTER(attn_decode_variant), c_char_p, c_size_t,
                                          POINTER(c_size_t)]),
    "attn_prefill_variant_key": (_status, [POINTER(attn_prefill_variant), c_char_p, c_size_t,
                                           POINTER(c_size_t)]),
    "attn_compile_decode": (_status, [POINTER(attn_decode_variant), c_char_p, POINTER(_p)]),
    "attn_compile_prefill": (_status, [POINTER(attn_prefill_variant), c_char_p, POINTER(_p)]),
    "attn_compiled_kernel_name": (c_char_p, [_p]),
    "attn_compiled_source": (c_char_p, [_p]),
    "attn_compiled_cubin_size": (c_size_t, [_p]),
    "attn_compiled_destroy": (_status, [_p]),
    "attn_decode_create": (_status, [_p, POINTER(attn_decode_variant), c_int, POINTER(_p)]),
    "attn_decode_destroy": (_status, [_p]),
    "attn_decode_plan": (_status, [_p, _i32p, c_int, c_int, _p]),
    "attn_decode_run": (_status, [_p, POINTER(attn_decode_args), _p]),
    "attn_prefill_create": (_status, [_p, POINTER(attn_prefill_variant), c_int, c_int64,
                                      POINTER(_p)]),
    "attn_prefill_destroy": (_status, [_p]),
    "attn_prefill_plan": (_status, [_p, _i32p, _i32p, c_int, c_int, _p]),
    "attn_prefill_plan_paged": (_status, [_p, _i32p, _i32p, c_int, c_int, _p]),
    "attn_prefill_run": (_status, [_p, POINTER(attn_prefill_args), _p]),
    "attn_mixed_batch_create": (_status, [_p, POINTER(attn_prefill_variant), c_int, c_int64,
                                          POINTER(_p)]),
    "attn_mixed_batch_destroy": (_status, [_p]),
    "attn_mixed_batch_plan": (_status, [_p, _i32p, _i32p, c_int, c_int, c_int, _p]),
    "attn_mixed_batch_run": (_status, [_p, POINTER(attn_prefill_args), _p, _p]),
    "attn_merge_states_create": (_status, [_p, POINTER(attn_merge_states_variant),
                                           POINTER(_p)]),
    "attn_merge_states_destroy": (_status, [_p]),
    "attn_merge_states_run": (_status, [_p, POINTER(attn_merge_states_args), _p]),
    "attn_mla_decode_create": (_status, [_p, POINTER(attn_mla_decode_variant), c_int,
                                         POINTER(_p)]),
    "attn_mla_decode_destroy": (_status, [_p]),
    "attn_mla_decode_plan": (_status, [_p, _i32p, c_int, c_int, _p]),
    "attn_mla_decode_run": (_status, [_p, POINTER(attn_mla_decode_args), _p]),
    "attn_cascade_create": (_status, [_p, POINTER(attn_decode_variant), c_int, c_int,
                                      POINTER(_p)]),
    "attn_cascade_destroy": (_status, [_p]),
    "attn_cascade_plan": (_status, [_p, POINTER(attn_cascade_level), c_int, _i32p, c_int,
                                    c_int, _p]),
    "attn_cascade_run": (_status, [_p, POINTER(attn_cascade_args), _p]),
    "attn_append_kv_create": (_status, [_p, POINTER(attn_append_kv_variant), POINTER(_p)]),
    "attn_append_kv_destroy": (_status, [_p]),
    "attn_append_kv_run": (_status, [_p, POINTER(attn_append_kv_args), _p]),
    "attn_cache_ops_create": (_status, [_p, POINTER(_p)]),
    "attn_cache_ops_destroy": (_status, [_p]),
    "attn_copy_blocks": (_status, [_p, POINTER(attn_cache_layers), _i64p, c_int64, _p]),
    "attn_copy_blocks_device": (_status, [_p, POINTER(attn_cache_layers), _p, c_int64, _p]),
    "attn_swap_blocks": (_status, [_p, c_int64, _p, c_int64, c_int64, _i64p, c_int64, _p]),
    "attn_advance_step": (_status, [_p, POINTER(attn_advance_step_args), _p, _p]),
    "attn_metadata_builder_create": (_status, [POINTER(attn_metadata_limits), POINTER(_p)]),
    "attn_metadata_builder_destroy": (_status, [_p]),
    "attn_metadata_builder_build": (_status, [_p, POINTER(attn_scheduled_request), c_int, _p,
                                              POINTER(attn_metadata)]),
}

# Functions that may compile a kernel (JIT, NVRTC: seconds on first use).
COMPILING = {
    "attn_compile_decode", "attn_compile_prefill", "attn_decode_create",
    "attn_prefill_create", "attn_mixed_batch_create", "attn_merge_states_create",
    "attn_cascade_create", "attn_append_kv_create", "attn_cache_ops_create",
    "attn_mla_decode_create",
}

# --- loading ----------------------------------------------------------------

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_lock = threading.Lock()
_lib = None


def candidate_paths():
    """The paths the loader tries, in order (``$ATTN_LIBRARY`` alone when
    set)."""
    env = os.environ.get("ATTN_LIBRARY")
    if env:
        return [os.path.abspath(env)]
    repo_build = os.path.normpath(os.path.join(_PACKAGE_DIR, "..", "..", "build", "lib"))
    dirs = [os.path.join(_PACKAGE_DIR, "lib"), repo_build]
    return [os.path.join(d, name) for name in ("libattn_c.so", "libattn_runtime_c.so")
            for d in dirs]


# name: [(index, rule, ctype)] of the integer and string parameters, which
# ctypes would truncate or cut (pointer parameters get ctypes objects, or
# addresses checked where they are made).
ARG_RULES = {}
for _name, (_restype, _argtypes) in PROTOTYPES.items():
    ARG_RULES[_name] = [(i, _rule(t), t) for i, t in enumerate(_argtypes)
                        if t in _INT_TYPES or t is c_char_p]


def check_args(function, args):
    """The arguments of a C call with its integer and string parameters
    checked (``function: argument N`` in messages)."""
    rules = ARG_RULES.get(function)
    if not rules:
        return args
    args = list(args)
    for i, rule, ctype in rules:
        if i < len(args):
            v = args[i]
            if isinstance(v, (ctypes.Array, ctypes._SimpleCData)) or \
                    (v is None and rule[2] == _STRING):
                continue  # a ctypes object (an output buffer), or a NULL char*
            if not (type(v) is int and rule[0] <= v <= rule[1]):
                args[i] = convert(rule, v, "%s: argument %d" % (function, i + 1), ctype)
    return args


def _declare(lib):
    missing = []
    for name, (restype, argtypes) in PROTOTYPES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            missing.append(name)
            continue
        fn.restype = restype
        fn.argtypes = argtypes
    if missing:
        raise OSError("attn: the library at %s lacks %s (an older or foreign build?)"
                      % (lib._name, ", ".join(missing)))


def load():
    """The loaded C library (ctypes.CDLL), loading it on first call.

    Raises OSError naming every path tried when none loads."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for path in candidate_paths():
            if not os.path.exists(path):
                tried.append("%s (not found)" % path)
                continue
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                tried.append("%s (%s)" % (path, e))
                continue
            _declare(lib)
            _lib = lib
            return lib
        hint = ("set ATTN_LIBRARY to libattn_c.so, or install the package with "
                "scripts/install-python.sh")
        raise OSError("attn: cannot load the attn C library; tried:\n  "
                      + "\n  ".join(tried) + "\n" + hint)


def loaded_path():
    """The path of the loaded library (loads it)."""
    return load()._name


def last_error():
    msg = load().attn_last_error()
    return msg.decode("utf-8", "replace") if msg else ""


def raise_for(status, function, what=""):
    """Raises the exception for a failed status (does nothing on ATTN_OK)."""
    if status == ATTN_OK:
        return
    message = last_error() or "%s failed" % function
    if what:
        message = "%s: %s" % (what, message)
    name = STATUS_NAMES.get(status, "status %d" % status)
    if status == ATTN_ERROR_INVALID_ARGUMENT:
        raise ValueError(message)
    if status == ATTN_ERROR_UNSUPPORTED:
        raise NotImplementedError(message)
    raise AttnError("%s (%s from %s)" % (message, name, function), name, function)


def call(function, *args, what="", progress=None):
    """Calls a status-returning C function and raises on failure.

    ``progress`` (a description such as "decode kernel (bf16, ...) for
    sm_90a") prints the compile progress line when the call takes more than
    a second."""
    fn = getattr(_lib or load(), function)
    args = check_args(function, args)
    if progress is not None:
        status = compiling(progress, lambda: fn(*args))
    else:
        status = fn(*args)
    if status:
        raise_for(status, function, what)


def launch_function(function):
    """A ctypes function object of its own for the launch entry point
    ``function`` (``attn_*_run``), every parameter a ``void*``: the
    wrappers' cached run path passes addresses as ints (the kernel handle,
    the args struct, device pointers, the stream), each one checked or
    read from torch where it was made, so the call converts nothing.
    Returns the status (``raise_for`` it)."""
    _, argtypes = PROTOTYPES[function]
    for t in argtypes:
        if t is not c_void_p and not issubclass(t, ctypes._Pointer):
            raise TypeError("%s: parameter of type %s is not an address" % (function, t.__name__))
    fn = load()[function]  # a new function object: the shared one keeps its prototype
    fn.restype = c_int
    fn.argtypes = [c_void_p] * len(argtypes)
    return fn


_FIELD_CODES = {c_void_p: "Q", c_int64: "q", c_int32: "i", c_int: "i", c_uint32: "I"}


def field_writer(c, fields):
    """``write(*values)`` setting ``fields`` of the struct ``c`` (adjacent
    in memory, in order; ``"cache.k"`` names a nested field) in one
    ``struct.pack_into``: the cached run path's data pointers and strides.
    A value outside its C type is a ``struct.error``, never a truncated
    value; the writer keeps ``c`` alive."""
    struct_type, offsets, codes = type(c), [], []
    for path in fields:
        t, offset = struct_type, 0
        for part in path.split("."):
            offset += getattr(t, part).offset
            t = dict(t._fields_)[part]
        offsets.append(offset)
        codes.append(_FIELD_CODES[t])
    packer = struct.Struct("<" + "".join(codes))
    at = offsets[0]
    for offset, code in zip(offsets, codes):
        if offset != at:
            raise ValueError("%s: fields %s are not adjacent" % (struct_type.__name__, fields))
        at += struct.calcsize("<" + code)
    return functools.partial(packer.pack_into, c, offsets[0])


# --- the progress line ------------------------------------------------------

PROGRESS_DELAY_S = 1.0


def _quiet():
    return os.environ.get("ATTN_QUIET", "") not in ("", "0")


def compiling(what, fn, delay=None):
    """Runs fn(); when it takes longer than ``delay`` seconds (default 1 s),
    prints ``attn: compiling <what> (first use; cached afterwards)...`` to
    stderr at that moment and ``... done in N.N s`` when it returns.
    ``ATTN_QUIET=1`` silences both. ctypes releases the GIL during the C
    call, so the timer thread prints while the compile runs."""
    if _quiet():
        return fn()
    delay = PROGRESS_DELAY_S if delay is None else delay
    state = {"printed": False}
    lock = threading.Lock()
    start = time.monotonic()

    def announce():
        with lock:
            if state.get("finished"):
                return
            state["printed"] = True
            print("attn: compiling %s (first use; cached afterwards)..." % what,
                  file=sys.stderr, flush=True)

    timer = threading.Timer(delay, announce)
    timer.daemon = True
    timer.start()
    try:
        return fn()
    finally:
        timer.cancel()
        with lock:
            state["finished"] = True
            printed = state["printed"]
        if printed:
            print("attn: compiling %s ... done in %.1f s" % (what, time.monotonic() - start),
                  file=sys.stderr, flush=True)


# --- small helpers ----------------------------------------------------------


def int32_array(values, name="values"):
    """A ctypes int32 array of the given ints (host memory; every value
    checked: ``check_ints``)."""
    if type(values) is array.array and values.typecode == "i":
        # array('i') holds C ints (it refused anything else when filled).
        return (c_int32 * len(values)).from_buffer(values) if values else (c_int32 * 1)()
    values = check_ints(list(values), name)
    if not values:
        return (c_int32 * 1)()
    # Through array('i') (C ints, 32 bits here): a copy in C, not an argument per value.
    return (c_int32 * len(values)).from_buffer(array.array("i", values))


def int64_array(values, name="values"):
    values = check_ints(list(values), name, -2 ** 63, INT64_MAX)
    return (c_int64 * max(1, len(values)))(*values)


__all__ = ["AttnError", "load", "call", "compiling", "init", "STRUCTS", "PROTOTYPES"]
