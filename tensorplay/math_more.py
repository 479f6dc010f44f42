"""More of PyTorch's math functions, written once against :class:`~tensorplay.ops.Ops` from existing
primitives: ``lerp``, ``addcmul``, ``addcdiv``, ``logaddexp``, ``logaddexp2``, ``logit``, ``xlogy``,
``cumprod``, ``nansum``, ``nanmean``, ``count_nonzero``, ``clamp_min``/``clamp_max``, ``erfinv``,
``meshgrid``, ``tensordot`` and ``cdist``. Being compositions, they run under every interpreter and
transform (graph recording, ``tp.compile``, export, ``grad``, ``vmap``, ``jvp``), and their derivatives
follow from those of the primitives.

Every function takes the interpreter first; the tensor methods and ``tp.<name>`` forms pass it.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tensorplay import derived as _d  # a module import: derived imports tensor, which imports this module
from tensorplay.errors import ArgumentError, ArgumentTypeError, AxisError, DTypeError, ShapeError
from tensorplay.op_args import check_tensor as _check_tensor, is_tensor as _is_tensor, static_size as _static

if TYPE_CHECKING:
    from tensorplay.ops import Interpreter

AnyTensor = Any

_LN2 = math.log(2.0)
_INF = float("inf")


def _kind(value: Any) -> str:
    """numpy's dtype kind of a tensor or a Python scalar: ``'f'``, ``'i'`` or ``'b'``."""
    if _is_tensor(value):
        return str(value.dtype.numpy.kind)
    if isinstance(value, bool):
        return "b"
    return "i" if isinstance(value, int) else "f"


def _check_operand(value: Any, where: str, name: str) -> None:
    if not (_is_tensor(value) or isinstance(value, (bool, int, float))):
        raise ArgumentTypeError(f"{where}: {name} must be a tensor or a number, got {type(value).__name__}")


def _require_float(value: Any, where: str, name: str) -> None:
    if _is_tensor(value) and value.dtype.numpy.kind != "f":
        raise DTypeError(f"{where}: expected a float tensor for {name}, got {value.dtype}{list(value.shape)}; "
                         "convert with .float() first")


def _to_float(ops: Interpreter, x: Any) -> Any:
    """Integer and bool tensors as float32 (PyTorch's promotion for ``logit``, ``xlogy``, ``erfinv``)."""
    if _is_tensor(x) and x.dtype.numpy.kind != "f":
        return ops.cast(x, dtype="float32")
    return x


# ---- elementwise -------------------------------------------------------------------------------------

def lerp(ops: Interpreter, start: AnyTensor, end: AnyTensor, weight: Any) -> AnyTensor:
    """``start + weight * (end - start)`` (numpy broadcasting of all three), as ``torch.lerp``: float tensors
    of one dtype (``end`` must have ``start``'s dtype), ``weight`` a number or a float tensor (converted to
    ``start``'s dtype). As PyTorch, ``end - (end - start) * (1 - weight)`` where ``weight >= 0.5``, so
    ``lerp(a, b, 1) == b`` exactly. Derivatives ``1 - weight``, ``weight`` and ``end - start``."""
    _check_tensor(end, "lerp", "end")
    _check_operand(weight, "lerp", "weight")
    _require_float(start, "lerp", "input")
    if end.dtype != start.dtype:
        raise DTypeError(f"lerp: expected end to have the input's dtype {start.dtype}, got {end.dtype}")
    if _is_tensor(weight):
        _require_float(weight, "lerp", "weight")
        if weight.dtype != start.dtype:
            weight = ops.cast(weight, dtype=start.dtype.name)
    diff = ops.sub(end, start)
    if not _is_tensor(weight):
        w = float(weight)
        if builtins.abs(w) < 0.5:
            return ops.add(start, ops.mul(diff, w))
        return ops.sub(end, ops.mul(diff, 1.0 - w))
    low = ops.add(start, ops.mul(weight, diff))
    high = ops.sub(end, ops.mul(diff, ops.sub(1.0, weight)))
    return ops.where(ops.lt(ops.abs(weight), 0.5), low, high)


def _scale(value: Any, result_kind: str, where: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArgumentTypeError(f"{where}: value must be a number, got {type(value).__name__} {value!r}")
    return int(value) if result_kind != "f" else value  # PyTorch truncates a float value for integer tensors


def addcmul(ops: Interpreter, x: AnyTensor, t1: AnyTensor, t2: AnyTensor, value: Any = 1) -> AnyTensor:
    """``x + value * t1 * t2`` (numpy broadcasting, dtypes promote), as ``torch.addcmul``; integer tensors
    stay integer (a float ``value`` is truncated, as PyTorch)."""
    _check_tensor(t1, "addcmul", "tensor1")
    _check_tensor(t2, "addcmul", "tensor2")
    kind = "f" if "f" in (_kind(x), _kind(t1), _kind(t2)) else "i"
    v = _scale(value, kind, "addcmul")
    product = ops.mul(t1, t2)
    return ops.add(x, product if v == 1 else ops.mul(product, v))


def addcdiv(ops: Interpreter, x: AnyTensor, t1: AnyTensor, t2: AnyTensor, value: Any = 1) -> AnyTensor:
    """``x + value * t1 / t2`` (numpy broadcasting, dtypes promote), as ``torch.addcdiv``; ``t1`` and ``t2``
    both integer is a :class:`DTypeError`, as PyTorch refuses integer division there."""
    _check_tensor(t1, "addcdiv", "tensor1")
    _check_tensor(t2, "addcdiv", "tensor2")
    if _kind(t1) != "f" and _kind(t2) != "f":
        raise DTypeError(f"addcdiv: tensor1 and tensor2 are both integer ({t1.dtype} and {t2.dtype}); integer "
                         "division is not supported, convert one with .float()")
    v = _scale(value, "f", "addcdiv")
    quotient = ops.div(t1, t2)
    return ops.add(x, quotient if v == 1 else ops.mul(quotient, v))


def _log_add(ops: Interpreter, a: Any, b: Any, where: str, base2: bool) -> AnyTensor:
    """``log(e^a + e^b)`` (or base 2) as ``hi + log1p(e^(lo - hi))``, ``hi``/``lo`` the larger and smaller
    of the two taken by selection, so each gets its softmax weight as derivative (a half each at a tie).
    Equal infinite operands shift by 0, so ``(inf, inf)`` is ``inf`` and ``(-inf, -inf)`` is ``-inf``; NaN
    propagates."""
    _check_operand(a, where, "input")
    _check_operand(b, where, "other")
    if "f" not in (_kind(a), _kind(b)):
        raise DTypeError(f"{where}: expected a float tensor, got integer operands; convert with .float() first")
    first = ops.ge(a, b)
    hi = ops.where(first, a, b)
    lo = ops.where(first, b, a)
    same_inf = ops.logical_and(ops.eq(a, b), _d.isinf(ops, hi))  # inf - inf would be NaN: shift by 0 there
    gap = ops.sub(ops.where(same_inf, 0.0, lo), ops.where(same_inf, 0.0, hi))
    if base2:
        return ops.add(hi, ops.div(ops.log1p(ops.pow(2.0, gap)), _LN2))
    return ops.add(hi, ops.log1p(ops.exp(gap)))


def logaddexp(ops: Interpreter, a: Any, b: Any) -> AnyTensor:
    """``log(exp(a) + exp(b))`` without overflow (numpy broadcasting; float operands, dtypes promote), as
    ``torch.logaddexp``: ``max + log1p(exp(-|a - b|))``; ``(-inf, -inf)`` is ``-inf``, ``(inf, inf)`` ``inf``."""
    return _log_add(ops, a, b, "logaddexp", False)


def logaddexp2(ops: Interpreter, a: Any, b: Any) -> AnyTensor:
    """``log2(2**a + 2**b)`` without overflow, as ``torch.logaddexp2`` (see :func:`logaddexp`)."""
    return _log_add(ops, a, b, "logaddexp2", True)


def logit(ops: Interpreter, x: AnyTensor, eps: float | None = None) -> AnyTensor:
    """``log(x / (1 - x))`` as ``log(x) - log1p(-x)``, as ``torch.logit``; with ``eps``, ``x`` is clamped to
    ``[eps, 1 - eps]`` first (gradient 0 outside). Integer and bool inputs give float32; NaN outside [0, 1]."""
    if eps is not None and (isinstance(eps, bool) or not isinstance(eps, (int, float))):
        raise ArgumentTypeError(f"logit: eps must be a number or None, got {type(eps).__name__} {eps!r}")
    x = _to_float(ops, x)
    if eps is not None:
        x = _d.clamp(ops, x, float(eps), 1.0 - float(eps))
    else:  # PyTorch's derivative: NaN outside [0, 1], +inf at -0 as at 0 (the factor leaves values alone)
        inside = ops.logical_and(ops.ge(x, 0.0), ops.le(x, 1.0))
        x = ops.mul(ops.add(x, 0.0), ops.where(inside, 1.0, float("nan")))
    return ops.sub(ops.log(x), ops.log1p(ops.neg(x)))


def xlogy(ops: Interpreter, x: Any, y: Any) -> AnyTensor:
    """``x * log(y)``, 0 where ``x == 0`` (also where ``y`` is 0 or ``inf``) and NaN where ``y`` is NaN, as
    ``torch.xlogy`` (numpy broadcasting; either may be a number; integers give float32). Derivatives
    ``log(y)`` and ``x / y``; neither branch of the selection sees a value whose derivative is NaN."""
    _check_operand(x, "xlogy", "input")
    _check_operand(y, "xlogy", "other")
    if not (_is_tensor(x) or _is_tensor(y)):
        raise ArgumentTypeError("xlogy: one of input and other must be a tensor, got two numbers")
    x, y = _to_float(ops, x), _to_float(ops, y)
    if not _is_tensor(y):
        y = ops.full(shape=(), value=float(y), dtype=x.dtype.name)
    if not _is_tensor(x):
        x = ops.full(shape=(), value=float(x), dtype=y.dtype.name)
    zero_x = ops.logical_and(ops.eq(x, 0.0), ops.eq(y, y))
    tame = ops.logical_and(zero_x, ops.logical_and(ops.gt(y, 0.0), ops.lt(y, _INF)))
    at_zero = ops.add(ops.mul(x, ops.log(ops.where(tame, y, 1.0))), 0.0)  # +0.0 turns -0 into 0
    elsewhere = ops.mul(x, ops.log(ops.where(zero_x, 1.0, y)))
    return ops.where(zero_x, at_zero, elsewhere)


def clamp_min(ops: Interpreter, x: AnyTensor, lo: Any) -> AnyTensor:
    """``max(x, lo)`` elementwise (broadcasting), as ``torch.clamp_min``: a NaN bound gives NaN, a NaN ``x``
    stays NaN; the gradient goes to ``x`` where ``x >= lo`` and to a tensor ``lo`` where ``x < lo``."""
    _check_operand(lo, "clamp_min", "min")
    return _clamp_one(ops, x, lo, ops.lt)


def clamp_max(ops: Interpreter, x: AnyTensor, hi: Any) -> AnyTensor:
    """``min(x, hi)`` elementwise (broadcasting), as ``torch.clamp_max`` (NaN as :func:`clamp_min`)."""
    _check_operand(hi, "clamp_max", "max")
    return _clamp_one(ops, x, hi, ops.gt)


def _clamp_one(ops: Interpreter, x: AnyTensor, bound: Any, beyond: Any) -> AnyTensor:
    """``bound`` where ``beyond(x, bound)`` or the bound is NaN, else ``x``."""
    if isinstance(bound, float) and bound != bound:
        return ops.where(ops.eq(x, x), bound, x)
    take = beyond(x, bound)
    if _is_tensor(bound) and bound.dtype.numpy.kind == "f":
        take = ops.logical_or(take, ops.ne(bound, bound))
    return ops.where(take, bound, x)


# Giles' single-precision approximation of erfinv ("Approximating the erfinv function", 2010), in
# w = -log((1 - y)(1 + y)): one polynomial for w < 5, one in sqrt(w) beyond. Newton steps refine it.
_ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                   -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _horner(ops: Interpreter, coefficients: Sequence[float], w: AnyTensor) -> AnyTensor:
    p: Any = coefficients[0]
    for c in coefficients[1:]:
        p = ops.add(ops.mul(w, p), c)
    return p


def _erf_slope(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """``erf'(x) = 2 / sqrt(pi) * exp(-x**2)``."""
    return ops.mul(ops.exp(ops.neg(ops.mul(x, x))), _TWO_OVER_SQRT_PI)


def _newton_step(ops: Interpreter, x: AnyTensor, y: AnyTensor) -> AnyTensor:
    """One Newton step towards ``erf(x) == y``."""
    return ops.sub(x, ops.div(ops.sub(ops.erf(x), y), _erf_slope(ops, x)))


def erfinv(ops: Interpreter, y: AnyTensor) -> AnyTensor:
    """The inverse of ``erf`` on ``[-1, 1]``, as ``torch.erfinv``: ``-inf``/``inf`` at ``-1``/``1``, NaN outside
    and at NaN; integers give float32. float32 is computed in float64 (Giles' approximation, two Newton steps
    on ``erf``) and rounds to float32's nearest or next value. float64 matches to ~1e-15 relative for
    ``|y| <= 0.9``; closer to 1 its error grows as ``1e-16 / (1 - |y|)`` (``erf`` near 1 holds too few bits for
    Newton's step; its derivative is ill-conditioned there too). The derivative ``sqrt(pi) / 2 * exp(x**2)``
    (``inf`` at ``+-1``, NaN outside, as PyTorch) and its next two are those of ``erfinv`` (a Newton step is
    taken on a first-order form for the derivatives; beyond the third they drift)."""
    y = _to_float(ops, y)
    dtype = y.dtype.name
    v = ops.stop_gradient(y if dtype == "float64" else ops.cast(y, dtype="float64"))
    inside = ops.lt(ops.abs(v), 1.0)
    safe = ops.where(inside, v, 0.0)
    w = ops.neg(ops.log(ops.mul(ops.sub(1.0, safe), ops.add(1.0, safe))))
    central = _horner(ops, _ERFINV_CENTRAL, ops.sub(ops.where(ops.lt(w, 5.0), w, 5.0), 2.5))
    tail = _horner(ops, _ERFINV_TAIL, ops.sub(ops.sqrt(ops.where(ops.lt(w, 5.0), 5.0, w)), 3.0))
    x = ops.mul(ops.where(ops.lt(w, 5.0), central, tail), safe)
    for _ in range(2):
        x = _newton_step(ops, x, safe)
    edge = ops.where(ops.eq(v, 1.0), _INF, ops.where(ops.eq(v, -1.0), -_INF, float("nan")))
    solved = ops.stop_gradient(ops.where(inside, x, edge))
    held = solved if dtype == "float64" else ops.cast(solved, dtype=dtype)
    finite = _d.isfinite(ops, held)
    tame, y_tame = ops.where(finite, held, 0.0), ops.where(finite, y, 0.0)
    # derivatives: first order from held + (y - stop(y)) / erf'(held), then one live Newton step on it, which
    # makes them right through the third order; the value stays the solve (x - stop(x) is 0)
    first = ops.add(tame, ops.div(ops.sub(y_tame, ops.stop_gradient(y_tame)), _erf_slope(ops, tame)))
    newton = _newton_step(ops, first, y_tame)
    inner = ops.add(held, ops.sub(newton, ops.stop_gradient(newton)))
    # at +-1 the value is +-inf and PyTorch's derivative +inf, NaN outside: held * y**2 has both (y**2 is 1 there)
    return ops.where(finite, inner, ops.mul(held, ops.mul(y, y)))


# ---- reductions and scans ----------------------------------------------------------------------------

def cumprod(ops: Interpreter, x: AnyTensor, dim: int, dtype: Any = None) -> AnyTensor:
    """Running products along ``dim``, as ``torch.cumprod``: bool and integer inputs accumulate in int64,
    floats keep their dtype (``dtype`` converts first); a 0-d tensor is its own running product.

    Built as a doubling scan of ``ceil(log2(n))`` steps (each multiplies by the running products ``2**k``
    places back, 1 before the start), so its derivatives are those of products: exact with zeros (no
    division), as PyTorch's. The number of steps needs the size of ``dim``: ``tp.compile`` specialises on it,
    and an export cannot keep that dim dynamic."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise ArgumentTypeError(f"cumprod: dim must be an int, got {type(dim).__name__} {dim!r}")
    if dtype is not None:
        x = x.astype(dtype)
    elif x.dtype.numpy.kind != "f" and x.dtype.name != "int64":
        x = ops.cast(x, dtype="int64")
    if x.ndim == 0:
        _d.check_scalar_dim(dim, "cumprod")
        return x
    axis = _d.normalize_axis(dim, x.ndim, "cumprod")
    n = _static(x.shape[axis], "cumprod")
    out = x
    step = 1
    while step < n:
        starts = tuple(0 for _ in x.shape)
        stops = tuple(n - step if a == axis else s for a, s in enumerate(x.shape))
        kept = ops.slice(out, starts=starts, stops=stops, steps=tuple(1 for _ in x.shape))
        back = ops.pad(kept, pads=tuple((step, 0) if a == axis else (0, 0) for a in range(x.ndim)), value=1.0)
        out = ops.mul(out, back)
        step *= 2
    return out


def nansum(ops: Interpreter, x: AnyTensor, dim: int | Sequence[int] | None = None,
           keepdim: bool = False) -> AnyTensor:
    """The sum over ``dim`` (``None``: every axis) with NaN counted as 0, as ``torch.nansum`` (gradient 0 at
    NaN; integers and bool sum to int64)."""
    if x.dtype.numpy.kind == "f":
        x = ops.where(ops.ne(x, x), 0.0, x)
    return ops.tensor_reduce("reduce_sum", x, dim, keepdim)


def nanmean(ops: Interpreter, x: AnyTensor, dim: int | Sequence[int] | None = None,
            keepdim: bool = False) -> AnyTensor:
    """The mean over ``dim`` of the values that are not NaN, as ``torch.nanmean`` (NaN where all are NaN;
    float input only)."""
    if x.dtype.numpy.kind != "f":
        raise DTypeError(f"nanmean: expected a float tensor, got {x.dtype}; convert with .float() first")
    present = ops.eq(x, x)
    total = nansum(ops, x, dim, keepdim)
    count = ops.cast(ops.tensor_reduce("reduce_sum", ops.cast(present, dtype="int64"), dim, keepdim),
                     dtype=x.dtype.name)
    return ops.div(total, count)


def count_nonzero(ops: Interpreter, x: AnyTensor, dim: int | Sequence[int] | None = None) -> AnyTensor:
    """The number of non-zero entries over ``dim`` (``None``: every axis), int64, as ``torch.count_nonzero``
    (NaN counts as non-zero)."""
    if dim is not None and not isinstance(dim, int) and not (
            isinstance(dim, (tuple, list)) and builtins.all(isinstance(d, int) for d in dim)):
        raise ArgumentTypeError(f"count_nonzero: dim must be an int, a tuple of ints or None, got {dim!r}")
    truth: AnyTensor = x if x.dtype.name == "bool" else ops.ne(x, 0)
    return ops.tensor_reduce("reduce_sum", ops.cast(truth, dtype="int64"), dim, False)


# ---- structure and products --------------------------------------------------------------------------

def meshgrid(ops: Interpreter, tensors: Sequence[AnyTensor], indexing: str = "ij") -> tuple[AnyTensor, ...]:
    """Coordinate grids of 1-d (or 0-d) tensors ``t_i[n_i]``, as ``torch.meshgrid``: each result has shape
    ``[n_0, n_1, ...]`` (``indexing="ij"``) or ``[n_1, n_0, n_2, ...]`` (``"xy"``: the first two swapped), with
    ``t_i``'s values along its own axis. All of one dtype."""
    if indexing not in ("ij", "xy"):
        raise ArgumentError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    if not tensors:
        raise ArgumentError("meshgrid: expected at least one tensor")
    for i, t in enumerate(tensors):
        _check_tensor(t, "meshgrid", f"tensors[{i}]")
        if t.ndim > 1:
            raise ShapeError(f"meshgrid: expected 0-d or 1-d tensors, got shape {list(t.shape)} at position {i}")
        if t.dtype != tensors[0].dtype:
            raise DTypeError(f"meshgrid: expected all tensors to have dtype {tensors[0].dtype}, got {t.dtype} "
                             f"at position {i}")
    flat = [_d.reshape(ops, t, (-1,)) for t in tensors]
    swap = indexing == "xy" and len(flat) >= 2
    order = [1, 0, *range(2, len(flat))] if swap else list(range(len(flat)))
    shape = tuple(flat[i].shape[0] for i in order)
    out = []
    for i, t in enumerate(flat):
        position = order.index(i)
        view = _d.reshape(ops, t, tuple(s if a == position else 1 for a, s in enumerate(shape)))
        out.append(_d.expand(ops, view, shape))
    return tuple(out)


def _dims_pair(a: AnyTensor, b: AnyTensor, dims: Any) -> tuple[list[int], list[int]]:
    if isinstance(dims, int) and not isinstance(dims, bool):
        if dims < 0 or dims > builtins.min(a.ndim, b.ndim):
            raise ArgumentError(f"tensordot: dims must be between 0 and {builtins.min(a.ndim, b.ndim)} for shapes "
                                f"{list(a.shape)} and {list(b.shape)}, got {dims}")
        return list(range(a.ndim - dims, a.ndim)), list(range(dims))
    if isinstance(dims, (tuple, list)) and len(dims) == 2:
        pair = [[d] if isinstance(d, int) else d for d in dims]
        if builtins.all(isinstance(d, (tuple, list)) and builtins.all(
                isinstance(i, int) and not isinstance(i, bool) for i in d) for d in pair):
            if len(pair[0]) != len(pair[1]):
                raise ArgumentError(f"tensordot: the two lists of dims differ in length: {list(pair[0])} and "
                                    f"{list(pair[1])}")
            da = [_d.normalize_axis(i, a.ndim, "tensordot") for i in pair[0]]
            db = [_d.normalize_axis(i, b.ndim, "tensordot") for i in pair[1]]
            if len(set(da)) != len(da) or len(set(db)) != len(db):
                raise AxisError(f"tensordot: a dim is repeated in {list(pair[0])} or {list(pair[1])}")
            return da, db
    raise ArgumentTypeError(f"tensordot: dims must be an int or a pair of lists of ints, got {dims!r}")


def tensordot(ops: Interpreter, a: AnyTensor, b: AnyTensor, dims: Any = 2) -> AnyTensor:
    """The sum of products of ``a`` and ``b`` over the paired dims, as ``torch.tensordot``: ``dims=k`` pairs
    ``a``'s last ``k`` dims with ``b``'s first ``k``; ``dims=([i...], [j...])`` pairs ``a``'s ``i`` with ``b``'s
    ``j``. The result has ``a``'s other dims, then ``b``'s. One matrix product; both of one dtype."""
    _check_tensor(a, "tensordot", "a")
    _check_tensor(b, "tensordot", "b")
    if a.dtype != b.dtype:
        raise DTypeError(f"tensordot: expected both inputs to have the same dtype, got {a.dtype} and {b.dtype}")
    da, db = _dims_pair(a, b, dims)
    for i, j in zip(da, db):
        m, n = a.shape[i], b.shape[j]
        if isinstance(m, int) and isinstance(n, int) and m != n:
            raise ShapeError(f"tensordot: dim {i} of a (size {m}) and dim {j} of b (size {n}) differ: shapes "
                             f"{list(a.shape)} and {list(b.shape)}")
    free_a = [i for i in range(a.ndim) if i not in da]
    free_b = [j for j in range(b.ndim) if j not in db]
    left = _d.permute(ops, a, free_a + da)
    right = _d.permute(ops, b, db + free_b)
    k = _d.numel_of([a.shape[i] for i in da])
    out_shape = [a.shape[i] for i in free_a] + [b.shape[j] for j in free_b]
    product = ops.matmul(_d.reshape(ops, left, (_d.numel_of([a.shape[i] for i in free_a]), k)),
                         _d.reshape(ops, right, (k, _d.numel_of([b.shape[j] for j in free_b]))))
    return _d.reshape(ops, product, tuple(out_shape))


def cdist(ops: Interpreter, x1: AnyTensor, x2: AnyTensor, p: float = 2.0) -> AnyTensor:
    """Pairwise ``p``-norm distances, as ``torch.cdist``: ``x1[*B, P, M]``, ``x2[*B, R, M]`` to ``[*B, P, R]``
    (batch dims broadcast); ``p >= 0`` (``inf`` the largest difference). Computed from the differences (no
    ``|a|^2 + |b|^2 - 2ab`` cancellation); the gradient at a zero distance is 0, as PyTorch's."""
    _check_tensor(x1, "cdist", "x1")
    _check_tensor(x2, "cdist", "x2")
    for name, t in (("x1", x1), ("x2", x2)):
        if t.dtype.numpy.kind != "f":
            raise DTypeError(f"cdist: expected a float tensor for {name}, got {t.dtype}")
        if t.ndim < 2:
            raise ShapeError(f"cdist: expected {name} with at least 2 dims [*B, rows, features], got shape "
                             f"{list(t.shape)}")
    if x1.dtype != x2.dtype:
        raise DTypeError(f"cdist: expected x1 and x2 of one dtype, got {x1.dtype} and {x2.dtype}")
    m1, m2 = x1.shape[-1], x2.shape[-1]
    if isinstance(m1, int) and isinstance(m2, int) and m1 != m2:
        raise ShapeError(f"cdist: x1 and x2 must have the same number of features (last dim), got shapes "
                         f"{list(x1.shape)} and {list(x2.shape)}")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not p >= 0:
        raise ArgumentError(f"cdist: p must be a non-negative number, got {p!r}")
    diff = ops.sub(_d.unsqueeze(ops, x1, -2), _d.unsqueeze(ops, x2, -3))
    return _d.norm(ops, diff, float(p), -1, False)


__all__ = ["addcdiv", "addcmul", "cdist", "clamp_max", "clamp_min", "count_nonzero", "cumprod", "erfinv", "lerp",
           "logaddexp", "logaddexp2", "logit", "meshgrid", "nanmean", "nansum", "tensordot", "xlogy"]
