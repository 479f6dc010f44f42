"""The registry where a primitive's pieces meet.

The primitive table (:mod:`tensorplay.spec.table`) declares every primitive once. This module finds,
by name, the pieces the core of tensorplay holds for each: the ``Ops`` protocol method, the shape
rule and the reference (:mod:`tensorplay.spec`), and the vjp, jvp and batching rules
(:mod:`tensorplay.rules`). The eager kernel lives a layer up and is found by
:func:`tensorplay.interpreters.eager.interpreter.missing_kernels`; the test samples live in
``tests/samples.py``. ``tests/test_primitives.py`` names every missing piece of every primitive in
one message.

    >>> from tensorplay.primitives import pieces
    >>> p = pieces("exp")
    >>> p.primitive.family, p.primitive.uses_output
    ('unary', True)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tensorplay.ops import Ops
from tensorplay.spec import SPECS
from tensorplay.spec.registry import is_missing
from tensorplay.spec.table import PRIMITIVES, Primitive, primitive

CORE_PIECES = ("protocol method", "shape rule", "reference", "vjp rule", "jvp rule", "batching rule")
"""The pieces of a primitive that the core of tensorplay holds, in the order they are reported."""


@dataclass(frozen=True)
class Pieces:
    """What the core knows of one primitive (``None`` for a missing piece)."""

    primitive: Primitive
    protocol_method: Callable[..., Any] | None
    rule: Callable[..., Any] | None
    reference: Callable[..., Any] | None
    vjp: Callable[..., Any] | None
    jvp: Callable[..., Any] | None
    batching: Callable[..., Any] | None

    def missing(self) -> list[str]:
        """The names (from :data:`CORE_PIECES`) of the pieces this primitive lacks."""
        found = (self.protocol_method, self.rule, self.reference, self.vjp, self.jvp, self.batching)
        return [piece for piece, value in zip(CORE_PIECES, found) if value is None]


def pieces(name: str) -> Pieces:
    """The pieces of primitive ``name`` (a ``KeyError`` naming close matches for an unknown name)."""
    from tensorplay.rules.batching import BATCH_RULES
    from tensorplay.rules.jvp import JVP_RULES
    from tensorplay.rules.vjp import VJP_RULES

    declared = primitive(name)
    spec = SPECS[name]
    return Pieces(declared, vars(Ops).get(name), None if is_missing(spec.rule) else spec.rule,
                  None if is_missing(spec.reference) else spec.reference, VJP_RULES.get(name),
                  JVP_RULES.get(name), BATCH_RULES.get(name))


def missing_core_pieces() -> dict[str, list[str]]:
    """Primitive name -> the core pieces it lacks (only primitives that lack some)."""
    out = {}
    for name in PRIMITIVES:
        missing = pieces(name).missing()
        if missing:
            out[name] = missing
    return out


__all__ = ["CORE_PIECES", "Pieces", "missing_core_pieces", "pieces"]
