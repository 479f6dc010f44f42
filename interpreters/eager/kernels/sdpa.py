"""Scaled dot-product attention: two BLAS batched matmuls around a fused (masked) softmax."""

from __future__ import annotations

import math

import numpy as np

from ._blas import SMALL_GEMM_MACS, single_threaded_blas
from ._support import Array, as_float, float_dtype, nb, scratch


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
    qf, kf, vf = as_float(q, dt), as_float(k, dt), as_float(v, dt)
    # a stack of small GEMMs: one BLAS thread (see _blas); the softmax between them runs on
    # this thread too, so no second pool competes with OpenBLAS's workers
    small = max(n * m * qf.shape[-1], n * m * dv) < SMALL_GEMM_MACS and math.prod(batch) > 1
    with single_threaded_blas(small):
        # scores and probabilities live in reused scratch buffers; they are separate arrays
        # because the softmax kernels only vectorise when input and output do not alias
        scores = scratch(score_shape, dt, slot=1)
        np.matmul(np.broadcast_to(qf, batch + (n, qf.shape[-1])),
                  np.broadcast_to(np.swapaxes(kf, -1, -2), batch + (kf.shape[-1], m)), out=scores)
        probs = scratch(score_shape, dt, slot=2)
        s2 = scores.reshape(-1, m)
        p2 = probs.reshape(-1, m)
        kern = nb()
        sc = float(scale)
        if mk is None:
            kern.scaled_softmax_rows(s2, sc, p2, 0, s2.shape[0])
        else:
            m2 = np.ascontiguousarray(mk).reshape(-1, m)
            kern.masked_softmax_rows(s2, m2, sc, p2, 0, s2.shape[0])
        result: Array = np.matmul(probs, vf)
    return result
