"""Jitted row kernels of the fused eager cross-entropy (imported, and compiled or loaded from numba's
cache, on first use by :mod:`tensorplay.interpreters.eager.losses`).

``exp`` goes through the kernels' vectorisable ``vexp_nonpos`` (numba's own ``exp`` is scalar)."""

from __future__ import annotations

import math
from typing import Any

from tensorplay.interpreters.eager.kernels._numba_kernels import _row_max, jit, vexp_nonpos


@jit
def row_logsumexp(x: Any, i: Any) -> Any:
    """``logsumexp(x[i])`` of row ``i`` of ``x[N, C]`` (``C >= 1``), in ``x``'s dtype: the row's max plus the
    log of the sum of ``exp(x[i, j] - max)``."""
    m = _row_max(x, i)
    s = x.dtype.type(0)
    for j in range(x.shape[1]):
        s += vexp_nonpos(x[i, j] - m)
    return m + x.dtype.type(math.log(s))


@jit
def cross_entropy_rows(x: Any, target: Any, lse: Any) -> Any:
    """``sum_i logsumexp(x[i]) - x[i, target[i]]`` over the rows of ``x[N, C]`` (accumulated in float64),
    with ``lse[i] = logsumexp(x[i])``; returns ``(total, bad)``: ``bad`` is the first row whose target is
    outside ``[0, C)`` (nothing is summed past it), or -1."""
    n, d = x.shape
    total = 0.0
    for i in range(n):
        t = target[i]
        if t < 0 or t >= d:
            return total, i
        row = row_logsumexp(x, i)
        lse[i] = row
        total += row - x[i, t]
    return total, -1


@jit
def cross_entropy_grad_rows(x: Any, target: Any, lse: Any, scale: Any, out: Any) -> None:
    """``out[i] = scale * (softmax(x[i]) - onehot(target[i]))``, the softmax as ``exp(x - lse)``."""
    n, d = x.shape
    for i in range(n):
        row = lse[i]
        for j in range(d):
            out[i, j] = vexp_nonpos(x[i, j] - row) * scale
        out[i, target[i]] -= scale
