"""Padding modules: ``ZeroPad1d/2d/3d``, ``ConstantPad1d/2d/3d``, ``ReflectionPad1d/2d/3d`` and
``ReplicationPad1d/2d/3d``, each a call of :func:`tensorplay.nn.padding.pad` with PyTorch's arguments.

``padding`` is an int (the same amount on both sides of each padded axis) or ``2 * rank`` ints
``(left, right[, top, bottom[, front, back]])``, last axis first, as ``F.pad`` takes them. Reflection and
replication take an input ``[C, *spatial]`` or ``[N, C, *spatial]`` (``rank`` spatial axes), as PyTorch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tensorplay.errors import ShapeError
from tensorplay.nn._util import ops_for, shape_of
from tensorplay.nn.module import Module
from tensorplay.nn.padding import pad
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]
Padding = int | tuple[int, ...]


def _amounts(padding: Any, rank: int, where: str) -> tuple[int, ...]:
    """``padding`` as ``2 * rank`` ints, or a :class:`ShapeError` naming the layer and what was given."""
    def is_int(v: Any) -> bool:
        return not isinstance(v, bool) and isinstance(v, (int, np.integer))
    if is_int(padding):
        return (int(padding),) * (2 * rank)
    if isinstance(padding, (tuple, list)) and len(padding) == 2 * rank and all(is_int(p) for p in padding):
        return tuple(int(p) for p in padding)
    raise ShapeError(f"{where}: padding must be an int or a tuple of {2 * rank} ints, got {padding!r}")


class _Pad(Module):
    """A padding module: ``mode`` padding of the last ``rank`` axes by ``padding``."""

    rank = 1
    mode = "constant"

    def __init__(self, padding: Padding, value: float = 0.0) -> None:
        super().__init__()
        self.padding = _amounts(padding, self.rank, type(self).__name__)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise ShapeError(f"{type(self).__name__}: value must be a number, got {value!r}")
        self.value = float(value)

    def forward(self, x: AnyTensor) -> AnyTensor:
        """``x`` padded on its last ``rank`` axes."""
        where = type(self).__name__
        ops_for(where, x)
        if self.mode != "constant" and x.ndim not in (self.rank + 1, self.rank + 2):
            raise ShapeError(f"{where}: expected a {self.rank + 1}-d [C, *spatial] or {self.rank + 2}-d "
                             f"[N, C, *spatial] input, got shape {list(shape_of(x))}")
        if x.ndim < self.rank:
            raise ShapeError(f"{where}: expected an input with at least {self.rank} axes to pad, got shape "
                             f"{list(shape_of(x))}")
        if self.mode == "constant":
            return pad(x, self.padding, "constant", self.value)
        return pad(x, self.padding, self.mode)

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}" if type(self).__name__.startswith("Constant") \
            else f"{self.padding}"


class ConstantPad1d(_Pad):
    """Pad the last axis with ``value``: ``padding`` ``(left, right)`` or an int."""

    def __init__(self, padding: Padding, value: float) -> None:
        super().__init__(padding, value)


class ConstantPad2d(ConstantPad1d):
    """Pad the last two axes with ``value``: ``padding`` ``(left, right, top, bottom)`` or an int."""

    rank = 2


class ConstantPad3d(ConstantPad1d):
    """Pad the last three axes with ``value``: ``padding`` ``(left, right, top, bottom, front, back)`` or an int."""

    rank = 3


class ZeroPad1d(_Pad):
    """Pad the last axis with zeros: ``padding`` ``(left, right)`` or an int."""

    def __init__(self, padding: Padding) -> None:
        super().__init__(padding, 0.0)


class ZeroPad2d(ZeroPad1d):
    """Pad the last two axes with zeros: ``padding`` ``(left, right, top, bottom)`` or an int."""

    rank = 2


class ZeroPad3d(ZeroPad1d):
    """Pad the last three axes with zeros: ``padding`` ``(left, right, top, bottom, front, back)`` or an int."""

    rank = 3


class ReflectionPad1d(ZeroPad1d):
    """Mirror the last axis of ``[C, W]`` / ``[N, C, W]`` (the edge not repeated; each amount below its size)."""

    mode = "reflect"


class ReflectionPad2d(ReflectionPad1d):
    """Mirror the last two axes of ``[C, H, W]`` / ``[N, C, H, W]``."""

    rank = 2


class ReflectionPad3d(ReflectionPad1d):
    """Mirror the last three axes of ``[C, D, H, W]`` / ``[N, C, D, H, W]``."""

    rank = 3


class ReplicationPad1d(ZeroPad1d):
    """Repeat the edge entries of the last axis of ``[C, W]`` / ``[N, C, W]``."""

    mode = "replicate"


class ReplicationPad2d(ReplicationPad1d):
    """Repeat the edge entries of the last two axes of ``[C, H, W]`` / ``[N, C, H, W]``."""

    rank = 2


class ReplicationPad3d(ReplicationPad1d):
    """Repeat the edge entries of the last three axes of ``[C, D, H, W]`` / ``[N, C, D, H, W]``."""

    rank = 3
