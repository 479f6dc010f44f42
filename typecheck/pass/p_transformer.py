"""A pre-norm transformer block written once with the prefix-polymorphic ops: it is typed
for one sequence ``[Seq, Model]`` and runs unchanged on ``[Batch, Seq, Model]`` and deeper
prefixes, because ``layer_norm``, ``attention`` and ``linear`` keep ``*Lead``."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NewType, TypeVar, TypeVarTuple, assert_type

import tensorplay as tp
from tensorplay import Ops, Tensor
from tensorplay import prefix as P
from tensorplay.dims import Batch, Seq

Model = NewType("Model", int)
Ffn = NewType("Ffn", int)
Lead = TypeVarTuple("Lead")
N = TypeVar("N")


@dataclass
class Block:
    ln1_g: Tensor[Model]
    ln1_b: Tensor[Model]
    wq: Tensor[Model, Model]
    wk: Tensor[Model, Model]
    wv: Tensor[Model, Model]
    wo: Tensor[Model, Model]
    ln2_g: Tensor[Model]
    ln2_b: Tensor[Model]
    w_up: Tensor[Ffn, Model]
    b_up: Tensor[Ffn]
    w_down: Tensor[Model, Ffn]
    b_down: Tensor[Model]


def init(d: Model, f: Ffn) -> Block:
    def mat(rows: int, cols: int) -> float:
        return 1.0 / math.sqrt(cols)
    return Block(
        tp.ones(d), tp.zeros(d),
        tp.randn(d, d) * mat(d, d), tp.randn(d, d) * mat(d, d), tp.randn(d, d) * mat(d, d), tp.randn(d, d) * mat(d, d),
        tp.ones(d), tp.zeros(d),
        tp.randn(f, d) * mat(f, d), tp.zeros(f), tp.randn(d, f) * mat(d, f), tp.zeros(d),
    )


def block(ops: Ops, p: Block, x: Tensor[*Lead, N, Model], heads: int) -> Tensor[*Lead, N, Model]:
    h = P.layer_norm(ops, x, p.ln1_g, p.ln1_b)
    x = x + P.attention(ops, p.wq, p.wk, p.wv, p.wo, h, heads)
    h = P.layer_norm(ops, x, p.ln2_g, p.ln2_b)
    up = ops.gelu(P.linear(ops, p.w_up, p.b_up, h))
    assert_type(up, Tensor[*Lead, N, Ffn])
    return x + P.linear(ops, p.w_down, p.b_down, up)


def encoder(ops: Ops, layers: list[Block], x: Tensor[*Lead, N, Model], heads: int) -> Tensor[*Lead, N, Model]:
    for p in layers:
        x = block(ops, p, x, heads)
    return x


def pool(x: Tensor[Batch, Seq, Model]) -> Tensor[Batch, Model]:
    return x.mean(1)


def main() -> None:
    tp.manual_seed(0)
    d, f, s, b = Model(8), Ffn(16), Seq(5), Batch(3)
    layers = [init(d, f), init(d, f)]
    sample = tp.randn(s, d)
    batch = tp.randn(b, s, d)
    ops = tp.ops_of(batch)
    one = encoder(ops, layers, sample, heads=2)
    assert_type(one, Tensor[Seq, Model])
    many = encoder(ops, layers, batch, heads=2)
    assert_type(many, Tensor[Batch, Seq, Model])
    # the batched program on sample 0 is the per-sample program on sample 0
    assert float((many[0] - encoder(ops, layers, batch[0], heads=2)).abs().max()) < 1e-4
    assert tuple(pool(many).shape) == (3, 8) and tuple(one.shape) == (5, 8)


if __name__ == "__main__":
    main()
