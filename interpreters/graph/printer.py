"""A jaxpr-style printer::

    { lambda fc1.weight:f32[256,784] fc1.bias:f32[256] ; x:f32[B,784]. let
        a:f32[784,256] = permute[perm=(1, 0)] fc1.weight
        b:f32[B,256] = matmul x a
        c:f32[B,256] = add b fc1.bias
        d:f32[B,256] = relu c
      in (d) }

Inputs before ``;`` are module state and captured values (parameters, buffers,
captured tensors, constants); after it, the user inputs. Intermediate values get
short letter names; ``show_locations=True`` adds each node's source line.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from .ir import Graph, Literal, Var
from tensorplay.symbolic import SymDim

SHORT_DTYPES = {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64", "bool": "bool",
                "weak_float": "f", "weak_int": "i", "weak_bool": "b"}


def short_aval(aval: Any) -> str:
    """``f32[B,784]``."""
    return f"{SHORT_DTYPES.get(aval.dtype, aval.dtype)}[{','.join(str(d) for d in aval.shape)}]"


def _letters() -> Iterator[str]:
    alphabet = "abcdefghijklmnopqrstuvwxyz"
    for size in itertools.count(1):
        for combo in itertools.product(alphabet, repeat=size):
            yield "".join(combo)


def format_value(v: Any, names: dict[int, str]) -> str:
    """A value as it appears in an equation."""
    if v is None:
        return "None"
    if type(v) is Literal:
        value = v.value
        return f"({value})" if isinstance(value, SymDim) and " " in str(value) else str(value)
    return names.get(v.id, f"%{v.id}")


def _format_param(value: Any) -> str:
    if isinstance(value, tuple):
        return "(" + ", ".join(_format_param(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, str):
        return repr(value)
    return str(value)


def value_names(graph: Graph) -> dict[int, str]:
    """Printer names: placeholders keep their names, node outputs get ``a``, ``b``, ... ."""
    names: dict[int, str] = {p.id: str(p.name) for p in graph.inputs}
    taken = set(names.values())
    letters = (n for n in _letters() if n not in taken)
    for node in graph.nodes:
        for out in node.outputs:
            names[out.id] = next(letters)
    return names


def format_graph(graph: Graph, show_locations: bool = False) -> str:
    """The graph as text (see the module docstring)."""
    names = value_names(graph)
    state = [p for p in graph.inputs if p.kind != "user_input"]
    user = graph.user_inputs
    head_state = " ".join(f"{names[p.id]}:{short_aval(p.aval)}" for p in state)
    head_user = " ".join(f"{names[p.id]}:{short_aval(p.aval)}" for p in user)
    lines = [f"{{ lambda {head_state}{' ' if head_state else ''}; {head_user}. let"]
    for node in graph.nodes:
        outs = " ".join(f"{names[o.id]}:{short_aval(o.aval)}" for o in node.outputs)
        params = " ".join(f"{k}={_format_param(v)}" for k, v in node.params.items())
        args = " ".join(format_value(v, names) for v in node.inputs)
        line = f"    {outs} = {node.target}{f'[{params}]' if params else ''} {args}".rstrip()
        if show_locations and node.location is not None:
            line += f"    # {node.location.short()}"
        lines.append(line)
    outs = " ".join(format_value(v, names) for v in graph.outputs)
    lines.append(f"  in ({outs}) }}")
    kinds: dict[str, list[str]] = {}
    for p in state:
        kinds.setdefault(str(p.kind), []).append(names[p.id])
    if kinds:
        lines.append("  # " + "; ".join(f"{k}: {' '.join(v)}" for k, v in kinds.items()))
    for p, v in graph.mutations:
        lines.append(f"  mutates {names[p.id]} <- {format_value(v, names)}")
    for g in graph.guards:
        where = f"  at {g.location.short()}" if g.location is not None else ""
        shown = g.outcome if not hasattr(g.outcome, "shape") else f"<array {list(g.outcome.shape)}>"
        lines.append(f"  guard {g.kind}({names.get(g.value.id, '?')}) == {shown}{where}")
    return "\n".join(lines)


def format_var(v: Var) -> str:
    """``name:f32[B,784]`` for one value."""
    return f"{v.name or '%' + str(v.id)}:{short_aval(v.aval)}"
