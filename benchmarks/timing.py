"""Shared timing helpers: warm up, then the median of repeated runs (seconds per call)."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any


def median_time(fn: Callable[[], Any], repeat: int = 7, min_time: float = 0.05, warmup: int = 3) -> float:
    """Median seconds per call of ``fn`` over ``repeat`` batches, each lasting at least ``min_time``."""
    for _ in range(warmup):
        fn()
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed >= min_time or number >= 1 << 20:
            break
        number *= 2
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples)


def environment() -> str:
    """The settings a benchmark ran under (malloc variables, thread pools)."""
    malloc = {k: v for k, v in os.environ.items() if k.startswith("MALLOC_") or k.startswith("OPENBLAS")}
    lines = [f"malloc/openblas env: {malloc or 'defaults'}"]
    try:
        from threadpoolctl import threadpool_info
        for pool in threadpool_info():
            lines.append(f"threadpool: {pool.get('internal_api')} {pool.get('version')} "
                         f"threads={pool.get('num_threads')} arch={pool.get('architecture')}")
    except ImportError:
        lines.append("threadpoolctl not installed")
    return "\n".join(lines)


def table(rows: list[tuple[str, dict[str, float]]], baseline: str) -> str:
    """Format rows of {implementation: seconds} with ratios against ``baseline``."""
    out = []
    for name, times in rows:
        base = times.get(baseline)
        cells = []
        for impl, seconds in times.items():
            ratio = f" ({seconds / base:.2f}x)" if base and impl != baseline else ""
            cells.append(f"{impl} {seconds * 1e6:10.2f} us{ratio}")
        out.append(f"{name:<44} " + " | ".join(cells))
    return "\n".join(out)
