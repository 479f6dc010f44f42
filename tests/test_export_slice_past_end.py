"""A slice bound written from an axis's own dynamic size, at or past the end (``x[x.shape[0]::-1]``,
``x[:x.shape[0] + 1]``), is clamped as numpy clamps it for every size: before, export specialised the dim
(with the misleading suggestion to make it static) because the bound was taken as an index out of range.
Each form is exported with dynamic dims and run in ONNX Runtime, by the loaded program and under
``tp.compile(dynamic=True)`` at several sizes, against numpy's slice of the same array."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import tensorplay as tp  # noqa: E402
from tensorplay.export import Dim, export  # noqa: E402
from tensorplay.export.onnx import to_onnx  # noqa: E402
from tests.onnx_helpers import check_written, run_ort  # noqa: E402

SLICES: dict[str, Callable[[Any], Any]] = {
    "x[n::-1]": lambda x: x[x.shape[0]::-1],
    "x[n+2::-1]": lambda x: x[x.shape[0] + 2::-1],
    "x[n::-2]": lambda x: x[x.shape[0]::-2],
    "x[:n:-1]": lambda x: x[:x.shape[0]:-1],
    "x[n:0:-1]": lambda x: x[x.shape[0]:0:-1],
    "x[:n+1]": lambda x: x[:x.shape[0] + 1],
    "x[n+1:]": lambda x: x[x.shape[0] + 1:],
    "x[:, m::-1]": lambda x: x[:, x.shape[1]::-1],
    "x[n-1::-1]": lambda x: x[x.shape[0] - 1::-1],
}
SIZES = [(5, 3), (1, 1), (2, 4), (9, 2)]


def _array(shape: tuple[int, int]) -> np.ndarray[Any, Any]:
    return np.arange(np.prod(shape), dtype=np.float32).reshape(shape)


@pytest.mark.parametrize("name", SLICES)
def test_a_bound_at_or_past_a_dynamic_size_exports_and_matches_numpy(name: str) -> None:
    fn = SLICES[name]
    ep = export(fn, (tp.tensor(_array((5, 3))),), dynamic_shapes=[{0: Dim("n", min=1), 1: Dim("m", min=1)}])
    model = to_onnx(ep)
    check_written(model)
    module = ep.module()
    for shape in SIZES:
        a = _array(shape)
        want = np.ascontiguousarray(fn(a))
        got = run_ort(model, {model.graph.input[0].name: a})[0]
        assert got.shape == want.shape and np.array_equal(got, want), f"{name} at {shape} in ONNX Runtime"
        np.testing.assert_array_equal(module(tp.tensor(a)).numpy(), want, err_msg=f"{name} at {shape}")


@pytest.mark.parametrize("name", ["x[n::-1]", "x[:n+1]", "x[:, m::-1]", "x[:n:-1]"])
def test_the_same_bounds_under_compile_with_dynamic_sizes(name: str) -> None:
    fn = SLICES[name]
    compiled = tp.compile(fn, dynamic=True)
    for shape in SIZES:
        a = _array(shape)
        np.testing.assert_array_equal(compiled(tp.tensor(a)).numpy(), fn(a), err_msg=f"{name} at {shape}")
