"""PyTorch's sequence and structure functions, written once against :class:`~tensorplay.ops.Ops` from
existing primitives: ``diff``, ``cross``, ``kron``, ``cummax``/``cummin``, ``block_diag``,
``cartesian_prod``, ``trapezoid``, ``histc`` and the index lists of ``tril_indices``/``triu_indices``.
Being compositions, they run under every interpreter and transform (graph recording, ``tp.compile``,
``grad``, ``vmap``), and their derivatives follow from those of the primitives.

Every function taking tensors takes the interpreter first; the tensor methods and ``tp.<name>`` forms
pass it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tensorplay import derived as _d  # a module import: derived imports tensor, which imports this module
from tensorplay import sorting as _sorting
from tensorplay.errors import ArgumentError, ArgumentTypeError, DTypeError, ShapeError
from tensorplay.op_args import check_tensor as _check_tensor, static_size as _static

if TYPE_CHECKING:
    from tensorplay.ops import Interpreter

AnyTensor = Any


def _check_int(value: Any, where: str, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ArgumentTypeError(f"{where}: {name} must be an int, got {type(value).__name__} {value!r}")
    return int(value)


def _cut(ops: Interpreter, x: AnyTensor, axis: int, start: int, stop: int) -> AnyTensor:
    """``x`` restricted to ``[start, stop)`` along ``axis``."""
    starts = tuple(start if a == axis else 0 for a in range(x.ndim))
    stops = tuple(stop if a == axis else s for a, s in enumerate(x.shape))
    return ops.slice(x, starts=starts, stops=stops, steps=(1,) * x.ndim)


def _tensor_axis(x: AnyTensor, dim: Any, where: str) -> int:
    _check_int(dim, where, "dim")
    if x.ndim == 0:
        raise ShapeError(f"{where}: expected a tensor with at least one dim, got a 0-d tensor")
    return _d.normalize_axis(int(dim), x.ndim, where)


# ---- differences and integrals -------------------------------------------------------------------

def diff(ops: Interpreter, x: AnyTensor, n: int = 1, dim: int = -1, prepend: AnyTensor | None = None,
         append: AnyTensor | None = None) -> AnyTensor:
    """The ``n``-th forward difference along ``dim``, as ``torch.diff``: ``out[i] = x[i + 1] - x[i]``,
    applied ``n`` times, after joining ``prepend`` and ``append`` (tensors of ``x``'s rank, matching off
    ``dim``) to ``x`` along ``dim``. ``[..., m, ...]`` to ``[..., max(m - n, 0), ...]``; bool inputs give
    ``x[i + 1] != x[i]``, as PyTorch."""
    where = "diff"
    _check_tensor(x, where, "input")
    count = _check_int(n, where, "n")
    if count < 0:
        raise ArgumentError(f"{where}: n must be non-negative, got {count}")
    axis = _tensor_axis(x, dim, where)
    parts = []
    for name, extra in (("prepend", prepend), ("append", append)):
        if extra is None:
            continue
        _check_tensor(extra, where, name)
        if extra.ndim != x.ndim:
            raise ShapeError(f"{where}: {name} must have the input's rank {x.ndim}, got shape {list(extra.shape)} "
                             f"for input shape {list(x.shape)}")
        if not _d.same_sizes([s for a, s in enumerate(extra.shape) if a != axis],
                             [s for a, s in enumerate(x.shape) if a != axis]):
            raise ShapeError(f"{where}: {name} must match the input off dim {dim}, got shape {list(extra.shape)} "
                             f"for input shape {list(x.shape)}")
        parts.append((name, extra))
    if parts:
        pieces = [p for name, p in parts if name == "prepend"] + [x] + [p for name, p in parts if name == "append"]
        x = ops.concat(*pieces, axis=axis)
    for _ in range(count):
        m = _static(x.shape[axis], where)
        if m == 0:
            break
        later, earlier = _cut(ops, x, axis, 1, m), _cut(ops, x, axis, 0, m - 1)
        x = ops.ne(later, earlier) if x.dtype.name == "bool" else ops.sub(later, earlier)
    return x


def trapezoid(ops: Interpreter, y: AnyTensor, x: AnyTensor | None = None, dx: float = 1.0,
              dim: int = -1) -> AnyTensor:
    """The trapezoid rule along ``dim``, as ``torch.trapezoid``: ``sum((y[i] + y[i + 1]) / 2 * d_i)`` with
    ``d_i = dx`` (a number) or ``x[i + 1] - x[i]`` (``x`` 1-d along ``dim``, or broadcasting with ``y``).
    ``[..., m, ...]`` to ``[...]``; integer ``y`` gives float32; an empty ``dim`` gives zeros."""
    where = "trapezoid"
    _check_tensor(y, where, "y")
    axis = _tensor_axis(y, dim, where)
    if y.dtype.numpy.kind != "f":
        y = ops.cast(y, dtype="float32")
    m = _static(y.shape[axis], where)
    ends: AnyTensor = y
    if m:
        ends = ops.add(_cut(ops, y, axis, 1, m), _cut(ops, y, axis, 0, m - 1))
    if x is None:
        if isinstance(dx, bool) or not isinstance(dx, (int, float)):
            raise ArgumentTypeError(f"{where}: dx must be a number, got {type(dx).__name__} {dx!r}")
        return ops.mul(ops.tensor_reduce("reduce_sum", ends, axis, False), float(dx) / 2.0)
    _check_tensor(x, where, "x")
    if x.ndim == 1:
        if not _d.same_sizes([x.shape[0]], [y.shape[axis]]):
            raise ShapeError(f"{where}: a 1-d x must have y's size {y.shape[axis]} along dim {dim}, got "
                             f"{x.shape[0]}")
        x = _d.reshape(ops, x, tuple(x.shape[0] if a == axis else 1 for a in range(y.ndim)))
        x_axis = axis
    else:
        if x.ndim > y.ndim:
            raise ShapeError(f"{where}: x of shape {list(x.shape)} has more dims than y of shape {list(y.shape)}")
        x_axis = axis - (y.ndim - x.ndim)
        if x_axis < 0 or not _d.same_sizes([x.shape[x_axis]], [y.shape[axis]]):
            raise ShapeError(f"{where}: x of shape {list(x.shape)} must have y's size {y.shape[axis]} along dim "
                             f"{dim}")
    if x.dtype.numpy.kind != "f":
        x = ops.cast(x, dtype=y.dtype.name)
    steps: AnyTensor = x
    if m:
        steps = ops.sub(_cut(ops, x, x_axis, 1, m), _cut(ops, x, x_axis, 0, m - 1))
    return ops.mul(ops.tensor_reduce("reduce_sum", ops.mul(ends, steps), axis, False), 0.5)


# ---- running extremes ----------------------------------------------------------------------------

def _cum_extreme(ops: Interpreter, x: AnyTensor, dim: int, largest: bool) -> tuple[AnyTensor, AnyTensor]:
    where = "cummax" if largest else "cummin"
    _check_tensor(x, where, "input")
    _check_int(dim, where, "dim")
    if x.ndim == 0:
        _d.check_scalar_dim(int(dim), where)
        return x, ops.full(shape=(), value=0, dtype="int64")
    axis = _d.normalize_axis(int(dim), x.ndim, where)
    n = _static(x.shape[axis], where)
    held = ops.stop_gradient(x)
    floats = x.dtype.numpy.kind == "f"
    coord = ops.reshape(ops.iota(length=n, dtype="int64"), shape=tuple(n if a == axis else 1 for a in range(x.ndim)))
    best, index = held, ops.broadcast_to(coord, shape=tuple(x.shape))
    step = 1
    pads = tuple((0, 0) for _ in range(x.ndim))
    while step < n:  # combine each running pair with the one 2**k places back (PyTorch's rule: the later one
        # wins ties, and a NaN is the extreme: the latest NaN wins)
        back = tuple((step, 0) if a == axis else p for a, p in enumerate(pads))
        prev_best = ops.pad(_cut(ops, best, axis, 0, n - step), pads=back, value=0.0)
        prev_index = ops.pad(_cut(ops, index, axis, 0, n - step), pads=back, value=-1.0)
        later = ops.ge(best, prev_best) if largest else ops.le(best, prev_best)
        if floats:
            later = ops.logical_or(later, ops.ne(best, best))
        keep = ops.logical_or(later, ops.lt(prev_index, 0))
        best = ops.where(keep, best, prev_best)
        index = ops.where(keep, index, prev_index)
        step *= 2
    values = _sorting.take_along_axis(ops, x, index, axis) if n else x  # the gradient reaches the chosen entry
    return values, index


def cummax(ops: Interpreter, x: AnyTensor, dim: int) -> tuple[AnyTensor, AnyTensor]:
    """Running maxima along ``dim`` and their positions (int64), as ``torch.cummax``: both of ``x``'s shape;
    on ties the later position, and NaN counts as the largest (the latest NaN's position). A doubling scan of
    ``ceil(log2(n))`` steps (``tp.compile`` specialises on the size of ``dim``); the gradient goes to the
    chosen entry."""
    return _cum_extreme(ops, x, dim, True)


def cummin(ops: Interpreter, x: AnyTensor, dim: int) -> tuple[AnyTensor, AnyTensor]:
    """Running minima along ``dim`` and their positions (int64), as ``torch.cummin`` (see :func:`cummax`;
    NaN counts as the smallest)."""
    return _cum_extreme(ops, x, dim, False)


# ---- products and structure ----------------------------------------------------------------------

def cross(ops: Interpreter, a: AnyTensor, b: AnyTensor, dim: int = -1) -> AnyTensor:
    """The cross product of 3-vectors along ``dim``, as ``torch.linalg.cross``: ``a`` and ``b`` of one rank
    broadcast, both of size 3 along ``dim``; the result has the broadcast shape. Dtypes promote."""
    where = "cross"
    _check_tensor(a, where, "input")
    _check_tensor(b, where, "other")
    if a.ndim != b.ndim:
        raise ShapeError(f"{where}: input and other must have the same number of dims, got shapes "
                         f"{list(a.shape)} and {list(b.shape)}")
    axis = _tensor_axis(a, dim, where)
    for name, t in (("input", a), ("other", b)):
        if not _d.same_sizes([t.shape[axis]], [3]):
            raise ShapeError(f"{where}: {name} must have size 3 along dim {dim}, got shape {list(t.shape)}")
    ca = [_cut(ops, a, axis, i, i + 1) for i in range(3)]
    cb = [_cut(ops, b, axis, i, i + 1) for i in range(3)]
    parts = [ops.sub(ops.mul(ca[(i + 1) % 3], cb[(i + 2) % 3]), ops.mul(ca[(i + 2) % 3], cb[(i + 1) % 3]))
             for i in range(3)]
    return ops.concat(*parts, axis=axis)


def kron(ops: Interpreter, a: AnyTensor, b: AnyTensor) -> AnyTensor:
    """The Kronecker product, as ``torch.kron``: the lower-rank operand gets leading 1s, then
    ``out[i * q + k] = a[i] * b[k]`` on each axis: ``[p_0, p_1, ...]`` and ``[q_0, q_1, ...]`` to
    ``[p_0 q_0, p_1 q_1, ...]``. Dtypes promote."""
    _check_tensor(a, "kron", "input")
    _check_tensor(b, "kron", "other")
    rank = max(a.ndim, b.ndim)
    sa = (1,) * (rank - a.ndim) + tuple(a.shape)
    sb = (1,) * (rank - b.ndim) + tuple(b.shape)
    wide_a = _d.reshape(ops, a, tuple(s for p in sa for s in (p, 1)))
    wide_b = _d.reshape(ops, b, tuple(s for q in sb for s in (1, q)))
    return _d.reshape(ops, ops.mul(wide_a, wide_b), tuple(p * q for p, q in zip(sa, sb)))


def block_diag(ops: Interpreter, tensors: Sequence[AnyTensor]) -> AnyTensor:
    """The block-diagonal matrix of the given blocks, as ``torch.block_diag``: a 0-d block is ``[1, 1]``, a
    1-d block ``[1, n]``, a 2-d block itself; the result is ``[sum rows, sum cols]``, zero off the blocks,
    of the promoted dtype (``[0, 0]`` float32 for no blocks is not supported: give at least one)."""
    where = "block_diag"
    if not tensors:
        raise ArgumentError(f"{where}: expected at least one tensor")
    blocks = []
    for i, t in enumerate(tensors):
        _check_tensor(t, where, f"tensors[{i}]")
        if t.ndim > 2:
            raise ShapeError(f"{where}: expected 0-d, 1-d or 2-d tensors, got shape {list(t.shape)} at position {i}")
        blocks.append(_d.reshape(ops, t, (1, 1)) if t.ndim == 0 else _d.reshape(ops, t, (1, t.shape[0]))
                      if t.ndim == 1 else t)
    widths = [_static(t.shape[1], where) for t in blocks]
    total = sum(widths)
    rows = []
    left = 0
    for t, w in zip(blocks, widths):
        rows.append(ops.pad(t, pads=((0, 0), (left, total - left - w)), value=0.0))
        left += w
    return rows[0] if len(rows) == 1 else ops.concat(*rows, axis=0)


def cartesian_prod(ops: Interpreter, tensors: Sequence[AnyTensor]) -> AnyTensor:
    """The Cartesian product of 1-d tensors, as ``torch.cartesian_prod``: ``k`` tensors ``[n_i]`` give
    ``[n_0 * n_1 * ..., k]``, rows in lexicographic order; one tensor is returned as it is. One dtype."""
    from tensorplay import math_more as _more
    where = "cartesian_prod"
    if not tensors:
        raise ArgumentError(f"{where}: expected at least one tensor")
    for i, t in enumerate(tensors):
        _check_tensor(t, where, f"tensors[{i}]")
        if t.ndim != 1:
            raise ShapeError(f"{where}: expected 1-d tensors, got shape {list(t.shape)} at position {i}")
    if len(tensors) == 1:
        return tensors[0]
    grids = _more.meshgrid(ops, tensors, "ij")
    count = _d.numel_of(tuple(grids[0].shape))
    return ops.concat(*(_d.reshape(ops, g, (count, 1)) for g in grids), axis=1)


def histc(ops: Interpreter, x: AnyTensor, bins: int = 100, min: float = 0.0,  # noqa: A002 - PyTorch's names
          max: float = 0.0) -> AnyTensor:  # noqa: A002
    """Counts of ``x``'s entries in ``bins`` equal bins over ``[min, max]``, as ``torch.histc`` (float input;
    the result has its dtype, shape ``[bins]``). ``min == max`` uses the data's least and largest entry
    (and widens an empty range by 1 each side); entries outside are ignored, ``max`` falls in the last
    bin. Not differentiable."""
    where = "histc"
    _check_tensor(x, where, "input")
    if x.dtype.numpy.kind != "f":
        raise DTypeError(f"{where}: expected a float tensor, got {x.dtype}; convert with .float() first")
    count = _check_int(bins, where, "bins")
    if count <= 0:
        raise ArgumentError(f"{where}: bins must be positive, got {count}")
    for name, v in (("min", min), ("max", max)):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ArgumentTypeError(f"{where}: {name} must be a number, got {type(v).__name__} {v!r}")
    if min > max:
        raise ArgumentError(f"{where}: max must be larger than min, got min={min} and max={max}")
    flat = ops.stop_gradient(_d.reshape(ops, x, (_d.numel_of(tuple(x.shape)),)))
    lo: Any = float(min)
    hi: Any = float(max)
    if min == max:
        if flat.shape[0] == 0:
            lo, hi = lo - 1.0, hi + 1.0
        else:
            lo = ops.tensor_reduce("reduce_min", flat, 0, False)
            hi = ops.tensor_reduce("reduce_max", flat, 0, False)
            same = ops.eq(lo, hi)
            lo, hi = ops.where(same, ops.sub(lo, 1.0), lo), ops.where(same, ops.add(hi, 1.0), hi)
    inside = ops.logical_and(ops.ge(flat, lo), ops.le(flat, hi))
    width: Any = hi - lo if isinstance(hi, float) else ops.sub(hi, lo)
    scaled = ops.div(ops.mul(ops.sub(flat, lo), float(count)), width)
    position = ops.minimum(ops.cast(ops.floor(ops.where(inside, scaled, 0.0)), dtype="int64"), count - 1)
    ones = ops.cast(inside, dtype=x.dtype.name)
    return ops.scatter_add(ops.full(shape=(count,), value=0.0, dtype=x.dtype.name), position, ones, axis=0)


# ---- index lists ---------------------------------------------------------------------------------

def triangle_indices(row: Any, col: Any, offset: Any, lower: bool) -> np.ndarray[Any, Any]:
    """The ``[2, k]`` int64 coordinates of the lower (``lower``) or upper triangle of a ``row x col``
    matrix, row-major, as ``torch.tril_indices``/``torch.triu_indices``: entries with ``j - i <= offset``
    (lower) or ``j - i >= offset`` (upper). Static sizes only."""
    where = "tril_indices" if lower else "triu_indices"
    r, c = _check_int(row, where, "row"), _check_int(col, where, "col")
    k = _check_int(offset, where, "offset")
    for name, v in (("row", r), ("col", c)):
        if v < 0:
            raise ArgumentError(f"{where}: {name} must be non-negative, got {v}")
    i, j = np.indices((r, c), dtype=np.int64)
    keep = (j - i <= k) if lower else (j - i >= k)
    return np.stack([i[keep], j[keep]]).astype(np.int64).reshape(2, -1)


__all__ = ["block_diag", "cartesian_prod", "cross", "cummax", "cummin", "diff", "histc", "kron",
           "trapezoid", "triangle_indices"]
