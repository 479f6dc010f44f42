"""The eager interpreter's fast path for integer and bool binary operations (index arithmetic: ``vmap``'s
gathers and scatters) gives exactly what the spec's reference gives: values, dtype and shape, for arrays of
one dtype, Python ints at the edges of what the fast path takes (and beyond, where the checked path answers),
broadcasting, 0-d and empty operands, and the same errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from spec import SPECS
from tensorplay.errors import TensorplayError
from tensorplay.interpreters.eager.interpreter import _SAME_BOOL_KERNELS, _SAME_INT_KERNELS

INT_DTYPES = ("int32", "int64")
COMPARISONS = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})
SCALARS = (0, 3, -7, 2 ** 31 - 1, -(2 ** 31), 2 ** 31, -(2 ** 31) - 1, 2 ** 40)


def _ints(dtype: str, shape: tuple[int, ...], seed: int) -> np.ndarray[Any, Any]:
    gen = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    values = gen.integers(-50, 50, shape).astype(dtype)
    if values.size > 2:  # the extremes too: wrap-around must match the reference
        values.flat[0], values.flat[1] = info.max, info.min
    return values


def _expect_same(name: str, x: Any, y: Any) -> None:
    def wrap(v: Any) -> Any:
        return tp.tensor(v) if isinstance(v, np.ndarray) else v
    try:
        expected = SPECS[name].reference(x, y)
    except Exception as error:  # the reference refuses: eager refuses with an error of the same kind
        with pytest.raises(Exception) as raised:
            getattr(tp.eager, name)(wrap(x), wrap(y))
        assert type(raised.value).__name__ == type(error).__name__, (raised.value, error)
        return
    got = getattr(tp.eager, name)(wrap(x), wrap(y))._data
    assert got.dtype == expected.dtype, (name, got.dtype, expected.dtype)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("name", sorted(_SAME_INT_KERNELS))
def test_int_arrays_of_one_dtype_match_the_reference(name: str, dtype: str) -> None:
    for shape_x, shape_y in (((5, 4), (5, 4)), ((5, 1), (1, 4)), ((), (3,)), ((0, 3), (1, 3)), ((), ())):
        _expect_same(name, _ints(dtype, shape_x, 1), _ints(dtype, shape_y, 2))


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("name", sorted(_SAME_INT_KERNELS))
def test_int_array_and_python_int_match_the_reference(name: str, dtype: str) -> None:
    x = _ints(dtype, (6,), 3)
    info = np.iinfo(dtype)
    for scalar in SCALARS:
        if info.min <= scalar <= info.max or name in COMPARISONS:  # comparing with any int is exact
            _expect_same(name, x, scalar)
            _expect_same(name, scalar, x)
        else:  # a scalar the dtype cannot hold: the checked path's clear error, not a wrapped-around value
            for args in ((tp.tensor(x), scalar), (scalar, tp.tensor(x))):
                with pytest.raises(OverflowError, match=f"does not fit {dtype}"):
                    getattr(tp.eager, name)(*args)


@pytest.mark.parametrize("name", sorted(_SAME_INT_KERNELS))
def test_mixed_int_dtypes_and_bool_scalars_take_the_checked_path(name: str) -> None:
    _expect_same(name, _ints("int32", (4,), 4), _ints("int64", (4,), 5))
    _expect_same(name, _ints("int64", (4,), 6), True)


@pytest.mark.parametrize("name", sorted(_SAME_BOOL_KERNELS))
def test_bool_arrays_match_the_reference(name: str) -> None:
    gen = np.random.default_rng(7)
    for shape_x, shape_y in (((8,), (8,)), ((2, 1), (1, 3)), ((0,), (1,))):
        _expect_same(name, gen.random(shape_x) < 0.5, gen.random(shape_y) < 0.5)
    _expect_same(name, np.array([True, False]), 1)


def test_shape_mismatch_is_the_rules_error() -> None:
    with pytest.raises(TensorplayError, match="add"):
        tp.eager.add(tp.tensor(np.arange(3)), tp.tensor(np.arange(4)))


def test_user_inputs_are_not_mutated() -> None:
    x = np.arange(6, dtype=np.int64)
    y = np.arange(6, dtype=np.int64)[::-1]  # a non-contiguous view
    before_x, before_y = x.copy(), y.copy()
    for name in sorted(_SAME_INT_KERNELS):
        _expect_same(name, x, y)
    np.testing.assert_array_equal(x, before_x)
    np.testing.assert_array_equal(y, before_y)


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_where_of_an_int_tensor_and_a_python_int_matches_the_reference(dtype: str) -> None:
    """``where(cond, int tensor, python int)`` (index masking, ``where(valid, t, 0)``): the reference's values and
    dtype for every scalar the dtype holds, broadcasting, 0-d and empty operands; the checked path's
    OverflowError for one it cannot hold."""
    info = np.iinfo(dtype)
    for shape_c, shape_x in (((6,), (6,)), ((2, 1), (1, 3)), ((), ()), ((0, 3), (1, 3))):
        x = _ints(dtype, shape_x, 5)
        cond = np.random.default_rng(6).random(shape_c) > 0.5
        for scalar in SCALARS:
            if info.min <= scalar <= info.max:
                expected = SPECS["where"].reference(cond, x, scalar)
                got = tp.eager.where(tp.tensor(cond), tp.tensor(x), scalar)._data
                assert got.dtype == expected.dtype and got.shape == expected.shape, (got.dtype, expected.dtype)
                np.testing.assert_array_equal(got, expected)
            else:
                with pytest.raises(OverflowError, match=f"does not fit {dtype}"):
                    tp.eager.where(tp.tensor(cond), tp.tensor(x), scalar)
    with pytest.raises(TensorplayError):  # shapes that do not broadcast: the rule's error
        tp.eager.where(tp.tensor(np.ones(3, bool)), tp.tensor(np.ones(4, dtype)), 0)
