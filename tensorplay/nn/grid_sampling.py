"""``F.affine_grid`` and ``F.grid_sample``: sampling ``input[N, C, *spatial]`` at normalised coordinates.

Conventions (PyTorch's): ``grid[N, *out, d]`` holds, for ``d`` spatial axes (2 or 3), coordinates in
``[-1, 1]`` ordered ``(x, y[, z])`` where ``x`` indexes the *last* spatial axis (width). ``-1`` and ``1``
are the centres of the corner pixels with ``align_corners=True`` and their outer edges otherwise:
pixel coordinate ``(g + 1) / 2 * (size - 1)``, resp. ``((g + 1) * size - 1) / 2``. Outside the image,
``padding_mode`` ``"zeros"`` reads 0, ``"border"`` clamps the coordinate into ``[0, size - 1]`` and
``"reflection"`` reflects it at the border (at the pixel centres with ``align_corners=True``, at the outer
edges otherwise) and then clamps it.

Everything is composed from primitives (``floor``/``round``, ``where``, ``gather`` of the input flattened to
``[N * prod(spatial), C]``): eager code, graphs, ``tp.compile``, the transforms and export need nothing new,
and the gradients are the primitives' -- with respect to ``input`` the scatter of the interpolation
weights, with respect to ``grid`` (``"bilinear"``) the derivative of those weights, 0 for ``"nearest"``.
The clamps are ``where`` selections: a clamped coordinate, one exactly on the border too, passes no
gradient to the grid, as in PyTorch's kernels. The spatial sizes must be static.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product
from typing import Any

import numpy as np

from tensorplay.errors import ArgumentError, DTypeError, ShapeError
from tensorplay.nn._util import ops_for, shape_of
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]

_MODES = ("bilinear", "nearest")
_PADDING = ("zeros", "border", "reflection")


def _static(sizes: Sequence[Any], where: str, what: str) -> tuple[int, ...]:
    if not all(isinstance(s, (int, np.integer)) for s in sizes):
        raise ShapeError(f"{where}: the {what} need static sizes, got {list(sizes)}")
    return tuple(int(s) for s in sizes)


# ---- affine_grid ---------------------------------------------------------------------------------

def _base_axis(steps: int, align_corners: bool) -> np.ndarray[Any, Any]:
    """The normalised coordinates of ``steps`` pixel centres (0 for a single one, as PyTorch)."""
    if steps <= 1:
        return np.zeros((steps,))
    values = np.linspace(-1.0, 1.0, steps)
    return values if align_corners else values * (steps - 1) / steps


def affine_grid(theta: AnyTensor, size: Sequence[int], align_corners: bool | None = None) -> AnyTensor:
    """The sampling grid of the affine maps ``theta``, as ``torch.nn.functional.affine_grid``.

    ``theta[N, 2, 3]`` with ``size = (N, C, H, W)`` gives ``grid[N, H, W, 2]``; ``theta[N, 3, 4]`` with
    ``size = (N, C, D, H, W)`` gives ``grid[N, D, H, W, 3]``: entry ``(..., i, j)`` is ``theta @ (x_j, y_i,
    1)`` (resp. with ``z``) for the normalised pixel centres (``align_corners`` as in :func:`grid_sample`,
    default False). Differentiable in ``theta``.
    """
    where = "affine_grid"
    ops = ops_for(where, theta)
    if isinstance(size, (str, bytes)) or not isinstance(size, Sequence) or not all(
            isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s > 0 for s in size):
        raise ShapeError(f"{where}: size must be a sequence of positive ints (N, C, H, W) or (N, C, D, H, W), "
                         f"got {size!r}")
    if len(size) not in (4, 5):
        raise ShapeError(f"{where}: size must have 4 (N, C, H, W) or 5 (N, C, D, H, W) entries, got {list(size)}")
    if not theta.dtype.is_floating_point:
        raise DTypeError(f"{where}: theta must be a float tensor, got {theta.dtype.name}")
    d = len(size) - 2
    want = (int(size[0]), d, d + 1)
    if tuple(shape_of(theta)) != want:
        raise ShapeError(f"{where}: theta must have shape {list(want)} for size {list(size)}, got "
                         f"{list(theta.shape)}")
    spatial = tuple(int(s) for s in size[2:])
    axes = [_base_axis(s, bool(align_corners)) for s in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # one array per spatial axis, in input order
    columns = [mesh[a] for a in reversed(range(d))] + [np.ones(spatial)]  # (x, y[, z], 1)
    base = np.stack(columns, axis=-1).reshape(-1, d + 1).astype(theta.dtype.name)
    grid = ops.matmul(ops.constant(base), ops.permute(theta, perm=(0, 2, 1)))  # [N, prod, d]
    return ops.reshape(grid, shape=(want[0],) + spatial + (d,))  # type: ignore[no-any-return]


# ---- grid_sample ---------------------------------------------------------------------------------

def _clip(ops: Any, c: AnyTensor, high: float) -> AnyTensor:
    """``c`` clamped into ``[0, high]`` with ``where``: gradient 1 strictly inside, 0 on the border and outside
    (PyTorch's kernels count the border as outside)."""
    return ops.where(ops.le(c, 0.0), 0.0, ops.where(ops.ge(c, high), high, c))  # type: ignore[no-any-return]


def _reflect(ops: Any, c: AnyTensor, low: float, high: float) -> AnyTensor:
    """``c`` reflected back and forth into ``[low, high]``."""
    span = high - low
    offset = ops.sub(c, low)
    folded = ops.where(ops.lt(offset, 0.0), ops.neg(offset), offset)
    turns = ops.floor(ops.div(folded, span))
    extra = ops.sub(folded, ops.mul(turns, span))
    even = ops.eq(ops.sub(turns, ops.mul(ops.floor(ops.mul(turns, 0.5)), 2.0)), 0.0)
    return ops.where(even, ops.add(extra, low), ops.sub(span + low, extra))  # type: ignore[no-any-return]


def _pixel(ops: Any, g: AnyTensor, n: int, padding_mode: str, align_corners: bool) -> AnyTensor:
    """The pixel coordinate of normalised ``g`` on an axis of ``n`` pixels, after ``padding_mode``."""
    if align_corners:
        c = ops.mul(ops.add(g, 1.0), (n - 1) / 2)
    else:
        c = ops.div(ops.sub(ops.mul(ops.add(g, 1.0), float(n)), 1.0), 2.0)
    if padding_mode == "reflection":
        if align_corners:
            if n == 1:
                return ops.full(shape=shape_of(g), value=0.0, dtype=g.dtype.name)  # type: ignore[no-any-return]
            c = _reflect(ops, c, 0.0, float(n - 1))
        else:
            c = _reflect(ops, c, -0.5, n - 0.5)
    if padding_mode in ("border", "reflection"):
        c = _clip(ops, c, float(n - 1))
    return c  # type: ignore[no-any-return]


def _check_grid(input: AnyTensor, grid: AnyTensor, mode: str, padding_mode: str, where: str) -> int:
    if mode not in _MODES:
        raise ArgumentError(f"{where}: mode must be 'bilinear' or 'nearest', got {mode!r}")
    if padding_mode not in _PADDING:
        raise ArgumentError(f"{where}: padding_mode must be 'zeros', 'border' or 'reflection', got {padding_mode!r}")
    if input.ndim not in (4, 5):
        raise ShapeError(f"{where}: input must be 4-d [N, C, H, W] or 5-d [N, C, D, H, W], got shape "
                         f"{list(input.shape)}")
    d = input.ndim - 2
    if grid.ndim != input.ndim or grid.shape[-1] != d or grid.shape[0] != input.shape[0]:
        raise ShapeError(f"{where}: grid must have shape [{input.shape[0]}, {', '.join(['*'] * d)}, {d}] for "
                         f"input of shape {list(input.shape)}, got {list(grid.shape)}")
    for name, t in (("input", input), ("grid", grid)):
        if not t.dtype.is_floating_point:
            raise DTypeError(f"{where}: {name} must be a float tensor, got {t.dtype.name}")
    if grid.dtype != input.dtype:
        raise DTypeError(f"{where}: grid must have the input's dtype {input.dtype.name}, got {grid.dtype.name}")
    return d


def grid_sample(input: AnyTensor, grid: AnyTensor, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners: bool | None = None) -> AnyTensor:
    """``input[N, C, *spatial]`` sampled at ``grid[N, *out, d]`` -> ``[N, C, *out]``, as
    ``torch.nn.functional.grid_sample`` (see the module docstring for the coordinates and padding modes).

    ``d`` is 2 (4-d input) or 3 (5-d input; ``"bilinear"`` is then trilinear). ``"nearest"`` rounds
    halves to even, as PyTorch. ``align_corners`` defaults to False. ``"bicubic"`` is not supported.
    """
    where = "grid_sample"
    ops = ops_for(where, input, grid)
    d = _check_grid(input, grid, mode, padding_mode, where)
    align = bool(align_corners)
    n_batch, channels = shape_of(input)[:2]
    spatial = _static(shape_of(input)[2:], where, "input's spatial axes")
    out = tuple(shape_of(grid)[1:-1])
    flat = ops.reshape(ops.permute(input, perm=(0,) + tuple(range(2, d + 2)) + (1,)), shape=(n_batch * int(np.prod(spatial)), channels))
    strides = [int(np.prod(spatial[a + 1:])) for a in range(d)]
    base = ops.reshape(ops.mul(ops.iota(length=n_batch, dtype="int64"), int(np.prod(spatial))),
                       shape=(n_batch,) + (1,) * len(out))
    coords = []
    for a in range(d):  # grid entry d - 1 - a addresses spatial axis a
        k = d - 1 - a
        g = ops.slice(grid, starts=(0,) * (d + 1) + (k,), stops=tuple(shape_of(grid)[:-1]) + (k + 1,),
                      steps=(1,) * (d + 2))
        coords.append(_pixel(ops, ops.reshape(g, shape=(n_batch,) + out), spatial[a], padding_mode, align))
    if mode == "nearest":
        corners = [[(ops.round(c), None) for c in coords]]
    else:
        lows = [ops.floor(c) for c in coords]
        highs = [ops.sub(c, lo) for c, lo in zip(coords, lows)]
        pairs = [((lo, ops.sub(1.0, h)), (ops.add(lo, 1.0), h)) for lo, h in zip(lows, highs)]
        corners = [list(choice) for choice in product(*pairs)]
    total = None
    for corner in corners:
        index, valid, weight = base, None, None
        for a, (position, w) in enumerate(corner):
            inside = ops.logical_and(ops.ge(position, 0.0), ops.le(position, float(spatial[a] - 1)))
            valid = inside if valid is None else ops.logical_and(valid, inside)
            safe = ops.cast(ops.where(inside, position, 0.0), dtype="int64")
            index = ops.add(index, ops.mul(safe, strides[a]) if strides[a] != 1 else safe)
            if w is not None:
                weight = w if weight is None else ops.mul(weight, w)
        values = ops.gather(flat, index, axis=0)  # [N, *out, C]
        if weight is not None:
            values = ops.mul(values, ops.reshape(weight, shape=(n_batch,) + out + (1,)))
        term = ops.where(ops.reshape(valid, shape=(n_batch,) + out + (1,)), values, 0.0)  # outside: not read
        total = term if total is None else ops.add(total, term)
    return ops.permute(total, perm=(0, d + 1) + tuple(range(1, d + 1)))  # type: ignore[no-any-return]


__all__ = ["affine_grid", "grid_sample"]
