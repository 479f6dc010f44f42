"""The guard of one container a compiled function reads from outside: a list, tuple, dict, set, or the
attributes of a user's object.

A :class:`ContainerSource` (also for the attributes of a user's class) is found by :mod:`.sources` at
the path the function reaches the container through (``closure s``, ``global cfg['opt']``, ``closure holders[0]``) and checked before every call:

* its *layout*: the type (a list rebound to a tuple is a change), the length, and for a dict (or an
  object's attributes) the keys in order, so an ``append``, a key added or removed or reordered, or a
  ``len()`` that would read differently recompiles;
* the *static values* among its entries (:mod:`.values`: scalars, strings, tuples of them), by value,
  so ``s[0] = 4.0`` or ``cfg['k'] = 3.0`` recompiles;
* for a container too large to walk entry by entry, the identity of its other entries (so rebinding
  one is seen; a change *inside* such an entry is not, and discovery warns about it).

Entries that are tensors, nested containers, objects or modules get their own sources, at their own
path, so a rebound tensor entry is read again without recompiling. The check is a handful of C-level
comparisons per container (the entries are fetched with one ``operator.itemgetter``); the reasons,
computed only on a miss, name the entry: ``closure s[0] was 1.5, now 4.0``.
"""

from __future__ import annotations

import operator
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tensorplay.compiler.values import SCALARS, describe_static, static_key

Reader = Callable[[], Any]

MISSING: Any = object()
"""What a reader returns when its path no longer leads anywhere."""

_KINDS: dict[type, str] = {list: "a list", tuple: "a tuple", dict: "a dict", set: "a set", frozenset: "a frozenset"}


def kind_text(kind: type) -> str:
    """``a list`` / ``a Config object`` (for messages)."""
    return _KINDS.get(kind, f"a {kind.__name__}")


def _now_text(value: Any) -> str:
    return "missing" if value is MISSING else kind_text(type(value))


def entry_name(name: str, key: Any, attributes: bool) -> str:
    """The name of entry ``key`` of the container named ``name``: ``closure s[0]``, ``global cfg.w``."""
    if attributes:
        return f"{name}.{key}"
    text = repr(key)
    return f"{name}[{text if len(text) <= 40 else text[:37] + '...'}]"


def _getter(slots: tuple[Any, ...]) -> Callable[[Any], tuple[Any, ...]]:
    if not slots:
        return lambda container: ()
    if len(slots) == 1:
        slot = slots[0]
        return lambda container: (container[slot],)
    get: Callable[[Any], tuple[Any, ...]] = operator.itemgetter(*slots)
    return get


@dataclass
class ContainerSource:
    """A container read from outside (see the module docstring).

    ``kind``: the type ``read()`` must return; ``attributes``: the entries are ``read().__dict__``'s (a
    user's object); ``keys``: a mapping's keys in order (``None`` for a sequence or a set); ``length``;
    ``members``: a set's elements; ``slots`` / ``values``: the keys (or indices) of the static entries and
    their values; ``held`` / ``others``: the keys and identities of the entries guarded by identity only.
    """

    name: str
    read: Reader
    kind: type
    attributes: bool
    length: int
    keys: tuple[Any, ...] | None = None
    members: frozenset[Any] | None = None
    slots: tuple[Any, ...] = ()
    values: tuple[Any, ...] = ()
    held: tuple[Any, ...] = ()
    others: tuple[Any, ...] = ()
    _types: tuple[type, ...] = field(default=(), repr=False)
    _frozen: tuple[Any, ...] = field(default=(), repr=False)
    _exact: bool = field(default=True, repr=False)
    _get: Callable[[Any], tuple[Any, ...]] = field(default=lambda c: (), repr=False)
    _get_held: Callable[[Any], tuple[Any, ...]] = field(default=lambda c: (), repr=False)
    holds: Callable[[], bool] = field(init=False, repr=False, compare=False)
    """Whether the container read now matches the one the function was captured with (one closure over
    what it compares, made by :meth:`_checker`: it runs before every compiled call)."""

    def __post_init__(self) -> None:
        self._types = tuple(type(v) for v in self.values)
        self._frozen = tuple(static_key(v) for v in self.values)
        self._exact = all(type(v) in SCALARS for v in self.values)
        self._get = _getter(self.slots)
        self._get_held = _getter(self.held)
        self.holds = self._checker()

    def _entries(self, now: Any) -> Any:
        return getattr(now, "__dict__", None) if self.attributes else now

    def _checker(self) -> Callable[[], bool]:
        """The :attr:`holds` check."""
        read, kind, length, attributes = self.read, self.kind, self.length, self.attributes
        members, keys, slots, values, held, others = (self.members, self.keys, self.slots, self.values, self.held,
                                                      self.others)
        types, frozen, exact, get, get_held = self._types, self._frozen, self._exact, self._get, self._get_held
        is_ = operator.is_

        def holds() -> bool:
            now = read()
            if type(now) is not kind:
                return False
            entries: Any = now.__dict__ if attributes else now
            if len(entries) != length:
                return False
            if members is not None:
                return bool(entries == members)
            if keys is not None and tuple(entries) != keys:
                return False
            if slots:
                got = get(entries)
                if not all(map(is_, got, values)) \
                        and not (exact and got == values and tuple(map(type, got)) == types) \
                        and tuple(map(static_key, got)) != frozen:
                    return False
            return not held or all(map(is_, get_held(entries), others))
        return holds

    def reasons(self) -> list[tuple[str, str]]:
        """``(kind, message)`` for each way the container read now differs (empty when it matches)."""
        now = self.read()
        if type(now) is not self.kind:
            return [("state", f"{self.name} was {kind_text(self.kind)}, now {_now_text(now)}")]
        entries = self._entries(now)
        if entries is None:
            return [("state", f"{self.name} has no attributes now")]
        if self.members is not None:
            if entries == self.members:
                return []
            added = sorted((describe_static(m) for m in set(entries) - self.members))
            removed = sorted((describe_static(m) for m in self.members - set(entries)))
            parts = ([f"{', '.join(added)} added"] if added else []) + \
                ([f"{', '.join(removed)} removed"] if removed else [])
            return [("state", f"{self.name}: its elements changed ({'; '.join(parts)})")]
        what = "attributes" if self.attributes else "keys"
        if self.keys is not None:
            keys = tuple(entries)
            if keys != self.keys:
                added = [k for k in keys if k not in self.keys]
                removed = [k for k in self.keys if k not in keys]
                parts = [f"{what[:-1] if len(added) == 1 else what} {', '.join(map(repr, added))} added"] if added else []
                parts += [f"{what[:-1] if len(removed) == 1 else what} {', '.join(map(repr, removed))} removed"] \
                    if removed else []
                return [("state", f"{self.name}: " + ("; ".join(parts) if parts else f"the order of its {what} "
                                                      "changed"))]
        elif len(entries) != self.length:
            return [("state", f"{self.name}: length was {self.length}, now {len(entries)}")]
        out = []
        got = self._get(entries)
        for slot, was, key, value in zip(self.slots, self.values, self._frozen, got):
            if static_key(value) != key:
                out.append(("value", f"{entry_name(self.name, slot, self.attributes)} was {describe_static(was)}, "
                                     f"now {describe_static(value)}"))
        for slot, was, value in zip(self.held, self.others, self._get_held(entries)):
            if value is not was:
                out.append(("identity", f"{entry_name(self.name, slot, self.attributes)} is a different object "
                                        "than when the function was captured"))
        return out


def snapshot(name: str, read: Reader, container: Any, attributes: bool, static: Callable[[Any], bool],
             walked: bool) -> ContainerSource:
    """The :class:`ContainerSource` of ``container`` as it is now: its static entries by value (``static``
    says which), and, when its entries are not ``walked`` one by one, the others by identity."""
    entries = vars(container) if attributes else container
    if isinstance(entries, (set, frozenset)):
        return ContainerSource(name, read, type(container), attributes, len(entries), members=frozenset(entries))
    mapping = isinstance(entries, (dict, types.MappingProxyType))  # a class's attributes: a mapping proxy
    items = list(entries.items()) if mapping else list(enumerate(entries))
    keys = tuple(entries) if mapping else None
    slots, values, held, others = [], [], [], []
    for key, item in items:
        if attributes and isinstance(key, str) and key.startswith("__"):
            continue  # ``__module__``, ``__doc__``, ...: the names are guarded, not the values
        if static(item):
            slots.append(key)
            values.append(item)
        elif not walked:
            held.append(key)
            others.append(item)
    return ContainerSource(name, read, type(container), attributes, len(entries), keys, None, tuple(slots),
                           tuple(values), tuple(held), tuple(others))


__all__ = ["ContainerSource", "MISSING", "entry_name", "kind_text", "snapshot"]
