"""Structural primitives (reshape, permute, broadcast_to, slice, pad, concat, gather,
scatter_add, cast, stop_gradient), creation (full, iota) and the range check of indices
(``check_index``).

These never change values, only where they sit; dtypes are kept except for
``concat`` (promotes), ``cast`` and the creation primitives (given ``dtype``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .aval import Aval
from .dtypes import INTS, result_type
from .errors import AxisError, DTypeError, IndexRangeError, ShapeError
from .shapes import (
    Array, as_array, aval_of, dtype_param, finish, fmt_aval, fmt_shape, fmt_tuple, is_known, known,
    normalize_axis, shape_param, strong,
)

# ---- reshape, permute, broadcast_to ------------------------------------------------------------


def reshape_rule(x: Aval, *, shape: tuple[int, ...]) -> Aval:
    """``x[*S] -> [*shape]``; the element counts must agree (no ``-1``: sizes are explicit)."""
    new = shape_param("reshape", "shape", shape)
    if known(*x.shape, *new) and math.prod(x.shape) != math.prod(new):
        raise ShapeError(
            f"reshape: cannot reshape x {fmt_shape(x.shape)} ({math.prod(x.shape)} elements) "
            f"to {fmt_shape(new)} ({math.prod(new)} elements)")
    return Aval(new, strong(x.dtype))


def reshape_ref(x: object, *, shape: tuple[int, ...]) -> Array:
    """Same elements in row-major order."""
    out = reshape_rule(aval_of("reshape", "x", x), shape=shape)
    return finish(np.reshape(np.asarray(x), shape), out)


def _perm(x: Aval, perm: object) -> tuple[int, ...]:
    shape = tuple(x.shape)
    if not isinstance(perm, (tuple, list)) or len(perm) != len(shape):
        raise AxisError(
            f"permute: perm must be a permutation of the {len(shape)} axes of x, got {perm!r} "
            f"(x: {fmt_shape(shape)})")
    norm = tuple(normalize_axis("permute", "x", p, shape) for p in perm)
    if sorted(norm) != list(range(len(shape))):
        raise AxisError(
            f"permute: perm {fmt_tuple(perm)} is not a permutation of the axes of x "
            f"(repeats an axis; x: {fmt_shape(shape)})")
    return norm


def permute_rule(x: Aval, *, perm: tuple[int, ...]) -> Aval:
    """``x[*S] -> [S[perm[0]], S[perm[1]], ...]``; ``perm`` must be a permutation (else :class:`AxisError`)."""
    norm = _perm(x, perm)
    return Aval(tuple(x.shape[p] for p in norm), strong(x.dtype))


def permute_ref(x: object, *, perm: tuple[int, ...]) -> Array:
    """Axes reordered: result axis ``i`` is input axis ``perm[i]``."""
    ax = aval_of("permute", "x", x)
    out = permute_rule(ax, perm=perm)
    return finish(np.transpose(np.asarray(x), _perm(ax, perm)), out)


def broadcast_to_rule(x: Aval, *, shape: tuple[int, ...]) -> Aval:
    """``x[*S] -> [*shape]`` by numpy broadcasting: ``S`` aligned to the right of ``shape``,
    each entry equal to the target's or 1."""
    target = shape_param("broadcast_to", "shape", shape)
    if len(x.shape) > len(target):
        raise ShapeError(
            f"broadcast_to: x {fmt_shape(x.shape)} has more axes than the target shape {fmt_shape(target)}")
    offset = len(target) - len(x.shape)
    for i, d in enumerate(x.shape):
        t = target[offset + i]
        if known(d) and d == 1:
            continue
        if known(d, t) and d != t:
            raise ShapeError(
                f"broadcast_to: cannot broadcast x {fmt_shape(x.shape)} to {fmt_shape(target)}: "
                f"axis {offset + i} has size {d}, expected {t} or 1")
    return Aval(target, strong(x.dtype))


def broadcast_to_ref(x: object, *, shape: tuple[int, ...]) -> Array:
    """numpy broadcasting to ``shape``."""
    out = broadcast_to_rule(aval_of("broadcast_to", "x", x), shape=shape)
    return finish(np.broadcast_to(np.asarray(x), shape), out)


# ---- slice, pad, concat ------------------------------------------------------------------------


def _slice_len(x: Aval, axis: int, start: Any, stop: Any, step: Any) -> Any:
    n = x.shape[axis]
    where = f"axis {axis}: start {start}, stop {stop}, step {step} (x: {fmt_shape(x.shape)})"
    if not is_known(step) or step == 0:
        raise ShapeError(f"slice: step must be a non-zero int on {where}")
    if not known(start, stop):  # symbolic bounds: trust the caller's normalisation
        if step > 0:
            return stop - start if step == 1 else (stop - start + (step - 1)) // step
        return (start - stop + (-step - 1)) // (-step)
    if start < 0 or stop < (0 if step > 0 else -1):
        raise ShapeError(
            f"slice: bounds must be normalised (start >= 0; stop >= 0, or >= -1 with a negative step) on {where}")
    length = len(range(start, stop, step))
    if length > 0 and known(n):
        for index in (start, start + (length - 1) * step):
            if not 0 <= index < n:
                raise ShapeError(f"slice: index {index} is outside [0, {n}) on {where}")
    return length


def _check_slice_params(x: Aval, starts: object, stops: object, steps: object) -> None:
    for name, value in (("starts", starts), ("stops", stops), ("steps", steps)):
        if not isinstance(value, (tuple, list)) or len(value) != len(x.shape):
            raise ShapeError(
                f"slice: {name} must have one entry per axis of x ({len(x.shape)}), got {value!r} "
                f"(x: {fmt_shape(x.shape)})")


def slice_rule(x: Aval, *, starts: tuple[int, ...], stops: tuple[int, ...], steps: tuple[int, ...]) -> Aval:
    """``x[*S] -> [len(range(start, stop, step)) per axis]``; bounds already normalised
    (``start >= 0``; with a negative step ``stop`` may be -1); every index visited is in range."""
    _check_slice_params(x, starts, stops, steps)
    shape = tuple(_slice_len(x, i, starts[i], stops[i], steps[i]) for i in range(len(x.shape)))
    return Aval(shape, strong(x.dtype))


def slice_ref(x: object, *, starts: tuple[int, ...], stops: tuple[int, ...], steps: tuple[int, ...]) -> Array:
    """Basic slicing; ``stop == -1`` with a negative step means "through index 0"."""
    out = slice_rule(aval_of("slice", "x", x), starts=starts, stops=stops, steps=steps)
    index = tuple(slice(a, None if b == -1 else b, c) for a, b, c in zip(starts, stops, steps))
    return finish(np.asarray(x)[index], out)


def pad_rule(x: Aval, *, pads: tuple[tuple[int, int], ...], value: float = 0.0) -> Aval:
    """``x[*S] -> [S[i] + before[i] + after[i]]``: one non-negative ``(before, after)`` pair per axis."""
    if not isinstance(pads, (tuple, list)) or len(pads) != len(x.shape):
        raise ShapeError(
            f"pad: pads must have one (before, after) pair per axis of x ({len(x.shape)}), got {pads!r} "
            f"(x: {fmt_shape(x.shape)})")
    shape = []
    for i, pair in enumerate(pads):
        if (not isinstance(pair, (tuple, list)) or len(pair) != 2 or not known(*pair)
                or pair[0] < 0 or pair[1] < 0):
            raise ShapeError(
                f"pad: pads[{i}] must be a pair of non-negative ints, got {pair!r} (x: {fmt_shape(x.shape)})")
        shape.append(x.shape[i] + pair[0] + pair[1])
    return Aval(tuple(shape), strong(x.dtype))


def pad_ref(x: object, *, pads: tuple[tuple[int, int], ...], value: float = 0.0) -> Array:
    """Constant padding with ``value`` (cast to ``x``'s dtype)."""
    out = pad_rule(aval_of("pad", "x", x), pads=pads, value=value)
    arr = as_array(x, out.dtype)
    result = np.full(out.shape, value, dtype=out.dtype)
    result[tuple(slice(b, b + n) for (b, _), n in zip(pads, arr.shape))] = arr
    return finish(result, out)


def concat_rule(*xs: Aval, axis: int) -> Aval:
    """``xs[i][*A, n_i, *B] -> [*A, sum(n_i), *B]``: same rank, other axes agree, dtypes promote."""
    if not xs:
        raise ShapeError("concat: needs at least one input, got none")
    first = tuple(xs[0].shape)
    a = normalize_axis("concat", "xs[0]", axis, first)
    size: Any = first[a]
    for j, x in enumerate(xs[1:], start=1):
        if len(x.shape) != len(first):
            raise ShapeError(
                f"concat: xs[{j}] has rank {len(x.shape)}, expected {len(first)} like xs[0] "
                f"(xs[0]: {fmt_shape(first)}, xs[{j}]: {fmt_shape(x.shape)})")
        for i, (d0, d) in enumerate(zip(first, x.shape)):
            if i != a and known(d0, d) and d0 != d:
                raise ShapeError(
                    f"concat: xs[{j}] differs from xs[0] on axis {i} ({d} vs {d0}) "
                    f"(xs[0]: {fmt_shape(first)}, xs[{j}]: {fmt_shape(x.shape)}, axis {axis})")
        size = size + x.shape[a]
    shape = first[:a] + (size,) + first[a + 1:]
    return Aval(shape, result_type([x.dtype for x in xs]))


def concat_ref(*xs: object, axis: int) -> Array:
    """Join along ``axis`` after casting every input to the promoted dtype."""
    out = concat_rule(*(aval_of("concat", f"xs[{j}]", x) for j, x in enumerate(xs)), axis=axis)
    return finish(np.concatenate([as_array(x, out.dtype) for x in xs], axis=axis), out)


# ---- gather, scatter_add -----------------------------------------------------------------------


def _check_indices(prim: str, indices: Aval, context: str) -> None:
    if strong(indices.dtype) not in INTS:
        raise DTypeError(
            f"{prim}: indices must be int32 or int64, got {indices.dtype} ({context})")


def gather_rule(x: Aval, indices: Aval, *, axis: int) -> Aval:
    """``numpy.take``: ``x[*A, n, *B], indices[*I] -> [*A, *I, *B]``; indices must be integers."""
    context = f"x: {fmt_aval(x)}, indices: {fmt_aval(indices)}"
    _check_indices("gather", indices, context)
    a = normalize_axis("gather", "x", axis, tuple(x.shape))
    shape = tuple(x.shape[:a]) + tuple(indices.shape) + tuple(x.shape[a + 1:])
    return Aval(shape, strong(x.dtype))


def _checked_indices(prim: str, x: Array, indices: object, axis: int) -> Array:
    """Indices as int64, negative ones wrapped; out of range is an ``IndexError`` naming the index."""
    idx = np.asarray(indices).astype(np.int64)
    n = x.shape[axis]
    bad = idx[(idx < -n) | (idx >= n)]
    if bad.size:
        raise IndexError(
            f"{prim}: index {int(bad.flat[0])} is out of range for axis {axis} of size {n} "
            f"(expected -{n} <= index < {n}; x: {fmt_shape(x.shape)})")
    wrapped: Array = np.where(idx < 0, idx + n, idx)
    return wrapped


def gather_ref(x: object, indices: object, *, axis: int) -> Array:
    """``numpy.take(x, indices, axis)`` with indices in ``[-n, n)``."""
    out = gather_rule(aval_of("gather", "x", x), aval_of("gather", "indices", indices), axis=axis)
    arr = np.asarray(x)
    a = normalize_axis("gather", "x", axis, arr.shape)
    return finish(np.take(arr, _checked_indices("gather", arr, indices, a), axis=a), out)


def scatter_add_rule(base: Aval, indices: Aval, updates: Aval, *, axis: int) -> Aval:
    """The adjoint of ``gather``: ``base[*A, n, *B], indices[*I], updates[*A, *I, *B] -> base``'s aval.
    ``updates`` must have ``base``'s dtype (a weak scalar that promotes to it is accepted)."""
    context = f"base: {fmt_aval(base)}, indices: {fmt_aval(indices)}, updates: {fmt_aval(updates)}"
    _check_indices("scatter_add", indices, context)
    a = normalize_axis("scatter_add", "base", axis, tuple(base.shape))
    expected = tuple(base.shape[:a]) + tuple(indices.shape) + tuple(base.shape[a + 1:])
    mismatch = len(expected) != len(updates.shape) or any(
        known(e, u) and e != u for e, u in zip(expected, updates.shape))
    if mismatch:
        raise ShapeError(
            f"scatter_add: updates must have the shape gather gives, {fmt_shape(expected)}, "
            f"got {fmt_shape(updates.shape)} ({context}, axis {axis})")
    dtype = strong(base.dtype)
    if strong(updates.dtype) != dtype and result_type([dtype, updates.dtype]) != dtype:
        raise DTypeError(f"scatter_add: updates must have base's dtype {dtype}, got {updates.dtype} ({context})")
    return Aval(tuple(base.shape), dtype)


def scatter_add_ref(base: object, indices: object, updates: object, *, axis: int) -> Array:
    """A copy of ``base`` with ``updates`` added at ``indices`` along ``axis``; repeats accumulate."""
    out = scatter_add_rule(aval_of("scatter_add", "base", base), aval_of("scatter_add", "indices", indices),
                           aval_of("scatter_add", "updates", updates), axis=axis)
    result = as_array(base, out.dtype).copy()
    a = normalize_axis("scatter_add", "base", axis, result.shape)
    idx = _checked_indices("scatter_add", result, indices, a)
    index: tuple[Any, ...] = (slice(None),) * a + (idx,)
    np.add.at(result, index, as_array(updates, out.dtype))
    return finish(result, out)


# ---- cast, stop_gradient -----------------------------------------------------------------------


def cast_rule(x: Aval, *, dtype: str) -> Aval:
    """``x[*S] -> dtype[*S]``; ``dtype`` is one of the supported dtype names."""
    return Aval(tuple(x.shape), dtype_param("cast", dtype))


def cast_ref(x: object, *, dtype: str) -> Array:
    """Convert (float to int truncates toward zero; to bool: non-zero is true)."""
    out = cast_rule(aval_of("cast", "x", x), dtype=dtype)
    with np.errstate(all="ignore"):
        return finish(np.asarray(x).astype(dtype), out)


def stop_gradient_rule(x: Aval) -> Aval:
    """Identity: ``x[*S] -> [*S]``, dtype kept."""
    return Aval(tuple(x.shape), strong(x.dtype))


def stop_gradient_ref(x: object) -> Array:
    """Identity (a copy)."""
    return finish(np.asarray(x), stop_gradient_rule(aval_of("stop_gradient", "x", x)))


# ---- creation ----------------------------------------------------------------------------------


def full_rule(*, shape: tuple[int, ...], value: float, dtype: str) -> Aval:
    """``dtype[*shape]``: sizes non-negative; ``value`` a Python number."""
    sizes = shape_param("full", "shape", shape)
    if not isinstance(value, (bool, int, float, np.number, np.bool_)):
        raise DTypeError(f"full: value must be a number, got {type(value).__name__} (shape {fmt_shape(sizes)})")
    return Aval(sizes, dtype_param("full", dtype))


def full_ref(*, shape: tuple[int, ...], value: float, dtype: str) -> Array:
    """A tensor of ``shape`` filled with ``value`` converted to ``dtype``."""
    out = full_rule(shape=shape, value=value, dtype=dtype)
    with np.errstate(all="ignore"):
        return finish(np.full(shape, value, dtype=dtype), out)


def iota_rule(*, length: int, dtype: str) -> Aval:
    """``dtype[length]``, ``length >= 0``, a numeric (non-bool) dtype."""
    if isinstance(length, (bool, np.bool_)) or (is_known(length) and length < 0):
        raise ShapeError(f"iota: length must be a non-negative int, got {length!r}")
    if dtype_param("iota", dtype) == "bool":
        raise DTypeError(f"iota: dtype must be numeric, got bool (length {length})")
    return Aval((length,), dtype)


def iota_ref(*, length: int, dtype: str) -> Array:
    """``[0, 1, ..., length - 1]``."""
    return finish(np.arange(length, dtype=dtype), iota_rule(length=length, dtype=dtype))



# ---- range checks of integer indices -----------------------------------------------------------


def out_of_range(values: object, bound: int, allowed: tuple[int, ...] = ()) -> tuple[list[int], int] | None:
    """The position (row-major first) and value of the first entry of ``values`` outside
    ``[0, bound)`` and not in ``allowed``; ``None`` when there is none."""
    array = np.asarray(values)
    if array.size == 0 or (array.min() >= 0 and array.max() < bound):
        return None
    bad = (array < 0) | (array >= bound)
    for value in allowed:
        bad &= array != value
    if not bad.any():
        return None
    position = [int(i) for i in np.argwhere(bad)[0]] if array.ndim else []
    return position, int(array[tuple(position)])


def index_range_error(what: str, position: list[int], value: int, bound: int,
                      allowed: tuple[int, ...] = ()) -> IndexRangeError:
    """The error for ``value`` at ``position`` of ``what`` outside ``[0, bound)``. ``what`` names the
    function and the value, its last word the kind of value: ``"cross_entropy: target"`` gives
    ``cross_entropy: target 5 at position [1] is out of range; expected 0 <= target < 3``."""
    noun = what.rsplit(" ", 1)[-1]
    extra = "".join(f" or {noun} == {a}" for a in allowed)
    return IndexRangeError(f"{what} {value} at position {position} is out of range; expected 0 <= {noun} < {bound}"
                           f"{extra}")


def check_index_rule(x: Aval, *, bound: int, what: str, allowed: tuple[int, ...] = ()) -> Aval:
    """Identity on an integer tensor ``x[*S]`` whose values must lie in ``[0, bound)`` (or be one of
    ``allowed``); ``what`` names the checked value in the run-time error."""
    if strong(x.dtype) not in INTS:
        raise DTypeError(f"check_index: {what} must be an int32 or int64 tensor, got {fmt_aval(x)}")
    if isinstance(bound, (bool, np.bool_)) or (is_known(bound) and bound < 0):
        raise ShapeError(f"check_index: bound must be a non-negative size, got {bound!r} ({what}: {fmt_aval(x)})")
    if not isinstance(what, str):
        raise DTypeError(f"check_index: what must be a string naming the checked value, got {what!r}")
    if not isinstance(allowed, (tuple, list)) or not all(is_known(a) for a in allowed):
        raise ShapeError(f"check_index: allowed must be a tuple of ints, got {allowed!r}")
    return Aval(tuple(x.shape), strong(x.dtype))


def check_index_ref(x: object, *, bound: int, what: str, allowed: tuple[int, ...] = ()) -> Array:
    """``x`` itself; an :class:`IndexRangeError` naming ``what``, the position and the value of the first
    entry outside ``[0, bound)`` that is not in ``allowed``."""
    out = check_index_rule(aval_of("check_index", "x", x), bound=bound, what=what, allowed=allowed)
    found = out_of_range(x, bound, tuple(allowed))
    if found is not None:
        raise index_range_error(what, *found, bound, tuple(allowed))
    return finish(np.asarray(x), out)
