"""The numba backend computes a convolution's input and weight gradients in one call (one read of the
cotangent, as the eager backward does), with PyTorch's gradients, for strides that need an output padding,
groups, dilation, non-contiguous inputs, float32 and float64, and NaN."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay.compiler import register_backend
from tensorplay.compiler.numba_backend import numba_backend

SOURCES: list[str] = []


@register_backend
def numba_recording_source(graph_module: Any, example_inputs: Any, **kwargs: Any) -> Any:
    """The numba backend, keeping the generated source of each compiled graph."""
    run = numba_backend(graph_module, example_inputs, **kwargs)
    SOURCES.append(run.source)
    return run


CASES = [  # (N, C, H, W), (O, C/groups, kh, kw), stride, padding, dilation, groups
    ((3, 4, 9, 9), (6, 4, 3, 3), 1, 1, 1, 1),
    ((2, 4, 10, 10), (6, 4, 3, 3), 2, 1, 1, 1),   # output_padding 1 recovers the even input size
    ((2, 4, 8, 7), (6, 2, 3, 2), 1, 0, 2, 2),      # groups and dilation
    ((5, 3, 12, 12), (8, 3, 5, 5), 3, 2, 1, 1),
]


def _grads_torch(x: np.ndarray[Any, Any], w: np.ndarray[Any, Any], r: np.ndarray[Any, Any], stride: int,
                 padding: int, dilation: int, groups: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    xt = torch.tensor(x, requires_grad=True)
    wt = torch.tensor(w, requires_grad=True)
    out = torch.nn.functional.conv2d(xt, wt, stride=stride, padding=padding, dilation=dilation, groups=groups)
    (out * torch.tensor(r)).sum().backward()
    assert xt.grad is not None and wt.grad is not None
    return xt.grad.numpy(), wt.grad.numpy()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"x{c[0]}-w{c[1]}-s{c[2]}p{c[3]}d{c[4]}g{c[5]}")
def test_one_call_gives_both_gradients_as_pytorch(case: tuple[Any, ...], dtype: str) -> None:
    xs, ws, stride, padding, dilation, groups = case
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    with torch.no_grad():
        shape = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), stride=stride, padding=padding,
                                           dilation=dilation, groups=groups).shape
    r = rng.standard_normal(tuple(shape)).astype(dtype)

    def loss(xv: Any, wv: Any) -> Any:
        out = F.conv2d(xv, wv, stride=stride, padding=padding, dilation=dilation, groups=groups)
        return (out * tp.tensor(r)).sum()

    SOURCES.clear()
    gx, gw = tp.compile(tp.func.grad(loss, argnums=(0, 1)), backend="numba_recording_source")(
        tp.tensor(x), tp.tensor(w))
    (source,) = SOURCES
    assert source.count("_rt.conv_backward(") == 1, source
    ex, ew = _grads_torch(x, w, r, stride, padding, dilation, groups)
    tol = {"rtol": 1e-4, "atol": 1e-4} if dtype == "float32" else {"rtol": 1e-10, "atol": 1e-10}
    assert gx.numpy().dtype == np.dtype(dtype) and gw.numpy().dtype == np.dtype(dtype)
    np.testing.assert_allclose(gx.numpy(), ex, **tol)
    np.testing.assert_allclose(gw.numpy(), ew, **tol)


def test_non_contiguous_input_and_nan() -> None:
    """A transposed (non-contiguous) input, and a NaN in it: NaN reaches the weight gradient where PyTorch
    puts it, and the input gradient stays finite (it reads the weight and the cotangent only)."""
    rng = np.random.default_rng(1)
    base = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)
    x = base.transpose(0, 1, 3, 2)  # (2, 3, 8, 9), not contiguous
    x_nan = x.copy()
    x_nan[1, 2, 4, 4] = np.nan
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    r = rng.standard_normal((2, 5, 6, 7)).astype(np.float32)

    def loss(xv: Any, wv: Any) -> Any:
        return (F.conv2d(xv, wv) * tp.tensor(r)).sum()

    for xin in (x, x_nan):
        SOURCES.clear()
        gx, gw = tp.compile(tp.func.grad(loss, argnums=(0, 1)), backend="numba_recording_source")(
            tp.tensor(xin), tp.tensor(w))
        assert sum(s.count("_rt.conv_backward(") for s in SOURCES) == 1
        ex, ew = _grads_torch(np.ascontiguousarray(xin), w, r, 1, 0, 1, 1)
        np.testing.assert_array_equal(np.isnan(gw.numpy()), np.isnan(ew))
        np.testing.assert_allclose(gx.numpy(), ex, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(gw.numpy(), ew, rtol=1e-4, atol=1e-4, equal_nan=True)
    assert np.isnan(ew).any() and np.isfinite(gx.numpy()).all()
