"""Activation layers: ``ReLU``, ``GELU``, ``Tanh``, ``Sigmoid``, ``SiLU``, ``LeakyReLU``, ``Softmax``,
``LogSoftmax``, ``Softplus``, ``ELU``, ``SELU``, ``CELU``, ``ReLU6``, ``Hardtanh``, ``Hardsigmoid``, ``Hardswish``,
``Mish``, ``LogSigmoid``, ``Softsign``, ``Tanhshrink``, ``Softshrink``, ``Hardshrink``, ``Threshold``, ``PReLU``
and ``GLU``. Each keeps the shape of its input, except ``GLU``, which halves ``dim``. ``inplace=`` is accepted
and ignored, as in ``ReLU``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVarTuple

from tensorplay.nn import activation_functions as A
from tensorplay.nn import functional as F
from tensorplay.errors import ArgumentError
from tensorplay.nn import init as nn_init
from tensorplay.nn._util import layer_size
from tensorplay.nn.linear import empty_parameter
from tensorplay.nn.module import Module
from tensorplay.tensor import Tensor

S = TypeVarTuple("S")
AnyTensor = Tensor[*tuple[Any, ...]]


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


def _inplace(inplace: bool, first: bool = False) -> str:
    """The ``inplace`` part of an ``extra_repr`` (PyTorch's spelling)."""
    return ("inplace=True" if first else ", inplace=True") if inplace else ""


class Softplus(Module):
    """``log(1 + exp(beta * x)) / beta``, linear where ``beta * x > threshold``."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """Softplus of ``x``."""
        return A.softplus(x, self.beta, self.threshold)

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class ELU(Module):
    """``x`` where positive, else ``alpha * (exp(x) - 1)``."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """ELU of ``x``."""
        return A.elu(x, self.alpha)

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + _inplace(self.inplace)


class CELU(ELU):
    """``x`` where positive, else ``alpha * (exp(x / alpha) - 1)``."""

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """CELU of ``x``."""
        return A.celu(x, self.alpha)

    if TYPE_CHECKING:
        __call__ = forward


class _InplaceOnly(Module):
    """An activation with no option but the ignored ``inplace``."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace


class SELU(_InplaceOnly):
    """``scale * elu(x, alpha)`` with the self-normalising constants."""

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """SELU of ``x``."""
        return A.selu(x)

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return _inplace(self.inplace, first=True)


class Hardtanh(Module):
    """``x`` clipped to ``[min_val, max_val]``."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace
        if max_val <= min_val:
            raise ArgumentError(f"Hardtanh: max_val must be greater than min_val, got min_val={min_val}, "
                                f"max_val={max_val}")

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """``x`` clipped."""
        return A.hardtanh(x, self.min_val, self.max_val)

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + _inplace(self.inplace)


class ReLU6(Hardtanh):
    """``min(max(x, 0), 6)``."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return _inplace(self.inplace, first=True)


class Hardsigmoid(_InplaceOnly):
    """``relu6(x + 3) / 6``."""

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """Hard sigmoid of ``x``."""
        return A.hardsigmoid(x)

    if TYPE_CHECKING:
        __call__ = forward


class Hardswish(_InplaceOnly):
    """``x * relu6(x + 3) / 6``."""

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """Hard swish of ``x``."""
        return A.hardswish(x)

    if TYPE_CHECKING:
        __call__ = forward


class Mish(_InplaceOnly):
    """``x * tanh(softplus(x))``."""

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """Mish of ``x``."""
        return A.mish(x)

    if TYPE_CHECKING:
        __call__ = forward


class LogSigmoid(Module):
    """``log(sigmoid(x))``, stable for large ``|x|``."""

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """``log(sigmoid(x))``."""
        return A.logsigmoid(x)

    if TYPE_CHECKING:
        __call__ = forward


class Softsign(Module):
    """``x / (1 + |x|)``."""

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """Softsign of ``x``."""
        return A.softsign(x)

    if TYPE_CHECKING:
        __call__ = forward


class Tanhshrink(Module):
    """``x - tanh(x)``."""

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """``x - tanh(x)``."""
        return A.tanhshrink(x)

    if TYPE_CHECKING:
        __call__ = forward


class Softshrink(Module):
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0."""

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """Soft shrinkage of ``x``."""
        return A.softshrink(x, self.lambd)

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return str(self.lambd)


class Hardshrink(Softshrink):
    """``x`` where ``|x| > lambd``, else 0."""

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """Hard shrinkage of ``x``."""
        return A.hardshrink(x, self.lambd)

    if TYPE_CHECKING:
        __call__ = forward


class Threshold(Module):
    """``x`` where ``x > threshold``, else ``value``."""

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """``x`` thresholded."""
        return A.threshold(x, self.threshold, self.value)

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}" + _inplace(self.inplace)


class GLU(Module):
    """Gated linear unit along ``dim``: halves ``dim``."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: AnyTensor) -> AnyTensor:
        """GLU of ``x`` (``dim`` of even size ``2h`` becomes ``h``)."""
        return A.glu(x, self.dim)

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class PReLU(Module):
    """``x`` where positive, else ``weight * x``, with a learnt ``weight`` of ``num_parameters`` elements (one
    shared, or one per channel of dim 1) initialised to ``init``."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, dtype: Any = None) -> None:
        super().__init__()
        self.num_parameters = layer_size(num_parameters, "num_parameters", "PReLU", positive=True)
        self.init = init
        self.weight = empty_parameter((self.num_parameters,), dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """``weight`` back to ``init`` everywhere."""
        nn_init.constant_(self.weight, float(self.init))

    def forward(self, x: AnyTensor) -> AnyTensor:
        """PReLU of ``x``."""
        return A.prelu(x, self.weight)

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"
