"""The kernel threads: Python threads that run chunks of jitted work, kept awake between chunks.

:func:`.threads.parallel_for` and :func:`.threads.run_blas_chunks` hand all chunks but the first
to these threads (:meth:`KernelThreads.run`). Why not a queue and a pool of sleeping threads: on
the virtual machines these figures come from, an idle core halts, and waking a thread that sleeps
there took 33-99 us at best, 67-156 us as a median and up to 1 ms; the benchmark CNN's second
convolution (about 1.7 ms on one thread) took 1.4-2.1 ms split over two threads that way, against
1.0-1.3 ms with the hand-off below. The GIL makes the same trap: a thread that must wait for the
GIL sleeps on it, and is woken just as slowly.

**The hand-off.** Each thread owns a line of ``int64`` cells (:data:`CELLS_PER_WORKER`). To hand
it a chunk, the caller stores the job, bumps the thread's ``JOB`` counter and, *without the GIL*,
spins until the thread says ``STARTED``, then :data:`HANDOFF_US` more, so that the thread's Python
up to its jitted kernel (which drops the GIL) holds the GIL alone; then the caller runs its own
chunk, and waits, again spinning without the GIL, for ``DONE``. A thread that finished a chunk
posts ``DONE`` and spins (without the GIL, :mod:`._numba_spin`) for :data:`IDLE_SPIN_US` watching
its ``JOB`` counter, so a split that follows soon (the next layer, the backward pass) finds it
awake. Only then, or when :func:`park` asks, does it sleep on a condition; the caller wakes a
sleeping thread the slow way. Posting a counter and then reading the other side's ``ASLEEP`` flag
(both sequentially consistent) makes the hand-shake free of lost wake-ups.

**Spinning and the thread policy.** A spinning kernel thread holds a core as OpenBLAS's spinning
workers do after a GEMM. :mod:`.threads` never lets both pools work at once: it calls :func:`park`
before every GEMM that may use OpenBLAS's threads, and the kernel threads go to sleep.

**Who may split.** One caller at a time: a second thread of the user's that asks while a split
is running (or a chunk that splits again) runs its chunks one after another on its own thread,
with the same results. A chunk's exception is re-raised in the caller once every chunk has
finished. The threads are daemons; they leave at exit, and a forked child starts its own.
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any, Callable

import numpy as np

from ._support import jitted

CELLS_PER_WORKER = 8
"""``int64`` cells per thread: one 64-byte cache line, so two threads' counters never share one."""

_JOB, _STARTED, _DONE, _ASLEEP, _CALLER_ASLEEP, _NEVER = 0, 1, 2, 3, 4, 7
"""Offsets in a thread's line: the job counter (caller), the last job started and done (thread),
whether the thread sleeps, whether the caller sleeps waiting for ``DONE``; a cell that stays 0."""

IDLE_SPIN_US = 1000.0
"""How long a thread spins for its next chunk after one, before it sleeps."""

START_SPIN_US = 200.0
"""How long the caller waits, spinning, for a thread to start its chunk (past this it runs its own
chunk anyway: the thread was descheduled or asleep)."""

HANDOFF_US = 30.0
"""How long the caller keeps off the GIL after a thread started, for the thread's Python up to its
jitted kernel (measured 20-25 us for a convolution's chunk here)."""

DONE_SPIN_US = 2000.0
"""How long the caller spins for a thread's ``DONE`` before it sleeps on a condition."""

Body = Callable[[int, int], None]


def _spin() -> Any:
    """The jitted waits (imports numba on first use)."""
    return jitted("_numba_spin")


class _Worker:
    """One kernel thread and its line of cells (see the module docstring)."""

    def __init__(self, pool: KernelThreads, index: int) -> None:
        self.pool = pool
        self.base = index * CELLS_PER_WORKER
        self.cond = threading.Condition()
        self.job: tuple[Body, int, int] | None = None
        self.error: BaseException | None = None
        self.ticket = 0
        spare = _SPARES.pop(0) if _SPARES else None
        if spare is None:
            self.thread = threading.Thread(target=self._serve, name=f"tp-kernel-{index}", daemon=True)
            self.thread.start()
        else:
            self.thread = spare.adopt(self._serve, f"tp-kernel-{index}")

    # ---- the caller's side ----

    def post(self, job: tuple[Body, int, int] | None, wait_for_start: bool) -> None:
        """Hand ``job`` to the thread (``None``: leave); when ``wait_for_start``, return only once it has
        started (or :data:`START_SPIN_US` passed), plus :data:`HANDOFF_US`."""
        pool, b = self.pool, self.base
        self.job = job
        self.ticket += 1
        if wait_for_start:
            got = pool.spin.post_and_wait(pool.cells, b + _JOB, self.ticket, b + _ASLEEP, b + _STARTED,
                                          self.ticket - 1, b + _NEVER, pool.start_checks, pool.handoff_checks)
            asleep = got == -1
        else:
            asleep = pool.spin.post(pool.cells, b + _JOB, self.ticket, b + _ASLEEP) != 0
        if asleep:
            with self.cond:
                self.cond.notify_all()

    def wait(self) -> BaseException | None:
        """Wait for the thread to finish its job; its exception, if it raised one."""
        pool, b, t = self.pool, self.base, self.ticket
        if pool.spin.wait_change(pool.cells, b + _DONE, t - 1, b + _NEVER, pool.done_checks) != t:
            with self.cond:
                if pool.spin.post(pool.cells, b + _CALLER_ASLEEP, 1, b + _DONE) != t:
                    while pool.spin.peek(pool.cells, b + _DONE) != t:
                        self.cond.wait(0.05)
                pool.spin.post(pool.cells, b + _CALLER_ASLEEP, 0, b + _DONE)
        error, self.error = self.error, None
        return error

    # ---- the thread's side ----

    def _serve(self) -> None:
        pool, b = self.pool, self.base
        spin, cells = pool.spin, pool.cells
        seen = 0
        got = spin.wait_change(cells, b + _JOB, seen, pool.park_cell, pool.idle_checks)
        while True:
            if got == seen:
                got = self._sleep(seen)
            seen = got
            job, self.job = self.job, None
            if job is None:
                return
            body, start, stop = job
            cells[b + _STARTED] = seen
            try:
                body(start, stop)
            except BaseException as e:  # re-raised by the caller
                self.error = e
            # drop the chunk's references before waiting: the caller may test whether it holds the
            # only reference to an array the chunk wrote (the tape does, before reusing a buffer)
            del job, body
            got = spin.post_and_wait(cells, b + _DONE, seen, b + _CALLER_ASLEEP, b + _JOB, seen, pool.park_cell,
                                     pool.idle_checks, 0)
            if got == -1:
                with self.cond:
                    self.cond.notify_all()
                got = spin.wait_change(cells, b + _JOB, seen, pool.park_cell, pool.idle_checks)

    def _sleep(self, seen: int) -> int:
        """Sleep until the job counter moves past ``seen``; the new count."""
        spin, cells, b = self.pool.spin, self.pool.cells, self.base
        with self.cond:
            if spin.post(cells, b + _ASLEEP, 1, b + _JOB) == seen:
                while spin.peek(cells, b + _JOB) == seen:
                    self.cond.wait(1.0)
            spin.post(cells, b + _ASLEEP, 0, b + _JOB)
        return int(spin.peek(cells, b + _JOB))


class _Spare:
    """A thread started before the pool needs it (:func:`prestart`): it runs ``first`` at once, then waits,
    without numba, to be adopted as a kernel thread."""

    def __init__(self, first: Callable[[], None], name: str) -> None:
        self.first_done = threading.Event()
        self.adopted = threading.Event()
        self.serve: Callable[[], None] | None = None
        self.thread = threading.Thread(target=self._main, args=(first,), name=name, daemon=True)
        self.thread.start()

    def _main(self, first: Callable[[], None]) -> None:
        try:
            first()
        except Exception:  # a warm-up that fails loses only its purpose: the thread must still serve
            pass
        self.first_done.set()
        self.adopted.wait()
        if self.serve is not None:
            self.serve()

    def adopt(self, serve: Callable[[], None], name: str) -> threading.Thread:
        """Run ``serve`` on this thread from now on (its name becomes ``name``); the thread."""
        self.thread.name = name
        self.serve = serve
        self.adopted.set()
        return self.thread


_SPARES: list[_Spare] = []


def prestart(count: int, first: Callable[[], None]) -> None:
    """Start threads now so that the first ``count`` kernel threads exist, each running ``first`` on itself
    before it serves (:func:`.threads.claim_blas_buffers`: a thread's first GEMM), and return once every
    new thread has run it. Imports no numba: the threads wait on a plain event until the pool adopts
    them."""
    started = (0 if _POOL is None else len(_POOL.workers)) + len(_SPARES)
    made = [_Spare(first, f"tp-kernel-{index}") for index in range(started, count)]
    _SPARES.extend(made)
    for spare in made:
        spare.first_done.wait()


class KernelThreads:
    """Up to ``max_workers`` kernel threads (started as splits need them) and their cells."""

    def __init__(self, max_workers: int) -> None:
        self.spin = _spin()
        self.cells = np.zeros((max_workers + 1) * CELLS_PER_WORKER, np.int64)
        self.park_cell = max_workers * CELLS_PER_WORKER
        self.max_workers = max_workers
        per_us = self.spin.checks_per_microsecond()
        self.idle_checks = int(IDLE_SPIN_US * per_us)
        self.start_checks = int(START_SPIN_US * per_us)
        self.handoff_checks = int(HANDOFF_US * per_us)
        self.done_checks = int(DONE_SPIN_US * per_us)
        self.workers: list[_Worker] = []
        self.busy = threading.Lock()

    def run(self, bounds: list[int], body: Body) -> None:
        """``body(bounds[t], bounds[t + 1])`` for every chunk: the first on this thread, the others on
        kernel threads (one after another on this thread when a split is already running); returns
        when all are done, re-raising the first exception (this thread's first)."""
        chunks = len(bounds) - 1
        if chunks - 1 > self.max_workers or not self.busy.acquire(blocking=False):
            for t in range(chunks):
                body(bounds[t], bounds[t + 1])
            return
        try:
            self._run(bounds, body)
        finally:
            self.busy.release()

    def _run(self, bounds: list[int], body: Body) -> None:
        while len(self.workers) < len(bounds) - 2:
            self.workers.append(_Worker(self, len(self.workers)))
        used = self.workers[:len(bounds) - 2]
        self.cells[self.park_cell] = 0
        for t, worker in enumerate(used, start=1):
            worker.post((body, bounds[t], bounds[t + 1]), wait_for_start=t == len(used))
        error: BaseException | None = None
        try:
            body(bounds[0], bounds[1])
        finally:
            for worker in used:
                error = worker.wait() or error
        if error is not None:
            raise error

    def park(self) -> None:
        """Ask spinning threads to sleep now (before OpenBLAS's threads take the cores)."""
        self.cells[self.park_cell] = 1

    def close(self) -> None:
        """Let every thread leave (at exit)."""
        if self.busy.acquire(blocking=False):
            for worker in self.workers:
                worker.post(None, wait_for_start=False)
            self.workers = []
            self.busy.release()


_POOL: KernelThreads | None = None
_POOL_LOCK = threading.Lock()


def kernel_threads(max_workers: int) -> KernelThreads:
    """The process's kernel threads (created on first use, with ``max_workers`` at most)."""
    global _POOL
    if _POOL is None:
        with _POOL_LOCK:
            if _POOL is None:
                _POOL = KernelThreads(max_workers)
    return _POOL


def park() -> None:
    """Send spinning kernel threads to sleep (nothing when none were started)."""
    if _POOL is not None:
        _POOL.park()


def _close_at_exit() -> None:
    if _POOL is not None:
        _POOL.close()


def _forget_after_fork() -> None:
    global _POOL
    _POOL = None
    _SPARES.clear()  # their threads did not survive the fork


atexit.register(_close_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
