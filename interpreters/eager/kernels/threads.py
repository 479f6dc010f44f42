"""The thread policy of the eager interpreter: one number, two pools, never both busy at once.

**The number.** ``TP_NUM_THREADS`` (read once, on first use), else the number of CPUs this process
may run on, is the most threads any eager computation uses. :func:`set_num_threads` changes it at
run time. When ``TP_NUM_THREADS`` is set, or :func:`set_num_threads` is called, OpenBLAS (numpy's
BLAS) is set to the same count; otherwise OpenBLAS keeps its own default (``OPENBLAS_NUM_THREADS``
or all CPUs), which is the same number unless the user chose otherwise.

**The pools.** Two pools exist in a process that runs tensorplay eagerly:

* OpenBLAS's workers run GEMMs (``matmul``, the wide GEMMs of convolution, attention). After a
  GEMM they keep spinning for a while before they sleep.
* tensorplay's kernel threads (:func:`parallel_for`, :func:`split_call`, :mod:`.workers`): Python
  threads that run jitted numba kernels, which release the GIL. They start only for at least
  ``2 * PARALLEL_MIN_WORK`` units of work (about one unit per element). Waking a sleeping thread is
  slow on the two-core virtual machines these numbers come from (a round trip to a thread asleep on
  a queue took 33-99 us at best, 67-156 us as a median, with a tail to 1 ms), so after a chunk a
  kernel thread spins for up to a millisecond, without the GIL, for the next one
  (:data:`.workers.IDLE_SPIN_US`); then it sleeps.

numba's own parallel pool (``parallel=True``, OpenMP/TBB/workqueue) is never started: no kernel
uses it. So there are never three pools, and numba never spins.

**Never both at once.** Before any GEMM that may use OpenBLAS's threads (:func:`blas_threads_for`,
:func:`matmul`), spinning kernel threads are sent to sleep (:func:`.workers.park`). A kernel that
calls BLAS runs on the calling thread and never inside the kernel threads; the kernel threads run
only jitted code that calls no BLAS, with one exception: :func:`run_blas_chunks` (convolutions over
blocks of samples: in cache, Winograd, the wide GEMM's weight gradient; the heads of attention) holds
OpenBLAS to one thread for the whole split, so each kernel thread's GEMMs run on that thread and
OpenBLAS's workers stay idle. (Measured on two cores: a threaded numba kernel alternating with a
threaded GEMM cost 8.6 ms instead of 0.7 ms when both pools spun; OpenBLAS called from two threads at
once stalled for 100-480 ms under load.)

**Which GEMMs get threads.** A GEMM of at least :data:`BLAS_THREADED_MIN_MACS` multiply-adds keeps
OpenBLAS's threads: that is where the second core pays off. Every smaller GEMM runs with OpenBLAS
held to one thread (:func:`blas_threads_for`, :func:`matmul`): a single one (OpenBLAS itself threads
any GEMM above :data:`OPENBLAS_SERIAL_MAX_MACS`, e.g. the 128x256x10 last layer of a small MLP, and
its hand-off costs more than the split saves) and a stack (grouped convolutions, batched ``matmul``:
numpy calls BLAS once per matrix and OpenBLAS synchronises its workers once per call). The stacks
that are split instead go to :func:`run_blas_chunks`: the heads of attention and the blocks of
samples of a convolution, a chunk per kernel thread, each calling single-threaded GEMMs.
Each hand-off is also where a multi-threaded GEMM stalls when another process holds a core
(measured under load: ``(8, 4, 128, 64) @ (8, 4, 64, 128)`` took 26.6 ms with two OpenBLAS threads
and 0.87 ms with one; a 128x784x256 GEMM 4.2 ms against 1.0 ms). GEMMs at or below
:data:`OPENBLAS_SERIAL_MAX_MACS` are left alone (OpenBLAS runs them on one thread anyway), which
saves the two C calls that hold and restore the count (~1 us).

**Started at import.** OpenBLAS maps a thread's work buffers at that thread's first GEMM, and buffers
mapped after the program's large arrays came and went stayed slow whenever two threads ran GEMMs
(:func:`claim_blas_buffers`). So when the kernels are imported and more than one thread is allowed
(and when :func:`set_num_threads` raises the count), the kernel threads start and each runs one tiny
GEMM; they import numba only when a split first needs them.

When the cores are oversubscribed (other processes running), every multi-threaded scheme (these
threads, OpenBLAS's, PyTorch's OpenMP) can stall for scheduler ticks at its synchronisation points;
``TP_NUM_THREADS=1`` is then the robust setting.

**Watched, not fixed.** The second core does not always pay: on a loaded machine, and on these
virtual machines for stretches of 10-60 s even when idle, two threads run slower than one.
:mod:`.payoff` times the large GEMMs the program runs anyway against one-thread calibrations of the same
shapes, and while threads do not pay, :func:`active_threads` is 1: GEMMs are held to one OpenBLAS
thread and nothing is split over the kernel threads, until a later check says threads pay again.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable

import numpy as np

from . import _blas, payoff, workers

ENV_VAR = "TP_NUM_THREADS"
MAX_THREADS = 16

PARALLEL_MIN_WORK = 1 << 20
"""Below this many elements (or element-operations) per thread, a kernel runs on the calling
thread only."""

THREADED_MIN_WORK = 2 * PARALLEL_MIN_WORK
"""Below this much work in all, a kernel runs on the calling thread (:func:`threads_for` says 1): what a
fast path checks before calling :func:`threads_for` itself."""

BLAS_THREADED_MIN_MACS = 1 << 22
"""A GEMM with fewer multiply-adds than this runs as well on one OpenBLAS thread; such GEMMs, alone
or in stacks, are held to one thread."""

BLAS_CHUNK_MIN_MACS = 1 << 20
"""The least work (multiply-adds) a chunk of :func:`run_blas_chunks` gets its own kernel thread for: about
25 us of single-threaded GEMM here, less than a hand-off (see above), but a convolution's chunk also
builds its columns (the benchmark CNN's first layer, 6.2M multiply-adds, takes about 1 ms on one
thread), and there the split measured faster: forward+backward 1.84 / 2.59 ms (min / median) against
2.56 / 2.87 ms. Callers whose chunks cost little besides their GEMMs ask :func:`blas_chunks` for more."""

OPENBLAS_SERIAL_MAX_MACS = 1 << 18
"""OpenBLAS's own threshold: it runs a GEMM of at most this many multiply-adds (``m*n*k``) on the
calling thread, so the policy need not hold it."""

_NUM_THREADS: int | None = None


def _default_threads() -> int:
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            raise ValueError(f"{ENV_VAR} must be a positive integer, got {env!r}") from None
        if n < 1:
            raise ValueError(f"{ENV_VAR} must be a positive integer, got {env!r}")
        return min(n, MAX_THREADS)
    return cpu_threads()


def cpu_threads() -> int:
    """The CPUs this process may run on (at most :data:`MAX_THREADS`), whatever the thread setting: for
    partitions of work into blocks that must not depend on it, so that results stay bitwise the same at
    any thread count."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        n = os.cpu_count() or 1
    return max(1, min(n, MAX_THREADS))


def num_threads() -> int:
    """The most threads an eager computation uses: ``TP_NUM_THREADS`` if set, else the CPUs this
    process may run on (at most 16)."""
    global _NUM_THREADS
    if _NUM_THREADS is None:
        _NUM_THREADS = _default_threads()
    return _NUM_THREADS


def active_threads() -> int:
    """The threads eager computations may use at this moment: :func:`num_threads`, or 1 while the
    second core does not pay off (:mod:`.payoff`)."""
    n = num_threads()
    return n if n == 1 or payoff.CHECK.threads_now() else 1


def active_blas_threads() -> int:
    """OpenBLAS's thread count as the policy sees it at this moment: 1 while the second core does not pay
    off (:mod:`.payoff`), whatever OpenBLAS's own count is."""
    return _blas.threads() if payoff.CHECK.threads_now() else 1


def set_num_threads(n: int) -> None:
    """Use at most ``n`` threads from now on: tensorplay's kernel threads and OpenBLAS's (1 makes
    every eager computation single-threaded). Kernel threads not started yet start now and claim their
    OpenBLAS buffers (:func:`claim_blas_buffers`)."""
    global _NUM_THREADS
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: need a positive integer number of threads, got {n!r}")
    _NUM_THREADS = min(n, MAX_THREADS)
    _blas.set_threads(_NUM_THREADS)
    payoff.CHECK.reset()
    if _NUM_THREADS > 1:  # kernel threads beyond those started so far claim their buffers now
        _prestart_kernel_threads(_NUM_THREADS - 1)


def apply_environment() -> None:
    """Give OpenBLAS the thread count of ``TP_NUM_THREADS`` when that variable is set (called when
    the kernels package is imported, before the first GEMM)."""
    if os.environ.get(ENV_VAR, "").strip():
        _blas.set_threads(num_threads())


# ---- BLAS --------------------------------------------------------------------------------------

def _hold_to_one(macs_per_gemm: int, gemms: int) -> bool:
    if macs_per_gemm < BLAS_THREADED_MIN_MACS:
        return gemms > 1 or macs_per_gemm > OPENBLAS_SERIAL_MAX_MACS
    return not payoff.CHECK.threads_now()


def blas_threads_for(macs_per_gemm: int, gemms: int = 1) -> Any:
    """The context to run ``gemms`` GEMMs of ``macs_per_gemm`` multiply-adds each in: OpenBLAS keeps
    its threads for GEMMs large enough to profit (at least :data:`BLAS_THREADED_MIN_MACS` each);
    otherwise it is held to one thread for the block."""
    hold = _hold_to_one(macs_per_gemm, gemms)
    if not hold:
        _park_for_openblas()
    return single_threaded_blas(hold)


def _park_for_openblas() -> None:
    """Send spinning kernel threads to sleep before a GEMM that may use OpenBLAS's threads; nothing while
    OpenBLAS is held to one thread (inside :func:`run_blas_chunks` the kernel threads are the ones working,
    and parked they would wake slowly for the next split)."""
    if _blas.threads() > 1:
        workers.park()


def matmul(a: Any, b: Any, out: Any = None) -> Any:
    """``numpy.matmul(a, b, out=out)`` for 2-d ``a[m, k] @ b[k, n]`` (any memory order), with
    OpenBLAS's threads as the policy says: held to one below :data:`BLAS_THREADED_MIN_MACS`
    multiply-adds."""
    macs = a.shape[0] * a.shape[1] * b.shape[-1]
    if macs < BLAS_THREADED_MIN_MACS:
        if macs > OPENBLAS_SERIAL_MAX_MACS:
            return _blas.call_on_one_thread(np.matmul, a, b, out)
        return np.matmul(a, b, out=out)
    if num_threads() == 1 or _blas.threads() <= 1:
        return np.matmul(a, b, out=out)
    return _timed_gemm(a, b, out)


def _timed_gemm(a: Any, b: Any, out: Any) -> Any:
    """A GEMM big enough for OpenBLAS's threads, run as :mod:`.payoff` says and timed for it."""
    check = payoff.CHECK
    threaded = check.threaded()
    start = time.perf_counter()
    if threaded:
        _park_for_openblas()
        result = np.matmul(a, b, out=out)
    else:
        result = _blas.call_on_one_thread(np.matmul, a, b, out)
    check.record((a.shape, b.shape[-1], a.dtype.char, b.dtype.char, a.strides, b.strides), threaded,
                 time.perf_counter() - start)
    return result


@contextmanager
def single_threaded_blas(enabled: bool = True) -> Iterator[None]:
    """Run the block with OpenBLAS limited to one thread (when ``enabled`` and OpenBLAS is found)."""
    with _blas.single_threaded_blas(enabled):
        yield


# ---- kernel threads -----------------------------------------------------------------------------

def threads_for(n_items: int, work: int) -> int:
    """Threads a split of ``n_items`` items costing ``work`` in all would use (1: the calling thread)."""
    if work < THREADED_MIN_WORK:
        return 1
    return max(1, min(active_threads(), n_items, work // PARALLEL_MIN_WORK))


def chunk_bounds(threads: int, n_items: int) -> list[int]:
    """The ``threads + 1`` boundaries of the contiguous chunks ``range(n_items)`` is split into."""
    return [n_items * t // threads for t in range(threads + 1)]


def _run_bounds(bounds: list[int], body: Callable[[int, int], None]) -> None:
    """``body(bounds[t], bounds[t + 1])`` for each chunk: the first on this thread, the others on the
    kernel threads; returns when all are done (re-raising a chunk's error)."""
    workers.kernel_threads(MAX_THREADS - 1).run(bounds, body)


def _run_chunks(threads: int, n_items: int, body: Callable[[int, int], None]) -> None:
    _run_bounds(chunk_bounds(threads, n_items), body)


def parallel_for(n_items: int, work: int, body: Callable[[int, int], None]) -> None:
    """Run ``body(start, stop)`` over ``range(n_items)`` split into contiguous chunks.

    ``work`` is the total cost (about one unit per element touched): below
    ``2 * PARALLEL_MIN_WORK`` or with one thread it is a single call on this thread. ``body``
    must not call BLAS (see the module docstring).
    """
    threads = threads_for(n_items, work)
    if threads <= 1:
        body(0, n_items)
    else:
        _run_chunks(threads, n_items, body)


def blas_chunks(n_items: int, work: int, min_chunk: int | None = None) -> list[int]:
    """The chunk boundaries (:func:`chunk_bounds`) a split of ``n_items`` items costing ``work``
    multiply-adds in all gets from :func:`run_blas_chunks`: one chunk below ``2 * min_chunk`` or with one
    thread, otherwise up to one per thread, each of at least ``min_chunk`` (default
    :data:`BLAS_CHUNK_MIN_MACS`; a caller whose chunks make many Python-level calls asks for more)."""
    least = BLAS_CHUNK_MIN_MACS if min_chunk is None else min_chunk
    threads = 1 if work < 2 * least else max(1, min(active_threads(), n_items, work // least))
    return chunk_bounds(threads, n_items)


def run_blas_chunks(bounds: list[int], body: Callable[[int, int], None]) -> None:
    """``body(bounds[t], bounds[t + 1])`` for each chunk, the chunks on the kernel threads and this one,
    with OpenBLAS held to one thread throughout: here ``body`` may call BLAS, and every GEMM runs on the
    thread that calls it (the two pools are still never busy at once; OpenBLAS's own workers sleep)."""
    if len(bounds) <= 2:
        _blas.call_on_one_thread(body, bounds[0], bounds[-1])
    else:
        _blas.call_on_one_thread(_run_bounds, bounds, body)


def claim_blas_buffers() -> None:
    """Have OpenBLAS map the work buffers of this thread and of each kernel thread now
    (:func:`._blas.claim_buffers`); the kernel threads are started for it (:func:`.workers.prestart`), with
    OpenBLAS held to one thread. Called when the kernels are imported: a kernel thread's first GEMM would
    otherwise come after the program's large arrays, and its buffers would stay slow (the benchmark CNN's
    second convolution: 3.6-6.1 ms against 1.1 ms after a (4096, 1024) gelu)."""
    _blas.claim_buffers()
    if num_threads() > 1:  # the kernel threads start now, but import numba only when first used
        _prestart_kernel_threads(num_threads() - 1)


def _prestart_kernel_threads(count: int) -> None:
    """Start the first ``count`` kernel threads that are not running yet, each claiming its OpenBLAS buffers
    (with OpenBLAS held to one thread)."""
    try:
        _blas.call_on_one_thread(workers.prestart, count, _blas.claim_buffers)
    except RuntimeError:  # no thread can be started here: importing must not fail for a warm-up
        pass


def split_call(kernel: Callable[..., None], n_items: int, work: int, *args: Any) -> None:
    """``kernel(*args, start, stop)`` over ``range(n_items)``, split like :func:`parallel_for`
    (no closure on the common single-thread path)."""
    threads = threads_for(n_items, work)
    if threads <= 1:
        kernel(*args, 0, n_items)
    else:
        _run_chunks(threads, n_items, lambda start, stop: kernel(*args, start, stop))
