"""``GroupNorm`` and ``RMSNorm`` (and ``F.group_norm``, ``F.rms_norm``), composed from the primitives.

``group_norm`` normalises ``x[N, C, *rest]`` over each group of ``C // num_groups`` channels together
with ``rest`` (the ``layer_norm`` primitive on a ``[N, G, C // G * prod(rest)]`` view), then applies a
per-channel scale and shift. ``rms_norm`` divides by the root mean square over the trailing
``normalized_shape`` axes (no centring), then scales.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar, TypeVarTuple, overload

import numpy as np

from tensorplay import prefix as _prefix_module
from tensorplay.errors import ShapeError
from tensorplay.nn import init
from tensorplay.nn._util import layer_size, numel, ops_for, shape_of
from tensorplay.nn.linear import add_affine, empty_parameter, reset_affine
from tensorplay.nn.module import Module
from tensorplay.tensor import Tensor

prefix: Any = _prefix_module
S = TypeVarTuple("S")
Lead = TypeVarTuple("Lead")
D = TypeVar("D", bound=int)
AnyTensor = Tensor[*tuple[Any, ...]]


def group_norm(input: Tensor[*S], num_groups: int, weight: AnyTensor | None = None, bias: AnyTensor | None = None,
               eps: float = 1e-5) -> Tensor[*S]:
    """Group normalisation of ``input[N, C, *rest]``: mean and biased variance over each group of
    ``C // num_groups`` consecutive channels and ``rest``; then ``weight[C]`` scales and ``bias[C]``
    shifts each channel. ``C`` must be divisible by ``num_groups``."""
    ops = ops_for("group_norm", input, weight, bias)
    shape = shape_of(input)
    if input.ndim < 2:
        raise ShapeError(f"group_norm: expected an input [N, C, *rest] with at least 2 axes, got shape {list(shape)}")
    c = shape[1]
    if isinstance(num_groups, bool) or not isinstance(num_groups, (int, np.integer)) or num_groups <= 0:
        raise ShapeError(f"group_norm: num_groups must be a positive int, got {num_groups!r}")
    if c % num_groups:
        raise ShapeError(f"group_norm: the {c} channels (axis 1 of the input of shape {list(shape)}) are not "
                         f"divisible by num_groups={num_groups}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (c,):
            raise ShapeError(f"group_norm: {name} must have shape [{c}], got {list(t.shape)}")
    size = numel(shape[1:]) // num_groups
    flat = ops.reshape(input, shape=(shape[0], int(num_groups), size))
    out = ops.reshape(prefix.layer_norm(ops, flat, None, None, eps), shape=shape)
    per_channel = (c,) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = ops.mul(out, ops.reshape(weight, shape=per_channel))
    if bias is not None:
        out = ops.add(out, ops.reshape(bias, shape=per_channel))
    return out  # type: ignore[no-any-return]


def _normalized(normalized_shape: Any, where: str) -> tuple[int, ...]:
    dims = tuple(normalized_shape) if isinstance(normalized_shape, (tuple, list)) else (normalized_shape,)
    return tuple(layer_size(d, "normalized_shape", where) for d in dims)


def rms_norm(input: Tensor[*S], normalized_shape: int | Sequence[int], weight: AnyTensor | None = None,
             eps: float | None = None) -> Tensor[*S]:
    """``x / sqrt(mean(x**2) + eps) * weight`` over the trailing ``normalized_shape`` axes of ``input``;
    ``eps=None`` is the machine epsilon of ``input``'s dtype (as PyTorch)."""
    ops = ops_for("rms_norm", input, weight)
    norm = _normalized(normalized_shape, "rms_norm")
    shape = shape_of(input)
    k = len(norm)
    if k == 0 or input.ndim < k or shape[input.ndim - k:] != norm:
        raise ShapeError(f"rms_norm: normalized_shape {list(norm)} does not match the trailing axes of the input "
                         f"of shape {list(shape)}")
    if weight is not None and tuple(weight.shape) != norm:
        raise ShapeError(f"rms_norm: weight must have shape {list(norm)}, got {list(weight.shape)}")
    if input.dtype.name not in ("float32", "float64"):
        raise ShapeError(f"rms_norm: expected a float tensor, got {input.dtype}")
    value = float(np.finfo(input.dtype.name).eps) if eps is None else float(eps)
    axes = tuple(range(input.ndim - k, input.ndim))
    mean_square = ops.div(ops.reduce_sum(ops.mul(input, input), axes=axes, keepdims=True), numel(norm))
    out = ops.mul(input, ops.rsqrt(ops.add(mean_square, value)))
    if weight is not None:
        out = ops.mul(out, weight)
    return out  # type: ignore[no-any-return]


class GroupNorm(Module):
    """Group normalisation of ``x[N, C, *rest]`` (see :func:`group_norm`); with ``affine``, a weight (ones)
    and a bias (zeros) per channel."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 dtype: Any = None) -> None:
        super().__init__()
        groups = layer_size(num_groups, "num_groups", "GroupNorm", positive=True)
        channels = layer_size(num_channels, "num_channels", "GroupNorm")
        if channels % groups:
            raise ShapeError(f"GroupNorm: num_channels ({channels}) must be divisible by num_groups ({groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = groups, channels, eps, affine
        add_affine(self, (channels,), dtype, weight=affine, bias=True)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight ones, bias zeros."""
        reset_affine(self)

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """The normalised tensor, same shape as ``x``."""
        shape = shape_of(x)
        if len(shape) >= 2 and shape[1] != self.num_channels:
            raise ShapeError(f"GroupNorm: expected {self.num_channels} channels (axis 1), got input of shape "
                             f"{list(shape)}")
        return group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class RMSNorm(Module, Generic[D]):
    """Root-mean-square normalisation over the trailing ``normalized_shape`` axes (see :func:`rms_norm`),
    with a weight (ones) when ``elementwise_affine``. Typed as ``RMSNorm[D]`` for one feature dim."""

    @overload
    def __init__(self: RMSNorm[D], normalized_shape: D, eps: float | None = None, elementwise_affine: bool = True,
                 dtype: Any = None) -> None: ...

    @overload
    def __init__(self: RMSNorm[Any], normalized_shape: Sequence[int], eps: float | None = None,
                 elementwise_affine: bool = True, dtype: Any = None) -> None: ...

    def __init__(self, normalized_shape: int | Sequence[int], eps: float | None = None,
                 elementwise_affine: bool = True, dtype: Any = None) -> None:
        super().__init__()
        self.normalized_shape = _normalized(normalized_shape, "RMSNorm")
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = empty_parameter(self.normalized_shape, dtype)
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight ones."""
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, x: Tensor[*Lead, D]) -> Tensor[*Lead, D]:
        """The normalised tensor, same shape as ``x``."""
        return rms_norm(x, self.normalized_shape, self.weight, self.eps)

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
