"""Learning-rate schedulers step as PyTorch's do: chained from each group's current ``lr`` (so an lr set by
hand mid-schedule carries on, and a schedule resumed with ``last_epoch`` starts from the current lr), the
closed form under the deprecated ``step(epoch)``, and state-dict round trips that continue the same
sequence. Every sequence is compared with torch's."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from tensorplay import nn, optim

Make = Callable[[Any, Any], Any]

SCHEDULERS: list[tuple[str, Make, Make]] = [
    ("cosine", lambda o, e: optim.CosineAnnealingLR(o, T_max=10, last_epoch=e),
     lambda o, e: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=10, last_epoch=e)),
    ("cosine-eta-min", lambda o, e: optim.CosineAnnealingLR(o, T_max=4, eta_min=0.01, last_epoch=e),
     lambda o, e: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=4, eta_min=0.01, last_epoch=e)),
    ("step", lambda o, e: optim.StepLR(o, step_size=3, gamma=0.5, last_epoch=e),
     lambda o, e: torch.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5, last_epoch=e)),
]
IDS = [s[0] for s in SCHEDULERS]


def optimizers(lrs: tuple[float, ...] = (0.1, 0.03)) -> tuple[Any, Any]:
    ours = optim.SGD([{"params": [nn.Parameter(np.zeros(2, dtype=np.float32))], "lr": lr} for lr in lrs])
    theirs = torch.optim.SGD([{"params": [torch.nn.Parameter(torch.zeros(2))], "lr": lr} for lr in lrs])
    return ours, theirs


def lrs(opt: Any) -> list[float]:
    return [float(g["lr"]) for g in opt.param_groups]


def run(opt: Any, sched: Any, steps: int, set_lr_at: dict[int, float] | None = None) -> list[list[float]]:
    seen = [lrs(opt) + list(sched.get_last_lr())]
    for i in range(steps):
        opt.step()
        sched.step()
        for group in opt.param_groups if set_lr_at and i in set_lr_at else []:
            group["lr"] = set_lr_at[i]  # type: ignore[index]
        seen.append(lrs(opt) + list(sched.get_last_lr()))
    return seen


@pytest.mark.parametrize("name,ours,theirs", SCHEDULERS, ids=IDS)
def test_lr_set_by_hand_mid_schedule_carries_on_as_pytorch(name: str, ours: Make, theirs: Make) -> None:
    opt, opt_t = optimizers()
    at = {3: 0.5, 13: 0.02}
    np.testing.assert_allclose(run(opt, ours(opt, -1), 30, at), run(opt_t, theirs(opt_t, -1), 30, at),
                               rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("last_epoch", [0, 4, 9, 13])
@pytest.mark.parametrize("name,ours,theirs", SCHEDULERS, ids=IDS)
def test_resume_with_last_epoch_matches_pytorch(name: str, ours: Make, theirs: Make, last_epoch: int) -> None:
    opt, opt_t = optimizers()
    for group in opt.param_groups + opt_t.param_groups:
        group["initial_lr"] = 0.2
    np.testing.assert_allclose(run(opt, ours(opt, last_epoch), 12), run(opt_t, theirs(opt_t, last_epoch), 12),
                               rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name,ours,theirs", SCHEDULERS, ids=IDS)
def test_state_dict_round_trip_continues_as_pytorch(name: str, ours: Make, theirs: Make) -> None:
    results = []
    for opt, make in zip(optimizers(), (ours, theirs)):
        sched = make(opt, -1)
        run(opt, sched, 7, {2: 0.4})
        opt_state, sched_state = opt.state_dict(), sched.state_dict()
        fresh_opt = type(opt)([{"params": g["params"], "lr": 1.0} for g in opt.param_groups])
        fresh_opt.load_state_dict(opt_state)
        fresh = make(fresh_opt, -1)
        fresh.load_state_dict(sched_state)
        fresh_opt.load_state_dict(opt_state)  # the construction step above set lr; the checkpoint's wins
        results.append(run(fresh_opt, fresh, 15))
    np.testing.assert_allclose(results[0], results[1], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name,ours,theirs", SCHEDULERS, ids=IDS)
def test_step_with_epoch_uses_the_closed_form_and_warns_as_pytorch(name: str, ours: Make, theirs: Make) -> None:
    results = []
    for opt, make in zip(optimizers(), (ours, theirs)):
        sched = make(opt, -1)
        seen = []
        for epoch in (1, 2, 7, 3, 12, 25):
            opt.step()
            opt.param_groups[0]["lr"] = 0.7  # the closed form ignores the current lr
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                sched.step(epoch)
            assert any("epoch parameter" in str(w.message) for w in caught), name
            seen.append(lrs(opt) + list(sched.get_last_lr()) + [sched.last_epoch])
        results.append(seen)
    np.testing.assert_allclose(results[0], results[1], rtol=1e-9, atol=1e-12)
