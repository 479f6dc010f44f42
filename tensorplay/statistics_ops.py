"""Statistics of PyTorch's API, written once against :class:`~tensorplay.ops.Ops` from existing primitives:
``var_mean``, ``std_mean``, ``aminmax``, ``kthvalue``, ``mode``, ``msort``, ``logcumsumexp``, ``cov``,
``corrcoef``, ``nanmedian``, ``nanquantile`` and ``cumulative_trapezoid``.

Orderings come from the stable ``argsort`` primitive (NaN sorts last) and their values are gathers of the
input, so gradients reach exactly the selected entries; the rest are sums, products and scans. Being
compositions, they run under every interpreter and transform. Every function takes the interpreter first;
the tensor methods and ``tp.<name>`` forms pass it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from tensorplay import derived as _d  # a module import: derived imports tensor, which imports this module
from tensorplay import indexing_ops as _idx
from tensorplay import math_more as _more
from tensorplay import sequence_ops as _seq
from tensorplay import sorting as _sorting
from tensorplay.errors import ArgumentError, ArgumentTypeError, DTypeError, IndexRangeError, ShapeError
from tensorplay.op_args import check_tensor as _check_tensor, is_tensor as _is_tensor, static_size as _static

if TYPE_CHECKING:
    from tensorplay.ops import Interpreter

AnyTensor = Any
_INF = float("inf")


class MinMax(NamedTuple):
    """``(min, max)`` of :func:`aminmax` (PyTorch's ``torch.return_types.aminmax``)."""

    min: Any
    max: Any


# ---- moments -----------------------------------------------------------------------------------------

def _correction(unbiased: Any, correction: Any, where: str) -> float:
    if unbiased is not None and correction is not None:
        raise ArgumentError(f"{where}: give either unbiased or correction, not both (got unbiased={unbiased!r}, "
                            f"correction={correction!r})")
    if unbiased is not None:
        if not isinstance(unbiased, bool):
            raise ArgumentTypeError(f"{where}: unbiased must be a bool, got {type(unbiased).__name__}")
        return 1 if unbiased else 0
    if correction is None:
        return 1
    if isinstance(correction, bool) or not isinstance(correction, (int, float)):
        raise ArgumentTypeError(f"{where}: correction must be a number, got {type(correction).__name__}")
    return correction


def var_mean(ops: Interpreter, x: AnyTensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False,
             correction: Any = None, root: bool = False) -> tuple[AnyTensor, AnyTensor]:
    """``(var, mean)`` over ``dim`` (``None``: every axis), as ``torch.var_mean``; the variance divides by
    ``count - correction`` (``correction`` 1 by default, ``unbiased=False`` is 0). With ``root`` the first
    is the standard deviation (``torch.std_mean``; gradient 0 at a constant sample). Float input."""
    where = "std_mean" if root else "var_mean"
    _check_tensor(x, where, "input")
    if isinstance(dim, bool):  # torch.var_mean(x, False): the second positional argument is unbiased
        dim, unbiased = None, dim
    c = _correction(unbiased, correction, where)
    spread = _d.var(ops, x, dim, keepdim, c, where)  # type: ignore[arg-type]
    if root:
        spread = _d.safe_sqrt(ops, spread)
    return spread, _d.mean(ops, x, dim, keepdim)


def std_mean(ops: Interpreter, x: AnyTensor, dim: Any = None, unbiased: Any = None, keepdim: bool = False,
             correction: Any = None) -> tuple[AnyTensor, AnyTensor]:
    """``(std, mean)`` over ``dim``, as ``torch.std_mean`` (see :func:`var_mean`)."""
    return var_mean(ops, x, dim, unbiased, keepdim, correction, root=True)


def aminmax(ops: Interpreter, x: AnyTensor, dim: int | None = None, keepdim: bool = False) -> MinMax:
    """The named tuple ``(min, max)`` over ``dim`` (``None``: every entry), as ``torch.aminmax``; NaN
    propagates, tied extremes share the gradient (as ``amin``/``amax``). An empty reduction is refused."""
    _check_tensor(x, "aminmax", "input")
    if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int)):
        raise ArgumentTypeError(f"aminmax: dim must be an int or None, got {type(dim).__name__} {dim!r}")
    axes = (tuple(range(x.ndim)) if dim is None else
            (_d.normalize_axis(dim, x.ndim, "aminmax"),) if x.ndim else ())
    if dim is not None and not x.ndim:
        _d.check_scalar_dim(dim, "aminmax")
    if any(_static(x.shape[a], "aminmax") == 0 for a in axes) or (dim is None and 0 in [
            _static(s, "aminmax") for s in x.shape]):
        raise ShapeError(f"aminmax: cannot reduce an empty dim (input shape {list(x.shape)}, dim {dim})")
    if dim is None:
        lo, hi = ops.tensor_reduce("reduce_min", x, None, False), ops.tensor_reduce("reduce_max", x, None, False)
        if keepdim:
            kept = (1,) * x.ndim
            lo, hi = _d.reshape(ops, lo, kept), _d.reshape(ops, hi, kept)
        return MinMax(lo, hi)
    if not x.ndim:
        return MinMax(ops.tensor_reduce("reduce_min", x, None, False), ops.tensor_reduce("reduce_max", x, None, False))
    return MinMax(ops.tensor_reduce("reduce_min", x, dim, keepdim), ops.tensor_reduce("reduce_max", x, dim, keepdim))


# ---- order statistics ---------------------------------------------------------------------------------

def _rows(ops: Interpreter, x: AnyTensor, dim: int, where: str) -> tuple[AnyTensor, tuple[Any, ...], int, bool, int]:
    """``x`` with axis ``dim`` moved last and the others flattened: ``([rows, n], lead shape, axis, was 0-d,
    n)``; an empty ``dim`` is a :class:`ShapeError`."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise ArgumentTypeError(f"{where}: dim must be an int, got {type(dim).__name__} {dim!r}")
    v, axis, scalar = _sorting._as_vector(ops, x, dim, where)
    n = _static(v.shape[axis], where)
    if n == 0:
        raise ShapeError(f"{where}: cannot reduce an empty dim (dim {dim} of shape {list(x.shape)})")
    moved = _d.permute(ops, v, [i for i in range(v.ndim) if i != axis] + [axis])
    lead = tuple(moved.shape[:-1])
    return _d.reshape(ops, moved, (_d.numel_of(lead), n)), lead, axis, scalar, n


def _picked(ops: Interpreter, flat: AnyTensor, index: AnyTensor, lead: tuple[Any, ...], axis: int, scalar: bool,
            keepdim: bool) -> tuple[AnyTensor, AnyTensor]:
    """``(values, indices)`` of ``flat[rows, n]`` at the int64 positions ``index[rows, 1]``, shaped as the
    reduced input (axis ``axis`` dropped, or kept as size 1 with ``keepdim``)."""
    values = _sorting.take_along_axis(ops, flat, index, 1)
    if scalar:
        shape: tuple[Any, ...] = ()
    elif keepdim:
        shape = lead[:axis] + (1,) + lead[axis:]
    else:
        shape = lead
    return _d.reshape(ops, values, shape), _d.reshape(ops, index, shape)


def kthvalue(ops: Interpreter, x: AnyTensor, k: int, dim: int = -1, keepdim: bool = False) -> tuple[AnyTensor, AnyTensor]:
    """``(values, indices)`` of the ``k``-th smallest entry (``1 <= k <= n``) along ``dim``, as
    ``torch.kthvalue``: NaN counts as the largest; of equal values, the stable sort's order decides (PyTorch
    leaves it unspecified). The gradient goes to the chosen entry."""
    _check_tensor(x, "kthvalue", "input")
    _d.refuse_bool(x, "kthvalue")
    flat, lead, axis, scalar, n = _rows(ops, x, dim, "kthvalue")
    if isinstance(k, bool) or not isinstance(k, int):
        raise ArgumentTypeError(f"kthvalue: k must be an int, got {type(k).__name__} {k!r}")
    if not 1 <= k <= n:
        raise IndexRangeError(f"kthvalue: k must be in [1, {n}] (the size of dim {dim}), got {k}")
    order = ops.argsort(flat, axis=1)
    index = _sorting.take_along_axis(ops, order, ops.full(shape=(flat.shape[0], 1), value=k - 1, dtype="int64"), 1)
    return _picked(ops, flat, index, lead, axis, scalar, keepdim)


def mode(ops: Interpreter, x: AnyTensor, dim: int = -1, keepdim: bool = False) -> tuple[AnyTensor, AnyTensor]:
    """``(values, indices)`` of the most frequent value along ``dim``, as ``torch.mode``: of values equally
    frequent the smallest; its index is its last position. NaN entries count as one value (larger than
    every number). Computed from the stable sort: runs of equal values, counted with ``scatter_add``
    (linear in the size of ``dim``). The gradient goes to the chosen entry."""
    _check_tensor(x, "mode", "input")
    flat, lead, axis, scalar, n = _rows(ops, x, dim, "mode")
    rows = flat.shape[0]
    order = ops.argsort(flat, axis=1)
    s = ops.stop_gradient(_sorting.take_along_axis(ops, flat, order, 1))
    after, before = _seq._cut(ops, s, 1, 1, n), _seq._cut(ops, s, 1, 0, n - 1)
    same = ops.eq(after, before)
    if x.dtype.numpy.kind == "f":
        same = ops.logical_or(same, ops.logical_and(ops.ne(after, after), ops.ne(before, before)))
    starts = ops.concat(ops.full(shape=(rows, 1), value=1, dtype="int64"),
                        ops.cast(ops.logical_not(same), dtype="int64"), axis=1)
    run = ops.sub(ops.cumsum(starts, axis=1), 1)  # [rows, n]: each entry's run number within its row
    slots = ops.add(run, ops.reshape(ops.mul(ops.iota(length=rows, dtype="int64"), n), shape=(rows, 1)))
    flat_slots = _d.reshape(ops, slots, (_d.numel_of((rows, n)),))
    counts = ops.scatter_add(ops.full(shape=(flat_slots.shape[0],), value=0, dtype="int64"), flat_slots,
                             ops.full(shape=(flat_slots.shape[0],), value=1, dtype="int64"), axis=0)
    count = _d.reshape(ops, ops.gather(counts, flat_slots, axis=0), (rows, n))
    first = ops.argmax(count, axis=1, keepdims=True)  # the start of the first (smallest) most frequent run
    last = ops.sub(ops.add(first, _sorting.take_along_axis(ops, count, first, 1)), 1)
    index = _sorting.take_along_axis(ops, order, last, 1)
    return _picked(ops, flat, index, lead, axis, scalar, keepdim)


def msort(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """``x`` sorted ascending along its first dim (NaN last), as ``torch.msort``."""
    _check_tensor(x, "msort", "input")
    return _sorting.sort(ops, x, 0, False)[0]


def nanmedian(ops: Interpreter, x: AnyTensor, dim: int | None = None,
              keepdim: bool = False) -> AnyTensor | tuple[AnyTensor, AnyTensor]:
    """The lower median of the entries that are not NaN, as ``torch.nanmedian``: of all entries (a 0-d value)
    with ``dim=None``, else ``(values, indices)`` along ``dim``; NaN where every entry is NaN (the index
    of the first). The gradient goes to the chosen entry."""
    _check_tensor(x, "nanmedian", "input")
    _d.refuse_bool(x, "nanmedian")
    if dim is None:
        flat_all = _d.reshape(ops, x, (1, _d.numel_of(tuple(x.shape))))
        if _static(flat_all.shape[1], "nanmedian") == 0:
            raise ShapeError(f"nanmedian: cannot take the median of an empty tensor (shape {list(x.shape)})")
        return _d.reshape(ops, _nanmedian_rows(ops, flat_all, x.dtype.numpy.kind == "f")[0], ())
    flat, lead, axis, scalar, n = _rows(ops, x, dim, "nanmedian")
    index = _nanmedian_rows(ops, flat, x.dtype.numpy.kind == "f")[1]
    return _picked(ops, flat, index, lead, axis, scalar, keepdim)


def _nanmedian_rows(ops: Interpreter, flat: AnyTensor, floating: bool) -> tuple[AnyTensor, AnyTensor]:
    """``(values[rows, 1], indices[rows, 1])`` of the NaN-ignoring lower median of each row of ``flat``."""
    n = flat.shape[1]
    order = ops.argsort(flat, axis=1)
    valid: Any = ops.full(shape=(flat.shape[0], 1), value=n, dtype="int64")
    if floating:
        valid = ops.sub(valid, ops.reduce_sum(ops.cast(ops.ne(flat, flat), dtype="int64"), axes=(1,), keepdims=True))
    half = ops.floor(ops.div(ops.maximum(ops.sub(valid, 1), 0), 2))
    index = _sorting.take_along_axis(ops, order, ops.cast(half, dtype="int64"), 1)
    return _sorting.take_along_axis(ops, flat, index, 1), index


def nanquantile(ops: Interpreter, x: AnyTensor, q: Any, dim: int | None = None, keepdim: bool = False,
                interpolation: str = "linear") -> AnyTensor:
    """The ``q``-quantiles of the entries that are not NaN, as ``torch.nanquantile`` (NaN where all are NaN;
    shapes and ``interpolation`` as :func:`tensorplay.indexing_ops.quantile`)."""
    return _idx.quantile(ops, x, q, dim, keepdim, interpolation, ignore_nan=True)


# ---- scans ---------------------------------------------------------------------------------------------

def logcumsumexp(ops: Interpreter, x: AnyTensor, dim: int) -> AnyTensor:
    """``log(cumsum(exp(x)))`` along ``dim`` without overflow or underflow, as ``torch.logcumsumexp``: a
    doubling scan of ``ceil(log2(n))`` steps, each a stable ``logaddexp`` with the values ``2**k`` places
    back (``-inf`` before the start), so ``-inf`` entries add nothing and an ``inf`` stays ``inf``. Float
    input; a 0-d tensor is its own result. The size of ``dim`` fixes the step count (``tp.compile``
    specialises on it)."""
    _check_tensor(x, "logcumsumexp", "input")
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise ArgumentTypeError(f"logcumsumexp: dim must be an int, got {type(dim).__name__} {dim!r}")
    if x.dtype.numpy.kind != "f":
        raise DTypeError(f"logcumsumexp: expected a float tensor, got {x.dtype.name}; convert with .float() first")
    if x.ndim == 0:
        _d.check_scalar_dim(dim, "logcumsumexp")
        return ops.add(x, 0.0)
    axis = _d.normalize_axis(dim, x.ndim, "logcumsumexp")
    n = _static(x.shape[axis], "logcumsumexp")
    out = ops.add(x, 0.0)
    step = 1
    while step < n:
        back = ops.pad(_seq._cut(ops, out, axis, 0, n - step),
                       pads=tuple((step, 0) if a == axis else (0, 0) for a in range(x.ndim)), value=-_INF)
        out = _more.logaddexp(ops, out, back)
        step *= 2
    return out


def cumulative_trapezoid(ops: Interpreter, y: AnyTensor, x: AnyTensor | None = None, dx: Any = None,
                         dim: int = -1) -> AnyTensor:
    """Running trapezoid-rule integrals along ``dim``, as ``torch.cumulative_trapezoid``: entry ``i`` is
    ``sum_{j <= i} (y[j] + y[j + 1]) / 2 * d_j`` with ``d_j = dx`` (1 by default) or ``x[j + 1] - x[j]`` (``x``
    1-d along ``dim`` or broadcasting with ``y``); ``[..., m, ...]`` to ``[..., m - 1, ...]``. Integer ``y``
    gives float32."""
    where = "cumulative_trapezoid"
    _check_tensor(y, where, "y")
    if x is not None and dx is not None:
        raise ArgumentError(f"{where}: give either x or dx, not both")
    axis = _seq._tensor_axis(y, dim, where)
    if y.dtype.numpy.kind != "f":
        y = ops.cast(y, dtype="float32")
    m = _static(y.shape[axis], where)
    if m == 0:
        return y
    halves = ops.mul(ops.add(_seq._cut(ops, y, axis, 1, m), _seq._cut(ops, y, axis, 0, m - 1)), 0.5)
    if x is None:
        step = 1.0 if dx is None else dx
        if isinstance(step, bool) or not isinstance(step, (int, float)):
            raise ArgumentTypeError(f"{where}: dx must be a number, got {type(step).__name__} {step!r}")
        return ops.cumsum(ops.mul(halves, float(step)), axis=axis)
    _check_tensor(x, where, "x")
    if x.ndim == 1:
        if not _d.same_sizes([x.shape[0]], [y.shape[axis]]):
            raise ShapeError(f"{where}: a 1-d x must have y's size {y.shape[axis]} along dim {dim}, got {x.shape[0]}")
        x = _d.reshape(ops, x, tuple(x.shape[0] if a == axis else 1 for a in range(y.ndim)))
        x_axis = axis
    else:
        x_axis = axis - (y.ndim - x.ndim)
        if x.ndim > y.ndim or x_axis < 0 or not _d.same_sizes([x.shape[x_axis]], [y.shape[axis]]):
            raise ShapeError(f"{where}: x of shape {list(x.shape)} must have y's size {y.shape[axis]} along dim "
                             f"{dim} (y shape {list(y.shape)})")
    if x.dtype.numpy.kind != "f":
        x = ops.cast(x, dtype=y.dtype.name)
    steps = ops.sub(_seq._cut(ops, x, x_axis, 1, m), _seq._cut(ops, x, x_axis, 0, m - 1))
    product = ops.mul(halves, steps)
    return ops.cumsum(product, axis=product.ndim - y.ndim + axis)


# ---- covariance ----------------------------------------------------------------------------------------

def _weights(ops: Interpreter, w: Any, name: str, n: Any, integral: bool, dtype: str) -> AnyTensor:
    where = "cov"
    _check_tensor(w, where, name)
    if w.ndim > 1 or (w.ndim == 1 and not _d.same_sizes([w.shape[0]], [n])):
        raise ShapeError(f"{where}: {name} must be 0-d or 1-d with one entry per observation ({n}), got shape "
                         f"{list(w.shape)}")
    kind = w.dtype.numpy.kind
    if integral and kind not in "iu":
        raise DTypeError(f"{where}: fweights must be an integer tensor, got {w.dtype.name}")
    if not integral and kind != "f":
        raise DTypeError(f"{where}: aweights must be a float tensor, got {w.dtype.name}")
    known = _idx._concrete_value(w)
    if known is not None and known.size and known.min() < 0:
        raise ArgumentError(f"{where}: {name} cannot be negative, got {known.min()!r} at position "
                            f"{int(known.argmin())}")
    return ops.cast(w, dtype=dtype) if w.dtype.name != dtype else w


def cov(ops: Interpreter, x: AnyTensor, correction: int = 1, fweights: AnyTensor | None = None,
        aweights: AnyTensor | None = None) -> AnyTensor:
    """The covariance matrix ``[V, V]`` of ``V`` variables observed ``N`` times (``x[V, N]``; a 1-d ``x[N]`` is
    one variable, a 0-d value), as ``torch.cov``: ``(x - avg) w (x - avg)^T / norm`` with observation weights
    ``w = fweights * aweights`` (int frequencies, float importances; both non-negative), ``avg`` the weighted
    mean and ``norm = sum(w) - correction * sum(w * aweights) / sum(w)`` (``N - correction`` unweighted; 0 when
    negative, giving ``inf``/NaN as PyTorch). Integer input gives float32."""
    _check_tensor(x, "cov", "input")
    if x.ndim > 2:
        raise ShapeError(f"cov: expected a tensor of at most 2 dims [variables, observations], got shape "
                         f"{list(x.shape)}")
    if isinstance(correction, bool) or not isinstance(correction, int):
        raise ArgumentTypeError(f"cov: correction must be an int, got {type(correction).__name__} {correction!r}")
    if x.dtype.numpy.kind != "f":
        x = ops.cast(x, dtype="float32")
    dtype = x.dtype.name
    x2 = x if x.ndim == 2 else _d.reshape(ops, x, (1, _d.numel_of(tuple(x.shape))))
    n = x2.shape[1]
    w: Any = None
    aw: Any = None
    if fweights is not None:
        w = _weights(ops, fweights, "fweights", n, True, dtype)
    if aweights is not None:
        aw = _weights(ops, aweights, "aweights", n, False, dtype)
        w = aw if w is None else ops.mul(w, aw)
    if w is None:
        avg = _d.mean(ops, x2, (1,), True)
        norm: Any = max(_static(n, "cov") - correction, 0) * 1.0
    else:
        w = ops.broadcast_to(w, shape=(n,)) if w.ndim == 0 else w
        total = ops.reduce_sum(w, axes=(0,), keepdims=False)
        avg = ops.div(ops.reduce_sum(ops.mul(x2, w), axes=(1,), keepdims=True), total)
        if correction == 0:
            norm = total
        elif aw is None:
            norm = ops.sub(total, float(correction))
        else:
            norm = ops.sub(total, ops.div(ops.mul(ops.reduce_sum(ops.mul(w, aw), axes=(0,), keepdims=False),
                                                  float(correction)), total))
        norm = ops.maximum(norm, 0.0)
    centred = ops.sub(x2, avg)
    product = ops.matmul(centred if w is None else ops.mul(centred, w), _d.permute(ops, centred, (1, 0)))
    c = ops.div(product, norm)
    return _d.reshape(ops, c, ()) if _d.same_sizes([x2.shape[0]], [1]) else c


def corrcoef(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """Pearson correlation coefficients ``[V, V]`` of ``x[V, N]`` (a 1-d ``x`` gives a 0-d 1), as
    ``torch.corrcoef``: ``cov(x)`` divided by the outer product of its diagonal's square roots, clamped to
    ``[-1, 1]`` (NaN for a constant variable)."""
    c = cov(ops, x)
    if c.ndim == 0:
        return ops.div(c, c)
    m = c.shape[0]
    diag = _sorting.take_along_axis(ops, c, ops.reshape(ops.iota(length=m, dtype="int64"), shape=(m, 1)), 1)
    spread = ops.sqrt(diag)  # [V, 1]
    scaled = ops.div(ops.div(c, spread), _d.permute(ops, spread, (1, 0)))
    return _d.clamp(ops, scaled, -1.0, 1.0)


__all__ = ["MinMax", "aminmax", "corrcoef", "cov", "cumulative_trapezoid", "kthvalue", "logcumsumexp", "mode",
           "msort", "nanmedian", "nanquantile", "std_mean", "var_mean"]
