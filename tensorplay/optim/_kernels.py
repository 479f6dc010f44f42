"""Entry points to the fused optimizer kernels: numba is imported on the first update only."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]
_MODULE: ModuleType | None = None


def kernels() -> Any:
    """The module of jitted update kernels (imports numba the first time)."""
    global _MODULE
    if _MODULE is None:
        from tensorplay.optim import _numba_kernels
        _MODULE = _numba_kernels
    return _MODULE


def kernel_views(param: Array, grad: Array, *state: Array) -> list[Array] | None:
    """1-d views of ``param``, ``grad`` and the state arrays for the fused kernels, or ``None`` when they
    cannot be used: not one float dtype, or not all row-major (or all column-major) contiguous.

    A ``Linear`` weight is stored column-major because its gradient arrives that way (through the
    transpose in ``x @ w^T``); its state arrays are made ``like`` it, so all of them line up."""
    arrays = (param, grad) + state
    dtype = param.dtype
    if dtype.kind != "f" or not param.flags.writeable or any(a.dtype != dtype or a.shape != param.shape
                                                               for a in arrays):
        return None
    if all(a.flags.c_contiguous for a in arrays):
        return [a.reshape(-1) for a in arrays]
    if all(a.flags.f_contiguous for a in arrays):
        return [a.T.reshape(-1) for a in arrays]
    return None
