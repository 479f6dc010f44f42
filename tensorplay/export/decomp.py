"""Decompositions: rewriting fused primitives into simpler ones, with a table the caller controls.

A decomposition is a builder ``builder(graph, node) -> value``: it emits replacement nodes with
``graph.emit(target, *inputs, **params)`` (they are inserted before ``node``) and returns the value the
node's users consume instead; its aval must be the node's. :class:`CustomDecompTable` maps graph targets to
builders: a key is a primitive name (``"gelu"``), a layer-operation or method name naming a primitive
(``"layer_norm"`` is ``layer_norm_last_axis``), or a callable whose ``__name__`` is one of those
(``tp.Tensor.sigmoid``). It starts with :func:`default_decompositions`; ``remove(target)`` keeps a target
from being rewritten. :func:`run_decompositions` returns a rewritten copy of a program: nodes whose target
has no entry are untouched, emitted nodes are rewritten in turn when their target has an entry, and the
result is type-checked.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from tensorplay.export.program import ExportedProgram, name_values, value_name
from tensorplay.interpreters.graph.ir import Graph, Literal, Node, Value, Var, unique_name
from tensorplay.interpreters.graph.typecheck import typecheck
from tensorplay.spec.errors import GraphCaptureError
from tensorplay.spec.table import PRIMITIVES

Builder = Callable[[Graph, Node], Value]

ALIASES = {"layer_norm": "layer_norm_last_axis", "attention": "dot_product_attention", "conv": "conv_nd",
           "conv_transpose": "conv_transpose_nd", "max_pool": "max_pool_nd", "avg_pool": "avg_pool_nd",
           "smooth_max_pool": "smooth_max_pool_nd"}
"""Layer-operation names (``ops.layer_norm``) -> the primitive a graph records for them."""

_MAX_ROUNDS = 16


def target_name(target: Any) -> str:
    """The primitive a table key stands for (see the module docstring); ``KeyError`` naming close matches."""
    name = target if isinstance(target, str) else getattr(target, "__name__", None)
    if not isinstance(name, str):
        raise TypeError(f"a decomposition target is a primitive name, a method name or a callable, got {target!r}")
    name = ALIASES.get(name, name)
    if name not in PRIMITIVES:
        import difflib
        close = difflib.get_close_matches(name, [*PRIMITIVES, *ALIASES], n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"no primitive {name!r} to decompose{hint}")
    return name


class CustomDecompTable(dict[str, Builder]):
    """A validated ``dict`` target -> builder, starting with the library's default decompositions.

    Keys are stored as primitive names (a layer-operation name or a callable is looked up as the module
    docstring says) and every write checks its key and builder, whichever ``dict`` method makes it
    (``__setitem__``, ``update``, ``setdefault``, ``|=``, ``fromkeys``, the constructor): an unknown target is a
    ``KeyError`` naming close matches, a builder that is not callable a ``TypeError``, and a write that fails
    leaves the table as it was. Reads (``[]``, ``in``, ``get``, ``pop``) take any key form too."""

    def __init__(self, entries: Mapping[Any, Builder] | None = None) -> None:
        super().__init__()
        self.update(default_decompositions() if entries is None else entries)

    @staticmethod
    def _checked(target: Any, builder: Any) -> tuple[str, Builder]:
        name = target_name(target)
        if not callable(builder):
            raise TypeError(f"CustomDecompTable: the entry for {target!r} must be a builder(graph, node) -> value, "
                            f"got a {type(builder).__name__}")
        return name, builder

    def __setitem__(self, target: Any, builder: Builder) -> None:
        super().__setitem__(*self._checked(target, builder))

    def __getitem__(self, target: Any) -> Builder:
        return super().__getitem__(target_name(target))

    def __delitem__(self, target: Any) -> None:
        super().__delitem__(target_name(target))

    def __contains__(self, target: object) -> bool:
        try:
            return super().__contains__(target_name(target))
        except (KeyError, TypeError):
            return False

    def get(self, target: Any, default: Any = None) -> Any:
        """The builder for ``target``, or ``default`` when it has none (or names no primitive)."""
        return self[target] if target in self else default

    def pop(self, target: Any, *default: Any) -> Any:
        """Remove ``target``'s entry and return it; ``default`` (when given) if it has none."""
        if target in self:
            return super().pop(target_name(target))
        if default:
            return default[0]
        return self.remove(target)  # the KeyError naming the target

    def setdefault(self, target: Any, builder: Any = None) -> Builder:
        """``target``'s builder; when it has none, ``builder`` (checked) is stored and returned."""
        if target in self:
            return self[target]
        self[target] = builder
        return builder  # type: ignore[no-any-return]

    def update(self, other: Any = (), /, **kwargs: Builder) -> None:
        """Add the entries of a mapping or of ``(target, builder)`` pairs, and ``kwargs``; all are checked
        before any is written."""
        pairs = list(other.items()) if isinstance(other, Mapping) else list(other)
        checked = [self._checked(*pair) for pair in [*pairs, *kwargs.items()]]
        for name, builder in checked:
            super().__setitem__(name, builder)

    def __ior__(self, other: Any) -> CustomDecompTable:  # type: ignore[override]
        self.update(other)
        return self

    def __or__(self, other: Any) -> CustomDecompTable:  # type: ignore[override]
        if not isinstance(other, Mapping):
            return NotImplemented
        table = self.copy()
        table.update(other)
        return table

    def __ror__(self, other: Any) -> CustomDecompTable:  # type: ignore[override]
        if not isinstance(other, Mapping):
            return NotImplemented
        table = CustomDecompTable(other)
        table.update(self)
        return table

    @classmethod
    def fromkeys(cls, targets: Any, builder: Any = None) -> CustomDecompTable:  # type: ignore[override]
        """A table (without the defaults) mapping each of ``targets`` to ``builder`` (checked)."""
        table = cls({})
        table.update((target, builder) for target in targets)
        return table

    def remove(self, target: Any) -> Builder:
        """Keep ``target`` from being rewritten; returns its entry (``KeyError`` when it has none)."""
        name = target_name(target)
        if not super().__contains__(name):
            raise KeyError(f"CustomDecompTable has no entry for {name!r}")
        return super().pop(name)

    def materialize(self) -> dict[str, Builder]:
        """A plain dict of the effective entries (primitive name -> builder)."""
        return dict(self.items())

    def copy(self) -> CustomDecompTable:
        """A table with the same entries."""
        return CustomDecompTable(self.materialize())

    def __reduce__(self) -> Any:  # copy.copy, copy.deepcopy: the entries, not the defaults again
        return (type(self), (self.materialize(),))

    def __repr__(self) -> str:
        return f"CustomDecompTable({', '.join(self)})"


# ---- the default decompositions ----------------------------------------------------------------------------

def _emit(graph: Graph, node: Node) -> Callable[..., Var]:
    def emit(target: str, *inputs: Any, **params: Any) -> Var:
        return graph.emit(target, *inputs, location=node.location, **params)
    return emit


def _sigmoid(graph: Graph, node: Node) -> Value:
    e = _emit(graph, node)
    x = node.inputs[0]
    return e("div", 1.0, e("add", 1.0, e("exp", e("neg", x))))


def _rsqrt(graph: Graph, node: Node) -> Value:
    e = _emit(graph, node)
    return e("div", 1.0, e("sqrt", node.inputs[0]))


def _gelu(graph: Graph, node: Node) -> Value:
    e = _emit(graph, node)
    x = node.inputs[0]
    if node.params["approximate"] == "tanh":
        inner = e("mul", math.sqrt(2.0 / math.pi), e("add", x, e("mul", 0.044715, e("mul", x, e("mul", x, x)))))
        return e("mul", e("mul", 0.5, x), e("add", 1.0, e("tanh", inner)))
    return e("mul", e("mul", 0.5, x), e("add", 1.0, e("erf", e("mul", x, math.sqrt(0.5)))))


def _shifted(graph: Graph, node: Node) -> tuple[Callable[..., Var], Var, Var]:
    """``(emit, x - max, sum(exp(x - max)))`` along the node's axis (keepdims)."""
    e = _emit(graph, node)
    x = node.inputs[0]
    axes = (node.params["axis"],)
    z = e("sub", x, e("reduce_max", x, axes=axes, keepdims=True))
    return e, z, e("reduce_sum", e("exp", z), axes=axes, keepdims=True)


def _softmax(graph: Graph, node: Node) -> Value:
    e, z, total = _shifted(graph, node)
    return e("div", e("exp", z), total)


def _log_softmax(graph: Graph, node: Node) -> Value:
    e, z, total = _shifted(graph, node)
    return e("sub", z, e("log", total))


def _normalise(e: Callable[..., Var], x: Any, mean: Any, var: Any, eps: float, scale: Any, shift: Any) -> Var:
    return e("add", e("mul", e("div", e("sub", x, mean), e("sqrt", e("add", var, eps))), scale), shift)


def _layer_norm(graph: Graph, node: Node) -> Value:
    e = _emit(graph, node)
    x, gamma, beta = node.inputs
    assert isinstance(x, Var)
    size = x.shape[-1]
    mean = e("div", e("reduce_sum", x, axes=(-1,), keepdims=True), size)
    centred = e("sub", x, mean)
    var = e("div", e("reduce_sum", e("mul", centred, centred), axes=(-1,), keepdims=True), size)
    return _normalise(e, x, mean, var, node.params["eps"], gamma, beta)


def _batch_norm(graph: Graph, node: Node) -> Value:
    e = _emit(graph, node)
    x, mean, var, weight, bias = node.inputs
    assert isinstance(x, Var)
    column = (x.shape[1],) + (1,) * (x.ndim - 2)

    def channel(v: Any) -> Var:
        return e("reshape", v, shape=column)
    return _normalise(e, x, channel(mean), channel(var), node.params["eps"], channel(weight), channel(bias))


def _attention(graph: Graph, node: Node) -> Value:
    e = _emit(graph, node)
    q, k, v, mask = node.inputs
    assert isinstance(k, Var)
    perm = tuple(range(k.ndim - 2)) + (k.ndim - 1, k.ndim - 2)
    scores = e("mul", e("matmul", q, e("permute", k, perm=perm)), node.params["scale"])
    if mask is None:
        weights = _softmax_along_last(e, scores)
    else:
        neg = e("where", mask, scores, -math.inf)
        top = e("reduce_max", neg, axes=(-1,), keepdims=True)
        allowed_row = e("reduce_max", e("cast", e("broadcast_to", mask, shape=scores.shape), dtype="int32"),
                        axes=(-1,), keepdims=True)
        safe_top = e("where", e("gt", allowed_row, 0), top, 0.0)
        ex = e("where", mask, e("exp", e("sub", neg, safe_top)), 0.0)
        total = e("reduce_sum", ex, axes=(-1,), keepdims=True)
        weights = e("where", e("gt", allowed_row, 0), e("div", ex, e("maximum", total, _tiny(scores))), 0.0)
    return e("matmul", weights, v)


def _tiny(value: Var) -> float:
    return 1e-300 if value.aval.dtype == "float64" else 1e-38


def _softmax_along_last(e: Callable[..., Var], scores: Var) -> Var:
    z = e("sub", scores, e("reduce_max", scores, axes=(-1,), keepdims=True))
    ex = e("exp", z)
    return e("div", ex, e("reduce_sum", ex, axes=(-1,), keepdims=True))


def default_decompositions() -> dict[str, Builder]:
    """The library's default decompositions: fused primitives into elementwise ones, reductions and matmul
    (``sigmoid``, ``rsqrt``, ``gelu``, ``softmax``, ``log_softmax``, ``layer_norm_last_axis``, ``batch_norm``,
    ``dot_product_attention``). Results agree with the fused primitives up to rounding."""
    return {"sigmoid": _sigmoid, "rsqrt": _rsqrt, "gelu": _gelu, "softmax": _softmax, "log_softmax": _log_softmax,
            "layer_norm_last_axis": _layer_norm, "batch_norm": _batch_norm, "dot_product_attention": _attention}


# ---- running them ----------------------------------------------------------------------------------------

def copy_graph(graph: Graph) -> Graph:
    """A copy of ``graph`` with new values (same names, kinds, sources, avals, params and locations)."""
    new = Graph()
    mapping: dict[int, Any] = {}
    for p in graph.inputs:
        q = new.add_input(str(p.name), p.aval, str(p.kind), p.source)
        if p._meta is not None:
            q.meta.update({k: v for k, v in p._meta.items() if k != "val"})
        mapping[id(p)] = q

    def get(v: Any) -> Any:
        return v if v is None or isinstance(v, Literal) else mapping[id(v)]

    for node in graph.nodes:
        copied = new.append(node.target, [get(v) for v in node.inputs], dict(node.params), node.aval, node.location,
                            node.has_sym)
        if node.out._meta is not None and "name" in node.out._meta:
            copied.out.meta["name"] = node.out._meta["name"]
        mapping[id(node.out)] = copied.out
    new.outputs = [get(v) for v in graph.outputs]
    new.mutations = [(get(p), get(v)) for p, v in graph.mutations]
    new.out_tree = graph.out_tree
    return new


def decompose(graph: Graph, table: Mapping[str, Builder], on_replace: Callable[[Node, Value, list[Node]], None]
              | None = None) -> int:
    """Rewrite ``graph`` in place with ``table`` (primitive name -> builder) until no node has an entry;
    ``on_replace(node, value, emitted)`` is told of each rewrite. Returns the number of rewrites."""
    count = 0
    for _ in range(_MAX_ROUNDS):
        todo = [n for n in graph.nodes if n.target in table]
        if not todo:
            return count
        for node in todo:
            emitted: list[Node] = []
            append = graph.append

            def recording_append(*args: Any, **kwargs: Any) -> Node:
                made = append(*args, **kwargs)
                emitted.append(made)
                return made

            graph.append = recording_append  # type: ignore[method-assign]
            try:
                with graph.inserting_before(node):
                    new = table[node.target](graph, node)
            finally:
                del graph.append
            if not isinstance(new, (Var, Literal)):
                raise TypeError(f"the decomposition of {node.target} returned {new!r}, expected a graph value")
            if new.aval.shape != node.aval.shape or (isinstance(new, Var) and new.aval.dtype != node.aval.dtype):
                raise GraphCaptureError(f"the decomposition of {node.target} gives {new.aval!r}, the node has "
                                        f"{node.aval!r} (at {node.location})")
            graph.replace_all_uses(node.out, new)
            graph.erase(node)
            if on_replace is not None:
                on_replace(node, new, emitted)
            count += 1
    raise GraphCaptureError(f"decompositions still apply after {_MAX_ROUNDS} rounds: a builder emits a target that "
                            f"decomposes back into itself ({', '.join(sorted({n.target for n in graph.nodes if n.target in table}))})")


def run_decompositions(ep: ExportedProgram, decomp_table: Mapping[Any, Builder] | None = None) -> ExportedProgram:
    """A copy of ``ep`` rewritten with ``decomp_table`` (default: :func:`default_decompositions`); see the module
    docstring. ``ep`` is left unchanged."""
    table = (CustomDecompTable() if decomp_table is None else
             decomp_table if isinstance(decomp_table, CustomDecompTable) else CustomDecompTable(decomp_table))
    entries = table.materialize()
    graph = copy_graph(ep.graph)
    used = set(name_values(graph))
    renamed: dict[str, list[str]] = {}
    replaced: dict[str, str] = {}

    def on_replace(node: Node, new: Value, emitted: list[Node]) -> None:
        for made in emitted:
            made.out.meta["name"] = unique_name(made.target, used)
        renamed[value_name(node.out)] = [value_name(n.out) for n in emitted]
        if isinstance(new, Var):
            replaced[value_name(node.out)] = value_name(new)

    decompose(graph, entries, on_replace)
    graph.eliminate_dead_code()
    typecheck(graph)
    name_values(graph)
    signature = ep.graph_signature.clone()
    flat = [v for _, v in graph.mutations] + list(graph.outputs)
    for spec, value in zip(signature.output_specs, flat):  # an output replaced by a decomposition is renamed
        if isinstance(value, Var) and spec.arg.name != value_name(value):
            signature.replace_all_uses(spec.arg.name, value_name(value))
    program = ep.copy_with(graph, signature)
    program.module_call_graph = [_renamed(entry, renamed, replaced) for entry in ep.module_call_graph]
    return program


def _renamed(entry: Any, renamed: Mapping[str, list[str]], replaced: Mapping[str, str]) -> Any:
    """A module call entry after rewrites: a rewritten node's name becomes its emitted nodes' names (in
    ``defines``) or its replacement's (in ``inputs`` and ``outputs``)."""
    from dataclasses import replace

    def expand(name: str) -> list[str]:
        if name not in renamed:
            return [name]
        return [m for n in renamed[name] for m in expand(n)]

    def follow(name: str) -> str:
        while name in replaced:
            name = replaced[name]
        return name
    return replace(entry, defines=[m for n in entry.defines for m in expand(n)],
                   inputs=[follow(n) for n in entry.inputs], outputs=[follow(n) for n in entry.outputs])


__all__ = ["ALIASES", "Builder", "CustomDecompTable", "copy_graph", "decompose", "default_decompositions",
           "run_decompositions", "target_name"]
