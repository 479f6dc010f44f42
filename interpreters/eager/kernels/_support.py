"""Plumbing shared by the kernel wrappers: the lazy numba loader, dtype helpers and scratch
buffers (threading is :mod:`.threads`). Imports neither numba nor torch.
"""

from __future__ import annotations

import importlib
import math
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from tensorplay.spec.errors import AxisError

Array = npt.NDArray[Any]

# ---- lazy numba ---------------------------------------------------------------------------

_JITTED: dict[str, Any] = {}


def jitted(module: str) -> Any:
    """The jitted module ``module`` of this package (``"_numba_conv"``, ...): imported, with numba, on the
    first call; afterwards one dictionary lookup (``importlib.import_module`` costs a few microseconds
    per call, a noticeable share of a small kernel's time)."""
    found = _JITTED.get(module)
    if found is None:
        found = _JITTED[module] = importlib.import_module("." + module, __package__)
    return found


def nb() -> Any:
    """The module of jitted kernels; imports numba (and defines the kernels) on first use.

    Each kernel compiles (or loads from numba's on-disk cache) on its first call.
    """
    return jitted("_numba_kernels")


# ---- dtypes -------------------------------------------------------------------------------

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
FLOATS = frozenset({F32, F64})
"""The dtypes the float kernels compute in."""


# ---- numpy functions without the array-function dispatch ---------------------------------------------

def _undispatched(fn: Any) -> Any:
    """numpy's own implementation of the array function ``fn``, called without the ``__array_function__``
    dispatch in front of it (0.3-0.4 us a call, about a third of ``where`` or ``concatenate`` on a few
    elements); ``fn`` itself where this numpy exposes none. Only for plain ndarrays (the eager fast paths,
    which check that their operands are), where the dispatch would pick this implementation anyway."""
    return getattr(fn, "_implementation", fn)


WHERE: Callable[..., Array] = _undispatched(np.where)
"""``numpy.where`` for plain ndarrays (:func:`_undispatched`)."""

CONCATENATE: Callable[..., Array] = _undispatched(np.concatenate)
"""``numpy.concatenate`` for a sequence of plain ndarrays (:func:`_undispatched`)."""


def float_dtype(*arrays: Array) -> np.dtype[Any]:
    """The float dtype a float kernel computes in: float64 if any input is float64, else float32
    (integer and bool inputs count as float32)."""
    for a in arrays:
        if a.dtype == F64:
            return F64
    return F32


def all_finite(a: Array) -> bool:
    """Whether every element of ``a`` is finite (one reduction; an overflowing sum of finite values
    answers False, which only costs the caller its exact fallback)."""
    return math.isfinite(float(np.add.reduce(a, axis=None)))


def as_float(a: Array, dtype: np.dtype[Any]) -> Array:
    """``a`` as a C-contiguous array of ``dtype`` (no copy when it already is one)."""
    return np.ascontiguousarray(a, dtype=dtype)


# ---- scratch buffers ----------------------------------------------------------------------
# Large temporaries (im2col columns) are reused per thread: glibc hands freed multi-MB
# blocks back to the kernel, and touching fresh pages on every call costs more than the work.

_SCRATCH = threading.local()
SCRATCH_MAX_BYTES = 256 << 20


def scratch(shape: tuple[int, ...], dtype: np.dtype[Any], slot: int = 0) -> Array:
    """An uninitialised C-contiguous temporary of ``shape``; valid until the next call with this
    ``slot`` on this thread. Never return it to a caller. (A repeated request, a layer's on every
    call, gets the same view back: making it cost more than a small kernel's work.)"""
    views: dict[int, tuple[tuple[int, ...], np.dtype[Any], Array]] | None = getattr(_SCRATCH, "views", None)
    if views is None:
        views = _SCRATCH.views = {}
        _SCRATCH.bufs = {}
    last = views.get(slot)
    if last is not None and last[0] == shape and last[1] == dtype:
        return last[2]
    size = 1
    for s in shape:
        size *= s
    nbytes = size * dtype.itemsize
    if nbytes > SCRATCH_MAX_BYTES:
        return np.empty(shape, dtype)
    bufs: dict[int, Array] = _SCRATCH.bufs
    buf = bufs.get(slot)
    if buf is None or buf.nbytes < nbytes:
        buf = np.empty(max(nbytes, 1 << 16), np.uint8)
        bufs[slot] = buf
    view = buf[:nbytes].view(dtype).reshape(shape)
    views[slot] = (shape, dtype, view)
    return view


def normalize_axis(axis: int, ndim: int, name: str) -> int:
    """``axis`` in ``[0, ndim)``; raises :class:`AxisError` naming the primitive otherwise."""
    if not -ndim <= axis < ndim:
        raise AxisError(f"{name}: axis {axis} is out of range for an array of rank {ndim}")
    return axis % ndim
