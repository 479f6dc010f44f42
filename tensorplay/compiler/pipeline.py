"""From a captured graph to callables: split a training region, run the passes, call the backend.

:func:`build` takes a :class:`~tensorplay.compiler.capture.Captured` and returns a :class:`Program`.
For a training region the recorded graph holds the forward followed by the reverse sweep; it is
split into a forward graph (whose outputs also carry the values the backward reads, the
*residuals*) and a backward graph (inputs: the residuals, then one cotangent per differentiable
output; outputs: the leaves' gradients). Each graph goes through the pass pipeline
(:func:`tensorplay.compiler.passes.optimize`) and then the backend. First, the symbolic sizes the
capture's decisions pinned to one value (its size guards) become constants
(:mod:`tensorplay.compiler.passes.specialize`): the backend sees only the sizes that vary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tensorplay.compiler.backends import BackendError
from tensorplay.compiler.capture import Captured, InputPlan
from tensorplay.compiler.passes import optimize
from tensorplay.compiler.passes.specialize import pinned_sizes, specialize_symbols
from tensorplay.interpreters.graph.ir import Graph, Node, Var
from tensorplay.interpreters.graph.trace import GraphModule
from tensorplay.symbolic import SymDim


@dataclass
class Program:
    """A compiled specialization's code.

    ``forward(*arrays)`` takes one array per entry of ``inputs`` and returns the values of
    ``graph.outputs`` (user outputs, effect values, guard values, then ``n_residuals`` residuals)
    followed by the new values of ``graph.mutations`` (``mutation_targets`` index ``inputs``).
    ``backward(*residuals, *cotangents)`` returns the gradients; ``grad_slots[k]`` is the position of
    the gradient of leaf ``k`` (``None`` when none reaches it)."""

    graph: Graph
    forward: Callable[..., Sequence[Any]]
    inputs: list[InputPlan]
    mutation_targets: list[int]
    n_residuals: int = 0
    backward_graph: Graph | None = None
    backward: Callable[..., Sequence[Any]] | None = None
    grad_slots: list[int | None] = field(default_factory=list)
    output_avals: list[Var] = field(default_factory=list)


def _copy_into(graph: Graph, nodes: Sequence[Node], mapping: dict[Var, Var]) -> None:
    """Append copies of ``nodes`` to ``graph``, reading inputs through ``mapping`` (extended with the
    copies' outputs)."""
    for node in nodes:
        inputs = [mapping[v] if type(v) is Var else v for v in node.inputs]
        new = graph.append(node.target, inputs, node.params, node.aval, node.location, node.has_sym)
        mapping[node.outputs[0]] = new.outputs[0]


def _read(mapping: dict[Var, Var], value: Any) -> Any:
    return mapping[value] if type(value) is Var else value


def split(captured: Captured) -> tuple[Graph, Graph, list[Var], list[int | None]]:
    """Split a training region's graph (see the module docstring): ``(forward graph, backward graph,
    residuals (values of the recorded graph), grad slots)``; placeholders keep their ``meta["plan"]``."""
    joint = captured.graph
    nodes = joint.nodes
    forward_nodes = nodes[:captured.n_forward_nodes]
    backward_nodes = nodes[captured.n_forward_nodes:]
    cotangent_ids = {v.id for v in captured.cotangents}
    produced_backward = {n.outputs[0].id for n in backward_nodes}
    residuals: list[Var] = []
    seen: set[int] = set()

    def need(v: Any) -> None:
        if type(v) is Var and v.id not in produced_backward and v.id not in cotangent_ids and v.id not in seen:
            seen.add(v.id)
            residuals.append(v)

    for node in backward_nodes:
        for v in node.inputs:
            need(v)
    for g in captured.leaf_grads:
        if g is not None:
            need(g)
    forward = Graph()
    mapping: dict[Var, Var] = {}
    for p in joint.inputs:
        if p.id in cotangent_ids:
            continue
        new = forward.add_input(str(p.name), p.aval, str(p.kind), p.source)
        new.value = p.value
        if p._meta is not None:
            new.meta.update(p._meta)
        mapping[p] = new
    _copy_into(forward, forward_nodes, mapping)
    forward.outputs = [_read(mapping, v) for v in joint.outputs] + [mapping[r] for r in residuals]
    forward.mutations = [(mapping[p], _read(mapping, v)) for p, v in joint.mutations]
    forward.guards = [g._replace(value=mapping[g.value]) for g in joint.guards]
    backward = Graph()
    bmap: dict[Var, Var] = {}
    for k, r in enumerate(residuals):
        bmap[r] = backward.add_input(f"saved_{k}", r.aval, "user_input")
    for k, ct in enumerate(captured.cotangents):
        bmap[ct] = backward.add_input(f"grad_output_{k}", ct.aval, "user_input")
    _copy_into(backward, backward_nodes, bmap)
    slots: list[int | None] = []
    outs: list[Any] = []
    for g in captured.leaf_grads:
        if g is None:
            slots.append(None)
        else:
            slots.append(len(outs))
            outs.append(bmap[g])
    backward.outputs = outs
    return forward, backward, residuals, slots


def _call_backend(backend: Callable[..., Any], graph: Graph, examples: list[Any], name: str,
                  kwargs: dict[str, Any]) -> Callable[..., Sequence[Any]]:
    module = GraphModule(graph, name=name)
    try:
        fn = backend(module, examples, name=name, **kwargs)
    except BackendError:
        raise
    if not callable(fn):
        raise BackendError(f"backend {getattr(backend, '__name__', backend)!r} returned a "
                           f"{type(fn).__name__}, not a callable (a backend returns the compiled function)")
    return fn  # type: ignore[no-any-return]


def _examples(graph: Graph) -> list[Any]:
    import numpy as np
    out = []
    for p in graph.inputs:
        value = p.value
        if value is None:
            value = np.zeros(tuple(int(d) if not isinstance(d, SymDim) else 1 for d in p.shape), p.dtype)
        out.append(np.asarray(value))
    return out


def _with_constants(fn: Callable[..., Sequence[Any]], graph: Graph, n_given: int) -> Callable[..., Sequence[Any]]:
    """``fn`` called with the first ``n_given`` placeholders' values, the constants the passes added filled in."""
    extra = [p.meta["plan"].ref for p in graph.inputs[n_given:]]
    if not extra:
        return fn

    def run(*given: Any) -> Sequence[Any]:
        return fn(*given, *extra)
    return run


def build(captured: Captured, backend: Callable[..., Any], name: str, backend_kwargs: dict[str, Any],
          check: bool = False) -> Program:
    """Optimise and compile ``captured`` (see the module docstring); ``check`` typechecks after every pass."""
    backward_graph: Graph | None = None
    residuals: list[Var] = []
    slots: list[int | None] = []
    specialize_symbols(captured.graph, pinned_sizes(captured.size_guards))
    if captured.training:
        forward_graph, backward_graph, residuals, slots = split(captured)
    else:
        forward_graph = captured.graph
    optimize(forward_graph, check=check)
    plans: list[InputPlan] = [p.meta["plan"] for p in forward_graph.inputs]
    forward = _call_backend(backend, forward_graph, _examples(forward_graph), name, backend_kwargs)
    position = {id(p): i for i, p in enumerate(forward_graph.inputs)}
    targets = [position[id(p)] for p, _ in forward_graph.mutations]
    program = Program(forward_graph, forward, plans, targets, n_residuals=len(residuals))
    if backward_graph is not None:
        for p, r in zip(backward_graph.inputs, residuals):
            p.value = r.value
        for p, ct in zip(backward_graph.inputs[len(residuals):], captured.cotangents):
            p.value = ct.value
        n_given = len(backward_graph.inputs)
        optimize(backward_graph, check=check)
        program.backward_graph = backward_graph
        compiled = _call_backend(backend, backward_graph, _examples(backward_graph), f"{name}_backward",
                                 backend_kwargs)
        program.backward = _with_constants(compiled, backward_graph, n_given)
        program.grad_slots = slots
        program.output_avals = list(captured.cotangents)
    return program


__all__ = ["Program", "build", "split"]

