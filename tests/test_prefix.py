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


def close(got: Any, expected: torch.Tensor, tol: float = 1e-10) -> None:
    assert tuple(got.shape) == tuple(expected.shape)
    np.testing.assert_allclose(got.numpy(), expected.detach().numpy(), rtol=tol, atol=tol)


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
    soft = P.smooth_max_pool(tp.eager, tp.tensor(x), 2, beta=200.0).numpy()
    assert np.all(soft >= hard - 1e-12)
    np.testing.assert_allclose(soft, hard, atol=0.01)
    mild = P.smooth_max_pool(tp.eager, tp.tensor(x), 2, beta=1.0).numpy()
    windows = x.reshape(2, 3, 3, 2, 3, 2).transpose(0, 1, 2, 4, 3, 5).reshape(2, 3, 3, 3, 4)
    np.testing.assert_allclose(mild, np.log(np.exp(windows).sum(-1)), rtol=1e-10)


@pytest.mark.parametrize("lead", [(), (3,), (2, 4)])
def test_layer_norm_matches_torch(lead: tuple[int, ...]) -> None:
    x, g, b = arr(lead + (6,), 1), arr((6,), 2), arr((6,), 3)
    close(P.layer_norm(tp.eager, tp.tensor(x), tp.tensor(g), tp.tensor(b)), F.layer_norm(T(x), (6,), T(g), T(b)))
    close(P.layer_norm(tp.eager, tp.tensor(x), None, None, eps=1e-3), F.layer_norm(T(x), (6,), eps=1e-3))


def torch_mha(x: np.ndarray[Any, Any], ws: list[np.ndarray[Any, Any]], heads: int, mask: Any = None,
              bias: Any = None) -> torch.Tensor:
    wq, wk, wv, wo = (T(w) for w in ws)
    xt = T(x)
    n, d = x.shape[-2], x.shape[-1]

    def split(t: torch.Tensor) -> torch.Tensor:
        return t.reshape(t.shape[:-1] + (heads, d // heads)).transpose(-2, -3)

    q, k, v = split(xt @ wq.T), split(xt @ wk.T), split(xt @ wv.T)
    attn_mask = None if mask is None else T(mask)
    if attn_mask is not None and attn_mask.ndim > 2:
        attn_mask = attn_mask.unsqueeze(-3)
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
    o = o.transpose(-2, -3).reshape(x.shape)
    return F.linear(o, wo, None if bias is None else T(bias))


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


def test_attention_errors() -> None:
    w = tp.zeros(8, 8)
    with pytest.raises(tp.ShapeError, match="divisible"):
        P.attention(tp.eager, w, w, w, w, tp.zeros(3, 8), 3)
    with pytest.raises(tp.DTypeError, match="bool"):
        P.attention(tp.eager, w, w, w, w, tp.zeros(3, 8), 2, mask=tp.zeros(3, 3))


def test_map_flattens_and_restores_the_leading_axes() -> None:
    x = tp.tensor(arr((2, 3, 4), 1))
    seen: list[tuple[int, ...]] = []

    def per_batch(t: Any) -> Any:
        seen.append(tuple(t.shape))
        return t.sum(-1, keepdim=True) * 2.0

    out = tp.eager.map(2, x, per_batch)
    assert seen == [(6, 4)] and out.shape == (2, 3, 1)
    np.testing.assert_allclose(out.numpy(), x.numpy().sum(-1, keepdims=True) * 2)
    assert tp.eager.map(0, tp.zeros(4), per_batch).shape == (1,)


def test_dropout_masks_and_rescales() -> None:
    tp.manual_seed(0)
    x = tp.ones(10000)
    key = tp.from_numpy(np.array([5, 0], np.int64))
    y = P.dropout(tp.eager, x, 0.25, key).numpy()
    kept = y != 0
    assert abs(kept.mean() - 0.75) < 0.02
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
    np.testing.assert_array_equal(P.dropout(tp.eager, x, 0.25, key).numpy(), y)  # same key, same mask
    assert P.dropout(tp.eager, x, 0.25, key, training=False) is x
