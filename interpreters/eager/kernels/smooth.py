"""Smooth max pooling as the primitives define it: padded cells take part with value 0, and ``beta`` may be
any finite non-zero number (negative: a smooth minimum).

The window kernels in :mod:`.pool` treat padding as absent (``-inf``) and shift each window by its
maximum; here the input is padded with zeros explicitly (so the kernels run without padding), and a
negative ``beta`` runs the kernels on ``-x`` with ``|beta|``: ``smooth_min_beta(x) = -smooth_max_|beta|(-x)``,
whose derivative spreads with the same ``softmax(beta x)`` weights, so every exponent stays <= 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import pool

Array = np.ndarray[Any, Any]


def _zero_padded(x: Array, padding: tuple[int, ...], negate: bool) -> Array:
    if any(padding):
        x = np.pad(x, ((0, 0), (0, 0)) + tuple((p, p) for p in padding))
    return np.negative(x) if negate else x


def smooth_max_pool_nd(x: Array, *, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                       padding: tuple[int, ...], beta: float) -> Array:
    """Window ``log(sum(exp(beta x))) / beta`` over ``x[N, C, *in]`` with zero padding; ``[N, C, *out]``."""
    xs = _zero_padded(x, padding, beta < 0)
    out = pool.smooth_max_pool(xs, kernel_size=kernel_size, stride=stride, padding=(0,) * len(padding),
                               beta=abs(beta))
    return np.negative(out, out=out) if beta < 0 else out


def smooth_max_pool_backward_nd(x: Array, g: Array, *, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                                padding: tuple[int, ...], beta: float) -> Array:
    """``g[N, C, *out]`` spread over each window of ``x`` with the window's ``softmax(beta x)`` (padded
    cells included, their share dropped); shaped like ``x``."""
    xs = _zero_padded(x, padding, beta < 0)
    gx = pool.smooth_max_pool_backward(xs, g, kernel_size=kernel_size, stride=stride,
                                       padding=(0,) * len(padding), beta=abs(beta))
    if not any(padding):
        return gx
    inner = (slice(None), slice(None)) + tuple(slice(p, p + n) for p, n in zip(padding, x.shape[2:]))
    return np.ascontiguousarray(gx[inner])
