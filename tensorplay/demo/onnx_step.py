"""After training: write the trained model as ONNX and, where ONNX Runtime is installed, check that the ONNX
model predicts what the trained model predicts.

Needs the optional extra ``tensorplay[onnx]``; without the ``onnx`` package the step says so and does nothing,
and without ``onnxruntime`` it writes and checks the file but runs nothing.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import tensorplay as tp
from tensorplay.demo.data import Digits
from tensorplay.demo.exported import export_model
from tensorplay.demo.train import TrainResult, eval_logits, predict


@dataclass(frozen=True)
class OnnxReport:
    """What the ONNX step measured (``matching``, ``total`` and ``max_logit_difference`` are ``None`` when
    ONNX Runtime is not installed)."""

    write_seconds: float
    file_bytes: int
    input_dims: list[int | str]
    matching: int | None
    total: int | None
    max_logit_difference: float | None


def check_onnx(result: TrainResult, data: Digits, log: Any = print, directory: Path | None = None
               ) -> OnnxReport | None:
    """Write ``result.model`` (exported with a dynamic batch dim) as ``digits_cnn.onnx`` in ``directory`` (a
    temporary one by default) and, with ONNX Runtime, compare its predictions on the test images with
    :func:`tensorplay.demo.train.predict`; raises ``AssertionError`` when one differs. ``None`` (after
    saying so) when the onnx package is not installed."""
    from tensorplay.export.onnx.deps import INSTALL_HINT, onnxruntime_or_none
    try:
        import onnx  # noqa: F401
    except ImportError:
        if log is not None:
            log(f"ONNX: skipped (the onnx package is not installed: {INSTALL_HINT})")
        return None
    ep = export_model(result.model, data.x_test[:4])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(directory if directory is not None else tmp) / "digits_cnn.onnx"
        start = time.perf_counter()
        model = ep.to_onnx(path)
        seconds = time.perf_counter() - start
        size = path.stat().st_size
        dims = [d.dim_value if d.HasField("dim_value") else d.dim_param
                for d in model.graph.input[0].type.tensor_type.shape.dim]
        ort = onnxruntime_or_none()
        if ort is None:
            report = OnnxReport(seconds, size, dims, None, None, None)
            if log is not None:
                log(f"wrote the model as ONNX ({size / 1024:.1f} KiB, input {dims}) in {seconds:.2f} s; "
                    "onnxruntime is not installed, so its predictions were not checked")
            return report
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        logits = session.run(None, {model.graph.input[0].name: data.x_test.astype(np.float32)})[0]
    expected = predict(result.model, data.x_test)
    reference = eval_logits(result.model, data.x_test)
    got = logits.argmax(axis=1)
    matching, total = int((got == expected).sum()), len(expected)
    report = OnnxReport(seconds, size, dims, matching, total,
                        float(np.abs(logits - reference).max()) if len(reference) else 0.0)
    if log is not None:
        log(f"wrote the model as ONNX ({size / 1024:.1f} KiB, input {dims}) in {seconds:.2f} s; ONNX Runtime: "
            f"{report.matching}/{report.total} test predictions match the trained model (largest logit "
            f"difference {report.max_logit_difference:.3g})")
    if matching != total:
        raise AssertionError(f"the ONNX model predicts differently on {total - matching} of {total} test images")
    return report


def onnx_step(result: TrainResult, data: Digits) -> None:
    """The post-training step of ``python -m tensorplay.demo`` (:func:`check_onnx`, printing its report)."""
    check_onnx(result, data)


__all__ = ["OnnxReport", "check_onnx", "onnx_step"]
