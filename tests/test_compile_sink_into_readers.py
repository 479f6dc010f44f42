"""A pointwise value grouped with the forward's kernel only to be read by the backward's kernel (relu's mask
``sign(relu(x))``) is computed in the backward's kernel instead: the forward's kernel writes one array fewer,
and values and gradients stay those of PyTorch, NaN included."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay import nn


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_relu_mask_moves_into_the_backward_kernel(dtype: str) -> None:
    tp.manual_seed(2)
    model = nn.Sequential(nn.Linear(37, 129), nn.ReLU(), nn.Linear(129, 3))
    if dtype == "float64":
        model = model.double()
    data = np.random.default_rng(0).standard_normal((41, 37)).astype(dtype)
    data[3, 5] = np.nan

    def step(x: Any) -> Any:
        for p in model.parameters():
            p.grad = None
        loss = model(x).square().sum()  # the backward reads the forward: a kernel of its own
        loss.backward()
        return loss

    compiled = tp.compile(step)
    loss = compiled(tp.tensor(data))
    plans = [plan for spec in compiled.specializations for plan in spec.program.forward.kernels]
    relu_groups = [plan for plan in plans if any(n.target == "relu" for n in plan.nodes)]
    assert relu_groups and all(len(plan.outputs) == 1 for plan in relu_groups)  # relu(x + b) only
    assert any(any(n.target == "sign" for n in plan.nodes) and not any(n.target == "relu" for n in plan.nodes)
               for plan in plans)  # the mask is computed where it is read

    tmodel = torch.nn.Sequential(torch.nn.Linear(37, 129), torch.nn.ReLU(), torch.nn.Linear(129, 3)).to(
        getattr(torch, dtype))
    with torch.no_grad():
        for t, p in zip(tmodel.parameters(), model.parameters()):
            t.copy_(torch.tensor(p.detach().numpy()))
    tloss = tmodel(torch.tensor(data)).square().sum()
    tloss.backward()
    np.testing.assert_allclose(loss.item(), tloss.item(), equal_nan=True)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-12}
    for t, p in zip(tmodel.parameters(), model.parameters()):
        assert p.grad is not None and t.grad is not None
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), **tol)
