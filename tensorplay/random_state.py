"""The global counter-based generator: ``tp.manual_seed`` and key drawing.

A key is ``(seed, counter)``; random primitives take it as an input value
(an int64 tensor ``[2]``) and map it to numpy's Philox generator, so a replay
with the same key is exact and every eager draw advances the counter.
The generator is shared by all threads: each draw reads and advances it under
a lock, so no two draws (in any threads) get the same key.
"""

from __future__ import annotations

import threading

import numpy as np

from tensorplay import compile_hooks
from tensorplay.errors import ArgumentTypeError

_state = [0, 0]  # seed, counter; read and written only under _lock
_lock = threading.Lock()


def manual_seed(seed: int) -> None:
    """Seed the global generator; later draws are reproducible."""
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise ArgumentTypeError(f"manual_seed: expected an int seed, got {type(seed).__name__} {seed!r}")
    with _lock:
        _state[0] = int(seed) & 0x7FFF_FFFF_FFFF_FFFF
        _state[1] = 0


def initial_seed() -> int:
    """The seed last passed to :func:`manual_seed` (0 by default)."""
    return _state[0]


def next_key() -> np.ndarray:
    """A fresh key ``[seed, counter]`` (int64); advances the counter (atomically: thread-safe)."""
    handler = compile_hooks.handler()
    if handler is not None:  # a draw while tensorplay.compile captures: its numbers would be baked in
        handler.eager_draw()
    with _lock:
        seed, counter = _state
        _state[1] = counter + 1
    return np.array([seed, counter], dtype=np.int64)


def peek_key(ahead: int = 0) -> np.ndarray:
    """The key the ``ahead``-th next draw would give, without advancing the generator."""
    with _lock:
        seed, counter = _state
    return np.array([seed, counter + ahead], dtype=np.int64)


def get_state() -> tuple[int, int]:
    """The global generator's state ``(seed, counter)``; :func:`set_state` with it replays the same draws."""
    with _lock:
        return _state[0], _state[1]


def set_state(state: tuple[int, int]) -> None:
    """Restore a state returned by :func:`get_state`."""
    seed, counter = state
    with _lock:
        _state[0], _state[1] = int(seed), int(counter)
