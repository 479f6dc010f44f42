"""A float sum over the leading axes (a bias's gradient) in compiled code is one GEMV with a vector of ones
(:func:`tensorplay.compiler.numba_backend.runtime.sum_leading`): values agree with numpy and PyTorch in
float32 and float64, on odd and zero sizes, non-contiguous operands, NaN and inf; other reductions are
left to numpy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay.compiler.numba_backend.runtime import sum_leading
from tests.helpers import compiled_source


def _tol(dtype: str) -> dict[str, float]:
    return {"rtol": 1e-5, "atol": 1e-5} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-12}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,k", [((7, 5), 1), ((3, 11, 4), 2), ((600, 33), 1), ((2, 3, 4, 5), 1),
                                     ((0, 4), 1), ((4, 0), 1), ((40, 300), 1)])
@pytest.mark.parametrize("layout", ["c", "transposed", "special"])
def test_sum_leading_matches_numpy_and_pytorch(dtype: str, shape: tuple[int, ...], k: int, layout: str) -> None:
    x = np.random.default_rng(1).standard_normal(shape).astype(dtype)
    if layout == "transposed":  # the same values through a non-contiguous view
        x = np.ascontiguousarray(x.T).T
        assert x.size == 0 or not x.flags.c_contiguous or x.ndim == 1
    if layout == "special" and x.size:
        flat = x.reshape(-1)
        flat[: min(3, flat.size)] = [np.nan, np.inf, -np.inf][: min(3, flat.size)]
    before = x.copy()
    got = sum_leading(x, k)
    np.testing.assert_array_equal(x, before)  # the input is not changed
    want = torch.tensor(x).sum(dim=tuple(range(k))).numpy()
    assert got.shape == want.shape and got.dtype == x.dtype
    np.testing.assert_allclose(got, want, **_tol(dtype))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    got[...] = 5  # a fresh array: the cached vector of ones is not reachable through it
    np.testing.assert_allclose(sum_leading(x, k), want, **_tol(dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_bias_gradient_of_a_compiled_step(dtype: str) -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 9, 5)).astype(dtype)
    w = rng.standard_normal((5, 7)).astype(dtype)
    b = rng.standard_normal(7).astype(dtype)
    cot = rng.standard_normal((6, 9, 7)).astype(dtype)
    bias = tp.tensor(b, requires_grad=True)

    def step(xb: Any, g: Any) -> Any:
        bias.grad = None
        loss = ((xb @ tp.tensor(w) + bias) * g).sum()
        loss.backward()
        return loss

    compiled = tp.compile(step)
    compiled(tp.tensor(x), tp.tensor(cot))
    assert "_rt.sum_leading(" in compiled_source(compiled)
    assert bias.grad is not None
    tb = torch.tensor(b, requires_grad=True)
    ((torch.tensor(x) @ torch.tensor(w) + tb) * torch.tensor(cot)).sum().backward()
    assert tb.grad is not None
    np.testing.assert_allclose(bias.grad.numpy(), tb.grad.numpy(), **_tol(dtype))


def test_other_reductions_stay_numpy() -> None:
    x = np.random.default_rng(3).standard_normal((4, 5, 6))
    compiled = tp.compile(lambda t: (t.sum(dim=(0, 2)), t.sum(dim=(1,), keepdim=True), t.sum(dim=(-1,))))
    got = compiled(tp.tensor(x))
    assert "_rt.sum_leading(" not in compiled_source(compiled)
    for g, want in zip(got, (x.sum(axis=(0, 2)), x.sum(axis=1, keepdims=True), x.sum(axis=-1))):
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-12)
