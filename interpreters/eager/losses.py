"""Fused eager forms of the common ``nn.functional`` calls on small tensors: ``cross_entropy`` of logits
``[N, C]`` with class indices as one row kernel and one tape node, and ``layer_norm`` without a weight or
bias (ones and zeros made once per size and dtype).

:mod:`tensorplay.nn.functional` calls these when its inputs are eager; each returns ``None`` when the
arguments are not its common case (other dtypes, an ignored or out-of-range target, ...), and the
caller then runs the composed form, whose checks raise the errors. Results and gradients are those of
the composed form (up to rounding).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorplay import recording as _recording  # (a local named ``recording`` below is a flag)
from tensorplay.interpreters.eager import tape
from tensorplay.interpreters.eager.kernels import layer_norm_last_axis
from tensorplay.interpreters.eager.kernels.rows import NO_STATS
from tensorplay.interpreters.eager.kernels._support import FLOATS as _FLOATS
from tensorplay.interpreters.eager.fastpath import small_rows
from tensorplay.tensor import Tensor

Array = np.ndarray[Any, Any]
AnyTensor = Any

CROSS_ENTROPY_NODE = "cross_entropy"
"""The tape node of the fused cross-entropy (its rule is :func:`_cross_entropy_vjp`)."""

_KERNELS: Any = None
_INT64 = np.dtype(np.int64)


def _kernels() -> Any:
    global _KERNELS
    if _KERNELS is None:
        from tensorplay.interpreters.eager import _numba_losses
        _KERNELS = _numba_losses
    return _KERNELS


def cross_entropy(ops: Any, logits: AnyTensor, target: AnyTensor, ignore_index: int, reduction: str) -> AnyTensor | None:
    """The mean (or sum, by ``reduction``) over rows of ``logsumexp(logits[i]) - logits[i, target[i]]``
    for eager ``logits[N, C]`` (float32 or float64, ``N, C > 0``) and int64 ``target[N]`` whose entries all
    lie in ``[0, C)`` (``ignore_index`` negative, so none is ignored); ``None`` for anything else."""
    x, t = logits._data, target._data
    if type(x) is not np.ndarray or type(t) is not np.ndarray or x.ndim != 2 or t.ndim != 1 \
            or x.dtype not in _FLOATS or t.dtype is not _INT64 or ignore_index >= 0 or reduction not in ("mean", "sum"):
        return None
    n, c = x.shape
    if not n or not c or t.shape[0] != n:
        return None
    x = np.ascontiguousarray(x)
    t = np.ascontiguousarray(t)
    lse = np.empty(n, x.dtype)
    total, bad = _kernels().cross_entropy_rows(x, t, lse)
    if bad >= 0:
        return None  # an ignored or out-of-range target: the composed form skips it or names it
    scale = 1.0 / n if reduction == "mean" else 1.0
    out = np.array(total * scale, dtype=x.dtype)
    loss: AnyTensor = Tensor(ops, out)
    if _recording.active[0]:
        _recording.note_derived(loss, (logits,))
    if logits._requires_grad and tape.grad_enabled():
        tape.record(CROSS_ENTROPY_NODE, (logits,), {"target": t, "lse": lse, "scale": scale}, loss)
    return loss


def _cross_entropy_vjp(ops: Any, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *, target: Array,
                       lse: Array, scale: float) -> tuple[Any, ...]:
    """``g * scale * (softmax(x) - onehot(target))``: one row kernel, or (when the backward pass is itself
    recorded, ``create_graph=True``) composed of primitives so that it can be differentiated again."""
    x = inputs[0]
    if not tape.grad_enabled():
        data = np.ascontiguousarray(x._data)
        out = np.empty(data.shape, data.dtype)
        step = data.dtype.type(float(np.asarray(g._data)) * scale)
        _kernels().cross_entropy_grad_rows(data, target, lse, step, out)
        return (ops.wrap(out),)
    n, c = x._data.shape
    onehot = np.zeros((n, c), x._data.dtype)
    onehot[np.arange(n), target] = 1
    diff = ops.sub(ops.softmax(x, axis=1), ops.constant(onehot))
    return (ops.mul(diff, ops.mul(g, scale)),)


tape.EXTRA_VJP[CROSS_ENTROPY_NODE] = _cross_entropy_vjp

_ONES_ZEROS: dict[tuple[int, np.dtype[Any]], tuple[AnyTensor, AnyTensor]] = {}
"""The eager ones and zeros that stand for a missing ``weight`` and ``bias`` of each size and dtype, made once
(they are only ever read: by the kernel, and as the node's constant inputs)."""


def layer_norm(ops: Any, x: AnyTensor, size: int, weight: AnyTensor | None, bias: AnyTensor | None,
               eps: float) -> AnyTensor | None:
    """``layer_norm`` over the last axis (of ``size`` features) of eager float ``x``; ``weight``/``bias``
    ``None`` or eager tensors ``[size]`` of ``x``'s dtype (ones and zeros stand for missing ones): the
    ``layer_norm_last_axis`` primitive, whose rule these checks make redundant. ``None`` for anything else."""
    data = x._data
    if type(data) is not np.ndarray or data.dtype not in _FLOATS or not data.ndim or data.shape[-1] != size:
        return None
    if type(eps) is not float:  # a numpy scalar or an int is taken as its float value; anything else declined
        if not isinstance(eps, (float, int, np.floating, np.integer)) or isinstance(eps, bool):
            return None
        eps = float(eps)
    for t in (weight, bias):
        if t is not None and (not isinstance(t, Tensor) or type(t._data) is not np.ndarray
                              or t._data.dtype is not data.dtype or t._data.shape != (size,)):
            return None
    # the row kernel needs row-major weight and bias; only the caller's are read (the cached ones and zeros
    # are row-major): reading numpy's flags costs 0.9K of layer_norm's 32K instructions at 8 elements
    contiguous = True
    if weight is None or bias is None:
        key = (size, data.dtype)
        found = _ONES_ZEROS.get(key)
        if found is None or found[0]._ops is not ops:  # (a copy of the eager interpreter gets its own)
            found = _ONES_ZEROS[key] = (Tensor(ops, np.ones(size, data.dtype)), Tensor(ops, np.zeros(size, data.dtype)))
        contiguous = (weight is None or weight._data.flags.c_contiguous) and (bias is None or bias._data.flags.c_contiguous)
        weight = found[0] if weight is None else weight
        bias = found[1] if bias is None else bias
    elif not (weight._data.flags.c_contiguous and bias._data.flags.c_contiguous):
        contiguous = False
    g, b = weight._data, bias._data
    recording = (x._requires_grad or weight._requires_grad or bias._requires_grad) and tape.grad_enabled()
    # each row's mean and rstd, which the backward then need not recompute
    stats = np.empty((data.size // size if size else 0, 2), np.float64) if recording else None
    out = small_rows("layer_norm_rows", data, g, b, eps, NO_STATS if stats is None else stats) if contiguous else None
    if out is None:
        out = layer_norm_last_axis(data, g, b, eps=eps, stats=stats)
    made: AnyTensor = Tensor(ops, out)
    if _recording.active[0]:
        _recording.note_derived(made, (x, weight, bias))
    if stats is not None:
        tape.attach(made, LAYER_NORM_NODE, (x, weight, bias), {"eps": eps, "stats": stats})
    return made


LAYER_NORM_NODE = "layer_norm"
"""The tape node of the fused ``layer_norm``: the ``layer_norm_last_axis`` primitive with the forward's
statistics (float64 ``[rows, 2]`` of each row's mean and rstd) as the parameter ``stats``. The fused rule
reads them; with ``create_graph=True`` the primitive's composite rule runs without them."""


def _layer_norm_vjp(ops: Any, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *, eps: float,
                    stats: Array) -> tuple[Any, ...]:
    """The rule of :data:`LAYER_NORM_NODE` when the backward pass is recorded (``create_graph=True``): the
    primitive's composite rule, differentiable again (the statistics are not needed)."""
    from tensorplay.rules.vjp import VJP_RULES
    return VJP_RULES["layer_norm_last_axis"](ops, g, inputs, output, eps=eps)


tape.EXTRA_VJP[LAYER_NORM_NODE] = _layer_norm_vjp


__all__ = ["CROSS_ENTROPY_NODE", "LAYER_NORM_NODE", "cross_entropy", "layer_norm"]
