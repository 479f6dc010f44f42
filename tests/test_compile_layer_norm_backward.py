"""``layer_norm``'s backward in compiled code (its rule's composite: the statistics recomputed, then
``dx`` and ``dgamma``) is one call of the eager backward's row kernel: gradients agree with eager and PyTorch
in float32 and float64, with or without a gradient for ``x``, ``weight`` or ``bias``, on odd sizes,
strided inputs and NaN. In a training step the backward reads the statistics the forward's call kept."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn.functional as F
from tests.helpers import compiled_source


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(3, 5, 17), (7, 3), (2, 33)])
@pytest.mark.parametrize("needs", ["all", "params", "x"])
@pytest.mark.parametrize("inside", [False, True])
@pytest.mark.parametrize("special", [False, True])
def test_layer_norm_gradients(dtype: str, shape: tuple[int, ...], needs: str, inside: bool, special: bool) -> None:
    d = shape[-1]
    rng = np.random.default_rng(11)
    data = (rng.standard_normal(shape) * 2 + 0.5).astype(dtype)
    if special:
        data.reshape(-1)[d + 1 if data.size > d + 1 else 0] = np.nan  # one row of NaN results
    strided = len(shape) == 2 and shape[0] > 1
    if strided:
        data = np.ascontiguousarray(data.T)
    w_np, b_np = (rng.standard_normal(d).astype(dtype) for _ in range(2))
    cot = rng.standard_normal(shape).astype(dtype)
    x = tp.tensor(data, requires_grad=needs in ("all", "x"))
    w = tp.tensor(w_np, requires_grad=needs in ("all", "params"))
    b = tp.tensor(b_np, requires_grad=needs in ("all", "params"))

    def loss_of(x: Any, w: Any, b: Any, g: Any) -> Any:
        return (F.layer_norm(x.T if strided else x, d, w, b) * g).sum()

    if inside:
        def step(g: Any) -> Any:
            for t in (x, w, b):
                t.grad = None
            loss = loss_of(x, w, b, g)
            loss.backward()
            return loss

        compiled = tp.compile(step)
        compiled(tp.tensor(cot))
    else:
        compiled = tp.compile(loss_of)
        compiled(x, w, b, tp.tensor(cot)).backward()
    assert "_rt.layer_norm_backward(" in compiled_source(compiled) and "rsqrt" not in compiled_source(compiled)
    if inside:  # forward and backward in one function: the backward reads the forward's statistics
        assert "_rt.layer_norm_stats(" in compiled_source(compiled)
        compiled(tp.tensor(cot))  # the cached specialization again

    tx, tw, tb = (torch.tensor(a, requires_grad=t._requires_grad) for a, t in ((data, x), (w_np, w), (b_np, b)))
    (torch.nn.functional.layer_norm(tx.T if strided else tx, (d,), tw, tb) * torch.tensor(cot)).sum().backward()
    ex, ew, eb = (tp.tensor(a, requires_grad=t._requires_grad) for a, t in ((data, x), (w_np, w), (b_np, b)))
    loss_of(ex, ew, eb, tp.tensor(cot)).backward()
    tol = {"rtol": 1e-4, "atol": 1e-5} if dtype == "float32" else {"rtol": 1e-10, "atol": 1e-11}
    for ours, theirs, eager in ((x, tx, ex), (w, tw, ew), (b, tb, eb)):
        if not ours._requires_grad:
            continue
        assert ours.grad is not None and theirs.grad is not None and eager.grad is not None
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), **tol)
        np.testing.assert_allclose(ours.grad.numpy(), eager.grad.numpy(), **tol)
