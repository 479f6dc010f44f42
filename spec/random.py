"""Counter-based random primitives: ``random_uniform``, ``random_normal``, ``random_randint``.

The key is an int64 array ``[seed, counter]``. It maps to numpy's Philox
bit generator as follows (eager kernels must reproduce this bit for bit; the
simplest way is to call :func:`generator`):

* both words are taken modulo ``2**64`` (``int(word) & (2**64 - 1)``);
* they become Philox's 128-bit *key*: ``Philox(key=np.array([seed, counter],
  dtype=np.uint64))``, with Philox's own 256-bit counter left at 0.

The caller's counter goes into the key, not into Philox's counter, on purpose:
Philox with ``counter=c`` and ``counter=c + 1`` produces the same stream
shifted by one block (four 64-bit words), so consecutive counters would give
overlapping numbers. Different keys give independent streams.

Draws, from a fresh generator per call:

* uniform float64: ``gen.random(shape, dtype=np.float64)``; float32:
  ``gen.random(shape, dtype=np.float32)`` (a float64 draw rounded to float32
  could round up to 1.0, breaking ``[0, 1)``);
* normal: ``gen.standard_normal(shape, dtype=np.float64)`` cast to ``dtype``;
* randint: ``gen.integers(low, high, size=shape, dtype=np.int64)`` cast to ``dtype``.
"""

from __future__ import annotations

import numpy as np

from .aval import Aval
from .dtypes import FLOATS, INTS
from .errors import DTypeError, ShapeError
from .shapes import Array, aval_of, dtype_param, finish, fmt_aval, is_known, shape_param

_MASK64 = (1 << 64) - 1
_INT_RANGE = {"int32": (-(2 ** 31), 2 ** 31), "int64": (-(2 ** 63), 2 ** 63)}


def generator(key: object) -> np.random.Generator:
    """The Philox generator of ``key`` (int64 ``[seed, counter]``), as described in the module docstring."""
    words = np.asarray(key)
    if words.shape != (2,):
        raise ShapeError(f"random: key must have shape [2] (seed, counter), got {list(words.shape)}")
    seed, counter = (int(w) & _MASK64 for w in words)
    return np.random.Generator(np.random.Philox(key=np.array([seed, counter], dtype=np.uint64)))


def _check_key(prim: str, key: Aval) -> None:
    if len(key.shape) != 1 or (is_known(key.shape[0]) and key.shape[0] != 2):
        raise ShapeError(f"{prim}: key must have shape [2] (seed, counter), got {fmt_aval(key)}")
    if key.dtype != "int64":
        raise DTypeError(f"{prim}: key must be int64, got {fmt_aval(key)}")


def _float_rule(prim: str, key: Aval, shape: tuple[int, ...], dtype: str) -> Aval:
    _check_key(prim, key)
    sizes = shape_param(prim, "shape", shape)
    if dtype_param(prim, dtype) not in FLOATS:
        raise DTypeError(f"{prim}: dtype must be float32 or float64, got {dtype}")
    return Aval(sizes, dtype)


def random_uniform_rule(key: Aval, *, shape: tuple[int, ...], dtype: str) -> Aval:
    """``key int64[2] -> dtype[*shape]`` (a float dtype)."""
    return _float_rule("random_uniform", key, shape, dtype)


def random_uniform_ref(key: object, *, shape: tuple[int, ...], dtype: str) -> Array:
    """Uniform in ``[0, 1)`` drawn directly in ``dtype`` from :func:`generator`."""
    out = random_uniform_rule(aval_of("random_uniform", "key", key), shape=shape, dtype=dtype)
    return finish(generator(key).random(shape, dtype=np.dtype(dtype).type), out)


def random_normal_rule(key: Aval, *, shape: tuple[int, ...], dtype: str) -> Aval:
    """``key int64[2] -> dtype[*shape]`` (a float dtype)."""
    return _float_rule("random_normal", key, shape, dtype)


def random_normal_ref(key: object, *, shape: tuple[int, ...], dtype: str) -> Array:
    """Standard normal drawn in float64 from :func:`generator`, cast to ``dtype``."""
    out = random_normal_rule(aval_of("random_normal", "key", key), shape=shape, dtype=dtype)
    return finish(generator(key).standard_normal(shape, dtype=np.float64), out)


def random_randint_rule(key: Aval, *, shape: tuple[int, ...], low: int, high: int, dtype: str) -> Aval:
    """``key int64[2] -> dtype[*shape]`` (an int dtype); ``low < high``, both within ``dtype``'s range."""
    _check_key("random_randint", key)
    sizes = shape_param("random_randint", "shape", shape)
    if dtype_param("random_randint", dtype) not in INTS:
        raise DTypeError(f"random_randint: dtype must be int32 or int64, got {dtype}")
    if not (is_known(low) and is_known(high)):
        raise DTypeError(f"random_randint: low and high must be ints, got low={low!r}, high={high!r}")
    if not low < high:
        raise ValueError(f"random_randint: needs integers low < high, got low={low!r}, high={high!r}")
    lo, hi = _INT_RANGE[dtype]
    if low < lo or high > hi:
        raise ValueError(f"random_randint: [low, high) = [{low}, {high}) does not fit in {dtype}")
    return Aval(sizes, dtype)


def random_randint_ref(key: object, *, shape: tuple[int, ...], low: int, high: int, dtype: str) -> Array:
    """Integers uniform in ``[low, high)`` drawn as int64 from :func:`generator`, cast to ``dtype``."""
    out = random_randint_rule(aval_of("random_randint", "key", key), shape=shape, low=low, high=high, dtype=dtype)
    return finish(generator(key).integers(low, high, size=shape, dtype=np.int64), out)
