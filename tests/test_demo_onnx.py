"""The demo's ONNX step: the trained model written as ONNX, its predictions in ONNX Runtime checked against
eager; without the onnx package the step says how to install it and does nothing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tensorplay.demo import TrainConfig, fit, load_digits_data
from tensorplay.demo import onnx_step
from tensorplay.demo.__main__ import POST_TRAINING_STEPS


def test_the_onnx_step_writes_the_model_and_onnx_runtime_predicts_like_eager(tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    data = load_digits_data(seed=0, limit=240)
    result = fit(TrainConfig(epochs=1, batch_size=32, seed=0), data, progress=False, log=None)
    lines: list[str] = []
    report = onnx_step.check_onnx(result, data, log=lines.append, directory=tmp_path)
    assert report is not None and report.matching == report.total == len(data.y_test)
    assert report.max_logit_difference is not None and report.max_logit_difference <= 1e-5
    assert report.input_dims == ["batch", 1, 8, 8]
    assert (tmp_path / "digits_cnn.onnx").stat().st_size == report.file_bytes > 10_000
    assert "ONNX Runtime" in lines[-1] and result.model.training
    assert onnx_step.onnx_step in POST_TRAINING_STEPS


def test_the_onnx_step_without_onnx_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    data = load_digits_data(seed=1, limit=120)
    result = fit(TrainConfig(epochs=1, batch_size=32, seed=1), data, progress=False, log=None)
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx now raises ImportError
    lines: list[str] = []
    assert onnx_step.check_onnx(result, data, log=lines.append) is None
    assert lines == ['ONNX: skipped (the onnx package is not installed: pip install "tensorplay[onnx]")']
