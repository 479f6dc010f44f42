"""RMSprop and Adagrad against torch.optim: the same parameters and gradients over ten steps give the same
parameters and state (every option that changes the update, two parameter groups, float32 and float64,
column-major and strided parameters, parameters without a gradient), state dicts, argument errors, and a
compiled training step against an eager twin."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay import nn, optim
from tensorplay.optim import OptimizerError
from tests.helpers import assert_optimizer_states_match, train_compiled_against_eager_twin

Array = np.ndarray[Any, Any]

CONFIGS: list[tuple[str, dict[str, Any]]] = [
    ("RMSprop", {}),
    ("RMSprop", {"lr": 0.02, "alpha": 0.9, "weight_decay": 0.1}),
    ("RMSprop", {"momentum": 0.9}),
    ("RMSprop", {"centered": True, "alpha": 0.3}),  # 1 - alpha >= 0.5: lerp's other form
    ("RMSprop", {"momentum": 0.5, "centered": True, "weight_decay": 0.05, "maximize": True, "eps": 1e-3}),
    ("Adagrad", {}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.2}),
    ("Adagrad", {"initial_accumulator_value": 0.5, "weight_decay": 0.1}),
    ("Adagrad", {"lr_decay": 0.05, "initial_accumulator_value": 0.1, "maximize": True, "eps": 1e-4}),
]
CONFIG_IDS = [f"{name}-{'-'.join(f'{k}={v}' for k, v in kw.items()) or 'defaults'}" for name, kw in CONFIGS]


def _tolerance(dtype: Any) -> dict[str, Any]:
    # the updates are torch's operation for operation; torch's sqrt is not correctly rounded (float32 and float64)
    return {"rtol": 1e-5, "atol": 1e-6} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-14}


def _layout(a: Array, kind: str) -> Array:
    """``a``'s values row-major, column-major or strided (every other column of a wider array)."""
    if kind == "strided":
        wide = np.zeros((a.shape[0], 2 * a.shape[1]), a.dtype)
        wide[:, ::2] = a
        return wide[:, ::2]
    return np.array(a, order=kind)  # type: ignore[call-overload,no-any-return]


def _params(dtype: Any, rng: np.random.Generator) -> tuple[list[Any], list[torch.nn.Parameter]]:
    """Four parameters: row-major, column-major (a transposed array), strided, and one never given a gradient."""
    values = [rng.standard_normal(shape).astype(dtype) for shape in ((4, 3), (3, 5), (2, 4), (3,))]
    ours = []
    for value, kind in zip(values, ("C", "F", "strided", "C")):
        p: Any = nn.Parameter(value.copy())
        p._data = _layout(value, kind)
        ours.append(p)
    assert ours[1]._data.flags.f_contiguous and not ours[1]._data.flags.c_contiguous
    assert not ours[2]._data.flags.c_contiguous and not ours[2]._data.flags.f_contiguous
    return ours, [torch.nn.Parameter(torch.tensor(v)) for v in values]


def _run(ours: list[Any], theirs: list[Any], opt: Any, opt_t: Any, rng: np.random.Generator, steps: int) -> None:
    """``steps`` updates of both optimizers with the same random gradients (the last parameter gets none)."""
    for _ in range(steps):
        for p, q in zip(ours[:-1], theirs[:-1]):
            g = rng.standard_normal(p.shape).astype(p._data.dtype)
            p.grad = tp.tensor(g)
            q.grad = torch.tensor(g)
        opt.step()
        opt_t.step()


def _assert_same(ours: list[Any], theirs: list[Any], opt: Any, opt_t: Any, dtype: Any) -> None:
    tol = _tolerance(dtype)
    for i, (p, q) in enumerate(zip(ours, theirs)):
        assert p._data.dtype == dtype
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), err_msg=f"param {i}", **tol)
        assert (p in opt.state) == (q in opt_t.state), f"param {i}"
        if q not in opt_t.state:
            continue
        assert set(opt.state[p]) == set(opt_t.state[q]), f"param {i}"
        for key, value in opt_t.state[q].items():
            np.testing.assert_allclose(np.asarray(opt.state[p][key]), value.numpy(), err_msg=f"param {i}: {key}",
                                       **tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,kwargs", CONFIGS, ids=CONFIG_IDS)
def test_ten_steps_match_torch(name: str, kwargs: dict[str, Any], dtype: Any) -> None:
    rng = np.random.default_rng(0)
    ours, theirs = _params(dtype, rng)
    frozen = ours[-1]._data.copy()
    opt, opt_t = getattr(optim, name)(ours, **kwargs), getattr(torch.optim, name)(theirs, **kwargs)
    _run(ours, theirs, opt, opt_t, rng, 10)
    _assert_same(ours, theirs, opt, opt_t, dtype)
    if not kwargs.get("weight_decay"):  # no square root reaches the accumulators: torch's bits (fma as torch's)
        for p, q in zip(ours[:-1], theirs[:-1]):
            for key in ("square_avg", "grad_avg", "sum"):
                if key in opt_t.state[q]:
                    np.testing.assert_array_equal(opt.state[p][key], opt_t.state[q][key].numpy(), err_msg=key)
    np.testing.assert_array_equal(ours[-1]._data, frozen)  # no gradient: not updated
    assert ours[-1]._version is None or ours[-1]._version[0] == 0


GROUPS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("RMSprop", {"lr": 0.01}, {"lr": 0.03, "momentum": 0.8, "centered": True, "alpha": 0.95}),
    ("RMSprop", {"momentum": 0.9, "weight_decay": 0.1}, {"maximize": True}),
    # torch fills every sum with the constructor's initial_accumulator_value, whatever a group says
    ("Adagrad", {"initial_accumulator_value": 0.2}, {"lr": 0.05, "lr_decay": 0.3, "initial_accumulator_value": 2.0}),
]


@pytest.mark.parametrize("name,defaults,override", GROUPS)
def test_two_parameter_groups_match_torch(name: str, defaults: dict[str, Any], override: dict[str, Any]) -> None:
    rng = np.random.default_rng(1)
    ours, theirs = _params(np.float64, rng)
    opt = getattr(optim, name)([{"params": ours[:2]}, {"params": ours[2:], **override}], **defaults)
    opt_t = getattr(torch.optim, name)([{"params": theirs[:2]}, {"params": theirs[2:], **override}], **defaults)
    _run(ours, theirs, opt, opt_t, rng, 10)
    _assert_same(ours, theirs, opt, opt_t, np.float64)
    for group, group_t in zip(opt.param_groups, opt_t.param_groups):
        assert {k: group[k] for k in group if k != "params"}.items() <= group_t.items()


def test_adagrad_group_added_later_matches_torch() -> None:
    """A group added after construction gets its state at its first step (sums at the constructor's value)."""
    rng = np.random.default_rng(2)
    ours, theirs = _params(np.float64, rng)
    opt = optim.Adagrad(ours[:1], initial_accumulator_value=0.3)
    opt_t = torch.optim.Adagrad(theirs[:1], initial_accumulator_value=0.3)
    opt.add_param_group({"params": ours[1:], "lr": 0.05})
    opt_t.add_param_group({"params": theirs[1:], "lr": 0.05})
    assert ours[1] not in opt.state and theirs[1] not in opt_t.state
    _run(ours, theirs, opt, opt_t, rng, 4)
    _assert_same(ours, theirs, opt, opt_t, np.float64)


@pytest.mark.parametrize("name,kwargs", [CONFIGS[4], CONFIGS[8]], ids=["RMSprop", "Adagrad"])
def test_state_dict_round_trip_matches_torch(name: str, kwargs: dict[str, Any]) -> None:
    """state_dict() has torch's keys and values; loading ours or torch's into a fresh optimizer resumes exactly."""
    rng = np.random.default_rng(3)
    ours, theirs = _params(np.float64, rng)
    opt, opt_t = getattr(optim, name)(ours, **kwargs), getattr(torch.optim, name)(theirs, **kwargs)
    _run(ours, theirs, opt, opt_t, rng, 5)
    saved, saved_t = opt.state_dict(), opt_t.state_dict()
    assert set(saved["state"]) == set(saved_t["state"])
    for index, entries in saved_t["state"].items():
        assert set(saved["state"][index]) == set(entries)
        for key, value in entries.items():
            np.testing.assert_allclose(np.asarray(saved["state"][index][key]), value.numpy(), rtol=1e-12,
                                       err_msg=f"{index}: {key}")
    for group, group_t in zip(saved["param_groups"], saved_t["param_groups"]):
        assert group["params"] == group_t["params"]
        assert {k: v for k, v in group.items() if k != "params"}.items() <= group_t.items()
    grads = [[rng.standard_normal(p.shape) for p in ours[:-1]] for _ in range(5)]
    finals = []
    for source in (saved, saved_t):
        copies: list[Any] = [nn.Parameter(np.array(p._data)) for p in ours]
        fresh = getattr(optim, name)(copies, **{**kwargs, "lr": 0.5})  # the loaded groups bring lr back
        fresh.load_state_dict(copy.deepcopy(source) if source is saved else source)
        for step_grads in grads:
            for p, g in zip(copies, step_grads):
                p.grad = tp.tensor(g)
            fresh.step()
        finals.append([p.detach().numpy() for p in copies])
    for step_grads in grads:
        for q, g in zip(theirs, step_grads):
            q.grad = torch.tensor(g)
        opt_t.step()
    for final in finals:
        for value, q in zip(final, theirs):
            np.testing.assert_allclose(value, q.detach().numpy(), rtol=1e-12, atol=1e-14)


ERRORS: list[tuple[str, str, Any]] = [
    ("RMSprop", "lr", -1e-3), ("RMSprop", "eps", -1e-8), ("RMSprop", "alpha", -0.1),
    ("RMSprop", "momentum", -0.5), ("RMSprop", "weight_decay", -1.0),
    ("Adagrad", "lr", -0.1), ("Adagrad", "lr_decay", -0.1), ("Adagrad", "weight_decay", -0.1),
    ("Adagrad", "initial_accumulator_value", -0.1), ("Adagrad", "eps", -1e-10),
]


@pytest.mark.parametrize("name,arg,value", ERRORS)
def test_arguments_torch_refuses_are_optimizer_errors(name: str, arg: str, value: Any) -> None:
    with pytest.raises(ValueError, match="Invalid"):
        getattr(torch.optim, name)([torch.nn.Parameter(torch.ones(2))], **{arg: value})
    label = {"lr": "learning rate", "eps": "epsilon"}.get(arg, arg)
    with pytest.raises(OptimizerError, match=rf"{name}: invalid {label}.*{value}.*>= 0"):
        getattr(optim, name)([nn.Parameter(np.ones(2, np.float32))], **{arg: value})
    with pytest.raises(OptimizerError, match=rf"{name}: invalid {label}"):  # a group's own value too
        getattr(optim, name)([{"params": [nn.Parameter(np.ones(2, np.float32))], arg: value}])


@pytest.mark.parametrize("name,arg", [("RMSprop", "centered"), ("RMSprop", "maximize"), ("Adagrad", "maximize")])
def test_flags_must_be_bools(name: str, arg: str) -> None:
    with pytest.raises(OptimizerError, match=rf"{name}: {arg} must be True or False, got str 'yes'"):
        getattr(optim, name)([nn.Parameter(np.ones(2, np.float32))], **{arg: "yes"})
    with pytest.raises(OptimizerError, match=rf"{name}: learning rate must be a number, got str '0.1'"):
        getattr(optim, name)([nn.Parameter(np.ones(2, np.float32))], lr="0.1")


@pytest.mark.parametrize("name,kwargs", [("RMSprop", {"momentum": 0.9, "centered": True}), ("Adagrad", {})])
@pytest.mark.parametrize("param_layout", ["F", "strided"])
@pytest.mark.parametrize("grad_layout", ["C", "F", "strided"])
def test_every_layout_gets_the_same_bits(name: str, kwargs: dict[str, Any], param_layout: str,
                                         grad_layout: str) -> None:
    rng = np.random.default_rng(6)
    w_np = rng.standard_normal((6, 5)).astype(np.float32)
    grads = [rng.standard_normal((6, 5)).astype(np.float32) for _ in range(3)]
    results = []
    for p_layout, g_layout in ((param_layout, grad_layout), ("C", "C")):
        w: Any = nn.Parameter(w_np)
        w._data = data = _layout(w_np, p_layout)
        opt = getattr(optim, name)([w], **kwargs)
        for g_np in grads:
            w.grad = tp.tensor(g_np)
            w.grad._data = _layout(g_np, g_layout)
            opt.step()
        assert w._data is data  # updated in place
        results.append(np.array(data))
    np.testing.assert_array_equal(results[0], results[1])


COMPILED: dict[str, Callable[[Any], Any]] = {
    "rmsprop": lambda ps: optim.RMSprop(ps, lr=0.01),
    "rmsprop-momentum-centered-decay": lambda ps: optim.RMSprop(ps, lr=0.01, momentum=0.9, centered=True,
                                                                weight_decay=0.1),
    "rmsprop-maximize": lambda ps: optim.RMSprop(ps, lr=0.001, alpha=0.5, momentum=0.3, maximize=True),
    "adagrad": lambda ps: optim.Adagrad(ps, lr=0.1),
    "adagrad-decay-initial-maximize": lambda ps: optim.Adagrad(ps, lr=0.1, lr_decay=0.1, weight_decay=0.01,
                                                               initial_accumulator_value=0.1, maximize=True),
}


@pytest.mark.parametrize("name", list(COMPILED))
def test_a_compiled_training_step_matches_eager_in_one_specialization(name: str) -> None:
    """The update inside tp.compile is eager's; the hyperparameters are read at every call (changing lr, alpha,
    eps, momentum or lr_decay between calls recompiles nothing) and state is written back in place."""
    tp.manual_seed(3)
    model = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2))
    twin = copy.deepcopy(model)
    opt, twin_opt = COMPILED[name](model.parameters()), COMPILED[name](twin.parameters())

    arrays: list[tuple[Any, str, Any]] = []

    def before(i: int) -> None:
        if i == 3:
            for o in (opt, twin_opt):
                for group in o.param_groups:
                    group["lr"] *= 0.5
                    group["eps"] *= 10
                    for key, scale in (("alpha", 0.9), ("momentum", 0.5), ("lr_decay", 2.0)):
                        if group.get(key):
                            group[key] *= scale

    def after(i: int) -> None:
        assert_optimizer_states_match(model.parameters(), twin.parameters(), opt, twin_opt, f"step {i}")
        if i == 1:  # the state arrays the first calls created, to be updated in place from now on
            arrays.extend((p, key, value) for p in model.parameters() for key, value in opt.state[p].items()
                          if isinstance(value, np.ndarray))

    compiled = train_compiled_against_eager_twin(model, twin, opt, twin_opt, steps=6, shape=(6, 4), seed=0,
                                                 before=before, after=after)
    for p in model.parameters():
        assert opt.state[p]["step"] == 6
    assert arrays and all(opt.state[p][key] is value for p, key, value in arrays)
    assert compiled.compile_count == 1, [str(e) for e in compiled.recompile_reasons]


def test_a_compiled_adagrad_step_for_a_group_added_later() -> None:
    """A group added after construction has no sums until its first step: that step compiles on its own
    (guarded), the later ones share one specialization, and all match eager."""
    tp.manual_seed(4)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    twin = copy.deepcopy(model)
    opts = []
    for m in (model, twin):
        first, second = m[0], m[2]
        o = optim.Adagrad(first.parameters(), lr=0.1, initial_accumulator_value=0.5)
        o.add_param_group({"params": list(second.parameters()), "lr": 0.2})
        opts.append(o)
    opt, twin_opt = opts

    compiled = train_compiled_against_eager_twin(model, twin, opt, twin_opt, steps=4, shape=(5, 3), seed=1)
    for p, q in zip(model.parameters(), twin.parameters()):
        np.testing.assert_allclose(opt.state[p]["sum"], twin_opt.state[q]["sum"], rtol=1e-4)
        assert opt.state[p]["step"] == twin_opt.state[q]["step"] == 4
    assert compiled.compile_count == 2, [str(e) for e in compiled.recompile_reasons]
