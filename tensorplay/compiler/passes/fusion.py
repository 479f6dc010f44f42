"""Pointwise-fusion grouping: which nodes the backend computes in one generated kernel.

A *fusible* node is an elementwise primitive that compiles to a few machine instructions
(:data:`FUSIBLE`; transcendental functions such as ``exp`` or ``tanh`` are left to numpy, whose
vectorised loops beat a scalar call per element) on float, integer or bool values. Walking the graph
in order, a fusible node joins the group of an input's producer when it has the same output shape
(the group's iteration space) and joining keeps the group convex (no path leaves the group and comes
back). A reduction (``reduce_sum``/``max``/``min`` of a float) whose input is a group value of the
group's shape joins as an *epilogue*: the kernel accumulates it while it computes the group. A node that
reads two groups of its shape which do not depend on each other merges them (an optimizer update where the
momentum chain and the scaled-gradient chain meet).

The pass annotates ``node.meta["fusion_group"]`` (an int) on the members of groups of two or more
nodes and returns the groups; it changes nothing else.
"""

from __future__ import annotations

from typing import Any

from tensorplay.interpreters.graph.ir import Graph, Node, Var
from tensorplay.spec.table import PRIMITIVES, names

_BIT_OPERATIONS = ("bitwise", "int_or_bool")
FUSIBLE = frozenset(name for family in ("unary", "binary", "select") for name in names(family)
                    if not PRIMITIVES[name].transcendental and not PRIMITIVES[name].params
                    and PRIMITIVES[name].dtypes not in _BIT_OPERATIONS) | {"cast"}
"""Elementwise primitives a generated kernel computes inline: the elementwise families without the
transcendental ones (the table's ``transcendental`` flag) and without bit operations (integer and bool
bits stay with numpy), plus ``cast``."""

REDUCTIONS = frozenset(names("reduce"))
"""Reductions that may close a group (as its epilogue): the ``reduce`` family."""


KERNEL_DTYPES = ("float32", "float64", "bool")
"""The dtypes fused kernels compute with (integer arithmetic stays with numpy, whose wrap-around and
division rules it keeps)."""


def is_fusible(node: Node) -> bool:
    """Whether ``node`` may be computed inside a fused kernel: a :data:`FUSIBLE` primitive on
    :data:`KERNEL_DTYPES` values, arithmetic in a float dtype, comparisons of floats, no symbolic-size
    operand."""
    if node.target not in FUSIBLE or node.has_sym:
        return False
    values = [v for v in node.inputs if type(v) is Var] + [node.outputs[0]]
    if any(v.aval.dtype not in KERNEL_DTYPES for v in values):
        return False
    family = PRIMITIVES[node.target].dtypes
    if family == "compare":
        return all(v.aval.dtype != "bool" for v in node.inputs if type(v) is Var)
    if family in ("logical", "to_bool") or node.target in ("where", "cast"):
        return True
    return node.outputs[0].aval.dtype != "bool"


def group_pointwise(graph: Graph) -> list[list[Node]]:
    """Annotate fusion groups on ``graph`` (see the module docstring); returns them (two nodes or more).

    Convexity is kept at the level of groups: a value computed in a group is available only once the
    group's whole kernel has run, so a node may join group ``g`` only if none of its other inputs
    depends (through any chain of nodes and groups) on ``g``."""
    group_of: dict[int, int] = {}            # node id -> group
    shape_of: dict[int, tuple[Any, ...]] = {}
    members: dict[int, list[Node]] = {}
    reduced: dict[int, set[int]] = {}        # group -> ids of its reductions' outputs
    direct: dict[int, set[int]] = {}         # group -> groups its inputs come from (directly or via nodes)
    upstream: dict[int, frozenset[int]] = {}  # var id -> groups it comes from (outside any group)

    merged_into: dict[int, int] = {}        # a group merged into another -> that group

    def find(g: int) -> int:
        while g in merged_into:
            g = merged_into[g]
        return g

    def group_of_var(v: Var) -> int | None:
        if v.producer is not None and id(v.producer) in group_of:
            return find(group_of[id(v.producer)])
        return None

    def sources(v: Var) -> frozenset[int]:
        g = group_of_var(v)
        if g is not None:
            return frozenset((g,))
        return frozenset(find(k) for k in upstream.get(v.id, frozenset()))

    def closure(groups: frozenset[int] | set[int]) -> set[int]:
        seen: set[int] = set()
        stack = [find(g) for g in groups]
        while stack:
            g = stack.pop()
            if g not in seen:
                seen.add(g)
                stack.extend(find(k) for k in direct.get(g, ()))
        return seen

    def merge(into: int, other: int) -> None:
        """Group ``other`` joins ``into`` (independent groups of one shape that a node reads both of)."""
        merged_into[other] = into
        for n in members.pop(other):
            group_of[id(n)] = into
            members[into].append(n)
        direct[into] = {find(k) for k in direct[into] | direct.pop(other)} - {into}
        reduced.setdefault(into, set()).update(reduced.pop(other, set()))

    next_group = 0
    for node in graph.nodes:
        node.meta.pop("fusion_group", None)
        inputs = [v for v in node.inputs if type(v) is Var]
        chosen = None
        reduction = node.target in REDUCTIONS and node.outputs[0].aval.dtype in KERNEL_DTYPES[:2] and \
            all(type(v) is Var and v.aval.dtype == node.outputs[0].aval.dtype for v in node.inputs)
        if is_fusible(node) or reduction:
            for v in inputs:
                g = group_of_var(v)
                if g is None or shape_of[g] != tuple(v.shape):
                    continue
                if any(u.id in reduced.get(g, ()) for u in inputs):
                    continue  # a reduction's result is known only after the whole kernel ran
                if not reduction and tuple(node.outputs[0].shape) != shape_of[g]:
                    continue
                # other groups of this shape the node reads, independent of ``g``, are merged into it
                # (``buf * momentum + grad * (1 - dampening)``: two chains meeting in one kernel)
                # (each partner independent of ``g`` and of the partners taken before it: two partners where
                # one feeds the other through a node outside both would make the merged group a cycle)
                joined = {g}
                for u in inputs:
                    h = group_of_var(u)
                    if h is None or h in joined or shape_of[h] != shape_of[g] or reduced.get(h) or reduction:
                        continue
                    upstream_of_h = closure(direct[h])
                    if all(k not in upstream_of_h and h not in closure(direct[k]) for k in joined):
                        joined.add(h)
                partners = joined - {g}
                outside = [u for u in inputs if group_of_var(u) not in joined]
                if any(joined & closure(sources(u)) for u in outside):
                    continue  # joining would make the group depend on itself
                for h in sorted(partners):
                    merge(g, h)
                chosen = g
                break
        if chosen is None and is_fusible(node):
            chosen = next_group
            next_group += 1
            shape_of[chosen] = tuple(node.outputs[0].shape)
            members[chosen] = []
            direct[chosen] = set()
        if chosen is not None:
            group_of[id(node)] = chosen
            members[chosen].append(node)
            for u in inputs:
                if group_of_var(u) != chosen:
                    direct[chosen] |= sources(u)
            if reduction:
                reduced.setdefault(chosen, set()).add(node.outputs[0].id)
        else:
            found: frozenset[int] = frozenset()
            for u in inputs:
                found |= sources(u)
            upstream[node.outputs[0].id] = found
    position = {id(n): k for k, n in enumerate(graph.nodes)}
    groups = [sorted(nodes, key=lambda n: position[id(n)]) for nodes in members.values() if len(nodes) >= 2]
    for k, nodes in enumerate(groups):
        for node in nodes:
            node.meta["fusion_group"] = k
    return groups


__all__ = ["FUSIBLE", "KERNEL_DTYPES", "REDUCTIONS", "group_pointwise", "is_fusible"]
