"""``clip_grad_norm_`` and ``clip_grad_value_``: scale or clamp the ``.grad`` of parameters in place.

Eagerly the gradients' payloads change in place (a reference to ``p.grad`` sees the new values). Inside a
function captured by ``tp.compile`` the gradients are the recording's values: the same in-place calls are
recorded, so a compiled training step clips before ``optimizer.step()`` exactly as eager does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from tensorplay.errors import GraphCaptureError
from tensorplay.interpreters.eager import tape
from tensorplay.nn._util import is_eager
from tensorplay.tensor import Tensor, highest_interpreter

AnyTensor = Tensor[*tuple[Any, ...]]
Parameters = AnyTensor | Iterable[AnyTensor]


def _tensors(parameters: Any, where: str) -> list[AnyTensor]:
    """``parameters`` (one tensor or an iterable of them, e.g. ``model.parameters()``) as a list."""
    items = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    for i, p in enumerate(items):
        if not isinstance(p, Tensor):
            raise TypeError(f"{where}: expected tensors (e.g. model.parameters()), got {type(p).__name__} at "
                            f"position {i}")
    return items


_NORM_TYPES = "a float or an int (the order p of the p-norm, e.g. 2.0, 1, 0.5), or 'inf' / float('inf')"


def _norm_type(norm_type: Any, where: str) -> float:
    """``norm_type`` as a float, as PyTorch reads it (``float(norm_type)``: any real order, negative and
    ``-inf`` included, or a string such as ``'inf'``); anything else is an error naming the argument."""
    try:
        return float(norm_type)
    except ValueError:
        raise ValueError(f"{where}: norm_type must be {_NORM_TYPES}; got {norm_type!r}, which is not a "
                         "number (a matrix norm such as 'fro' does not apply: the gradients are one vector)") from None
    except TypeError:
        raise TypeError(f"{where}: norm_type must be {_NORM_TYPES}; got {norm_type!r} "
                        f"({type(norm_type).__name__})") from None


def get_total_norm(tensors: Parameters, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach: bool | None = None) -> AnyTensor:
    """The ``norm_type``-norm of all the ``tensors`` together, as if concatenated into one vector (0-d,
    in the promoted dtype; 0 when there are none). ``norm_type=inf`` is the largest absolute value, ``-inf``
    the smallest; a negative order is ``sum(|x|**p)**(1/p)``, as ``torch.linalg.vector_norm``."""
    items = _tensors(tensors, "get_total_norm")
    p = _norm_type(norm_type, "get_total_norm")
    if not items:
        from tensorplay.interpreters.eager.interpreter import eager
        return eager.full(shape=(), value=0.0, dtype="float32")  # type: ignore[no-any-return]
    ops: Any = highest_interpreter(items, items[0]._ops)
    with tape.no_grad():
        parts = [_tensor_norm(ops, t, p) for t in items]
        dtype = "float64" if any(t.dtype.name == "float64" for t in parts) else "float32"
        stacked = ops.concat(*(ops.reshape(ops.cast(t, dtype=dtype), shape=(1,)) for t in parts), axis=0)
        total = _tensor_norm(ops, stacked, p)
    if error_if_nonfinite:
        if not is_eager(ops):
            raise GraphCaptureError("clip_grad_norm_: error_if_nonfinite=True reads the norm's value, which a "
                                    "recorded graph does not know; pass error_if_nonfinite=False")
        value = float(total.item())
        if not math.isfinite(value):
            raise RuntimeError(f"The total norm of order {p} for gradients from `parameters` is non-finite "
                               f"({value}), so it cannot be clipped. To disable this error and scale the "
                               "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
    return total


def _tensor_norm(ops: Any, t: AnyTensor, p: float) -> AnyTensor:
    """The vector ``p``-norm of all entries of ``t`` (0-d)."""
    axes = tuple(range(t.ndim))
    size = 1
    for d in t.shape:
        size = size * d
    if isinstance(size, int) and size == 0:
        return ops.full(shape=(), value=0.0, dtype=t.dtype.name)  # type: ignore[no-any-return]
    a = ops.abs(t)
    if math.isinf(p):
        reduce = ops.reduce_max if p > 0 else ops.reduce_min
        return reduce(a, axes=axes, keepdims=False)  # type: ignore[no-any-return]
    if p == 0:
        return ops.reduce_sum(ops.cast(ops.ne(t, 0.0), dtype=t.dtype.name), axes=axes,  # type: ignore[no-any-return]
                              keepdims=False)
    if p == 1:
        return ops.reduce_sum(a, axes=axes, keepdims=False)  # type: ignore[no-any-return]
    if p == 2:
        return ops.sqrt(ops.reduce_sum(ops.mul(t, t), axes=axes, keepdims=False))  # type: ignore[no-any-return]
    return ops.pow(ops.reduce_sum(ops.pow(a, p), axes=axes, keepdims=False), 1.0 / p)  # type: ignore[no-any-return]


def _grads(parameters: Parameters, where: str) -> list[AnyTensor]:
    return [g for g in (p.grad for p in _tensors(parameters, where)) if g is not None]


def clip_grad_norm_(parameters: Parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach: bool | None = None) -> AnyTensor:
    """Scale the gradients of ``parameters`` in place so that their total ``norm_type``-norm (all of them
    as one vector, :func:`get_total_norm`) is at most ``max_norm``: each ``.grad`` is multiplied by
    ``min(1, max_norm / (total + 1e-6))``. Returns the total norm before clipping (0-d). Parameters
    without a gradient are skipped; ``error_if_nonfinite`` raises when the norm is NaN or infinite.
    ``foreach`` is accepted for PyTorch compatibility."""
    p = _norm_type(norm_type, "clip_grad_norm_")
    grads = _grads(parameters, "clip_grad_norm_")
    total = get_total_norm(grads, p, error_if_nonfinite)
    if not grads:
        return total
    ops: Any = highest_interpreter(grads, total._ops)
    with tape.no_grad():
        coef = ops.minimum(ops.div(float(max_norm), ops.add(total, 1e-6)), 1.0)
        for g in grads:
            g.mul_(ops.cast(coef, dtype=g.dtype.name))
    return total


def clip_grad_value_(parameters: Parameters, clip_value: float, foreach: bool | None = None) -> None:
    """Clamp every gradient of ``parameters`` to ``[-clip_value, clip_value]`` in place (NaN stays NaN)."""
    value = float(clip_value)
    for g in _grads(parameters, "clip_grad_value_"):
        with tape.no_grad():
            g.clamp_(-value, value)
