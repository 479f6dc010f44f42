"""``F.bilinear`` and ``nn.Bilinear``: ``y[..., o] = sum_ij x1[..., i] weight[o, i, j] x2[..., j] + bias[o]``.

Composed from a matrix product (``x1`` against ``weight`` laid out ``[in1, out * in2]``), a product with
``x2`` and a sum over ``in2``, so it runs under every interpreter and its gradient is theirs. The
inputs share their leading shape (``[*lead, in1]`` and ``[*lead, in2]``, ``*lead`` possibly empty).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tensorplay.errors import ShapeError
from tensorplay.nn import init
from tensorplay.nn._util import layer_size, numel, ops_for, shape_of
from tensorplay.nn.linear import empty_parameter
from tensorplay.nn.module import Module
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]


def _bilinear(input1: AnyTensor, input2: AnyTensor, weight: AnyTensor, bias: AnyTensor | None,
              where: str) -> AnyTensor:
    ops = ops_for(where, input1, input2, weight, bias)
    if weight.ndim != 3:
        raise ShapeError(f"{where}: expected a 3-d weight [out_features, in1_features, in2_features], got shape "
                         f"{list(weight.shape)}")
    n_out, n1, n2 = shape_of(weight)
    if input1.ndim < 1 or shape_of(input1)[-1] != n1:
        raise ShapeError(f"{where}: expected input1 [*, {n1}] (in1_features of weight {list(weight.shape)}), "
                         f"got shape {list(input1.shape)}")
    if input2.ndim < 1 or shape_of(input2)[-1] != n2:
        raise ShapeError(f"{where}: expected input2 [*, {n2}] (in2_features of weight {list(weight.shape)}), "
                         f"got shape {list(input2.shape)}")
    lead = shape_of(input1)[:-1]
    if shape_of(input2)[:-1] != lead:
        raise ShapeError(f"{where}: input1 and input2 must have the same leading shape, got {list(input1.shape)} "
                         f"and {list(input2.shape)}")
    if bias is not None and shape_of(bias) != (n_out,):
        raise ShapeError(f"{where}: expected a bias of shape [{n_out}] (out_features), got {list(bias.shape)}")
    m = numel(lead)
    w = ops.reshape(ops.permute(weight, perm=(1, 0, 2)), shape=(n1, n_out * n2))
    t = ops.reshape(ops.matmul(ops.reshape(input1, shape=(m, n1)), w), shape=(m, n_out, n2))
    y = ops.reduce_sum(ops.mul(t, ops.reshape(input2, shape=(m, 1, n2))), axes=(2,), keepdims=False)
    if bias is not None:
        y = ops.add(y, bias)
    return ops.reshape(y, shape=lead + (n_out,))  # type: ignore[no-any-return]


def bilinear(input1: AnyTensor, input2: AnyTensor, weight: AnyTensor, bias: AnyTensor | None = None) -> AnyTensor:
    """``input1[*lead, in1]``, ``input2[*lead, in2]``, ``weight[out, in1, in2]``, ``bias[out]`` ->
    ``[*lead, out]``: ``x1^T weight[o] x2 + bias[o]`` for each output feature ``o``, as
    ``torch.nn.functional.bilinear``."""
    return _bilinear(input1, input2, weight, bias, "bilinear")


class Bilinear(Module):
    """``y = x1^T A x2 + b`` (see :func:`bilinear`): ``weight[out_features, in1_features, in2_features]`` and
    ``bias[out_features]``, both initialised uniform in ``+-1/sqrt(in1_features)`` as PyTorch."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True,
                 dtype: Any = None) -> None:
        super().__init__()
        self.in1_features = layer_size(in1_features, "in1_features", "Bilinear")
        self.in2_features = layer_size(in2_features, "in2_features", "Bilinear")
        self.out_features = layer_size(out_features, "out_features", "Bilinear")
        self.weight = empty_parameter((self.out_features, self.in1_features, self.in2_features), dtype)
        if bias:
            self.bias = empty_parameter((self.out_features,), dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's initialisation: weight and bias uniform in ``+-1/sqrt(in1_features)``."""
        bound = 1.0 / self.in1_features ** 0.5 if self.in1_features > 0 else 0.0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: AnyTensor, input2: AnyTensor) -> AnyTensor:
        """``input1[*lead, in1_features]``, ``input2[*lead, in2_features]`` -> ``[*lead, out_features]``."""
        return _bilinear(input1, input2, self.weight, self.bias, "Bilinear")

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
