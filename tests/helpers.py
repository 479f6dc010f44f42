"""Helpers shared by several test modules."""

from __future__ import annotations

import doctest
import importlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


def as_numpy(value: Any) -> Any:
    """A tensorplay or PyTorch tensor as a numpy array (detached); anything else unchanged."""
    return value.detach().numpy() if hasattr(value, "detach") else value


def close(a: Any, b: Any, tol: float = 1e-5) -> None:
    """``a`` and ``b`` (tensorplay or PyTorch tensors, arrays, numbers) are equal to ``tol`` (relative and
    absolute)."""
    np.testing.assert_allclose(np.asarray(as_numpy(a)), np.asarray(as_numpy(b)), rtol=tol, atol=tol)


def is_float_array(value: Any) -> bool:
    """``value`` is a numpy array of a floating dtype."""
    return isinstance(value, np.ndarray) and value.dtype.kind == "f"


def as_float64(value: Any) -> Any:
    """A float array as float64 with the same layout (non-contiguous stays non-contiguous); anything
    else unchanged."""
    if is_float_array(value) and value.dtype != np.float64:
        out = np.empty_like(value, dtype=np.float64)  # keeps a non-contiguous layout
        out[...] = value
        return out
    return value


def central_difference(value: Callable[[list[Any]], float], args: Sequence[Any], index: int,
                       eps: float) -> np.ndarray[Any, Any]:
    """``d value(args) / d args[index]`` by float64 central differences, one entry at a time."""
    base = np.array(args[index], dtype=np.float64)
    grad = np.zeros(base.shape)
    for pos in np.ndindex(*base.shape):
        vals = []
        for sign in (1.0, -1.0):
            moved = base.copy()
            moved[pos] += sign * eps
            new_args = list(args)
            new_args[index] = moved
            vals.append(value(new_args))
        grad[pos] = (vals[0] - vals[1]) / (2 * eps)
    return grad


def placed(base: Sequence[Any], positions: Sequence[int], values: Sequence[Any]) -> list[Any]:
    """A copy of ``base`` with ``values`` at ``positions``."""
    out = list(base)
    for i, v in zip(positions, values):
        out[i] = v
    return out


def batch_dims_like(arrays: Sequence[Any], ref: Any) -> dict[int, dict[int, str]]:
    """A symbolic batch dim ``"B"`` on axis 0 of every array with ``ref``'s rank and leading size (the
    ``dynamic=`` argument of the graph recorder's ``trace``)."""
    return {j: {0: "B"} for j, a in enumerate(arrays) if a.ndim == ref.ndim and a.shape[0] == ref.shape[0]}


def assert_doctests_pass(module_name: str) -> None:
    """The ``>>>`` examples in the docstrings of ``module_name`` run and print what they show."""
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} doctest examples failed in {module_name}"
