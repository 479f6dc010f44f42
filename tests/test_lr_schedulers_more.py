"""PolynomialLR, CosineAnnealingWarmRestarts, CyclicLR, SequentialLR and ChainedScheduler against PyTorch's:
each built with the same arguments in both libraries, on SGD with momentum and on Adam with two parameter
groups of different lrs, trained side by side; every step's lrs, momentum (or beta1) and ``get_last_lr()``
are compared, and the parameters at the end (so the cycled momentum is the one the update used).
Also: ``CosineAnnealingWarmRestarts.step(epoch)`` with fractional epochs, ``PolynomialLR.step(epoch)``'s
closed form, state-dict round trips continuing identically, and the argument checks."""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay import optim
from tensorplay.optim import OptimizerError, SchedulerTypeError
from tests.test_optim_schedulers_more import assert_same, optimizers, snapshot

OURS = optim.lr_scheduler
TORCH = torch.optim.lr_scheduler
Build = Callable[[Any, Any], Any]  # (optimizer, the library's lr_scheduler module) -> scheduler


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's step-order and epoch-deprecation warnings
        yield


class Decay:
    """A callable object as ``scale_fn``: its attributes go into the state dict (a lambda's do not)."""

    def __init__(self, rate: float) -> None:
        self.rate = rate

    def __call__(self, x: float) -> float:
        return float(self.rate ** x)


# (id, optimizer kind, steps, build): one build for both libraries, so both get the same arguments
CASES: list[tuple[str, str, int, Build]] = [
    ("poly", "sgd", 10, lambda o, L: L.PolynomialLR(o, total_iters=6, power=2.0)),
    ("poly-sqrt-adam", "adam", 7, lambda o, L: L.PolynomialLR(o, total_iters=4, power=0.5)),
    ("restarts", "sgd", 13, lambda o, L: L.CosineAnnealingWarmRestarts(o, T_0=4)),
    ("restarts-mult2", "sgd", 50, lambda o, L: L.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.001)),
    ("restarts-mult3-adam", "adam", 45, lambda o, L: L.CosineAnnealingWarmRestarts(o, T_0=1, T_mult=3)),
    ("cyclic-triangular", "sgd", 17, lambda o, L: L.CyclicLR(o, 0.01, 0.1, step_size_up=3, step_size_down=2)),
    ("cyclic-triangular2-adam", "adam", 20,
     lambda o, L: L.CyclicLR(o, [0.01, 0.002], [0.1, 0.05], step_size_up=2, mode="triangular2",
                             base_momentum=[0.8, 0.7], max_momentum=[0.95, 0.9])),
    ("cyclic-exp-range", "sgd", 25, lambda o, L: L.CyclicLR(o, 0.01, 0.1, step_size_up=4, mode="exp_range",
                                                            gamma=0.9)),
    ("cyclic-exp-range-adam", "adam", 12, lambda o, L: L.CyclicLR(o, 0.02, 0.2, step_size_up=3, mode="exp_range",
                                                                  gamma=0.8, step_size_down=1)),
    ("cyclic-scale-fn-cycle", "sgd", 15, lambda o, L: L.CyclicLR(o, 0.01, 0.1, step_size_up=2,
                                                                 scale_fn=lambda x: 0.5 ** x)),
    ("cyclic-scale-fn-iterations", "adam", 15,
     lambda o, L: L.CyclicLR(o, 0.01, 0.1, step_size_up=2, scale_fn=Decay(0.9), scale_mode="iterations")),
    ("cyclic-no-momentum", "adam", 16, lambda o, L: L.CyclicLR(o, 0.01, 0.1, step_size_up=2, step_size_down=5,
                                                               cycle_momentum=False)),
    ("cyclic-sawtooth", "sgd", 10, lambda o, L: L.CyclicLR(o, 0.01, 0.1, step_size_up=3, step_size_down=0)),
    ("sequential", "sgd", 14,
     lambda o, L: L.SequentialLR(o, [L.LinearLR(o, 0.2, total_iters=3), L.ExponentialLR(o, 0.8),
                                     L.CosineAnnealingLR(o, T_max=5)], milestones=[3, 7])),
    ("sequential-restarts-adam", "adam", 16,
     lambda o, L: L.SequentialLR(o, [L.ConstantLR(o, factor=0.5, total_iters=2),
                                     L.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2)], milestones=[4])),
    ("sequential-cyclic", "sgd", 12,
     lambda o, L: L.SequentialLR(o, [L.LinearLR(o, 0.5, total_iters=2), L.CyclicLR(o, 0.01, 0.1, step_size_up=2)],
                                 milestones=[3])),
    ("sequential-poly-repeated-milestone", "sgd", 9,
     lambda o, L: L.SequentialLR(o, [L.StepLR(o, 1, 0.5), L.ExponentialLR(o, 0.9), L.PolynomialLR(o, 4)],
                                 milestones=[2, 2])),
    ("sequential-of-chained", "adam", 10,
     lambda o, L: L.SequentialLR(o, [L.ChainedScheduler([L.ExponentialLR(o, 0.9), L.StepLR(o, 2, 0.5)]),
                                     L.PolynomialLR(o, 4)], milestones=[5])),
    ("chained-multiplicative", "sgd", 10,
     lambda o, L: L.ChainedScheduler([L.ExponentialLR(o, 0.9),
                                      L.MultiplicativeLR(o, lambda k: 0.95 if k % 2 else 0.8)])),
    ("chained-constant-exponential-adam", "adam", 8,
     lambda o, L: L.ChainedScheduler([L.ConstantLR(o, factor=0.5, total_iters=3), L.ExponentialLR(o, gamma=0.9)],
                                     optimizer=o)),
    ("chained-cyclic-poly", "sgd", 9,
     lambda o, L: L.ChainedScheduler([L.CyclicLR(o, 0.01, 0.1, step_size_up=2), L.PolynomialLR(o, 5)])),
]
IDS = [case[0] for case in CASES]


def params(opt: Any) -> list[np.ndarray[Any, Any]]:
    return [np.array(p.detach().numpy(), dtype=np.float64) for group in opt.param_groups for p in group["params"]]


def train(opt: Any, sched: Any, steps: int) -> list[list[float]]:
    """``steps`` of loss ``sum(p * p)`` -> backward -> optimizer step -> scheduler step; the snapshots."""
    seen = [snapshot(opt, sched)]
    for _ in range(steps):
        opt.zero_grad()
        for group in opt.param_groups:
            for p in group["params"]:
                (p * p).sum().backward()
        opt.step()
        sched.step()
        seen.append(snapshot(opt, sched))
    return seen


@pytest.mark.parametrize("name,kind,steps,build", CASES, ids=IDS)
def test_every_step_and_the_training_match_pytorch(name: str, kind: str, steps: int, build: Build) -> None:
    opt, opt_t = optimizers(kind)
    assert_same(train(opt, build(opt, OURS), steps), train(opt_t, build(opt_t, TORCH), steps))
    for ours, theirs in zip(params(opt), params(opt_t)):
        np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("name,kind,steps,build", CASES, ids=IDS)
def test_state_dict_round_trip_continues_identically(name: str, kind: str, steps: int, build: Build) -> None:
    opt, _ = optimizers(kind)
    sched = build(opt, OURS)
    train(opt, sched, steps // 2 + 1)
    saved_opt, saved = copy.deepcopy(opt.state_dict()), copy.deepcopy(sched.state_dict())
    fresh_opt, _ = optimizers(kind)
    fresh = build(fresh_opt, OURS)
    fresh_opt.load_state_dict(saved_opt)
    fresh.load_state_dict(saved)
    rest = steps - steps // 2 + 2
    assert_same(train(fresh_opt, fresh, rest), train(opt, sched, rest))


def test_cyclic_state_dict_keeps_a_callable_objects_attributes() -> None:
    opt, _ = optimizers()
    sched = OURS.CyclicLR(opt, 0.01, 0.1, step_size_up=2, scale_fn=Decay(0.5))
    train(opt, sched, 3)
    state = copy.deepcopy(sched.state_dict())
    assert state["_scale_fn_custom"] == {"rate": 0.5}
    fresh_opt, _ = optimizers()
    decay = Decay(0.9)
    fresh = OURS.CyclicLR(fresh_opt, 0.01, 0.1, step_size_up=2, scale_fn=decay)
    fresh.load_state_dict(state)
    fresh_opt.load_state_dict(opt.state_dict())
    assert decay.rate == 0.5
    assert_same(train(fresh_opt, fresh, 6), train(opt, sched, 6))
    lambda_state = OURS.CyclicLR(opt, 0.01, 0.1, scale_fn=lambda x: 1.0).state_dict()
    assert lambda_state["_scale_fn_custom"] is None  # a lambda is not saved, as in PyTorch


def restarts_trace(opt: Any, sched: Any, epochs: list[float | None]) -> list[list[float]]:
    seen = []
    for epoch in epochs:
        opt.step()
        sched.step(epoch)
        seen.append(snapshot(opt, sched) + [float(sched.T_cur), float(sched.T_i), float(sched.last_epoch)])
    return seen


@pytest.mark.parametrize("t_mult", [1, 2])
def test_warm_restarts_fractional_epochs_match_pytorch(t_mult: int) -> None:
    epochs: list[float | None] = [0.5, 1.25, None, 2.9, 3.0, 3.5, None, None, 7.2, 8.99, 9.0, 10.3, None, 22.7,
                                  2.0, None, 45.0, 100.5, None, 0, 3, 8.5, None, 20.25, None]
    opt, opt_t = optimizers("adam")
    ours = OURS.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=t_mult, eta_min=0.002)
    theirs = TORCH.CosineAnnealingWarmRestarts(opt_t, T_0=3, T_mult=t_mult, eta_min=0.002)
    assert_same(restarts_trace(opt, ours, epochs), restarts_trace(opt_t, theirs, epochs))


@pytest.mark.parametrize("t_0,t_mult", [(1, 10), (1, 3), (3, 3), (2, 5), (1, 2)])
def test_warm_restarts_step_epoch_lands_where_stepping_does(t_0: int, t_mult: int) -> None:
    """``step(epoch)`` for every integer epoch gives the lrs that ``step()`` reaches there (torch's own
    ``step()`` sequence); PyTorch's ``step(epoch)`` misses some restarts: T_0=1, T_mult=10 at epoch 111,
    T_0=1, T_mult=3 at 121."""
    _, opt_t = optimizers()
    stepped_t = TORCH.CosineAnnealingWarmRestarts(opt_t, T_0=t_0, T_mult=t_mult, eta_min=0.001)
    opt, _ = optimizers()
    jumped = OURS.CosineAnnealingWarmRestarts(opt, T_0=t_0, T_mult=t_mult, eta_min=0.001)
    for epoch in range(1, 130):
        stepped_t.step()
        jumped.step(epoch)
        assert jumped.get_last_lr() == pytest.approx(stepped_t.get_last_lr(), rel=1e-12), epoch
        assert (jumped.T_cur, jumped.T_i) == (stepped_t.T_cur, stepped_t.T_i), epoch


def test_polynomial_step_epoch_is_the_closed_form_as_pytorch() -> None:
    opt, opt_t = optimizers()
    ours, theirs = OURS.PolynomialLR(opt, total_iters=5, power=1.5), TORCH.PolynomialLR(opt_t, total_iters=5, power=1.5)
    for epoch in [2, 4, 1, 7, 5, 3]:
        ours.step(epoch)
        theirs.step(epoch)
        assert_same([snapshot(opt, ours)], [snapshot(opt_t, theirs)])
    expected = [lr * (1 - 3 / 5) ** 1.5 for lr in (0.1, 0.03)]
    assert ours.get_last_lr() == pytest.approx(expected, rel=1e-12)


def test_polynomial_chained_form_carries_a_hand_set_lr_as_pytorch() -> None:
    seen = []
    for opt, lib in zip(optimizers(), (OURS, TORCH)):
        sched = lib.PolynomialLR(opt, total_iters=6, power=2.0)
        trace = []
        for i in range(8):
            opt.step()
            sched.step()
            if i == 2:
                opt.param_groups[0]["lr"] = 0.5
            trace.append(snapshot(opt, sched))
        seen.append(trace)
    assert_same(seen[0], seen[1])


def test_new_schedulers_are_exported_where_pytorch_has_them() -> None:
    for name in ["PolynomialLR", "CosineAnnealingWarmRestarts", "CyclicLR", "SequentialLR", "ChainedScheduler"]:
        assert getattr(tp.optim, name) is getattr(OURS, name)
        assert name in tp.optim.__all__ and name in OURS.__all__
        assert issubclass(getattr(OURS, name), OURS.LRScheduler)


def _other_optimizer_sequential(o: Any, L: Any) -> Any:
    other = type(o)([g["params"] for g in o.param_groups][0], lr=0.1)
    return L.SequentialLR(o, [L.ExponentialLR(o, 0.9), L.ExponentialLR(other, 0.9)], milestones=[3])


def _other_optimizer_chained(o: Any, L: Any) -> Any:
    other = type(o)([g["params"] for g in o.param_groups][1], lr=0.1)
    return L.ChainedScheduler([L.ExponentialLR(o, 0.9)], optimizer=other)


def _no_momentum_optimizer(o: Any, L: Any) -> Any:
    lib = optim if L is OURS else torch.optim
    return L.CyclicLR(lib.Adagrad([g["params"][0] for g in o.param_groups]), 0.01, 0.1)


# (id, build, error class, words the message must hold, torch rejects it too)
ERRORS: list[tuple[str, Build, type[Exception], list[str], bool]] = [
    ("sequential-milestones-length", lambda o, L: L.SequentialLR(o, [L.ExponentialLR(o, 0.9), L.StepLR(o, 2)],
                                                                  milestones=[2, 4]),
     OptimizerError, ["SequentialLR", "milestones", "2 schedulers", "got 2"], True),
    ("sequential-other-optimizer", _other_optimizer_sequential, OptimizerError,
     ["SequentialLR", "schedulers[1]", "ExponentialLR", "another", "same optimizer"], True),
    ("sequential-empty", lambda o, L: L.SequentialLR(o, [], milestones=[]), OptimizerError,
     ["SequentialLR", "schedulers", "at least one", "empty"], True),
    ("sequential-plateau", lambda o, L: L.SequentialLR(o, [L.ReduceLROnPlateau(o)], milestones=[]),
     OptimizerError, ["SequentialLR", "schedulers[0]", "ReduceLROnPlateau"], True),
    ("sequential-not-a-scheduler", lambda o, L: L.SequentialLR(o, [L.ExponentialLR(o, 0.9), "cosine"], [3]),
     SchedulerTypeError, ["SequentialLR", "schedulers[1]", "str"], True),
    ("sequential-not-an-optimizer", lambda o, L: L.SequentialLR("sgd", [L.ExponentialLR(o, 0.9)], []),
     SchedulerTypeError, ["SequentialLR", "optimizer", "str"], True),
    ("sequential-milestone-not-int", lambda o, L: L.SequentialLR(o, [L.ExponentialLR(o, 0.9), L.StepLR(o, 2)],
                                                                  milestones=["3"]),
     OptimizerError, ["SequentialLR", "milestones[0]", "integer", "'3'"], False),
    ("sequential-milestones-decreasing",
     lambda o, L: L.SequentialLR(o, [L.ExponentialLR(o, 0.9), L.StepLR(o, 2), L.PolynomialLR(o)], [5, 2]),
     OptimizerError, ["SequentialLR", "non-decreasing", "milestones[0]=5", "milestones[1]=2"], False),
    ("sequential-later-chained",
     lambda o, L: L.SequentialLR(o, [L.ExponentialLR(o, 0.9), L.ChainedScheduler([L.StepLR(o, 2)])], [2]),
     OptimizerError, ["SequentialLR", "schedulers[1]", "ChainedScheduler", "only schedulers[0]"], False),
    ("chained-empty", lambda o, L: L.ChainedScheduler([]), OptimizerError,
     ["ChainedScheduler", "at least one"], True),
    ("chained-other-optimizer", _other_optimizer_chained, OptimizerError,
     ["ChainedScheduler", "schedulers[0]", "another", "same optimizer"], True),
    ("chained-plateau", lambda o, L: L.ChainedScheduler([L.StepLR(o, 2), L.ReduceLROnPlateau(o)]),
     OptimizerError, ["ChainedScheduler", "schedulers[1]", "ReduceLROnPlateau"], True),
    ("chained-not-a-list", lambda o, L: L.ChainedScheduler(L.StepLR(o, 2)), SchedulerTypeError,
     ["ChainedScheduler", "schedulers", "list", "StepLR"], True),
    ("cyclic-no-momentum", _no_momentum_optimizer, OptimizerError,
     ["CyclicLR", "cycle_momentum=True", "momentum", "betas", "Adagrad"], True),
    ("cyclic-mode", lambda o, L: L.CyclicLR(o, 0.01, 0.1, mode="triangle"), OptimizerError,
     ["CyclicLR", "mode", "'exp_range'", "'triangle'"], True),
    ("cyclic-scale-fn", lambda o, L: L.CyclicLR(o, 0.01, 0.1, scale_fn=0.5), SchedulerTypeError,
     ["CyclicLR", "scale_fn", "callable", "float"], False),
    ("cyclic-scale-mode", lambda o, L: L.CyclicLR(o, 0.01, 0.1, scale_fn=abs, scale_mode="epochs"),
     OptimizerError, ["CyclicLR", "scale_mode", "'iterations'", "'epochs'"], False),
    ("cyclic-base-lr-length", lambda o, L: L.CyclicLR(o, [0.01, 0.02, 0.03], 0.1), OptimizerError,
     ["CyclicLR", "base_lr", "(2)", "got 3"], True),
    ("cyclic-max-lr", lambda o, L: L.CyclicLR(o, 0.01, "high"), OptimizerError,
     ["CyclicLR", "max_lr[0]", "number", "str"], False),
    ("cyclic-step-size-up", lambda o, L: L.CyclicLR(o, 0.01, 0.1, step_size_up=0), OptimizerError,
     ["CyclicLR", "step_size_up", ">= 1", "0"], False),
    ("cyclic-momentum-value", lambda o, L: L.CyclicLR(o, 0.01, 0.1, base_momentum=[0.8, None]), OptimizerError,
     ["CyclicLR", "base_momentum[1]", "number", "NoneType"], False),
    ("restarts-t0", lambda o, L: L.CosineAnnealingWarmRestarts(o, T_0=0), OptimizerError,
     ["CosineAnnealingWarmRestarts", "T_0", ">= 1", "0"], True),
    ("restarts-t0-float", lambda o, L: L.CosineAnnealingWarmRestarts(o, T_0=2.5), OptimizerError,
     ["CosineAnnealingWarmRestarts", "T_0", "integer", "2.5"], True),
    ("restarts-t-mult", lambda o, L: L.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=0), OptimizerError,
     ["CosineAnnealingWarmRestarts", "T_mult", ">= 1", "0"], True),
    ("restarts-eta-min", lambda o, L: L.CosineAnnealingWarmRestarts(o, T_0=2, eta_min="0"), OptimizerError,
     ["CosineAnnealingWarmRestarts", "eta_min", "number", "str"], True),
    ("restarts-negative-epoch", lambda o, L: L.CosineAnnealingWarmRestarts(o, T_0=2).step(-1), OptimizerError,
     ["CosineAnnealingWarmRestarts.step", "epoch", ">= 0", "-1"], True),
    ("restarts-epoch-type", lambda o, L: L.CosineAnnealingWarmRestarts(o, T_0=2).step("3"), SchedulerTypeError,
     ["CosineAnnealingWarmRestarts.step", "epoch", "number", "str"], True),
    ("polynomial-total-iters", lambda o, L: L.PolynomialLR(o, total_iters=0), OptimizerError,
     ["PolynomialLR", "total_iters", ">= 1", "0"], False),
    ("polynomial-power", lambda o, L: L.PolynomialLR(o, power=-1.0), OptimizerError,
     ["PolynomialLR", "power", ">= 0", "-1.0"], False),
]


@pytest.mark.parametrize("name,build,error,words,torch_rejects", ERRORS, ids=[e[0] for e in ERRORS])
def test_bad_arguments_name_the_scheduler_argument_and_value(name: str, build: Build, error: type[Exception],
                                                             words: list[str], torch_rejects: bool) -> None:
    opt, opt_t = optimizers()
    with pytest.raises(error) as caught:
        build(opt, OURS)
    for word in words:
        assert word in str(caught.value), (word, str(caught.value))
    if torch_rejects:
        with pytest.raises((ValueError, TypeError, KeyError)):
            build(opt_t, TORCH)


@pytest.mark.parametrize("which", ["SequentialLR", "ChainedScheduler"])
def test_composite_step_takes_no_epoch(which: str) -> None:
    opt, _ = optimizers()
    inner = [OURS.ExponentialLR(opt, 0.9)]
    sched = OURS.SequentialLR(opt, inner, []) if which == "SequentialLR" else OURS.ChainedScheduler(inner)
    with pytest.raises(SchedulerTypeError, match=f"{which}.step: step\\(\\) takes no epoch .* got epoch=3"):
        sched.step(3)


def test_pytorch_fails_at_the_milestone_of_a_later_chained_scheduler() -> None:
    """Why SequentialLR refuses a ChainedScheduler after schedulers[0]: PyTorch takes it and fails when the
    milestone comes."""
    _, o = optimizers()
    sched = TORCH.SequentialLR(o, [TORCH.ExponentialLR(o, 0.9), TORCH.ChainedScheduler([TORCH.StepLR(o, 2)])], [2])
    sched.step()
    with pytest.raises(NotImplementedError):
        sched.step()


def test_cyclic_momentum_cycles_between_the_bounds() -> None:
    """At the start of a cycle the momentum is max_momentum, at the peak base_momentum (both libraries)."""
    for opt, lib in zip(optimizers(), (OURS, TORCH)):
        sched = lib.CyclicLR(opt, 0.01, 0.1, step_size_up=2, base_momentum=0.7, max_momentum=0.9)
        momenta = [opt.param_groups[0]["momentum"]]
        for _ in range(4):
            opt.step()
            sched.step()
            momenta.append(opt.param_groups[0]["momentum"])
        assert momenta == pytest.approx([0.9, 0.8, 0.7, 0.8, 0.9], rel=1e-12)
        assert opt.param_groups[1]["base_momentum"] == 0.7 and opt.param_groups[1]["max_momentum"] == 0.9
    assert math.isclose(sched.get_last_lr()[0], 0.01, rel_tol=1e-12)


RESUMED: list[tuple[str, str, Build]] = [
    ("poly", "sgd", lambda o, L: L.PolynomialLR(o, total_iters=6, power=2.0, last_epoch=3)),
    ("restarts-mult2", "sgd", lambda o, L: L.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, last_epoch=5)),
    ("cyclic-adam", "adam", lambda o, L: L.CyclicLR(o, 0.01, 0.1, step_size_up=3, mode="triangular2", last_epoch=4)),
    ("cyclic-sgd", "sgd", lambda o, L: L.CyclicLR(o, 0.01, 0.1, step_size_up=2, last_epoch=7)),
]


@pytest.mark.parametrize("name,kind,build", RESUMED, ids=[r[0] for r in RESUMED])
def test_resume_with_last_epoch_matches_pytorch(name: str, kind: str, build: Build) -> None:
    opt, opt_t = optimizers(kind)
    for group, group_t, initial in zip(opt.param_groups, opt_t.param_groups, (0.2, 0.05)):
        group["initial_lr"] = group_t["initial_lr"] = initial
    assert_same(train(opt, build(opt, OURS), 12), train(opt_t, build(opt_t, TORCH), 12))
