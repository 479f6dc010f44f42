"""The eager tape: ``backward``/``grad`` semantics, grad mode, in-place ops with version counters,
higher-order gradients. Expected gradients come from closed forms or from PyTorch."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tensorplay as tp

torch = pytest.importorskip("torch")
ops = tp.eager


def leaf(values: Any) -> Any:
    return tp.tensor(np.asarray(values, dtype=np.float64), requires_grad=True)


def torch_leaf(values: Any) -> Any:
    return torch.tensor(np.asarray(values, dtype=np.float64), requires_grad=True)


X = [[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]]


# ---- backward and .grad ----------------------------------------------------------------------------

def test_grad_accumulates_over_two_backward_calls() -> None:
    x = leaf([1.0, 2.0, 3.0])
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0, 6.0])
    (x * 3.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [5.0, 7.0, 9.0])
    assert x.grad.requires_grad is False


def test_grad_is_a_fresh_tensor_not_aliasing_intermediates() -> None:
    x = leaf([1.0, 2.0])
    y = x.sum()
    y.backward()
    g = x.grad.numpy().copy()
    x.grad.zero_()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0])
    np.testing.assert_array_equal(g, [1.0, 1.0])


def test_backward_twice_needs_retain_graph() -> None:
    x = leaf([1.0, 2.0])
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first)
    with pytest.raises(tp.AutogradError, match="second time.*retain_graph=True"):
        y.backward()


def test_backward_without_retain_graph_frees_the_graph() -> None:
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    y.backward()
    with pytest.raises(tp.AutogradError, match="retain_graph"):
        y.backward()


def test_backward_of_non_scalar_needs_gradient() -> None:
    x = leaf([1.0, 2.0])
    y = x * 2.0
    with pytest.raises(tp.AutogradError, match="scalar outputs"):
        y.backward()
    y.backward(tp.tensor([1.0, -1.0], dtype=tp.float64))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, -2.0])
    with pytest.raises(tp.AutogradError, match="shape"):
        (x * 2.0).backward(tp.tensor([1.0, 2.0, 3.0], dtype=tp.float64))


def test_backward_of_tensor_not_requiring_grad_raises() -> None:
    x = tp.tensor([1.0, 2.0])
    with pytest.raises(tp.AutogradError, match="does not require grad"):
        x.sum().backward()
    with pytest.raises(tp.AutogradError, match="does not require grad"):
        tp.autograd.grad(x.sum(), [leaf([1.0])])


def test_backward_on_a_leaf_itself() -> None:
    x = leaf([[1.0, 2.0]])
    x.backward(tp.tensor([[3.0, 4.0]], dtype=tp.float64))
    np.testing.assert_array_equal(x.grad.numpy(), [[3.0, 4.0]])


def test_intermediate_results_need_not_be_kept_alive() -> None:
    """Rules that reuse the primal result (exp, tanh, softmax) still work when nothing else holds it."""
    x = leaf(X)
    loss = (x.exp().tanh() * ops.softmax(x.sigmoid(), axis=1)).sum()
    gc.collect()
    loss.backward()
    tx = torch_leaf(X)
    (tx.exp().tanh() * torch.softmax(tx.sigmoid(), dim=1)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


def test_shared_subexpression_and_repeated_input() -> None:
    x = leaf([1.0, -2.0, 3.0])
    h = x * x
    y = (h + h * x + x).sum()
    y.backward()
    xv = np.array([1.0, -2.0, 3.0])
    np.testing.assert_allclose(x.grad.numpy(), 2 * xv + 3 * xv ** 2 + 1)


# ---- autograd.grad ----------------------------------------------------------------------------------

def test_autograd_grad_does_not_touch_dot_grad() -> None:
    x = leaf([1.0, 2.0])
    (g,) = tp.autograd.grad((x * x).sum(), x)
    np.testing.assert_allclose(g.numpy(), [2.0, 4.0])
    assert x.grad is None


def test_allow_unused() -> None:
    x, z = leaf([1.0]), leaf([2.0])
    y = (x * 3.0).sum()
    with pytest.raises(tp.AutogradError, match="allow_unused=True"):
        tp.autograd.grad(y, [x, z], retain_graph=True)
    gx, gz = tp.autograd.grad(y, [x, z], allow_unused=True)
    np.testing.assert_allclose(gx.numpy(), [3.0])
    assert gz is None


def test_grad_with_respect_to_an_intermediate() -> None:
    x = leaf([1.0, 2.0])
    h = x * 3.0
    y = (h * h).sum()
    gh, gx = tp.autograd.grad(y, [h, x])
    np.testing.assert_allclose(gh.numpy(), [6.0, 12.0])
    np.testing.assert_allclose(gx.numpy(), [18.0, 36.0])


def test_grad_of_several_outputs_with_grad_outputs() -> None:
    x = leaf([1.0, 2.0])
    a, b = x * 2.0, x * x
    (g,) = tp.autograd.grad([a, b], [x], grad_outputs=[tp.tensor([1.0, 1.0], dtype=tp.float64),
                                                        tp.tensor([0.5, -1.0], dtype=tp.float64)])
    np.testing.assert_allclose(g.numpy(), [2.0 + 1.0, 2.0 - 4.0])


def test_disconnected_branch_with_inf_does_not_poison_gradients() -> None:
    x = leaf([1.0, 2.0])
    used = (x * 2.0).sum()
    unused = (x * 1000.0).exp() * 0.0  # inf * 0 = nan in a branch the loss does not depend on
    assert not np.all(np.isfinite(unused.detach().numpy()))
    (g,) = tp.autograd.grad(used, x, retain_graph=True)
    np.testing.assert_array_equal(g.numpy(), [2.0, 2.0])
    # the inf branch consumes the same intermediate as the loss: it receives no cotangent at all
    h = x * 1.0
    loss = (h * 2.0).sum()
    blown = (h * 1000.0).exp() * 0.0
    assert np.isnan(blown.detach().numpy()).all()
    loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])
    # a where() whose other side is inf: the gradient of the chosen side is clean
    y = ops.where(ops.gt(x, 1.5), x * 3.0, 5.0)
    (g,) = tp.autograd.grad(y.sum(), x)
    np.testing.assert_array_equal(g.numpy(), [0.0, 3.0])


# ---- grad mode -------------------------------------------------------------------------------------

def test_no_grad_enable_grad_set_grad_enabled() -> None:
    x = leaf([1.0, 2.0])
    assert tp.is_grad_enabled()
    with tp.no_grad():
        assert not tp.is_grad_enabled()
        y = x * 2.0
        assert not y.requires_grad and y.grad_fn is None
        with tp.enable_grad():
            assert tp.is_grad_enabled()
            z = x * 2.0
            assert z.requires_grad
        assert not tp.is_grad_enabled()
    assert tp.is_grad_enabled()
    with tp.set_grad_enabled(False):
        assert not (x * 2.0).requires_grad
    assert tp.is_grad_enabled()
    tp.set_grad_enabled(False)
    try:
        assert not tp.is_grad_enabled()
    finally:
        tp.set_grad_enabled(True)
    assert tp.is_grad_enabled()


def test_no_grad_as_decorator_and_restores_after_exception() -> None:
    x = leaf([1.0])

    @tp.no_grad()
    def f(t: Any) -> Any:
        return t * 2.0

    assert not f(x).requires_grad
    with pytest.raises(ValueError):
        with tp.no_grad():
            raise ValueError("boom")
    assert tp.is_grad_enabled()


def test_detach() -> None:
    x = leaf([1.0, 2.0])
    d = (x * 2.0).detach()
    assert not d.requires_grad and d.grad_fn is None
    y = (x * d).sum()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])  # d is a constant
    # detach shares memory
    h = x * 1.0
    hd = h.detach()
    hd.numpy()[0] = 7.0
    assert h.detach().numpy()[0] == 7.0


def test_requires_grad_rules() -> None:
    with pytest.raises(tp.DTypeError):
        tp.tensor([1, 2]).requires_grad_(True)
    x = leaf([1.0])
    y = x * 2.0
    with pytest.raises(tp.AutogradError, match="leaf"):
        y.requires_grad = False


def test_integer_and_bool_outputs_do_not_require_grad() -> None:
    x = leaf(X)
    assert not x.argmax(dim=1).requires_grad
    assert not (x > 0.0).requires_grad
    assert not x.long().requires_grad
    assert not ops.eq(x, x).requires_grad
    assert x.float().requires_grad  # float -> float keeps the tape


def test_grad_fn_prints_the_primitive() -> None:
    x = leaf([1.0, 2.0])
    y = x * 2.0
    assert "mul" in repr(y.grad_fn)
    assert "grad_fn=<mul>" in repr(y)
    assert "exp" in repr(x.exp().grad_fn)
    assert x.grad_fn is None and x.is_leaf and not y.is_leaf


# ---- in-place operations ---------------------------------------------------------------------------

def _both(fn_tp: Callable[[Any], Any], fn_torch: Callable[[Any], Any]) -> None:
    x = leaf(X)
    fn_tp(x).backward()
    tx = torch_leaf(X)
    fn_torch(tx).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_inplace_add_mul_on_non_leaf() -> None:
    def f(x: Any) -> Any:
        h = x * 2.0
        h.add_(x * x)
        h.mul_(x)
        h.sub_(1.5)
        return h.sum()
    _both(f, f)


def test_inplace_on_result_of_exp_keeps_the_saved_value() -> None:
    """``exp``'s rule reads its result; an in-place update of that result must not change the gradient."""
    x = leaf([0.5, 1.0])
    y = x.exp()
    y.mul_(2.0)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp([0.5, 1.0]), rtol=1e-12)


def test_inplace_zero_fill_copy_clamp() -> None:
    def zero(x: Any) -> Any:
        h = x * 3.0
        out = (h * x).sum()
        h2 = x + 1.0
        h2.zero_()
        return out + (h2 * x).sum()
    _both(zero, zero)

    def copy(x: Any) -> Any:
        h = x * 1.0
        h.copy_(x * x)
        return (h * 2.0).sum()
    _both(copy, copy)

    def clamp(x: Any) -> Any:
        h = x * 2.0
        h.clamp_(-1.0, 2.5)
        return (h * h).sum()
    _both(clamp, clamp)


def test_setitem_on_non_leaf() -> None:
    def f(x: Any) -> Any:
        h = x * 1.0
        h[0, 1:] = x[1, :2] * 3.0
        h[1] = 0.5
        return (h * h).sum()
    _both(f, f)


def test_modifying_a_saved_tensor_raises() -> None:
    x = leaf([1.0, 2.0])
    h = x * 2.0
    y = (h * h).sum()  # mul saved h
    h.add_(1.0)
    with pytest.raises(tp.AutogradError, match="modified in place"):
        y.backward()


def test_modifying_a_saved_result_through_a_view_raises() -> None:
    x = leaf([1.0, 2.0, 3.0, 4.0])
    y = x.exp()                 # exp's rule reads y
    view = y.reshape(2, 2)
    with tp.no_grad():
        view.mul_(2.0)
    with pytest.raises(tp.AutogradError, match="modified in place"):
        y.sum().backward()


def test_inplace_on_leaf_requiring_grad_raises() -> None:
    x = leaf([1.0, 2.0])
    with pytest.raises(tp.AutogradError, match="leaf"):
        x.add_(1.0)
    with pytest.raises(tp.AutogradError, match="leaf"):
        x[0] = 3.0
    with tp.no_grad():
        x.add_(1.0)  # allowed: the optimizer-step idiom
    np.testing.assert_array_equal(x.detach().numpy(), [2.0, 3.0])


# ---- higher order ------------------------------------------------------------------------------------

def test_create_graph_second_derivative() -> None:
    x = leaf([0.5, -1.0, 2.0])
    y = (x ** 3 + x.sin()).sum()
    (g,) = tp.autograd.grad(y, x, create_graph=True)
    assert g.requires_grad
    xv = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(g.detach().numpy(), 3 * xv ** 2 + np.cos(xv), rtol=1e-12)
    g.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 6 * xv - np.sin(xv), rtol=1e-12)


def test_backward_create_graph_gives_differentiable_dot_grad() -> None:
    x = leaf([1.0, 2.0])
    (x * x * x).sum().backward(create_graph=True)
    assert x.grad.requires_grad
    (gg,) = tp.autograd.grad(x.grad.sum(), x)
    np.testing.assert_allclose(gg.numpy(), [6.0, 12.0])


def test_hessian_vector_product_matches_torch() -> None:
    w0 = np.random.default_rng(0).standard_normal((3, 4))
    v = np.random.default_rng(1).standard_normal((3, 4))
    x0 = np.random.default_rng(2).standard_normal((5, 3))
    w = leaf(w0)
    loss = ops.log_softmax(ops.tanh(tp.tensor(x0) @ w), axis=1).sum() + (w * w).sum()
    (g,) = tp.autograd.grad(loss, w, create_graph=True)
    (hv,) = tp.autograd.grad((g * tp.tensor(v)).sum(), w)
    tw = torch_leaf(w0)
    tloss = torch.log_softmax(torch.tanh(torch.tensor(x0) @ tw), dim=1).sum() + (tw * tw).sum()
    (tg,) = torch.autograd.grad(tloss, tw, create_graph=True)
    (thv,) = torch.autograd.grad((tg * torch.tensor(v)).sum(), tw)
    np.testing.assert_allclose(hv.numpy(), thv.numpy(), rtol=1e-10)


def test_missing_rule_error_names_the_primitive() -> None:
    from tensorplay.interpreters.eager import tape
    with pytest.raises(tp.MissingRuleError, match="'not_a_primitive'.*vjp"):
        tape._vjp_rule("not_a_primitive")


def test_inplace_on_a_view_then_using_the_view() -> None:
    x = leaf([1.0, 2.0, 3.0, 4.0])
    h = x * 1.0
    v = h.reshape(2, 2)
    v.mul_(x.reshape(2, 2))
    (v * 3.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 6 * np.array([1.0, 2.0, 3.0, 4.0]))


def test_inplace_after_a_shape_only_use_is_fine() -> None:
    x = leaf([1.0, 2.0])
    h = x * 2.0
    y = (h + 1.0).sum()  # add does not need h's value for its gradient
    h.mul_(3.0)
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


def test_modifying_the_base_of_a_view_then_using_the_view_raises() -> None:
    x = leaf([1.0, 2.0, 3.0, 4.0])
    h = x * 1.0
    v = h[1:3]
    h.mul_(2.0)  # v's value changes, but its recorded history (a slice of x * 1) does not
    with pytest.raises(tp.AutogradError, match="view or an alias"):
        (v * 3.0).sum().backward()


def test_modifying_through_a_view_then_using_the_base_raises() -> None:
    x = leaf([1.0, 2.0, 3.0, 4.0])
    h = x * 1.0
    h.reshape(2, 2).mul_(2.0)
    with pytest.raises(tp.AutogradError, match="view or an alias"):
        (h * 3.0).sum().backward()


def test_zero_on_non_leaf_cuts_the_history() -> None:
    x = leaf([1.0, 2.0])
    h = x * 5.0
    h.zero_()
    assert not h.requires_grad
    y = (h + x).sum()
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0])
