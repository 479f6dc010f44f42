"""Compiled training steps: ``tp.compile`` against PyTorch eager, ``torch.compile`` and JAX ``jit``, each
library alone in its own fresh process (``python -m benchmarks compile``; see :mod:`benchmarks.isolated`).

The steps are those of :mod:`benchmarks.bench_training` (zero grads, forward, loss, backward, optimizer
update; same architectures and initial weights): (a) MLP 784-256-256-10 b128, cross-entropy, SGD with
momentum; (b) CNN c16-pool-c32-pool-fc on 1x28x28 b64, SGD with momentum; (c) pre-norm transformer block
d64 h4 s32 b16, MSE, Adam. ``tp.compile`` and ``torch.compile`` compile the whole step function (backward
and optimizer step inside); JAX's step is one ``jax.jit`` of a pure update with the parameters and the
optimizer state donated; PyTorch eager is the reference. The column ``tensorplay.eager`` is the same step
run by tensorplay's eager interpreter in its own process, so ``tp/tensorplay.eager`` is the compiled/eager
ratio per model (at most 1.00x is the goal: compiling never makes a step slower). For that ratio alone:
``python -m benchmarks compile --libraries tensorplay,tensorplay.eager --only step``.

Rows ``compiled train step (dynamic batch): ...``: the same steps taking the batch as arguments, compiled
with ``dynamic=True`` (a symbolic batch dim; ``torch.compile(dynamic=True)`` beside it), run on the same
batch: the cost of not specialising on the batch size, against the static rows above
(``python -m benchmarks compile --libraries tensorplay --only "train step"``).

Compile time (rows ``compile: ...``, seconds, not timed steps): the first three calls of the MLP step minus
three steady steps, in a fresh process --

* ``cold``: with an empty kernel cache for tensorplay (a fresh ``TP_COMPILE_CACHE_DIR``) and an empty
  inductor cache for ``torch.compile`` (a fresh ``TORCHINDUCTOR_CACHE_DIR``); JAX keeps no persistent
  cache by default;
* ``kernel cache``: tensorplay only, the kernel cache filled by another process first; ``fresh process``
  counts numba's start-up in the process (its import and first compilation context, paid once per
  process by the eager interpreter's kernels too), ``numba loaded`` runs one eager MLP step first.

Rows ``GEMMs of the compiled ...`` (tensorplay only, metrics): the compiled step's time, the part of
it spent inside the plan's matrix products (the generated code's ``matmul`` calls: OpenBLAS; the GEMMs
inside convolution and attention kernels are not counted) and the rest (every other kernel, the Python
between them). The GEMMs are the floor the rest of the step adds to: a step cannot beat a library whose
whole step is faster than those GEMMs alone (``python -m benchmarks compile --libraries tensorplay --only
GEMMs``).

Every process gets its own temporary cache directories (nothing is written to the user's caches).
"""

from __future__ import annotations

import atexit
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from benchmarks import bench_training as training
from benchmarks.cases import Case

GROUPING = "case"
LIBRARIES = ("tensorplay", "tensorplay.eager", "torch", "torch.compile", "jax")
"""The columns: ``tensorplay`` is ``tp.compile``; ``tensorplay.eager`` the same step uncompiled; ``torch`` is
PyTorch eager."""

TIMING = {"warmup_time": 1.0}
GEOMETRIC_MEAN = False  # the compile-time rows are not steps: no mean over rows

STEPS: dict[str, dict[str, Callable[[], Callable[[], Any]]]] = {
    "mlp": {"tensorplay": training.tp_mlp, "torch": training.torch_mlp, "jax": training.jax_mlp},
    "cnn": {"tensorplay": training.tp_cnn, "torch": training.torch_cnn, "jax": training.jax_cnn},
    "block": {"tensorplay": training.tp_block, "torch": training.torch_block, "jax": training.jax_block},
}


def _fresh_cache_dirs() -> str:
    """Point tensorplay's kernel cache and inductor's cache at a new empty directory (removed at exit)."""
    path = tempfile.mkdtemp(prefix="bench-compile-")
    atexit.register(shutil.rmtree, path, True)
    os.environ["TP_COMPILE_CACHE_DIR"] = path
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(path, "inductor")
    return path


def _torch_threads() -> None:
    """The worker sets PyTorch's threads for the library ``torch`` only; ``torch.compile`` does it here."""
    threads = os.environ.get("OMP_NUM_THREADS", "").strip()
    if threads:
        import torch

        torch.set_num_threads(int(threads))
        torch.set_num_interop_threads(int(threads))


def compiled_step(case: str, library: str) -> Callable[[], Any]:
    """The step of ``case`` for ``library`` (``tensorplay``: under ``tp.compile``; ``torch.compile``; the
    others as in :mod:`benchmarks.bench_training`)."""
    if library == "tensorplay":
        _fresh_cache_dirs()
        import tensorplay as tp

        return tp.compile(STEPS[case]["tensorplay"]())
    if library == "tensorplay.eager":
        return STEPS[case]["tensorplay"]()
    if library == "torch.compile":
        _fresh_cache_dirs()
        _torch_threads()
        import torch

        return torch.compile(STEPS[case]["torch"]())
    return STEPS[case][library]()


DYNAMIC_LIBRARIES = ("tensorplay", "torch.compile")
"""The columns of the dynamic-batch rows: ``tp.compile(dynamic=True)`` and ``torch.compile(dynamic=True)``."""


def dynamic_step(case: str, library: str) -> Callable[[], Any]:
    """The step of ``case`` compiled with a symbolic batch dim: the step takes the batch as arguments
    (``step.on(x, y)``) and is compiled with ``dynamic=True``; it runs once on the benchmark's batch, once on
    a smaller one (the same compiled code must serve it: a second compilation raises), and the returned
    callable runs it on the benchmark's batch."""
    if library == "tensorplay":
        _fresh_cache_dirs()
        import tensorplay as tp

        base = STEPS[case]["tensorplay"]()
        compiled: Any = tp.compile(base.on, dynamic=True)  # type: ignore[attr-defined]
    elif library == "torch.compile":
        _fresh_cache_dirs()
        _torch_threads()
        import torch

        base = STEPS[case]["torch"]()
        compiled = torch.compile(base.on, dynamic=True)  # type: ignore[attr-defined]
    else:
        raise ValueError(f"no dynamic-batch step for {library!r}; the libraries are {', '.join(DYNAMIC_LIBRARIES)}")
    x, y = base.batch  # type: ignore[attr-defined]
    compiled(x, y)
    half = x.shape[0] // 2
    compiled(x[:half], y[:half])
    if library == "tensorplay" and compiled.compile_count != 1:
        raise RuntimeError(f"tp.compile(dynamic=True) compiled the {case} step {compiled.compile_count} times for "
                           f"two batch sizes: {compiled.recompile_reasons}")
    return lambda: compiled(x, y)


def _dynamic_builder(case: str, library: str) -> Callable[[], Callable[[], Any]]:
    return lambda: dynamic_step(case, library)


def compile_seconds(step: Callable[[], Any], calls: int = 3) -> float:
    """Seconds the first ``calls`` calls of a freshly built ``step`` take beyond ``calls`` steady steps."""
    first = 0.0
    for _ in range(calls):
        start = time.perf_counter()
        step()
        first += time.perf_counter() - start
    steady = []
    for _ in range(7):
        start = time.perf_counter()
        step()
        steady.append(time.perf_counter() - start)
    return max(0.0, first - calls * statistics.median(steady))


def _fill_kernel_cache(case: str) -> None:
    """Compile ``case``'s tensorplay step in another process, into this process's cache directory."""
    subprocess.run([sys.executable, "-m", "benchmarks.bench_compile", "--fill-cache", case], check=True,
                   env=dict(os.environ), capture_output=True)


def cold(library: str) -> Callable[[], Callable[[], dict[str, float]]]:
    """A metrics builder: the MLP step's compile time in this fresh process, caches empty."""
    def build() -> dict[str, float]:
        return {"seconds": compile_seconds(compiled_step("mlp", library))}
    return lambda: build


def from_kernel_cache(numba_loaded: bool) -> Callable[[], Callable[[], dict[str, float]]]:
    """A metrics builder: the MLP step's compile time with its kernels cached by another process."""
    def build() -> dict[str, float]:
        _fresh_cache_dirs()
        _fill_kernel_cache("mlp")
        if numba_loaded:
            training.tp_mlp()()  # an eager step: numba and the eager kernels are loaded
        import tensorplay as tp

        return {"seconds": compile_seconds(tp.compile(training.tp_mlp()))}
    return lambda: build


def gemm_share(case: str) -> Callable[[], Callable[[], dict[str, float]]]:
    """A metrics builder: the compiled step of ``case``, its time and the part of it spent inside its GEMMs
    (each call of the runtime's ``matmul`` timed), both from the same batches of steps (the median batch by
    step time; a wrapper of ~0.3 us per GEMM call)."""
    def build() -> dict[str, float]:
        from benchmarks.timing import measure
        from tensorplay.compiler.numba_backend import runtime

        step = compiled_step(case, "tensorplay")
        seconds = measure(step, warmup_time=TIMING["warmup_time"])  # warms up; sizes the batches
        inside = [0.0]
        gemm = runtime.matmul

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return gemm(*args, **kwargs)
            finally:
                inside[0] += time.perf_counter() - start

        calls = max(20, int(0.2 / seconds))
        batches: list[tuple[float, float]] = []
        runtime.matmul = timed
        try:
            for _ in range(7):
                inside[0] = 0.0
                start = time.perf_counter()
                for _ in range(calls):
                    step()
                batches.append(((time.perf_counter() - start) / calls, inside[0] / calls))
        finally:
            runtime.matmul = gemm
        total, in_gemms = sorted(batches)[len(batches) // 2]
        if in_gemms == 0.0:  # the generated code stopped calling runtime.matmul: the row would read 0 silently
            raise RuntimeError(f"GEMMs of the compiled {case} step: no call of the runtime's matmul was seen")
        return {"step": total, "in its GEMMs": in_gemms, "outside them": total - in_gemms}
    return lambda: build


def _steady_builder(case: str, library: str) -> Callable[[], Callable[[], Any]]:
    return lambda: compiled_step(case, library)


def cases() -> list[Case]:
    """The three compiled training steps, the same with a dynamic batch dim, then the compile times of the MLP
    step."""
    names = {"mlp": training.cases()[0].name, "cnn": training.cases()[1].name, "block": training.cases()[2].name}
    out = [Case(f"compiled {names[case]}", {lib: _steady_builder(case, lib) for lib in LIBRARIES})
           for case in STEPS]
    out += [Case(f"compiled {names[case].replace('train step', 'train step (dynamic batch)', 1)}",
                 {lib: _dynamic_builder(case, lib) for lib in DYNAMIC_LIBRARIES}) for case in STEPS]
    out += [Case(f"GEMMs of the compiled {names[case]}", {"tensorplay": gemm_share(case)}, metrics=True)
            for case in STEPS]
    out.append(Case("compile: MLP step, cold (empty caches)",
                    {lib: cold(lib) for lib in ("tensorplay", "torch.compile", "jax")}, metrics=True))
    out.append(Case("compile: MLP step, kernel cache, fresh process",
                    {"tensorplay": from_kernel_cache(False)}, metrics=True))
    out.append(Case("compile: MLP step, kernel cache, numba loaded",
                    {"tensorplay": from_kernel_cache(True)}, metrics=True))
    return out


def main(argv: list[str]) -> int:
    """``--fill-cache CASE``: compile the tensorplay step of CASE once (into ``TP_COMPILE_CACHE_DIR``).
    Anything else: run this module through the harness (``python -m benchmarks compile ...``)."""
    if argv[:1] == ["--fill-cache"]:
        import tensorplay as tp

        step = tp.compile(STEPS[argv[1]]["tensorplay"]())
        for _ in range(3):
            step()
        return 0
    from benchmarks.__main__ import main as harness

    return harness(["compile", *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
