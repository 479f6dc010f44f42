"""Unary elementwise operations of bool and integer tensors against PyTorch: where torch gives a result,
tensorplay gives the same dtype and values (eagerly, recorded by the graph recorder, under ``tp.compile``
and ``vmap``); where torch refuses the dtype, tensorplay raises its own error naming the operation and the
dtype, never numpy's. ``sign`` of a bool tensor is the tensor itself (bool) and ``square`` of one int64, as in
PyTorch; ``+x`` of a bool tensor and ``F.silu`` / ``F.leaky_relu`` of a non-float one are refused, as there."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay.dispatch import ops_of
from tensorplay.errors import TensorplayError

_OPS = ops_of()

CASES: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "-x": (lambda x: -x, torch.neg),
    "neg": (tp.neg, torch.neg),
    "abs": (tp.abs, torch.abs),
    "abs(x)": (abs, abs),
    "sign": (tp.sign, torch.sign),
    "exp": (tp.exp, torch.exp),
    "log": (tp.log, torch.log),
    "log1p": (tp.log1p, torch.log1p),
    "expm1": (tp.expm1, torch.expm1),
    "sqrt": (tp.sqrt, torch.sqrt),
    "rsqrt": (tp.rsqrt, torch.rsqrt),
    "sin": (tp.sin, torch.sin),
    "cos": (tp.cos, torch.cos),
    "tan": (lambda x: _OPS.tan(x), torch.tan),
    "tanh": (tp.tanh, torch.tanh),
    "sigmoid": (tp.sigmoid, torch.sigmoid),
    "relu": (tp.relu, torch.relu),
    "gelu": (lambda x: x.gelu(), TF.gelu),
    "erf": (tp.erf, torch.erf),
    "floor": (tp.floor, torch.floor),
    "ceil": (tp.ceil, torch.ceil),
    "round": (tp.round, torch.round),
    "logical_not": (lambda x: _OPS.logical_not(x), torch.logical_not),
    "~x": (lambda x: ~x, torch.bitwise_not),
    "bitwise_not": (lambda x: _OPS.bitwise_not(x), torch.bitwise_not),
    "square": (tp.square, torch.square),
    "x.square()": (lambda x: x.square(), lambda x: x.square()),
    "+x": (lambda x: +x, lambda x: +x),
    "isnan": (tp.isnan, torch.isnan),
    "isfinite": (tp.isfinite, torch.isfinite),
    "isinf": (tp.isinf, torch.isinf),
    "F.relu": (F.relu, TF.relu),
    "F.gelu": (F.gelu, TF.gelu),
    "F.tanh": (F.tanh, torch.tanh),
    "F.sigmoid": (F.sigmoid, torch.sigmoid),
    "F.silu": (F.silu, TF.silu),
    "F.leaky_relu": (F.leaky_relu, TF.leaky_relu),
}

DTYPES = ["bool", "int32", "int64"]


def _array(dtype: str, rows: int = 1) -> np.ndarray[Any, Any]:
    if dtype == "bool":
        return np.array([[True, False, True]] * rows).reshape(rows, 3)
    return np.array([[-3, -1, 0, 1, 2, 7]] * rows, dtype=dtype).reshape(rows, 6)


def _torch(g: Callable[[Any], Any], a: np.ndarray[Any, Any]) -> Any:
    """torch's result, or the exception it raises."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return g(torch.tensor(a))
    except (RuntimeError, NotImplementedError, TypeError) as e:
        return e


def _same(got: Any, want: Any, what: str) -> None:
    assert got.dtype.name == str(want.dtype).removeprefix("torch."), f"{what}: {got.dtype} vs torch {want.dtype}"
    assert tuple(got.shape) == tuple(want.shape), what
    w = want.numpy()
    tol = 1e-6 if w.dtype == np.float32 else 0.0
    np.testing.assert_allclose(got.numpy().astype(np.float64), w.astype(np.float64), rtol=tol, atol=tol,
                               equal_nan=True, err_msg=what)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", CASES)
def test_unary_of_bool_and_int_matches_torch(name: str, dtype: str) -> None:
    f, g = CASES[name]
    a = _array(dtype)
    want = _torch(g, a)
    if isinstance(want, Exception):
        with pytest.raises(TensorplayError) as info:
            f(tp.tensor(a))
        assert dtype in str(info.value), f"{name} of {dtype}: {info.value}"
        return
    _same(f(tp.tensor(a)), want, f"{name} of {dtype}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", CASES)
def test_unary_of_bool_and_int_under_transforms(name: str, dtype: str) -> None:
    """Recorded, compiled and mapped over rows: torch's values, or tensorplay's error (never numpy's)."""
    f, g = CASES[name]
    a = _array(dtype, rows=2)
    want = _torch(g, a)
    runs: dict[str, Callable[[], Any]] = {
        "trace": lambda: tp.graph.trace(f, tp.tensor(a))(tp.tensor(a)),
        "compile": lambda: tp.compile(f)(tp.tensor(a)),
        "vmap": lambda: tp.func.vmap(f)(tp.tensor(a)),
    }
    for how, run in runs.items():
        if isinstance(want, Exception):
            with pytest.raises(TensorplayError, match=dtype):
                run()
        else:
            _same(run(), want, f"{name} of {dtype} under {how}")


@pytest.mark.parametrize("shape", [(), (0,), (4,), (2, 3), (3, 1, 2)])
def test_sign_of_bool_is_the_tensor_itself(shape: tuple[int, ...]) -> None:
    a = np.random.default_rng(len(shape)).random(shape) > 0.5
    want = torch.sign(torch.tensor(a))
    assert want.dtype == torch.bool
    for how, got in [("eager", tp.tensor(a).sign()), ("tp.sign", tp.sign(tp.tensor(a))),
                     ("compile", tp.compile(lambda x: x.sign())(tp.tensor(a))),
                     ("trace", tp.graph.trace(lambda x: x.sign(), tp.tensor(a))(tp.tensor(a)))]:
        _same(got, want, f"sign of bool{list(shape)} ({how})")
    if shape:
        _same(tp.func.vmap(tp.sign)(tp.tensor(a)), want, "sign under vmap")


def test_sign_of_bool_in_a_differentiated_program() -> None:
    """The gradient through ``y * m.sign()`` (``m`` a bool mask) is the mask, as torch's; ``sign`` of a float
    has gradient 0."""
    rng = np.random.default_rng(0)
    y0 = rng.standard_normal((3, 4)).astype(np.float32)
    m = y0 > 0.2
    ty = torch.tensor(y0, requires_grad=True)
    ((ty * torch.tensor(m).sign()).sum() + ty.sign().sum()).backward()
    assert ty.grad is not None

    def loss(y: Any) -> Any:
        return (y * tp.tensor(m).sign()).sum() + y.sign().sum()

    y = tp.tensor(y0, requires_grad=True)
    loss(y).backward()
    assert y.grad is not None
    np.testing.assert_array_equal(y.grad.numpy(), ty.grad.numpy())
    np.testing.assert_array_equal(tp.func.grad(loss)(tp.tensor(y0)).numpy(), ty.grad.numpy())
    np.testing.assert_array_equal(tp.compile(tp.func.grad(loss))(tp.tensor(y0)).numpy(), ty.grad.numpy())


def test_sign_of_bool_exports_to_onnx() -> None:
    pytest.importorskip("onnxruntime")
    from tensorplay.export import export
    from tensorplay.export.onnx import to_onnx
    from tests.onnx_helpers import run_ort

    a = np.array([[True, False], [False, True]])
    model = to_onnx(export(lambda x: x.sign(), (tp.tensor(a),)))
    got = run_ort(model, {model.graph.input[0].name: a})[0]
    want = torch.sign(torch.tensor(a)).numpy()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
