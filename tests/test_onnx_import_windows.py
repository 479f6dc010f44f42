"""``from_onnx`` of sliding windows written by other tools: Conv, MaxPool and AveragePool with asymmetric
``pads``, ``auto_pad`` SAME_UPPER / SAME_LOWER / VALID, and MaxPool's ``ceil_mode``, each against ONNX Runtime
over several input sizes, strides, kernels and dilations; what stays unsupported is refused naming the node."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tensorplay as tp  # noqa: E402
from tensorplay.export.onnx import ONNXImportError, from_onnx  # noqa: E402
from tests.onnx_helpers import assert_matches, run_ort  # noqa: E402


def _model(op: str, shape: list[Any], weight: np.ndarray[Any, Any] | None = None, **attrs: Any) -> Any:
    inputs, init = ["x"], []
    if weight is not None:
        init.append(numpy_helper.from_array(weight, "w"))
        inputs.append("w")
    node = helper.make_node(op, inputs, ["y"], name="window", **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * len(shape))], initializer=init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    onnx.checker.check_model(model, full_check=True)
    return model


def _check(model: Any, shape: tuple[int, ...]) -> None:
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    want = run_ort(model, {"x": x})[0]
    got = np.asarray(from_onnx(model).module()(tp.tensor(x)).detach().numpy())
    assert got.shape == want.shape, (got.shape, want.shape)
    assert_matches(got, want, str(shape))


SIZES = [(1, 2, 7, 8), (2, 2, 5, 5), (1, 2, 6, 9)]
CONV_CASES = [
    dict(pads=[0, 1, 2, 0]), dict(pads=[1, 0, 0, 1], strides=[2, 2]), dict(auto_pad="SAME_UPPER"),
    dict(auto_pad="SAME_LOWER"), dict(auto_pad="SAME_UPPER", strides=[2, 3]),
    dict(auto_pad="SAME_LOWER", strides=[2, 2]), dict(auto_pad="VALID", strides=[2, 1]),
    dict(pads=[2, 1, 0, 3], dilations=[1, 2]),
]


@pytest.mark.parametrize("attrs", CONV_CASES, ids=str)
@pytest.mark.parametrize("shape", SIZES, ids=str)
def test_conv_padding_forms_match_onnx_runtime(attrs: dict[str, Any], shape: tuple[int, ...]) -> None:
    w = np.random.default_rng(1).standard_normal((3, 2, 3, 2)).astype(np.float32)
    _check(_model("Conv", list(shape), w, **attrs), shape)


POOL_CASES = [
    dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1), dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
    dict(kernel_shape=[3, 2], strides=[2, 3], pads=[1, 0, 1, 1], ceil_mode=1),
    dict(kernel_shape=[2, 3], strides=[3, 2], pads=[1, 1, 0, 0]), dict(kernel_shape=[3, 3], auto_pad="SAME_UPPER"),
    dict(kernel_shape=[2, 2], strides=[2, 2], auto_pad="SAME_LOWER"),
    dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER", ceil_mode=1),
]


@pytest.mark.parametrize("attrs", POOL_CASES, ids=str)
@pytest.mark.parametrize("shape", SIZES, ids=str)
def test_max_pool_padding_and_ceil_mode_match_onnx_runtime(attrs: dict[str, Any], shape: tuple[int, ...]) -> None:
    _check(_model("MaxPool", list(shape), **attrs), shape)


AVG_CASES = [
    dict(kernel_shape=[2, 3], pads=[1, 0, 0, 2], count_include_pad=1),
    dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER", count_include_pad=1),
    dict(kernel_shape=[2, 2], strides=[1, 1], ceil_mode=1),  # stride 1: ceil_mode adds no window
]


@pytest.mark.parametrize("attrs", AVG_CASES, ids=str)
@pytest.mark.parametrize("shape", SIZES, ids=str)
def test_average_pool_padding_forms_match_onnx_runtime(attrs: dict[str, Any], shape: tuple[int, ...]) -> None:
    _check(_model("AveragePool", list(shape), **attrs), shape)


def test_what_stays_unsupported_is_refused_naming_the_node() -> None:
    x = np.zeros((1, 2, 7, 7), dtype=np.float32)
    refused = [
        (_model("AveragePool", [1, 2, 7, 7], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1), "ceil_mode"),
        (_model("AveragePool", [1, 2, 7, 7], kernel_shape=[2, 2], pads=[1, 0, 0, 1]), "count_include_pad"),
        (_model("MaxPool", [1, 2, 7, 7], kernel_shape=[2, 2], dilations=[2, 2]), "dilated"),
    ]
    for model, words in refused:
        with pytest.raises(ONNXImportError, match=words) as info:
            from_onnx(model).module()(tp.tensor(x))
        assert "window" in str(info.value)


def test_auto_pad_over_a_dynamic_spatial_size_names_the_node_and_the_fix() -> None:
    """Padding computed from a dynamic size: the import reports the node and asks to specialise the dim."""
    from tensorplay.export.errors import ConstraintViolationError

    model = _model("MaxPool", ["N", 2, "H", 7], kernel_shape=[2, 2], auto_pad="SAME_UPPER")
    with pytest.raises(ConstraintViolationError, match=r"(?s)'window' \(MaxPool\): auto_pad SAME_UPPER needs the "
                       r"spatial sizes.*specialize"):
        from_onnx(model)
