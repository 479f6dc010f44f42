"""Windows of a planned buffer that batched GEMMs write into, decided when the code is generated.

A sum of zero pads into disjoint windows (a multi-head attention's ``dq``, ``dk``, ``dv`` placed into one
``[B, n, 3 * heads * d]`` gradient) is lowered to one planned array; the GEMM giving each piece writes its
product straight into the piece's window, as a view of the window in the product's (permuted) shape
(:func:`.runtime.window` finds that view at run time). For a C-contiguous buffer of static shape the view's
existence and its strides depend on the shapes only, so they are decided here, once: the generated code
then slices and reshapes the buffer directly (no search per call), and a covering placement whose every
piece a GEMM wrote that way is the buffer itself (no check per call either: :func:`honours_out`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def _static(*shapes: Sequence[Any]) -> bool:
    return all(type(d) is int for shape in shapes for d in shape)


def static_view(buffer: str, shape: Sequence[Any], dtype: str, low: Sequence[Any], window_shape: Sequence[Any],
                value_shape: Sequence[Any], inverse: Sequence[int]) -> str | None:
    """Source of the view of the C-contiguous ``buffer`` (of ``shape`` and ``dtype``) at the window ``low`` /
    ``window_shape``, reshaped to ``value_shape`` and permuted by ``inverse`` (what :func:`.runtime.window`
    computes), or ``None`` when a size is symbolic or no such view exists (the reshape would copy)."""
    if not _static(shape, low, window_shape, value_shape) or len(low) != len(shape):
        return None
    if any(lo < 0 or lo + d > n for lo, d, n in zip(low, window_shape, shape)):
        return None
    if int(np.prod(window_shape)) != int(np.prod(value_shape)) or int(np.prod(window_shape)) == 0:
        return None
    item = np.dtype(dtype).itemsize
    strides = [item] * len(shape)
    for axis in range(len(shape) - 2, -1, -1):
        strides[axis] = strides[axis + 1] * max(int(shape[axis + 1]), 1)
    # the geometry of the buffer over one element: reshaping it computes strides only, never touches memory
    probe = np.lib.stride_tricks.as_strided(np.zeros(1, dtype), tuple(shape), tuple(strides), writeable=False)
    region = probe[tuple(slice(lo, lo + d) for lo, d in zip(low, window_shape))]
    try:
        np.reshape(region, tuple(value_shape), copy=False)
    except ValueError:
        return None
    slices = ", ".join(f"{lo}:{lo + d}" for lo, d in zip(low, window_shape))
    return f"{buffer}[{slices}].reshape({tuple(int(d) for d in value_shape)!r}).transpose({tuple(inverse)!r})"


def honours_out(a_shape: Sequence[Any], b_shape: Sequence[Any]) -> bool:
    """Whether :func:`.runtime.matmul` of operands of these (batched, rank above 2) shapes writes the ``out``
    it is given: every product but the outer products (a contraction of size 1, which a dedicated kernel
    computes into a new array) whose sizes are static."""
    return _static(a_shape, b_shape) and len(a_shape) > 2 and len(b_shape) > 2 and int(a_shape[-1]) > 1


__all__ = ["honours_out", "static_view"]
