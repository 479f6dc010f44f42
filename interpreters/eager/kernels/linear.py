"""The dense layer on arrays: ``y[*lead, out] = x[*lead, in] @ w[out, in]^T + b[out]`` and its gradients.

One GEMM over the leading axes folded into rows (``[M, in]`` with ``M = prod(lead)``), the bias added
in place to the GEMM's fresh result (each output element gets ``b`` added once, as ``matmul`` then
``add`` would), and for the backward the three gradients from the folded cotangent ``g[M, out]``:

- ``dx = g @ w`` (``[M, in]``, back to ``x``'s shape);
- ``dw = g^T @ x`` in ``w``'s memory order (a column-major weight, as :class:`tensorplay.nn.Linear`
  keeps it, gets a column-major gradient: the transposed product ``(x^T @ g)^T``), so the optimiser's
  element-wise update runs over both in one order;
- ``db = 1^T @ g``: the column sums as one GEMV (2-4x faster than ``numpy.sum(axis=0)`` on these
  shapes; the same sum, rounded as float32 or float64 accumulation in another order).

Every GEMM goes through :func:`.threads.matmul` (the thread policy). Inputs are never mutated; any
memory layout is accepted (a non-contiguous ``x`` is copied once by the fold, as ``reshape`` would).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .threads import matmul

Array = np.ndarray[Any, Any]

_ONES: dict[Any, Array] = {}
"""dtype -> a private vector of ones (grown on demand; read-only to everyone)."""


def _ones(n: int, dtype: Any) -> Array:
    ones = _ONES.get(dtype)
    if ones is None or ones.shape[0] < n:
        ones = np.ones(max(n, 256), dtype)
        ones.flags.writeable = False
        _ONES[dtype] = ones
    return ones[:n]


def _rows(a: Array, width: int) -> Array:
    """``a[*lead, width]`` folded to ``[prod(lead), width]`` (a view when the layout allows)."""
    return a if a.ndim == 2 else a.reshape(math.prod(a.shape[:-1]), width)


def linear(x: Array, w: Array, b: Array | None) -> Array:
    """``x[*lead, in] @ w[out, in]^T (+ b[out]) -> [*lead, out]`` (``x.ndim >= 2``, one dtype)."""
    n, k = w.shape
    y: Array = matmul(_rows(x, k), w.T)
    if b is not None:
        np.add(y, b, out=y)
    return y if x.ndim == 2 else y.reshape(x.shape[:-1] + (n,))


def linear_backward(x: Array, w: Array, g: Array, need_x: bool, need_w: bool,
                    need_b: bool) -> tuple[Array | None, Array | None, Array | None]:
    """``(dx, dw, db)`` of :func:`linear` for the cotangent ``g[*lead, out]`` (``None`` where not needed)."""
    n, k = w.shape
    g2 = _rows(g, n)
    dx = dw = db = None
    if need_x:
        dx = matmul(g2, w)
        if x.ndim != 2:
            dx = dx.reshape(x.shape)
    if need_w:
        x2 = _rows(x, k)
        dw = matmul(x2.T, g2).T if w.flags.f_contiguous and not w.flags.c_contiguous else matmul(g2.T, x2)
    if need_b:
        db = matmul(_ones(g2.shape[0], g2.dtype)[None, :], g2)[0]
    return dx, dw, db


__all__ = ["linear", "linear_backward"]
