"""Dim arithmetic done right: declared relations (``tp.relate``) let the reshapes, slices, concatenations
and strided layers of a model type-check with tensorplay.mypy_plugin, and plain mypy accepts the same
code. Sizes the plugin cannot decide (undeclared dims, ``int``) are never errors."""

from __future__ import annotations

from typing import Literal, NewType

import tensorplay as tp
import numpy as np

from tensorplay import Index, Ops, Tensor
from tensorplay import prefix as P
from tensorplay.dims import Batch, Channels, Feat, Heads, Seq, Vocab
from tensorplay.nn import functional as F

HeadDim = NewType("HeadDim", int)
Model = NewType("Model", int)
tp.relate(Model, tp.dim(Heads) * HeadDim)

Left = NewType("Left", int)
Right = NewType("Right", int)
Both = NewType("Both", int)
tp.relate(Both, tp.dim(Left) + Right)

Height = NewType("Height", int)
Width = NewType("Width", int)
H2 = NewType("H2", int)
W2 = NewType("W2", int)
tp.relate(Height, 2 * tp.dim(H2))
tp.relate(Width, 2 * tp.dim(W2))
OutC = NewType("OutC", int)
Flat = NewType("Flat", int)   # no relation: the plugin cannot check it, so it never complains

K2 = Literal[2]
K3 = Literal[3]
L28 = Literal[28]


@tp.shapecheck
def split_heads(x: Tensor[Batch, Seq, Model], h: Heads, d: HeadDim) -> Tensor[Batch, Seq, Heads, HeadDim]:
    b, s, _ = x.shape
    return x.reshape(b, s, h, d)


def merge_heads(y: Tensor[Batch, Seq, Heads, HeadDim], m: Model) -> Tensor[Batch, Seq, Model]:
    b, s, h, d = y.shape
    same: Tensor[Batch, Seq, Heads, int] = y.reshape(b, s, h, -1)   # the plugin computes HeadDim there
    print(same.shape, h, d)
    return y.reshape(b, s, m)


def next_step_difference(x: Tensor[Batch, Seq, Feat]) -> Tensor[Batch, Seq, Feat]:
    inputs, targets = x[:, :-1], x[:, 1:]      # both [Batch, Seq - 1, Feat]
    step = targets - inputs
    middle = x[:, 1:-1] * x[:, 2:]             # both [Batch, Seq - 2, Feat]
    window = x[:, :4]                          # min(Seq, 4): unknown, so unchecked
    print(middle.shape, window.shape)
    return tp.cat([x[:, :1], step], 1)         # 1 + (Seq - 1) == Seq


def next_token_loss(logits: Tensor[Batch, Vocab, Seq], ids: Index[Vocab, Batch, Seq]) -> Tensor[()]:
    return F.cross_entropy(logits[:, :, :-1], ids[:, 1:])    # position t predicts token t + 1


def join(left: Tensor[Batch, Left], right: Tensor[Batch, Right]) -> Tensor[Batch, Both]:
    return tp.cat([left, right], 1)


def pair_up(a: Tensor[Batch, Feat], b: Tensor[Batch, Feat]) -> Tensor[Batch, Literal[2], Feat]:
    return tp.stack([a, b], 1)


def down_and_up(ops: Ops, k1: Tensor[OutC, Channels, K3, K3], k2: Tensor[OutC, Channels, K2, K2],
                up: Tensor[OutC, Channels, K2, K2], x: Tensor[Batch, Channels, Height, Width]
                ) -> Tensor[Batch, Channels, Height, Width]:
    y = P.conv(ops, k1, None, x, stride=2, padding=1, out=(H2, W2))     # (2*H2 + 2 - 2 - 1)//2 + 1 == H2
    z = P.conv(ops, k2, None, x, stride=2, out=(H2, W2))
    pooled = P.max_pool(ops, x, 2, out=(H2, W2))
    print(z.shape, pooled.shape)
    back = P.conv_transpose(ops, up, None, y, stride=2, out=(Height, Width))   # (H2 - 1)*2 + 2 == Height
    return back


def literal_sizes(ops: Ops, k: Tensor[OutC, Channels, K3, K3], x: Tensor[Batch, Channels, L28, L28]
                  ) -> Tensor[Batch, OutC, int, int]:
    y = P.conv(ops, k, None, x, stride=2)       # [Batch, OutC, 13, 13] with the plugin
    small: Tensor[Batch, OutC, int, int] = P.max_pool(ops, y, 2)
    flat = small.reshape(small.shape[0], Flat(small.shape[1] * 36))   # an undeclared dim: unchecked
    print(flat.shape)
    return y


def main() -> None:
    tp.manual_seed(0)
    b, s, h, d = Batch(2), Seq(5), Heads(2), HeadDim(4)
    x = tp.randn(b, s, Model(8))
    heads = split_heads(x, h, d)
    assert tuple(merge_heads(heads, Model(8)).shape) == (2, 5, 8)
    try:
        split_heads(tp.randn(b, s, Model(12)), h, d)
    except tp.ShapeError as err:
        assert "declared relation Model == Heads * HeadDim gives 8" in str(err), err
    else:
        raise AssertionError("the declared relation was not checked")
    f = tp.randn(b, s, Feat(3))
    assert tuple(next_step_difference(f).shape) == (2, 5, 3)
    ids = tp.index(np.array([[0, 2, 1, 3, 0], [1, 1, 2, 0, 3]]), bound=Vocab(4), shape=(b, s))
    assert next_token_loss(tp.randn(b, Vocab(4), s), ids).shape == ()
    assert tuple(join(tp.randn(b, Left(2)), tp.randn(b, Right(3))).shape) == (2, 5)
    assert tuple(pair_up(tp.randn(b, Feat(3)), tp.randn(b, Feat(3))).shape) == (2, 2, 3)
    img = tp.randn(b, Channels(3), Height(8), Width(6))
    ops = tp.ops_of(img)
    out = down_and_up(ops, tp.randn(OutC(4), Channels(3), 3, 3), tp.randn(OutC(4), Channels(3), 2, 2),
                      tp.randn(OutC(4), Channels(3), 2, 2), img)
    assert tuple(out.shape) == (2, 3, 8, 6)
    lit = literal_sizes(ops, tp.randn(OutC(4), Channels(3), 3, 3), tp.randn(b, Channels(3), 28, 28))
    assert tuple(lit.shape) == (2, 4, 13, 13)


if __name__ == "__main__":
    main()
