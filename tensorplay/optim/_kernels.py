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
    cannot be used: not one float dtype, or the parameter and its state not all row-major (or all
    column-major) contiguous. A gradient in another layout is copied into theirs (it is only read).

    A ``Linear`` weight is stored column-major because its gradient arrives that way (through the
    transpose in ``x @ w^T``); its state arrays are made ``like`` it, so all of them line up. Other
    gradients of such a weight may arrive row-major (the attention's packed ``in_proj_weight``, from
    its own backward): one copy of the gradient costs far less than the unfused update's ten passes."""
    arrays = (param, grad) + state
    dtype = param.dtype
    if dtype.kind != "f" or not param.flags.writeable or any(a.dtype != dtype or a.shape != param.shape
                                                               for a in arrays):
        return None
    if all(a.flags.c_contiguous for a in arrays):
        return [a.reshape(-1) for a in arrays]
    if all(a.flags.f_contiguous for a in arrays):
        return [a.T.reshape(-1) for a in arrays]
    kept = (param,) + state
    if all(a.flags.c_contiguous for a in kept):
        return kernel_views(param, np.ascontiguousarray(grad), *state)
    if all(a.flags.f_contiguous for a in kept):
        return kernel_views(param, np.asfortranarray(grad), *state)
    return None
