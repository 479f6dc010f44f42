"""Activation layers: ``ReLU``, ``GELU``, ``Tanh``, ``Sigmoid``, ``SiLU``, ``LeakyReLU``, ``Softmax``,
``LogSoftmax``. Each keeps the shape of its input."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVarTuple

from tensorplay.nn import functional as F
from tensorplay.nn.module import Module
from tensorplay.tensor import Tensor

S = TypeVarTuple("S")


class ReLU(Module):
    """``max(x, 0)``."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """``max(x, 0)``."""
        return F.relu(x)

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class GELU(Module):
    """Gaussian error linear unit (``approximate="none"`` erf form or ``"tanh"``)."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """GELU of ``x``."""
        return F.gelu(x, self.approximate)

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Tanh(Module):
    """Hyperbolic tangent."""

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """``tanh(x)``."""
        return F.tanh(x)

    if TYPE_CHECKING:
        __call__ = forward


class Sigmoid(Module):
    """Logistic sigmoid."""

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """``sigmoid(x)``."""
        return F.sigmoid(x)

    if TYPE_CHECKING:
        __call__ = forward


class SiLU(Module):
    """``x * sigmoid(x)``."""

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """``x * sigmoid(x)``."""
        return F.silu(x)

    if TYPE_CHECKING:
        __call__ = forward


class LeakyReLU(Module):
    """``x`` where positive, else ``negative_slope * x``."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """Leaky ReLU of ``x``."""
        return F.leaky_relu(x, self.negative_slope)

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class Softmax(Module):
    """Softmax along ``dim``."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """Softmax of ``x`` along ``dim``."""
        return F.softmax(x, self.dim)

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """Log-softmax along ``dim``."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """Log-softmax of ``x`` along ``dim``."""
        return F.log_softmax(x, self.dim)

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return f"dim={self.dim}"
