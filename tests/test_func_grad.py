"""Reverse mode (vjp, grad, grad_and_value): semantics, composition and errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.errors import MissingRuleError
from tensorplay.func import grad, grad_and_value, hessian, jacfwd, jacrev, vjp, vmap
from tensorplay.testing import assert_close

torch = pytest.importorskip("torch")
tf = pytest.importorskip("torch.func")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.func internals


def test_higher_order_derivatives() -> None:
    x = tp.tensor(0.7)
    f = lambda x: x.sin() * x  # noqa: E731
    d1, d2, d3 = grad(f), grad(grad(f)), grad(grad(grad(f)))
    xt = torch.tensor(0.7)
    ft = lambda x: x.sin() * x  # noqa: E731
    assert_close(d1(x), tf.grad(ft)(xt))
    assert_close(d2(x), tf.grad(tf.grad(ft))(xt))
    assert_close(d3(x), tf.grad(tf.grad(tf.grad(ft)))(xt))


def test_python_control_flow_on_values() -> None:
    def f(x: Any) -> Any:
        if x.sum() > 0:
            return (x * 2).sum()
        return (x ** 3).sum()

    assert_close(grad(f)(tp.tensor([1.0, 2.0])), [2.0, 2.0])
    assert_close(grad(f)(tp.tensor([-1.0, -2.0])), [3.0, 12.0])
    assert_close(grad(grad(lambda x: f(x) * x.sum()))(tp.tensor(-1.0)), grad(grad(lambda x: x ** 4))(tp.tensor(-1.0)))


def test_argnums_pytrees_and_kwargs() -> None:
    def f(a: Any, b: dict[str, Any], c: Any, *, scale: float) -> Any:
        return ((a * b["u"]).sum() + (b["v"] * c).sum()) * scale

    a, u, v, c = tp.tensor([1.0, 2.0]), tp.tensor([3.0, 4.0]), tp.tensor(5.0), tp.tensor(6.0)
    g = grad(f, argnums=1)(a, {"u": u, "v": v}, c, scale=2.0)
    assert set(g) == {"u", "v"}
    assert_close(g["u"], [2.0, 4.0])
    assert_close(g["v"], 12.0)
    ga, gc = grad(f, argnums=(0, 2))(a, {"u": u, "v": v}, c, scale=1.0)
    assert_close(ga, [3.0, 4.0])
    assert_close(gc, 5.0)
    gb = grad(f, argnums=-3)(a, {"u": u, "v": v}, c, scale=1.0)
    assert_close(gb, [3.0, 4.0])


def test_disconnected_inputs_get_zeros_and_no_nan() -> None:
    g = grad(lambda x, y: (x * 2).sum(), argnums=(0, 1))(tp.ones(2), tp.ones(3))
    assert_close(g[1], np.zeros(3), check_dtype=False)
    # a branch that receives no cotangent is never visited: no 0 * inf = nan
    x = tp.tensor([0.0, 4.0])
    out = grad(lambda x: (x.sqrt() * 0.0).sum() + x.sum())(x)
    assert np.all(np.isfinite(out.numpy()))
    unused = grad(lambda x: x.sum() + x.sqrt().sum() * 0)(x)
    assert np.all(np.isfinite(unused.numpy()))


def test_float64_and_identity_functions() -> None:
    x = tp.tensor(np.array([1.0, 2.0]))
    assert grad(lambda x: (x * x).sum())(x).dtype == tp.float64
    out, vjp_fn = vjp(lambda x: x, tp.tensor([1.0, 2.0]))
    assert_close(vjp_fn(tp.tensor([3.0, 4.0]))[0], [3.0, 4.0])
    out, vjp_fn = vjp(lambda x: (x, x), tp.tensor([1.0, 2.0]))
    assert_close(vjp_fn((tp.ones(2), tp.ones(2)))[0], [2.0, 2.0])


def test_closures_over_tensors_of_an_outer_transform() -> None:
    def outer(x: Any) -> Any:
        def inner(y: Any) -> Any:
            return (x * y.sin()).sum()
        return grad(inner)(x * 2)

    def outer_t(x: Any) -> Any:
        def inner(y: Any) -> Any:
            return (x * y.sin()).sum()
        return tf.grad(inner)(x * 2)

    x = np.array([0.3, 0.7], dtype=np.float32)
    assert_close(grad(lambda x: outer(x).sum())(tp.tensor(x)), tf.grad(lambda x: outer_t(x).sum())(torch.tensor(x)))
    # a closure over an eager tensor is a constant for the transform
    w = tp.tensor([1.0, -1.0])
    assert_close(grad(lambda x: (x * w).sum())(tp.tensor([5.0, 6.0])), [1.0, -1.0])
    # vmap inside grad closing over the grad's value
    assert_close(grad(lambda s: vmap(lambda r: (r * s).sum())(tp.ones(3, 2)).sum())(tp.tensor(2.0)), 6.0)


def test_program_functions_and_modules() -> None:
    @tp.program
    def prog(ops: Any, w: Any, x: Any) -> Any:
        return ops.reduce_sum(ops.tanh(ops.mul(w, x)), axes=(0,))

    w, x = tp.tensor([1.0, 2.0]), tp.tensor([0.5, 0.1])
    assert_close(grad(prog)(w, x), x.numpy() * (1 - np.tanh(w.numpy() * x.numpy()) ** 2))
    per = vmap(grad(prog), in_dims=(None, 0))(w, tp.tensor([[0.5, 0.1], [0.2, 0.3]]))
    assert per.shape == (2, 2)
    # a module's own parameters are constants unless passed through functional_call
    lin = tp.nn.Linear(2, 1)
    assert_close(grad(lambda x: lin(x).sum())(tp.ones(3, 2)), np.tile(lin.weight.detach().numpy(), (3, 1)))


def test_grad_of_an_eager_function_on_the_tape() -> None:
    # primals that require grad: the transform's result is itself differentiable by backward()
    x = tp.tensor([0.5, 1.5], requires_grad=True)
    g = grad(lambda x: (x ** 3).sum())(x)
    g.sum().backward()
    assert x.grad is not None
    assert_close(x.grad, 6 * x.detach().numpy())


def test_non_scalar_output_error_suggests_vjp_and_jacrev() -> None:
    with pytest.raises(ValueError, match=r"scalar.*shape \[3\].*vjp or jacrev"):
        grad(lambda x: x * 2)(tp.ones(3))
    with pytest.raises(ValueError, match="vjp or jacrev"):
        grad(lambda x: (x.sum(), x.sum()))(tp.ones(3))


def test_argument_errors() -> None:
    with pytest.raises(TypeError, match="float tensors"):
        grad(lambda x: x.sum())(tp.tensor([1, 2]))
    with pytest.raises(TypeError, match="argument 0 .* leaf 0 is a float"):
        grad(lambda x: x)(1.0)
    with pytest.raises(ValueError, match="argnums 3 is out of range"):
        grad(lambda x: x.sum(), argnums=3)(tp.ones(2))
    with pytest.raises(ValueError, match="duplicates"):
        grad(lambda x, y: x.sum(), argnums=(0, 0))(tp.ones(2), tp.ones(2))
    with pytest.raises(TypeError, match="pair"):
        grad(lambda x: x.sum(), has_aux=True)(tp.ones(2))
    _, vjp_fn = vjp(lambda x: x * 2, tp.ones(3))
    with pytest.raises(ValueError, match=r"cotangent 0 has shape \[2\], expected \[3\]"):
        vjp_fn(tp.ones(2))
    with pytest.raises(TypeError, match="dtype"):
        vjp_fn(tp.tensor(np.ones(3)))
    with pytest.raises(ValueError, match="structure"):
        vjp_fn((tp.ones(3),))
    with pytest.raises(TypeError, match="only float tensors"):
        vjp(lambda x: x, tp.tensor([1, 2]))


def test_aux_may_hold_non_tensors() -> None:
    g, aux = grad(lambda x: ((x * x).sum(), {"n": 3, "y": x * 2}), has_aux=True)(tp.ones(2))
    assert aux["n"] == 3
    assert_close(aux["y"], [2.0, 2.0])
    assert_close(g, [2.0, 2.0])


def test_missing_vjp_rule_names_the_primitive_and_the_transform(monkeypatch: pytest.MonkeyPatch) -> None:
    from tensorplay.rules import vjp as vjp_rules
    monkeypatch.delitem(vjp_rules.VJP_RULES, "sin")
    with pytest.raises(MissingRuleError, match="grad: no vjp rule for primitive 'sin'"):
        grad(lambda x: x.sin().sum())(tp.ones(2))
    with pytest.raises(MissingRuleError, match="vjp: no vjp rule for primitive 'sin'"):
        vjp(lambda x: x.sin(), tp.ones(2))[1](tp.ones(2))
    # a node that receives no cotangent needs no rule
    assert_close(grad(lambda x, c: (x * c.sin()).sum())(tp.ones(2), tp.ones(2)), np.sin(1.0) * np.ones(2),
                 check_dtype=False)


def test_under_a_symbolic_graph_trace() -> None:
    from tensorplay.graph import trace

    gm = trace(lambda x: grad(lambda y: (y.sin() * y).sum())(x), tp.ones(3), dynamic={0: {0: "B"}})
    x = tp.tensor([0.1, 0.2, 0.3, 0.4])
    assert_close(gm(x), np.sin(x.numpy()) + x.numpy() * np.cos(x.numpy()))


def test_hessian_of_an_mlp_loss_wrt_a_small_weight() -> None:
    rng = np.random.default_rng(0)
    w, x = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)

    def loss(w: Any, x: Any) -> Any:
        return (x @ w.T).tanh().pow(2).mean()

    ours = hessian(loss)(tp.tensor(w), tp.tensor(x))
    theirs = tf.hessian(loss)(torch.tensor(w), torch.tensor(x))
    assert_close(ours, theirs, rtol=1e-4, atol=1e-4)
    assert_close(jacrev(jacfwd(loss))(tp.tensor(w), tp.tensor(x)), theirs, rtol=1e-4, atol=1e-4)
    assert_close(jacfwd(jacrev(loss))(tp.tensor(w), tp.tensor(x)), theirs, rtol=1e-4, atol=1e-4)


def test_grad_and_value_runs_one_forward_pass() -> None:
    calls = []

    def f(x: Any) -> Any:
        calls.append(1)
        return (x * x).sum()

    g, v = grad_and_value(f)(tp.tensor([1.0, 2.0]))
    assert len(calls) == 1
    assert_close(v, 5.0)
    assert_close(g, [2.0, 4.0])


def test_jacobians_under_a_symbolic_graph_trace() -> None:
    from tensorplay.graph import trace

    gm = trace(lambda x, y: jacrev(lambda a, b: (a.sin(), b * 2), argnums=(0, 1))(x, y), tp.ones(3), tp.ones(2),
               dynamic={0: {0: "B"}})
    (da_a, da_b), (db_a, db_b) = gm(tp.tensor([0.0, 1.0]), tp.ones(2))
    assert_close(da_a, np.diag(np.cos([0.0, 1.0])), check_dtype=False)
    assert_close(db_b, 2 * np.eye(2), check_dtype=False)
    assert_close(da_b, np.zeros((2, 2)), check_dtype=False)
    gm2 = trace(lambda x: jacfwd(lambda r: r.sin())(x), tp.ones(3), dynamic={0: {0: "B"}})
    assert_close(gm2(tp.tensor([0.0, 1.0, 2.0, 3.0])), np.diag(np.cos([0.0, 1.0, 2.0, 3.0])), check_dtype=False)
    gm3 = trace(lambda x: hessian(lambda r: (r ** 3).sum())(x), tp.ones(3), dynamic={0: {0: "B"}})
    assert_close(gm3(tp.tensor([1.0, 2.0])), np.diag([6.0, 12.0]), check_dtype=False)


def test_missing_rules_name_the_jacobian_transforms(monkeypatch: pytest.MonkeyPatch) -> None:
    from tensorplay.rules import jvp as jvp_rules
    from tensorplay.rules import vjp as vjp_rules
    monkeypatch.delitem(vjp_rules.VJP_RULES, "cos")
    monkeypatch.delitem(jvp_rules.JVP_RULES, "cos")
    with pytest.raises(MissingRuleError, match="jacrev: no vjp rule for primitive 'cos'"):
        jacrev(lambda x: x.cos())(tp.ones(2))
    with pytest.raises(MissingRuleError, match="jacfwd: no jvp rule for primitive 'cos'"):
        jacfwd(lambda x: x.cos())(tp.ones(2))
    with pytest.raises(MissingRuleError, match="jacrev: no vjp rule for primitive 'cos'"):
        hessian(lambda x: x.sin().sum())(tp.ones(2))  # sin's vjp uses cos; its derivative needs cos's rule


def test_under_an_execute_mode_graph_trace_guards_propagate() -> None:
    from tensorplay.graph import GuardError, trace

    # capturing a value of the outer recording is not a decision on it: no guard
    gm = trace(lambda x: grad(lambda w: (w * x).sum())(tp.ones(3)), tp.ones(3), execute=True)
    assert not gm.graph.guards
    assert_close(gm(tp.tensor([1.0, 2.0, 3.0])), [1.0, 2.0, 3.0])

    # Python control flow inside the transform is guarded in the outer recording too
    def f(x: Any) -> Any:
        if x.sum() > 0:
            return (x * 2).sum()
        return (x ** 3).sum()

    gm = trace(lambda x: grad(f)(x), tp.ones(3), execute=True)
    assert len(gm.graph.guards) == 1
    assert_close(gm(tp.tensor([1.0, 2.0, 3.0])), [2.0, 2.0, 2.0])
    with pytest.raises(GuardError):
        gm(tp.tensor([-1.0, -2.0, -3.0]))


def test_debug_unwrap_shows_values_without_recording() -> None:
    from tensorplay.func import debug_unwrap, grad, vmap
    seen: list[Any] = []

    def f(x: Any) -> Any:
        seen.append(debug_unwrap({"y": x * 3.0}))
        return (x * x).sum()

    g = grad(f)(tp.tensor([1.0, 2.0]))
    assert seen[0]["y"]._ops is tp.eager
    np.testing.assert_array_equal(seen[0]["y"].numpy(), [3.0, 6.0])
    np.testing.assert_array_equal(g.numpy(), [2.0, 4.0])
    symbolic: list[Any] = []
    vmap(lambda r: symbolic.append(debug_unwrap(r)) or r * 2)(tp.ones(3, 2))
    assert symbolic[0]._ops is not tp.eager  # inside vmap a sample is abstract: nothing to show
    plain = tp.ones(2)
    assert debug_unwrap(plain) is plain
