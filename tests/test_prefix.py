"""Prefix-polymorphic derived ops: PyTorch parity with identical weights, any leading shape kept."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import tensorplay as tp
from tensorplay import prefix as P


def arr(shape: tuple[int, ...], seed: int, dtype: Any = np.float64) -> np.ndarray[Any, Any]:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def T(a: np.ndarray[Any, Any]) -> torch.Tensor:
    return torch.from_numpy(a)


def close(got: Any, expected: Any, tol: float = 1e-10) -> None:
    """``got`` (a tensor) equals ``expected`` (a torch tensor or a numpy array) within ``tol``."""
    want = expected.detach().numpy() if isinstance(expected, torch.Tensor) else np.asarray(expected)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("lead", [(), (5,), (2, 3), (0,), (2, 0, 3)])
def test_linear_keeps_any_leading_shape(lead: tuple[int, ...]) -> None:
    w, b, x = arr((4, 3), 1), arr((4,), 2), arr(lead + (3,), 3)
    close(P.linear(tp.eager, tp.tensor(w), tp.tensor(b), tp.tensor(x)), F.linear(T(x), T(w), T(b)))
    close(tp.eager.linear(tp.tensor(w), None, tp.tensor(x)), F.linear(T(x), T(w)))


def test_linear_errors_name_both_shapes() -> None:
    with pytest.raises(tp.ShapeError, match=r"linear: input feature size 5 .* in-features 3 .*\[2, 5\].*\[4, 3\]"):
        P.linear(tp.eager, tp.zeros(4, 3), None, tp.zeros(2, 5))
    with pytest.raises(tp.ShapeError, match="bias"):
        P.linear(tp.eager, tp.zeros(4, 3), tp.zeros(3), tp.zeros(2, 3))


CONV_CASES = [
    ((2, 3, 9), (4, 3, 3), dict(stride=2, padding=1)),
    ((2, 4, 7, 6), (6, 2, 3, 2), dict(stride=(1, 2), padding=(1, 0), dilation=(2, 1), groups=2)),
    ((1, 2, 5, 4, 4), (3, 2, 2, 3, 2), dict(padding=1)),
]


@pytest.mark.parametrize("xs,ws,kw", CONV_CASES)
def test_conv_matches_torch_with_extra_leading_axes(xs: tuple[int, ...], ws: tuple[int, ...], kw: dict[str, Any]) -> None:
    x, w, b = arr(xs, 1), arr(ws, 2), arr((ws[0],), 3)
    torch_fn = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[len(xs)]
    expected = torch_fn(T(x), T(w), T(b), **kw)
    close(P.conv(tp.eager, tp.tensor(w), tp.tensor(b), tp.tensor(x), **kw), expected)
    # two leading axes instead of one: same numbers, shape kept
    x2 = np.stack([x, x[::-1].copy()])
    out2 = P.conv(tp.eager, tp.tensor(w), tp.tensor(b), tp.tensor(x2), **kw)
    assert out2.shape == (2,) + tuple(expected.shape)
    np.testing.assert_allclose(out2.numpy()[0], expected.numpy(), rtol=1e-10, atol=1e-10)
    # unbatched input
    close(P.conv(tp.eager, tp.tensor(w), tp.tensor(b), tp.tensor(x[0]), **kw), expected[0])


def test_conv_same_padding_matches_torch() -> None:
    x, w = arr((2, 3, 8, 7), 1), arr((4, 3, 4, 3), 2)
    close(P.conv(tp.eager, tp.tensor(w), None, tp.tensor(x), padding="same"), F.conv2d(T(x), T(w), padding="same"))
    close(P.conv(tp.eager, tp.tensor(w), None, tp.tensor(x), padding="valid"), F.conv2d(T(x), T(w)))


def test_conv_errors_are_clear() -> None:
    with pytest.raises(tp.ShapeError, match="conv"):
        P.conv(tp.eager, tp.zeros(4, 3, 5, 5), None, tp.zeros(1, 3, 3, 3))
    with pytest.raises(tp.ShapeError, match="conv"):
        P.conv(tp.eager, tp.zeros(4, 2, 3, 3), None, tp.zeros(1, 3, 8, 8))
    with pytest.raises(tp.ShapeError, match="stride has 3 entries"):
        P.conv(tp.eager, tp.zeros(4, 3, 3, 3), None, tp.zeros(1, 3, 8, 8), stride=(1, 1, 1))


def test_conv_transpose_matches_torch() -> None:
    x, w, b = arr((2, 4, 5, 3), 1), arr((4, 3, 3, 2), 2), arr((6,), 3)
    kw = dict(stride=(2, 1), padding=(1, 0), output_padding=(1, 0), groups=2)
    expected = F.conv_transpose2d(T(x), T(w), T(b), **kw)
    close(P.conv_transpose(tp.eager, tp.tensor(w), tp.tensor(b), tp.tensor(x), **kw), expected)
    x1, w1 = arr((3, 2, 6), 4), arr((2, 5, 3), 5)
    close(P.conv_transpose(tp.eager, tp.tensor(w1), None, tp.tensor(x1), stride=3, dilation=2),
          F.conv_transpose1d(T(x1), T(w1), stride=3, dilation=2))


@pytest.mark.parametrize("lead", [(), (2,), (2, 3)])
def test_pools_match_torch(lead: tuple[int, ...]) -> None:
    x = arr(lead + (4, 7, 6), 6)
    flat = T(x.reshape((-1,) + x.shape[-3:]))
    got = P.max_pool(tp.eager, tp.tensor(x), 3, stride=2, padding=1)
    expected = F.max_pool2d(flat, 3, stride=2, padding=1)
    np.testing.assert_allclose(got.numpy().reshape(expected.shape), expected.numpy())
    assert tuple(got.shape) == lead + tuple(expected.shape[-3:])
    got = P.avg_pool(tp.eager, tp.tensor(x), (2, 3), padding=(1, 1))
    expected = F.avg_pool2d(flat, (2, 3), padding=(1, 1), count_include_pad=True)
    np.testing.assert_allclose(got.numpy().reshape(expected.shape), expected.numpy(), rtol=1e-12)
    got1 = P.max_pool(tp.eager, tp.tensor(x), (2,))
    np.testing.assert_allclose(got1.numpy().reshape(-1, x.shape[-1] // 2),
                               F.max_pool1d(T(x.reshape(-1, 1, x.shape[-1])), 2).numpy().reshape(-1, 3))


def test_smooth_max_pool_tends_to_max_pool() -> None:
    x = arr((2, 3, 6, 6), 7)
    hard = P.max_pool(tp.eager, tp.tensor(x), 2).numpy()
    soft = P.smooth_max_pool(tp.eager, tp.tensor(x), 2, None, 0, beta=200.0).numpy()
    assert np.all(soft >= hard - 1e-12)
    np.testing.assert_allclose(soft, hard, atol=0.01)
    mild = P.smooth_max_pool(tp.eager, tp.tensor(x), 2, None, 0, beta=1.0).numpy()
    windows = x.reshape(2, 3, 3, 2, 3, 2).transpose(0, 1, 2, 4, 3, 5).reshape(2, 3, 3, 3, 4)
    np.testing.assert_allclose(mild, np.log(np.exp(windows).sum(-1)), rtol=1e-10)


@pytest.mark.parametrize("lead", [(), (3,), (2, 4)])
def test_layer_norm_matches_torch(lead: tuple[int, ...]) -> None:
    x, g, b = arr(lead + (6,), 1), arr((6,), 2), arr((6,), 3)
    close(P.layer_norm(tp.eager, tp.tensor(x), tp.tensor(g), tp.tensor(b)), F.layer_norm(T(x), (6,), T(g), T(b)))
    close(P.layer_norm(tp.eager, tp.tensor(x), None, None, eps=1e-3), F.layer_norm(T(x), (6,), eps=1e-3))


def torch_mha(x: np.ndarray[Any, Any], ws: list[np.ndarray[Any, Any]], heads: int, mask: Any = None,
              bias: Any = None) -> torch.Tensor:
    """Multi-head attention with input-major weights (``x @ wq``), through PyTorch's sdpa."""
    wq, wk, wv, wo = (T(w) for w in ws)
    xt = T(x)

    def split(t: torch.Tensor) -> torch.Tensor:
        return t.reshape(t.shape[:-1] + (heads, t.shape[-1] // heads)).transpose(-2, -3)

    q, k, v = split(xt @ wq), split(xt @ wk), split(xt @ wv)
    attn_mask = None if mask is None else T(mask)
    if attn_mask is not None and attn_mask.ndim > 2:
        attn_mask = attn_mask.unsqueeze(-3)
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
    o = o.transpose(-2, -3).reshape(x.shape[:-1] + (o.shape[-1] * heads,))
    out = o @ wo
    return out if bias is None else out + T(bias)


@pytest.mark.parametrize("lead", [(), (2,), (2, 3)])
def test_attention_matches_torch(lead: tuple[int, ...]) -> None:
    d, n, heads = 8, 5, 2
    x = arr(lead + (n, d), 1)
    ws = [arr((d, d), i) / math.sqrt(d) for i in range(2, 6)]
    bias = arr((d,), 9)
    got = P.attention(tp.eager, *(tp.tensor(w) for w in ws), tp.tensor(x), heads, output_bias=tp.tensor(bias))
    close(got, torch_mha(x, ws, heads, bias=bias), 1e-9)
    causal = np.tril(np.ones((n, n), bool))
    got = P.attention(tp.eager, *(tp.tensor(w) for w in ws), tp.tensor(x), heads, mask=tp.tensor(causal))
    close(got, torch_mha(x, ws, heads, mask=causal), 1e-9)


def test_attention_weights_are_input_major_and_heads_need_not_span_the_model() -> None:
    """TorchLean's layout: ``q = x @ wq`` with ``wq[d_model, heads * head_dim]``; here 3 heads of 4 on a
    model dim of 5, values of width 2 per head and an output dim of 7."""
    d, n, heads = 5, 4, 3
    x = arr((2, n, d), 1)
    ws = [arr((d, heads * 4), 2), arr((d, heads * 4), 3), arr((d, heads * 2), 4), arr((heads * 2, 7), 5)]
    got = P.attention(tp.eager, *(tp.tensor(w) for w in ws), tp.tensor(x), heads)
    assert got.shape == (2, n, 7)
    close(got, torch_mha(x, ws, heads), 1e-9)
    # the same call through the Ops surface
    close(tp.eager.attention(*(tp.tensor(w) for w in ws), tp.tensor(x), heads), torch_mha(x, ws, heads), 1e-9)


def test_attention_fully_blocked_row_gives_zeros() -> None:
    d, n = 4, 3
    x = arr((n, d), 1)
    ws = [arr((d, d), i) for i in range(2, 6)]
    mask = np.ones((n, n), bool)
    mask[1] = False
    got = P.attention(tp.eager, *(tp.tensor(w) for w in ws), tp.tensor(x), 2, mask=tp.tensor(mask)).numpy()
    np.testing.assert_array_equal(got[1], np.zeros(d))
    assert np.all(np.abs(got[0]) > 0)


def test_attention_errors() -> None:
    w = tp.zeros(8, 8)
    with pytest.raises(tp.ShapeError, match="num_heads=3 does not divide"):
        P.attention(tp.eager, w, w, w, w, tp.zeros(3, 8), 3)
    with pytest.raises(tp.DTypeError, match="bool"):
        P.attention(tp.eager, w, w, w, w, tp.zeros(3, 8), 2, mask=tp.zeros(3, 3))
    with pytest.raises(tp.ShapeError, match=r"wq must be \[d_model, num_heads \* head_dim\] = \[6, ...\]"):
        P.attention(tp.eager, w, w, w, w, tp.zeros(3, 6), 2)
    with pytest.raises(tp.ShapeError, match="wo must have wv's 8 columns as rows"):
        P.attention(tp.eager, w, w, w, tp.zeros(4, 8), tp.zeros(3, 8), 2)


def test_map_applies_a_single_sample_function_to_every_sample() -> None:
    """TorchLean's ``map``: ``f`` sees one sample; the result is ``[*lead, *f_out]``."""
    out = tp.eager.map(1, tp.ones(2, 3), lambda s: s.sum().reshape(1))
    assert out.shape == (2, 1)
    np.testing.assert_array_equal(out.numpy(), [[3.0], [3.0]])
    x = tp.tensor(arr((2, 3, 4), 1))
    seen: list[tuple[int, ...]] = []

    def per_sample(t: Any) -> Any:
        seen.append(tuple(t.shape))
        return (t * t).sum(-1, keepdim=True) * 2.0

    out = P.map(tp.eager, 2, x, per_sample)
    assert seen == [(4,)] and out.shape == (2, 3, 1)  # traced once, on one sample
    np.testing.assert_allclose(out.numpy(), (x.numpy() ** 2).sum(-1, keepdims=True) * 2, rtol=1e-12)
    assert tp.eager.map(0, tp.ones(4), lambda t: t.sum()).shape == ()
    # an empty leading shape gives the empty result
    assert tp.eager.map(1, tp.zeros(0, 3), lambda t: t.sum().reshape(1)).shape == (0, 1)
    with pytest.raises(tp.ShapeError, match="lead must be an int from 0 to the rank of x"):
        tp.eager.map(3, tp.zeros(2, 2), lambda t: t)


def test_map_under_every_interpreter_and_transform() -> None:
    """``map`` records under the graph recorder, differentiates, and nests in vmap and grad."""
    from tensorplay.func import grad, vmap
    w = tp.tensor(arr((4, 3), 2))

    def model(x: Any) -> Any:
        return tp.ops_of(x, w).map(1, x, lambda s: (s @ w).tanh())

    x = tp.tensor(arr((5, 4), 1))
    expected = np.tanh(x.numpy() @ w.numpy())
    close(model(x), expected, 1e-12)
    gm = tp.graph.trace(model, x)
    close(gm(x), expected, 1e-12)
    close(vmap(model)(tp.tensor(arr((2, 5, 4), 3))), np.tanh(arr((2, 5, 4), 3) @ w.numpy()), 1e-12)
    g = grad(lambda v: model(v).sum())(x)
    close(g, (1 - expected ** 2) @ w.numpy().T, 1e-10)


def test_map_draws_different_random_numbers_per_sample() -> None:
    tp.manual_seed(3)
    def noisy(s: Any) -> Any:
        ops = tp.ops_of(s)
        return s + ops.random_uniform(ops.random_key(), shape=(3,), dtype="float64")

    out = tp.eager.map(1, tp.zeros(4, 3), noisy)
    rows = out.numpy()
    assert len({tuple(r) for r in rows}) == 4


def test_dropout_masks_and_rescales() -> None:
    tp.manual_seed(0)
    x = tp.ones(10000)
    key = tp.from_numpy(np.array([5, 0], np.int64))
    y = P.dropout(tp.eager, x, 0.25, key=key).numpy()
    kept = y != 0
    assert abs(kept.mean() - 0.75) < 0.02
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
    np.testing.assert_array_equal(P.dropout(tp.eager, x, 0.25, key=key).numpy(), y)  # same key, same mask
    assert P.dropout(tp.eager, x, 0.25, training=False, key=key) is x
