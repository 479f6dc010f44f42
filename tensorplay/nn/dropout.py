"""``Dropout`` and ``Dropout2d``."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVarTuple

from tensorplay.nn import functional as F
from tensorplay.nn.module import Module
from tensorplay.tensor import Tensor

S = TypeVarTuple("S")


class _DropoutBase(Module):
    """What the dropout layers share: the probability ``p`` (checked to lie in ``[0, 1]``), the
    ``inplace`` flag (accepted as PyTorch's; the result is always a new tensor) and the repr."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
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


class Dropout2d(_DropoutBase):
    """Channel-wise dropout: in training, zero whole channels (every ``H x W`` map of ``x[*lead, C, H, W]``)
    with probability ``p`` and scale the rest by ``1/(1-p)``; the identity in evaluation. A 3-d input is
    read as ``[N, C, L]`` (PyTorch's current behaviour: each ``L`` row is one channel). See
    :func:`tensorplay.nn.functional.dropout2d`."""

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """``x`` with whole channels dropped when training."""
        return F.dropout2d(x, self.p, self.training)

    if TYPE_CHECKING:
        __call__ = forward
