"""Resident memory of MLP training (784-256-256-10, batch 128, SGD with momentum: the step of
:mod:`benchmarks.bench_training`), each library alone in a fresh process.

Rows (MB): the process's peak resident memory through the first 100 steps (library, imports,
compiled kernels and data included); the peak of steps 2 to 100 above the resident memory after
step 1 (the peak is reset there through ``/proc/self/clear_refs``: the working set of training,
without the import and the loading of compiled kernels in step 1); and the growth of resident
memory from step 100 to step 1,000 (0 when backward frees what it consumed). Linux only (``/proc``).

``python -m benchmarks memory``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks import bench_training
from benchmarks.cases import Case

GROUPING = "case"
UNIT = "MB"


def _status_mb(field: str) -> float:
    """``VmRSS`` / ``VmHWM`` of this process in MB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field} not found in /proc/self/status")


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")


def _profile(make_step: Callable[[], Callable[[], Any]]) -> Callable[[], Callable[[], dict[str, float]]]:
    def build() -> Callable[[], dict[str, float]]:
        step = make_step()

        def run() -> dict[str, float]:
            import gc

            step()  # the first step loads compiled kernels (numba, XLA): counted in the process peak only
            gc.collect()
            first = _status_mb("VmHWM")
            before = _status_mb("VmRSS")
            _reset_peak()
            for _ in range(99):
                step()
            peak = _status_mb("VmHWM")
            gc.collect()
            at_100 = _status_mb("VmRSS")
            for _ in range(900):
                step()
            gc.collect()
            at_1000 = _status_mb("VmRSS")
            return {"process peak RSS (import, data, 100 steps)": max(first, peak),
                    "peak of steps 2-100 above RSS after step 1": peak - before,
                    "RSS growth steps 100->1000": at_1000 - at_100}
        return run
    return build


def cases() -> list[Case]:
    """The MLP step of the training benchmark, per library."""
    return [Case("MLP train step", {
        "tensorplay": _profile(bench_training.tp_mlp),
        "torch": _profile(bench_training.torch_mlp),
        "jax": _profile(bench_training.jax_mlp),
    }, metrics=True)]
