"""Reading every source a specialization's guards check, in one generated function per specialization.

Each tensor, value and object source (:mod:`.sources`) has a reader that follows its path from a root (a
global, a closure cell, an optimizer's setting) through items and attributes, and sources share most of
their paths: ``model.attn.out_proj.in_features`` and ``model.attn.out_proj.weight`` both pass through
``model``, ``attn`` and ``out_proj``. Called one by one, the readers walk those shared steps again for every
source (a transformer block's guards: 42 sources, about 150 steps). :class:`StateReader` reads each
distinct step once per call, in one generated function, so every source gets exactly what its own reader
would return: an item step calls the readers' :func:`.sources.item_of`; attribute and table-entry steps
(:func:`.sources.attr_of`, :func:`.sources.entry_of`) are written out as the same dictionary reads, each
object's ``__dict__`` and each of its tables (``_parameters``, ``_modules``) read once. Readers of any other
kind (roots, optimizer settings) are called as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tensorplay.compiler.sources import MISSING, item_of

_EMPTY: dict[str, Any] = {}
"""What an object without a ``__dict__`` has as one here (no entries: every step of it reads MISSING)."""


class StateReader:
    """``reader()`` is ``[read() for read in readers]``, each shared step read once (module docstring)."""

    def __init__(self, readers: Sequence[Callable[[], Any]]) -> None:
        self.namespace: dict[str, Any] = {"_item": item_of, "_MISSING": MISSING, "_EMPTY": _EMPTY}
        self.lines: list[str] = []
        self.n_steps = 0
        """How many distinct steps of the sources' paths (and roots) a call reads."""
        self._slots: dict[int, str] = {}  # id(reader) -> the local holding its value
        self._steps: dict[tuple[str, Any, Any], str] = {}  # (parent local, table, key) -> local
        self._keep = list(readers)  # the ids above stay valid
        results = [self._local(read) for read in readers]
        body = "".join(f"    {line}\n" for line in self.lines)
        self.source = f"def read_all():\n{body}    return [{', '.join(results)}]\n"
        code: dict[str, Any] = {}
        exec(compile(self.source, "<tensorplay-state-reader>", "exec"), self.namespace, code)
        self._read_all: Callable[[], list[Any]] = code["read_all"]

    def _constant(self, value: Any) -> str:
        name = f"_c{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def _local(self, read: Callable[[], Any]) -> str:
        found = self._slots.get(id(read))
        if found is not None:
            return found
        step = getattr(read, "step", None)
        if step is None:
            expr = f"{self._constant(read)}()"
            local = self._emit(expr)
            self.n_steps += 1
        else:
            parent, table, key = step
            at = self._local(parent)
            shared = self._steps.get((at, table, _key(key)))
            if shared is not None:
                local = shared
            else:
                k = self._constant(key)
                if table is None:
                    expr = f"_item({at}, {k})"
                elif table == "__dict__":  # attr_of, written out
                    expr = f"{self._namespace_of(at)}.get({k}, _MISSING)"
                else:  # entry_of, written out (the table read once for all its entries)
                    entries = self._table(at, table)
                    expr = f"_MISSING if {entries} is None else {entries}.get({k}, _MISSING)"
                local = self._steps[(at, table, _key(key))] = self._emit(expr)
                self.n_steps += 1
        self._slots[id(read)] = local
        return local

    def _namespace_of(self, at: str) -> str:
        """The local holding ``getattr(at, "__dict__", {})`` (read once per object)."""
        found = self._steps.get((at, "__dict__", None))
        if found is None:
            found = self._steps[(at, "__dict__", None)] = self._emit(f"getattr({at}, '__dict__', _EMPTY)")
        return found

    def _table(self, at: str, table: str) -> str:
        """The local holding ``at.__dict__.get(table)`` (``None`` without one), read once per object and table."""
        found = self._steps.get((at, table, None))
        if found is None:
            found = self._steps[(at, table, None)] = self._emit(
                f"{self._namespace_of(at)}.get({self._constant(table)})")
        return found

    def _emit(self, expr: str) -> str:
        local = f"n{len(self.lines)}"
        self.lines.append(f"{local} = {expr}")
        return local

    def __call__(self) -> list[Any]:
        return self._read_all()


def _key(key: Any) -> Any:
    """A hashable stand-in for a step's key (its type too: ``1`` and ``True`` are different items)."""
    try:
        hash(key)
    except TypeError:
        return ("id", id(key))
    return (type(key), key)


__all__ = ["StateReader"]
