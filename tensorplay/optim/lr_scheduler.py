"""Learning-rate schedulers: ``StepLR`` and ``CosineAnnealingLR`` (call ``step()`` once per epoch).

As in PyTorch, ``step()`` updates each group's *current* ``lr`` (the chained form), so a learning rate
changed by hand between steps carries on from the new value; ``step(epoch)`` (deprecated there too) jumps
to ``epoch`` and uses the closed form from ``base_lrs``."""

from __future__ import annotations

import math
import warnings
from typing import Any

_EPOCH_DEPRECATION = ("The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where "
                      "possible. Please use `scheduler.step()` to step the scheduler. During the deprecation, if "
                      "epoch is different from None, the closed form is used instead of the new chainable form, "
                      "where available.")

from tensorplay.optim.optimizer import Optimizer, OptimizerError


class LRScheduler:
    """Base class: sets each group's ``lr`` from ``get_lr()`` at construction (epoch 0) and on every
    :meth:`step`. ``last_epoch=-1`` starts a new schedule from the groups' current ``lr``."""

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise OptimizerError(f"param 'initial_lr' is not specified in param_groups[{i}] when resuming "
                                         "a schedule (last_epoch != -1)")
        self.base_lrs: list[float] = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._last_lr: list[float] = []
        # The construction step (epoch last_epoch + 1) runs with _is_initial set: schedulers whose step is
        # chained from the current lr keep it there, as PyTorch's do.
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list[float]:
        """The learning rates for ``self.last_epoch``, from the groups' current ``lr`` (chained form)."""
        raise NotImplementedError

    def _get_closed_form_lr(self) -> list[float] | None:
        """The learning rates at ``self.last_epoch`` from ``base_lrs`` alone, or None where there is none."""
        return None

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch and set the new learning rates. ``epoch`` (deprecated, as in PyTorch) sets
        ``last_epoch`` to it and uses the closed form where the scheduler has one."""
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            lrs = self.get_lr()
        else:
            warnings.warn(_EPOCH_DEPRECATION, UserWarning, stacklevel=2)
            self.last_epoch = epoch
            closed = self._get_closed_form_lr()
            lrs = self.get_lr() if closed is None else closed
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def get_last_lr(self) -> list[float]:
        """The learning rates set by the last :meth:`step`."""
        return list(self._last_lr)

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore a state saved by :meth:`state_dict`."""
        self.__dict__.update(state_dict)


class StepLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` every ``step_size`` epochs."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1) -> None:
        if step_size <= 0:
            raise OptimizerError(f"StepLR: step_size must be positive, got {step_size}")
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        if self.last_epoch == 0 or self.last_epoch % self.step_size:
            return [group["lr"] for group in groups]
        return [group["lr"] * self.gamma for group in groups]

    def _get_closed_form_lr(self) -> list[float] | None:
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing, stepped as PyTorch does by its recursive form: each ``step()`` scales the current
    ``lr - eta_min`` by ``(1 + cos(pi * t / T_max)) / (1 + cos(pi * (t - 1) / T_max))``, and on the epochs
    after a minimum (``t - 1 - T_max`` a multiple of ``2 * T_max``) adds
    ``(base_lr - eta_min) * (1 - cos(pi / T_max)) / 2``. Untouched, this follows the closed form
    ``eta_min + (base_lr - eta_min) * (1 + cos(pi * t / T_max)) / 2``; an ``lr`` set by hand, or a schedule
    resumed with ``last_epoch``, carries on from the current ``lr`` (the construction step keeps it)."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1) -> None:  # noqa: N803
        if T_max <= 0:
            raise OptimizerError(f"CosineAnnealingLR: T_max must be positive, got {T_max}")
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        epoch, t_max, eta_min = self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return [group["lr"] for group in groups]
        if self._step_count == 1 and epoch > 0:
            return self._closed_form()
        if (epoch - 1 - t_max) % (2 * t_max) == 0:
            rise = (1 - math.cos(math.pi / t_max)) / 2
            return [group["lr"] + (base - eta_min) * rise for base, group in zip(self.base_lrs, groups)]
        ratio = (1 + math.cos(math.pi * epoch / t_max)) / (1 + math.cos(math.pi * (epoch - 1) / t_max))
        return [ratio * (group["lr"] - eta_min) + eta_min for group in groups]

    def _closed_form(self) -> list[float]:
        factor = (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
        return [self.eta_min + (base - self.eta_min) * factor for base in self.base_lrs]

    def _get_closed_form_lr(self) -> list[float] | None:
        return self._closed_form()
