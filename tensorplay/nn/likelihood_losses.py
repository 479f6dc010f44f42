"""Negative log-likelihood losses of ``tensorplay.nn.functional`` (re-exported there): ``poisson_nll_loss``
and ``gaussian_nll_loss``, composed from the primitives (eager, recorded, compiled, exported and transformed
with no rule of their own). ``reduction`` is ``"mean"`` (over every element), ``"sum"`` or ``"none"``.
Operands are computed in their promoted float dtype (integer tensors give float32), as PyTorch.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tensorplay.errors import ArgumentError, DTypeError, ShapeError
from tensorplay.nn._util import is_eager
from tensorplay.nn.functional import _check_reduction, _check_target, _reduce
from tensorplay.nn.margin_losses import _no_bool, _tensors, broadcastable, floated
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]


def poisson_nll_loss(input: AnyTensor, target: AnyTensor, log_input: bool = True, full: bool = False, *,
                     eps: float = 1e-8, reduction: str = "mean") -> AnyTensor:
    """Poisson negative log-likelihood of rate ``input`` (its log with ``log_input``: ``exp(x) - t x``,
    else ``x - t log(x + eps)``) at counts ``target``, broadcast together. ``full`` adds Stirling's term
    ``t log t - t + log(2 pi t) / 2`` where ``t > 1`` (0 elsewhere, its gradient too), as PyTorch."""
    where = "poisson_nll_loss"
    _check_reduction(reduction, where)
    _check_target(target, where)
    named = (("input", input), ("target", target))
    ops = _tensors(where, named)
    _no_bool(where, named)
    broadcastable(where, named)
    x, t = floated(ops, input), floated(ops, target)
    if log_input:
        loss = ops.sub(ops.exp(x), ops.mul(t, x))
    else:
        loss = ops.sub(x, ops.mul(t, ops.log(ops.add(x, float(eps)))))
    if full:
        small = ops.le(t, 1.0)
        ts = ops.where(small, 2.0, t)  # a safe value where the term is dropped (no log(0) in its gradient)
        stirling = ops.add(ops.sub(ops.mul(ts, ops.log(ts)), ts), ops.mul(ops.log(ops.mul(ts, 2.0 * math.pi)), 0.5))
        loss = ops.add(loss, ops.where(small, 0.0, stirling))
    return _reduce(ops, loss, reduction, where)


def _var_shape(where: str, var: AnyTensor, input: AnyTensor) -> bool:
    """Whether ``var`` needs a trailing unit dim; a :class:`ShapeError` unless it is shaped as ``input``,
    as ``input`` less its last dim, or as ``input`` with exactly one dim of size 1 (PyTorch's rules)."""
    vs, xs = tuple(var.shape), tuple(input.shape)
    if vs == xs:
        return False
    if vs == xs[:-1] and input.ndim > 0:
        return True
    if len(vs) == len(xs) and sum(v for x, v in zip(xs, vs) if x != v) == 1:
        return False
    raise ShapeError(f"{where}: var of shape {list(vs)} does not fit the input {list(xs)}: expected "
                     f"{list(xs)} (one variance each), {list(xs[:-1])} (one per row) or {list(xs)} with one "
                     "dim of size 1")


def gaussian_nll_loss(input: AnyTensor, target: AnyTensor, var: AnyTensor | float, full: bool = False,
                      eps: float = 1e-6, reduction: str = "mean") -> AnyTensor:
    """Gaussian negative log-likelihood ``(log(v) + (x - t)^2 / v) / 2`` (plus ``log(2 pi) / 2`` with
    ``full``) of means ``input`` at ``target`` (broadcast with it) with variances ``var``: a tensor shaped as
    ``input``, as ``input[..., :-1]`` (one per row) or as ``input`` with one dim of size 1, or a
    non-negative number. ``v = max(var, eps)``, the clamp passing the gradient straight through (PyTorch
    clamps under ``no_grad``). Eagerly, a negative variance is an :class:`ArgumentError`, as PyTorch."""
    where = "gaussian_nll_loss"
    _check_reduction(reduction, where)
    _check_target(target, where)
    if isinstance(var, bool) or not isinstance(var, (Tensor, int, float, np.integer, np.floating)):
        raise DTypeError(f"{where}: var must be a tensorplay Tensor or a number, got {type(var).__name__}")
    named: list[tuple[str, AnyTensor]] = [("input", input), ("target", target)]
    if isinstance(var, Tensor):
        named.append(("var", var))
    ops = _tensors(where, named)
    _no_bool(where, named)
    broadcastable(where, named[:2])
    x, t = floated(ops, input), floated(ops, target)
    v: Any
    if isinstance(var, Tensor):
        if is_eager(ops) and bool((np.asarray(var._data) < 0).any()):
            raise ArgumentError(f"{where}: var must be non-negative, got a negative entry "
                                f"{np.asarray(var._data)[np.asarray(var._data) < 0].flat[0]} (var: "
                                f"{var.dtype.name}{list(var.shape)})")
        v = floated(ops, var)
        if _var_shape(where, var, input):
            v = ops.reshape(v, shape=tuple(var.shape) + (1,))
        # max(var, eps) in value, the identity in gradient (var - stop_gradient(var) is exactly 0)
        v = ops.where(ops.lt(v, float(eps)), ops.add(ops.sub(v, ops.stop_gradient(v)), float(eps)), v)
    else:
        if not var >= 0:
            raise ArgumentError(f"{where}: var must be non-negative, got {var}")
        v = max(float(var), float(eps))
    d = ops.sub(x, t)
    loss = ops.mul(ops.add(ops.log(v) if isinstance(v, Tensor) else math.log(v), ops.div(ops.mul(d, d), v)), 0.5)
    if full:
        loss = ops.add(loss, 0.5 * math.log(2 * math.pi))
    return _reduce(ops, loss, reduction, where)
