"""The backward of slicing and basic indexing hands the tape padded cotangents
(:mod:`tensorplay.interpreters.eager.padded`): the pieces of one tensor are merged and made dense once.
Checked through ``backward`` and ``autograd.grad`` against PyTorch, for disjoint, overlapping and
reversed slices, indexing, a tensor used both sliced and whole, a sliced leaf, and higher derivatives
(which take the composite rules)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tensorplay as tp  # noqa: E402
from tensorplay.interpreters.eager import fused_vjp  # noqa: E402
from tensorplay.interpreters.eager.padded import PaddedCotangent, add_cotangents, dense  # noqa: E402

RNG = np.random.default_rng(5)


def _both(fn: Callable[[Any], Any], shape: tuple[int, ...], dt: Any) -> tuple[np.ndarray, np.ndarray]:
    """The gradient of ``fn(x).sum()`` by tensorplay and by PyTorch (float64 there)."""
    x = RNG.standard_normal(shape).astype(dt)
    ours = tp.tensor(x, requires_grad=True)
    fn(ours).sum().backward()
    theirs = torch.tensor(x.astype(np.float64), requires_grad=True)
    fn(theirs).sum().backward()
    assert ours.grad is not None and theirs.grad is not None
    return ours.grad.numpy(), theirs.grad.numpy()


PATTERNS: dict[str, Callable[[Any], Any]] = {
    "four gates": lambda x: x[:, 0:3].sigmoid() * x[:, 3:6].tanh() + x[:, 6:9].sigmoid() * x[:, 9:12],
    "overlapping": lambda x: x[:, 0:8] * 2.0 + x[:, 4:12] * x[:, 4:12],
    "strided": lambda x: x[:, ::3] * x[:, 1::3].sum() + x[:, 1::2].exp().sum(),
    "indexing": lambda x: x[0] * x[1] + x[-1, 2:5].sum(),
    "sliced and whole": lambda x: x[:, :6] * x[:, 6:] + x.tanh()[:, :6],
    "one piece": lambda x: x[1:3, 2:10] ** 2,
}


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(PATTERNS))
def test_gradients_of_pieces_match_pytorch(name: str, dt: Any) -> None:
    ours, theirs = _both(PATTERNS[name], (4, 12), dt)
    assert ours.dtype == np.dtype(dt)
    tol = 2e-6 if dt == np.float32 else 1e-12
    np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol)


def test_pieces_of_a_tensor_become_one_array_made_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three slices of one activation: three padded cotangents reach the tape, which merges them; the
    dense array is made once, and equals the sum of the padded arrays."""
    made: list[PaddedCotangent] = []
    for name in ("slice", fused_vjp.BASIC_INDEX_NODE):
        def spy(*args: Any, _real: Any = fused_vjp.FUSED_VJP[name], **kwargs: Any) -> Any:
            out = _real(*args, **kwargs)
            made.extend(ct for ct in out if type(ct) is PaddedCotangent)
            return out
        monkeypatch.setitem(fused_vjp.FUSED_VJP, name, spy)
    x = tp.tensor(RNG.standard_normal((2, 9)).astype(np.float32), requires_grad=True)
    y = x * 1.0  # a node whose cotangent collects the pieces
    (y[:, :3] * 2.0 + y[:, 3:6] * 3.0 + y[:, 6:] * 4.0).sum().backward()
    assert len(made) == 3
    assert x.grad is not None
    np.testing.assert_array_equal(x.grad.numpy(), np.repeat([[2.0, 3.0, 4.0]], 3, axis=1).repeat(2, axis=0))


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_reversed_slices_route_each_cotangent_back(dt: Any) -> None:
    c = RNG.standard_normal((3, 7)).astype(dt)
    x = tp.tensor(RNG.standard_normal((3, 7)).astype(dt), requires_grad=True)
    ((x[:, ::-1] * tp.tensor(c)).sum() + (x[:, 5:0:-2] * 2.0).sum()).backward()
    want = c[:, ::-1].copy()
    want[:, 5:0:-2] += 2.0
    assert x.grad is not None
    np.testing.assert_array_equal(x.grad.numpy(), want)


def test_add_cotangents_merges_only_like_padded_ones() -> None:
    a = np.arange(6.0).reshape(2, 3)
    p = PaddedCotangent((2, 6), a.dtype, [((slice(None), slice(0, 3)), a)])
    q = PaddedCotangent((2, 6), a.dtype, [((slice(None), slice(2, 5)), a)])
    merged = add_cotangents(p, q)
    assert type(merged) is PaddedCotangent and len(merged.pieces) == 2
    want = np.zeros((2, 6))
    want[:, 0:3] += a
    want[:, 2:5] += a
    np.testing.assert_array_equal(merged._data, want)
    other_dtype = PaddedCotangent((2, 6), np.dtype(np.float32), [((slice(None), slice(0, 3)), a.astype(np.float32))])
    mixed = add_cotangents(p, other_dtype)
    assert type(mixed) is not PaddedCotangent and mixed._data.dtype == np.float64  # made dense, promoted
    with_dense = add_cotangents(dense(q), p)
    np.testing.assert_array_equal(with_dense._data, want)
    assert dense(None) is None


def test_sliced_leaf_gets_its_own_gradient_array() -> None:
    w = tp.tensor(RNG.standard_normal((6, 4)).astype(np.float32), requires_grad=True)
    x = tp.tensor(RNG.standard_normal((3, 4)).astype(np.float32))
    ((x @ w[:4].T).sum() + 3.0 * (x @ w[4:].T).sum()).backward()
    assert w.grad is not None
    g = w.grad.numpy()
    assert g.flags.writeable and g.shape == (6, 4)
    column_sums = x.numpy().sum(0, keepdims=True)
    want = np.concatenate([np.repeat(column_sums, 4, 0), np.repeat(column_sums * 3, 2, 0)])
    np.testing.assert_allclose(g, want, rtol=1e-6)


def test_autograd_grad_of_a_sliced_input_and_second_derivatives() -> None:
    x = tp.tensor(RNG.standard_normal((5,)), requires_grad=True)
    (g,) = tp.autograd.grad((x[:3] ** 3).sum() + (x[2:] ** 2).sum(), (x,), create_graph=True)
    xs = x.detach().numpy()
    want = np.concatenate([3 * xs[:3] ** 2, np.zeros(2)]) + np.concatenate([np.zeros(2), 2 * xs[2:]])
    np.testing.assert_allclose(g.detach().numpy(), want, rtol=1e-12)
    (h,) = tp.autograd.grad(g.sum(), (x,))  # through the composite rules
    np.testing.assert_allclose(h.numpy(), np.concatenate([6 * xs[:3], np.zeros(2)]) +
                               np.concatenate([np.zeros(2), 2 * np.ones(3)]), rtol=1e-12)
