"""Each library alone in its own fresh process: how every comparison in ``benchmarks`` is measured.

Two libraries in one process share (and fight over) the cores: OpenBLAS's, numba's and PyTorch's
OpenMP pools spin against each other, and whichever runs second pays for the other's spinning
(measured on 2 cores: PyTorch's MLP step took 5.2 ms beside tensorplay, 1.42 ms alone). So the
parent started by ``python -m benchmarks`` never imports a benchmarked library: for each round it
starts one worker process per library (:mod:`benchmarks.worker`), alternating the order of the
libraries from round to round; each worker builds its cases, warms them up and reports the median
seconds per call over several timed batches. The table shows, per case and library, the median
over rounds, the spread over rounds, and the ratio of tensorplay to each other library: of the
medians, then the range of the rounds' own ratios. The machines these run on change speed for
minutes at a time (the same numpy loop 5.5-10.7 ms over 40 s, a whole process 2x slower than the one
an hour before); a round's workers run one after another, so the range says how far such spells moved
the ratio.

Thread settings (:data:`THREAD_SETTINGS`): ``"default"`` removes every thread-count variable from
the workers' environment, so each library picks its own default (all cores); ``"1"`` sets them all to
one (``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``, ``NUMBA_NUM_THREADS``,
``TP_NUM_THREADS``, and XLA's CPU flags), workers also call ``torch.set_num_threads(1)``, and each
worker pins itself to one CPU before it imports a library (:func:`benchmarks.worker.pin_cores`: XLA
keeps a second busy thread whatever its flags say, so without the pin JAX's "one thread" used two
cores).
The malloc variables (``MALLOC_*``, ``LD_PRELOAD``) are passed through unchanged and printed.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.cases import LIBRARIES, Case

ROOT = Path(__file__).resolve().parents[1]
RESULT_MARK = "BENCH-RESULT "
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS",
               "TP_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")
XLA_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
THREAD_SETTINGS = ("default", "1")


BASELINE_SUFFIX = "@baseline"
"""A library name ending in this runs tensorplay from the ``--baseline`` checkout (see :func:`run_worker`)."""

BASELINES: dict[str, Path] = {}
"""Library name (``tensorplay@baseline``) -> the checkout its workers import tensorplay from."""


def add_baseline(path: str) -> str:
    """Register another checkout of tensorplay as one more library, measured in alternation with the
    others: the current ``benchmarks`` folder is copied into it (replacing its own), so both versions
    run the same cases. Returns the library's name."""
    import shutil

    root = Path(path).resolve()
    if not (root / "tensorplay" / "__init__.py").exists():
        raise SystemExit(f"--baseline {path}: no tensorplay package there")
    shutil.rmtree(root / "benchmarks", ignore_errors=True)
    shutil.copytree(ROOT / "benchmarks", root / "benchmarks", ignore=shutil.ignore_patterns("__pycache__"))
    name = "tensorplay" + BASELINE_SUFFIX
    BASELINES[name] = root
    return name


def worker_env(threads: str, root: Path = ROOT) -> dict[str, str]:
    """The environment of a worker for a thread setting (``"default"`` or a count such as ``"1"``) that
    imports tensorplay and the benchmarks from ``root``."""
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARS}
    env["PYTHONPATH"] = os.pathsep.join([str(root)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    if threads != "default":
        for var in THREAD_VARS:
            env[var] = threads
        if threads == "1":
            env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + XLA_ONE_THREAD).strip()
    return env


def malloc_settings() -> str:
    """The malloc-related settings the workers inherit (glibc's defaults when none is set)."""
    found = {k: v for k, v in os.environ.items() if k.startswith("MALLOC_") or k in ("LD_PRELOAD", "GLIBC_TUNABLES")}
    import platform
    libc = " ".join(platform.libc_ver())
    return f"malloc: {found or 'no MALLOC_*/LD_PRELOAD/GLIBC_TUNABLES set (allocator defaults)'}; libc: {libc}"


def available(library: str) -> bool:
    """Whether ``library`` can be imported here (checked without importing it)."""
    return importlib.util.find_spec(library) is not None


def _cpu_busy_seconds() -> float | None:
    """Seconds of CPU time all processes of the machine have spent busy (``/proc/stat``), or None."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _children_cpu_seconds() -> float:
    usage = os.times()
    return usage.children_user + usage.children_system


def background_load(sample: float = 1.0) -> float | None:
    """Cores kept busy by other processes over the next ``sample`` seconds (this process sleeps)."""
    before = _cpu_busy_seconds()
    time.sleep(sample)
    after = _cpu_busy_seconds()
    return None if before is None or after is None else (after - before) / sample


def wait_for_quiet(max_wait: float, threshold: float = 0.3) -> float | None:
    """Wait (at most ``max_wait`` seconds) until other processes keep fewer than ``threshold`` cores
    busy; returns the last load seen."""
    deadline = time.monotonic() + max_wait
    load = background_load(0.5)
    while load is not None and load > threshold and time.monotonic() < deadline:
        load = background_load(1.0)
    return load


@dataclass
class Measurements:
    """Per case name: per library, the seconds per call reported by each round's worker."""

    module: str
    threads: str
    order: list[str] = field(default_factory=list)
    times: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    info: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)

    def add(self, case: str, library: str, seconds: float) -> None:
        if case not in self.times:
            self.times[case] = {}
            self.order.append(case)
        self.times[case].setdefault(library, []).append(seconds)


def run_worker(module: str, library: str, case_indices: Sequence[int], threads: str, repeat: int | None,
               min_time: float | None, timeout: float = 900.0, clock: str = "wall") -> dict[str, Any]:
    """Start one fresh worker process; its parsed report (``times``, ``info``, and ``load``: the cores
    other processes kept busy meanwhile, on average) or ``{"error": ...}``. ``repeat`` and ``min_time``
    override the module's timing defaults when given."""
    root = BASELINES.get(library, ROOT)
    cmd = [sys.executable, "-m", "benchmarks.worker", module, library.removesuffix(BASELINE_SUFFIX),
           ",".join(map(str, case_indices)), "--threads", threads, "--clock", clock]
    if repeat is not None:
        cmd += ["--repeat", str(repeat)]
    if min_time is not None:
        cmd += ["--min-time", str(min_time)]
    busy0, own0, wall0 = _cpu_busy_seconds(), _children_cpu_seconds(), time.monotonic()
    try:
        done = subprocess.run(cmd, cwd=root, env=worker_env(threads, root), capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"{library} worker for {module} timed out after {timeout:.0f} s"}
    busy1, own1, wall1 = _cpu_busy_seconds(), _children_cpu_seconds(), time.monotonic()
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            report: dict[str, Any] = json.loads(line[len(RESULT_MARK):])
            if busy0 is not None and busy1 is not None:
                report["load"] = max(0.0, ((busy1 - busy0) - (own1 - own0)) / max(wall1 - wall0, 1e-9))
            return report
    tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
    return {"error": f"{library} worker for {module} exited with {done.returncode}: " + " | ".join(tail)}


def measure_module(module: str, cases: list[Case], libraries: Sequence[str], selected: Sequence[int],
                   threads: str, rounds: int,
                   per_case: bool, repeat: int | None = None, min_time: float | None = None,
                   progress: bool = True, quiet_wait: float = 0.0, clock: str = "wall") -> Measurements:
    """Time the cases of ``module`` at indices ``selected`` for each library, each in fresh processes, ``rounds`` times,
    alternating the order of the libraries between rounds. Before each worker, wait up to
    ``quiet_wait`` seconds for the other processes of the machine to go quiet."""
    result = Measurements(module, threads)
    grouping = getattr(importlib.import_module(f"benchmarks.bench_{module}"), "GROUPING", "case")
    groups = [[i] for i in selected] if per_case or grouping == "case" else [list(selected)]
    for group in groups:
        libs = [lib for lib in libraries if any(lib.removesuffix(BASELINE_SUFFIX) in cases[i].builders for i in group)]
        for r in range(rounds):
            for lib in (libs if r % 2 == 0 else list(reversed(libs))):
                indices = [i for i in group if lib.removesuffix(BASELINE_SUFFIX) in cases[i].builders]
                if quiet_wait > 0:
                    wait_for_quiet(quiet_wait)
                start = time.perf_counter()
                report = run_worker(module, lib, indices, threads, repeat, min_time, clock=clock)
                if progress:
                    print(f"  [{module} threads={threads} round {r + 1}/{rounds}] {lib} "
                          f"({len(indices)} case{'s' if len(indices) > 1 else ''}, {time.perf_counter() - start:.1f} s, "
                          f"background load {report.get('load', float('nan')):.2f} cores)",
                          file=sys.stderr, flush=True)
                if "error" in report:
                    result.errors.append(report["error"])
                    continue
                if "load" in report:
                    result.loads.append(report["load"])
                result.info[lib] = report.get("info", {})
                for name, seconds in report["times"].items():
                    result.add(name, lib, seconds)
    return result


def _fmt(seconds: float, unit: str = "s") -> str:
    if unit != "s":
        return f"{seconds:8.1f} {unit}"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:8.3f} ms"
    return f"{seconds * 1e6:8.2f} us"


def round_ratios(per_lib: dict[str, list[float]], other: str) -> list[float]:
    """tensorplay's time over ``other``'s in each round (a round's workers ran one after another, so
    a slow spell of a shared machine tends to hit both); empty unless both have one time per round."""
    mine, theirs = per_lib.get("tensorplay", []), per_lib.get(other, [])
    if len(mine) != len(theirs) or not all(t > 0 for t in theirs):
        return []
    return [a / b for a, b in zip(mine, theirs)]


def _ratio_cell(per_lib: dict[str, list[float]], medians: dict[str, float], other: str) -> str:
    """``tp / other`` as the ratio of the medians, then the range of the rounds' own ratios (when there
    are several rounds): ``1.27x 1.18-1.35``."""
    if "tensorplay" not in medians or other not in medians or medians[other] <= 0 or medians["tensorplay"] < 0:
        return f"{'-':>20}"
    cell = f"{medians['tensorplay'] / medians[other]:6.2f}x"
    rounds = round_ratios(per_lib, other)
    if len(rounds) > 1:
        cell += f" {min(rounds):5.2f}-{max(rounds):<5.2f}"
    return cell.rjust(20)


def format_table(m: Measurements, libraries: Sequence[str], unit: str = "s") -> str:
    """One line per case: the median over rounds per library (with the spread min-max over rounds as
    a percentage of the median) and the ratios tensorplay / other library: of the medians, then the
    range of the rounds' own ratios (:func:`round_ratios`). Values in ``unit``: seconds, shown as ms or
    us, unless another unit is named."""
    libs = [lib for lib in libraries if any(lib in t for t in m.times.values())]
    others = [lib for lib in libs if lib != "tensorplay"]
    width = max([len(n) for n in m.order] + [20])
    head = f"{'case':<{width}} | " + " | ".join(f"{lib:>20}" for lib in libs)
    if "tensorplay" in libs:
        head += " | " + " | ".join(f"{'tp/' + lib.replace('tensorplay@', '') + ' (rounds)':>20}" for lib in others)
    lines = [head, "-" * len(head)]
    for name in m.order:
        per_lib = m.times[name]
        medians = {lib: statistics.median(v) for lib, v in per_lib.items()}
        cells = []
        for lib in libs:
            if lib not in per_lib:
                cells.append(f"{'-':>20}")
                continue
            v = per_lib[lib]
            spread = (max(v) - min(v)) / medians[lib] * 100 if medians[lib] else 0.0
            cells.append(f"{_fmt(medians[lib], unit)} ±{spread:4.0f}%".rjust(20))
        line = f"{name:<{width}} | " + " | ".join(cells)
        if "tensorplay" in libs:
            line += " | " + " | ".join(_ratio_cell(per_lib, medians, lib) for lib in others)
        lines.append(line)
    return "\n".join(lines)


def geometric_mean_ratio(m: Measurements, other: str) -> float | None:
    """The geometric mean over cases of tensorplay's median over ``other``'s (None if no case has both)."""
    import math

    logs = []
    for per_lib in m.times.values():
        if "tensorplay" in per_lib and other in per_lib and min(per_lib["tensorplay"] + per_lib[other]) > 0:
            logs.append(math.log(statistics.median(per_lib["tensorplay"]) / statistics.median(per_lib[other])))
    return math.exp(sum(logs) / len(logs)) if logs else None


def describe_info(m: Measurements) -> str:
    """What each library's worker reported about itself (version, threads), and the load other
    processes put on the machine while the workers ran."""
    lines = [f"  {lib}: " + ", ".join(f"{k}={v}" for k, v in info.items()) for lib, info in m.info.items()]
    if m.loads:
        lines.append(f"  background load while measuring (cores busy with other processes, of {os.cpu_count()}): "
                     f"median {statistics.median(m.loads):.2f}, max {max(m.loads):.2f}")
    return "\n".join(lines)


def default_libraries() -> list[str]:
    """The libraries importable here, tensorplay first."""
    return [lib for lib in LIBRARIES if lib == "tensorplay" or available(lib)]
