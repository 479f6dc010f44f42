"""``argnums`` given out of order (``(1, 0)``, ``(2, 0, 1)``, ``(-1, 0)``): the results come in the order
``argnums`` names the arguments, as in ``torch.func`` and JAX, for every transform that takes ``argnums``,
cached and uncached, inside ``vmap`` and under ``tp.compile``; a pytree argument keeps its structure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.func as TF

import tensorplay as tp
import tensorplay.func as T
from tensorplay.func.cache import set_caching
from tensorplay.pytree import tree_flatten

_RNG = np.random.default_rng(3)
_DATA = [_RNG.standard_normal(3), _RNG.standard_normal(3), _RNG.standard_normal(3)]


def _scalar(lib: Any) -> Callable[..., Any]:
    """A scalar function whose derivatives differ per argument (the third is a pair: a pytree)."""
    def f(a: Any, b: Any, c: Any) -> Any:
        return (a * a * 2.0 + b.tanh() * 10.0 + a * b + c[0] * 3.0 * c[1]).sum()
    return f


def _vector(lib: Any) -> Callable[..., Any]:
    def f(a: Any, b: Any, c: Any) -> Any:
        return a * 2.0 + b.sin() * 10.0 + c[0] * a * c[1]
    return f


PAIRS = {"grad": (T.grad, TF.grad, _scalar), "grad_and_value": (T.grad_and_value, TF.grad_and_value, _scalar),
         "jacrev": (T.jacrev, TF.jacrev, _vector), "jacfwd": (T.jacfwd, TF.jacfwd, _vector),
         "hessian": (T.hessian, TF.hessian, _scalar)}


def _args(lib: Any) -> tuple[Any, ...]:
    a, b, c = (lib.tensor(x) for x in _DATA)
    return a, b, (c, lib.tensor(_DATA[0] + 1.0))


def _same(got: Any, want: Any) -> None:
    g, w = tree_flatten(got)[0], torch.utils._pytree.tree_flatten(want)[0]
    assert len(g) == len(w)
    for x, y in zip(g, w):
        np.testing.assert_allclose(x.numpy(), y.detach().numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(PAIRS))
@pytest.mark.parametrize("argnums", [(1, 0), (2, 0, 1), (-1, 0), (0, 2), 1])
@pytest.mark.parametrize("cached", [False, True])
def test_results_come_in_argnums_order(name: str, argnums: Any, cached: bool) -> None:
    ours, theirs, make = PAIRS[name]
    # torch.func's jacfwd (and hessian) of argnums=-1 give zeros in 2.13: the reference gets the positions
    positions = argnums % 3 if isinstance(argnums, int) else tuple(a % 3 for a in argnums)
    want = theirs(make(torch), argnums=positions)(*_args(torch))
    previous = set_caching(cached)
    try:
        transformed = ours(make(tp), argnums=argnums)
        for _ in range(3):  # uncached, traced into the cache, from the cache
            _same(transformed(*_args(tp)), want)
    finally:
        set_caching(previous)


@pytest.mark.parametrize("name", ["grad", "jacrev", "jacfwd"])
def test_argnums_order_under_vmap_and_compile(name: str) -> None:
    ours, theirs, make = PAIRS[name]
    rows = _RNG.standard_normal((4, 3))
    want = torch.func.vmap(theirs(make(torch), argnums=(1, 0)), in_dims=(None, 0, None))(
        torch.tensor(_DATA[0]), torch.tensor(rows), (torch.tensor(_DATA[2]), torch.tensor(_DATA[0] + 1.0)))
    mapped = T.vmap(ours(make(tp), argnums=(1, 0)), in_dims=(None, 0, None))
    args = (tp.tensor(_DATA[0]), tp.tensor(rows), (tp.tensor(_DATA[2]), tp.tensor(_DATA[0] + 1.0)))
    _same(mapped(*args), want)
    _same(tp.compile(mapped)(*args), want)
