"""The causal (prefix-mask) block path of attention, forward and backward: against the full
computation under the same mask given per head (which never blocks), a float64 reference, and
PyTorch's ``scaled_dot_product_attention`` (values and gradients through the tape)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tensorplay as tp  # noqa: E402
import tensorplay.nn.functional as TF  # noqa: E402
from tensorplay.interpreters.eager.kernels import attention_blocks  # noqa: E402
from tensorplay.interpreters.eager.kernels import backward as KB  # noqa: E402
from tensorplay.interpreters.eager.kernels import sdpa  # noqa: E402
from tests.helpers import count_blas_chunks, on_one_then_two_threads  # noqa: E402

RNG = np.random.default_rng(14)
DTYPES = [np.float32, np.float64]


def _tol(dt: Any) -> dict[str, float]:
    return {"rtol": 2e-5, "atol": 2e-5} if np.dtype(dt) == np.float32 else {"rtol": 1e-10, "atol": 1e-11}


def _randn(*shape: int, dt: Any) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dt)


def _strided(a: np.ndarray) -> np.ndarray:
    big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
    big[..., ::2] = a
    return big[..., ::2]


def _reference_grads(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray, g: np.ndarray,
                     scale: float) -> list[np.ndarray]:
    """``(out, dq, dk, dv)`` in float64 by PyTorch's autograd through the composed formula."""
    ts = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in (q, k, v)]
    s = scale * ts[0] @ ts[1].transpose(-1, -2)
    s = s.masked_fill(~torch.tensor(mask), -math.inf)
    p = torch.nan_to_num(torch.softmax(s, -1), nan=0.0)
    out = p @ ts[2]
    out.backward(torch.tensor(g.astype(np.float64)))
    return [out.detach().numpy()] + [a.grad.numpy() for a in ts]  # type: ignore[union-attr]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("n, m", [(1, 1), (31, 31), (33, 33), (127, 127), (128, 128), (70, 133), (131, 64),
                                  (96, 40)])
def test_blocked_forward_and_backward_match_the_reference_and_the_full_path(dt: Any, n: int, m: int) -> None:
    b, h, d, dv = 2, 3, 16, 8
    q = _strided(_randn(b, h, n, d, dt=dt))
    k = np.asfortranarray(_randn(b, h, m, d, dt=dt))
    v = _randn(b, h, m, dv, dt=dt)
    g = _randn(b, h, n, dv, dt=dt)
    mask = np.tril(np.ones((n, m), bool), k=m - n if m < n else 0)
    scale = 1 / math.sqrt(d)
    assert (attention_blocks.prefix_blocks(mask, n, m) is not None) == (n > 64)  # the blocks are taken
    copies = [a.copy() for a in (q, k, v, g)]
    want = _reference_grads(q, k, v, mask, g, scale)
    got = [sdpa.attention(q, k, v, mask, scale=scale), *KB.attention_backward(q, k, v, mask, g, scale=scale)]
    per_head = np.broadcast_to(mask, (b, h, n, m)).copy()  # never blocked
    full = [sdpa.attention(q, k, v, per_head, scale=scale), *KB.attention_backward(q, k, v, per_head, g, scale=scale)]
    for x, y, z in zip(got, want, full):
        assert x is not None and z is not None and x.dtype == np.dtype(dt) and x.shape == y.shape
        np.testing.assert_allclose(x, y, **_tol(dt))
        np.testing.assert_allclose(x, z, **_tol(dt))
    for a, c in zip((q, k, v, g), copies):
        np.testing.assert_array_equal(a, c)  # inputs untouched


def test_causal_plan_is_growing_and_skips_work() -> None:
    plan = attention_blocks.prefix_blocks(np.tril(np.ones((128, 128), bool)), 128, 128)
    assert plan is not None and plan.growing
    assert [keys for _, _, keys in plan.blocks] == [32, 64, 96, 128]
    assert plan.lengths.tolist() == list(range(1, 129))
    # the same mask again comes from the cache, and equals a fresh plan
    again = attention_blocks.prefix_blocks(np.tril(np.ones((128, 128), bool)), 128, 128)
    assert again is plan
    # a prefix mask whose lengths shrink somewhere: the forward may block, the backward may not
    lengths = np.concatenate([np.arange(1, 65), np.arange(64, 0, -1)])
    shrinking = np.arange(128)[None, :] < lengths[:, None]
    odd = attention_blocks.prefix_blocks(shrinking, 128, 128)
    assert odd is not None and not odd.growing


@pytest.mark.parametrize("dt", DTYPES)
def test_shrinking_prefix_mask_takes_the_full_backward_and_stays_right(dt: Any) -> None:
    n = m = 96
    lengths = np.concatenate([np.arange(1, 49), np.arange(48, 0, -1)])
    mask = np.arange(m)[None, :] < lengths[:, None]
    q, k, v, g = (_randn(2, n, 8, dt=dt) for _ in range(4))
    want = _reference_grads(q, k, v, mask, g, 0.4)
    got = [sdpa.attention(q, k, v, mask, scale=0.4), *KB.attention_backward(q, k, v, mask, g, scale=0.4)]
    for x, y in zip(got, want):
        np.testing.assert_allclose(x, y, **_tol(dt))


@pytest.mark.parametrize("where", ["q", "k", "v", "g"])
def test_non_finite_operands_give_the_full_paths_nan_pattern(where: str) -> None:
    """An inf in any operand: the backward (and, for ``v``, the forward) takes the full computation,
    so NaN spreads exactly as it does there (masked zeros times inf)."""
    n = 64
    mask = np.tril(np.ones((n, n), bool))
    ops = {name: _randn(2, n, 8, dt=np.float32) for name in "qkvg"}
    ops[where][1, 50, 3] = np.inf
    q, k, v, g = ops["q"], ops["k"], ops["v"], ops["g"]
    per_head = np.broadcast_to(mask, (2, n, n)).copy()
    got = KB.attention_backward(q, k, v, mask, g, scale=0.3)
    want = KB.attention_backward(q, k, v, per_head, g, scale=0.3)
    for x, y in zip(got, want):
        assert x is not None and y is not None
        np.testing.assert_array_equal(np.isnan(x), np.isnan(y))
        np.testing.assert_array_equal(np.isinf(x), np.isinf(y))
    np.testing.assert_array_equal(np.isnan(sdpa.attention(q, k, v, mask, scale=0.3)),
                                  np.isnan(sdpa.attention(q, k, v, per_head, scale=0.3)))


def test_need_flags_give_none_and_the_rest_unchanged() -> None:
    n = 70
    mask = np.tril(np.ones((n, n), bool))
    q, k, v, g = (_randn(3, n, 8, dt=np.float64) for _ in range(4))
    every = KB.attention_backward(q, k, v, mask, g, scale=0.5)
    for need in [(True, False, False), (False, True, False), (False, False, True), (False, True, True)]:
        some = KB.attention_backward(q, k, v, mask, g, scale=0.5, need=need)
        for x, y, want in zip(some, every, need):
            assert (x is not None) == want
            if x is not None:
                np.testing.assert_array_equal(x, y)


def test_deterministic_run_to_run() -> None:
    mask = np.tril(np.ones((128, 128), bool))
    q, k, v, g = (_randn(4, 128, 32, dt=np.float32) for _ in range(4))
    first = [sdpa.attention(q, k, v, mask, scale=0.2), *KB.attention_backward(q, k, v, mask, g, scale=0.2)]
    second = [sdpa.attention(q, k, v, mask, scale=0.2), *KB.attention_backward(q, k, v, mask, g, scale=0.2)]
    for x, y in zip(first, second):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("n", [33, 128])
def test_gradients_through_the_tape_match_pytorch(dt: Any, n: int) -> None:
    q, k, v, g = (_randn(2, 4, n, 16, dt=dt) for _ in range(4))
    ours = [tp.tensor(a, requires_grad=True) for a in (q, k, v)]
    out = TF.scaled_dot_product_attention(*ours, is_causal=True)
    out.backward(tp.tensor(g))
    theirs = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    ref = torch.nn.functional.scaled_dot_product_attention(*theirs, is_causal=True)
    ref.backward(torch.tensor(g))
    tol = {"rtol": 1e-4, "atol": 1e-5} if np.dtype(dt) == np.float32 else {"rtol": 1e-9, "atol": 1e-10}
    np.testing.assert_allclose(np.asarray(out.detach().numpy()), ref.detach().numpy(), **tol)
    for a, b in zip(ours, theirs):
        assert a.grad is not None and b.grad is not None
        np.testing.assert_allclose(np.asarray(a.grad.numpy()), b.grad.numpy(), **tol)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("kind", ["causal", "no mask", "padding mask", "shrinking prefix"])
def test_heads_split_over_threads_give_the_one_thread_results_bitwise(dt: Any, kind: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """With two threads a stack of heads runs in chunks on the kernel threads (OpenBLAS held to one
    thread): every head is computed as on one thread, so forward and all three gradients are bitwise
    equal; one head keeps the single call."""
    splits = count_blas_chunks(monkeypatch, sdpa)
    monkeypatch.setattr(sdpa, "BLAS_THREADED_MIN_MACS", 1 << 10)  # the heads' least chunk
    b, h, n, d = 3, 2, 19, 8
    q, k, v, g = (_randn(b, h, n, d, dt=dt) for _ in range(4))
    mask: np.ndarray | None = None
    if kind == "causal":
        mask = np.tril(np.ones((n, n), bool))
    elif kind == "padding mask":
        mask = RNG.random((b, 1, n, n)) < 0.7
        mask[..., 0] = True
    elif kind == "shrinking prefix":
        mask = np.tril(np.ones((n, n), bool))[::-1].copy()

    def run() -> list[Any]:
        out = sdpa.attention(q, k, v, mask, scale=0.3)
        return [out, *KB.attention_backward(q, k, v, mask, g, scale=0.3)]

    one, two = on_one_then_two_threads(run)
    first = None if mask is None else (mask[:1, :1] if mask.ndim == 4 else mask)
    single = sdpa.attention(q[:1, :1], k[:1, :1], v[:1, :1], first, scale=0.3)  # one head: no split
    for a, c in zip(one, two):
        np.testing.assert_array_equal(a, c)
    assert splits == [1, 1, 2, 2]  # one thread: one chunk; two: a chunk each
    np.testing.assert_allclose(single, one[0][:1, :1], **_tol(dt))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("n, m", [(128, 128), (131, 64), (70, 133)])
def test_jitted_forward_gives_the_numpy_paths_bits(dt: Any, n: int, m: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The forward's one jitted call (OpenBLAS's ``gemm`` from numba) makes the numpy path's GEMM calls:
    the same bits, also for a query broadcast over the batch (a zero batch stride) and for rows that see
    no key (``n > m``: the first rows of a lower-right causal mask)."""
    from tests.helpers import count_calls

    q = _randn(1, 3, n, 16, dt=dt)  # broadcast over the batch of 2
    k, v = _randn(2, 3, m, 16, dt=dt), _randn(2, 3, m, 8, dt=dt)
    mask = np.tril(np.ones((n, m), bool), k=m - n if m < n else 0)
    assert attention_blocks.prefix_blocks(mask, n, m) is not None
    ran = count_calls(monkeypatch, attention_blocks.nb(), {"prefix_attention": "jitted"})
    jitted = sdpa.attention(q, k, v, mask, scale=0.25)
    calls = ran["jitted"]
    assert calls >= 1
    monkeypatch.setattr(attention_blocks, "gemm_address", lambda name: None)
    through_numpy = sdpa.attention(q, k, v, mask, scale=0.25)
    assert ran["jitted"] == calls  # the numpy path ran
    np.testing.assert_array_equal(jitted, through_numpy)
    want = _reference_grads(np.repeat(q, 2, axis=0), k, v, mask, np.zeros((2, 3, n, 8), dt), 0.25)[0]
    np.testing.assert_allclose(jitted, want, **_tol(dt))
    if n > m:
        np.testing.assert_array_equal(jitted[:, :, :n - m], 0)


@pytest.mark.parametrize("dt", DTYPES)
def test_blocked_heads_split_over_threads_give_the_one_thread_results_bitwise(
        dt: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    splits = count_blas_chunks(monkeypatch, sdpa)
    monkeypatch.setattr(sdpa, "BLAS_THREADED_MIN_MACS", 1 << 10)
    q, k, v, g = (_randn(2, 3, 100, 8, dt=dt) for _ in range(4))
    mask = np.tril(np.ones((100, 100), bool))
    assert attention_blocks.prefix_blocks(mask, 100, 100) is not None

    def run() -> list[Any]:
        return [sdpa.attention(q, k, v, mask, scale=0.3), *KB.attention_backward(q, k, v, mask, g, scale=0.3)]

    one, two = on_one_then_two_threads(run)
    assert splits == [1, 1, 2, 2]
    for a, c in zip(one, two):
        np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("n, m", [(128, 128), (131, 64), (70, 133)])
def test_jitted_backward_gives_the_numpy_paths_bits(dt: Any, n: int, m: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The backward's one jitted call makes the numpy path's GEMM calls: the same bits for every subset of
    the cotangents asked for, and the reference's values."""
    from tests.helpers import count_calls

    q, k, v, g = _randn(2, 3, n, 16, dt=dt), _randn(2, 3, m, 16, dt=dt), _randn(2, 3, m, 8, dt=dt), _randn(2, 3, n, 8, dt=dt)
    mask = np.tril(np.ones((n, m), bool), k=m - n if m < n else 0)
    needs = [(True, True, True), (True, False, False), (False, True, False), (False, False, True), (False, True, True)]
    ran = count_calls(monkeypatch, attention_blocks.nb(), {"prefix_attention_backward": "jitted"})
    jitted = [KB.attention_backward(q, k, v, mask, g, scale=0.25, need=need) for need in needs]
    assert ran["jitted"] == len(needs)
    monkeypatch.setattr(attention_blocks, "gemm_address", lambda name: None)
    through_numpy = [KB.attention_backward(q, k, v, mask, g, scale=0.25, need=need) for need in needs]
    assert ran["jitted"] == len(needs)
    want = _reference_grads(q, k, v, mask, g, 0.25)[1:]
    for need, a, b in zip(needs, jitted, through_numpy):
        for wanted, x, y, z in zip(need, a, b, want):
            assert (x is None) == (y is None) == (not wanted)
            if x is not None:
                np.testing.assert_array_equal(x, y)
                np.testing.assert_allclose(x, z, **_tol(dt))
