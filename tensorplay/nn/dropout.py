"""``Dropout``, ``Dropout1d``, ``Dropout2d`` and ``Dropout3d``."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVarTuple

from tensorplay.dropout_probability import dropout_probability
from tensorplay.nn import functional as F
from tensorplay.nn.module import Module
from tensorplay.tensor import Tensor

S = TypeVarTuple("S")


class _DropoutBase(Module):
    """What the dropout layers share: the probability ``p`` (checked to lie in ``[0, 1]``), the
    ``inplace`` flag (accepted as PyTorch's; the result is always a new tensor) and the repr."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        dropout_probability(type(self).__name__, p)
        self.p = p
        self.inplace = inplace

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutBase):
    """In training, zero each element with probability ``p`` and scale the rest by ``1/(1-p)``;
    the identity in evaluation. Masks come from the global generator (``tp.manual_seed``)."""

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """``x`` with dropout applied when training."""
        return F.dropout(x, self.p, self.training)

    if TYPE_CHECKING:
        __call__ = forward


class Dropout1d(_DropoutBase):
    """Channel-wise dropout of ``x[N, C, L]`` or ``[C, L]``: in training, zero each channel's ``L`` row
    with probability ``p`` and scale the rest by ``1/(1-p)``; the identity in evaluation. Other ranks
    are an error, as in PyTorch. See :func:`tensorplay.nn.functional.dropout1d`."""

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """``x`` with whole channels dropped when training."""
        return F.dropout1d(x, self.p, self.training)

    if TYPE_CHECKING:
        __call__ = forward


class Dropout2d(_DropoutBase):
    """Channel-wise dropout: in training, zero whole channels (every ``H x W`` map of ``x[N, C, H, W]``)
    with probability ``p`` and scale the rest by ``1/(1-p)``; the identity in evaluation. As PyTorch,
    every rank draws once per ``[N, C]`` entry of the first two axes: a 3-d input is read as ``[N, C, L]``,
    and other ranks than 3 and 4 warn that they are deprecated. See
    :func:`tensorplay.nn.functional.dropout2d`."""

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """``x`` with whole channels dropped when training."""
        return F.dropout2d(x, self.p, self.training)

    if TYPE_CHECKING:
        __call__ = forward


class Dropout3d(_DropoutBase):
    """Channel-wise dropout of ``x[N, C, D, H, W]`` or ``[C, D, H, W]``: in training, zero each channel's
    ``D x H x W`` volume with probability ``p`` and scale the rest by ``1/(1-p)``; the identity in
    evaluation. As PyTorch, other ranks warn and are read as unbatched (one draw per entry of the first
    axis). See :func:`tensorplay.nn.functional.dropout3d`."""

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """``x`` with whole channels dropped when training."""
        return F.dropout3d(x, self.p, self.training)

    if TYPE_CHECKING:
        __call__ = forward
