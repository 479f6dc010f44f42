"""The rule tables of :mod:`tensorplay.rules`: registering a rule under primitive names, looking one up
(a :class:`MissingRuleError` naming the primitive when there is none), and the primitives a table lacks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from tensorplay.spec.errors import MissingRuleError
from tensorplay.ops import PRIMITIVE_NAMES

R = TypeVar("R", bound=Callable[..., Any])


def registrar(table: dict[str, R], wrap: Callable[[str, R], R] | None = None) -> Callable[..., Callable[[R], R]]:
    """The decorator factory of ``table``: ``@register(*names)`` stores the rule under each name (as
    ``wrap(name, rule)`` when ``wrap`` is given) and returns the rule unchanged."""
    def register(*names: str) -> Callable[[R], R]:
        def deco(fn: R) -> R:
            for name in names:
                table[name] = fn if wrap is None else wrap(name, fn)
            return fn
        return deco
    return register


def find_rule(table: dict[str, R], name: str, transform: str, kind: str) -> R:
    """``table[name]``; a :class:`MissingRuleError` naming the primitive when there is none."""
    rule = table.get(name)
    if rule is None:
        raise MissingRuleError(f"{transform}: primitive '{name}' has no {kind}")
    return rule


def uncovered(table: dict[str, Any]) -> list[str]:
    """Primitives of :data:`tensorplay.ops.PRIMITIVE_NAMES` without an entry in ``table``."""
    return [name for name in PRIMITIVE_NAMES if name not in table]
