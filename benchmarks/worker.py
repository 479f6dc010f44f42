"""One benchmark worker: ``python -m benchmarks.worker MODULE LIBRARY INDICES [--threads T] ...``.

Started by :mod:`benchmarks.isolated` in a fresh process whose environment already carries the
thread setting. It imports ``benchmarks.bench_MODULE``, builds the cases at ``INDICES`` (comma
separated) for ``LIBRARY`` only, and for each: warms it up, sizes a batch of calls to last at least
``--min-time`` seconds, times ``--repeat`` batches and keeps the median seconds per call (wall time, or with
``--clock cpu`` the CPU time of the whole process: all its threads, system time included). The last
line of its output is ``BENCH-RESULT {json}`` with ``times`` (case name -> seconds) and ``info``
(the library's version and thread counts, as seen from inside the process).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from typing import Any

from benchmarks.isolated import RESULT_MARK
from benchmarks.timing import measure


def pin_cores(threads: str) -> set[int] | None:
    """Restrict this process to its first ``threads`` allowed CPUs (nothing for ``"default"``); the CPUs
    it may now run on, or None where affinity cannot be set.

    A thread-count variable is only a request: XLA's CPU runtime keeps a worker pool beside the
    dispatching thread whatever ``XLA_FLAGS`` says (measured: a "one-thread" JAX MLP step kept two cores
    busy and ran at 1.14 ms, against 1.67 ms pinned to one core). Pinning makes ``--threads 1`` mean one
    core for every library alike; it happens before any benchmarked library is imported, so each sizes
    its pools by the CPUs it may use."""
    if threads == "default" or not hasattr(os, "sched_setaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    chosen = set(allowed[:max(1, int(threads))])
    os.sched_setaffinity(0, chosen)
    return chosen


def _apply_threads(library: str, threads: str) -> None:
    """Thread settings that an environment variable alone does not reach."""
    if threads != "default" and library == "torch":
        import torch

        torch.set_num_threads(int(threads))
        torch.set_num_interop_threads(int(threads))


def library_info(library: str) -> dict[str, Any]:
    """Version and thread counts of ``library`` in this process (imports nothing new)."""
    info: dict[str, Any] = {}
    if library == "torch" and "torch" in sys.modules:
        torch: Any = sys.modules["torch"]
        info.update(version=torch.__version__, threads=torch.get_num_threads())
    elif library == "jax" and "jax" in sys.modules:
        jax: Any = sys.modules["jax"]
        info.update(version=jax.__version__, XLA_FLAGS=os.environ.get("XLA_FLAGS", "unset"))
    elif library == "onnxruntime" and "onnxruntime" in sys.modules:
        info["version"] = sys.modules["onnxruntime"].__version__
    elif library.startswith("tensorplay") and "tensorplay" in sys.modules:
        from tensorplay.interpreters.eager import kernels

        info["kernel_threads"] = kernels.num_threads()
        allocator = getattr(kernels, "allocator", None)
        info["malloc"] = allocator.describe() if allocator is not None else "glibc defaults"
    if "numpy" in sys.modules:
        try:
            from threadpoolctl import threadpool_info  # type: ignore[import-untyped]

            blas = [f"{p.get('internal_api')} threads={p.get('num_threads')} kernels={p.get('architecture')}"
                    for p in threadpool_info() if p.get("user_api") == "blas"]
            if blas:
                info["blas"] = "; ".join(blas)
        except ImportError:
            pass
    return info


def main(argv: list[str]) -> int:
    """Parse the arguments, time the cases, print the result line."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.worker")
    parser.add_argument("module")
    parser.add_argument("library")
    parser.add_argument("indices")
    parser.add_argument("--threads", default="default")
    parser.add_argument("--repeat", type=int, default=None)
    parser.add_argument("--min-time", type=float, default=None)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = parser.parse_args(argv)
    pinned = pin_cores(args.threads)
    module = importlib.import_module(f"benchmarks.bench_{args.module}")
    timing: dict[str, Any] = {"repeat": 7, "min_time": 0.05, "warmup_time": 0.3, **getattr(module, "TIMING", {})}
    if args.repeat is not None:
        timing["repeat"] = args.repeat
    if args.min_time is not None:
        timing["min_time"] = args.min_time
    cases = module.cases()
    _apply_threads(args.library, args.threads)
    times: dict[str, float] = {}
    for index in (int(i) for i in args.indices.split(",") if i):
        case = cases[index]
        fn = case.builders[args.library]()
        if case.metrics:
            times.update({f"{case.name}: {k}": float(v) for k, v in fn().items()})
        else:
            clock = time.perf_counter if args.clock == "wall" else time.process_time
            times[case.name] = measure(fn, clock=clock, **timing) / case.per_call
    info = library_info(args.library)
    if pinned is not None:
        info["cpus"] = sorted(pinned)
    print(RESULT_MARK + json.dumps({"times": times, "info": info}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
