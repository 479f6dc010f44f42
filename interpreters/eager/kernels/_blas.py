"""OpenBLAS's thread count, read and set through its C API (the policy is :mod:`.threads`).

numpy's ``matmul`` on a stack calls BLAS once per matrix. OpenBLAS threads every
GEMM above ~0.26M multiply-adds, so a stack (attention heads, per-sample
convolution GEMMs) pays one thread hand-off per matrix. That costs little on an
idle machine but is ruinous when a core is busy elsewhere (each hand-off can wait
a scheduler tick): measured here under load, ``matmul`` of
``(8, 4, 128, 64) @ (8, 4, 64, 128)`` took 26.6 ms with two OpenBLAS threads and
0.87 ms with one (attention: 131 ms against 7.3 ms). The kernels hold OpenBLAS to
one thread around such stacks and run them on the calling thread (calling OpenBLAS from
two threads at once stalled just as badly under load). :func:`set_threads` sets the count
for good (``TP_NUM_THREADS``, :func:`.threads.set_num_threads`).

:func:`single_threaded_blas` sets OpenBLAS to one thread for a block and restores
it after (two C calls, ~1 us); it is a no-op where OpenBLAS cannot be found
(another BLAS, another platform). The library is located through the loaded
objects of this process, so no extra dependency is needed.

:func:`gemm_address` gives the address of the same library's CBLAS ``sgemm``/``dgemm`` (the builds
with 64-bit integers that numpy ships), which jitted kernels call directly (:mod:`._numba_conv`).
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable

_NAMES = (("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
          ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
          ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
          ("openblas_set_num_threads", "openblas_get_num_threads"))

_GEMM_NAMES = (("scipy_cblas_sgemm64_", "scipy_cblas_dgemm64_"), ("cblas_sgemm64_", "cblas_dgemm64_"))
"""CBLAS ``gemm`` entry points taking 64-bit integers (what :mod:`._numba_conv` calls)."""

_API: tuple[Any, Any] | None = None
_SEARCHED = False
_GEMM: dict[str, int] | None = None


def _openblas_paths() -> list[str]:
    """The files of the OpenBLAS libraries loaded in this process (numpy's among them)."""
    import numpy  # noqa: F401  (makes sure numpy's BLAS is loaded)

    paths: list[str] = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                parts = line.split()
                if len(parts) >= 6 and "openblas" in parts[-1].lower() and parts[-1] not in paths:
                    paths.append(parts[-1])
    except OSError:
        return []
    return paths


def _symbol_pair(names: tuple[tuple[str, str], ...]) -> tuple[Any, Any] | None:
    """The two functions of the first pair in ``names`` that one loaded OpenBLAS library exports."""
    for path in _openblas_paths():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for first, second in names:
            f, g = getattr(lib, first, None), getattr(lib, second, None)
            if f is not None and g is not None:
                return f, g
    return None


def _find_openblas() -> tuple[Any, Any] | None:
    found = _symbol_pair(_NAMES)
    if found is None:
        return None
    setter, getter = found
    setter.argtypes = [ctypes.c_int]
    setter.restype = None
    getter.argtypes = []
    getter.restype = ctypes.c_int
    return setter, getter


def _api() -> tuple[Any, Any] | None:
    global _API, _SEARCHED
    if not _SEARCHED:
        _API = _find_openblas()
        _SEARCHED = True
    return _API


def gemm_address(dtype_name: str) -> int | None:
    """The address of OpenBLAS's CBLAS ``sgemm`` (``"float32"``) or ``dgemm`` (``"float64"``) taking
    64-bit integers, or ``None`` where there is none (another BLAS, a build with 32-bit integers)."""
    global _GEMM
    if _GEMM is None:
        found = _symbol_pair(_GEMM_NAMES)
        _GEMM = {} if found is None else {name: ctypes.cast(f, ctypes.c_void_p).value or 0
                                          for name, f in zip(("float32", "float64"), found)}
    return _GEMM.get(dtype_name) or None


def threads() -> int:
    """OpenBLAS's current thread count (1 where OpenBLAS is not found)."""
    api = _api()
    return 1 if api is None else int(api[1]())


def set_threads(n: int) -> None:
    """Set OpenBLAS's thread count to ``n`` (a no-op where OpenBLAS is not found)."""
    api = _api()
    if api is not None:
        api[0](int(n))


@contextmanager
def single_threaded_blas(enabled: bool = True) -> Iterator[None]:
    """Run the block with OpenBLAS limited to one thread (when ``enabled`` and OpenBLAS is found)."""
    api = _api() if enabled else None
    if api is None:
        yield
        return
    setter, getter = api
    before = int(getter())
    if before <= 1:
        yield
        return
    setter(1)
    try:
        yield
    finally:
        setter(before)


def call_on_one_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` with OpenBLAS limited to one thread (:func:`single_threaded_blas` without the
    context manager's overhead, for calls on hot paths)."""
    api = _api()
    if api is None:
        return fn(*args)
    setter, getter = api
    before = int(getter())
    if before <= 1:
        return fn(*args)
    setter(1)
    try:
        return fn(*args)
    finally:
        setter(before)


def claim_buffers() -> None:
    """Make OpenBLAS map the calling thread's work buffers now, with one 8x8 GEMM per float dtype (far
    below the size OpenBLAS threads, so it runs on this thread).

    OpenBLAS maps a thread's buffers at that thread's first GEMM. Mapped after the process has grown and
    freed a large heap (a first GEMM after a few 16 MB arrays came and went), they were slow on these
    virtual machines whenever two threads ran GEMMs at once, for the life of the process: the benchmark
    CNN's second convolution, split over two threads, took 3.6-6.1 ms instead of 1.1 ms when a (4096, 1024)
    gelu step ran first. :func:`.threads.claim_blas_buffers` calls this on every thread that may run GEMMs,
    when the kernels are imported, before the program's own arrays."""
    import numpy as np

    for dt in (np.float32, np.float64):
        a = np.ones((8, 8), dt)
        np.matmul(a, a)
