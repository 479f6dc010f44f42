"""Tracing a model for export: the graph, the decisions on symbolic sizes, and the module calls.

:func:`capture` records ``model`` with ``tensorplay.graph.trace`` (symbolic mode; the example's values are
never read), every argument passed in signature order, the shapes of a :class:`~tensorplay.export.dynamic.ShapeSpec`,
the comparisons of symbolic sizes answered by a :class:`~tensorplay.export.requirements.Decider`, and each call of
a submodule of ``model`` noted as a :class:`ModuleCall` (the module's path, the graph values it received
and returned, the nodes it recorded): what ``unflatten`` rebuilds the hierarchy from.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tensorplay.export.dynamic import Arguments, ShapeSpec
from tensorplay.export.requirements import Decider, Decision, deciding
from tensorplay.interpreters.graph.ir import Graph, Node, Var
from tensorplay.interpreters.graph.trace import is_module, trace
from tensorplay.pytree import Structure, split_static
from tensorplay.tensor import Tensor


@dataclass
class ModuleCall:
    """One call of a submodule while tracing: its dotted ``path``, the index of the enclosing call (``None``
    for a call of the root), the graph values of its tensor arguments and results with the structures
    around them (static leaves kept), and the nodes it recorded (``nodes``: its own and its callees')."""

    path: str
    parent: int | None
    inputs: list[Var]
    in_structure: Structure
    outputs: list[Var] = field(default_factory=list)
    out_structure: Structure | None = None
    nodes: list[Node] = field(default_factory=list)
    module_type: str = ""


@dataclass
class Captured:
    """What :func:`capture` gives: the ``graph``, its output structure, the ``decisions`` made on symbolic
    sizes, the submodule ``calls`` and the module whose parameters and buffers are the graph's state."""

    graph: Graph
    out_tree: Structure | None
    decisions: list[Decision]
    calls: list[ModuleCall]
    module: Any


class _CallRecorder:
    """Observes ``Module.__call__`` while tracing: notes each call of a submodule of the root."""

    def __init__(self, root: Any) -> None:
        self.paths = {id(m): name for name, m in root.named_modules()} if is_module(root) else {}
        self.types = {id(m): type(m).__name__ for _, m in root.named_modules()} if is_module(root) else {}
        self.calls: list[ModuleCall] = []
        self.stack: list[int] = []
        self.recorder: Any = None
        self.thread = threading.get_ident()  # module calls of other threads are not this export's

    def _values(self, tensors: list[Any]) -> list[Var] | None:
        if self.recorder is None or any(t._ops is not self.recorder for t in tensors):
            return None  # a call inside a transform, or on tensors of another interpreter: not a graph call
        return [t._data for t in tensors]

    def __call__(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        path = self.paths.get(id(module))
        if path is None or threading.get_ident() != self.thread:
            return module.forward(*args, **kwargs)
        leaves, structure = split_static((args, kwargs), lambda x: isinstance(x, Tensor))
        values = self._values(leaves)
        if path is None or values is None:
            return module.forward(*args, **kwargs)
        graph: Graph = self.recorder.graph
        start = len(graph._nodes)
        index = len(self.calls)
        call = ModuleCall(path, self.stack[-1] if self.stack else None, values, structure,
                          module_type=self.types.get(id(module), ""))
        self.calls.append(call)
        self.stack.append(index)
        try:
            result = module.forward(*args, **kwargs)
        finally:
            self.stack.pop()
        call.nodes = list(graph._nodes[start:])
        out_leaves, out_structure = split_static(result, lambda x: isinstance(x, Tensor))
        outputs = self._values(out_leaves)
        if outputs is None:
            call.nodes = []  # results of another interpreter: not representable as a graph call
            call.path = ""
        else:
            call.outputs = outputs
            call.out_structure = out_structure
        return result


class _Entry:
    """What ``trace`` records: the model called with every argument in signature order (keyword-only ones by
    keyword), with the model's parameters and buffers as the graph's state."""

    def __init__(self, model: Any, arguments: Arguments, calls: _CallRecorder) -> None:
        self.model = model
        self.arguments = arguments
        self.calls = calls
        params = [inspect.Parameter(n if n.isidentifier() else f"arg{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD)
                  for i, n in enumerate(arguments.names)]

        def forward(*values: Any) -> Any:
            return self(*values)

        forward.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        self.forward = forward
        self.__name__ = getattr(model, "__name__", type(model).__name__)

    def named_parameters(self) -> Iterator[tuple[str, Any]]:
        return iter(self.model.named_parameters()) if is_module(self.model) else iter(())

    def named_buffers(self) -> Iterator[tuple[str, Any]]:
        buffers = getattr(self.model, "named_buffers", None)
        return iter(buffers()) if is_module(self.model) and callable(buffers) else iter(())

    def __call__(self, *values: Any) -> Any:
        if values and isinstance(values[0], Tensor):
            self.calls.recorder = values[0]._ops
        else:
            leaves = split_static(values, lambda x: isinstance(x, Tensor))[0]
            self.calls.recorder = leaves[0]._ops if leaves else None
        return self.arguments.call(self.model, values)


def capture(model: Any, arguments: Arguments, spec: ShapeSpec, strict: bool = False) -> Captured:
    """Trace ``model`` on ``arguments`` with the shapes of ``spec`` (see the module docstring)."""
    from tensorplay.nn import module as nn_module

    calls = _CallRecorder(model)
    entry = _Entry(model, arguments, calls)
    decider = Decider(spec, strict=strict)
    observers = nn_module.call_observers
    observers.append(calls)
    try:
        with deciding(decider):
            gm = trace(entry, *arguments.values, dynamic=spec.for_trace() or None)
    finally:
        observers.remove(calls)
    return Captured(gm.graph, gm.out_tree, decider.decisions, [c for c in calls.calls if c.path or c.nodes], model)


__all__ = ["Captured", "ModuleCall", "capture"]
