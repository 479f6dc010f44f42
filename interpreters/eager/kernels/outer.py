"""Batched outer products: ``matmul`` with a contracted size of 1 (per-sample weight gradients).

``np.matmul`` runs a slow per-element loop for ``a[..., M, 1] @ b[..., 1, N]`` and numpy's
broadcasting multiply calls its inner loop once per row (both ~5x slower than one fused
loop at ``B = M = N = 128``); large float cases go to a jitted loop instead.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]
_JIT: ModuleType | None = None
_MIN_SIZE = 1 << 16  # below this, numpy's multiply is as fast as a kernel call


def _load_jit() -> ModuleType:
    """The jitted kernel's module, imported on first use (it imports numba)."""
    global _JIT
    from . import _numba_outer
    _JIT = _numba_outer
    return _JIT


def outer_matmul(a: Array, b: Array) -> Array:
    """``a[..., M, 1] @ b[..., 1, N] -> [..., M, N]`` (batch axes broadcast; same dtype for both)."""
    lead = a.shape[:-2]
    if lead == b.shape[:-2] and a.dtype is b.dtype and a.dtype.kind == "f":  # one batch shape (per-sample grads)
        m, n = a.shape[-2], b.shape[-1]
        rows = math.prod(lead)
        if rows * m * n >= _MIN_SIZE:
            jit = _JIT or _load_jit()
            out = np.empty(lead + (m, n), dtype=a.dtype)
            # [..., M, 1] -> [rows, M] and [..., 1, N] -> [rows, N]: views of contiguous operands, copies otherwise
            jit.batched_outer(np.ascontiguousarray(a).reshape(rows, m), np.ascontiguousarray(b).reshape(rows, n),
                              out.reshape(rows, m, n))
            return out
    batch = np.broadcast_shapes(lead, b.shape[:-2])
    m, n = a.shape[-2], b.shape[-1]
    size = int(np.prod(batch, dtype=np.int64)) * m * n
    if a.dtype != b.dtype or a.dtype.kind != "f" or size < _MIN_SIZE:
        return np.multiply(a, b)
    jit = _JIT or _load_jit()
    a2 = np.ascontiguousarray(np.broadcast_to(a[..., 0], batch + (m,))).reshape(-1, m)
    b2 = np.ascontiguousarray(np.broadcast_to(b[..., 0, :], batch + (n,))).reshape(-1, n)
    out = np.empty((a2.shape[0], m, n), dtype=a.dtype)
    jit.batched_outer(a2, b2, out)
    return out.reshape(batch + (m, n))
