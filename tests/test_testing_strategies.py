"""tensorplay.testing.strategies: tensors and shapes whose named dims agree across one example, drawn
from explicit axes or from a typed function's annotations (checked by @tp.shapecheck)."""

from __future__ import annotations

from typing import Any, Literal, TypeVarTuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

import tensorplay as tp
from tensorplay import Index, Tensor
from tensorplay.dims import Batch, Feat, Hidden, Seq, Vocab
from tensorplay.testing.strategies import arguments, dim_size, shapes, tensors

Lead = TypeVarTuple("Lead")
FAST = settings(max_examples=30, deadline=None)


@tp.shapecheck
def typed(w: Tensor[Hidden, Feat], x: Tensor[*Lead, Feat], ids: Index[Vocab, Batch, Seq], n: Hidden,
          c: Tensor[Literal[3], *tuple[Any, ...]], scale: float = 1.0) -> Tensor[*Lead, Hidden]:
    assert ids.bound >= 1 and n == w.shape[0]
    return (x @ w.T) * scale


@FAST
@given(w=tensors(shape=(Hidden, Feat)), x=tensors(shape=(Batch, Feat)), b=tensors(shape=(Hidden,)),
       n=dim_size(Feat))
def test_named_dims_agree_across_separately_drawn_tensors(w: Any, x: Any, b: Any, n: int) -> None:
    assert w.shape[1] == x.shape[1] == n
    assert b.shape == (w.shape[0],)
    assert all(1 <= d <= 4 for d in (*w.shape, *x.shape))


@FAST
@given(arguments(typed, dtype=tp.float64))
def test_arguments_follow_the_annotations(args: tuple[Any, ...]) -> None:
    w, x, ids, n, c = args
    out = typed(*args)                       # @tp.shapecheck: every draw respects the annotations
    assert out.shape == (*x.shape[:-1], w.shape[0]) and out.dtype == tp.float64
    assert isinstance(ids, Index) and ids.dtype == tp.int64
    values = ids.numpy()
    assert values.size == 0 or (values.min() >= 0 and values.max() < ids.bound)
    assert c.shape[0] == 3 and len(x.shape) <= 3 and isinstance(n, int)


@FAST
@given(shape=shapes((Batch, 2, Literal[5], int)), lead=shapes((*Lead, Feat)), lead2=shapes((*Lead, Hidden)))
def test_shapes_from_axes(shape: tuple[int, ...], lead: tuple[int, ...], lead2: tuple[int, ...]) -> None:
    assert len(shape) == 4 and shape[1:3] == (2, 5)
    assert lead[:-1] == lead2[:-1] and len(lead) <= 3       # *Lead is one run of axes per example


@FAST
@given(shapes(Tensor[Batch, Seq]), shapes(min_dims=2, max_dims=2, min_side=0, max_side=2))
def test_shapes_from_annotations_and_free_shapes(annotated: tuple[int, ...], free: tuple[int, ...]) -> None:
    assert len(annotated) == 2 and len(free) == 2 and all(0 <= d <= 2 for d in free)


@FAST
@given(tensors(tp.int32, shape=(2, 3), elements=st.integers(0, 1)), tensors(tp.bool, shape=(4,)),
       tensors(tp.float32, shape=st.just((3,))))
def test_dtypes_and_elements(i: Any, b: Any, f: Any) -> None:
    assert i.dtype == tp.int32 and set(np.unique(i.numpy())) <= {0, 1}
    assert b.dtype == tp.bool and f.dtype == tp.float32 and f.shape == (3,)
    assert np.all(np.abs(f.numpy()) <= 10)


@FAST
@given(arguments(typed, fixed={"n": Hidden(2)}, dtype=tp.float64))
def test_fixed_values(args: tuple[Any, ...]) -> None:
    w, _, _, n, _ = args
    assert n == 2


def test_unsupported_annotation_and_fixed_names_are_errors() -> None:
    def untyped(x, flag: bool):  # type: ignore[no-untyped-def]
        return x

    with pytest.raises(InvalidArgument, match="cannot draw parameter 'x'"):
        arguments(untyped).example()
    with pytest.raises(InvalidArgument, match="fixed names no positional parameter: nope"):
        arguments(typed, fixed={"nope": 1}).example()


def test_a_dim_drawn_with_other_bounds_is_an_error() -> None:
    @settings(max_examples=20, deadline=None)
    @given(st.tuples(dim_size(Seq, min_side=4, max_side=4), dim_size(Seq, min_side=1, max_side=2)))
    def inconsistent(sizes: tuple[int, int]) -> None:
        pass

    with pytest.raises(InvalidArgument, match="the dim Seq has size 4 in this example .* outside this strategy's "
                                              r"range \[1, 2\]"):
        inconsistent()
