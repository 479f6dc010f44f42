"""The typed Tensor API: mypy infers every result shape below (checked with ``assert_type``),
and ``main()`` runs the same code to show the annotations describe what happens."""

from __future__ import annotations

from typing import Literal, NewType, assert_type

import tensorplay as tp
from tensorplay import Tensor
from tensorplay.dims import Batch, Feat, Hidden, Seq

Flat = NewType("Flat", int)
One = Literal[1]


def elementwise(x: Tensor[Batch, Seq, Feat], bias: Tensor[Feat]) -> Tensor[Batch, Seq, Feat]:
    y = (x * 2.0 + 1).relu().exp() - x.tanh()
    assert_type(y, Tensor[Batch, Seq, Feat])
    assert_type(x + bias, Tensor[Batch, Seq, Feat])           # a trailing vector broadcasts
    assert_type(x > 0.5, Tensor[Batch, Seq, Feat])
    assert_type(x.maximum(bias), Tensor[Batch, Seq, Feat])
    assert_type(x * x.sum(), Tensor[Batch, Seq, Feat])        # a 0-d tensor broadcasts
    return y.sigmoid()


def matmuls(x: Tensor[Batch, Seq, Feat], w: Tensor[Feat, Hidden], v: Tensor[Feat]) -> Tensor[Batch, Seq, Seq]:
    assert_type(x @ w, Tensor[Batch, Seq, Hidden])            # [*B, M, K] @ [K, N]
    assert_type(x @ v, Tensor[Batch, Seq])                    # matrix @ vector
    assert_type(w.T, Tensor[Hidden, Feat])
    scores = x @ x.mT                                         # [*B, M, K] @ [*B, K, M]
    assert_type(scores, Tensor[Batch, Seq, Seq])
    assert_type(x.transpose(-2, -1), Tensor[Batch, Feat, Seq])
    assert_type(x.transpose(0, 1), Tensor[Seq, Batch, Feat])
    return scores


def reductions(x: Tensor[Batch, Seq, Feat]) -> Tensor[Batch, Seq, Feat]:
    assert_type(x.sum(), Tensor[()])
    assert_type(x.sum(-1), Tensor[Batch, Seq])
    assert_type(x.mean(0), Tensor[Seq, Feat])
    assert_type(x.max(1).values, Tensor[Batch, Feat])
    assert_type(x.min(-2), tp.ValuesIndices[Batch, Feat])
    assert_type(x.amax(1), Tensor[Batch, Feat])
    assert_type(x.prod(), Tensor[()])
    assert_type(x.prod(-1), Tensor[Batch, Seq])
    assert_type(x.prod(0, keepdim=True, dtype="float64"), Tensor[One, Seq, Feat])
    assert_type(x.var(-1), Tensor[Batch, Seq])
    assert_type(x.argmax(-1), Tensor[Batch, Seq])
    m = x.amax(-1, keepdim=True)
    assert_type(m, Tensor[Batch, Seq, One])
    centred = x - m                                           # a keepdim result broadcasts back
    assert_type(centred, Tensor[Batch, Seq, Feat])
    assert_type(x - x.mean(0, keepdim=True), Tensor[Batch, Seq, Feat])
    return centred / centred.exp().sum(-1, keepdim=True)


def structure(x: Tensor[Batch, Seq, Feat]) -> Tensor[Batch, Flat]:
    b, s, f = x.shape
    assert_type(b, Batch)
    flat = x.reshape(b, Flat(s * f))
    assert_type(flat, Tensor[Batch, Flat])
    assert_type(x.reshape(b, -1), Tensor[Batch, int])
    assert_type(x.view((b, s, f)), Tensor[Batch, Seq, Feat])
    assert_type(x.unsqueeze(0), Tensor[One, Batch, Seq, Feat])
    assert_type(x.unsqueeze(-1).squeeze(-1), Tensor[Batch, Seq, Feat])
    assert_type(x.unsqueeze(1), Tensor[Batch, One, Seq, Feat])
    assert_type(x[0], Tensor[Seq, Feat])
    assert_type(x.softmax(-1), Tensor[Batch, Seq, Feat])
    assert_type(x.float().detach(), Tensor[Batch, Seq, Feat])
    return flat


def creation(b: Batch, f: Feat) -> Tensor[Batch, Feat]:
    z = tp.zeros(b, f)
    assert_type(z, Tensor[Batch, Feat])
    assert_type(tp.ones((b, f)), Tensor[Batch, Feat])
    assert_type(tp.randn(b, f) + tp.rand_like(z), Tensor[Batch, Feat])
    assert_type(tp.stack([z, z]), Tensor[int, Batch, Feat])
    assert_type(tp.where(z > 0, z, 0.0), Tensor[Batch, Feat])
    assert_type(z.broadcast_to((Seq(3), b, f)), Tensor[Seq, Batch, Feat])
    return z + tp.full_like(z, 1.0)


def main() -> None:
    b, s, f, h = Batch(2), Seq(3), Feat(4), Hidden(5)
    x = tp.randn(b, s, f)
    y = elementwise(x, tp.randn(f))
    assert tuple(y.shape) == (2, 3, 4)
    assert tuple(matmuls(x, tp.randn(f, h), tp.randn(f)).shape) == (2, 3, 3)
    assert tuple(reductions(x).shape) == (2, 3, 4)
    assert tuple(structure(x).shape) == (2, 12)
    assert tuple(creation(b, f).shape) == (2, 4)


if __name__ == "__main__":
    main()
