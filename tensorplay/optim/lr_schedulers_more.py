"""More learning-rate schedulers with PyTorch's semantics and signatures: ``PolynomialLR``,
``CosineAnnealingWarmRestarts`` (``step(epoch)`` with a fractional epoch, as PyTorch allows), ``CyclicLR``
(stepped once per batch, optionally cycling the momentum), and the schedulers made of schedulers:
``SequentialLR`` (one after the other, switching at milestones) and ``ChainedScheduler`` (all of them every
step). :mod:`tensorplay.optim.lr_scheduler` re-exports them."""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tensorplay.optim.lr_scheduler import (
    LRScheduler,
    ReduceLROnPlateau,
    SchedulerTypeError,
    _callable_state,
    _check_count,
    _check_optimizer,
    _per_group,
    _restore_callable,
    _uses_beta1,
    set_momentum,
)
from tensorplay.optim.optimizer import Optimizer, OptimizerError, check_flag, check_number


class PolynomialLR(LRScheduler):
    """``lr = base_lr * (1 - min(epoch, total_iters) / total_iters) ** power``: a polynomial decay to 0 at
    epoch ``total_iters``, then constant. ``step()`` is chained (it multiplies the current lr by
    ``factor(epoch) / factor(epoch - 1)``), so an lr set by hand carries on; ``step(epoch)`` uses the closed
    form. ``total_iters`` is an integer >= 1 and ``power`` a number >= 0 (PyTorch divides by zero otherwise)."""

    def __init__(self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0, last_epoch: int = -1) -> None:
        _check_count("PolynomialLR", "total_iters", total_iters, 1)
        check_number("PolynomialLR", "power", power)
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        epoch, total = self.last_epoch, self.total_iters
        if self._is_initial or epoch > total:
            return [group["lr"] for group in groups]
        ratio = ((1.0 - epoch / total) / (1.0 - (epoch - 1) / total)) ** self.power
        return [group["lr"] * ratio for group in groups]

    def _get_closed_form_lr(self) -> list[float] | None:
        done = min(self.total_iters, self.last_epoch) / self.total_iters
        return [base * (1.0 - done) ** self.power for base in self.base_lrs]


def _check_epoch(where: str, epoch: Any) -> None:
    """A (possibly fractional) epoch given to ``step``: a finite number >= 0."""
    if isinstance(epoch, bool) or not isinstance(epoch, (int, float)):
        raise SchedulerTypeError(f"{where}: epoch must be a number (int or float) or None, got "
                                 f"{type(epoch).__name__} {epoch!r}")
    if not math.isfinite(epoch) or epoch < 0:
        raise OptimizerError(f"{where}: epoch must be a finite number >= 0, got {epoch!r}")


class CosineAnnealingWarmRestarts(LRScheduler):
    """SGDR: ``lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * T_cur / T_i)) / 2``, where ``T_cur`` counts
    the epochs since the last restart and ``T_i`` is the current period: ``T_0`` at first, multiplied by
    ``T_mult`` at each restart (so restarts fall at ``T_0``, ``T_0 + T_0 * T_mult``, ...). ``step()`` adds one
    epoch; ``step(epoch)`` jumps to ``epoch``, which may be fractional (``step(epoch + i / iters)`` once per
    batch): ``T_cur`` and ``T_i`` follow from it and ``last_epoch`` is ``floor(epoch)``. Each step's lr
    comes from ``base_lrs`` (an lr set by hand is overwritten). The period containing ``epoch`` is found
    exactly with integers, where PyTorch takes a floating-point logarithm that can land one period short on
    a restart epoch (``T_0=1, T_mult=10, step(111)``: PyTorch's lr is ``eta_min`` where ``step()`` 111 times
    gives the restart's ``base_lr``, as here)."""

    def __init__(self, optimizer: Optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0,  # noqa: N803
                 last_epoch: int = -1) -> None:
        where = "CosineAnnealingWarmRestarts"
        _check_count(where, "T_0", T_0, 1)
        _check_count(where, "T_mult", T_mult, 1)
        check_number(where, "eta_min", eta_min, low=-math.inf)
        self.T_0 = T_0
        self.T_i: float = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur: float = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        factor = (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
        return [self.eta_min + (base - self.eta_min) * factor for base in self.base_lrs]

    def step(self, epoch: float | None = None) -> None:
        """One epoch on (``epoch=None``), or to ``epoch`` (a number >= 0, fractional allowed; no deprecation
        warning, as in PyTorch)."""
        self._step_count += 1
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            _check_epoch("CosineAnnealingWarmRestarts.step", epoch)
            self.T_cur, self.T_i = self._position(epoch)
        self.last_epoch = math.floor(epoch)
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _position(self, epoch: float) -> tuple[float, float]:
        """``(T_cur, T_i)`` at ``epoch``: the time into the period that contains it, and that period."""
        if epoch < self.T_0:
            return epoch, self.T_0
        if self.T_mult == 1:
            return epoch % self.T_0, self.T_0
        start, length = 0, self.T_0
        while start + length <= epoch:
            start, length = start + length, length * self.T_mult
        return epoch - start, length


_CYCLIC_MODES = {"triangular": "cycle", "triangular2": "cycle", "exp_range": "iterations"}


class CyclicLR(LRScheduler):
    """The cyclical learning-rate policy (stepped once per batch): each group's lr goes linearly from
    ``base_lr`` up to ``max_lr`` over ``step_size_up`` steps and back down over ``step_size_down`` (default
    ``step_size_up``), with the amplitude ``max_lr - base_lr`` scaled by ``scale_fn``: 1 (``"triangular"``),
    halved every cycle (``"triangular2"``: ``1 / 2 ** (cycle - 1)``) or ``gamma ** step`` (``"exp_range"``).
    A custom ``scale_fn(x)`` overrides ``mode`` and is evaluated on the cycle number (counted from 1,
    ``scale_mode="cycle"``) or on the step (``"iterations"``). With ``cycle_momentum`` the momentum (SGD's
    ``momentum``, Adam's ``betas[0]``) moves the other way, from ``max_momentum`` at ``base_lr`` to
    ``base_momentum`` at the peak (same scaling). Values come from the step number ``last_epoch`` (an lr set
    by hand is overwritten). A new schedule (``last_epoch=-1``) sets each group's lr to ``base_lr``; its
    momentum to ``max_momentum`` and the group keys ``max_momentum`` and ``base_momentum``, as PyTorch's.
    The state dict keeps a custom ``scale_fn`` as :class:`LambdaLR` keeps its lambdas."""

    def __init__(self, optimizer: Optimizer, base_lr: float | Sequence[float], max_lr: float | Sequence[float],
                 step_size_up: int = 2000, step_size_down: int | None = None, mode: str = "triangular",
                 gamma: float = 1.0, scale_fn: Callable[[float], float] | None = None, scale_mode: str = "cycle",
                 cycle_momentum: bool = True, base_momentum: float | Sequence[float] = 0.8,
                 max_momentum: float | Sequence[float] = 0.9, last_epoch: int = -1) -> None:
        where = "CyclicLR"
        opt = _check_optimizer(where, optimizer)
        base_lrs = self._numbers(where, "base_lr", opt, base_lr)
        self.max_lrs = self._numbers(where, "max_lr", opt, max_lr)
        _check_count(where, "step_size_up", step_size_up, 1)
        if step_size_down is not None:
            _check_count(where, "step_size_down", step_size_down, 0)
        if scale_fn is None and mode not in _CYCLIC_MODES:
            raise OptimizerError(f"{where}: mode must be one of {sorted(_CYCLIC_MODES)} (or give scale_fn), "
                                 f"got {mode!r}")
        if scale_fn is not None and not callable(scale_fn):
            raise SchedulerTypeError(f"{where}: scale_fn must be a callable x -> scale (or None), got "
                                     f"{type(scale_fn).__name__}")
        if scale_mode not in ("cycle", "iterations"):
            raise OptimizerError(f"{where}: scale_mode must be 'cycle' or 'iterations', got {scale_mode!r}")
        check_number(where, "gamma", gamma)
        check_flag(where, "cycle_momentum", cycle_momentum)
        self.use_beta1 = _uses_beta1(where, opt, cycle_momentum)
        down = step_size_up if step_size_down is None else step_size_down
        self.total_size = float(step_size_up + down)
        self.step_ratio = step_size_up / self.total_size
        self.mode, self.gamma, self.cycle_momentum = mode, gamma, cycle_momentum
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode if scale_fn is not None else _CYCLIC_MODES[mode]
        if last_epoch == -1:
            for group, lr in zip(opt.param_groups, base_lrs):
                group["lr"] = lr
        if cycle_momentum:
            self.base_momentums = self._numbers(where, "base_momentum", opt, base_momentum)
            self.max_momentums = self._numbers(where, "max_momentum", opt, max_momentum)
            for group, high, low in zip(opt.param_groups, self.max_momentums, self.base_momentums):
                if last_epoch == -1:
                    set_momentum(group, high, self.use_beta1)
                    group["max_momentum"] = high
                    group["base_momentum"] = low
        super().__init__(opt, last_epoch)
        self.base_lrs = base_lrs

    @staticmethod
    def _numbers(where: str, name: str, optimizer: Optimizer, value: Any) -> list[float]:
        values = _per_group(where, name, optimizer, value)
        for i, v in enumerate(values):
            check_number(where, f"{name}[{i}]", v)
        return values

    def scale_fn(self, x: float) -> float:
        """The amplitude's scale at ``x`` (a cycle number or a step, per ``scale_mode``)."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return float(1 / (2.0 ** (x - 1)))
        return float(self.gamma ** x)

    def get_lr(self) -> list[float]:
        """The lrs at step ``last_epoch``; sets the groups' momentum too when cycling it."""
        step = self.last_epoch
        cycle = math.floor(1 + step / self.total_size)
        x = 1.0 + step / self.total_size - cycle
        height = x / self.step_ratio if x <= self.step_ratio else (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else step)
        lrs = [base + (peak - base) * height * scale for base, peak in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for group, low, high in zip(self.optimizer.param_groups, self.base_momentums, self.max_momentums):
                set_momentum(group, high - (high - low) * height * scale, self.use_beta1)
        return lrs

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer; a custom ``scale_fn`` as described in the class docstring."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_scale_fn_custom")}
        state["_scale_fn_custom"] = _callable_state(self._scale_fn_custom)
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore a state saved by :meth:`state_dict`; this scheduler's own ``scale_fn`` is kept."""
        self.__dict__.update({k: v for k, v in state_dict.items() if k != "_scale_fn_custom"})
        _restore_callable(self._scale_fn_custom, state_dict.get("_scale_fn_custom"))


class _SchedulerList(LRScheduler):
    """A scheduler made of schedulers of one optimizer (``SequentialLR``, ``ChainedScheduler``): the
    argument checks, and state dicts holding each inner scheduler's under ``"_schedulers"``."""

    _schedulers: list[LRScheduler]

    def _take(self, schedulers: Any, optimizer: Any) -> Optimizer:
        """Check ``schedulers`` (a non-empty sequence of schedulers, none a ``ReduceLROnPlateau``, all of
        ``optimizer``, or of the first one's when ``optimizer`` is None) and keep them; returns the optimizer."""
        where = type(self).__name__
        if isinstance(schedulers, LRScheduler) or not isinstance(schedulers, Iterable):
            raise SchedulerTypeError(f"{where}: schedulers must be a list of learning-rate schedulers, got "
                                     f"{type(schedulers).__name__}")
        items = list(schedulers)
        if not items:
            raise OptimizerError(f"{where}: schedulers must hold at least one scheduler, got an empty "
                                 f"{type(schedulers).__name__}")
        for i, scheduler in enumerate(items):
            if not isinstance(scheduler, LRScheduler):
                raise SchedulerTypeError(f"{where}: schedulers[{i}] must be a learning-rate scheduler, got "
                                         f"{type(scheduler).__name__}")
            if isinstance(scheduler, ReduceLROnPlateau):
                raise OptimizerError(f"{where}: schedulers[{i}] is a ReduceLROnPlateau, which is not supported "
                                     f"(its step needs the metric); expected schedulers stepped by step()")
        opt = items[0].optimizer if optimizer is None else _check_optimizer(where, optimizer)
        for i, scheduler in enumerate(items):
            if scheduler.optimizer is not opt:
                raise OptimizerError(f"{where}: every scheduler must belong to the same optimizer; schedulers[{i}] "
                                     f"({type(scheduler).__name__}) steps another {type(scheduler.optimizer).__name__}"
                                     f" (id {id(scheduler.optimizer):#x}), expected the {type(opt).__name__} "
                                     f"(id {id(opt):#x}) given")
        self._schedulers = items
        self.optimizer = opt
        return opt

    @staticmethod
    def _refuse_epoch(where: str, epoch: Any) -> None:
        if epoch is not None:
            raise SchedulerTypeError(f"{where}: step() takes no epoch (as in PyTorch), got epoch={epoch!r}")

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer, with the inner schedulers' state dicts as ``"_schedulers"``."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [scheduler.state_dict() for scheduler in self._schedulers]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore a state saved by :meth:`state_dict` (into the same inner schedulers)."""
        inner = state_dict.get("_schedulers", [])
        if len(inner) != len(self._schedulers):
            raise OptimizerError(f"{type(self).__name__}.load_state_dict: the state holds {len(inner)} inner "
                                 f"schedulers, expected {len(self._schedulers)}")
        self.__dict__.update({k: v for k, v in state_dict.items() if k != "_schedulers"})
        for scheduler, state in zip(self._schedulers, inner):
            scheduler.load_state_dict(state)


class SequentialLR(_SchedulerList):
    """Run ``schedulers`` one after the other: ``schedulers[i]`` steps the epochs from ``milestones[i - 1]``
    to ``milestones[i]`` (``len(schedulers) - 1`` non-decreasing epochs). At construction the lrs go back to
    the groups' ``initial_lr``, the construction step of every inner scheduler is undone, and only the first
    one's is run again; at each milestone the next scheduler restarts at its epoch 0 (its closed form where
    it has one), from where the previous one left the lrs -- as in PyTorch. ``step()`` takes no epoch. Only
    ``schedulers[0]`` may itself be a ``SequentialLR`` or ``ChainedScheduler`` (PyTorch fails at the milestone
    when a later one is)."""

    def __init__(self, optimizer: Optimizer, schedulers: Sequence[LRScheduler], milestones: Sequence[int],
                 last_epoch: int = -1) -> None:
        where = "SequentialLR"
        opt = self._take(schedulers, _check_optimizer(where, optimizer))
        if isinstance(milestones, (str, bytes)) or not isinstance(milestones, Iterable):
            raise SchedulerTypeError(f"{where}: milestones must be a list of epochs, got {type(milestones).__name__}")
        marks = list(milestones)
        if len(marks) != len(self._schedulers) - 1:
            raise OptimizerError(f"{where}: milestones must have one epoch fewer than there are schedulers "
                                 f"({len(self._schedulers)} schedulers, so {len(self._schedulers) - 1}), got "
                                 f"{len(marks)}: {marks!r}")
        for i, mark in enumerate(marks):
            _check_count(where, f"milestones[{i}]", mark, 0)
            if i and mark < marks[i - 1]:
                raise OptimizerError(f"{where}: milestones must be non-decreasing, got milestones[{i - 1}]="
                                     f"{marks[i - 1]} then milestones[{i}]={mark}")
        for i, scheduler in enumerate(self._schedulers[1:], 1):
            if isinstance(scheduler, _SchedulerList):
                raise OptimizerError(f"{where}: schedulers[{i}] is a {type(scheduler).__name__}, which cannot be "
                                     f"restarted at its milestone; only schedulers[0] may be one")
        self._milestones = marks
        self.last_epoch = last_epoch + 1
        for group in opt.param_groups:
            group["lr"] = group["initial_lr"]
        self.recursive_undo()
        first = self._schedulers[bisect_right(marks, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def recursive_undo(self, sched: LRScheduler | None = None) -> None:
        """Take back the construction step of every scheduler inside ``sched`` (default: this one): each
        plain scheduler's ``last_epoch`` goes down by one."""
        target = self if sched is None else sched
        if isinstance(target, _SchedulerList):
            for inner in target._schedulers:
                self.recursive_undo(inner)
        else:
            target.last_epoch -= 1

    def step(self, epoch: int | None = None) -> None:
        """One epoch on, in the scheduler whose interval holds it (restarting it at its milestone)."""
        self._refuse_epoch("SequentialLR.step", epoch)
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()


class ChainedScheduler(_SchedulerList):
    """Step every scheduler in ``schedulers``, in order, on each ``step()`` (so chained multiplicative
    schedulers multiply their factors). ``optimizer`` defaults to the first scheduler's; all must belong to
    it. Construction changes no lr; ``get_last_lr()`` is the groups' lrs after the last step."""

    def __init__(self, schedulers: Sequence[LRScheduler], optimizer: Optimizer | None = None) -> None:
        opt = self._take(schedulers, optimizer)
        self._last_lr = [group["lr"] for group in opt.param_groups]

    def step(self, epoch: int | None = None) -> None:
        """Step each scheduler once, in order."""
        self._refuse_epoch("ChainedScheduler.step", epoch)
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]
