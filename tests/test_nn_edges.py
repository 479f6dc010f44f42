"""Edge cases of nn and optim: fully masked attention rows, empty batches, zero-size heads,
optimizer hyperparameters and state dicts. PyTorch (CPU) is the oracle."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay.optim import OptimizerError


def T(x: Any) -> torch.Tensor:
    return torch.tensor(np.asarray(x.detach().numpy() if isinstance(x, tp.Tensor) else x))


# ---- attention with fully masked rows ---------------------------------------------------------

def _masks() -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    allowed = np.ones((3, 5), dtype=bool)
    allowed[1] = False  # query 1 may attend to nothing
    allowed[0, 2] = False
    additive = np.where(allowed, 0.0, -np.inf).astype(np.float32)
    return allowed, additive


@pytest.mark.parametrize("kind", ["float", "bool", "bool+dropout"])
def test_sdpa_rows_with_every_key_masked_give_zeros_and_zero_gradients(kind: str) -> None:
    tp.manual_seed(0)
    q, k, v = tp.randn(2, 3, 4), tp.randn(2, 5, 4), tp.randn(2, 5, 6)
    allowed, additive = _masks()
    mask = tp.tensor(additive if kind == "float" else allowed)
    drop = 0.5 if kind == "bool+dropout" else 0.0
    qg = tp.tensor(q.numpy(), requires_grad=True)
    out = F.scaled_dot_product_attention(qg, k, v, mask, dropout_p=drop)
    np.testing.assert_array_equal(out[:, 1].detach().numpy(), np.zeros((2, 6)))
    assert np.isfinite(out.detach().numpy()).all()
    out.sum().backward()
    assert qg.grad is not None and np.isfinite(qg.grad.numpy()).all()
    np.testing.assert_array_equal(qg.grad[:, 1].numpy(), np.zeros((2, 4)))
    if drop == 0.0:
        expected = torch.nn.functional.scaled_dot_product_attention(T(q), T(k), T(v), T(mask))
        np.testing.assert_allclose(out.detach().numpy(), expected.numpy(), atol=1e-6)
    per_sample = tp.func.vmap(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, mask))(q, k, v)
    np.testing.assert_array_equal(per_sample[:, 1].numpy(), np.zeros((2, 6)))


def test_multihead_attention_masks_a_row_the_same_with_and_without_weights() -> None:
    tp.manual_seed(0)
    mha = tp.nn.MultiheadAttention(8, 2)
    x = tp.randn(2, 3, 8)
    allowed, _ = _masks()
    blocked = tp.tensor(~allowed[:, :3])  # True = may not attend; row 1 blocks every key
    fused, _ = mha(x, attn_mask=blocked, need_weights=False)
    composed, weights = mha(x, attn_mask=blocked, need_weights=True)
    assert weights is not None and np.isfinite(weights.detach().numpy()).all()
    np.testing.assert_allclose(composed.detach().numpy(), fused.detach().numpy(), atol=1e-6)
    assert np.isfinite(fused.detach().numpy()).all()
