"""The demo's compiled training run: the compiled step trains like the eager one and is reported."""

from __future__ import annotations

from tensorplay.demo import load_digits_data
from tensorplay.demo.compiled import compare_steps, report_compiled
from tensorplay.demo.train import TrainConfig


def test_compiled_steps_follow_the_eager_steps() -> None:
    data = load_digits_data(seed=0, limit=200)
    report = compare_steps(TrainConfig(batch_size=40, dropout=0.0), data, steps=8)
    assert report.steps == 8 and report.max_loss_difference < 1e-3
    # one capture: the first step creates the optimizer state as zeros at call time, and the last batch of
    # the 160 training images is 40 too
    assert report.compiles == 1
    assert report.compile_seconds > 0 and report.compiled_step > 0 and report.eager_step > 0


def test_report_line() -> None:
    lines: list[str] = []
    data = load_digits_data(seed=1, limit=120)
    report_compiled(data, log=lines.append)
    (line,) = lines
    assert line.startswith("compiled training step: compile ") and "ms compiled vs" in line and "ms eager" in line
