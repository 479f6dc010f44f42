"""optim.LBFGS against torch.optim.LBFGS: the same parameters after each step, the same closure evaluations,
the state carried between steps, state dicts, and the errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.optim.line_search import cubic_minimum

torch = pytest.importorskip("torch")


def _problem(kind: str, dtype: str, seed: int = 0) -> tuple[list[np.ndarray], Callable[..., Any]]:
    """Start values and ``loss(lib, params)`` of a test problem, written once for both libraries."""
    rng = np.random.default_rng(seed)
    if kind == "rosenbrock":
        start = [np.array([-1.5, 2.0], dtype=dtype), np.array([1.2, 0.7, -0.4], dtype=dtype)]

        def loss(lib: Any, ps: list[Any]) -> Any:
            x = lib.cat([ps[0], ps[1]])
            return (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()
        return start, loss
    a = rng.standard_normal((20, 4)).astype(dtype)
    labels = (rng.random(20) > 0.5).astype(dtype)
    start = [0.1 * rng.standard_normal((4, 1)).astype(dtype), np.zeros(1, dtype)]

    def logistic(lib: Any, ps: list[Any]) -> Any:
        z = (lib.tensor(a) @ ps[0]).reshape(-1) + ps[1]
        y = lib.tensor(labels)
        return (lib.nn.functional.softplus(z) - y * z).mean() + 0.01 * (ps[0] ** 2).sum()
    return start, logistic


def _run(lib: Any, start: list[np.ndarray], loss: Callable[..., Any], steps: int,
         **options: Any) -> tuple[list[list[np.ndarray]], list[float], Any, int]:
    params = [lib.tensor(v.copy(), requires_grad=True) for v in start]
    opt = lib.optim.LBFGS(params, **options)
    calls = [0]

    def closure() -> Any:
        calls[0] += 1
        opt.zero_grad()
        value = loss(lib, params)
        value.backward()
        return value

    trajectory, returned = [], []
    for _ in range(steps):
        returned.append(float(opt.step(closure).detach()))
        trajectory.append([p.detach().numpy().copy() for p in params])
    return trajectory, returned, opt, calls[0]


CASES = [
    ("rosenbrock", {}),
    ("rosenbrock", {"line_search_fn": "strong_wolfe"}),
    ("rosenbrock", {"line_search_fn": "strong_wolfe", "history_size": 3, "max_iter": 7}),
    ("rosenbrock", {"lr": 0.1, "history_size": 2}),
    ("logistic", {}),
    ("logistic", {"line_search_fn": "strong_wolfe", "max_iter": 5, "max_eval": 6}),
    ("logistic", {"tolerance_grad": 1e-3, "max_iter": 50}),
]


@pytest.mark.parametrize("kind, options", CASES)
def test_lbfgs_follows_torch_step_by_step_in_float64(kind: str, options: dict[str, Any]) -> None:
    start, loss = _problem(kind, "float64")
    ours, our_losses, our_opt, our_calls = _run(tp, start, loss, 4, **options)
    theirs, their_losses, their_opt, their_calls = _run(torch, start, loss, 4, **options)
    assert our_calls == their_calls  # the same closure evaluations: stopping tests and line search agree
    np.testing.assert_allclose(our_losses, their_losses, rtol=1e-9, atol=1e-12)
    for step, (a, b) in enumerate(zip(ours, theirs)):
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-9, err_msg=f"step {step}")  # ~80 iterations of rounding
    ours_state = our_opt.state[our_opt.param_groups[0]["params"][0]]
    theirs_state = their_opt.state[their_opt.param_groups[0]["params"][0]]
    assert ours_state["n_iter"] == theirs_state["n_iter"]
    assert ours_state["func_evals"] == theirs_state["func_evals"]
    assert len(ours_state["old_dirs"]) == len(theirs_state["old_dirs"])


def test_lbfgs_float32_stays_close_to_torch_and_float32() -> None:
    start, loss = _problem("logistic", "float32")
    ours, *_ = _run(tp, start, loss, 3, line_search_fn="strong_wolfe")
    theirs, *_ = _run(torch, start, loss, 3, line_search_fn="strong_wolfe")
    for a, b in zip(ours[-1], theirs[-1]):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)


def test_lbfgs_minimises_rosenbrock() -> None:
    _, loss = _problem("rosenbrock", "float64")
    start = [np.array([-1.2]), np.array([1.0])]  # the classic start of the 2-d function: its only minimum is (1, 1)
    trajectory, *_ = _run(tp, start, loss, 10, line_search_fn="strong_wolfe")
    np.testing.assert_allclose(np.concatenate(trajectory[-1]), np.ones(2), atol=1e-4)  # stops on the loss change


def test_lbfgs_returns_the_first_loss_and_stops_at_a_zero_gradient() -> None:
    w = tp.tensor([3.0], requires_grad=True)
    opt = tp.optim.LBFGS([w])
    calls = [0]

    def closure() -> Any:
        calls[0] += 1
        opt.zero_grad()
        value = ((w - 3.0) ** 2).sum()
        value.backward()
        return value

    assert float(opt.step(closure)) == 0.0
    assert calls[0] == 1 and float(w.detach().numpy()[0]) == 3.0  # max |g| <= tolerance_grad at once


def test_lbfgs_state_dict_round_trip_continues_identically() -> None:
    start, loss = _problem("rosenbrock", "float64")

    def build() -> tuple[Any, list[Any], Callable[[], Any]]:
        params = [tp.tensor(v.copy(), requires_grad=True) for v in start]
        opt = tp.optim.LBFGS(params, history_size=4)

        def closure() -> Any:
            opt.zero_grad()
            value = loss(tp, params)
            value.backward()
            return value
        return opt, params, closure

    opt, params, closure = build()
    opt.step(closure)
    saved = opt.state_dict()
    copy_opt, copy_params, copy_closure = build()
    for p, q in zip(copy_params, params):
        p._data[...] = q._data
    copy_opt.load_state_dict(saved)
    opt.step(closure)
    copy_opt.step(copy_closure)
    for p, q in zip(params, copy_params):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    # a state dict from torch's LBFGS loads too (tensors become arrays)
    torch_params = [torch.tensor(v.copy(), requires_grad=True) for v in start]
    torch_opt = torch.optim.LBFGS(torch_params, history_size=4)

    def torch_closure() -> Any:
        torch_opt.zero_grad()
        value = loss(torch, torch_params)
        value.backward()
        return value
    torch_opt.step(torch_closure)
    _, fresh_params, fresh_closure = build()
    fresh = tp.optim.LBFGS(fresh_params, history_size=4)
    for p, q in zip(fresh_params, torch_params):
        p._data[...] = q.detach().numpy()
    fresh.load_state_dict(torch_opt.state_dict())
    state = fresh.state[fresh_params[0]]
    assert isinstance(state["d"], np.ndarray) and state["d"].shape == (5,)


def test_cubic_minimum_finds_the_minimiser_of_a_cubic() -> None:
    # f(x) = (x - 1)^2 (x + 2) has a local minimum at x = 1; slopes from f'(x) = 3x^2 - 3
    f = lambda x: (x - 1) ** 2 * (x + 2)  # noqa: E731
    fp = lambda x: 3 * x * x - 3  # noqa: E731
    assert cubic_minimum(0.0, f(0.0), fp(0.0), 2.0, f(2.0), fp(2.0)) == pytest.approx(1.0)
    assert cubic_minimum(2.0, f(2.0), fp(2.0), 0.0, f(0.0), fp(0.0)) == pytest.approx(1.0)
    assert cubic_minimum(0.0, f(0.0), fp(0.0), 2.0, f(2.0), fp(2.0), bounds=(1.5, 3.0)) == 1.5


def test_lbfgs_errors() -> None:
    w = tp.tensor([1.0], requires_grad=True)
    v = tp.tensor([1.0], requires_grad=True)
    with pytest.raises(tp.optim.OptimizerError, match="parameter groups"):
        tp.optim.LBFGS([{"params": [w]}, {"params": [v]}])
    with pytest.raises(tp.optim.OptimizerError, match="line_search_fn must be None or 'strong_wolfe'"):
        tp.optim.LBFGS([w], line_search_fn="armijo")
    with pytest.raises(tp.optim.OptimizerError, match="max_iter must be a positive int"):
        tp.optim.LBFGS([w], max_iter=0)
    with pytest.raises(tp.optim.OptimizerError, match="one dtype"):
        tp.optim.LBFGS([w, tp.tensor(np.ones(1), requires_grad=True)])
    opt = tp.optim.LBFGS([w])
    with pytest.raises(TypeError, match="requires a closure"):
        opt.step()
    with pytest.raises(tp.optim.OptimizerError, match="add_param_group"):
        opt.add_param_group({"params": [v]})


def test_lbfgs_refuses_tp_compile_and_steps_a_compiled_closure() -> None:
    w = tp.tensor(np.array([2.0, -1.0]), requires_grad=True)
    opt = tp.optim.LBFGS([w], line_search_fn="strong_wolfe")

    @tp.compile
    def loss_and_grad() -> Any:
        opt.zero_grad()
        value = ((w - 1.0) ** 2).sum() + (w ** 4).sum()
        value.backward()
        return value

    for _ in range(3):
        opt.step(loss_and_grad)
    reference = torch.tensor([2.0, -1.0], dtype=torch.float64, requires_grad=True)
    torch_opt = torch.optim.LBFGS([reference], line_search_fn="strong_wolfe")

    def torch_closure() -> Any:
        torch_opt.zero_grad()
        value = ((reference - 1.0) ** 2).sum() + (reference ** 4).sum()
        value.backward()
        return value
    for _ in range(3):
        torch_opt.step(torch_closure)
    np.testing.assert_allclose(w.detach().numpy(), reference.detach().numpy(), rtol=1e-9)

    @tp.compile
    def whole_step() -> Any:
        return opt.step(loss_and_grad)

    with pytest.raises(tp.GraphCaptureError, match="LBFGS.step cannot run inside tp.compile"):
        whole_step()
