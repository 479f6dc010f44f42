"""Numpy arrays not in the machine's byte order (big-endian ``>f4``, as read from some files) are accepted
wherever tensorplay copies an array (``tp.tensor``, ``new_tensor``, ``Parameter``, an operand, a constant
of a traced, compiled or exported function): the tensor holds the same values in native order, and the
user's array is left as it was. ``tp.from_numpy``, which shares memory, refuses one with a message naming
the byte order and the fix. Values are checked against numpy's own conversion and PyTorch's result on it
(PyTorch 2.13 itself refuses a big-endian array in ``torch.tensor``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay import nn
from tensorplay.errors import DTypeError

DTYPES = ["float32", "float64", "int32", "int64", "bool"]


def _big(dtype: str, layout: str) -> np.ndarray[Any, Any]:
    """An array of ``dtype`` in big-endian order (bool has no byte order) in the given layout."""
    rng = np.random.default_rng(DTYPES.index(dtype))
    base = rng.standard_normal((4, 6)) * 50
    native = base > 0 if dtype == "bool" else base.astype(dtype)
    big = native.astype(np.dtype(dtype).newbyteorder(">"))
    if layout == "0-d":
        return big[1:2, 2:3].reshape(())
    if layout == "empty":
        return big[:0]
    if layout == "strided":
        return big[::2, 1::2]
    if layout == "transposed":
        return big.T
    if layout == "fortran":
        return np.asfortranarray(big)
    return big


def _native(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return a.astype(a.dtype.newbyteorder("="))


def _check(t: tp.Tensor, a: np.ndarray[Any, Any], what: str) -> None:
    want = torch.tensor(_native(a))  # torch refuses the big-endian array itself
    assert t.dtype.name == str(want.dtype).removeprefix("torch."), what
    assert tuple(t.shape) == tuple(want.shape), what
    got = t.detach().numpy()
    assert got.dtype.isnative, what
    np.testing.assert_array_equal(got, want.numpy(), err_msg=what)


LAYOUTS = ["contiguous", "0-d", "empty", "strided", "transposed", "fortran"]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_tensor_of_a_big_endian_array_holds_its_values(dtype: str, layout: str) -> None:
    a = _big(dtype, layout)
    before, before_dtype = a.tobytes(), a.dtype
    t = tp.tensor(a)
    _check(t, a, f"tp.tensor of {a.dtype.str} {layout}")
    assert a.tobytes() == before and a.dtype == before_dtype  # the user's array is not changed
    assert not np.shares_memory(t.numpy(), a)
    _check(tp.tensor(a, dtype=dtype), a, "tp.tensor with its own dtype")
    _check(tp.ones(1).new_tensor(a, dtype=dtype), a, "new_tensor")
    _check(tp.tensor(t), a, "tp.tensor of that tensor")
    if dtype != "bool":
        wide = tp.tensor(a, dtype="float64")
        np.testing.assert_array_equal(wide.numpy(), _native(a).astype(np.float64))
        summed = tp.tensor(a).sum()
        want = torch.tensor(_native(a)).sum().item()  # float sums: the summation order may differ
        assert summed.item() == (pytest.approx(want, rel=1e-5, abs=1e-4) if dtype.startswith("float") else want)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_parameter_and_grad_of_a_big_endian_array(dtype: str) -> None:
    a = _big(dtype, "strided")
    p = nn.Parameter(a)
    _check(p, a, "Parameter")
    t = tp.tensor(a, requires_grad=True)
    (t * t).sum().backward()
    assert t.grad is not None
    np.testing.assert_allclose(t.grad.numpy(), 2 * _native(a), rtol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_big_endian_constants_in_recorded_and_compiled_functions(dtype: str) -> None:
    """An array captured by a function (an operand of an operation) is a constant with its values."""
    a = _big(dtype, "contiguous")[0]
    x = _native(_big(dtype, "contiguous")[1])

    def f(v: Any) -> Any:
        return tp.where(v == v, v, v) + a if dtype != "bool" else v | a

    want = (torch.tensor(x) + torch.tensor(_native(a))) if dtype != "bool" else torch.tensor(x) | torch.tensor(_native(a))
    runs: dict[str, Callable[[], Any]] = {
        "eager": lambda: f(tp.tensor(x)),
        "trace": lambda: tp.graph.trace(f, tp.tensor(x))(tp.tensor(x)),
        "compile": lambda: tp.compile(f)(tp.tensor(x)),
    }
    for how, run in runs.items():
        got = run()
        assert got.dtype.name == str(want.dtype).removeprefix("torch."), how
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=how)


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_big_endian_constant_exports_to_onnx(dtype: str) -> None:
    pytest.importorskip("onnxruntime")
    from tensorplay.export import export
    from tensorplay.export.onnx import to_onnx
    from tests.onnx_helpers import run_ort

    a = _big(dtype, "contiguous")[0]
    x = _native(_big(dtype, "contiguous")[1])

    def f(v: Any) -> Any:
        return v * a if dtype != "bool" else v & a

    model = to_onnx(export(f, (tp.tensor(x),)))
    got = run_ort(model, {model.graph.input[0].name: x})[0]
    want = (torch.tensor(x) * torch.tensor(_native(a))) if dtype != "bool" else torch.tensor(x) & torch.tensor(_native(a))
    np.testing.assert_array_equal(got, want.numpy())


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_from_numpy_refuses_a_big_endian_array_naming_the_byte_order(dtype: str) -> None:
    a = _big(dtype, "contiguous")
    with pytest.raises(DTypeError, match=r"byte order.*tp\.tensor\(array\)"):
        tp.from_numpy(a)
    t = tp.from_numpy(_native(a))  # a native-order array is still shared
    _check(t, a, "from_numpy of the converted array")


def test_bool_has_no_byte_order_and_shares_memory() -> None:
    a = np.array([True, False, True]).astype(np.dtype("?").newbyteorder(">"))
    t = tp.from_numpy(a)
    assert np.shares_memory(t.numpy(), a)
    np.testing.assert_array_equal(t.numpy(), torch.tensor(a).numpy())
