"""3-d layers: ``MaxPool3d``, ``AvgPool3d``, ``AdaptiveAvgPool3d``, ``AdaptiveMaxPool3d``, ``BatchNorm3d``,
``InstanceNorm3d``, ``ConvTranspose3d`` and the functional forms ``max_pool3d``, ``avg_pool3d``,
``adaptive_avg_pool3d``, ``adaptive_max_pool3d``, ``conv_transpose3d``.

Inputs are ``x[*lead, C, D, H, W]`` (an unbatched ``[C, D, H, W]`` included). The pools take PyTorch's
``ceil_mode``, ``count_include_pad`` and ``divisor_override``: the plain case is the ``max_pool_nd`` /
``avg_pool_nd`` primitive; otherwise the input is padded explicitly (``-inf`` for the max, zeros for the
mean, with the extra windows ``ceil_mode`` adds at the far end) and the window sums are divided by a fixed
per-window count computed with numpy as PyTorch counts it, so every interpreter runs them and the
gradient is the primitives'. Dilation other than 1 and ``return_indices=True`` are refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar, TypeVarTuple, overload

import numpy as np

from tensorplay import prefix as _prefix_module
from tensorplay.errors import ArgumentError, ShapeError
from tensorplay.nn._util import IntOrTuple, check_window, numel, ops_for, shape_of
from tensorplay.nn.adaptive import OutputSize, _adaptive, _sizes
from tensorplay.nn.adaptive_max import _AdaptiveMaxPool, _adaptive_max
from tensorplay.nn.conv import _ConvTranspose, _Rank3, check_out
from tensorplay.nn.instance_norm import _InstanceNorm
from tensorplay.nn.module import Module
from tensorplay.nn.normalization import _BatchNorm
from tensorplay.prefix import int_tuple
from tensorplay.tensor import Tensor

prefix: Any = _prefix_module  # typed loosely: the layers check shapes at run time

InC = TypeVar("InC", bound=int)
OutC = TypeVar("OutC", bound=int)
D2 = TypeVar("D2", bound=int)
H2 = TypeVar("H2", bound=int)
W2 = TypeVar("W2", bound=int)
S = TypeVarTuple("S")
Lead = TypeVarTuple("Lead")
AnyTensor = Tensor[*tuple[Any, ...]]
Geometry = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]


# ---- geometry ----------------------------------------------------------------------------------

def pool_geometry(rank: int, kernel_size: IntOrTuple, stride: IntOrTuple | None, padding: IntOrTuple,
                  dilation: IntOrTuple, where: str) -> Geometry:
    """``(kernel, stride, padding)`` as ``rank`` ints each, checked as PyTorch checks them: kernel and
    stride positive (``stride`` ``None`` or ``()`` is the kernel), padding at most half the kernel,
    dilation 1 (other dilations are not supported). A :class:`ShapeError` naming ``where`` otherwise."""
    k = int_tuple(kernel_size, rank, "kernel_size", where)
    no_stride = stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0)
    s = k if no_stride else int_tuple(stride, rank, "stride", where)  # type: ignore[arg-type]
    p = int_tuple(padding, rank, "padding", where)
    check_window(k, kernel_size, "kernel_size", where, 1)
    check_window(s, stride, "stride", where, 1)
    check_window(p, padding, "padding", where, 0)
    if int_tuple(dilation, rank, "dilation", where) != (1,) * rank:
        raise ShapeError(f"{where}: dilation other than 1 is not supported, got dilation={dilation!r}")
    if any(pi > ki // 2 for pi, ki in zip(p, k)):
        raise ShapeError(f"{where}: padding should be at most half of the kernel size, got padding={list(p)} "
                         f"for kernel_size={list(k)}")
    return k, s, p


def _out_length(n: int, k: int, s: int, p: int, ceil_mode: bool, where: str, shape: Any) -> int:
    """PyTorch's pooled length of an axis of size ``n`` (with ``ceil_mode``, a last window must start
    inside the input or its left padding)."""
    span = n + 2 * p - k
    if span < 0:
        raise ShapeError(f"{where}: the kernel {k} is larger than the padded axis ({n} + 2 * {p}) of the input "
                         f"of shape {list(shape)}")
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _spatial(x: AnyTensor, rank: int, where: str) -> tuple[int, ...]:
    shape = shape_of(x)
    if x.ndim < rank + 1:
        raise ShapeError(f"{where}: expected an input [*lead, C, {', '.join('DHW'[3 - rank:])}] with at least "
                         f"{rank + 1} axes, got shape {list(shape)}")
    spatial = shape[x.ndim - rank:]
    if not all(isinstance(n, (int, np.integer)) for n in spatial):
        raise ShapeError(f"{where}: the pooled axes need static sizes, got shape {list(shape)}")
    return tuple(int(n) for n in spatial)


def _explicit_pad(ops: Any, x: AnyTensor, p: tuple[int, ...], extra: tuple[int, ...], value: float) -> AnyTensor:
    rank = len(p)
    pads = ((0, 0),) * (x.ndim - rank) + tuple((pi, pi + ei) for pi, ei in zip(p, extra))
    return ops.pad(x, pads=pads, value=value)  # type: ignore[no-any-return]


def _counts(n: int, k: int, s: int, p: int, out: int, include_pad: bool) -> np.ndarray[Any, Any]:
    """PyTorch's divisor of each of ``out`` windows of an axis: the window clipped to the padded axis
    (``include_pad``), or to the input itself."""
    start = np.arange(out) * s - p
    stop = np.minimum(start + k, n + p)
    if not include_pad:
        start, stop = np.maximum(start, 0), np.minimum(stop, n)
    return (stop - start).astype(np.float64)


# ---- pooling functions -------------------------------------------------------------------------

def max_pool_nd(input: AnyTensor, rank: int, kernel_size: IntOrTuple, stride: IntOrTuple | None,
                padding: IntOrTuple, dilation: IntOrTuple, ceil_mode: bool, return_indices: bool,
                where: str) -> AnyTensor:
    """The max over windows of the last ``rank`` axes of ``input[*lead, C, *spatial]``, with PyTorch's
    ``ceil_mode`` (padding is ``-inf``)."""
    ops = ops_for(where, input)
    if return_indices:
        raise ArgumentError(f"{where}: return_indices=True is not supported (only the pooled values)")
    k, s, p = pool_geometry(rank, kernel_size, stride, padding, dilation, where)
    sizes = _spatial(input, rank, where)
    outs = [_out_length(n, ki, si, pi, ceil_mode, where, input.shape) for n, ki, si, pi in zip(sizes, k, s, p)]
    extra = tuple(max((o - 1) * si + ki - (n + 2 * pi), 0) for o, n, ki, si, pi in zip(outs, sizes, k, s, p))
    if not any(extra):
        return prefix.max_pool(ops, input, k, s, p)  # type: ignore[no-any-return]
    padded = _explicit_pad(ops, input, p, extra, float("-inf"))
    return prefix.max_pool(ops, padded, k, s, (0,) * rank)  # type: ignore[no-any-return]


def avg_pool_nd(input: AnyTensor, rank: int, kernel_size: IntOrTuple, stride: IntOrTuple | None,
                padding: IntOrTuple, ceil_mode: bool, count_include_pad: bool, divisor_override: int | None,
                where: str) -> AnyTensor:
    """The mean over windows of the last ``rank`` axes of ``input[*lead, C, *spatial]`` with PyTorch's
    ``ceil_mode``, ``count_include_pad`` and ``divisor_override``."""
    ops = ops_for(where, input)
    k, s, p = pool_geometry(rank, kernel_size, stride, padding, 1, where)
    if divisor_override is not None and (isinstance(divisor_override, bool) or
                                         not isinstance(divisor_override, (int, np.integer)) or
                                         divisor_override <= 0):
        raise ArgumentError(f"{where}: divisor_override must be a positive int or None, got {divisor_override!r}")
    sizes = _spatial(input, rank, where)
    outs = [_out_length(n, ki, si, pi, ceil_mode, where, input.shape) for n, ki, si, pi in zip(sizes, k, s, p)]
    extra = tuple(max((o - 1) * si + ki - (n + 2 * pi), 0) for o, n, ki, si, pi in zip(outs, sizes, k, s, p))
    plain = not any(extra) and (count_include_pad or not any(p))
    if plain and divisor_override is None:
        return prefix.avg_pool(ops, input, k, s, p)  # type: ignore[no-any-return]
    padded = _explicit_pad(ops, input, p, extra, 0.0) if any(extra) or any(p) else input
    means = prefix.avg_pool(ops, padded, k, s, (0,) * rank)  # window sums / prod(k)
    if divisor_override is not None:
        scale: Any = float(numel(k)) / float(divisor_override)
    else:
        count = np.ones((), dtype=np.float64)
        for n, ki, si, pi, o in zip(sizes, k, s, p, outs):
            count = np.multiply.outer(count, _counts(n, ki, si, pi, o, count_include_pad))
        scale = ops.constant((float(numel(k)) / count).astype(input.dtype.name))
    return ops.mul(means, scale)  # type: ignore[no-any-return]


def max_pool3d(input: AnyTensor, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
               padding: IntOrTuple = 0, dilation: IntOrTuple = 1, ceil_mode: bool = False,
               return_indices: bool = False) -> AnyTensor:
    """Max over windows of the last three axes of ``input[*lead, C, D, H, W]`` -> ``[*lead, C, D', H', W']``
    (``stride`` defaults to the kernel; padding is ``-inf``, at most half the kernel)."""
    return max_pool_nd(input, 3, kernel_size, stride, padding, dilation, ceil_mode, return_indices, "max_pool3d")


def avg_pool3d(input: AnyTensor, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
               padding: IntOrTuple = 0, ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> AnyTensor:
    """Mean over windows of the last three axes of ``input[*lead, C, D, H, W]`` -> ``[*lead, C, D', H', W']``
    (zero padding counted in the divisor when ``count_include_pad``; ``divisor_override`` replaces it)."""
    return avg_pool_nd(input, 3, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                       "avg_pool3d")


def _check_adaptive_rank(input: AnyTensor, where: str) -> None:
    if input.ndim < 4:
        raise ShapeError(f"{where}: expected an input [*lead, C, D, H, W] with at least 4 axes, got shape "
                         f"{list(shape_of(input))}")


def adaptive_avg_pool3d(input: Tensor[*Lead, int, int, int], output_size: OutputSize) -> Tensor[*Lead, int, int, int]:
    """``input[*lead, C, D, H, W] -> [*lead, C, od, oh, ow]`` (``output_size`` an int, or three where ``None``
    keeps that size): the mean of each of PyTorch's adaptive windows (``floor(i n / o) <= j < ceil((i+1) n / o)``)."""
    ops_for("adaptive_avg_pool3d", input)
    _check_adaptive_rank(input, "adaptive_avg_pool3d")
    return _adaptive(input, output_size, 3, "adaptive_avg_pool3d")


def adaptive_max_pool3d(input: Tensor[*Lead, int, int, int], output_size: OutputSize,
                        return_indices: bool = False) -> Tensor[*Lead, int, int, int]:
    """``input[*lead, C, D, H, W] -> [*lead, C, od, oh, ow]``: the max of each of PyTorch's adaptive windows
    (``return_indices=True`` is not supported: an :class:`ArgumentError`)."""
    ops_for("adaptive_max_pool3d", input)
    _check_adaptive_rank(input, "adaptive_max_pool3d")
    return _adaptive_max(input, output_size, 3, return_indices, "adaptive_max_pool3d")


def conv_transpose3d(input: AnyTensor, weight: AnyTensor, bias: AnyTensor | None = None, stride: IntOrTuple = 1,
                     padding: IntOrTuple = 0, output_padding: IntOrTuple = 0, groups: int = 1,
                     dilation: IntOrTuple = 1) -> AnyTensor:
    """3-d transposed convolution of ``input[*lead, inC, D, H, W]`` with ``weight[inC, outC/groups, kd, kh, kw]``
    (PyTorch's argument order): each output size is ``(n-1)s - 2p + d(k-1) + output_padding + 1``."""
    where = "conv_transpose3d"
    if weight.ndim != 5:
        raise ShapeError(f"{where}: weight must have 5 axes [inC, outC/groups, kd, kh, kw], got shape "
                         f"{list(weight.shape)}")
    ops = ops_for(where, input, weight, bias)
    s, p = int_tuple(stride, 3, "stride", where), int_tuple(padding, 3, "padding", where)
    op, d = int_tuple(output_padding, 3, "output_padding", where), int_tuple(dilation, 3, "dilation", where)
    return prefix.conv_transpose(ops, weight, bias, input, s, p, op, d, groups)  # type: ignore[no-any-return]


# ---- modules -----------------------------------------------------------------------------------

class _Pool3d(Module):
    """What the 3-d pools share: PyTorch's arguments, kept as given for the repr, checked up front."""

    def __init__(self, kernel_size: IntOrTuple, stride: IntOrTuple | None, padding: IntOrTuple) -> None:
        super().__init__()
        pool_geometry(3, kernel_size, stride, padding, 1, type(self).__name__)
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding = padding

    def _pool(self, x: AnyTensor) -> AnyTensor:
        raise NotImplementedError

    @overload
    def forward(self, x: Tensor[*Lead, int, int, int]) -> Tensor[*Lead, int, int, int]: ...

    @overload
    def forward(self, x: Tensor[*Lead, int, int, int], out: tuple[D2, H2, W2]) -> Tensor[*Lead, D2, H2, W2]: ...

    def forward(self, x: Any, out: Any = None) -> Any:
        """Pool ``x[*lead, C, D, H, W]``; ``out=(D2, H2, W2)`` names (and checks) the output size."""
        y = self._pool(x)
        check_out(y, out, type(self).__name__)
        return y

    if TYPE_CHECKING:
        __call__ = forward


class MaxPool3d(_Pool3d):
    """Window max over the last three axes: ``x[*lead, C, D, H, W] -> [*lead, C, D', H', W']``
    (see :func:`max_pool3d`; the gradient goes to the first maximum of each window)."""

    def __init__(self, kernel_size: IntOrTuple, stride: IntOrTuple | None = None, padding: IntOrTuple = 0,
                 dilation: IntOrTuple = 1, return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__(kernel_size, stride, padding)
        where = type(self).__name__
        pool_geometry(3, kernel_size, stride, padding, dilation, where)
        if return_indices:
            raise ArgumentError(f"{where}: return_indices=True is not supported (only the pooled values)")
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def _pool(self, x: AnyTensor) -> AnyTensor:
        return max_pool_nd(x, 3, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                           self.return_indices, type(self).__name__)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool3d(_Pool3d):
    """Window mean over the last three axes: ``x[*lead, C, D, H, W] -> [*lead, C, D', H', W']``
    (see :func:`avg_pool3d`)."""

    def __init__(self, kernel_size: IntOrTuple, stride: IntOrTuple | None = None, padding: IntOrTuple = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True, divisor_override: int | None = None) -> None:
        super().__init__(kernel_size, stride, padding)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def _pool(self, x: AnyTensor) -> AnyTensor:
        return avg_pool_nd(x, 3, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                           self.count_include_pad, self.divisor_override, type(self).__name__)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool3d(Module):
    """Adaptive average pooling of the last three axes to ``output_size`` (see :func:`adaptive_avg_pool3d`)."""

    def __init__(self, output_size: OutputSize) -> None:
        super().__init__()
        _sizes(output_size, 3, "AdaptiveAvgPool3d")
        self.output_size = output_size

    def forward(self, x: Tensor[*Lead, int, int, int]) -> Tensor[*Lead, int, int, int]:
        """``x[*lead, C, D, H, W] -> [*lead, C, od, oh, ow]``."""
        ops_for("AdaptiveAvgPool3d", x)
        _check_adaptive_rank(x, "AdaptiveAvgPool3d")
        return _adaptive(x, self.output_size, 3, "AdaptiveAvgPool3d")

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool3d(_AdaptiveMaxPool):
    """Adaptive max pooling of the last three axes to ``output_size`` (see :func:`adaptive_max_pool3d`)."""

    rank = 3

    def forward(self, x: Tensor[*Lead, int, int, int]) -> Tensor[*Lead, int, int, int]:
        """``x[*lead, C, D, H, W] -> [*lead, C, od, oh, ow]``."""
        ops_for("AdaptiveMaxPool3d", x)
        _check_adaptive_rank(x, "AdaptiveMaxPool3d")
        return _adaptive_max(x, self.output_size, 3, self.return_indices, "AdaptiveMaxPool3d")

    if TYPE_CHECKING:
        __call__ = forward


class BatchNorm3d(_BatchNorm):
    """Batch normalisation of ``x[*lead, C, D, H, W]`` over every axis but ``C`` (statistics over the
    leading and spatial axes); an unbatched ``[C, D, H, W]`` input is a batch of one. Training uses the
    batch statistics and updates the running ones (``momentum``, unbiased running variance); evaluation
    uses the running ones."""

    def _check_input(self, x: AnyTensor) -> None:
        if x.ndim < 4:
            raise ShapeError(f"BatchNorm3d: expected an input [*lead, C, D, H, W] with at least 4 axes, got shape "
                             f"{list(shape_of(x))}")

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """The normalised tensor, same shape as ``x``."""
        if x.ndim == 5:
            return self._normalize(x)
        self._check_input(x)
        ops = ops_for("BatchNorm3d", x)
        shape = shape_of(x)
        flat = ops.reshape(x, shape=(numel(shape[:-4]),) + shape[-4:])
        return ops.reshape(self._normalize(flat), shape=shape)  # type: ignore[no-any-return]

    if TYPE_CHECKING:
        __call__ = forward


class InstanceNorm3d(_InstanceNorm):
    """Instance normalisation of ``[N, C, D, H, W]`` (or ``[C, D, H, W]``) over ``D, H, W``; ``affine=False``
    and ``track_running_stats=False`` by default, as PyTorch."""

    rank = 3


class ConvTranspose3d(_ConvTranspose[InC, OutC], _Rank3[InC, OutC]):
    """3-d transposed convolution: ``x[*lead, InC, D, H, W] -> [*lead, OutC, D', H', W']`` with
    ``D' = (D-1)s - 2p + d(k-1) + output_padding + 1`` (weight ``[InC, OutC/groups, kd, kh, kw]``)."""


__all__ = ["max_pool3d", "avg_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d", "conv_transpose3d",
           "MaxPool3d", "AvgPool3d", "AdaptiveAvgPool3d", "AdaptiveMaxPool3d", "BatchNorm3d", "InstanceNorm3d",
           "ConvTranspose3d"]
