"""Shape and index-structure functions of PyTorch's API, written once against :class:`~tensorplay.ops.Ops`:
``select``, ``unbind``, ``t``, ``ravel``, the ``*_as`` forms, the stacks (``hstack``, ``vstack``, ``dstack``,
``column_stack``), ``atleast_{1,2,3}d``, the splits (``tensor_split``, ``hsplit``, ``vsplit``, ``dsplit``,
``split_with_sizes``), ``rot90``, ``fliplr``/``flipud``, ``take``, ``broadcast_tensors``/``broadcast_shapes``,
the index updates (``index_add``, ``index_copy``, ``index_fill``, ``scatter_reduce``), the scatters of a view
(``select_scatter``, ``slice_scatter``, ``diagonal_scatter``), ``diag_embed``, ``diagflat``, the sliding
windows of ``Tensor.unfold`` and ``sum_to_size``.

Each composes existing primitives (``slice``, ``concat``, ``reshape``, ``permute``, ``broadcast_to``,
``gather``, ``scatter_add``, ``argsort``, ``where`` and ``check_index``), so it runs eagerly, under the graph
recorder, ``tp.compile``, export and every transform, with derivatives from those of the primitives. Every
function takes the interpreter first; the tensor methods and ``tp.<name>`` forms pass it.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tensorplay import derived as _d  # a module import: derived imports tensor, which imports this module
from tensorplay import shape_ops as _shape
from tensorplay import indexing_ops as _idx
from tensorplay.errors import ArgumentError, ArgumentTypeError, AxisError, DTypeError, IndexRangeError, ShapeError
from tensorplay.op_args import check_tensor as _check_tensor, is_tensor as _is_tensor, static_size as _static
from tensorplay.symbolic import SymDim

if TYPE_CHECKING:
    from tensorplay.ops import Interpreter

AnyTensor = Any
_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


# ---- small helpers -----------------------------------------------------------------------------

def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _int(value: Any, where: str, what: str) -> int:
    if not _is_int(value):
        raise ArgumentTypeError(f"{where}: {what} must be an int, got {type(value).__name__} {value!r}")
    return int(value)


def _slice_axis(ops: Interpreter, x: AnyTensor, axis: int, start: Any, stop: Any, step: int = 1) -> AnyTensor:
    starts = tuple(start if i == axis else 0 for i in range(x.ndim))
    stops = tuple(stop if i == axis else d for i, d in enumerate(x.shape))
    return ops.slice(x, starts=starts, stops=stops, steps=tuple(step if i == axis else 1 for i in range(x.ndim)))


def _drop_axis(shape: Sequence[Any], axis: int) -> tuple[Any, ...]:
    return tuple(d for i, d in enumerate(shape) if i != axis)


def _index_vector(index: Any, where: str) -> None:
    """``index`` must be a 0-d or 1-d int64 or int32 tensor."""
    if not _is_tensor(index):
        raise ArgumentTypeError(f"{where}: index must be an int64 tensor, got {type(index).__name__}")
    if index.dtype.name not in ("int64", "int32"):
        raise DTypeError(f"{where}: index must be an int64 (or int32) tensor, got {index.dtype.name}")
    if index.ndim > 1:
        raise ShapeError(f"{where}: index must be a 0-d or 1-d tensor, got shape {list(index.shape)}")


def _axis_of(x: AnyTensor, dim: int, where: str) -> tuple[AnyTensor, int, bool]:
    """``(x as at least 1-d, the normalised axis, whether x was 0-d)``: a 0-d tensor takes ``dim`` 0 or -1."""
    if x.ndim == 0:
        _d.check_scalar_dim(dim, where)
        return x, 0, True
    return x, _d.normalize_axis(dim, x.ndim, where), False


# ---- views and aliases -------------------------------------------------------------------------

def select(ops: Interpreter, x: AnyTensor, dim: int, index: int) -> AnyTensor:
    """``torch.select``: the slice ``x[..., index, ...]`` at ``index`` (negative counts from the end) of axis
    ``dim``, which the result drops (rank ``x.ndim - 1``)."""
    where = "select"
    if x.ndim == 0:
        raise ShapeError(f"{where}: cannot be applied to a 0-d tensor")
    axis = _d.normalize_axis(dim, x.ndim, where)
    i = _int(index, where, "index")
    n = x.shape[axis]
    if _is_int(n) and not -n <= i < n:
        raise IndexRangeError(f"{where}: index {i} is out of range for dim {dim} of size {n} "
                              f"(expected {-n} <= index < {n}; tensor shape {list(x.shape)})")
    return _d.getitem(ops, x, (builtins.slice(None),) * axis + (i,))


def unbind(ops: Interpreter, x: AnyTensor, dim: int = 0) -> tuple[AnyTensor, ...]:
    """``torch.unbind``: the ``n`` slices of ``x`` along ``dim`` (each without that axis), as a tuple."""
    where = "unbind"
    if x.ndim == 0:
        raise ShapeError(f"{where}: dim specified for a 0-d tensor (it has no axes)")
    axis = _d.normalize_axis(dim, x.ndim, where)
    n = _static(x.shape[axis], where)
    return tuple(_d.getitem(ops, x, (builtins.slice(None),) * axis + (i,)) for i in range(n))


def t(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """``torch.t``: a 2-d tensor transposed; a 0-d or 1-d one unchanged; higher ranks a :class:`ShapeError`."""
    if x.ndim > 2:
        raise ShapeError(f"t: expects a tensor with at most 2 dims, got shape {list(x.shape)} "
                         f"(use transpose(dim0, dim1) or mT)")
    return ops.permute(x, perm=(1, 0)) if x.ndim == 2 else x


def ravel(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """``torch.ravel``: the entries of ``x`` in row-major order, 1-d ``[numel]``."""
    return _d.reshape(ops, x, (_d.numel_of(tuple(x.shape)),))


def reshape_as(ops: Interpreter, x: AnyTensor, other: AnyTensor, where: str = "reshape_as") -> AnyTensor:
    """``Tensor.reshape_as`` (and ``view_as``): ``x`` reshaped to ``other``'s shape (same element count)."""
    _check_tensor(other, where, "other")
    n, m = _d.numel_of(tuple(x.shape)), _d.numel_of(tuple(other.shape))
    if _is_int(n) and _is_int(m) and n != m:
        raise ShapeError(f"{where}: shape {list(other.shape)} (of other) is invalid for input of shape "
                         f"{list(x.shape)} ({n} elements, other has {m})")
    return _d.reshape(ops, x, tuple(other.shape))


def type_as(ops: Interpreter, x: AnyTensor, other: AnyTensor) -> AnyTensor:
    """``Tensor.type_as``: ``x`` converted to ``other``'s dtype (a no-op when it has it)."""
    _check_tensor(other, "type_as", "other")
    return x if x.dtype == other.dtype else ops.cast(x, dtype=other.dtype.name)


# ---- at least k dims and the stacks ------------------------------------------------------------

def atleast(ops: Interpreter, x: AnyTensor, k: int) -> AnyTensor:
    """``torch.atleast_{k}d`` of one tensor: 0-d becomes ``[1]``/``[1, 1]``/``[1, 1, 1]``, 1-d ``[n]`` becomes
    ``[1, n]`` (k=2) or ``[1, n, 1]`` (k=3), 2-d ``[m, n]`` becomes ``[m, n, 1]`` (k=3); others unchanged."""
    _check_tensor(x, f"atleast_{k}d", "input")
    shape = tuple(x.shape)
    if len(shape) >= k:
        return x
    if k == 3 and len(shape) == 2:
        return _d.reshape(ops, x, shape + (1,))
    if k == 3 and len(shape) == 1:
        return _d.reshape(ops, x, (1,) + shape + (1,))
    return _d.reshape(ops, x, (1,) * (k - len(shape)) + shape)


def _join(ops: Interpreter, ts: Sequence[AnyTensor], axis: int, where: str) -> AnyTensor:
    """``concat`` along ``axis`` after checking ranks and the other sizes (errors naming ``where``)."""
    if not ts:
        raise ArgumentError(f"{where}: expects a non-empty sequence of tensors")
    first = ts[0]
    for i, x in enumerate(ts):
        if x.ndim != first.ndim:
            raise ShapeError(f"{where}: tensor {i} has {x.ndim} dims (shape {list(x.shape)}) after expansion, "
                             f"tensor 0 has {first.ndim} (shape {list(first.shape)})")
        for a in range(x.ndim):
            if a != axis and _is_int(x.shape[a]) and _is_int(first.shape[a]) and x.shape[a] != first.shape[a]:
                raise ShapeError(f"{where}: sizes must match except along dim {axis}; tensor 0 has shape "
                                 f"{list(first.shape)}, tensor {i} has {list(x.shape)}")
    return ts[0] if len(ts) == 1 else ops.concat(*ts, axis=axis)


def _tensors(ts: Sequence[Any], where: str) -> list[AnyTensor]:
    items = list(ts)
    for i, x in enumerate(items):
        _check_tensor(x, where, f"tensors[{i}]")
    return items


def hstack(ops: Interpreter, ts: Sequence[AnyTensor]) -> AnyTensor:
    """``torch.hstack``: joined along dim 1 (along dim 0 when every tensor is at most 1-d)."""
    items = [atleast(ops, x, 1) for x in _tensors(ts, "hstack")]
    return _join(ops, items, 0 if items and items[0].ndim == 1 else 1, "hstack")


def vstack(ops: Interpreter, ts: Sequence[AnyTensor], where: str = "vstack") -> AnyTensor:
    """``torch.vstack`` (``row_stack``): the tensors made at least 2-d, joined along dim 0."""
    return _join(ops, [atleast(ops, x, 2) for x in _tensors(ts, where)], 0, where)


def dstack(ops: Interpreter, ts: Sequence[AnyTensor]) -> AnyTensor:
    """``torch.dstack``: the tensors made at least 3-d, joined along dim 2."""
    return _join(ops, [atleast(ops, x, 3) for x in _tensors(ts, "dstack")], 2, "dstack")


def column_stack(ops: Interpreter, ts: Sequence[AnyTensor]) -> AnyTensor:
    """``torch.column_stack``: 0-d and 1-d tensors become columns ``[n, 1]``; all joined along dim 1."""
    items = [_d.reshape(ops, x, (_d.numel_of(tuple(x.shape)), 1)) if x.ndim <= 1 else x
             for x in _tensors(ts, "column_stack")]
    return _join(ops, items, 1, "column_stack")


# ---- splits ------------------------------------------------------------------------------------

def _pieces(ops: Interpreter, x: AnyTensor, axis: int, bounds: Sequence[tuple[int, int]]) -> tuple[AnyTensor, ...]:
    return tuple(_slice_axis(ops, x, axis, a, builtins.max(a, b)) for a, b in bounds)


def tensor_split(ops: Interpreter, x: AnyTensor, indices_or_sections: Any, dim: int = 0,
                 where: str = "tensor_split") -> tuple[AnyTensor, ...]:
    """``torch.tensor_split``: an int ``n`` gives ``n`` pieces along ``dim``, the first ``size % n`` one entry
    longer; a list (or 1-d int tensor) of indices ``[i0, i1, ...]`` gives ``x[:i0], x[i0:i1], ..., x[ik:]``
    along ``dim`` with Python's slice rules (negative counts from the end, out of range clamps)."""
    if x.ndim == 0:
        raise ShapeError(f"{where}: expected at least a 1-dimensional tensor, got a 0-d tensor")
    axis = _d.normalize_axis(dim, x.ndim, where)
    n = _static(x.shape[axis], where)
    spec = indices_or_sections
    if _is_tensor(spec):
        if spec.dtype.name not in ("int64", "int32") or spec.ndim > 1:
            raise ArgumentTypeError(f"{where}: a tensor indices_or_sections must be a 0-d or 1-d int64 tensor, "
                                    f"got {spec.dtype.name}{list(spec.shape)}")
        spec = spec.tolist()
    if _is_int(spec):
        sections = int(spec)
        if sections <= 0:
            raise ArgumentError(f"{where}: number of sections must be larger than 0, got {sections}")
        small, extra = divmod(n, sections)
        starts = [i * small + builtins.min(i, extra) for i in range(sections + 1)]
        return _pieces(ops, x, axis, list(zip(starts[:-1], starts[1:])))
    if not isinstance(spec, (list, tuple)) or not builtins.all(_is_int(i) for i in spec):
        raise ArgumentTypeError(f"{where}: indices_or_sections must be an int, a list of ints or an int tensor, "
                                f"got {indices_or_sections!r}")
    cuts = [builtins.slice(int(i)).indices(n)[1] for i in spec]  # Python's normalisation of a slice bound
    return _pieces(ops, x, axis, list(zip([0] + cuts, cuts + [n])))


def _directional_split(ops: Interpreter, x: AnyTensor, spec: Any, dim: int, min_rank: int,
                       where: str) -> tuple[AnyTensor, ...]:
    if x.ndim < min_rank:
        raise ShapeError(f"{where}: requires a tensor with at least {min_rank} dimension(s), got shape "
                         f"{list(x.shape)}")
    if _is_int(spec):
        n = _static(x.shape[dim], where)
        if int(spec) <= 0 or n % int(spec):
            raise ShapeError(f"{where}: attempted to split along dimension {dim}, but the size of the dimension "
                             f"{n} is not divisible by the split_size {spec}")
    return tensor_split(ops, x, spec, dim, where)


def hsplit(ops: Interpreter, x: AnyTensor, spec: Any) -> tuple[AnyTensor, ...]:
    """``torch.hsplit``: :func:`tensor_split` along dim 1 (dim 0 of a 1-d tensor); an int must divide the size."""
    return _directional_split(ops, x, spec, 0 if x.ndim == 1 else 1, 1, "hsplit")


def vsplit(ops: Interpreter, x: AnyTensor, spec: Any) -> tuple[AnyTensor, ...]:
    """``torch.vsplit``: :func:`tensor_split` along dim 0 of a tensor of at least 2 dims."""
    return _directional_split(ops, x, spec, 0, 2, "vsplit")


def dsplit(ops: Interpreter, x: AnyTensor, spec: Any) -> tuple[AnyTensor, ...]:
    """``torch.dsplit``: :func:`tensor_split` along dim 2 of a tensor of at least 3 dims."""
    return _directional_split(ops, x, spec, 2, 3, "dsplit")


def split_with_sizes(ops: Interpreter, x: AnyTensor, split_sizes: Sequence[int], dim: int = 0) -> tuple[AnyTensor, ...]:
    """``torch.split_with_sizes``: pieces of the listed sizes along ``dim`` (which must add up to its size)."""
    if not isinstance(split_sizes, (list, tuple)):
        raise ArgumentTypeError(f"split_with_sizes: split_sizes must be a list of ints, got {split_sizes!r}")
    return _d.split(ops, x, list(split_sizes), dim)


# ---- rotations and flips -----------------------------------------------------------------------

def rot90(ops: Interpreter, x: AnyTensor, k: int = 1, dims: Sequence[int] = (0, 1)) -> AnyTensor:
    """``torch.rot90``: ``x`` rotated ``k`` quarter turns in the plane ``dims`` (from the first towards the
    second axis); ``k`` may be negative. Shape: the two axes swap when ``k`` is odd."""
    where = "rot90"
    turns = _int(k, where, "k")
    if not isinstance(dims, (list, tuple)) or len(dims) != 2:
        raise ArgumentError(f"{where}: dims must be a pair of ints, got {dims!r}")
    if x.ndim < 2:
        raise ShapeError(f"{where}: expected a tensor of at least 2 dims, got shape {list(x.shape)}")
    a, b = (_d.normalize_axis(d, x.ndim, where) for d in dims)
    if a == b:
        raise AxisError(f"{where}: dims must name two different axes, got {list(dims)}")
    turns %= 4
    if turns == 0:
        return x
    if turns == 2:
        return _shape.flip(ops, x, (a, b))
    return _d.transpose(ops, _shape.flip(ops, x, (b if turns == 1 else a,)), a, b)


def fliplr(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """``torch.fliplr``: ``x`` reversed along dim 1 (at least 2 dims)."""
    if x.ndim < 2:
        raise ShapeError(f"fliplr: input must be at least 2-d, got shape {list(x.shape)}")
    return _shape.flip(ops, x, (1,))


def flipud(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """``torch.flipud``: ``x`` reversed along dim 0 (at least 1 dim)."""
    if x.ndim < 1:
        raise ShapeError("flipud: input must be at least 1-d, got a 0-d tensor")
    return _shape.flip(ops, x, (0,))


# ---- take and broadcasting ---------------------------------------------------------------------

def take(ops: Interpreter, x: AnyTensor, index: AnyTensor) -> AnyTensor:
    """``torch.take``: the entries of the flattened ``x`` at ``index`` (int64, any shape; values in
    ``[-numel, numel)``, negative counts from the end); the result has ``index``'s shape."""
    where = "take"
    _idx._int64_index(index, where)
    flat = ravel(ops, x)
    n = flat.shape[0]
    known = _idx._concrete_value(index)
    if known is not None and _is_int(n):
        bad = np.flatnonzero((known < -n) | (known >= n))
        if bad.size:
            raise IndexRangeError(f"{where}: index {int(known.reshape(-1)[bad[0]])} (at flat position {int(bad[0])}) "
                                  f"is out of range for a tensor of {n} elements (expected {-n} <= index < {n})")
    wrapped = ops.where(ops.lt(index, 0), ops.add(index, n), index)
    checked = ops.check_index(wrapped, bound=n, what=f"{where}: index (negative ones wrapped)")
    return ops.gather(flat, checked, axis=0)


def broadcast_shapes(*shapes: Any) -> tuple[Any, ...]:
    """``torch.broadcast_shapes``: the numpy broadcast of the given shapes (each an int or a sequence of
    ints); a :class:`ShapeError` naming the shapes when two sizes differ and neither is 1."""
    out: list[Any] = []
    given = []
    for s in shapes:
        shape = (s,) if _is_int(s) or isinstance(s, SymDim) else tuple(s)
        for d in shape:
            if not (_is_int(d) or isinstance(d, SymDim)) or (_is_int(d) and d < 0):
                raise ShapeError(f"broadcast_shapes: sizes must be non-negative ints, got shape {list(shape)}")
        given.append(shape)
    for shape in given:
        pad = len(shape) - len(out)
        if pad > 0:
            out = [1] * pad + out
        for i, d in enumerate(shape):
            j = len(out) - len(shape) + i
            cur = out[j]
            if _is_int(cur) and cur == 1:
                out[j] = d
            elif not ((_is_int(d) and d == 1) or d == cur):
                raise ShapeError(f"broadcast_shapes: shapes {[list(g) for g in given]} do not broadcast: size {d} "
                                 f"against {cur} at dim {j - len(out)}")
    return tuple(int(d) if _is_int(d) else d for d in out)


def broadcast_tensors(ops: Interpreter, ts: Sequence[AnyTensor]) -> tuple[AnyTensor, ...]:
    """``torch.broadcast_tensors``: every tensor broadcast to the common shape (:func:`broadcast_shapes`)."""
    items = _tensors(ts, "broadcast_tensors")
    try:
        shape = broadcast_shapes(*(tuple(x.shape) for x in items))
    except ShapeError as exc:
        raise ShapeError(str(exc).replace("broadcast_shapes:", "broadcast_tensors:", 1)) from None
    return tuple(x if _d.same_sizes(tuple(x.shape), shape) else ops.broadcast_to(x, shape=shape) for x in items)


# ---- index updates along one axis --------------------------------------------------------------

def _index_update_args(ops: Interpreter, x: AnyTensor, dim: int, index: AnyTensor, source: Any,
                       where: str) -> tuple[AnyTensor, int, AnyTensor, AnyTensor]:
    """Checked ``(x as at least 1-d, axis, index as 1-d int64 in range, source as 1-d-or-more)``; ``source``
    may be ``None`` (index_fill)."""
    _check_tensor(x, where, "input")
    _index_vector(index, where)
    x1, axis, scalar = _axis_of(x, dim, where)
    if scalar:
        x1 = _d.reshape(ops, x, (1,))
    idx = _d.reshape(ops, index, (1,)) if index.ndim == 0 else index
    if idx.dtype.name != "int64":
        idx = ops.cast(idx, dtype="int64")
    m = idx.shape[0]
    if source is not None:
        _check_tensor(source, where, "source")
        if source.dtype != x.dtype:
            raise DTypeError(f"{where}: source must have the input's dtype {x.dtype.name}, got {source.dtype.name}")
        want = list(x1.shape)
        want[axis] = m
        src = _d.reshape(ops, source, (1,)) if source.ndim == 0 and scalar else source
        if not _d.same_sizes(tuple(src.shape), tuple(want)):
            raise ShapeError(f"{where}: source must have shape {want} (the input's {list(x.shape)} with dim {dim} "
                             f"of the index's length {m}), got {list(source.shape)}")
        source = src
    checked = ops.check_index(idx, bound=x1.shape[axis], what=f"{where}: index")
    return x1, axis, checked, source


def _along(ops: Interpreter, v: AnyTensor, ndim: int, axis: int) -> AnyTensor:
    """A 1-d ``[n]`` tensor shaped to broadcast along ``axis`` of a rank-``ndim`` tensor."""
    return ops.reshape(v, shape=tuple(v.shape[0] if i == axis else 1 for i in range(ndim)))


def _last_writers(ops: Interpreter, idx: AnyTensor, n: Any) -> AnyTensor:
    """For each of the ``n`` targets, 1 + the position in ``idx`` of its last writer, 0 when none writes it."""
    m = idx.shape[0]
    order = ops.argsort(idx, axis=0)  # stable: a target's writers stay in their order
    ranked = ops.gather(idx, order, axis=0)
    following = ops.slice(ranked, starts=(1,), stops=(m,), steps=(1,))
    last = ops.concat(ops.ne(ops.slice(ranked, starts=(0,), stops=(m - 1,), steps=(1,)), following),
                      ops.full(shape=(1,), value=True, dtype="bool"), axis=0)
    writer = ops.where(last, ops.add(order, 1), 0)
    return ops.scatter_add(ops.full(shape=(n,), value=0, dtype="int64"), ranked, writer, axis=0)


def _restore(ops: Interpreter, out: AnyTensor, x: AnyTensor) -> AnyTensor:
    return _d.reshape(ops, out, ()) if x.ndim == 0 else out


def index_add(ops: Interpreter, x: AnyTensor, dim: int, index: AnyTensor, source: AnyTensor,
              alpha: Any = 1) -> AnyTensor:
    """``torch.index_add`` (out of place): ``out[..., index[i], ...] += alpha * source[..., i, ...]`` along
    ``dim``; ``index`` is 0-d or 1-d int64 of length ``m`` (values in ``[0, n)``, repeats accumulate),
    ``source`` has ``x``'s shape with ``m`` along ``dim``. Differentiable in ``x`` and ``source``."""
    x1, axis, idx, src = _index_update_args(ops, x, dim, index, source, "index_add")
    if not (isinstance(alpha, (int, float, np.number)) and not isinstance(alpha, bool)):
        raise ArgumentTypeError(f"index_add: alpha must be a number, got {type(alpha).__name__}")
    if isinstance(alpha, float) and x.dtype.name not in ("float32", "float64"):
        raise ArgumentTypeError(f"index_add: a float alpha {alpha} needs a float input, got {x.dtype.name}")
    if alpha != 1:
        src = ops.mul(src, float(alpha) if isinstance(alpha, (float, np.floating)) else int(alpha))
    return _restore(ops, ops.scatter_add(x1, idx, src, axis=axis), x)


def index_copy(ops: Interpreter, x: AnyTensor, dim: int, index: AnyTensor, source: AnyTensor) -> AnyTensor:
    """``torch.index_copy`` (out of place): ``out[..., index[i], ...] = source[..., i, ...]`` along ``dim``
    (shapes as :func:`index_add`); where an index repeats the last writer wins (PyTorch leaves it
    unspecified). Overwritten entries of ``x`` get no gradient; each written ``source`` slice gets its own."""
    x1, axis, idx, src = _index_update_args(ops, x, dim, index, source, "index_copy")
    if _static(idx.shape[0], "index_copy") == 0:
        return x
    n = x1.shape[axis]
    winners = _last_writers(ops, idx, n)
    taken = ops.gather(src, ops.maximum(ops.sub(winners, 1), 0), axis=axis)
    return _restore(ops, ops.where(_along(ops, ops.gt(winners, 0), x1.ndim, axis), taken, x1), x)


def index_fill(ops: Interpreter, x: AnyTensor, dim: int, index: AnyTensor, value: Any) -> AnyTensor:
    """``torch.index_fill`` (out of place): the slices at ``index`` (0-d or 1-d int64) along ``dim`` set to
    ``value`` (a number or a 0-d tensor, which then gets the gradient of the filled entries)."""
    where = "index_fill"
    if _is_tensor(value):
        if value.ndim != 0:
            raise ShapeError(f"{where}: value must be a number or a 0-d tensor, got shape {list(value.shape)}")
        if value.dtype != x.dtype:
            value = ops.cast(value, dtype=x.dtype.name)
    elif not isinstance(value, (bool, int, float, np.number)):
        raise ArgumentTypeError(f"{where}: value must be a number or a 0-d tensor, got {type(value).__name__}")
    x1, axis, idx, _ = _index_update_args(ops, x, dim, index, None, where)
    n = x1.shape[axis]
    hits = ops.scatter_add(ops.full(shape=(n,), value=0, dtype="int64"), idx,
                           ops.full(shape=(idx.shape[0],), value=1, dtype="int64"), axis=0)
    return _restore(ops, ops.where(_along(ops, ops.gt(hits, 0), x1.ndim, axis), value, x1), x)


# ---- scatter_reduce ----------------------------------------------------------------------------

def _segmented_scan(ops: Interpreter, values: AnyTensor, segments: AnyTensor, combine: str) -> AnyTensor:
    """Inclusive scan of the 1-d ``values`` within runs of equal ``segments`` (sorted), by the binary primitive
    ``combine``: the last entry of each run holds the run's reduction (log2(m) doubling steps)."""
    m = _static(values.shape[0], "scatter_reduce")
    step = 1
    while step < m:
        head = ops.slice(values, starts=(0,), stops=(m - step,), steps=(1,))
        cur = ops.slice(values, starts=(step,), stops=(m,), steps=(1,))
        same = ops.eq(ops.slice(segments, starts=(step,), stops=(m,), steps=(1,)),
                      ops.slice(segments, starts=(0,), stops=(m - step,), steps=(1,)))
        merged = ops.where(same, getattr(ops, combine)(cur, head), cur)
        values = ops.concat(ops.slice(values, starts=(0,), stops=(step,), steps=(1,)), merged, axis=0)
        step *= 2
    return values


def scatter_reduce(ops: Interpreter, x: AnyTensor, dim: int, index: AnyTensor, src: AnyTensor, reduce: str,
                   include_self: bool = True) -> AnyTensor:
    """``torch.scatter_reduce`` (out of place): the ``src`` entries addressed as in ``scatter_add``
    (``out[index[i][j]][j]`` for ``dim=0``) combined per target by ``reduce``: ``"sum"``, ``"prod"``,
    ``"mean"`` (integers: floor division), ``"amax"`` or ``"amin"``, together with ``x``'s own entry when
    ``include_self``; entries no index addresses keep ``x``'s value. Shapes as ``scatter_add``.
    Gradients as PyTorch: ``amax``/``amin`` split it evenly between the entries equal to the result
    (``x``'s own among them when included); ``prod`` is exact at zeros."""
    where = "scatter_reduce"
    if reduce not in _REDUCTIONS:
        raise ArgumentError(f"{where}: reduce must be one of {list(_REDUCTIONS)}, got {reduce!r}")
    if not _is_tensor(src):
        raise ArgumentTypeError(f"{where}: src must be a tensor, got {type(src).__name__}")
    positions, updates, size = _idx._scatter_args(ops, x, dim, index, src, where)
    flat = _d.reshape(ops, x, (size,))
    zeros = ops.full(shape=(size,), value=0, dtype=x.dtype.name)
    count_m = positions.shape[0]
    hits = ops.scatter_add(ops.full(shape=(size,), value=0, dtype="int64"), positions,
                           ops.full(shape=(count_m,), value=1, dtype="int64"), axis=0)
    touched = ops.gt(hits, 0)
    if _static(count_m, where) == 0:
        return x
    if reduce in ("sum", "mean"):
        base: AnyTensor = ops.where(touched, zeros, flat) if not include_self else flat
        total = ops.scatter_add(base, positions, updates, axis=0)
        if reduce == "sum":
            return _d.reshape(ops, total, tuple(x.shape))
        count = ops.add(hits, 1) if include_self else ops.maximum(hits, 1)
        if x.dtype.name in ("float32", "float64"):
            mean = ops.div(total, ops.cast(count, dtype=x.dtype.name))
        else:
            from tensorplay.floordiv import floor_divide
            mean = floor_divide(total, ops.cast(count, dtype=x.dtype.name))
        return _d.reshape(ops, ops.where(touched, mean, flat), tuple(x.shape))
    order = ops.argsort(positions, axis=0)
    ranked = ops.gather(positions, order, axis=0)
    m = _static(count_m, where)
    last = ops.concat(ops.ne(ops.slice(ranked, starts=(0,), stops=(m - 1,), steps=(1,)),
                             ops.slice(ranked, starts=(1,), stops=(m,), steps=(1,))),
                      ops.full(shape=(1,), value=True, dtype="bool"), axis=0)
    sorted_updates = ops.gather(updates, order, axis=0)
    if reduce == "prod":
        scanned = _segmented_scan(ops, sorted_updates, ranked, "mul")
        ident = ops.full(shape=(size,), value=1, dtype=x.dtype.name)
        product = ops.scatter_add(zeros, ranked, ops.where(last, scanned, 0), axis=0)
        product = ops.where(touched, product, ident)
        out = ops.mul(product, flat) if include_self else product
        return _d.reshape(ops, ops.where(touched, out, flat), tuple(x.shape))
    combine = "maximum" if reduce == "amax" else "minimum"
    # the value: a scan of the stopped values; the gradient: shared evenly by the entries equal to it
    scanned = _segmented_scan(ops, ops.stop_gradient(sorted_updates), ranked, combine)
    best = ops.scatter_add(zeros, ranked, ops.where(last, scanned, 0), axis=0)
    if include_self:
        best = ops.where(touched, getattr(ops, combine)(best, ops.stop_gradient(flat)), flat)
    value = ops.where(touched, best, ops.stop_gradient(flat))
    at_writer = ops.gather(value, positions, axis=0)
    tie = ops.eq(updates, at_writer)
    ties = ops.scatter_add(ops.full(shape=(size,), value=0, dtype="int64"), positions, ops.cast(tie, dtype="int64"),
                           axis=0)
    self_tie = ops.logical_and(touched, ops.eq(flat, value)) if include_self else \
        ops.full(shape=(size,), value=False, dtype="bool")
    ties = ops.add(ties, ops.cast(self_tie, dtype="int64"))
    if x.dtype.name not in ("float32", "float64"):
        return _d.reshape(ops, ops.where(touched, value, flat), tuple(x.shape))
    share = ops.cast(ops.maximum(ties, 1), dtype=x.dtype.name)
    deltas = ops.where(tie, ops.sub(updates, ops.stop_gradient(updates)), 0.0)
    spread = ops.scatter_add(zeros, positions, deltas, axis=0)
    if include_self:
        spread = ops.add(spread, ops.where(self_tie, ops.sub(flat, ops.stop_gradient(flat)), 0.0))
    out = ops.add(value, ops.div(spread, share))
    return _d.reshape(ops, ops.where(touched, out, flat), tuple(x.shape))


# ---- scatters of a view ------------------------------------------------------------------------

def _splice(ops: Interpreter, x: AnyTensor, src: AnyTensor, axis: int, targets: Sequence[int]) -> AnyTensor:
    """``x`` with entry ``targets[k]`` along ``axis`` replaced by ``src``'s entry ``k`` there (static
    positions): one gather from ``concat(x, src)``, so each output entry has exactly one source."""
    n = _static(x.shape[axis], "splice")
    pick = np.arange(n, dtype=np.int64)
    pick[np.asarray(list(targets), dtype=np.int64)] = n + np.arange(len(targets), dtype=np.int64)
    if not len(targets):
        return x
    joined = ops.concat(x, src, axis=axis)
    return ops.gather(joined, ops.constant(pick), axis=axis)


def _check_src(x: AnyTensor, src: AnyTensor, want: Sequence[Any], where: str) -> None:
    _check_tensor(src, where, "src")
    if src.dtype != x.dtype:
        raise DTypeError(f"{where}: src must have the input's dtype {x.dtype.name}, got {src.dtype.name}")
    if not _d.same_sizes(tuple(src.shape), tuple(want)):
        raise ShapeError(f"{where}: src must have shape {list(want)} (the embedded view of input "
                         f"{list(x.shape)}), got {list(src.shape)}")


def select_scatter(ops: Interpreter, x: AnyTensor, src: AnyTensor, dim: int, index: int) -> AnyTensor:
    """``torch.select_scatter``: ``x`` with ``x.select(dim, index)`` replaced by ``src`` (of that shape)."""
    where = "select_scatter"
    view = select(ops, x, dim, index)
    _check_src(x, src, tuple(view.shape), where)
    axis = _d.normalize_axis(dim, x.ndim, where)
    n = _static(x.shape[axis], where)
    return _splice(ops, x, _d.unsqueeze(ops, src, axis), axis, [index % n])


def slice_scatter(ops: Interpreter, x: AnyTensor, src: AnyTensor, dim: int = 0, start: int | None = None,
                  end: int | None = None, step: int = 1) -> AnyTensor:
    """``torch.slice_scatter``: ``x`` with the slice ``start:end:step`` (Python's rules; ``step > 0``) of
    axis ``dim`` replaced by ``src`` (of that slice's shape)."""
    where = "slice_scatter"
    if x.ndim == 0:
        raise ShapeError(f"{where}: cannot be applied to a 0-d tensor")
    axis = _d.normalize_axis(dim, x.ndim, where)
    if _int(step, where, "step") <= 0:
        raise ArgumentError(f"{where}: step must be positive, got {step}")
    for name, v in (("start", start), ("end", end)):
        if v is not None:
            _int(v, where, name)
    n = _static(x.shape[axis], where)
    targets = list(range(n))[builtins.slice(start, end, step)]
    want = list(x.shape)
    want[axis] = len(targets)
    _check_src(x, src, want, where)
    return _splice(ops, x, src, axis, targets)


def diagonal_scatter(ops: Interpreter, x: AnyTensor, src: AnyTensor, offset: int = 0, dim1: int = 0,
                     dim2: int = 1) -> AnyTensor:
    """``torch.diagonal_scatter``: ``x`` with ``x.diagonal(offset, dim1, dim2)`` replaced by ``src`` (the
    other axes in order, then the diagonal's length)."""
    where = "diagonal_scatter"
    view = _shape.diagonal(ops, x, offset, dim1, dim2)
    _check_src(x, src, tuple(view.shape), where)
    a, b = (_d.normalize_axis(d, x.ndim, where) for d in (dim1, dim2))
    rest = [i for i in range(x.ndim) if i not in (a, b)]
    moved = _d.permute(ops, x, rest + [a, b])
    n1, n2 = _static(moved.shape[-2], where), _static(moved.shape[-1], where)
    lead = tuple(moved.shape[:-2])
    length = view.shape[-1]
    row0, col0 = builtins.max(0, -int(offset)), builtins.max(0, int(offset))
    targets = [(row0 + k) * n2 + col0 + k for k in range(_static(length, where))]
    plane = _splice(ops, _d.reshape(ops, moved, lead + (n1 * n2,)), src, len(lead), targets)
    back = [0] * x.ndim
    for pos, ax in enumerate(rest + [a, b]):
        back[ax] = pos
    return _d.permute(ops, _d.reshape(ops, plane, lead + (n1, n2)), back)


def diag_embed(ops: Interpreter, x: AnyTensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> AnyTensor:
    """``torch.diag_embed``: ``[..., n]`` to a tensor of one more dim whose planes ``(dim1, dim2)`` (of the
    result, size ``n + |offset|``) hold the last axis on diagonal ``offset``, zeros elsewhere."""
    where = "diag_embed"
    _check_tensor(x, where, "input")
    if x.ndim == 0:
        raise ShapeError(f"{where}: input must have at least 1 dim, got a 0-d tensor")
    offset = _int(offset, where, "offset")
    rank = x.ndim + 1
    a, b = (_d.normalize_axis(d, rank, where) for d in (dim1, dim2))
    if a == b:
        raise AxisError(f"{where}: diagonal dimensions cannot be identical {dim1}, {dim2}")
    side = x.shape[-1] + builtins.abs(offset)
    rest = iter(x.shape[:-1])
    shape = tuple(side if i in (a, b) else next(rest) for i in range(rank))
    base = ops.full(shape=shape, value=False if x.dtype.name == "bool" else 0, dtype=x.dtype.name)
    return diagonal_scatter(ops, base, x, offset, a, b)


def diagflat(ops: Interpreter, x: AnyTensor, offset: int = 0) -> AnyTensor:
    """``torch.diagflat``: the flattened ``x`` on diagonal ``offset`` of a square matrix of side
    ``numel + |offset|``."""
    _check_tensor(x, "diagflat", "input")
    return _shape.diag(ops, ravel(ops, x), _int(offset, "diagflat", "offset"))


# ---- windows and reductions to a size ----------------------------------------------------------

def unfold(ops: Interpreter, x: AnyTensor, dimension: int, size: int, step: int) -> AnyTensor:
    """``Tensor.unfold``: the windows of ``size`` entries every ``step`` along ``dimension``: that axis becomes
    the window count ``(n - size) // step + 1`` and a new last axis of ``size`` holds each window."""
    where = "unfold"
    size, step = _int(size, where, "size"), _int(step, where, "step")
    x1, axis, scalar = _axis_of(x, dimension, where)
    if scalar:
        x1 = _d.reshape(ops, x, (1,))
    n = _static(x1.shape[axis], where)
    if step <= 0:
        raise ArgumentError(f"{where}: step must be positive, got {step}")
    if not 0 <= size <= n:
        raise ShapeError(f"{where}: maximum size for tensor at dimension {dimension} is {n} but size is {size}")
    count = (n - size) // step + 1
    windows = np.arange(count, dtype=np.int64)[:, None] * step + np.arange(size, dtype=np.int64)[None, :]
    out = ops.gather(x1, ops.constant(windows), axis=axis)  # [..., count, size, ...]
    out = _d.permute(ops, out, [i for i in range(out.ndim) if i != axis + 1] + [axis + 1])
    return _d.reshape(ops, out, (size,)) if scalar else out


def sum_to_size(ops: Interpreter, x: AnyTensor, *size: Any) -> AnyTensor:
    """``Tensor.sum_to_size``: ``x`` summed down to ``size`` (``f(2, 3)`` or ``f((2, 3))``), which must
    broadcast to ``x``'s shape: leading extra axes and the axes where ``size`` has 1 are summed."""
    where = "sum_to_size"
    target = tuple(_d.shape_args(size))
    shape = tuple(x.shape)
    lead = len(shape) - len(target)
    bad = lead < 0 or builtins.any(
        not (_is_int(t) and t == 1) and not _d.same_sizes((t,), (shape[lead + i],)) for i, t in enumerate(target))
    if bad:
        raise ShapeError(f"{where}: size {list(target)} is not expandable to the tensor's size {list(shape)}")
    axes = tuple(range(lead)) + tuple(lead + i for i, t in enumerate(target)
                                      if _is_int(t) and t == 1 and not (_is_int(shape[lead + i]) and shape[lead + i] == 1))
    if not axes:
        return x
    return _d.reshape(ops, ops.reduce_sum(x, axes=axes, keepdims=True), target)


__all__ = ["atleast", "broadcast_shapes", "broadcast_tensors", "column_stack", "diag_embed", "diagflat",
           "diagonal_scatter", "dsplit", "dstack", "fliplr", "flipud", "hsplit", "hstack", "index_add", "index_copy",
           "index_fill", "ravel", "reshape_as", "rot90", "scatter_reduce", "select", "select_scatter",
           "slice_scatter", "split_with_sizes", "sum_to_size", "t", "take", "tensor_split", "type_as", "unbind",
           "unfold", "vsplit", "vstack"]
