"""Rearrangements and selections of PyTorch's API, written once against :class:`~tensorplay.ops.Ops`:
``flip``, ``roll``, ``tile``/``repeat``, ``repeat_interleave``, ``movedim``, ``unflatten``, ``diagonal``,
``diag``, ``index_select`` and ``gather``.

Each composes existing primitives (slices with negative steps, ``concat``, ``reshape``/``broadcast_to``,
``pad``, ``gather`` and ``check_index``), so it runs eagerly, under the graph recorder, ``tp.compile``,
ONNX export and every transform without rules of its own. Index tensors must be integers with values in
``[0, n)``, as in PyTorch; ``check_index`` checks them whenever the graph runs.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tensorplay import derived as _d  # a module import: derived imports tensor, which imports this module
from tensorplay import sorting as _sorting
from tensorplay.errors import ArgumentTypeError, AxisError, DTypeError, ShapeError
from tensorplay.symbolic import SymDim

if TYPE_CHECKING:
    from tensorplay.ops import Interpreter

AnyTensor = Any


# ---- small helpers -----------------------------------------------------------------------------

def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _ints(value: Any, where: str, what: str) -> tuple[int, ...]:
    """One int or a sequence of ints as a tuple; anything else an :class:`ArgumentTypeError`."""
    seq = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    for v in seq:
        if not _is_int(v):
            raise ArgumentTypeError(f"{where}: {what} must be an int or a tuple of ints, got {value!r}")
    return tuple(int(v) for v in seq)


def _sizes(args: Sequence[Any], where: str, what: str) -> tuple[Any, ...]:
    """``f(2, 3)`` or ``f((2, 3))``: non-negative ints (or symbolic sizes), else a :class:`ShapeError`."""
    sizes = _d.shape_args(args)
    for s in sizes:
        if not (_is_int(s) or isinstance(s, SymDim)) or (_is_int(s) and s < 0):
            raise ShapeError(f"{where}: {what} must be non-negative ints, got {list(sizes)}")
    return tuple(int(s) if _is_int(s) else s for s in sizes)


def _distinct_axes(axes: Sequence[int], ndim: int, where: str) -> tuple[int, ...]:
    out = tuple(_d.normalize_axis(a, ndim, where) for a in axes)
    if len(set(out)) != len(out):
        raise AxisError(f"{where}: dims {list(axes)} name an axis twice (tensor of rank {ndim})")
    return out


def _integer_index(index: Any, where: str) -> None:
    """``index`` must be an int32 or int64 tensor (a :class:`DTypeError` naming ``where`` otherwise)."""
    from tensorplay.tensor import Tensor
    if not isinstance(index, Tensor):
        raise ArgumentTypeError(f"{where}: index must be an int64 or int32 tensor, got {type(index).__name__}")
    if index.dtype.name not in ("int32", "int64"):
        raise DTypeError(f"{where}: index must be an int64 or int32 tensor, got {index.dtype} "
                         f"(index: {index.dtype}{list(index.shape)})")


def _checked(ops: Interpreter, index: AnyTensor, bound: Any, where: str) -> AnyTensor:
    """``index`` after a run-time check that its values lie in ``[0, bound)`` (an ``IndexRangeError``)."""
    return ops.check_index(index, bound=bound, what=f"{where}: index")


def _slice_axis(ops: Interpreter, x: AnyTensor, axis: int, start: Any, stop: Any) -> AnyTensor:
    starts = tuple(start if i == axis else 0 for i in range(x.ndim))
    stops = tuple(stop if i == axis else d for i, d in enumerate(x.shape))
    return ops.slice(x, starts=starts, stops=stops, steps=(1,) * x.ndim)


# ---- flips, rolls, repeats -----------------------------------------------------------------------

def flip(ops: Interpreter, x: AnyTensor, dims: Any) -> AnyTensor:
    """``x`` reversed along each axis of ``dims`` (an int or a tuple; negative allowed; each at most once),
    as ``torch.flip``; shape and dtype kept. A slice with step -1 (a view eagerly) of the static axes, a gather
    along each symbolic one."""
    dim_t = _ints(dims, "flip", "dims")
    if x.ndim == 0:
        for d in dim_t:
            _d.check_scalar_dim(d, "flip")
        return x
    axes = _distinct_axes(dim_t, x.ndim, "flip")
    static = [a for a in axes if not isinstance(x.shape[a], SymDim) and x.shape[a] > 1]
    out = _d.getitem(ops, x, tuple(builtins.slice(None, None, -1) if i in static else builtins.slice(None)
                                   for i in range(x.ndim))) if static else x
    for a in axes:
        if isinstance(x.shape[a], SymDim):  # a gather at n - 1 - i: unlike a slice from n - 1, valid for n == 0
            n: Any = x.shape[a]
            out = ops.gather(out, ops.sub(n - 1, ops.iota(length=n, dtype="int64")), axis=a)
    return out


def _roll_axis(ops: Interpreter, x: AnyTensor, shift: int, axis: int) -> AnyTensor:
    n = x.shape[axis]
    if isinstance(n, SymDim):
        if not builtins.abs(shift) <= n:  # decided on the size (a guard under tp.compile)
            size = n.value_for(f"roll by {shift} along an axis of symbolic size {n}")
            if size == 0:
                return x
            shift %= size
        cut = n - shift if shift >= 0 else -shift
    else:
        if n == 0 or shift % n == 0:
            return x
        cut = n - shift % n
    return ops.concat(_slice_axis(ops, x, axis, cut, n), _slice_axis(ops, x, axis, 0, cut), axis=axis)


def roll(ops: Interpreter, x: AnyTensor, shifts: Any, dims: Any) -> AnyTensor:
    """``torch.roll``: entry ``i`` moves to ``(i + shift) % n`` along each axis of ``dims`` (``shifts`` and
    ``dims`` ints or tuples of one length; an axis may repeat, its shifts add). With ``dims=None`` the
    flattened tensor is rolled and the shape restored. A concatenation of two slices per axis."""
    where = "roll"
    shift_t = _ints(shifts, where, "shifts")
    if dims is None:
        if len(shift_t) != 1:
            raise ShapeError(f"roll: with dims=None, shifts must be one int, got {shifts!r}")
        flat = _d.reshape(ops, x, (_d.numel_of(x.shape),))
        return _d.reshape(ops, _roll_axis(ops, flat, shift_t[0], 0), tuple(x.shape))
    dim_t = _ints(dims, where, "dims")
    if len(shift_t) != len(dim_t):
        raise ShapeError(f"roll: shifts and dims must have the same length, got shifts={shifts!r} and "
                         f"dims={dims!r}")
    if x.ndim == 0:
        for d in dim_t:
            _d.check_scalar_dim(d, where)
        return x
    out = x
    for shift, d in zip(shift_t, dim_t):
        out = _roll_axis(ops, out, shift, _d.normalize_axis(d, x.ndim, where))
    return out


def repeat(ops: Interpreter, x: AnyTensor, sizes: Sequence[Any], where: str = "repeat") -> AnyTensor:
    """``torch.Tensor.repeat``: ``x`` tiled ``sizes[i]`` times along axis ``i``; ``sizes`` has at least
    ``x.ndim`` entries (``x`` takes leading size-1 axes for the extra ones). Result
    ``[sizes[i] * shape[i]]``. One ``broadcast_to`` between two reshapes."""
    reps = _sizes(sizes, where, "repeats")
    if len(reps) < x.ndim:
        raise ShapeError(f"{where}: the number of repeats ({len(reps)}: {list(reps)}) can not be smaller than "
                         f"the number of dimensions of the tensor ({x.ndim}: shape {list(x.shape)})")
    shape = (1,) * (len(reps) - x.ndim) + tuple(x.shape)
    if builtins.all(_is_int(r) and r == 1 for r in reps):
        return _d.reshape(ops, x, shape)
    spread = tuple(v for n in shape for v in (1, n))
    target = tuple(v for r, n in zip(reps, shape) for v in (r, n))
    out = ops.broadcast_to(_d.reshape(ops, x, spread), shape=target)
    return _d.reshape(ops, out, tuple(r * n for r, n in zip(reps, shape)))


def tile(ops: Interpreter, x: AnyTensor, dims: Sequence[Any]) -> AnyTensor:
    """``torch.tile``: :func:`repeat`, with ``dims`` padded by leading 1s when it is shorter than the rank."""
    reps = _sizes(dims, "tile", "dims")
    return repeat(ops, x, (1,) * (x.ndim - len(reps)) + reps, "tile")


def repeat_interleave(ops: Interpreter, x: AnyTensor, repeats: Any, dim: int | None) -> AnyTensor:
    """``torch.repeat_interleave`` with an int ``repeats``: each entry repeated ``repeats`` times in a row
    along ``dim`` (``[a, b] -> [a, a, b, b]``); ``dim=None`` works on the flattened tensor. Axis ``dim``
    grows to ``n * repeats``."""
    where = "repeat_interleave"
    if not (_is_int(repeats) or isinstance(repeats, SymDim)) or (_is_int(repeats) and repeats < 0):
        raise ArgumentTypeError(f"{where}: repeats must be a non-negative int, got {type(repeats).__name__} "
                                f"{repeats!r} (repeats given as a tensor are not supported)")
    if dim is None:
        x, axis = _d.reshape(ops, x, (_d.numel_of(x.shape),)), 0
    elif x.ndim == 0:
        _d.check_scalar_dim(dim, where)
        x, axis = _d.reshape(ops, x, (1,)), 0
    else:
        axis = _d.normalize_axis(dim, x.ndim, where)
    shape = tuple(x.shape)
    lead, n, rest = shape[:axis], shape[axis], shape[axis + 1:]
    out = ops.broadcast_to(ops.reshape(x, shape=lead + (n, 1) + rest), shape=lead + (n, repeats) + rest)
    return _d.reshape(ops, out, lead + (n * repeats,) + rest)


# ---- moving and splitting axes -----------------------------------------------------------------

def movedim(ops: Interpreter, x: AnyTensor, source: Any, destination: Any) -> AnyTensor:
    """``torch.movedim``: the axes ``source`` (an int or a tuple) moved to positions ``destination`` (as
    many), the other axes keeping their order."""
    where = "movedim"
    src_t, dst_t = _ints(source, where, "source"), _ints(destination, where, "destination")
    if len(src_t) != len(dst_t):
        raise ShapeError(f"movedim: source and destination must have the same number of dims, got "
                         f"source={source!r} and destination={destination!r}")
    if x.ndim == 0:
        for d in src_t + dst_t:
            _d.check_scalar_dim(d, where)
        return x
    src, dst = _distinct_axes(src_t, x.ndim, where), _distinct_axes(dst_t, x.ndim, where)
    perm: list[int | None] = [None] * x.ndim
    for s, t in zip(src, dst):
        perm[t] = s
    others = iter(a for a in range(x.ndim) if a not in src)
    return _d.permute(ops, x, [next(others) if p is None else p for p in perm])


def unflatten(ops: Interpreter, x: AnyTensor, dim: int, sizes: Sequence[Any]) -> AnyTensor:
    """``torch.unflatten``: axis ``dim`` split into axes of ``sizes`` (one may be -1), whose product must
    be its size."""
    axis = _d.normalize_axis(dim, x.ndim, "unflatten")
    if not isinstance(sizes, (tuple, list)) or not sizes:
        raise ShapeError(f"unflatten: sizes must be a non-empty tuple of ints, got {sizes!r}")
    n = x.shape[axis]
    inner = _d.resolve_shape(sizes, n, "unflatten", [n])
    total = _d.numel_of(inner)
    if _is_int(total) and _is_int(n) and total != n:
        raise ShapeError(f"unflatten: sizes {list(sizes)} multiply to {total}, but axis {dim} has size {n} "
                         f"(tensor shape {list(x.shape)})")
    shape = tuple(x.shape)
    return _d.reshape(ops, x, shape[:axis] + inner + shape[axis + 1:])


# ---- diagonals ---------------------------------------------------------------------------------

def _known(n: Any, what: str) -> int:
    return n.value_for(what) if isinstance(n, SymDim) else int(n)


def diagonal(ops: Interpreter, x: AnyTensor, offset: int, dim1: int, dim2: int) -> AnyTensor:
    """``torch.diagonal``: the entries ``x[..., i, ..., i + offset, ...]`` of axes ``dim1`` and ``dim2``
    (``offset > 0`` above the main diagonal), as the last axis of the result; the other axes keep their
    order. Its length is ``max(0, min(n1 + min(offset, 0), n2 - max(offset, 0)))``."""
    where = "diagonal"
    if x.ndim < 2:
        raise ShapeError(f"diagonal: expected a tensor with at least 2 axes, got shape {list(x.shape)}")
    if not _is_int(offset):
        raise ArgumentTypeError(f"diagonal: offset must be an int, got {type(offset).__name__} {offset!r}")
    a, b = _distinct_axes((dim1, dim2), x.ndim, where)
    moved = _d.permute(ops, x, [i for i in range(x.ndim) if i not in (a, b)] + [a, b])
    n1, n2 = moved.shape[-2], moved.shape[-1]
    row0, col0 = builtins.max(0, -int(offset)), builtins.max(0, int(offset))
    if offset == 0 and _d.same_sizes((n1,), (n2,)):
        length: Any = n1
    else:
        what = f"diagonal of a [{n1}, {n2}] block with offset {offset} (a symbolic size gives its value)"
        length = builtins.max(0, builtins.min(_known(n1, what) - row0, _known(n2, what) - col0))
    rows = moved if row0 == 0 and _d.same_sizes((length,), (n1,)) else \
        _slice_axis(ops, moved, moved.ndim - 2, row0, row0 + length)
    cols = ops.add(ops.iota(length=length, dtype="int64"), col0) if col0 else ops.iota(length=length, dtype="int64")
    lead = tuple(rows.shape[:-2])
    index = ops.broadcast_to(ops.reshape(cols, shape=(1,) * len(lead) + (length, 1)), shape=lead + (length, 1))
    picked = _sorting.take_along_axis(ops, rows, index, rows.ndim - 1)
    return ops.reshape(picked, shape=lead + (length,))


def diag(ops: Interpreter, x: AnyTensor, offset: int) -> AnyTensor:
    """``torch.diag``: of a vector ``[n]``, the ``[n + |offset|, n + |offset|]`` matrix holding it on
    diagonal ``offset`` (zeros elsewhere); of a matrix, its diagonal ``offset`` (:func:`diagonal`)."""
    if not _is_int(offset):
        raise ArgumentTypeError(f"diag: diagonal must be an int, got {type(offset).__name__} {offset!r}")
    if x.ndim == 2:
        return diagonal(ops, x, offset, 0, 1)
    if x.ndim != 1:
        raise ShapeError(f"diag: expected a 1-d or 2-d tensor, got shape {list(x.shape)}")
    n, k = x.shape[0], builtins.abs(int(offset))
    zero = False if x.dtype.name == "bool" else 0
    # [n] -> [n, 1] padded to [n, n + 1], flattened and cut to n * n: row i holds x[i] at column i.
    spread = ops.pad(ops.reshape(x, shape=(n, 1)), pads=((0, 0), (0, n)), value=zero)
    square = ops.reshape(_slice_axis(ops, ops.reshape(spread, shape=(n * (n + 1),)), 0, 0, n * n), shape=(n, n))
    if k == 0:
        return square
    pads = ((0, k), (k, 0)) if offset > 0 else ((k, 0), (0, k))
    return ops.pad(square, pads=pads, value=zero)


# ---- selections --------------------------------------------------------------------------------

def index_select(ops: Interpreter, x: AnyTensor, dim: int, index: AnyTensor) -> AnyTensor:
    """``torch.index_select``: the entries of ``x`` at ``index`` (a 1-d or 0-d int tensor, values in
    ``[0, n)``) along ``dim``; that axis takes ``index``'s length (1 for a 0-d index)."""
    where = "index_select"
    _integer_index(index, where)
    if index.ndim > 1:
        raise ShapeError(f"index_select: index must be a 1-d (or 0-d) tensor, got shape {list(index.shape)}")
    if x.ndim == 0:
        _d.check_scalar_dim(dim, where)
        picked = ops.gather(_d.reshape(ops, x, (1,)), _checked(ops, index, 1, where), axis=0)
        return _d.reshape(ops, picked, ())
    axis = _d.normalize_axis(dim, x.ndim, where)
    flat = index if index.ndim == 1 else ops.reshape(index, shape=(1,))
    return ops.gather(x, _checked(ops, flat, x.shape[axis], where), axis=axis)


def gather(ops: Interpreter, x: AnyTensor, dim: int, index: AnyTensor) -> AnyTensor:
    """``torch.gather``: ``out[i][j][k] = x[index[i][j][k]][j][k]`` for ``dim == 0`` (and so on): ``index``
    (int, values in ``[0, n)``) has ``x``'s rank and sizes at most ``x``'s off ``dim``; the result has
    ``index``'s shape."""
    where = "gather"
    _integer_index(index, where)
    if x.ndim != index.ndim:
        raise ShapeError(f"gather: index must have the rank of the input ({x.ndim}), got index shape "
                         f"{list(index.shape)} for input shape {list(x.shape)}")
    if x.ndim == 0:
        _d.check_scalar_dim(dim, where)
        picked = ops.gather(_d.reshape(ops, x, (1,)), _checked(ops, index, 1, where), axis=0)
        return _d.reshape(ops, picked, ())
    axis = _d.normalize_axis(dim, x.ndim, where)
    for i, (m, n) in enumerate(zip(index.shape, x.shape)):
        if i != axis and _is_int(m) and _is_int(n) and m > n:
            raise ShapeError(f"gather: index size {m} exceeds the input size {n} along axis {i} (it may only "
                             f"differ along dim {dim}); index shape {list(index.shape)}, input shape "
                             f"{list(x.shape)}")
    stops = tuple(x.shape[axis] if i == axis else m for i, m in enumerate(index.shape))
    if not _d.same_sizes(stops, tuple(x.shape)):
        x = ops.slice(x, starts=(0,) * x.ndim, stops=stops, steps=(1,) * x.ndim)
    return _sorting.take_along_axis(ops, x, _checked(ops, index, x.shape[axis], where), axis)

__all__ = ["diag", "diagonal", "flip", "gather", "index_select", "movedim", "repeat", "repeat_interleave", "roll",
           "tile", "unflatten"]
