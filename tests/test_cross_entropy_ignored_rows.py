"""``cross_entropy`` with ignored targets, with and without class weights: an ignored row contributes nothing
to the loss whatever its logits hold (NaN, inf), and receives a zero gradient when they are finite, even when
every row is ignored (the mean is then NaN, its gradient zero), as in PyTorch (whose ignored rows of
non-finite logits get NaN through ``log_softmax``'s backward, as ours do); eager, traced and compiled alike."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn.functional as F


def _case(dtype: str, pattern: str) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((6, 4)) * 2).astype(dtype)
    t = rng.integers(0, 4, 6).astype(np.int64)
    w = rng.uniform(0.5, 2.0, 4).astype(dtype)
    if pattern == "all":
        t[:] = -100
    else:
        t[[1, 4]] = -100
        if pattern == "non-finite":
            x[1, 2] = np.nan
            x[4, :] = -np.inf
    return x, t, w


def _torch(x: np.ndarray[Any, Any], t: np.ndarray[Any, Any], w: np.ndarray[Any, Any] | None,
           reduction: str, smoothing: float) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    tx = torch.tensor(x, requires_grad=True)
    loss = torch.nn.functional.cross_entropy(tx, torch.tensor(t), weight=None if w is None else torch.tensor(w),
                                             reduction=reduction, label_smoothing=smoothing)
    loss.sum().backward()
    assert tx.grad is not None
    return loss.detach().numpy(), tx.grad.numpy()


def _ours(x: np.ndarray[Any, Any], t: np.ndarray[Any, Any], w: np.ndarray[Any, Any] | None, reduction: str,
          smoothing: float, way: str) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    def loss_and_grad(xt: Any, tt: Any) -> Any:
        loss = F.cross_entropy(xt, tt, weight=None if w is None else tp.tensor(w), reduction=reduction,
                               label_smoothing=smoothing)
        return loss, tp.func.grad(lambda v: F.cross_entropy(
            v, tt, weight=None if w is None else tp.tensor(w), reduction=reduction,
            label_smoothing=smoothing).sum())(xt)

    fn = tp.compile(loss_and_grad) if way == "compiled" else loss_and_grad
    if way == "tape":
        xt = tp.tensor(x, requires_grad=True)
        loss = F.cross_entropy(xt, tp.tensor(t), weight=None if w is None else tp.tensor(w), reduction=reduction,
                               label_smoothing=smoothing)
        loss.sum().backward()
        assert xt.grad is not None
        return loss.detach().numpy(), xt.grad.numpy()
    loss, grad = fn(tp.tensor(x), tp.tensor(t))
    return loss.numpy(), grad.numpy()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("pattern", ["some", "non-finite", "all"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("reduction,smoothing", [("mean", 0.0), ("sum", 0.0), ("none", 0.0), ("mean", 0.2)])
@pytest.mark.parametrize("way", ["tape", "grad", "compiled"])
def test_ignored_rows_add_nothing_and_get_no_gradient(dtype: str, pattern: str, weighted: bool, reduction: str,
                                                       smoothing: float, way: str) -> None:
    x, t, w = _case(dtype, pattern)
    weight = w if weighted else None
    inputs = (x.copy(), t.copy(), w.copy())
    want_loss, want_grad = _torch(x, t, weight, reduction, smoothing)
    got_loss, got_grad = _ours(x, t, weight, reduction, smoothing, way)
    tol = {"rtol": 2e-5, "atol": 2e-6} if dtype == "float32" else {"rtol": 1e-11, "atol": 1e-12}
    np.testing.assert_allclose(got_loss, want_loss, **tol)  # NaN where PyTorch's is NaN (every row ignored)
    np.testing.assert_allclose(got_grad, want_grad, **tol)
    if pattern != "non-finite":
        np.testing.assert_array_equal(got_grad[t == -100], 0.0)
    for before, after in zip(inputs, (x, t, w)):
        np.testing.assert_array_equal(before, after)
