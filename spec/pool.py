"""Pooling over ``x[N, C, *spatial]`` (1 to 3 spatial axes) and the pooling adjoints.

Per spatial axis: ``out = (in + 2p - k)//s + 1`` with ``k >= 1``, ``s >= 1``,
``0 <= p <= k//2`` and ``k <= in + 2p``. Window ``o`` covers input positions
``o*s - p ... o*s - p + k - 1``; positions outside the input are padding:

* ``max_pool``: padding is ``-inf``; the argmax of a window is its first
  maximal *input* position in row-major order (the first NaN if there is one),
  so padding is never selected;
* ``avg_pool``: padding counts as zeros: the divisor is always ``prod(k)``;
* ``smooth_max_pool``: ``(1/beta) log sum exp(beta x)`` over the window's input
  positions (padding is ``-inf`` and contributes nothing).

A window with no input position at all (possible only when ``in == 0``) gives
``-inf`` (max, smooth max), ``0`` (avg, select) and routes no gradient.
The references loop over output positions, vectorised over ``N`` and ``C``,
and compute in float64.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from .aval import Aval
from .errors import ShapeError
from .shapes import (
    Array, aval_of, finish, float_result, fmt_shape, fmt_tuple, int_entries, int_tuple, is_known, known, pool_out_size,
    spatial_rank, strong,
)

Geometry = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[Any, ...]]


def pool_geometry(prim: str, x: Aval, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                  padding: tuple[int, ...], context: str | None = None) -> Geometry:
    """Validated ``(kernel_size, stride, padding, out_spatial)`` of a pooling of ``x``."""
    context = context or f"x: {fmt_shape(x.shape)}"
    n = spatial_rank(prim, "x", tuple(x.shape), context)
    k = int_tuple(prim, "kernel_size", kernel_size, n, context, minimum=1)
    s = int_tuple(prim, "stride", stride, n, context, minimum=1)
    p = int_tuple(prim, "padding", padding, n, context, minimum=0)
    params = f"kernel_size {fmt_tuple(k)}, stride {fmt_tuple(s)}, padding {fmt_tuple(p)}"
    out = []
    for i, size in enumerate(x.shape[2:]):
        if p[i] > k[i] // 2:
            raise ShapeError(
                f"{prim}: padding {p[i]} on spatial axis {i} is more than half the kernel size {k[i]} "
                f"(at most {k[i] // 2}) ({context}, {params})")
        padded = size + 2 * p[i]
        if known(padded) and k[i] > padded:
            raise ShapeError(
                f"{prim}: kernel size {k[i]} on spatial axis {i} is larger than the padded input {padded} "
                f"({context}, {params})")
        out.append(pool_out_size(size, k[i], s[i], p[i]))
    return k, s, p, tuple(out)


def _check_like(prim: str, name: str, a: Aval, expected: tuple[Any, ...], what: str, context: str) -> None:
    if len(a.shape) != len(expected) or any(known(e, d) and e != d for e, d in zip(expected, a.shape)):
        raise ShapeError(f"{prim}: {name} must have {what} {fmt_shape(expected)}, got {fmt_shape(a.shape)} ({context})")


def _windows(in_sp: tuple[int, ...], k: tuple[int, ...], s: tuple[int, ...], p: tuple[int, ...],
             out_sp: tuple[int, ...]) -> Iterator[tuple[tuple[int, ...], tuple[slice, ...]]]:
    """Each output position with its window clipped to the input (slices into the unpadded input)."""
    for o in itertools.product(*(range(n) for n in out_sp)):
        starts = [oi * si - pi for oi, si, pi in zip(o, s, p)]
        yield o, tuple(slice(max(a, 0), min(a + ki, n)) for a, ki, n in zip(starts, k, in_sp))


def _spatial(x: Array) -> tuple[int, ...]:
    return tuple(int(d) for d in x.shape[2:])


def _flat(x: Array, window: tuple[slice, ...]) -> Array:
    """The window's values as ``[N, C, K]`` (K input positions in row-major order)."""
    vals = x[(slice(None), slice(None)) + window]
    flat: Array = vals.reshape(vals.shape[0], vals.shape[1], math.prod(vals.shape[2:]))
    return flat


def _argmax_positions(x: Array, window: tuple[slice, ...]) -> tuple[Array, ...]:
    """Index arrays ``(n, c, *spatial)``, each ``[N, C]``, of every window's first argmax."""
    flat = _flat(x, window)
    idx = np.argmax(flat, axis=2)  # first maximum; the first NaN if any
    shape = tuple(sl.stop - sl.start for sl in window)
    coords = np.unravel_index(idx, shape)
    nn, cc = np.indices(x.shape[:2])
    return (nn, cc) + tuple(c + sl.start for c, sl in zip(coords, window))


def _empty(window: tuple[slice, ...]) -> bool:
    return any(sl.stop <= sl.start for sl in window)


# ---- max_pool ---------------------------------------------------------------------------------

def max_pool_nd_rule(x: Aval, *, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                  padding: tuple[int, ...]) -> Aval:
    """``x[N, C, *in] -> [N, C, *out]``, ``out = (in + 2p - k)//s + 1``; float dtypes."""
    dtype = float_result("max_pool_nd", [("x", x)], f"x: {fmt_shape(x.shape)}")
    out = pool_geometry("max_pool_nd", x, kernel_size, stride, padding)[3]
    return Aval(tuple(x.shape[:2]) + out, dtype)


def max_pool_nd_ref(x: object, *, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                 padding: tuple[int, ...]) -> Array:
    """Window max (padding ``-inf``; NaN propagates)."""
    out = max_pool_nd_rule(aval_of("max_pool_nd", "x", x), kernel_size=kernel_size, stride=stride, padding=padding)
    xa = np.asarray(x, dtype=np.float64)
    result = np.full(out.shape, -np.inf)
    for o, window in _windows(_spatial(xa), kernel_size, stride, padding, tuple(out.shape[2:])):
        if not _empty(window):
            result[(slice(None), slice(None)) + o] = np.max(_flat(xa, window), axis=2)
    return finish(result, out)


def max_pool_backward_nd_rule(x: Aval, g: Aval, *, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                           padding: tuple[int, ...]) -> Aval:
    """``x[N, C, *in], g[N, C, *out] -> [N, C, *in]``; ``g`` has ``max_pool(x)``'s shape."""
    context = f"x: {fmt_shape(x.shape)}, g: {fmt_shape(g.shape)}"
    dtype = float_result("max_pool_backward_nd", [("x", x), ("g", g)], context)
    out = pool_geometry("max_pool_backward_nd", x, kernel_size, stride, padding, context)[3]
    _check_like("max_pool_backward_nd", "g", g, tuple(x.shape[:2]) + out, "the max_pool_nd output shape", context)
    return Aval(tuple(x.shape), dtype)


def max_pool_backward_nd_ref(x: object, g: object, *, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                          padding: tuple[int, ...]) -> Array:
    """Adds ``g[n, c, o]`` at the first argmax of window ``o`` of ``x[n, c]``."""
    out = max_pool_backward_nd_rule(aval_of("max_pool_backward_nd", "x", x), aval_of("max_pool_backward_nd", "g", g),
                                 kernel_size=kernel_size, stride=stride, padding=padding)
    xa, ga = np.asarray(x, dtype=np.float64), np.asarray(g, dtype=np.float64)
    result = np.zeros(xa.shape)
    for o, window in _windows(_spatial(xa), kernel_size, stride, padding, _spatial(ga)):
        if not _empty(window):
            np.add.at(result, _argmax_positions(xa, window), ga[(slice(None), slice(None)) + o])
    return finish(result, out)


def max_pool_select_nd_rule(x: Aval, h: Aval, *, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                         padding: tuple[int, ...]) -> Aval:
    """``x[N, C, *in], h[N, C, *in] -> [N, C, *out]`` with ``h``'s dtype (float)."""
    context = f"x: {fmt_shape(x.shape)}, h: {fmt_shape(h.shape)}"
    float_result("max_pool_select_nd", [("x", x), ("h", h)], context)
    out = pool_geometry("max_pool_select_nd", x, kernel_size, stride, padding, context)[3]
    _check_like("max_pool_select_nd", "h", h, tuple(x.shape), "the shape of x", context)
    return Aval(tuple(x.shape[:2]) + out, strong(h.dtype))


def max_pool_select_nd_ref(x: object, h: object, *, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                        padding: tuple[int, ...]) -> Array:
    """``h`` read at the first argmax of each window of ``x`` (the adjoint of ``max_pool_backward``)."""
    out = max_pool_select_nd_rule(aval_of("max_pool_select_nd", "x", x), aval_of("max_pool_select_nd", "h", h),
                               kernel_size=kernel_size, stride=stride, padding=padding)
    xa, ha = np.asarray(x, dtype=np.float64), np.asarray(h, dtype=np.float64)
    result = np.zeros(out.shape)
    for o, window in _windows(_spatial(xa), kernel_size, stride, padding, tuple(out.shape[2:])):
        if not _empty(window):
            result[(slice(None), slice(None)) + o] = ha[_argmax_positions(xa, window)]
    return finish(result, out)


# ---- avg_pool ---------------------------------------------------------------------------------

def avg_pool_nd_rule(x: Aval, *, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                  padding: tuple[int, ...]) -> Aval:
    """``x[N, C, *in] -> [N, C, *out]``, ``out = (in + 2p - k)//s + 1``; float dtypes."""
    dtype = float_result("avg_pool_nd", [("x", x)], f"x: {fmt_shape(x.shape)}")
    out = pool_geometry("avg_pool_nd", x, kernel_size, stride, padding)[3]
    return Aval(tuple(x.shape[:2]) + out, dtype)


def avg_pool_nd_ref(x: object, *, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                 padding: tuple[int, ...]) -> Array:
    """Window sum divided by ``prod(kernel_size)`` (padding counts as zeros)."""
    out = avg_pool_nd_rule(aval_of("avg_pool_nd", "x", x), kernel_size=kernel_size, stride=stride, padding=padding)
    xa = np.asarray(x, dtype=np.float64)
    size = math.prod(kernel_size)
    result = np.zeros(out.shape)
    for o, window in _windows(_spatial(xa), kernel_size, stride, padding, tuple(out.shape[2:])):
        result[(slice(None), slice(None)) + o] = np.sum(_flat(xa, window), axis=2) / size
    return finish(result, out)


def _avg_input_shape(g: Aval, input_shape: object, context: str) -> tuple[Any, ...]:
    """The full input shape ``[N, C, *in]`` from ``input_shape`` (spatial ``in`` or the full shape)."""
    rank = len(g.shape)
    if not isinstance(input_shape, (tuple, list)) or len(input_shape) not in (rank - 2, rank):
        raise ShapeError(
            f"avg_pool_backward_nd: input_shape must be the spatial input shape ({rank - 2} entries) "
            f"or the full input shape ({rank} entries), got {input_shape!r} ({context})")
    int_entries("avg_pool_backward_nd", "input_shape", input_shape, context)
    if len(input_shape) == rank - 2:
        return tuple(g.shape[:2]) + tuple(input_shape)
    if any(known(a, b) and a != b for a, b in zip(input_shape[:2], g.shape[:2])):
        raise ShapeError(
            f"avg_pool_backward_nd: input_shape {fmt_shape(input_shape)} and g disagree on N or C ({context})")
    return tuple(input_shape)


def avg_pool_backward_nd_rule(g: Aval, *, input_shape: tuple[int, ...], kernel_size: tuple[int, ...],
                           stride: tuple[int, ...], padding: tuple[int, ...]) -> Aval:
    """``g[N, C, *out] -> [N, C, *input_shape]``; ``avg_pool`` of that shape must give ``g``'s shape.
    ``input_shape`` is the spatial input shape (the full ``[N, C, *in]`` is accepted too)."""
    context = f"g: {fmt_shape(g.shape)}, input_shape {input_shape!r}"
    spatial_rank("avg_pool_backward_nd", "g", tuple(g.shape), context)
    dtype = float_result("avg_pool_backward_nd", [("g", g)], context)
    full = _avg_input_shape(g, input_shape, context)
    if any(is_known(d) and d < 0 for d in full):
        raise ShapeError(f"avg_pool_backward_nd: input_shape must hold non-negative sizes ({context})")
    x = Aval(full, dtype)
    out = pool_geometry("avg_pool_backward_nd", x, kernel_size, stride, padding, context)[3]
    _check_like("avg_pool_backward_nd", "g", g, full[:2] + out, "the avg_pool_nd output shape", context)
    return Aval(full, dtype)


def avg_pool_backward_nd_ref(g: object, *, input_shape: tuple[int, ...], kernel_size: tuple[int, ...],
                          stride: tuple[int, ...], padding: tuple[int, ...]) -> Array:
    """Each ``g[n, c, o] / prod(k)`` added to every input position of window ``o``."""
    out = avg_pool_backward_nd_rule(aval_of("avg_pool_backward_nd", "g", g), input_shape=input_shape,
                                 kernel_size=kernel_size, stride=stride, padding=padding)
    ga = np.asarray(g, dtype=np.float64)
    size = math.prod(kernel_size)
    result = np.zeros(out.shape)
    expand = (slice(None), slice(None)) + (None,) * (ga.ndim - 2)
    for o, window in _windows(tuple(out.shape[2:]), kernel_size, stride, padding, _spatial(ga)):
        result[(slice(None), slice(None)) + window] += ga[(slice(None), slice(None)) + o][expand] / size
    return finish(result, out)


# ---- smooth_max_pool --------------------------------------------------------------------------

def _check_beta(prim: str, beta: object, context: str) -> float:
    if not isinstance(beta, (int, float)) or isinstance(beta, bool) or beta == 0 or not math.isfinite(beta):
        raise ValueError(f"{prim}: beta must be a finite non-zero number, got {beta!r} ({context})")
    return float(beta)


def _zero_pad(x: Array, padding: tuple[int, ...]) -> Array:
    """``x[N, C, *sp]`` with ``padding`` zeros on both sides of each spatial axis (smooth pooling counts them)."""
    pads: Array = np.pad(x, ((0, 0), (0, 0)) + tuple((p, p) for p in padding))
    return pads


def smooth_max_pool_nd_rule(x: Aval, *, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                         padding: tuple[int, ...], beta: float) -> Aval:
    """``x[N, C, *in] -> [N, C, *out]`` like ``max_pool``; ``beta`` finite and non-zero; float dtypes."""
    context = f"x: {fmt_shape(x.shape)}"
    _check_beta("smooth_max_pool_nd", beta, context)
    dtype = float_result("smooth_max_pool_nd", [("x", x)], context)
    out = pool_geometry("smooth_max_pool_nd", x, kernel_size, stride, padding)[3]
    return Aval(tuple(x.shape[:2]) + out, dtype)


def _lse_parts(flat: Array, beta: float) -> tuple[Array, Array]:
    """``(m, weights)`` of ``z = beta * flat`` over the last axis: ``m = max z`` and ``softmax(z)``."""
    z = beta * flat
    m = np.max(z, axis=2, keepdims=True)
    e = np.exp(z - m)  # NaN where m is not finite
    return m[..., 0], e / np.sum(e, axis=2, keepdims=True)


def smooth_max_pool_nd_ref(x: object, *, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                        padding: tuple[int, ...], beta: float) -> Array:
    """``log(sum(exp(beta x))) / beta`` per window, padded cells counted as zeros, computed as
    ``(m + log sum exp(beta x - m)) / beta`` with ``m`` the window's largest ``beta x``; a non-finite
    ``m`` gives ``m / beta`` (``-inf``, ``inf`` or NaN)."""
    out = smooth_max_pool_nd_rule(aval_of("smooth_max_pool_nd", "x", x), kernel_size=kernel_size, stride=stride,
                               padding=padding, beta=beta)
    xa = _zero_pad(np.asarray(x, dtype=np.float64), padding)
    result = np.full(out.shape, -np.inf)
    zero = (0,) * len(padding)
    with np.errstate(all="ignore"):
        for o, window in _windows(_spatial(xa), kernel_size, stride, zero, tuple(out.shape[2:])):
            if _empty(window):
                continue
            z = beta * _flat(xa, window)
            m = np.max(z, axis=2)
            lse = m + np.log(np.sum(np.exp(z - m[..., None]), axis=2))
            result[(slice(None), slice(None)) + o] = np.where(np.isfinite(m), lse, m) / beta
    return finish(result, out)


def smooth_max_pool_backward_nd_rule(x: Aval, g: Aval, *, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                                  padding: tuple[int, ...], beta: float) -> Aval:
    """``x[N, C, *in], g[N, C, *out] -> [N, C, *in]``; ``g`` has ``smooth_max_pool(x)``'s shape."""
    context = f"x: {fmt_shape(x.shape)}, g: {fmt_shape(g.shape)}"
    _check_beta("smooth_max_pool_backward_nd", beta, context)
    dtype = float_result("smooth_max_pool_backward_nd", [("x", x), ("g", g)], context)
    out = pool_geometry("smooth_max_pool_backward_nd", x, kernel_size, stride, padding, context)[3]
    _check_like("smooth_max_pool_backward_nd", "g", g, tuple(x.shape[:2]) + out,
                "the smooth_max_pool output shape", context)
    return Aval(tuple(x.shape), dtype)


def smooth_max_pool_backward_nd_ref(x: object, g: object, *, kernel_size: tuple[int, ...],
                                 stride: tuple[int, ...], padding: tuple[int, ...], beta: float) -> Array:
    """Each ``g[n, c, o]`` spread over window ``o`` (padded cells included as zeros) with weights
    ``softmax(beta * x_window)``; the shares of padded cells are dropped (NaN weights where the
    window's ``beta x`` has no finite maximum)."""
    out = smooth_max_pool_backward_nd_rule(aval_of("smooth_max_pool_backward_nd", "x", x),
                                        aval_of("smooth_max_pool_backward_nd", "g", g),
                                        kernel_size=kernel_size, stride=stride, padding=padding, beta=beta)
    xa, ga = _zero_pad(np.asarray(x, dtype=np.float64), padding), np.asarray(g, dtype=np.float64)
    result = np.zeros(xa.shape)
    zero = (0,) * len(padding)
    with np.errstate(all="ignore"):
        for o, window in _windows(_spatial(xa), kernel_size, stride, zero, _spatial(ga)):
            if _empty(window):
                continue
            _, weights = _lse_parts(_flat(xa, window), beta)
            contrib = weights * ga[(slice(None), slice(None)) + o][..., None]
            shape = xa.shape[:2] + tuple(sl.stop - sl.start for sl in window)
            result[(slice(None), slice(None)) + window] += contrib.reshape(shape)
    inner = (slice(None), slice(None)) + tuple(slice(p, p + n) for p, n in zip(padding, out.shape[2:]))
    return finish(result[inner], out)
