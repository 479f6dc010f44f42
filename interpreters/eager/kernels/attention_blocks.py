"""Attention under a mask whose allowed keys are a prefix of every query row (a causal mask): only
the keys some row of a block of queries may see are multiplied.

With a causal ``(n, n)`` mask, the rows ``[r0, r1)`` attend to keys ``< r1`` at most, so the scores
``q[r0:r1] k[:r1]^T``, their softmax and ``probs v[:r1]`` cover about half the products of the full
``n x n`` computation (blocks of :data:`BLOCK_ROWS` rows: 62% of them at ``n = 128``). Only the
forward walks the blocks: the backward's five GEMMs per block (and the sums of the ``k`` and ``v``
cotangents over blocks) were slower than the full computation at ``(8, 4, 128, 64)`` (measured, one
thread: forward 4.06 -> 3.14 ms, backward 7.6 -> 8.1-9.3 ms with 16-64 rows per block).

The full computation multiplies the masked entries' zero probabilities with ``v``, so an infinite
or NaN value there makes NaN that the blocks would skip. The blocks are taken only when ``v`` is
finite, so both ways give the same values (up to the rounding of a sum with or without trailing
zero terms).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._support import Array, all_finite, nb

BLOCK_ROWS = 32
"""Query rows per block: smaller blocks skip more products but make more (smaller) GEMM calls."""

MAX_WORK_FRACTION = 0.8
"""The blocks are used only when they cover at most this fraction of the full ``n x m`` scores."""

Blocks = list[tuple[int, int, int]]


def prefix_blocks(mask: Any, n: int, m: int) -> tuple[Blocks, Array] | None:
    """``([(r0, r1, keys)], mask2)`` when ``mask`` (bool, shape ``[1, ..., 1, n, m]``: one mask for
    every batch entry) allows each query row a prefix of the keys; rows ``[r0, r1)`` then only need
    keys ``[0, keys)``. ``None`` when the mask is not of that form or the blocks would save too little."""
    if mask is None:
        return None
    mk = np.asarray(mask)
    if mk.dtype != np.bool_ or mk.ndim < 2 or mk.shape[-2:] != (n, m) or math.prod(mk.shape[:-2]) != 1:
        return None
    m2 = mk.reshape(n, m)
    lengths = m2.sum(axis=1)
    if not np.array_equal(m2, np.arange(m)[None, :] < lengths[:, None]):
        return None
    blocks = [(r0, min(n, r0 + BLOCK_ROWS), int(lengths[r0:r0 + BLOCK_ROWS].max())) for r0 in range(0, n, BLOCK_ROWS)]
    if sum((r1 - r0) * keys for r0, r1, keys in blocks) > MAX_WORK_FRACTION * n * m:
        return None
    return blocks, m2


def usable(mask: Any, n: int, m: int, v: Array) -> tuple[Blocks, Array] | None:
    """:func:`prefix_blocks` when the values ``v`` are all finite (see the module docstring), else ``None``."""
    found = prefix_blocks(mask, n, m)
    if found is None or not all_finite(v):
        return None
    return found


def _block_probs(q3: Array, k3: Array, m2: Array, r0: int, r1: int, keys: int, scale: float) -> Array:
    """The masked softmax probabilities ``[B, r1 - r0, keys]`` of the query rows ``[r0, r1)``."""
    nb_, rows = q3.shape[0], r1 - r0
    scores: Array = np.matmul(q3[:, r0:r1], np.swapaxes(k3[:, :keys], -1, -2))
    probs: Array = np.empty_like(scores)
    mask_rows = np.ascontiguousarray(np.broadcast_to(m2[r0:r1, :keys], (nb_, rows, keys))).reshape(-1, keys)
    nb().masked_softmax_rows(scores.reshape(-1, keys), mask_rows, float(scale), probs.reshape(-1, keys),
                             0, nb_ * rows)
    return probs


def forward(q3: Array, k3: Array, v3: Array, blocks: Blocks, m2: Array, scale: float, out: Array) -> None:
    """``out[B, n, dv] = softmax(scale q k^T, masked) v`` block by block (rows with no key: 0)."""
    for r0, r1, keys in blocks:
        if keys == 0:
            out[:, r0:r1] = 0
            continue
        out[:, r0:r1] = np.matmul(_block_probs(q3, k3, m2, r0, r1, keys, scale), v3[:, :keys])
