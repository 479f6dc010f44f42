"""The elementwise binary vjp rules build no cotangent for an input that needs none (``input_needed``):
the cotangent asked for is unchanged, the other is ``None``, and a transform's trace records no operation
for it (a loss divided by a count of targets records nothing for the count). Checked against PyTorch."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay.func import grad, vmap
from tensorplay.func.tracing import trace_for_transform
from tensorplay.pytree import tree_flatten
from tensorplay.rules.util import set_needed_inputs
from tensorplay.rules.vjp import VJP_RULES

_RNG = np.random.default_rng(3)
_X = _RNG.uniform(0.5, 2.0, (3, 4))
_Y = _RNG.uniform(0.5, 2.0, (4,))  # broadcast: its cotangent is reduced to (4,)


def _rule_cotangents(name: str, mask: tuple[bool, ...] | None, dtype: str) -> tuple[Any, ...]:
    inputs: tuple[Any, ...]
    if name == "where":
        cond = tp.tensor(_X > 1.0)
        inputs = (cond, tp.tensor(_X.astype(dtype)), tp.tensor(_Y.astype(dtype)))
    else:
        inputs = (tp.tensor(_X.astype(dtype)), tp.tensor(_Y.astype(dtype)))
    out = getattr(tp.eager, name)(*inputs)
    g = tp.tensor(np.random.default_rng(4).standard_normal(tuple(out.shape)).astype(dtype))  # the same each call
    set_needed_inputs(mask)
    try:
        return VJP_RULES[name](tp.eager, g, inputs, out)
    finally:
        set_needed_inputs(None)


_BINARY = ["add", "sub", "mul", "div", "pow", "atan2", "maximum", "minimum", "where"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", _BINARY)
def test_a_rule_skips_exactly_the_cotangents_nobody_needs(name: str, dtype: str) -> None:
    first = 1 if name == "where" else 0  # where's condition never gets one
    full = _rule_cotangents(name, None, dtype)
    assert all(c is not None for c in full[first:])
    for wanted in range(first, len(full)):
        mask = tuple(i == wanted for i in range(len(full)))
        part = _rule_cotangents(name, mask, dtype)
        for i, c in enumerate(part):
            if i == wanted:
                assert c is not None and c.shape == full[i].shape and c.dtype == full[i].dtype
                np.testing.assert_array_equal(c.numpy(), full[i].numpy())
            else:
                assert c is None, (name, mask, i)


def test_a_mean_loss_records_nothing_for_its_count_and_matches_torch() -> None:
    """``cross_entropy``'s mean divides by the number of counted targets: a value of the targets, so the
    gradient trace has no division by the count squared (before: 4 operations for a cotangent nobody used)."""
    w = tp.tensor(_RNG.standard_normal((5, 3)).astype(np.float32))
    x = tp.tensor(_RNG.standard_normal((4, 3)).astype(np.float32))
    y = tp.tensor(np.array([0, 4, -100, 2]))

    def loss(w: Any, x: Any, y: Any) -> Any:
        return F.cross_entropy(x @ w.T, y)

    leaves, spec = tree_flatten((w, x, y))
    traced = trace_for_transform(grad(loss), leaves, spec, [0, 1], "grad")  # the forward and its sweep
    targets = [n.target for n in traced.graph.nodes]
    # the forward mean and its cotangent g / count; the count's cotangent (-g * total / count**2, two
    # more divisions) is not built
    assert targets.count("div") == 2, targets
    wt = torch.tensor(w.numpy(), requires_grad=True)
    torch.nn.functional.cross_entropy(torch.tensor(x.numpy()) @ wt.T, torch.tensor(y.numpy())).backward()
    np.testing.assert_allclose(grad(loss)(w, x, y).numpy(), wt.grad.numpy(), rtol=1e-5, atol=1e-7)
    per_sample = vmap(grad(lambda w, x, y: F.cross_entropy((x @ w.T)[None], y[None])), in_dims=(None, 0, 0))
    got = per_sample(w, x, y).numpy()
    for i in range(4):
        wt = torch.tensor(w.numpy(), requires_grad=True)
        logits = (torch.tensor(x.numpy()[i:i + 1]) @ wt.T)
        torch.nn.functional.cross_entropy(logits, torch.tensor(y.numpy()[i:i + 1])).backward()
        np.testing.assert_allclose(got[i], wt.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_a_quotient_by_a_differentiated_denominator_still_gets_both_cotangents() -> None:
    """The skip follows the mask, not the operand: a denominator that depends on the input keeps its term."""
    x0 = np.array([0.5, 1.5, -2.0], dtype=np.float64)

    def f(x: Any) -> Any:
        return (x / (x * x + 1.0)).sum()

    got = grad(f)(tp.tensor(x0)).numpy()
    expected = torch.func.grad(lambda v: (v / (v * v + 1.0)).sum())(torch.tensor(x0)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    xt = tp.tensor(x0, requires_grad=True)
    (gx,) = tp.autograd.grad(f(xt), [xt], create_graph=True)
    np.testing.assert_allclose(gx.detach().numpy(), expected, rtol=1e-12)
