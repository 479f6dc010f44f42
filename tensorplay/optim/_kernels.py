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
    cannot be used: not one float dtype and shape, a read-only parameter, or the parameter and its state
    not all row-major (or all column-major) contiguous. A gradient in another layout is copied into
    theirs (it is only read).

    A ``Linear`` weight is stored column-major because its gradient arrives that way (through the
    transpose in ``x @ w^T``); its state arrays are made ``like`` it, so all of them line up. Other
    gradients of such a weight may arrive row-major (the attention's packed ``in_proj_weight``, from
    its own backward): copying the gradient costs less than copying the parameter and its state
    (:func:`run_update`)."""
    dtype, shape = param.dtype, param.shape
    if dtype.kind != "f" or not param.flags.writeable or grad.dtype != dtype or grad.shape != shape:
        return None
    row = column = True
    for a in (param,) + state:
        if a.dtype != dtype or a.shape != shape:
            return None
        flags = a.flags
        row = row and flags.c_contiguous
        column = column and flags.f_contiguous
    if row:
        return [a.reshape(-1) for a in (param, np.ascontiguousarray(grad)) + state]
    if column:
        return [a.T.reshape(-1) for a in (param, np.asfortranarray(grad)) + state]
    return None


def run_update(kernel: Any, param: Array, grad: Array, state: tuple[Array, ...], *scalars: Any) -> None:
    """``kernel(param, grad, *state, *scalars)`` on the 1-d views :func:`kernel_views` gives; a parameter
    or state laid out otherwise (neither all row- nor all column-major contiguous) is updated through
    row-major copies written back, so every layout gets the same bits. An array passed twice (``vmax``
    standing in for an unused state) is copied once."""
    views = kernel_views(param, grad, *state)
    if views is not None:
        kernel(*views, *scalars)
        return
    copies: dict[int, Array] = {}
    for a in (param,) + state:
        if id(a) not in copies:
            copies[id(a)] = np.ascontiguousarray(a)
    kernel(copies[id(param)].reshape(-1), np.ascontiguousarray(grad, dtype=param.dtype).reshape(-1),
           *[copies[id(a)].reshape(-1) for a in state], *scalars)
    for a in (param,) + state:
        copy = copies.pop(id(a), None)
        if copy is not None and copy is not a:
            a[...] = copy
