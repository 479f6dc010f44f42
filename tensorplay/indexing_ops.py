"""Index-driven operations of PyTorch's API, written once against :class:`~tensorplay.ops.Ops`:
``scatter``, ``scatter_add``, ``take_along_dim``, ``searchsorted``, ``bucketize``, ``bincount``,
``median`` and ``quantile``.

Each composes existing primitives (``gather``, ``scatter_add``, ``argsort``, comparisons, sums and
``check_index``), so it runs eagerly, under the graph recorder, ``tp.compile`` and every transform, with
derivatives from those of the primitives. The exception is ``bincount``: its length depends on the
largest value, so it reads that value and refuses a symbolic recording (a
:class:`~tensorplay.errors.GraphCaptureError` naming it); ``tp.compile`` specialises on it.

Index tensors are int64 with values in ``[0, n)``, as PyTorch's ``scatter``/``gather`` (``check_index``
checks them whenever the graph runs). Every function takes the interpreter first; the tensor methods
and ``tp.<name>`` forms pass it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tensorplay import derived as _d  # a module import: derived imports tensor, which imports this module
from tensorplay import sorting as _sorting
from tensorplay.errors import (ArgumentError, ArgumentTypeError, DTypeError, GraphCaptureError, IndexRangeError,
                               ShapeError)
from tensorplay.symbolic import SymDim
from tensorplay.op_args import is_tensor as _is_tensor, static_size as _static

if TYPE_CHECKING:
    from tensorplay.ops import Interpreter

AnyTensor = Any
_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


# ---- small helpers -----------------------------------------------------------------------------


def _concrete_value(x: Any) -> Any:
    """The numpy value of ``x`` when it has one without recording anything (an eager tensor's array, or the
    value of an execute-mode recording); ``None`` otherwise (a symbolic trace). Read from the tensor itself:
    this module is part of the tensor's methods and imports no interpreter."""
    data = x._data
    if isinstance(data, np.ndarray):
        return data
    value = getattr(data, "value", None)
    return value if isinstance(value, np.ndarray) else None

def _int64_index(index: Any, where: str, what: str = "index") -> None:
    """``index`` must be an int64 tensor: an :class:`ArgumentTypeError` / :class:`DTypeError` otherwise."""
    if not _is_tensor(index):
        raise ArgumentTypeError(f"{where}: {what} must be an int64 tensor, got {type(index).__name__}")
    if index.dtype.name != "int64":
        raise DTypeError(f"{where}: {what} must be an int64 tensor, got {index.dtype.name} "
                         f"({what}: {index.dtype.name}{list(index.shape)})")


def _numel(shape: Sequence[Any]) -> int:
    return int(np.prod([int(d) for d in shape], dtype=np.int64)) if all(isinstance(d, int) for d in shape) else -1


def _broadcast(a: Sequence[Any], b: Sequence[Any], where: str, what: str) -> tuple[Any, ...]:
    """numpy broadcasting of two shapes (sizes equal or one of them 1), else a :class:`ShapeError`."""
    rank = max(len(a), len(b))
    pa, pb = (1,) * (rank - len(a)) + tuple(a), (1,) * (rank - len(b)) + tuple(b)
    out: list[Any] = []
    for x, y in zip(pa, pb):
        if isinstance(x, int) and x == 1:
            out.append(y)
        elif (isinstance(y, int) and y == 1) or x == y:
            out.append(x)
        else:
            raise ShapeError(f"{where}: {what} shapes {list(a)} and {list(b)} do not broadcast")
    return tuple(out)


def _flat_positions(ops: Interpreter, shape: Sequence[Any], index: AnyTensor, axis: int) -> AnyTensor:
    """The row-major positions in a tensor of ``shape`` of the entries ``index`` addresses along ``axis``
    (the other coordinates are those of the index entry itself): int64, ``index``'s shape."""
    rank = len(shape)
    strides: list[Any] = [1] * rank
    for d in range(rank - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]

    def scaled(t: AnyTensor, stride: Any) -> AnyTensor:
        return t if isinstance(stride, int) and stride == 1 else ops.mul(t, stride)

    pos = scaled(index, strides[axis])
    for d in range(rank):
        if d != axis:
            coord = ops.reshape(ops.iota(length=index.shape[d], dtype="int64"),
                                shape=tuple(index.shape[d] if i == d else 1 for i in range(rank)))
            pos = ops.add(pos, scaled(coord, strides[d]))
    return pos


def _scatter_args(ops: Interpreter, x: AnyTensor, dim: int, index: AnyTensor, src: Any,
                  where: str) -> tuple[AnyTensor, AnyTensor, int]:
    """Checked ``(positions, updates, n)``: the flat positions in ``x`` (1-d int64, range-checked), the
    matching flat updates of ``x``'s dtype and ``x``'s element count."""
    if not _is_tensor(x):
        raise ArgumentTypeError(f"{where}: input must be a tensor, got {type(x).__name__}")
    _int64_index(index, where)
    if x.ndim != index.ndim:
        raise ShapeError(f"{where}: index must have the rank of the input ({x.ndim}), got index shape "
                         f"{list(index.shape)} for input shape {list(x.shape)}")
    if x.ndim == 0:
        _d.check_scalar_dim(dim, where)
        axis = 0
    else:
        axis = _d.normalize_axis(dim, x.ndim, where)
    if _is_tensor(src):
        if src.ndim != index.ndim:
            raise ShapeError(f"{where}: src must have the rank of index ({index.ndim}), got src shape "
                             f"{list(src.shape)} for index shape {list(index.shape)}")
        if src.dtype != x.dtype:
            raise DTypeError(f"{where}: src must have the input's dtype {x.dtype.name}, got {src.dtype.name}")
    elif isinstance(src, (bool, int, float, np.number)):
        src = ops.full(shape=tuple(index.shape), value=float(src), dtype=x.dtype.name)
    else:
        raise ArgumentTypeError(f"{where}: src must be a tensor or a number, got {type(src).__name__}")
    for i, m in enumerate(index.shape):
        s, n = src.shape[i], x.shape[i]
        if isinstance(m, int) and isinstance(s, int) and m > s:
            raise ShapeError(f"{where}: index size {m} exceeds the src size {s} along dim {i}; index shape "
                             f"{list(index.shape)}, src shape {list(src.shape)}")
        if i != axis and isinstance(m, int) and isinstance(n, int) and m > n:
            raise ShapeError(f"{where}: index size {m} exceeds the input size {n} along dim {i} (it may only "
                             f"exceed it along dim {dim}); index shape {list(index.shape)}, input shape "
                             f"{list(x.shape)}")
    if not _d.same_sizes(tuple(src.shape), tuple(index.shape)):
        src = ops.slice(src, starts=(0,) * src.ndim, stops=tuple(index.shape), steps=(1,) * src.ndim)
    bound = x.shape[axis] if x.ndim else 1
    checked = ops.check_index(index, bound=bound, what=f"{where}: index")
    count = _d.numel_of(tuple(index.shape))
    if x.ndim == 0:
        return _d.reshape(ops, checked, (1,)), _d.reshape(ops, src, (1,)), 1
    positions = _d.reshape(ops, _flat_positions(ops, tuple(x.shape), checked, axis), (count,))
    return positions, _d.reshape(ops, src, (count,)), _d.numel_of(tuple(x.shape))


# ---- scatter -----------------------------------------------------------------------------------

def scatter_add(ops: Interpreter, x: AnyTensor, dim: int, index: AnyTensor, src: Any) -> AnyTensor:
    """``torch.scatter_add`` (out of place): a copy of ``x`` with ``out[index[i][j]][j] += src[i][j]`` for
    ``dim=0`` (and so on); repeated indices accumulate. ``index`` (int64, values in ``[0, x.size(dim))``)
    has ``x``'s rank, sizes at most ``src``'s everywhere and at most ``x``'s off ``dim``; ``src`` has
    ``x``'s dtype (only its leading ``index.shape`` block is read). Differentiable in ``x`` and ``src``."""
    positions, updates, size = _scatter_args(ops, x, dim, index, src, "scatter_add")
    flat = _d.reshape(ops, x, (size,))
    return _d.reshape(ops, ops.scatter_add(flat, positions, updates, axis=0), tuple(x.shape))


def scatter(ops: Interpreter, x: AnyTensor, dim: int, index: AnyTensor, src: Any) -> AnyTensor:
    """``torch.scatter`` (out of place): a copy of ``x`` with ``out[index[i][j]][j] = src[i][j]`` for
    ``dim=0`` (and so on); ``src`` may be a number (PyTorch's ``value``). Shapes as :func:`scatter_add`.
    Where indices repeat, the last writer in row-major order of ``index`` wins (PyTorch leaves this
    unspecified). The gradient reaches ``x`` where nothing is written and each written ``src`` entry."""
    positions, updates, size = _scatter_args(ops, x, dim, index, src, "scatter")
    count = _numel(tuple(index.shape))
    if count == 0:
        return x
    order = ops.argsort(positions, axis=0)  # stable: a target's writers stay in their order
    ranked = ops.gather(positions, order, axis=0)
    n: Any = positions.shape[0]
    following = ops.slice(ranked, starts=(1,), stops=(n,), steps=(1,))
    last = ops.concat(ops.ne(ops.slice(ranked, starts=(0,), stops=(n - 1,), steps=(1,)), following),
                      ops.full(shape=(1,), value=True, dtype="bool"), axis=0)  # the final writer of its target
    writer = ops.where(last, ops.add(order, 1), 0)  # 1 + the winning writer's position, else 0
    winners = ops.scatter_add(ops.full(shape=(size,), value=0, dtype="int64"), ranked, writer, axis=0)
    taken = ops.gather(updates, ops.maximum(ops.sub(winners, 1), 0), axis=0)
    out = ops.where(ops.gt(winners, 0), taken, _d.reshape(ops, x, (size,)))
    return _d.reshape(ops, out, tuple(x.shape))


def take_along_dim(ops: Interpreter, x: AnyTensor, indices: AnyTensor, dim: int | None = None) -> AnyTensor:
    """``torch.take_along_dim``: ``dim=None`` reads the flattened ``x`` at the flattened ``indices``;
    otherwise ``out[..., j, ...] = x[..., indices[..., j, ...], ...]`` along ``dim``, where ``x`` and
    ``indices`` (int64, same rank, values in ``[0, x.size(dim))``) broadcast off ``dim``: the result has the
    broadcast shape with ``indices``' size along ``dim``."""
    where = "take_along_dim"
    if not _is_tensor(x):
        raise ArgumentTypeError(f"{where}: input must be a tensor, got {type(x).__name__}")
    _int64_index(indices, where, "indices")
    if dim is None:
        flat_x = _d.reshape(ops, x, (_d.numel_of(tuple(x.shape)),))
        flat_i = _d.reshape(ops, indices, (_d.numel_of(tuple(indices.shape)),))
        checked = ops.check_index(flat_i, bound=flat_x.shape[0], what=f"{where}: indices")
        return ops.gather(flat_x, checked, axis=0)
    if x.ndim != indices.ndim:
        raise ShapeError(f"{where}: indices must have the rank of the input ({x.ndim}), got indices shape "
                         f"{list(indices.shape)} for input shape {list(x.shape)}")
    if x.ndim == 0:
        _d.check_scalar_dim(dim, where)
        checked = ops.check_index(_d.reshape(ops, indices, (1,)), bound=1, what=f"{where}: indices")
        return _d.reshape(ops, ops.gather(_d.reshape(ops, x, (1,)), checked, axis=0), ())
    axis = _d.normalize_axis(dim, x.ndim, where)
    off = [i for i in range(x.ndim) if i != axis]
    common = _broadcast([x.shape[i] for i in off], [indices.shape[i] for i in off], where, "input and indices")
    x_shape = list(common)
    x_shape.insert(axis, x.shape[axis])
    i_shape = list(common)
    i_shape.insert(axis, indices.shape[axis])
    if not _d.same_sizes(tuple(x_shape), tuple(x.shape)):
        x = ops.broadcast_to(x, shape=tuple(x_shape))
    if not _d.same_sizes(tuple(i_shape), tuple(indices.shape)):
        indices = ops.broadcast_to(indices, shape=tuple(i_shape))
    checked = ops.check_index(indices, bound=x.shape[axis], what=f"{where}: indices")
    return _sorting.take_along_axis(ops, x, checked, axis)


# ---- searches and counts ---------------------------------------------------------------------------

def _comparable(value: Any, where: str, what: str) -> None:
    if _is_tensor(value) and value.dtype.name == "bool":
        raise DTypeError(f"{where}: {what} must be an int or float tensor, got bool")


def searchsorted(ops: Interpreter, sorted_sequence: AnyTensor, values: Any, right: bool = False,
                 out_int32: bool = False) -> AnyTensor:
    """``torch.searchsorted``: for each value, the number of entries of ``sorted_sequence`` (ascending along
    its last dim) below it (``right=False``: ``s < v``) or at most it (``right=True``: ``s <= v``), so
    inserting there keeps the order. A 1-d sequence serves every value (any shape, or a number: 0-d
    result); an N-d one has ``values``' leading dims (``[*B, K]`` with ``[*B, M]``). NaN sorts last, as
    PyTorch: a NaN value counts past every entry, a NaN entry lies past every other value. int64 (int32 with ``out_int32``); no derivative."""
    where = "searchsorted"
    if not _is_tensor(sorted_sequence):
        raise ArgumentTypeError(f"{where}: sorted_sequence must be a tensor, got {type(sorted_sequence).__name__}")
    if sorted_sequence.ndim == 0:
        raise ShapeError(f"{where}: sorted_sequence must have at least one dim, got a 0-d tensor")
    _comparable(sorted_sequence, where, "sorted_sequence")
    _comparable(values, where, "values")
    if not _is_tensor(values):
        if not isinstance(values, (int, float, np.number)) or isinstance(values, bool):
            raise ArgumentTypeError(f"{where}: values must be a tensor or a number, got {type(values).__name__}")
        if sorted_sequence.ndim != 1:
            raise ShapeError(f"{where}: a number of values needs a 1-d sorted_sequence, got shape "
                             f"{list(sorted_sequence.shape)}")
        values = ops.constant(np.asarray(values, dtype=sorted_sequence.dtype.numpy))
    s = ops.stop_gradient(sorted_sequence)
    v = ops.stop_gradient(values)
    k = sorted_sequence.shape[-1]
    if sorted_sequence.ndim == 1:
        s = ops.reshape(s, shape=(1,) * v.ndim + (k,))
    elif tuple(sorted_sequence.shape[:-1]) != tuple(values.shape[:-1]) or values.ndim != sorted_sequence.ndim:
        raise ShapeError(f"{where}: sorted_sequence [*B, K] and values [*B, M] must share their leading dims, got "
                         f"shapes {list(sorted_sequence.shape)} and {list(values.shape)}")
    else:
        s = ops.reshape(s, shape=tuple(sorted_sequence.shape[:-1]) + (1, k))
    vv = ops.reshape(v, shape=tuple(values.shape) + (1,))
    beyond = ops.gt(s, vv) if right else ops.ge(s, vv)  # false for a NaN value: it goes past every entry
    if sorted_sequence.dtype.name in ("float32", "float64"):  # a NaN entry sorts last: past every other value
        beyond = ops.logical_or(beyond, ops.logical_and(ops.ne(s, s), ops.eq(vv, vv)))
    count = ops.sub(k, ops.reduce_sum(beyond, axes=(v.ndim,), keepdims=False))
    return ops.cast(count, dtype="int32" if out_int32 else "int64")


def bucketize(ops: Interpreter, x: Any, boundaries: AnyTensor, right: bool = False,
              out_int32: bool = False) -> AnyTensor:
    """``torch.bucketize``: the bucket of each entry of ``x`` among the ascending 1-d ``boundaries``:
    ``i`` with ``b[i-1] < x <= b[i]`` (``right=True``: ``b[i-1] <= x < b[i]``), in ``[0, len(b)]``; ``x``'s
    shape, int64 (int32 with ``out_int32``); no derivative. It is :func:`searchsorted` of ``x``."""
    if not _is_tensor(boundaries) or boundaries.ndim != 1:
        got = f"shape {list(boundaries.shape)}" if _is_tensor(boundaries) else type(boundaries).__name__
        raise ShapeError(f"bucketize: boundaries must be a 1-d tensor, got {got}")
    return searchsorted(ops, boundaries, x, right, out_int32)


def bincount(ops: Interpreter, x: AnyTensor, weights: AnyTensor | None = None, minlength: int = 0) -> AnyTensor:
    """``torch.bincount``: ``out[j]`` = the number of entries of the 1-d non-negative int tensor ``x`` equal
    to ``j`` (with ``weights``, of ``x``'s shape, their sum), for ``j < max(minlength, max(x) + 1)``.
    int64 counts; float weights keep their dtype, int or bool weights give float64 (as PyTorch);
    differentiable in ``weights``. The length depends on ``max(x)``, so a symbolic recording
    (``tp.graph.trace``, ``vmap``, ...) refuses it with a :class:`GraphCaptureError`; ``tp.compile``
    specialises on ``max(x)`` (a guard re-checked at every call). A negative entry is an
    :class:`~tensorplay.errors.IndexRangeError`."""
    where = "bincount"
    if not _is_tensor(x):
        raise ArgumentTypeError(f"{where}: input must be a tensor, got {type(x).__name__}")
    if x.ndim != 1:
        raise ShapeError(f"{where}: input must be a 1-d tensor, got shape {list(x.shape)}")
    if x.dtype.name not in ("int32", "int64", "uint8", "int8", "int16"):
        raise DTypeError(f"{where}: input must be an integer tensor, got {x.dtype.name}")
    if isinstance(minlength, bool) or not isinstance(minlength, (int, np.integer)) or minlength < 0:
        raise ArgumentError(f"{where}: minlength must be a non-negative int, got {minlength!r}")
    if weights is not None:
        if not _is_tensor(weights):
            raise ArgumentTypeError(f"{where}: weights must be a tensor or None, got {type(weights).__name__}")
        if tuple(weights.shape) != tuple(x.shape):
            raise ShapeError(f"{where}: weights must have the input's shape {list(x.shape)}, got "
                             f"{list(weights.shape)}")
    known = _concrete_value(x)
    if known is not None and known.size and known.min() < 0:  # eagerly, a plainer message than the check's
        raise IndexRangeError(f"{where}: input must be non-negative, got {int(known.min())} at position "
                              f"{int(np.argmin(known))}")
    index = ops.check_index(x if x.dtype.name == "int64" else ops.cast(x, dtype="int64"),
                            bound=np.iinfo(np.int64).max, what=f"{where}: input")
    length = int(minlength)
    if _static(x.shape[0], where) > 0:
        try:  # only the largest value is read (a recording in execute mode guards on it, not on the data)
            largest = int(np.asarray(ops.concrete(ops.reduce_max(index, axes=(0,), keepdims=False))))
        except GraphCaptureError as exc:
            raise GraphCaptureError(f"{where}: the output length depends on the input's values (max(input) + 1), "
                                    f"so it cannot be recorded symbolically; call it eagerly, or give the counts a "
                                    f"static length with scatter_add into a zeros tensor. ({exc})") from None
        length = max(length, largest + 1)
        # a no-op while the guard on the largest value holds; keeps a guard-missing run in range until checked
        index = ops.minimum(index, length - 1)
    if weights is None:
        updates = ops.full(shape=tuple(x.shape), value=1, dtype="int64")
    elif weights.dtype.name in ("float32", "float64"):
        updates = weights
    else:
        updates = ops.cast(weights, dtype="float64")
    zeros = ops.full(shape=(length,), value=0, dtype=updates.dtype.name)
    return ops.scatter_add(zeros, index, updates, axis=0)


# ---- order statistics ------------------------------------------------------------------------------

def median(ops: Interpreter, x: AnyTensor, dim: int | None = None,
           keepdim: bool = False) -> AnyTensor | tuple[AnyTensor, AnyTensor]:
    """``torch.median``: the lower median (the ``(n - 1) // 2``-th smallest) along ``dim`` as ``(values,
    indices)`` (``dim`` dropped unless ``keepdim``; indices int64, of the stable ascending sort's entry),
    or with ``dim=None`` of all entries, a 0-d value only. A NaN in a row makes the row's median NaN (its
    index that of the row's first NaN), as PyTorch. The gradient goes to the chosen entry."""
    _d.refuse_bool(x, "median")
    if dim is None:
        return _median_along(ops, _d.reshape(ops, x, (_d.numel_of(tuple(x.shape)),)), 0, False)[0]
    return _median_along(ops, x, dim, keepdim)


def _median_along(ops: Interpreter, x: AnyTensor, dim: int, keepdim: bool) -> tuple[AnyTensor, AnyTensor]:
    where = "median"
    v, axis, scalar = _sorting._as_vector(ops, x, dim, where)
    n = _static(v.shape[axis], where)
    if n == 0:
        raise ShapeError(f"{where}: cannot take the median of an empty dim (dim {dim} of shape {list(x.shape)})")
    order = ops.argsort(v, axis=axis)
    keep = tuple(1 if i == axis else d for i, d in enumerate(v.shape))
    k: Any = ops.full(shape=keep, value=(n - 1) // 2, dtype="int64")
    if x.dtype.name in ("float32", "float64"):
        nans = ops.reduce_sum(ops.ne(v, v), axes=(axis,), keepdims=True)
        k = ops.where(ops.gt(nans, 0), ops.sub(n, nans), k)  # sorted NaN sit last: the first of them
    indices = _sorting.take_along_axis(ops, order, k, axis)
    values = _sorting.take_along_axis(ops, v, indices, axis)
    if scalar or not keepdim:
        out = () if scalar else tuple(d for i, d in enumerate(v.shape) if i != axis)
        return _d.reshape(ops, values, out), _d.reshape(ops, indices, out)
    return values, indices


def _quantiles(ops: Interpreter, q: Any, dtype: str, where: str) -> tuple[AnyTensor, bool]:
    """``q`` as a 1-d tensor of ``dtype`` and whether it was a number or a 0-d tensor (errors name ``where``)."""
    if _is_tensor(q):
        if q.ndim > 1:
            raise ShapeError(f"{where}: q must be a number, a 0-d or a 1-d tensor, got shape {list(q.shape)}")
        if q.dtype.name not in ("float32", "float64"):
            raise DTypeError(f"{where}: q must be a float tensor, got {q.dtype.name}")
        known = _concrete_value(q)
        if known is not None and np.any(~((np.asarray(known) >= 0) & (np.asarray(known) <= 1))):
            raise ArgumentError(f"{where}: q values must be in [0, 1], got {np.asarray(known).tolist()}")
        flat = _d.reshape(ops, ops.stop_gradient(q), (_d.numel_of(tuple(q.shape)),))
        return (ops.cast(flat, dtype=dtype) if q.dtype.name != dtype else flat), q.ndim == 0
    if isinstance(q, bool) or not isinstance(q, (int, float, np.number)):
        raise ArgumentTypeError(f"{where}: q must be a number or a float tensor, got {type(q).__name__}")
    if not 0 <= float(q) <= 1:
        raise ArgumentError(f"{where}: q must be in [0, 1], got {q!r}")
    return ops.constant(np.asarray([q], dtype=dtype)), True


def quantile(ops: Interpreter, x: AnyTensor, q: Any, dim: int | None = None, keepdim: bool = False,
             interpolation: str = "linear", ignore_nan: bool = False) -> AnyTensor:
    """``torch.quantile``: the ``q``-quantiles along ``dim`` (``None``: of all entries) of a float tensor,
    at rank ``q * (n - 1)`` of the ascending sort, between the neighbouring entries by ``interpolation``
    (``linear``, ``lower``, ``higher``, ``midpoint`` or ``nearest``, which rounds half to even). ``q`` is a
    number or 0-d tensor (``dim`` dropped unless ``keepdim``) or a 1-d tensor ``[Q]`` (a leading axis of
    ``Q``); values in ``[0, 1]``. A row holding NaN gives NaN; with ``ignore_nan`` (``torch.nanquantile``) the
    quantiles are those of the row's other entries, NaN only where all are NaN. Differentiable in ``x``."""
    where = "nanquantile" if ignore_nan else "quantile"
    if not _is_tensor(x):
        raise ArgumentTypeError(f"{where}: input must be a tensor, got {type(x).__name__}")
    if x.dtype.name not in ("float32", "float64"):
        raise DTypeError(f"{where}: input must be a float32 or float64 tensor, got {x.dtype.name}")
    if interpolation not in _INTERPOLATIONS:
        raise ArgumentError(f"{where}: interpolation must be one of {list(_INTERPOLATIONS)}, got {interpolation!r}")
    dtype = x.dtype.name
    qs, single = _quantiles(ops, q, dtype, where)
    given = tuple(x.shape)
    if dim is None:
        v, axis = _d.reshape(ops, x, (_d.numel_of(given),)), 0
    else:
        v, axis, _ = _sorting._as_vector(ops, x, dim, where)
    n = _static(v.shape[axis], where)
    if n == 0:
        raise ShapeError(f"{where}: cannot take quantiles of an empty dim (input shape {list(given)})")
    perm = [i for i in range(v.ndim) if i != axis] + [axis]
    moved = _d.permute(ops, v, perm)
    lead = tuple(moved.shape[:-1])
    last = len(lead)
    ordered = _sorting.take_along_axis(ops, moved, ops.argsort(moved, axis=last), last)
    ranks = ops.mul(qs, float(n - 1))  # [Q]
    nq = qs.shape[0]
    nans = ops.reduce_sum(ops.ne(moved, moved), axes=(last,), keepdims=True)  # [*lead, 1]
    if ignore_nan:  # the sorted NaN sit last: rank among the row's first n - nans entries (0 when all are NaN)
        valid = ops.cast(ops.maximum(ops.sub(n - 1, nans), 0), dtype=dtype)
        ranks = ops.mul(ops.reshape(qs, shape=(1,) * last + (nq,)), valid)
    else:
        ranks = ops.where(ops.gt(nans, 0), float(n - 1), ops.reshape(ranks, shape=(1,) * last + (nq,)))
    ranks = ops.broadcast_to(ranks, shape=lead + (nq,))

    def at(position: AnyTensor) -> AnyTensor:
        return _sorting.take_along_axis(ops, ordered, ops.cast(position, dtype="int64"), last)

    if interpolation == "nearest":
        out = at(ops.round(ranks))
    else:
        below, above = ops.floor(ranks), ops.ceil(ranks)
        low, high = at(below), at(above)
        if interpolation == "lower":
            out = low
        elif interpolation == "higher":
            out = high
        else:
            step = ops.sub(high, low)
            if interpolation == "midpoint":
                out = ops.add(low, ops.mul(step, 0.5))
            else:  # PyTorch's lerp: from the nearer end
                weight = ops.sub(ranks, below)
                near = ops.add(low, ops.mul(step, weight))
                far = ops.sub(high, ops.mul(step, ops.sub(1.0, weight)))
                out = ops.where(ops.lt(weight, 0.5), near, far)
    # [*lead, Q] -> [Q, *lead], with the reduced dim kept as size 1 when asked
    out = _d.permute(ops, out, [last] + list(range(last)))
    if keepdim:
        kept = tuple(1 for _ in given) if dim is None else \
            tuple(1 if i == axis else d for i, d in enumerate(v.shape)) if x.ndim else ()
        out = _d.reshape(ops, out, (nq,) + kept)
    return _d.reshape(ops, out, tuple(out.shape[1:])) if single else out


__all__ = ["bincount", "bucketize", "median", "quantile", "scatter", "scatter_add", "searchsorted",
           "take_along_dim"]
