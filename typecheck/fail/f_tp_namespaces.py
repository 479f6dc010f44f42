"""Shape errors in code written with the ``tp.nn`` / ``tp.func`` spellings are caught like the others."""

from __future__ import annotations

from typing import NewType

import tensorplay as tp
from tensorplay import Tensor
from tensorplay.dims import Batch, Feat

Hidden = NewType("Hidden", int)
Other = NewType("Other", int)


class Net(tp.nn.Module):
    def __init__(self, f: Feat, h: Hidden) -> None:
        super().__init__()
        self.fc = tp.nn.Linear(f, h)

    def forward(self, x: Tensor[Batch, Other]) -> Tensor[Batch, Hidden]:
        return self.fc(x)  # E: Argument 1 has incompatible type "Tensor[Batch, Other]"; expected "Tensor[Batch, Feat]"


def wrong_layer_name() -> None:
    tp.nn.Linearr(3, 4)  # E: Module has no attribute "Linearr"; maybe "Linear"?


def optimizer_needs_parameters() -> None:
    tp.optim.SGD(lr=0.1)  # E: Missing positional argument "params" in call to "SGD"
