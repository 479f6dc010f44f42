"""``Linear``, ``Identity`` and ``Flatten``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar, TypeVarTuple

import numpy as np

from tensorplay import dtypes as _dt
from tensorplay import prefix as _prefix_module
from tensorplay.derived import flatten
from tensorplay.nn import init
from tensorplay.nn._util import layer_size, ops_for
from tensorplay.nn.module import Module
from tensorplay.nn.parameter import Parameter
from tensorplay.tensor import Tensor

prefix: Any = _prefix_module  # typed loosely: the layers check shapes at run time

In = TypeVar("In", bound=int)
Out = TypeVar("Out", bound=int)
Lead = TypeVarTuple("Lead")
S = TypeVarTuple("S")


def empty_parameter(shape: tuple[int, ...], dtype: Any = None, order: str = "C") -> Parameter[*tuple[Any, ...]]:
    """A new parameter of ``shape`` (zeros; the layer initialises it).

    ``order="F"`` stores a ``linear`` weight ``[out, in]`` column-major: ``x @ w^T`` then reads a
    row-major ``w^T``, and the weight's gradient (which arrives through that transpose) has the same
    memory order as the weight, so optimizers update both in one contiguous pass."""
    name = "float32" if dtype is None else _dt.to_dtype(dtype).name
    return Parameter(np.zeros(shape, dtype=name, order="F" if order == "F" else "C"))


def add_affine(module: Module, shape: tuple[int, ...], dtype: Any, *, weight: bool, bias: bool) -> None:
    """Register a normalisation layer's elementwise affine parameters of ``shape``: ``module.weight`` when
    ``weight``, ``module.bias`` when ``weight`` and ``bias`` (each ``None`` otherwise); initialise them with
    :func:`reset_affine`."""
    module.register_parameter("weight", empty_parameter(shape, dtype) if weight else None)
    module.register_parameter("bias", empty_parameter(shape, dtype) if weight and bias else None)


def reset_affine(module: Module) -> None:
    """A normalisation layer's affine parameters back to the identity: weight ones, bias zeros (those it has)."""
    if module.weight is not None:
        init.ones_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)


class Linear(Module, Generic[In, Out]):
    """``y = x @ weight^T + bias`` over the last axis of ``x[*lead, In]``, keeping ``*lead``.

    ``weight[Out, In]`` and ``bias[Out]`` are initialised as PyTorch does (Kaiming uniform with
    ``a=sqrt(5)``; the bias uniform in ``+-1/sqrt(In)``).
    """

    in_features: In
    out_features: Out

    def __init__(self, in_features: In, out_features: Out, bias: bool = True, dtype: Any = None) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        n_in = layer_size(in_features, "in_features", "Linear")
        n_out = layer_size(out_features, "out_features", "Linear")
        self.weight = empty_parameter((n_out, n_in), dtype, order="F")
        if bias:
            self.bias = empty_parameter((n_out,), dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's default initialisation."""
        init.kaiming_uniform_(self.weight, a=5 ** 0.5)
        if self.bias is not None:
            init.fan_in_uniform_(self.bias, self.weight)

    def forward(self, x: Tensor[*Lead, In]) -> Tensor[*Lead, Out]:
        """``x[*lead, In] -> [*lead, Out]``."""
        w = self.weight
        b = self.bias
        return ops_for("Linear", x, w, b).linear(w, b, x)  # type: ignore[no-any-return]

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Identity(Module):
    """Returns its input (constructor arguments are accepted and ignored, as PyTorch)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """``x`` itself."""
        return x

    if TYPE_CHECKING:
        __call__ = forward


class Flatten(Module):
    """Merge axes ``start_dim..end_dim`` into one (by default all but the first)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, x: Tensor[*tuple[Any, ...]]) -> Tensor[*tuple[Any, ...]]:
        """The flattened tensor."""
        return flatten(ops_for("Flatten", x), x, self.start_dim, self.end_dim)  # type: ignore[no-any-return]

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"
