"""Plumbing shared by the kernel wrappers: the lazy numba loader, dtype helpers,
row-range threading and scratch buffers. Imports neither numba nor torch.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from types import ModuleType
from typing import Any, Callable

import numpy as np
import numpy.typing as npt

from tensorplay.spec.errors import AxisError

Array = npt.NDArray[Any]

# ---- lazy numba ---------------------------------------------------------------------------

_NB: ModuleType | None = None


def nb() -> Any:
    """The module of jitted kernels; imports numba (and defines the kernels) on first use.

    Each kernel compiles (or loads from numba's on-disk cache) on its first call.
    """
    global _NB
    if _NB is None:
        from . import _numba_kernels

        _NB = _numba_kernels
    return _NB


# ---- dtypes -------------------------------------------------------------------------------

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)


def float_dtype(*arrays: Array) -> np.dtype[Any]:
    """The float dtype a float kernel computes in: float64 if any input is float64, else float32
    (integer and bool inputs count as float32)."""
    for a in arrays:
        if a.dtype == F64:
            return F64
    return F32


def as_float(a: Array, dtype: np.dtype[Any]) -> Array:
    """``a`` as a C-contiguous array of ``dtype`` (no copy when it already is one)."""
    return np.ascontiguousarray(a, dtype=dtype)


# ---- threading ----------------------------------------------------------------------------
# The jitted kernels release the GIL (nogil=True); big kernels split their outer loop over a
# few Python threads, whose idle workers sleep on a queue (no spinning). Measured here:
# 2 threads make softmax on (4096, 1024) 1.9x faster on an otherwise idle machine and are
# neutral right after an OpenBLAS GEMM (whose workers keep spinning for a while). Stacks of
# GEMMs (conv's per-sample GEMMs, attention heads) hold OpenBLAS to one thread and run on the
# calling thread (see _blas, convolution._by_samples): kernels that call BLAS never use
# these threads.
# When the cores are oversubscribed (other processes running), every multi-threaded scheme
# here (these threads, OpenBLAS's, PyTorch's OpenMP) can stall for scheduler ticks at its
# synchronisation points; ``TP_NUM_THREADS=1`` (or ``set_num_threads(1)``) is then the
# robust setting. Threads start only from 2 * PARALLEL_MIN_WORK elements of work.

_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()
_NUM_THREADS: int | None = None

PARALLEL_MIN_WORK = 1 << 20
"""Below this many elements (or element-operations) per thread, a kernel runs on the calling
thread only."""


def num_threads() -> int:
    """Threads a kernel may use: ``TP_NUM_THREADS`` if set, else the cores this process may run on."""
    global _NUM_THREADS
    if _NUM_THREADS is None:
        env = os.environ.get("TP_NUM_THREADS", "")
        if env.strip():
            n = int(env)
        else:
            try:
                n = len(os.sched_getaffinity(0))
            except AttributeError:  # pragma: no cover - not Linux
                n = os.cpu_count() or 1
        _NUM_THREADS = max(1, min(n, 16))
    return _NUM_THREADS


def set_num_threads(n: int) -> None:
    """Set the number of threads kernels may use (1 disables kernel threading)."""
    global _NUM_THREADS
    if n < 1:
        raise ValueError(f"set_num_threads: need at least 1 thread, got {n}")
    _NUM_THREADS = n


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        with _POOL_LOCK:
            if _POOL is None:
                _POOL = ThreadPoolExecutor(max_workers=15, thread_name_prefix="tp-kernel")
    return _POOL


def _reset_after_fork() -> None:
    global _POOL
    _POOL = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _threads_for(n_items: int, work: int) -> int:
    if work < 2 * PARALLEL_MIN_WORK:
        return 1
    return min(num_threads(), n_items, work // PARALLEL_MIN_WORK)


def _run_chunks(threads: int, n_items: int, body: Callable[[int, int], None]) -> None:
    bounds = [n_items * t // threads for t in range(threads + 1)]
    pool = _pool()
    futures: list[Future[None]] = [pool.submit(body, bounds[t], bounds[t + 1]) for t in range(1, threads)]
    try:
        body(bounds[0], bounds[1])
    finally:
        for f in futures:
            f.result()


def parallel_for(n_items: int, work: int, body: Callable[[int, int], None]) -> None:
    """Run ``body(start, stop)`` over ``range(n_items)`` split into contiguous chunks.

    ``work`` is the total cost (about one unit per element touched): below
    ``2 * PARALLEL_MIN_WORK`` or with one thread it is a single call on this thread.
    """
    threads = _threads_for(n_items, work)
    if threads <= 1:
        body(0, n_items)
    else:
        _run_chunks(threads, n_items, body)


def split_call(kernel: Callable[..., None], n_items: int, work: int, *args: Any) -> None:
    """``kernel(*args, start, stop)`` over ``range(n_items)``, split like :func:`parallel_for`
    (no closure on the common single-thread path)."""
    threads = _threads_for(n_items, work)
    if threads <= 1:
        kernel(*args, 0, n_items)
    else:
        _run_chunks(threads, n_items, lambda start, stop: kernel(*args, start, stop))


# ---- scratch buffers ----------------------------------------------------------------------
# Large temporaries (im2col columns) are reused per thread: glibc hands freed multi-MB
# blocks back to the kernel, and touching fresh pages on every call costs more than the work.

_SCRATCH = threading.local()
SCRATCH_MAX_BYTES = 256 << 20


def scratch(shape: tuple[int, ...], dtype: np.dtype[Any], slot: int = 0) -> Array:
    """An uninitialised C-contiguous temporary of ``shape``; valid until the next call with this
    ``slot`` on this thread. Never return it to a caller."""
    size = 1
    for s in shape:
        size *= s
    nbytes = size * dtype.itemsize
    if nbytes > SCRATCH_MAX_BYTES:
        return np.empty(shape, dtype)
    bufs: dict[int, Array] | None = getattr(_SCRATCH, "bufs", None)
    if bufs is None:
        bufs = {}
        _SCRATCH.bufs = bufs
    buf = bufs.get(slot)
    if buf is None or buf.nbytes < nbytes:
        buf = np.empty(max(nbytes, 1 << 16), np.uint8)
        bufs[slot] = buf
    return buf[:nbytes].view(dtype).reshape(shape)


def normalize_axis(axis: int, ndim: int, name: str) -> int:
    """``axis`` in ``[0, ndim)``; raises :class:`AxisError` naming the primitive otherwise."""
    if not -ndim <= axis < ndim:
        raise AxisError(f"{name}: axis {axis} is out of range for an array of rank {ndim}")
    return axis % ndim
