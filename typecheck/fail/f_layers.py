"""``tensorplay.nn`` layers applied to the wrong feature dims (mypy prints both full types)."""

from __future__ import annotations

from typing import NewType

import tensorplay as tp
import tensorplay.nn as nn
from tensorplay import Tensor
from tensorplay.dims import Batch, Channels, Classes, Feat, Height, Hidden, Seq, Width

Model = NewType("Model", int)
OutC = NewType("OutC", int)


class Classifier(nn.Module):
    def __init__(self, f: Feat, h: Hidden, c: Classes) -> None:
        super().__init__()
        self.fc1 = nn.Linear(f, h)
        self.fc2 = nn.Linear(h, c)
        self.norm = nn.LayerNorm(h)

    def forward(self, x: Tensor[Batch, Feat]) -> Tensor[Batch, Classes]:
        h = self.fc1(x).relu()
        return self.fc2(self.norm(h))

    def forward_skipping_a_layer(self, x: Tensor[Batch, Feat]) -> Tensor[Batch, Classes]:
        return self.fc2(x)  # E: Argument 1 has incompatible type "Tensor[Batch, Feat]"; expected "Tensor[Batch, Hidden]"

    def forward_layers_swapped(self, x: Tensor[Batch, Feat]) -> Tensor[Batch, Classes]:
        return self.fc1(self.fc2(x))  # E: Argument 1 has incompatible type "Tensor[Batch, Feat]"; expected "Tensor[Batch, Hidden]"  # E: Argument 1 has incompatible type "Tensor[Batch, Classes]"; expected "Tensor[Batch, Feat]"  # E: Incompatible return value type (got "Tensor[Batch, Hidden]", expected "Tensor[Batch, Classes]")

    def forward_norm_on_input(self, x: Tensor[Batch, Feat]) -> Tensor[Batch, Classes]:
        return self.fc2(self.norm(x))  # E: Argument 1 has incompatible type "Tensor[Batch, Feat]"; expected "Tensor[Batch, Hidden]"


def linear_on_wrong_axis(fc: nn.Linear[Feat, Hidden], x: Tensor[Batch, Feat, Seq]) -> None:
    fc(x)  # E: Argument 1 has incompatible type "Tensor[Batch, Feat, Seq]"; expected "Tensor[Batch, Feat, Feat]"


def attention_width(attn: nn.MultiheadAttention[Model], x: Tensor[Batch, Seq, Feat]) -> None:
    attn(x)  # E: Argument 1 has incompatible type "Tensor[Batch, Seq, Feat]"; expected "Tensor[Batch, Seq, Model]"


def conv_channels(conv: nn.Conv2d[Channels, OutC], img: Tensor[Batch, Height, Width, Channels]) -> None:
    conv(img)  # E: Argument 1 has incompatible type "Tensor[Batch, Height, Width, Channels]"; expected "Tensor[Batch, Channels, int, int]"


def conv_then_linear(conv: nn.Conv2d[Channels, OutC], fc: nn.Linear[OutC, Classes],
                     img: Tensor[Batch, Channels, Height, Width]) -> None:
    fc(conv(img))  # E: Argument 1 has incompatible type "Tensor[Batch, OutC, int, int]"; expected "Tensor[Batch, OutC, int, OutC]"


def wrong_layer_built() -> Tensor[Batch, Hidden]:
    fc = nn.Linear(Hidden(4), Feat(8))      # the dims are given in the wrong order
    x = tp.randn(Batch(2), Feat(4))
    return fc(x)  # E: Argument 1 has incompatible type "Tensor[Batch, Feat]"; expected "Tensor[Batch, Hidden]"  # E: Incompatible return value type (got "Tensor[Batch, Feat]", expected "Tensor[Batch, Hidden]")
