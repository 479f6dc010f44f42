"""Hooks through which ``tensorplay.compile`` takes over a few operations while it captures a function.

Capture runs the user's Python once with graph-recorder tensors. A few library operations would
then act on eager state at capture time instead of becoming part of the graph: an optimizer's
``step`` and ``zero_grad`` (which write numpy payloads in place), a draw from the global generator that would be
baked into the graph, and a Python decision on a symbolic size. While a capture runs in a thread, those operations ask :func:`handler` first; outside a
capture it returns ``None`` and they run as usual (one thread-local read).

This module is part of the core layer: it imports nothing from the project. The handler object is
supplied by :mod:`tensorplay.compiler.capture`; its methods are documented there. (Random factories
need no hook: capture makes the recorder the creating interpreter, :func:`tensorplay.recording.creating_in`.)

The transforms of :mod:`tensorplay.func` cache their traced graphs with compile's capture and guards. They
sit below the compiler, so they reach it through :func:`transform_cache`: a *provider* registered by the
package's public face (``tensorplay/__init__.py``) loads the compiler on first use and returns its factory
(:func:`tensorplay.compiler.transform_cache.make`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class _Local(threading.local):
    handler: Any = None


_LOCAL = _Local()


def handler() -> Any:
    """The capture handler active in this thread, or ``None`` (no capture is running)."""
    return _LOCAL.handler


@contextmanager
def installed(new: Any) -> Iterator[None]:
    """Make ``new`` this thread's handler for the block (the previous one comes back afterwards)."""
    previous = _LOCAL.handler
    _LOCAL.handler = new
    try:
        yield
    finally:
        _LOCAL.handler = previous


_PROVIDER: list[Any] = []


def set_transform_cache_provider(provider: Any) -> None:
    """Register ``provider()``, which returns the factory making a cached transform (see the module docstring)."""
    _PROVIDER[:] = [provider]


def transform_cache() -> Any:
    """The factory making a cached transform, or ``None`` when no provider is registered."""
    if not _PROVIDER:
        return None
    return _PROVIDER[0]()


__all__ = ["handler", "installed", "set_transform_cache_provider", "transform_cache"]
