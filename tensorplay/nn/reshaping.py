"""``Unflatten``, ``PixelShuffle`` / ``PixelUnshuffle`` and ``F.pixel_shuffle`` / ``F.pixel_unshuffle``.

All three are a ``reshape`` (and, for the pixel layers, a ``permute`` and a second ``reshape``) of
the input, so they run under every interpreter and their gradient is the inverse rearrangement.
``pixel_shuffle`` moves ``r * r`` channel blocks into space: ``[*lead, C * r * r, H, W] ->
[*lead, C, H * r, W * r]`` with output ``[c, h * r + i, w * r + j]`` taken from channel
``c * r * r + i * r + j`` at ``[h, w]`` (PyTorch's layout); ``pixel_unshuffle`` is its inverse.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tensorplay.errors import AxisError, ShapeError
from tensorplay.nn._util import numel, ops_for, shape_of
from tensorplay.nn.module import Module
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]


def _is_int(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, np.integer))


def _factor(value: Any, name: str, where: str) -> int:
    if not _is_int(value) or value <= 0:
        raise ShapeError(f"{where}: {name} must be a positive int, got {type(value).__name__} {value!r}")
    return int(value)


def _check_sizes(unflattened_size: Any, where: str) -> tuple[int, ...]:
    sizes = tuple(unflattened_size) if isinstance(unflattened_size, (tuple, list)) else None
    if sizes is None or not sizes or not all(_is_int(s) for s in sizes):
        raise ShapeError(f"{where}: unflattened_size must be a non-empty tuple of ints, got {unflattened_size!r}")
    if sum(1 for s in sizes if s == -1) > 1 or any(s < -1 for s in sizes):
        raise ShapeError(f"{where}: unflattened_size may hold one -1 and otherwise non-negative sizes, got "
                         f"{list(sizes)}")
    return tuple(int(s) for s in sizes)


def unflatten(input: AnyTensor, dim: int, unflattened_size: Sequence[int], where: str = "unflatten") -> AnyTensor:
    """``input`` with axis ``dim`` (negative counts from the end) split into ``unflattened_size``,
    whose product must be that axis' size (one entry may be ``-1``: the size left over)."""
    ops = ops_for(where, input)
    sizes = _check_sizes(unflattened_size, where)
    shape = shape_of(input)
    if not _is_int(dim) or not -max(input.ndim, 1) <= dim < max(input.ndim, 1) or input.ndim == 0:
        raise AxisError(f"{where}: dim {dim!r} is out of range for an input of shape {list(shape)} "
                        f"({input.ndim} axes)")
    axis = int(dim) % input.ndim
    n = shape[axis]
    known = numel([s for s in sizes if s != -1])
    if -1 in sizes:
        if known == 0 or n % known:
            raise ShapeError(f"{where}: cannot split axis {axis} of size {n} (input shape {list(shape)}) into "
                             f"{list(sizes)}")
        sizes = tuple(n // known if s == -1 else s for s in sizes)
    elif known != n:
        raise ShapeError(f"{where}: unflattened_size {list(sizes)} has product {known}, but axis {axis} of the "
                         f"input of shape {list(shape)} has size {n}")
    return ops.reshape(input, shape=shape[:axis] + sizes + shape[axis + 1:])  # type: ignore[no-any-return]


def _pixel_input(input: AnyTensor, where: str) -> tuple[Any, tuple[Any, ...]]:
    ops = ops_for(where, input)
    if input.ndim < 3:
        raise ShapeError(f"{where}: expected an input [*lead, C, H, W] with at least 3 axes, got shape "
                         f"{list(shape_of(input))}")
    return ops, shape_of(input)


def pixel_shuffle(input: AnyTensor, upscale_factor: int, where: str = "pixel_shuffle") -> AnyTensor:
    """``input[*lead, C * r * r, H, W] -> [*lead, C, H * r, W * r]`` for ``r = upscale_factor``
    (channel ``c * r * r + i * r + j`` fills the offsets ``(i, j)`` of each ``r x r`` output block)."""
    r = _factor(upscale_factor, "upscale_factor", where)
    ops, shape = _pixel_input(input, where)
    *lead, c, h, w = shape
    if c % (r * r):
        raise ShapeError(f"{where}: the {c} channels (axis -3 of the input of shape {list(shape)}) must be "
                         f"divisible by upscale_factor ** 2 = {r * r}")
    k = len(lead)
    blocks = ops.reshape(input, shape=(*lead, c // (r * r), r, r, h, w))
    moved = ops.permute(blocks, perm=tuple(range(k)) + (k, k + 3, k + 1, k + 4, k + 2))
    return ops.reshape(moved, shape=(*lead, c // (r * r), h * r, w * r))  # type: ignore[no-any-return]


def pixel_unshuffle(input: AnyTensor, downscale_factor: int, where: str = "pixel_unshuffle") -> AnyTensor:
    """``input[*lead, C, H * r, W * r] -> [*lead, C * r * r, H, W]`` for ``r = downscale_factor``: the
    inverse of :func:`pixel_shuffle`. ``H * r`` and ``W * r`` must be divisible by ``r``."""
    r = _factor(downscale_factor, "downscale_factor", where)
    ops, shape = _pixel_input(input, where)
    *lead, c, h, w = shape
    if h % r or w % r:
        raise ShapeError(f"{where}: the spatial sizes {h} x {w} (the last two axes of the input of shape "
                         f"{list(shape)}) must be divisible by downscale_factor = {r}")
    k = len(lead)
    blocks = ops.reshape(input, shape=(*lead, c, h // r, r, w // r, r))
    moved = ops.permute(blocks, perm=tuple(range(k)) + (k, k + 2, k + 4, k + 1, k + 3))
    return ops.reshape(moved, shape=(*lead, c * r * r, h // r, w // r))  # type: ignore[no-any-return]


class Unflatten(Module):
    """Split axis ``dim`` of the input into ``unflattened_size`` (see :func:`unflatten`), the inverse of
    :class:`Flatten`: ``Unflatten(1, (2, 5))`` takes ``[N, 10, *rest]`` to ``[N, 2, 5, *rest]``."""

    def __init__(self, dim: int, unflattened_size: Sequence[int]) -> None:
        super().__init__()
        if not _is_int(dim):
            raise ShapeError(f"Unflatten: dim must be an int, got {type(dim).__name__} {dim!r}")
        self.dim = int(dim)
        _check_sizes(unflattened_size, "Unflatten")
        self.unflattened_size = unflattened_size  # as given (a tuple or a list), as PyTorch

    def forward(self, x: AnyTensor) -> AnyTensor:
        """``x`` with axis ``dim`` split."""
        return unflatten(x, self.dim, self.unflattened_size, "Unflatten")

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class PixelShuffle(Module):
    """``[*lead, C * r * r, H, W] -> [*lead, C, H * r, W * r]`` (see :func:`pixel_shuffle`)."""

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = _factor(upscale_factor, "upscale_factor", "PixelShuffle")

    def forward(self, x: AnyTensor) -> AnyTensor:
        """The shuffled tensor."""
        return pixel_shuffle(x, self.upscale_factor, "PixelShuffle")

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """``[*lead, C, H * r, W * r] -> [*lead, C * r * r, H, W]`` (see :func:`pixel_unshuffle`)."""

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = _factor(downscale_factor, "downscale_factor", "PixelUnshuffle")

    def forward(self, x: AnyTensor) -> AnyTensor:
        """The unshuffled tensor."""
        return pixel_unshuffle(x, self.downscale_factor, "PixelUnshuffle")

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"
