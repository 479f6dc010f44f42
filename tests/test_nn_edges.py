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


# ---- optimizer hyperparameters and state dicts --------------------------------------------------

BAD_HYPERPARAMETERS = [
    (tp.optim.Adam, {"lr": "0.1"}, "learning rate must be a number, got str '0.1'"),
    (tp.optim.Adam, {"lr": float("nan")}, "learning rate must be finite, got nan"),
    (tp.optim.Adam, {"lr": -5.0}, r"invalid learning rate -5.0 \(expected >= 0.0\)"),
    (tp.optim.Adam, {"betas": (2.0, 0.5)}, r"beta parameter at index 0 2.0 \(expected \[0.0, 1.0\)\)"),
    (tp.optim.Adam, {"betas": 0.9}, "betas must be a pair"),
    (tp.optim.AdamW, {"eps": float("inf")}, "epsilon value must be finite"),
    (tp.optim.AdamW, {"weight_decay": None}, "weight_decay value must be a number, got NoneType"),
    (tp.optim.SGD, {"lr": float("nan")}, "learning rate must be finite"),
    (tp.optim.SGD, {"momentum": "0.9"}, "momentum must be a number"),
    (tp.optim.SGD, {"nesterov": 1}, "nesterov must be True or False"),
]


@pytest.mark.parametrize("cls, kwargs, message", BAD_HYPERPARAMETERS)
def test_optimizer_hyperparameters_are_checked(cls: Any, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(OptimizerError, match=message):
        cls([tp.ones(2, requires_grad=True)], **kwargs)


def _trained_adam() -> tuple[Any, Any]:
    p = tp.ones(2, requires_grad=True)
    opt = tp.optim.Adam([p], lr=0.1)
    (p * p).sum().backward()
    opt.step()
    return p, opt


@pytest.mark.parametrize("corrupt, message", [
    (lambda sd: sd["param_groups"][0].update(lr=-5), "parameter group 0: Adam: invalid learning rate -5"),
    (lambda sd: sd["param_groups"][0].update(betas=(2.0, 0.5)), "beta parameter at index 0"),
    (lambda sd: sd["state"][0].update(exp_avg=np.zeros(3)), r"state 'exp_avg' of parameter 0 has shape \[3\]"),
])
def test_a_bad_state_dict_changes_nothing(corrupt: Any, message: str) -> None:
    p, opt = _trained_adam()
    before = opt.state_dict()
    sd = opt.state_dict()
    sd["state"][0]["exp_avg"] = np.full(2, 7.0, dtype=np.float32)  # a valid change that must not land
    sd["param_groups"][0]["eps"] = 0.5
    corrupt(sd)
    with pytest.raises(OptimizerError, match=message):
        opt.load_state_dict(sd)
    after = opt.state_dict()
    assert after["param_groups"] == before["param_groups"]
    np.testing.assert_array_equal(after["state"][0]["exp_avg"], before["state"][0]["exp_avg"])


def test_a_good_state_dict_round_trips_like_pytorch() -> None:
    p, opt = _trained_adam()
    q = tp.tensor(p.detach().numpy(), requires_grad=True)  # a copy of the model, with a fresh optimizer
    other = tp.optim.Adam([q], lr=0.5)
    other.load_state_dict(opt.state_dict())
    assert other.param_groups[0]["lr"] == 0.1
    tq = torch.ones(2, requires_grad=True)
    topt = torch.optim.Adam([tq], lr=0.1)
    (tq * tq).sum().backward()
    topt.step()
    for opt_, grad in ((opt, p), (other, q)):
        grad.grad = tp.tensor([1.0, -1.0])
        opt_.step()
    tq.grad = torch.tensor([1.0, -1.0])
    topt.step()
    np.testing.assert_array_equal(q.detach().numpy(), p.detach().numpy())  # the loaded copy continues exactly
    np.testing.assert_allclose(p.detach().numpy(), tq.detach().numpy(), rtol=1e-5)
