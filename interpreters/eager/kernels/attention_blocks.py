"""Attention under a mask whose allowed keys are a prefix of every query row (a causal mask): only
the keys some row of a block of queries may see are multiplied.

With a causal ``(n, n)`` mask, the rows ``[r0, r1)`` attend to keys ``< r1`` at most, so the scores
``q[r0:r1] k[:r1]^T``, their softmax and ``probs v[:r1]`` cover about half the products of the full
``n x n`` computation (blocks of :data:`BLOCK_ROWS` rows: 62% of them at ``n = 128``).

Forward, per block: ``s = q[r0:r1] k[:keys]^T`` into a compact ``[B, r1 - r0, keys]`` scratch
buffer, one fused scale + prefix softmax kernel, ``out[r0:r1] = p v[:keys]`` (written in place); the
block's buffers stay in cache (one thread, in process: 2.36 -> 2.03 ms, median of per-process
minima, against full-size buffers). The whole forward of a stack of heads is one jitted call that
calls OpenBLAS's ``gemm`` itself: no Python, and so no GIL, between the blocks. With the heads split
over two threads, each thread's Python between numpy calls had to take the GIL from the other
(measured on (8, 4, 128, 64) causal, one process, medians of 60: two threads 1.42-1.57 ms against
1.86-2.05 ms through numpy, one thread 2.53-2.64 against 2.93 ms).

Backward: the scores, probabilities and their cotangents live in full-size ``[n, m]`` scratch
buffers (one head's: the jitted backward, like the forward, runs head by head in one call; ``[B, n,
m]`` on the numpy path), of which each block of rows fills only its first ``width`` columns (its keys
rounded up to the key grid of :data:`BLOCK_ROWS`, the entries past a row's own prefix set to 0).
Every product is then one GEMM on a strided view, none needs a sum over blocks:

Only when the widths grow with the row (as under a causal mask): ``s`` and ``p`` block by block
as in the forward, ``dp`` like ``s``, one kernel for ``ds``, ``dq[r0:r1] = ds[r0:r1, :keys] k[:keys]``,
and per block of keys ``[c0, c1)``, with ``R`` the rows whose width passes ``c0`` (a suffix of the
rows), ``dv[c0:c1] = p[R, c0:c1]^T g[R]`` and ``dk[c0:c1] = ds[R, c0:c1]^T q[R]``.

The full computation multiplies the masked entries' zero probabilities with ``v`` (and, backward,
the masked zeros of ``ds`` with ``q`` and ``k``, and ``g v^T`` enters every row's sum), so an
infinite or NaN value there makes NaN that the blocks would skip. The blocks are taken only when
those operands are finite, so both ways give the same values (up to the rounding of a sum with or
without trailing zero terms).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ._blas import gemm_address
from ._support import Array, all_finite, nb, scratch

BLOCK_ROWS = 32
"""Query rows per block, and keys per block of the key grid: smaller blocks skip more products but
make more (smaller) GEMM calls."""

MAX_WORK_FRACTION = 0.8
"""The blocks are used only when they cover at most this fraction of the full ``n x m`` scores."""

Blocks = list[tuple[int, int, int]]


class Plan(NamedTuple):
    """The blocks ``[(r0, r1, keys)]`` (rows ``[r0, r1)`` need keys ``[0, keys)``), each row's prefix
    length and written width (int64 ``[n]``), whether the widths never decrease (the backward's
    condition), the blocks again as a read-only int64 ``[blocks, 3]`` array (for the jitted kernels), and
    the key blocks ``[(c0, c1, first)]`` of the backward (:func:`_key_rows`), as such an array too."""
    blocks: Blocks
    lengths: Array
    widths: Array
    growing: bool
    grid: Array
    key_grid: Array


_PLANS: dict[tuple[int, int, bytes], Plan | None] = {}
PLAN_CACHE_ENTRIES = 32
"""Plans kept, by mask contents (the causal mask is rebuilt on every call; checking it costs ~0.1 ms)."""
PLAN_CACHE_MAX_ELEMENTS = 1 << 20
"""Masks larger than this are checked every time instead of being kept as cache keys."""


def prefix_blocks(mask: Any, n: int, m: int) -> Plan | None:
    """The :class:`Plan` when ``mask`` (bool, shape ``[1, ..., 1, n, m]``: one mask for every batch
    entry) allows each query row a prefix of the keys. ``None`` when the mask is not of that form or
    the blocks would save too little."""
    if mask is None:
        return None
    mk = np.asarray(mask)
    if mk.dtype != np.bool_ or mk.ndim < 2 or mk.shape[-2:] != (n, m) or math.prod(mk.shape[:-2]) != 1:
        return None
    m2 = mk.reshape(n, m)
    if m2.size > PLAN_CACHE_MAX_ELEMENTS:
        return _plan(m2)
    key = (n, m, m2.tobytes())
    if key not in _PLANS:
        if len(_PLANS) >= PLAN_CACHE_ENTRIES:
            _PLANS.clear()
        _PLANS[key] = _plan(m2)
    return _PLANS[key]


def _plan(m2: Array) -> Plan | None:
    n, m = m2.shape
    lengths = np.count_nonzero(m2, axis=1).astype(np.int64)
    if not np.array_equal(m2, np.arange(m)[None, :] < lengths[:, None]):
        return None
    blocks = [(r0, min(n, r0 + BLOCK_ROWS), int(lengths[r0:r0 + BLOCK_ROWS].max())) for r0 in range(0, n, BLOCK_ROWS)]
    if sum((r1 - r0) * keys for r0, r1, keys in blocks) > MAX_WORK_FRACTION * n * m:
        return None
    widths = np.empty(n, np.int64)
    for r0, r1, keys in blocks:
        widths[r0:r1] = min(m, -(-keys // BLOCK_ROWS) * BLOCK_ROWS)
    grid = np.array(blocks, np.int64).reshape(len(blocks), 3)
    key_grid = np.array(_key_rows(widths), np.int64).reshape(-1, 3)
    for a in (lengths, widths, grid, key_grid):
        a.flags.writeable = False
    return Plan(blocks, lengths, widths, bool(np.all(widths[1:] >= widths[:-1])), grid, key_grid)


def usable(mask: Any, n: int, m: int, *finite: Array) -> Plan | None:
    """:func:`prefix_blocks` when the arrays ``finite`` (``v`` forward; ``q, k, v, g`` backward) are all
    finite (see the module docstring), else ``None``."""
    found = prefix_blocks(mask, n, m)
    if found is None or not all(all_finite(a) for a in finite):
        return None
    return found


def _block_probs(q3: Array, k3: Array, plan: Plan, scale: float, r0: int, r1: int, keys: int,
                 scores: Array, probs: Array) -> None:
    """The probabilities of the rows ``[r0, r1)`` into ``probs`` (each row's width), through ``scores``."""
    if keys:
        np.matmul(q3[:, r0:r1], np.swapaxes(k3[:, :keys], -1, -2), out=scores[:, r0:r1, :keys])
    nb().prefix_softmax_rows(scores, plan.lengths, plan.widths, float(scale), probs, r0, r1)


def _buffers(q3: Array, k3: Array) -> tuple[Array, Array]:
    """The scratch ``(scores, probs)``, ``[B, n, m]`` each."""
    shape = (q3.shape[0], q3.shape[1], k3.shape[1])
    return scratch(shape, q3.dtype, slot=1), scratch(shape, q3.dtype, slot=2)


def forward(q3: Array, k3: Array, v3: Array, plan: Plan, scale: float, out: Array) -> None:
    """``out[B, n, dv] = softmax(scale q k^T, masked) v`` block by block (rows with no key: 0); each
    block's scores and probabilities live in compact scratch buffers that stay in cache. One jitted call
    (:func:`._numba_kernels.prefix_attention`, calling OpenBLAS's ``gemm``) where the BLAS allows it, else
    numpy's ``matmul`` around the softmax kernel; both make the same GEMM calls (the same bits)."""
    gemm = gemm_address(q3.dtype.name)
    if gemm is not None:
        size = BLOCK_ROWS * k3.shape[1]
        nb().prefix_attention(gemm, q3, k3, v3, plan.grid, plan.lengths, float(scale), out,
                              scratch((size,), q3.dtype, slot=1), scratch((size,), q3.dtype, slot=2))
        return
    nb_ = q3.shape[0]
    for r0, r1, keys in plan.blocks:
        if not keys:
            out[:, r0:r1] = 0
            continue
        scores = scratch((nb_, r1 - r0, keys), q3.dtype, slot=1)
        probs = scratch((nb_, r1 - r0, keys), q3.dtype, slot=2)
        np.matmul(q3[:, r0:r1], np.swapaxes(k3[:, :keys], -1, -2), out=scores)
        nb().prefix_softmax_rows(scores, plan.lengths[r0:r1], np.minimum(plan.widths[r0:r1], keys), float(scale),
                                 probs, 0, r1 - r0)
        np.matmul(probs, v3[:, :keys], out=out[:, r0:r1])


def _key_rows(widths: Array) -> list[tuple[int, int, int]]:
    """``[(c0, c1, first)]``: the key blocks of the grid and the first row whose width (of the rows'
    ``widths``) passes ``c0`` (the rows from there on hold the block's probabilities, zeros included);
    blocks no row reaches are left out."""
    m_written = int(widths[-1]) if widths.size else 0
    out = []
    for c0 in range(0, m_written, BLOCK_ROWS):
        first = int(np.searchsorted(widths, c0, side="right"))
        out.append((c0, min(m_written, c0 + BLOCK_ROWS), first))
    return out


def backward(q3: Array, k3: Array, v3: Array, g3: Array, plan: Plan, scale: float, dq: Array | None,
             dk: Array | None, dv: Array | None) -> None:
    """The cotangents of :func:`forward` for ``g3[B, n, dv]`` written into ``dq[B, n, d]`` (overwritten),
    ``dk[B, m, d]`` and ``dv[B, m, dv]`` (zeroed by the caller: key rows no query sees stay 0), each
    skipped when ``None``; ``plan.growing`` must hold. One jitted call
    (:func:`._numba_kernels.prefix_attention_backward`, calling OpenBLAS's ``gemm``) where the BLAS allows
    it, else numpy's ``matmul`` around the row kernels; both make the same GEMM calls."""
    nb_, n, m = q3.shape[0], q3.shape[1], k3.shape[1]
    gemm = gemm_address(q3.dtype.name)
    if gemm is not None:
        none = np.empty((0, 0, 0), q3.dtype)
        nb().prefix_attention_backward(
            gemm, q3, k3, v3, g3, plan.grid, plan.key_grid, plan.lengths, plan.widths, float(scale),
            none if dq is None else dq, none if dk is None else dk, none if dv is None else dv,
            scratch((n * m,), q3.dtype, slot=1), scratch((n * m,), q3.dtype, slot=2),
            scratch((n * m,), q3.dtype, slot=3))
        return
    ds, probs = _buffers(q3, k3)
    for r0, r1, keys in plan.blocks:
        _block_probs(q3, k3, plan, scale, r0, r1, keys, ds, probs)
    key_rows = plan.key_grid.tolist()
    if dv is not None:
        for c0, c1, first in key_rows:
            np.matmul(np.swapaxes(probs[:, first:, c0:c1], -1, -2), g3[:, first:], out=dv[:, c0:c1])
    if dq is not None or dk is not None:
        dp = scratch((nb_, n, m), q3.dtype, slot=3)
        for r0, r1, keys in plan.blocks:
            if keys:
                np.matmul(g3[:, r0:r1], np.swapaxes(v3[:, :keys], -1, -2), out=dp[:, r0:r1, :keys])
        nb().prefix_ds_rows(probs, dp, plan.lengths, plan.widths, float(scale), ds, 0, n)  # over the scores
        if dq is not None:
            for r0, r1, keys in plan.blocks:
                if keys:
                    np.matmul(ds[:, r0:r1, :keys], k3[:, :keys], out=dq[:, r0:r1])
                else:
                    dq[:, r0:r1] = 0
        if dk is not None:
            for c0, c1, first in key_rows:
                np.matmul(np.swapaxes(ds[:, first:, c0:c1], -1, -2), q3[:, first:], out=dk[:, c0:c1])
