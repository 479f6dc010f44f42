"""A fast smoke run of the demo: one epoch on a subset of the digits."""

from __future__ import annotations

import io
import sys

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.demo import DigitsCNN, TrainConfig, fit, load_digits_data, predict
from tensorplay.demo.__main__ import POST_TRAINING_STEPS, main, register_post_training_step


def test_one_epoch_on_a_subset_learns() -> None:
    data = load_digits_data(seed=0, limit=1000)
    assert data.x_train.shape[1:] == (1, 8, 8) and data.x_train.dtype == np.float32
    assert len(data.y_train) + len(data.y_test) == 1000
    result = fit(TrainConfig(epochs=1, batch_size=16, seed=0), data, progress=False, log=None)
    losses = result.batch_losses
    assert len(losses) == -(-len(data.y_train) // 16)
    assert np.mean(losses[-5:]) < 0.75 * np.mean(losses[:5])  # the loss goes down
    assert result.final_accuracy > 0.5  # chance is 0.1
    predictions = predict(result.model, data.x_test)
    assert predictions.shape == data.y_test.shape
    assert np.mean(predictions == data.y_test) == result.final_accuracy
    assert result.model.training  # predict restores the mode


def test_training_is_deterministic_given_the_seed() -> None:
    data = load_digits_data(seed=1, limit=200)
    config = TrainConfig(epochs=1, batch_size=50, seed=3)
    a = fit(config, data, progress=False, log=None)
    b = fit(config, data, progress=False, log=None)
    assert a.batch_losses == b.batch_losses
    for (name, p), (_, q) in zip(a.model.named_parameters(), b.model.named_parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy(), err_msg=name)


def test_model_is_prefix_polymorphic() -> None:
    tp.manual_seed(0)
    model = DigitsCNN().eval()
    x = np.random.default_rng(0).standard_normal((2, 3, 1, 8, 8)).astype(np.float32)
    batched = model(tp.tensor(x)).detach().numpy()
    assert batched.shape == (2, 3, 10)
    single = model(tp.tensor(x[1, 2])).detach().numpy()
    np.testing.assert_allclose(single, batched[1, 2], rtol=1e-5, atol=1e-6)


def test_main_runs_post_training_steps(capsys: object) -> None:
    seen: list[float] = []
    step = register_post_training_step(lambda result, data: seen.append(result.final_accuracy))
    try:
        result = main(["--epochs", "1", "--limit", "300", "--no-progress", "--batch-size", "64"])
    finally:
        POST_TRAINING_STEPS.remove(step)
    assert seen == [result.final_accuracy]


class _Stream(io.StringIO):
    """A text stream that says whether it is a terminal."""

    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def _fit_with_progress(stderr: _Stream, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", stderr)
    data = load_digits_data(seed=0, limit=120)
    fit(TrainConfig(epochs=1, batch_size=32, seed=0), data, step=lambda model, opt, x, y: 0.5,
        progress=True, log=None)


def test_progress_bar_is_off_when_output_is_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    stderr = _Stream(tty=False)
    _fit_with_progress(stderr, monkeypatch)
    assert stderr.getvalue() == ""  # no carriage-return redraws in a log file


def test_progress_bar_draws_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    stderr = _Stream(tty=True)
    _fit_with_progress(stderr, monkeypatch)
    assert "\r" in stderr.getvalue() and "batch" in stderr.getvalue()
