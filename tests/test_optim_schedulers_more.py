"""MultiStepLR, ExponentialLR, LambdaLR, MultiplicativeLR, LinearLR, ConstantLR, OneCycleLR and
ReduceLROnPlateau against PyTorch's: every group's lr (and OneCycleLR's momentum / beta1) at every step, with
two parameter groups of different lrs, the chained form (an lr set by hand mid-schedule), resuming with
``last_epoch``, ``step(epoch)``'s closed form, state-dict round trips, the argument checks, and a compiled
training step following the lr each step without recompiling."""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay import nn, optim
from tensorplay.optim import OptimizerError, SchedulerTypeError

TL = torch.optim.lr_scheduler
Make = Callable[[Any, int], Any]
Make1 = Callable[[Any], Any]
LRS = (0.1, 0.03)


class Warmup:
    """A callable object: its attributes are saved in the state dict (a lambda's are not)."""

    def __init__(self, scale: float) -> None:
        self.scale = scale

    def __call__(self, epoch: int) -> float:
        return self.scale / (1 + epoch)


# (id, ours, torch's): each maker takes (optimizer, last_epoch); both libraries get the same arguments
SCHEDULERS: list[tuple[str, Make, Make]] = [
    ("multistep", lambda o, e: optim.MultiStepLR(o, [3, 7, 7, 12], gamma=0.5, last_epoch=e),
     lambda o, e: TL.MultiStepLR(o, [3, 7, 7, 12], gamma=0.5, last_epoch=e)),
    ("multistep-unsorted", lambda o, e: optim.lr_scheduler.MultiStepLR(o, [9, 2, 5], gamma=0.3, last_epoch=e),
     lambda o, e: TL.MultiStepLR(o, [9, 2, 5], gamma=0.3, last_epoch=e)),
    ("exponential", lambda o, e: optim.ExponentialLR(o, gamma=0.87, last_epoch=e),
     lambda o, e: TL.ExponentialLR(o, gamma=0.87, last_epoch=e)),
    ("lambda", lambda o, e: optim.LambdaLR(o, [lambda k: 0.9 ** k, lambda k: 1.0 / (1 + k)], last_epoch=e),
     lambda o, e: TL.LambdaLR(o, [lambda k: 0.9 ** k, lambda k: 1.0 / (1 + k)], last_epoch=e)),
    ("multiplicative", lambda o, e: optim.MultiplicativeLR(o, lambda k: 0.95 if k % 2 else 0.8, last_epoch=e),
     lambda o, e: TL.MultiplicativeLR(o, lambda k: 0.95 if k % 2 else 0.8, last_epoch=e)),
    ("linear", lambda o, e: optim.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=8, last_epoch=e),
     lambda o, e: TL.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=8, last_epoch=e)),
    ("linear-down", lambda o, e: optim.LinearLR(o, start_factor=1.0, end_factor=0.0, total_iters=5, last_epoch=e),
     lambda o, e: TL.LinearLR(o, start_factor=1.0, end_factor=0.0, total_iters=5, last_epoch=e)),
    ("constant", lambda o, e: optim.ConstantLR(o, factor=0.4, total_iters=6, last_epoch=e),
     lambda o, e: TL.ConstantLR(o, factor=0.4, total_iters=6, last_epoch=e)),
]
IDS = [s[0] for s in SCHEDULERS]


def optimizers(kind: str = "sgd", lrs: tuple[float, ...] = LRS) -> tuple[Any, Any]:
    """A tensorplay and a torch optimizer over the same values, one parameter group per lr."""
    values = [np.arange(3, dtype=np.float32) + i for i in range(len(lrs))]
    ours: Any
    theirs: Any
    if kind == "sgd":
        ours = optim.SGD([{"params": [nn.Parameter(v.copy())], "lr": lr} for v, lr in zip(values, lrs)], momentum=0.9)
        theirs = torch.optim.SGD([{"params": [torch.nn.Parameter(torch.tensor(v))], "lr": lr}
                                  for v, lr in zip(values, lrs)], momentum=0.9)
    else:
        ours = optim.Adam([{"params": [nn.Parameter(v.copy())], "lr": lr} for v, lr in zip(values, lrs)])
        theirs = torch.optim.Adam([{"params": [torch.nn.Parameter(torch.tensor(v))], "lr": lr}
                                   for v, lr in zip(values, lrs)])
    return ours, theirs


def snapshot(opt: Any, sched: Any) -> list[float]:
    """Each group's lr, momentum (SGD) or beta1 (Adam), then the scheduler's last lrs."""
    out = []
    for group in opt.param_groups:
        out += [float(group["lr"]), float(group["momentum"] if "momentum" in group else group["betas"][0])]
    return out + [float(v) for v in sched.get_last_lr()]


def run(opt: Any, sched: Any, steps: int, set_lr_at: dict[int, float] | None = None) -> list[list[float]]:
    seen = [snapshot(opt, sched)]
    for i in range(steps):
        opt.step()
        sched.step()
        if set_lr_at and i in set_lr_at:
            for group in opt.param_groups:
                group["lr"] = set_lr_at[i]
        seen.append(snapshot(opt, sched))
    return seen


def assert_same(ours: list[list[float]], theirs: list[list[float]]) -> None:
    assert len(ours) == len(theirs)
    for step, (a, b) in enumerate(zip(ours, theirs)):
        assert len(a) == len(b), step
        for i, (x, y) in enumerate(zip(a, b)):
            assert math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-300), f"step {step}, entry {i}: {x} vs torch {y}"


@pytest.mark.parametrize("name,ours,theirs", SCHEDULERS, ids=IDS)
def test_every_step_matches_pytorch(name: str, ours: Make, theirs: Make) -> None:
    opt, opt_t = optimizers()
    assert_same(run(opt, ours(opt, -1), 25), run(opt_t, theirs(opt_t, -1), 25))


@pytest.mark.parametrize("name,ours,theirs", SCHEDULERS, ids=IDS)
def test_lr_set_by_hand_mid_schedule_carries_on_as_pytorch(name: str, ours: Make, theirs: Make) -> None:
    opt, opt_t = optimizers()
    at = {2: 0.5, 6: 0.02, 11: 0.3}
    assert_same(run(opt, ours(opt, -1), 25, at), run(opt_t, theirs(opt_t, -1), 25, at))


@pytest.mark.parametrize("last_epoch", [0, 3, 7, 12])
@pytest.mark.parametrize("name,ours,theirs", SCHEDULERS, ids=IDS)
def test_resume_with_last_epoch_matches_pytorch(name: str, ours: Make, theirs: Make, last_epoch: int) -> None:
    opt, opt_t = optimizers()
    for group, group_t, initial in zip(opt.param_groups, opt_t.param_groups, (0.2, 0.05)):
        group["initial_lr"] = group_t["initial_lr"] = initial
    assert_same(run(opt, ours(opt, last_epoch), 15), run(opt_t, theirs(opt_t, last_epoch), 15))


@pytest.mark.parametrize("name,ours,theirs", SCHEDULERS, ids=IDS)
def test_state_dict_round_trip_continues_as_pytorch(name: str, ours: Make, theirs: Make) -> None:
    results = []
    for opt, make in zip(optimizers(), (ours, theirs)):
        sched = make(opt, -1)
        run(opt, sched, 7, {2: 0.4})
        opt_state, sched_state = opt.state_dict(), sched.state_dict()
        fresh_opt = type(opt)([{"params": g["params"], "lr": 1.0} for g in opt.param_groups], momentum=0.9)
        fresh_opt.load_state_dict(opt_state)
        fresh = make(fresh_opt, -1)
        fresh.load_state_dict(sched_state)
        fresh_opt.load_state_dict(opt_state)  # the construction step above set lr; the checkpoint's wins
        results.append(run(fresh_opt, fresh, 18))
    assert_same(results[0], results[1])


@pytest.mark.parametrize("name,ours,theirs", SCHEDULERS, ids=IDS)
def test_step_with_epoch_matches_pytorch(name: str, ours: Make, theirs: Make) -> None:
    results = []
    for opt, make in zip(optimizers(), (ours, theirs)):
        sched = make(opt, -1)
        seen = []
        for epoch in (1, 2, 7, 3, 12, 25, 6):
            opt.step()
            opt.param_groups[0]["lr"] = 0.7  # the closed form, where there is one, ignores the current lr
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                sched.step(epoch)
            assert any("epoch parameter" in str(w.message) for w in caught), name
            seen.append(snapshot(opt, sched) + [sched.last_epoch])
        results.append(seen)
    assert_same(results[0], results[1])


def test_lambda_state_dict_saves_callable_objects_not_functions_as_pytorch() -> None:
    states = []
    for opt, lib in zip(optimizers(), (optim, TL)):
        sched = lib.LambdaLR(opt, [Warmup(2.0), lambda k: 0.5 ** k])
        sched.lr_lambdas[0].scale = 3.0
        state = sched.state_dict()
        states.append(state["lr_lambdas"])
        target = lib.LambdaLR(opt, [Warmup(1.0), lambda k: 1.0])
        target.load_state_dict(state)
        assert target.lr_lambdas[0].scale == 3.0
        assert target.lr_lambdas[1](4) == 1.0  # a function is not restored: the scheduler's own is kept
    assert states[0] == states[1] == [{"scale": 3.0}, None]


def bad(value: Any) -> Any:
    """A deliberately wrong argument (typed ``Any`` so that the type checker lets the test pass it)."""
    return value


# ---- OneCycleLR ------------------------------------------------------------------------------------------

ONE_CYCLE: list[dict[str, Any]] = [
    {"max_lr": [1.0, 0.4], "total_steps": 25},
    {"max_lr": 0.5, "epochs": 5, "steps_per_epoch": 5, "anneal_strategy": "linear", "pct_start": 0.4},
    {"max_lr": [1.0, 0.4], "total_steps": 25, "three_phase": True, "div_factor": 10.0, "final_div_factor": 50.0},
    {"max_lr": 0.8, "total_steps": 25, "three_phase": True, "anneal_strategy": "linear",
     "base_momentum": [0.7, 0.8], "max_momentum": 0.97},
    {"max_lr": [1.0, 0.4], "total_steps": 25, "cycle_momentum": False},
]


@pytest.mark.parametrize("kind", ["sgd", "adam"])
@pytest.mark.parametrize("kwargs", ONE_CYCLE, ids=range(len(ONE_CYCLE)))
def test_one_cycle_lr_and_momentum_match_pytorch(kwargs: dict[str, Any], kind: str) -> None:
    opt, opt_t = optimizers(kind)
    ours, theirs = optim.OneCycleLR(opt, **kwargs), TL.OneCycleLR(opt_t, **kwargs)
    seen, seen_t = run(opt, ours, 25), run(opt_t, theirs, 25)  # step 25 = total_steps is still allowed
    assert_same(seen, seen_t)
    for group, group_t in zip(opt.param_groups, opt_t.param_groups):
        for key in ("initial_lr", "max_lr", "min_lr"):
            assert math.isclose(group[key], group_t[key], rel_tol=1e-12)
    with pytest.raises(ValueError):
        theirs.step()
    with pytest.raises(OptimizerError, match=r"OneCycleLR: stepped 26 times, more than total_steps=25"):
        ours.step()


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_one_cycle_resume_and_state_dict_match_pytorch(kind: str) -> None:
    kwargs: dict[str, Any] = {"max_lr": [1.0, 0.4], "total_steps": 25, "three_phase": True}
    results = []
    for opt, lib in zip(optimizers(kind), (optim, TL)):
        sched = lib.OneCycleLR(opt, **kwargs)
        run(opt, sched, 9)
        state = sched.state_dict()
        resumed = lib.OneCycleLR(opt, **kwargs, last_epoch=sched.last_epoch)  # groups keep max_lr, ...
        part = run(opt, resumed, 6)
        loaded = lib.OneCycleLR(opt, **kwargs)
        loaded.load_state_dict(state)
        results.append(part + run(opt, loaded, 10))
    assert_same(results[0], results[1])


def test_one_cycle_resume_without_its_group_keys_names_them() -> None:
    opt, _ = optimizers()
    for group in opt.param_groups:
        group["initial_lr"] = 0.1
    with pytest.raises(OptimizerError, match=r"needs \['max_lr', 'min_lr', 'max_momentum', 'base_momentum'\] "
                                             r"in param_groups\[0\]"):
        optim.OneCycleLR(opt, max_lr=1.0, total_steps=10, last_epoch=3)


# ---- ReduceLROnPlateau -----------------------------------------------------------------------------------

METRICS = [5.0, 4.0, 4.0, 3.9999, 4.1, 4.2, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 2.0, 2.5, 2.5, 2.5, 2.5,
           2.5, 2.5, 2.5, 2.5, 2.5, 2.5, 2.5, 2.5, 2.5, 2.5, 2.5]
PLATEAU: list[dict[str, Any]] = [
    {"patience": 1, "factor": 0.5},
    {"patience": 2, "cooldown": 2, "factor": 0.3, "min_lr": [0.01, 0.004]},
    {"patience": 0, "cooldown": 1, "factor": 0.1, "min_lr": 1e-3, "threshold_mode": "abs", "threshold": 0.05},
    {"mode": "max", "patience": 1, "factor": 0.5, "threshold": 0.01},
    {"mode": "max", "patience": 0, "threshold_mode": "abs", "threshold": 0.5, "cooldown": 3, "min_lr": 0.02,
     "factor": 0.5},
    {"patience": 0, "factor": 0.9, "eps": 5e-3, "min_lr": 0.001},  # changes below eps are skipped
]


@pytest.mark.parametrize("kwargs", PLATEAU, ids=range(len(PLATEAU)))
def test_reduce_on_plateau_matches_pytorch(kwargs: dict[str, Any]) -> None:
    results, reductions = [], 0
    for opt, lib in zip(optimizers(), (optim, TL)):
        sched = lib.ReduceLROnPlateau(opt, **kwargs)
        seen = [snapshot(opt, sched)]
        for i, metric in enumerate(METRICS):
            opt.step()
            sched.step(metric if i % 2 else torch.tensor(metric) if lib is TL else tp.tensor(metric))
            if i == 14:
                opt.param_groups[1]["lr"] = 0.05  # set by hand: reductions go on from it
            seen.append(snapshot(opt, sched) + [sched.num_bad_epochs, sched.cooldown_counter, sched.best,
                                                sched.last_epoch])
        results.append(seen)
        reductions = sum(a[0] != b[0] for a, b in zip(seen, seen[1:]))
    assert reductions >= 2  # the sequence does reduce (and, with min_lr, reaches the floor)
    assert_same(results[0], results[1])


def test_reduce_on_plateau_state_dict_round_trip_matches_pytorch() -> None:
    kwargs: dict[str, Any] = {"patience": 1, "cooldown": 2, "factor": 0.5, "min_lr": [0.01, 0.001]}
    results = []
    for opt, lib in zip(optimizers(), (optim, TL)):
        sched = lib.ReduceLROnPlateau(opt, **kwargs)
        for metric in METRICS[:9]:
            sched.step(metric)
        state = copy.deepcopy(sched.state_dict())
        fresh = lib.ReduceLROnPlateau(opt, mode="max", patience=5)
        fresh.load_state_dict(state)
        seen = []
        for metric in METRICS[9:]:
            fresh.step(metric)
            seen.append(snapshot(opt, fresh) + [fresh.num_bad_epochs, fresh.cooldown_counter, fresh.best])
        results.append(seen)
    assert_same(results[0], results[1])


# ---- argument checks -------------------------------------------------------------------------------------

@pytest.mark.parametrize("make,message", [
    (lambda: optim.ExponentialLR(bad("sgd"), 0.5), r"ExponentialLR: argument 'optimizer' must be a "
                                              r"tensorplay.optim.Optimizer, got str"),
    (lambda: optim.StepLR(bad(3), 2), r"StepLR: argument 'optimizer' .* got int"),
    (lambda: optim.LambdaLR(bad(None), lambda k: 1.0), r"LambdaLR: argument 'optimizer' .* got NoneType"),
    (lambda: optim.OneCycleLR(bad([1.0]), 1.0, total_steps=3), r"OneCycleLR: argument 'optimizer' .* got list"),
    (lambda: optim.ReduceLROnPlateau(bad(torch.optim.SGD([torch.zeros(1, requires_grad=True)])), "min"),
     r"ReduceLROnPlateau: argument 'optimizer' .* got SGD"),
    (lambda: optim.LambdaLR(optimizers()[0], [lambda k: 1.0, bad(0.5)]), r"LambdaLR: lr_lambda\[1\] must be a callable"),
    (lambda: optim.MultiplicativeLR(optimizers()[0], bad(0.9)), r"MultiplicativeLR: lr_lambda\[0\] must be a callable"),
])
def test_wrong_kinds_of_argument_are_tensorplay_type_errors(make: Callable[[], Any], message: str) -> None:
    with pytest.raises(SchedulerTypeError, match=message) as info:
        make()
    assert isinstance(info.value, TypeError) and isinstance(info.value, tp.errors.TensorplayError)


def test_reduce_on_plateau_refuses_a_metric_that_is_not_a_number() -> None:
    sched = optim.ReduceLROnPlateau(optimizers()[0])
    with pytest.raises(SchedulerTypeError, match=r"metrics must be a number .* got str"):
        sched.step(bad("low"))


@pytest.mark.parametrize("ours,theirs,message", [
    # refused by torch too (ValueError)
    (lambda o: optim.LinearLR(o, start_factor=0.0), lambda o: TL.LinearLR(o, start_factor=0.0), "start_factor"),
    (lambda o: optim.LinearLR(o, start_factor=1.5), lambda o: TL.LinearLR(o, start_factor=1.5), "start_factor"),
    (lambda o: optim.LinearLR(o, end_factor=1.5), lambda o: TL.LinearLR(o, end_factor=1.5), "end_factor"),
    (lambda o: optim.ConstantLR(o, factor=1.5), lambda o: TL.ConstantLR(o, factor=1.5), "factor"),
    (lambda o: optim.LambdaLR(o, [lambda k: 1.0] * 3), lambda o: TL.LambdaLR(o, [lambda k: 1.0] * 3),
     r"lr_lambda must have one value per parameter group \(2\), got 3"),
    (lambda o: optim.OneCycleLR(o, 1.0), lambda o: TL.OneCycleLR(o, 1.0), "give total_steps, or both epochs"),
    (lambda o: optim.OneCycleLR(o, 1.0, total_steps=0), lambda o: TL.OneCycleLR(o, 1.0, total_steps=0),
     "total_steps must be an integer >= 1, got int 0"),
    (lambda o: optim.OneCycleLR(o, 1.0, epochs=0, steps_per_epoch=3),
     lambda o: TL.OneCycleLR(o, 1.0, epochs=0, steps_per_epoch=3), "epochs must be"),
    (lambda o: optim.OneCycleLR(o, 1.0, total_steps=9, pct_start=1.5),
     lambda o: TL.OneCycleLR(o, 1.0, total_steps=9, pct_start=1.5), "pct_start"),
    (lambda o: optim.OneCycleLR(o, 1.0, total_steps=9, anneal_strategy=bad("exp")),
     lambda o: TL.OneCycleLR(o, 1.0, total_steps=9, anneal_strategy=bad("exp")), "anneal_strategy must be"),
    (lambda o: optim.OneCycleLR(o, [1.0, 2.0, 3.0], total_steps=9),
     lambda o: TL.OneCycleLR(o, [1.0, 2.0, 3.0], total_steps=9), r"max_lr must have one value per"),
    (lambda o: optim.OneCycleLR(o, 1.0, total_steps=2, pct_start=0.5),  # torch: ZeroDivisionError
     lambda o: TL.OneCycleLR(o, 1.0, total_steps=2, pct_start=0.5), "phase 1 of the schedule is empty"),
    (lambda o: optim.ReduceLROnPlateau(o, mode=bad("avg")), lambda o: TL.ReduceLROnPlateau(o, mode=bad("avg")), "mode"),
    (lambda o: optim.ReduceLROnPlateau(o, factor=1.0), lambda o: TL.ReduceLROnPlateau(o, factor=1.0), "factor"),
    (lambda o: optim.ReduceLROnPlateau(o, threshold_mode=bad("x")), lambda o: TL.ReduceLROnPlateau(o, threshold_mode=bad("x")),
     "threshold_mode"),
    (lambda o: optim.ReduceLROnPlateau(o, min_lr=[0.0]), lambda o: TL.ReduceLROnPlateau(o, min_lr=[0.0]),
     r"min_lr must have one value per parameter group \(2\), got 1"),
])
def test_invalid_arguments_refused_as_pytorch_does(ours: Make1, theirs: Make1, message: str) -> None:
    opt, opt_t = optimizers()
    with pytest.raises((ValueError, ZeroDivisionError)):
        theirs(opt_t)
    with pytest.raises(OptimizerError, match=message):
        ours(opt)


@pytest.mark.parametrize("make,message", [
    # torch takes these and then misbehaves (a negative lr, a division by zero, a schedule that never moves)
    (lambda o: optim.ExponentialLR(o, gamma=-0.5), r"ExponentialLR: invalid gamma -0.5"),
    (lambda o: optim.MultiStepLR(o, [2, 4], gamma=-1.0), r"MultiStepLR: invalid gamma"),
    (lambda o: optim.StepLR(o, 2, gamma=float("nan")), r"StepLR: gamma must be finite"),
    (lambda o: optim.StepLR(o, 0), r"StepLR: step_size must be an integer >= 1, got int 0"),
    (lambda o: optim.MultiStepLR(o, [2, bad(4.5)]), r"MultiStepLR: milestones\[1\] must be an integer >= 0, got float"),
    (lambda o: optim.ConstantLR(o, factor=0.0), r"ConstantLR: factor must be in \(0, 1\]"),
    (lambda o: optim.LinearLR(o, total_iters=0), r"LinearLR: total_iters must be an integer >= 1"),
    (lambda o: optim.ReduceLROnPlateau(o, patience=-1), r"patience must be an integer >= 0"),
    (lambda o: optim.ReduceLROnPlateau(o, factor=-0.5), r"ReduceLROnPlateau: invalid factor"),
    (lambda o: optim.OneCycleLR(o, 1.0, total_steps=9, div_factor=0.0), r"div_factor .* must be positive"),
])
def test_arguments_torch_lets_through_are_refused_clearly(make: Make1, message: str) -> None:
    with pytest.raises(OptimizerError, match=message):
        make(optimizers()[0])


def test_schedulers_are_exported_like_step_lr() -> None:
    for name in ("MultiStepLR", "ExponentialLR", "LambdaLR", "MultiplicativeLR", "LinearLR", "ConstantLR",
                 "OneCycleLR", "ReduceLROnPlateau"):
        assert getattr(optim, name) is getattr(optim.lr_scheduler, name)
        assert name in optim.__all__
        assert issubclass(getattr(optim, name), optim.LRScheduler)


# ---- a compiled training step follows the schedule -------------------------------------------------------

@pytest.mark.parametrize("schedule", ["exponential", "one-cycle-sgd", "one-cycle-adam"])
def test_compiled_step_follows_the_schedule_without_recompiling(schedule: str) -> None:
    tp.manual_seed(7)
    model = nn.Linear(3, 2)
    twin = copy.deepcopy(model)

    def make(m: Any) -> tuple[Any, Any]:
        if schedule == "exponential":
            opt: Any = optim.SGD(m.parameters(), lr=0.2, momentum=0.9)
            return opt, optim.ExponentialLR(opt, gamma=0.8)
        if schedule == "one-cycle-sgd":
            opt = optim.SGD(m.parameters(), lr=0.2, momentum=0.9)
        else:
            opt = optim.Adam(m.parameters(), lr=0.2)
        return opt, optim.OneCycleLR(opt, max_lr=0.5, total_steps=8)

    opt, sched = make(model)
    twin_opt, twin_sched = make(twin)

    def train(x: Any) -> Any:
        opt.zero_grad()
        loss = (model(x) ** 2).sum()
        loss.backward()
        opt.step()
        return loss

    compiled: Any = tp.compile(train)
    x = tp.randn(4, 3)
    lrs_seen = set()
    for i in range(8):
        loss = compiled(x)
        twin_opt.zero_grad()
        expected = (twin(x) ** 2).sum()
        expected.backward()
        twin_opt.step()
        np.testing.assert_allclose(loss.item(), expected.item(), rtol=1e-4, err_msg=f"step {i}")
        lrs_seen.add(opt.param_groups[0]["lr"])
        sched.step()
        twin_sched.step()
        assert opt.param_groups[0]["lr"] == twin_opt.param_groups[0]["lr"]
    assert len(lrs_seen) == 8  # the lr did change every step
    for p, q in zip(model.parameters(), twin.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4, atol=1e-6)
    assert compiled.compile_count <= 2, [str(e) for e in compiled.recompile_reasons]
