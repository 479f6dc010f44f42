"""Random factories (``tp.randn``, ``tp.rand``, ``tp.randint``, ``tp.randn_like``, ``tp.rand_like``) and
dropout go through the interpreter that is running: inside ``tp.graph.trace`` they become random primitives
fed by a key input (fresh numbers at every call, the eager numbers for the same key), inside ``vmap`` they
follow its ``randomness`` policy, inside ``grad`` they draw as eagerly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.func import grad, vmap

FACTORIES: dict[str, Callable[[Any], Any]] = {
    "randn": lambda v: tp.randn(v.shape[-1], dtype=v.dtype),
    "rand": lambda v: tp.rand(v.shape[-1], dtype=v.dtype),
    "randint": lambda v: tp.randint(0, 1000, size=(v.shape[-1],)).to(v.dtype),
    "randn_like": lambda v: tp.randn_like(v),
    "rand_like": lambda v: tp.rand_like(v),
    "dropout": lambda v: tp.nn.functional.dropout(tp.ones_like(v), 0.5),
}


def noisy(factory: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: v + factory(v)


@pytest.mark.parametrize("name", FACTORIES)
def test_vmap_refuses_by_default_and_draws_per_sample_or_once(name: str) -> None:
    f = noisy(FACTORIES[name])
    x = tp.zeros(4, 16, dtype=tp.float64)
    with pytest.raises(RuntimeError, match="randomness='error'"):
        vmap(f)(x)
    rows = vmap(f, randomness="different")(x).numpy()
    assert len({r.tobytes() for r in rows}) == 4, rows
    same = vmap(f, randomness="same")(x).numpy()
    assert all(np.array_equal(same[0], r) for r in same)


@pytest.mark.parametrize("name", FACTORIES)
def test_a_traced_function_draws_fresh_numbers_every_call(name: str) -> None:
    f = noisy(FACTORIES[name])
    x = tp.zeros(16, dtype=tp.float64)
    tp.manual_seed(7)
    gm = tp.graph.trace(f, x)
    assert any(p.kind == "random_key" for p in gm.graph.placeholders)
    first, second = gm(x).numpy(), gm(x).numpy()
    assert not np.array_equal(first, second)
    tp.manual_seed(11)
    replay = gm(x).numpy()
    tp.manual_seed(11)
    eager = f(x).numpy()
    np.testing.assert_array_equal(replay, eager)  # the same key gives the eager numbers
    tp.manual_seed(11)
    np.testing.assert_array_equal(tp.graph.trace(f, x, execute=True)(x).numpy(), eager)


def test_tracing_does_not_advance_the_generator() -> None:
    tp.manual_seed(3)
    tp.graph.trace(lambda v: v + tp.randn(2), tp.zeros(2))
    after = tp.randn(2).numpy()
    tp.manual_seed(3)
    np.testing.assert_array_equal(after, tp.randn(2).numpy())


@pytest.mark.parametrize("name", ["randn", "rand", "randn_like", "dropout"])
def test_grad_through_a_function_that_draws(name: str) -> None:
    """Gradients treat the draw as a constant; the draw (and the generator's advance) is the eager one."""
    factory = FACTORIES[name]

    def f(v: Any) -> Any:
        return (v * v * factory(v)).sum()

    x = tp.tensor([0.5, -1.0, 2.0], dtype=tp.float64)
    tp.manual_seed(5)
    g = grad(f)(x)
    after = tp.randn(1).numpy()
    tp.manual_seed(5)
    draw = factory(x).numpy()
    np.testing.assert_allclose(g.numpy(), 2 * x.numpy() * draw, rtol=1e-12)
    np.testing.assert_array_equal(tp.randn(1).numpy(), after)  # grad advanced the generator like one eager call


def test_nested_vmap_gives_every_sample_pair_its_own_numbers() -> None:
    """Keys of nested splits depend on the order of the indices: sample (0, 1) and (1, 0) differ."""
    for factory in (FACTORIES["randn"], FACTORIES["dropout"]):
        f = vmap(vmap(noisy(factory), randomness="different"), randomness="different")
        out = f(tp.zeros(3, 3, 16, dtype=tp.float64)).numpy()
        samples = {out[i, j].tobytes() for i in range(3) for j in range(3)}
        assert len(samples) == 9


def test_random_factories_under_symbolic_shapes() -> None:
    gm = tp.graph.trace(lambda v: v + tp.randn_like(v), tp.zeros(4, 2), dynamic={0: {0: "B"}})
    assert gm(tp.zeros(6, 2)).shape == (6, 2)
    gm2 = tp.graph.trace(lambda v: v + tp.randn(v.shape[0], 2), tp.zeros(4, 2), dynamic={0: {0: "B"}})
    out = gm2(tp.zeros(5, 2)).numpy()
    assert out.shape == (5, 2) and len({r.tobytes() for r in out}) == 5


def test_map_draws_per_sample() -> None:
    out = tp.eager.map(1, tp.zeros(4, 3), lambda s: s + tp.rand(3)).numpy()
    assert len({r.tobytes() for r in out}) == 4
