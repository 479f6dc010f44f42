"""Pooling over ``x[N, C, *spatial]`` with 1, 2 or 3 spatial dims.

Every rank runs the same 3-d kernels: the input is viewed as ``[N*C, D, H, W]`` with
size-1 leading spatial dims (kernel 1, stride 1, padding 0 there), which keeps the
number of compiled signatures at two per kernel (float32, float64).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._support import Array, as_float, float_dtype, nb
from .threads import split_call

Geometry = tuple[tuple[int, int, int], tuple[int, int, int], tuple[int, int, int]]


def _geometry(name: str, x_shape: tuple[int, ...], kernel_size: tuple[int, ...], stride: tuple[int, ...],
              padding: tuple[int, ...]) -> tuple[Geometry, tuple[int, ...]]:
    """Validate; return the 3-d ``(k, s, p)`` triples and the spatial output shape."""
    nsp = len(x_shape) - 2
    if nsp not in (1, 2, 3):
        raise ValueError(f"{name}: x must be [N, C, *spatial] with 1 to 3 spatial dims, got shape {x_shape}")
    k, s, p = tuple(kernel_size), tuple(stride), tuple(padding)
    if not len(k) == len(s) == len(p) == nsp:
        raise ValueError(f"{name}: kernel_size {k}, stride {s} and padding {p} must each have "
                         f"{nsp} entries for x of shape {x_shape}")
    out: list[int] = []
    for i in range(nsp):
        if k[i] < 1 or s[i] < 1 or p[i] < 0:
            raise ValueError(f"{name}: need kernel_size >= 1, stride >= 1, padding >= 0; "
                             f"got {k}, {s}, {p}")
        o = (x_shape[2 + i] + 2 * p[i] - k[i]) // s[i] + 1
        if o < 0:
            o = 0
        out.append(o)
    pad = 3 - nsp
    k3 = (1,) * pad + k
    s3 = (1,) * pad + s
    p3 = (0,) * pad + p
    return ((k3[0], k3[1], k3[2]), (s3[0], s3[1], s3[2]), (p3[0], p3[1], p3[2])), tuple(out)


def _as4(a: Array, spatial: tuple[int, ...]) -> tuple[int, ...]:
    """Shape ``[N*C, D, H, W]`` of ``a[N, C, *spatial]``."""
    return (a.shape[0] * a.shape[1],) + (1,) * (3 - len(spatial)) + tuple(spatial)


def _run(kernel_name: str, arrays: tuple[Array, ...], geo: Geometry, planes: int, work: int,
         extra: tuple[Any, ...] = ()) -> None:
    (kd, kh, kw), (sd, sh, sw), (pd, ph, pw) = geo
    split_call(getattr(nb(), kernel_name), planes, work, *arrays, kd, kh, kw, sd, sh, sw, pd, ph, pw, *extra)


def _check_g(name: str, g: Array, x_shape: tuple[int, ...], out_sp: tuple[int, ...]) -> None:
    want = tuple(x_shape[:2]) + out_sp
    if tuple(g.shape) != want:
        raise ValueError(f"{name}: g must have shape {want} (the pooled shape of x{list(x_shape)}), "
                         f"got {tuple(g.shape)}")


def _forward(kernel_name: str, x: Array, geo: Geometry, osp: tuple[int, ...], cost: int = 1,
             extra: tuple[Any, ...] = ()) -> Array:
    """``out[N, C, *osp]`` of a pooling kernel reading ``x`` (``cost``: its work per window tap)."""
    dt = float_dtype(x)
    out = np.empty(x.shape[:2] + osp, dt)
    if out.size == 0:
        return out
    x4 = as_float(x, dt).reshape(_as4(x, x.shape[2:]))
    _run(kernel_name, (x4, out.reshape(_as4(out, osp))), geo, x4.shape[0], cost * out.size * math.prod(geo[0]),
         extra)
    return out


def _backward(kernel_name: str, x: Array, g: Array, geo: Geometry, osp: tuple[int, ...], cost: int = 1,
              extra: tuple[Any, ...] = (), zeroes: bool = False) -> Array:
    """``dx`` like ``x`` from a kernel spreading ``g[N, C, *osp]`` over the windows of ``x`` (``zeroes``:
    the kernel clears each plane it writes, in cache, so ``dx`` needs no separate zero-fill pass)."""
    dt = float_dtype(x, g)
    if x.size == 0 or g.size == 0:
        return np.zeros(x.shape, dt)
    dx = np.empty(x.shape, dt) if zeroes else np.zeros(x.shape, dt)
    x4 = as_float(x, dt).reshape(_as4(x, x.shape[2:]))
    g4 = as_float(g, dt).reshape(_as4(g, osp))
    _run(kernel_name, (x4, g4, dx.reshape(x4.shape)), geo, x4.shape[0], cost * g.size * math.prod(geo[0]), extra)
    return dx


def max_pool(x: Array, *, kernel_size: tuple[int, ...], stride: tuple[int, ...],
             padding: tuple[int, ...]) -> Array:
    """Window max over ``x[N, C, *in]``; padding is ``-inf``; NaN propagates."""
    geo, osp = _geometry("max_pool", x.shape, kernel_size, stride, padding)
    if len(osp) == 2 and geo == ((1, 2, 2), (1, 2, 2), (0, 0, 0)):  # the common 2x2 / stride 2 case
        dt = float_dtype(x)
        out = np.empty(x.shape[:2] + osp, dt)
        if out.size:
            x3 = as_float(x, dt).reshape((-1,) + x.shape[2:])
            split_call(nb().max_pool2x2_fwd, x3.shape[0], 4 * out.size, x3, out.reshape((-1,) + osp))
        return out
    return _forward("max_pool_fwd", x, geo, osp)


def max_pool_backward(x: Array, g: Array, *, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                      padding: tuple[int, ...]) -> Array:
    """Routes ``g[N, C, *out]`` to the first argmax (row-major) of each window of ``x``; result like ``x``."""
    geo, osp = _geometry("max_pool_backward", x.shape, kernel_size, stride, padding)
    _check_g("max_pool_backward", g, x.shape, osp)
    return _backward("max_pool_bwd", x, g, geo, osp, zeroes=True)


def max_pool_select(x: Array, h: Array, *, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                    padding: tuple[int, ...]) -> Array:
    """Reads ``h`` (shaped like ``x``) at the first argmax of each window of ``x``; shaped like
    ``max_pool(x)``."""
    geo, osp = _geometry("max_pool_select", x.shape, kernel_size, stride, padding)
    if tuple(h.shape) != tuple(x.shape):
        raise ValueError(f"max_pool_select: h must have the shape of x {tuple(x.shape)}, got {tuple(h.shape)}")
    dt = float_dtype(x, h)
    out = np.empty(x.shape[:2] + osp, dt)
    if out.size == 0:
        return out
    x4 = as_float(x, dt).reshape(_as4(x, x.shape[2:]))
    h4 = as_float(h, dt).reshape(x4.shape)
    _run("max_pool_select", (x4, h4, out.reshape(_as4(out, osp))), geo, x4.shape[0],
         out.size * math.prod(geo[0]))
    return out


def avg_pool(x: Array, *, kernel_size: tuple[int, ...], stride: tuple[int, ...],
             padding: tuple[int, ...]) -> Array:
    """Window mean; padded positions count as zeros (divisor is always ``prod(k)``)."""
    geo, osp = _geometry("avg_pool", x.shape, kernel_size, stride, padding)
    return _forward("avg_pool_fwd", x, geo, osp)


def avg_pool_backward(g: Array, *, input_shape: tuple[int, ...], kernel_size: tuple[int, ...],
                      stride: tuple[int, ...], padding: tuple[int, ...]) -> Array:
    """The adjoint of ``avg_pool``: spreads ``g[N, C, *out]`` evenly over each window;
    the result is ``[N, C, *input_shape]``."""
    x_shape = tuple(g.shape[:2]) + tuple(input_shape)
    geo, osp = _geometry("avg_pool_backward", x_shape, kernel_size, stride, padding)
    _check_g("avg_pool_backward", g, x_shape, osp)
    dt = float_dtype(g)
    dx = np.zeros(x_shape, dt)
    if dx.size == 0 or g.size == 0:
        return dx
    g4 = as_float(g, dt).reshape(_as4(g, osp))
    _run("avg_pool_bwd", (g4, dx.reshape(_as4(dx, tuple(input_shape)))), geo, g4.shape[0],
         g.size * math.prod(geo[0]))
    return dx


def smooth_max_pool(x: Array, *, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                    padding: tuple[int, ...], beta: float) -> Array:
    """Window log-sum-exp ``(1/beta) log(sum(exp(beta x)))`` (padding ``-inf``, i.e. padded
    positions do not contribute), shifted by the window max for stability."""
    geo, osp = _geometry("smooth_max_pool", x.shape, kernel_size, stride, padding)
    if beta == 0:
        raise ValueError("smooth_max_pool: beta must be non-zero")
    return _forward("smooth_max_pool_fwd", x, geo, osp, 8, (float(beta),))


def smooth_max_pool_backward(x: Array, g: Array, *, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                             padding: tuple[int, ...], beta: float) -> Array:
    """Spreads ``g[N, C, *out]`` over each window with the window's ``softmax(beta x)`` weights."""
    geo, osp = _geometry("smooth_max_pool_backward", x.shape, kernel_size, stride, padding)
    _check_g("smooth_max_pool_backward", g, x.shape, osp)
    if beta == 0:
        raise ValueError("smooth_max_pool_backward: beta must be non-zero")
    return _backward("smooth_max_pool_bwd", x, g, geo, osp, 16, (float(beta),))
