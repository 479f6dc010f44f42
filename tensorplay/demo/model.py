"""The demo model, annotated with its dims: mypy checks every layer's input against its output.

``DigitsCNN`` is prefix-polymorphic: ``x[*Lead, 1, 8, 8] -> logits[*Lead, 10]`` for any leading
shape (a batch, a batch of batches, or a single unbatched image).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypeVarTuple

from tensorplay import nn
from tensorplay.tensor import Tensor

Lead = TypeVarTuple("Lead")

Gray = Literal[1]       # input channels
C1 = Literal[16]        # channels after the first convolution
C2 = Literal[32]        # channels after the second
Side = Literal[8]       # image side
Half = Literal[4]       # after the first 2x2 pooling
Quarter = Literal[2]    # after the second
Flat = Literal[128]     # C2 * Quarter * Quarter
Hidden = Literal[64]
Classes = Literal[10]


class DigitsCNN(nn.Module):
    """conv 3x3 (16) -> relu -> maxpool 2 -> conv 3x3 (32) -> relu -> maxpool 2 -> flatten ->
    linear 64 -> relu -> dropout -> linear 10."""

    def __init__(self, dropout: float = 0.1) -> None:
        super().__init__()
        self.conv1: nn.Conv2d[Gray, C1] = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2: nn.Conv2d[C1, C2] = nn.Conv2d(16, 32, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc1: nn.Linear[Flat, Hidden] = nn.Linear(128, 64)
        self.drop = nn.Dropout(dropout)
        self.fc2: nn.Linear[Hidden, Classes] = nn.Linear(64, 10)

    def forward(self, x: Tensor[*Lead, Gray, Side, Side]) -> Tensor[*Lead, Classes]:
        """Class logits for images ``x[*lead, 1, 8, 8]``."""
        c1: Tensor[*Lead, C1, Side, Side] = self.conv1(x, out=(8, 8))
        p1: Tensor[*Lead, C1, Half, Half] = self.pool(c1.relu(), out=(4, 4))
        c2: Tensor[*Lead, C2, Half, Half] = self.conv2(p1, out=(4, 4))
        p2: Tensor[*Lead, C2, Quarter, Quarter] = self.pool(c2.relu(), out=(2, 2))
        flat: Tensor[*Lead, Flat] = p2.flatten(-3)
        hidden = self.drop(self.fc1(flat).relu())
        return self.fc2(hidden)

    if TYPE_CHECKING:
        __call__ = forward
