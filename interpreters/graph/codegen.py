"""Python source for a graph: ``forward(ops, *placeholders)``, one line per node.

::

    def forward(ops, fc1_weight, fc1_bias, x):
        B = x.shape[0]
        permute = ops.permute(fc1_weight, perm=(1, 0))  # float32[784, 256]  model.py:12
        matmul = ops.matmul(x, permute)                  # float32[B, 256]
        ...
        return (relu,)

Symbolic dims are read from the inputs' shapes at the top, so params that
mention them (``reshape(shape=(B, 784))``) are computed per call; the same
function runs eagerly or re-records into another graph. With
``check_guards=True`` each execute-mode guard is re-checked right after its
value is computed. A graph with state mutations returns ``(outputs, new_values)``.

No text of the user's (input, parameter and buffer names, pytree keys, dim names, file names,
string params) reaches the source unescaped: Python names are generated ASCII identifiers,
strings appear only as ``repr`` literals of plain ``str``, and comments are ``ascii()``-escaped
onto one line. A primitive or param name that is not an ASCII identifier is refused.
"""

from __future__ import annotations

import itertools
import keyword
import linecache
import math
import re
from collections.abc import Callable
from typing import Any

from .ir import Graph, Literal, Var, unique_name
from tensorplay.spec.errors import GraphCaptureError
from tensorplay.symbolic import SymDim

_counter = itertools.count()
_RESERVED = frozenset({"ops", "_consts", "_guard", "_binding", "float", "None", "True", "False"})


_NOT_ASCII_WORD = re.compile(r"[^0-9A-Za-z_]")
_ASCII_IDENTIFIER = re.compile(r"[A-Za-z_][0-9A-Za-z_]*\Z")


def _identifier(text: str) -> str:
    """An ASCII identifier made from ``text`` (ASCII only: Python NFKC-normalises other identifiers,
    so two different names such as ``"\ufb01"`` and ``"fi"`` would become one variable)."""
    name = _NOT_ASCII_WORD.sub("_", str.__str__(text))
    if not name or name[0].isdigit():
        name = "_" + name
    if keyword.iskeyword(name):
        name += "_"
    return name


def _comment(text: str) -> str:
    """``text`` safe inside a ``#`` comment: one line of printable ASCII (escapes as ``ascii()`` writes them)."""
    return ascii(str.__str__(text))[1:-1]


def _checked_name(text: Any, what: str) -> str:
    """``text`` when it is a plain ASCII identifier (a primitive or param name); else refused."""
    if type(text) is not str or not _ASCII_IDENTIFIER.match(text) or keyword.iskeyword(text):
        raise GraphCaptureError(f"code generation: {what} must be an ASCII Python identifier, got {text!r}")
    return text


class _Names:
    def __init__(self) -> None:
        self.used: set[str] = set(_RESERVED)

    def fresh(self, base: str) -> str:
        return unique_name(_identifier(base), self.used)


class _Source:
    def __init__(self, symbols: dict[str, str]) -> None:
        self.symbols = symbols
        self.consts: list[Any] = []

    def render(self, value: Any) -> str:
        # the base classes' __repr__, never a subclass's: user text only as a literal of a plain value
        if value is None or isinstance(value, bool):
            return "None" if value is None else ("True" if value else "False")
        if isinstance(value, str):
            return str.__repr__(value)
        if isinstance(value, int):
            return int.__repr__(int(value))
        if isinstance(value, float):
            if math.isnan(value):
                return "float('nan')"
            if math.isinf(value):
                return "float('inf')" if value > 0 else "-float('inf')"
            return float.__repr__(float(value))
        if isinstance(value, SymDim):
            unknown = value.free_symbols - self.symbols.keys()
            if unknown:
                raise GraphCaptureError(f"code generation: symbolic dim(s) {sorted(unknown)} in {value} are not "
                                        "dims of the graph")
            return value.to_source(self.symbols)
        if isinstance(value, tuple):
            inner = ", ".join(self.render(v) for v in value)
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        if isinstance(value, list):
            return "[" + ", ".join(self.render(v) for v in value) + "]"
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return "{" + ", ".join(f"{str.__repr__(k)}: {self.render(v)}" for k, v in value.items()) + "}"
        self.consts.append(value)
        return f"_consts[{len(self.consts) - 1}]"


def symbol_size_expression(graph: Graph, symbol: str, arg_names: dict[int, str]) -> str | None:
    """A Python expression computing symbolic dim ``symbol`` from the inputs' shapes.

    The first input axis whose size is ``a*symbol + c`` is read: ``p0.shape[1]`` when ``a == 1`` and
    ``c == 0``, otherwise ``(p0.shape[1] - c) // a``. ``arg_names`` maps input ids to the names the
    generated code gives them. ``None`` when no input axis determines the dim."""
    for p in graph.user_inputs + [q for q in graph.inputs if q.kind != "user_input"]:
        for axis, d in enumerate(p.shape):
            lin = d.linear_in() if isinstance(d, SymDim) else None
            if lin is None or lin[0] != symbol:
                continue
            _, a, c = lin
            read = f"{arg_names[p.id]}.shape[{axis}]"
            shifted = read if c == 0 else f"({read} - {c})" if c > 0 else f"({read} + {-c})"
            return shifted if a == 1 else f"{shifted} // {a}"
    return None


def _symbol_reads(graph: Graph, arg_names: dict[int, str], names: _Names) -> tuple[dict[str, str], list[str]]:
    """Python names for the symbolic dims and the lines that read them from the inputs' shapes."""
    symbols = sorted(graph.symbols)
    mapping = {s: names.fresh(s) for s in symbols}
    lines = []
    for s in symbols:
        read = symbol_size_expression(graph, s, arg_names)
        lines.append(f"{mapping[s]} = {read if read is not None else f'_binding[{str.__repr__(s)}]'}")
    return mapping, lines


def python_code(graph: Graph, check_guards: bool = False, name: str = "forward") -> str:
    """The source of ``def forward(ops, *placeholders)`` computing ``graph`` (see the module docstring)."""
    return _generate(graph, check_guards, name)[0]


def _generate(graph: Graph, check_guards: bool, fn_name: str) -> tuple[str, list[Any]]:
    _checked_name(fn_name, "the function name")
    names = _Names()
    var_names: dict[int, str] = {}
    for p in graph.inputs:
        var_names[p.id] = names.fresh(str(p.name))
    symbols, reads = _symbol_reads(graph, var_names, names)
    src = _Source(symbols)
    args = ", ".join(["ops"] + [var_names[p.id] for p in graph.inputs])
    needs_binding = any("_binding[" in r for r in reads)
    lines = [f"def {fn_name}({args}{', *, _binding=None' if needs_binding else ''}):"]
    for p in graph.inputs:
        what = p.kind if p.name == var_names[p.id] else f"{p.kind} {p.name}"
        lines.append(f"    # {var_names[p.id]}: {_comment(f'{p.aval!r}  ({what})')}")
    lines.extend(f"    {r}" for r in reads)
    guards_by_var: dict[int, list[int]] = {}
    if check_guards:
        for i, g in enumerate(graph.guards):
            guards_by_var.setdefault(g.value.id, []).append(i)
        for p in graph.inputs:
            for i in guards_by_var.get(p.id, []):
                lines.append(f"    _guard({i}, ops, {var_names[p.id]})")
    for node in graph.nodes:
        out = node.outputs[0]
        target = _checked_name(node.target, "a node's primitive name")
        var_names[out.id] = names.fresh(target)
        rendered = []
        for v in node.inputs:
            if v is None:
                rendered.append("None")
            elif type(v) is Literal:
                rendered.append(src.render(v.value))
            else:
                assert isinstance(v, Var)
                rendered.append(var_names[v.id])
        rendered += [f"{_checked_name(k, f'a param name of {target}')}={src.render(value)}"
                     for k, value in node.params.items()]
        comment = f"{out.aval!r}"
        if node.location is not None:
            comment += f"  {node.location.short()}"
        lines.append(f"    {var_names[out.id]} = ops.{target}({', '.join(rendered)})  # {_comment(comment)}")
        for i in guards_by_var.get(out.id, []):
            lines.append(f"    _guard({i}, ops, {var_names[out.id]})")
    def read(v: Any) -> str:
        return var_names[v.id] if type(v) is Var else src.render(v.value)

    outs = [read(v) for v in graph.outputs]
    result = f"({', '.join(outs)}{',' if len(outs) == 1 else ''})"
    if graph.mutations:
        news = [read(v) for _, v in graph.mutations]
        targets = ", ".join(str(p.name) for p, _ in graph.mutations)
        result += f", ({', '.join(news)}{',' if len(news) == 1 else ''})  # {_comment(f'new values of {targets}')}"
    lines.append(f"    return {result}")
    return "\n".join(lines) + "\n", src.consts


def compile_graph(graph: Graph, check_guards: bool = False,
                  guard_check: Callable[..., None] | None = None) -> tuple[Callable[..., Any], str]:
    """``(forward, source)``: the generated function (``forward(ops, *placeholder_values)``) and its code."""
    source, consts = _generate(graph, check_guards, "forward")
    filename = f"<tensorplay-graph-{next(_counter)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {"_consts": consts, "_guard": guard_check}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - our own generated source
    fn: Callable[..., Any] = namespace["forward"]
    return fn, source
