"""Graphviz (dot) view of a graph: inputs as boxes coloured by kind, one ellipse per node,
edges labelled with the value's aval. Render with ``dot -Tsvg``."""

from __future__ import annotations

from .ir import Graph, Literal, Var
from .printer import short_aval

_COLOURS = {"user_input": "lightblue", "parameter": "palegreen", "buffer": "khaki",
            "captured": "lightpink", "constant": "lightgrey"}


def _escape(text: object) -> str:
    """User text (names, dims, params, file names) inside a quoted dot string: backslashes, quotes and
    line breaks escaped, so it can neither end the string nor add statements."""
    out = str(text).replace("\\", "\\\\").replace('"', '\\"')
    return out.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n")


def _quote(*lines: object) -> str:
    """A dot string literal of ``lines`` (each escaped), joined by dot's line breaks."""
    return '"' + "\\n".join(_escape(line) for line in lines) + '"'


def to_dot(graph: Graph, name: str = "graph") -> str:
    """The Graphviz source of ``graph``."""
    lines = [f"digraph {_quote(name)} {{", "  rankdir=TB;", '  node [fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=9];']
    for p in graph.inputs:
        lines.append(f'  v{p.id} [shape=box, style=filled, fillcolor={_COLOURS.get(str(p.kind), "white")}, '
                     f'label={_quote(p.name, short_aval(p.aval), f"({p.kind})")}];')
    for node in graph.nodes:
        out = node.outputs[0]
        label = _quote(node.target, *(f"{k}={v}" for k, v in node.params.items()))
        tip = str(node.location) if node.location else node.target
        lines.append(f"  v{out.id} [shape=ellipse, label={label}, tooltip={_quote(tip)}];")
        for k, v in enumerate(node.inputs):
            if type(v) is Var:
                lines.append(f"  v{v.id} -> v{out.id} [label={_quote(short_aval(v.aval))}];")
            elif type(v) is Literal:
                lit = f"lit{out.id}_{k}"
                lines.append(f"  {lit} [shape=plaintext, label={_quote(str(v.value))}];")
                lines.append(f"  {lit} -> v{out.id};")
    lines.append('  output [shape=doubleoctagon, label="output"];')
    for k, v in enumerate(graph.outputs):
        if type(v) is Var:
            lines.append(f"  v{v.id} -> output [label={_quote(f'{k}: {short_aval(v.aval)}')}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
