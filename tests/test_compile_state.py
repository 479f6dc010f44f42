"""Capture is not a call: module state, .grad, optimizer state and the random generator end as after one eager
call; random draws are fresh at every call and replay eagerly with the same seed; a compiled training region
joins the tape as one node; errors name the user's line."""

from __future__ import annotations

import copy
import sys
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay import nn, optim
from tensorplay import random_state
from tensorplay.errors import AutogradError, GraphCaptureError
from tests.helpers import assert_optimizer_states_match, square_loss_step, train_compiled_against_eager_twin


def test_a_first_call_changes_module_state_exactly_like_one_eager_call() -> None:
    tp.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU())
    twin = copy.deepcopy(model)
    x = tp.randn(8, 3)
    compiled = tp.compile(model)
    got = compiled(x)
    expected = twin(x)
    np.testing.assert_allclose(got.detach().numpy(), expected.detach().numpy(), rtol=1e-5, atol=1e-6)
    for (name, a), (_, b) in zip(model.named_buffers(), twin.named_buffers()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, err_msg=name)  # updated once, not twice
    for p in model.parameters():
        assert p.grad is None
        assert p.interpreter is tp.eager and isinstance(p._data, np.ndarray)


def test_capture_leaves_grads_and_optimizer_state_alone() -> None:
    tp.manual_seed(1)
    model = nn.Linear(3, 2)
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(tp.randn(4, 3)).sum().backward()
    grads = [p.grad for p in model.parameters()]
    compiled = tp.compile(lambda x: model(x).sum())  # no backward inside
    with tp.no_grad():
        compiled(tp.randn(4, 3))
    assert all(p.grad is g for p, g in zip(model.parameters(), grads))  # the same tensor objects
    assert len(opt.state) == 0


def test_random_draws_are_fresh_every_call_and_replay_the_eager_numbers() -> None:
    def noisy(x: Any) -> Any:
        return F.dropout(x, 0.5) + tp.randn(*x.shape)

    compiled = tp.compile(noisy)
    x = tp.ones(5, 6)
    tp.manual_seed(7)
    first = compiled(x).numpy()
    state_after_compiled = random_state.get_state()
    second = compiled(x).numpy()
    assert not np.array_equal(first, second)  # a new mask and new noise at every call
    tp.manual_seed(7)
    eager = noisy(x).numpy()
    assert random_state.get_state() == state_after_compiled  # the same number of draws as eagerly
    np.testing.assert_array_equal(first, eager)  # the same keys give the same numbers
    tp.manual_seed(7)
    np.testing.assert_array_equal(compiled(x).numpy(), first)


def test_an_eager_draw_during_capture_is_refused() -> None:
    made_inside = {"t": None}

    def g(x: Any) -> Any:
        noise = tp.tensor(np.ones(3, np.float32))
        made_inside["t"] = noise
        return x + tp.eager.random_normal(tp.eager.wrap(random_state.next_key()), shape=(3,), dtype="float32")

    with pytest.raises(GraphCaptureError, match="drawn from the global generator while the compiled function"):
        tp.compile(g)(tp.ones(3))


def test_manual_seed_inside_a_compiled_function_is_refused() -> None:
    def g(x: Any) -> Any:
        tp.manual_seed(3)
        return x * 2

    with pytest.raises(GraphCaptureError, match="tp.manual_seed was called inside the compiled function"):
        tp.compile(g)(tp.ones(2))


# ---- training regions on the tape ------------------------------------------------------------------------

def test_a_training_region_is_one_tape_node() -> None:
    tp.manual_seed(2)
    model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
    loss = tp.compile(lambda x: model(x).square().mean())(tp.randn(5, 3))
    node = loss.grad_fn
    assert repr(node) == "<CompiledBackward>"
    assert len(node.edges) == 4 and all(edge is p for edge, p in zip(node.edges, model.parameters()))


def test_several_outputs_share_one_region() -> None:
    w = tp.randn(3, 3).requires_grad_(True)

    def f(x: Any) -> Any:
        h = x @ w
        return h.sum(), (h * h).sum()

    x = tp.randn(4, 3)
    a, b = tp.compile(f)(x)
    assert repr(a.grad_fn) == repr(b.grad_fn) == "<CompiledOutputBackward>"
    (a + 2 * b).backward()
    compiled_grad = w.grad.numpy().copy()
    w.grad = None
    ea, eb = f(x)
    (ea + 2 * eb).backward()
    np.testing.assert_allclose(compiled_grad, w.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_higher_derivatives_through_a_compiled_region_are_refused() -> None:
    x = tp.randn(3).requires_grad_(True)
    y = tp.compile(lambda x: (x ** 3).sum())(x)
    with pytest.raises(AutogradError, match="create_graph=True.*is not supported"):
        tp.autograd.grad(y, x, create_graph=True)


def test_a_parameter_changed_in_place_before_backward_is_an_error() -> None:
    model = nn.Linear(2, 2)
    loss = tp.compile(lambda x: model(x).sum())(tp.randn(3, 2))
    with tp.no_grad():
        model.weight.mul_(2.0)
    with pytest.raises(AutogradError, match="modified in place"):
        loss.backward()


def test_backward_twice_needs_retain_graph() -> None:
    w = tp.randn(2).requires_grad_(True)
    out = tp.compile(lambda x: (x * w).sum())(tp.ones(2))
    out.backward(retain_graph=True)
    out.backward()
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 2.0])
    with pytest.raises(AutogradError, match="second time"):
        out.backward()


def test_arguments_that_require_grad_get_their_gradient() -> None:
    x = tp.randn(4).requires_grad_(True)
    tp.compile(lambda x: (x.sin() * x).sum())(x).backward()
    expected = (x.detach().sin() + x.detach() * x.detach().cos()).numpy()
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_backward_inside_sets_grads_of_arguments_and_parameters() -> None:
    model = nn.Linear(3, 1)
    x = tp.randn(5, 3).requires_grad_(True)

    def f(x: Any) -> Any:
        loss = model(x).square().sum()
        loss.backward()
        return loss

    loss = tp.compile(f)(x)
    assert loss.grad_fn is None  # backward already ran inside
    got = [x.grad.numpy().copy()] + [p.grad.numpy().copy() for p in model.parameters()]
    x.grad = None
    model.zero_grad()
    model(x).square().sum().backward()
    expected = [x.grad.numpy()] + [p.grad.numpy() for p in model.parameters()]
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_in_place_updates_of_arguments_inside_the_function_write_back() -> None:
    def f(x: Any) -> Any:
        x.mul_(2.0)
        return x + 1

    x = tp.ones(3)
    out = tp.compile(f)(x)
    np.testing.assert_allclose(x.numpy(), [2.0, 2.0, 2.0])
    np.testing.assert_allclose(out.numpy(), [3.0, 3.0, 3.0])
    assert x._version is not None and x._version[0] >= 1


def test_optimizer_updates_happen_in_place_in_the_parameters_memory() -> None:
    model = nn.Linear(4, 3)
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    compiled = tp.compile(square_loss_step(model, opt))
    x = tp.randn(6, 4)
    arrays = [p._data for p in model.parameters()]
    versions = [p._version[0] if p._version else 0 for p in model.parameters()]
    for _ in range(3):
        compiled(x)
    assert all(p._data is a for p, a in zip(model.parameters(), arrays))  # the same memory, updated
    assert all((p._version[0] if p._version else 0) == v + 3 for p, v in zip(model.parameters(), versions))
    buffers = [opt.state[p]["momentum_buffer"] for p in model.parameters()]
    compiled(x)
    assert all(opt.state[p]["momentum_buffer"] is b for p, b in zip(model.parameters(), buffers))


OPTIMIZERS = {
    "sgd-momentum": (lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9), 1),
    "sgd-nesterov-decay": (lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01), 1),
    "sgd-dampening": (lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.5), 2),  # first buffer: g
    "adam": (lambda ps: optim.Adam(ps, lr=0.05), 1),
    "adamw-amsgrad": (lambda ps: optim.AdamW(ps, lr=0.05, weight_decay=0.1, amsgrad=True), 1),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_a_training_step_is_one_specialization_from_the_first_step(name: str) -> None:
    """The optimizer state the first step creates, and the .grad the later steps bring, change nothing:
    state entries start as zeros created by the first compiled call, exactly like the eager optimizer's."""
    make_opt, expected_compiles = OPTIMIZERS[name]
    tp.manual_seed(3)
    model = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2))
    twin = copy.deepcopy(model)
    opt, twin_opt = make_opt(model.parameters()), make_opt(twin.parameters())

    compiled = train_compiled_against_eager_twin(
        model, twin, opt, twin_opt, steps=4, shape=(6, 4), seed=0,
        after=lambda i: assert_optimizer_states_match(model.parameters(), twin.parameters(), opt, twin_opt,
                                                      f"step {i}"))
    assert compiled.compile_count == expected_compiles, [str(e) for e in compiled.recompile_reasons]


def test_a_gradient_read_before_zero_grad_keeps_its_guard() -> None:
    """Only a .grad dropped before anything ran is ignored: accumulating into it compiles per presence."""
    tp.manual_seed(4)
    model = nn.Linear(3, 1)
    twin = copy.deepcopy(model)

    def accumulate(x: Any) -> Any:
        loss = model(x).sum()
        loss.backward()  # adds to the .grad the call brings, if any
        return loss

    compiled = tp.compile(accumulate)
    x = tp.randn(2, 3)
    for _ in range(3):
        compiled(x)
        twin(x).sum().backward()
    for p, q in zip(model.parameters(), twin.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-6)
    assert compiled.compile_count == 2


def test_learning_rate_changes_need_no_recompilation() -> None:
    model = nn.Linear(2, 2)
    opt = optim.SGD(model.parameters(), lr=0.1)
    scheduler = optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)

    def step(x: Any) -> Any:
        opt.zero_grad()
        loss = model(x).sum()
        loss.backward()
        opt.step()
        return loss

    compiled = tp.compile(step)
    twin = copy.deepcopy(model)
    twin_opt = optim.SGD(twin.parameters(), lr=0.1)
    twin_scheduler = optim.lr_scheduler.StepLR(twin_opt, step_size=1, gamma=0.5)
    x = tp.randn(3, 2)
    for _ in range(6):
        compiled(x)
        scheduler.step()
        twin_opt.zero_grad()
        twin(x).sum().backward()
        twin_opt.step()
        twin_scheduler.step()
    for a, b in zip(model.parameters(), twin.parameters()):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6)
    # zero_grad() first drops the incoming .grad unread: one specialization for every step and learning rate
    assert compiled.compile_count == 1


# ---- errors -----------------------------------------------------------------------------------------------

class Sign(optim.Optimizer):
    """An optimizer compile does not know."""

    def __init__(self, params: Any) -> None:
        super().__init__(params, {"lr": 0.1})

    def _update_group(self, group: dict[str, Any]) -> None:
        for p in group["params"]:
            p._data -= group["lr"] * np.sign(p.grad._data)


def test_an_unsupported_optimizer_names_the_line_and_the_fix() -> None:
    model = nn.Linear(2, 1)
    opt = Sign(model.parameters())

    def step(x: Any) -> Any:
        loss = model(x).sum()
        loss.backward()
        opt.step()  # the line the error names
        return loss

    line = step.__code__.co_firstlineno + 3
    with pytest.raises(GraphCaptureError, match=rf"Sign.step\(\) inside a compiled function is not supported "
                                                rf"\(at .*test_compile_state.py:{line} in step\).*outside"):
        tp.compile(step)(tp.ones(3, 2))


def test_a_shape_error_inside_the_function_names_the_line() -> None:
    def bad(x: Any, y: Any) -> Any:
        return x @ y

    line = bad.__code__.co_firstlineno + 1
    with pytest.raises(tp.ShapeError, match=rf"test_compile_state.py:{line} in bad"):
        tp.compile(bad)(tp.ones(2, 3), tp.ones(2, 3))
    assert sys.getrecursionlimit() > 0
