"""Scans and orderings along one axis: ``cumsum`` and ``argsort`` (one numpy call each)."""

from __future__ import annotations

import numpy as np

from ._support import Array


def cumsum(x: Array, *, axis: int) -> Array:
    """Running sums along ``axis``; floats keep their dtype, bool and integers accumulate in int64."""
    return np.cumsum(x, axis=axis, dtype=x.dtype if x.dtype.kind == "f" else np.int64)


def argsort(x: Array, *, axis: int, descending: bool = False) -> Array:
    """The positions of a stable sort along ``axis`` (NaN last ascending, first descending). Descending
    sorts the reversed axis ascending and reverses the result back, so equal values keep their order."""
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    order = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    positions: Array = (x.shape[axis] - 1) - np.flip(order, axis)
    return positions
