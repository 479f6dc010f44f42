"""Forward mode (jvp, linearize): semantics, composition, errors, and linearize's single primal pass."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.interpreters.eager.interpreter import EagerInterpreter
from tensorplay.errors import MissingRuleError
from tensorplay.func import grad, jvp, linearize, vjp, vmap
from tensorplay.func.cache import set_caching, transformed
from tensorplay.testing import assert_close

torch = pytest.importorskip("torch")
tf = pytest.importorskip("torch.func")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.func internals


def f(x: Any, y: Any) -> Any:
    return (x.sin() * y).tanh(), (x * x).sum()


X = np.array([0.1, -0.5, 1.2], dtype=np.float32)
Y = np.array([2.0, 1.0, -1.0], dtype=np.float32)
TX = np.array([1.0, 0.5, -0.25], dtype=np.float32)
TY = np.array([0.3, 0.0, 2.0], dtype=np.float32)


def test_jvp_with_pytree_outputs_matches_torch() -> None:
    ours = jvp(f, (tp.tensor(X), tp.tensor(Y)), (tp.tensor(TX), tp.tensor(TY)))
    theirs = tf.jvp(f, (torch.tensor(X), torch.tensor(Y)), (torch.tensor(TX), torch.tensor(TY)))
    for a, b in zip(ours[0] + ours[1], theirs[0] + theirs[1]):
        assert_close(a, b)


def test_jvp_pytree_primals() -> None:
    def g(p: dict[str, Any]) -> Any:
        return (p["a"] * p["b"]).sum()

    out, t = jvp(g, ({"a": tp.tensor(X), "b": tp.tensor(Y)},), ({"a": tp.tensor(TX), "b": tp.tensor(TY)},))
    assert_close(t, (TX * Y + X * TY).sum())


def test_jvp_consistent_with_vjp() -> None:
    g = lambda x: (x.exp() * x[::-1]).sin()  # noqa: E731
    x, v, u = tp.tensor(X), tp.tensor(TX), tp.tensor(TY)
    _, jv = jvp(g, (x,), (v,))
    _, vjp_fn = vjp(g, x)
    (uj,) = vjp_fn(u)
    assert_close((jv * u).sum(), (uj * v).sum())


def test_forward_over_reverse_and_reverse_over_forward() -> None:
    g = lambda x: (x.sin() * x).sum()  # noqa: E731
    gt = lambda x: (x.sin() * x).sum()  # noqa: E731
    hvp = jvp(grad(g), (tp.tensor(X),), (tp.tensor(TX),))[1]
    hvp_t = tf.jvp(tf.grad(gt), (torch.tensor(X),), (torch.tensor(TX),))[1]
    assert_close(hvp, hvp_t)
    rof = grad(lambda x: jvp(g, (x,), (tp.tensor(TX),))[1])(tp.tensor(X))
    assert_close(rof, hvp_t)
    fof = jvp(lambda x: jvp(g, (x,), (tp.tensor(TX),))[1], (tp.tensor(X),), (tp.tensor(TY),))[1]
    fof_t = tf.jvp(lambda x: tf.jvp(gt, (x,), (torch.tensor(TX),))[1], (torch.tensor(X),), (torch.tensor(TY),))[1]
    assert_close(fof, fof_t)


def test_vmap_of_jvp_and_jvp_of_vmap() -> None:
    g = lambda x: x.sin() * x.sum()  # noqa: E731
    xs = tp.tensor(np.stack([X, Y, TX]))
    tangents = tp.tensor(np.stack([TX, TY, X]))
    batched = vmap(lambda x, t: jvp(g, (x,), (t,))[1])(xs, tangents)
    for i in range(3):
        assert_close(batched[i], jvp(g, (xs[i],), (tangents[i],))[1])
    assert_close(jvp(vmap(g), (xs,), (tangents,))[1], batched)


def test_strict_and_zero_tangents() -> None:
    c = tp.tensor([1.0, 2.0])
    out, t = jvp(lambda x: (x * 2, c * 3), (tp.tensor(X[:2]),), (tp.tensor(TX[:2]),))
    assert_close(t[1], np.zeros(2), check_dtype=False)
    with pytest.raises(RuntimeError, match="output 1 does not depend on the primals"):
        jvp(lambda x: (x * 2, c * 3), (tp.tensor(X[:2]),), (tp.tensor(TX[:2]),), strict=True)


def test_tangent_errors() -> None:
    x = tp.tensor(X)
    with pytest.raises(ValueError, match=r"tangent 0 has shape \[2\], expected \[3\]"):
        jvp(lambda x: x, (x,), (tp.ones(2),))
    with pytest.raises(TypeError, match="tangent 0 has dtype float64, expected float32"):
        jvp(lambda x: x, (x,), (tp.tensor(np.ones(3)),))
    with pytest.raises(ValueError, match="structure of the primals"):
        jvp(lambda x: x, (x,), (tp.ones(3), tp.ones(3)))
    with pytest.raises(TypeError, match="primals to be a tuple"):
        jvp(lambda x: x, x, (tp.ones(3),))
    with pytest.raises(TypeError, match="float tensors"):
        jvp(lambda x: x, (tp.tensor([1, 2]),), (tp.tensor([1, 2]),))
    _, jvp_fn = linearize(lambda x: x * 2, x)
    with pytest.raises(ValueError, match=r"tangent 0 has shape \[1\], expected \[3\]"):
        jvp_fn(tp.ones(1))


def test_missing_jvp_rule_names_the_primitive_and_the_transform(monkeypatch: pytest.MonkeyPatch) -> None:
    from tensorplay.rules import jvp as jvp_rules
    monkeypatch.delitem(jvp_rules.JVP_RULES, "sin")
    with pytest.raises(MissingRuleError, match="jvp: no jvp rule for primitive 'sin'"):
        jvp(lambda x: x.sin(), (tp.ones(2),), (tp.ones(2),))
    with pytest.raises(MissingRuleError, match="linearize: no jvp rule for primitive 'sin'"):
        linearize(lambda x: x.sin(), tp.ones(2))


def test_linearize_matches_jvp_and_is_reusable() -> None:
    out, jvp_fn = linearize(f, tp.tensor(X), tp.tensor(Y))
    for tx, ty in ((TX, TY), (TY, TX), (X, X)):
        expected = jvp(f, (tp.tensor(X), tp.tensor(Y)), (tp.tensor(tx), tp.tensor(ty)))[1]
        for a, b in zip(jvp_fn(tp.tensor(tx), tp.tensor(ty)), expected):
            assert_close(a, b)
    batched = vmap(jvp_fn)(tp.tensor(np.stack([TX, TY])), tp.tensor(np.stack([TY, TX])))
    assert_close(batched[0][1], jvp_fn(tp.tensor(TY), tp.tensor(TX))[0])


def test_linearize_evaluates_the_primal_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    for name in ("sin", "cos", "exp", "tanh", "matmul", "mul", "add"):
        original = getattr(EagerInterpreter, name)

        def counting(self: Any, *args: Any, _name: str = name, _orig: Any = original, **kw: Any) -> Any:
            calls.append(_name)
            return _orig(self, *args, **kw)

        monkeypatch.setattr(EagerInterpreter, name, counting)
    w = tp.tensor(np.eye(3, dtype=np.float32) * 0.5)
    traced_calls = []

    def g(x: Any) -> Any:
        traced_calls.append(1)
        return (w @ x.sin()).exp().sum()

    previous = set_caching(False)
    try:
        out, jvp_fn = linearize(g, tp.tensor(X))
        assert len(traced_calls) == 1
        assert calls.count("sin") == 1 and calls.count("exp") == 1  # the primal pass, once
        calls.clear()
        t1 = jvp_fn(tp.tensor(TX))
        # the tangent graph only: t -> cos(x) * t -> w @ . -> exp(y) * . -> sum
        assert "sin" not in calls and "cos" not in calls and "exp" not in calls
        assert calls.count("mul") == 2 and calls.count("matmul") == 1
        assert len(traced_calls) == 1
        assert_close(t1, jvp(g, (tp.tensor(X),), (tp.tensor(TX),))[1])
    finally:
        set_caching(previous)
    # the cached forward and tangent graphs keep that split: a cached call runs each primal op once, its
    # jvp_fn only the tangent graph (and neither runs the function's Python)
    def h(x: Any) -> Any:
        return (w @ x.sin()).exp().sum()

    for _ in range(3):
        out, jvp_fn = linearize(h, tp.tensor(X))
        jvp_fn(tp.tensor(TX))
        jvp_fn(tp.tensor(TX))
    calls.clear()
    out, jvp_fn = linearize(h, tp.tensor(X))
    assert calls.count("sin") == 1 and calls.count("exp") == 1 and calls.count("cos") == 1
    calls.clear()
    t1 = jvp_fn(tp.tensor(TX))
    assert "sin" not in calls and "cos" not in calls and "exp" not in calls
    assert calls.count("mul") == 2 and calls.count("matmul") == 1
    assert jvp_fn.compile_count == 1
    assert transformed("linearize", h, {}, h).compile_count == 1
    assert_close(t1, jvp(g, (tp.tensor(X),), (tp.tensor(TX),))[1])


def test_closures_over_tensors_of_an_outer_transform() -> None:
    x0, t0 = tp.tensor(X), tp.tensor(TX)
    # d/ds of the jvp of x -> x * sin(s x): the inner jvp closes over the outer grad's s
    g = grad(lambda s: jvp(lambda x: x * (s * x).sin(), (x0,), (t0,))[1].sum())(tp.tensor(0.7))
    g_t = tf.grad(lambda s: tf.jvp(lambda x: x * (s * x).sin(), (torch.tensor(X),), (torch.tensor(TX),))[1].sum())(
        torch.tensor(0.7))
    assert_close(g, g_t)
    # a linearized function closing over a vmapped value
    out = vmap(lambda s: linearize(lambda x: (x * s).sin(), x0)[1](t0))(tp.tensor([0.5, 1.5]))
    s = np.array([0.5, 1.5], dtype=np.float32)[:, None]
    assert_close(out, np.cos(X * s) * s * TX)  # (torch.func cannot vmap linearize)
