"""The eager ``where`` of a float tensor against a Python float (masking with ``0.0``, ``-inf``, NaN) takes a
shorter path; it gives what the spec's reference gives (values, dtype, shape: the weak scalar takes the
tensor's dtype) for either side, float32 and float64, broadcasting, 0-d, empty and non-contiguous operands,
the same error for shapes that do not broadcast, and gradients that match PyTorch."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
from spec import SPECS
from tensorplay.errors import TensorplayError

VALUES = (0.0, -np.inf, np.inf, np.nan, 2.5, -1e300)


def _expect_same(cond: np.ndarray[Any, Any], x: Any, y: Any) -> None:
    def wrap(v: Any) -> Any:
        return tp.tensor(v) if isinstance(v, np.ndarray) else v
    with np.errstate(over="ignore"):
        expected = SPECS["where"].reference(cond, x, y)
        got = tp.eager.where(tp.tensor(cond), wrap(x), wrap(y)).numpy()
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((), (2, 3)), ((2, 3), ()), ((0, 3), (1, 3))])
def test_float_tensor_against_a_python_float_matches_the_reference(dtype: str, value: float,
                                                                    shapes: tuple[Any, Any]) -> None:
    gen = np.random.default_rng(1)
    cond = gen.random(shapes[0]) > 0.5
    x = gen.standard_normal(shapes[1]).astype(dtype)
    _expect_same(cond, x, value)
    _expect_same(cond, value, x)
    strided = gen.standard_normal((8, 6)).astype(dtype)[::2, ::2].T  # non-contiguous [3, 4]
    _expect_same(gen.random((3, 4)) > 0.5, strided, value)


def test_shapes_that_do_not_broadcast_raise_the_rules_error() -> None:
    with pytest.raises(TensorplayError, match="where"):
        tp.eager.where(tp.tensor(np.ones((2, 3), bool)), tp.tensor(np.ones((4,), np.float32)), 0.0)


@pytest.mark.parametrize("scalar_side", ["x", "y"])
def test_gradients_flow_to_the_tensor_side_as_in_torch(scalar_side: str) -> None:
    gen = np.random.default_rng(2)
    cond = gen.random((3, 4)) > 0.5
    v = gen.standard_normal((3, 4))
    t = tp.tensor(v, requires_grad=True)
    tt = torch.tensor(v, requires_grad=True)
    args = (t, -np.inf) if scalar_side == "y" else (-np.inf, t)
    targs = (tt, -np.inf) if scalar_side == "y" else (-np.inf, tt)
    out = tp.where(tp.tensor(cond), *args)
    (out.clamp(-5.0, 5.0) * tp.tensor(v)).sum().backward()
    (torch.where(torch.tensor(cond), *targs).clamp(-5.0, 5.0) * torch.tensor(v)).sum().backward()
    assert t.grad is not None and tt.grad is not None
    np.testing.assert_allclose(t.grad.numpy(), tt.grad.numpy(), rtol=1e-12)
