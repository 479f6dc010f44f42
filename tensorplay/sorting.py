"""Orderings, written once against :class:`~tensorplay.ops.Ops`: ``sort``, ``topk`` and the ``(values,
indices)`` forms of ``max``/``min`` along one axis.

The positions come from the ``argsort``/``argmax``/``argmin`` primitives (no derivative); the values
are a gather of ``x`` at those positions (:func:`take_along_axis`), so gradients flow through the
gather rules to exactly the selected elements: the first of tied maxima for ``max(dim)``, as PyTorch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tensorplay import derived as _d  # a module import: derived imports tensor, which imports this module
from tensorplay.errors import ShapeError

if TYPE_CHECKING:
    from tensorplay.ops import Interpreter

AnyTensor = Any


def take_along_axis(ops: Interpreter, x: AnyTensor, indices: AnyTensor, axis: int) -> AnyTensor:
    """``numpy.take_along_axis``: ``out[..., j, ...] = x[..., indices[..., j, ...], ...]`` along ``axis``;
    ``indices`` (int64) has ``x``'s shape except along ``axis``. One ``gather`` of the flattened ``x``
    at ``row * n + index``."""
    rank = x.ndim
    perm = [i for i in range(rank) if i != axis] + [axis]
    moved_x, moved_i = _d.permute(ops, x, perm), _d.permute(ops, indices, perm)
    lead, n = tuple(moved_x.shape[:-1]), moved_x.shape[-1]
    rows = _d.numel_of(lead)
    offsets = ops.reshape(ops.mul(ops.iota(length=rows, dtype="int64"), n), shape=lead + (1,))
    flat = _d.reshape(ops, moved_x, (rows * n,))
    picked = ops.gather(flat, ops.add(moved_i, offsets), axis=0)
    inverse = [0] * rank
    for i, p in enumerate(perm):
        inverse[p] = i
    return _d.permute(ops, picked, inverse)


def _as_vector(ops: Interpreter, x: AnyTensor, dim: int, where: str) -> tuple[AnyTensor, int, bool]:
    """``x`` with at least one axis (a 0-d tensor takes ``dim`` 0 or -1 and acts as ``[1]``), the
    normalised axis, and whether it was 0-d."""
    if x.ndim == 0:
        _d.check_scalar_dim(dim, where)
        return _d.reshape(ops, x, (1,)), 0, True
    return x, _d.normalize_axis(dim, x.ndim, where), False


def sort(ops: Interpreter, x: AnyTensor, dim: int, descending: bool) -> tuple[AnyTensor, AnyTensor]:
    """``(values, indices)`` sorted along ``dim``: stable (equal values keep their order), NaN last
    ascending and first descending, as ``torch.sort(..., stable=True)``."""
    v, axis, scalar = _as_vector(ops, x, dim, "sort")
    indices = ops.argsort(v, axis=axis, descending=bool(descending))
    values = take_along_axis(ops, v, indices, axis)
    if scalar:
        return _d.reshape(ops, values, ()), _d.reshape(ops, indices, ())
    return values, indices


def argsort(ops: Interpreter, x: AnyTensor, dim: int, descending: bool) -> AnyTensor:
    """The positions :func:`sort` orders by (without gathering the values)."""
    v, axis, scalar = _as_vector(ops, x, dim, "argsort")
    indices = ops.argsort(v, axis=axis, descending=bool(descending))
    return _d.reshape(ops, indices, ()) if scalar else indices


def topk(ops: Interpreter, x: AnyTensor, k: int, dim: int, largest: bool) -> tuple[AnyTensor, AnyTensor]:
    """The ``k`` largest (or smallest) entries along ``dim`` and their positions, in sorted order; NaN
    counts as the largest; of equal values the first positions are taken. A bool tensor is refused
    (``DTypeError``), as PyTorch."""
    _d.refuse_bool(x, "topk")
    v, axis, scalar = _as_vector(ops, x, dim, "topk")
    n = v.shape[axis]
    if isinstance(k, bool) or not isinstance(k, int) or k < 0 or (isinstance(n, int) and k > n):
        raise ShapeError(f"topk: k must be an int in [0, {n}] (the size of dim {dim}), got {k!r} "
                         f"(tensor shape {list(x.shape)})")
    order = ops.argsort(v, axis=axis, descending=bool(largest))
    indices = ops.slice(order, starts=(0,) * v.ndim, stops=tuple(k if i == axis else d for i, d in enumerate(v.shape)),
                        steps=(1,) * v.ndim)
    values = take_along_axis(ops, v, indices, axis)
    if scalar:
        return _d.reshape(ops, values, ()), _d.reshape(ops, indices, ())
    return values, indices


def extremum(ops: Interpreter, x: AnyTensor, dim: int, keepdim: bool, largest: bool) -> tuple[AnyTensor, AnyTensor]:
    """``(values, indices)`` of the maximum (``largest``) or minimum along ``dim``: the first extremum's
    position (NaN counts as the extremum), and the value there, which alone receives the gradient (as
    ``torch.max(x, dim)``)."""
    where = "max" if largest else "min"
    v, axis, scalar = _as_vector(ops, x, dim, where)
    indices = (ops.argmax if largest else ops.argmin)(v, axis=axis, keepdims=True)
    values = take_along_axis(ops, v, indices, axis)
    if scalar or not keepdim:
        shape = () if scalar else tuple(d for i, d in enumerate(v.shape) if i != axis)
        return _d.reshape(ops, values, shape), _d.reshape(ops, indices, shape)
    return values, indices


__all__ = ["argsort", "extremum", "sort", "take_along_axis", "topk"]
