"""Cotangents that are zero outside a few regions: the backward of slicing and basic indexing.

The backward rule of ``x[key]`` writes the output's cotangent into zeros of ``x``'s shape. When several
pieces of one tensor are used (the q, k and v slices of a fused projection, the gates of an LSTM, the
halves of a GLU), the tape then adds one full-size array per piece: for three slices of a
``[16, 32, 192]`` float32 activation, three zero-fills and two full additions took 107 us where writing
the pieces into one array takes about a quarter of that (numpy, one process). So the fused rules return a
:class:`PaddedCotangent` (the pieces and where they go), the tape merges those of one tensor by
concatenating their lists, and the array is made once, when the cotangent is consumed
(:func:`dense`): zeros, each piece added at its place in the order the pieces arrived (the same sums
as adding the padded arrays in that order; only the sign of a zero may differ).
"""

from __future__ import annotations

from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]


class PaddedCotangent:
    """A ``shape`` / ``dtype`` cotangent that is the sum of ``pieces``: ``(key, value)`` pairs, each
    ``value`` placed at the basic index ``key`` of zeros. ``_data`` makes the dense array (a new one at
    each read), so code that reads a cotangent's payload sees an ordinary array."""

    __slots__ = ("shape", "dtype", "pieces")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype[Any], pieces: list[tuple[Any, Array]]) -> None:
        self.shape = shape
        self.dtype = dtype
        self.pieces = pieces

    @property
    def _data(self) -> Array:
        out = np.zeros(self.shape, self.dtype)
        for key, value in self.pieces:
            out[key] += value
        return out

    def __repr__(self) -> str:
        return f"PaddedCotangent(shape={self.shape}, dtype={self.dtype}, pieces={len(self.pieces)})"


def padded(shape: tuple[int, ...], key: Any, value: Array) -> PaddedCotangent:
    """The cotangent of a ``shape`` tensor whose basic index ``key`` received ``value`` (``value``'s dtype)."""
    return PaddedCotangent(tuple(shape), value.dtype, [(key, value)])


def add_cotangents(a: Any, b: Any) -> Any:
    """``a + b`` for two cotangents of one tensor: two padded ones of one shape and dtype stay padded
    (their pieces concatenated, ``a``'s first); otherwise any padded one is made dense first."""
    a_padded, b_padded = type(a) is PaddedCotangent, type(b) is PaddedCotangent
    if not (a_padded or b_padded):
        return a + b
    if a_padded and b_padded and a.shape == b.shape and a.dtype == b.dtype:
        return PaddedCotangent(a.shape, a.dtype, a.pieces + b.pieces)
    return dense(a) + dense(b)


def dense(g: Any) -> Any:
    """``g`` as a tensor (a padded cotangent made into one; anything else unchanged)."""
    if type(g) is not PaddedCotangent:
        return g
    from tensorplay.interpreters.eager.interpreter import eager
    from tensorplay.tensor import Tensor
    return Tensor(eager, g._data)
