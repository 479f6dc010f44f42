"""The kernel threads (``kernels.workers``): every chunk runs once, errors reach the caller, the
sleep and wake hand-shakes work, a busy or nested split runs on its caller, and no reference to a
chunk outlives the split."""

from __future__ import annotations

import gc
import os
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tensorplay.interpreters.eager.kernels import threads, workers


@pytest.fixture
def pool() -> Iterator[workers.KernelThreads]:
    """A private pool of three threads (the process's own is left alone)."""
    made = workers.KernelThreads(3)
    yield made
    made.close()


def _recording(calls: list[tuple[int, int, str]]) -> Any:
    def body(start: int, stop: int) -> None:
        calls.append((start, stop, threading.current_thread().name))
    return body


def test_every_chunk_runs_once_and_the_first_on_the_caller(pool: workers.KernelThreads) -> None:
    for bounds in ([0, 4, 9], [0, 2, 5, 7, 10], [0, 1]):
        calls: list[tuple[int, int, str]] = []
        pool.run(bounds, _recording(calls))
        assert sorted((a, b) for a, b, _ in calls) == list(zip(bounds[:-1], bounds[1:]))
        names = {(a, b): name for a, b, name in calls}
        assert names[(bounds[0], bounds[1])] == threading.current_thread().name
        assert all(name.startswith("tp-kernel-") for (a, _), name in names.items() if a != bounds[0])


def test_the_chunks_really_run_at_once(pool: workers.KernelThreads) -> None:
    barrier = threading.Barrier(3, timeout=10)

    def body(start: int, stop: int) -> None:
        barrier.wait()  # would time out (BrokenBarrierError) if the chunks ran one after another

    pool.run([0, 1, 2, 3], body)


@pytest.mark.parametrize("failing", [1, 0], ids=["a kernel thread's chunk", "the caller's own chunk"])
def test_a_chunks_error_reaches_the_caller_after_every_chunk_finished(pool: workers.KernelThreads,
                                                                     failing: int) -> None:
    finished: list[int] = []

    def body(start: int, stop: int) -> None:
        if start == failing:
            raise ValueError(f"chunk {start} failed")
        time.sleep(0.02)
        finished.append(start)

    with pytest.raises(ValueError, match=f"chunk {failing} failed"):
        pool.run([0, 1, 2, 3], body)
    assert sorted(finished) == sorted({0, 1, 2} - {failing})
    calls: list[tuple[int, int, str]] = []
    pool.run([0, 1, 2, 3], _recording(calls))  # the pool still works, and the error is not raised again
    assert len(calls) == 3


def test_threads_that_slept_are_woken_and_a_caller_that_slept_is_woken(pool: workers.KernelThreads) -> None:
    pool.idle_checks = pool.start_checks = pool.done_checks = 1  # everybody sleeps at once
    for _ in range(20):
        out = np.zeros(4)

        def body(start: int, stop: int) -> None:
            time.sleep(0.001)
            out[start:stop] += 1

        pool.run([0, 1, 2, 3, 4], body)
        np.testing.assert_array_equal(out, 1.0)


def test_park_sends_spinning_threads_to_sleep(pool: workers.KernelThreads) -> None:
    pool.idle_checks = 1 << 40  # would spin for hours unless parked
    pool.run([0, 1, 2], _recording([]))
    asleep = pool.workers[0].base + 3
    pool.park()
    deadline = time.monotonic() + 10
    while pool.cells[asleep] == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert pool.cells[asleep] == 1
    calls: list[tuple[int, int, str]] = []
    pool.run([0, 1, 2], _recording(calls))  # and a parked thread still takes the next chunk
    assert sorted((a, b) for a, b, _ in calls) == [(0, 1), (1, 2)]


def test_a_second_caller_or_a_nested_split_runs_its_chunks_itself(pool: workers.KernelThreads) -> None:
    inside = threading.Event()
    release = threading.Event()
    outer: list[tuple[int, int, str]] = []

    def slow(start: int, stop: int) -> None:
        outer.append((start, stop, threading.current_thread().name))
        if start == 0:
            inside.set()
            release.wait(10)

    first = threading.Thread(target=pool.run, args=([0, 1, 2], slow))
    first.start()
    assert inside.wait(10)
    second: list[tuple[int, int, str]] = []
    pool.run([0, 5, 10], _recording(second))  # the pool is busy: both chunks run here
    assert [(a, b) for a, b, _ in second] == [(0, 5), (5, 10)]
    assert {name for _, _, name in second} == {threading.current_thread().name}
    release.set()
    first.join(10)
    assert sorted((a, b) for a, b, _ in outer) == [(0, 1), (1, 2)]

    nested: list[tuple[int, int, str]] = []

    def splits_again(start: int, stop: int) -> None:
        pool.run([10 * start, 10 * start + 3, 10 * start + 6], _recording(nested))

    pool.run([0, 1, 2], splits_again)
    assert sorted((a, b) for a, b, _ in nested) == [(0, 3), (3, 6), (10, 13), (13, 16)]


def test_no_reference_to_a_chunk_outlives_the_split(pool: workers.KernelThreads) -> None:
    class Payload:
        pass

    payload = Payload()
    alive = weakref.ref(payload)

    def body(start: int, stop: int, held: Payload = payload) -> None:
        assert held is not None

    pool.run([0, 1, 2, 3], body)
    del body, payload
    gc.collect()
    assert alive() is None  # the tape relies on this: it reuses a buffer only it references


def test_the_process_pool_serves_parallel_for_and_a_forked_child() -> None:
    out = np.zeros(1 << 22)

    def body(start: int, stop: int) -> None:
        out[start:stop] = np.arange(start, stop)

    threads.parallel_for(out.size, 4 * out.size, body)
    np.testing.assert_array_equal(out, np.arange(out.size))
    if not hasattr(os, "fork"):
        return
    pid = os.fork()
    if pid == 0:  # the child: a split must not wait on threads that were not forked
        try:
            again = np.zeros(1 << 22)

            def child(start: int, stop: int) -> None:
                again[start:stop] = 1

            threads.parallel_for(again.size, 4 * again.size, child)
            os._exit(0 if again.min() == 1 else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_claim_blas_buffers_runs_a_gemm_on_every_kernel_thread_before_it_serves(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """At import the caller and each kernel thread run their first GEMM (OpenBLAS maps a thread's buffers
    then), the kernel threads with OpenBLAS held to one thread; the pool made later adopts those threads."""
    from tensorplay.interpreters.eager.kernels import _blas

    seen: list[tuple[str, int]] = []
    claimers: set[int | None] = set()
    real = _blas.claim_buffers

    def recording() -> None:
        seen.append((threading.current_thread().name, _blas.threads()))
        claimers.add(threading.get_ident())
        real()
    monkeypatch.setattr(_blas, "claim_buffers", recording)
    monkeypatch.setattr(workers, "_POOL", None)  # a fresh process's state: no pool yet
    monkeypatch.setattr(workers, "_SPARES", [])
    monkeypatch.setattr(threads, "_NUM_THREADS", 3)  # as TP_NUM_THREADS=3 at import
    try:
        threads.claim_blas_buffers()
        claimed = {name for name, _ in seen[1:]}
        assert seen[0][0] == threading.current_thread().name and claimed == {"tp-kernel-0", "tp-kernel-1"}, seen
        assert all(count == 1 for _, count in seen[1:]), seen
        served: set[int | None] = set()
        workers.kernel_threads(threads.MAX_THREADS - 1).run(
            [0, 1, 2, 3], lambda start, stop: served.add(threading.get_ident()))
        assert served == claimers and len(claimers) == 3
        assert workers._SPARES == []
    finally:
        made = workers._POOL
        if made is not None:
            made.close()


def test_claim_blas_buffers_survives_a_process_that_cannot_start_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Importing the kernels must not fail because a warm-up thread could not start."""
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("can't start new thread")
    monkeypatch.setattr(workers, "_POOL", None)
    monkeypatch.setattr(workers, "_SPARES", [])
    monkeypatch.setattr(threading.Thread, "start", refuse)
    before = threads.num_threads()
    try:
        threads.set_num_threads(2)
        threads.claim_blas_buffers()  # no exception
    finally:
        threads.set_num_threads(before)
    assert workers._SPARES == []


def test_raising_the_thread_count_starts_and_claims_the_new_kernel_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """``set_num_threads`` above the count the kernel threads were started for starts the missing ones now,
    each running its first GEMM before it serves."""
    from tensorplay.interpreters.eager.kernels import _blas

    names: list[str] = []
    real = _blas.claim_buffers

    def recording() -> None:
        names.append(threading.current_thread().name)
        real()
    monkeypatch.setattr(_blas, "claim_buffers", recording)
    monkeypatch.setattr(workers, "_POOL", None)
    monkeypatch.setattr(workers, "_SPARES", [])
    before = threads.num_threads()
    try:
        threads.set_num_threads(2)
        assert names == ["tp-kernel-0"]
        threads.set_num_threads(4)
        assert names == ["tp-kernel-0", "tp-kernel-1", "tp-kernel-2"]
        threads.set_num_threads(3)  # enough threads already: none starts
        assert len(names) == 3 and len(workers._SPARES) == 3
        workers.kernel_threads(threads.MAX_THREADS - 1).run([0, 1, 2, 3, 4], lambda start, stop: None)
        assert workers._SPARES == []  # adopted (and closed below)
    finally:
        threads.set_num_threads(before)
        made = workers._POOL
        if made is not None:
            made.close()


def test_kernel_threads_are_parked_before_openblas_threads_work_but_not_inside_a_split(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A large GEMM on OpenBLAS's threads parks the kernel threads first; inside ``run_blas_chunks``
    (OpenBLAS held to one thread, the kernel threads working) the same GEMM parks nothing."""
    from tests.helpers import on_one_then_two_threads

    parks: list[str] = []
    monkeypatch.setattr(workers, "park", lambda: parks.append("park"))
    a = np.ones((256, 256), np.float32)
    big = threads.BLAS_THREADED_MIN_MACS * 4

    def run() -> list[str]:
        parks.clear()
        with threads.blas_threads_for(big):
            pass
        threads.matmul(a, a)  # 16.8M multiply-adds: OpenBLAS keeps its threads
        outside = len(parks)

        def body(start: int, stop: int) -> None:
            with threads.blas_threads_for(big):
                pass
            threads.matmul(a, a)
        threads.run_blas_chunks([0, 1], body)
        return ["park"] * outside + ["split"] + parks[outside:]

    one, two = on_one_then_two_threads(run)
    assert one == ["split"]  # OpenBLAS at one thread: nothing to make room for
    assert two == ["park", "park", "split"]
