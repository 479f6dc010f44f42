"""``tp.index`` / ``Index[Bound, *S]``: bounded integer data inputs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F
from tensorplay import Index
from tensorplay.dims import Batch, Classes, Seq, Vocab
from tensorplay.graph import trace


def test_made_from_lists_arrays_and_tensors() -> None:
    a = tp.index([[1, 2], [3, 4]], bound=Vocab(10))
    assert isinstance(a, Index) and isinstance(a, tp.Tensor)
    assert a.bound == 10 and a.dtype == tp.int64 and tuple(a.shape) == (2, 2)
    assert a.tolist() == [[1, 2], [3, 4]]
    b = tp.index(np.array([0, 9], dtype=np.int32), bound=10)
    assert b.dtype == tp.int64 and b.tolist() == [0, 9]
    t = tp.tensor([3, 4])
    c = tp.index(t, bound=5)
    assert c.tolist() == [3, 4]
    t[0] = 7                                # a private copy: the Index cannot go out of range later
    assert c.tolist() == [3, 4]
    assert tuple(tp.index(np.zeros((0, 3), dtype=np.int64), bound=0).shape) == (0, 3)


def test_out_of_range_values_are_rejected_when_made() -> None:
    with pytest.raises(tp.IndexRangeError, match=r"index: value 10 at position \[1, 0\] is out of range; "
                                                 r"expected 0 <= value < 10"):
        tp.index([[1, 2], [10, 3]], bound=Vocab(10))
    with pytest.raises(tp.IndexRangeError, match=r"value -1 at position \[0\]"):
        tp.index([-1, 2], bound=3)
    with pytest.raises(IndexError):         # IndexRangeError is an IndexError
        tp.index(tp.tensor([5]), bound=5)


def test_non_integer_values_and_bad_bounds_are_refused() -> None:
    with pytest.raises(tp.DTypeError, match="values must be integers"):
        tp.index([0.5, 1.0], bound=3)
    with pytest.raises(tp.DTypeError, match="values must be integers"):
        tp.index([True, False], bound=3)
    with pytest.raises(tp.DTypeError, match="float32 tensor"):
        tp.index(tp.randn(3), bound=3)
    with pytest.raises(tp.DTypeError, match="bound must be an int"):
        tp.index([1], bound=2.5)  # type: ignore[call-overload]
    with pytest.raises(tp.ShapeError, match="bound must be >= 0"):
        tp.index([], bound=-1)


def test_shape_is_checked_when_given() -> None:
    ids = tp.index([[1, 2, 3]], bound=Vocab(5), shape=(Batch(1), Seq(3)))
    assert tuple(ids.shape) == (1, 3)
    with pytest.raises(tp.ShapeError, match=r"values have shape \[1, 3\], but shape=\[3, 1\] was given"):
        tp.index([[1, 2, 3]], bound=Vocab(5), shape=(Seq(3), Batch(1)))
    assert tuple(ids.with_shape(Batch(1), Seq(3)).shape) == (1, 3)
    with pytest.raises(tp.ShapeError):
        ids.with_shape(Batch(3), Seq(1))


def test_never_differentiated() -> None:
    ids = tp.index([1, 2], bound=3)
    assert ids.requires_grad is False
    with pytest.raises(tp.AutogradError, match="never differentiated"):
        ids.requires_grad_()
    with pytest.raises(tp.AutogradError):
        ids.requires_grad = True
    ids.requires_grad_(False)
    with pytest.raises(tp.AutogradError, match="require grad"):
        tp.index(_int_requiring_grad(), bound=3)


def _int_requiring_grad() -> tp.Tensor[*tuple[Any, ...]]:
    t = tp.tensor([1, 2])
    t._requires_grad = True                  # integer tensors cannot normally require grad
    return t


def test_indexing_keeps_the_bound_and_arithmetic_gives_plain_tensors() -> None:
    ids = tp.index([[1, 2, 3], [4, 5, 6]], bound=Vocab(7))
    head = ids[:, :2]
    assert isinstance(head, Index) and head.bound == 7 and head.tolist() == [[1, 2], [4, 5]]
    row = ids[1]
    assert isinstance(row, Index) and row.tolist() == [4, 5, 6]
    shifted = ids + 1
    assert type(shifted) is tp.Tensor       # values may leave the range: no longer an Index
    assert "bound=7" in repr(ids)


def test_embedding_and_cross_entropy_take_index_tensors() -> None:
    tp.manual_seed(0)
    emb = nn.Embedding(Vocab(6), 4)
    ids = tp.index([[0, 5], [2, 3]], bound=Vocab(6))
    out = emb(ids)
    assert tuple(out.shape) == (2, 2, 4)
    assert np.allclose(out.detach().numpy()[0, 1], emb.weight.detach().numpy()[5])
    logits = tp.randn(Batch(3), Classes(4), requires_grad=True)
    y = tp.index([0, 3, 1], bound=Classes(4))
    loss = F.cross_entropy(logits, y)
    loss.backward()
    assert logits.grad is not None and tuple(logits.grad.shape) == (3, 4)
    ref = F.cross_entropy(logits.detach(), tp.tensor([0, 3, 1]))
    assert abs(float(loss) - float(ref)) < 1e-6


def test_flows_through_the_graph_recorder_as_a_data_input() -> None:
    table = tp.randn(10, 4)
    seen = []

    def f(ids: Index[Vocab, Batch, Seq]) -> tp.Tensor[Batch, Seq]:
        seen.append((type(ids), ids.bound))
        return F.embedding(ids, table).sum(-1)

    ids = tp.index([[1, 2], [3, 9]], bound=Vocab(10))
    gm = trace(f, ids)
    assert seen == [(Index, 10)]                           # the traced function sees an Index
    assert gm.graph.user_inputs[0].meta["index_bound"] == 10
    assert np.allclose(gm(ids).numpy(), f(ids).numpy())
    with pytest.raises(tp.IndexRangeError, match=r"graph input 'ids': value 10 at position \[1, 1\] is out of "
                                                 r"range; it was traced as an index tensor with bound 10"):
        gm(tp.tensor([[1, 2], [3, 10]]))


def test_executes_under_execute_mode_recording() -> None:
    ids = tp.index([0, 1, 2], bound=3)
    gm = trace(lambda i: i * 2, ids, execute=True)
    assert gm(ids).tolist() == [0, 2, 4]
