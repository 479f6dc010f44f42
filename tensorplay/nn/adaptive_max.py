"""Adaptive max pooling: ``AdaptiveMaxPool1d`` / ``AdaptiveMaxPool2d`` and their functional forms.

Output cell ``i`` of an axis of size ``n`` pooled to ``out`` is the max over the input entries
``floor(i n / out) <= j < ceil((i + 1) n / out)`` (PyTorch's windows, which may overlap, as in
:mod:`tensorplay.nn.adaptive`). Each axis is one ``gather`` of a fixed ``[out, kmax]`` index table (a
shorter window repeats its last entry, which leaves its max unchanged) and a ``reduce_max`` over the
window, so the layers run under every interpreter; the max over a rectangle is the max over its rows
of the max over its columns. The gradient goes to the maximum (entries tied for the maximum inside one
window share it equally, where PyTorch gives it to one of them). NaN propagates. Only the values are
returned: ``return_indices=True`` is refused. Any leading shape is kept; pooled axes must be static.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVarTuple

import numpy as np

from tensorplay.errors import ArgumentError, ShapeError
from tensorplay.nn._util import ops_for
from tensorplay.nn.adaptive import OutputSize, _sizes, pooled_length
from tensorplay.nn.module import Module
from tensorplay.tensor import Tensor

Lead = TypeVarTuple("Lead")
AnyTensor = Tensor[*tuple[Any, ...]]


def window_table(n: int, out: int) -> np.ndarray[Any, Any]:
    """``[out, kmax]`` int64: row ``i`` lists PyTorch's adaptive window ``i`` of an axis of size ``n``,
    padded to the longest window by repeating its last index."""
    starts = (np.arange(out) * n) // out
    stops = -(-((np.arange(out) + 1) * n) // out)
    kmax = int((stops - starts).max())
    table = starts[:, None] + np.arange(kmax)[None, :]
    clipped: np.ndarray[Any, Any] = np.minimum(table, stops[:, None] - 1).astype(np.int64)
    return clipped


def _pool_axis(ops: Any, x: AnyTensor, axis: int, out: int, where: str) -> AnyTensor:
    n = pooled_length(x, axis, where)
    if out == n:
        return x
    windows = ops.gather(x, ops.constant(window_table(int(n), out)), axis=axis)  # [..., out, kmax, ...]
    return ops.reduce_max(windows, axes=(axis + 1,), keepdims=False)  # type: ignore[no-any-return]


def _check_indices(return_indices: Any, where: str) -> None:
    if return_indices is not False:
        raise ArgumentError(f"{where}: return_indices={return_indices!r} is not supported (only "
                            "return_indices=False: the pooled values without their positions)")


def _adaptive_max(input: AnyTensor, output_size: Any, rank: int, return_indices: Any, where: str) -> AnyTensor:
    ops = ops_for(where, input)
    _check_indices(return_indices, where)
    if input.ndim < rank + 1:
        raise ShapeError(f"{where}: expected an input [*lead, C, {'H, W' if rank == 2 else 'L'}] with at least "
                         f"{rank + 1} axes, got shape {list(input.shape)}")
    if input.dtype.name not in ("float32", "float64"):
        raise ShapeError(f"{where}: expected a float32 or float64 tensor, got {input.dtype}")
    out = input
    for k, size in enumerate(_sizes(output_size, rank, where)):
        if size is not None:
            out = _pool_axis(ops, out, input.ndim - rank + k, size, where)
    return out


def adaptive_max_pool1d(input: Tensor[*Lead, int], output_size: int,
                        return_indices: bool = False) -> Tensor[*Lead, int]:
    """``input[*lead, C, L] -> [*lead, C, output_size]``: the max of each of PyTorch's adaptive windows
    (``return_indices=True`` is not supported: an :class:`ArgumentError`)."""
    return _adaptive_max(input, output_size, 1, return_indices, "adaptive_max_pool1d")


def adaptive_max_pool2d(input: Tensor[*Lead, int, int], output_size: OutputSize,
                        return_indices: bool = False) -> Tensor[*Lead, int, int]:
    """``input[*lead, C, H, W] -> [*lead, C, oh, ow]`` (``output_size`` an int, or ``(oh, ow)`` where
    ``None`` keeps that size): the max of each of PyTorch's adaptive windows (``return_indices=True`` is
    not supported: an :class:`ArgumentError`)."""
    return _adaptive_max(input, output_size, 2, return_indices, "adaptive_max_pool2d")


class _AdaptiveMaxPool(Module):
    rank = 1

    def __init__(self, output_size: OutputSize, return_indices: bool = False) -> None:
        super().__init__()
        where = type(self).__name__
        _sizes(output_size, self.rank, where)
        _check_indices(return_indices, where)
        self.output_size = output_size
        self.return_indices = return_indices

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(_AdaptiveMaxPool):
    """Adaptive max pooling of the last axis to ``output_size`` (see :func:`adaptive_max_pool1d`)."""

    rank = 1

    def forward(self, x: Tensor[*Lead, int]) -> Tensor[*Lead, int]:
        """``x[*lead, C, L] -> [*lead, C, output_size]``."""
        return _adaptive_max(x, self.output_size, 1, self.return_indices, "AdaptiveMaxPool1d")

    if TYPE_CHECKING:
        __call__ = forward


class AdaptiveMaxPool2d(_AdaptiveMaxPool):
    """Adaptive max pooling of the last two axes to ``output_size`` (see :func:`adaptive_max_pool2d`)."""

    rank = 2

    def forward(self, x: Tensor[*Lead, int, int]) -> Tensor[*Lead, int, int]:
        """``x[*lead, C, H, W] -> [*lead, C, oh, ow]``."""
        return _adaptive_max(x, self.output_size, 2, self.return_indices, "AdaptiveMaxPool2d")

    if TYPE_CHECKING:
        __call__ = forward
