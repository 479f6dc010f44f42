"""Dead-code elimination: nodes whose values nothing reads (outputs, mutations, guards, other live
nodes) are erased, in one reverse sweep. Random primitives are pure functions of their key, so an
unused draw is dead too."""

from __future__ import annotations

from tensorplay.interpreters.graph.ir import Graph


def eliminate_dead_code(graph: Graph) -> int:
    """Erase the dead nodes of ``graph``; returns how many."""
    return graph.eliminate_dead_code()


__all__ = ["eliminate_dead_code"]
