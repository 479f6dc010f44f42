"""PyTorch's function forms (``tp.sum(x, -1)``, ``tp.max(x, dim)``, ``tp.sort``, ``tp.einsum``, ...) and the
methods PyTorch users reach for are typed: mypy infers the result shapes below (``assert_type``), the
same for ``tp.f(x, ...)`` and ``x.f(...)``; ``main()`` runs them."""

from __future__ import annotations

from typing import Any, Literal, assert_type

import tensorplay as tp
from tensorplay import Tensor
from tensorplay.dims import Batch, Classes, Feat, Hidden

One = Literal[1]


def functions(x: Tensor[Batch, Feat], v: Tensor[Feat], w: Tensor[Feat, Hidden]) -> Tensor[Batch, Hidden]:
    assert_type(tp.sin(x), Tensor[Batch, Feat])
    assert_type(tp.exp(x) + tp.log(tp.abs(x)) * tp.sqrt(tp.abs(x)), Tensor[Batch, Feat])
    assert_type(tp.tanh(x), Tensor[Batch, Feat])
    assert_type(tp.sigmoid(x), Tensor[Batch, Feat])
    assert_type(tp.softmax(x, -1), Tensor[Batch, Feat])
    assert_type(tp.maximum(x, v), Tensor[Batch, Feat])
    assert_type(tp.minimum(x, 0.0), Tensor[Batch, Feat])
    assert_type(tp.clamp(x, -1.0, 1.0), Tensor[Batch, Feat])
    assert_type(tp.sum(x), Tensor[()])
    assert_type(tp.sum(x, -1), Tensor[Batch])
    assert_type(tp.mean(x, 0, keepdim=True), Tensor[One, Feat])
    assert_type(tp.max(x), Tensor[()])
    assert_type(tp.max(x, -1), tp.ValuesIndices[Batch])
    assert_type(tp.max(x, 1).values, Tensor[Batch])
    assert_type(tp.min(x, 0).indices, Tensor[Feat])
    assert_type(tp.max(x, v), Tensor[Batch, Feat])              # PyTorch's elementwise form
    assert_type(tp.argmax(x, -1), Tensor[Batch])
    assert_type(tp.matmul(x, w), Tensor[Batch, Hidden])
    assert_type(tp.transpose(x, 0, 1), Tensor[Feat, Batch])
    assert_type(tp.unsqueeze(x, 0), Tensor[One, Batch, Feat])
    assert_type(tp.isnan(x), Tensor[Batch, Feat])
    assert_type(tp.isfinite(x), Tensor[Batch, Feat])
    assert_type(tp.tril(x), Tensor[Batch, Feat])
    assert_type(tp.outer(v, v), Tensor[Feat, Feat])
    assert_type(tp.cumsum(x, 1), Tensor[Batch, Feat])
    assert_type(tp.sort(x), tp.ValuesIndices[Batch, Feat])
    assert_type(tp.topk(x, 2).values, Tensor[Batch, int])
    assert_type(tp.allclose(x, x), bool)
    assert_type(tp.einsum("bf,fh->bh", x, w), Tensor[*tuple[Any, ...]])
    assert_type(tp.chunk(x, 2, 1), tuple[Tensor[*tuple[Any, ...]], ...])
    return tp.matmul(x, w)


def methods(x: Tensor[Batch, Feat]) -> Tensor[Batch, Feat]:
    assert_type(x.all(), Tensor[()])
    assert_type(x.any(-1), Tensor[Batch])
    assert_type(x.std(0), Tensor[Feat])
    assert_type(x.norm(), Tensor[()])
    assert_type(x.norm(2, -1), Tensor[Batch])
    assert_type(x.norm(1, -1, keepdim=True), Tensor[Batch, One])
    assert_type(x.sort(-1, descending=True).indices, Tensor[Batch, Feat])
    assert_type(x.argsort(), Tensor[Batch, Feat])
    assert_type(x.masked_fill(x > 0, 0.0), Tensor[Batch, Feat])
    assert_type(x.int(), Tensor[Batch, Feat])
    assert_type(x.nan_to_num(), Tensor[Batch, Feat])
    assert_type(x.round(), Tensor[Batch, Feat])
    assert_type(x.isinf(), Tensor[Batch, Feat])
    assert_type(x.split(2), tuple[Tensor[*tuple[Any, ...]], ...])
    assert_type(x.amax(-1, keepdim=True), Tensor[Batch, One])
    values, indices = x.max(-1)
    assert_type(values, Tensor[Batch])
    assert_type(indices, Tensor[Batch])
    return x - x.amax(-1, keepdim=True)


def one_hot(labels: Tensor[Batch], c: Classes) -> Tensor[Batch, Classes]:
    hot = tp.nn.functional.one_hot(labels, c)
    assert_type(hot, Tensor[Batch, Classes])
    assert_type(tp.nn.functional.one_hot(labels), Tensor[Batch, int])
    return hot


def main() -> None:
    tp.manual_seed(0)
    b, f, h = Batch(4), Feat(3), Hidden(5)
    x, v, w = tp.randn(b, f), tp.randn(f), tp.randn(f, h)
    assert tuple(functions(x, v, w).shape) == (4, 5)
    assert tuple(methods(x).shape) == (4, 3)
    assert tuple(tp.max(x, -1).values.shape) == (4,)
    assert tuple(tp.einsum("bf,fh->bh", x, w).shape) == (4, 5)
    labels: Tensor[Batch] = tp.tensor([0, 2, 1, 2])
    assert one_hot(labels, Classes(3)).tolist() == [[1, 0, 0], [0, 0, 1], [0, 1, 0], [0, 0, 1]]
