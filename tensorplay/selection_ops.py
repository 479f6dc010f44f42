"""Selections whose output size depends on the data, as PyTorch's: ``nonzero``, ``argwhere``,
``masked_select``, ``unique`` and ``unique_consecutive``.

Each reads the values that decide the size (``ops.concrete``, as boolean-mask indexing does), so it runs
eagerly and under an execute-mode recording (``tp.compile`` and ``tp.func.grad`` trace that way: the read
is a guard, re-checked on every call, and a new value traces again). A symbolic recording has no values
(``tp.func.vmap``, a symbolic trace, export): there it is a :class:`~tensorplay.errors.GraphCaptureError`
that names the function and the static-shape alternative. ``masked_select`` gathers its values from the
input, so its gradient is PyTorch's (scattered back to the selected positions, summed over broadcast);
positions, ``unique`` and its inverse and counts have no derivative, as in PyTorch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tensorplay import derived as _d  # a module import: derived imports tensor, which imports this module
from tensorplay.errors import ArgumentTypeError, DTypeError, GraphCaptureError, ShapeError
from tensorplay.op_args import check_tensor as _check_tensor, static_size as _static

if TYPE_CHECKING:
    from tensorplay.ops import Interpreter

AnyTensor = Any


def _read(ops: Interpreter, x: AnyTensor, where: str, size_of: str, instead: str) -> Any:
    """The numpy value of ``x``, or a :class:`GraphCaptureError` saying why ``where`` needs it."""
    try:
        return np.asarray(ops.concrete(x))
    except GraphCaptureError as exc:
        raise GraphCaptureError(
            f"{where}: the output's size is {size_of}, which depends on the input's values, so it cannot be "
            f"recorded symbolically (tp.func.vmap, a symbolic trace or an export have no values). Call it "
            f"eagerly, or under tp.compile or tp.func.grad (which specialise on the values), or keep a static "
            f"shape: {instead}. ({exc})") from None


def _const(ops: Interpreter, array: Any, dtype: Any = np.int64) -> AnyTensor:
    return ops.constant(np.array(array, dtype=dtype, order="C"))


def _dim(x: AnyTensor, dim: Any, where: str) -> int | None:
    if dim is None:
        return None
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise ArgumentTypeError(f"{where}: dim must be an int or None, got {type(dim).__name__} {dim!r}")
    if x.ndim == 0:
        _d.check_scalar_dim(dim, where)
        return 0
    return _d.normalize_axis(dim, x.ndim, where)


# ---- positions ----------------------------------------------------------------------------------------

_NONZERO_INSTEAD = "tp.where(x != 0, a, b) or masked_fill selects without changing the shape, count_nonzero counts"


def nonzero(ops: Interpreter, x: AnyTensor, as_tuple: bool = False) -> AnyTensor | tuple[AnyTensor, ...]:
    """The int64 coordinates ``[k, x.ndim]`` of the ``k`` non-zero entries (NaN counts), row-major, as
    ``torch.nonzero``; with ``as_tuple`` one 1-d tensor ``[k]`` per dim (a 0-d input acts as 1-d)."""
    _check_tensor(x, "nonzero", "input")
    value = _read(ops, x, "nonzero", "the number of non-zero entries", _NONZERO_INSTEAD)
    if as_tuple:
        return tuple(_const(ops, axis) for axis in np.nonzero(np.atleast_1d(value)))
    return _const(ops, np.argwhere(value))


def argwhere(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """``nonzero(x)``: the ``[k, x.ndim]`` int64 coordinates of the non-zero entries, as ``torch.argwhere``."""
    _check_tensor(x, "argwhere", "input")
    value = _read(ops, x, "argwhere", "the number of non-zero entries", _NONZERO_INSTEAD)
    return _const(ops, np.argwhere(value))


def masked_select(ops: Interpreter, x: AnyTensor, mask: AnyTensor) -> AnyTensor:
    """The entries of ``x`` where the bool ``mask`` is True, as a 1-d tensor in row-major order, as
    ``torch.masked_select``; ``x`` and ``mask`` broadcast. The gradient goes back to the selected entries
    (summed over broadcast copies)."""
    _check_tensor(x, "masked_select", "input")
    _check_tensor(mask, "masked_select", "mask")
    if mask.dtype.name != "bool":
        raise DTypeError(f"masked_select: mask must be a bool tensor, got {mask.dtype.name}{list(mask.shape)}")
    try:
        shape = np.broadcast_shapes(tuple(_static(s, "masked_select") for s in x.shape),
                                    tuple(_static(s, "masked_select") for s in mask.shape))
    except ValueError:
        raise ShapeError(f"masked_select: the input of shape {list(x.shape)} and the mask of shape "
                         f"{list(mask.shape)} do not broadcast") from None
    picked = _read(ops, mask, "masked_select", "the number of True entries of the mask",
                   "tp.where(mask, x, 0) or x.masked_fill(~mask, 0) keeps the shape")
    positions = np.flatnonzero(np.broadcast_to(picked, shape))
    full = x if _d.same_sizes(tuple(x.shape), shape) else ops.broadcast_to(x, shape=tuple(shape))
    flat = _d.reshape(ops, full, (int(np.prod(shape, dtype=np.int64)),))
    return ops.gather(flat, _const(ops, positions), axis=0)


# ---- distinct values ---------------------------------------------------------------------------------

_UNIQUE_INSTEAD = "tp.sort, or bincount into a fixed length, keep the shape static"


def _results(ops: Interpreter, values: Any, inverse: Any, counts: Any, return_inverse: bool,
             return_counts: bool) -> AnyTensor | tuple[AnyTensor, ...]:
    out = [_const(ops, values, values.dtype)]
    if return_inverse:
        out.append(_const(ops, inverse))
    if return_counts:
        out.append(_const(ops, counts))
    return out[0] if len(out) == 1 else tuple(out)


def _flags(where: str, **flags: Any) -> None:
    for name, value in flags.items():
        if not isinstance(value, (bool, np.bool_)):
            raise ArgumentTypeError(f"{where}: {name} must be a bool, got {type(value).__name__} {value!r}")


def unique(ops: Interpreter, x: AnyTensor, sorted: bool = True, return_inverse: bool = False,  # noqa: A002
           return_counts: bool = False, dim: int | None = None) -> AnyTensor | tuple[AnyTensor, ...]:
    """The distinct values of ``x`` in ascending order (``dim=None``: of all entries, 1-d; else the distinct
    slices along ``dim``, in lexicographic order), as ``torch.unique``; with ``return_inverse`` also the
    int64 position of each entry (slice) in them (``x``'s shape, or ``[x.size(dim)]``), with
    ``return_counts`` how often each occurs. NaN entries are each distinct, as PyTorch. ``sorted=False`` is
    accepted and gives the sorted result too (what PyTorch's CPU kernel returns). No derivative."""
    _check_tensor(x, "unique", "input")
    _flags("unique", sorted=sorted, return_inverse=return_inverse, return_counts=return_counts)
    axis = _dim(x, dim, "unique")
    value = _read(ops, x, "unique", "the number of distinct values", _UNIQUE_INSTEAD)
    if axis is None or value.ndim == 0:
        flat = value.reshape(-1)
        values, inverse, counts = np.unique(flat, return_inverse=True, return_counts=True, equal_nan=False)
        return _results(ops, values, np.asarray(inverse).reshape(value.shape), counts, return_inverse,
                        return_counts)
    if value.shape[axis] == 0:
        return _results(ops, value, np.zeros((0,), np.int64), np.zeros((0,), np.int64), return_inverse,
                        return_counts)
    values, inverse, counts = np.unique(value, return_inverse=True, return_counts=True, axis=axis)
    return _results(ops, values, np.asarray(inverse).reshape(-1), counts, return_inverse, return_counts)


def unique_consecutive(ops: Interpreter, x: AnyTensor, return_inverse: bool = False, return_counts: bool = False,
                       dim: int | None = None) -> AnyTensor | tuple[AnyTensor, ...]:
    """``x`` with each run of equal consecutive entries (``dim=None``: of the flattened tensor; else equal
    consecutive slices along ``dim``) kept once, as ``torch.unique_consecutive``; ``return_inverse`` and
    ``return_counts`` as :func:`unique` (NaN entries each distinct). No derivative."""
    _check_tensor(x, "unique_consecutive", "input")
    _flags("unique_consecutive", return_inverse=return_inverse, return_counts=return_counts)
    axis = _dim(x, dim, "unique_consecutive")
    value = _read(ops, x, "unique_consecutive", "the number of runs of equal values", _UNIQUE_INSTEAD)
    if axis is None or value.ndim == 0:
        rows = value.reshape(-1, 1)
    else:
        rows = np.moveaxis(value, axis, 0).reshape(value.shape[axis], -1)
    n = rows.shape[0]
    starts = np.ones(n, dtype=bool)
    if n > 1:
        starts[1:] = np.any(rows[1:] != rows[:-1], axis=1) if rows.shape[1] else False
    first = np.flatnonzero(starts)
    inverse = np.cumsum(starts) - 1
    counts = np.diff(np.append(first, n))
    if axis is None or value.ndim == 0:
        return _results(ops, value.reshape(-1)[first], inverse.reshape(value.shape), counts, return_inverse,
                        return_counts)
    return _results(ops, np.take(value, first, axis=axis), inverse, counts, return_inverse, return_counts)


__all__ = ["argwhere", "masked_select", "nonzero", "unique", "unique_consecutive"]
