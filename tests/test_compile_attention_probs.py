"""An unmasked attention in a compiled training step keeps its probabilities: the forward's call returns
``softmax(scale q k^T)`` with the output and the backward reads them instead of recomputing the scores'
GEMM and softmax. Gradients agree with eager and PyTorch in float32 and float64, on odd sizes, heads that
are strided views of one projection, NaN and inf; a masked attention, and a graph that reads the
recomputed scores elsewhere, are left as recorded."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay.interpreters.eager.kernels.sdpa import attention_and_probs
from tests.helpers import compiled_source


def _tol(dtype: str) -> dict[str, float]:
    return {"rtol": 2e-4, "atol": 2e-5} if dtype == "float32" else {"rtol": 1e-10, "atol": 1e-12}


def _heads(t: Any, b: int, n: int, h: int, d: int) -> tuple[Any, Any, Any]:
    """q, k, v as strided head views ``[b, h, n, d]`` of one ``[b, n, 3 h d]`` projection (a tensorplay or
    a PyTorch tensor)."""
    def part(i: int) -> Any:
        return t[:, :, i * h * d:(i + 1) * h * d].reshape(b, n, h, d).permute(0, 2, 1, 3)
    return part(0), part(1), part(2)


def _data(b: int, n: int, h: int, d: int, dtype: str, special: bool) -> np.ndarray[Any, Any]:
    x = np.random.default_rng(7).standard_normal((b, n, 3 * h * d)).astype(dtype)
    if special:
        x[0, 0, :3] = [np.nan, np.inf, -np.inf]
    return x


def _step_grad(data: np.ndarray[Any, Any], cot: np.ndarray[Any, Any], shape: tuple[int, int, int, int],
               compiled: bool) -> tuple[Any, np.ndarray[Any, Any], str]:
    b, n, h, d = shape
    w = tp.tensor(data, requires_grad=True)

    def step(g: Any) -> Any:
        w.grad = None
        q, k, v = _heads(w, b, n, h, d)
        out = F.scaled_dot_product_attention(q, k, v)
        loss = (out * g).sum()
        loss.backward()
        return loss

    fn = tp.compile(step) if compiled else step
    loss = fn(tp.tensor(cot))
    fn(tp.tensor(cot))  # the cached specialization's second call (buffers reused)
    assert w.grad is not None
    return loss, w.grad.numpy().copy(), compiled_source(fn) if compiled else ""


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(2, 5, 3, 4), (3, 7, 1, 6), (1, 1, 2, 3)])
@pytest.mark.parametrize("special", [False, True])
def test_training_step_reuses_the_forward_probabilities(dtype: str, shape: tuple[int, int, int, int],
                                                        special: bool) -> None:
    b, n, h, d = shape
    data = _data(b, n, h, d, dtype, special)
    cot = np.random.default_rng(8).standard_normal((b, h, n, d)).astype(dtype)
    loss, grad, source = _step_grad(data, cot, shape, compiled=True)
    assert "_rt.attention_probs(" in source
    assert "softmax" not in source  # the backward no longer recomputes them
    e_loss, e_grad, _ = _step_grad(data, cot, shape, compiled=False)
    t = torch.tensor(data, requires_grad=True)
    q, k, v = _heads(t, b, n, h, d)
    t_loss = (torch.nn.functional.scaled_dot_product_attention(q, k, v) * torch.tensor(cot)).sum()
    t_loss.backward()
    assert t.grad is not None
    np.testing.assert_allclose(float(loss.item()), float(e_loss.item()), **_tol(dtype))
    np.testing.assert_allclose(grad, e_grad, **_tol(dtype))
    np.testing.assert_allclose(grad, t.grad.numpy(), **_tol(dtype))
    if special:  # NaN reaches exactly where eager and PyTorch put it
        np.testing.assert_array_equal(np.isnan(grad), np.isnan(t.grad.numpy()))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_attention_and_probs_matches_pytorch(dtype: str) -> None:
    rng = np.random.default_rng(9)
    q = rng.standard_normal((2, 3, 5, 4)).astype(dtype)
    k = rng.standard_normal((2, 3, 6, 4)).astype(dtype)[:, :, :, ::-1]  # a non-contiguous operand
    v = rng.standard_normal((2, 3, 6, 7)).astype(dtype)
    out, probs = attention_and_probs(q, k, v, scale=0.3)
    tq, tk, tv = (torch.tensor(np.ascontiguousarray(a)) for a in (q, k, v))
    want_p = torch.softmax(tq @ tk.transpose(-1, -2) * 0.3, dim=-1)
    np.testing.assert_allclose(probs, want_p.numpy(), **_tol(dtype))
    np.testing.assert_allclose(out, (want_p @ tv).numpy(), **_tol(dtype))
    assert probs.flags.c_contiguous and not np.shares_memory(probs, out)
    empty_out, empty_p = attention_and_probs(q[:, :, :0], k, v, scale=0.3)
    assert empty_out.shape == (2, 3, 0, 7) and empty_p.shape == (2, 3, 0, 6)
    no_v_out, no_v_p = attention_and_probs(q, k, v[..., :0], scale=0.3)
    assert no_v_out.shape == (2, 3, 5, 0)
    np.testing.assert_allclose(no_v_p, want_p.numpy(), **_tol(dtype))
    with pytest.raises(ValueError, match="attention_and_probs: need q"):
        attention_and_probs(q, k[:1], v, scale=0.3)


def test_masked_attention_is_left_as_recorded() -> None:
    data = _data(2, 5, 2, 3, "float64", False)
    w = tp.tensor(data, requires_grad=True)
    mask = tp.tensor(np.tril(np.ones((5, 5), bool)))

    def step() -> Any:
        w.grad = None
        q, k, v = _heads(w, 2, 5, 2, 3)
        loss = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).sum()
        loss.backward()
        return loss

    compiled = tp.compile(step)
    compiled()
    assert "_rt.attention_probs(" not in compiled_source(compiled)
    assert w.grad is not None
    got = w.grad.numpy().copy()
    t = torch.tensor(data, requires_grad=True)
    q, k, v = _heads(t, 2, 5, 2, 3)
    torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=torch.tensor(mask.numpy())).sum().backward()
    assert t.grad is not None
    np.testing.assert_allclose(got, t.grad.numpy(), **_tol("float64"))
