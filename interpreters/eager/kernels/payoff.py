"""Whether a second thread pays off right now, judged by timing the GEMMs the program runs anyway.

**Why.** On the two-core virtual machines these numbers come from, the second core is not always a
core: for stretches of 10-60 s (found by running the same step for minutes), any computation that
keeps both cores busy runs about 1.6x slower per thread, while one thread alone keeps its speed. A
transformer-block training step then took 3.6-4.2 ms with two threads against 2.9-3.4 ms with one,
and 2.3-2.5 ms with two in the good stretches; two processes started a second apart could land in
different stretches. No thread count chosen once is right for both, so the policy watches.

**How.** Every GEMM large enough to get OpenBLAS's threads (:data:`.threads.BLAS_THREADED_MIN_MACS`)
is timed, keyed by its shape, dtype and operand layouts (two clock reads: well under 1 us against the
40 us or more of such a GEMM), and so is the time since the same GEMM last ran the same way: its
*period*, one training step in a loop, everything the program did in between included. One-thread
figures come from a *held window*: the first large GEMMs of the process, and again every
:data:`RECALIBRATE_S` seconds (or when shapes without a calibration show up), run on one thread until
the window has a few periods. A one-thread run counts only once :data:`SETTLE_S` passed since the last
threaded GEMM: OpenBLAS's workers spin about 0.1 s after their last job, and spinning workers slow the
thread they share the machine with in the bad stretches.

Every :data:`CHECK_PERIOD_S`, while threads are used, the recent threaded periods (medians per shape,
added up) are compared with the one-thread ones: threads pay when the ratio is at most
:data:`PERIOD_RATIO`. Periods, not the GEMMs' own times, because in the bad stretches it is the work
between the GEMMs that slows down (an MLP step took 2.2-2.5 ms with threads whose GEMMs still took
0.7-0.8x their one-thread time, against 1.8-1.9 ms on one thread); where no GEMM recurs, the GEMMs'
times decide (:data:`PAY_RATIO`). When threads do not pay, every eager computation runs on the calling
thread (:func:`.threads.active_threads` says 1: GEMMs held to one OpenBLAS thread, no kernel-thread
splits). While held to one, every :data:`TRY_PERIOD_S` a *threaded window* of at least
:data:`THREADED_WINDOW_S` runs them with threads again until it has a few periods, and the same
comparison decides. Results do not depend on the choice: work is partitioned by
:func:`.threads.cpu_threads`, not by the threads in use.

The check runs only when more than one thread is allowed; ``TP_THREAD_CHECK=0`` turns it off (threads
are then always used as :mod:`.threads` says), as does :func:`set_enabled`.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections import deque
from typing import Any, Callable, Hashable

ENV_VAR = "TP_THREAD_CHECK"

HELD_SAMPLE_S = 0.08
"""The least time a held window samples one-thread GEMMs (after :data:`SETTLE_S`, when threads ran
lately); it goes on (up to 10x) until it has 3 periods."""

SETTLE_S = 0.15
"""How long after the last threaded GEMM one-thread samples are ignored (OpenBLAS's workers spin
2^28 cycles, ~0.1 s here, after their last job before they sleep)."""

RECALIBRATE_S = 60.0
"""Seconds between two held windows once every shape has a calibration."""

CHECK_PERIOD_S = 0.5
"""Seconds between two comparisons while threads are used (they cost nothing: the samples exist)."""

TRY_PERIOD_S = 1.0
"""Seconds between two threaded windows while held to one thread."""

THREADED_WINDOW_S = 0.06
"""The least time a threaded window lasts; it goes on (up to 10x) until it has 3 periods."""

PAY_RATIO = 0.85
"""Threads pay when the GEMMs' median times with them add up to at most this fraction of their one-thread
medians (shapes compared: those with both; big GEMMs weigh most). Measured per GEMM: 0.55-0.75 in the good
stretches, 0.9-1.3 in the bad ones, and 10-90 when another process holds a core."""

PERIOD_RATIO = 0.95
"""Threads pay when the time between two runs of the same GEMMs (a training step, for a loop) is at most
this fraction of that time on one thread: the whole program's speed, GEMMs or not. In the bad stretches
it is the work between the GEMMs that slows down (an MLP step took 2.2-2.5 ms with threads whose GEMMs
still took 0.7-0.8x their one-thread time, against 1.8-1.9 ms on one thread); the GEMMs' own times
decide only where no GEMM recurs."""

SAMPLES = 9
"""Recent samples kept per shape and way (threaded, one thread), GEMM times and periods alike."""

Key = Hashable


def _keep(table: dict[Any, deque[float]], key: Any, seconds: float, most: int = SAMPLES) -> None:
    kept = table.get(key)
    if kept is None:
        kept = table[key] = deque(maxlen=most)
    kept.append(seconds)


class Payoff:
    """The state of the check (one per process: :data:`CHECK`); ``clock`` is injectable for tests.

    :meth:`threaded` says how the next large GEMM runs; :meth:`record` files its time;
    :meth:`threads_now` says whether other computations may use threads now. Thread-safe: GEMMs may
    come from several user threads."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.lock = threading.Lock()
        self.enabled = os.environ.get(ENV_VAR, "").strip().lower() not in ("0", "false", "no", "off")
        self.last_threaded = -float("inf")  # kept across resets: OpenBLAS's workers may still spin
        self.reset()

    def reset(self) -> None:
        """Forget every sample and go back to using threads (after the thread count changed)."""
        self.use_threads = True
        self.window: str | None = None  # None, "held" or "threaded"
        self.window_start = 0.0
        self.window_length = 0.0
        self.window_fresh = 0
        self.phase = 0  # bumped whenever the way GEMMs run changes: a period spans one phase
        self.next_tick: float | None = None
        self.last_calibration = -float("inf")
        self.one_thread: dict[Key, deque[float]] = {}
        self.with_threads: dict[Key, deque[float]] = {}
        self.periods: dict[tuple[Key, bool], deque[float]] = {}
        self.seen: dict[Key, tuple[float, bool, int]] = {}
        self.decisions: list[bool] = []

    def threads_now(self) -> bool:
        """Whether eager computations may use more than one thread at this moment."""
        window = self.window
        if not self.enabled:
            return True
        if window is None:
            return self.use_threads
        return window == "threaded"

    def threaded(self) -> bool:
        """How the next large GEMM runs; opens or closes a window when one is due."""
        if not self.enabled:
            return True
        now = self.clock()
        with self.lock:
            if self.window is not None:
                if now - self.window_start >= self.window_length and self._window_done(now):
                    self._close(now)
            elif self.next_tick is None:
                self._open_held(now)
            elif now >= self.next_tick:
                self._tick(now)
            return self.threads_now()

    def record(self, key: Key, threaded: bool, seconds: float) -> None:
        """File the time of a large GEMM that ran ``threaded`` (or on one thread), and the time since the
        same GEMM last ran the same way in the same phase (its period)."""
        if not self.enabled:
            return
        now = self.clock()
        with self.lock:
            if threaded:
                self.last_threaded = now
                _keep(self.with_threads, key, seconds)
            elif now - self.last_threaded - seconds >= SETTLE_S:
                _keep(self.one_thread, key, seconds)
            else:  # on one thread while the workers still spin: neither way
                self.seen.pop(key, None)
                return
            last = self.seen.get(key)
            self.seen[key] = (now, threaded, self.phase)
            if last is not None and last[1] == threaded and last[2] == self.phase:
                _keep(self.periods, (key, threaded), now - last[0])
                if self.window is not None:
                    self.window_fresh += 1

    # ---- windows and decisions ----------------------------------------------------------------

    def _tick(self, now: float) -> None:
        if not self.use_threads:
            self._open_threaded(now)
            return
        uncalibrated = any(key not in self.one_thread for key in self.with_threads)
        if now - self.last_calibration >= RECALIBRATE_S or (
                uncalibrated and now - self.last_calibration >= TRY_PERIOD_S):
            self._open_held(now)
            return
        self._decide()
        self.next_tick = now + CHECK_PERIOD_S

    def _open(self, now: float, window: str, length: float) -> None:
        self.window, self.window_start, self.window_length = window, now, length
        self.window_fresh = 0
        self.phase += 1
        for way in [w for w in self.periods if w[1] == (window == "threaded")]:
            del self.periods[way]  # the window's periods replace that way's old ones

    def _open_held(self, now: float) -> None:
        self._open(now, "held", max(0.0, SETTLE_S - (now - self.last_threaded)) + HELD_SAMPLE_S)

    def _open_threaded(self, now: float) -> None:
        self._open(now, "threaded", THREADED_WINDOW_S)
        self.with_threads.clear()

    def _window_done(self, now: float) -> bool:
        """A window ends once it has 3 periods, or after 10 times its least length (nothing recurs)."""
        return self.window_fresh >= 3 or now - self.window_start >= 10 * self.window_length

    def _close(self, now: float) -> None:
        if self.window == "held":
            self.last_calibration = now
        self.window = None
        self.phase += 1
        self._decide()
        self.next_tick = now + (CHECK_PERIOD_S if self.use_threads else TRY_PERIOD_S)

    def _decide(self) -> None:
        periods = [(statistics.median(times), statistics.median(self.periods[(way[0], False)]))
                   for way, times in self.periods.items()
                   if way[1] and times and self.periods.get((way[0], False))]
        if periods:
            pays = sum(t for t, _ in periods) <= PERIOD_RATIO * sum(o for _, o in periods)
        else:
            gemms = [(statistics.median(times), statistics.median(self.one_thread[key]))
                     for key, times in self.with_threads.items() if times and self.one_thread.get(key)]
            if not gemms:
                return
            pays = sum(t for t, _ in gemms) <= PAY_RATIO * sum(o for _, o in gemms)
        if pays != self.use_threads:
            self.phase += 1
        self.use_threads = pays
        self.decisions.append(pays)
        del self.decisions[:-16]


CHECK = Payoff()
"""The process's check, consulted by :mod:`.threads`."""


def set_enabled(enabled: bool) -> None:
    """Turn the check on or off for this process (off: threads always used as :mod:`.threads` says)."""
    CHECK.enabled = bool(enabled)
    CHECK.reset()
