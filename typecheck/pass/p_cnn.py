"""A typed CNN: the caller names the spatial dims mypy cannot compute (``out=(H2, W2)``);
sizes passed as values are checked at run time; ``padding="same"`` keeps the input's names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NewType, TypeVarTuple, assert_type

import tensorplay as tp
from tensorplay import Ops, Tensor
from tensorplay import prefix as P
from tensorplay.dims import Batch, Classes, Height, Width

InC = NewType("InC", int)
C1 = NewType("C1", int)
C2 = NewType("C2", int)
H2 = NewType("H2", int)   # after the first pool
W2 = NewType("W2", int)
H4 = NewType("H4", int)   # after the second pool
W4 = NewType("W4", int)
Flat = NewType("Flat", int)
K3 = Literal[3]
Lead = TypeVarTuple("Lead")


@dataclass
class CNN:
    k1: Tensor[C1, InC, K3, K3]
    c1: Tensor[C1]
    k2: Tensor[C2, C1, K3, K3]
    c2: Tensor[C2]
    w: Tensor[Classes, Flat]
    b: Tensor[Classes]


def features(ops: Ops, p: CNN, img: Tensor[*Lead, InC, Height, Width], h2: H2, w2: W2
             ) -> Tensor[*Lead, C2, H4, W4]:
    x = ops.relu(P.conv(ops, p.k1, p.c1, img, padding="same"))
    assert_type(x, Tensor[*Lead, C1, Height, Width])
    pooled = P.max_pool(ops, x, 2, out=(h2, w2))                 # sizes: checked at run time
    assert_type(pooled, Tensor[*Lead, C1, H2, W2])
    y = ops.relu(P.conv(ops, p.k2, p.c2, pooled, padding=1, out=(H2, W2)))  # names only
    return P.avg_pool(ops, y, 2, out=(H4, W4))


def classify(ops: Ops, p: CNN, img: Tensor[Batch, InC, Height, Width]) -> Tensor[Batch, Classes]:
    b, _, h, w = img.shape
    feats = features(ops, p, img, H2(h // 2), W2(w // 2))
    n, c, hh, ww = feats.shape
    flat = feats.reshape(n, Flat(c * hh * ww))
    return P.linear(ops, p.w, p.b, flat)


def main() -> None:
    tp.manual_seed(0)
    cin, c1, c2, cls = InC(1), C1(4), C2(6), Classes(10)
    p = CNN(tp.randn(c1, cin, 3, 3) * 0.3, tp.zeros(c1), tp.randn(c2, c1, 3, 3) * 0.2, tp.zeros(c2),
            tp.randn(cls, Flat(6 * 2 * 2)) * 0.1, tp.zeros(cls))
    img = tp.randn(Batch(5), cin, Height(8), Width(8))
    logits = classify(tp.ops_of(img), p, img)
    assert_type(logits, Tensor[Batch, Classes])
    assert tuple(logits.shape) == (5, 10)
    # one image without a batch axis: the same features function (prefix polymorphism)
    single = features(tp.ops_of(img), p, img[0], H2(4), W2(4))
    assert_type(single, Tensor[C2, H4, W4])
    assert tuple(single.shape) == (6, 2, 2)


if __name__ == "__main__":
    main()
