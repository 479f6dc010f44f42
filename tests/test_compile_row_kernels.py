"""``softmax``, ``log_softmax`` and ``layer_norm`` in compiled code run the eager interpreter's row kernels
directly (no tensor round trip through the fallback): values and gradients agree with eager and PyTorch in
float32 and float64, along any axis, on odd sizes, strided inputs, NaN and inf."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn.functional as F
from tests.helpers import compiled_source


def _data(shape: tuple[int, ...], dtype: str, special: bool) -> np.ndarray[Any, Any]:
    x = np.random.default_rng(7).standard_normal(shape).astype(dtype) * 3
    if special:
        x.reshape(-1)[1] = np.inf
        x.reshape(-1)[-2] = -np.inf
        x.reshape(-1)[x.size // 2] = np.nan
    return x


def _tol(dtype: str) -> dict[str, float]:
    return {"rtol": 2e-5, "atol": 2e-6} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-13}


CASES = [((7, 13), 1, False), ((7, 13), 0, False), ((3, 5, 11), -1, False), ((3, 5, 11), 1, False),
         ((2, 9), -1, True), ((4, 3, 37), 2, True), ((1, 1), 1, False)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,axis,special", CASES)
@pytest.mark.parametrize("strided", [False, True])
def test_softmax_like_values_and_gradients(name: str, dtype: str, shape: tuple[int, ...], axis: int,
                                           special: bool, strided: bool) -> None:
    data = _data(shape, dtype, special)
    if strided:  # the function sees a transposed (non-contiguous) view
        data = np.ascontiguousarray(np.swapaxes(data, 0, -1))
    cot = np.random.default_rng(8).standard_normal(shape).astype(dtype)

    def fn(x: Any, g: Any) -> Any:
        if strided:
            x = x.transpose(0, -1)
        return (getattr(F, name)(x, dim=axis) * g).sum()

    compiled = tp.compile(fn)
    x = tp.tensor(data, requires_grad=True)
    loss = compiled(x, tp.tensor(cot))
    loss.backward()
    assert "_rt.wrap" not in compiled_source(compiled) and "_rt.rows" in compiled_source(compiled)

    tx = torch.tensor(data, requires_grad=True)
    tin = tx.transpose(0, -1) if strided else tx
    tloss = (getattr(torch, name)(tin, dim=axis) * torch.tensor(cot)).sum()
    tloss.backward()
    ex = tp.tensor(data, requires_grad=True)
    eloss = fn(ex, tp.tensor(cot))
    eloss.backward()
    for got in (loss, eloss):
        np.testing.assert_allclose(got.item(), tloss.item(), **_tol(dtype))
    assert x.grad is not None and ex.grad is not None and tx.grad is not None
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), **_tol(dtype))
    np.testing.assert_allclose(x.grad.numpy(), ex.grad.numpy(), **_tol(dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,special,strided", [((5, 17), False, False), ((2, 3, 33), False, True),
                                                   ((4, 9), True, False), ((1, 1), False, False)])
def test_layer_norm_values_and_gradients(dtype: str, shape: tuple[int, ...], special: bool, strided: bool) -> None:
    d = shape[-1]
    data = _data(shape, dtype, special)
    if strided:
        data = np.ascontiguousarray(np.swapaxes(data, 0, 1))
    rng = np.random.default_rng(9)
    w, b = (rng.standard_normal(d).astype(dtype) for _ in range(2))
    cot = rng.standard_normal(shape).astype(dtype)

    def fn(x: Any, weight: Any, bias: Any, g: Any) -> Any:
        if strided:
            x = x.transpose(0, 1)
        return (F.layer_norm(x, d, weight, bias, eps=1e-5) * g).sum()

    compiled = tp.compile(fn)
    args = [tp.tensor(a, requires_grad=True) for a in (data, w, b)]
    loss = compiled(*args, tp.tensor(cot))
    loss.backward()
    assert "_rt.wrap" not in compiled_source(compiled) and "_rt.layer_norm" in compiled_source(compiled)

    targs = [torch.tensor(a, requires_grad=True) for a in (data, w, b)]
    tin = targs[0].transpose(0, 1) if strided else targs[0]
    tloss = (torch.nn.functional.layer_norm(tin, (d,), targs[1], targs[2], eps=1e-5) * torch.tensor(cot)).sum()
    tloss.backward()
    tol = {"rtol": 1e-4, "atol": 1e-4} if dtype == "float32" else {"rtol": 1e-10, "atol": 1e-10}
    np.testing.assert_allclose(loss.item(), tloss.item(), **tol)  # NaN where PyTorch has NaN
    for a, t in zip(args, targs):
        assert a.grad is not None and t.grad is not None
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), **tol)
