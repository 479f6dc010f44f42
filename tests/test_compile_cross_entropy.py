"""``nn.functional.cross_entropy`` of class indices in a compiled function (with its reverse sweep in a
compiled training step, or alone) is one row-kernel call where the recorded form is a dozen numpy calls:
loss and gradients agree with eager and PyTorch in float32 and float64, with ignored targets, every target
ignored, NaN and inf logits, strided logits, and an out-of-range target is still named."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay.errors import TensorplayError
from tests.helpers import compiled_source


def _tol(dtype: str) -> dict[str, float]:
    return {"rtol": 1e-5, "atol": 1e-6} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-13}


def _case(m: int, c: int, dtype: str, kind: str, ignore: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    rng = np.random.default_rng(m * 100 + c)
    x = (rng.standard_normal((m, c)) * 3).astype(dtype)
    t = rng.integers(0, c, m).astype(np.int64)
    if kind in ("ignored", "special"):
        t[::3] = ignore
    if kind == "all-ignored":
        t[:] = ignore
    if kind == "special" and m >= 5 and c >= 3:
        x[1, 2] = np.nan   # a counted row (target not ignored: 1 % 3 != 0)
        x[2, 0] = np.inf
        x[3, :] = -np.inf  # an ignored row (3 % 3 == 0): no loss, but NaN in its gradient as recorded
        x[4, 1] = -np.inf
    return x, t


KINDS = ["plain", "ignored", "all-ignored", "special"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m,c", [(7, 13), (1, 1), (33, 5)])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("strided", [False, True])
def test_a_compiled_training_step_matches_eager_and_pytorch(dtype: str, m: int, c: int, kind: str,
                                                             strided: bool) -> None:
    ignore = -100 if kind != "ignored" else 2 % c
    x_np, t_np = _case(m, c, dtype, kind, ignore)
    if kind == "ignored" and ignore >= 0:
        t_np[::3] = ignore
    data = np.ascontiguousarray(x_np.T) if strided else x_np

    def loss_of(x: Any, t: Any) -> Any:
        return F.cross_entropy(x.T if strided else x, t, ignore_index=ignore)

    w = tp.tensor(data, requires_grad=True)

    def step(t: Any) -> Any:
        w.grad = None
        loss = loss_of(w, t)
        loss.backward()
        return loss

    compiled = tp.compile(step)
    got = compiled(tp.tensor(t_np))
    assert "_rt.cross_entropy(" in compiled_source(compiled) and "_rt.cross_entropy_grad(" in compiled_source(compiled)
    assert w.grad is not None
    got_grad = w.grad.numpy().copy()

    e = tp.tensor(data, requires_grad=True)
    expected = loss_of(e, tp.tensor(t_np))
    expected.backward()
    tx = torch.tensor(data, requires_grad=True)
    tloss = torch.nn.functional.cross_entropy(tx.T if strided else tx, torch.tensor(t_np), ignore_index=ignore)
    tloss.backward()
    assert e.grad is not None and tx.grad is not None
    np.testing.assert_allclose(got.item(), tloss.item(), **_tol(dtype))
    np.testing.assert_allclose(expected.item(), tloss.item(), **_tol(dtype))
    if kind != "special":  # PyTorch's ignored rows get exact zeros even for -inf logits; ours follow the recorded form
        np.testing.assert_allclose(got_grad, tx.grad.numpy(), **_tol(dtype))
    np.testing.assert_allclose(got_grad, e.grad.numpy(), **_tol(dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_loss_alone_is_one_call(dtype: str) -> None:
    x_np, t_np = _case(9, 4, dtype, "ignored", -100)
    compiled = tp.compile(lambda x, t: F.cross_entropy(x, t))
    got = compiled(tp.tensor(x_np), tp.tensor(t_np))
    assert "_rt.cross_entropy(" in compiled_source(compiled) and "log_softmax" not in compiled_source(compiled)
    expected = torch.nn.functional.cross_entropy(torch.tensor(x_np), torch.tensor(t_np))
    np.testing.assert_allclose(got.item(), expected.item(), **_tol(dtype))


def test_an_out_of_range_target_is_still_named() -> None:
    x_np, t_np = _case(5, 4, "float32", "plain", -100)
    compiled = tp.compile(lambda x, t: F.cross_entropy(x, t))
    compiled(tp.tensor(x_np), tp.tensor(t_np))
    t_np[3] = 4
    with pytest.raises(TensorplayError, match="cross_entropy: target"):
        compiled(tp.tensor(x_np), tp.tensor(t_np))


def test_other_losses_built_from_the_same_primitives_are_left_alone() -> None:
    """The matcher checks the offsets and the mask: a weighted loss and a sum are recorded differently and run
    as recorded (and stay right)."""
    x_np, t_np = _case(6, 3, "float64", "ignored", -100)
    weight = np.array([0.5, 2.0, 1.0])
    for kwargs in ({"weight": weight}, {"reduction": "sum"}, {"label_smoothing": 0.1}):
        def fn(x: Any, t: Any, kwargs: dict[str, Any] = kwargs) -> Any:
            extra = {k: tp.tensor(v) if k == "weight" else v for k, v in kwargs.items()}
            return F.cross_entropy(x, t, **extra)

        compiled = tp.compile(fn)
        got = compiled(tp.tensor(x_np), tp.tensor(t_np))
        assert "_rt.cross_entropy(" not in compiled_source(compiled), kwargs
        textra = {k: torch.tensor(v) if k == "weight" else v for k, v in kwargs.items()}
        expected = torch.nn.functional.cross_entropy(torch.tensor(x_np), torch.tensor(t_np), **textra)
        np.testing.assert_allclose(got.item(), expected.item(), rtol=1e-12, err_msg=str(kwargs))
