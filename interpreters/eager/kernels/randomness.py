"""Counter-based random numbers: the key (int64 ``[seed, counter]``) is an input value.

The key-to-generator mapping is the one :mod:`tensorplay.spec.random` defines (both words
become Philox's 128-bit *key*, Philox's own counter stays 0: consecutive counters
would otherwise give overlapping streams); :func:`tensorplay.spec.random.generator` is used
directly so the two can never drift apart. The same key always gives the same
numbers.
"""

from __future__ import annotations

import numpy as np

from tensorplay.spec.random import generator

from ._support import Array


def _shape(name: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    s = tuple(int(d) for d in shape)
    if any(d < 0 for d in s):
        raise ValueError(f"{name}: shape must have non-negative entries, got {s}")
    return s


def _key(name: str, key: Array) -> Array:
    k = np.asarray(key)
    if k.dtype.kind not in "iu":
        raise TypeError(f"{name}: key must be an integer array [seed, counter], got {k.dtype}")
    return k


def random_uniform(key: Array, *, shape: tuple[int, ...], dtype: str) -> Array:
    """Uniform in ``[0, 1)``: ``gen.random(shape, dtype)`` (drawn in float32 for float32, so
    rounding can never produce 1.0)."""
    s = _shape("random_uniform", shape)
    dt = np.dtype(dtype)
    gen = generator(_key("random_uniform", key))
    if dt == np.float32:
        return gen.random(s, dtype=np.float32)
    return gen.random(s, dtype=np.float64).astype(dt, copy=False)


def random_normal(key: Array, *, shape: tuple[int, ...], dtype: str) -> Array:
    """Standard normal: ``gen.standard_normal(shape)`` (float64) cast to ``dtype``."""
    s = _shape("random_normal", shape)
    gen = generator(_key("random_normal", key))
    return gen.standard_normal(s, dtype=np.float64).astype(np.dtype(dtype), copy=False)


def random_randint(key: Array, *, shape: tuple[int, ...], low: int, high: int, dtype: str) -> Array:
    """Integers uniform in ``[low, high)``: ``gen.integers(low, high, size=shape)`` (int64) cast to
    ``dtype``."""
    s = _shape("random_randint", shape)
    if high <= low:
        raise ValueError(f"random_randint: need low < high, got low={low}, high={high}")
    gen = generator(_key("random_randint", key))
    return gen.integers(low, high, size=s, dtype=np.int64).astype(np.dtype(dtype), copy=False)
