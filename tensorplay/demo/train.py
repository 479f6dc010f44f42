"""Training and evaluation for the demo. Each piece is a plain function so later steps (compile,
export) can swap one out: ``fit(..., step=compiled_step)``, ``predict`` for comparisons."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay import nn, optim
from tensorplay.demo.data import Digits, batches
from tensorplay.demo.model import DigitsCNN

Array = np.ndarray[Any, Any]
StepFn = Callable[[nn.Module, optim.Optimizer, Array, Array], float]
"""One optimisation step on a mini-batch ``(x, y)``; returns the batch loss."""


@dataclass(frozen=True)
class TrainConfig:
    """Hyperparameters of a demo run."""

    epochs: int = 8
    batch_size: int = 32
    lr: float = 3e-3
    weight_decay: float = 1e-4
    dropout: float = 0.1
    seed: int = 0


@dataclass(frozen=True)
class EpochStats:
    """What one epoch gave."""

    epoch: int
    train_loss: float
    test_loss: float
    test_accuracy: float
    seconds: float


@dataclass
class TrainResult:
    """The trained model, its optimizer and the per-epoch history."""

    model: DigitsCNN
    optimizer: optim.Optimizer
    history: list[EpochStats] = field(default_factory=list)
    batch_losses: list[float] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def final_accuracy(self) -> float:
        """Test accuracy after the last epoch."""
        return self.history[-1].test_accuracy if self.history else float("nan")


def make_model(config: TrainConfig) -> DigitsCNN:
    """A freshly initialised model (seeded by ``config.seed``)."""
    tp.manual_seed(config.seed)
    return DigitsCNN(dropout=config.dropout)


def make_optimizer(model: nn.Module, config: TrainConfig) -> optim.Optimizer:
    """AdamW over the model's parameters."""
    return optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)


def sample_batch(config: TrainConfig, dtype: Any = np.float32, seed: int = 0) -> tuple[Array, Array]:
    """A mini-batch shaped like the demo's: ``x[batch_size, 1, 8, 8]`` standard normal images of ``dtype`` and
    ``y[batch_size]`` int64 labels in ``[0, 10)``, drawn from ``seed`` (for warm-ups and first-step timings,
    where the digits themselves do not matter)."""
    gen = np.random.default_rng(seed)
    x = gen.standard_normal((config.batch_size, 1, 8, 8)).astype(dtype)
    return x, gen.integers(0, 10, config.batch_size)


def train_step(model: nn.Module, opt: optim.Optimizer, x: Array, y: Array) -> float:
    """Forward, cross-entropy, backward and an optimizer step on one mini-batch (eager)."""
    opt.zero_grad()
    loss = F.cross_entropy(model(tp.tensor(x)), tp.tensor(y))
    loss.backward()
    opt.step()
    return float(loss.item())


def logits(model: nn.Module, x: Array, batch_size: int = 512) -> Array:
    """Model outputs for images ``x`` (no gradient recording)."""
    with tp.no_grad():
        outs = [model(tp.tensor(x[i:i + batch_size])).numpy() for i in range(0, len(x), batch_size)]
    return np.concatenate(outs) if outs else np.zeros((0, 10), dtype=np.float32)


def eval_logits(model: nn.Module, x: Array) -> Array:
    """:func:`logits` of images ``x`` with the model in evaluation mode (its mode is restored after)."""
    was_training = model.training
    model.eval()
    try:
        return logits(model, x)
    finally:
        model.train(was_training)


def predict(model: nn.Module, x: Array) -> Array:
    """Predicted classes for images ``x`` (the model in evaluation mode)."""
    classes: Array = eval_logits(model, x).argmax(axis=1)
    return classes


def evaluate(model: nn.Module, x: Array, y: Array) -> tuple[float, float]:
    """``(mean cross-entropy, accuracy)`` on ``(x, y)`` in evaluation mode."""
    was_training = model.training
    model.eval()
    try:
        out = logits(model, x)
    finally:
        model.train(was_training)
    loss = float(F.cross_entropy(tp.tensor(out), tp.tensor(y)).item())
    return loss, float((out.argmax(axis=1) == y).mean())


def fit(config: TrainConfig, data: Digits, step: StepFn = train_step, progress: bool = True,
        log: Callable[[str], None] | None = print) -> TrainResult:
    """Train a fresh model on ``data`` for ``config.epochs`` epochs, evaluating after each one.

    ``step`` runs one optimisation step (swap in a compiled one); ``progress`` shows a tqdm bar
    when its output (standard error) is a terminal, and nothing otherwise (no carriage-return
    redraws in logs); ``log`` receives one line per epoch.
    """
    model = make_model(config)
    opt = make_optimizer(model, config)
    result = TrainResult(model=model, optimizer=opt)
    rng = np.random.default_rng(config.seed)
    n_batches = -(-len(data.y_train) // config.batch_size)
    start = time.perf_counter()
    bar: Any = None
    if progress:
        from tqdm import tqdm
        # disable=None: tqdm turns itself off when its stream is not a terminal
        bar = tqdm(total=config.epochs * n_batches, unit="batch", dynamic_ncols=True, leave=False,
                   disable=None)
    write = (bar.write if bar is not None else log) if log is not None else None
    try:
        for epoch in range(1, config.epochs + 1):
            model.train()
            epoch_start = time.perf_counter()
            losses = []
            for x, y in batches(data.x_train, data.y_train, config.batch_size, rng):
                losses.append(step(model, opt, x, y))
                if bar is not None:
                    bar.set_description(f"epoch {epoch}/{config.epochs}")
                    bar.set_postfix(loss=f"{losses[-1]:.4f}", refresh=False)
                    bar.update(1)
            result.batch_losses.extend(losses)
            test_loss, accuracy = evaluate(model, data.x_test, data.y_test)
            stats = EpochStats(epoch, float(np.mean(losses)), test_loss, accuracy,
                               time.perf_counter() - epoch_start)
            result.history.append(stats)
            if write is not None:
                write(f"epoch {epoch:2d}/{config.epochs}  train loss {stats.train_loss:.4f}  "
                      f"test loss {stats.test_loss:.4f}  test accuracy {100 * stats.test_accuracy:5.2f}%  "
                      f"({stats.seconds:.2f} s)")
    finally:
        if bar is not None:
            bar.close()
    result.seconds = time.perf_counter() - start
    return result
