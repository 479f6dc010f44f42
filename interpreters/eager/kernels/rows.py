"""Fused row kernels: ``layer_norm``, ``softmax``, ``log_softmax`` and ``gelu``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._support import F32, F64, Array, as_float, float_dtype, nb, normalize_axis
from .threads import parallel_for, split_call


NO_STATS: Array = np.empty((0, 2), F64)
"""The ``stats`` argument of the layer_norm row kernels that asks for no saved statistics."""


def layer_norm(x: Array, gamma: Array, beta: Array, *, eps: float, stats: Array | None = None) -> Array:
    """Normalise the last axis of ``x[..., D]`` (biased variance), then ``* gamma[D] + beta[D]``.

    ``stats``, if given, is a float64 ``[R, 2]`` array (``R`` the rows of ``x``, its size over ``D``) that
    receives each row's ``(mean, rstd)`` for :func:`.backward.layer_norm_backward`."""
    if x.ndim < 1:
        raise ValueError("layer_norm: x must have at least one axis")
    d = x.shape[-1]
    if np.shape(gamma) != (d,) or np.shape(beta) != (d,):
        raise ValueError(f"layer_norm: gamma and beta must have shape ({d},), "
                         f"got {np.shape(gamma)} and {np.shape(beta)} for x of shape {x.shape}")
    dt = float_dtype(x, gamma, beta)
    out = np.empty(x.shape, dt)
    if out.size == 0:
        return out
    x2 = as_float(x, dt).reshape(-1, d)
    g = as_float(gamma, dt)
    b = as_float(beta, dt)
    o2 = out.reshape(-1, d)
    rows = x2.shape[0]
    split_call(nb().layer_norm_rows, rows, x2.size, x2, g, b, float(eps), row_stats(stats, rows, "layer_norm"), o2)
    return out


def row_stats(stats: Array | None, rows: int, name: str) -> Array:
    """The ``stats`` argument of the layer_norm row kernels: :data:`NO_STATS` for ``None``, otherwise
    ``stats`` itself once checked to be a row-major float64 ``[rows, 2]`` (``ValueError`` naming ``name``)."""
    if stats is None:
        return NO_STATS
    if stats.shape != (rows, 2) or stats.dtype != F64 or not stats.flags.c_contiguous:
        raise ValueError(f"{name}: stats must be a row-major float64 array of shape ({rows}, 2), got "
                         f"{'row-major ' if stats.flags.c_contiguous else 'strided '}{stats.dtype} {stats.shape}")
    return stats


def _softmax_like(x: Array, axis: int, name: str, rows_kernel: str, cols_kernel: str) -> Array:
    ax = normalize_axis(axis, x.ndim, name) if x.ndim else 0
    dt = float_dtype(x)
    out = np.empty(x.shape, dt)
    if out.size == 0:
        return out
    xc = as_float(x, dt)
    shape = x.shape if x.ndim else (1,)
    a = math.prod(shape[:ax])
    n = shape[ax]
    b = math.prod(shape[ax + 1:])
    k = nb()
    if b == 1:
        x2 = xc if xc.shape == (a, n) else xc.reshape(a, n)
        o2 = out if out.shape == (a, n) else out.reshape(a, n)
        split_call(getattr(k, rows_kernel), a, x2.size, x2, o2)
    else:
        x3 = xc.reshape(a, n, b)
        o3 = out.reshape(a, n, b)
        cols = getattr(k, cols_kernel)
        if a >= 2:
            def body_cols(start: int, stop: int) -> None:
                cols(x3, o3, start, stop, 0, b)

            parallel_for(a, x3.size, body_cols)
        else:  # a single outer block: split the columns instead
            def body_inner(start: int, stop: int) -> None:
                cols(x3, o3, 0, a, start, stop)

            parallel_for(b, x3.size, body_inner)
    return out


def softmax(x: Array, *, axis: int) -> Array:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``; a row of ``-inf`` gives NaN."""
    return _softmax_like(x, axis, "softmax", "softmax_rows", "softmax_cols")


def log_softmax(x: Array, *, axis: int) -> Array:
    """``x - logsumexp(x)`` along ``axis`` (a row of ``-inf`` gives NaN)."""
    return _softmax_like(x, axis, "log_softmax", "log_softmax_rows", "log_softmax_cols")


GELU_KERNELS = {("none", F32): "gelu_erf32", ("none", F64): "gelu_erf64", ("tanh", F32): "gelu_tanh",
                ("tanh", F64): "gelu_tanh"}
"""The jitted flat kernel of GELU by ``(approximate, float dtype)``."""


def gelu(x: Array, *, approximate: str = "none") -> Array:
    """GELU: ``x * Phi(x)`` (``approximate="none"``, erf form) or the tanh form (``"tanh"``)."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    dt = float_dtype(x)
    out = np.empty(x.shape, dt)
    if out.size == 0:
        return out
    xf = as_float(x, dt).reshape(-1)
    of = out.reshape(-1)
    split_call(getattr(nb(), GELU_KERNELS[approximate, dt]), xf.size, xf.size, xf, of)
    return out


def _elementwise(x: Array, kernel: str) -> Array:
    """The flat jitted ``kernel(x, out, start, stop)`` over a float32 or float64 array of any layout, split
    across the kernel threads when large; the result is row-major."""
    out = np.empty(x.shape, x.dtype)
    if out.size:
        xf = np.ascontiguousarray(x).reshape(-1)
        split_call(getattr(nb(), kernel), xf.size, xf.size, xf, out.reshape(-1))
    return out


def relu(x: Array) -> Array:
    """``max(x, 0)`` of a float32 or float64 array in one jitted pass (split across the kernel threads when
    large), the same values as ``numpy.maximum(x, 0)``: NaN stays NaN, ``-0`` gives ``+0``. Any layout;
    the result is row-major."""
    return _elementwise(x, "relu_flat")


def tanh(x: Array) -> Array:
    """``tanh(x)`` of a float32 array in one vectorised pass (split across the kernel threads when large),
    within 1.5 ulp of the exact result; ``+-1`` at ``+-inf``, NaN stays NaN. Any layout; the result is
    row-major. (float64 arrays are numpy's ``tanh``.)"""
    if x.dtype != np.float32:
        raise ValueError(f"tanh: the jitted kernel takes float32, got {x.dtype}")
    return _elementwise(x, "tanh32_flat")


def exp(x: Array) -> Array:
    """``exp(x)`` of a float32 or float64 array in one pass of the vectorised exp (split across the kernel
    threads when large): within 1 ulp of the exact result, subnormal results included; ``inf`` above the
    largest finite result, NaN stays NaN. Any layout; the result is row-major."""
    return _elementwise(x, "exp_into")


def sigmoid(x: Array) -> Array:
    """``1 / (1 + exp(-x))`` elementwise in one pass (the vectorised exp), float32 or float64; other
    dtypes compute in the float dtype ``float_dtype`` gives them. Exact limits 0 and 1 far out; NaN stays NaN;
    results below the dtype's smallest normal number may be 0."""
    dt = float_dtype(x)
    out = np.empty(x.shape, dt)
    if out.size == 0:
        return out
    xf = as_float(x, dt).reshape(-1)
    split_call(nb().sigmoid_flat, xf.size, xf.size, xf, out.reshape(-1))
    return out
