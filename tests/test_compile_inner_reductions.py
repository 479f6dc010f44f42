"""A fused kernel whose reduction runs along the innermost axis into an accumulator array (a bias gradient:
a sum over batch and positions, channels kept) adds a local partial per row instead of loading and storing
the accumulator at every element; sums and maxima stay those of numpy, NaN included."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.compiler import register_backend
from tensorplay.compiler.numba_backend import numba_backend
from tensorplay.compiler.numba_backend.kernels import kernel_source

KERNELS: list[str] = []


@register_backend
def numba_recording_kernels(graph_module: Any, example_inputs: Any, **kwargs: Any) -> Any:
    """The numba backend, keeping the source of each generated kernel."""
    run = numba_backend(graph_module, example_inputs, **kwargs)
    KERNELS.extend(kernel_source(plan)[0] for plan in run.kernels)
    return run


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", ["sum", "amax"])
def test_reduction_over_outer_and_inner_axes(dtype: str, kind: str) -> None:
    rng = np.random.default_rng(0)
    g = rng.standard_normal((5, 3, 67)).astype(dtype)
    m = (rng.standard_normal((5, 3, 67)) > 0).astype(dtype)
    g[2, 1, 7] = np.nan  # channel 1 gets NaN

    def fn(a: Any, b: Any) -> Any:
        prod = a * b
        return prod, getattr(prod, kind)(dim=(0, 2))

    KERNELS.clear()
    prod, red = tp.compile(fn, backend="numba_recording_kernels", options={"small_kernels": True})(
        tp.tensor(g), tp.tensor(m))
    assert any("part0" in k for k in KERNELS), KERNELS
    expect = g * m
    np.testing.assert_array_equal(prod.numpy(), expect)
    ref = expect.astype(np.float64).sum(axis=(0, 2)) if kind == "sum" else expect.max(axis=(0, 2))
    assert red.numpy().dtype == np.dtype(dtype)
    assert np.isnan(red.numpy()[1]) and np.isnan(ref[1])
    np.testing.assert_allclose(red.numpy(), ref.astype(dtype), rtol=1e-6 if dtype == "float32" else 1e-13)
