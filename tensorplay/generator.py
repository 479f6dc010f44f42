"""``tp.Generator``: a random generator of one's own, as ``torch.Generator``, for ``tp.multinomial`` and
the shuffling of ``tp.utils.data.DataLoader``.

A generator is a counter-based key source like the global one (``tp.manual_seed``): ``(seed, counter)``,
each draw the next counter, so two generators seeded alike give the same numbers and neither disturbs
the global stream. Its keys are eager values: inside a function captured by ``tp.compile`` a draw from
it would be baked into the graph as a constant, so it is refused there (under ``tp.graph.trace`` the
key is a constant of the graph: every run repeats the draw); draw from the global generator instead
(the default), whose keys a graph receives as inputs.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from tensorplay import compile_hooks
from tensorplay.errors import GraphCaptureError
from tensorplay.spec.random import generator as _philox

_DEFAULT_SEED = 67280421310721  # torch.Generator's default seed


class Generator:
    """``tp.Generator().manual_seed(0)``: a seeded stream of random keys (thread-safe)."""

    def __init__(self, device: Any = "cpu") -> None:
        from tensorplay.devices import check_device
        check_device(device, "Generator")
        self._state = [_DEFAULT_SEED, 0]
        self._lock = threading.Lock()

    def manual_seed(self, seed: int) -> Generator:
        """Seed the generator (and restart its stream); returns the generator, as PyTorch."""
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise TypeError(f"Generator.manual_seed: expected an int seed, got {type(seed).__name__}")
        with self._lock:
            self._state = [int(seed) & 0x7FFF_FFFF_FFFF_FFFF, 0]
        return self

    def initial_seed(self) -> int:
        """The seed given to :meth:`manual_seed` (PyTorch's default seed otherwise)."""
        return self._state[0]

    def get_state(self) -> tuple[int, int]:
        """``(seed, counter)``; :meth:`set_state` with it replays the same draws."""
        with self._lock:
            return self._state[0], self._state[1]

    def set_state(self, state: tuple[int, int]) -> Generator:
        """Restore a state returned by :meth:`get_state`."""
        seed, counter = state
        with self._lock:
            self._state = [int(seed), int(counter)]
        return self

    def next_key(self, where: str) -> np.ndarray[Any, Any]:
        """A fresh key ``[seed, counter]`` (int64), advancing the generator; refused while ``tp.compile``
        captures (``where`` names the caller in the error)."""
        if compile_hooks.handler() is not None:
            raise GraphCaptureError(f"{where}: a draw from a tp.Generator while tp.compile captures the function "
                                    "would be baked into the graph (the same numbers at every call); leave "
                                    "generator=None to draw from the global generator, whose keys the compiled "
                                    "function receives at every call")
        with self._lock:
            seed, counter = self._state
            self._state[1] = counter + 1
        return np.array([seed, counter], dtype=np.int64)

    def numpy_generator(self, where: str) -> np.random.Generator:
        """A numpy generator for one draw of host-side numbers (a shuffle), from :meth:`next_key`."""
        return _philox(self.next_key(where))

    def __repr__(self) -> str:
        return f"<tensorplay.Generator seed={self._state[0]} counter={self._state[1]}>"
