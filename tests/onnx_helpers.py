"""Helpers shared by the ONNX tests: running a model in ONNX Runtime and in onnx's reference evaluator, the
checks every written model must pass, and comparing results with eager."""

from __future__ import annotations

from typing import Any

import numpy as np

import onnx
import onnxruntime as ort
from onnx.reference import ReferenceEvaluator

ORT_MISSING_KERNEL = ort.capi.onnxruntime_pybind11_state.NotImplemented
"""What ONNX Runtime raises for an operator it has no kernel for at a dtype (many have none for float64)."""

ORT_REFUSED = ort.capi.onnxruntime_pybind11_state.InvalidArgument
"""What ONNX Runtime raises for inputs a kernel refuses (ConvTranspose refuses a zero-size output)."""


def run_ort(model: Any, feeds: dict[str, np.ndarray[Any, Any]]) -> list[np.ndarray[Any, Any]]:
    """The model's outputs from ONNX Runtime (CPU)."""
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return [np.asarray(o) for o in session.run(None, feeds)]


def run_reference(model: Any, feeds: dict[str, np.ndarray[Any, Any]]) -> list[np.ndarray[Any, Any]]:
    """The model's outputs from ``onnx.reference.ReferenceEvaluator`` (plain numpy)."""
    return [np.asarray(o) for o in ReferenceEvaluator(model).run(None, feeds)]


def output_dims(model: Any) -> list[list[int | str | None]]:
    """The dims shape inference gives the outputs when the model's own output shapes are removed (strict
    mode, with data propagation): ints, dim names, or ``None`` for an unknown size."""
    stripped = onnx.ModelProto()
    stripped.CopyFrom(model)
    for out in stripped.graph.output:
        out.type.tensor_type.ClearField("shape")
    inferred = onnx.shape_inference.infer_shapes(stripped, check_type=True, strict_mode=True, data_prop=True)
    dims: list[list[int | str | None]] = []
    for out in inferred.graph.output:
        shape = out.type.tensor_type.shape
        dims.append([d.dim_value if d.HasField("dim_value") else d.dim_param if d.HasField("dim_param") else None
                     for d in shape.dim])
    return dims


def declared_dims(value_info: Any) -> list[int | str]:
    """The dims a graph input or output declares."""
    return [d.dim_value if d.HasField("dim_value") else d.dim_param for d in value_info.type.tensor_type.shape.dim]


def _reproduced(inferred: int | str | None, declared: int | str, roots: set[str]) -> bool:
    """An inferred dim agrees with the declared one: equal; or, for a size computed from the dims
    (``Seq - 1``, ``(H + 1)//2``), unknown (ONNX names only the sizes it reads from the inputs)."""
    if inferred == declared:
        return True
    return isinstance(declared, str) and declared not in roots and (
        inferred is None or (isinstance(inferred, str) and inferred.startswith("unk__")))


def check_written(model: Any) -> None:
    """The checks of every written model: the full checker, strict shape inference, and shape inference alone
    reproducing the outputs' ranks, static sizes and the user's dims."""
    onnx.checker.check_model(model, full_check=True)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    roots = {d for i in model.graph.input for d in declared_dims(i) if isinstance(d, str)}
    for out, dims in zip(model.graph.output, output_dims(model)):
        declared = declared_dims(out)
        assert len(dims) == len(declared) and all(_reproduced(i, d, roots) for i, d in zip(dims, declared)), \
            (out.name, dims, declared)


def assert_matches(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any], what: str, atol: float = 1e-5) -> None:
    """Same dtype and shape; floats within ``atol`` times the largest finite magnitude of ``want`` (at least 1:
    float rounding is relative, and a sum of many float32 products of size 30 differs by more than 1e-5 between
    two correct summation orders), NaN where eager has NaN, infinities equal; others equal."""
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype, got.shape, want.shape)
    if want.dtype.kind == "f":
        assert np.array_equal(np.isnan(got), np.isnan(want)), (what, got, want)
        finite = np.isfinite(want)
        assert np.array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)]), (what, got, want)
        if finite.any():
            err = float(np.max(np.abs(got[finite].astype(np.float64) - want[finite])))
            scale = max(1.0, float(np.max(np.abs(want[finite]))))
            assert err <= atol * scale, (what, err, scale)
    else:
        assert np.array_equal(got, want), (what, got, want)
