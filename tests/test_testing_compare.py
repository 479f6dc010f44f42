"""tensorplay.testing.assert_close: what is compared, the default tolerances, and the failure report
(shape, mismatch count and fraction, largest absolute and relative difference and their index)."""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.graph import trace
from tensorplay.testing import NotCloseError, assert_close, default_tolerances

torch = pytest.importorskip("torch")


def failure(actual: Any, expected: Any, **kw: Any) -> NotCloseError:
    with pytest.raises(NotCloseError) as info:
        assert_close(actual, expected, **kw)
    assert isinstance(info.value, AssertionError)
    return info.value


# ---- what passes ---------------------------------------------------------------------------------

def test_equal_values_of_every_leaf_kind_pass() -> None:
    x = tp.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert_close(x, x.numpy().copy())
    assert_close(x * 3, [[3.0, 6.0], [9.0, 12.0]])                      # a list literal is weak
    assert_close(tp.tensor(2.5), 2.5)                                    # a Python number is weak
    assert_close(x, torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True))
    assert_close(tp.tensor([1, 2]), np.array([1, 2]))
    assert_close(tp.tensor([True, False]), np.array([True, False]))
    assert_close(x.requires_grad_(), x.detach())                        # requires_grad is not compared here


def test_pytrees_pass_leaf_by_leaf() -> None:
    Pair = namedtuple("Pair", "a b")
    tree = {"w": [tp.ones(2), (tp.zeros(1), None)], "p": Pair(tp.ones(3), "tag"), "n": 3}
    same = {"p": Pair(np.ones(3, np.float32), "tag"), "w": [tp.ones(2), (tp.zeros(1), None)], "n": 3}
    assert_close(tree, same)                                             # dict order does not matter


def test_float32_defaults_are_rtol_1_3e_6_and_atol_1e_5() -> None:
    assert default_tolerances(tp.float32) == (1.3e-6, 1e-5)
    assert default_tolerances(np.float64) == (1e-7, 1e-7)
    assert default_tolerances(tp.float32, tp.float64) == (1.3e-6, 1e-5)  # the looser one
    assert default_tolerances(tp.int64, tp.bool) == (0.0, 0.0)
    e = np.array([1000.0], np.float32)
    assert_close(tp.tensor(e + np.float32(1e-3)), e)           # within 1e-5 + 1.3e-6 * 1000
    failure(tp.tensor(e + np.float32(2e-3)), e)                # outside
    assert_close(tp.tensor([0.0]), np.array([9e-6], np.float32))
    failure(tp.tensor([0.0]), np.array([2e-5], np.float32))


def test_float64_defaults_are_tighter() -> None:
    e = np.array([1.0])
    assert_close(e + 1.5e-7, e)
    failure(e + 3e-7, e)


def test_only_rtol_given_keeps_the_default_atol() -> None:
    assert_close(tp.tensor([0.0]), np.array([5e-6], np.float32), rtol=0.0)
    failure(tp.tensor([0.0]), np.array([5e-6], np.float32), rtol=0.0, atol=0.0)


def test_integers_compare_exactly_and_nan_inf_rules() -> None:
    failure(tp.tensor([1, 2]), np.array([1, 3]))
    assert_close(np.array([np.inf, -np.inf]), np.array([np.inf, -np.inf]))
    failure(np.array([np.inf]), np.array([-np.inf]))
    failure(np.array([np.nan]), np.array([np.nan]))
    assert_close(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]), equal_nan=True)
    failure(np.array([np.nan]), np.array([1.0]), equal_nan=True)


# ---- the report ----------------------------------------------------------------------------------

def test_value_report_gives_count_fraction_largest_differences_and_indices() -> None:
    actual = tp.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    expected = np.array([[1.0, 2.5, 3.0], [4.0, 5.0, 5.0]], np.float32)
    error = failure(actual, expected)
    assert (error.kind, error.path, error.mismatched, error.total) == ("values", "", 2, 6)
    assert error.max_abs_diff == pytest.approx(1.0) and error.max_abs_index == (1, 2)
    assert error.max_rel_diff == pytest.approx(0.2) and error.max_rel_index == (0, 1)
    assert str(error).splitlines() == [
        "values differ (shape [2, 3], dtype float32):",
        "  2 of 6 elements (33.3%) differ by more than atol + rtol * |expected| (rtol=1.3e-06, atol=1e-05)",
        "  largest absolute difference: 1 at index (1, 2) (actual 6.0, expected 5.0)",
        "  largest relative difference: 0.2 at index (0, 1) (actual 2.0, expected 2.5)",
    ]


def test_report_names_the_leaf_path_and_nan_mismatches() -> None:
    error = failure({"a": [tp.zeros(2), tp.tensor([1.0, float("nan"), 3.0])]},
                    {"a": [tp.zeros(2), tp.tensor([1.0, 2.0, 4.0])]})
    assert error.path == "['a'][1]"
    lines = str(error).splitlines()
    assert lines[0] == "values differ at leaf ['a'][1] (shape [3], dtype float32):"
    assert "2 of 3 elements (66.7%)" in lines[1]
    assert lines[2].startswith("  largest absolute difference: 1 at index (2,)")
    assert lines[-1] == "  1 mismatch involves NaN or inf, the first at index (1,) (actual nan, expected 2.0)"


def test_relative_difference_against_zero_is_inf() -> None:
    error = failure(np.array([0.0, 1.0]), np.array([0.0, 0.0]))
    assert error.max_rel_diff == float("inf") and error.max_rel_index == (1,)


def test_shape_dtype_structure_and_type_reports() -> None:
    error = failure(tp.zeros(2, 3), tp.zeros(3, 2))
    assert (error.kind, str(error)) == ("shape", "shapes differ: actual [2, 3], expected [3, 2]")
    error = failure((tp.zeros(2),), (tp.zeros(2, dtype=tp.float64),))
    assert error.kind == "dtype" and error.path == "[0]"
    assert str(error) == ("dtypes differ at leaf [0]: actual float32, expected float64 (pass check_dtype=False "
                          "to compare the values only)")
    assert_close((tp.zeros(2),), (tp.zeros(2, dtype=tp.float64),), check_dtype=False)
    error = failure([tp.zeros(1)], [tp.zeros(1), tp.zeros(1)])
    assert error.kind == "structure" and "actual is a list of 1, expected a list of 2" in str(error)
    error = failure({"a": tp.zeros(1)}, {"b": tp.zeros(1)})
    assert error.kind == "structure" and "missing 'b'; unexpected 'a'" in str(error)
    error = failure((tp.zeros(1), None), (tp.zeros(1), tp.zeros(1)))
    assert error.kind == "type" and error.path == "[1]"
    error = failure(("x",), ("y",))
    assert str(error) == "values differ at leaf [0]: actual 'x', expected 'y'"


def test_msg_string_comes_first_and_a_callable_rewrites() -> None:
    error = failure(tp.zeros(1), tp.ones(1), msg="layer 3 output")
    assert str(error).splitlines()[0] == "layer 3 output"
    assert str(error).splitlines()[1].startswith("values differ")
    error = failure(tp.zeros(1), tp.ones(1), msg=lambda report: report.upper())
    assert str(error).startswith("VALUES DIFFER") and error.mismatched == 1


def test_a_symbolically_traced_tensor_has_no_values() -> None:
    seen = []

    def keep(x: Any) -> Any:
        seen.append(x)
        return x

    trace(keep, tp.zeros(2))
    with pytest.raises(TypeError, match="has no values to compare"):
        assert_close(seen[0], np.zeros(2, np.float32))
