"""Dtype names, categories and promotion.

Dtypes are plain strings here (``"float32"``, ``"float64"``, ``"int32"``,
``"int64"``, ``"bool"``); Python scalars are *weak* and written as the kinds
``"weak_bool"``, ``"weak_int"``, ``"weak_float"``.

Python scalars promote as in PyTorch (they never widen a tensor of their category).
Every tensor is strong, a 0-d one too, as in NumPy 2 and JAX: ``float32[3] + float64 0-d``
is float64, where PyTorch keeps float32. The rule reads dtypes only, never ranks, so a
function's result dtypes are the same under ``vmap`` (where a per-sample 0-d value is a
batched 1-d one), under ``tp.compile`` and in exported programs.
"""

from __future__ import annotations

from collections.abc import Iterable

FLOATS = ("float32", "float64")
INTS = ("int32", "int64")
DTYPES = ("bool", "int32", "int64", "float32", "float64")
WEAK = ("weak_bool", "weak_int", "weak_float")
DEFAULT_FLOAT = "float32"
DEFAULT_INT = "int64"

_CATEGORY = {"bool": 0, "int32": 1, "int64": 1, "float32": 2, "float64": 2,
             "weak_bool": 0, "weak_int": 1, "weak_float": 2}
_RANK = {"bool": 0, "int32": 1, "int64": 2, "float32": 3, "float64": 4}


def is_float(dtype: str) -> bool:
    """True for float32/float64 (and the weak float kind)."""
    return dtype in FLOATS or dtype == "weak_float"


def is_int(dtype: str) -> bool:
    """True for int32/int64 (and the weak int kind)."""
    return dtype in INTS or dtype == "weak_int"


def weak_kind(value: object) -> str:
    """The weak kind of a Python scalar: bool, int or float."""
    if isinstance(value, bool):
        return "weak_bool"
    if isinstance(value, int):
        return "weak_int"
    if isinstance(value, float):
        return "weak_float"
    raise TypeError(f"not a Python scalar: {type(value).__name__}")


def result_type(dtypes: Iterable[str]) -> str:
    """The dtype of an operation on values of ``dtypes`` (see the module docstring for how this
    differs from PyTorch: a 0-d tensor's dtype is strong).

    Strong dtypes (every tensor's, 0-d included) promote by category then width (int with float gives the
    float, float32 with float64 gives float64). A weak scalar only matters
    when its category is higher than every strong dtype: then the result is
    the default dtype of that category (float32 for a float scalar, int64 for
    an int scalar). All-weak inputs give the defaults.
    """
    dtypes = list(dtypes)
    strong = [d for d in dtypes if d in _RANK]
    weak = [d for d in dtypes if d in WEAK]
    best = max(strong, key=_RANK.__getitem__) if strong else None
    top_weak = max((_CATEGORY[d] for d in weak), default=-1)
    if best is None:
        return ("bool", DEFAULT_INT, DEFAULT_FLOAT)[top_weak] if top_weak >= 0 else DEFAULT_FLOAT
    if top_weak > _CATEGORY[best]:
        return ("bool", DEFAULT_INT, DEFAULT_FLOAT)[top_weak]
    return best
