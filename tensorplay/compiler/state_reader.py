"""Reading every source a specialization's guards check, in one generated function per specialization.

Each tensor, value and object source (:mod:`.sources`) has a reader that follows its path from a root (a
global, a closure cell, an optimizer's setting) through items and attributes, and sources share most of
their paths: ``model.attn.out_proj.in_features`` and ``model.attn.out_proj.weight`` both pass through
``model``, ``attn`` and ``out_proj``. Called one by one, the readers walk those shared steps again for every
source (a transformer block's guards: 42 sources, about 150 steps). :class:`StateReader` reads each
distinct step once per call, in one generated function whose lines call the same step functions the readers
do (:func:`.sources.item_of`, :func:`.sources.attr_of`, :func:`.sources.entry_of`), so every source gets
exactly what its own reader would return. Readers of any other kind (roots, optimizer settings) are called
as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tensorplay.compiler.sources import attr_of, entry_of, item_of


class StateReader:
    """``reader()`` is ``[read() for read in readers]``, each shared step read once (module docstring)."""

    def __init__(self, readers: Sequence[Callable[[], Any]]) -> None:
        self.namespace: dict[str, Any] = {"_item": item_of, "_attr": attr_of, "_entry": entry_of}
        self.lines: list[str] = []
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
        else:
            parent, table, key = step
            at = self._local(parent)
            shared = self._steps.get((at, table, _key(key)))
            if shared is not None:
                local = shared
            else:
                k = self._constant(key)
                expr = f"_item({at}, {k})" if table is None else f"_attr({at}, {k})" if table == "__dict__" \
                    else f"_entry({at}, {self._constant(table)}, {k})"
                local = self._steps[(at, table, _key(key))] = self._emit(expr)
        self._slots[id(read)] = local
        return local

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
