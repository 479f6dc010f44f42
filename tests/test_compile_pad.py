"""A constant ``pad`` in compiled code is a filled array with the input copied into its window (not
``numpy.pad``): values and gradients agree with eager and PyTorch for float32 and float64, any fill value
(``-0.0``, NaN, inf), strided inputs, zero-size axes and zero pads."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn.functional as F
from tests.helpers import compiled_source


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("value", [0.0, -0.0, 1.5, math.nan, -math.inf])
@pytest.mark.parametrize("shape,pad,strided", [((3, 5, 7), (2, 1, 0, 3), False), ((4, 6), (0, 0, 1, 0), True),
                                              ((2, 0, 3), (1, 1, 0, 0), False), ((5, 3), (0, 0, 0, 0), False)])
def test_constant_pad_values_and_gradients(dtype: str, value: float, shape: tuple[int, ...],
                                           pad: tuple[int, ...], strided: bool) -> None:
    rng = np.random.default_rng(3)
    data = rng.standard_normal(shape).astype(dtype)
    if strided:
        data = np.ascontiguousarray(data.T)

    def fn(x: Any) -> Any:
        return F.pad(x.T if strided else x, pad, value=value)

    x = tp.tensor(data, requires_grad=True)
    compiled = tp.compile(fn)
    out = compiled(x)
    cot = rng.standard_normal(tuple(out.shape)).astype(dtype)
    (out * tp.tensor(cot)).sum().backward()
    assert "np.pad(" not in compiled_source(compiled)
    assert ("_rt.pad(" in compiled_source(compiled)) == any(pad)  # (a pad by nothing is no node at all)

    tx = torch.tensor(data, requires_grad=True)
    tout = torch.nn.functional.pad(tx.T if strided else tx, pad, value=value)
    (tout * torch.tensor(cot)).sum().backward()
    eager = fn(tp.tensor(data)).numpy()
    got = out.detach().numpy()
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, tout.detach().numpy())
    np.testing.assert_array_equal(got, eager)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(eager))  # -0.0 fills stay -0.0
    assert x.grad is not None and tx.grad is not None
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
