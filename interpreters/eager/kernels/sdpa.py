"""Scaled dot-product attention: two BLAS batched matmuls around a fused (masked) softmax; under a causal
(prefix) mask, block by block over the keys each block of queries sees (:mod:`.attention_blocks`). The
heads are read where they lie, strided views included, and the output is laid out like ``q``
(:mod:`.head_stacks`); a stack of heads is split over the kernel threads (:func:`over_heads`)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from . import attention_blocks, head_stacks
from ._support import Array, as_float, float_dtype, nb, scratch
from .threads import BLAS_THREADED_MIN_MACS, blas_chunks, run_blas_chunks


def attention(q: Array, k: Array, v: Array, mask: Array | None, *, scale: float) -> Array:
    """``softmax(scale * q k^T, masked) v``: ``q[*B, n, d], k[*B, m, d], v[*B, m, dv] -> [*B, n, dv]``.

    ``mask`` is ``None`` or bool broadcastable to ``[*B, n, m]``; ``True`` means *may attend*.
    A query row whose keys are all masked gives 0. The batch prefixes broadcast like ``matmul``.
    """
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ValueError(f"attention: q, k, v need rank >= 2, got shapes {q.shape}, {k.shape}, {v.shape}")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"attention: q[..., n, d], k[..., m, d], v[..., m, dv] do not fit: "
                         f"{q.shape}, {k.shape}, {v.shape}")
    dt = float_dtype(q, k, v)
    n, m, dv = q.shape[-2], k.shape[-2], v.shape[-1]
    batch = q.shape[:-2]
    if not batch == k.shape[:-2] == v.shape[:-2]:  # (np.broadcast_shapes costs ~6 us)
        try:
            batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        except ValueError:
            raise ValueError(f"attention: batch shapes of q{list(q.shape)}, k{list(k.shape)}, "
                             f"v{list(v.shape)} do not broadcast") from None
    out_shape = batch + (n, dv)
    score_shape = batch + (n, m)
    mk: Array | None = None
    if mask is not None:
        mk = np.asarray(mask)
        if mk.dtype != np.bool_:
            raise TypeError(f"attention: mask must be bool, got {mk.dtype}")
        try:
            mk = np.broadcast_to(mk, score_shape)
        except ValueError:
            raise ValueError(f"attention: mask of shape {mk.shape} does not broadcast to the "
                             f"scores' shape {score_shape}") from None
    if math.prod(out_shape) == 0 or m == 0:  # no keys: every row is fully masked
        return np.zeros(out_shape, dt)
    nb_ = math.prod(batch)
    d = q.shape[-1]
    qb, kb, vb = _batch_of(q, batch), _batch_of(k, batch), _batch_of(v, batch)  # views
    plan = attention_blocks.usable(mask, n, m, vb) if mask is not None else None
    if plan is not None:  # a causal (prefix) mask: skip the keys no row of a block sees
        q3, k3, v3 = (as_float(a, dt).reshape(nb_, a.shape[-2], a.shape[-1]) for a in (qb, kb, vb))
        out = np.empty((nb_, n, dv), dt)
        over_heads(nb_, 1, nb_ * n * m * (d + dv), lambda start, stop: attention_blocks.forward(
            q3[start:stop], k3[start:stop], v3[start:stop], plan, float(scale), out[start:stop]))
        return out.reshape(out_shape)
    return _over_stacks(qb, kb, vb, mk, batch, float(scale), dt, None)


def attention_and_probs(q: Array, k: Array, v: Array, *, scale: float) -> tuple[Array, Array]:
    """:func:`attention` without a mask, and its probabilities ``softmax(scale * q k^T)``: ``q[*B, n, d],
    k[*B, m, d], v[*B, m, dv] -> ([*B, n, dv], [*B, n, m])`` (one batch shape ``B``; the probabilities a
    fresh C-contiguous array, the same values :func:`attention` multiplies ``v`` by and the backward
    recomputes). For a compiled training step whose backward reads them instead of recomputing them."""
    if q.ndim < 2 or k.shape[:-2] != q.shape[:-2] or v.shape[:-2] != q.shape[:-2] or q.shape[-1] != k.shape[-1] \
            or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"attention_and_probs: need q[*B, n, d], k[*B, m, d], v[*B, m, dv], got "
                         f"{q.shape}, {k.shape}, {v.shape}")
    dt = float_dtype(q, k, v)
    batch = q.shape[:-2]
    n, m, dv = q.shape[-2], k.shape[-2], v.shape[-1]
    if math.prod(batch) * n * m == 0 or dv == 0:
        probs = np.zeros(batch + (n, m), dt)
        if math.prod(batch) * n * m:  # no value features: the probabilities are still asked for
            probs = softmax_rows_of(q, k, float(scale), dt)
        return np.zeros(batch + (n, dv), dt), probs
    groups = head_stacks.split(batch, q, k, v)
    probs4 = np.empty(groups + (n, m), dt)
    out = _over_stacks(q, k, v, None, batch, float(scale), dt, probs4)
    return out, probs4.reshape(batch + (n, m))


def softmax_rows_of(q: Array, k: Array, scale: float, dt: np.dtype[np.floating]) -> Array:
    """``softmax(scale * q k^T)`` over the last axis (no mask), a fresh array ``[*B, n, m]``."""
    scores = np.ascontiguousarray(np.matmul(as_float(q, dt), np.swapaxes(as_float(k, dt), -1, -2)))
    probs = np.empty(scores.shape, dt)
    m = scores.shape[-1]
    if probs.size:
        nb().scaled_softmax_rows(scores.reshape(-1, m), scale, probs.reshape(-1, m), 0, probs.size // m)
    return probs


def _over_stacks(qb: Array, kb: Array, vb: Array, mk: Array | None, batch: tuple[int, ...], scale: float,
                 dt: np.dtype[np.floating], probs4: Array | None) -> Array:
    """``softmax(scale q k^T, masked) v`` of heads of batch shape ``batch`` (already broadcast to it), as
    stacks of heads (:mod:`.head_stacks`) split over the kernel threads; the probabilities written into
    ``probs4`` (``[B1, B2, n, m]`` of the stacks' grouping) when given."""
    n, m, d, dv = qb.shape[-2], kb.shape[-2], qb.shape[-1], vb.shape[-1]
    groups = head_stacks.split(batch, qb, kb, vb)
    q4, k4, v4 = (head_stacks.stack(a, groups, dt) for a in (qb, kb, vb))
    m4 = mask_stack(mk, groups)
    out4 = head_stacks.empty_as(q4, dv, dt)

    def heads(start: int, stop: int) -> None:
        _, probs = probabilities(q4, k4, m4, scale, start, stop,
                                 None if probs4 is None else probs4[start:stop])
        np.matmul(probs, v4[start:stop], out=out4[start:stop])

    over_heads(groups[0], groups[1], math.prod(batch) * n * m * (d + dv), heads)
    result: Array = out4.reshape(batch + (n, dv))
    return result


def mask_stack(mask: Array | None, groups: tuple[int, int]) -> Array | None:
    """A bool mask already broadcast to the scores' shape ``[*batch, n, m]`` as the C-contiguous
    ``[B1, B2, n, m]`` stack of :mod:`.head_stacks` (``None`` stays ``None``)."""
    return None if mask is None else np.ascontiguousarray(mask).reshape(groups + mask.shape[-2:])


def probabilities(q4: Array, k4: Array, m4: Array | None, scale: float, start: int, stop: int,
                  into: Array | None = None) -> tuple[Array, Array]:
    """``(scores, probs)`` of the units ``[start, stop)`` of the stacks ``q4[B1, B2, n, d]``,
    ``k4[B1, B2, m, d]``: ``scores = q k^T`` and ``probs`` its softmax scaled by ``scale`` over the keys
    ``m4`` allows (all without a mask; a row with none gives 0), ``[stop - start, B2, n, m]`` each. Both
    live in this thread's scratch slots 1 and 2 (valid until the next call here); they are separate arrays
    because the softmax kernels only vectorise when input and output do not alias. ``into`` (C-contiguous, of
    that shape): the probabilities are written there instead."""
    shape = (stop - start, q4.shape[1], q4.shape[2], k4.shape[2])
    scores = scratch(shape, q4.dtype, slot=1)
    probs = scratch(shape, q4.dtype, slot=2) if into is None else into
    np.matmul(q4[start:stop], head_stacks.right_operand(np.swapaxes(k4[start:stop], -1, -2)), out=scores)
    s2, p2 = scores.reshape(-1, shape[3]), probs.reshape(-1, shape[3])
    if m4 is None:
        nb().scaled_softmax_rows(s2, scale, p2, 0, s2.shape[0])
    else:
        nb().masked_softmax_rows(s2, m4[start:stop].reshape(-1, shape[3]), scale, p2, 0, s2.shape[0])
    return scores, probs


def _batch_of(a: Array, batch: tuple[int, ...]) -> Array:
    """``a[*b, r, c]`` broadcast to the batch shape ``batch`` (``a`` itself when it has it: numpy's
    ``broadcast_to`` costs ~7 us)."""
    return a if a.shape[:-2] == batch else np.broadcast_to(a, batch + a.shape[-2:])


def over_heads(units: int, per_unit: int, macs: int, body: Callable[[int, int], None]) -> None:
    """``body(start, stop)`` over ``range(units)``, each unit a stack of ``per_unit`` heads (``macs``: the
    multiply-adds of all their GEMMs). One head keeps OpenBLAS's threads for its GEMMs; a stack of heads is
    split over the kernel threads (:func:`.threads.run_blas_chunks`), each calling single-threaded GEMMs on
    its own heads (numpy's batched ``matmul`` synchronises OpenBLAS's workers once per matrix), in chunks of
    at least :data:`.threads.BLAS_THREADED_MIN_MACS` (each chunk makes several numpy calls per block of
    rows: a transformer block's 64 heads of 32 tokens, 2M multiply-adds, ran slower split, 6.55 against
    6.33 ms per training step). Every head is computed alike on any thread."""
    if units * per_unit == 1:
        body(0, 1)
    else:
        run_blas_chunks(blas_chunks(units, macs, BLAS_THREADED_MIN_MACS), body)
