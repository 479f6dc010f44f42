"""Python values a compiled function may treat as constants: which they are, how they compare, how they read.

A *static value* is a Python scalar (``bool``, ``int``, ``float``, ``str``, ``complex``, ``bytes``,
``None``, numpy scalars) or a tuple (or named tuple) of static values: the compiled code may bake it in,
so every call compares it again. :func:`static_key` is the comparison: equal keys exactly when a
compiled function may treat two values alike (``1``, ``1.0`` and ``True`` differ; every NaN is alike);
:func:`describe_static` and :func:`describe_key` write a value, or the value a key stands for, for a
recompile reason.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

SCALARS = (bool, int, float, str, complex, bytes, type(None))
"""The Python scalar types (subclasses included: numpy's ``float64`` is a ``float``)."""

MAX_TUPLE = 64
"""Longer tuples are not static values (their entries are guarded one by one, as a container's)."""


def is_static_value(value: Any) -> bool:
    """Whether ``value`` is a static value (see the module docstring)."""
    if isinstance(value, SCALARS):
        return True
    if isinstance(value, tuple) and len(value) <= MAX_TUPLE:
        return all(is_static_value(v) for v in value)
    return isinstance(value, np.generic)


def static_key(value: Any) -> Any:
    """A hashable key comparing equal exactly when a compiled function may treat two values alike."""
    kind = type(value)
    if kind is float:
        return (float, "nan" if math.isnan(value) else value)
    if kind in (bool, int, str, bytes, complex, type(None)):
        return (kind, value)
    if isinstance(value, tuple) and len(value) <= MAX_TUPLE and all(is_static_value(v) for v in value):
        return (tuple if kind is tuple else ("tuple", kind), tuple(static_key(v) for v in value))
    if isinstance(value, np.ndarray):
        return (np.ndarray, value.dtype.str, value.shape, hash(value.tobytes()))
    if isinstance(value, np.generic):
        item = value.item()
        return (type(value), "nan" if isinstance(item, float) and math.isnan(item) else item)
    if isinstance(value, float):  # a float subclass
        return (kind, "nan" if math.isnan(value) else float(value))
    return ("id", id(value))


def describe_key(key: Any) -> str:
    """A short text of the value a :func:`static_key` stands for (for messages)."""
    if isinstance(key, tuple) and len(key) == 2:
        kind, value = key
        if (kind is tuple or (isinstance(kind, tuple) and kind[:1] == ("tuple",))) and isinstance(value, tuple):
            return "(" + ", ".join(describe_key(k) for k in value) + ("," if len(value) == 1 else "") + ")"
        if kind == "id":
            return "another object"
        if isinstance(kind, type) and not isinstance(value, tuple):
            return "nan" if value == "nan" and kind is not str else describe_static(value)
    if isinstance(key, tuple) and key and key[0] is np.ndarray:
        return f"numpy array {key[1]}{list(key[2])}"
    return "a different value"


def describe_static(value: Any) -> str:
    """A short text of a static leaf for messages."""
    if isinstance(value, np.ndarray):
        return f"numpy array {value.dtype}{list(value.shape)}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


__all__ = ["MAX_TUPLE", "SCALARS", "describe_key", "describe_static", "is_static_value", "static_key"]
