"""Broadcasts written with the smaller operand first (``bias + x``, ``x.sum() * x``,
``x.sum(-1, keepdim=True) / x``) and a vector on the left of ``@`` type as their mirrored forms do:
correct programs that mypy used to reject ("Unsupported operand types")."""

from __future__ import annotations

from typing import Literal, assert_type

import tensorplay as tp
from tensorplay import Tensor
from tensorplay.dims import Batch, Feat, Hidden, Seq


def bias_first(x: Tensor[Batch, Seq, Feat], b: Tensor[Feat]) -> Tensor[Batch, Seq, Feat]:
    assert_type(b + x, Tensor[Batch, Seq, Feat])
    assert_type(b - x, Tensor[Batch, Seq, Feat])
    assert_type(b * x, Tensor[Batch, Seq, Feat])
    assert_type(b / x, Tensor[Batch, Seq, Feat])
    return b + x


def scalar_tensor_first(x: Tensor[Batch, Feat]) -> Tensor[Batch, Feat]:
    total = x.sum()
    assert_type(total * x, Tensor[Batch, Feat])
    assert_type(total - x, Tensor[Batch, Feat])
    return total / x + total


def kept_axis_first(x: Tensor[Batch, Feat]) -> Tensor[Batch, Feat]:
    row = x.sum(-1, keepdim=True)
    assert_type(row, Tensor[Batch, Literal[1]])
    assert_type(row / x, Tensor[Batch, Feat])
    assert_type(row - x, Tensor[Batch, Feat])
    col = x.mean(0, keepdim=True)
    assert_type(col * x, Tensor[Batch, Feat])
    return row + x


def vector_times_matrix(v: Tensor[Feat], w: Tensor[Feat, Hidden], ws: Tensor[Batch, Feat, Hidden]) -> Tensor[Hidden]:
    assert_type(v @ ws, Tensor[Batch, Hidden])
    return v @ w


def main() -> None:
    b, s, f, h = Batch(2), Seq(3), Feat(4), Hidden(5)
    x, bias = tp.randn(b, s, f), tp.randn(f)
    assert tuple(bias_first(x, bias).shape) == (2, 3, 4)
    x2 = tp.rand(b, f) + 1.0
    assert tuple(scalar_tensor_first(x2).shape) == (2, 4)
    assert tuple(kept_axis_first(x2).shape) == (2, 4)
    v, w, ws = tp.randn(f), tp.randn(f, h), tp.randn(b, f, h)
    assert tuple(vector_times_matrix(v, w, ws).shape) == (5,)
    assert tuple((v @ ws).shape) == (2, 5)
