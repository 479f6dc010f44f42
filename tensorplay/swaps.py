"""Per-thread replacements of module attributes, for ``functional_call`` and ``trace(module)``.

Both run a module with other tensors standing for its parameters (and buffers). Writing
those into the module would show them to every thread that uses the module meanwhile;
instead they live in a thread-local table that ``Module.__getattr__``,
``named_parameters()`` and ``named_buffers()`` consult first, so only the thread
running the call sees them. ``active`` counts the blocks open in any thread, so a
module attribute read costs one list lookup when nothing is replaced.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

active = [0]  # replacement blocks open in any thread (cheap test before the thread-local lookup)
_count_lock = threading.Lock()
_MISSING = object()


class _Tables(threading.local):
    """This thread's replacements: ``id(owner) -> {attribute name: value}``."""

    def __init__(self) -> None:
        self.by_owner: dict[int, dict[str, Any]] = {}


_tables = _Tables()


def replacements(owner: object) -> dict[str, Any] | None:
    """The attributes of ``owner`` replaced in this thread (``None`` when there are none)."""
    if not active[0]:
        return None
    return _tables.by_owner.get(id(owner))


@contextmanager
def replaced(items: Iterable[tuple[object, str, Any]]) -> Iterator[None]:
    """Within the block, and in this thread only, ``owner.<name>`` reads ``value`` for each
    ``(owner, name, value)`` (blocks nest; the previous replacement comes back on exit)."""
    by_owner = _tables.by_owner
    saved: list[tuple[object, str, Any]] = []  # holds the owners, so their ids stay theirs
    with _count_lock:
        active[0] += 1
    try:
        for owner, name, value in items:
            table = by_owner.setdefault(id(owner), {})
            saved.append((owner, name, table.get(name, _MISSING)))
            table[name] = value
        yield
    finally:
        for owner, name, old in reversed(saved):
            table = by_owner[id(owner)]
            if old is _MISSING:
                del table[name]
                if not table:
                    del by_owner[id(owner)]
            else:
                table[name] = old
        with _count_lock:
            active[0] -= 1


__all__ = ["active", "replaced", "replacements"]
