"""Fused network primitives: ``layer_norm``, ``batch_norm``, ``softmax``, ``log_softmax``
and scaled dot-product ``attention``.

All accept float dtypes only (as PyTorch); mixed float32/float64 inputs promote.
The references compute in float64 and round to the result dtype at the end.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .aval import Aval
from .errors import DTypeError, ShapeError
from .shapes import (
    Array, aval_of, finish, float_result, fmt_aval, fmt_shape, known, normalize_axis, strong,
)


def _vector_like(prim: str, name: str, a: Aval, size: Any, what: str, context: str) -> None:
    if len(a.shape) != 1 or (known(a.shape[0], size) and a.shape[0] != size):
        raise ShapeError(f"{prim}: {name} must have shape [{size}] ({what}), got {fmt_shape(a.shape)} ({context})")


# ---- layer_norm, batch_norm -------------------------------------------------------------------

def layer_norm_last_axis_rule(x: Aval, gamma: Aval, beta: Aval, *, eps: float) -> Aval:
    """``x[*S, D], gamma[D], beta[D] -> [*S, D]``; ``x`` has rank >= 1."""
    context = f"x: {fmt_shape(x.shape)}, gamma: {fmt_shape(gamma.shape)}, beta: {fmt_shape(beta.shape)}"
    if len(x.shape) < 1:
        raise ShapeError(f"layer_norm_last_axis: x must have rank >= 1 (the last axis is normalised), got rank 0 ({context})")
    dtype = float_result("layer_norm_last_axis", [("x", x), ("gamma", gamma), ("beta", beta)], context)
    size = x.shape[-1]
    _vector_like("layer_norm_last_axis", "gamma", gamma, size, "the last axis of x", context)
    _vector_like("layer_norm_last_axis", "beta", beta, size, "the last axis of x", context)
    return Aval(tuple(x.shape), dtype)


def layer_norm_last_axis_ref(x: object, gamma: object, beta: object, *, eps: float) -> Array:
    """``(x - mean) / sqrt(var + eps) * gamma + beta`` over the last axis (biased variance)."""
    out = layer_norm_last_axis_rule(aval_of("layer_norm_last_axis", "x", x), aval_of("layer_norm_last_axis", "gamma", gamma),
                          aval_of("layer_norm_last_axis", "beta", beta), eps=eps)
    xa = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        mean = np.mean(xa, axis=-1, keepdims=True)
        var = np.mean((xa - mean) ** 2, axis=-1, keepdims=True)
        y = (xa - mean) / np.sqrt(var + eps) * np.asarray(gamma, np.float64) + np.asarray(beta, np.float64)
    return finish(y, out)


def batch_norm_rule(x: Aval, mean: Aval, var: Aval, weight: Aval, bias: Aval, *, eps: float) -> Aval:
    """``x[N, C, *rest]`` and four ``[C]`` vectors ``-> [N, C, *rest]``; ``x`` has rank >= 2."""
    named = [("x", x), ("mean", mean), ("var", var), ("weight", weight), ("bias", bias)]
    context = ", ".join(f"{name}: {fmt_shape(a.shape)}" for name, a in named)
    if len(x.shape) < 2:
        raise ShapeError(f"batch_norm: x must have rank >= 2 ([N, C, *rest]), got rank {len(x.shape)} ({context})")
    dtype = float_result("batch_norm", named, context)
    for name, a in named[1:]:
        _vector_like("batch_norm", name, a, x.shape[1], "the channel axis 1 of x", context)
    return Aval(tuple(x.shape), dtype)


def batch_norm_ref(x: object, mean: object, var: object, weight: object, bias: object, *, eps: float) -> Array:
    """``(x - mean) / sqrt(var + eps) * weight + bias``, the ``[C]`` vectors along axis 1."""
    avals = [aval_of("batch_norm", n, v) for n, v in
             (("x", x), ("mean", mean), ("var", var), ("weight", weight), ("bias", bias))]
    out = batch_norm_rule(*avals, eps=eps)
    xa = np.asarray(x, dtype=np.float64)
    column = (-1,) + (1,) * (xa.ndim - 2)

    def channel(v: object) -> Array:
        return np.asarray(v, dtype=np.float64).reshape(column)

    with np.errstate(all="ignore"):
        y = (xa - channel(mean)) / np.sqrt(channel(var) + eps) * channel(weight) + channel(bias)
    return finish(y, out)


# ---- softmax, log_softmax ---------------------------------------------------------------------

def _softmax_rule(prim: str, x: Aval, axis: int) -> Aval:
    context = f"x: {fmt_aval(x)}, axis {axis}"
    dtype = float_result(prim, [("x", x)], context)
    normalize_axis(prim, "x", axis, tuple(x.shape))
    return Aval(tuple(x.shape), dtype)


def softmax_rule(x: Aval, *, axis: int) -> Aval:
    """``x[*S] -> [*S]``; float dtypes; ``axis`` in ``[-rank, rank)``."""
    return _softmax_rule("softmax", x, axis)


def log_softmax_rule(x: Aval, *, axis: int) -> Aval:
    """``x[*S] -> [*S]``; float dtypes; ``axis`` in ``[-rank, rank)``."""
    return _softmax_rule("log_softmax", x, axis)


def _shifted(x: object, axis: int) -> tuple[Array, Array]:
    """``(x - max, sum(exp(x - max)))`` along ``axis`` in float64 (NaN where the max is not finite)."""
    xa = np.asarray(x, dtype=np.float64)
    if xa.shape[axis] == 0:
        return xa, np.ones_like(xa)
    z = xa - np.max(xa, axis=axis, keepdims=True)
    return z, np.sum(np.exp(z), axis=axis, keepdims=True)


def softmax_ref(x: object, *, axis: int) -> Array:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``; a row of ``-inf`` gives NaN."""
    out = softmax_rule(aval_of("softmax", "x", x), axis=axis)
    with np.errstate(all="ignore"):
        z, total = _shifted(x, axis)
        return finish(np.exp(z) / total, out)


def log_softmax_ref(x: object, *, axis: int) -> Array:
    """``x - logsumexp(x)`` along ``axis``; a row of ``-inf`` gives NaN."""
    out = log_softmax_rule(aval_of("log_softmax", "x", x), axis=axis)
    with np.errstate(all="ignore"):
        z, total = _shifted(x, axis)
        return finish(z - np.log(total), out)


# ---- attention --------------------------------------------------------------------------------

def dot_product_attention_rule(q: Aval, k: Aval, v: Aval, mask: Aval | None, *, scale: float) -> Aval:
    """``q[*B, n, d], k[*B, m, d], v[*B, m, dv] -> [*B, n, dv]``; the batch shapes ``B`` agree;
    ``mask`` is ``None`` or bool broadcastable to ``[*B, n, m]``; float dtypes."""
    named = [("q", q), ("k", k), ("v", v)]
    context = ", ".join(f"{name}: {fmt_shape(a.shape)}" for name, a in named)
    if mask is not None:
        context += f", mask: {fmt_shape(mask.shape)}"
    for name, a in named:
        if len(a.shape) < 2:
            raise ShapeError(f"dot_product_attention: {name} must have rank >= 2 ([*B, len, features]), "
                             f"got rank {len(a.shape)} ({context})")
    dtype = float_result("dot_product_attention", named, context)
    for name, a in named[1:]:
        if len(a.shape) != len(q.shape) or any(
                known(b1, b2) and b1 != b2 for b1, b2 in zip(q.shape[:-2], a.shape[:-2])):
            raise ShapeError(f"dot_product_attention: {name} must have q's batch shape {fmt_shape(q.shape[:-2])}, "
                             f"got {fmt_shape(a.shape[:-2])} ({context})")
    if known(q.shape[-1], k.shape[-1]) and q.shape[-1] != k.shape[-1]:
        raise ShapeError(f"dot_product_attention: q and k must have the same feature size d, got {q.shape[-1]} and "
                         f"{k.shape[-1]} (axis -1; {context})")
    if known(k.shape[-2], v.shape[-2]) and k.shape[-2] != v.shape[-2]:
        raise ShapeError(f"dot_product_attention: k and v must have the same length m, got {k.shape[-2]} and "
                         f"{v.shape[-2]} (axis -2; {context})")
    if mask is not None:
        if strong(mask.dtype) != "bool":
            raise DTypeError(f"dot_product_attention: mask must be bool (True = may attend), got {mask.dtype} ({context})")
        target = tuple(q.shape[:-1]) + (k.shape[-2],)
        offset = len(target) - len(mask.shape)
        if offset < 0 or any(known(d, t) and d != 1 and d != t
                             for d, t in zip(mask.shape, target[max(offset, 0):])):
            raise ShapeError(f"dot_product_attention: mask must broadcast to [*B, n, m] = {fmt_shape(target)}, "
                             f"got {fmt_shape(mask.shape)} ({context})")
    if not isinstance(scale, (int, float)) or isinstance(scale, bool):
        raise ValueError(f"dot_product_attention: scale must be a number, got {scale!r} ({context})")
    return Aval(tuple(q.shape[:-1]) + (v.shape[-1],), dtype)


def dot_product_attention_ref(q: object, k: object, v: object, mask: object | None, *, scale: float) -> Array:
    """``softmax(scale * q k^T, masked to -inf where mask is False) v``; a fully masked row gives 0."""
    out = dot_product_attention_rule(aval_of("dot_product_attention", "q", q), aval_of("dot_product_attention", "k", k),
                         aval_of("dot_product_attention", "v", v),
                         None if mask is None else aval_of("dot_product_attention", "mask", mask), scale=scale)
    qa, ka, va = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    scores = scale * np.matmul(qa, np.swapaxes(ka, -1, -2))
    allowed = np.ones(scores.shape, bool) if mask is None else np.broadcast_to(np.asarray(mask), scores.shape)
    with np.errstate(all="ignore"):
        masked = np.where(allowed, scores, -np.inf)
        top = np.max(masked, axis=-1, keepdims=True) if scores.shape[-1] else np.zeros(scores.shape[:-1] + (1,))
        e = np.where(allowed, np.exp(masked - top), 0.0)
        weights = e / np.sum(e, axis=-1, keepdims=True)
        weights = np.where(np.any(allowed, axis=-1, keepdims=True), weights, 0.0)
    return finish(np.matmul(weights, va), out)
