"""tp.autograd.grad runs only the backward nodes with a path on to the requested inputs, as PyTorch: the
gradient of a loss with respect to its input computes no weight gradients, and the values are torch's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp

torch = pytest.importorskip("torch")


def _mlp(lib: Any, x: Any, ws: list[Any]) -> Any:
    h = x
    for w in ws[:-1]:
        h = (h @ w).tanh()
    return (h @ ws[-1]).square().sum()


def test_input_gradient_matches_torch_and_skips_weight_gradients(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((16, 32)), rng.standard_normal((32, 32)), rng.standard_normal((32, 8))]
    xa = rng.standard_normal((4, 16))
    ws = [tp.tensor(a, requires_grad=True) for a in arrays]
    x = tp.tensor(xa, requires_grad=True)
    tws = [torch.tensor(a, requires_grad=True) for a in arrays]
    tx = torch.tensor(xa, requires_grad=True)

    from tensorplay.interpreters.eager import fused_vjp
    calls: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    original = fused_vjp.K.matmul

    def counting(a: Any, b: Any, *rest: Any) -> Any:  # the backward's GEMMs (the fused matmul rule's)
        calls.append((tuple(a.shape), tuple(b.shape)))
        return original(a, b, *rest)

    loss = _mlp(tp, x, ws)
    monkeypatch.setattr(fused_vjp.K, "matmul", counting)
    (gx,) = tp.autograd.grad(loss, [x], retain_graph=True)
    (tgx,) = torch.autograd.grad(_mlp(torch, tx, tws), [tx])
    np.testing.assert_allclose(gx.numpy(), tgx.numpy(), rtol=1e-12, atol=1e-12)
    # the backward of three x @ w: one GEMM each for the cotangent of x, none for any weight (their
    # cotangents x^T @ g would be [16, 32], [32, 32] and [32, 8])
    assert len(calls) == 3, calls
    assert all(a[0] == 4 for a, _ in calls), calls
    assert all(w.grad is None for w in ws) and x.grad is None  # grad() never writes .grad

    calls.clear()  # asking for one weight runs the path down to it, and only that
    (g1,) = tp.autograd.grad(loss, [ws[1]], retain_graph=True)
    (tg1,) = torch.autograd.grad(_mlp(torch, tx, tws), [tws[1]])
    np.testing.assert_allclose(g1.numpy(), tg1.numpy(), rtol=1e-12, atol=1e-12)
    assert len(calls) == 2, calls  # the top layer's input cotangent, then the weight's own GEMM
    # every input at once: the full backward, all matching torch
    grads = tp.autograd.grad(loss, [x, *ws])
    tgrads = torch.autograd.grad(_mlp(torch, tx, tws), [tx, *tws])
    for g, t in zip(grads, tgrads):
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-12, atol=1e-12)


def test_an_intermediate_target_and_a_leaf_beyond_it() -> None:
    a = tp.tensor(np.array([1.0, 2.0]), requires_grad=True)
    w = tp.tensor(np.array([3.0, -1.0]), requires_grad=True)
    h = a * w
    out = (h.exp() + w).sum()
    gh, ga = tp.autograd.grad(out, [h, a])
    ta = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    tw = torch.tensor([3.0, -1.0], dtype=torch.float64, requires_grad=True)
    th = ta * tw
    tgh, tga = torch.autograd.grad((th.exp() + tw).sum(), [th, ta])
    np.testing.assert_allclose(gh.numpy(), tgh.numpy(), rtol=1e-12)
    np.testing.assert_allclose(ga.numpy(), tga.numpy(), rtol=1e-12)
