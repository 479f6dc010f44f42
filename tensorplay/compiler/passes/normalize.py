"""Operator normalization: one spelling per computation, so later passes see through trivial ops.

* identities are removed: ``stop_gradient`` (the graph is differentiated before it is compiled, so it
  is the identity here), ``cast`` to the input's dtype, ``reshape`` and ``broadcast_to`` to the input's
  shape, ``permute`` by the identity permutation, a ``slice`` that keeps every element in order;
* chains are composed: ``reshape(reshape(x))`` is one reshape, ``permute(permute(x))`` one permute;
* a literal operand of a commutative binary operator (``add``, ``mul``, ``maximum``, ``minimum``,
  ``eq``, ``ne``, ``logical_and``, ``logical_or``) goes to the right: ``2.0 * x`` and ``x * 2.0`` are
  then one expression for common-subexpression elimination.

A node is only replaced by a value with exactly its aval (shape and dtype), so types never change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tensorplay.interpreters.graph.ir import Graph, Literal, Node, Var
from tensorplay.spec.table import PRIMITIVES


def _always(params: dict[str, Any], rank: int) -> bool:
    return True


def _identity_perm(params: dict[str, Any], rank: int) -> bool:
    return tuple(params["perm"]) == tuple(range(rank))


def _whole_slice(params: dict[str, Any], rank: int) -> bool:
    return all(s == 1 for s in params["steps"]) and all(a == 0 for a in params["starts"])


IDENTITY_WHEN_SAME_AVAL: dict[str, Callable[[dict[str, Any], int], bool]] = {
    "stop_gradient": _always, "cast": _always, "reshape": _always, "broadcast_to": _always,
    "permute": _identity_perm, "slice": _whole_slice,
}
"""Primitives that pass their input on unchanged when the output aval equals the input's and the
params pass this check (a permutation or a slice of a square input keeps the aval but moves elements)."""


def _identity_source(node: Node) -> Any:
    """The input ``node`` merely passes on, or ``None``."""
    check = IDENTITY_WHEN_SAME_AVAL.get(node.target)
    x = node.inputs[0] if node.inputs else None
    if check is None or type(x) is not Var or x.aval != node.outputs[0].aval:
        return None
    return x if check(node.params, len(x.shape)) else None


def _compose(graph: Graph, node: Node) -> bool:
    """Fold ``node`` into its producer when both are reshapes or both are permutes."""
    x = node.inputs[0]
    if type(x) is not Var or x.producer is None or x.producer.target != node.target:
        return False
    inner = x.producer
    if node.target == "reshape":
        node.inputs = (inner.inputs[0],)
        return True
    if node.target == "permute":
        outer_perm, inner_perm = node.params["perm"], inner.params["perm"]
        node.params = {"perm": tuple(inner_perm[p] for p in outer_perm)}
        node.inputs = (inner.inputs[0],)
        return True
    return False


def normalize(graph: Graph) -> int:
    """Normalize ``graph`` in place (see the module docstring); returns the number of changes."""
    changes = 0
    for node in graph.nodes:
        if node.erased:
            continue
        if node.target in ("reshape", "permute") and _compose(graph, node):
            changes += 1
        source = _identity_source(node)
        if source is not None:
            graph.replace_all_uses(node.outputs[0], source)
            changes += 1
            continue
        if PRIMITIVES[node.target].commutative and len(node.inputs) == 2 and type(node.inputs[0]) is Literal \
                and type(node.inputs[1]) is Var:
            node.inputs = (node.inputs[1], node.inputs[0])
            changes += 1
    if changes:
        graph.eliminate_dead_code()
    return changes


__all__ = ["normalize"]
