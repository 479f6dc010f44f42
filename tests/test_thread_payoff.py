"""The check that decides whether a second thread pays off (interpreters/eager/kernels/payoff.py),
driven with a fake clock and made-up GEMM times, and the thread policy's use of its verdict."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from tensorplay.interpreters.eager.kernels import payoff, threads
from tensorplay.interpreters.eager.kernels.payoff import Payoff


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def drive(check: Payoff, clock: Clock, seconds: float, threaded_time: float, one_time: float,
          keys: tuple[str, ...] = ("a", "b", "c"), step: float = 0.002, spun_time: float | None = None,
          threaded_step: float | None = None) -> list[bool]:
    """Run a loop of large GEMMs (``keys``, then ``step`` seconds of other work; ``threaded_step`` of it
    when the last GEMM had threads, if given) for ``seconds`` of fake time: each GEMM asks how to run,
    takes the given time (a one-thread GEMM soon after a threaded one takes ``spun_time`` when given: the
    workers still spin), is recorded; returns how each ran."""
    ran = []
    end = clock.now + seconds
    last_threaded = -1e9
    while clock.now < end:
        for key in keys:
            threaded = check.threaded()
            spinning = clock.now - last_threaded < payoff.SETTLE_S
            took = threaded_time if threaded else (spun_time if spun_time is not None and spinning else one_time)
            if threaded:
                last_threaded = clock.now + took
            clock.now += took
            check.record(key, threaded, took)
            ran.append(threaded)
        clock.now += step if threaded_step is None or not ran[-1] else threaded_step
    return ran


def test_threads_stay_when_they_pay() -> None:
    clock = Clock()
    check = Payoff(clock)
    check.enabled = True
    ran = drive(check, clock, 10.0, threaded_time=100e-6, one_time=170e-6)
    assert not ran[0]  # the first large GEMMs calibrate on one thread
    later = ran[len(ran) // 4:]
    assert later.count(False) <= 7.5 / payoff.CHECK_PERIOD_S + 1  # one probe per comparison, no more
    assert check.use_threads
    assert check.decisions and all(check.decisions)


def test_threads_are_dropped_when_they_do_not_pay_and_taken_back_when_they_do() -> None:
    clock = Clock()
    check = Payoff(clock)
    check.enabled = True
    drive(check, clock, 3.0, threaded_time=100e-6, one_time=170e-6)
    assert check.use_threads
    ran = drive(check, clock, 3.0, threaded_time=200e-6, one_time=170e-6)  # the second core went bad
    assert not check.use_threads and not check.threads_now()
    assert ran.count(False) > ran.count(True)
    drive(check, clock, 6.0, threaded_time=95e-6, one_time=170e-6)  # ... and came back
    assert check.use_threads and check.threads_now()


def test_one_thread_samples_right_after_threaded_gemms_are_ignored() -> None:
    """OpenBLAS's workers spin ~0.1 s after their last job: one-thread times measured meanwhile are
    slowed by them and must not be taken as the calibration."""
    clock = Clock()
    check = Payoff(clock)
    check.enabled = True
    check.record("a", True, 100e-6)
    clock.now += 0.01
    check.record("a", False, 500e-6)  # within SETTLE_S of the threaded one: dropped
    assert "a" not in check.one_thread
    clock.now += payoff.SETTLE_S
    check.record("a", False, 170e-6)
    assert list(check.one_thread["a"]) == [170e-6]


def test_periods_span_one_way_of_running() -> None:
    """The time between two runs of a GEMM counts for a way (threaded, one thread) only when both ran that
    way in one phase; a one-thread run while the workers still spin counts for neither."""
    clock = Clock()
    check = Payoff(clock)
    check.enabled = True
    check.record("a", True, 100e-6)
    clock.now += 0.002
    check.record("a", True, 100e-6)
    assert list(check.periods[("a", True)]) == [pytest.approx(0.002)]
    clock.now += 0.002
    check.record("a", False, 170e-6)  # the workers still spin: dropped, and it breaks the chain
    clock.now += payoff.SETTLE_S
    check.record("a", False, 170e-6)
    clock.now += 0.003
    check.record("a", False, 170e-6)
    assert list(check.periods[("a", False)]) == [pytest.approx(0.003)]
    check.phase += 1
    clock.now += 0.003
    check.record("a", False, 170e-6)
    assert len(check.periods[("a", False)]) == 1  # a new phase starts a new chain


def test_disabled_check_always_allows_threads() -> None:
    clock = Clock()
    check = Payoff(clock)
    check.enabled = False
    ran = drive(check, clock, 3.0, threaded_time=300e-6, one_time=100e-6)
    assert all(ran) and check.threads_now() and not check.one_thread


@pytest.fixture
def held_to_one() -> Iterator[None]:
    """The process's check forced to 'threads do not pay' for one test."""
    saved = (payoff.CHECK.enabled, payoff.CHECK.use_threads, payoff.CHECK.window, payoff.CHECK.next_tick)
    payoff.CHECK.enabled, payoff.CHECK.use_threads, payoff.CHECK.window = True, False, None
    payoff.CHECK.next_tick = float("inf")
    yield None
    payoff.CHECK.enabled, payoff.CHECK.use_threads, payoff.CHECK.window, payoff.CHECK.next_tick = saved


def test_policy_runs_everything_on_one_thread_while_threads_do_not_pay(held_to_one: object) -> None:
    if threads.num_threads() < 2:
        pytest.skip("needs more than one allowed thread")
    assert threads.active_threads() == 1
    assert threads.threads_for(1 << 20, 1 << 26) == 1
    assert len(threads.blas_chunks(64, 1 << 30)) == 2  # one chunk
    assert threads._hold_to_one(threads.BLAS_THREADED_MIN_MACS * 4, 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemm_results_are_the_same_either_way(dtype: type, held_to_one: object) -> None:
    """Whether a large GEMM runs with threads or on one, the policy's matmul gives the right result, for C- and
    Fortran-ordered operands: in float64 the same bits; in float32 the same to rounding (OpenBLAS never splits
    the inner sum, but some of its releases pick float32 kernels by the rows of a block, so a row's last bit
    can depend on how the rows were split: 1.5e-5 on results of about 16 was seen here)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 96)).astype(dtype)
    b = np.asfortranarray(rng.standard_normal((96, 256)).astype(dtype))
    held = threads.matmul(a, b)
    payoff.CHECK.use_threads = True
    free = threads.matmul(a, b)
    if dtype == np.float64:
        np.testing.assert_array_equal(held, free)
    else:
        np.testing.assert_allclose(held, free, rtol=1e-5, atol=1e-5)
    tight = dtype == np.float64
    np.testing.assert_allclose(free, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-12 if tight else 1e-4,
                               atol=1e-10 if tight else 1e-3)


def test_convolution_path_follows_the_verdict_not_a_cached_one(held_to_one: object) -> None:
    """The convolution's choice between the in-cache path and the wide GEMM is cached per thread count:
    it must be keyed by the threads in use now, so a choice made while held to one thread (the check's
    first calibration, a bad stretch) is not kept once threads pay again."""
    from tensorplay.interpreters.eager.kernels import _blas, convolution

    if threads.num_threads() < 2 or _blas._api() is None:
        pytest.skip("needs two threads and OpenBLAS")
    previous = _blas.threads()
    _blas.set_threads(2)
    try:
        # one large sample: with threads it takes the wide GEMM on OpenBLAS's threads (None)
        cv, _ = convolution._geometry("conv2d", (1, 64, 96, 96), 64, (3, 3), 1, (1, 1), (1, 1), (1, 1))
        dt = np.dtype(np.float32)
        held = convolution._gemm_for_fused(cv, dt)
        payoff.CHECK.use_threads = True
        free = convolution._gemm_for_fused(cv, dt)
        assert held is not None and free is None
    finally:
        _blas.set_threads(previous)


def test_threads_are_dropped_when_the_program_slows_down_though_its_gemms_do_not() -> None:
    """The bad stretches: threaded GEMMs still take 0.7x their one-thread time, but the work between them
    slows down so much that a loop runs faster on one thread."""
    clock = Clock()
    check = Payoff(clock)
    check.enabled = True
    drive(check, clock, 3.0, threaded_time=100e-6, one_time=170e-6, step=0.001)
    assert check.use_threads
    drive(check, clock, 3.0, threaded_time=120e-6, one_time=170e-6, step=0.001, threaded_step=0.002)
    assert not check.use_threads
    drive(check, clock, 6.0, threaded_time=100e-6, one_time=170e-6, step=0.001)
    assert check.use_threads
