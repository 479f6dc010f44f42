"""Pooling layers over the trailing spatial axes of ``x[*lead, *spatial]`` (any leading shape)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar, TypeVarTuple, overload

from tensorplay import prefix as _prefix_module
from tensorplay.errors import ShapeError
from tensorplay.nn._util import IntOrTuple, check_window, ops_for
from tensorplay.prefix import int_tuple
from tensorplay.nn.conv import check_out
from tensorplay.nn.module import Module
from tensorplay.tensor import Tensor

prefix: Any = _prefix_module  # typed loosely: the layers check shapes at run time

L2 = TypeVar("L2", bound=int)
H2 = TypeVar("H2", bound=int)
W2 = TypeVar("W2", bound=int)
Lead = TypeVarTuple("Lead")
AnyTensor = Tensor[*tuple[Any, ...]]


class _PoolNd(Module):
    rank = 2
    prim = "max_pool"

    def __init__(self, kernel_size: IntOrTuple, stride: IntOrTuple | None = None, padding: IntOrTuple = 0,
                 dilation: IntOrTuple = 1, ceil_mode: bool = False, count_include_pad: bool = True) -> None:
        super().__init__()
        where = type(self).__name__
        self._given = (kernel_size, kernel_size if stride is None else stride, padding)
        self.kernel_size = int_tuple(kernel_size, self.rank, "kernel_size", where)
        self.stride = self.kernel_size if stride is None else int_tuple(stride, self.rank, "stride", where)
        self.padding = int_tuple(padding, self.rank, "padding", where)
        check_window(self.kernel_size, kernel_size, "kernel_size", where, 1)
        check_window(self.stride, stride, "stride", where, 1)
        check_window(self.padding, padding, "padding", where, 0)
        if int_tuple(dilation, self.rank, "dilation", where) != (1,) * self.rank:
            raise ShapeError(f"{where}: dilation other than 1 is not supported, got {dilation}")
        if ceil_mode:
            raise ShapeError(f"{where}: ceil_mode=True is not supported")
        if not count_include_pad:
            raise ShapeError(f"{where}: count_include_pad=False is not supported (padding counts as zeros)")
        if any(p > k // 2 for p, k in zip(self.padding, self.kernel_size)):
            raise ShapeError(f"{where}: padding {list(self.padding)} should be at most half of the kernel size "
                             f"{list(self.kernel_size)}")

    def _pool(self, x: AnyTensor, out: Sequence[int] | None) -> AnyTensor:
        ops = ops_for(type(self).__name__, x)
        if self.prim == "max_pool":
            y = prefix.max_pool(ops, x, self.kernel_size, self.stride, self.padding)
        else:
            y = prefix.avg_pool(ops, x, self.kernel_size, self.stride, self.padding)
        check_out(y, out, type(self).__name__)
        return y  # type: ignore[no-any-return]

    def extra_repr(self) -> str:
        def show(v: Any) -> str:
            return str(tuple(v)) if isinstance(v, (list, tuple)) else str(v)
        k, s, p = (show(v) for v in self._given)
        if self.prim == "max_pool":
            return f"kernel_size={k}, stride={s}, padding={p}, dilation=1, ceil_mode=False"
        return f"kernel_size={k}, stride={s}, padding={p}"


class _Pool1d(_PoolNd):
    """The typed ``forward`` of the 1-d pools."""

    rank = 1

    @overload
    def forward(self, x: Tensor[*Lead, int]) -> Tensor[*Lead, int]: ...

    @overload
    def forward(self, x: Tensor[*Lead, int], out: tuple[L2]) -> Tensor[*Lead, L2]: ...

    def forward(self, x: Any, out: Any = None) -> Any:
        """Pool; ``out=(L2,)`` names (and checks) the output length."""
        return self._pool(x, out)

    if TYPE_CHECKING:
        __call__ = forward


class _Pool2d(_PoolNd):
    """The typed ``forward`` of the 2-d pools."""

    rank = 2

    @overload
    def forward(self, x: Tensor[*Lead, int, int]) -> Tensor[*Lead, int, int]: ...

    @overload
    def forward(self, x: Tensor[*Lead, int, int], out: tuple[H2, W2]) -> Tensor[*Lead, H2, W2]: ...

    def forward(self, x: Any, out: Any = None) -> Any:
        """Pool; ``out=(H2, W2)`` names (and checks) the output size."""
        return self._pool(x, out)

    if TYPE_CHECKING:
        __call__ = forward


class _AvgPool(_PoolNd):
    """The constructor of the average pools (PyTorch's, without ``dilation``)."""

    prim = "avg_pool"

    def __init__(self, kernel_size: IntOrTuple, stride: IntOrTuple | None = None, padding: IntOrTuple = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True) -> None:
        super().__init__(kernel_size, stride, padding, 1, ceil_mode, count_include_pad)


class MaxPool1d(_Pool1d):
    """Window max over the last axis: ``x[*lead, L] -> [*lead, L']`` (gradient to the first maximum)."""

    prim = "max_pool"


class MaxPool2d(_Pool2d):
    """Window max over the last two axes: ``x[*lead, H, W] -> [*lead, H', W']``."""

    prim = "max_pool"


class AvgPool1d(_AvgPool, _Pool1d):
    """Window mean over the last axis (padding counts as zeros)."""


class AvgPool2d(_AvgPool, _Pool2d):
    """Window mean over the last two axes (padding counts as zeros)."""
