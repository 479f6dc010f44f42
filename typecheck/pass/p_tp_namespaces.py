"""``import tensorplay as tp`` alone gives typed access to the lazily loaded subpackages: ``tp.nn``,
``tp.func``, ``tp.optim`` and ``tp.testing`` (as PyTorch users write ``torch.nn.Linear``)."""

from __future__ import annotations

from typing import NewType, assert_type

import tensorplay as tp
from tensorplay import Tensor
from tensorplay.dims import Batch, Feat

Hidden = NewType("Hidden", int)


class Net(tp.nn.Module):
    def __init__(self, f: Feat, h: Hidden) -> None:
        super().__init__()
        self.fc = tp.nn.Linear(f, h)

    def forward(self, x: Tensor[Batch, Feat]) -> Tensor[Batch, Hidden]:
        return self.fc(x).relu()


def main() -> None:
    tp.manual_seed(0)
    net = Net(Feat(3), Hidden(4))
    x = tp.randn(Batch(5), Feat(3))
    y = net.forward(x)
    assert_type(y, Tensor[Batch, Hidden])
    assert tuple(net(x).shape) == (5, 4)
    opt = tp.optim.SGD(net.parameters(), lr=0.1)
    loss = y.sum()
    loss.backward()
    opt.step()
    g = tp.func.grad(lambda v: (v * v).sum())(x)
    assert tuple(g.shape) == (5, 3)
    tp.testing.assert_close(g, 2 * x)
