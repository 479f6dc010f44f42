"""``tp.compile(..., dynamic=True)`` of the transforms: a transform traced inside the capture executes with
the sizes the capture bound to its symbolic dims, so functions that read sizes (a mean, a cross-entropy's
row count, ``x.shape[0]`` as a number) are traced once and agree with eager at every batch size."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.func as T
import tensorplay.nn.functional as F
from tensorplay.pytree import tree_flatten

_RNG = np.random.default_rng(7)
_W = _RNG.standard_normal((3, 5))
_B = _RNG.standard_normal(3)


def _loss(w: Any, b: Any, x: Any, t: Any) -> Any:
    return F.cross_entropy(F.linear(x, w, b), t) + x.mean() * (w * w).sum()


def _per_column(x: Any) -> Any:
    return (x.tanh() * x.shape[0]).sum(dim=0) / x.shape[-1]


def _row_means(x: Any) -> Any:
    return (x * x).mean(dim=1)


def _scalar(r: Any) -> Any:
    return (r.tanh() ** 2).sum() / r.shape[0]


CASES: dict[str, tuple[Callable[..., Any], bool]] = {
    "grad": (lambda *a: T.grad(_loss, argnums=(0, 1))(*a), True),
    "grad_and_value": (lambda *a: T.grad_and_value(_loss, argnums=(0, 1))(*a), True),
    "vjp": (lambda x: T.vjp(_per_column, x)[1](tp.tensor(np.linspace(-1.0, 1.0, 5))), False),
    "jvp": (lambda x: T.jvp(_per_column, (x,), (tp.ones_like(x),)), False),
    "linearize": (lambda x: T.linearize(_per_column, x)[1](x * 0.5), False),
    "jacrev": (lambda x: T.jacrev(_row_means)(x), False),
    "jacfwd": (lambda x: T.jacfwd(_row_means)(x), False),
    "hessian": (lambda x: T.hessian(_scalar)(x[0]), False),
    "vmap(grad)": (lambda x: T.vmap(T.grad(_scalar))(x), False),
    "grad(grad)": (lambda x: T.grad(lambda v: T.grad(_scalar)(v).sum() / v.shape[0])(x[0]), False),
}


def _args(labelled: bool, m: int) -> tuple[Any, ...]:
    x = tp.tensor(_RNG.standard_normal((m, 5)))
    return (tp.tensor(_W), tp.tensor(_B), x, tp.tensor(_RNG.integers(0, 3, m))) if labelled else (x,)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_transform_compiled_with_a_symbolic_batch_matches_eager_at_every_size(name: str) -> None:
    fn, labelled = CASES[name]
    compiled = tp.compile(fn, dynamic=True)
    for m in (4, 7, 2):
        args = _args(labelled, m)
        got, want = tree_flatten(compiled(*args))[0], tree_flatten(fn(*args))[0]
        assert len(got) == len(want) > 0
        for g, e in zip(got, want):
            assert g.shape == e.shape and g.dtype == e.dtype
            np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-10, atol=1e-12, err_msg=f"{name}, batch {m}")
    assert compiled.compile_count == 1, compiled.recompile_reasons
