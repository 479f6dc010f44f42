"""Reductions: ``reduce_sum``, ``reduce_prod``, ``reduce_max``, ``reduce_min``, ``argmax``, ``argmin``; and the scans
along one axis: ``cumsum`` and ``argsort``.

``axes`` accept negative values; duplicates or out-of-range axes raise
:class:`~tensorplay.spec.errors.AxisError`. An empty ``axes`` tuple is no reduction.
``keepdims`` keeps reduced axes with size 1.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .aval import Aval
from .dtypes import is_float
from .errors import ShapeError
from .shapes import Array, aval_of, finish, fmt_aval, is_known, normalize_axes, normalize_axis, strong


def _reduced_shape(shape: tuple[Any, ...], axes: tuple[int, ...], keepdims: bool) -> tuple[Any, ...]:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _refuse_empty(prim: str, x: Aval, axes: tuple[int, ...]) -> None:
    for a in axes:
        if is_known(x.shape[a]) and x.shape[a] == 0:
            raise ShapeError(f"{prim}: cannot reduce over axis {a} of size 0 (x: {fmt_aval(x)})")


def reduce_sum_rule(x: Aval, *, axes: tuple[int, ...], keepdims: bool = False) -> Aval:
    """``x[*S]`` summed over ``axes``. bool, int32 and int64 sum to int64; floats keep their dtype."""
    norm = normalize_axes("reduce_sum", "x", axes, tuple(x.shape))
    dtype = strong(x.dtype)
    return Aval(_reduced_shape(tuple(x.shape), norm, keepdims), dtype if is_float(dtype) else "int64")


def reduce_sum_ref(x: object, *, axes: tuple[int, ...], keepdims: bool = False) -> Array:
    """Sum (floats accumulate in float64, then round to the result dtype); empty sums are 0."""
    out = reduce_sum_rule(aval_of("reduce_sum", "x", x), axes=axes, keepdims=keepdims)
    arr = np.asarray(x)
    norm = normalize_axes("reduce_sum", "x", axes, arr.shape)
    acc = np.float64 if is_float(out.dtype) else np.int64
    return finish(np.sum(arr, axis=norm, dtype=acc, keepdims=keepdims), out)


def reduce_prod_rule(x: Aval, *, axes: tuple[int, ...], keepdims: bool = False) -> Aval:
    """``x[*S]`` multiplied over ``axes``. bool, int32 and int64 give int64; floats keep their dtype
    (as ``torch.prod``)."""
    norm = normalize_axes("reduce_prod", "x", axes, tuple(x.shape))
    dtype = strong(x.dtype)
    return Aval(_reduced_shape(tuple(x.shape), norm, keepdims), dtype if is_float(dtype) else "int64")


def reduce_prod_ref(x: object, *, axes: tuple[int, ...], keepdims: bool = False) -> Array:
    """Product (floats multiply in float64, then round to the result dtype; integers wrap around in
    int64); the product of no elements is 1; NaN propagates."""
    out = reduce_prod_rule(aval_of("reduce_prod", "x", x), axes=axes, keepdims=keepdims)
    arr = np.asarray(x)
    norm = normalize_axes("reduce_prod", "x", axes, arr.shape)
    acc = np.float64 if is_float(out.dtype) else np.int64
    return finish(np.prod(arr, axis=norm, dtype=acc, keepdims=keepdims), out)


def _minmax_rule(prim: str, x: Aval, axes: tuple[int, ...], keepdims: bool) -> Aval:
    norm = normalize_axes(prim, "x", axes, tuple(x.shape))
    _refuse_empty(prim, x, norm)
    return Aval(_reduced_shape(tuple(x.shape), norm, keepdims), strong(x.dtype))


def reduce_max_rule(x: Aval, *, axes: tuple[int, ...], keepdims: bool = False) -> Aval:
    """``x[*S]`` maximised over ``axes`` (dtype kept); an axis of size 0 is a :class:`ShapeError`."""
    return _minmax_rule("reduce_max", x, axes, keepdims)


def reduce_min_rule(x: Aval, *, axes: tuple[int, ...], keepdims: bool = False) -> Aval:
    """``x[*S]`` minimised over ``axes`` (dtype kept); an axis of size 0 is a :class:`ShapeError`."""
    return _minmax_rule("reduce_min", x, axes, keepdims)


def reduce_max_ref(x: object, *, axes: tuple[int, ...], keepdims: bool = False) -> Array:
    """Max over ``axes``; NaN propagates."""
    out = reduce_max_rule(aval_of("reduce_max", "x", x), axes=axes, keepdims=keepdims)
    arr = np.asarray(x)
    norm = normalize_axes("reduce_max", "x", axes, arr.shape)
    return finish(np.max(arr, axis=norm, keepdims=keepdims) if norm else arr, out)


def reduce_min_ref(x: object, *, axes: tuple[int, ...], keepdims: bool = False) -> Array:
    """Min over ``axes``; NaN propagates."""
    out = reduce_min_rule(aval_of("reduce_min", "x", x), axes=axes, keepdims=keepdims)
    arr = np.asarray(x)
    norm = normalize_axes("reduce_min", "x", axes, arr.shape)
    return finish(np.min(arr, axis=norm, keepdims=keepdims) if norm else arr, out)


def _arg_rule(prim: str, x: Aval, axis: int, keepdims: bool) -> Aval:
    a = normalize_axis(prim, "x", axis, tuple(x.shape))
    _refuse_empty(prim, x, (a,))
    return Aval(_reduced_shape(tuple(x.shape), (a,), keepdims), "int64")


def argmax_rule(x: Aval, *, axis: int, keepdims: bool = False) -> Aval:
    """int64 index along ``axis``: ``x[*S]`` without (or with size 1 at) ``axis``; empty axis is an error."""
    return _arg_rule("argmax", x, axis, keepdims)


def argmin_rule(x: Aval, *, axis: int, keepdims: bool = False) -> Aval:
    """int64 index along ``axis``: ``x[*S]`` without (or with size 1 at) ``axis``; empty axis is an error."""
    return _arg_rule("argmin", x, axis, keepdims)


def argmax_ref(x: object, *, axis: int, keepdims: bool = False) -> Array:
    """Index of the first maximum along ``axis``; the first NaN counts as the maximum."""
    out = argmax_rule(aval_of("argmax", "x", x), axis=axis, keepdims=keepdims)
    return finish(np.argmax(np.asarray(x), axis=axis, keepdims=keepdims), out)


def argmin_ref(x: object, *, axis: int, keepdims: bool = False) -> Array:
    """Index of the first minimum along ``axis``; the first NaN counts as the minimum."""
    out = argmin_rule(aval_of("argmin", "x", x), axis=axis, keepdims=keepdims)
    return finish(np.argmin(np.asarray(x), axis=axis, keepdims=keepdims), out)


# ---- scans along one axis ----------------------------------------------------------------------


def _scan_axis(prim: str, x: Aval, axis: int) -> int:
    if not x.shape:
        raise ShapeError(f"{prim}: x must have at least one axis, got a 0-d tensor (x: {fmt_aval(x)})")
    return normalize_axis(prim, "x", axis, tuple(x.shape))


def cumsum_rule(x: Aval, *, axis: int) -> Aval:
    """``x[*S] -> [*S]``: running sums along ``axis``. bool, int32 and int64 give int64 (as PyTorch);
    floats keep their dtype."""
    _scan_axis("cumsum", x, axis)
    dtype = strong(x.dtype)
    return Aval(tuple(x.shape), dtype if is_float(dtype) else "int64")


def cumsum_ref(x: object, *, axis: int) -> Array:
    """``out[..., i, ...] = sum(x[..., :i+1, ...])`` along ``axis`` (floats accumulate in float64)."""
    out = cumsum_rule(aval_of("cumsum", "x", x), axis=axis)
    acc = np.float64 if is_float(out.dtype) else np.int64
    return finish(np.cumsum(np.asarray(x), axis=axis, dtype=acc), out)


def argsort_rule(x: Aval, *, axis: int, descending: bool = False) -> Aval:
    """``x[*S] -> int64[*S]``: the positions that sort ``x`` along ``axis``."""
    _scan_axis("argsort", x, axis)
    if not isinstance(descending, (bool, np.bool_)):
        raise ShapeError(f"argsort: descending must be a bool, got {descending!r}")
    return Aval(tuple(x.shape), "int64")


def argsort_ref(x: object, *, axis: int, descending: bool = False) -> Array:
    """A stable sort's positions along ``axis`` (equal values keep their order), NaN counted as larger
    than every number (last ascending, first descending), as PyTorch's ``sort(stable=True)``."""
    out = argsort_rule(aval_of("argsort", "x", x), axis=axis, descending=descending)
    arr = np.moveaxis(np.asarray(x), axis, -1)
    n = arr.shape[-1]
    order = np.empty(arr.shape, dtype=np.int64)
    for row in np.ndindex(*arr.shape[:-1]):
        values = arr[row].tolist()

        def key(i: int) -> tuple[bool, Any]:
            v = values[i]
            nan = v != v
            if descending:
                return (not nan, -v if not nan else 0)
            return (nan, v if not nan else 0)

        order[row] = sorted(range(n), key=key)
    return finish(np.moveaxis(order, -1, axis), out)
