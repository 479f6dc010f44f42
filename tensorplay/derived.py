"""Derived operations, written once against :class:`~tensorplay.ops.Ops`.

Every function here takes the interpreter first (``ops``) and composes
primitives, so it runs eagerly, under the graph recorder and inside any
transform. Tensor methods (``x.mean()``, ``x[1:, None]``) call these.
The prefix-polymorphic layer operations (``linear``, ``conv``, pooling,
``layer_norm``, ``attention``) live in :mod:`tensorplay.prefix`.
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np

from tensorplay import dtypes as _dtypes
from tensorplay.dtypes import plain_array
from tensorplay.errors import ArgumentError, ArgumentTypeError, AxisError, DTypeError, ShapeError
from tensorplay.pydata import check_scalar_fits
from tensorplay import compile_hooks
from tensorplay import tensor as _tensor_module
from tensorplay.symbolic import SymDim

if TYPE_CHECKING:
    from tensorplay.ops import Interpreter

AnyTensor = Any  # Tensor[*tuple[Any, ...]] at run time; kept loose to avoid a cycle in annotations


# ---- small helpers -----------------------------------------------------------------------------

def normalize_axis(axis: int, ndim: int, where: str) -> int:
    """``axis`` in ``[-ndim, ndim)`` mapped to ``[0, ndim)``; otherwise an :class:`AxisError` naming ``where``."""
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise AxisError(f"{where}: axis must be an int, got {type(axis).__name__} {axis!r}")
    if not -ndim <= axis < ndim:
        raise AxisError(f"{where}: axis {axis} is out of range for a tensor of rank {ndim} "
                        f"(expected {-ndim} <= axis < {ndim})" if ndim else
                        f"{where}: axis {axis} is out of range for a 0-d tensor (it has no axes)")
    return int(axis) % ndim if ndim else 0


def refuse_bool(x: AnyTensor, where: str) -> None:
    """A :class:`DTypeError` naming ``where`` when ``x`` is a bool tensor: for the orderings PyTorch has no
    bool kernel (``argmax``, ``argmin``, ``topk``), though it sorts and takes the max of one."""
    if x.dtype.name == "bool":
        raise DTypeError(f"{where}: input must be an int or float tensor, got bool (input: bool{list(x.shape)}); "
                         "cast it first, e.g. x.int()")


def check_scalar_dim(dim: int, where: str) -> None:
    """Check a ``dim`` given to a reduction-like operation of a 0-d tensor: as in PyTorch, ``0`` and ``-1``
    name the tensor itself (the result is 0-d); anything else is an :class:`AxisError` naming ``where``."""
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise AxisError(f"{where}: axis must be an int, got {type(dim).__name__} {dim!r}")
    if dim not in (0, -1):
        raise AxisError(f"{where}: axis {dim} is out of range for a 0-d tensor (expected -1 or 0, which name "
                        "the tensor itself)")


EmptyDim = Literal["all", "none", "error"]
"""What an empty ``dim`` (``()`` or ``[]``) means to :func:`normalize_axes`: every axis (PyTorch's reductions
``sum``, ``mean``, ``amax``, ``var``, ``norm``, ...), no axis (``any``, ``all``, ``squeeze``), or an error
(``prod``, whose PyTorch form takes one int)."""


def is_empty_dim(dim: object) -> bool:
    """Whether ``dim`` is an empty tuple or list of axes (``()``, ``[]``)."""
    return isinstance(dim, (tuple, list)) and builtins.len(dim) == 0


def normalize_axes(axes: int | Sequence[int] | None, ndim: int, where: str, *,
                   empty: EmptyDim = "none") -> tuple[int, ...]:
    """Normalise one axis, several, or ``None`` (all axes) of a reduction over a rank-``ndim`` tensor to a
    sorted tuple without duplicates. An empty tuple or list means what ``empty`` says: no axis (``"none"``,
    the default: ``()``), every axis (``"all"``, as ``torch.sum(x, ())`` reduces every axis), or an
    :class:`AxisError` naming ``where`` (``"error"``). Of a 0-d tensor, as in PyTorch, the axis ``0`` or
    ``-1`` (alone or in a tuple) names the tensor itself and reduces nothing: ``()``."""
    if axes is None or (empty == "all" and is_empty_dim(axes)):
        return tuple(range(ndim))
    if empty == "error" and is_empty_dim(axes):
        raise AxisError(f"{where}: dim must be an int or a non-empty tuple of ints, got {axes!r} (as in PyTorch, "
                        f"where {where} takes one int); leave dim out (None) to reduce every axis")
    seq = tuple(axes) if isinstance(axes, (tuple, list)) else (axes,)  # one axis: normalize_axis checks it
    if ndim == 0:
        for a in seq:
            check_scalar_dim(a, where)
        if len(seq) > 1:
            raise AxisError(f"{where}: duplicate axes {list(seq)} for a 0-d tensor (0 and -1 both name it)")
        return ()
    out = tuple(normalize_axis(a, ndim, where) for a in seq)
    if len(set(out)) != len(out):
        raise AxisError(f"{where}: duplicate axes {list(seq)} for a tensor of rank {ndim}")
    return tuple(sorted(out))


def shape_args(args: Sequence[Any]) -> tuple[Any, ...]:
    """Accept both ``f(2, 3)`` and ``f((2, 3))`` spellings of a shape."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)


def operand(value: Any, ops: Interpreter) -> Any:
    """Accept a Tensor or a Python scalar as an operand (a symbolic size, such as ``x.shape[0]`` under
    graph capture, counts as an int scalar); numpy scalars become Python scalars, numpy arrays become
    constants of ``ops``. Anything else is a :class:`DTypeError`."""
    if isinstance(value, (_tensor_module.Tensor, bool, int, float, SymDim)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return ops.constant(plain_array(value, "operand"))
    raise DTypeError(f"expected a Tensor or a Python scalar as operand, got {type(value).__name__}")


def numel_of(shape: Sequence[Any]) -> Any:
    """Product of a shape's entries (ints or symbolic dims)."""
    n: Any = 1
    for d in shape:
        n = n * d
    return n


# ---- reductions --------------------------------------------------------------------------------

def reduce(ops: Interpreter, prim: str, x: AnyTensor, dim: int | Sequence[int] | None,
           keepdim: bool) -> AnyTensor:
    """``reduce_sum``/``reduce_max``/``reduce_min`` over ``dim`` (``None`` or an empty ``()``/``[]``: every
    axis, as ``torch.sum(x, ())``)."""
    axes = normalize_axes(dim, x.ndim, prim, empty="all")
    return getattr(ops, prim)(x, axes=axes, keepdims=keepdim)


def prod(ops: Interpreter, x: AnyTensor, dim: int | Sequence[int] | None, keepdim: bool,
         dtype: Any = None) -> AnyTensor:
    """Product over ``dim`` (``None``: every axis, a 0-d result), as ``torch.prod``: ``x[*S]`` to ``S``
    without the reduced axes (size 1 there with ``keepdim``). bool and integer inputs give int64, floats
    keep their dtype; ``dtype`` converts ``x`` first (the result then has that dtype). The product of
    no elements is 1. An empty ``dim`` (``()``, ``[]``) is an :class:`AxisError`, as PyTorch refuses it."""
    axes = normalize_axes(dim, x.ndim, "prod", empty="error")
    if dtype is not None:
        target = _dtypes.to_dtype(dtype)
        x = x.astype(target)
        out = ops.reduce_prod(x, axes=axes, keepdims=keepdim)
        return out if out.dtype == target else ops.cast(out, dtype=target.name)
    return ops.reduce_prod(x, axes=axes, keepdims=keepdim)


def logsumexp(ops: Interpreter, x: AnyTensor, dim: int | Sequence[int], keepdim: bool) -> AnyTensor:
    """``log(sum(exp(x)))`` over ``dim`` (one axis or a tuple; required), as ``torch.logsumexp``: ``x[*S]``
    to ``S`` without the reduced axes (size 1 there with ``keepdim``). An empty ``dim`` (``()``, ``[]``)
    reduces every axis (PyTorch gives that with ``keepdim=True`` and fails without it); a 0-d tensor takes
    ``0`` or ``-1`` and is its own result. bool and integer inputs become float32, floats keep their dtype.

    Computed as ``m + log(sum(exp(x - m)))`` with ``m`` the largest value other than ``+inf`` of each group,
    a constant to every derivative (``0`` where it is not finite), so ``1e4`` does not overflow. Over no
    elements the result is ``-inf``; a group of ``-inf`` gives ``-inf``, one with a ``+inf`` gives ``+inf``,
    NaN propagates. The gradient is ``softmax`` over the group (``exp(x - result)``), as PyTorch's also at
    the edges: NaN for a group of ``-inf``, and for one with a ``+inf`` NaN at the ``+inf`` and 0 elsewhere."""
    if dim is None or isinstance(dim, str):
        raise AxisError(f"logsumexp: dim is required (an int or a tuple of ints), got {dim!r}")
    axes = normalize_axes(dim, x.ndim, "logsumexp", empty="all")
    if x.dtype.numpy.kind != "f":
        x = ops.cast(x, dtype="float32")
    if builtins.any(isinstance(x.shape[a], int) and x.shape[a] == 0 for a in axes):  # nothing to shift by
        return ops.log(ops.reduce_sum(ops.exp(x), axes=axes, keepdims=keepdim))
    inf = float("inf")
    held = ops.stop_gradient(x)
    held = ops.where(ops.eq(held, inf), -inf, held)
    symbolic = [a for a in axes if not isinstance(x.shape[a], int)]
    if symbolic:  # a size that may be 0 when the program runs: one -inf more keeps the max defined
        held = ops.pad(held, pads=tuple((0, 1 if a in symbolic else 0) for a in range(x.ndim)), value=-inf)
    peak = ops.reduce_max(held, axes=axes, keepdims=True)
    shift = ops.where(isfinite(ops, peak), peak, 0.0)
    total = ops.reduce_sum(ops.exp(ops.sub(x, shift)), axes=axes, keepdims=keepdim)
    if not keepdim:
        shift = reshape(ops, shift, tuple(total.shape))
    return ops.add(ops.log(total), shift)


def mean(ops: Interpreter, x: AnyTensor, dim: int | Sequence[int] | None, keepdim: bool) -> AnyTensor:
    """Mean over ``dim`` (``None`` or an empty ``()``/``[]``: every axis); the mean over zero elements is NaN
    (as PyTorch). Integer input is refused."""
    if x.dtype.numpy.kind != "f":
        raise DTypeError(f"mean: expected a float tensor, got {x.dtype}; convert with .float() first")
    axes = normalize_axes(dim, x.ndim, "mean", empty="all")
    count = numel_of([x.shape[a] for a in axes])
    total = ops.reduce_sum(x, axes=axes, keepdims=keepdim)
    return ops.div(total, count)


def var(ops: Interpreter, x: AnyTensor, dim: int | Sequence[int] | None, keepdim: bool,
        correction: int, where: str = "var") -> AnyTensor:
    """Variance over ``dim`` (``None`` or an empty ``()``/``[]``: every axis) with ``correction`` subtracted
    from the count (Bessel's correction is 1). Integer and bool input is refused, naming ``where``."""
    if x.dtype.numpy.kind != "f":
        raise DTypeError(f"{where}: expected a float tensor, got {x.dtype} of shape {tuple(x.shape)}; std and var "
                         "only take floating-point tensors (convert with .float() first)")
    axes = normalize_axes(dim, x.ndim, where, empty="all")
    count = numel_of([x.shape[a] for a in axes])
    centred = ops.sub(x, mean(ops, x, axes, True))
    total = ops.reduce_sum(ops.mul(centred, centred), axes=axes, keepdims=keepdim)
    return ops.div(total, builtins.max(count - correction, 0) * 1.0)


def safe_sqrt(ops: Interpreter, s: AnyTensor) -> AnyTensor:
    """``sqrt(s)`` for ``s >= 0`` whose derivative at ``s == 0`` is 0 instead of infinite (PyTorch's
    convention for ``norm`` and ``std`` at zero: the gradient there is 0, not NaN)."""
    zero = ops.eq(s, 0.0)
    return ops.where(zero, 0.0, ops.sqrt(ops.where(zero, 1.0, s)))


def _safe_pow(ops: Interpreter, a: AnyTensor, exponent: float) -> AnyTensor:
    """``a ** exponent`` for ``a >= 0`` and ``exponent > 0`` with derivative 0 at ``a == 0``."""
    zero = ops.eq(a, 0.0)
    return ops.where(zero, 0.0, ops.pow(ops.where(zero, 1.0, a), exponent))


def std(ops: Interpreter, x: AnyTensor, dim: int | Sequence[int] | None, keepdim: bool,
        correction: int) -> AnyTensor:
    """Standard deviation: ``sqrt(var)`` with ``correction`` (see :func:`var`); the gradient of a
    constant sample (``std == 0``) is 0, as PyTorch."""
    return safe_sqrt(ops, var(ops, x, dim, keepdim, correction, "std"))


def norm(ops: Interpreter, x: AnyTensor, p: float | str, dim: int | Sequence[int] | None,
         keepdim: bool) -> AnyTensor:
    """The vector ``p``-norm over ``dim`` (all axes when ``None`` or empty: ``()``, ``[]``), as ``torch.norm``:
    ``"fro"`` (over at most two axes, or all of them with no ``dim``) and ``2`` are ``sqrt(sum(x^2))``, ``1``
    is ``sum(|x|)``, ``inf``/``-inf`` the largest and smallest ``|x|``, ``0`` the number of non-zeros, any
    other ``p`` ``sum(|x|^p)^(1/p)``. The gradient at a zero vector is 0 (PyTorch's convention), ties of
    ``inf`` split."""
    if x.dtype.numpy.kind != "f":
        raise DTypeError(f"norm: expected a float tensor, got {x.dtype}; convert with .float() first")
    axes = normalize_axes(dim, x.ndim, "norm", empty="all")
    if isinstance(p, str):
        if p != "fro":
            raise ArgumentError(f"norm: p must be a number or 'fro', got {p!r} (the nuclear norm is not supported)")
        if dim is not None and not is_empty_dim(dim) and builtins.len(axes) > 2:
            raise AxisError(f"norm: p='fro' takes at most 2 dims, got {list(axes)}; use p=2 for a vector norm")
        p = 2.0
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        raise ArgumentTypeError(f"norm: p must be a number or 'fro', got {type(p).__name__} {p!r}")

    def total(t: AnyTensor) -> AnyTensor:
        return ops.reduce_sum(t, axes=axes, keepdims=keepdim)

    if p == 2:
        return safe_sqrt(ops, total(ops.mul(x, x)))
    if p == 1:
        return total(ops.abs(x))
    if p == float("inf"):
        return ops.reduce_max(ops.abs(x), axes=axes, keepdims=keepdim)
    if p == float("-inf"):
        return ops.reduce_min(ops.abs(x), axes=axes, keepdims=keepdim)
    if p == 0:
        return total(ops.cast(ops.ne(x, 0.0), dtype=x.dtype.name))
    if p > 0:
        return _safe_pow(ops, total(_safe_pow(ops, ops.abs(x), float(p))), 1.0 / p)
    return ops.pow(total(ops.pow(ops.abs(x), float(p))), 1.0 / p)


def _truth(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """``x`` as bool (non-zero, NaN included, is true)."""
    return x if x.dtype.name == "bool" else ops.ne(x, 0)


def any_true(ops: Interpreter, x: AnyTensor, dim: int | Sequence[int] | None, keepdim: bool) -> AnyTensor:
    """Whether any element over ``dim`` is non-zero (bool; ``False`` over no elements). An empty ``dim``
    (``()``, ``[]``) reduces no axis, as ``torch.any``: the result is ``x != 0`` itself."""
    axes = normalize_axes(dim, x.ndim, "any")
    truth = _truth(ops, x)
    return ops.gt(ops.reduce_sum(truth, axes=axes, keepdims=keepdim), 0) if axes else truth


def all_true(ops: Interpreter, x: AnyTensor, dim: int | Sequence[int] | None, keepdim: bool) -> AnyTensor:
    """Whether every element over ``dim`` is non-zero (bool; ``True`` over no elements). An empty ``dim``
    (``()``, ``[]``) reduces no axis, as ``torch.all``: the result is ``x != 0`` itself."""
    axes = normalize_axes(dim, x.ndim, "all")
    truth = _truth(ops, x)
    return ops.eq(ops.reduce_sum(ops.logical_not(truth), axes=axes, keepdims=keepdim), 0) if axes else truth


def cumsum(ops: Interpreter, x: AnyTensor, dim: int) -> AnyTensor:
    """Running sums along ``dim`` (a 0-d tensor is its own running sum, as PyTorch)."""
    if x.ndim == 0:
        check_scalar_dim(dim, "cumsum")
        return reshape(ops, ops.cumsum(reshape(ops, x, (1,)), axis=0), ())
    return ops.cumsum(x, axis=normalize_axis(dim, x.ndim, "cumsum"))


def arg_reduce(ops: Interpreter, prim: str, x: AnyTensor, dim: int | None, keepdim: bool) -> AnyTensor:
    """``argmax``/``argmin`` along ``dim``; ``None`` means over the flattened tensor. Of a 0-d tensor
    ``dim`` 0 or -1 gives the 0-d index 0 (with or without ``keepdim``, as PyTorch)."""
    if dim is not None and x.ndim == 0:
        check_scalar_dim(dim, prim)
        return getattr(ops, prim)(reshape(ops, x, (1,)), axis=0, keepdims=False)
    if dim is None:
        flat = reshape(ops, x, (-1,))
        out = getattr(ops, prim)(flat, axis=0, keepdims=False)
        return reshape(ops, out, (1,) * x.ndim) if keepdim else out
    return getattr(ops, prim)(x, axis=normalize_axis(dim, x.ndim, prim), keepdims=keepdim)


def softmax(ops: Interpreter, prim: str, x: AnyTensor, dim: int) -> AnyTensor:
    """``softmax``/``log_softmax`` (``prim``) of ``x[*S]`` along ``dim``, shaped ``S``. A 0-d tensor takes
    ``dim`` 0 or -1 and is normalised as a vector of one element (1 and 0 for a finite value, NaN for an
    infinite one, as PyTorch)."""
    if x.ndim == 0:
        check_scalar_dim(dim, prim)
        return reshape(ops, getattr(ops, prim)(reshape(ops, x, (1,)), axis=0), ())
    return getattr(ops, prim)(x, axis=dim)


def clamp(ops: Interpreter, x: AnyTensor, lo: Any, hi: Any) -> AnyTensor:
    """Limit ``x`` to ``[lo, hi]`` (``hi`` wins when ``lo > hi``); NaN stays NaN. The gradient is 1
    inside the closed interval, bounds included, and 0 outside, as PyTorch (``maximum``/``minimum``
    would split it at a bound, where data already clipped to the range sits); a NaN passes its
    gradient through (PyTorch gives it 0). A NaN bound gives NaN where it applies (every element for a
    Python NaN), as PyTorch."""
    out = x
    if lo is not None:
        out = ops.where(_or_nan_bound(ops, ops.lt(out, lo), out, lo), lo, out)
    if hi is not None:
        out = ops.where(_or_nan_bound(ops, ops.gt(out, hi), out, hi), hi, out)
    return out


def _or_nan_bound(ops: Interpreter, past: AnyTensor, x: AnyTensor, bound: Any) -> AnyTensor:
    """``past`` (where ``x`` lies beyond ``bound``), or'ed with where ``bound`` is NaN (a comparison with NaN
    is false, so a NaN bound would otherwise be ignored)."""
    if isinstance(bound, _tensor_module.Tensor):
        if bound.dtype.numpy.kind != "f":
            return past
        return ops.logical_or(past, ops.ne(bound, bound))
    if isinstance(bound, (float, np.floating)) and bound != bound:
        return ops.logical_or(past, ops.eq(x, x) if x.dtype.numpy.kind != "f" else ops.logical_not(past))
    return past


def isfinite(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """True where ``x`` is neither infinite nor NaN (integers and bools are always finite)."""
    if x.dtype.numpy.kind != "f":
        return ops.full(shape=tuple(x.shape), value=True, dtype="bool")
    return ops.lt(ops.abs(x), float("inf"))


def isinf(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """True where ``x`` is ``+inf`` or ``-inf``."""
    if x.dtype.numpy.kind != "f":
        return ops.full(shape=tuple(x.shape), value=False, dtype="bool")
    return ops.eq(ops.abs(x), float("inf"))


def isclose(ops: Interpreter, a: AnyTensor, b: Any, rtol: float, atol: float, equal_nan: bool) -> AnyTensor:
    """``|a - b| <= atol + rtol * |b|`` elementwise, as ``torch.isclose``: equal values (infinities
    included) are close, NaN is close to NaN only with ``equal_nan``; both must have one dtype."""
    if isinstance(b, _tensor_module.Tensor) and b.dtype != a.dtype:
        raise DTypeError(f"isclose: both tensors must have the same dtype, got {a.dtype} and {b.dtype}")
    if a.dtype.numpy.kind != "f":  # integers and bools compare in float32, as PyTorch
        if rtol == 0 and atol == 0:
            return ops.eq(a, b)
        a = ops.cast(a, dtype="float32")
        b = ops.cast(b, dtype="float32") if isinstance(b, _tensor_module.Tensor) else b
    if not isinstance(b, _tensor_module.Tensor):  # a Python number: a 0-d tensor of a's dtype
        b = ops.full(shape=(), value=b, dtype=a.dtype.name)
    close = ops.eq(a, b)
    if equal_nan:
        close = ops.logical_or(close, ops.logical_and(ops.ne(a, a), ops.ne(b, b)))
    error = ops.abs(ops.sub(a, b))
    allowed = ops.add(ops.mul(ops.abs(b), float(rtol)), float(atol))
    return ops.logical_or(close, ops.logical_and(isfinite(ops, error), ops.le(error, allowed)))


def nan_to_num(ops: Interpreter, x: AnyTensor, nan: float, posinf: float | None, neginf: float | None) -> AnyTensor:
    """NaN replaced by ``nan``, ``+inf`` by ``posinf`` and ``-inf`` by ``neginf`` (by default the largest
    and smallest finite value of the dtype); the gradient flows to the finite entries only."""
    if x.dtype.numpy.kind != "f":
        return x
    info = np.finfo(x.dtype.numpy)
    high = float(info.max) if posinf is None else posinf
    low = float(info.min) if neginf is None else neginf
    out = ops.where(ops.ne(x, x), nan, x)
    out = ops.where(ops.eq(x, float("inf")), high, out)
    return ops.where(ops.eq(x, float("-inf")), low, out)


def masked_fill(ops: Interpreter, x: AnyTensor, mask: AnyTensor, value: Any) -> AnyTensor:
    """``value`` where the bool ``mask`` (broadcast to ``x``'s shape) is True, ``x`` elsewhere; the result
    keeps ``x``'s shape and dtype (a float value written into an int tensor truncates, as PyTorch; a number
    the dtype cannot hold raises :class:`OverflowError`)."""
    if not isinstance(mask, _tensor_module.Tensor) or mask.dtype.name != "bool":
        raise DTypeError(f"masked_fill: the mask must be a bool tensor, got "
                         f"{mask.dtype if isinstance(mask, _tensor_module.Tensor) else type(mask).__name__}")
    if isinstance(value, _tensor_module.Tensor) and value.ndim != 0:
        raise ShapeError(f"masked_fill: a tensor value must be 0-d, got shape {list(value.shape)}")
    check_scalar_fits(value, x.dtype.numpy, "masked_fill: value")
    out = ops.where(mask, value, x)
    if tuple(out.shape) != tuple(x.shape):
        raise ShapeError(f"masked_fill: the mask of shape {list(mask.shape)} does not broadcast to the tensor's "
                         f"shape {list(x.shape)}")
    return out if out.dtype == x.dtype else ops.cast(out, dtype=x.dtype.name)


def round_half_even(ops: Interpreter, x: AnyTensor, decimals: int) -> AnyTensor:
    """``x`` rounded to ``decimals`` decimal places, halves to even (PyTorch's ``round``): ``round(x * 10^d)
    / 10^d``, or ``round(x / 10^-d) * 10^-d`` for negative ``decimals``."""
    if isinstance(decimals, bool) or not isinstance(decimals, (int, np.integer)):
        raise DTypeError(f"round: decimals must be an int, got {type(decimals).__name__} {decimals!r}")
    if decimals == 0:
        return ops.round(x)
    if x.dtype.numpy.kind != "f":
        raise DTypeError(f"round: decimals={decimals} needs a float tensor, got {x.dtype}")
    scale = 10.0 ** builtins.abs(int(decimals))
    if decimals > 0:
        return ops.div(ops.round(ops.mul(x, scale)), scale)
    return ops.mul(ops.round(ops.div(x, scale)), scale)


# ---- shape manipulation -------------------------------------------------------------------------

def resolve_shape(shape: Sequence[Any], numel: Any, where: str, given: Sequence[Any]) -> tuple[Any, ...]:
    """Replace one ``-1`` in ``shape`` so that it holds ``numel`` elements."""
    shape = tuple(shape)
    for i, d in enumerate(shape):
        if isinstance(d, bool) or not isinstance(d, (int, np.integer, SymDim)):
            raise ShapeError(f"{where}: size {i} must be an int, got {type(d).__name__} {d!r} in shape {list(shape)}")
    shape = tuple(int(d) if isinstance(d, np.integer) else d for d in shape)
    holes = [i for i, d in enumerate(shape) if isinstance(d, int) and d == -1]
    if len(holes) > 1:
        raise ShapeError(f"{where}: only one dimension can be -1, got shape {list(shape)}")
    if any(isinstance(d, int) and d < -1 for d in shape):
        raise ShapeError(f"{where}: negative size in shape {list(shape)}")
    if not holes:
        return shape
    known = numel_of([d for d in shape if not (isinstance(d, int) and d == -1)])
    if isinstance(known, int) and known == 0:
        raise ShapeError(f"{where}: cannot infer -1 in shape {list(shape)} for a tensor of shape "
                         f"{list(given)}: the other sizes multiply to 0")
    if isinstance(known, int) and isinstance(numel, int) and numel % known:
        raise ShapeError(f"{where}: shape {list(shape)} is invalid for a tensor of shape {list(given)} "
                         f"({numel} elements)")
    filled = list(shape)
    filled[holes[0]] = _inferred_size(numel, known, where, shape, given)
    return tuple(filled)


def _inferred_size(numel: Any, known: Any, where: str, shape: tuple[Any, ...], given: Sequence[Any]) -> Any:
    """``numel / known`` for a ``-1``. With symbolic sizes the division need not be exact as expressions
    (``B*F / (2*B)`` under ``tp.compile(dynamic=True)``, where ``F`` is symbolic too): the symbolic part
    divides exactly and the integer factor floor-divides (``F//2``); ``tp.compile`` guards the remainder
    being 0, and export's probe re-checks the reshape at concrete sizes."""
    if not isinstance(numel, SymDim) or not isinstance(known, SymDim) or len(known._key) != 1:
        return numel // known
    (mono, coef), = known._key
    if coef == 1:
        return numel // known
    quotient = numel // SymDim._from_key(((mono, 1),)) if mono else numel
    remainder = quotient % coef
    if isinstance(remainder, SymDim) and compile_hooks.handler() is not None and not (remainder == 0):
        raise ShapeError(f"{where}: shape {list(shape)} is invalid for a tensor of shape {list(given)}: "
                         f"{numel} elements do not divide by {known}")
    return quotient // coef


def reshape(ops: Interpreter, x: AnyTensor, shape: Sequence[Any]) -> AnyTensor:
    """Same elements, new shape; one entry may be ``-1``. A no-op when the shape is unchanged."""
    target = resolve_shape(shape, numel_of(x.shape), "reshape", x.shape)
    if same_sizes(target, x.shape):
        return x
    return ops.reshape(x, shape=target)


def flatten(ops: Interpreter, x: AnyTensor, start_dim: int, end_dim: int) -> AnyTensor:
    """Merge axes ``start_dim..end_dim`` (inclusive) into one; a 0-d tensor becomes shape ``[1]``, and takes
    only the dims ``0`` and ``-1`` (naming the tensor itself, as PyTorch): another is an :class:`AxisError`."""
    if x.ndim == 0:
        check_scalar_dim(start_dim, "flatten (start_dim)")
        check_scalar_dim(end_dim, "flatten (end_dim)")
        return reshape(ops, x, (1,))
    start = normalize_axis(start_dim, x.ndim, "flatten")
    end = normalize_axis(end_dim, x.ndim, "flatten")
    if start > end:
        raise AxisError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} (rank {x.ndim})")
    shape = tuple(x.shape)
    return reshape(ops, x, shape[:start] + (numel_of(shape[start:end + 1]),) + shape[end + 1:])


def permute(ops: Interpreter, x: AnyTensor, dims: Sequence[int]) -> AnyTensor:
    """Reorder axes; ``dims`` must be a permutation of the axes (negative allowed)."""
    if len(dims) != x.ndim:
        raise AxisError(f"permute: got {len(dims)} dims {list(dims)} for a tensor of rank {x.ndim}")
    perm = tuple(normalize_axis(d, x.ndim, "permute") for d in dims)
    if sorted(perm) != list(range(x.ndim)):
        raise AxisError(f"permute: {list(dims)} is not a permutation of the axes of a rank-{x.ndim} tensor")
    if perm == tuple(range(x.ndim)):
        return x
    return ops.permute(x, perm=perm)


def transpose(ops: Interpreter, x: AnyTensor, dim0: int, dim1: int) -> AnyTensor:
    """Swap axes ``dim0`` and ``dim1``."""
    a = normalize_axis(dim0, x.ndim, "transpose")
    b = normalize_axis(dim1, x.ndim, "transpose")
    perm = list(range(x.ndim))
    perm[a], perm[b] = perm[b], perm[a]
    return permute(ops, x, perm)


def unsqueeze(ops: Interpreter, x: AnyTensor, dim: int) -> AnyTensor:
    """Insert a size-1 axis at ``dim`` (``-1`` appends)."""
    axis = normalize_axis(dim, x.ndim + 1, "unsqueeze")
    shape = tuple(x.shape)
    return ops.reshape(x, shape=shape[:axis] + (1,) + shape[axis:])


def squeeze(ops: Interpreter, x: AnyTensor, dim: int | Sequence[int] | None) -> AnyTensor:
    """Remove size-1 axes: all of them (``dim=None``), or those of ``dim`` (one axis, or a tuple or list of
    axes, as PyTorch) whose size is 1; a named axis of another size is left alone, and ``()`` removes
    nothing. Of a 0-d tensor ``dim`` may be ``0`` or ``-1``, alone or in a tuple (the tensor is returned as
    it is). An axis out of range, or named twice, is an :class:`AxisError`."""
    shape = tuple(x.shape)
    if dim is None:
        target = tuple(d for d in shape if not (isinstance(d, int) and d == 1))
    else:
        axes = normalize_axes(dim, x.ndim, "squeeze")  # a 0-d tensor: () after checking the dims
        target = tuple(d for i, d in enumerate(shape) if i not in axes or d != 1)
    return x if target == shape else ops.reshape(x, shape=target)


def expand(ops: Interpreter, x: AnyTensor, shape: Sequence[Any]) -> AnyTensor:
    """Broadcast to ``shape``; ``-1`` keeps the corresponding existing axis."""
    shape = tuple(shape)
    for i, d in enumerate(shape):
        if isinstance(d, bool) or not isinstance(d, (int, np.integer, SymDim)):
            raise ShapeError(f"expand: size {i} must be an int, got {type(d).__name__} {d!r} in shape {list(shape)}")
    if len(shape) < x.ndim:
        raise ShapeError(f"expand: target shape {list(shape)} has fewer axes than the tensor {list(x.shape)}")
    offset = len(shape) - x.ndim
    target = tuple(x.shape[i - offset] if (isinstance(d, int) and d == -1 and i >= offset) else d
                   for i, d in enumerate(shape))
    if same_sizes(target, x.shape):
        return x
    return ops.broadcast_to(x, shape=target)


def split(ops: Interpreter, x: AnyTensor, split_size_or_sections: int | Sequence[int],
          dim: int) -> tuple[AnyTensor, ...]:
    """Pieces of ``x`` along ``dim`` (views): of ``split_size_or_sections`` each (the last may be
    smaller), or of the listed sizes, which must add up to the axis size (``torch.split``)."""
    axis = normalize_axis(dim, x.ndim, "split")
    n = x.shape[axis]
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = list(split_size_or_sections)
        for s in sizes:
            if isinstance(s, bool) or not isinstance(s, (int, np.integer, SymDim)) or (
                    isinstance(s, (int, np.integer)) and s < 0):
                raise ShapeError(f"split: section sizes must be non-negative ints, got {sizes}")
        total = builtins.sum(sizes)
        if isinstance(total, int) and isinstance(n, (int, np.integer)) and total != n:
            raise ShapeError(f"split: the section sizes {sizes} add up to {total}, but axis {axis} has size {n} "
                             f"(tensor shape {list(x.shape)})")
    elif isinstance(split_size_or_sections, SymDim) and isinstance(n, SymDim) and split_size_or_sections == n:
        sizes = [n]  # ``x.split(x.shape[d], d)``: one piece, whatever the size
    else:
        if isinstance(split_size_or_sections, bool) or not isinstance(split_size_or_sections,
                                                                      (int, np.integer, SymDim)):
            raise ShapeError(f"split: split_size_or_sections must be an int or a list of ints, got "
                             f"{type(split_size_or_sections).__name__} {split_size_or_sections!r}")
        # the number of pieces is a Python int: a symbolic size must give its value (compile specialises)
        what = "split into pieces of a symbolic size (pass the list of sizes to keep them symbolic)"
        size = split_size_or_sections.value_for(what) if isinstance(split_size_or_sections, SymDim) \
            else int(split_size_or_sections)
        if isinstance(n, SymDim):
            n = n.value_for(f"split of an axis of symbolic size {n} (pass the list of sizes to keep it symbolic)")
        if size < 0 or (size == 0 and n != 0):
            raise ShapeError(f"split: split_size must be positive, got {size} for an axis of size {n}")
        sizes = [builtins.min(size, n - start) for start in range(0, n, size)] if n else [0]
    pieces = []
    start: Any = 0
    for size in sizes:
        stop = start + size
        starts = tuple(start if i == axis else 0 for i in range(x.ndim))
        stops = tuple(stop if i == axis else d for i, d in enumerate(x.shape))
        whole = isinstance(size, int) and isinstance(n, int) and size == n
        pieces.append(x if whole else ops.slice(x, starts=starts, stops=stops, steps=(1,) * x.ndim))
        start = stop
    return tuple(pieces)


def chunk(ops: Interpreter, x: AnyTensor, chunks: int, dim: int) -> tuple[AnyTensor, ...]:
    """``x`` split into ``ceil(n / chunks)``-sized pieces along ``dim`` (so possibly fewer than
    ``chunks``; an empty axis gives ``chunks`` empty pieces), as ``torch.chunk``."""
    if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks <= 0:
        raise ShapeError(f"chunk: chunks must be a positive int, got {chunks!r}")
    axis = normalize_axis(dim, x.ndim, "chunk")
    n = x.shape[axis]
    if isinstance(n, SymDim):  # the number of pieces is a Python int: the size gives its value (compile specialises)
        n = n.value_for(f"chunk of an axis of symbolic size {n} (split with a list of sizes keeps it symbolic)")
    if n == 0:
        return split(ops, x, [0] * int(chunks), axis)
    return split(ops, x, -(-int(n) // int(chunks)), axis)


def narrow(ops: Interpreter, x: AnyTensor, dim: int, start: Any, length: int) -> AnyTensor:
    """``x`` restricted to ``start <= i < start + length`` along ``dim`` (a view), as ``torch.narrow``:
    a negative ``start`` counts from the end; ``start`` may be a 0-d integer tensor (its value is read)."""
    axis = normalize_axis(dim, x.ndim, "narrow")
    if hasattr(start, "ndim") and hasattr(start, "item"):
        if start.ndim != 0 or start.dtype.name not in ("int64", "int32"):
            raise ShapeError(f"narrow: start must be an int or a 0-d integer tensor, got a {start.dtype} tensor "
                             f"of shape {list(start.shape)}")
        start = int(start.item())
    for name, value in (("start", start), ("length", length)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ShapeError(f"narrow: {name} must be an int, got {type(value).__name__} {value!r}")
    n = x.shape[axis]
    if not isinstance(n, (int, np.integer)):
        raise ShapeError(f"narrow: axis {axis} has symbolic size {n}; narrow takes a static axis (slice with "
                         f"x[..., a:b] instead)")
    begin = int(start) + int(n) if start < 0 else int(start)
    if not 0 <= begin <= n:
        raise ShapeError(f"narrow: start {start} is out of range for axis {axis} of size {n} "
                         f"(expected {-n} <= start <= {n})")
    if length < 0 or begin + length > n:
        raise ShapeError(f"narrow: start ({begin}) + length ({length}) exceeds the size ({n}) of axis {axis} "
                         f"of the tensor of shape {list(x.shape)}" if length >= 0 else
                         f"narrow: length must be non-negative, got {length}")
    starts = tuple(begin if a == axis else 0 for a in range(x.ndim))
    stops = tuple(begin + int(length) if a == axis else x.shape[a] for a in range(x.ndim))
    return ops.slice(x, starts=starts, stops=stops, steps=(1,) * x.ndim)


def triangle(ops: Interpreter, x: AnyTensor, diagonal: int, lower: bool) -> AnyTensor:
    """``tril`` (``lower``) or ``triu`` of the last two axes: the entries with ``col - row <= diagonal``
    (``>=`` for ``triu``) kept, the others zero."""
    where = "tril" if lower else "triu"
    if x.ndim < 2:
        raise ShapeError(f"{where}: expected a tensor with at least 2 axes, got shape {list(x.shape)}")
    if isinstance(diagonal, bool) or not isinstance(diagonal, (int, np.integer)):
        raise DTypeError(f"{where}: diagonal must be an int, got {type(diagonal).__name__} {diagonal!r}")
    rows, cols = x.shape[-2], x.shape[-1]
    offset = ops.sub(ops.reshape(ops.iota(length=cols, dtype="int64"), shape=(1, cols)),
                     ops.reshape(ops.iota(length=rows, dtype="int64"), shape=(rows, 1)))
    keep = ops.le(offset, int(diagonal)) if lower else ops.ge(offset, int(diagonal))
    return ops.where(keep, x, False if x.dtype.name == "bool" else 0)


def causal_mask(ops: Interpreter, n: Any, m: Any) -> AnyTensor:
    """The bool ``[n, m]`` mask of causal attention, True where ``col <= row`` (``tril`` of ones): a
    constant for int sizes; built from ``iota`` when a size is symbolic, so the size stays dynamic."""
    if not isinstance(n, SymDim) and not isinstance(m, SymDim):
        return ops.constant(np.tril(np.ones((n, m), dtype=bool)))
    rows = ops.reshape(ops.iota(length=n, dtype="int64"), shape=(n, 1))
    cols = ops.reshape(ops.iota(length=m, dtype="int64"), shape=(1, m))
    return ops.le(cols, rows)


def outer(ops: Interpreter, a: AnyTensor, b: AnyTensor) -> AnyTensor:
    """``a[M] b[N] -> [M, N]``, ``out[i, j] = a[i] * b[j]`` (a broadcast product, no matrix product)."""
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeError(f"outer: expected two 1-d tensors, got shapes {list(a.shape)} and {list(b.shape)}")
    return ops.mul(ops.reshape(a, shape=(a.shape[0], 1)), ops.reshape(b, shape=(1, b.shape[0])))


def matmul(ops: Interpreter, a: AnyTensor, b: AnyTensor) -> AnyTensor:
    """``a @ b`` with numpy's rules for 1-d operands (a vector is promoted, then the axis dropped)."""
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"matmul: both operands need at least one axis, got shapes {list(a.shape)} "
                         f"and {list(b.shape)}")
    a2 = unsqueeze(ops, a, 0) if a.ndim == 1 else a
    b2 = unsqueeze(ops, b, -1) if b.ndim == 1 else b
    out = ops.matmul(a2, b2)
    if b.ndim == 1:
        out = squeeze(ops, out, -1)
    if a.ndim == 1:
        out = squeeze(ops, out, -2 if b.ndim > 1 else -1)
    return out


# ---- indexing -----------------------------------------------------------------------------------

def _is_index_tensor(item: Any) -> bool:
    return isinstance(item, (_tensor_module.Tensor, list, np.ndarray))


def has_symbolic_item(key: Any) -> bool:
    """Whether an indexing ``key`` holds a symbolic size (an item, or a slice bound)."""
    for it in (key if isinstance(key, tuple) else (key,)):
        if isinstance(it, SymDim) or (isinstance(it, builtins.slice) and (
                isinstance(it.start, SymDim) or isinstance(it.stop, SymDim) or isinstance(it.step, SymDim))):
            return True
    return False


def getitem(ops: Interpreter, x: AnyTensor, key: Any) -> AnyTensor:
    """numpy-style indexing: basic items (ints, slices with any step, ``None``, ``...``) plus one
    integer tensor (or list), which gathers along its axis, or one bool tensor over ``k`` axes,
    which selects the positions where it is True (eager and execute-mode recording only: the
    result size depends on the data).

    The index's dims replace the axes it indexes, in place. numpy moves them to the front instead
    when an int is separated from the tensor by a slice, ``None`` or ``...`` (``x[0, :, idx]``), and
    PyTorch does not: that one combination is refused (write ``x[0][:, idx]``)."""
    if key is None:  # ``x[None]``: a new leading axis (what the general path below records, without its walk)
        return ops.reshape(x, shape=(1,) + tuple(x.shape))
    items = list(key) if isinstance(key, tuple) else [key]
    tensor_items = [i for i, it in enumerate(items) if _is_index_tensor(it)]
    if builtins.len(tensor_items) > 1:
        raise ShapeError("indexing: only one tensor index per indexing expression is supported, "
                         f"got {builtins.len(tensor_items)}; index one axis at a time")
    consumed = sum(1 for it in items if it is not None and it is not Ellipsis)
    index: AnyTensor = None
    if tensor_items:
        index = items[tensor_items[0]] = _as_index(ops, items[tensor_items[0]])
        if index.dtype.name == "bool":
            consumed += index.ndim - 1
    if sum(1 for it in items if it is Ellipsis) > 1:
        raise ShapeError("indexing: an index can only have a single ellipsis ('...')")
    if consumed > x.ndim:
        raise ShapeError(f"indexing: too many indices for a tensor of rank {x.ndim}: {consumed} given")
    ellipsis = [i for i, it in enumerate(items) if it is Ellipsis]
    if ellipsis:
        pos = ellipsis[0]
        items[pos:pos + 1] = [builtins.slice(None)] * (x.ndim - consumed)
    else:
        items += [builtins.slice(None)] * (x.ndim - consumed)
    if index is not None:
        _check_unambiguous(items)

    shape = tuple(x.shape)
    starts: list[int] = []
    stops: list[int] = []
    steps: list[int] = []
    out_shape: list[Any] = []
    index_axis = -1
    axis = 0
    for it in items:
        if it is None:
            out_shape.append(1)
            continue
        size = shape[axis]
        if isinstance(it, builtins.slice):
            start, stop, step, length = _slice_bounds(it, size, axis)
            _append(starts, stops, steps, start, stop, step)
            out_shape.append(length)
        elif it is index:
            index_axis = axis
            for a in range(axis, axis + (it.ndim if it.dtype.name == "bool" else 1)):
                _append(starts, stops, steps, 0, shape[a], 1)
            if it.dtype.name == "bool":
                axis += it.ndim
                out_shape.append(-1)  # the number of True positions, known once the mask is read
                continue
            out_shape.extend(it.shape)
        else:
            try:
                i = operator.index(it)
            except TypeError:
                raise DTypeError(f"indexing: axis {axis} got an index of type {type(it).__name__}; expected "
                                 "an int, a slice, None, ..., or an integer tensor") from None
            if not isinstance(size, (int, np.integer)):  # a symbolic size: assume the index is in range
                i = i + size if i < 0 else i
            elif not -size <= i < size:
                raise AxisError(f"indexing: index {i} is out of range for axis {axis} of size {size} "
                                f"(tensor shape {list(shape)})")
            else:
                i %= int(size)
            _append(starts, stops, steps, i, i + 1, 1)
        axis += 1
    out = x
    if not (same_sizes(starts, (0,) * builtins.len(shape)) and same_sizes(stops, shape)
            and same_sizes(steps, (1,) * builtins.len(shape))):
        out = ops.slice(out, starts=tuple(starts), stops=tuple(stops), steps=tuple(steps))
    if index is not None and index.dtype.name == "bool":
        out = _mask_select(ops, out, index, index_axis, shape)
        out_shape[out_shape.index(-1)] = out.shape[index_axis]
    elif index is not None:
        out = ops.gather(out, index, axis=index_axis)
    if not same_sizes(out.shape, out_shape):
        out = ops.reshape(out, shape=tuple(out_shape))
    return out


def same_sizes(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Whether two shapes are the same entry for entry, structurally: a symbolic size equals only the same
    expression, never an int (comparing one with an int would make ``tp.compile`` guard on its value)."""
    return builtins.len(a) == builtins.len(b) and all(
        (x == y) if isinstance(x, SymDim) == isinstance(y, SymDim) else False for x, y in zip(a, b))


def _check_unambiguous(items: Sequence[Any]) -> None:
    """Refuse an int separated from the tensor index by a slice or ``None`` before it: there numpy
    puts the index's dims first and PyTorch in place (see :func:`getitem`)."""
    position = next(i for i, it in enumerate(items) if _is_index_tensor(it))
    advanced = [i for i, it in enumerate(items)
                if i == position or (it is not None and not isinstance(it, builtins.slice))]
    adjacent = advanced == list(range(advanced[0], advanced[-1] + 1))
    dims_before = any(it is None or isinstance(it, builtins.slice) for it in items[:position])
    if not adjacent and dims_before:
        raise ShapeError("indexing: an int index and a tensor index separated by a slice, None or '...' "
                         "(as in x[0, :, idx]) place the result's axes differently in numpy (index axes "
                         "first) and PyTorch (in place); index in two steps instead, e.g. x[0][:, idx]")


def check_inplace_operand(where: str, target: AnyTensor, other: Any) -> None:
    """``target op= other`` keeps ``target``'s shape: a tensor ``other`` must broadcast to it (numpy would
    say "non-broadcastable output operand"; PyTorch names both shapes too)."""
    if not isinstance(other, _tensor_module.Tensor):
        return
    shape, other_shape = tuple(target.shape), tuple(other.shape)
    if any(isinstance(d, SymDim) for d in shape + other_shape):
        return  # the shape rule of the recorded operation checks symbolic shapes
    try:
        fits = np.broadcast_shapes(shape, other_shape) == shape
    except ValueError:
        fits = False
    if not fits:
        what = "the source" if where == "copy_" else "the other operand"
        raise ShapeError(f"{where}: {what} has shape {list(other_shape)}, which does not broadcast to the "
                         f"tensor's shape {list(shape)} (an in-place result keeps the tensor's shape)")


class SetitemPlan(NamedTuple):
    """Which elements ``x[index] = value`` writes, for a target of ``shape`` (numpy's rules: with a
    repeated index the last write wins)."""

    shape: tuple[int, ...]  # the target's shape
    region: tuple[int, ...]  # the shape of ``x[index]`` (what ``value`` broadcasts to)
    positions: np.ndarray[Any, Any]  # flat positions written, one per winning region entry
    winners: np.ndarray[Any, Any] | None  # flat region entries that win (``None``: all, no repeats)
    written: np.ndarray[Any, Any]  # bool mask of ``shape``: the positions written


def setitem_plan(shape: tuple[int, ...], index: Any) -> SetitemPlan:
    """The :class:`SetitemPlan` of ``x[index] = value`` on a tensor of ``shape`` (``index`` holds numpy
    values: ints, slices, ``None``, ``...``, int or bool arrays)."""
    size = int(np.prod(shape, dtype=np.int64))
    region_positions = np.arange(size, dtype=np.int64).reshape(shape)[index]
    flat = region_positions.reshape(-1)
    winners = None
    if flat.size:
        last = np.unique(flat[::-1], return_index=True)[1]
        if last.size != flat.size:  # repeated positions: keep each one's last write
            winners = np.sort(flat.size - 1 - last)
            flat = flat[winners]
    written = np.zeros(size, dtype=bool)
    written[flat] = True
    return SetitemPlan(tuple(shape), tuple(region_positions.shape), flat, winners, written.reshape(shape))


def check_setitem_value(value_shape: tuple[Any, ...], region: tuple[Any, ...]) -> None:
    """``x[index] = value``: ``value`` must broadcast to the shape of ``x[index]``."""
    try:
        fits = np.broadcast_shapes(region, value_shape) == region
    except ValueError:
        fits = False
    if not fits:
        raise ShapeError(f"setitem: the value has shape {list(value_shape)}, which does not broadcast to the "
                         f"shape {list(region)} of the indexed region")


def check_setitem_key(key: Any) -> None:
    """A :class:`DTypeError` naming the item of ``x[key] = value``'s key that no index can be: a float,
    complex or string item, or a slice whose start, stop or step is not an int or None (numpy would raise
    a bare TypeError or IndexError); an :class:`ArgumentError` for a slice whose step is 0."""
    for position, item in enumerate(key if isinstance(key, tuple) else (key,)):
        if isinstance(item, slice):
            for what in ("start", "stop", "step"):
                bound = getattr(item, what)
                if bound is not None and not isinstance(bound, SymDim) and not hasattr(type(bound), "__index__"):
                    raise DTypeError(f"setitem: key item {position} is a slice whose {what} is "
                                     f"{type(bound).__name__} {bound!r}; expected an int or None")
            if item.step is not None and not isinstance(item.step, SymDim) and operator.index(item.step) == 0:
                raise ArgumentError(f"setitem: key item {position} is {item!r}; slice step cannot be zero (expected "
                                    "a non-zero int or None)")
        elif isinstance(item, (float, complex, str, bytes, np.floating, np.complexfloating)):
            raise DTypeError(f"setitem: key item {position} is {type(item).__name__} {item!r}; expected an int, a "
                             "slice, ..., None, or an integer or bool tensor")


def setitem_value(ops: Interpreter, old: AnyTensor, value: Any, plan: SetitemPlan) -> AnyTensor:
    """The value of ``old`` after ``old[index] = value`` (planned by :func:`setitem_plan`), built from
    primitives so that it records and differentiates: ``where(written, scatter(value), old)``; a
    value overwritten by a later repeated index gets no gradient."""
    dtype = old.dtype.name
    val = value if isinstance(value, _tensor_module.Tensor) else ops.constant(np.asarray(value, dtype=dtype))
    check_setitem_value(tuple(val.shape), plan.region)
    if tuple(val.shape) != plan.region:
        val = ops.broadcast_to(val, shape=plan.region)
    if val.dtype.name != dtype:
        val = ops.cast(val, dtype=dtype)
    flat = ops.reshape(val, shape=(int(np.prod(plan.region, dtype=np.int64)),))
    if plan.winners is not None:
        flat = ops.gather(flat, ops.constant(plan.winners), axis=0)
    size = int(np.prod(plan.shape, dtype=np.int64))
    zeros = ops.full(shape=(size,), value=0, dtype=dtype)
    scattered = ops.scatter_add(zeros, ops.constant(plan.positions), flat, axis=0)
    return ops.where(ops.constant(plan.written), ops.reshape(scattered, shape=plan.shape), old)


def _basic_setitem_key(key: Any, ndim: int) -> list[Any] | None:
    """``key`` as one ``slice`` or ``int`` per axis when it holds only basic items (ints, slices, ``...``;
    no ``None``, no tensor or list), else ``None``."""
    items = list(key) if isinstance(key, tuple) else [key]
    for it in items:
        if not (it is Ellipsis or isinstance(it, (builtins.slice, int, np.integer, SymDim))) or isinstance(it, bool):
            return None
    if sum(1 for it in items if it is Ellipsis) > 1:
        raise ShapeError("indexing: an index can only have a single ellipsis ('...')")
    consumed = sum(1 for it in items if it is not Ellipsis)
    if consumed > ndim:
        raise ShapeError(f"setitem: too many indices for a tensor of rank {ndim}: {consumed} given")
    if Ellipsis in items:
        pos = items.index(Ellipsis)
        items[pos:pos + 1] = [builtins.slice(None)] * (ndim - consumed)
    return items + [builtins.slice(None)] * (ndim - builtins.len(items))


def symbolic_setitem_value(ops: Interpreter, old: AnyTensor, key: Any, value: Any) -> AnyTensor | None:
    """The value of ``old`` after ``old[key] = value`` for a basic ``key`` (ints and slices with positive
    steps) when a size or a bound is symbolic (``pe = tp.zeros(T, D); pe[:, 0::2] = ...`` under a dynamic
    dim), built from primitives: per axis, the written positions ``i`` (a mask from ``iota``) and the entry
    of ``value`` each reads (``(i - start) // step``, a ``gather``), then ``where``. ``None`` when ``key`` is
    not of that form (the caller refuses it)."""
    shape = tuple(old.shape)
    items = _basic_setitem_key(key, builtins.len(shape))
    if items is None:
        return None
    dtype = old.dtype.name
    val = value if isinstance(value, _tensor_module.Tensor) else ops.constant(np.asarray(value, dtype=dtype))
    bounds = []
    region = []
    for axis, (it, size) in enumerate(zip(items, shape)):
        if not isinstance(it, builtins.slice):
            i = it if isinstance(it, SymDim) else operator.index(it)
            if not isinstance(size, SymDim) and not isinstance(i, SymDim) and not -size <= i < size:
                raise AxisError(f"setitem: index {i} is out of range for axis {axis} of size {size} "
                                f"(tensor shape {list(shape)})")
            i = i + size if i < 0 else i
            bounds.append((i, i + 1, 1, 1))
            continue
        start, stop, step, length = _slice_bounds(it, size, axis)
        if step < 0:
            return None
        bounds.append((start, stop, step, length))
        region.append(length)
    if not any(isinstance(d, SymDim) for d in (*val.shape, *region)):
        check_setitem_value(tuple(val.shape), tuple(region))  # else the rule of broadcast_to checks it
    if not same_sizes(val.shape, region):
        val = ops.broadcast_to(val, shape=tuple(region))
    if val.dtype.name != dtype:
        val = ops.cast(val, dtype=dtype)
    val = ops.reshape(val, shape=tuple(b[3] for b in bounds))  # int items keep a size-1 axis
    written: AnyTensor | None = None
    for axis, (start, stop, step, length) in enumerate(bounds):
        size = shape[axis]
        start_, stop_, length_ = operand(start, ops), operand(stop, ops), operand(length, ops)
        positions = ops.iota(length=size, dtype="int64")
        offset = ops.sub(positions, start_)
        inside = ops.logical_and(ops.ge(offset, 0), ops.lt(positions, stop_))
        if step == 1:
            entry = offset
        else:  # integer floor division through float64: exact for any size an array can have
            entry = ops.cast(ops.floor(ops.div(ops.cast(offset, dtype="float64"), float(step))), dtype="int64")
            inside = ops.logical_and(inside, ops.eq(ops.mul(entry, step), offset))
        # positions outside the region read a padded entry (so an empty region gathers in range too)
        padded = ops.pad(val, pads=tuple((0, 1) if a == axis else (0, 0) for a in range(builtins.len(shape))))
        val = ops.gather(padded, ops.minimum(ops.maximum(entry, 0), length_), axis=axis)
        lead = (1,) * axis + (size,) + (1,) * (builtins.len(shape) - axis - 1)
        mask = ops.reshape(inside, shape=lead)
        written = mask if written is None else ops.logical_and(written, mask)
    if written is None:  # a 0-d target: the whole tensor is written
        return val
    return ops.where(written, val, old)


def _slice_bounds(it: builtins.slice, size: Any, axis: int) -> tuple[Any, Any, int, Any]:
    """``(start, stop, step, length)`` of ``it`` on ``axis``, of ``size``. For a symbolic size (graph
    capture with dynamic dims) the bounds are assumed to lie in range, as they would for a large
    enough static size, except one past the end by a constant (``x.shape[0]``, ``x.shape[0] + 1``), which is
    clamped to the end (``size``, or ``size - 1`` with a negative step) as for a static size; negative
    bounds count from the end. A bound that is not an int (nor None)
    raises :class:`DTypeError` naming the axis."""
    for what, value in (("start", it.start), ("stop", it.stop), ("step", it.step)):
        if value is not None and not isinstance(value, SymDim) and not hasattr(type(value), "__index__"):
            raise DTypeError(f"indexing: axis {axis} got a slice {what} of type {type(value).__name__} "
                             f"({value!r}); expected an int or None")
    if it.step is not None and not isinstance(it.step, SymDim) and operator.index(it.step) == 0:
        raise ArgumentError(f"indexing: axis {axis} got {it!r}; slice step cannot be zero (expected a non-zero "
                            "int or None)")
    if isinstance(size, (int, np.integer)):
        if isinstance(it.start, SymDim) or isinstance(it.stop, SymDim):
            return _symbolic_slice_bounds(it, int(size))
        start, stop, step = it.indices(int(size))
        return start, stop, step, builtins.len(range(start, stop, step))
    step = 1 if it.step is None else operator.index(it.step)  # not 0: checked above

    def bound(value: Any, default: Any, top: int) -> Any:
        if value is None:
            return default
        value = value if isinstance(value, SymDim) else operator.index(value)
        value = value + size if value < 0 else value
        past = value - size  # an int when the bound is the axis's own size plus a constant (x[x.shape[0]::-1])
        return size + top if type(past) is int and past > top else value  # clamped as slice.indices does

    if step > 0:
        start, stop = bound(it.start, 0, 0), bound(it.stop, size, 0)
        return start, stop, step, (stop - start) if step == 1 else (stop - start + step - 1) // step
    start, stop = bound(it.start, size - 1, -1), bound(it.stop, -1, -1)
    return start, stop, step, (start - stop + (-step - 1)) // (-step)


def _symbolic_slice_bounds(it: builtins.slice, size: int) -> tuple[Any, Any, int, Any]:
    """``slice.indices`` for an axis of static ``size`` and bounds that are symbolic sizes (``weight[:T]``,
    ``T = x.shape[1]``): the same clamping, each comparison decided on the sizes (a guard under
    ``tp.compile``; under export the declared ranges decide it, or it becomes a requirement on the dim)."""
    step = 1 if it.step is None else operator.index(it.step)  # not 0: _slice_bounds checked it
    low, high = (0, size) if step > 0 else (-1, size - 1)

    def bound(value: Any, default: int) -> Any:
        if value is None:
            return default
        value = value if isinstance(value, SymDim) else operator.index(value)
        if value < 0:
            value = value + size
        if value < low:
            return low
        return high if value > high else value

    start, stop = bound(it.start, low if step > 0 else high), bound(it.stop, high if step > 0 else low)
    span = stop - start if step > 0 else start - stop
    length = (span + abs(step) - 1) // abs(step) if span >= 0 else 0
    return start, stop, step, length


def _append(starts: list[Any], stops: list[Any], steps: list[Any], start: Any, stop: Any, step: Any) -> None:
    starts.append(start)
    stops.append(stop)
    steps.append(step)


def _as_index(ops: Interpreter, item: Any) -> AnyTensor:
    if isinstance(item, _tensor_module.Tensor):
        if item.dtype.name not in ("int32", "int64", "bool"):
            raise DTypeError(f"indexing: a tensor index must be int64, int32 or bool, got {item.dtype}")
        return item
    array = np.asarray(item)
    if array.size == 0 and array.dtype.kind == "f":  # ``x[[]]``: numpy reads an empty list as float64
        array = array.astype(np.int64)
    if array.dtype.kind not in "iub":
        raise DTypeError(f"indexing: a list index must hold ints or bools, got dtype {array.dtype}")
    return ops.constant(array.astype(np.int64) if array.dtype.kind in "iu" else array)


def _mask_select(ops: Interpreter, x: AnyTensor, mask: AnyTensor, axis: int, given: Sequence[Any]) -> AnyTensor:
    """The positions of ``x`` where ``mask`` (over axes ``axis .. axis + mask.ndim``) is True, as one axis."""
    lead = tuple(x.shape[axis:axis + mask.ndim])
    if lead != tuple(mask.shape):
        raise ShapeError(f"indexing: bool mask of shape {list(mask.shape)} does not match the indexed axes "
                         f"{list(lead)} of a tensor of shape {list(given)}")
    positions = np.flatnonzero(np.asarray(ops.concrete(mask)))
    merged = reshape(ops, x, tuple(x.shape[:axis]) + (-1,) + tuple(x.shape[axis + mask.ndim:]))
    return ops.gather(merged, ops.constant(positions.astype(np.int64)), axis=axis)
