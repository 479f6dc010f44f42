"""The jitted batched outer product (kept apart from ``_numba_kernels``: it depends on nothing there).

Importing this module imports numba; :mod:`.outer` imports it on first use.
"""

from __future__ import annotations

from typing import Any

from . import _numba_start  # noqa: F401  (numba's CPU target started without scipy.linalg)
import numba


@numba.njit(cache=True, nogil=True, fastmath=True)
def batched_outer(a: Any, b: Any, out: Any) -> None:  # pragma: no cover - compiled
    """``out[i, m, n] = a[i, m] * b[i, n]`` for C-contiguous 2-d ``a``, ``b`` and 3-d ``out``."""
    for i in range(a.shape[0]):
        for m in range(a.shape[1]):
            s = a[i, m]
            for n in range(b.shape[1]):
                out[i, m, n] = s * b[i, n]
