"""Helpers shared by the export tests: arrays of results, bit-for-bit comparison, a save/load round trip."""

from __future__ import annotations

import io
from typing import Any

import numpy as np

import tensorplay as tp


def as_array(t: Any) -> np.ndarray[Any, Any]:
    """The value of a tensor (detached) or of an array."""
    return np.asarray(t.detach().numpy() if isinstance(t, tp.Tensor) else t)


def assert_same_bits(a: Any, b: Any, what: str = "") -> None:
    """Same dtype, shape and bits (NaN payloads and signed zeros included)."""
    x, y = as_array(a), as_array(b)
    assert x.dtype == y.dtype and x.shape == y.shape, (what, x.dtype, y.dtype, x.shape, y.shape)
    assert x.tobytes() == y.tobytes(), what


def assert_same_up_to_cpu_rounding(a: Any, b: Any, what: str = "") -> None:
    """Same dtype and shape; integers and booleans bit for bit; floats with the same NaN and infinity positions
    and finite values within 16 units in the last place of the tensor's largest magnitude.

    This is what a file promises across machines: BLAS and the vector kernels choose their code per CPU (FMA
    contraction, summation blocking), so the last bits of a float result depend on the processor that ran it."""
    x, y = as_array(a), as_array(b)
    assert x.dtype == y.dtype and x.shape == y.shape, (what, x.dtype, y.dtype, x.shape, y.shape)
    if x.dtype.kind != "f":
        assert x.tobytes() == y.tobytes(), what
        return
    assert np.array_equal(np.isnan(x), np.isnan(y)) and np.array_equal(np.isinf(x), np.isinf(y)), what
    assert np.array_equal(x[np.isinf(x)], y[np.isinf(y)]), what
    finite = np.isfinite(y)
    if not finite.any():
        return
    scale = float(np.abs(y[finite]).max())
    tolerance = 16 * float(np.finfo(x.dtype).eps) * max(scale, float(np.finfo(x.dtype).tiny))
    worst = float(np.abs(x[finite].astype(np.float64) - y[finite].astype(np.float64)).max())
    assert worst <= tolerance, (what, worst, tolerance)


def round_trip(ep: Any) -> Any:
    """``ep`` saved to bytes and loaded again."""
    buffer = io.BytesIO()
    tp.export.save(ep, buffer)
    buffer.seek(0)
    return tp.export.load(buffer)
