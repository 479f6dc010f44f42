"""Helpers shared by several test modules."""

from __future__ import annotations

import doctest
import importlib
from collections.abc import Sequence
from typing import Any

import numpy as np


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


def torch_smooth_max_pool(x: Any, k: tuple[int, ...], s: tuple[int, ...], p: tuple[int, ...], beta: float) -> Any:
    """PyTorch reference of ``smooth_max_pool_nd`` on ``x[N, C, *spatial]`` (a torch tensor): the window
    ``logsumexp(beta x) / beta`` with padded cells taking part as zeros."""
    import torch
    import torch.nn.functional as F
    pads: list[int] = []
    for pi in reversed(p):
        pads += [pi, pi]
    xp = F.pad(x, pads, value=0.0)
    for i in range(len(k)):
        xp = xp.unfold(2 + i, k[i], s[i])
    return torch.logsumexp(beta * xp, dim=tuple(range(-len(k), 0))) / beta
