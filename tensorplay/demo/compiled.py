"""After training: the same training step compiled with ``tp.compile`` (forward, loss, backward and the
optimizer update in one compiled function), timed against the eager step.

Two fresh models with the same initial weights train on the same mini-batches with the same random
draws (dropout): one eagerly, one through the compiled step. The report gives the compile time (the
first call: capture, passes and kernels, from the on-disk kernel cache after the first run), the median
time of an eager and of a compiled step, and the largest difference between their losses (rounding only:
fused kernels contract multiply-adds and sum in float64; Adam and max-pool near-ties magnify that a little).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay.demo.data import Digits, batches
from tensorplay.demo.train import TrainConfig, TrainResult, make_model, make_optimizer


@dataclass(frozen=True)
class CompiledReport:
    """What the compiled training run measured (seconds)."""

    compile_seconds: float
    eager_step: float
    compiled_step: float
    compiles: int
    steps: int
    max_loss_difference: float


def training_step(model: Any, opt: Any) -> Any:
    """The demo's step ``step(x, y) -> loss``: zero the gradients, cross-entropy of ``model(x)`` against the
    class indices ``y``, backward, ``opt.step()`` (the function ``tp.compile`` compiles)."""
    def step(x: Any, y: Any) -> Any:
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def compare_steps(config: TrainConfig, data: Digits, steps: int = 60) -> CompiledReport:
    """Train ``steps`` mini-batches eagerly and compiled from the same start (see the module docstring)."""
    eager_model, compiled_model = make_model(config), make_model(config)
    eager_step = training_step(eager_model, make_optimizer(eager_model, config))
    compiled = tp.compile(training_step(compiled_model, make_optimizer(compiled_model, config)))
    rng = np.random.default_rng(config.seed)
    pairs = [(tp.tensor(x), tp.tensor(y)) for x, y in batches(data.x_train, data.y_train, config.batch_size, rng)]
    eager_times: list[float] = []
    compiled_times: list[float] = []
    differences: list[float] = []
    compile_seconds = 0.0
    for i in range(steps):
        x, y = pairs[i % len(pairs)]
        seed = config.seed * 1000 + i
        tp.manual_seed(seed)
        start = time.perf_counter()
        expected = float(eager_step(x, y).item())
        eager_times.append(time.perf_counter() - start)
        tp.manual_seed(seed)
        captures = compiled.compile_count
        start = time.perf_counter()
        got = float(compiled(x, y).item())
        elapsed = time.perf_counter() - start
        if compiled.compile_count > captures:  # a step that captured and compiled (the first one)
            compile_seconds += elapsed
        else:
            compiled_times.append(elapsed)
        differences.append(abs(got - expected))
    return CompiledReport(compile_seconds, statistics.median(eager_times[2:]), statistics.median(compiled_times),
                          compiled.compile_count, steps, max(differences))


def compiled_step(result: TrainResult, data: Digits) -> None:
    """The post-training step of ``python -m tensorplay.demo``: :func:`report_compiled` on the data."""
    report_compiled(data)


def report_compiled(data: Digits, log: Any = print) -> CompiledReport:
    """Compare (:func:`compare_steps` with the demo's settings) and print the report; raises
    ``AssertionError`` when the compiled losses drift from the eager ones."""
    report = compare_steps(TrainConfig(), data)
    log(f"compiled training step: compile {report.compile_seconds:.2f} s ({report.compiles} specializations), "
        f"step {1e3 * report.compiled_step:.2f} ms compiled vs {1e3 * report.eager_step:.2f} ms eager "
        f"({report.eager_step / report.compiled_step:.2f}x); losses agree to {report.max_loss_difference:.1e} "
        f"over {report.steps} steps")
    # rounding differences grow over the steps (Adam divides by the gradients' running scale; a max-pool
    # window whose two largest values are within rounding may route its gradient to the other one); a real
    # divergence (a wrong gradient, a missed update) is far larger
    assert report.max_loss_difference < 0.1, "the compiled training step diverged from the eager one"
    return report


__all__ = ["CompiledReport", "compare_steps", "compiled_step", "report_compiled", "training_step"]
