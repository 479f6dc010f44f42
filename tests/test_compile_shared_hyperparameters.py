"""A compiled optimizer step reads each parameter group's hyperparameters once per call, as one input
shared by the group's parameters (not one per parameter); groups keep their own values, and changes between
calls (a scheduler) still take effect: parameters agree with the eager optimizer step after step."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay import nn, optim


def _model(seed: int) -> nn.Module:
    tp.manual_seed(seed)
    return nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3))


def _groups(model: nn.Module, kind: str) -> Any:
    first, second = list(model.parameters())[:2], list(model.parameters())[2:]
    if kind == "adam":
        return optim.Adam([{"params": first}, {"params": second, "lr": 0.02, "betas": (0.8, 0.99), "eps": 1e-6}],
                          lr=0.05)
    if kind == "adamw":
        return optim.AdamW([{"params": first}, {"params": second, "lr": 0.02, "weight_decay": 0.3}], lr=0.05,
                           weight_decay=0.1)
    return optim.SGD([{"params": first}, {"params": second, "lr": 0.2, "momentum": 0.5}], lr=0.1, momentum=0.9,
                     weight_decay=0.01)


def _step_of(model: nn.Module, opt: Any, x: Any, y: Any) -> Any:
    """A training step of ``model`` on ``(x, y)`` (mean squared error) with ``opt``."""
    def step() -> Any:
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def _scalar_inputs(compiled: Any) -> int:
    return sum(1 for plan in compiled.specializations[0].program.inputs if plan.kind == "opt_scalar")


@pytest.mark.parametrize("kind", ["adam", "adamw", "sgd"])
def test_group_hyperparameters_are_read_once_and_follow_changes(kind: str) -> None:
    rng = np.random.default_rng(0)
    x = tp.tensor(rng.standard_normal((4, 5)))
    y = tp.tensor(rng.standard_normal((4, 3)))
    models = [_model(1).double(), _model(1).double()]
    opts = [_groups(m, kind) for m in models]

    compiled = tp.compile(_step_of(models[0], opts[0], x, y))
    eager = _step_of(models[1], opts[1], x, y)
    for i in range(4):
        for opt in opts:  # a scheduler changing one group's values between calls
            opt.param_groups[1]["lr"] *= 0.5
            if kind != "sgd":
                opt.param_groups[1]["betas"] = (0.8 - 0.1 * i, 0.99)
        compiled()
        eager()
        for p, q in zip(models[0].parameters(), models[1].parameters()):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-12, atol=1e-13, err_msg=f"step {i}")
    assert compiled.compile_count == 1
    # per group: Adam's 1 - beta1, 1 - beta2, beta2 and eps (AdamW adds its decay), and its step size and
    # bias correction (every parameter of the group has taken as many steps); SGD's lr, weight decay,
    # momentum and 1 - dampening
    per_group = {"adam": 6, "adamw": 7, "sgd": 4}[kind]
    assert _scalar_inputs(compiled) == 2 * per_group


def _adam_pair(kind: str) -> tuple[list[nn.Module], list[Any]]:
    models = [_model(2).double(), _model(2).double()]
    make = optim.Adam if kind == "adam" else optim.AdamW
    return models, [make(m.parameters(), lr=0.05, betas=(0.7, 0.9), weight_decay=0.1) for m in models]


def _adam_steps(models: list[nn.Module], opts: list[Any], skip: list[int]) -> Any:
    """One eager-or-compiled step function per model: the gradients of the parameters at ``skip`` (indices
    into ``parameters()``) are dropped before ``step()``, so those parameters take no step."""
    rng = np.random.default_rng(1)
    x, y = tp.tensor(rng.standard_normal((4, 5))), tp.tensor(rng.standard_normal((4, 3)))

    def step_of(model: nn.Module, opt: Any) -> Any:
        def step() -> Any:
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            params = list(model.parameters())
            for i in skip:
                params[i].grad = None
            opt.step()
            return loss
        return step
    return [step_of(m, o) for m, o in zip(models, opts)]


def _step_counts(opt: Any) -> list[int]:
    return [int(opt.state[p].get("step", 0)) if p in opt.state else 0 for p in opt.param_groups[0]["params"]]


@pytest.mark.parametrize("kind", ["adam", "adamw"])
def test_adam_steps_counted_apart_per_parameter_when_they_differ(kind: str) -> None:
    """Adam's bias corrections depend on each parameter's own step count. Shared by the group while the
    counts agree; when they differ (a parameter without a gradient skipped a step), the compiled step
    recompiles and uses each parameter's own count, as the eager optimizer does."""
    models, opts = _adam_pair(kind)
    skipping = _adam_steps(models, opts, skip=[3])  # the last bias takes no step
    full = _adam_steps(models, opts, skip=[])
    compiled = tp.compile(full[0])
    for i in range(6):
        if i in (2, 3):  # eager steps on both models that leave one parameter behind
            skipping[0]()
            skipping[1]()
        else:
            compiled()
            full[1]()
        assert _step_counts(opts[0]) == _step_counts(opts[1])
        for p, q in zip(models[0].parameters(), models[1].parameters()):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-12, atol=1e-13,
                                       err_msg=f"call {i}")
    assert _step_counts(opts[0]) == [6, 6, 6, 4]
    assert compiled.compile_count == 2
    reasons = " ".join(str(r) for event in compiled.recompile_reasons for r in event.reasons)
    assert "step counts are equal" in reasons, reasons
    # the second specialization reads a step size and a bias correction per parameter
    assert sum(1 for plan in compiled.specializations[-1].program.inputs if plan.kind == "opt_scalar") == \
        sum(1 for plan in compiled.specializations[0].program.inputs if plan.kind == "opt_scalar") + 2 * 3


@pytest.mark.parametrize("kind", ["adam", "sgd"])
def test_each_hyperparameter_view_is_made_once_for_every_kernel(kind: str) -> None:
    """The update kernels of a group's parameters read its hyperparameters through one shared one-element
    view each (made once per call); the parameters still agree with the eager optimizer's."""
    rng = np.random.default_rng(4)
    x, y = tp.tensor(rng.standard_normal((32, 64))), tp.tensor(rng.standard_normal((32, 96)))
    models = []
    for _ in range(2):
        tp.manual_seed(5)
        models.append(nn.Sequential(nn.Linear(64, 128), nn.Tanh(), nn.Linear(128, 96)).double())
    opts = [optim.Adam(m.parameters(), lr=0.01) if kind == "adam" else
            optim.SGD(m.parameters(), lr=0.01, momentum=0.9) for m in models]

    compiled, eager = tp.compile(_step_of(models[0], opts[0], x, y)), _step_of(models[1], opts[1], x, y)
    for _ in range(3):
        compiled()
        eager()
    for p, q in zip(models[0].parameters(), models[1].parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-12, atol=1e-13)
    source = compiled.specializations[-1].program.forward.source
    views = re.findall(r"\b(p\d+)\.reshape\(\(1,\)\)", source)
    assert views and len(views) == len(set(views)), source
    kernels = re.findall(r"^ *_k\d+\(", source, re.M)
    assert len(kernels) >= 4  # one update per parameter, all reading the shared views
