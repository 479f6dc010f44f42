"""An optimizer step compiled into an elementwise kernel reads and writes each parameter and state array
through one argument (the loop then vectorises; the same memory passed as an input and as an output
defeated the vectoriser's overlap check); values stay those of the eager optimizer in either dtype, and a
state the kernel may not overwrite is updated through a copy."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn, optim
from tensorplay.compiler.numba_backend import runtime
from tests.helpers import square_loss_step

OPTIMIZERS = {
    "sgd-momentum": lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9),
    "adam": lambda ps: optim.Adam(ps, lr=0.01),
}


def _kernels(compiled: Any) -> list[Any]:
    return [plan for spec in compiled.specializations for plan in spec.program.forward.kernels]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_state_updates_are_written_through_their_input(name: str, dtype: str) -> None:
    tp.manual_seed(5)
    model = nn.Sequential(nn.Linear(97, 73), nn.Tanh(), nn.Linear(73, 3))  # 97x73 > the small-kernel limit
    if dtype == "float64":
        model = model.double()
    twin = copy.deepcopy(model)
    opt, twin_opt = OPTIMIZERS[name](model.parameters()), OPTIMIZERS[name](twin.parameters())

    compiled, eager_step = tp.compile(square_loss_step(model, opt)), square_loss_step(twin, twin_opt)
    gen = np.random.default_rng(1)
    tol = {"rtol": 1e-4, "atol": 1e-6} if dtype == "float32" else {"rtol": 1e-10, "atol": 1e-12}
    for i in range(4):
        x = tp.tensor(gen.standard_normal((11, 97)).astype(dtype))
        expected = eager_step(x)
        np.testing.assert_allclose(compiled(x).item(), expected.item(), **tol, err_msg=f"step {i}")
    for p, q in zip(model.parameters(), twin.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), **tol)
        for key, value in twin_opt.state[q].items():
            np.testing.assert_allclose(np.asarray(opt.state[p][key]), np.asarray(value), **tol, err_msg=key)
    big = [plan for plan in _kernels(compiled) if plan.space == (73, 97)]
    assert big and all(plan.aliases for plan in big)  # the weight's update writes into its inputs
    for plan in big:
        written = {f"o{k}" for k in range(len(plan.outputs))}
        header = plan.source.splitlines()[0]
        assert len(plan.aliases) == len(plan.outputs), header  # every new state value goes into its input
        assert not any(name in header for name in written), header


@pytest.mark.parametrize("fortran", [False, True])
def test_a_state_that_cannot_be_overwritten_is_updated_through_a_copy(fortran: bool) -> None:
    base = np.arange(24.0).reshape(4, 6)
    readonly = base.copy()
    readonly.flags.writeable = False
    strided = base[:, ::2]
    for state in (readonly, strided, np.asfortranarray(base) if not fortran else base):
        got = runtime.into_copy(state, fortran)
        assert got is not state and not np.shares_memory(got, state)
        np.testing.assert_array_equal(got, state)
        assert got.flags.f_contiguous if fortran else got.flags.c_contiguous
    fit = np.asfortranarray(base) if fortran else base.copy()
    assert runtime.into_copy(fit, fortran) is fit
