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


def round_trip(ep: Any) -> Any:
    """``ep`` saved to bytes and loaded again."""
    buffer = io.BytesIO()
    tp.export.save(ep, buffer)
    buffer.seek(0)
    return tp.export.load(buffer)
