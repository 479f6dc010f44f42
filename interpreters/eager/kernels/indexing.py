"""``gather`` (``numpy.take``), its adjoint ``scatter_add``, and ``check_index``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tensorplay.spec.structure import index_range_error, out_of_range

from ._support import Array, nb, normalize_axis
from .threads import parallel_for


def _indices(name: str, indices: Array, n: int, axis: int) -> Array:
    """Indices as intp with negatives wrapped; ``IndexError`` naming the first offender."""
    idx = np.asarray(indices)
    if idx.dtype.kind not in "iu":
        if idx.size == 0:
            return idx.astype(np.intp)
        raise TypeError(f"{name}: indices must be integers, got {idx.dtype}")
    idx = idx.astype(np.intp, copy=False)
    if idx.size == 0:
        return idx
    lo, hi = int(idx.min()), int(idx.max())
    if lo < -n or hi >= n:
        flat = idx.reshape(-1)
        bad = int(flat[np.nonzero((flat < -n) | (flat >= n))[0][0]])
        raise IndexError(f"{name}: index {bad} is out of range for axis {axis} with size {n} "
                         f"(valid indices are in [{-n}, {n}))")
    if lo < 0:
        idx = np.where(idx < 0, idx + n, idx)
    return idx


def gather(x: Array, indices: Array, *, axis: int) -> Array:
    """``numpy.take(x, indices, axis)``: shape ``x.shape[:axis] + indices.shape + x.shape[axis+1:]``.
    Negative indices count from the end; out of range raises ``IndexError`` naming the index."""
    ax = normalize_axis(axis, x.ndim, "gather")
    idx = _indices("gather", indices, x.shape[ax], ax)
    return np.take(x, idx, axis=ax)


def scatter_add(base: Array, indices: Array, updates: Array, *, axis: int) -> Array:
    """A copy of ``base`` with ``updates`` added at ``indices`` along ``axis`` (repeated indices
    accumulate); ``updates`` has the shape ``gather(base, indices, axis=axis)`` has."""
    ax = normalize_axis(axis, base.ndim, "scatter_add")
    n = base.shape[ax]
    idx = _indices("scatter_add", indices, n, ax)
    want = base.shape[:ax] + idx.shape + base.shape[ax + 1:]
    upd = np.asarray(updates)
    if upd.shape != want:
        raise ValueError(f"scatter_add: updates must have shape {want} (base {base.shape}, indices "
                         f"{idx.shape}, axis {ax}), got {upd.shape}")
    if base.dtype.kind == "f" and upd.dtype.kind == "f":
        dt = np.promote_types(base.dtype, upd.dtype)
    elif base.dtype.kind == "f":
        dt = base.dtype
    else:
        dt = np.result_type(base.dtype, upd.dtype)
    out = np.array(base, dtype=dt, order="C", copy=True)
    if upd.size == 0:
        return out
    a = math.prod(base.shape[:ax])
    b = math.prod(base.shape[ax + 1:])
    flat_idx = np.ascontiguousarray(idx.reshape(-1))
    if dt.kind == "f" and dt.itemsize in (4, 8):
        out3 = out.reshape(a, n, b)
        upd3 = np.ascontiguousarray(upd, dtype=dt).reshape(a, flat_idx.size, b)
        kernel = nb().scatter_add_rows

        def body(start: int, stop: int) -> None:
            kernel(out3, flat_idx, upd3, start, stop)

        # threads split the trailing axis (writes never collide); only worth it for wide rows
        parallel_for(b, upd3.size if b >= 64 else 0, body)
    else:
        where: Any = (slice(None), flat_idx)
        np.add.at(out.reshape(a, n, b), where, upd.astype(dt, copy=False).reshape(a, -1, b))
    return out


def check_index(x: Array, *, bound: int, what: str, allowed: tuple[int, ...] = ()) -> Array:
    """``x`` itself (a new array object sharing its memory) when every value is in ``[0, bound)`` or in
    ``allowed``; else an :class:`~tensorplay.errors.IndexRangeError` naming ``what``, the position and
    the value of the first offender."""
    found = out_of_range(x, bound, tuple(allowed))
    if found is not None:
        raise index_range_error(what, *found, bound, tuple(allowed))
    return np.asarray(x).view()
