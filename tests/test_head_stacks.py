"""Attention on stacks of heads that are views (:mod:`...kernels.head_stacks`): the heads of a fused
``[B, n, 3 H d]`` projection, heads stored transposed, heads BLAS cannot read, a batch of three axes and a
broadcast batch. Each against a float64 reference; the strided stacks also against the same values made
contiguous first (the same GEMMs on the same numbers: bitwise equal), and split over two threads against
one; the cotangents come back in their input's layout, so merging the heads again is a view."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from tensorplay.interpreters.eager.kernels import backward as KB
from tensorplay.interpreters.eager.kernels import head_stacks, sdpa
from tests.helpers import count_blas_chunks, on_one_then_two_threads

RNG = np.random.default_rng(31)
DTYPES = [np.float32, np.float64]


def _tol(dt: Any) -> dict[str, float]:
    return {"rtol": 2e-5, "atol": 2e-5} if np.dtype(dt) == np.float32 else {"rtol": 1e-10, "atol": 1e-11}


def _fused_heads(b: int, n: int, h: int, d: int, dt: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``q, k, v [b, h, n, d]``: the three slices of one ``[b, n, 3 h d]`` projection, split into heads."""
    y = RNG.standard_normal((b, n, 3 * h * d)).astype(dt)
    return tuple(y[..., i * h * d:(i + 1) * h * d].reshape(b, n, h, d).transpose(0, 2, 1, 3)
                 for i in range(3))  # type: ignore[return-value]


def _reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None, g: np.ndarray,
               scale: float) -> list[np.ndarray]:
    """``(out, dq, dk, dv)`` in float64 from the formulas (rows with no allowed key give 0)."""
    q, k, v, g = (a.astype(np.float64) for a in (q, k, v, g))
    s = scale * q @ np.swapaxes(k, -1, -2)
    allowed = np.ones(s.shape, bool) if mask is None else np.broadcast_to(mask, s.shape)
    s = np.where(allowed, s, -np.inf)
    top = np.max(s, axis=-1, keepdims=True)
    e = np.where(allowed, np.exp(s - np.where(np.isfinite(top), top, 0)), 0)
    total = e.sum(-1, keepdims=True)
    p = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    out = p @ v
    dp = g @ np.swapaxes(v, -1, -2)
    ds = p * (dp - np.sum(dp * p, axis=-1, keepdims=True))
    return [out, scale * ds @ k, scale * np.swapaxes(ds, -1, -2) @ q, np.swapaxes(p, -1, -2) @ g]


def _run(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None, g: np.ndarray,
         scale: float) -> list[np.ndarray]:
    grads = KB.attention_backward(q, k, v, mask, g, scale=scale)
    assert all(x is not None for x in grads)
    return [sdpa.attention(q, k, v, mask, scale=scale), *grads]  # type: ignore[list-item]


def _layouts(dt: Any) -> dict[str, tuple[np.ndarray, ...]]:
    b, h, n, d = 3, 4, 7, 5
    q, k, v = _fused_heads(b, n, h, d, dt)
    transposed = tuple(np.swapaxes(RNG.standard_normal((b, h, d, n)).astype(dt), -1, -2) for _ in range(3))
    wide = RNG.standard_normal((b, h, 2 * n, 2 * d)).astype(dt)
    unreadable = (wide[:, :, ::2, ::2], wide[:, :, 1::2, ::2], wide[:, :, ::2, 1::2])  # no unit stride
    y = RNG.standard_normal((2, 3, n, 3 * 2 * d)).astype(dt)
    three_axes = tuple(y[..., i * 2 * d:(i + 1) * 2 * d].reshape(2, 3, n, 2, d).transpose(0, 1, 3, 2, 4)
                       for i in range(3))
    shared = np.broadcast_to(RNG.standard_normal((1, h, n, d)).astype(dt), (b, h, n, d))  # zero batch stride
    return {"fused projection": (q, k, v), "transposed heads": transposed, "no unit stride": unreadable,
            "batch of three axes": three_axes, "broadcast over the batch": (shared, k, shared)}


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("layout", ["fused projection", "transposed heads", "no unit stride", "batch of three axes",
                                    "broadcast over the batch"])
@pytest.mark.parametrize("masked", [False, True])
def test_strided_heads_match_the_reference_and_their_contiguous_copies(dt: Any, layout: str, masked: bool) -> None:
    q, k, v = _layouts(dt)[layout]
    n, m = q.shape[-2], k.shape[-2]
    g = RNG.standard_normal(q.shape[:-1] + (v.shape[-1],)).astype(dt)
    mask = None
    if masked:
        mask = RNG.random(q.shape[:-2] + (n, m)) < 0.6
        mask[..., 0, :] = False  # a row that sees no key
    scale = 1 / math.sqrt(q.shape[-1])
    before = [a.copy() for a in (q, k, v, g)]
    got = _run(q, k, v, mask, g, scale)
    contiguous = _run(*(np.ascontiguousarray(a) for a in (q, k, v)), mask, np.ascontiguousarray(g), scale)
    for x, want, c in zip(got, _reference(q, k, v, mask, g, scale), contiguous):
        assert x.dtype == np.dtype(dt) and x.shape == want.shape
        np.testing.assert_allclose(x, want, **_tol(dt))
        if layout in ("fused projection", "batch of three axes"):  # read in place: the same GEMM calls
            np.testing.assert_array_equal(x, c)
    if masked:
        assert not np.any(got[0][..., 0, :]) and not np.any(got[1][..., 0, :])
    for a, c in zip((q, k, v, g), before):
        np.testing.assert_array_equal(a, c)  # inputs untouched


@pytest.mark.parametrize("dt", DTYPES)
def test_cotangents_come_back_in_their_inputs_layout(dt: Any) -> None:
    """The heads of a fused projection give ``dq, dk, dv`` (and the output) laid out ``[b, n, h, d]``:
    merging the heads back into ``[b, n, h d]`` is then a view, not a copy."""
    b, h, n, d = 2, 3, 6, 4
    q, k, v = _fused_heads(b, n, h, d, dt)
    g = np.ascontiguousarray(RNG.standard_normal((b, n, h, d)).astype(dt)).transpose(0, 2, 1, 3)
    for x in (sdpa.attention(q, k, v, None, scale=0.5), *KB.attention_backward(q, k, v, None, g, scale=0.5)):
        assert x is not None
        merged = x.transpose(0, 2, 1, 3).reshape(b, n, h * d)
        assert np.shares_memory(merged, x)


def test_stacks_fold_only_what_folds() -> None:
    a = np.zeros((2, 3, 4, 5, 6), np.float32)
    assert head_stacks.split((2, 3, 4), a) == (24, 1)  # contiguous: every head its own unit
    rows = np.zeros((2, 4, 5, 3, 6), np.float32)
    heads = rows.transpose(0, 1, 3, 2, 4)  # batch (2, 4, 3): the first two axes fold, the third does not
    assert head_stacks.split((2, 4, 3), heads) == (8, 3)
    stacked = head_stacks.stack(heads, (8, 3), np.dtype(np.float32))
    assert stacked.shape == (8, 3, 5, 6) and np.shares_memory(stacked, rows)
    both_strided = a[..., ::2, ::2]
    copied = head_stacks.stack(both_strided, (24, 1), np.dtype(np.float32))
    assert copied.flags.c_contiguous and not np.shares_memory(copied, a)
    as64 = head_stacks.stack(a, (24, 1), np.dtype(np.float64))
    assert as64.dtype == np.float64 and as64.shape == (24, 1, 5, 6)


@pytest.mark.parametrize("dt", DTYPES)
def test_strided_stacks_split_over_threads_give_the_one_thread_results_bitwise(
        dt: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    splits = count_blas_chunks(monkeypatch, sdpa)
    monkeypatch.setattr(sdpa, "BLAS_THREADED_MIN_MACS", 1 << 8)
    q, k, v = _fused_heads(4, 9, 3, 8, dt)
    g = RNG.standard_normal(q.shape).astype(dt)
    one, two = on_one_then_two_threads(lambda: _run(q, k, v, None, g, 0.3))
    for a, c in zip(one, two):
        np.testing.assert_array_equal(a, c)
    assert splits == [1, 1, 2, 2]  # units of three heads: one chunk on one thread, two on two


def test_right_operand_copies_short_transposed_stacks_only() -> None:
    """A column-major stack with a contraction of at most 16 (``k^T`` of 16-wide heads) becomes a C-contiguous
    copy of the same values; longer contractions, row-major stacks and 2-d matrices are passed as they are.
    Products with the copy agree with float64 products of the stacks as they lie."""
    from tensorplay.interpreters.eager.kernels.head_stacks import SHORT_CONTRACTION, right_operand

    rng = np.random.default_rng(2)
    for d, copied in ((8, True), (SHORT_CONTRACTION, True), (SHORT_CONTRACTION + 1, False), (32, False)):
        qkv = rng.standard_normal((3, 7, 3 * 2 * d)).astype(np.float32)
        k = qkv[:, :, 2 * d:4 * d].reshape(3, 7, 2, d).transpose(0, 2, 1, 3)
        kt = np.swapaxes(k, -1, -2)
        got = right_operand(kt)
        assert (got is not kt) == copied
        np.testing.assert_array_equal(got, kt)
        if copied:
            assert got.flags.c_contiguous
        q = qkv[:, :, :2 * d].reshape(3, 7, 2, d).transpose(0, 2, 1, 3)
        np.testing.assert_allclose(np.matmul(q, got), np.matmul(q.astype(np.float64), kt.astype(np.float64)),
                                   rtol=1e-5, atol=1e-5)
    broadcast = np.broadcast_to(rng.standard_normal((5, 8)).T, (1000, 8, 5))  # one matrix for every head
    assert right_operand(broadcast) is broadcast
    row_major = np.ascontiguousarray(rng.standard_normal((2, 3, 8, 5)))
    assert right_operand(row_major) is row_major
    matrix = rng.standard_normal((5, 8)).T
    assert right_operand(matrix) is matrix


def test_eager_and_compiled_batched_products_take_the_same_path_for_short_transposed_heads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``q @ k^T`` of 16-wide heads (a transposed right operand with a short contraction): eager and compiled
    both hand the right operand to :func:`right_operand` (so they multiply alike), give the same values, and
    agree with float64 numpy; a gradient through it agrees with float64 too."""
    import tensorplay as tp
    import tensorplay.compiler.numba_backend.runtime as compiled_runtime
    import tensorplay.interpreters.eager.interpreter as eager_interpreter
    from tensorplay.interpreters.eager.kernels.head_stacks import right_operand

    seen: dict[str, list[tuple[int, ...]]] = {"eager": [], "compiled": []}

    def spy(where: str) -> Any:
        def wrapped(b: Any) -> Any:
            seen[where].append(tuple(b.shape))
            return right_operand(b)
        return wrapped

    monkeypatch.setattr(eager_interpreter, "right_operand", spy("eager"))
    monkeypatch.setattr(compiled_runtime, "right_operand", spy("compiled"))
    rng = np.random.default_rng(6)
    qkv = rng.standard_normal((4, 12, 2 * 2 * 16)).astype(np.float32)
    q_np = np.ascontiguousarray(qkv[:, :, :32].reshape(4, 12, 2, 16).transpose(0, 2, 1, 3))
    k_np = np.ascontiguousarray(qkv[:, :, 32:].reshape(4, 12, 2, 16).transpose(0, 2, 1, 3))

    def scores(q: Any, k: Any) -> Any:
        return q @ k.transpose(-1, -2)

    q, k = tp.tensor(q_np, requires_grad=True), tp.tensor(k_np)
    eager = scores(q, k)
    assert seen["eager"] == [(4, 2, 16, 12)]
    compiled = tp.compile(scores)(tp.tensor(q_np), tp.tensor(k_np))
    assert (4, 2, 16, 12) in seen["compiled"]
    np.testing.assert_array_equal(eager.detach().numpy(), compiled.numpy())
    want = q_np.astype(np.float64) @ np.swapaxes(k_np.astype(np.float64), -1, -2)
    np.testing.assert_allclose(eager.detach().numpy(), want, rtol=1e-5, atol=1e-5)
    eager.sum().backward()
    assert q.grad is not None
    np.testing.assert_allclose(q.grad.numpy(), np.broadcast_to(k_np.astype(np.float64).sum(2, keepdims=True),
                                                               q_np.shape), rtol=1e-5, atol=1e-5)
