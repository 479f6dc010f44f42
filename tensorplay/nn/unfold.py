"""``F.unfold`` / ``F.fold`` and ``nn.Unfold`` / ``nn.Fold``: sliding 2-d blocks to columns and back.

``unfold`` takes ``x[N, C, H, W]`` (or unbatched ``[C, H, W]``) to ``[N, C * kh * kw, L]``: column ``l``
holds the block at output position ``l`` (row-major over the ``oh x ow`` grid), its rows ordered
``(c, i, j)`` with ``i`` / ``j`` the kernel offsets, as PyTorch. Along an axis of padded size ``n`` the
block at position ``o`` reads entries ``o * stride + i * dilation``; ``oh = (n - dilation (k - 1) - 1)
// stride + 1``. It is zero padding followed by one ``gather`` per spatial axis with a fixed index
pattern, so its gradient is the gathers' (scatter-add).

``fold`` is its adjoint: ``[N, C * kh * kw, L] -> [N, C, H, W]`` with ``output_size = (H, W)``, summing
every column entry into the position it was read from (overlaps add up), then cropping the padding.
Each spatial axis is one matrix product with a fixed 0/1 ``[k * o, n]`` placement matrix. Both run
under every interpreter (eager, graph recording, transforms, export); spatial sizes must be static.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tensorplay.errors import ShapeError
from tensorplay.nn._util import IntOrTuple, check_window, ops_for, shape_of
from tensorplay.nn.module import Module
from tensorplay.prefix import int_tuple
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]
Window = tuple[tuple[int, int], tuple[int, int], tuple[int, int], tuple[int, int]]


def _window(kernel_size: IntOrTuple, dilation: IntOrTuple, padding: IntOrTuple, stride: IntOrTuple,
            where: str) -> Window:
    """``(kernel_size, dilation, padding, stride)`` as pairs, checked: kernel, dilation and stride
    positive, padding non-negative (a :class:`ShapeError` naming ``where`` and the argument)."""
    k = int_tuple(kernel_size, 2, "kernel_size", where)
    d = int_tuple(dilation, 2, "dilation", where)
    p = int_tuple(padding, 2, "padding", where)
    s = int_tuple(stride, 2, "stride", where)
    check_window(k, kernel_size, "kernel_size", where, 1)
    check_window(d, dilation, "dilation", where, 1)
    check_window(s, stride, "stride", where, 1)
    check_window(p, padding, "padding", where, 0)
    return (k[0], k[1]), (d[0], d[1]), (p[0], p[1]), (s[0], s[1])


def _static(n: Any, what: str, where: str) -> int:
    if not isinstance(n, (int, np.integer)):
        raise ShapeError(f"{where}: the {what} needs a static size, got the symbolic size {n}")
    return int(n)


def _blocks(n: int, k: int, d: int, s: int) -> int:
    """The number of block positions along an axis of padded size ``n`` (may be <= 0: too small)."""
    return (n - d * (k - 1) - 1) // s + 1


def _grid(sizes: tuple[int, int], window: Window, where: str) -> tuple[int, int]:
    """``(oh, ow)`` for spatial ``sizes``; a grid without a block is a :class:`ShapeError`."""
    (k, d, p, s) = window
    grid = tuple(_blocks(sizes[a] + 2 * p[a], k[a], d[a], s[a]) for a in range(2))
    if min(grid) < 1:
        raise ShapeError(f"{where}: the spatial size {list(sizes)} with padding {list(p)} is too small for "
                         f"kernel_size {list(k)} with dilation {list(d)} (block grid {list(grid)}; each axis "
                         "needs padded size >= dilation * (kernel_size - 1) + 1)")
    return grid[0], grid[1]


def _offsets(o: int, k: int, d: int, s: int) -> np.ndarray[Any, Any]:
    """``[k, o]`` int64: entry ``(i, j)`` is the padded position ``j * s + i * d`` that offset ``i`` of the
    block at position ``j`` reads."""
    return (np.arange(o, dtype=np.int64)[None, :] * s + np.arange(k, dtype=np.int64)[:, None] * d)


def _batched(input: Any, where: str, rank: int, layout: str) -> tuple[Any, AnyTensor, bool]:
    ops = ops_for(where, input)
    if input.ndim not in (rank, rank + 1):
        raise ShapeError(f"{where}: expected a {rank + 1}-d input [N, {layout}] or an unbatched {rank}-d "
                         f"input [{layout}], got shape {list(input.shape)}")
    unbatched = input.ndim == rank
    x = ops.reshape(input, shape=(1,) + shape_of(input)) if unbatched else input
    return ops, x, unbatched


def unfold(input: AnyTensor, kernel_size: IntOrTuple, dilation: IntOrTuple = 1, padding: IntOrTuple = 0,
           stride: IntOrTuple = 1) -> AnyTensor:
    """``input[N, C, H, W] -> [N, C * kh * kw, oh * ow]`` (unbatched ``[C, H, W] -> [C * kh * kw, oh * ow]``):
    the sliding ``kh x kw`` blocks of the zero-padded input as columns (im2col), as ``torch.nn.functional.unfold``.
    """
    return _unfold(input, _window(kernel_size, dilation, padding, stride, "unfold"), "unfold")


def _unfold(input: AnyTensor, window: Window, where: str) -> AnyTensor:
    ops, x, unbatched = _batched(input, where, 3, "C, H, W")
    (k, d, p, s) = window
    n, c = shape_of(x)[:2]
    sizes = (_static(x.shape[2], "height (axis -2)", where), _static(x.shape[3], "width (axis -1)", where))
    oh, ow = _grid(sizes, window, where)
    if p != (0, 0):
        x = ops.pad(x, pads=((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])), value=0.0)
    x = ops.gather(x, ops.constant(_offsets(oh, k[0], d[0], s[0])), axis=2)  # [N, C, kh, oh, Wp]
    x = ops.gather(x, ops.constant(_offsets(ow, k[1], d[1], s[1])), axis=4)  # [N, C, kh, oh, kw, ow]
    x = ops.permute(x, perm=(0, 1, 2, 4, 3, 5))
    cols = c * k[0] * k[1]
    out = ops.reshape(x, shape=(cols, oh * ow) if unbatched else (n, cols, oh * ow))
    return out  # type: ignore[no-any-return]


def _placement(o: int, k: int, d: int, s: int, n: int, dtype: str) -> np.ndarray[Any, Any]:
    """``[k * o, n]``: row ``i * o + j`` is one at the padded position that block ``j``'s offset ``i`` reads."""
    matrix = np.zeros((k * o, n), dtype=dtype)
    matrix[np.arange(k * o), _offsets(o, k, d, s).reshape(-1)] = 1.0
    return matrix


def fold(input: AnyTensor, output_size: IntOrTuple, kernel_size: IntOrTuple, dilation: IntOrTuple = 1,
         padding: IntOrTuple = 0, stride: IntOrTuple = 1) -> AnyTensor:
    """``input[N, C * kh * kw, L] -> [N, C, H, W]`` (unbatched ``[C * kh * kw, L] -> [C, H, W]``) with
    ``output_size = (H, W)`` and ``L = oh * ow``: the columns summed back into place (col2im, overlapping
    entries add up), the adjoint of :func:`unfold`, as ``torch.nn.functional.fold``."""
    window = _window(kernel_size, dilation, padding, stride, "fold")
    return _fold(input, _output_size(output_size, "fold"), window, "fold")


def _output_size(output_size: IntOrTuple, where: str) -> tuple[int, int]:
    size = int_tuple(output_size, 2, "output_size", where)
    check_window(size, output_size, "output_size", where, 1)
    return size[0], size[1]


def _fold(input: AnyTensor, size: tuple[int, int], window: Window, where: str) -> AnyTensor:
    ops, x, unbatched = _batched(input, where, 2, "C * kh * kw, L")
    if x.dtype.name not in ("float32", "float64"):
        raise ShapeError(f"{where}: expected a float32 or float64 input, got {x.dtype}")
    (k, d, p, s) = window
    n = shape_of(x)[0]
    rows = _static(x.shape[1], "column axis (C * kh * kw)", where)
    length = _static(x.shape[2], "block axis (L)", where)
    if rows % (k[0] * k[1]):
        raise ShapeError(f"{where}: expected the size of axis 1 ({rows}) to be divisible by kh * kw = "
                         f"{k[0] * k[1]} (kernel_size {list(k)}), got input shape {list(input.shape)}")
    oh, ow = _grid(size, window, where)
    if length != oh * ow:
        raise ShapeError(f"{where}: expected {oh * ow} blocks (the last axis) for output_size {list(size)}, "
                         f"kernel_size {list(k)}, dilation {list(d)}, padding {list(p)}, stride {list(s)} "
                         f"(a {oh} x {ow} grid), got {length} (input shape {list(input.shape)})")
    c = rows // (k[0] * k[1])
    hp, wp = size[0] + 2 * p[0], size[1] + 2 * p[1]
    x = ops.reshape(x, shape=(n, c, k[0], k[1], oh, ow))
    x = ops.reshape(ops.permute(x, perm=(0, 1, 2, 4, 3, 5)), shape=(n, c, k[0] * oh, k[1] * ow))
    dtype = x.dtype.name
    rows_to_h = ops.constant(np.ascontiguousarray(_placement(oh, k[0], d[0], s[0], hp, dtype).T))
    x = ops.matmul(rows_to_h, x)  # [N, C, Hp, kw * ow]
    x = ops.matmul(x, ops.constant(_placement(ow, k[1], d[1], s[1], wp, dtype)))  # [N, C, Hp, Wp]
    if p != (0, 0):
        x = ops.slice(x, starts=(0, 0, p[0], p[1]), stops=(n, c, p[0] + size[0], p[1] + size[1]),
                      steps=(1, 1, 1, 1))
    return ops.reshape(x, shape=(c, size[0], size[1])) if unbatched else x  # type: ignore[no-any-return]


def _show(window: Window) -> str:
    def one(pair: tuple[int, int]) -> str:
        return str(pair[0]) if pair[0] == pair[1] else str(pair)
    k, d, p, s = window
    return f"kernel_size={one(k)}, dilation={one(d)}, padding={one(p)}, stride={one(s)}"


class Unfold(Module):
    """Extract sliding blocks: ``x[N, C, H, W] -> [N, C * kh * kw, L]`` (see :func:`unfold`)."""

    def __init__(self, kernel_size: IntOrTuple, dilation: IntOrTuple = 1, padding: IntOrTuple = 0,
                 stride: IntOrTuple = 1) -> None:
        super().__init__()
        self._window = _window(kernel_size, dilation, padding, stride, "Unfold")
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, x: AnyTensor) -> AnyTensor:
        """``x[N, C, H, W] -> [N, C * kh * kw, L]`` (or unbatched ``[C, H, W] -> [C * kh * kw, L]``)."""
        return _unfold(x, self._window, "Unfold")

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return _show(self._window)


class Fold(Module):
    """Combine sliding blocks: ``x[N, C * kh * kw, L] -> [N, C, H, W]`` (see :func:`fold`)."""

    def __init__(self, output_size: IntOrTuple, kernel_size: IntOrTuple, dilation: IntOrTuple = 1,
                 padding: IntOrTuple = 0, stride: IntOrTuple = 1) -> None:
        super().__init__()
        self._window = _window(kernel_size, dilation, padding, stride, "Fold")
        self._size = _output_size(output_size, "Fold")
        self.output_size, self.kernel_size, self.dilation = output_size, kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, x: AnyTensor) -> AnyTensor:
        """``x[N, C * kh * kw, L] -> [N, C, H, W]`` (or unbatched ``[C * kh * kw, L] -> [C, H, W]``)."""
        return _fold(x, self._size, self._window, "Fold")

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        size = self._size[0] if self._size[0] == self._size[1] else self._size
        return f"output_size={size}, {_show(self._window)}"
