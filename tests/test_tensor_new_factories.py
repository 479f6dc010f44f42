"""``Tensor.new_zeros``, ``new_ones``, ``new_empty``, ``new_full`` and ``new_tensor`` against PyTorch, and under
tracing, dynamic compile, vmap and grad."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.func as T
from tensorplay.errors import DeviceError, ShapeError

DTYPES = ["float32", "float64", "int32", "int64", "bool"]


def _pair(dtype: str) -> tuple[Any, Any]:
    base = np.arange(6).reshape(2, 3).astype(dtype)
    return tp.tensor(base), torch.tensor(base)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("method,args", [
    ("new_zeros", ((4, 2),)), ("new_zeros", (4, 2)), ("new_zeros", ([0, 3],)), ("new_ones", ((5,),)),
    ("new_ones", (1, 0, 2)), ("new_empty", ((3,),)), ("new_full", ((2, 2), 1)), ("new_full", ((3,), 0)),
    ("new_zeros", ((),)),
])
def test_same_shape_dtype_and_values_as_torch(dtype: str, method: str, args: tuple[Any, ...]) -> None:
    x, t = _pair(dtype)
    got, want = getattr(x, method)(*args), getattr(t, method)(*args)
    assert tuple(got.shape) == tuple(want.shape)
    assert got.dtype.name == str(want.dtype).removeprefix("torch.")
    if method != "new_empty":
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert not got.requires_grad


@pytest.mark.parametrize("dtype", [None, tp.float64, tp.int32, tp.bool])
def test_dtype_and_requires_grad_keywords(dtype: Any) -> None:
    x = tp.ones(2, dtype=tp.float32)
    out = x.new_full((2, 3), 1, dtype=dtype)
    assert out.dtype == (dtype or tp.float32)
    assert x.new_zeros(3, requires_grad=True).requires_grad


def test_new_full_takes_the_tensors_dtype_not_the_fill_values() -> None:
    x, t = _pair("int32")
    got, want = x.new_full((3,), 2.7), t.new_full((3,), 2.7)  # torch truncates into the int dtype
    assert got.dtype == tp.int32 and str(want.dtype) == "torch.int32"
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_new_tensor_copies_and_detaches() -> None:
    w = tp.ones(3, requires_grad=True)
    x = tp.zeros(2, dtype=tp.float64)
    data = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    made = x.new_tensor(data)
    assert made.dtype == tp.float64 and not made.requires_grad
    data[0] = 9.0
    assert made.numpy()[0] == 1.0  # a copy, not a view of the user's array
    copied = x.new_tensor(w * 2.0)
    assert copied.dtype == tp.float64 and not copied.requires_grad and copied.grad_fn is None
    np.testing.assert_array_equal(x.new_tensor([[1, 2]], dtype=tp.int64).numpy(),
                                  torch.zeros(1).new_tensor([[1, 2]], dtype=torch.int64).numpy())


def test_bad_arguments_say_what_was_expected() -> None:
    x = tp.ones(2, dtype=tp.int32)
    with pytest.raises(OverflowError, match="new_full"):
        x.new_full((2,), 2 ** 40)
    with pytest.raises(ShapeError, match="new_zeros"):
        x.new_zeros(-1, 2)
    with pytest.raises(ShapeError, match="new_ones"):
        x.new_ones(2.5)  # type: ignore[call-overload]
    with pytest.raises(DeviceError):
        x.new_zeros(2, device="cuda")


def test_under_compile_the_values_follow_the_input() -> None:
    def f(a: Any) -> Any:
        return a + a.new_ones(a.shape) * a.new_full((a.shape[-1],), 2.0) + a.new_tensor([1.0, -1.0, 0.5])

    compiled = tp.compile(f)
    for value in (1.0, -3.0):
        a = tp.full((4, 3), value, dtype=tp.float64)
        np.testing.assert_allclose(compiled(a).numpy(), f(a).numpy())
        assert compiled(a).dtype == tp.float64


def test_a_dynamic_batch_keeps_the_size_symbolic() -> None:
    compiled = tp.compile(lambda a: a - a.new_ones(a.shape[0], 1) * 3.0, dynamic=True)
    for n in (5, 1, 9):
        a = tp.arange(2 * n, dtype=tp.float32).reshape(n, 2)
        np.testing.assert_allclose(compiled(a).numpy(), a.numpy() - 3.0)
    assert compiled.compile_count == 1


def test_vmap_and_grad() -> None:
    x = tp.randn(3, 4, dtype=tp.float64)
    rows = T.vmap(lambda r: r * r.new_full((4,), 3.0) + r.new_zeros(r.shape))(x)
    np.testing.assert_allclose(rows.numpy(), 3.0 * x.numpy())
    g = T.grad(lambda r: (r * r.new_ones(r.shape) * 2.0).sum())(x)
    np.testing.assert_allclose(g.numpy(), np.full((3, 4), 2.0))


INF, NAN = float("inf"), float("nan")


@pytest.mark.parametrize("start,end,steps", [
    (0.0, INF, 3), (0.0, INF, 1), (-INF, INF, 4), (INF, INF, 2), (0.0, NAN, 3), (NAN, 1.0, 1), (1.0, -INF, 2),
    (0.0, 1.0, 1), (0.0, 1.0, 0), (2.0, -3.0, 7), (-1.0, 1.0, 2),
])
def test_linspace_bounds_and_single_steps_as_torch(start: float, end: float, steps: int) -> None:
    """One step gives the start alone; a non-finite bound gives NaN everywhere (no warning leaks)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = tp.linspace(start, end, steps).numpy()
    want = torch.linspace(start, end, steps).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, equal_nan=True)
    assert got.dtype == want.dtype
