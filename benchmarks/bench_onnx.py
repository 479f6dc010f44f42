"""Inference latency of exported models: ONNX Runtime running what ``to_onnx`` wrote, against tensorplay eager
and ``tp.compile`` running the model itself; each library alone in its own fresh process
(``python -m benchmarks onnx``; see :mod:`benchmarks.isolated`).

Models (weights from ``tp.manual_seed(0)``, evaluation mode, the same in every process): the pre-norm
transformer block of :mod:`benchmarks.bench_training` (d_model 64, 4 heads) on ``[B, 32, 64]`` exported with
dynamic batch and sequence dims, and the training benchmark's CNN (c16-pool-c32-pool-fc on ``1x28x28``)
exported with a dynamic batch dim; batch 1 and 32. The ONNX files are written by a separate tensorplay
process, so the ``onnxruntime`` worker imports onnxruntime and numpy only; at one thread the session gets
``intra_op_num_threads=1``. The ``to_onnx`` rows (tensorplay only, seconds, not calls) time writing the
block as ONNX: the first call in a fresh process (``import onnx`` and the runtime probe included) and the
median of later calls.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.cases import Case, normal

GROUPING = "case"
LIBRARIES = ("tensorplay", "tensorplay.compile", "onnxruntime")
"""The columns: tensorplay eager, ``tp.compile`` of the same model, ONNX Runtime on the written file."""
GEOMETRIC_MEAN = False
TIMING = {"warmup_time": 0.5}

SHAPES = {"block": (32, 64), "cnn": (1, 28, 28)}
_DIR = Path(tempfile.gettempdir()) / f"tensorplay-bench-onnx-{os.getppid()}"
"""Where the ONNX files are written: one folder per benchmark run (the workers' parent process)."""


def build_model(name: str) -> tuple[Any, dict[str, Any]]:
    """The tensorplay model ``name`` (evaluation mode) and its dynamic shapes."""
    import tensorplay as tp
    from tensorplay import nn
    from tensorplay.export import Dim

    from benchmarks.bench_training import _block_classes

    tp.manual_seed(0)
    batch = Dim("batch", min=1, max=1024)
    if name == "block":
        block, _ = _block_classes(tp, None)
        return block(64, 4).eval(), {"x": {0: batch, 1: Dim("seq", min=1, max=4096)}}
    model = nn.Sequential(nn.Conv2d(1, 16, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 5 * 5, 10))
    return model.eval(), {"x": {0: batch}}


def exported(name: str) -> Any:
    """``build_model(name)`` exported (example batch 4)."""
    import tensorplay as tp
    from tensorplay.export import export

    model, spec = build_model(name)
    return export(model, (tp.tensor(normal(0, 4, *SHAPES[name])),), dynamic_shapes=spec)


def onnx_file(name: str) -> Path:
    """The ONNX file of model ``name``, written by a separate tensorplay process on first use."""
    path = _DIR / f"{name}.onnx"
    if not path.exists():
        _DIR.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "benchmarks.bench_onnx", "write", name, str(path)], check=True,
                       cwd=Path(__file__).resolve().parents[1])
    return path


def _inputs(name: str, batch: int) -> Any:
    return normal(1, batch, *SHAPES[name])


def tp_eager(name: str, batch: int) -> Callable[[], Any]:
    import tensorplay as tp

    model, _ = build_model(name)
    x = tp.tensor(_inputs(name, batch))

    def run() -> Any:
        with tp.no_grad():
            return model(x)
    return run


def tp_compiled(name: str, batch: int) -> Callable[[], Any]:
    import tensorplay as tp

    model, _ = build_model(name)
    compiled = tp.compile(model)
    x = tp.tensor(_inputs(name, batch))

    def run() -> Any:
        with tp.no_grad():
            return compiled(x)
    return run


def ort_session(name: str, batch: int) -> Callable[[], Any]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    threads = os.environ.get("OMP_NUM_THREADS", "").strip()
    if threads:
        options.intra_op_num_threads = int(threads)
        options.inter_op_num_threads = int(threads)
    session = ort.InferenceSession(str(onnx_file(name)), options, providers=["CPUExecutionProvider"])
    feeds = {"x": _inputs(name, batch)}
    return lambda: session.run(None, feeds)


def to_onnx_seconds() -> Callable[[], dict[str, float]]:
    """Metrics: seconds to write the block as ONNX, first call in this process and the median of 7 later."""
    ep = exported("block")

    def run() -> dict[str, float]:
        start = time.perf_counter()
        ep.to_onnx()
        first = time.perf_counter() - start
        later = []
        for _ in range(7):
            start = time.perf_counter()
            ep.to_onnx()
            later.append(time.perf_counter() - start)
        return {"first call (imports onnx)": first, "median of later calls": sorted(later)[3]}
    return run


def cases() -> list[Case]:
    """One case per model and batch, and the ``to_onnx`` timing."""
    out = []
    for name, label in (("block", "transformer block d64 h4 s32"), ("cnn", "CNN 1x28x28")):
        for batch in (1, 32):
            out.append(Case(f"{label} b{batch}", {
                "tensorplay": functools.partial(tp_eager, name, batch),
                "tensorplay.compile": functools.partial(tp_compiled, name, batch),
                "onnxruntime": functools.partial(ort_session, name, batch)}))
    out.append(Case("to_onnx of the block (s)", {"tensorplay": to_onnx_seconds}, metrics=True))
    return out


def _write(name: str, path: str) -> None:
    exported(name).to_onnx(path)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "write":
        _write(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit("usage: python -m benchmarks.bench_onnx write MODEL PATH (or run python -m benchmarks onnx)")
