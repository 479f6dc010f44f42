"""The erf-form GELU's backward in compiled code (``Phi(x) + x phi(x)`` as the rule records it, with an
``erf`` and an ``exp`` that no fused kernel computes) is one pass of the eager backward's kernel: gradients
agree with eager and PyTorch in float32 and float64, on odd sizes, strided inputs, NaN and inf; the tanh
form and other products are left as recorded."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn.functional as F
from tests.helpers import compiled_source


def _data(shape: tuple[int, ...], dtype: str, special: bool) -> np.ndarray[Any, Any]:
    x = (np.random.default_rng(4).standard_normal(shape) * 3).astype(dtype)
    if special:
        flat = x.reshape(-1)
        flat[:4] = [np.nan, np.inf, -np.inf, 40.0][:flat.size]
    return x


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(3, 7, 11), (1,), (64, 65)])
@pytest.mark.parametrize("special", [False, True])
@pytest.mark.parametrize("inside", [False, True])
def test_gelu_gradient_matches_eager_and_pytorch(dtype: str, shape: tuple[int, ...], special: bool,
                                                 inside: bool) -> None:
    data = _data(shape, dtype, special)
    cot = np.random.default_rng(5).standard_normal(shape).astype(dtype)
    w = tp.tensor(data, requires_grad=True)
    strided = len(shape) == 2

    def loss_of(x: Any, g: Any) -> Any:
        if strided:  # a transposed (non-contiguous) operand
            x = x.T
            g = g.T
        return (F.gelu(x) * g).sum()

    if inside:  # a training step: the backward is compiled together with the forward
        def step(g: Any) -> Any:
            w.grad = None
            loss = loss_of(w, g)
            loss.backward()
            return loss

        compiled = tp.compile(step)
        compiled(tp.tensor(cot))
    else:
        compiled = tp.compile(loss_of)
        compiled(w, tp.tensor(cot)).backward()
    assert "_rt.gelu_backward(" in compiled_source(compiled) and "erf" not in compiled_source(compiled)
    assert w.grad is not None
    e = tp.tensor(data, requires_grad=True)
    loss_of(e, tp.tensor(cot)).backward()
    t = torch.tensor(data, requires_grad=True)
    tin, tg = (t.T, torch.tensor(cot).T) if strided else (t, torch.tensor(cot))
    (torch.nn.functional.gelu(tin) * tg).sum().backward()
    assert e.grad is not None and t.grad is not None
    np.testing.assert_array_equal(w.grad.numpy(), e.grad.numpy())  # the eager backward's kernel itself
    tol = {"rtol": 2e-5, "atol": 1e-6} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-14}
    np.testing.assert_allclose(w.grad.numpy(), t.grad.numpy(), **tol)


def test_the_tanh_form_is_left_as_recorded() -> None:
    data = _data((5, 9), "float64", False)
    w = tp.tensor(data, requires_grad=True)
    compiled = tp.compile(lambda x: F.gelu(x, approximate="tanh").sum())
    compiled(w).backward()
    assert "_rt.gelu_backward(" not in compiled_source(compiled)
    t = torch.tensor(data, requires_grad=True)
    torch.nn.functional.gelu(t, approximate="tanh").sum().backward()
    assert w.grad is not None and t.grad is not None
    np.testing.assert_allclose(w.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-14)



def test_a_gelu_backward_taken_out_of_its_fusion_group_would_cycle_and_is_left_as_recorded() -> None:
    """In a pre-norm encoder layer with dropout, the GELU backward's nodes share a fusion group with nodes on
    both sides of them: taking the recognised subgraph out would leave a group that feeds it and reads it (a
    cycle, which failed the compile); the compiled step runs and agrees with eager."""
    from tensorplay import nn

    x = tp.tensor(np.random.default_rng(2).standard_normal((2, 5, 8)).astype(np.float32))
    losses, grads = [], []
    for compiled in (False, True):
        tp.manual_seed(0)
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, activation="gelu", batch_first=True,
                                           norm_first=True)

        def step() -> Any:
            loss = (layer(x) ** 2).mean()
            loss.backward()
            return loss

        run = tp.compile(step) if compiled else step
        losses.append([run().item() for _ in range(3)])
        grads.append(layer.linear1.weight.grad.numpy().copy())
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-4, atol=1e-6)
