"""A typed MLP written once against ``Ops`` (TorchLean style), used per sample and batched,
run eagerly and under the graph recorder, and trained for a few steps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVarTuple, assert_type

import tensorplay as tp
from tensorplay import Ops, Tensor
from tensorplay import prefix as P
from tensorplay.dims import Batch, Classes, Feat, Hidden, Seq
from tensorplay.graph import trace

Lead = TypeVarTuple("Lead")
S = TypeVarTuple("S")


@dataclass
class MLP:
    w1: Tensor[Hidden, Feat]
    b1: Tensor[Hidden]
    w2: Tensor[Classes, Hidden]
    b2: Tensor[Classes]


def init(f: Feat, h: Hidden, c: Classes) -> MLP:
    return MLP(
        (tp.randn(h, f) * 0.3).requires_grad_(), tp.zeros(h, requires_grad=True),
        (tp.randn(c, h) * 0.3).requires_grad_(), tp.zeros(c, requires_grad=True),
    )


def mlp(ops: Ops, p: MLP, x: Tensor[*Lead, Feat]) -> Tensor[*Lead, Classes]:
    """Any leading shape is kept: one sample ``[Feat]``, a batch ``[Batch, Feat]``, ..."""
    h = ops.relu(P.linear(ops, p.w1, p.b1, x))
    return ops.linear(p.w2, p.b2, h)


def mlp_methods(p: MLP, x: Tensor[Batch, Feat]) -> Tensor[Batch, Classes]:
    """The same model with tensor methods and operators."""
    h = (x @ p.w1.T + p.b1).relu()
    return h @ p.w2.T + p.b2


def loss_fn(logits: Tensor[Batch, Classes], target: Tensor[Batch, Classes]) -> Tensor[()]:
    return ((logits - target) ** 2).mean()


def sgd_step(t: Tensor[*S], lr: float) -> None:
    assert t.grad is not None
    t.sub_(t.grad * lr)
    t.grad = None


def main() -> None:
    tp.manual_seed(0)
    f, h, c, b = Feat(4), Hidden(8), Classes(3), Batch(16)
    p = init(f, h, c)
    x = tp.randn(b, f)
    ops = tp.ops_of(x)

    one: Tensor[Feat] = x[0]
    assert_type(mlp(ops, p, one), Tensor[Classes])
    assert_type(mlp(ops, p, x), Tensor[Batch, Classes])
    xs = tp.randn(b, Seq(5), f)
    assert_type(mlp(ops, p, xs), Tensor[Batch, Seq, Classes])
    assert_type(mlp(tp.eager, p, x), Tensor[Batch, Classes])     # the eager interpreter is an Ops

    def per_row(row: Tensor[Feat]) -> Tensor[Classes]:
        return mlp(ops, p, row)

    mapped = P.map(ops, 2, xs, per_row)                            # per_row on every [Batch, Seq] sample
    assert_type(mapped, Tensor[Batch, Seq, Classes])
    assert float((mapped - mlp(ops, p, xs)).abs().max()) < 1e-5
    assert tuple(mlp(ops, p, xs).shape) == (16, 5, 3)

    # the same program under the graph recorder, then the recorded graph run eagerly
    def traced_fn(xb: Tensor[*tuple[Any, ...]]) -> Tensor[*tuple[Any, ...]]:
        return mlp(tp.ops_of(xb), p, xb)

    gm = trace(traced_fn, x)
    eager_out = mlp(ops, p, x)
    graph_out = gm(x)
    assert float((eager_out - graph_out).abs().max()) < 1e-5
    assert float((mlp_methods(p, x) - eager_out).abs().max()) < 1e-5

    target = tp.zeros(b, c)
    first = float(loss_fn(mlp(ops, p, x), target))
    for _ in range(5):
        loss = loss_fn(mlp(ops, p, x), target)
        loss.backward()
        with tp.no_grad():
            sgd_step(p.w1, 0.1)
            sgd_step(p.b1, 0.1)
            sgd_step(p.w2, 0.1)
            sgd_step(p.b2, 0.1)
    assert float(loss_fn(mlp(ops, p, x), target)) < first


if __name__ == "__main__":
    main()
