"""Typed data inputs (``Index[Vocab, *S]``) and runtime shape checks (``@tp.shapecheck``)
in a small bag-of-words classifier."""

from __future__ import annotations

from typing import Any, TypeVar, TypeVarTuple, assert_type

import numpy as np

import tensorplay as tp
from tensorplay import Index, Tensor
from tensorplay.dims import Batch, Classes, Feat, Seq, Vocab

Lead = TypeVarTuple("Lead")
V = TypeVar("V")
D = TypeVar("D")


@tp.shapecheck
def embed(table: Tensor[V, D], ids: Index[V, *Lead]) -> Tensor[*Lead, D]:
    """Rows of ``table`` at ``ids``: the bound of ``ids`` is the table's row count."""
    return table[ids]


@tp.shapecheck
def classify(table: Tensor[Vocab, Feat], w: Tensor[Classes, Feat], ids: Index[Vocab, Batch, Seq]
             ) -> Tensor[Batch, Classes]:
    bag = embed(table, ids).mean(1)
    assert_type(bag, Tensor[Batch, Feat])
    return bag @ w.T


def tokens(b: Batch, s: Seq, vocab: Vocab) -> Index[Vocab, Batch, Seq]:
    raw = np.random.default_rng(0).integers(0, vocab, size=(b, s))
    return tp.index(raw, bound=vocab, shape=(b, s))


def main() -> None:
    vocab, f, c, b, s = Vocab(50), Feat(8), Classes(3), Batch(4), Seq(6)
    table, w = tp.randn(vocab, f), tp.randn(c, f)
    ids = tokens(b, s, vocab)
    assert_type(ids.bound, Vocab)
    logits = classify(table, w, ids)
    assert_type(logits, Tensor[Batch, Classes])
    assert tuple(logits.shape) == (4, 3)
    head: Index[Vocab, *tuple[Any, ...]] = ids[:, :2]   # slicing keeps the bound
    assert head.bound == 50
    assert tuple(embed(table, head).shape) == (4, 2, 8)
    try:
        tp.index([[1, 99]], bound=vocab)
    except tp.IndexRangeError:
        pass
    else:
        raise AssertionError("an out-of-range id was accepted")
    try:
        classify(tp.randn(Vocab(40), f), w, ids)   # a table of 40 rows for ids bounded by 50
    except tp.ShapeError:
        pass
    else:
        raise AssertionError("shapecheck accepted a table that does not match the ids' bound")


if __name__ == "__main__":
    main()
