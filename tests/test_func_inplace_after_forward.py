"""An in-place update between an uncached transform's forward and its returned function is never silently
used: eagerly it is refused (the cached path keeps the forward's values: tests/test_func_cache.py); inside a
recording (compile, vmap) the forward's recorded values are used."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.errors import AutogradError
from tensorplay.func import linearize, vjp
from tensorplay.func.cache import set_caching


@pytest.fixture
def uncached() -> Iterator[None]:
    previous = set_caching(False)
    yield
    set_caching(previous)


def f(x: tp.Tensor) -> tp.Tensor:
    return (x * x).exp()


def df(x: np.ndarray) -> np.ndarray:
    return 2 * x * np.exp(x * x)


@pytest.mark.parametrize("update", ["add_", "mul_"])
def test_uncached_vjp_fn_refuses_a_primal_updated_in_place(uncached: None, update: str) -> None:
    x = tp.tensor([0.5, -1.0, 0.25])
    out, vjp_fn = vjp(f, x)
    getattr(x, update)(2.0)
    with pytest.raises(AutogradError, match=r"vjp_fn: primal 0 \(shape \[3\]\) was modified in place"):
        vjp_fn(tp.ones(3))


def test_uncached_vjp_fn_refuses_an_output_updated_in_place(uncached: None) -> None:
    x = tp.tensor([0.5, -1.0, 0.25])
    out, vjp_fn = vjp(f, x)  # exp's derivative reads its output
    out.mul_(0.0)
    with pytest.raises(AutogradError, match="output 0"):
        vjp_fn(tp.ones(3))


def test_uncached_jvp_fn_refuses_a_primal_updated_in_place(uncached: None) -> None:
    x = tp.tensor([0.5, -1.0, 0.25])
    out, jvp_fn = linearize(f, x)
    x.sub_(1.0)
    with pytest.raises(AutogradError, match=r"linearize: jvp_fn: primal 0"):
        jvp_fn(tp.ones(3))


@pytest.mark.parametrize("cached", [False, True])
def test_untouched_primals_give_the_forwards_derivative(cached: bool) -> None:
    previous = set_caching(cached)
    try:
        data = np.array([0.5, -1.0, 0.25], dtype=np.float32)
        x = tp.tensor(data)
        other = tp.tensor(data.copy())
        _, vjp_fn = vjp(f, x)
        _, jvp_fn = linearize(f, x)
        other.add_(1.0)  # another tensor's update is no reason to refuse
        np.testing.assert_allclose(vjp_fn(tp.ones(3))[0].numpy(), df(data), rtol=1e-5)
        np.testing.assert_allclose(jvp_fn(tp.ones(3)).numpy(), df(data), rtol=1e-5)
    finally:
        set_caching(previous)


def test_cached_vjp_fn_uses_the_forwards_values_after_an_update() -> None:
    previous = set_caching(True)
    try:
        data = np.array([0.5, -1.0, 0.25], dtype=np.float32)
        for _ in range(3):  # the first call fills the cache, the next ones run from it
            x = tp.tensor(data.copy())
            _, vjp_fn = vjp(f, x)
            x.add_(2.0)
            np.testing.assert_allclose(vjp_fn(tp.ones(3))[0].numpy(), df(data), rtol=1e-5)
    finally:
        set_caching(previous)


# ---- inside a recording: the forward's (recorded, immutable) values are used, as the cached eager call does ----

def _vjp_then_update(x: tp.Tensor, update: str) -> tp.Tensor:
    out, vjp_fn = vjp(f, x)
    getattr(x, update)(2.0)
    out.mul_(0.0)  # the output too (exp's derivative reads it)
    (g,) = vjp_fn(tp.ones_like(out))
    return g  # type: ignore[no-any-return]


def _linearize_then_update(x: tp.Tensor, update: str) -> tp.Tensor:
    out, jvp_fn = linearize(f, x)
    getattr(x, update)(2.0)
    return jvp_fn(tp.ones_like(x))  # type: ignore[no-any-return]


X0 = np.array([0.5, -1.0, 0.25], np.float32)


@pytest.mark.parametrize("update", ["add_", "mul_"])
@pytest.mark.parametrize("body", [_vjp_then_update, _linearize_then_update])
@pytest.mark.parametrize("way", ["compile", "vmap"])
def test_inside_a_recording_the_forwards_values_are_used(body: object, update: str, way: str) -> None:
    from tensorplay.func import vmap

    def run(x: tp.Tensor) -> tp.Tensor:
        return body(x.clone(), update)  # type: ignore[operator,no-any-return]

    if way == "compile":
        got = tp.compile(run)(tp.tensor(X0)).numpy()
        expected = df(X0)
    else:
        rows = np.stack([X0, 2 * X0])
        got = vmap(run)(tp.tensor(rows)).numpy()
        expected = df(rows)  # one row each: the rows' own derivatives, not a shared or updated one
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_inside_a_recording_the_update_itself_still_holds_afterwards() -> None:
    def run(x: tp.Tensor) -> tuple[tp.Tensor, tp.Tensor]:
        y = x.clone()
        out, vjp_fn = vjp(f, y)
        y.add_(2.0)
        (g,) = vjp_fn(tp.ones_like(out))
        return g, y * 1.0  # y after the call: the updated value, not the forward's

    g, y = tp.compile(run)(tp.tensor(X0))
    np.testing.assert_allclose(g.numpy(), df(X0), rtol=1e-6)
    np.testing.assert_allclose(y.numpy(), X0 + 2.0, rtol=1e-6)
