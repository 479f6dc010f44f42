"""ONNX import edge cases found by hunting: one-operator models built with ``onnx.helper``, imported with
``from_onnx`` and compared with ONNX Runtime and PyTorch (integer division truncating toward zero, the
reductions keeping their input's type)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

import tensorplay as tp  # noqa: E402
from tensorplay.export.onnx import from_onnx  # noqa: E402
from tests.onnx_helpers import assert_matches, run_ort  # noqa: E402

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

_TYPES = {"int32": TensorProto.INT32, "int64": TensorProto.INT64, "float32": TensorProto.FLOAT}


def _model(op: str, inputs: dict[str, tuple[str, list[Any]]], consts: dict[str, np.ndarray[Any, Any]],
           out_type: str, node_inputs: list[str], **attrs: Any) -> Any:
    graph = helper.make_graph(
        [helper.make_node(op, node_inputs, ["y"], name="n", **attrs)], "g",
        [helper.make_tensor_value_info(n, _TYPES[t], shape) for n, (t, shape) in inputs.items()],
        [helper.make_tensor_value_info("y", _TYPES[out_type], None)],
        [numpy_helper.from_array(v, n) for n, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(model)
    return model


def _imported(model: Any, *arrays: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return np.asarray(from_onnx(model).module()(*(tp.tensor(a) for a in arrays)).numpy())


def _trunc(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return torch.div(torch.from_numpy(a), torch.from_numpy(b), rounding_mode="trunc").numpy()


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_div_truncates_exactly_at_every_size(dtype: str) -> None:
    big = 2**31 - 1 if dtype == "int32" else 2**62 + 1
    a = np.array([7, -7, 7, -7, 16777217, -16777219, big, -big, big, 5, 0], dtype=dtype)
    b = np.array([2, 2, -2, -3, 1, 2, 1, 3, -7, 7, -3], dtype=dtype)
    model = _model("Div", {"a": (dtype, [11]), "b": (dtype, [11])}, {}, dtype, ["a", "b"])
    want = _trunc(a, b)
    assert_matches(_imported(model, a, b), want, "Div")
    if dtype == "int32":  # ONNX Runtime's int64 Div is exact too, but goes through no float: check it agrees
        assert_matches(run_ort(model, {"a": a, "b": b})[0], want, "Div in ONNX Runtime")


def test_integer_div_by_a_scalar_constant_and_of_two_constants() -> None:
    a = np.array([2**40 + 1, -9, 9], dtype=np.int64)
    model = _model("Div", {"a": ("int64", [3])}, {"c": np.array(-2, np.int64)}, "int64", ["a", "c"])
    assert_matches(_imported(model, a), _trunc(a, np.array(-2, np.int64)), "Div by a constant")
    # both operands constant: computed while importing
    nodes = [helper.make_node("Div", ["p", "q"], ["d"]), helper.make_node("Add", ["a", "d"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", TensorProto.INT64, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, [3])],
                              [numpy_helper.from_array(np.array([-7, 7, -1], np.int64), "p"),
                               numpy_helper.from_array(np.array([2, -2, 3], np.int64), "q")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    want = run_ort(model, {"a": a})[0]
    assert_matches(want, a + np.array([-3, -3, 0]), "ONNX Runtime")
    assert_matches(_imported(model, a), want, "Div of constants")


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_reductions_keep_the_input_type_as_onnx_runtime(op: str, dtype: str) -> None:
    x = np.array([[1, 2, 4], [-1, -2, -4], [7, -1, 0]], dtype=dtype)
    for keepdims in (0, 1):
        model = _model(op, {"x": (dtype, [3, 3])}, {"axes": np.array([-1], np.int64)}, dtype, ["x", "axes"],
                       keepdims=keepdims)
        assert_matches(_imported(model, x), run_ort(model, {"x": x})[0], f"{op} keepdims={keepdims}")


def test_integer_mean_over_a_dynamic_axis() -> None:
    model = _model("ReduceMean", {"x": ("int64", [2, "n"])}, {"axes": np.array([1], np.int64)}, "int64",
                   ["x", "axes"], keepdims=0)
    program = from_onnx(model).module()
    for n in (1, 3, 4):
        x = np.arange(-5, -5 + 2 * n, dtype=np.int64).reshape(2, n) * 3
        assert_matches(np.asarray(program(tp.tensor(x)).numpy()), run_ort(model, {"x": x})[0], f"n={n}")
