"""``F.interpolate`` and ``nn.Upsample``: ``"nearest"`` and (tri/bi)``"linear"`` resizing of
``x[N, C, *spatial]`` (1 to 3 spatial axes), with PyTorch's index and weight conventions.

Every resized axis is handled on its own (both modes are separable), from a fixed index pattern computed
in numpy when the graph is built: ``nearest`` gathers input entry ``min(floor(i * scale), n - 1)`` for
output entry ``i``; ``linear`` takes ``w0 * x[i0] + w1 * x[i1]`` of two gathers with fixed weights. The
source coordinate of output ``i`` is ``scale * i`` with ``align_corners=True`` (``scale = (n - 1) /
(out - 1)``) and ``max(scale * (i + 0.5) - 0.5, 0)`` otherwise, ``scale`` being ``1 / scale_factor``
when a scale factor is given (unless ``recompute_scale_factor``) and ``n / out`` otherwise, computed in
the input's dtype; ``nearest`` floors the coordinate rounded to float32, as PyTorch's CPU kernels. An axis
whose size does not change is copied, whatever the scale (PyTorch's 1-d and 3-d nearest forward read such
an axis with the scale, but its 2-d forward and every backward copy it). Gradients are
the gathers' (each output's cotangent adds into the entries it read), so eager, graphs, transforms and
export need nothing new. The resized axes need static sizes.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from tensorplay.errors import ArgumentError, ShapeError
from tensorplay.nn._util import ops_for, shape_of
from tensorplay.nn.module import Module
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]
Size = int | tuple[int, ...]
Scale = float | tuple[float, ...]
_LINEAR_RANK = {"linear": 1, "bilinear": 2, "trilinear": 3}


def _per_axis(value: Any, rank: int, name: str, where: str, kind: type) -> tuple[Any, ...]:
    values = tuple(value) if isinstance(value, (tuple, list)) else (value,) * rank
    types = (int, np.integer) if kind is int else (int, float, np.integer, np.floating)
    if len(values) != rank or not all(not isinstance(v, bool) and isinstance(v, types) and v > 0 for v in values):
        raise ShapeError(f"{where}: {name} must be a positive {kind.__name__} or {rank} of them for an input with "
                         f"{rank} spatial axes, got {value!r}")
    return tuple(kind(v) for v in values)


def _source_index(n: int, out: int, scale: float | None, mode: str, align_corners: bool,
                  dtype: str) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any] | None, np.ndarray[Any, Any] | None]:
    """For ``out`` outputs from an axis of ``n``: the indices read (``nearest``: one array; ``linear``:
    ``i0``, ``i1`` and the weight ``w1`` of ``i1``)."""
    dst = np.arange(out)
    t = np.dtype(dtype).type
    if mode == "nearest":
        s = t(1.0 / scale) if scale is not None else t(n) / t(out)
        src = (s * dst.astype(dtype)).astype(np.float32)  # PyTorch floors in float32 for every dtype
        return np.minimum(np.floor(src).astype(np.int64), n - 1), None, None
    if align_corners:
        s = t((n - 1) / (out - 1)) if out > 1 else t(0)
        src = s * dst.astype(dtype)
    else:
        s = t(1.0 / scale) if scale is not None else t(n) / t(out)
        src = np.maximum(s * (dst.astype(dtype) + t(0.5)) - t(0.5), t(0))
    i0 = np.minimum(src.astype(np.int64), n - 1)
    i1 = np.minimum(i0 + 1, n - 1)
    w1 = np.where(i1 > i0, src - i0.astype(dtype), 0).astype(dtype)
    return i0, i1, w1


def _resize_axis(ops: Any, x: AnyTensor, axis: int, out: int, scale: float | None, mode: str,
                 align_corners: bool, where: str) -> AnyTensor:
    n = shape_of(x)[axis]
    if not isinstance(n, (int, np.integer)):
        raise ShapeError(f"{where}: the resized axis {axis} needs a static size, got the symbolic size {n}")
    if n == 0:
        raise ShapeError(f"{where}: cannot resize an empty axis (axis {axis} of shape {list(shape_of(x))})")
    i0, i1, w1 = _source_index(int(n), out, scale, mode, align_corners, x.dtype.name)
    if out == n:  # a copy, whatever the scale (PyTorch's linear kernels, its 2-d nearest and every backward)
        return x
    if i1 is None or w1 is None:
        return ops.gather(x, ops.constant(i0), axis=axis)  # type: ignore[no-any-return]
    shape = (out,) + (1,) * (x.ndim - 1 - axis)
    w0 = (np.ones_like(w1) - w1).reshape(shape)
    first = ops.mul(ops.gather(x, ops.constant(i0), axis=axis), ops.constant(w0))
    second = ops.mul(ops.gather(x, ops.constant(i1), axis=axis), ops.constant(w1.reshape(shape)))
    return ops.add(first, second)  # type: ignore[no-any-return]


def interpolate(input: AnyTensor, size: Size | None = None, scale_factor: Scale | None = None,
                mode: str = "nearest", align_corners: bool | None = None,
                recompute_scale_factor: bool | None = None, antialias: bool = False,
                where: str = "interpolate") -> AnyTensor:
    """``input[N, C, *spatial] -> [N, C, *resized]`` (1 to 3 spatial axes): ``size`` gives the output
    sizes, or ``scale_factor`` multiplies them (``floor(n * scale_factor)``); exactly one of them.
    ``mode``: ``"nearest"``, or ``"linear"`` (3-d input), ``"bilinear"`` (4-d), ``"trilinear"`` (5-d) with
    ``align_corners`` (default False)."""
    ops = ops_for(where, input)
    shape = shape_of(input)
    rank = input.ndim - 2
    if not 1 <= rank <= 3:
        raise ShapeError(f"{where}: expected an input [N, C, *spatial] with 1 to 3 spatial axes (3-d to 5-d), "
                         f"got shape {list(shape)}")
    if mode not in ("nearest",) + tuple(_LINEAR_RANK):
        raise ArgumentError(f"{where}: mode must be 'nearest', 'linear', 'bilinear' or 'trilinear', got {mode!r}")
    if mode != "nearest" and _LINEAR_RANK[mode] != rank:
        raise ShapeError(f"{where}: mode {mode!r} needs a {_LINEAR_RANK[mode] + 2}-d input, got shape {list(shape)}")
    if mode == "nearest" and align_corners is not None:
        raise ArgumentError(f"{where}: align_corners can only be set with the interpolating modes (linear, "
                            f"bilinear, trilinear), got align_corners={align_corners!r} with mode 'nearest'")
    if antialias:
        raise ArgumentError(f"{where}: antialias=True is not supported")
    if input.dtype.name not in ("float32", "float64"):
        raise ShapeError(f"{where}: expected a float tensor, got {input.dtype}")
    if (size is None) == (scale_factor is None):
        raise ArgumentError(f"{where}: give exactly one of size and scale_factor, got size={size!r} and "
                            f"scale_factor={scale_factor!r}")
    spatial = shape[2:]
    if not all(isinstance(n, (int, np.integer)) for n in spatial):
        raise ShapeError(f"{where}: the spatial axes need static sizes, got shape {list(shape)}")
    scales: tuple[float | None, ...]
    if size is not None:
        outs = _per_axis(size, rank, "size", where, int)
        scales = (None,) * rank
    else:
        factors = _per_axis(scale_factor, rank, "scale_factor", where, float)
        outs = tuple(int(math.floor(float(n) * s)) for n, s in zip(spatial, factors))
        scales = factors
        if any(o <= 0 for o in outs):
            raise ShapeError(f"{where}: scale_factor {scale_factor!r} gives the empty output size {list(outs)} "
                             f"for the spatial sizes {list(spatial)}")
        if recompute_scale_factor:
            scales = (None,) * rank
    out = input
    for k in range(rank):
        out = _resize_axis(ops, out, 2 + k, outs[k], scales[k], mode, bool(align_corners), where)
    return out


class Upsample(Module):
    """Resize ``x[N, C, *spatial]`` to ``size`` or by ``scale_factor`` (see :func:`interpolate`)."""

    def __init__(self, size: Size | None = None, scale_factor: Scale | None = None, mode: str = "nearest",
                 align_corners: bool | None = None, recompute_scale_factor: bool | None = None) -> None:
        super().__init__()
        if (size is None) == (scale_factor is None):
            raise ArgumentError(f"Upsample: give exactly one of size and scale_factor, got size={size!r} and "
                                f"scale_factor={scale_factor!r}")
        if mode not in ("nearest",) + tuple(_LINEAR_RANK):
            raise ArgumentError(f"Upsample: mode must be 'nearest', 'linear', 'bilinear' or 'trilinear', got "
                                f"{mode!r}")
        self.size = size
        if isinstance(scale_factor, (tuple, list)):
            self.scale_factor: Scale | None = tuple(float(s) for s in scale_factor)
        else:
            self.scale_factor = None if scale_factor is None else float(scale_factor)
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, x: AnyTensor) -> AnyTensor:
        """The resized tensor."""
        return interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                           self.recompute_scale_factor, where="Upsample")

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        info = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        return f"{info}, mode={self.mode!r}"
