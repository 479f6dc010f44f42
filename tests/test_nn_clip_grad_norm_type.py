"""clip_grad_norm_'s norm_type: a value that is no number ('fro', None) is an error naming norm_type and
the accepted values (torch raises only float()'s bare message); every order torch accepts (negative,
-inf, NaN, numeric strings) gives torch's total norm and clipped gradients."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay import nn

GRADS = [np.array([1.0, -2.0, 3.0], np.float32), np.array([[0.5, 4.0], [0.0, -1.5]], np.float32)]


def clip(lib: str, norm_type: Any, max_norm: float = 0.3) -> tuple[float, list[Any]]:
    if lib == "torch":
        params = [torch.nn.Parameter(torch.zeros(g.shape)) for g in GRADS]
        for p, g in zip(params, GRADS):
            p.grad = torch.tensor(g)
        total = torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type=norm_type)
        return float(total), [p.grad.numpy() for p in params if p.grad is not None]
    ours = [nn.Parameter(np.zeros(g.shape, np.float32)) for g in GRADS]
    for q, g in zip(ours, GRADS):
        q.grad = tp.tensor(g.copy())
    total_t = nn.utils.clip_grad_norm_(ours, max_norm, norm_type=norm_type)
    return float(total_t.item()), [q.grad.numpy() for q in ours if q.grad is not None]


@pytest.mark.parametrize("norm_type", ["fro", "nuc", "two", ""])
def test_a_string_that_is_no_number_names_norm_type(norm_type: str) -> None:
    with pytest.raises(ValueError):
        clip("torch", norm_type)  # torch rejects it too, with float()'s message
    with pytest.raises(ValueError, match=r"clip_grad_norm_: norm_type must be a float or an int .*'inf'.*got "
                                         + repr(norm_type)):
        clip("tp", norm_type)


@pytest.mark.parametrize("norm_type", [None, 1 + 2j, [2.0]])
def test_a_value_of_another_type_names_norm_type(norm_type: Any) -> None:
    with pytest.raises(TypeError):
        clip("torch", norm_type)
    with pytest.raises(TypeError, match=r"clip_grad_norm_: norm_type must be a float or an int .*'inf'.*got "):
        clip("tp", norm_type)


@pytest.mark.parametrize("norm_type", [2, 2.0, 1, 0.5, 3, 0, "inf", "2", " Infinity", float("inf"), -1, -2.5,
                                       float("-inf"), "-inf", np.float32(3.0), True])
def test_every_order_torch_accepts_gives_its_norm(norm_type: Any) -> None:
    total_t, grads_t = clip("torch", norm_type)
    total, grads = clip("tp", norm_type)
    np.testing.assert_allclose(total, total_t, rtol=1e-5)
    for g, g_t in zip(grads, grads_t):
        np.testing.assert_allclose(g, g_t, rtol=1e-5, atol=1e-7)


def test_nan_order_gives_nan_as_torch() -> None:
    assert np.isnan(clip("torch", float("nan"))[0])
    assert np.isnan(clip("tp", float("nan"))[0])
