"""Backward kernels for the eager tape's fused vjp rules (:mod:`tensorplay.interpreters.eager.fused_vjp`),
and the vectorised ``erf``: numpy arrays in, new numpy arrays out.

Inputs may have any layout (non-contiguous, broadcast views); each function computes in
the promoted float dtype of its inputs (float64 if any is float64, else float32) and
returns fresh arrays. Zero-size inputs return without running a kernel. The jitted code
lives in :mod:`._numba_backward`, imported (with numba) on first use.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

import numpy as np

from . import attention_blocks, head_stacks
from ._support import F64, Array, as_float, float_dtype, jitted, nb, normalize_axis, scratch
from .rows import row_stats
from .sdpa import mask_stack, over_heads, probabilities
from .threads import parallel_for, split_call

_NBB: ModuleType | None = None


def nbb() -> Any:
    """The module of jitted backward kernels (imports numba on first use)."""
    global _NBB
    if _NBB is None:
        from . import _numba_backward

        _NBB = _numba_backward
    return _NBB


def _flat_call(kernel: str, out_dtype: np.dtype[Any], *arrays: Array, module: str | None = None) -> Array:
    """``out = kernel(*arrays)`` elementwise over arrays of one shape (flattened, C order); the kernel is
    :mod:`._numba_backward`'s, or the jitted ``module``'s when given."""
    shape = arrays[0].shape
    out = np.empty(shape, out_dtype)
    if out.size == 0:
        return out
    flat = [as_float(a, out_dtype).reshape(-1) for a in arrays]
    source = nbb() if module is None else jitted(module)
    split_call(getattr(source, kernel), out.size, out.size * 4, *flat, out.reshape(-1))
    return out


def erf(x: Array) -> Array:
    """The error function, elementwise, for float32 or float64 ``x`` (vectorised: about 1 ulp in
    float32, a few ulp in float64; ``erf(+-inf) = +-1``; NaN propagates)."""
    dt = F64 if x.dtype == F64 else np.dtype(np.float32)
    return _flat_call("erf64" if dt == F64 else "erf32", dt, x)


def gelu_backward(g: Array, x: Array, *, approximate: str = "none") -> Array:
    """``g * gelu'(x)`` (``approximate`` ``"none"``: the erf form; ``"tanh"``: the tanh form)."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu_backward: approximate must be 'none' or 'tanh', got {approximate!r}")
    if g.shape != x.shape:
        raise ValueError(f"gelu_backward: g {g.shape} and x {x.shape} must have the same shape")
    dt = float_dtype(g, x)
    if approximate == "none" and dt != F64:
        return _flat_call("gelu_erf_bwd32", dt, g, x, module="_numba_gelu")  # float32: vectorised polynomials
    kernel = "gelu_erf_bwd" if approximate == "none" else "gelu_tanh_bwd"
    return _flat_call(kernel, dt, g, x)


def relu_backward(g: Array, y: Array) -> Array:
    """``g * sign(y)`` for ``y = relu(x)`` (0 where ``y == 0``; NaN where ``y`` is NaN)."""
    if g.shape != y.shape:
        raise ValueError(f"relu_backward: g {g.shape} and y {y.shape} must have the same shape")
    return _flat_call("mul_sign", float_dtype(g, y), g, y)


def layer_norm_backward(x: Array, gamma: Array, g: Array, *, eps: float, need_x: bool = True,
                        need_params: bool = True, stats: Array | None = None
                        ) -> tuple[Array | None, Array | None, Array | None]:
    """``(dx, dgamma, dbeta)`` of ``layer_norm(x[..., D], gamma[D], beta[D])`` for the cotangent ``g``
    (``dx`` is ``None`` unless ``need_x``, the other two ``None`` unless ``need_params``). ``stats`` is
    the forward's float64 ``[R, 2]`` of each row's ``(mean, rstd)`` (see :func:`.rows.layer_norm`);
    without it the forward kernel computes them first (the same values, one more read of ``x``)."""
    if x.ndim < 1 or g.shape != x.shape or gamma.shape != x.shape[-1:]:
        raise ValueError(f"layer_norm_backward: need x[..., D], gamma[D] and g like x, got x {x.shape}, "
                         f"gamma {gamma.shape}, g {g.shape}")
    dt = float_dtype(x, gamma, g)
    d = x.shape[-1]
    dx = np.empty(x.shape, dt) if need_x else None
    if x.size == 0:
        zeros = np.zeros(d, dt) if need_params else None
        return dx, zeros, None if zeros is None else zeros.copy()
    if not need_x and not need_params:
        return None, None, None
    x2 = as_float(x, dt).reshape(-1, d)
    g2 = as_float(g, dt).reshape(-1, d)
    gm = as_float(gamma, dt)
    dx2 = dx.reshape(-1, d) if dx is not None else np.empty((0, d), dt)
    rows = x2.shape[0]
    if stats is None:
        stats = np.empty((rows, 2))
        split_call(nb().layer_norm_rows, rows, x2.size, x2, gm, gm, float(eps), stats, np.empty((0, d), dt))
    else:
        stats = row_stats(stats, rows, "layer_norm_backward")
    kernel = nbb().layer_norm_bwd_rows
    partials: dict[int, tuple[Array, Array]] = {}  # per row chunk, summed in chunk order (deterministic)

    def body(start: int, stop: int) -> None:
        acc = (np.zeros(d, np.float64), np.zeros(d, np.float64))
        partials[start] = acc
        kernel(x2, gm, g2, stats, dx2, acc[0], acc[1], need_x, start, stop)

    parallel_for(rows, x2.size * 2, body)
    if not need_params:
        return dx, None, None
    chunks = [partials[start] for start in sorted(partials)]
    dgamma, dbeta = chunks[0]
    for extra_g, extra_b in chunks[1:]:
        dgamma += extra_g
        dbeta += extra_b
    return dx, dgamma.astype(dt), dbeta.astype(dt)


def _softmax_like_backward(y: Array, g: Array, axis: int, name: str) -> Array:
    if g.shape != y.shape:
        raise ValueError(f"{name}: g {g.shape} and y {y.shape} must have the same shape")
    ax = normalize_axis(axis, y.ndim, name) if y.ndim else 0
    dt = float_dtype(y, g)
    out = np.empty(y.shape, dt)
    if out.size == 0:
        return out
    shape = y.shape if y.ndim else (1,)
    a = math.prod(shape[:ax])
    n = shape[ax]
    b = math.prod(shape[ax + 1:])
    kernels = nbb()
    yc = as_float(y, dt)
    gc = as_float(g, dt)
    if b == 1:
        split_call(getattr(kernels, name + "_rows"), a, out.size * 2, yc.reshape(a, n), gc.reshape(a, n),
                   out.reshape(a, n))
    else:
        split_call(getattr(kernels, name + "_cols"), a, out.size * 2, yc.reshape(a, n, b), gc.reshape(a, n, b),
                   out.reshape(a, n, b))
    return out


def softmax_backward(y: Array, g: Array, *, axis: int) -> Array:
    """``y * (g - sum(g * y))`` along ``axis``, for ``y = softmax(x)``."""
    return _softmax_like_backward(y, g, axis, "softmax_bwd")


def log_softmax_backward(y: Array, g: Array, *, axis: int) -> Array:
    """``g - exp(y) * sum(g)`` along ``axis``, for ``y = log_softmax(x)``."""
    return _softmax_like_backward(y, g, axis, "log_softmax_bwd")


def attention_backward(q: Array, k: Array, v: Array, mask: Array | None, g: Array, *, scale: float,
                       need: tuple[bool, bool, bool] = (True, True, True)
                       ) -> tuple[Array | None, Array | None, Array | None]:
    """``(dq, dk, dv)`` of ``attention(q[*B, n, d], k[*B, m, d], v[*B, m, dv], mask)`` (one batch shape
    ``B`` for all three; ``mask`` bool, broadcastable to ``[*B, n, m]``, True where attending is
    allowed) for the cotangent ``g[*B, n, dv]``. The probabilities are recomputed as the forward
    kernel computes them; ``dq = scale ds k``, ``dk = scale ds^T q``, ``dv = p^T g`` with
    ``ds = p (g v^T - sum(g v^T p))``. Entries of ``need`` that are False give ``None``."""
    batch = q.shape[:-2]
    n, d = q.shape[-2:]
    m, dv = v.shape[-2:]
    if k.shape != batch + (m, d) or v.shape[:-2] != batch or g.shape != batch + (n, dv):
        raise ValueError(f"attention_backward: q{list(q.shape)}, k{list(k.shape)}, v{list(v.shape)}, "
                         f"g{list(g.shape)} do not fit one batch shape")
    dt = float_dtype(q, k, v, g)
    nb_ = math.prod(batch)
    outs: list[Array | None] = [None, None, None]
    if nb_ == 0 or n == 0 or m == 0 or not any(need):  # nothing attends: zero cotangents
        outs = [np.zeros(a.shape, dt) if want else None for a, want in zip((q, k, v), need)]
        return outs[0], outs[1], outs[2]
    plan = None if mask is None else attention_blocks.usable(mask, n, m, q, k, v, g)
    if plan is not None and plan.growing:
        return _prefix_attention_backward(q, k, v, g, plan, dt, scale, need)
    groups = head_stacks.split(batch, q, k, v, g)
    q4, k4, v4, g4 = (head_stacks.stack(a, groups, dt) for a in (q, k, v, g))
    # per head: dq, dk and dv overwritten, each in the layout of its input
    dq4 = head_stacks.empty_as(q4, d, dt) if need[0] else None
    dk4 = head_stacks.empty_as(k4, d, dt) if need[1] else None
    dv4 = head_stacks.empty_as(v4, dv, dt) if need[2] else None
    m4 = mask_stack(None if mask is None else np.broadcast_to(np.asarray(mask, np.bool_), batch + (n, m)), groups)

    def heads(s: int, e: int) -> None:
        scores, probs = probabilities(q4, k4, m4, float(scale), s, e)
        if dv4 is not None:
            np.matmul(np.swapaxes(probs, -1, -2), g4[s:e], out=dv4[s:e])
        if dq4 is not None or dk4 is not None:
            dp = scratch(scores.shape, dt, slot=3)
            np.matmul(g4[s:e], head_stacks.right_operand(np.swapaxes(v4[s:e], -1, -2)), out=dp)
            ds = scores  # the scores are no longer needed: reuse their buffer
            nbb().attention_ds_rows(probs.reshape(-1, m), dp.reshape(-1, m), float(scale), ds.reshape(-1, m), 0,
                                    dp.size // m)
            if dq4 is not None:
                np.matmul(ds, k4[s:e], out=dq4[s:e])
            if dk4 is not None:
                np.matmul(np.swapaxes(ds, -1, -2), q4[s:e], out=dk4[s:e])

    over_heads(groups[0], groups[1], nb_ * n * m * (2 * d + 2 * dv), heads)
    return (None if dq4 is None else dq4.reshape(q.shape), None if dk4 is None else dk4.reshape(k.shape),
            None if dv4 is None else dv4.reshape(v.shape))


def _prefix_attention_backward(q: Array, k: Array, v: Array, g: Array, plan: attention_blocks.Plan,
                               dt: np.dtype[Any], scale: float, need: tuple[bool, bool, bool]
                               ) -> tuple[Array | None, Array | None, Array | None]:
    """:func:`attention_backward` under a causal (prefix) mask whose widths grow with the row: block by
    block (:func:`.attention_blocks.backward`); the key rows no query sees get 0."""
    nb_ = math.prod(q.shape[:-2])
    q3, k3, v3, g3 = (as_float(a, dt).reshape(nb_, a.shape[-2], a.shape[-1]) for a in (q, k, v, g))
    dq3 = np.empty(q3.shape, dt) if need[0] else None
    dk3 = np.zeros(k3.shape, dt) if need[1] else None
    dv3 = np.zeros(v3.shape, dt) if need[2] else None

    def part(a: Array | None, s: int, e: int) -> Array | None:
        return None if a is None else a[s:e]

    def heads(s: int, e: int) -> None:
        attention_blocks.backward(q3[s:e], k3[s:e], v3[s:e], g3[s:e], plan, float(scale), part(dq3, s, e),
                                  part(dk3, s, e), part(dv3, s, e))

    n, m, d, dv = q3.shape[1], k3.shape[1], q3.shape[2], v3.shape[2]
    over_heads(nb_, 1, nb_ * n * m * (2 * d + 2 * dv), heads)
    return (None if dq3 is None else dq3.reshape(q.shape), None if dk3 is None else dk3.reshape(k.shape),
            None if dv3 is None else dv3.reshape(v.shape))


def max_pool_backward(x: Array, g: Array, *, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                      padding: tuple[int, ...]) -> Array:
    """``g`` routed to the first maximum (row-major; the first NaN counts as the maximum) of each
    window of ``x``: :func:`tensorplay.interpreters.eager.kernels.max_pool_backward`, with a faster kernel for
    the common 2x2, stride 2, unpadded 2-d case."""
    if not (x.ndim == 4 and tuple(kernel_size) == (2, 2) and tuple(stride) == (2, 2)
            and tuple(padding) == (0, 0) and g.shape == x.shape[:2] + (x.shape[2] // 2, x.shape[3] // 2)):
        from .pool import max_pool_backward as general
        return general(x, g, kernel_size=kernel_size, stride=stride, padding=padding)
    dt = float_dtype(x, g)
    dx = np.empty(x.shape, dt)
    if dx.size == 0:
        return dx
    if g.size == 0:
        dx.fill(0)
        return dx
    bits = np.int64 if dt == F64 else np.int32
    xf = as_float(x, dt).reshape(-1)
    gb = as_float(g, dt).reshape(-1).view(bits)
    planes = x.shape[0] * x.shape[1]
    # work counted as one unit per input element, not by the kernel's cost (about 5x a numpy add's): so
    # the benchmark CNN's first pool (64x16 planes of 26x26, 0.35 ms on one thread) stays on one thread.
    # Split over two, it took 0.22-0.28 ms on a quiet machine but 3.4 ms as a median when another process
    # held a core (against 0.40 ms unsplit), measured in the compiled training step.
    split_call(nbb().max_pool2x2_bwd, planes, x.size, xf, gb, dx.reshape(-1).view(bits), x.shape[2], x.shape[3])
    return dx
