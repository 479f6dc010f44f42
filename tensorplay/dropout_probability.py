"""The check of a dropout probability ``p``, shared by ``F.dropout``/``dropout1d``/``2d``/``3d``, the dropout
modules and the graph-level :func:`tensorplay.prefix.dropout`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tensorplay.errors import ArgumentError, ArgumentTypeError


def dropout_probability(where: str, p: Any) -> float:
    """``p`` as a Python float, checked: a real number (a Python or numpy int or float; not a bool, a string,
    a tensor or a sequence, an :class:`ArgumentTypeError` naming ``where`` and ``p``, a TypeError as PyTorch's)
    in ``[0, 1]`` (an :class:`ArgumentError` otherwise, NaN included)."""
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, float, np.integer, np.floating)):
        raise ArgumentTypeError(f"{where}: dropout probability p must be a number between 0 and 1, got "
                                f"{type(p).__name__} {_short(p)}")
    value = float(p)
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise ArgumentError(f"{where}: dropout probability p has to be between 0 and 1, but got {p!r}")
    return value


def _short(value: Any, limit: int = 40) -> str:
    """``repr(value)``, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


__all__ = ["dropout_probability"]
