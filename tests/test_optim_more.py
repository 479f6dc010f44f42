"""Adamax, NAdam, RAdam and Adadelta against torch.optim: the same parameters and gradients over ten steps give
the same parameters and state (the options that change the update, two parameter groups, float32 and float64,
column-major and strided parameters, a parameter without a gradient), state dicts, argument errors, and a
compiled training step against an eager twin. The helpers (and the generic checks) are those of the RMSprop and
Adagrad tests."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay import nn, optim
from tensorplay.optim import OptimizerError
from tests import test_optim_rmsprop_adagrad as base
from tests.helpers import assert_optimizer_states_match, train_compiled_against_eager_twin

CONFIGS: list[tuple[str, dict[str, Any]]] = [
    ("Adamax", {}),
    # 1 - b1 >= 0.5: lerp's other form
    ("Adamax", {"lr": 0.01, "betas": (0.3, 0.9), "weight_decay": 0.1, "maximize": True}),
    ("NAdam", {}),
    ("NAdam", {"lr": 0.01, "weight_decay": 0.1, "momentum_decay": 0.05}),
    ("NAdam", {"weight_decay": 0.1, "decoupled_weight_decay": True, "betas": (0.3, 0.99), "maximize": True,
               "eps": 1e-3}),
    ("RAdam", {}),  # rho_t crosses 5 at step 6: both branches
    ("RAdam", {"lr": 0.01, "betas": (0.8, 0.5), "weight_decay": 0.1}),  # rho_inf = 3: never rectified
    ("RAdam", {"betas": (0.3, 0.9), "weight_decay": 0.1, "decoupled_weight_decay": True, "maximize": True}),
    ("Adadelta", {}),
    ("Adadelta", {"lr": 0.5, "rho": 0.3, "eps": 1e-3, "weight_decay": 0.1, "maximize": True}),
]
CONFIG_IDS = [f"{name}-{'-'.join(f'{k}={v}' for k, v in kw.items()) or 'defaults'}" for name, kw in CONFIGS]

# state no square root reaches without weight decay (only fma, lerp and maximum): torch's bits
EXACT_STATE = {"Adamax": ("exp_avg", "exp_inf"), "NAdam": ("exp_avg", "exp_avg_sq", "mu_product"),
               "RAdam": ("exp_avg", "exp_avg_sq"), "Adadelta": ("square_avg",)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,kwargs", CONFIGS, ids=CONFIG_IDS)
def test_ten_steps_match_torch(name: str, kwargs: dict[str, Any], dtype: Any) -> None:
    rng = np.random.default_rng(0)
    ours, theirs = base._params(dtype, rng)
    frozen = ours[-1]._data.copy()
    opt, opt_t = getattr(optim, name)(ours, **kwargs), getattr(torch.optim, name)(theirs, **kwargs)
    assert set(opt.param_groups[0]) == set(opt_t.param_groups[0])  # torch's hyperparameter names and defaults
    assert {k: v for k, v in opt.param_groups[0].items() if k != "params"}.items() <= opt_t.param_groups[0].items()
    base._run(ours, theirs, opt, opt_t, rng, 10)
    base._assert_same(ours, theirs, opt, opt_t, dtype)
    assert ours[-1] not in opt.state  # no gradient: no state, not updated
    np.testing.assert_array_equal(ours[-1]._data, frozen)
    if not kwargs.get("weight_decay"):
        for p, q in zip(ours[:-1], theirs[:-1]):
            assert opt.state[p]["step"] == 10
            for key in EXACT_STATE[name]:
                np.testing.assert_array_equal(np.asarray(opt.state[p][key]), opt_t.state[q][key].numpy(), err_msg=key)


GROUPS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("Adamax", {"lr": 0.01}, {"lr": 0.03, "betas": (0.5, 0.95), "weight_decay": 0.1}),
    ("NAdam", {"lr": 0.01, "momentum_decay": 0.01}, {"lr": 0.001, "weight_decay": 0.2, "decoupled_weight_decay": True}),
    ("RAdam", {"lr": 0.01, "betas": (0.9, 0.9)}, {"lr": 0.05, "maximize": True}),
    ("Adadelta", {"lr": 0.5}, {"lr": 2.0, "rho": 0.5}),
]


@pytest.mark.parametrize("name,defaults,override", GROUPS)
def test_two_parameter_groups_match_torch(name: str, defaults: dict[str, Any], override: dict[str, Any]) -> None:
    base.test_two_parameter_groups_match_torch(name, defaults, override)


@pytest.mark.parametrize("name,kwargs", [CONFIGS[1], CONFIGS[4], CONFIGS[7], CONFIGS[9]],
                         ids=["Adamax", "NAdam", "RAdam", "Adadelta"])
def test_state_dict_round_trip_matches_torch(name: str, kwargs: dict[str, Any]) -> None:
    """Torch's keys and values (NAdam's mu_product a float: torch's 0-d tensor's value); loading ours or torch's
    into a fresh optimizer resumes exactly (RAdam and NAdam across their step-dependent terms)."""
    base.test_state_dict_round_trip_matches_torch(name, kwargs)


@pytest.mark.parametrize("name,kwargs", [CONFIGS[1], CONFIGS[3], CONFIGS[5], CONFIGS[9]],
                         ids=["Adamax", "NAdam", "RAdam", "Adadelta"])
def test_every_layout_gets_the_same_bits(name: str, kwargs: dict[str, Any]) -> None:
    for param_layout, grad_layout in (("F", "strided"), ("strided", "F")):
        base.test_every_layout_gets_the_same_bits(name, kwargs, param_layout, grad_layout)


ERRORS: list[tuple[str, str, Any, str]] = [
    ("Adamax", "lr", -1e-3, "learning rate"), ("Adamax", "eps", -1e-8, "epsilon value"),
    ("Adamax", "betas", (1.0, 0.999), "beta parameter at index 0"),
    ("Adamax", "betas", (0.9, -0.1), "beta parameter at index 1"), ("Adamax", "weight_decay", -0.1, "weight_decay"),
    ("NAdam", "lr", -0.1, "learning rate"), ("NAdam", "betas", (0.9, 1.0), "beta parameter at index 1"),
    ("NAdam", "weight_decay", -1.0, "weight_decay"), ("NAdam", "momentum_decay", -0.004, "momentum_decay"),
    ("RAdam", "eps", -1.0, "epsilon value"), ("RAdam", "betas", (-0.5, 0.9), "beta parameter at index 0"),
    ("RAdam", "weight_decay", -0.1, "weight_decay"),
    ("Adadelta", "lr", -1.0, "learning rate"), ("Adadelta", "rho", 1.5, "rho value"),
    ("Adadelta", "rho", -0.1, "rho value"), ("Adadelta", "eps", -1e-6, "epsilon value"),
    ("Adadelta", "weight_decay", -0.1, "weight_decay"),
]


@pytest.mark.parametrize("name,arg,value,label", ERRORS, ids=[f"{n}-{a}={v}" for n, a, v, _ in ERRORS])
def test_arguments_torch_refuses_are_optimizer_errors(name: str, arg: str, value: Any, label: str) -> None:
    with pytest.raises(ValueError, match="Invalid"):
        getattr(torch.optim, name)([torch.nn.Parameter(torch.ones(2))], **{arg: value})
    shown = value[0] if label.endswith("index 0") else value[1] if label.endswith("index 1") else value
    with pytest.raises(OptimizerError, match=rf"{name}: invalid {label}.*{shown}"):
        getattr(optim, name)([nn.Parameter(np.ones(2, np.float32))], **{arg: value})
    with pytest.raises(OptimizerError, match=rf"{name}: invalid {label}"):  # a group's own value too
        getattr(optim, name)([{"params": [nn.Parameter(np.ones(2, np.float32))], arg: value}])


@pytest.mark.parametrize("name", ["Adamax", "NAdam", "RAdam", "Adadelta"])
def test_implementation_options_only_at_their_defaults(name: str) -> None:
    """foreach, capturable and differentiable select other implementations in torch: only their defaults (and
    foreach=False, the single-tensor loop run here) are accepted."""
    params: list[Any] = [nn.Parameter(np.ones(2, np.float32))]
    opt = getattr(optim, name)(params, foreach=False, capturable=False, differentiable=False)
    assert opt.param_groups[0]["foreach"] is False
    for option, value in (("foreach", True), ("capturable", True), ("differentiable", True), ("foreach", 1)):
        with pytest.raises(OptimizerError, match=rf"{name}: {option}={value!r} is not supported"):
            getattr(optim, name)(params, **{option: value})
    with pytest.raises(OptimizerError, match=rf"{name}: capturable=True is not supported"):
        saved = opt.state_dict()
        opt.load_state_dict({"state": {}, "param_groups": [{**saved["param_groups"][0], "capturable": True}]})


@pytest.mark.parametrize("name,arg", [("Adamax", "maximize"), ("NAdam", "decoupled_weight_decay"),
                                      ("RAdam", "decoupled_weight_decay"), ("Adadelta", "maximize")])
def test_flags_must_be_bools(name: str, arg: str) -> None:
    base.test_flags_must_be_bools(name, arg)


COMPILED: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    # (optimizer, first group's options, second group's), hyperparameters changed between calls
    ("Adamax", {"lr": 0.01}, {"lr": 0.03, "weight_decay": 0.1, "maximize": True}),
    ("NAdam", {"lr": 0.01}, {"lr": 0.02, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("NAdam", {"lr": 0.01, "weight_decay": 0.05, "maximize": True}, {"lr": 0.005, "momentum_decay": 0.1}),
    ("RAdam", {"lr": 0.01}, {"lr": 0.02, "betas": (0.5, 0.99), "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("Adadelta", {"lr": 1.0}, {"lr": 0.5, "rho": 0.5, "weight_decay": 0.1, "maximize": True}),
]


@pytest.mark.parametrize("name,first,second", COMPILED, ids=[f"{c[0]}-{i}" for i, c in enumerate(COMPILED)])
def test_a_compiled_training_step_matches_eager_in_one_specialization(name: str, first: dict[str, Any],
                                                                      second: dict[str, Any]) -> None:
    """The update inside tp.compile is eager's over 8 calls (RAdam crossing rho_t = 5 at the sixth), with two
    parameter groups and a frozen parameter (no gradient: skipped); lr, eps, betas, rho and momentum_decay
    changed between calls recompile nothing, and the state arrays are updated in place."""
    tp.manual_seed(5)
    model = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2))
    model[0].bias.requires_grad_(False)
    twin = copy.deepcopy(model)
    opts = [getattr(optim, name)([{"params": [m[0].weight, m[0].bias], **first},
                                  {"params": list(m[2].parameters()), **second}]) for m in (model, twin)]
    opt, twin_opt = opts

    arrays: list[tuple[Any, str, Any]] = []

    def before(i: int) -> None:
        if i == 3:
            for o in opts:
                for group in o.param_groups:
                    group["lr"] *= 0.5
                    group["eps"] *= 10
                    for key, scale in (("rho", 0.9), ("momentum_decay", 2.0)):
                        if key in group:
                            group[key] *= scale
                    if "betas" in group:
                        group["betas"] = (group["betas"][0] * 0.9, group["betas"][1])

    def after(i: int) -> None:
        assert_optimizer_states_match(model.parameters(), twin.parameters(), opt, twin_opt, f"step {i}")
        if i == 1:
            arrays.extend((p, key, value) for p in model.parameters() if p in opt.state
                          for key, value in opt.state[p].items() if isinstance(value, np.ndarray))

    compiled = train_compiled_against_eager_twin(model, twin, opt, twin_opt, steps=8, shape=(6, 4), seed=0,
                                                 before=before, after=after)
    assert model[0].bias not in opt.state
    assert arrays and all(opt.state[p][key] is value for p, key, value in arrays)
    if name == "NAdam":  # advanced in Python after each call: eager's float32 product exactly
        assert [opt.state[p]["mu_product"] for p in model.parameters() if p in opt.state] == \
            [twin_opt.state[q]["mu_product"] for q in twin.parameters() if q in twin_opt.state]
    assert compiled.compile_count == 1, [str(e) for e in compiled.recompile_reasons]
