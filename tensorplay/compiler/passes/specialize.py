"""Symbolic sizes the capture pinned to one value become constants in the graph.

A dynamic capture makes every dim of the arguments symbolic, but the function's Python often decides
some of them exactly: ``x.shape[1] == 784`` (a ``Linear``'s check), ``int(x.shape[2])``. The size guard
keeps the specialization to calls where that decision holds, so in the compiled code such a symbol *is*
that number. :func:`pinned_sizes` finds those symbols from the decisions; :func:`specialize_symbols`
substitutes them everywhere in a graph (placeholder and node shapes, params, size literals), so the
backend sees the same static sizes as for a static capture (identity reshapes vanish, constant folding,
fusion and kernel choice are the static ones). The symbols that stay are the sizes that really vary.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from tensorplay.interpreters.graph.ir import Graph, Literal, Var, has_symbolic, substitute
from tensorplay.spec.aval import Aval
from tensorplay.symbolic import SymDim


class Decision(Protocol):
    """What :func:`pinned_sizes` reads of a size decision (:class:`tensorplay.compiler.capture.SizeGuard`):
    ``expr op other`` gave ``outcome``; ``op == "value"``: ``int(expr)`` gave ``outcome``."""

    @property
    def expr(self) -> SymDim: ...

    @property
    def op(self) -> str: ...

    @property
    def other(self) -> Any: ...

    @property
    def outcome(self) -> Any: ...


def _solve(diff: Any) -> tuple[str, int] | None:
    """``(name, value)`` when ``diff == 0`` fixes one symbol to one integer (``a*name + c == 0``)."""
    if not isinstance(diff, SymDim):
        return None
    linear = diff.linear_in()
    if linear is None:
        return None
    name, a, c = linear
    if -c % a:
        return None
    return name, -c // a


def pinned_sizes(decisions: Iterable[Decision]) -> dict[str, int]:
    """Symbol name -> the only size the ``decisions`` allow it (an equality that held, an inequality
    that did not, a size read with ``int()``), solved repeatedly so a symbol pinned in terms of another
    pinned one is found too."""
    equations: list[Any] = []
    for d in decisions:
        if d.op == "value":
            equations.append(d.expr - int(d.outcome))
        elif (d.op == "==" and d.outcome is True) or (d.op == "!=" and d.outcome is False):
            other = d.other
            if isinstance(other, SymDim) or isinstance(other, int):
                equations.append(d.expr - other)
    pinned: dict[str, int] = {}
    changed = True
    while changed:
        changed = False
        for eq in equations:
            solved = _solve(eq.subs(pinned) if isinstance(eq, SymDim) else eq)
            if solved is not None and solved[0] not in pinned:
                pinned[solved[0]] = solved[1]
                changed = True
    return pinned


def _retype(var: Var, values: Mapping[str, int]) -> None:
    if not has_symbolic(var.shape):
        return
    aval = Aval(tuple(substitute(tuple(var.shape), values)), var.aval.dtype)
    var.aval = aval
    var.shape = aval.shape
    if var._meta is not None:
        var._meta["val"] = aval


def specialize_symbols(graph: Graph, values: Mapping[str, int]) -> int:
    """Substitute ``values`` (symbol name -> size) for those symbols throughout ``graph``, in place:
    every placeholder's and node's aval, the params and the symbolic-size literals of every node.
    Returns the number of nodes whose params or literals changed."""
    if not values:
        return 0
    for p in graph.inputs:
        _retype(p, values)
    changed = 0
    for node in graph.nodes:
        for out in node.outputs:
            _retype(out, values)
        if node._meta is not None and "val" in node._meta:
            node._meta["val"] = node.outputs[0].aval if len(node.outputs) == 1 else \
                tuple(o.aval for o in node.outputs)
        if not node.has_sym:
            continue
        node.params = substitute(node.params, values)
        node.inputs = tuple(Literal(v.value.subs(values)) if type(v) is Literal and isinstance(v.value, SymDim)
                            else v for v in node.inputs)
        node.has_sym = has_symbolic(node.params) or any(
            type(v) is Literal and isinstance(v.value, SymDim) for v in node.inputs)
        changed += 1
    return changed


__all__ = ["Decision", "pinned_sizes", "specialize_symbols"]
