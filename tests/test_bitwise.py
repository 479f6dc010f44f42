"""``~``, ``&``, ``|``, ``^``: bitwise on integer tensors, logical on bool tensors, an error on floats (as
PyTorch), with the same values and dtypes as PyTorch, under every interpreter and transform."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.func as F
from tensorplay.testing import check_interpreters

INTS = np.array([[0, 6, -7, 12], [2**40, -1, 5, 3]], np.int64)
OTHER = np.array([3, -2, 12, 2**33 + 1], np.int64)
BOOLS = np.array([[True, False, True, False]])
OPERATORS: dict[str, Callable[[Any, Any], Any]] = {"&": operator.and_, "|": operator.or_, "^": operator.xor}


def _same(ours: tp.Tensor[*tuple[Any, ...]], theirs: torch.Tensor) -> None:
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch."), (ours.dtype, theirs.dtype)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_invert_matches_pytorch(dtype: str) -> None:
    values = (INTS % 1000).astype(dtype) if dtype != "bool" else BOOLS
    _same(~tp.tensor(values), ~torch.tensor(values))


@pytest.mark.parametrize("symbol", OPERATORS)
@pytest.mark.parametrize("left, right", [
    (INTS, OTHER), (INTS.astype(np.int32), OTHER), (BOOLS, np.array([True, True, False, False])),
    (INTS, 5), (BOOLS, True), (BOOLS, 3), (INTS.astype(np.int32), -9), (BOOLS, INTS),
], ids=["int64", "int32-int64", "bool", "int-scalar", "bool-scalar-bool", "bool-int-scalar", "int32-scalar",
        "bool-int64"])
def test_binary_operators_match_pytorch(symbol: str, left: Any, right: Any) -> None:
    op = OPERATORS[symbol]
    ours_right = tp.tensor(right) if isinstance(right, np.ndarray) else right
    theirs_right = torch.tensor(right) if isinstance(right, np.ndarray) else right
    _same(op(tp.tensor(left), ours_right), op(torch.tensor(left), theirs_right))
    if not isinstance(right, np.ndarray):  # the scalar on the left: the reflected operator
        _same(op(right, tp.tensor(left)), op(right, torch.tensor(left)))


def test_floats_are_refused_with_a_clear_error() -> None:
    x = tp.tensor([1.0, 2.0])
    with pytest.raises(tp.DTypeError, match=r"bitwise_not: x must be an integer or bool tensor, got float32"):
        ~x
    for op in OPERATORS.values():
        with pytest.raises(tp.DTypeError, match=r"operands must be integer or bool.*float32\[2\]"):
            op(x, tp.tensor([1, 2]))
        with pytest.raises(tp.DTypeError, match=r"y: a Python float"):
            op(tp.tensor([1, 2]), 1.5)
    with pytest.raises(tp.DTypeError, match="bitwise_and"):  # refused while recording too, at the user's line
        tp.graph.trace(lambda v: v & v, x)


def test_masks_still_combine_logically() -> None:
    a, b = tp.tensor([1.0, -2.0, 3.0]), tp.tensor([0.5, 0.5, -1.0])
    np.testing.assert_array_equal(((a > 0) & (b > 0)).numpy(), [True, False, False])
    np.testing.assert_array_equal(((a > 0) | ~(b > 0)).numpy(), [True, False, True])
    np.testing.assert_array_equal(((a > 0) ^ (b > 0)).numpy(), [False, True, True])


def _bitwise(x: tp.Tensor[*tuple[Any, ...]], y: tp.Tensor[*tuple[Any, ...]],
             m: tp.Tensor[*tuple[Any, ...]]) -> dict[str, Any]:
    return {"not": ~x, "and": x & y, "or": x | 6, "xor": 3 ^ x, "bool": ~m & (m | (y > 0)) ^ m}


def test_every_interpreter() -> None:
    ways = check_interpreters(_bitwise, tp.tensor(INTS), tp.tensor(OTHER), tp.tensor(BOOLS), grads=False)
    assert "vmap" in ways and "graph_module" in ways


def test_inside_transforms() -> None:
    """A bitwise mask inside a differentiated function: no derivative through it, the float path still
    differentiates (grad, jvp, vmap, nested)."""
    ids = tp.tensor([1, 2, 3, 4])

    def f(w: tp.Tensor[*tuple[Any, ...]]) -> tp.Tensor[()]:
        odd = (ids & 1).bool()
        return tp.where(odd, w * w, w).sum()

    w = tp.tensor([1.0, 2.0, 3.0, 4.0])
    expected = np.where(np.array([1, 2, 3, 4]) & 1, 2 * w.numpy(), 1.0)
    np.testing.assert_allclose(F.grad(f)(w).numpy(), expected)
    _, tangent = F.jvp(f, (w,), (tp.ones(4),))
    assert tangent.item() == pytest.approx(float(expected.sum()))
    per_row = F.vmap(F.grad(f))(tp.stack([w, w * 2]))
    np.testing.assert_allclose(per_row.numpy()[1], np.where(np.array([1, 2, 3, 4]) & 1, 4 * w.numpy(), 1.0))
    batched = F.vmap(lambda a, b: a ^ ~b)(tp.tensor(INTS), tp.tensor(INTS[::-1].copy()))
    np.testing.assert_array_equal(batched.numpy(), INTS ^ ~INTS[::-1])
