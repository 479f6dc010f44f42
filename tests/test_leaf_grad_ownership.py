"""A leaf's new ``.grad`` takes the array a backward rule just computed when nothing else holds it
(no copy), and copies whatever someone else can see: the seed cotangent, cached constants, views and
broadcasts. Writing into ``.grad`` must never change another tensor."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay.interpreters.eager import tape

RNG = np.random.default_rng(5)


def _leaf(*shape: int) -> tp.Tensor:
    return tp.tensor(RNG.standard_normal(shape).astype(np.float32), requires_grad=True)


@pytest.mark.parametrize("flow", ["identity_add", "reshape", "expand", "twice", "seed_is_leaf", "transpose_and_add"])
def test_grad_never_aliases_the_seed_or_another_grad(flow: str) -> None:
    x = _leaf(3, 4)
    cot = tp.tensor(RNG.standard_normal((3, 4)).astype(np.float32))
    seed = cot.numpy().copy()
    if flow == "identity_add":
        (x + 0.0).backward(cot)
    elif flow == "reshape":
        x.reshape(12).backward(cot.reshape(12))
    elif flow == "expand":
        b = _leaf(4)
        (x + b).backward(cot)
        b.grad.numpy()[...] = 7.0
        np.testing.assert_array_equal(cot.numpy(), seed)
    elif flow == "twice":
        y = _leaf(3, 4)
        (x + y).backward(cot)
        y.grad.numpy()[...] = 3.0
        np.testing.assert_array_equal(x.grad.numpy(), seed)
    elif flow == "transpose_and_add":  # one cotangent array reaches two leaves, as itself and as a view
        y = _leaf(4, 3)
        (x + y.T).backward(cot)
        y.grad.numpy()[...] = 3.0
        np.testing.assert_array_equal(x.grad.numpy(), seed)
        y2 = _leaf(4, 3)
        x.grad = None
        (y2.T + x).backward(cot)
        x.grad.numpy()[...] = 3.0
        np.testing.assert_array_equal(y2.grad.numpy(), seed.T)
    else:
        x.backward(cot)
    x.grad.numpy()[...] = 5.0
    np.testing.assert_array_equal(cot.numpy(), seed)


def test_a_freshly_computed_grad_is_taken_without_a_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    copies = []
    real = np.array

    def counting_array(*args: object, **kwargs: object) -> object:
        copies.append(1)
        return real(*args, **kwargs)

    x = _leaf(8, 16)
    w, b = _leaf(16), _leaf(16)
    cot = tp.tensor(RNG.standard_normal((8, 16)).astype(np.float32))
    F.layer_norm(x, (16,), w, b, 1e-5).backward(cot)
    want = [a.grad.numpy().copy() for a in (x, w, b)]
    for a in (x, w, b):
        a.grad = None
    monkeypatch.setattr(tape.np, "array", counting_array)
    F.layer_norm(x, (16,), w, b, 1e-5).backward(cot)
    assert copies == []
    for a, got in zip((x, w, b), want):
        np.testing.assert_array_equal(a.grad.numpy(), got)
    # accumulation into an existing .grad adds into a new array
    F.layer_norm(x, (16,), w, b, 1e-5).backward(cot)
    np.testing.assert_allclose(x.grad.numpy(), 2 * want[0], rtol=1e-6)


def test_linear_layer_grads_are_taken_without_a_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The weight gradient of ``x @ w.T`` arrives as the transpose of a fresh array, the bias gradient as a
    same-shape view of a fresh sum: each is all of an array nothing else holds, so ``.grad`` takes it."""
    lin = tp.nn.Linear(16, 8)
    x = tp.tensor(RNG.standard_normal((5, 16)).astype(np.float32))
    cot = RNG.standard_normal((5, 8)).astype(np.float32)
    seed = tp.tensor(cot)
    params = [lin.weight.detach().numpy().copy(), lin.bias.detach().numpy().copy()]
    copies = []
    real = np.array

    def counting_array(*args: object, **kwargs: object) -> object:
        copies.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(tape.np, "array", counting_array)
    lin(x).backward(seed)
    monkeypatch.undo()
    assert copies == []
    gw, gb = lin.weight.grad.numpy(), lin.bias.grad.numpy()
    np.testing.assert_allclose(gw, cot.T.astype(np.float64) @ x.numpy().astype(np.float64), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gb, cot.astype(np.float64).sum(0), rtol=1e-5, atol=1e-5)
    for a in (gw, gb):
        for b in (lin.weight.detach().numpy(), lin.bias.detach().numpy(), x.numpy(), gw if a is gb else gb):
            assert not np.shares_memory(a, b)
    gw[...] = 1.0
    gb[...] = 2.0
    np.testing.assert_array_equal(lin.weight.detach().numpy(), params[0])
    np.testing.assert_array_equal(lin.bias.detach().numpy(), params[1])
