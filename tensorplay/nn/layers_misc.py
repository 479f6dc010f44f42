"""Smaller layers with PyTorch's names: ``Softmin``, ``Softmax2d``, ``LPPool1d/2d/3d``, ``LocalResponseNorm``,
``ChannelShuffle``, ``CircularPad1d/2d/3d``, ``UpsamplingNearest2d``, ``UpsamplingBilinear2d`` and the
functional forms ``softmin``, ``lp_pool1d/2d/3d``, ``local_response_norm``, ``channel_shuffle``.

Each is composed from the ``Ops`` primitives (pools, pads, reshapes), so it runs under every interpreter
and its gradient is theirs.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, TypeVarTuple

import numpy as np

from tensorplay import derived
from tensorplay import prefix as _prefix_module
from tensorplay.errors import ArgumentError, DTypeError, ShapeError
from tensorplay.nn._util import IntOrTuple, numel, ops_for, shape_of
from tensorplay.nn.layers_3d import avg_pool_nd, max_pool_nd, pool_geometry
from tensorplay.nn.module import Module
from tensorplay.nn.padding_layers import ZeroPad1d
from tensorplay.nn.upsampling import Scale, Size, Upsample, interpolate
from tensorplay.tensor import Tensor

prefix: Any = _prefix_module  # typed loosely: the layers check shapes at run time

S = TypeVarTuple("S")
AnyTensor = Tensor[*tuple[Any, ...]]


# ---- softmin, softmax2d --------------------------------------------------------------------------

def softmin(input: Tensor[*S], dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor[*S]:
    """``softmax(-input)`` along ``dim`` (pass it: ``None`` is an :class:`ArgumentError`); ``dtype`` casts
    the input first, as PyTorch."""
    ops = ops_for("softmin", input)
    if dim is None:
        raise ArgumentError(f"softmin: pass dim= explicitly (the axis to normalise over), got dim=None for an input "
                            f"of shape {list(shape_of(input))}")
    x: AnyTensor = input
    if dtype is not None:
        from tensorplay import dtypes
        x = ops.cast(x, dtype=dtypes.to_dtype(dtype).name)
    if not x.dtype.is_floating_point:
        raise DTypeError(f"softmin: input must be a float tensor, got {x.dtype.name} (pass dtype= to cast it)")
    axis = dim if x.ndim == 0 else derived.normalize_axis(dim, x.ndim, "softmin")
    return derived.softmax(ops, "softmax", ops.neg(x), axis)  # type: ignore[no-any-return]


class Softmin(Module):
    """Softmin along ``dim``: ``softmax(-x)``."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """Softmin of ``x`` along ``dim``."""
        return softmin(x, self.dim)

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax2d(Module):
    """Softmax over the channels of ``x[N, C, H, W]`` or ``[C, H, W]`` (axis -3) at each position."""

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """Softmax of ``x`` along axis -3."""
        ops = ops_for("Softmax2d", x)
        if x.ndim not in (3, 4):
            raise ShapeError(f"Softmax2d: expected a 3-d [C, H, W] or 4-d [N, C, H, W] input, got shape "
                             f"{list(shape_of(x))}")
        return derived.softmax(ops, "softmax", x, x.ndim - 3)  # type: ignore[no-any-return]

    if TYPE_CHECKING:
        __call__ = forward


# ---- power-average pooling -----------------------------------------------------------------------

def lp_pool_nd(input: AnyTensor, rank: int, norm_type: float, kernel_size: IntOrTuple, stride: IntOrTuple | None,
               ceil_mode: bool, where: str) -> AnyTensor:
    """``(sum over each window of x ** norm_type) ** (1 / norm_type)`` over the last ``rank`` axes, as
    PyTorch computes it: the windows' means times the kernel size (so a window ``ceil_mode`` cuts short is
    scaled up as PyTorch does); ``norm_type`` ``+-inf`` is the max (min) of ``|x|``. Where a window's sum
    is 0 the value and the gradient are 0."""
    ops = ops_for(where, input)
    if isinstance(norm_type, bool) or not isinstance(norm_type, (int, float, np.integer, np.floating)) \
            or norm_type == 0 or math.isnan(norm_type):
        raise ArgumentError(f"{where}: norm_type must be a non-zero number, got {norm_type!r}")
    if not input.dtype.is_floating_point:
        raise DTypeError(f"{where}: input must be a float tensor, got {input.dtype.name}")
    k, _, _ = pool_geometry(rank, kernel_size, stride, 0, 1, where)
    if math.isinf(norm_type):
        sign = 1.0 if norm_type > 0 else -1.0
        magnitude = ops.mul(ops.abs(input), sign)
        pooled = max_pool_nd(magnitude, rank, k, stride, 0, 1, ceil_mode, False, where)
        return pooled if sign > 0 else ops.neg(pooled)
    means = avg_pool_nd(ops.pow(input, float(norm_type)), rank, k, stride, 0, ceil_mode, True, None, where)
    total = ops.mul(means, float(numel(k)))
    zero = ops.eq(total, 0.0)
    root = ops.pow(ops.where(zero, 1.0, total), 1.0 / float(norm_type))
    return ops.where(zero, 0.0, root)  # type: ignore[no-any-return]


def lp_pool1d(input: AnyTensor, norm_type: float, kernel_size: int, stride: IntOrTuple | None = None,
              ceil_mode: bool = False) -> AnyTensor:
    """Power-average pooling of the last axis of ``input[*lead, C, L]`` (see :func:`lp_pool_nd`)."""
    return lp_pool_nd(input, 1, norm_type, kernel_size, stride, ceil_mode, "lp_pool1d")


def lp_pool2d(input: AnyTensor, norm_type: float, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
              ceil_mode: bool = False) -> AnyTensor:
    """Power-average pooling of the last two axes of ``input[*lead, C, H, W]`` (see :func:`lp_pool_nd`)."""
    return lp_pool_nd(input, 2, norm_type, kernel_size, stride, ceil_mode, "lp_pool2d")


def lp_pool3d(input: AnyTensor, norm_type: float, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
              ceil_mode: bool = False) -> AnyTensor:
    """Power-average pooling of the last three axes of ``input[*lead, C, D, H, W]`` (see :func:`lp_pool_nd`)."""
    return lp_pool_nd(input, 3, norm_type, kernel_size, stride, ceil_mode, "lp_pool3d")


class _LPPool(Module):
    rank = 1

    def __init__(self, norm_type: float, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        pool_geometry(self.rank, kernel_size, stride, 0, 1, type(self).__name__)
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def forward(self, x: AnyTensor) -> AnyTensor:
        """The pooled tensor ``[*lead, C, *pooled]``."""
        return lp_pool_nd(x, self.rank, self.norm_type, self.kernel_size, self.stride, self.ceil_mode,
                          type(self).__name__)

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPool):
    """Power-average pooling of ``x[*lead, C, L]`` (see :func:`lp_pool1d`)."""

    rank = 1


class LPPool2d(_LPPool):
    """Power-average pooling of ``x[*lead, C, H, W]`` (see :func:`lp_pool2d`)."""

    rank = 2


class LPPool3d(_LPPool):
    """Power-average pooling of ``x[*lead, C, D, H, W]`` (see :func:`lp_pool3d`)."""

    rank = 3


# ---- local response normalisation, channel shuffle ------------------------------------------------

def local_response_norm(input: AnyTensor, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0) -> AnyTensor:
    """``input[N, C, *spatial] / (k + alpha * mean(x^2 over size neighbouring channels)) ** beta`` (the
    window of channel ``c`` is ``c - size//2 .. c + (size-1)//2``, zeros beyond the edges counted in the
    mean), as PyTorch."""
    where = "local_response_norm"
    ops = ops_for(where, input)
    if input.ndim < 3:
        raise ShapeError(f"{where}: expected an input [N, C, *spatial] with at least 3 axes, got shape "
                         f"{list(shape_of(input))}")
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size <= 0:
        raise ArgumentError(f"{where}: size must be a positive int, got {size!r}")
    if not input.dtype.is_floating_point:
        raise DTypeError(f"{where}: input must be a float tensor, got {input.dtype.name}")
    if numel(shape_of(input)) == 0:
        return input
    size = int(size)
    perm = (0,) + tuple(range(2, input.ndim)) + (1,)  # channels last
    back = (0, input.ndim - 1) + tuple(range(1, input.ndim - 1))
    square = ops.permute(ops.mul(input, input), perm=perm)
    pads = ((0, 0),) * (input.ndim - 1) + ((size // 2, (size - 1) // 2),)
    window = prefix.avg_pool(ops, ops.pad(square, pads=pads, value=0.0), (size,), (1,), (0,))
    div = ops.pow(ops.add(ops.mul(ops.permute(window, perm=back), float(alpha)), float(k)), float(beta))
    return ops.div(input, div)  # type: ignore[no-any-return]


class LocalResponseNorm(Module):
    """Local response normalisation across channels (see :func:`local_response_norm`)."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> None:
        super().__init__()
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size <= 0:
            raise ArgumentError(f"LocalResponseNorm: size must be a positive int, got {size!r}")
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """The normalised tensor, same shape as ``x``."""
        return local_response_norm(x, self.size, self.alpha, self.beta, self.k)

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


def _check_groups(groups: Any, where: str) -> int:
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)) or groups <= 0:
        raise ArgumentError(f"{where}: groups must be a positive int, got {groups!r}")
    return int(groups)


def channel_shuffle(input: Tensor[*S], groups: int) -> Tensor[*S]:
    """``input[N, C, *rest]`` with its channels read as ``[groups, C/groups]`` and transposed: channel
    ``g * (C/groups) + j`` moves to ``j * groups + g`` (ShuffleNet's shuffle). Needs more than 2 axes and
    ``C`` divisible by ``groups``, as PyTorch."""
    where = "channel_shuffle"
    ops = ops_for(where, input)
    g = _check_groups(groups, where)
    shape = shape_of(input)
    if input.ndim <= 2:
        raise ShapeError(f"{where}: expected an input [N, C, *rest] with more than 2 axes, got shape {list(shape)}")
    c = shape[1]
    if c % g:
        raise ShapeError(f"{where}: the number of channels ({c}) must be divisible by groups ({g}), input shape "
                         f"{list(shape)}")
    split = ops.reshape(input, shape=(shape[0], g, c // g) + tuple(shape[2:]))
    swapped = ops.permute(split, perm=(0, 2, 1) + tuple(range(3, input.ndim + 1)))
    return ops.reshape(swapped, shape=shape)  # type: ignore[no-any-return]


class ChannelShuffle(Module):
    """Shuffle the channels of ``x[N, C, *rest]`` in ``groups`` (see :func:`channel_shuffle`)."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = _check_groups(groups, "ChannelShuffle")

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """The shuffled tensor, same shape as ``x``."""
        return channel_shuffle(x, self.groups)

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return f"groups={self.groups}"


# ---- circular padding, fixed-mode upsampling ----------------------------------------------------------

class CircularPad1d(ZeroPad1d):
    """Wrap the last axis of ``[C, W]`` / ``[N, C, W]`` around (each amount at most its size)."""

    mode = "circular"


class CircularPad2d(CircularPad1d):
    """Wrap the last two axes of ``[C, H, W]`` / ``[N, C, H, W]`` around."""

    rank = 2


class CircularPad3d(CircularPad1d):
    """Wrap the last three axes of ``[C, D, H, W]`` / ``[N, C, D, H, W]`` around."""

    rank = 3


class UpsamplingNearest2d(Upsample):
    """Nearest-neighbour upsampling of ``x[N, C, H, W]`` to ``size`` or by ``scale_factor``."""

    def __init__(self, size: Size | None = None, scale_factor: Scale | None = None) -> None:
        super().__init__(size, scale_factor, mode="nearest")

    def forward(self, x: AnyTensor) -> AnyTensor:
        """The resized tensor."""
        return interpolate(x, self.size, self.scale_factor, self.mode, None, where="UpsamplingNearest2d")


class UpsamplingBilinear2d(Upsample):
    """Bilinear upsampling of ``x[N, C, H, W]`` with ``align_corners=True`` (corner pixels stay put), to
    ``size`` or by ``scale_factor``, as PyTorch."""

    def __init__(self, size: Size | None = None, scale_factor: Scale | None = None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)

    def forward(self, x: AnyTensor) -> AnyTensor:
        """The resized tensor."""
        return interpolate(x, self.size, self.scale_factor, self.mode, True, where="UpsamplingBilinear2d")


__all__ = ["softmin", "lp_pool1d", "lp_pool2d", "lp_pool3d", "local_response_norm", "channel_shuffle", "Softmin",
           "Softmax2d", "LPPool1d", "LPPool2d", "LPPool3d", "LocalResponseNorm", "ChannelShuffle", "CircularPad1d",
           "CircularPad2d", "CircularPad3d", "UpsamplingNearest2d", "UpsamplingBilinear2d"]
