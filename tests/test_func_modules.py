"""functional_call, stack_module_state (ensembles), batch-norm replacement and functionalize."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.func import (
    batch_norm_without_running_stats, functional_call, functionalize, grad, jacrev, replace_all_batch_norm_modules_,
    stack_module_state, vmap,
)
from tensorplay.testing import assert_close

torch = pytest.importorskip("torch")
tf = pytest.importorskip("torch.func")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.func internals


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(3, 3, bias=False)
        self.b = nn.Linear(3, 3, bias=False)
        self.b.weight = self.a.weight

    def forward(self, x: Any) -> Any:
        return self.b(self.a(x))


def _pair() -> tuple[nn.Module, Any]:
    tp.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2))
    torch_model = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
    torch_model.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in model.state_dict().items()})
    return model, torch_model


def test_functional_call_matches_torch_under_grad_and_vmap() -> None:
    model, torch_model = _pair()
    x = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
    params = {k: v.detach() for k, v in model.named_parameters()}
    params_t = {k: v.detach() for k, v in torch_model.named_parameters()}

    def loss(p: Any, x: Any) -> Any:
        return functional_call(model, p, (x,)).pow(2).sum()

    def loss_t(p: Any, x: Any) -> Any:
        return torch.func.functional_call(torch_model, p, (x,)).pow(2).sum()

    g, g_t = grad(loss)(params, tp.tensor(x)), tf.grad(loss_t)(params_t, torch.tensor(x))
    for k in g:
        assert_close(g[k], g_t[k])
    per = vmap(grad(loss), in_dims=(None, 0))(params, tp.tensor(x))
    per_t = tf.vmap(tf.grad(loss_t), in_dims=(None, 0))(params_t, torch.tensor(x))
    for k in per:
        assert_close(per[k], per_t[k])
    jac = jacrev(lambda p: functional_call(model, p, tp.tensor(x)))(params)
    jac_t = tf.jacrev(lambda p: torch.func.functional_call(torch_model, p, torch.tensor(x)))(params_t)
    for k in jac:
        assert_close(jac[k], jac_t[k])


def test_functional_call_merges_dicts_and_keeps_the_module_state() -> None:
    model, _ = _pair()
    before = {k: v for k, v in model.named_parameters()}
    weights = {k: v.detach() * 0 for k, v in model.named_parameters() if k.endswith("weight")}
    biases = {k: tp.ones(*v.shape) for k, v in model.named_parameters() if k.endswith("bias")}
    out = functional_call(model, (weights, biases), tp.ones(1, 4))
    assert_close(out, np.ones((1, 2)), check_dtype=False)
    assert all(v is before[k] for k, v in model.named_parameters())
    with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
        functional_call(model, (weights, weights), tp.ones(1, 4))
    # partial dicts keep the module's own tensors for the other names
    out = functional_call(model, biases, tp.zeros(1, 4))
    assert out.shape == (1, 2)


def test_functional_call_restores_state_when_the_module_raises() -> None:
    class Boom(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(tp.ones(2))
            self.register_buffer("b", tp.zeros(2))

        def forward(self, x: Any) -> Any:
            raise RuntimeError("boom")

    m = Boom()
    w, b = m.w, m.b
    with pytest.raises(RuntimeError, match="boom"):
        functional_call(m, {"w": tp.zeros(2), "b": tp.ones(2), "extra": tp.ones(1)}, (tp.ones(2),))
    assert m.w is w and m.b is b and not hasattr(m, "extra")


def test_functional_call_strict_and_tied_weights() -> None:
    m = Tied()
    x = tp.tensor([[1.0, 2.0, 3.0]])
    eye = tp.tensor(np.eye(3, dtype=np.float32))
    assert_close(functional_call(m, {"a.weight": eye * 2}, (x,)), x.numpy() * 4)  # tied: b uses it too
    assert_close(functional_call(m, {"a.weight": eye * 2}, (x,), tie_weights=False),
          x.numpy() @ (2 * np.eye(3)) @ m.a.weight.detach().numpy().T, check_dtype=False)
    with pytest.raises(ValueError, match="which are tied"):
        functional_call(m, {"a.weight": eye, "b.weight": eye * 2}, (x,))
    with pytest.raises(RuntimeError, match="Missing key"):
        functional_call(m, {"a.weight": eye}, (x,), strict=True, tie_weights=False)
    with pytest.raises(RuntimeError, match="Unexpected key"):
        functional_call(m, {"a.weight": eye, "b.weight": eye, "c": eye}, (x,), strict=True)
    # a tied module under grad: the gradient of the shared weight sums both uses
    g = grad(lambda p: functional_call(m, p, (x,)).sum())({"a.weight": eye})
    g_t = tf.grad(lambda w: ((torch.tensor(x.numpy()) @ w.T) @ w.T).sum())(torch.eye(3))
    assert_close(g["a.weight"], g_t)


def test_stack_module_state_and_ensembles() -> None:
    tp.manual_seed(1)
    models = [nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)) for _ in range(5)]
    params, buffers = stack_module_state(models)
    assert params["0.weight"].shape == (5, 4, 3)
    assert params["0.weight"].requires_grad and params["0.weight"].is_leaf
    x = tp.randn(7, 3)

    def call(p: Any, b: Any, x: Any) -> Any:
        return functional_call(models[0], (p, b), (x,))

    same_input = vmap(call, in_dims=(0, 0, None))(params, buffers, x)
    assert_close(same_input, tp.stack([m(x) for m in models]))
    xs = tp.randn(5, 7, 3)
    per_model_input = vmap(call)(params, buffers, xs)
    assert_close(per_model_input, tp.stack([m(xs[i]) for i, m in enumerate(models)]))
    # gradients of every model at once
    grads = vmap(grad(lambda p, b, x: call(p, b, x).sum()), in_dims=(0, 0, None))(params, buffers, x)
    for i, m in enumerate(models):
        g = grad(lambda p: functional_call(m, p, (x,)).sum())({k: v.detach() for k, v in m.named_parameters()})
        assert_close(grads["2.weight"][i], g["2.weight"])


def test_stack_module_state_errors() -> None:
    with pytest.raises(ValueError, match="same class"):
        stack_module_state([nn.Linear(2, 2), nn.Tanh()])
    with pytest.raises(ValueError, match="training/eval mode"):
        stack_module_state([nn.Linear(2, 2), nn.Linear(2, 2).eval()])
    with pytest.raises(ValueError, match="at least one model"):
        stack_module_state([])


def test_batch_norm_replacement() -> None:
    tp.manual_seed(2)
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    bn = net[1]
    assert replace_all_batch_norm_modules_(net) is net
    assert bn.running_mean is None and bn.running_var is None and bn.num_batches_tracked is None
    assert not bn.track_running_stats
    x = tp.randn(6, 3)
    h = net[0](x)
    mean = h.mean(0, keepdim=True)
    var = ((h - mean) ** 2).mean(0, keepdim=True)
    assert_close(bn(h), (h - mean) / (var + bn.eps).sqrt(), rtol=1e-4, atol=1e-4)
    net.eval()  # still batch statistics: there are no running ones
    assert_close(bn(h), (h - mean) / (var + bn.eps).sqrt(), rtol=1e-4, atol=1e-4)
    # an ensemble of batch-norm models under vmap
    models = [replace_all_batch_norm_modules_(nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))) for _ in range(3)]
    params, buffers = stack_module_state(models)
    out = vmap(lambda p, b, x: functional_call(models[0], (p, b), (x,)), in_dims=(0, 0, None))(params, buffers, x)
    assert_close(out, tp.stack([m(x) for m in models]), rtol=1e-4, atol=1e-4)
    other = nn.BatchNorm2d(3)
    assert batch_norm_without_running_stats(other) is other and other.running_mean is None
    lin = nn.Linear(2, 2)
    assert batch_norm_without_running_stats(lin) is lin


def test_functionalize_leaves_the_callers_tensors_and_views_unchanged() -> None:
    def f(x: Any, y: Any) -> Any:
        v = x[0]
        v.add_(10.0)  # through a view: x changes inside f, as eagerly
        y.mul_(2.0)
        return x.sum() + y.sum(), x

    x = tp.tensor([[1.0, 2.0], [3.0, 4.0]])
    view = x[1]
    y = tp.tensor([1.0, 1.0])
    expected = f(tp.tensor(x.numpy().copy()), tp.tensor(y.numpy().copy()))
    for remove in ("mutations", "mutations_and_views"):
        out = functionalize(f, remove=remove)(x, y)
        assert_close(out[0], expected[0])
        assert_close(out[1], expected[1])
        assert_close(x, [[1.0, 2.0], [3.0, 4.0]])
        assert_close(view, [3.0, 4.0])
        assert_close(y, [1.0, 1.0])
    with pytest.raises(ValueError, match="remove must be"):
        functionalize(f, remove="views")


def test_functionalize_outputs_do_not_alias_with_mutations_and_views() -> None:
    def f(x: Any) -> Any:
        y = x * 2
        return y, y.reshape(4), x

    x = tp.ones(2, 2)
    a, b, c = functionalize(f, remove="mutations_and_views")(x)
    b.add_(1.0)
    assert_close(a, np.full((2, 2), 2.0), check_dtype=False)
    c.add_(1.0)
    assert_close(x, np.ones((2, 2)), check_dtype=False)


def test_functionalize_composes_with_transforms() -> None:
    def f(x: Any) -> Any:
        y = x * 1.0
        y.add_(x.sin())
        return y.sum()

    g = grad(functionalize(f))(tp.tensor([0.0, 1.0]))
    assert_close(g, 1 + np.cos([0.0, 1.0]), check_dtype=False)
    per = vmap(functionalize(lambda x: x.clone().add_(1.0)))(tp.ones(3, 2))
    assert_close(per, np.full((3, 2), 2.0), check_dtype=False)


def test_transforms_write_back_the_state_a_function_updates() -> None:
    """A training batch norm under vjp/grad updates its running statistics once per call, as eagerly;
    under vmap (one update per sample) it is refused, as PyTorch does."""
    from tensorplay.func import grad, vjp, vmap
    x = tp.tensor(np.random.default_rng(0).standard_normal((6, 3, 4)))
    eager_bn, func_bn = tp.nn.BatchNorm1d(3).double(), tp.nn.BatchNorm1d(3).double()
    eager_bn(x)
    vjp(lambda v: func_bn(v), x)
    np.testing.assert_allclose(func_bn.running_mean.numpy(), eager_bn.running_mean.numpy(), rtol=1e-12)
    np.testing.assert_allclose(func_bn.running_var.numpy(), eager_bn.running_var.numpy(), rtol=1e-12)
    grad(lambda v: func_bn(v).sum())(x)
    eager_bn(x)
    np.testing.assert_allclose(func_bn.running_mean.numpy(), eager_bn.running_mean.numpy(), rtol=1e-12)
    batches = tp.tensor(np.random.default_rng(1).standard_normal((2, 6, 3, 4)))  # two batches of [N, C, L]
    with pytest.raises(ValueError, match="running statistics.*one update per sample"):
        vmap(func_bn)(batches)
    func_bn.eval()
    assert vmap(func_bn)(batches).shape == batches.shape
