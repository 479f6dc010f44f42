"""Learning-rate schedulers with PyTorch's semantics (call ``step()`` once per epoch, after the optimizer's):
``StepLR``, ``MultiStepLR``, ``ExponentialLR``, ``LambdaLR``, ``MultiplicativeLR``, ``LinearLR``,
``ConstantLR``, ``CosineAnnealingLR``, ``OneCycleLR`` (stepped once per batch) and ``ReduceLROnPlateau``
(``step(metric)``); ``PolynomialLR``, ``CosineAnnealingWarmRestarts``, ``CyclicLR``, ``SequentialLR`` and
``ChainedScheduler`` live in :mod:`tensorplay.optim.lr_schedulers_more` and are re-exported here.

As in PyTorch, ``step()`` updates each group's *current* ``lr`` (the chained form), so a learning rate
changed by hand between steps carries on from the new value; ``step(epoch)`` (deprecated there too) jumps
to ``epoch`` and uses the closed form from ``base_lrs``."""

from __future__ import annotations

import math
import types
import warnings
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any, SupportsFloat

_EPOCH_DEPRECATION = ("The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where "
                      "possible. Please use `scheduler.step()` to step the scheduler. During the deprecation, if "
                      "epoch is different from None, the closed form is used instead of the new chainable form, "
                      "where available.")

from tensorplay.errors import TensorplayError
from tensorplay.optim.optimizer import Optimizer, OptimizerError, check_number


class SchedulerTypeError(TensorplayError, TypeError):
    """A learning-rate scheduler was given an argument of the wrong kind (not an optimizer, not a callable)."""


def _check_optimizer(where: str, optimizer: Any) -> Optimizer:
    """``optimizer`` itself, or a :class:`SchedulerTypeError` naming the scheduler and the type given."""
    if not isinstance(optimizer, Optimizer):
        raise SchedulerTypeError(f"{where}: argument 'optimizer' must be a tensorplay.optim.Optimizer, "
                                 f"got {type(optimizer).__name__}")
    return optimizer


def _check_count(where: str, name: str, value: Any, low: int) -> None:
    """An integer hyperparameter (not a bool) that must be at least ``low``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise OptimizerError(f"{where}: {name} must be an integer >= {low}, got {type(value).__name__} {value!r}")


def _per_group(where: str, name: str, optimizer: Optimizer, value: Any) -> list[Any]:
    """One value per parameter group: a list or tuple as long as ``optimizer.param_groups``, or one value
    repeated (as PyTorch's schedulers take ``max_lr``, ``min_lr``, ``lr_lambda``, ...)."""
    n = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise OptimizerError(f"{where}: {name} must have one value per parameter group ({n}), "
                                 f"got {len(value)}")
        return list(value)
    return [value] * n


class LRScheduler:
    """Base class: sets each group's ``lr`` from ``get_lr()`` at construction (epoch 0) and on every
    :meth:`step`. ``last_epoch=-1`` starts a new schedule from the groups' current ``lr``."""

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        self.optimizer = _check_optimizer(type(self).__name__, optimizer)
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
        self._initial_step()

    # set (on the instance) only while the construction step runs
    _is_initial: bool = False

    def _initial_step(self) -> None:
        """The construction step (epoch ``last_epoch + 1``), with the step count reset and ``_is_initial`` set:
        schedulers whose step is chained from the current lr keep it there, as PyTorch's do. ``SequentialLR``
        runs it again for the scheduler it starts with."""
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
        if epoch is not None:
            warnings.warn(_EPOCH_DEPRECATION, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None) -> None:
        """:meth:`step` without the step count and the warning (``SequentialLR`` restarts a scheduler at its
        milestone with ``_update_lr(0)``, as PyTorch's does)."""
        if epoch is None:
            self.last_epoch += 1
            lrs = self.get_lr()
        else:
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
        _check_count("StepLR", "step_size", step_size, 1)
        check_number("StepLR", "gamma", gamma)
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


class MultiStepLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` at each epoch in ``milestones`` (an epoch listed ``k`` times
    multiplies by ``gamma ** k``; the order does not matter, as in PyTorch). Closed form:
    ``base_lr * gamma ** (number of milestones <= epoch)``."""

    def __init__(self, optimizer: Optimizer, milestones: Iterable[int], gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        marks = list(milestones)
        for i, mark in enumerate(marks):
            _check_count("MultiStepLR", f"milestones[{i}]", mark, 0)
        check_number("MultiStepLR", "gamma", gamma)
        self.milestones: Counter[int] = Counter(marks)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        times = self.milestones.get(self.last_epoch, 0)
        if times == 0:
            return [group["lr"] for group in groups]
        return [group["lr"] * self.gamma ** times for group in groups]

    def _get_closed_form_lr(self) -> list[float] | None:
        passed = bisect_right(sorted(self.milestones.elements()), self.last_epoch)
        return [base * self.gamma ** passed for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` every epoch (closed form ``base_lr * gamma ** epoch``)."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        check_number("ExponentialLR", "gamma", gamma)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        if self._is_initial:
            return [group["lr"] for group in groups]
        return [group["lr"] * self.gamma for group in groups]

    def _get_closed_form_lr(self) -> list[float] | None:
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


def _callable_state(fn: Callable[..., Any] | None) -> dict[str, Any] | None:
    """What a state dict keeps of a user's callable, as PyTorch's do: ``None`` for a plain function or lambda
    (or no callable), a copy of the attributes of a callable object."""
    if fn is None or isinstance(fn, types.FunctionType):
        return None
    return dict(getattr(fn, "__dict__", {}))


def _restore_callable(fn: Callable[..., Any] | None, attributes: dict[str, Any] | None) -> None:
    """Put the attributes saved by :func:`_callable_state` back into the scheduler's own callable."""
    if fn is not None and attributes is not None:
        fn.__dict__.update(attributes)


class _LambdaScheduler(LRScheduler):
    """Shared by :class:`LambdaLR` and :class:`MultiplicativeLR`: one callable ``f(epoch) -> float`` per
    group. Their state dicts hold, as PyTorch's do, ``None`` for a plain function or lambda (not saved) and
    a copy of the attributes of a callable object (restored into the object on load)."""

    def __init__(self, optimizer: Optimizer, lr_lambda: Callable[[int], float] | Sequence[Callable[[int], float]],
                 last_epoch: int = -1) -> None:
        where = type(self).__name__
        fns = _per_group(where, "lr_lambda", _check_optimizer(where, optimizer), lr_lambda)
        for i, fn in enumerate(fns):
            if not callable(fn):
                raise SchedulerTypeError(f"{where}: lr_lambda[{i}] must be a callable epoch -> factor, "
                                         f"got {type(fn).__name__}")
        self.lr_lambdas: list[Callable[[int], float]] = fns
        super().__init__(optimizer, last_epoch)

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer; the lambdas as described in the class docstring."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [_callable_state(fn) for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore a state saved by :meth:`state_dict`; this scheduler's own callables are kept."""
        saved = state_dict.get("lr_lambdas", [])
        self.__dict__.update({k: v for k, v in state_dict.items() if k != "lr_lambdas"})
        for fn, attributes in zip(self.lr_lambdas, saved):
            _restore_callable(fn, attributes)


class LambdaLR(_LambdaScheduler):
    """``lr = base_lr * lr_lambda(epoch)`` (one callable, or one per group). No chained form: an lr set by
    hand is overwritten at the next step."""

    def get_lr(self) -> list[float]:
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(_LambdaScheduler):
    """Multiply the current learning rate by ``lr_lambda(epoch)`` every epoch after the first."""

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        if self._is_initial:
            return [group["lr"] for group in groups]
        return [group["lr"] * fn(self.last_epoch) for fn, group in zip(self.lr_lambdas, groups)]


class LinearLR(LRScheduler):
    """Scale the learning rate by a factor going linearly from ``start_factor`` (epoch 0) to ``end_factor``
    (epoch ``total_iters`` and after): closed form
    ``base_lr * (start + (end - start) * min(epoch, total_iters) / total_iters)``."""

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
                 total_iters: int = 5, last_epoch: int = -1) -> None:
        check_number("LinearLR", "start_factor", start_factor)
        if start_factor == 0:
            raise OptimizerError("LinearLR: start_factor must be in (0, 1], got 0")
        check_number("LinearLR", "start_factor", start_factor, high=1.0)
        check_number("LinearLR", "end_factor", end_factor, high=1.0)
        _check_count("LinearLR", "total_iters", total_iters, 1)
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        epoch, start, end = self.last_epoch, self.start_factor, self.end_factor
        if epoch == 0:
            return [group["lr"] * start for group in groups]
        if self._is_initial or epoch > self.total_iters:
            return [group["lr"] for group in groups]
        # factor(epoch) / factor(epoch - 1)
        ratio = 1.0 + (end - start) / (self.total_iters * start + (epoch - 1) * (end - start))
        return [group["lr"] * ratio for group in groups]

    def _get_closed_form_lr(self) -> list[float] | None:
        done = min(self.total_iters, self.last_epoch) / self.total_iters
        return [base * (self.start_factor + (self.end_factor - self.start_factor) * done) for base in self.base_lrs]


class ConstantLR(LRScheduler):
    """Scale the learning rate by ``factor`` until epoch ``total_iters``, then restore it (divide by
    ``factor``). ``factor`` must be in (0, 1]: PyTorch takes 0 too but then divides by zero at
    ``total_iters``."""

    def __init__(self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5,
                 last_epoch: int = -1) -> None:
        check_number("ConstantLR", "factor", factor, high=1.0)
        if factor == 0:
            raise OptimizerError("ConstantLR: factor must be in (0, 1] (the lr is divided by it at total_iters), "
                                 "got 0")
        _check_count("ConstantLR", "total_iters", total_iters, 1)
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [group["lr"] * self.factor for group in groups]
        if self.last_epoch != self.total_iters:
            return [group["lr"] for group in groups]
        return [group["lr"] * (1.0 / self.factor) for group in groups]

    def _get_closed_form_lr(self) -> list[float] | None:
        restored = 1.0 if self.last_epoch >= self.total_iters else 0.0
        return [base * (self.factor + restored * (1 - self.factor)) for base in self.base_lrs]


def _anneal(strategy: str, start: float, end: float, pct: float) -> float:
    """From ``start`` (pct 0) to ``end`` (pct 1): half a cosine, or a straight line."""
    if strategy == "cos":
        return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
    return (end - start) * pct + start


def _uses_beta1(where: str, optimizer: Optimizer, cycle_momentum: bool) -> bool:
    """Whether a scheduler cycling the momentum sets ``betas[0]`` (Adam and its relatives) rather than
    ``momentum`` (SGD, RMSprop); an :class:`OptimizerError` when it cycles it and the optimizer has neither."""
    use_beta1 = "betas" in optimizer.defaults
    if cycle_momentum and "momentum" not in optimizer.defaults and not use_beta1:
        raise OptimizerError(f"{where}: cycle_momentum=True needs an optimizer with a momentum (SGD) or betas "
                             f"(Adam); got {type(optimizer).__name__}, which has neither (pass cycle_momentum=False)")
    return use_beta1


def set_momentum(group: dict[str, Any], value: float, use_beta1: bool) -> None:
    """Set a parameter group's momentum: ``betas[0]`` with ``use_beta1``, else ``momentum``."""
    if use_beta1:
        group["betas"] = (value, *group["betas"][1:])
    else:
        group["momentum"] = value


class OneCycleLR(LRScheduler):
    """The 1cycle policy (stepped once per batch, ``total_steps`` or ``epochs * steps_per_epoch`` times):
    the lr rises from ``max_lr / div_factor`` to ``max_lr`` over the first ``pct_start`` of the steps, then
    falls to ``max_lr / div_factor / final_div_factor``; with ``three_phase`` it first falls back to the
    initial lr and then to the minimum. With ``cycle_momentum`` the momentum (SGD's ``momentum``, Adam's
    ``betas[0]``) moves the other way between ``max_momentum`` and ``base_momentum``. Each step's values are
    computed from the step number (``last_epoch``), so an lr set by hand is overwritten. Phase ``k`` ends at
    step ``pct_start * total_steps * k - k`` (the last at ``total_steps - 1``); stepping more than
    ``total_steps`` times raises :class:`OptimizerError`. Per group the values live in the parameter group
    (``initial_lr``, ``max_lr``, ``min_lr``, ``max_momentum``, ``base_momentum``), as in PyTorch."""

    def __init__(self, optimizer: Optimizer, max_lr: float | Sequence[float], total_steps: int | None = None,
                 epochs: int | None = None, steps_per_epoch: int | None = None, pct_start: float = 0.3,
                 anneal_strategy: str = "cos", cycle_momentum: bool = True,
                 base_momentum: float | Sequence[float] = 0.85, max_momentum: float | Sequence[float] = 0.95,
                 div_factor: float = 25.0, final_div_factor: float = 1e4, three_phase: bool = False,
                 last_epoch: int = -1) -> None:
        where = "OneCycleLR"
        opt = _check_optimizer(where, optimizer)
        if total_steps is not None:
            _check_count(where, "total_steps", total_steps, 1)
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            _check_count(where, "epochs", epochs, 1)
            _check_count(where, "steps_per_epoch", steps_per_epoch, 1)
            self.total_steps = epochs * steps_per_epoch
        else:
            raise OptimizerError(f"{where}: give total_steps, or both epochs and steps_per_epoch "
                                 f"(got total_steps={total_steps}, epochs={epochs}, steps_per_epoch={steps_per_epoch})")
        check_number(where, "pct_start", pct_start, high=1.0)
        if anneal_strategy not in ("cos", "linear"):
            raise OptimizerError(f"{where}: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
        check_number(where, "div_factor", div_factor)
        check_number(where, "final_div_factor", final_div_factor)
        if div_factor == 0 or final_div_factor == 0:
            raise OptimizerError(f"{where}: div_factor and final_div_factor must be positive, got "
                                 f"{div_factor} and {final_div_factor}")
        self.anneal_strategy = anneal_strategy
        rise_end = float(pct_start * self.total_steps) - 1
        last = float(self.total_steps - 1)
        # (end step, lr from, lr to, momentum from, momentum to), the group keys holding them
        self._phases: list[tuple[float, str, str, str, str]] = (
            [(rise_end, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
             (float(2 * pct_start * self.total_steps) - 2, "max_lr", "initial_lr", "base_momentum", "max_momentum"),
             (last, "initial_lr", "min_lr", "max_momentum", "max_momentum")] if three_phase else
            [(rise_end, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
             (last, "max_lr", "min_lr", "base_momentum", "max_momentum")])
        max_lrs = _per_group(where, "max_lr", opt, max_lr)
        for i, value in enumerate(max_lrs):
            check_number(where, f"max_lr[{i}]", value)
        self.cycle_momentum = bool(cycle_momentum)
        self.use_beta1 = _uses_beta1(where, opt, self.cycle_momentum)
        max_ms = _per_group(where, "max_momentum", opt, max_momentum)
        base_ms = _per_group(where, "base_momentum", opt, base_momentum)
        if last_epoch == -1:
            for group, peak in zip(opt.param_groups, max_lrs):
                group["initial_lr"] = peak / div_factor
                group["max_lr"] = peak
                group["min_lr"] = group["initial_lr"] / final_div_factor
            for group, high, low in zip(opt.param_groups, max_ms, base_ms) if self.cycle_momentum else ():
                self._set_momentum(group, high)
                group["max_momentum"] = high
                group["base_momentum"] = low
        else:
            keys = ["max_lr", "min_lr"] + (["max_momentum", "base_momentum"] if self.cycle_momentum else [])
            for i, group in enumerate(opt.param_groups):
                missing = [k for k in keys if k not in group]
                if missing:
                    raise OptimizerError(f"{where}: resuming (last_epoch={last_epoch}) needs {missing} in "
                                         f"param_groups[{i}], as a OneCycleLR run from the start leaves there")
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group: dict[str, Any], value: float) -> None:
        set_momentum(group, value, self.use_beta1)

    def get_lr(self) -> list[float]:
        """The lrs at step ``last_epoch``; sets the groups' momentum too when cycling it."""
        step = self.last_epoch
        if step > self.total_steps:
            raise OptimizerError(f"OneCycleLR: stepped {step} times, more than total_steps={self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, (end, lr_from, lr_to, m_from, m_to) in enumerate(self._phases):
                if step <= end or i == len(self._phases) - 1:
                    if end == start:  # PyTorch divides by zero here
                        raise OptimizerError(f"OneCycleLR: phase {i + 1} of the schedule is empty (it ends at step "
                                             f"{end}, where it starts), from pct_start and total_steps="
                                             f"{self.total_steps}; change pct_start")
                    pct = (step - start) / (end - start)
                    lrs.append(_anneal(self.anneal_strategy, group[lr_from], group[lr_to], pct))
                    if self.cycle_momentum:
                        self._set_momentum(group, _anneal(self.anneal_strategy, group[m_from], group[m_to], pct))
                    break
                start = end
        return lrs


class ReduceLROnPlateau(LRScheduler):
    """Multiply every group's lr by ``factor`` (never below its ``min_lr``, and only when the change is more
    than ``eps``) once the metric given to ``step(metric)`` has not improved for more than ``patience``
    epochs; then wait ``cooldown`` epochs before counting again. Improving means, for ``mode="min"``,
    ``metric < best * (1 - threshold)`` (``threshold_mode="rel"``) or ``metric < best - threshold``
    (``"abs"``), and the mirror image for ``"max"``."""

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1, patience: int = 10,
                 threshold: float = 1e-4, threshold_mode: str = "rel", cooldown: int = 0,
                 min_lr: float | Sequence[float] = 0.0, eps: float = 1e-8) -> None:
        where = "ReduceLROnPlateau"
        self.optimizer = _check_optimizer(where, optimizer)
        check_number(where, "factor", factor, high=1.0, high_open=True)
        if mode not in ("min", "max"):
            raise OptimizerError(f"{where}: mode must be 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise OptimizerError(f"{where}: threshold_mode must be 'rel' or 'abs', got {threshold_mode!r}")
        _check_count(where, "patience", patience, 0)
        _check_count(where, "cooldown", cooldown, 0)
        check_number(where, "threshold", threshold)
        check_number(where, "eps", eps)
        self.min_lrs: list[float] = _per_group(where, "min_lr", self.optimizer, min_lr)
        for i, value in enumerate(self.min_lrs):
            check_number(where, f"min_lr[{i}]", value)
        self.default_min_lr: float | None = None if isinstance(min_lr, (list, tuple)) else self.min_lrs[0]
        self.mode, self.factor, self.patience, self.cooldown = mode, factor, patience, cooldown
        self.threshold, self.threshold_mode, self.eps = threshold, threshold_mode, eps
        self.last_epoch = 0
        self._step_count = 0
        self._is_initial = False
        self.base_lrs = [group["lr"] for group in self.optimizer.param_groups]
        self._last_lr = list(self.base_lrs)
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = 0
        self.cooldown_counter = 0

    @property
    def in_cooldown(self) -> bool:
        """Whether the epochs after a reduction that are not counted are still running."""
        return self.cooldown_counter > 0

    def is_better(self, a: float, best: float) -> bool:
        """Whether metric ``a`` improves on ``best`` by the threshold."""
        if self.mode == "min":
            return a < (best * (1.0 - self.threshold) if self.threshold_mode == "rel" else best - self.threshold)
        return a > (best * (self.threshold + 1.0) if self.threshold_mode == "rel" else best + self.threshold)

    def step(self, metrics: SupportsFloat | None = None, epoch: int | None = None) -> None:  # type: ignore[override]
        """Record this epoch's ``metrics`` (a number or a one-element tensor) and reduce the lrs if it is
        the ``patience + 1``-th epoch in a row without improvement (outside a cooldown)."""
        try:
            current = float(metrics)  # type: ignore[arg-type]
        except (TypeError, ValueError) as error:
            raise SchedulerTypeError(f"ReduceLROnPlateau.step: metrics must be a number or a one-element tensor, "
                                     f"got {type(metrics).__name__}") from error
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(_EPOCH_DEPRECATION, UserWarning, stacklevel=2)
        self.last_epoch = epoch
        self._step_count += 1
        if self.is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _reduce_lr(self) -> None:
        groups = self.optimizer.param_groups
        if len(self.min_lrs) != len(groups):
            if self.default_min_lr is None:
                raise OptimizerError(f"ReduceLROnPlateau: the optimizer has {len(groups)} parameter groups but "
                                     f"min_lr was given for {len(self.min_lrs)}; set scheduler.min_lrs to match")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for group, floor in zip(groups, self.min_lrs):
            old = float(group["lr"])
            new = max(old * self.factor, floor)
            if old - new > self.eps:
                group["lr"] = new


# defined there on top of the classes above; importable from here as in PyTorch
from tensorplay.optim.lr_schedulers_more import (  # noqa: E402
    ChainedScheduler,
    CosineAnnealingWarmRestarts,
    CyclicLR,
    PolynomialLR,
    SequentialLR,
)

__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "LambdaLR", "MultiplicativeLR", "LinearLR",
           "ConstantLR", "CosineAnnealingLR", "OneCycleLR", "ReduceLROnPlateau", "SchedulerTypeError",
           "PolynomialLR", "CosineAnnealingWarmRestarts", "CyclicLR", "SequentialLR", "ChainedScheduler"]
