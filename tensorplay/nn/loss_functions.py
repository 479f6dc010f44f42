"""More losses and distances of ``tensorplay.nn.functional`` (re-exported there):
``binary_cross_entropy_with_logits``, ``binary_cross_entropy``, ``smooth_l1_loss``, ``huber_loss``, ``kl_div``,
``cosine_similarity``, ``pairwise_distance`` and ``normalize``.

Each is composed from the primitives, so it runs eagerly, records, compiles, exports to ONNX and goes through
every transform with no rule of its own. ``reduction`` is ``"mean"`` (over every element), ``"sum"`` or
``"none"`` (the elementwise loss, shaped as ``input``), and ``kl_div`` also takes ``"batchmean"`` (the sum over
the size of dim 0). Accepted dtypes follow PyTorch; anything else is a :class:`DTypeError` naming the function
and the argument.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from tensorplay import derived
from tensorplay.errors import ArgumentError, DTypeError, ShapeError
from tensorplay.nn._util import is_eager, ops_for
from tensorplay.nn.activation_functions import stable_softplus
from tensorplay.nn.functional import _check_reduction, _check_target, _float_operand, _reduce
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]


def _same_shape(where: str, input: AnyTensor, target: AnyTensor) -> None:
    if tuple(input.shape) != tuple(target.shape):
        raise ShapeError(f"{where}: target shape {list(target.shape)} must be the same as input shape "
                         f"{list(input.shape)}")


def _float_tensor(where: str, name: str, t: AnyTensor) -> None:
    if not t.dtype.is_floating_point:
        raise DTypeError(f"{where}: {name} must be a float tensor, got {t.dtype.name}{list(t.shape)}; "
                         "convert with .float() first")


def _broadcastable(where: str, name: str, t: AnyTensor, shape: tuple[Any, ...]) -> None:
    """A :class:`ShapeError` unless ``t`` (a weight) broadcasts to ``shape`` (the input's) without growing it."""
    ok = t.ndim <= len(shape) and all(
        d == 1 or d == s for d, s in zip(reversed(tuple(t.shape)), reversed(shape)))
    if not ok:
        raise ShapeError(f"{where}: {name} of shape {list(t.shape)} does not broadcast to the input shape "
                         f"{list(shape)}")


def _optional_weight(where: str, name: str, w: AnyTensor | None, input: AnyTensor) -> None:
    if w is None:
        return
    if not isinstance(w, Tensor):
        raise DTypeError(f"{where}: {name} must be a tensorplay Tensor or None, got {type(w).__name__}")
    _float_tensor(where, name, w)
    _broadcastable(where, name, w, tuple(input.shape))


def binary_cross_entropy_with_logits(input: AnyTensor, target: AnyTensor, weight: AnyTensor | None = None,
                                     reduction: str = "mean", pos_weight: AnyTensor | None = None) -> AnyTensor:
    """Binary cross entropy of logits ``input`` and probabilities ``target`` of the same shape:
    ``-w [pos_weight * t * log sigmoid(x) + (1 - t) log(1 - sigmoid(x))]``, computed as
    ``(1 - t) x + (1 + (pos_weight - 1) t) softplus(-x)`` with a softplus that never overflows (exact at
    ``|x| = 1e4``). ``weight`` broadcasts to the input's shape, ``pos_weight`` (one per class) along the last
    dim. Float tensors only; the result has the target's dtype, as PyTorch."""
    where = "binary_cross_entropy_with_logits"
    _check_reduction(reduction, where)
    _check_target(target, where)
    ops = ops_for(where, input, target, weight, pos_weight)
    _float_tensor(where, "input", input)
    _float_tensor(where, "target", target)
    _same_shape(where, input, target)
    _optional_weight(where, "weight", weight, input)
    _optional_weight(where, "pos_weight", pos_weight, input)
    sp = stable_softplus(ops, ops.neg(input))
    if pos_weight is not None:
        sp = ops.mul(ops.add(ops.mul(ops.sub(pos_weight, 1.0), target), 1.0), sp)
    loss = ops.add(ops.mul(ops.sub(1.0, target), input), sp)
    if weight is not None:
        loss = ops.mul(loss, weight)
    if loss.dtype != target.dtype:  # PyTorch's result has the target's dtype (float64 logits, float32 target)
        loss = ops.cast(loss, dtype=target.dtype.name)
    return _reduce(ops, loss, reduction, where)


def _clamped_log(ops: Any, p: AnyTensor) -> AnyTensor:
    """``max(log(p), -100)`` (PyTorch's clamp, so that ``p = 0`` costs 100, not infinity); its gradient is 0
    where clamped."""
    small = ops.le(p, 0.0)
    logp = ops.log(ops.where(small, 1.0, p))
    return ops.where(small, -100.0, derived.clamp(ops, logp, -100.0, None))  # type: ignore[no-any-return]


def _check_probabilities(where: str, input: AnyTensor) -> None:
    """An :class:`ArgumentError` unless every element of the eager ``input`` is in ``[0, 1]`` (NaN is not), as
    PyTorch checks (a recorded graph cannot check its data)."""
    data = np.asarray(input._data)
    bad = ~((data >= 0) & (data <= 1))
    if bad.any():
        first = data[bad].flat[0]
        raise ArgumentError(f"{where}: all elements of input should be between 0 and 1, got {first} "
                            f"({int(bad.sum())} of {data.size} outside; input: {input.dtype.name}{list(input.shape)})")


def binary_cross_entropy(input: AnyTensor, target: AnyTensor, weight: AnyTensor | None = None,
                         reduction: str = "mean") -> AnyTensor:
    """Binary cross entropy of probabilities ``input`` (in ``[0, 1]``) and ``target`` of the same shape:
    ``-w [t log(x) + (1 - t) log(1 - x)]`` with each log clamped at -100, as PyTorch. ``weight`` broadcasts
    to the input's shape. Float tensors of one dtype only (PyTorch promotes none of them). Eagerly, an input
    outside ``[0, 1]`` (or NaN) is an :class:`ArgumentError`, as PyTorch."""
    where = "binary_cross_entropy"
    _check_reduction(reduction, where)
    _check_target(target, where)
    ops = ops_for(where, input, target, weight)
    _float_tensor(where, "input", input)
    if target.dtype != input.dtype:
        raise DTypeError(f"{where}: target must have the input's dtype {input.dtype.name}, got "
                         f"{target.dtype.name}{list(target.shape)}")
    _same_shape(where, input, target)
    _optional_weight(where, "weight", weight, input)
    if is_eager(ops):
        _check_probabilities(where, input)
    pos = ops.mul(target, _clamped_log(ops, input))
    neg = ops.mul(ops.sub(1.0, target), _clamped_log(ops, ops.sub(1.0, input)))
    loss = ops.neg(ops.add(pos, neg))
    if weight is not None:
        loss = ops.mul(loss, weight)
    return _reduce(ops, loss, reduction, where)


def _difference(where: str, input: AnyTensor, target: AnyTensor, reduction: str) -> tuple[Any, AnyTensor]:
    """The interpreter and ``input - target`` of a regression loss, after its checks: one of the two must be a
    float tensor, and the other (integer or bool) is cast to its dtype first."""
    _check_reduction(reduction, where)
    _check_target(target, where)
    ops = ops_for(where, input, target)
    _same_shape(where, input, target)
    _float_operand(where, input, target, f"PyTorch has no integer {where}")
    return ops, ops.sub(_to_float(ops, input, target), _to_float(ops, target, input))


def _quadratic_or_linear(ops: Any, d: AnyTensor, knot: float, quad_scale: float, lin_scale: float) -> AnyTensor:
    """``quad_scale * d^2 / 2`` where ``|d| < knot``, else ``lin_scale * (|d| - knot / 2)``."""
    a = ops.abs(d)
    near = ops.lt(a, knot)
    dq = ops.where(near, d, 0.0)  # the quadratic branch sees a finite d, so an infinite d keeps gradient +-1
    quad = ops.mul(ops.mul(dq, dq), 0.5 * quad_scale)
    lin = ops.mul(ops.sub(a, 0.5 * knot), lin_scale)
    return ops.where(near, quad, lin)  # type: ignore[no-any-return]


def smooth_l1_loss(input: AnyTensor, target: AnyTensor, reduction: str = "mean", beta: float = 1.0) -> AnyTensor:
    """Smooth L1 of ``input`` and ``target`` of the same shape: ``d^2 / (2 beta)`` where ``|d| < beta``, else
    ``|d| - beta / 2`` (``d = input - target``; ``beta = 0`` is the L1 loss). ``beta >= 0``; one of the two
    must be a float tensor (the other, integer or bool, is cast to its dtype), as PyTorch."""
    where = "smooth_l1_loss"
    if not beta >= 0:
        raise ArgumentError(f"{where}: beta must be non-negative, got {beta}")
    ops, d = _difference(where, input, target, reduction)
    loss = ops.abs(d) if beta == 0 else _quadratic_or_linear(ops, d, float(beta), 1.0 / beta, 1.0)
    return _reduce(ops, loss, reduction, where)


def huber_loss(input: AnyTensor, target: AnyTensor, reduction: str = "mean", delta: float = 1.0) -> AnyTensor:
    """Huber loss of ``input`` and ``target`` of the same shape: ``d^2 / 2`` where ``|d| < delta``, else
    ``delta (|d| - delta / 2)``. ``delta > 0``; ``input`` must be a float tensor (the target may be an integer
    or bool tensor, cast to the input's dtype, which the result has), as PyTorch."""
    where = "huber_loss"
    if not delta > 0:
        raise ArgumentError(f"{where}: delta must be positive, got {delta}")
    _check_target(target, where)
    _float_tensor(where, "input", input)
    if target.dtype != input.dtype:  # the result has the input's dtype, as PyTorch
        target = ops_for(where, input, target).cast(target, dtype=input.dtype.name)
    ops, d = _difference(where, input, target, reduction)
    return _reduce(ops, _quadratic_or_linear(ops, d, float(delta), 1.0, float(delta)), reduction, where)


def _xlogy(ops: Any, x: AnyTensor, y: AnyTensor) -> AnyTensor:
    """``x * log(y)``, 0 where ``x == 0`` (unless ``y`` is NaN), as ``torch.xlogy``."""
    zero = ops.logical_and(ops.eq(x, 0.0), ops.eq(y, y))
    return ops.where(zero, 0.0, ops.mul(x, ops.log(ops.where(zero, 1.0, y))))  # type: ignore[no-any-return]


def kl_div(input: AnyTensor, target: AnyTensor, reduction: str = "mean", log_target: bool = False) -> AnyTensor:
    """Kullback-Leibler divergence of log-probabilities ``input`` from ``target`` (probabilities, or
    log-probabilities with ``log_target``), pointwise ``t (log t - x)`` (0 where ``t == 0``) or ``exp(t) (t -
    x)``. ``input`` and ``target`` broadcast together. ``reduction`` also takes ``"batchmean"``: the sum over
    the size of dim 0 (PyTorch's mathematically correct mean; ``"mean"`` averages over every element). Float
    tensors only. As PyTorch, ``"mean"`` warns that it is not the per-sample divergence."""
    where = "kl_div"
    if reduction not in ("mean", "sum", "none", "batchmean"):
        raise ArgumentError(f"{where}: reduction must be one of ('mean', 'sum', 'none', 'batchmean'), "
                            f"got {reduction!r}")
    _check_target(target, where)
    ops = ops_for(where, input, target)
    _float_tensor(where, "input", input)
    _float_tensor(where, "target", target)
    if log_target:
        loss = ops.mul(ops.exp(target), ops.sub(target, input))
    else:
        loss = ops.sub(_xlogy(ops, target, target), ops.mul(target, input))
    if reduction == "mean":
        warnings.warn("kl_div: reduction='mean' divides the summed divergence by the number of elements, not by "
                      "the batch size; reduction='batchmean' gives the KL divergence per sample", UserWarning,
                      stacklevel=2)
    if reduction != "batchmean":
        return _reduce(ops, loss, reduction, where)
    total = _reduce(ops, loss, "sum", where)
    return total if input.ndim == 0 else ops.div(total, input.shape[0])


def _to_float(ops: Any, t: AnyTensor, like: AnyTensor) -> AnyTensor:
    """``t`` itself if float, else cast to ``like``'s dtype if that is a float, else to float32."""
    if t.dtype.is_floating_point:
        return t
    return ops.cast(t, dtype=like.dtype.name if like.dtype.is_floating_point else "float32")  # type: ignore[no-any-return]


def _pair(where: str, x1: AnyTensor, x2: AnyTensor) -> Any:
    if not isinstance(x2, Tensor):
        raise DTypeError(f"{where}: x2 must be a tensorplay Tensor, got {type(x2).__name__}")
    return ops_for(where, x1, x2)


def cosine_similarity(x1: AnyTensor, x2: AnyTensor, dim: int = 1, eps: float = 1e-8) -> AnyTensor:
    """Cosine of the angle between ``x1`` and ``x2`` (broadcast together) along ``dim``, which is removed:
    ``sum(x1/max(|x1|, eps) * x2/max(|x2|, eps))`` (each norm clamped, as PyTorch, so a zero vector gives 0).
    One of the two must be a float tensor (the other may be integer or bool)."""
    where = "cosine_similarity"
    ops = _pair(where, x1, x2)
    if not (x1.dtype.is_floating_point or x2.dtype.is_floating_point):
        raise DTypeError(f"{where}: x1 or x2 must be a float tensor, got {x1.dtype.name}{list(x1.shape)} and "
                         f"{x2.dtype.name}{list(x2.shape)}")
    a, b = _to_float(ops, x1, x2), _to_float(ops, x2, x1)
    ndim = max(a.ndim, b.ndim)
    axis = derived.normalize_axis(dim, ndim, where)
    pad_a = derived.reshape(ops, a, (1,) * (ndim - a.ndim) + tuple(a.shape))
    pad_b = derived.reshape(ops, b, (1,) * (ndim - b.ndim) + tuple(b.shape))

    def unit(t: AnyTensor) -> AnyTensor:
        n = derived.norm(ops, t, 2, axis, True)
        return ops.div(t, derived.clamp(ops, n, float(eps), None))  # type: ignore[no-any-return]

    return ops.reduce_sum(ops.mul(unit(pad_a), unit(pad_b)), axes=(axis,), keepdims=False)  # type: ignore[no-any-return]


def pairwise_distance(x1: AnyTensor, x2: AnyTensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> AnyTensor:
    """The ``p``-norm of ``x1 - x2 + eps`` (broadcast together) along the last dim (kept with ``keepdim``).
    Float or integer tensors (two integer tensors give a float32 result), not bool, as PyTorch."""
    where = "pairwise_distance"
    ops = _pair(where, x1, x2)
    for name, t in (("x1", x1), ("x2", x2)):
        if t.dtype.name == "bool":
            raise DTypeError(f"{where}: {name} must be a numeric tensor, got bool{list(t.shape)}")
    diff = ops.sub(_to_float(ops, x1, x2), _to_float(ops, x2, x1))
    return derived.norm(ops, ops.add(diff, float(eps)), p, -1, keepdim)  # type: ignore[no-any-return]


def normalize(input: AnyTensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> AnyTensor:
    """``input / max(||input||_p, eps)`` with the norm along ``dim`` (kept), shaped as ``input``. Float
    tensors only."""
    where = "normalize"
    ops = ops_for(where, input)
    _float_tensor(where, "input", input)
    n = derived.norm(ops, input, p, dim, True)
    return ops.div(input, derived.clamp(ops, n, float(eps), None))  # type: ignore[no-any-return]
