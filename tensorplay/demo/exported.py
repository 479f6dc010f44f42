"""After training: export the model with a dynamic batch dim, save it, load it in a fresh process, and check
that the reloaded program predicts exactly what the trained model predicts.

The fresh process is ``python -m tensorplay.demo.exported PROGRAM IMAGES OUT``: it loads the saved program
(JSON + safetensors, no pickle) and the test images, runs the program and saves its logits.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import tensorplay as tp
from tensorplay.demo.data import Digits
from tensorplay.demo.train import TrainResult, eval_logits, predict


@dataclass(frozen=True)
class ExportReport:
    """What the export check measured."""

    export_seconds: float
    file_bytes: int
    range_constraints: str
    matching: int
    total: int
    max_logit_difference: float


def export_model(model: Any, example: np.ndarray[Any, Any]) -> Any:
    """The trained model (in evaluation mode) exported with a dynamic batch dim ``batch >= 1``."""
    from tensorplay.export import Dim, export

    was_training = model.training
    model.eval()
    try:
        return export(model, (tp.tensor(example),), dynamic_shapes={"x": {0: Dim("batch", min=1)}})
    finally:
        model.train(was_training)


def _fresh_process_logits(program: Path, images: np.ndarray[Any, Any], workdir: Path) -> np.ndarray[Any, Any]:
    image_path, out_path = workdir / "images.safetensors", workdir / "logits.safetensors"
    tp.save(images, image_path)
    package_root = str(Path(tp.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([package_root, os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-m", "tensorplay.demo.exported", str(program), str(image_path), str(out_path)],
                   check=True, env=env, cwd=package_root)
    logits: np.ndarray[Any, Any] = tp.load(out_path)
    return logits


def check_export(result: TrainResult, data: Digits, log: Any = print) -> ExportReport:
    """Export ``result.model``, save it, reload it in a fresh process and compare its predictions on the test
    images with :func:`tensorplay.demo.train.predict`; raises ``AssertionError`` when one differs."""
    start = time.perf_counter()
    ep = export_model(result.model, data.x_test[:4])
    seconds = time.perf_counter() - start
    expected = predict(result.model, data.x_test)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "digits_cnn.tpx"
        tp.export.save(ep, path)
        size = path.stat().st_size
        logits = _fresh_process_logits(path, data.x_test, Path(tmp))
    got = logits.argmax(axis=1)
    reference = eval_logits(result.model, data.x_test)
    report = ExportReport(seconds, size, str(ep.range_constraints), int((got == expected).sum()), len(expected),
                          float(np.abs(logits - reference).max()) if len(reference) else 0.0)
    if log is not None:
        log(f"exported the model with a dynamic batch dim {report.range_constraints} in {seconds:.2f} s; saved "
            f"{size / 1024:.1f} KiB (JSON program + safetensors weights, no pickle)")
        log(f"reloaded in a fresh process: {report.matching}/{report.total} test predictions match the trained model "
            f"(largest logit difference {report.max_logit_difference:.3g})")
    if report.matching != report.total:
        raise AssertionError(f"the reloaded program predicts differently on {report.total - report.matching} of "
                             f"{report.total} test images")
    return report


def export_step(result: TrainResult, data: Digits) -> None:
    """The post-training step of ``python -m tensorplay.demo`` (:func:`check_export`, printing its report)."""
    check_export(result, data)


def main(argv: list[str]) -> None:
    """``PROGRAM IMAGES OUT``: load the program and the images, save the logits (the fresh process's side)."""
    program, images, out = argv
    ep = tp.export.load(program)
    x = tp.tensor(tp.load(images))
    with tp.no_grad():
        logits = ep.module()(x).detach().numpy()
    tp.save(np.asarray(logits), out)


if __name__ == "__main__":
    main(sys.argv[1:])
