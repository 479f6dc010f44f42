"""``tp.logsumexp(x, dim, keepdim)`` and ``x.logsumexp(...)`` are typed like the other reductions: mypy infers
the result shapes below (``assert_type``) for dims ``0``, ``1``, ``-1`` and ``-2`` with and without
``keepdim``; a tuple of dims gives an untyped shape. ``main()`` runs them against the shapes at run time."""

from __future__ import annotations

from typing import Any, Literal, assert_type

import tensorplay as tp
from tensorplay import Tensor
from tensorplay.dims import Batch, Feat, Hidden

One = Literal[1]


def reduce(x: Tensor[Batch, Hidden, Feat]) -> list[Tensor[*tuple[Any, ...]]]:
    last = assert_type(x.logsumexp(-1), Tensor[Batch, Hidden])
    last_kept = assert_type(x.logsumexp(-1, keepdim=True), Tensor[Batch, Hidden, One])
    second_last = assert_type(tp.logsumexp(x, -2), Tensor[Batch, Feat])
    second_last_kept = assert_type(tp.logsumexp(x, -2, keepdim=True), Tensor[Batch, One, Feat])
    first = assert_type(x.logsumexp(0), Tensor[Hidden, Feat])
    first_kept = assert_type(tp.logsumexp(x, 0, True), Tensor[One, Hidden, Feat])
    second = assert_type(x.logsumexp(1), Tensor[Batch, Feat])
    second_kept = assert_type(x.logsumexp(1, keepdim=True), Tensor[Batch, One, Feat])
    several = x.logsumexp((0, 2))
    return [last, last_kept, second_last, second_last_kept, first, first_kept, second, second_kept, several]


def log_softmax(x: Tensor[Batch, Feat]) -> Tensor[Batch, Feat]:
    """``x - logsumexp(x)`` keeps the shape."""
    return x - x.logsumexp(-1, keepdim=True)


def main() -> None:
    tp.manual_seed(0)
    x = tp.randn(Batch(2), Hidden(3), Feat(4))
    shapes = [tuple(t.shape) for t in reduce(x)]
    assert shapes == [(2, 3), (2, 3, 1), (2, 4), (2, 1, 4), (3, 4), (1, 3, 4), (2, 4), (2, 1, 4), (3,)], shapes
    y = x[:, 0]
    assert tp.allclose(log_softmax(y), y.log_softmax(-1), atol=1e-6)
