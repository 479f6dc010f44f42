"""Shared timing helpers: warm up, then the median of repeated runs (seconds per call), alone
(:func:`median_time`, :func:`measure`) or alternating between implementations in one process
(:func:`interleaved`: only for implementations of one library; comparisons between libraries run
each library in its own process, see :mod:`benchmarks.isolated`)."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any


def _batch_size(fn: Callable[[], Any], min_time: float, max_number: int) -> int:
    """Calls per batch: doubled from 1 until a batch lasts ``min_time`` (or reaches ``max_number``)."""
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        if time.perf_counter() - start >= min_time or number >= max_number:
            return number
        number *= 2


def _batch_time(fn: Callable[[], Any], number: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds per call of ``fn`` over one batch of ``number`` calls, by ``clock``."""
    start = clock()
    for _ in range(number):
        fn()
    return (clock() - start) / number


def median_time(fn: Callable[[], Any], repeat: int = 7, min_time: float = 0.05, warmup: int = 3) -> float:
    """Median seconds per call of ``fn`` over ``repeat`` batches, each lasting at least ``min_time``."""
    for _ in range(warmup):
        fn()
    number = _batch_size(fn, min_time, 1 << 20)
    return statistics.median(_batch_time(fn, number) for _ in range(repeat))


def measure(fn: Callable[[], Any], repeat: int = 7, min_time: float = 0.05, warmup_time: float = 0.3,
            clock: Callable[[], float] = time.perf_counter) -> float:
    """Median seconds per call of ``fn``: called for at least ``warmup_time`` seconds (and 3 times) first
    (numba compiles or loads its cache, JAX traces, allocators and thread pools settle), then
    ``repeat`` batches each lasting at least ``min_time`` (wall time), timed by ``clock``
    (``time.process_time``: CPU seconds of the whole process, all threads, kernel time included)."""
    start = time.perf_counter()
    calls = 0
    while calls < 3 or time.perf_counter() - start < warmup_time:
        fn()
        calls += 1
    number = _batch_size(fn, min_time, 1 << 20)
    return statistics.median(_batch_time(fn, number, clock) for _ in range(repeat))


def interleaved(fns: dict[str, Callable[[], Any]], rounds: int = 11, min_time: float = 0.02, warmup: int = 2,
                max_number: int = 1 << 16) -> dict[str, float]:
    """Seconds per call of each function: warm it up, size its batch to ``min_time``, then take the
    median over ``rounds`` of batches run in alternation (so a change of load on a shared machine
    hits every function alike)."""
    numbers: dict[str, int] = {}
    for name, fn in fns.items():
        for _ in range(warmup):
            fn()
        numbers[name] = _batch_size(fn, min_time, max_number)
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples[name].append(_batch_time(fn, numbers[name]))
    return {name: statistics.median(s) for name, s in samples.items()}


def environment() -> str:
    """The settings a benchmark ran under (malloc variables, thread pools)."""
    malloc = {k: v for k, v in os.environ.items() if k.startswith("MALLOC_") or k.startswith("OPENBLAS")}
    lines = [f"malloc/openblas env: {malloc or 'defaults'}"]
    try:
        from threadpoolctl import threadpool_info  # type: ignore[import-untyped]
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
