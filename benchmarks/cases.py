"""What a comparison benchmark module declares: its cases, each with one builder per library.

A benchmark module that compares libraries exposes ``cases() -> list[Case]``. A :class:`Case`
maps a library name (``"tensorplay"``, ``"torch"``, ``"jax"``, ``"numpy"``) to a *builder*: a
function of no arguments that imports that library only, prepares the inputs (from a seeded
numpy generator, so every process builds the same data) and returns the zero-argument callable
to time. Builders never import another library, so a worker process that builds one library's
cases holds that library alone (see :mod:`benchmarks.isolated`).

``GROUPING`` in a module says how workers are started: ``"case"`` (one fresh process per case,
library and round: the training steps) or ``"module"`` (one fresh process per library and round
runs all of the module's cases in turn: many small cases). ``TIMING`` (optional) overrides the
worker's timing defaults for the module's cases: ``{"repeat": 7, "min_time": 0.05, "warmup_time": 0.3}``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

Builder = Callable[[], Callable[[], Any]]
LIBRARIES = ("tensorplay", "torch", "jax", "numpy")


@dataclass(frozen=True)
class Case:
    """One row of a comparison: ``builders[library]()`` returns the callable to time.

    ``per_call`` divides the measured seconds (a callable that runs ``per_call`` operations reports
    seconds per operation). A case with ``metrics=True`` is not timed: its callable is run once and
    returns ``{metric name: value}`` (each metric becomes a row named ``"<case>: <metric>"``)."""

    name: str
    builders: Mapping[str, Builder]
    per_call: int = 1
    metrics: bool = False


def rng(seed: int) -> np.random.Generator:
    """The seeded generator every process uses for a case's data (same bits in every process)."""
    return np.random.default_rng(seed)


def normal(seed: int, *shape: int, scale: float = 1.0) -> np.ndarray[Any, Any]:
    """A float32 array of standard normal draws times ``scale`` (same in every process)."""
    return (rng(seed).standard_normal(shape) * scale).astype(np.float32)


def block_until_ready(value: Any) -> Any:
    """JAX dispatches asynchronously: wait for every array in ``value`` (a pytree) to be computed."""
    import jax

    wait: Any = jax.block_until_ready  # (untyped in jax)
    return wait(value)
