"""``grad`` inside a symbolic transform trace (``vmap(grad(f))``) records ``f`` straight into that trace: no graph
of its own replayed into it. Results are checked against PyTorch; the cases are the ones where recording into the
caller's trace could go wrong: the differentiated input is the mapped one, closed over as well, returned as aux,
kept by ``f``, rebound in place, a nested ``grad``, and an error raised inside ``f`` and caught."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay.func import grad, vmap
from tensorplay.func.cache import set_caching
from tensorplay.errors import GraphCaptureError
from tensorplay.interpreters.graph.recorder import Recorder

XS = np.linspace(-1.0, 1.5, 12, dtype=np.float32).reshape(4, 3)


@pytest.fixture(autouse=True)
def uncached() -> Any:
    previous = set_caching(False)  # the first call of a transformed function: what runs uncached
    yield
    set_caching(previous)


@pytest.fixture
def no_replay(monkeypatch: Any) -> list[int]:
    """Counts Recorder.replay calls (the replay of a grad's own trace into vmap's)."""
    calls: list[int] = []
    original = Recorder.replay

    def counting(self: Any, nodes: Any, env: Any) -> None:
        calls.append(len(nodes))
        original(self, nodes, env)

    monkeypatch.setattr(Recorder, "replay", counting)
    return calls


def _close(got: Any, expected: torch.Tensor) -> None:
    np.testing.assert_allclose(got.numpy(), expected.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_per_sample_gradients_of_an_mlp_record_the_loss_once_and_match_torch(no_replay: list[int]) -> None:
    gen = np.random.default_rng(0)
    w1, b1 = gen.standard_normal((5, 3)).astype(np.float32), gen.standard_normal(5).astype(np.float32)
    w2, b2 = gen.standard_normal((2, 5)).astype(np.float32), gen.standard_normal(2).astype(np.float32)
    y = np.array([0, 1, 1, 0])

    def loss(l1: Any, l2: Any, x: Any, t: Any) -> Any:
        return F.cross_entropy(F.linear(F.linear(x[None], *l1).tanh(), *l2), t[None])

    def tloss(l1: Any, l2: Any, x: Any, t: Any) -> Any:
        return torch.nn.functional.cross_entropy(torch.nn.functional.linear(
            torch.nn.functional.linear(x[None], *l1).tanh(), *l2), t[None])

    tp_params = ((tp.tensor(w1), tp.tensor(b1)), (tp.tensor(w2), tp.tensor(b2)))
    t_params = ((torch.tensor(w1), torch.tensor(b1)), (torch.tensor(w2), torch.tensor(b2)))
    got = vmap(grad(loss, argnums=(0, 1)), in_dims=(None, None, 0, 0))(*tp_params, tp.tensor(XS), tp.tensor(y))
    expected = torch.func.vmap(torch.func.grad(tloss, argnums=(0, 1)), in_dims=(None, None, 0, 0))(
        *t_params, torch.tensor(XS), torch.tensor(y))
    for g, e in zip(got, expected):
        for a, b in zip(g, e):
            _close(a, b)
    assert no_replay == []


def test_the_mapped_input_differentiated_and_closed_over_as_well(no_replay: list[int]) -> None:
    # d/dw (w * x).sum() at w = x is x: the closed-over x is not the differentiated w
    got = vmap(lambda x: grad(lambda w: (w * x).sum())(x))(tp.tensor(XS))
    _close(got, torch.tensor(XS))
    got2 = vmap(lambda x: grad(lambda w: (w * w * x).sum())(x))(tp.tensor(XS))
    xt = torch.tensor(XS)
    _close(got2, 2 * xt * xt)
    assert no_replay == []


def test_aux_returning_the_input_reads_the_input_and_a_kept_input_is_refused(no_replay: list[int]) -> None:
    kept: list[Any] = []

    def f(w: Any) -> Any:
        kept.append(w)
        return (w.sin() * 2.0).sum(), w

    def per_sample(x: Any) -> Any:
        g, aux = grad(f, has_aux=True)(x)
        return g + aux  # cos(x) * 2 + x

    got = vmap(per_sample)(tp.tensor(XS))
    xt = torch.tensor(XS)
    _close(got, 2 * xt.cos() + xt)
    assert no_replay == []

    def escaping(x: Any) -> Any:
        grad(f, has_aux=True)(x)
        return x + kept[-1]  # f's handle on its input escaped from the call

    with pytest.raises(GraphCaptureError, match="recording that has finished"):
        vmap(escaping)(tp.tensor(XS))


def test_an_input_rebound_in_place_and_a_nested_grad_match_torch(no_replay: list[int]) -> None:
    def f(w: Any) -> Any:
        w = w * 1.0
        w.mul_(3.0)
        return (w * w).sum()

    _close(vmap(grad(f))(tp.tensor(XS)), 18 * torch.tensor(XS))

    def g(w: Any) -> Any:
        return (w ** 3).sum()

    def tg(w: torch.Tensor) -> torch.Tensor:
        return (w ** 3).sum()

    got = vmap(grad(lambda w: grad(g)(w).sum()))(tp.tensor(XS))
    _close(got, torch.func.vmap(torch.func.grad(lambda w: torch.func.grad(tg)(w).sum()))(torch.tensor(XS)))
    assert no_replay == []


def test_an_error_inside_the_function_caught_by_the_mapped_function_leaves_a_working_trace(
        no_replay: list[int]) -> None:
    def bad(w: Any) -> Any:
        return w.sum() + tp.ones(2, 2).sum(axis=5)  # axis out of range

    def per_sample(x: Any) -> Any:
        try:
            grad(bad)(x)
        except Exception as error:  # noqa: BLE001 - the error is the point
            assert "axis" in str(error)
        return grad(lambda w: (w * w).sum())(x)

    _close(vmap(per_sample)(tp.tensor(XS)), 2 * torch.tensor(XS))
    assert no_replay == []


def test_a_rule_transposing_back_what_it_was_given_records_nothing() -> None:
    """matmul's vjp of ``x @ w.T`` transposes ``w.T`` back: a walker's emission of a permute undoing a permute
    is the original value; the user's own ``x.T.T`` (a view that may be written through) is recorded."""
    from tensorplay.interpreters.graph.ir import Location
    from tensorplay.spec.aval import Aval

    rec = Recorder()
    x = rec.input("x", Aval((2, 3, 4), "float32"))
    y = rec.permute(x, perm=(2, 0, 1))
    assert rec.permute(y, perm=(1, 2, 0))._data is not x._data  # the user's own calls: recorded as views
    rec.location_override = Location("rule.py", 1, "rule")
    assert rec.permute(y, perm=(1, 2, 0))._data is x._data  # undoes (2, 0, 1)
    assert rec.permute(y, perm=(2, 0, 1))._data is not x._data  # does not undo it
    rec.close()
    gen = np.random.default_rng(1)
    w, xs = gen.standard_normal((3, 4)).astype(np.float32), gen.standard_normal((5, 4)).astype(np.float32)
    got = vmap(grad(lambda x, w: (x @ w.T).tanh().sum(), argnums=(0, 1)), in_dims=(0, None))(
        tp.tensor(xs), tp.tensor(w))
    expected = torch.func.vmap(torch.func.grad(lambda x, w: (x @ w.T).tanh().sum(), argnums=(0, 1)),
                               in_dims=(0, None))(torch.tensor(xs), torch.tensor(w))
    for a, b in zip(got, expected):
        _close(a, b)


def test_nested_maps_and_an_outer_grad_around_the_inline_grad_match_torch(no_replay: list[int]) -> None:
    xs = np.linspace(-1.0, 1.0, 6, dtype=np.float32).reshape(2, 3)
    a = np.array([0.5, -2.0], dtype=np.float32)

    # vmap(vmap(grad)) with the inner function closing over the outer vmap's sample
    got = vmap(lambda s, row: vmap(grad(lambda w: (w * w * s).sum()))(row[:, None]))(tp.tensor(a), tp.tensor(xs))
    expected = torch.func.vmap(lambda s, row: torch.func.vmap(torch.func.grad(lambda w: (w * w * s).sum()))(
        row[:, None]))(torch.tensor(a), torch.tensor(xs))
    _close(got, expected)

    # grad around vmap(grad): the inline trace is itself differentiated
    def outer(w: Any, x: Any) -> Any:
        return vmap(grad(lambda v: (v * w).tanh().sum()))(x).sum()

    def touter(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.func.vmap(torch.func.grad(lambda v: (v * w).tanh().sum()))(x).sum()

    w = np.array([0.3, -0.7, 1.1], dtype=np.float32)
    _close(grad(outer)(tp.tensor(w), tp.tensor(xs)), torch.func.grad(touter)(torch.tensor(w), torch.tensor(xs)))
    assert no_replay == []
