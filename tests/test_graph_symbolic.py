"""Symbolic dims (``tensorplay.symbolic``): canonical algebra, equality and hashing, printing,
parsing, evaluation under a binding, and the refusals that explain what needs a value."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from tensorplay.errors import GraphCaptureError
from tensorplay.symbolic import SymDim, bind_shape, check_shape, parse_dim, sym, symbols


def test_arithmetic_is_canonical() -> None:
    B, T = symbols("B T")
    assert (2 * B + 1 - B) == B + 1
    assert (B + 3) - B == 3 and isinstance((B + 3) - B, int)
    assert B * 784 // 784 == B
    assert (B * 784) // B == 784
    assert B * T == T * B
    assert (B + T) * 2 == 2 * B + 2 * T
    assert B - B == 0
    assert B * np.int64(3) == 3 * B


def test_equality_and_hashing() -> None:
    B = sym("B")
    assert hash(B + 1) == hash(1 + B)
    assert {B + 1: "x"}[sym("B") + 1] == "x"
    assert B != sym("C") and B != 3 and not (B == 3)
    assert B.is_symbol and B.name == "B"
    assert not (2 * B).is_symbol
    assert (2 * B + sym("C")).free_symbols == frozenset({"B", "C"})


def test_floor_division_normal_form() -> None:
    H = sym("H")
    # conv/pool output size (H + 2p - k)//s + 1 with p=1, k=3, s=2
    out = (H + 2 * 1 - 3) // 2 + 1
    assert str(out) == "(H + 1)//2"
    assert out.evaluate({"H": 7}) == (7 + 2 - 3) // 2 + 1
    assert (3 * H) // 2 == H + H // 2
    assert (H // 2) // 3 == H // 6
    assert (2 * H + 4) // 2 == H + 2
    for h in range(0, 20):
        for expr, ref in [((H - 1) // 2 + 1, (h - 1) // 2 + 1), ((3 * H + 1) // 4, (3 * h + 1) // 4),
                          (H % 4, h % 4), (-(H // 3) + H, h - h // 3)]:
            value = expr.evaluate({"H": h}) if isinstance(expr, SymDim) else expr
            assert value == ref


def test_str_is_readable_valid_python() -> None:
    B, H = symbols("B H")
    cases = [2 * B + 1, B - 1, -B + 3, B * H, -(B // 2), 3 * ((H + 1) // 2) + B * H - 4, 1 - H // 3]
    for expr in cases:
        assert parse_dim(str(expr)) == expr
        assert eval(str(expr), {"B": 5, "H": 9}) == expr.evaluate({"B": 5, "H": 9})  # noqa: S307
    assert str(2 * B + 1) == "2*B + 1"
    assert repr(B + 1) == "B + 1"


def test_comparisons_decided_by_sizes_being_non_negative() -> None:
    B = sym("B")
    assert B + 1 > 0 and B >= 0 and not (B < 0) and B + 2 > 1
    assert -B - 1 < 0
    with pytest.raises(GraphCaptureError, match="cannot decide B > 1"):
        _ = B > 1
    with pytest.raises(GraphCaptureError, match="cannot decide"):
        bool(B - 1)


def test_int_and_len_are_refused_with_advice() -> None:
    B = sym("B")
    with pytest.raises(GraphCaptureError, match="symbolic dim B.*shape arithmetic"):
        int(B)
    with pytest.raises(GraphCaptureError, match="symbolic dim B"):
        range(B)  # type: ignore[call-overload]
    with pytest.raises(GraphCaptureError, match="divides by a symbolic size"):
        _ = 10 // B
    with pytest.raises(GraphCaptureError, match="cannot divide"):
        _ = (B + 1) // sym("C")


def test_evaluate_subs_and_bindings() -> None:
    B, T = symbols("B T")
    assert (2 * B + T).evaluate({"B": 3, "T": 4}) == 10
    assert (2 * B + T).subs({"B": 3}) == T + 6
    with pytest.raises(KeyError, match="T"):
        (B + T).evaluate({"B": 1})
    binding: dict[str, object] = {}
    bind_shape((B, 2 * T + 1, 3), (4, 7, 3), binding, "x")
    assert binding == {"B": 4, "T": 3}
    check_shape((B, 2 * T + 1, 3), (4, 7, 3), binding, "x")
    with pytest.raises(ValueError, match="axis 1 has size 8, which is not of the form 2\\*T \\+ 1"):
        bind_shape((B, 2 * T + 1), (4, 8), {}, "x")
    with pytest.raises(ValueError, match="axis 1 has size 5, expected 4 \\(= B\\)"):
        check_shape((B, B), (4, 5), {"B": 4}, "x")


def test_names_must_be_identifiers_and_pickling_round_trips() -> None:
    with pytest.raises(ValueError, match="identifier"):
        sym("2x")
    expr = 2 * sym("B") + 1
    assert pickle.loads(pickle.dumps(expr)) == expr
    with pytest.raises(ValueError, match="not a dim expression"):
        parse_dim("B ** 2")
