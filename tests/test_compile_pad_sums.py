"""The backward of slicing one array into pieces (a ``q, k, v`` projection's split) records a sum of zero
pads into disjoint windows; compiled, it is the pieces copied into their windows of one array
(:func:`tensorplay.compiler.numba_backend.runtime.place`), a transposed piece copied once. Gradients agree
with eager and PyTorch in float32 and float64, with windows that fill the result or leave zeros, odd
sizes, transposed pieces, NaN and inf; overlapping windows are left as recorded."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from tensorplay.compiler.numba_backend.runtime import place
import tensorplay as tp
from tests.helpers import compiled_source


def _tol(dtype: str) -> dict[str, float]:
    return {"rtol": 1e-5, "atol": 1e-6} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-13}


def _pieces(x: Any, bounds: list[tuple[int, int]], heads: int) -> list[Any]:
    """Slices ``x[..., lo:hi]`` of ``x[b, n, c]``, each split into ``heads`` and moved to ``[b, heads, n, -]``
    (a permuted view, as attention's heads)."""
    b, n = x.shape[0], x.shape[1]
    return [x[:, :, lo:hi].reshape(b, n, heads, (hi - lo) // heads).permute(0, 2, 1, 3) for lo, hi in bounds]


def _attention_step(w: Any, bounds: list[tuple[int, int]], heads: int) -> Any:
    """``step(x, g)``: ``x @ w`` split at ``bounds`` into q, k, v heads, attention, the loss ``sum(out * g)``
    and its backward into ``w.grad``."""
    import tensorplay.nn.functional as F

    def step(xb: Any, g: Any) -> Any:
        w.grad = None
        q, k, v = _pieces(xb @ w, bounds, heads)
        loss = (F.scaled_dot_product_attention(q, k, v) * g).sum()
        loss.backward()
        return loss
    return step


def _grads(data: np.ndarray[Any, Any], cots: list[np.ndarray[Any, Any]], bounds: list[tuple[int, int]], heads: int,
           how: str) -> tuple[np.ndarray[Any, Any], str]:
    if how == "torch":
        t = torch.tensor(data, requires_grad=True)
        loss = sum((p * torch.tensor(c)).sum() for p, c in zip(_pieces(t, bounds, heads), cots))
        loss.backward()  # type: ignore[union-attr]
        assert t.grad is not None
        return t.grad.numpy(), ""
    w = tp.tensor(data, requires_grad=True)

    def step(*gs: Any) -> Any:
        w.grad = None
        loss = None
        for p, g in zip(_pieces(w, bounds, heads), gs):
            term = (p * g).sum()
            loss = term if loss is None else loss + term
        assert loss is not None
        loss.backward()
        return loss

    fn = tp.compile(step) if how == "compiled" else step
    args = [tp.tensor(c) for c in cots]
    fn(*args)
    fn(*args)  # the cached specialization again
    assert w.grad is not None
    return w.grad.numpy().copy(), compiled_source(fn) if how == "compiled" else ""


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("bounds,heads,covering", [([(0, 6), (6, 12), (12, 18)], 2, True),
                                                   ([(0, 3), (6, 9)], 3, False),
                                                   ([(4, 8), (0, 4)], 1, True)])
@pytest.mark.parametrize("special", [False, True])
def test_slices_backward_is_one_placement(dtype: str, bounds: list[tuple[int, int]], heads: int, covering: bool,
                                          special: bool) -> None:
    rng = np.random.default_rng(5)
    width = max(hi for _, hi in bounds) + (0 if covering else 2)
    data = rng.standard_normal((3, 5, width)).astype(dtype)
    cots = [rng.standard_normal((3, heads, 5, (hi - lo) // heads)).astype(dtype) for lo, hi in bounds]
    if special:
        cots[0].reshape(-1)[:3] = [np.nan, np.inf, -np.inf]
    got, source = _grads(data, cots, bounds, heads, "compiled")
    assert "_rt.place(" in source and "_rt.pad(" not in source
    eager, _ = _grads(data, cots, bounds, heads, "eager")
    want, _ = _grads(data, cots, bounds, heads, "torch")
    np.testing.assert_allclose(got, want, **_tol(dtype))
    np.testing.assert_allclose(got, eager, **_tol(dtype))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    if not covering:  # the columns no slice reads get exact zeros
        assert not got[..., max(hi for _, hi in bounds):].any()


def test_overlapping_windows_are_left_as_recorded() -> None:
    rng = np.random.default_rng(6)
    data = rng.standard_normal((2, 4, 8))
    bounds = [(0, 6), (2, 8)]
    cots = [rng.standard_normal((2, 1, 4, 6)) for _ in bounds]
    got, source = _grads(data, cots, bounds, 1, "compiled")
    assert "_rt.place(" not in source
    want, _ = _grads(data, cots, bounds, 1, "torch")
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)


def test_place_writes_through_a_view_or_reshapes_the_value() -> None:
    rng = np.random.default_rng(7)
    a = rng.standard_normal((2, 4, 3, 5)).transpose(0, 2, 1, 3)  # [2, 3, 4, 5], non-contiguous
    b = rng.standard_normal((2, 3, 20)).T.copy().T  # Fortran-ordered [2, 3, 20]
    before = (a.copy(), b.copy())
    out = place((2, 3, 41), np.float64, ((a, (0, 0, 0), (2, 3, 20)), (b, (0, 0, 21), (2, 3, 20))), False)
    np.testing.assert_array_equal(out[..., :20], a.reshape(2, 3, 20))
    np.testing.assert_array_equal(out[..., 21:], b)
    assert not out[..., 20].any()
    np.testing.assert_array_equal(a, before[0])
    np.testing.assert_array_equal(b, before[1])


@pytest.mark.parametrize("covering", [True, False])
def test_placement_into_a_planned_buffer_is_fresh_every_call(covering: bool) -> None:
    """Large enough for the buffer plan, and read only by the weight's GEMM (as a projection's split is):
    the placed cotangent lives in a reused buffer, so every call must rewrite it whole (zeros outside the
    windows included) and give the gradient of its own cotangents."""
    rng = np.random.default_rng(8)
    bounds = [(0, 64), (64, 128), (128, 192)] if covering else [(0, 64), (72, 136)]
    width = 192 if covering else 140
    x = rng.standard_normal((8, 32, 16)).astype("float32")
    w_np = rng.standard_normal((16, width)).astype("float32")
    w = tp.tensor(w_np, requires_grad=True)

    def step(xb: Any, *gs: Any) -> Any:
        w.grad = None
        loss = None
        for p, g in zip(_pieces(xb @ w, bounds, 4), gs):
            term = (p * g).sum()
            loss = term if loss is None else loss + term
        assert loss is not None
        loss.backward()
        return loss

    compiled = tp.compile(step)
    for call in range(3):
        cots = [(rng.standard_normal((8, 4, 32, (hi - lo) // 4)) * (call + 1)).astype("float32") for lo, hi in bounds]
        compiled(tp.tensor(x), *[tp.tensor(c) for c in cots])
        assert w.grad is not None
        tw = torch.tensor(w_np, requires_grad=True)
        y = torch.tensor(x) @ tw
        sum((p * torch.tensor(c)).sum() for p, c in zip(_pieces(y, bounds, 4), cots)).backward()  # type: ignore[union-attr]
        assert tw.grad is not None
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-3)
    line = next(line for line in compiled_source(compiled).splitlines() if "_rt.place(" in line)
    assert "out=_b" in line  # written into the plan


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_attention_projection_gradients_written_into_their_windows(dtype: str) -> None:
    """A projection split into q, k, v heads around an attention (the benchmark block's shape): the three
    batched GEMMs of the attention's backward write their products straight into the windows of the planned
    cotangent, which the weight's GEMM then reads: at static shapes their views are sliced directly and the
    placement is the planned buffer itself. Every call agrees with PyTorch."""
    rng = np.random.default_rng(9)
    b, n, h, d = 8, 32, 4, 16
    x = rng.standard_normal((b, n, 16)).astype(dtype)
    w_np = (rng.standard_normal((16, 3 * h * d)) * 0.3).astype(dtype)
    w = tp.tensor(w_np, requires_grad=True)
    bounds = [(0, h * d), (h * d, 2 * h * d), (2 * h * d, 3 * h * d)]

    compiled = tp.compile(_attention_step(w, bounds, h))
    for call in range(3):
        cot = (rng.standard_normal((b, h, n, d)) * (call + 1)).astype(dtype)
        compiled(tp.tensor(x), tp.tensor(cot))
        assert w.grad is not None
        tw = torch.tensor(w_np, requires_grad=True)
        tq, tk, tv = _pieces(torch.tensor(x) @ tw, bounds, h)
        (torch.nn.functional.scaled_dot_product_attention(tq, tk, tv) * torch.tensor(cot)).sum().backward()
        assert tw.grad is not None
        tol = {"rtol": 2e-4, "atol": 2e-4} if dtype == "float32" else {"rtol": 1e-10, "atol": 1e-10}
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), **tol)
    for spec in compiled.specializations:  # (the first call, without a .grad yet, has its own)
        source = spec.program.forward.source
        # static shapes: the three windows are sliced directly and the placement is the planned buffer
        assert source.count(".transpose((0, 2, 1, 3)))") == 3 and "_rt.window(" not in source, source
        assert "_rt.place(" not in source, source


def test_symbolic_windows_are_found_at_run_time() -> None:
    """With a symbolic batch the windows' views are found per call (``_rt.window``) and the placement checks
    each piece; gradients agree with eager at two batch sizes of one compilation."""
    rng = np.random.default_rng(3)
    n, h, d = 8, 2, 4
    w_np = (rng.standard_normal((6, 3 * h * d)) * 0.3).astype("float64")
    bounds = [(0, h * d), (h * d, 2 * h * d), (2 * h * d, 3 * h * d)]
    weights = [tp.tensor(w_np, requires_grad=True) for _ in range(2)]

    compiled = tp.compile(_attention_step(weights[0], bounds, h), dynamic=True)
    eager = _attention_step(weights[1], bounds, h)
    for b in (5, 3, 5):
        x = tp.tensor(rng.standard_normal((b, n, 6)))
        g = tp.tensor(rng.standard_normal((b, h, n, d)))
        compiled(x, g)
        eager(x, g)
        assert weights[0].grad is not None and weights[1].grad is not None
        np.testing.assert_allclose(weights[0].grad.numpy(), weights[1].grad.numpy(), rtol=1e-12, atol=1e-12)
    source = compiled.specializations[-1].program.forward.source
    assert source.count("out=_rt.window(") == 3 and "_rt.place(" in source, source


def test_window_is_a_view_or_none() -> None:
    from tensorplay.compiler.numba_backend.runtime import window

    out = np.zeros((2, 3, 12))
    view = window(out, (0, 0, 4), (2, 3, 8), (2, 3, 2, 4), (0, 2, 1, 3))
    assert view is not None and view.shape == (2, 2, 3, 4) and np.shares_memory(view, out)
    view[...] = 1.0
    assert out[..., 4:].all() and not out[..., :4].any()
    # rows 3..5 of each of two [6, 4] blocks: their [2, 3] axes do not merge into one axis of 6 without a copy
    assert window(np.zeros((2, 6, 4)), (0, 3, 0), (2, 3, 4), (6, 4), (1, 0)) is None


@pytest.mark.parametrize("case", [
    ((2, 3, 12), (0, 0, 4), (2, 3, 8), (2, 3, 2, 4), (0, 2, 1, 3)),
    ((2, 6, 4), (0, 3, 0), (2, 3, 4), (6, 4), (1, 0)),  # no view: both give none
    ((16, 32, 192), (0, 0, 128), (16, 32, 64), (16, 32, 4, 16), (0, 2, 1, 3)),
    ((3, 5, 7), (1, 2, 3), (2, 3, 4), (2, 3, 4), (2, 0, 1)),
    ((4, 6), (0, 2), (4, 3), (4, 3), (1, 0)),
    ((4, 6), (0, 0), (4, 6), (24,), (0,)),
    ((4, 6), (0, 1), (4, 4), (16,), (0,)),  # rows of a window do not merge: no view
    ((4, 6), (0, 6), (4, 0), (4, 0), (0, 1)),  # empty: left to the run time
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_static_window_views_are_the_run_time_ones(case: tuple[Any, ...], dtype: str) -> None:
    """The view the generated code slices for a static window is the one :func:`runtime.window` finds: the
    same elements of the buffer in the same order (writing through each marks the same positions), or no
    view from either."""
    from tensorplay.compiler.numba_backend.runtime import window
    from tensorplay.compiler.numba_backend.windows import static_view

    shape, low, window_shape, value_shape, inverse = case
    source = static_view("buf", shape, dtype, low, window_shape, value_shape, inverse)
    found = window(np.zeros(shape, dtype), low, window_shape, value_shape, inverse)
    if source is None:
        assert found is None or found.size == 0
        return
    assert found is not None
    marks = []
    for make in (lambda buf: eval(source, {"buf": buf}), lambda buf: window(buf, low, window_shape, value_shape,
                                                                           inverse)):
        buf = np.zeros(shape, dtype)
        view = make(buf)
        assert view is not None and np.shares_memory(view, buf) and view.shape == found.shape
        view[...] = np.arange(1, view.size + 1, dtype=dtype).reshape(view.shape)
        marks.append(buf)
    np.testing.assert_array_equal(marks[0], marks[1])
