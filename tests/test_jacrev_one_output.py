"""``jacrev`` of a function with one output element (a scalar loss, a ``[1]`` result, a pytree whose other
leaves are empty) pulls its one basis vector back without ``vmap`` (the Hessian's inner Jacobian): the
results keep the shapes ``o.shape + x.shape`` and match PyTorch, under every transform and compile."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay.func import grad, hessian, jacfwd, jacrev, vmap
from tensorplay.func.cache import set_caching

_X = np.array([0.3, -1.2, 2.0, 0.7])
_A = np.random.default_rng(5).standard_normal((4, 4))


def _f(lib: Any, x: Any, a: Any) -> Any:
    return (lib.tanh(a @ x) * x).sum() + (x * x * x).sum() / 3.0


def _tp_f(x: Any) -> Any:
    return _f(tp, x, tp.tensor(_A.astype(x.dtype.name)))


def _torch_f(x: Any) -> Any:
    return _f(torch, x, torch.tensor(_A, dtype=x.dtype))


@pytest.fixture(params=[True, False], ids=["cached", "uncached"])
def caching(request: Any) -> Any:
    previous = set_caching(request.param)
    yield request.param
    set_caching(previous)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_scalar_jacobian_and_hessian_match_torch(caching: bool, dtype: str) -> None:
    x = _X.astype(dtype)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-12)
    expected_j = torch.func.jacrev(_torch_f)(torch.tensor(x)).numpy()
    expected_h = torch.func.hessian(_torch_f)(torch.tensor(x)).numpy()
    for _ in range(3):  # first call, the call that traces into the cache, a cached call
        j = jacrev(_tp_f)(tp.tensor(x))
        h = hessian(_tp_f)(tp.tensor(x))
        assert j.shape == (4,) and j.dtype.name == dtype and h.shape == (4, 4) and h.dtype.name == dtype
        np.testing.assert_allclose(j.numpy(), expected_j, **tol)
        np.testing.assert_allclose(h.numpy(), expected_h, **tol)
    np.testing.assert_allclose(jacfwd(jacrev(_tp_f))(tp.tensor(x)).numpy(), expected_h, **tol)
    np.testing.assert_allclose(tp.compile(hessian(_tp_f))(tp.tensor(x)).numpy(), expected_h, **tol)


def test_one_element_outputs_keep_their_shapes(caching: bool) -> None:
    x = tp.tensor(_X)
    xt = torch.tensor(_X)

    def one(v: Any) -> Any:  # output [1, 1]
        return (v * v).sum().reshape(1, 1)

    def tree(v: Any) -> Any:  # a scalar leaf and an empty one
        return {"loss": (v.sin() * v).sum(), "none": v[:0] * 2.0}

    got = jacrev(one)(x)
    assert got.shape == (1, 1, 4)
    np.testing.assert_allclose(got.numpy(), torch.func.jacrev(lambda v: (v * v).sum().reshape(1, 1))(xt).numpy())
    got_tree = jacrev(tree)(x)
    expected = torch.func.jacrev(lambda v: {"loss": (v.sin() * v).sum(), "none": v[:0] * 2.0})(xt)
    assert got_tree["loss"].shape == (4,) and got_tree["none"].shape == (0, 4)
    np.testing.assert_allclose(got_tree["loss"].numpy(), expected["loss"].numpy(), rtol=1e-12)
    # two arguments, one of them unreached: a zero Jacobian of its shape
    j0, j1 = jacrev(lambda a, b: (a * a).sum(), argnums=(0, 1))(x, tp.tensor(np.ones((2, 3))))
    assert j0.shape == (4,) and j1.shape == (2, 3)
    np.testing.assert_array_equal(j1.numpy(), np.zeros((2, 3)))
    np.testing.assert_allclose(j0.numpy(), 2 * _X)
    # has_aux
    j, aux = jacrev(lambda v: ((v * v).sum(), v.max()), has_aux=True)(x)
    np.testing.assert_allclose(j.numpy(), 2 * _X)
    assert float(aux.numpy()) == _X.max()


def test_under_vmap_and_grad_every_row_gets_its_own_hessian(caching: bool) -> None:
    rows = np.stack([_X, _X[::-1] * 0.5, -_X])
    got = vmap(hessian(_tp_f))(tp.tensor(rows)).numpy()
    expected = torch.func.vmap(torch.func.hessian(_torch_f))(torch.tensor(rows)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    assert not np.allclose(got[0], got[1])  # not one row's value for all
    # d/dx of the trace of the Hessian
    got_g = grad(lambda v: hessian(_tp_f)(v).sum())(tp.tensor(_X)).numpy()
    expected_g = torch.func.grad(lambda v: torch.func.hessian(_torch_f)(v).sum())(torch.tensor(_X)).numpy()
    np.testing.assert_allclose(got_g, expected_g, rtol=1e-10, atol=1e-12)


def test_the_one_element_path_runs_no_vmap(monkeypatch: Any) -> None:
    """What the tests above check is the direct pull-back, not vmap over a basis of one vector."""
    import tensorplay.func.jac as jac

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("vmap called for a one-element output")

    monkeypatch.setattr(jac, "vmap", refuse)
    previous = set_caching(False)
    try:
        got = jac.jacrev(_tp_f)(tp.tensor(_X)).numpy()
        with pytest.raises(AssertionError, match="vmap called"):
            jac.jacrev(lambda v: v * 2.0)(tp.tensor(_X))  # four output elements: the vmap path
    finally:
        set_caching(previous)
    np.testing.assert_allclose(got, torch.func.jacrev(_torch_f)(torch.tensor(_X)).numpy(), rtol=1e-12)
