"""Random layers: ``RReLU``, ``AlphaDropout``, ``FeatureAlphaDropout`` and ``F.rrelu``, ``F.alpha_dropout``,
``F.feature_alpha_dropout``.

Draws come from the ``random_uniform`` primitive with a fresh key per call (``random_key``: the global
generator eagerly, ``tp.manual_seed``; a key input of a compiled or exported graph, so each call of a
compiled function draws anew), as ``Dropout`` draws its mask.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, TypeVarTuple

from tensorplay.dropout_probability import dropout_probability
from tensorplay.errors import ArgumentError, DTypeError, ShapeError
from tensorplay.nn._util import ops_for, random_key, shape_of
from tensorplay.nn.dropout import _DropoutBase
from tensorplay.nn.module import Module
from tensorplay.tensor import Tensor

S = TypeVarTuple("S")
AnyTensor = Tensor[*tuple[Any, ...]]

#: SELU's ``scale * alpha``: the value a dropped unit takes before the affine correction
SELU_ALPHA = 1.7580993408473766


def _float(where: str, input: AnyTensor) -> None:
    if not input.dtype.is_floating_point:
        raise DTypeError(f"{where}: input must be a float tensor, got {input.dtype.name}{list(input.shape)}")


def _bounds(lower: Any, upper: Any, where: str) -> tuple[float, float]:
    for name, v in (("lower", lower), ("upper", upper)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
            raise ArgumentError(f"{where}: {name} must be a number, got {v!r}")
    if lower > upper:
        raise ArgumentError(f"{where}: lower ({lower}) must be at most upper ({upper})")
    return float(lower), float(upper)


def rrelu(input: Tensor[*S], lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False) -> Tensor[*S]:
    """Randomised leaky ReLU: ``x`` where ``x > 0``, else ``a * x``. Training draws each ``a`` uniformly
    from ``[lower, upper]`` (a fresh draw per call); evaluation uses ``(lower + upper) / 2``. The gradient
    is 1 on the positive side and ``a`` elsewhere (at 0 too), as PyTorch."""
    where = "rrelu"
    ops = ops_for(where, input)
    _float(where, input)
    lo, hi = _bounds(lower, upper, where)
    slope: Any
    if training:
        u = ops.random_uniform(random_key(ops), shape=shape_of(input), dtype=input.dtype.name)
        slope = ops.add(ops.mul(u, hi - lo), lo)
    else:
        slope = (lo + hi) / 2
    return ops.where(ops.gt(input, 0.0), input, ops.mul(input, slope))  # type: ignore[no-any-return]


def _alpha_dropout(input: AnyTensor, p: float, training: bool, where: str, mask_shape: tuple[Any, ...]) -> AnyTensor:
    """``a * x + a * alpha * p`` where kept (probability ``1 - p``), ``-a * alpha * (1 - p)`` where dropped,
    ``a = 1 / sqrt((alpha^2 p + 1)(1 - p))``: zero-mean unit-variance inputs keep their mean and variance."""
    ops = ops_for(where, input)
    p = dropout_probability(where, p)
    if not training or p == 0.0:
        return input
    _float(where, input)
    if p == 1.0:
        return ops.mul(input, 0.0)  # type: ignore[no-any-return]
    a = 1.0 / math.sqrt((SELU_ALPHA * SELU_ALPHA * p + 1.0) * (1.0 - p))
    keep = ops.ge(ops.random_uniform(random_key(ops), shape=mask_shape, dtype=input.dtype.name), p)
    kept = ops.add(ops.mul(input, a), SELU_ALPHA * a * p)
    return ops.where(keep, kept, -SELU_ALPHA * a * (1.0 - p))  # type: ignore[no-any-return]


def alpha_dropout(input: Tensor[*S], p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor[*S]:
    """Alpha dropout (for SELU networks) of each element when ``training``; the identity otherwise."""
    return _alpha_dropout(input, p, training, "alpha_dropout", shape_of(input))


def feature_alpha_dropout(input: Tensor[*S], p: float = 0.5, training: bool = False,
                          inplace: bool = False) -> Tensor[*S]:
    """Alpha dropout of whole channels of ``input[N, C, *rest]``: one draw per ``[N, C]`` entry when
    ``training`` (at least 2 axes needed); the identity otherwise."""
    where = "feature_alpha_dropout"
    shape = shape_of(input)
    if training and input.ndim < 2:
        raise ShapeError(f"{where}: Feature dropout requires at least 2 dimensions in the input, got shape "
                         f"{list(shape)}")
    return _alpha_dropout(input, p, training, where, shape[:2] + (1,) * (input.ndim - 2))


class RReLU(Module):
    """Randomised leaky ReLU (see :func:`rrelu`): random negative slopes in ``[lower, upper]`` when
    training, their mean in evaluation."""

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False) -> None:
        super().__init__()
        _bounds(lower, upper, "RReLU")
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """``x`` with its negative part scaled."""
        return rrelu(x, self.lower, self.upper, self.training)

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}{', inplace=True' if self.inplace else ''}"


class AlphaDropout(_DropoutBase):
    """Alpha dropout of each element when training (see :func:`alpha_dropout`); the identity in evaluation."""

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """``x`` with alpha dropout applied when training."""
        return _alpha_dropout(x, self.p, self.training, "AlphaDropout", shape_of(x))

    if TYPE_CHECKING:
        __call__ = forward


class FeatureAlphaDropout(_DropoutBase):
    """Alpha dropout of whole channels when training (see :func:`feature_alpha_dropout`)."""

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """``x`` with whole channels alpha-dropped when training."""
        return feature_alpha_dropout(x, self.p, self.training)

    if TYPE_CHECKING:
        __call__ = forward


__all__ = ["rrelu", "alpha_dropout", "feature_alpha_dropout", "RReLU", "AlphaDropout", "FeatureAlphaDropout"]
