"""ONNX export edge cases found by hunting: each written model runs in ONNX Runtime and gives what PyTorch /
numpy give (never compared with tensorplay's own output alone)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

import tensorplay as tp  # noqa: E402
from tensorplay.export import Dim, export  # noqa: E402
from tensorplay.export.onnx import to_onnx  # noqa: E402
from tests.onnx_helpers import assert_matches, check_written, run_ort  # noqa: E402


def _onnx(fn: Any, *arrays: np.ndarray[Any, Any], dynamic: Any = None, opset: int | None = None) -> Any:
    ep = export(fn, tuple(tp.tensor(a) for a in arrays), dynamic_shapes=dynamic)
    model = to_onnx(ep) if opset is None else to_onnx(ep, opset=opset)
    check_written(model)
    return model


def _ort(model: Any, *arrays: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return run_ort(model, {i.name: a for i, a in zip(model.graph.input, arrays)})[0]


def _with_nan(dtype: str) -> list[np.ndarray[Any, Any]]:
    out = []
    for pos in range(4):
        x = np.array([[1.0, 2.0, 3.0, 4.0], [5.0, -np.inf, 7.0, 8.0], [-0.0, 0.0, np.inf, 1.0]], dtype=dtype)
        x[0, pos] = np.nan
        out.append(x)
    return out


@pytest.mark.parametrize("opset", [None, 17])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduction", ["amax", "amin"])
@pytest.mark.parametrize("dim,keepdim", [(-1, False), (0, True), ((0, 1), False), (None, False)])
def test_max_and_min_reductions_propagate_nan_as_torch(reduction: str, dim: Any, keepdim: bool, dtype: str,
                                                       opset: int | None) -> None:
    def fn(x: tp.Tensor) -> tp.Tensor:
        return getattr(x, reduction)(dim, keepdim=keepdim) if dim is not None else getattr(x, reduction)()

    def ref(x: Any) -> Any:
        return getattr(x, reduction)(dim, keepdim=keepdim) if dim is not None else getattr(x, reduction)()

    arrays = _with_nan(dtype)
    model = _onnx(fn, arrays[0], opset=opset)
    for x in arrays:
        assert_matches(_ort(model, x), ref(torch.from_numpy(x)).numpy(), f"{reduction} of {x}", atol=0)


SLICES = {
    "x[n:]": lambda x: x[x.shape[0]:],
    "x[n::2]": lambda x: x[x.shape[0]::2],
    "x[n:n]": lambda x: x[x.shape[0]:x.shape[0]],
    "x[:, m:]": lambda x: x[:, x.shape[1]:],
    "x[n-1:]": lambda x: x[x.shape[0] - 1:],
    "x[::-1]": lambda x: x[::-1],
}


@pytest.mark.parametrize("name", SLICES)
def test_slices_starting_at_a_dynamic_size_match_numpy(name: str) -> None:
    """A start equal to the axis's size (an empty slice) is ONNX's end of the axis, not its start 0."""
    fn = SLICES[name]
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    model = _onnx(fn, x, dynamic=[{0: Dim("n", min=1), 1: Dim("m", min=1)}])
    for shape in [(5, 3), (1, 1), (2, 4), (9, 2)]:
        a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        assert_matches(_ort(model, a), np.ascontiguousarray(fn(a)), f"{name} at {shape}", atol=0)
