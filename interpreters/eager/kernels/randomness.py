"""Counter-based random numbers: the key (int64 ``[seed, counter]``) is an input value.

Each call builds ``np.random.Generator(np.random.Philox(key=seed, counter=counter))``,
so the same key always gives the same numbers.
"""

from __future__ import annotations

import numpy as np

from ._support import Array, random_key


def _generator(key: Array) -> np.random.Generator:
    seed, counter = random_key(key)
    return np.random.Generator(np.random.Philox(key=seed, counter=counter))


def _shape(name: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    s = tuple(int(d) for d in shape)
    if any(d < 0 for d in s):
        raise ValueError(f"{name}: shape must have non-negative entries, got {s}")
    return s


def random_uniform(key: Array, *, shape: tuple[int, ...], dtype: str) -> Array:
    """Uniform in ``[0, 1)``: ``gen.random(shape)`` (float64) cast to ``dtype``."""
    s = _shape("random_uniform", shape)
    return _generator(key).random(s).astype(np.dtype(dtype), copy=False)


def random_normal(key: Array, *, shape: tuple[int, ...], dtype: str) -> Array:
    """Standard normal: ``gen.standard_normal(shape)`` (float64) cast to ``dtype``."""
    s = _shape("random_normal", shape)
    return _generator(key).standard_normal(s).astype(np.dtype(dtype), copy=False)


def random_randint(key: Array, *, shape: tuple[int, ...], low: int, high: int, dtype: str) -> Array:
    """Integers uniform in ``[low, high)``: ``gen.integers(low, high, size=shape)`` cast to ``dtype``."""
    s = _shape("random_randint", shape)
    if high <= low:
        raise ValueError(f"random_randint: need low < high, got low={low}, high={high}")
    return _generator(key).integers(low, high, size=s).astype(np.dtype(dtype), copy=False)
