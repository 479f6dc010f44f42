"""Convolution layers: ``Conv1d``, ``Conv2d``, ``Conv3d``, ``ConvTranspose1d``, ``ConvTranspose2d``.

Weights follow PyTorch's layouts (``[outC, inC/groups, *k]``; transposed
``[inC, outC/groups, *k]``) and initialisation. Inputs are ``x[*lead, C, *spatial]``
with any leading shape, including none (an unbatched sample).

Spatial output sizes are not computed by the type checker: pass ``out=(H2, W2)``
to name them; they are checked at run time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar, TypeVarTuple, overload

from tensorplay import prefix as _prefix_module
from tensorplay.errors import ShapeError
from tensorplay.nn import init
from tensorplay.nn._util import IntOrTuple, check_window, layer_size, ops_for
from tensorplay.prefix import int_tuple
from tensorplay.nn.linear import empty_parameter
from tensorplay.nn.module import Module
from tensorplay.tensor import Tensor

prefix: Any = _prefix_module  # typed loosely: the layers check shapes at run time

InC = TypeVar("InC", bound=int)
OutC = TypeVar("OutC", bound=int)
L2 = TypeVar("L2", bound=int)
H2 = TypeVar("H2", bound=int)
W2 = TypeVar("W2", bound=int)
D2 = TypeVar("D2", bound=int)
Lead = TypeVarTuple("Lead")
AnyTensor = Tensor[*tuple[Any, ...]]


def check_out(y: AnyTensor, out: Sequence[int] | None, where: str) -> None:
    """Check the spatial output sizes the caller named (``out=``) against the computed ones."""
    if out is None:
        return
    expected = tuple(out)
    got = tuple(y.shape)[y.ndim - len(expected):]
    if got != expected:
        raise ShapeError(f"{where}: the caller declared spatial output size out={list(expected)}, but the layer "
                         f"produced {list(got)} (output shape {list(y.shape)})")


class _ConvNd(Module):
    rank = 2
    transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size: IntOrTuple, stride: IntOrTuple = 1,
                 padding: IntOrTuple | str = 0, dilation: IntOrTuple = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", dtype: Any = None, output_padding: IntOrTuple = 0) -> None:
        super().__init__()
        where = type(self).__name__
        rank = self.rank
        layer_size(in_channels, "in_channels", where)
        layer_size(out_channels, "out_channels", where)
        layer_size(groups, "groups", where, positive=True)
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ShapeError(f"{where}: in_channels ({in_channels}) and out_channels ({out_channels}) must be "
                             f"divisible by groups ({groups})")
        if padding_mode != "zeros":
            raise ShapeError(f"{where}: only padding_mode='zeros' is supported, got {padding_mode!r}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = int_tuple(kernel_size, rank, "kernel_size", where)
        self.stride = int_tuple(stride, rank, "stride", where)
        self.dilation = int_tuple(dilation, rank, "dilation", where)
        self.groups = groups
        self.padding_mode = padding_mode
        self.output_padding = int_tuple(output_padding, rank, "output_padding", where)
        check_window(self.kernel_size, kernel_size, "kernel_size", where, 1)
        check_window(self.stride, stride, "stride", where, 1)
        check_window(self.dilation, dilation, "dilation", where, 1)
        check_window(self.output_padding, output_padding, "output_padding", where, 0)
        for axis, (op, s, d) in enumerate(zip(self.output_padding, self.stride, self.dilation)):
            if op >= max(s, d):
                raise ShapeError(f"{where}: output_padding must be smaller than stride or dilation on every "
                                 f"spatial axis, got output_padding={output_padding!r} with stride={stride!r}, "
                                 f"dilation={dilation!r} (axis {axis})")
        self.padding: tuple[int, ...] | str
        if isinstance(padding, str):
            if self.transposed or padding not in ("same", "valid"):
                raise ShapeError(f"{where}: padding must be an int or a tuple{'' if self.transposed else ', same or valid'}, "
                                 f"got {padding!r}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ShapeError(f"{where}: padding='same' is not supported for strided convolutions "
                                 f"(stride {list(self.stride)})")
            self.padding = padding
        else:
            self.padding = int_tuple(padding, rank, "padding", where)
            check_window(self.padding, padding, "padding", where, 0)
        if self.transposed:
            shape = (in_channels, out_channels // groups) + self.kernel_size
        else:
            shape = (out_channels, in_channels // groups) + self.kernel_size
        self.weight = empty_parameter(shape, dtype)
        if bias:
            self.bias = empty_parameter((out_channels,), dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's default initialisation (Kaiming uniform ``a=sqrt(5)``; bias in ``+-1/sqrt(fan_in)``)."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            init.fan_in_uniform_(self.bias, self.weight)

    def _conv(self, x: AnyTensor, out: Sequence[int] | None) -> AnyTensor:
        w = self.weight
        b = self.bias
        ops = ops_for(type(self).__name__, x, w, b)
        if self.transposed:
            y = prefix.conv_transpose(ops, w, b, x, self.stride, self.padding,
                                      self.output_padding, self.dilation, self.groups)
        else:
            y = ops.conv(w, b, x, self.stride, self.padding, self.dilation, self.groups)
        check_out(y, out, type(self).__name__)
        return y  # type: ignore[no-any-return]

    def extra_repr(self) -> str:
        rank = self.rank
        parts = [f"{self.in_channels}, {self.out_channels}", f"kernel_size={self.kernel_size}",
                 f"stride={self.stride}"]
        if self.padding != (0,) * rank:
            parts.append(f"padding={self.padding!r}" if isinstance(self.padding, str) else f"padding={self.padding}")
        if self.dilation != (1,) * rank:
            parts.append(f"dilation={self.dilation}")
        if self.output_padding != (0,) * rank:
            parts.append(f"output_padding={self.output_padding}")
        if self.groups != 1:
            parts.append(f"groups={self.groups}")
        if self.bias is None:
            parts.append("bias=False")
        return ", ".join(parts)


class _Conv(_ConvNd, Generic[InC, OutC]):
    """The constructor of ``Conv1d``/``Conv2d``/``Conv3d`` (PyTorch's argument order)."""

    def __init__(self, in_channels: InC, out_channels: OutC, kernel_size: IntOrTuple, stride: IntOrTuple = 1,
                 padding: IntOrTuple | str = 0, dilation: IntOrTuple = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", dtype: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, dtype)


class _ConvTranspose(_ConvNd, Generic[InC, OutC]):
    """The constructor of ``ConvTranspose1d``/``ConvTranspose2d`` (PyTorch's argument order)."""

    transposed = True

    def __init__(self, in_channels: InC, out_channels: OutC, kernel_size: IntOrTuple, stride: IntOrTuple = 1,
                 padding: IntOrTuple = 0, output_padding: IntOrTuple = 0, groups: int = 1, bias: bool = True,
                 dilation: IntOrTuple = 1, padding_mode: str = "zeros", dtype: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, dtype, output_padding)


class _Rank1(_ConvNd, Generic[InC, OutC]):
    """The typed ``forward`` of the 1-d layers."""

    rank = 1

    @overload
    def forward(self, x: Tensor[*Lead, InC, int]) -> Tensor[*Lead, OutC, int]: ...

    @overload
    def forward(self, x: Tensor[*Lead, InC, int], out: tuple[L2]) -> Tensor[*Lead, OutC, L2]: ...

    def forward(self, x: Any, out: Any = None) -> Any:
        """Convolve (transposed, for ``ConvTranspose1d``); ``out=(L2,)`` names (and checks) the output length."""
        return self._conv(x, out)

    if TYPE_CHECKING:
        __call__ = forward


class _Rank2(_ConvNd, Generic[InC, OutC]):
    """The typed ``forward`` of the 2-d layers."""

    rank = 2

    @overload
    def forward(self, x: Tensor[*Lead, InC, int, int]) -> Tensor[*Lead, OutC, int, int]: ...

    @overload
    def forward(self, x: Tensor[*Lead, InC, int, int], out: tuple[H2, W2]) -> Tensor[*Lead, OutC, H2, W2]: ...

    def forward(self, x: Any, out: Any = None) -> Any:
        """Convolve (transposed, for ``ConvTranspose2d``); ``out=(H2, W2)`` names (and checks) the output size."""
        return self._conv(x, out)

    if TYPE_CHECKING:
        __call__ = forward


class _Rank3(_ConvNd, Generic[InC, OutC]):
    """The typed ``forward`` of the 3-d layers."""

    rank = 3

    @overload
    def forward(self, x: Tensor[*Lead, InC, int, int, int]) -> Tensor[*Lead, OutC, int, int, int]: ...

    @overload
    def forward(self, x: Tensor[*Lead, InC, int, int, int],
                out: tuple[D2, H2, W2]) -> Tensor[*Lead, OutC, D2, H2, W2]: ...

    def forward(self, x: Any, out: Any = None) -> Any:
        """Convolve; ``out=(D2, H2, W2)`` names (and checks) the output size."""
        return self._conv(x, out)

    if TYPE_CHECKING:
        __call__ = forward


class Conv1d(_Conv[InC, OutC], _Rank1[InC, OutC]):
    """1-d convolution: ``x[*lead, InC, L] -> [*lead, OutC, L']``."""


class Conv2d(_Conv[InC, OutC], _Rank2[InC, OutC]):
    """2-d convolution: ``x[*lead, InC, H, W] -> [*lead, OutC, H', W']``."""


class Conv3d(_Conv[InC, OutC], _Rank3[InC, OutC]):
    """3-d convolution: ``x[*lead, InC, D, H, W] -> [*lead, OutC, D', H', W']``."""


class ConvTranspose1d(_ConvTranspose[InC, OutC], _Rank1[InC, OutC]):
    """1-d transposed convolution: ``x[*lead, InC, L] -> [*lead, OutC, (L-1)s - 2p + d(k-1) + op + 1]``."""


class ConvTranspose2d(_ConvTranspose[InC, OutC], _Rank2[InC, OutC]):
    """2-d transposed convolution: ``x[*lead, InC, H, W] -> [*lead, OutC, H', W']``."""
