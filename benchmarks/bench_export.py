"""Export cost: time to export (trace, check the dims, build the program), save, load, and the file size, for
the demo CNN (dynamic batch) and a transformer block (d_model 64, 4 heads, dynamic batch and sequence).

``python -m benchmarks export`` (times in the table; file sizes printed above it).
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from typing import Any

Row = tuple[str, dict[str, float]]


def _median(fn: Callable[[], Any], rounds: int = 7) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def _models() -> list[tuple[str, Any, tuple[Any, ...], dict[str, Any]]]:
    import tensorplay as tp
    from tensorplay.demo import DigitsCNN
    from tensorplay.export import Dim

    import torch

    from benchmarks.bench_training import _block_classes

    block = _block_classes(tp, torch)[0]
    tp.manual_seed(0)
    return [
        ("demo CNN, dynamic batch", DigitsCNN().eval(), (tp.randn(4, 1, 8, 8),),
         {"x": {0: Dim("batch", min=1)}}),
        ("transformer block d64, dynamic batch+seq", block(64, 4).eval(), (tp.randn(2, 16, 64),),
         {"x": {0: Dim("batch", min=1, max=1024), 1: Dim("seq", min=1, max=4096)}}),
    ]


def run() -> list[Row]:
    """Rows of (model, {step: seconds}) with the file size printed for each model."""
    import tensorplay as tp
    from tensorplay.export import export

    rows: list[Row] = []
    for name, model, args, spec in _models():
        ep = export(model, args, dynamic_shapes=spec)
        buffer = io.BytesIO()
        tp.export.save(ep, buffer)
        data = buffer.getvalue()
        print(f"{name}: {len(ep.graph.nodes)} nodes, file {len(data)} bytes ({len(data) / 1024:.1f} KiB), "
              f"range constraints {ep.range_constraints}")
        rows.append((name, {
            "export": _median(lambda: export(model, args, dynamic_shapes=spec)),
            "save": _median(lambda: tp.export.save(ep, io.BytesIO())),
            "load": _median(lambda: tp.export.load(io.BytesIO(data))),
        }))
    return rows


if __name__ == "__main__":
    from benchmarks.timing import table
    print(table(run(), "export"))
