"""Special functions numpy lacks (erf), compiled with numba on first use."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

_compiled: dict[str, Callable[..., Any]] = {}


def _erf_kernel() -> Callable[..., Any]:
    if "erf" not in _compiled:
        import math

        from numba import njit

        @njit(cache=True)
        def erf_flat(x: Any, out: Any) -> None:
            for i in range(x.size):
                out[i] = math.erf(x[i])

        _compiled["erf"] = erf_flat
    return _compiled["erf"]


def erf(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The error function, elementwise (float32 or float64; NaN propagates)."""
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    if flat.size:
        _erf_kernel()(flat, out)
    return out.reshape(x.shape)
