"""Constant folding: a node whose inputs are all constants (literals, ``"constant"`` inputs, earlier
folded values) is computed once at compile time with the eager interpreter and replaced by a new
``"constant"`` input holding the result (the intermediate ones a chain leaves unused are dropped). Random
primitives, nodes whose params mention symbolic sizes
and results of more than :data:`MAX_ELEMENTS` elements are left alone (a large constant would cost
memory for nothing). The new inputs carry ``meta["plan"]`` (compile reads their value from there)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorplay.interpreters.eager.interpreter import eager
from tensorplay.interpreters.graph.ir import Graph, Literal, Var
from tensorplay.spec.table import PRIMITIVES

MAX_ELEMENTS = 1 << 16
"""The largest result (in elements) folded into a constant."""


def _numel(shape: tuple[Any, ...]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def fold_constants(graph: Graph) -> int:
    """Fold the constant nodes of ``graph`` (see the module docstring); returns how many."""
    from tensorplay.compiler.capture import InputPlan
    known: dict[int, np.ndarray[Any, Any]] = {}
    for p in graph.inputs:
        if p.kind == "constant" and p.source is not None:
            known[p.id] = np.asarray(p.source)
    folded = 0
    for node in graph.nodes:
        prim = PRIMITIVES[node.target]
        if prim.random or node.has_sym or node.erased:
            continue
        out = node.outputs[0]
        if any(not isinstance(d, int) for d in out.shape) or _numel(tuple(out.shape)) > MAX_ELEMENTS:
            continue
        args: list[Any] = []
        constant = True
        for v in node.inputs:
            if v is None:
                args.append(None)
            elif type(v) is Literal:
                args.append(v.value)
            elif type(v) is Var and v.id in known:
                args.append(eager.wrap(known[v.id]))
            else:
                constant = False
                break
        if not constant:
            continue
        with np.errstate(all="ignore"):
            value = np.asarray(getattr(eager, node.target)(*args, **node.params)._data)
        value = np.array(value, order="C")  # a private copy (np.ascontiguousarray would make 0-d arrays 1-d)
        value.flags.writeable = False
        placeholder = graph.add_input("folded", out.aval, "constant", value)
        placeholder.value = value
        placeholder.meta["plan"] = InputPlan("const", ref=value)
        placeholder.meta["folded"] = True
        known[placeholder.id] = value
        graph.replace_all_uses(out, placeholder)
        folded += 1
    if folded:
        graph.eliminate_dead_code()
        graph.inputs = [p for p in graph.inputs if not (p._meta and p._meta.get("folded")) or graph.is_used(p)]
    return folded


__all__ = ["MAX_ELEMENTS", "fold_constants"]
