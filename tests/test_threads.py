"""Concurrency: what docs/threads.md promises, checked with real threads.

Each test starts its threads on a barrier and shortens the interpreter's switch interval, so
that the threads really interleave (a lost update or a leaked swap shows within a few thousand
iterations); the checks are exact counts, not timings."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import random_state
from tensorplay.func import functional_call
from tensorplay.graph import trace

THREADS = 4


@pytest.fixture(autouse=True)
def frequent_switches() -> Iterator[None]:
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(previous)


def run_threads(body: Callable[[int], Any], n: int = THREADS) -> list[Any]:
    """Run ``body(i)`` in ``n`` threads started together; re-raise the first error; return the results."""
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n
    errors: list[BaseException] = []

    def main(i: int) -> None:
        barrier.wait()
        try:
            results[i] = body(i)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=main, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def test_backward_into_a_shared_leaf_loses_no_update() -> None:
    w = tp.zeros(3, requires_grad=True)
    x = tp.tensor([1.0, 2.0, 3.0])
    steps = 1500

    def body(_: int) -> None:
        for _ in range(steps):
            (w * x).sum().backward()

    run_threads(body)
    assert w.grad is not None
    np.testing.assert_array_equal(w.grad.numpy(), THREADS * steps * np.array([1.0, 2.0, 3.0]))


def test_random_keys_are_never_drawn_twice() -> None:
    tp.manual_seed(7)
    per_thread = 3000

    def body(_: int) -> list[int]:
        return [int(random_state.next_key()[1]) for _ in range(per_thread)]

    counters = [c for keys in run_threads(body) for c in keys]
    assert len(set(counters)) == THREADS * per_thread
    assert sorted(counters) == list(range(THREADS * per_thread))


def test_random_draws_in_threads_are_all_different() -> None:
    tp.manual_seed(3)

    def body(_: int) -> list[float]:
        return [tp.rand(()).item() for _ in range(2000)]

    draws = [v for values in run_threads(body) for v in values]
    assert len(set(draws)) == len(draws)


def _model() -> tp.nn.Module:
    lin = tp.nn.Linear(2, 1)
    with tp.no_grad():
        lin.weight.copy_(tp.tensor([[1.0, 1.0]]))
        lin.bias.zero_()
    return lin


def test_functional_call_does_not_leak_its_parameters_into_other_threads() -> None:
    model = _model()
    x = tp.ones(1, 2)
    swapped = {"weight": tp.tensor([[10.0, 10.0]]), "bias": tp.tensor([5.0])}
    calls = 600

    def body(i: int) -> list[float]:
        seen = []
        for _ in range(calls):
            if i % 2:
                seen.append(functional_call(model, swapped, (x,)).item())
            else:
                seen.append(model(x).item())
        return seen

    results = run_threads(body)
    for i, seen in enumerate(results):
        assert set(seen) == ({25.0} if i % 2 else {2.0}), f"thread {i} saw {sorted(set(seen))}"
    assert model(x).item() == 2.0


def test_tracing_a_module_does_not_leak_recorded_parameters_into_other_threads() -> None:
    model = _model()
    x = tp.ones(1, 2)
    rounds = 150

    def body(i: int) -> list[float]:
        seen = []
        for _ in range(rounds):
            if i % 2:
                seen.append(trace(model, x)(x).item())
            else:
                seen.append(model(x).item())
        return seen

    for seen in run_threads(body):
        assert set(seen) == {2.0}


def test_shapecheck_blocks_are_per_thread() -> None:
    from tensorplay import Tensor
    from tensorplay.dims import Feat

    @tp.shapecheck
    def same(a: Tensor[Feat], b: Tensor[Feat]) -> Tensor[Feat]:
        return a

    # two overlapping blocks, in the order that used to leave checking off: A enters, B enters,
    # A leaves, B leaves; meanwhile a third thread must still be checked
    both_inside = threading.Barrier(3)
    a_left = threading.Event()
    checked_outside: list[bool] = []

    def body(i: int) -> None:
        if i == 2:
            both_inside.wait()
            try:
                same(tp.ones(2), tp.ones(3))
                checked_outside.append(False)
            except tp.errors.ShapeError:
                checked_outside.append(True)
            return
        with tp.shapecheck.disabled():
            same(tp.ones(2), tp.ones(3))  # unchecked in this thread
            both_inside.wait()
            if i == 1:
                a_left.wait()
        if i == 0:
            a_left.set()

    run_threads(body, 3)
    assert checked_outside == [True]
    assert tp.shapecheck.is_enabled()
    with pytest.raises(tp.errors.ShapeError):
        same(tp.ones(2), tp.ones(3))
