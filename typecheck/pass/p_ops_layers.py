"""Every layer operation called through the ``Ops`` protocol (``ops.conv``, ``ops.attention``, ...): mypy
keeps the leading shape, names the output spatial dims given with ``out=``, and the program runs the same
on one sample and on a batch."""

from __future__ import annotations

from typing import Literal, NewType, TypeVarTuple, assert_type

import tensorplay as tp
from tensorplay import Ops, Tensor
from tensorplay.dims import Batch, Channels, Height, Seq, Width

OutC = NewType("OutC", int)
H2 = NewType("H2", int)
W2 = NewType("W2", int)
Model = NewType("Model", int)
Heads = NewType("Heads", int)
Out = NewType("Out", int)
K3 = Literal[3]
Lead = TypeVarTuple("Lead")


def image_block(ops: Ops, k: Tensor[OutC, Channels, K3, K3], b: Tensor[OutC],
                x: Tensor[*Lead, Channels, Height, Width]) -> Tensor[*Lead, OutC, H2, W2]:
    same = ops.conv(k, b, x, padding="same")
    assert_type(same, Tensor[*Lead, OutC, Height, Width])
    pooled = ops.max_pool(same.relu(), 2, out=(H2, W2))
    assert_type(ops.avg_pool(same, 2, out=(H2, W2)), Tensor[*Lead, OutC, H2, W2])
    assert_type(ops.smooth_max_pool(same, 2, 2, 0, 4.0, out=(H2, W2)), Tensor[*Lead, OutC, H2, W2])
    return pooled


def up_block(ops: Ops, k: Tensor[Channels, OutC, K3, K3],
             x: Tensor[*Lead, Channels, Height, Width]) -> Tensor[*Lead, OutC, H2, W2]:
    return ops.conv_transpose(k, None, x, stride=2, padding=1, output_padding=1, out=(H2, W2))


def sequence_block(ops: Ops, wq: Tensor[Model, Heads], wk: Tensor[Model, Heads], wv: Tensor[Model, Heads],
                   wo: Tensor[Heads, Out], g: Tensor[Model], x: Tensor[*Lead, Seq, Model]) -> Tensor[*Lead, Seq, Out]:
    h = ops.layer_norm(x, g)
    assert_type(ops.layer_norm(x), Tensor[*Lead, Seq, Model])
    assert_type(ops.dropout(h, 0.1, training=False), Tensor[*Lead, Seq, Model])
    return ops.attention(wq, wk, wv, wo, h, 2)


def per_sample(ops: Ops, w: Tensor[Out, Model], x: Tensor[Batch, Seq, Model]) -> Tensor[Batch, Seq, Out]:
    def one(v: Tensor[Model]) -> Tensor[Out]:
        return ops.linear(w, None, v)

    return ops.map(2, x, one)


def main() -> None:
    tp.manual_seed(0)
    ops = tp.eager
    c, o, h, w = Channels(2), OutC(3), Height(6), Width(6)
    three: K3 = 3
    k, b = tp.randn(o, c, three, three), tp.randn(o)
    batch = tp.randn(Batch(4), c, h, w)
    y = image_block(ops, k, b, batch)
    assert tuple(y.shape) == (4, 3, 3, 3)
    assert float((y[1] - image_block(ops, k, b, batch[1])).abs().max()) < 1e-5
    up = up_block(ops, tp.randn(c, o, three, three), batch)
    assert tuple(up.shape) == (4, 3, 12, 12)
    d, hd, out = Model(4), Heads(6), Out(5)
    x = tp.randn(Batch(3), Seq(5), d)
    att = sequence_block(ops, tp.randn(d, hd), tp.randn(d, hd), tp.randn(d, hd), tp.randn(hd, out), tp.ones(d), x)
    assert tuple(att.shape) == (3, 5, 5)
    mapped = per_sample(ops, tp.randn(out, d), x)
    assert tuple(mapped.shape) == (3, 5, 5)
