"""tensorplay.testing.check_grads and the finite differences under it: correct derivatives pass (first
and second order, pytrees, fixed integer arguments), wrong ones fail naming the mode and the argument."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.func as F
from tensorplay.testing import NotCloseError, assert_close, check_grads, numerical_jvp, numerical_vjp
from tensorplay.testing.grads import _label


def cubic_with_a_constant_first_derivative(v: Any) -> Any:
    """``v ** 3`` whose first derivative is right but detached: every second derivative is wrong."""
    c = v.detach()
    return (c ** 3 + 3 * c ** 2 * (v - c)).sum()


# ---- finite differences --------------------------------------------------------------------------

def test_numerical_jvp_is_the_directional_derivative() -> None:
    x, y = np.array([0.5, -1.0, 2.0]), np.array([[1.0, 2.0], [3.0, 4.0]])
    v = np.array([1.0, 2.0, -1.0])
    got = numerical_jvp(lambda a, b, k: {"s": a.sin() * k, "m": b @ b, "i": tp.tensor([1, 2])},
                        (tp.tensor(x), y, 3.0), (v, None, None))
    assert_close(got["s"], 3.0 * np.cos(x) * v, rtol=1e-8, atol=1e-9)
    assert_close(got["m"], np.zeros((2, 2)), atol=1e-9)     # b held fixed
    assert got["i"] is None                                  # an integer output has no derivative


def test_numerical_vjp_entrywise_against_the_analytic_gradient() -> None:
    w, x = np.random.default_rng(0).standard_normal((3, 2)), np.random.default_rng(1).standard_normal((4, 2))
    ct = np.random.default_rng(2).standard_normal((4, 3))
    gw, gx = numerical_vjp(lambda a, b: (b @ a.T).tanh(), (w, x), ct)
    inner = 1 - np.tanh(x @ w.T) ** 2
    assert_close(gw, (ct * inner).T @ x, rtol=1e-7, atol=1e-9)
    assert_close(gx, (ct * inner) @ w, rtol=1e-7, atol=1e-9)
    none, only_x = numerical_vjp(lambda a, b: (b @ a.T).tanh(), (w, x), ct, argnums=1)
    assert none is None and np.array_equal(only_x, gx)


def test_numerical_differences_check_their_inputs() -> None:
    with pytest.raises(ValueError, match="tangents must have the structure of the primals"):
        numerical_jvp(lambda a: a, (tp.ones(2),), (np.ones(2), np.ones(2)))
    with pytest.raises(ValueError, match=r"tangents leaf 0 has shape \[3\], expected \[2\]"):
        numerical_jvp(lambda a: a, (tp.ones(2),), (np.ones(3),))
    with pytest.raises(TypeError, match="not a float tensor"):
        numerical_jvp(lambda a: a, (tp.tensor([1, 2]),), (np.ones(2),))
    with pytest.raises(ValueError, match="cotangents must have the structure of the output"):
        numerical_vjp(lambda a: (a, a), (tp.ones(2),), np.ones(2))
    with pytest.raises(ValueError, match="argnums 3 is out of range for 1 argument"):
        numerical_vjp(lambda a: a, (tp.ones(2),), np.ones(2), argnums=3)


# ---- check_grads passes -------------------------------------------------------------------------

def test_correct_derivatives_pass_to_second_order() -> None:
    tp.manual_seed(0)
    w, x = tp.randn(4, 3), tp.randn(5, 3)
    check_grads(lambda w, x: (x @ w.T).tanh().sum(), (w, x), order=2)
    check_grads(lambda w, x: {"h": (x @ w.T).softmax(-1), "n": (x > 0).sum()}, (w, x), order=2)
    check_grads(lambda p, x: p["w"] * x.exp() + p["b"], ({"w": tp.randn(3), "b": tp.randn(3)}, tp.randn(3)))


def test_integer_and_static_arguments_are_held_fixed() -> None:
    ids = tp.tensor([2, 0, 1])
    check_grads(lambda table, i, scale: (table[i] * scale).sin(), (tp.randn(3, 2), ids, 0.5), order=2)


def test_third_order() -> None:
    check_grads(lambda x: (x ** 3).sum() * x.exp(), (tp.randn(2),), order=3, modes=("fwd",))


# ---- check_grads fails, saying where -------------------------------------------------------------

def test_a_detached_factor_fails_in_both_modes_naming_the_argument() -> None:
    def f(scale: Any, x: Any) -> Any:
        return {"y": x * x.detach() * scale}

    args = (tp.tensor(2.0), tp.randn(3))
    with pytest.raises(NotCloseError) as info:
        check_grads(f, args, modes=("rev",))
    message = str(info.value)
    assert info.value.kind == "projection" and info.value.path == "argument 1 ('x')"
    assert message.startswith("check_grads: reverse mode (vjp of f) disagrees with central finite differences "
                              "(eps=1e-06) for argument 1 ('x'):")
    assert "random cotangents of output['y']" in message
    with pytest.raises(NotCloseError) as info:
        check_grads(f, args, modes=("fwd",))
    assert str(info.value).startswith("check_grads: forward mode (jvp of f) disagrees with central finite "
                                      "differences (eps=1e-06) for argument 1 ('x'), at output['y'], along a random "
                                      "direction:\nvalues differ (shape [3], dtype float64):")
    check_grads(lambda scale, x: x * x.detach() * scale, args, modes=("rev",), atol=1e9)  # loose enough: passes


def test_second_order_failure_names_the_composition() -> None:
    x = (tp.randn(3),)
    check_grads(cubic_with_a_constant_first_derivative, x)
    with pytest.raises(NotCloseError, match=r"^check_grads: reverse-over-reverse mode \(vjp of vjp of f\).* "
                                            r"for argument 0 \('v'\)"):
        check_grads(cubic_with_a_constant_first_derivative, x, order=2)
    assert _label("fwd", ("rev",)) == "forward-over-reverse mode (jvp of vjp of f)"
    with pytest.raises(NotCloseError, match=r"^check_grads: forward-over-forward mode \(jvp of jvp of f\).*"
                                            r"at tangent of output"):
        check_grads(cubic_with_a_constant_first_derivative, x, order=2, modes=("fwd",))


def test_a_wrong_reverse_mode_is_caught_while_forward_mode_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    real_vjp = F.vjp

    def scaled_vjp(fn: Any, *primals: Any) -> Any:
        out, pull = real_vjp(fn, *primals)
        return out, lambda ct: tuple(g * 1.001 for g in pull(ct))

    monkeypatch.setattr(F, "vjp", scaled_vjp)
    args = (tp.randn(2, 3),)
    check_grads(lambda a: a.exp(), args, modes=("fwd",))
    with pytest.raises(NotCloseError, match="reverse mode"):
        check_grads(lambda a: a.exp(), args)


def test_float32_arguments_are_checked_in_float64() -> None:
    seen = []

    def f(x: Any) -> Any:
        seen.append(x.dtype)
        return x.sin()

    check_grads(f, (tp.randn(3),))
    assert set(seen) == {tp.float64}


def test_bad_options_are_named() -> None:
    with pytest.raises(ValueError, match="order must be a positive int"):
        check_grads(lambda x: x, (tp.ones(1),), order=0)
    with pytest.raises(ValueError, match="modes must be a non-empty sequence of 'rev' and 'fwd'"):
        check_grads(lambda x: x, (tp.ones(1),), modes=("backward",))
    with pytest.raises(TypeError, match="args must be a tuple"):
        check_grads(lambda x: x, tp.ones(1))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no float tensor or array among the arguments"):
        check_grads(lambda i: i * 2, (tp.tensor([1, 2]),))
    with pytest.raises(ValueError, match="returned no float tensor"):
        check_grads(lambda x: x > 0, (tp.ones(2),))
