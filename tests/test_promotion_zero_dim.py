"""Dtype promotion with 0-d tensors: every tensor is strong, a 0-d one too (JAX's rule; PyTorch lets a
dimensioned tensor win over a 0-d one of its category), and the rule is the same in every interpreter, so a
function keeps its dtypes under vmap, grad and tp.compile. The reference is PyTorch's promotion of two
1-d tensors (category, then width); Python scalars stay weak, as in PyTorch."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
torch = pytest.importorskip("torch")
from tensorplay.func import grad, vmap

DTYPES = ("bool", "int32", "int64", "float32", "float64")
PAIRS = list(itertools.product(DTYPES, DTYPES))


def _values(vector_dtype: str, scalar_dtype: str) -> tuple[Any, Any]:
    return np.array([1, 0, 1], dtype=vector_dtype), np.array(1, dtype=scalar_dtype)


def _torch_dtype(vector_dtype: str, scalar_dtype: str) -> str:
    """PyTorch's result dtype for two 1-d tensors of these dtypes (what a 0-d tensor gives here)."""
    vector, scalar = _values(vector_dtype, scalar_dtype)
    promoted = torch.result_type(torch.from_numpy(vector), torch.from_numpy(scalar.reshape(1)))
    return str(promoted).removeprefix("torch.")


@pytest.mark.parametrize(("vector_dtype", "scalar_dtype"), PAIRS)
def test_a_zero_dim_tensor_promotes_as_a_dimensioned_one(vector_dtype: str, scalar_dtype: str) -> None:
    vector, scalar = _values(vector_dtype, scalar_dtype)
    want = _torch_dtype(vector_dtype, scalar_dtype)
    got = tp.tensor(vector) * tp.tensor(scalar)
    assert str(got.dtype) == f"tensorplay.{want}"
    np.testing.assert_array_equal(got.numpy(), vector.astype(want) * scalar.astype(want))


@pytest.mark.parametrize(("vector_dtype", "scalar_dtype"),
                         [p for p in PAIRS if p[0] != "bool" and p[1] != "bool"])
def test_the_dtype_is_the_same_compiled_and_under_vmap(vector_dtype: str, scalar_dtype: str) -> None:
    vector, scalar = _values(vector_dtype, scalar_dtype)
    want = f"tensorplay.{_torch_dtype(vector_dtype, scalar_dtype)}"

    def f(v: Any, s: Any) -> Any:
        return v + s

    assert str(tp.compile(f)(tp.tensor(vector), tp.tensor(scalar)).dtype) == want
    rows = tp.tensor(np.stack([vector, vector]))
    assert str(vmap(f, in_dims=(0, None))(rows, tp.tensor(scalar)).dtype) == want
    # the 0-d value mapped: per sample it is 0-d, batched it is 1-d; the dtype must not depend on that
    scalars = tp.tensor(np.stack([scalar, scalar]))
    assert str(vmap(f, in_dims=(None, 0))(tp.tensor(vector), scalars).dtype) == want


@pytest.mark.parametrize(("vector_dtype", "scalar_dtype"),
                         [("float32", "float64"), ("float64", "float32"), ("float32", "float32")])
def test_gradients_keep_each_inputs_dtype(vector_dtype: str, scalar_dtype: str) -> None:
    vector, scalar = _values(vector_dtype, scalar_dtype)

    def loss(v: Any, s: Any) -> Any:
        return (v * s).sum()

    dv, ds = grad(loss, argnums=(0, 1))(tp.tensor(vector), tp.tensor(scalar))
    assert str(dv.dtype) == f"tensorplay.{vector_dtype}" and str(ds.dtype) == f"tensorplay.{scalar_dtype}"
    np.testing.assert_allclose(dv.numpy(), np.full(3, float(scalar)))
    np.testing.assert_allclose(ds.numpy(), vector.sum())


@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64"])
@pytest.mark.parametrize("scalar", [2, 2.5, True])
def test_python_scalars_stay_weak(dtype: str, scalar: Any) -> None:
    vector = np.array([1, 2, 3], dtype=dtype)
    want = str((torch.from_numpy(vector) * scalar).dtype).removeprefix("torch.")
    assert str((tp.tensor(vector) * scalar).dtype) == f"tensorplay.{want}"
