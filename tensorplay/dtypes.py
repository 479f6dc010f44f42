"""Public dtype objects (``tp.float32`` ...) and conversions to and from numpy and names."""

from __future__ import annotations

import sys
from typing import Any, Final

import numpy as np

from tensorplay.spec.errors import DTypeError


class DType:
    """A tensor element type. Compare with ``==``; ``str(tp.float32) == "tensorplay.float32"``."""

    __slots__ = ("name", "numpy", "is_floating_point", "itemsize")

    def __init__(self, name: str) -> None:
        self.name: Final = name
        self.numpy: Final = np.dtype(name)
        self.is_floating_point: Final = self.numpy.kind == "f"
        self.itemsize: Final = self.numpy.itemsize

    def __repr__(self) -> str:
        return f"tensorplay.{self.name}"

    def __reduce__(self) -> str:
        return self.name


float32: Final = DType("float32")
float64: Final = DType("float64")
int32: Final = DType("int32")
int64: Final = DType("int64")
bool_: Final = DType("bool")

ALL: Final = (float32, float64, int32, int64, bool_)
_BY_NAME: Final = {d.name: d for d in ALL}
_BY_NUMPY: Final = {d.numpy: d for d in ALL}
_ALIASES: Final = {"float": float32, "double": float64, "long": int64, "int": int64, "bool": bool_,
                   "f4": float32, "f8": float64, "i4": int32, "i8": int64}


def plain_array(value: Any, where: str) -> np.ndarray[Any, Any]:
    """``value`` as a plain ``numpy.ndarray`` (``np.asarray``: a subclass such as ``np.matrix`` becomes a
    view of the same memory). A masked array is refused: a tensor has no mask, and dropping it would
    silently count the masked entries. (A masked array exists only once ``numpy.ma`` is imported: until then
    the check does not import it, 15 ms of a process's first tensor.)"""
    masked = sys.modules.get("numpy.ma")
    if masked is not None and isinstance(value, masked.MaskedArray):
        raise DTypeError(f"{where}: got a numpy masked array; a tensor has no mask, so its masked entries would "
                         "silently count. Pass array.filled(value) or array.compressed()")
    return np.asarray(value)


def native_order(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``array`` itself when its dtype is in the machine's byte order (or has none: bool), else a converted
    copy in that order holding the same values (a big-endian ``>f4`` array read from a file becomes
    ``float32``); ``array`` is never changed. Every tensor holds native-order data: numpy's loops, the
    kernels and the files written assume it."""
    if array.dtype.isnative:
        return array
    return array.astype(array.dtype.newbyteorder("="))


def from_numpy_dtype(dtype: np.dtype[Any]) -> DType:
    """The tensorplay dtype of a numpy dtype; unsupported ones raise ``DTypeError``."""
    found = _BY_NUMPY.get(dtype)
    if found is None:
        if not dtype.isnative and dtype.newbyteorder("=") in _BY_NUMPY:
            raise DTypeError(
                f"numpy dtype {dtype.str} ({dtype.name}) is not in the machine's byte order; a tensor holds "
                f"native-order data (convert with .astype(array.dtype.newbyteorder('=')) first)")
        raise DTypeError(
            f"numpy dtype {dtype} is not supported; expected one of "
            f"{', '.join(d.name for d in ALL)} (convert with .astype first)")
    return found


def to_dtype(value: object) -> DType:
    """Accept a ``DType``, a dtype name, a numpy dtype or a Python type (``float``, ``int``, ``bool``)."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        found = _BY_NAME.get(value) or _ALIASES.get(value)
        if found is not None:
            return found
    elif value is float:
        return float32
    elif value is int:
        return int64
    elif value is bool:
        return bool_
    else:
        try:
            return from_numpy_dtype(np.dtype(value))  # type: ignore[call-overload]
        except TypeError:
            pass
    raise DTypeError(f"unknown dtype {value!r}; expected one of {', '.join(d.name for d in ALL)}")
