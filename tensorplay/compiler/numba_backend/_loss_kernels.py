"""Jitted row kernels of the compiled cross-entropy (:func:`.runtime.cross_entropy`), imported on first use.

Rows whose target is ``ignore`` count for nothing, as in the recorded form (a masked sum over a count of
the other rows). ``exp`` goes through the eager kernels' vectorisable ``vexp_nonpos``."""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorplay.interpreters.eager._numba_losses import row_logsumexp
from tensorplay.interpreters.eager.kernels._numba_kernels import jit, vexp_nonpos


@jit
def masked_cross_entropy_rows(x: Any, target: Any, ignore: Any, lse: Any) -> Any:
    """``lse[i] = logsumexp(x[i])`` for every row of ``x[N, C]``; returns ``(total, count, bad)``: the sum of
    ``lse[i] - x[i, target[i]]`` (in float64) over the ``count`` rows whose target is not ``ignore``, and
    the first row whose target is neither ``ignore`` nor in ``[0, C)`` (nothing is done past it), or -1."""
    n, d = x.shape
    total = 0.0
    count = 0
    for i in range(n):
        t = target[i]
        if t != ignore and (t < 0 or t >= d):
            return total, count, i
        row = row_logsumexp(x, i)
        lse[i] = row
        if t != ignore:
            total += row - x[i, t]
            count += 1
    return total, count, -1


@jit
def biased_cross_entropy_rows(z: Any, bias: Any, target: Any, ignore: Any, out: Any, lse: Any) -> Any:
    """:func:`masked_cross_entropy_rows` of the logits ``z[N, C] + bias[C]``, which are written to ``out``."""
    n, d = z.shape
    for i in range(n):
        for j in range(d):
            out[i, j] = z[i, j] + bias[j]
    return masked_cross_entropy_rows(out, target, ignore, lse)


@jit
def masked_cross_entropy_grad_rows(x: Any, target: Any, ignore: Any, lse: Any, step: Any, out: Any, sums: Any,
                                   sum_rows: Any) -> None:
    """``out[i] = step * (softmax(x[i]) - onehot(target[i]))``; a row whose target is ``ignore`` gets
    ``0 - softmax(x[i]) * 0`` (zeros, NaN where the recorded backward's product has NaN). ``out`` may be
    ``x`` itself. With ``sum_rows``, ``sums[j]`` is the sum of ``out[:, j]`` (accumulated in float64)."""
    n, d = x.shape
    zero = x.dtype.type(0)
    total = np.zeros(d if sum_rows else 0, np.float64)
    for i in range(n):
        row = lse[i]
        t = target[i]
        if t == ignore:
            for j in range(d):
                out[i, j] = zero - vexp_nonpos(x[i, j] - row) * zero
        else:
            for j in range(d):
                out[i, j] = vexp_nonpos(x[i, j] - row) * step
            out[i, t] -= step
        if sum_rows:
            for j in range(d):
                total[j] += out[i, j]
    if sum_rows:
        for j in range(d):
            sums[j] = total[j]
