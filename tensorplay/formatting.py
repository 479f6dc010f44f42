"""``repr`` of tensors in PyTorch's style: ``tensor([0., 1.])``, ``tensor([0.5000, 1.2500])``."""

from __future__ import annotations

from typing import Any

import numpy as np

_DEFAULT_DTYPES = ("float32", "int64", "bool")


def _float_formatter(array: np.ndarray[Any, Any]) -> Any:
    finite = array[np.isfinite(array)]
    if finite.size and np.all(finite == np.round(finite)) and np.abs(finite).max() < 1e8:
        return lambda v: f"{v:.0f}." if np.isfinite(v) else str(v)
    nonzero = np.abs(finite[finite != 0])
    if nonzero.size and (nonzero.max() >= 1e8 or nonzero.min() < 1e-4):
        return lambda v: f"{v:.4e}" if np.isfinite(v) else str(v)
    return lambda v: f"{v:.4f}" if np.isfinite(v) else str(v)


def format_array(array: np.ndarray[Any, Any], suffixes: list[str]) -> str:
    """``tensor(<values>[, dtype=...][, <suffixes>])`` for a numpy array."""
    if array.dtype.kind == "f":
        fmt = _float_formatter(array)
        body = np.array2string(array, separator=", ", formatter={"float_kind": fmt},
                               prefix="tensor(", threshold=1000, edgeitems=3)
    else:
        body = np.array2string(array, separator=", ", prefix="tensor(", threshold=1000, edgeitems=3)
    extra = list(suffixes)
    if array.dtype.name not in _DEFAULT_DTYPES or array.size == 0 and array.dtype.name != "float32":
        extra.insert(0, f"dtype=tensorplay.{array.dtype.name}")
    if array.size == 0 and array.ndim > 1:
        extra.insert(0, f"size={tuple(array.shape)}")
    return "tensor(" + ", ".join([body] + extra) + ")"
