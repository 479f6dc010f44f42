"""vmap: against a Python loop (in_dims 0, 1, -1, None, nested), out_dims, randomness, chunking, errors."""

from __future__ import annotations

import tracemalloc
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.errors import MissingRuleError
from tensorplay.func import chunk_vmap, grad, jacrev, vmap
from tensorplay.testing import assert_close

RNG = np.random.default_rng(7)


def randn(*shape: int) -> tp.Tensor[*tuple[Any, ...]]:
    return tp.tensor(RNG.standard_normal(shape).astype(np.float32))


def take(x: Any, i: int, d: int | None) -> Any:
    if d is None:
        return x
    index = [slice(None)] * x.ndim
    index[d] = i  # type: ignore[call-overload]
    return x[tuple(index)]


def loop(f: Any, in_dims: tuple[Any, ...], size: int, *args: Any) -> Any:
    return tp.stack([f(*(take(a, i, d) for a, d in zip(args, in_dims))) for i in range(size)])


def f(x: Any, w: Any) -> Any:
    return ((w @ x).tanh() * x.sum()).sin()


@pytest.mark.parametrize("dx", [0, 1, -1])
@pytest.mark.parametrize("dw", [None, 0, 2, -1])
def test_vmap_matches_a_python_loop(dx: int, dw: int | None) -> None:
    size = 4
    x_shape = [3]
    x_shape.insert(dx % 2, size)
    w_shape = [5, 3]
    if dw is not None:
        w_shape.insert(dw % 3, size)
    x, w = randn(*x_shape), randn(*w_shape)
    assert_close(vmap(f, in_dims=(dx, dw))(x, w), loop(f, (dx, dw), size, x, w))


@pytest.mark.parametrize("out_dim", [0, 1, -1, -2])
def test_out_dims(out_dim: int) -> None:
    x, w = randn(4, 3), randn(5, 3)
    ours = vmap(f, in_dims=(0, None), out_dims=out_dim)(x, w)
    expected = np.moveaxis(loop(f, (0, None), 4, x, w).numpy(), 0, out_dim % 2)
    np.testing.assert_allclose(ours.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_nested_in_dims_and_pytree_outputs() -> None:
    params = {"w": randn(5, 3), "scale": randn(6)}
    x = randn(3, 6)

    def g(p: Any, xs: tuple[Any, Any]) -> Any:
        a, b = xs
        return {"u": p["w"] @ a, "v": (b * p["scale"]).sum()}, [a * 2]

    out = vmap(g, in_dims=({"w": None, "scale": 0}, (1, None)), out_dims=({"u": 1, "v": 0}, 0))(
        params, (x, tp.tensor(2.0)))
    assert out[0]["u"].shape == (5, 6)
    assert out[0]["v"].shape == (6,)
    assert out[1][0].shape == (6, 3)
    for i in range(6):
        ref = g({"w": params["w"], "scale": params["scale"][i]}, (x[:, i], tp.tensor(2.0)))
        assert_close(out[0]["u"][:, i], ref[0]["u"])
        assert_close(out[0]["v"][i], ref[0]["v"])
        assert_close(out[1][0][i], ref[1][0])


def test_unbatched_outputs_are_broadcast_or_returned_with_out_dims_none() -> None:
    x, c = randn(4, 3), randn(2)
    a, b = vmap(lambda x: (x * 2, c + 1))(x)
    assert_close(a, x * 2)
    assert b.shape == (4, 2)
    assert_close(b, tp.stack([c + 1] * 4))
    _, b2 = vmap(lambda x: (x * 2, c + 1), out_dims=(0, None))(x)
    assert b2.shape == (2,)
    with pytest.raises(ValueError, match="out_dims is None for output 0"):
        vmap(lambda x: x * 2, out_dims=None)(x)


def test_keyword_arguments_are_not_mapped() -> None:
    x = randn(4, 3)
    out = vmap(lambda x, *, scale: x * scale)(x, scale=randn(3))
    assert out.shape == (4, 3)


def test_nested_vmap_and_closures_over_outer_values() -> None:
    xs, ys = randn(3, 2), randn(4, 2)
    out = vmap(lambda x: vmap(lambda y: (x * y).sum())(ys))(xs)
    np.testing.assert_allclose(out.numpy(), xs.numpy() @ ys.numpy().T, rtol=1e-5, atol=1e-6)
    out2 = vmap(vmap(lambda a, b: a * b), in_dims=(0, None))(randn(2, 3), tp.arange(3.0))
    assert out2.shape == (2, 3)
    out3 = vmap(vmap(lambda a: a.sum(), in_dims=1), in_dims=0)(randn(2, 3, 4))
    assert out3.shape == (2, 4)


def test_composition_with_grad() -> None:
    w, xs = randn(3), randn(5, 3)

    def loss(w: Any, x: Any) -> Any:
        return ((w * x).sum().tanh() - 0.3) ** 2

    per_sample = vmap(grad(loss), in_dims=(None, 0))(w, xs)
    for i in range(5):
        assert_close(per_sample[i], grad(loss)(w, xs[i]))
    total = grad(lambda w: vmap(loss, in_dims=(None, 0))(w, xs).sum())(w)
    assert_close(total, per_sample.sum(0), rtol=1e-4, atol=1e-4)
    jac = jacrev(vmap(lambda x: x.sin()))(xs)
    assert jac.shape == (5, 3, 5, 3)


def test_randomness_modes() -> None:
    def drop(x: Any) -> Any:
        return tp.nn.functional.dropout(x, 0.5)

    x = tp.ones(8, 64)
    with pytest.raises(RuntimeError, match="randomness='error'"):
        vmap(drop)(x)
    same = vmap(drop, randomness="same")(x).numpy()
    assert all(np.array_equal(same[0], row) for row in same)
    different = vmap(drop, randomness="different")(x).numpy()
    assert not all(np.array_equal(different[0], row) for row in different)
    assert set(np.unique(different)) <= {0.0, 2.0}
    chunked = vmap(drop, randomness="different", chunk_size=3)(x).numpy()
    assert not all(np.array_equal(chunked[0], row) for row in chunked)
    # the generator is advanced: two calls draw different masks
    tp.manual_seed(3)
    first = vmap(drop, randomness="same")(x).numpy()
    second = vmap(drop, randomness="same")(x).numpy()
    assert not np.array_equal(first, second)
    tp.manual_seed(3)
    np.testing.assert_array_equal(vmap(drop, randomness="same")(x).numpy(), first)


@pytest.mark.parametrize("chunk_size", [1, 3, 4, 100])
def test_chunk_size_gives_the_same_result(chunk_size: int) -> None:
    x, w = randn(10, 3), randn(5, 3)
    assert_close(vmap(f, in_dims=(0, None), chunk_size=chunk_size)(x, w), vmap(f, in_dims=(0, None))(x, w))
    out = vmap(lambda x: (x * 2, w.sum()), chunk_size=chunk_size, out_dims=(1, None))(x)
    assert_close(out[0], (x * 2).T)
    assert out[1].shape == ()


def test_chunk_vmap() -> None:
    x, w = randn(7, 3), randn(5, 3)
    for chunks in (1, 2, 3, 7, 20):
        assert_close(chunk_vmap(f, in_dims=(0, None), chunks=chunks)(x, w), vmap(f, in_dims=(0, None))(x, w))


def test_chunk_size_bounds_peak_memory() -> None:
    x = randn(64, 256)

    def outer(v: Any) -> Any:
        return (v[:, None] * v[None, :]).tanh().sum()

    def peak(chunk: int | None) -> int:
        tracemalloc.start()
        try:
            vmap(outer, chunk_size=chunk)(x)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    whole = peak(None)
    chunked = peak(4)
    assert whole > 64 * 256 * 256 * 4  # the [64, 256, 256] intermediate
    assert chunked < whole / 4


def test_errors() -> None:
    x = randn(4, 3)
    with pytest.raises(ValueError, match="one in_dim per positional argument"):
        vmap(f, in_dims=(0,))(x, x)
    with pytest.raises(ValueError, match="same size in the mapped dimension"):
        vmap(f)(randn(4, 3), randn(5, 5, 3))
    with pytest.raises(ValueError, match="in_dim=0 for input 1, which is a float"):
        vmap(lambda x, s: x * s)(x, 2.0)
    with pytest.raises(ValueError, match="in_dim=2 for input 0 of rank 2"):
        vmap(lambda x: x, in_dims=2)(x)
    with pytest.raises(ValueError, match="at least one input must be mapped"):
        vmap(lambda x: x, in_dims=None)(x)
    with pytest.raises(ValueError, match="randomness must be"):
        vmap(f, randomness="sometimes")
    with pytest.raises(ValueError, match="chunk_size"):
        vmap(f, chunk_size=0)
    with pytest.raises(ValueError, match="not a prefix"):
        vmap(lambda a: a[0], in_dims=({"x": 0},))((x, x))
    with pytest.raises(ValueError, match="out_dims=2 is out of range for output 0 of rank 1"):
        vmap(lambda x: x.sum(), in_dims=1, out_dims=2)(x)
    with pytest.raises(TypeError, match="must return tensors"):
        vmap(lambda x: 3)(x)


def test_missing_batching_rule_names_the_primitive_and_the_transform(monkeypatch: pytest.MonkeyPatch) -> None:
    from tensorplay.rules import batching
    monkeypatch.delitem(batching.BATCH_RULES, "sin")
    with pytest.raises(MissingRuleError, match="vmap: no batching rule for primitive 'sin'"):
        vmap(lambda x: x.sin())(randn(3, 2))
    # an unbatched use of the primitive needs no rule
    c = randn(2)
    out = vmap(lambda x: x * c.sin())(randn(3, 2))
    assert out.shape == (3, 2)


@pytest.mark.parametrize("sa,sb", [((128, 128, 1), (128, 1, 128)), ((1, 64, 1), (128, 1, 96)), ((64, 1), (128, 1, 128)),
                                   ((5, 3, 1), (5, 1, 4)), ((128, 1, 64), (64, 128)), ((4, 5, 3), (3, 2))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_paths_of_per_sample_gradients_match_numpy(sa: tuple[int, ...], sb: tuple[int, ...], dtype: Any) -> None:
    """Batched outer products (K = 1) and a broadcast 2-d right operand take fast eager paths."""
    a = RNG.standard_normal(sa).astype(dtype)
    b = RNG.standard_normal(sb).astype(dtype)
    out = (tp.tensor(a) @ tp.tensor(b)).numpy()
    assert out.dtype == dtype
    tol = 2e-5 if dtype == np.float32 else 1e-12  # a folded GEMM sums in another order than np.matmul
    np.testing.assert_allclose(out, np.matmul(a, b), rtol=tol, atol=tol)
    transposed = np.ascontiguousarray(np.swapaxes(a, -1, -2))
    view = tp.tensor(transposed).transpose(-1, -2)  # a non-contiguous left operand
    np.testing.assert_allclose((view @ tp.tensor(b)).numpy(), np.matmul(a, b), rtol=tol, atol=tol)
