"""The eager kernels' process-wide settings: the thread count (``TP_NUM_THREADS``) reaches both pools,
and the allocator tuning steps aside whenever the user configured the allocator."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from tensorplay.interpreters.eager.kernels import threads

PROBE = ("import tensorplay; from tensorplay.interpreters.eager.kernels import _blas, allocator, threads; "
         "api = _blas._api(); print(threads.num_threads(), api[1]() if api else -1, '|', allocator.describe())")


def _probe(**env: str) -> tuple[int, int, str]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("MALLOC_") and k not in ("TP_NUM_THREADS", "TP_MALLOC_TUNING", "LD_PRELOAD",
                                                          "GLIBC_TUNABLES", "OPENBLAS_NUM_THREADS")}
    done = subprocess.run([sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True, text=True,
                          check=True)
    counts, description = done.stdout.strip().split("|")
    kernel, blas = (int(v) for v in counts.split())
    return kernel, blas, description.strip()


def test_tp_num_threads_sets_kernel_and_blas_threads() -> None:
    kernel, blas, _ = _probe(TP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="2")
    assert kernel == 1
    assert blas in (1, -1)  # -1: OpenBLAS not found in this build


def test_invalid_thread_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="positive integer"):
        threads.set_num_threads(0)
    with pytest.raises(ValueError, match="positive integer"):
        threads.set_num_threads(True)
    done = subprocess.run([sys.executable, "-c", PROBE], env={**os.environ, "TP_NUM_THREADS": "two"},
                          capture_output=True, text=True)
    assert done.returncode != 0 and "TP_NUM_THREADS must be a positive integer, got 'two'" in done.stderr


def test_allocator_tuning_steps_aside_for_the_users_choice() -> None:
    assert _probe(TP_MALLOC_TUNING="0")[2] == "left as configured (TP_MALLOC_TUNING=0)"
    assert _probe(MALLOC_ARENA_MAX="2")[2] == "left as configured (MALLOC_ARENA_MAX is set)"
    tuned = _probe()[2]
    if (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"):
        assert tuned.startswith("glibc mallopt M_MMAP_THRESHOLD=32 MiB")


def test_blas_threads_for_holds_stacks_of_small_gemms_to_one_thread() -> None:
    from tensorplay.interpreters.eager.kernels import _blas
    api = _blas._api()
    if api is None:
        pytest.skip("OpenBLAS not found in this process")
    blas_threads = api[1]
    previous = blas_threads()
    _blas.set_threads(2)
    try:
        for macs, gemms, want in ((1000, 8, 1), (threads.BLAS_THREADED_MIN_MACS, 8, 2), (1000, 1, 2),
                                  (threads.OPENBLAS_SERIAL_MAX_MACS + 1, 1, 1),
                                  (threads.BLAS_THREADED_MIN_MACS - 1, 1, 1), (threads.BLAS_THREADED_MIN_MACS, 1, 2)):
            with threads.blas_threads_for(macs, gemms=gemms):
                assert blas_threads() == want, (macs, gemms)
            assert blas_threads() == 2
    finally:
        _blas.set_threads(previous)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m, k, n", [(128, 256, 10), (3, 5, 7), (128, 784, 256), (0, 4, 3), (65, 1, 33)])
def test_policy_matmul_holds_small_gemms_to_one_thread_and_equals_numpy(
        monkeypatch: pytest.MonkeyPatch, dtype: Any, m: int, k: int, n: int) -> None:
    """``threads.matmul`` runs GEMMs between OpenBLAS's own serial threshold and
    ``BLAS_THREADED_MIN_MACS`` with OpenBLAS held to one thread, restores the count, and returns what
    numpy's matmul returns on one thread (bitwise: the same BLAS call), for any memory order."""
    from tensorplay.interpreters.eager.kernels import _blas
    api = _blas._api()
    if api is None:
        pytest.skip("OpenBLAS not found in this process")
    blas_threads = api[1]
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a = rng.standard_normal((k, m)).astype(dtype).T  # a column-major operand, as Linear's weights are
    b = rng.standard_normal((k, n)).astype(dtype)
    previous = blas_threads()
    _blas.set_threads(2)
    seen: list[int] = []
    real = np.matmul

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(blas_threads())
        return real(*args, **kwargs)

    try:
        with _blas.single_threaded_blas():
            want = np.matmul(a, b)
        monkeypatch.setattr(np, "matmul", spy)
        got = threads.matmul(a, b)
        monkeypatch.undo()
        assert blas_threads() == 2
    finally:
        _blas.set_threads(previous)
    macs = m * k * n
    held = threads.OPENBLAS_SERIAL_MAX_MACS < macs < threads.BLAS_THREADED_MIN_MACS
    assert seen == [1 if held else 2]
    assert got.dtype == dtype and got.shape == (m, n)
    if held or macs <= threads.OPENBLAS_SERIAL_MAX_MACS:
        np.testing.assert_array_equal(got, want)
    else:  # OpenBLAS's threads may split the sums differently: equal up to rounding
        np.testing.assert_allclose(got, want, rtol=1e-4 if dtype == np.float32 else 1e-12,
                                   atol=1e-3 if dtype == np.float32 else 1e-10)


FAULTS = ("import resource, numpy as np, tensorplay; from tensorplay.interpreters.eager.kernels import allocator; "
          "counts = []\n"
          "for _ in range(8):\n"
          "    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
          "    a = np.empty(64 * 256 * 784, np.float32); a.fill(1.0); del a\n"
          "    counts.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)\n"
          "print(sum(counts[2:]), '|', allocator.describe())")


def test_blocks_above_the_mmap_threshold_reuse_their_pages() -> None:
    """With the heap reserve, a 51 MiB array allocated and freed again and again (a per-sample gradient of a
    784-256 layer at batch 64) comes from the heap and its pages are reused: without it every allocation
    is a fresh mapping that page-faults through all of it (~280 faults here, ~3.5 ms of a 5 ms fill)."""
    if not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"):
        pytest.skip("the allocator tuning applies to glibc only")
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("MALLOC_") and k not in ("TP_MALLOC_TUNING", "LD_PRELOAD", "GLIBC_TUNABLES")}

    def later_faults(**env: str) -> tuple[int, str]:
        done = subprocess.run([sys.executable, "-c", FAULTS], env={**clean, **env}, capture_output=True, text=True,
                              check=True, timeout=120)
        count, description = done.stdout.strip().split("|")
        return int(count), description.strip()

    tuned, description = later_faults()
    assert "heap reserve 191 MiB" in description, description
    untuned, _ = later_faults(TP_MALLOC_TUNING="0")
    # six later allocations: the tuned process touches pages it already has; the untuned one maps new ones
    assert tuned < 60, (tuned, untuned)
    print(f"page faults over six later 51 MiB allocations: {tuned} tuned, {untuned} with TP_MALLOC_TUNING=0")
