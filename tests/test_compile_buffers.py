"""The buffer plan of ``tp.compile`` (:mod:`tensorplay.compiler.numba_backend.buffers`): the arrays GEMMs and
fused kernels write inside a compiled function are allocated once and reused by later calls, and nothing a
call hands out lives in them -- outputs (also through views), residuals a training region's backward reads
later, new values of state -- so a later call never changes what an earlier one returned. Two threads and
a call made from inside a running call each get their own buffers. References: PyTorch, numpy, the eager
interpreter."""

from __future__ import annotations

import copy
import tracemalloc
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay import nn, optim
from tensorplay.compiler.backends import BackendError
from tensorplay.compiler.numba_backend import buffers, runtime
from tensorplay.errors import IndexRangeError
from tests.helpers import run_in_threads

DTYPES = ["float32", "float64"]


def tol(dtype: str) -> dict[str, float]:
    return {"rtol": 2e-5, "atol": 2e-5} if dtype == "float32" else {"rtol": 1e-11, "atol": 1e-11}


def draw(rng: np.random.Generator, dtype: str, *shape: int) -> np.ndarray[Any, Any]:
    return rng.standard_normal(shape).astype(dtype)


def arena_of(compiled: Any, backward: bool = False) -> buffers.Arena:
    """The arena of ``compiled``'s (only) specialization: the plan these tests exercise is not empty."""
    program = compiled.specializations[-1].program
    fn = program.backward if backward else program.forward
    if not hasattr(fn, "arena"):  # the backward behind the wrapper that adds the constants the passes folded
        fn = next(c.cell_contents for c in fn.__closure__ or () if hasattr(c.cell_contents, "arena"))
    arena = fn.arena
    assert isinstance(arena, buffers.Arena) and arena.views, "nothing was planned: the test would prove nothing"
    return arena


def mlp_function(x: Any, w1: Any, w2: Any) -> Any:
    """A GEMM, a kernel on its result, a second GEMM: the first two write planned buffers."""
    return ((x @ w1 + 1.0).relu() @ w2).sum()


def mlp_numpy(x: Any, w1: Any, w2: Any) -> Any:
    return (np.maximum(x @ w1 + 1.0, 0.0) @ w2).sum()


@pytest.mark.parametrize("dtype", DTYPES)
def test_outputs_and_views_of_intermediates_survive_later_calls(dtype: str) -> None:
    rng = np.random.default_rng(0)
    w1, w2 = tp.tensor(draw(rng, dtype, 6, 80)), tp.tensor(draw(rng, dtype, 80, 64))

    def f(x: Any) -> Any:
        g = x @ w1  # a GEMM ...
        h = (g * 0.5 - 0.2).relu()  # ... and a kernel on it, both returned only through views
        y = (h @ w2 + 1.0).relu()  # more planned work after them, overwriting free buffers
        return g.T, h.reshape(-1)[3:50], h[1:4, ::2], y @ w2.T, (y @ w2.T).sum()

    def reference(x: np.ndarray[Any, Any]) -> list[np.ndarray[Any, Any]]:
        tx, t1, t2 = (torch.from_numpy(a) for a in (x, w1.numpy(), w2.numpy()))
        g = tx @ t1
        h = torch.relu(g * 0.5 - 0.2)
        y = torch.relu(h @ t2 + 1.0)
        return [a.numpy() for a in (g.T, h.reshape(-1)[3:50], h[1:4, ::2], y @ t2.T, (y @ t2.T).sum())]

    compiled = tp.compile(f, options={"small_kernels": True})
    xs = [draw(rng, dtype, 70, 6) for _ in range(4)]
    kept = []
    with tp.no_grad():
        for x in xs:
            kept.append([out.numpy() for out in compiled(tp.tensor(x))])
    arena_of(compiled)
    for x, outs in zip(xs, kept):  # the first call's arrays too, after three more calls
        for got, expected in zip(outs, reference(x)):
            np.testing.assert_allclose(got, expected, **tol(dtype))


def test_a_view_keeps_its_buffer_alive_after_its_base_is_last_read() -> None:
    rng = np.random.default_rng(10)
    w1, w2 = draw(rng, "float64", 48, 48), draw(rng, "float64", 48, 48)

    def f(x: Any) -> Any:
        t = (x @ tp.tensor(w1)).T  # the GEMM's result is not read again, its transpose is, below
        u = (x @ tp.tensor(w2) * 2.0 + 1.0).relu()  # two more planned arrays of the same size meanwhile
        return (t @ u).sum()

    compiled = tp.compile(f)
    for _ in range(3):
        x = draw(rng, "float64", 48, 48)
        with tp.no_grad():
            got = compiled(tp.tensor(x)).item()
        np.testing.assert_allclose(got, ((x @ w1).T @ np.maximum(x @ w2 * 2.0 + 1.0, 0.0)).sum(), rtol=1e-10)
    arena_of(compiled)


@pytest.mark.parametrize("dtype", DTYPES)
def test_residuals_survive_a_second_forward_before_backward(dtype: str) -> None:
    rng = np.random.default_rng(1)
    w1 = tp.tensor(draw(rng, dtype, 8, 128)).requires_grad_(True)
    w2 = tp.tensor(draw(rng, dtype, 128, 3)).requires_grad_(True)

    def f(x: Any) -> Any:
        return ((x @ w1).tanh() @ w2).square().mean()

    compiled = tp.compile(f, options={"small_kernels": True})
    xs = [draw(rng, dtype, 64, 8) for _ in range(3)]
    losses = [compiled(tp.tensor(x)) for x in xs]  # three forwards, then the backwards, last one first
    arena_of(compiled)  # x @ w1 is planned in the forward (its tanh, a residual, is not)
    arena_of(compiled, backward=True)
    for x, loss in reversed(list(zip(xs, losses))):
        w1.grad = w2.grad = None
        loss.backward()
        t1, t2 = (torch.tensor(w.detach().numpy(), requires_grad=True) for w in (w1, w2))
        expected = ((torch.from_numpy(x) @ t1).tanh() @ t2).square().mean()
        expected.backward()
        np.testing.assert_allclose(loss.item(), expected.item(), **tol(dtype))
        np.testing.assert_allclose(w1.grad.numpy(), t1.grad.numpy(), **tol(dtype))
        np.testing.assert_allclose(w2.grad.numpy(), t2.grad.numpy(), **tol(dtype))


def test_new_values_of_state_survive_later_calls() -> None:
    rng = np.random.default_rng(2)
    w = tp.tensor(draw(rng, "float64", 5, 40))

    def f(state: Any, acc: Any, x: Any) -> Any:
        h = x @ w
        state.copy_(h)  # a GEMM's result written into the user's tensor
        acc.add_((h * 2.0).relu())  # a kernel's result written into the user's tensor
        return ((h @ w.T) @ w).sum()  # planned arrays too

    compiled = tp.compile(f, options={"small_kernels": True})
    states = [tp.tensor(np.zeros((100, 40))) for _ in range(3)]
    accs = [tp.tensor(np.ones((100, 40))) for _ in range(3)]
    xs = [draw(rng, "float64", 100, 5) for _ in range(3)]
    with tp.no_grad():
        for state, acc, x in zip(states, accs, xs):
            compiled(state, acc, tp.tensor(x))
    arena_of(compiled)
    for state, acc, x in zip(states, accs, xs):
        h = x @ w.numpy()
        np.testing.assert_allclose(state.numpy(), h, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(acc.numpy(), 1.0 + np.maximum(2.0 * h, 0.0), rtol=1e-12, atol=1e-12)


def test_a_training_step_matches_eager_over_many_steps() -> None:
    tp.manual_seed(3)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.GELU(), nn.LayerNorm(64),
                          nn.Linear(64, 5))
    twin = copy.deepcopy(model)
    opts = [optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for m in (model, twin)]

    def step(m: Any, opt: Any, x: Any, y: Any) -> Any:
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss

    compiled = tp.compile(lambda x, y: step(model, opts[0], x, y))
    rng = np.random.default_rng(3)
    for k in range(12):
        x = tp.tensor(draw(rng, "float32", 128, 20))
        y = tp.tensor(rng.integers(0, 5, size=128))
        got = compiled(x, y).item()
        expected = step(twin, opts[1], x, y).item()
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5, err_msg=f"step {k}")
    arena_of(compiled)
    for (name, a), (_, b) in zip(model.named_parameters(), twin.named_parameters()):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-4, atol=1e-5, err_msg=name)


def test_threads_calling_one_compiled_function_get_their_own_buffers() -> None:
    rng = np.random.default_rng(4)
    w1, w2 = draw(rng, "float64", 64, 256), draw(rng, "float64", 256, 4)
    compiled = tp.compile(lambda x: mlp_function(x, tp.tensor(w1), tp.tensor(w2)))
    xs = [draw(rng, "float64", 200, 64) for _ in range(4)]
    with tp.no_grad():
        compiled(tp.tensor(xs[0]))
    arena_of(compiled)
    def call(k: int, r: int) -> float:
        with tp.no_grad():
            return float(compiled(tp.tensor(xs[(k + r) % 4])).item())

    results = run_in_threads(4, call, rounds=25)
    for (k, r), got in results.items():
        np.testing.assert_allclose(got, mlp_numpy(xs[(k + r) % 4], w1, w2), rtol=1e-10)


def test_a_call_made_inside_a_running_call_gets_its_own_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A hook (here: around the second GEMM) calling the compiled function again while the outer call's
    planned intermediates are still to be read."""
    rng = np.random.default_rng(5)
    w1, w2 = draw(rng, "float64", 16, 128), draw(rng, "float64", 128, 4)
    compiled = tp.compile(lambda x: mlp_function(x, tp.tensor(w1), tp.tensor(w2)))
    outer_x, inner_x = draw(rng, "float64", 64, 16), 10.0 * draw(rng, "float64", 64, 16)
    with tp.no_grad():
        compiled(tp.tensor(outer_x))
    arena_of(compiled)
    gemm = runtime.matmul
    inner: list[float] = []
    calls: list[int] = []

    def hooked(a: Any, b: Any, dtype: Any, out: Any = None) -> Any:
        if b.shape == w2.shape and not calls:
            calls.append(1)
            inner.append(compiled(tp.tensor(inner_x)).item())
        return gemm(a, b, dtype, out=out)

    monkeypatch.setattr(runtime, "matmul", hooked)
    with tp.no_grad():
        outer = compiled(tp.tensor(outer_x)).item()
    assert len(inner) == 1
    np.testing.assert_allclose(inner[0], mlp_numpy(inner_x, w1, w2), rtol=1e-10)
    np.testing.assert_allclose(outer, mlp_numpy(outer_x, w1, w2), rtol=1e-10)


@pytest.mark.parametrize("dtype", DTYPES)
def test_dynamic_shapes_are_sized_per_call(dtype: str) -> None:
    """Arrays of symbolic shapes are planned, in buffers sized for each call's sizes."""
    rng = np.random.default_rng(6)
    w1, w2 = draw(rng, dtype, 7, 96), draw(rng, dtype, 96, 3)

    def f(x: Any) -> Any:
        h = (x @ tp.tensor(w1)).relu()
        return h @ tp.tensor(w2), h.sum(1)

    compiled = tp.compile(f, dynamic=True, options={"small_kernels": True})
    xs = [draw(rng, dtype, n, 7) for n in (40, 75, 0, 40, 3, 9, 21, 40, 9)]  # more sizes than sets are kept for
    with tp.no_grad():
        kept = [[out.numpy() for out in compiled(tp.tensor(x))] for x in xs]
    assert len(compiled.specializations) == 1
    arena = arena_of(compiled)
    assert arena.symbols and any(type(d) is not int for _, shape, _, _ in arena.views for d in shape)
    for x, (y, s) in zip(xs, kept):
        h = np.maximum(x @ w1, 0.0)
        np.testing.assert_allclose(y, h @ w2, **tol(dtype))
        np.testing.assert_allclose(s, h.sum(1), **tol(dtype))


@pytest.mark.parametrize("shapes", [((0, 6), (6, 5)), ((4, 0), (0, 5)), ((4, 6), (6, 0))],
                         ids=["no-rows", "no-inner", "no-columns"])
def test_zero_size_dims(shapes: tuple[tuple[int, int], tuple[int, int]]) -> None:
    rng = np.random.default_rng(7)
    (m, k), (_, n) = shapes

    big = tp.tensor(draw(rng, "float64", 64, 64))

    def f(x: Any, w: Any, v: Any, big: Any) -> Any:
        h = (x @ w + 1.0).relu()  # an empty inner size: the GEMM must write zeros into its (reused) buffer
        g = (big @ big + 1.0).relu()  # planned arrays beside the empty ones
        return h @ v, h.sum(), (h * 3.0).sum(0), (g @ g).sum()

    compiled = tp.compile(f, options={"small_kernels": True})
    g = np.maximum(big.numpy() @ big.numpy() + 1.0, 0.0)
    for _ in range(3):
        x, w, v = draw(rng, "float64", m, k), draw(rng, "float64", k, n), draw(rng, "float64", n, 2)
        with tp.no_grad():
            got = [out.numpy() for out in compiled(tp.tensor(x), tp.tensor(w), tp.tensor(v), big)]
        h = np.maximum(x @ w + 1.0, 0.0)
        for a, b in zip(got, (h @ v, h.sum(), (h * 3.0).sum(0), (g @ g).sum())):
            assert a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    assert (m, n) in [shape for _, shape, _, _ in arena_of(compiled).views]  # x @ w and h are planned


def test_a_call_that_raises_gives_its_buffers_back() -> None:
    rng = np.random.default_rng(11)
    w = draw(rng, "float32", 12, 200)

    def f(x: Any, y: Any) -> Any:
        return F.cross_entropy((x @ tp.tensor(w) + 0.5).relu(), y)

    compiled = tp.compile(f)
    x = draw(rng, "float32", 64, 12)
    good, bad = rng.integers(0, 200, size=64), np.full(64, 7)
    bad[5] = 200  # out of range: raised while the call holds its buffers
    with tp.no_grad():
        compiled(tp.tensor(x), tp.tensor(good))
        with pytest.raises(IndexRangeError, match=r"target 200 at position \[5\] is out of range"):
            compiled(tp.tensor(x), tp.tensor(bad))
        got = compiled(tp.tensor(x), tp.tensor(good)).item()
    expected = torch.nn.functional.cross_entropy(torch.relu(torch.from_numpy(x) @ torch.from_numpy(w) + 0.5),
                                                 torch.from_numpy(good))
    np.testing.assert_allclose(got, expected.item(), rtol=1e-5)
    assert arena_of(compiled).allocations == 1  # the failed call's set came back and was reused


def _peak_bytes(fn: Any) -> int:
    """Bytes allocated beyond what was live before, at the peak of ``fn()``."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def test_steady_state_calls_allocate_no_large_arrays() -> None:
    rng = np.random.default_rng(8)
    x, w1, w2 = (tp.tensor(draw(rng, "float64", *s)) for s in ((256, 128), (128, 512), (512, 4)))
    planned = tp.compile(mlp_function)
    unplanned = tp.compile(mlp_function, options={"buffers": False})
    with tp.no_grad():
        for fn in (planned, unplanned):
            for _ in range(3):
                fn(x, w1, w2)
        intermediate = 256 * 512 * 8  # x @ w1 and the kernel's output on it: 1 MiB each
        assert _peak_bytes(lambda: unplanned(x, w1, w2)) >= 2 * intermediate
        assert _peak_bytes(lambda: planned(x, w1, w2)) < intermediate // 4
        np.testing.assert_allclose(planned(x, w1, w2).item(), mlp_numpy(x.numpy(), w1.numpy(), w2.numpy()),
                                   rtol=1e-10)
    assert arena_of(planned).allocations == 1


def test_lifetimes_share_slots_and_overlapping_ones_do_not() -> None:
    rng = np.random.default_rng(9)
    ws = [tp.tensor(draw(rng, "float64", 64, 64)) for _ in range(4)]

    def chain(x: Any) -> Any:
        for w in ws:
            x = (x @ w * 0.5 - 0.1).relu()  # a GEMM, then a kernel reading it
        return x.sum()

    compiled = tp.compile(chain)
    x = draw(rng, "float64", 64, 64)
    with tp.no_grad():
        got = compiled(tp.tensor(x)).item()
    expected = x
    for w in ws:
        expected = np.maximum(expected @ w.numpy() * 0.5 - 0.1, 0.0)
    np.testing.assert_allclose(got, expected.sum(), rtol=1e-10)
    arena = arena_of(compiled)
    # 4 GEMMs and 3 kernels (each kernel's output with a row- and a column-major view; the last kernel sums
    # into the output, which is not planned): two slots in turn
    assert [slot for slot, *_ in arena.views] == [0, 1, 1] * 3 + [0]
    assert arena.slot_sizes() == [64 * 64 * 8] * 2
    views = arena.acquire()
    arena.release(views)
    assert arena.acquire() is views  # the next call takes the same set
    other = arena.acquire()  # ... while it is held, a second caller gets another
    assert not any(np.shares_memory(a, b) for a in views for b in other)


def test_a_function_on_tiny_arrays_gets_no_plan() -> None:
    """Taking a set of buffers costs more than allocating a few tiny arrays."""
    compiled = tp.compile(lambda a, b: ((a @ b) @ b).sum())
    a, b = tp.randn(4, 4), tp.randn(4, 4)
    with tp.no_grad():
        np.testing.assert_allclose(compiled(a, b).item(), ((a.numpy() @ b.numpy()) @ b.numpy()).sum(), rtol=1e-5)
    assert compiled.specializations[0].program.forward.arena is None


def test_the_buffers_option_must_be_a_bool() -> None:
    with pytest.raises(BackendError, match="option 'buffers' must be True or False, got 'no'"):
        tp.compile(lambda x: x @ x, options={"buffers": "no"})(tp.ones(2, 2))
