"""The recognised subgraphs of the numba backend with symbolic sizes (``tp.compile(f, dynamic=True)``): a
sum of zero pads into disjoint windows is one placement (the batched GEMMs writing into their windows), a
bias's gradient of that sum one GEMV with ones (``sum_leading``), and a cross-entropy with its reverse sweep
two row-kernel calls, with the windows, shapes and row offsets computed from the bound sizes at run time.
Each is checked against eager (and PyTorch for the pieces) in float32 and float64 at several sizes,
1 and odd ones included, with one compilation serving them all; training steps shaped as the benchmarks'
run the same pattern calls dynamic as static."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay import nn, optim
from benchmarks.bench_training import _block_classes
from tests.helpers import compiled_source, training_step

Block = _block_classes(tp, None)[0]


def _tol(dtype: str) -> dict[str, float]:
    return {"rtol": 2e-5, "atol": 2e-6} if dtype == "float32" else {"rtol": 1e-11, "atol": 1e-12}


# ---- a sum of pads: the backward of a projection split into heads ------------------------------------------

def _split_heads(y: Any, bounds: list[tuple[int, int]], heads: int) -> list[Any]:
    b, n = y.shape[0], y.shape[1]
    return [y[:, :, lo:hi].reshape(b, n, heads, (hi - lo) // heads).permute(0, 2, 1, 3) for lo, hi in bounds]


def _projection_step(w: np.ndarray[Any, Any], b: np.ndarray[Any, Any], bounds: list[tuple[int, int]],
                     heads: int) -> tuple[Any, Any, Any]:
    """``(step, weight, bias)``: ``step(x, *cots)`` takes the gradients of ``sum_i sum(piece_i(x @ w + b) @
    cot_i^T)`` into ``weight.grad`` and ``bias.grad`` (a batched product per piece, as attention's heads:
    the GEMMs may write into their windows of the placed cotangent)."""
    weight, bias = tp.tensor(w, requires_grad=True), tp.tensor(b, requires_grad=True)

    def step(xb: Any, *gs: Any) -> Any:
        weight.grad = None
        bias.grad = None
        y = xb @ weight + bias
        loss = None
        for p, g in zip(_split_heads(y, bounds, heads), gs):
            term = (p @ g.transpose(-1, -2)).sum()
            loss = term if loss is None else loss + term
        assert loss is not None
        loss.backward()
        return loss

    return step, weight, bias


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("bounds,heads,width", [([(0, 8), (8, 16), (16, 24)], 2, 24),
                                                ([(0, 4), (8, 12)], 2, 14)])
def test_dynamic_pad_sum_is_one_placement_at_every_size(dtype: str, bounds: list[tuple[int, int]], heads: int,
                                                        width: int) -> None:
    rng = np.random.default_rng(11)
    w = rng.standard_normal((6, width)).astype(dtype)
    b = rng.standard_normal(width).astype(dtype)
    step, weight, bias = _projection_step(w, b, bounds, heads)
    eager, eager_weight, eager_bias = _projection_step(w, b, bounds, heads)
    sizes = ((3, 5), (1, 5), (3, 7), (1, 1), (9, 5))  # the first: no size shared with another dim
    first = [tp.tensor(np.zeros((3, heads, 5, (hi - lo) // heads), dtype)) for lo, hi in bounds]
    step(tp.tensor(np.zeros((3, 5, 6), dtype)), *first)  # every call then finds the gradients set
    compiled = tp.compile(step, dynamic=True)
    for batch, seq in sizes:
        x = tp.tensor(rng.standard_normal((batch, seq, 6)).astype(dtype))
        cots = [tp.tensor(rng.standard_normal((batch, heads, seq, (hi - lo) // heads)).astype(dtype))
                for lo, hi in bounds]
        for _ in range(2):  # the second call runs with the buffers the first one planned
            compiled(x, *cots)
        eager(x, *cots)
        for got, want, name in ((weight, eager_weight, "weight"), (bias, eager_bias, "bias")):
            np.testing.assert_allclose(got.grad.numpy(), want.grad.numpy(), err_msg=f"{name} at {batch}x{seq}",
                                       **_tol(dtype))
        tw, tb = torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)
        y = torch.tensor(x.numpy()) @ tw + tb
        sum((p @ torch.tensor(g.numpy()).transpose(-1, -2)).sum()
            for p, g in zip(_split_heads(y, bounds, heads), cots)).backward()  # type: ignore[union-attr]
        assert tw.grad is not None and tb.grad is not None
        for got, want in ((weight.grad.numpy(), tw.grad.numpy()), (bias.grad.numpy(), tb.grad.numpy())):
            scale = float(np.abs(want).max())  # sums of tens of products: rounding is relative to the largest
            np.testing.assert_allclose(got, want, rtol=0, atol=scale * (1e-5 if dtype == "float32" else 1e-12))
    assert compiled.compile_count == 1, compiled.recompile_reasons
    source = compiled_source(compiled)
    assert "_s_" in source  # the sizes are read at run time
    assert "_rt.place(" in source and "_rt.pad(" not in source
    assert "_rt.sum_leading(" in source  # the bias's gradient of the placed sum
    covering = width == sum(hi - lo for lo, hi in bounds)
    assert ("),), True" in source) == covering  # windows covering the result need no zeroing


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dynamic_placement_matches_pytorch(dtype: str) -> None:
    """Pieces read as plain slices (no products): the placement's windows are the slices' cotangents."""
    rng = np.random.default_rng(12)
    w = rng.standard_normal((5, 12)).astype(dtype)
    weight = tp.tensor(w, requires_grad=True)

    def step(xb: Any, *gs: Any) -> Any:
        weight.grad = None
        y = xb @ weight
        loss = None
        for p, g in zip(_split_heads(y, [(0, 6), (6, 12)], 3), gs):
            term = (p * g).sum()
            loss = term if loss is None else loss + term
        assert loss is not None
        loss.backward()
        return loss

    step(tp.tensor(np.zeros((4, 7, 5), dtype)), *[tp.tensor(np.zeros((4, 3, 7, 2), dtype))] * 2)  # .grad set
    compiled = tp.compile(step, dynamic=True)
    for batch, seq in ((4, 7), (1, 4), (5, 1), (7, 3)):  # the first: no size shared with another dim
        x = rng.standard_normal((batch, seq, 5)).astype(dtype)
        cots = [rng.standard_normal((batch, 3, seq, 2)).astype(dtype) for _ in range(2)]
        compiled(tp.tensor(x), *[tp.tensor(c) for c in cots])
        assert weight.grad is not None
        got = weight.grad.numpy().copy()
        tw = torch.tensor(w, requires_grad=True)
        y = torch.tensor(x) @ tw
        sum((p * torch.tensor(c)).sum() for p, c in zip(_split_heads(y, [(0, 6), (6, 12)], 3), cots)).backward()
        assert tw.grad is not None
        np.testing.assert_allclose(got, tw.grad.numpy(), **_tol(dtype))
    assert compiled.compile_count == 1
    source = compiled_source(compiled)
    assert "_rt.place(" in source and "_rt.pad(" not in source


# ---- cross-entropy ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dynamic_cross_entropy_is_one_call(dtype: str) -> None:
    rng = np.random.default_rng(13)
    w = rng.standard_normal((6, 5)).astype(dtype)
    weights = {how: tp.tensor(w, requires_grad=True) for how in ("compiled", "eager")}

    def make(how: str) -> Any:
        weight = weights[how]

        def step(xb: Any, t: Any) -> Any:
            weight.grad = None
            loss = F.cross_entropy(xb @ weight, t, ignore_index=-100)
            loss.backward()
            return loss
        return step

    step = make("compiled")
    step(tp.tensor(np.zeros((8, 6), dtype)), tp.tensor(np.zeros(8, np.int64)))  # every call then finds .grad set
    compiled = tp.compile(step, dynamic=True)
    eager = make("eager")
    for batch in (8, 1, 7, 33, 2):
        x = tp.tensor(rng.standard_normal((batch, 6)).astype(dtype))
        t = rng.integers(0, 5, batch)
        if batch > 2:
            t[1] = -100  # an ignored row
        target = tp.tensor(t)
        got, want = compiled(x, target), eager(x, target)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), **_tol(dtype))
        np.testing.assert_allclose(weights["compiled"].grad.numpy(), weights["eager"].grad.numpy(), **_tol(dtype))
    assert compiled.compile_count == 1, compiled.recompile_reasons
    source = compiled_source(compiled)
    assert "_s_" in source
    assert "_rt.cross_entropy_step(" in source and "what=" not in source  # the range check taken in
    assert "log_softmax" not in source and "np.arange(" not in source and "np.full(" not in source


# ---- training steps shaped as the benchmarks' --------------------------------------------------------------

def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(48, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


def _cnn() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 8, 3), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 2 * 2, 10))


MODELS = {"mlp": _mlp, "cnn": _cnn, "block": lambda: Block(16, 4)}


def _batch(kind: str, batch: int, dtype: str, rng: np.random.Generator) -> tuple[Any, Any]:
    shape = {"mlp": (batch, 48), "cnn": (batch, 1, 14, 14), "block": (batch, 5, 16)}[kind]
    x = tp.tensor(rng.standard_normal(shape).astype(dtype))
    if kind == "block":
        return x, tp.tensor(rng.standard_normal((batch, 5, 16)).astype(dtype))
    return x, tp.tensor(rng.integers(0, 10, batch))


def _training(kind: str, dtype: str) -> tuple[nn.Module, Any]:
    tp.manual_seed(3)
    model = MODELS[kind]()
    if dtype == "float64":
        model = model.double()
    opt: Any = optim.Adam(model.parameters(), lr=1e-2, eps=1e-4) if kind == "block" else \
        optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = F.mse_loss if kind == "block" else F.cross_entropy
    return model, training_step(model, opt, loss_fn)


PATTERN_CALLS = ("_rt.place(", "_rt.window(", "_rt.pad(", "_rt.cross_entropy_step(", "_rt.cross_entropy_grad(",
                 "_rt.sum_leading(", "_rt.rows(", "_rt.layer_norm_backward(", "_rt.attention_probs(")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", sorted(MODELS))
def test_dynamic_steps_match_eager_and_make_the_static_pattern_calls(kind: str, dtype: str) -> None:
    rng = np.random.default_rng(14)
    eager_model, eager_step = _training(kind, dtype)
    model, step = _training(kind, dtype)
    compiled = tp.compile(step, dynamic=True)
    for batch in (4, 1, 7, 16):
        x, y = _batch(kind, batch, dtype, rng)
        want = eager_step(x, y)
        got = compiled(x, y)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), err_msg=f"loss at {batch}",
                                   **_tol(dtype))
        for (name, p), (_, q) in zip(model.named_parameters(), eager_model.named_parameters()):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), err_msg=f"{name} at {batch}",
                                       **_tol(dtype))
    assert compiled.compile_count == 1, compiled.recompile_reasons
    _, static_step = _training(kind, dtype)
    static = tp.compile(static_step, dynamic=False)
    static(*_batch(kind, 4, dtype, rng))
    dynamic_source, static_source = compiled_source(compiled), compiled_source(static)
    assert "_s_" in dynamic_source and "_s_" not in static_source
    counts = {call: (dynamic_source.count(call), static_source.count(call)) for call in PATTERN_CALLS}
    # the windows' views: found per call at symbolic sizes, sliced directly at static ones (and then the
    # placement is the planned buffer itself)
    windows = {call: counts.pop(call) for call in ("_rt.place(", "_rt.window(")}
    assert all(d == s for d, s in counts.values()), counts
    if kind == "block":
        assert windows == {"_rt.place(": (1, 0), "_rt.window(": (3, 0)}, windows
        assert static_source.count(".transpose((0, 2, 1, 3)))") == 3
    else:
        assert counts["_rt.cross_entropy_step("][0] == 1
