"""Common-subexpression elimination: two nodes applying the same primitive to the same inputs with the
same params compute the same value; the later one's users read the earlier one's. Random primitives
are never merged (two draws are two draws, even from one key in a hand-built graph)."""

from __future__ import annotations

from typing import Any

from tensorplay.interpreters.graph.ir import Graph, Literal, Var
from tensorplay.spec.table import PRIMITIVES
from tensorplay.symbolic import SymDim


def _hashable(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_hashable(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, _hashable(v)) for k, v in value.items())))
    if isinstance(value, float) and value != value:
        return ("nan",)
    if isinstance(value, (bool, int, float, str, type(None), SymDim)):
        return (type(value).__name__, value)
    return ("id", id(value))


def _operand(value: Any) -> Any:
    if type(value) is Var:
        return ("var", value.id)
    if type(value) is Literal:
        return ("lit", _hashable(value.value))
    return ("none",)


def eliminate_common_subexpressions(graph: Graph) -> int:
    """Merge duplicate nodes of ``graph`` (see the module docstring); returns how many were removed."""
    seen: dict[Any, Var] = {}
    merged = 0
    for node in list(graph.nodes):
        if PRIMITIVES[node.target].random:
            continue
        key = (node.target, tuple(_operand(v) for v in node.inputs), _hashable(node.params))
        first = seen.get(key)
        if first is None:
            seen[key] = node.outputs[0]
            continue
        graph.replace_all_uses(node.outputs[0], first)
        graph.erase(node)
        merged += 1
    return merged


__all__ = ["eliminate_common_subexpressions"]
