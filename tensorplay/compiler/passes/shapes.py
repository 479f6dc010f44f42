"""Shape propagation (advisory): every node's output aval is re-derived from its inputs by the
primitive's shape rule and annotated as ``node.meta["static_shape"]`` (a tuple of ints, or ``None``
when a size is symbolic) and ``node.meta["numel"]``; a disagreement with the recorded aval is noted in
``node.meta["shape_mismatch"]`` (typecheck is where it would fail). Backends read the annotations to
plan buffers; nothing is changed."""

from __future__ import annotations

from tensorplay.interpreters.graph.ir import Graph
from tensorplay.spec import SPECS


def propagate_shapes(graph: Graph) -> int:
    """Annotate ``graph``'s nodes (see the module docstring); returns the number of nodes annotated."""
    count = 0
    for node in graph.nodes:
        out = node.outputs[0]
        static = all(isinstance(d, int) for d in out.shape)
        node.meta["static_shape"] = tuple(int(d) for d in out.shape) if static else None
        numel = 1
        for d in out.shape:
            numel = numel * d
        node.meta["numel"] = numel
        try:
            rule = SPECS[node.target].rule(*(None if v is None else v.aval for v in node.inputs), **node.params)
            if rule != out.aval:
                node.meta["shape_mismatch"] = rule
        except Exception as error:  # advisory: typecheck reports it
            node.meta["shape_mismatch"] = error
        count += 1
    return count


__all__ = ["propagate_shapes"]
