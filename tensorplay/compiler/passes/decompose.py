"""Decomposition: primitives rewritten into simpler ones the backend handles better.

A decomposition is a builder ``builder(graph, node) -> value`` that emits the replacement nodes
(inserted before ``node``) and returns the value the node's users read instead, or ``None`` to keep
the node (a builder may decline inputs it does not handle); :func:`decompose` applies a table of them
(``target -> builder``), :data:`DEFAULT_DECOMPOSITIONS` by default. Replacements keep the node's aval
and source location.

Default table: ``batch_norm`` (inference form: a per-channel scale and shift, which the backend fuses
with its neighbours into one pointwise kernel).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tensorplay.interpreters.graph.ir import Graph, Node, Var

Builder = Callable[[Graph, Node], Any]


def _batch_norm(graph: Graph, node: Node) -> Any:
    """``x * scale + shift`` per channel (axis 1) with ``scale = weight / sqrt(var + eps)`` and
    ``shift = bias - mean * scale`` (the eager kernel's formula, so results match)."""
    x, mean, var, weight, bias = node.inputs
    dtype = node.aval.dtype
    if not all(type(v) is Var and v.aval.dtype == dtype for v in (x, mean, var, weight, bias)):
        return None
    assert isinstance(x, Var)
    rank = len(x.shape)
    if rank < 2:
        return None
    where = node.location
    eps = float(node.params["eps"])
    scale = graph.emit("div", weight, graph.emit("sqrt", graph.emit("add", var, eps, location=where),
                                                 location=where), location=where)
    shift = graph.emit("sub", bias, graph.emit("mul", mean, scale, location=where), location=where)
    column = (x.shape[1],) + (1,) * (rank - 2)
    scale_c = graph.emit("reshape", scale, shape=column, location=where)
    shift_c = graph.emit("reshape", shift, shape=column, location=where)
    return graph.emit("add", graph.emit("mul", x, scale_c, location=where), shift_c, location=where)


DEFAULT_DECOMPOSITIONS: dict[str, Builder] = {"batch_norm": _batch_norm}
"""The decompositions :func:`decompose` applies by default."""


def decompose(graph: Graph, table: Mapping[str, Builder] | None = None) -> int:
    """Apply ``table`` (default :data:`DEFAULT_DECOMPOSITIONS`) to ``graph`` in place; returns the number of
    nodes rewritten."""
    table = DEFAULT_DECOMPOSITIONS if table is None else table
    rewritten = 0
    for node in list(graph.nodes):
        builder = table.get(node.target)
        if builder is None or node.erased:
            continue
        with graph.inserting_before(node):
            new = builder(graph, node)
        if new is None:
            continue
        graph.replace_all_uses(node.outputs[0], new)
        graph.erase(node)
        rewritten += 1
    return rewritten


__all__ = ["Builder", "DEFAULT_DECOMPOSITIONS", "decompose"]
