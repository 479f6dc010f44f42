"""Stacks of attention heads as 4-d arrays ``[B1, B2, rows, cols]`` that numpy's batched ``matmul`` takes
without copying.

The heads of a multi-head attention are usually views: ``[*lead, n, heads, d]`` (a projection's output,
split into heads) permuted to ``[*lead, heads, n, d]``. Such a stack cannot be folded into one batch axis
without a copy, but each head's matrix is a plain strided matrix BLAS can read (rows ``heads * d``
elements apart), and numpy's ``matmul`` loops over any number of batch axes. So the attention kernels
fold the batch into two axes, ``B1`` (all but the last batch axis, or every batch axis when they fold
into one) and ``B2`` (the last batch axis, or 1), split the work over ``B1``, and copy only what BLAS
cannot read (a head whose rows and columns are both strided) or what does not fold.

Outputs are allocated in the layout of the input they mirror (:func:`empty_as`: ``q`` for the attention
and its ``dq``, ``k`` for ``dk``, ``v`` for ``dv``), so that the inverse permutation and reshape that
merge the heads again are views too. Measured on the benchmark block's heads (``(16, 4, 32, 16)``
slices of a ``[16, 32, 192]`` projection, one process): ``q k^T`` took 112 us on the strided stack
against 98 us on contiguous copies that cost 25 us each to make.
"""

from __future__ import annotations

import math

import numpy as np

from ._support import Array


def _folds(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether the axes ``shape`` (with ``strides``) fold into one axis without a copy."""
    axes = [(size, stride) for size, stride in zip(shape, strides) if size != 1]
    return all(outer == inner * size for (_, outer), (size, inner) in zip(axes, axes[1:]))


def _blas_readable(a: Array) -> bool:
    """Whether numpy's ``matmul`` hands each ``[rows, cols]`` matrix of ``a`` to BLAS as it lies (one
    axis of unit stride, the other a whole number of elements at least that axis's length apart;
    otherwise numpy falls back to its own unblocked loop)."""
    rows, cols = a.shape[-2:]
    s0, s1 = a.strides[-2:]
    size = a.itemsize

    def readable(outer: int, inner: int, length: int) -> bool:
        return inner == size and outer % size == 0 and outer // size >= length

    return readable(s0, s1, cols) or readable(s1, s0, rows)


def split(batch: tuple[int, ...], *arrays: Array) -> tuple[int, int]:
    """``(B1, B2)`` for stacks of heads of batch shape ``batch`` (``arrays``: the stacks, already
    broadcast to it): ``(prod(batch), 1)`` when every stack's batch axes fold into one, else the last
    batch axis apart."""
    heads = math.prod(batch)
    if len(batch) <= 1 or all(a.flags.c_contiguous or _folds(a.shape[:-2], a.strides[:-2]) for a in arrays):
        return heads, 1
    return heads // batch[-1], batch[-1]


def stack(a: Array, groups: tuple[int, int], dtype: np.dtype[np.floating]) -> Array:
    """``a[*batch, rows, cols]`` as a ``dtype`` array ``[B1, B2, rows, cols]`` (``groups = (B1, B2)``): a
    view where ``a`` has that dtype, its heads are BLAS-readable and its batch axes fold that way, else a
    copy."""
    if a.dtype != dtype:
        a = a.astype(dtype)
    if not (a.flags.c_contiguous or _blas_readable(a)):
        a = np.ascontiguousarray(a)
    return a.reshape(groups + a.shape[-2:])


SHORT_CONTRACTION = 16
"""The longest contraction for which :func:`right_operand` copies a transposed stack."""


def right_operand(b: Array) -> Array:
    """The right operand ``b[..., k, n]`` of a batched ``matmul`` as it is best handed to numpy: a C-contiguous
    copy when its matrices are column-major (a transposed stack of heads, ``k^T`` or ``v^T``) and the
    contraction ``k`` is at most :data:`SHORT_CONTRACTION`, else ``b`` itself. OpenBLAS multiplies a
    transposed right matrix with so short a contraction slowly: 64 heads ``[32, 16] @ [16, 32]^T`` took
    44.8 us as they lie and 34.5 us with the copy included (float32, one thread; 0.68-0.86x for every head
    size from 16 to 128 rows with k of 8 or 16, float32 and float64), while from k = 32 on the copy stops paying
    (up to 1.7x slower at k = 64)."""
    if b.ndim > 2 and 1 < b.shape[-1] and 0 < b.shape[-2] <= SHORT_CONTRACTION and b.strides[-2] == b.itemsize \
            and b.strides[-1] != b.itemsize and 0 not in b.strides:  # (a broadcast stack is not copied out)
        return np.ascontiguousarray(b)
    return b


def empty_as(like: Array, cols: int, dtype: np.dtype[np.floating]) -> Array:
    """An uninitialised ``[B1, B2, rows, cols]`` array laid out as the stack ``like`` (its axes in the
    same memory order), C-contiguous when ``like`` has another number of columns or is broadcast (a zero
    stride would be ordered innermost and leave the heads unreadable to BLAS)."""
    shape = like.shape[:-1] + (cols,)
    if like.shape[-1] != cols or like.flags.c_contiguous or 0 in like.strides:
        return np.empty(shape, dtype)
    return np.empty_like(like, dtype=dtype)
