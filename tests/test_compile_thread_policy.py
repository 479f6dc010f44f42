"""Compiled GEMMs follow the eager interpreter's thread policy (``kernels/threads.py``): a GEMM too small to
profit from OpenBLAS's threads runs with OpenBLAS held to one thread, compiled as eagerly; a large one keeps
the threads. (Checked by the policy's decisions, which do not depend on the machine's load.)"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.interpreters.eager.kernels import _blas, threads


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> list[tuple[tuple[int, ...], ...]]:
    """The operand shapes of every call run with OpenBLAS held to one thread (``fn(a, b, out)``)."""
    seen: list[tuple[tuple[int, ...], ...]] = []
    real = _blas.call_on_one_thread

    def spy(fn: Any, *args: Any) -> Any:
        seen.append(tuple(tuple(a.shape) for a in args[:2] if isinstance(a, np.ndarray)))  # the operands, not out=
        return real(fn, *args)

    monkeypatch.setattr(_blas, "call_on_one_thread", spy)
    return seen


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_mid_sized_gemm_is_held_to_one_thread_compiled_as_eagerly(held: list[Any], dtype: str) -> None:
    rng = np.random.default_rng(0)
    # 128 * 256 * 10 multiply-adds: above OpenBLAS's own serial threshold, below the policy's threaded one
    a, b = rng.standard_normal((128, 256)).astype(dtype), rng.standard_normal((256, 10)).astype(dtype)
    assert threads.OPENBLAS_SERIAL_MAX_MACS < 128 * 256 * 10 < threads.BLAS_THREADED_MIN_MACS
    eager = tp.tensor(a) @ tp.tensor(b)
    assert held == [((128, 256), (256, 10))]
    compiled = tp.compile(lambda x, y: (x @ y) * 2.0)
    compiled(tp.tensor(a), tp.tensor(b))  # the capture computes eagerly
    held.clear()
    got = compiled(tp.tensor(a), tp.tensor(b))  # the compiled code only
    assert held == [((128, 256), (256, 10))]
    np.testing.assert_allclose(got.numpy(), eager.numpy() * 2, rtol=1e-5 if dtype == "float32" else 1e-12)


def test_folded_batch_gemm_is_held_and_large_or_small_gemms_are_not(held: list[Any]) -> None:
    rng = np.random.default_rng(1)
    x3 = rng.standard_normal((4, 32, 256)).astype(np.float32)  # folded to (128, 256) @ (256, 10)
    w = rng.standard_normal((256, 10)).astype(np.float32)
    big = rng.standard_normal((512, 512)).astype(np.float32)    # 134M multiply-adds: OpenBLAS's threads
    small = rng.standard_normal((8, 8)).astype(np.float32)      # OpenBLAS runs it on one thread anyway
    compiled = tp.compile(lambda a, b, c, d: ((a @ b).sum(), (c @ c).sum(), (d @ d).sum()))
    args = (tp.tensor(x3), tp.tensor(w), tp.tensor(big), tp.tensor(small))
    compiled(*args)  # the capture computes eagerly
    held.clear()
    s1, s2, s3 = compiled(*args)
    assert held == [((128, 256), (256, 10))]
    np.testing.assert_allclose(float(s1), float((x3 @ w).sum(dtype=np.float64)), rtol=1e-4)
    np.testing.assert_allclose(float(s2), float((big @ big).sum(dtype=np.float64)), rtol=1e-3)
    np.testing.assert_allclose(float(s3), float((small @ small).sum(dtype=np.float64)), rtol=1e-4, atol=1e-4)
