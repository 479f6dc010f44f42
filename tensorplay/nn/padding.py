"""``F.pad``: constant, reflect, replicate and circular padding of the trailing axes, as PyTorch.

``pad`` lists ``(before, after)`` pairs from the last axis backwards: ``(left, right)`` pads the last
axis, ``(left, right, top, bottom)`` the last two, and so on. Constant padding is the ``pad`` primitive
(a negative amount crops, as in PyTorch); the other modes gather the input at a fixed index pattern
per padded axis (``numpy.pad`` of ``arange(n)`` gives it), so the gradient is the gather's: a padded
entry's cotangent adds into the entry it copies. Every mode runs under every interpreter; leading
axes may be symbolic, padded axes of the other modes must be static.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tensorplay.errors import ShapeError
from tensorplay.nn._util import ops_for, shape_of
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]
_NUMPY_MODE = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _pairs(pad: Sequence[int], ndim: int) -> list[tuple[int, int]]:
    """``pad`` as ``(before, after)`` per trailing axis, last axis first."""
    if not isinstance(pad, (tuple, list)) or any(isinstance(p, bool) or not isinstance(p, (int, np.integer))
                                                 for p in pad):
        raise ShapeError(f"pad: pad must be a tuple of ints, got {pad!r}")
    if len(pad) % 2:
        raise ShapeError(f"pad: pad must have an even length ((before, after) per axis), got {len(pad)} entries")
    if len(pad) // 2 > ndim:
        raise ShapeError(f"pad: {len(pad)} entries pad {len(pad) // 2} axes, but the input has only {ndim} "
                         f"(shape rank {ndim})")
    return [(int(pad[2 * i]), int(pad[2 * i + 1])) for i in range(len(pad) // 2)]


def pad(input: AnyTensor, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> AnyTensor:
    """``input[*lead, *padded]`` padded on its trailing ``len(pad) // 2`` axes.

    ``mode``: ``"constant"`` (``value``, default 0; negative amounts crop), ``"reflect"`` (mirror without
    repeating the edge; each amount below the axis size), ``"replicate"`` (repeat the edge entry; the
    axis must be non-empty) or ``"circular"`` (wrap around; each amount at most the axis size)."""
    ops = ops_for("pad", input)
    pairs = _pairs(pad, input.ndim)
    shape = shape_of(input)
    if mode == "constant":
        return _constant(ops, input, pairs, 0.0 if value is None else value)
    if mode not in _NUMPY_MODE:
        raise ShapeError(f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}")
    if value not in (None, 0, 0.0):
        raise ShapeError(f"pad: padding mode {mode!r} does not take a value (got value={value!r})")
    out = input
    for i, (before, after) in enumerate(pairs):
        axis = input.ndim - 1 - i
        if before == 0 and after == 0:
            continue
        n = shape[axis]
        if not isinstance(n, (int, np.integer)):
            raise ShapeError(f"pad: {mode} padding needs a static size on axis {axis}, got the symbolic size {n}")
        _check_amounts(mode, axis, int(n), before, after, shape)
        index = np.arange(n, dtype=np.int64)
        if before < 0 or after < 0:  # PyTorch crops with a negative amount in these modes too
            index = index[max(-before, 0):n - max(-after, 0)]
        index = np.pad(index, (max(before, 0), max(after, 0)), mode=_NUMPY_MODE[mode])  # type: ignore[call-overload]
        out = ops.gather(out, ops.constant(index), axis=axis)
    return out


def _check_amounts(mode: str, axis: int, n: int, before: int, after: int, shape: tuple[Any, ...]) -> None:
    where = f"pad: {mode} padding of axis {axis} (size {n}) of the input of shape {list(shape)}"
    if mode == "reflect" and (before >= n or after >= n):
        raise ShapeError(f"{where}: each amount must be below the size, got ({before}, {after})")
    if mode == "circular" and (before > n or after > n):
        raise ShapeError(f"{where}: each amount must be at most the size, got ({before}, {after})")
    if n == 0:
        raise ShapeError(f"{where}: the axis is empty, there is no entry to {'copy' if mode != 'reflect' else 'mirror'}")
    if before + after + n < 0:
        raise ShapeError(f"{where}: the amounts ({before}, {after}) crop more than the axis has")


def _constant(ops: Any, x: AnyTensor, pairs: list[tuple[int, int]], value: float) -> AnyTensor:
    shape = shape_of(x)
    if any(b < 0 or a < 0 for b, a in pairs):
        starts, stops = [0] * x.ndim, list(shape)
        for i, (before, after) in enumerate(pairs):
            axis = x.ndim - 1 - i
            if before < 0:
                starts[axis] = -before
            if after < 0:
                stops[axis] = shape[axis] + after
            if stops[axis] < starts[axis]:
                raise ShapeError(f"pad: the amounts ({before}, {after}) crop more than axis {axis} has "
                                 f"(size {shape[axis]}, input shape {list(shape)})")
        x = ops.slice(x, starts=tuple(starts), stops=tuple(stops), steps=(1,) * x.ndim)
    pads = [(0, 0)] * x.ndim
    for i, (before, after) in enumerate(pairs):
        pads[x.ndim - 1 - i] = (max(before, 0), max(after, 0))
    if all(p == (0, 0) for p in pads):
        return x
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ShapeError(f"pad: value must be a number, got {value!r}")
    return ops.pad(x, pads=tuple(pads), value=float(value))  # type: ignore[no-any-return]
