"""Helpers shared by the shape rules and the references.

* formatting shapes for error messages (``[1, 3, 3, 3]``);
* dims that may be ``int`` or symbolic: a size comparison is only checked
  when both sides are ``int`` (:func:`known`);
* numpy broadcasting with messages that name both arguments and the axis;
* axis normalisation (:class:`~tensorplay.spec.errors.AxisError` on a bad axis);
* the window-size formulas of convolution and pooling;
* the bridge between concrete values and avals used by the references.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .aval import Aval
from .dtypes import DEFAULT_FLOAT, DEFAULT_INT, DTYPES, is_float, result_type, weak_kind
from .errors import AxisError, DTypeError, ShapeError

Array = npt.NDArray[Any]


# ---- dims -------------------------------------------------------------------------------------

def is_known(dim: object) -> bool:
    """True when ``dim`` is a concrete integer size (not a symbolic dim, not a bool)."""
    if type(dim) is int:  # the common case, first
        return True
    return isinstance(dim, (int, np.integer)) and not isinstance(dim, (bool, np.bool_))


def known(*dims: object) -> bool:
    """True when every one of ``dims`` is a concrete integer: only then is a comparison checked."""
    return all(is_known(d) for d in dims)


def same_dim(a: object, b: object) -> bool:
    """True when ``a`` and ``b`` are known to be equal (equal ints, or equal symbolic expressions)."""
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # a symbolic dim may refuse to decide
        return False


def fmt_shape(shape: Sequence[Any]) -> str:
    """``(1, 3, 3)`` -> ``"[1, 3, 3]"``; symbolic dims are shown with ``str``."""
    return "[" + ", ".join(str(d) for d in shape) + "]"


def fmt_aval(aval: Aval) -> str:
    """``Aval((2, 3), "float32")`` -> ``"float32[2, 3]"``."""
    return f"{aval.dtype}{fmt_shape(aval.shape)}"


def fmt_tuple(values: Sequence[Any]) -> str:
    """``(1, 2)`` -> ``"(1, 2)"``, also for one entry (``"(1)"`` reads better than ``"(1,)"``)."""
    return "(" + ", ".join(str(v) for v in values) + ")"


def strong(dtype: str) -> str:
    """The concrete dtype of a value: weak scalar kinds become their default dtype."""
    if dtype == "weak_float":
        return DEFAULT_FLOAT
    if dtype == "weak_int":
        return DEFAULT_INT
    if dtype == "weak_bool":
        return "bool"
    return dtype


# ---- broadcasting -----------------------------------------------------------------------------

def broadcast_shapes(prim: str, *named: tuple[str, tuple[Any, ...]]) -> tuple[Any, ...]:
    """numpy broadcasting of the shapes of the named arguments (``("x", shape), ...``).

    Sizes are aligned from the right; a size 1 stretches. Two different known
    sizes raise :class:`ShapeError` naming both arguments, their shapes and the
    axis (counted from the right, e.g. ``axis -1``). A symbolic size against a
    different size is not checked (it is assumed to agree; the int wins).
    """
    same: tuple[Any, ...] = ()
    for _, shape in named:  # fast path: every shape is () or the same shape
        if not shape or shape == same:
            continue
        if same:
            return _broadcast_general(prim, named)
        same = shape
    return tuple(same)


def _broadcast_general(prim: str, named: Sequence[tuple[str, tuple[Any, ...]]]) -> tuple[Any, ...]:
    rank = max((len(shape) for _, shape in named), default=0)
    out: list[Any] = []
    for axis in range(-rank, 0):
        size: Any = 1
        owner: tuple[str, tuple[Any, ...]] | None = None
        for name, shape in named:
            if -axis > len(shape):
                continue
            dim = shape[axis]
            if is_known(dim) and dim == 1:
                continue
            if owner is None:
                size, owner = dim, (name, shape)
                continue
            if known(size, dim):
                if size != dim:
                    raise ShapeError(
                        f"{prim}: cannot broadcast {owner[0]} {fmt_shape(owner[1])} with "
                        f"{name} {fmt_shape(shape)}: sizes {size} and {dim} on axis {axis}")
            elif not same_dim(size, dim) and is_known(dim):
                size = dim
        out.append(size)
    return tuple(out)


# ---- axes -------------------------------------------------------------------------------------

def normalize_axis(prim: str, arg: str, axis: object, shape: tuple[Any, ...]) -> int:
    """``axis`` in ``[-rank, rank)`` made non-negative; otherwise :class:`AxisError`."""
    rank = len(shape)
    if not is_known(axis):
        raise AxisError(f"{prim}: axis must be an int, got {axis!r} ({arg}: {fmt_shape(shape)})")
    assert isinstance(axis, (int, np.integer))
    if not -rank <= axis < rank:
        raise AxisError(
            f"{prim}: axis {axis} is out of range for {arg} of rank {rank} "
            f"(expected -{rank} <= axis < {rank}; {arg}: {fmt_shape(shape)})")
    return int(axis) % rank


def normalize_axes(prim: str, arg: str, axes: object, shape: tuple[Any, ...]) -> tuple[int, ...]:
    """Each of ``axes`` normalised; duplicates (after normalisation) raise :class:`AxisError`."""
    if not isinstance(axes, (tuple, list)):
        raise AxisError(f"{prim}: axes must be a tuple of ints, got {axes!r} ({arg}: {fmt_shape(shape)})")
    out = tuple(normalize_axis(prim, arg, a, shape) for a in axes)
    if len(set(out)) != len(out):
        raise AxisError(
            f"{prim}: duplicate axes {fmt_tuple(axes)} for {arg} of rank {len(shape)} "
            f"({arg}: {fmt_shape(shape)})")
    return out


# ---- window geometry --------------------------------------------------------------------------

def conv_out_size(size: Any, k: Any, s: int, p: int, d: int) -> Any:
    """Output size of a convolution: ``(in + 2p - d(k-1) - 1)//s + 1``."""
    num = size + 2 * p - d * (k - 1) - 1
    return num + 1 if s == 1 else num // s + 1


def pool_out_size(size: Any, k: Any, s: int, p: int) -> Any:
    """Output size of a pooling window: ``(in + 2p - k)//s + 1``."""
    num = size + 2 * p - k
    return num + 1 if s == 1 else num // s + 1


def conv_transpose_out_size(size: Any, k: Any, s: int, p: int, op: int, d: int) -> Any:
    """Output size of a transposed convolution: ``(in-1)s - 2p + d(k-1) + output_padding + 1``."""
    return (size - 1) * s - 2 * p + d * (k - 1) + op + 1


def spatial_rank(prim: str, arg: str, shape: tuple[Any, ...], context: str) -> int:
    """Number of spatial axes of ``[N, C, *spatial]`` (1 to 3); otherwise :class:`ShapeError`."""
    if len(shape) not in (3, 4, 5):
        raise ShapeError(
            f"{prim}: {arg} must have rank 3, 4 or 5 ([N, C, *spatial] with 1 to 3 spatial axes), "
            f"got rank {len(shape)} ({context})")
    return len(shape) - 2


def int_tuple(prim: str, name: str, value: object, n: int, context: str, *, minimum: int) -> tuple[int, ...]:
    """A parameter that must be a tuple of ``n`` ints, each ``>= minimum`` (one per spatial axis)."""
    if not isinstance(value, (tuple, list)) or not all(is_known(v) for v in value):
        raise ShapeError(
            f"{prim}: {name} must be a tuple of {n} ints (one per spatial axis), got {value!r} ({context})")
    if len(value) != n:
        raise ShapeError(
            f"{prim}: {name} has {len(value)} entries but there are {n} spatial axes "
            f"(got {name} {fmt_tuple(value)}; {context})")
    for i, v in enumerate(value):
        if v < minimum:
            what = "positive" if minimum == 1 else "non-negative"
            raise ShapeError(
                f"{prim}: {name} must be {what}, got {v} on spatial axis {i} "
                f"({name} {fmt_tuple(value)}; {context})")
    return tuple(int(v) for v in value)


def positive_int(prim: str, name: str, value: object, context: str) -> int:
    """A parameter that must be an int ``>= 1`` (``groups``)."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
        raise ShapeError(f"{prim}: {name} must be a positive int, got {value!r} ({context})")
    return int(value)


def not_an_int(value: object) -> bool:
    """True for what can stand for no int size or index: a bool, a float, a complex, a str or None (a
    symbolic dim can: it is none of these). ``2.0 == 2``, so without this check a float would pass every
    comparison a rule makes and fail later in numpy with a bare ``TypeError``."""
    return value is None or isinstance(value, (bool, np.bool_, float, np.floating, complex, np.complexfloating, str))


def int_entries(prim: str, name: str, value: Sequence[object], context: str) -> None:
    """A :class:`ShapeError` naming the first entry of ``value`` that is not an int (or a symbolic dim)."""
    for i, d in enumerate(value):
        if not_an_int(d):
            raise ShapeError(f"{prim}: {name} must hold ints, got {type(d).__name__} {d!r} at index {i} "
                             f"({name} {fmt_tuple(value)}; {context})")


def shape_param(prim: str, name: str, value: object) -> tuple[Any, ...]:
    """A shape parameter: a tuple of non-negative sizes (ints or symbolic dims)."""
    if not isinstance(value, (tuple, list)):
        raise ShapeError(f"{prim}: {name} must be a tuple of sizes, got {value!r}")
    for i, d in enumerate(value):
        if not_an_int(d) or (is_known(d) and d < 0):
            raise ShapeError(
                f"{prim}: {name} must hold non-negative sizes (ints), got {d!r} at index {i} "
                f"({name} {fmt_tuple(value)})")
    return tuple(value)


def dtype_param(prim: str, dtype: object) -> str:
    """A ``dtype`` parameter: one of :data:`tensorplay.spec.dtypes.DTYPES`."""
    if dtype not in DTYPES:
        raise DTypeError(f"{prim}: dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    assert isinstance(dtype, str)
    return dtype


def float_result(prim: str, named: Sequence[tuple[str, Aval]], context: str) -> str:
    """The promoted dtype of inputs that must all be floats (else :class:`DTypeError` naming the input)."""
    for name, aval in named:
        if not is_float(strong(aval.dtype)):
            raise DTypeError(f"{prim}: {name} must be a float tensor, got {aval.dtype} ({context})")
    return result_type([aval.dtype for _, aval in named])


# ---- values <-> avals (used by the references) ------------------------------------------------

def aval_of(prim: str, arg: str, value: object) -> Aval:
    """The aval of a reference argument: an array's shape and dtype, or a Python scalar's weak kind."""
    if isinstance(value, (bool, int, float)):
        return Aval((), weak_kind(value))
    if isinstance(value, (np.ndarray, np.generic)):
        dtype = str(value.dtype)
        if dtype not in DTYPES:
            raise DTypeError(f"{prim}: {arg} has dtype {dtype}, expected one of {', '.join(DTYPES)}")
        return Aval(tuple(int(d) for d in value.shape), dtype)
    raise DTypeError(f"{prim}: {arg} must be a numpy array or a Python scalar, got {type(value).__name__}")


def as_array(value: object, dtype: str) -> Array:
    """``value`` (array or Python scalar) as an array of ``dtype``."""
    return np.asarray(value).astype(dtype, copy=False)


def finish(value: object, aval: Aval) -> Array:
    """A fresh array with exactly the dtype and shape ``aval`` gives (the references' last step)."""
    out = np.array(value, dtype=aval.dtype, copy=True)
    if out.shape != tuple(aval.shape):
        raise RuntimeError(f"reference produced shape {fmt_shape(out.shape)}, the rule says {aval}")
    return out


__all__ = [
    "Array", "aval_of", "as_array", "broadcast_shapes", "conv_out_size",
    "conv_transpose_out_size", "dtype_param", "finish", "float_result", "fmt_aval", "fmt_shape", "fmt_tuple", "int_tuple",
    "is_known", "known", "normalize_axes", "normalize_axis", "pool_out_size", "positive_int",
    "same_dim", "shape_param", "spatial_rank", "strong",
]
