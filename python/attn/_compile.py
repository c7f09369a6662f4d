"""torch.compile support: a planned wrapper's ``run()`` as one PyTorch custom
op (``attn::wrapper_run``), so that dynamo traces it without a graph break.

``plan()`` registers the wrapper here (once torch is loaded; ``import attn``
never imports torch). Under ``torch.compile`` a ``run()`` of the plain form
(the tensors, optionally ``return_lse``) is traced as the op, whose eager
implementation is the wrapper's own ``run()`` with every check, and whose
fake implementation gives the output's shape from the plan: out
``[rows, num_qo_heads, head_dim_vo]`` in q's dtype, LSE ``[rows,
num_qo_heads]`` float32. The op is functional (it allocates its outputs).
"""
import itertools
import sys
import weakref

_wrappers = weakref.WeakValueDictionary()  # op id -> wrapper
_ids = itertools.count(1)
_op = None
_is_compiling = None


def register(wrapper):
    """Gives ``wrapper`` an op id (``wrapper._op_id``) where torch is loaded
    and defines the op once per process."""
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "library") or \
            not hasattr(torch.library, "custom_op"):
        return
    _define(torch)
    if getattr(wrapper, "_op_id", None) is None:
        wrapper._op_id = next(_ids)
        _wrappers[wrapper._op_id] = wrapper


def tracing(wrapper):
    """Whether ``wrapper.run()`` is being traced by torch.compile (and has an
    op to be traced as)."""
    return getattr(wrapper, "_op_id", None) is not None and _is_compiling()


def run(wrapper, tensors, return_lse):
    """The traced form of ``wrapper.run(*tensors, return_lse=...)``; a paged
    cache given as a ``(k, v)`` tuple is passed flattened and rebuilt."""
    flat = []
    for t in tensors:
        flat.extend(t) if isinstance(t, tuple) else flat.append(t)
    result = _op(flat, wrapper._op_id, len(tensors), bool(return_lse))
    return (result[0], result[1]) if return_lse else result[0]


def _unflatten(flat, count):
    """The run() arguments: ``count`` of them, the last ones a tuple when
    the flat list is longer (a ``(k, v)`` paged cache)."""
    if len(flat) == count:
        return list(flat)
    extra = len(flat) - count + 1
    return list(flat[:count - 1]) + [tuple(flat[count - 1:count - 1 + extra])]


def _define(torch):
    global _op, _is_compiling
    if _op is not None:
        return
    _is_compiling = torch.compiler.is_compiling
    from typing import List

    @torch.library.custom_op("attn::wrapper_run", mutates_args=())
    def wrapper_run(tensors: List[torch.Tensor], op_id: int, count: int,
                    return_lse: bool) -> List[torch.Tensor]:
        w = _wrappers[op_id]
        result = w.run(*_unflatten(tensors, count), return_lse=return_lse)
        return list(result) if return_lse else [result]

    @wrapper_run.register_fake
    def _(tensors, op_id, count, return_lse):
        w = _wrappers[op_id]
        q = tensors[0]
        variant = w._need_plan().variant
        out = q.new_empty(tuple(q.shape[:-1]) + (variant.head_dim,))
        if not return_lse:
            return [out]
        return [out, q.new_empty(tuple(q.shape[:-1]), dtype=torch.float32)]

    _op = wrapper_run
