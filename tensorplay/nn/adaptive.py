"""Adaptive average pooling: ``AdaptiveAvgPool1d`` / ``AdaptiveAvgPool2d`` and their functional forms.

Output cell ``i`` of an axis of size ``n`` pooled to ``out`` averages the input entries
``floor(i n / out) <= j < ceil((i + 1) n / out)`` (PyTorch's windows, which may overlap). Each axis is
one matrix product with a fixed ``[n, out]`` averaging matrix (a global pool, ``out = 1``, is a mean),
so the layers run under every interpreter and their gradient is the product's. Any leading shape is
kept (``[N, C, H, W]``, ``[C, H, W]``, ...); the pooled axes must have static sizes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVarTuple

import numpy as np

from tensorplay.errors import ShapeError
from tensorplay.nn._util import ops_for, shape_of
from tensorplay.nn.module import Module
from tensorplay.tensor import Tensor

Lead = TypeVarTuple("Lead")
AnyTensor = Tensor[*tuple[Any, ...]]
OutputSize = int | None | tuple[int | None, ...]


def averaging_matrix(n: int, out: int, dtype: str) -> np.ndarray[Any, Any]:
    """``[n, out]``: column ``i`` is ``1/len`` on PyTorch's window ``i`` of an axis of size ``n``."""
    matrix = np.zeros((n, out), dtype=dtype)
    for i in range(out):
        start, stop = (i * n) // out, -(-((i + 1) * n) // out)
        matrix[start:stop, i] = 1.0 / (stop - start)
    return matrix


def _sizes(output_size: Any, rank: int, where: str) -> tuple[int | None, ...]:
    sizes = output_size if isinstance(output_size, (tuple, list)) else (output_size,) * rank
    if len(sizes) != rank:
        raise ShapeError(f"{where}: output_size must be an int or {rank} ints (None keeps a size), got {output_size!r}")
    for s in sizes:
        if s is not None and (isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s <= 0):
            raise ShapeError(f"{where}: output sizes must be positive ints or None, got {output_size!r}")
    return tuple(None if s is None else int(s) for s in sizes)


def pooled_length(x: AnyTensor, axis: int, where: str) -> int:
    """The size of ``x``'s ``axis``, which adaptive pooling needs static and non-zero (a ShapeError naming
    ``where`` otherwise): its windows are computed from it."""
    n = shape_of(x)[axis]
    if not isinstance(n, (int, np.integer)):
        raise ShapeError(f"{where}: the pooled axis {axis} needs a static size, got the symbolic size {n}")
    if n == 0:
        raise ShapeError(f"{where}: cannot pool an empty axis (axis {axis} of shape {list(x.shape)})")
    return int(n)


def _pool_axis(ops: Any, x: AnyTensor, axis: int, out: int, where: str) -> AnyTensor:
    n = pooled_length(x, axis, where)
    if out == n:
        return x
    last = axis == x.ndim - 1
    moved = x if last else ops.permute(x, perm=_swap(x.ndim, axis))
    if out == 1:
        pooled = ops.div(ops.reduce_sum(moved, axes=(x.ndim - 1,), keepdims=True), n)
    else:
        weights = ops.constant(averaging_matrix(int(n), out, x.dtype.name))
        pooled = ops.matmul(moved, weights)
    return pooled if last else ops.permute(pooled, perm=_swap(x.ndim, axis))  # type: ignore[no-any-return]


def _swap(ndim: int, axis: int) -> tuple[int, ...]:
    order = list(range(ndim))
    order[axis], order[-1] = order[-1], order[axis]
    return tuple(order)


def _adaptive(input: AnyTensor, output_size: Any, rank: int, where: str) -> AnyTensor:
    ops = ops_for(where, input)
    if input.ndim < rank + 1:
        raise ShapeError(f"{where}: expected an input [*lead, C, {'H, W' if rank == 2 else 'L'}] with at least "
                         f"{rank + 1} axes, got shape {list(input.shape)}")
    if input.dtype.name not in ("float32", "float64"):
        raise ShapeError(f"{where}: expected a float tensor, got {input.dtype}")
    sizes = _sizes(output_size, rank, where)
    out = input
    for k, size in enumerate(sizes):
        axis = input.ndim - rank + k
        if size is not None:
            out = _pool_axis(ops, out, axis, size, where)
    return out


def adaptive_avg_pool1d(input: Tensor[*Lead, int], output_size: int) -> Tensor[*Lead, int]:
    """``input[*lead, C, L] -> [*lead, C, output_size]``: the mean of each of PyTorch's adaptive windows."""
    return _adaptive(input, output_size, 1, "adaptive_avg_pool1d")


def adaptive_avg_pool2d(input: Tensor[*Lead, int, int], output_size: OutputSize) -> Tensor[*Lead, int, int]:
    """``input[*lead, C, H, W] -> [*lead, C, oh, ow]`` (``output_size`` an int, or ``(oh, ow)`` where
    ``None`` keeps that size): the mean of each of PyTorch's adaptive windows."""
    return _adaptive(input, output_size, 2, "adaptive_avg_pool2d")


class AdaptiveAvgPool1d(Module):
    """Adaptive average pooling of the last axis to ``output_size`` (see :func:`adaptive_avg_pool1d`)."""

    def __init__(self, output_size: int) -> None:
        super().__init__()
        _sizes(output_size, 1, "AdaptiveAvgPool1d")
        self.output_size = output_size

    def forward(self, x: Tensor[*Lead, int]) -> Tensor[*Lead, int]:
        """``x[*lead, C, L] -> [*lead, C, output_size]``."""
        return _adaptive(x, self.output_size, 1, "AdaptiveAvgPool1d")

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool2d(Module):
    """Adaptive average pooling of the last two axes to ``output_size`` (see :func:`adaptive_avg_pool2d`);
    ``AdaptiveAvgPool2d(1)`` is the global average pool of a CNN head."""

    def __init__(self, output_size: OutputSize) -> None:
        super().__init__()
        _sizes(output_size, 2, "AdaptiveAvgPool2d")
        self.output_size = output_size

    def forward(self, x: Tensor[*Lead, int, int]) -> Tensor[*Lead, int, int]:
        """``x[*lead, C, H, W] -> [*lead, C, oh, ow]``."""
        return _adaptive(x, self.output_size, 2, "AdaptiveAvgPool2d")

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"
