"""``unflatten(ep)``: an exported program with the original module hierarchy back.

Export notes every submodule call (its path, the graph values it received and returned, the nodes it
recorded). :func:`unflatten` builds an :class:`UnflattenedModule` whose submodules sit at the original paths
(``model.attn.out_proj``), each an :class:`InterpreterModule` running the nodes of its call and calling its own
children for theirs, with the parameters and buffers at their original places. Calling the root runs the
whole program (inputs checked, keys drawn, mutations applied, like ``ep.module()``); calling a submodule runs
just its part. Construction runs both the flat program and the hierarchy on the example inputs (the state is
not mutated, the keys are fixed) and checks the results are identical.

:class:`FlatArgsAdapter` adapts call arguments whose structure differs from the exported one.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tensorplay.export.program import ExportedProgram, ModuleCallEntry, concrete, name_values
from tensorplay.export.signature import InputKind
from tensorplay.export.unlifted import place_state, state_of
from tensorplay.interpreters.eager.interpreter import eager
from tensorplay.interpreters.graph.ir import Node, Var
from tensorplay.interpreters.graph.walk import Walker
from tensorplay.nn.module import Module
from tensorplay.pytree import Structure, join_static, split_static, structure_difference
from tensorplay.spec.errors import GraphCaptureError
from tensorplay.symbolic import bind_shape
from tensorplay.tensor import Tensor, highest_interpreter


class FlatArgsAdapter(abc.ABC):
    """Adapts the tensor leaves of a call whose argument structure differs from the exported one."""

    @abc.abstractmethod
    def adapt(self, target_spec: Structure, input_spec: Structure, input_args: list[Any]) -> list[Any]:
        """The tensor leaves for ``target_spec`` (the exported structure), from ``input_args``, the tensor leaves
        of a call structured as ``input_spec``."""


class _Scope:
    """The work of one call: nodes of its own and child calls, in graph order."""

    def __init__(self, index: int, entry: ModuleCallEntry | None) -> None:
        self.index = index
        self.entry = entry
        self.items: list[Node | int] = []
        self.defines: set[str] = set(entry.defines) if entry is not None else set()


class _Plan:
    """How a program's nodes split into the recorded calls."""

    def __init__(self, ep: ExportedProgram) -> None:
        self.ep = ep
        self.values = name_values(ep.graph)
        entries = ep.module_call_graph
        # a call whose arguments or results a file could not hold runs inline, as part of its parent
        self.usable = [e.in_structure is not None and e.out_structure is not None for e in entries]
        owner: dict[str, int] = {}
        for i, entry in enumerate(entries):
            if self.usable[i]:
                for name in entry.defines:
                    owner[name] = i
        self.scopes = [_Scope(i, e) for i, e in enumerate(entries)]
        self.top = _Scope(-1, None)
        parents = [self._parent(entries, i) for i in range(len(entries))]
        for node in ep.graph.nodes:
            name = self._name(node)
            scope = owner.get(name, -1)
            chain = [scope]
            while chain[-1] != -1:
                chain.append(parents[chain[-1]])
            # chain: innermost ... -1; each call on the way adds the node (directly) or its child call (once)
            for depth in range(len(chain) - 1, -1, -1):
                here = chain[depth]
                target = self.top if here == -1 else self.scopes[here]
                item: Node | int = node if depth == 0 else chain[depth - 1]
                if isinstance(item, int):
                    if not target.items or target.items[-1] != item:
                        if item in target.items:
                            raise GraphCaptureError(
                                f"unflatten: the nodes of call {entries[item].path!r} are not contiguous in the graph")
                        target.items.append(item)
                else:
                    target.items.append(item)

    def _parent(self, entries: list[ModuleCallEntry], index: int) -> int:
        parent = entries[index].parent
        while parent is not None and not self.usable[parent]:
            parent = entries[parent].parent
        return -1 if parent is None else parent

    @staticmethod
    def _name(node: Node) -> str:
        return str(node.out.meta.get("name"))


class _Runner:
    """Runs scopes of a plan with one environment (graph value -> runtime value)."""

    def __init__(self, plan: _Plan, root: UnflattenedModule, ops: Any, binding: Mapping[str, Any],
                 env: dict[Any, Any]) -> None:
        self.plan = plan
        self.root = root
        self.walker = Walker(ops, binding)
        self.env = env

    def run(self, scope: _Scope) -> None:
        entries = self.plan.ep.module_call_graph
        for item in scope.items:
            if isinstance(item, Node):
                with self.walker.locations() as at:
                    at(item)
                    self.walker.step(item, self.env)
                continue
            entry = entries[item]
            if not entry.path:  # the root module's own call: its nodes run here
                self.run(self.plan.scopes[item])
                continue
            module = self.root.get_submodule(entry.path)
            values = [self.env[self.plan.values[n]] for n in entry.inputs]
            assert entry.in_structure is not None
            args, kwargs = join_static(entry.in_structure, values)
            assert isinstance(module, InterpreterModule)
            object.__setattr__(module, "_invocation", (item, self))
            result = module(*args, **kwargs)
            outputs = split_static(result, lambda x: isinstance(x, Tensor))[0]
            for name, value in zip(entry.outputs, outputs):
                self.env[self.plan.values[name]] = value


class InterpreterModule(Module):
    """A submodule of an :class:`UnflattenedModule`: runs the nodes of its call (see the module docstring)."""

    path: str
    module_type: str
    _invocation: tuple[int, _Runner] | None
    _root: UnflattenedModule
    _calls: list[int]

    def __init__(self, path: str, module_type: str) -> None:
        super().__init__()
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "module_type", module_type)
        object.__setattr__(self, "_invocation", None)
        object.__setattr__(self, "_root", None)
        object.__setattr__(self, "_calls", [])

    def _get_name(self) -> str:
        return f"InterpreterModule[{self.module_type or 'Module'}]"

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Run this submodule's part of the program: as a step of its parent, or called directly on new
        arguments (the first recorded call's nodes; values it needs from outside its call are refused)."""
        invocation = self._invocation
        object.__setattr__(self, "_invocation", None)
        if invocation is not None:
            index, runner = invocation
            runner.run(runner.plan.scopes[index])
            entry = runner.plan.ep.module_call_graph[index]
            assert entry.out_structure is not None
            return join_static(concrete(entry.out_structure, runner.walker.binding),
                               [runner.env[runner.plan.values[n]] for n in entry.outputs])
        root: UnflattenedModule = self._root
        if not self._calls:
            raise GraphCaptureError(f"unflatten: {self.path!r} cannot run on its own: the exported program did not "
                                    "call it, or the file did not keep the structure of its arguments; it runs as "
                                    "part of its parent")
        return root.run_call(self._calls[0], args, kwargs)


class UnflattenedModule(Module):
    """An exported program with its module hierarchy (see the module docstring)."""

    program: ExportedProgram
    adapter: FlatArgsAdapter | None
    plan: _Plan

    def __init__(self, ep: ExportedProgram, flat_args_adapter: FlatArgsAdapter | None = None) -> None:
        super().__init__()
        object.__setattr__(self, "program", ep)
        object.__setattr__(self, "adapter", flat_args_adapter)
        object.__setattr__(self, "plan", _Plan(ep))
        for index, entry in enumerate(ep.module_call_graph):
            if not entry.path:
                continue
            module = self._make(entry.path, entry.module_type)
            if self.plan.usable[index]:
                module._calls.append(index)
        place_state(self, ep)

    def _make(self, path: str, module_type: str) -> InterpreterModule:
        parent: Module = self
        parts = path.split(".")
        for i, part in enumerate(parts):
            child = parent._modules.get(part)
            if child is None:
                child = InterpreterModule(".".join(parts[:i + 1]), module_type if i == len(parts) - 1 else "")
                object.__setattr__(child, "_root", self)
                parent.register_module(part, child)
            elif i == len(parts) - 1 and isinstance(child, InterpreterModule) and not child.module_type:
                object.__setattr__(child, "module_type", module_type)
            parent = child
        assert isinstance(parent, InterpreterModule)
        return parent

    def _get_name(self) -> str:
        return f"UnflattenedModule[{self.program.name}]"

    def _leaves(self, args: Sequence[Any], kwargs: Mapping[str, Any] | None) -> list[Any]:
        ep = self.program
        if self.adapter is None:
            return ep.user_leaves(args, kwargs)
        from tensorplay.export.dynamic import combine
        try:
            return ep.user_leaves(args, kwargs)
        except TypeError:
            arguments = combine(list(ep.call_spec.names), tuple(args), kwargs, ep.call_spec.keyword) \
                if len(args) + len(kwargs or {}) == len(ep.call_spec.names) else None
            given = tuple(arguments.values) if arguments is not None else (tuple(args), dict(kwargs or {}))
            leaves, structure = split_static(given)
            adapted = self.adapter.adapt(ep.call_spec.in_tree, structure, list(leaves))
            return [x if isinstance(x, Tensor) else eager.constant(np.asarray(x)) for x in adapted]

    def run(self, args: Sequence[Any], kwargs: Mapping[str, Any] | None, *, apply: bool = True,
            keys: Sequence[Any] | None = None) -> tuple[list[Any], Any]:
        """Run the whole program through the hierarchy; returns ``(new values of mutated state, results)``. With
        ``apply`` the mutations are written into this module's state; ``keys`` fixes the random keys."""
        ep = self.program
        leaves = self._leaves(args, kwargs)
        binding = ep.check_inputs(leaves)
        ops = highest_interpreter(leaves, eager)
        values = ep.placeholder_values(leaves, state_of(self, self.program), keys, ops)
        env: dict[Any, Any] = dict(zip(ep.graph.inputs, values))
        runner = _Runner(self.plan, self, ops, binding, env)
        runner.run(self.plan.top)
        news = [runner.walker.read(env, v) for _, v in ep.graph.mutations]
        outputs = [runner.walker.read(env, v) for v in ep.graph.outputs]
        if apply:
            ep.apply_state_mutations(values, news)
        return news, ep.results(outputs, binding)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Run the program (as ``ep.module()`` does), submodule by submodule."""
        return self.run(args, kwargs)[1]

    def run_call(self, index: int, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        """Run recorded call ``index`` on new arguments (a submodule called directly)."""
        ep = self.program
        plan = self.plan
        entry = ep.module_call_graph[index]
        if entry.in_structure is None or entry.out_structure is None:
            raise GraphCaptureError(f"unflatten: the call of {entry.path!r} cannot be run on its own (its arguments "
                                    "or results were not saved)")
        leaves, structure = split_static((tuple(args), dict(kwargs)), lambda x: isinstance(x, Tensor))
        diff = structure_difference(entry.in_structure, structure)
        if diff:
            raise TypeError(f"{entry.path}: the arguments do not match the exported call: {diff}")
        env: dict[Any, Any] = {}
        binding: dict[str, Any] = {}
        for name, value in zip(entry.inputs, leaves):
            var = plan.values[name]
            env[var] = value
            try:
                bind_shape(var.shape, tuple(value.shape), binding, f"{entry.path}: input {name!r}")
            except ValueError as error:
                raise TypeError(str(error)) from None
        state = state_of(self, self.program)
        for spec, p in zip(ep.graph_signature.input_specs, ep.graph.inputs):
            if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                env[p] = state[str(spec.target)]
            elif spec.kind is InputKind.RANDOM_KEY:
                env[p] = eager.random_key()
        ops = highest_interpreter(leaves, eager)
        scope = plan.scopes[index]
        needed = [v for n in scope.defines for v in _reads(plan.values[n]) if v not in env and
                  not (v.producer is not None and str(v.meta.get("name")) in scope.defines)]
        if needed:
            raise GraphCaptureError(f"unflatten: {entry.path!r} uses values computed outside it "
                                    f"({', '.join(str(v.meta.get('name', v.name)) for v in needed)}); call it "
                                    "through its parent")
        runner = _Runner(plan, self, ops, binding, env)
        runner.run(scope)
        return join_static(concrete(entry.out_structure, binding), [env[plan.values[n]] for n in entry.outputs])


def _reads(value: Var) -> list[Var]:
    node = value.producer
    if node is None:
        return []
    return [v for v in node.inputs if isinstance(v, Var)]


def unflatten(ep: ExportedProgram, flat_args_adapter: FlatArgsAdapter | None = None) -> UnflattenedModule:
    """An :class:`UnflattenedModule` for ``ep``, checked against the flat program on the example inputs
    (identical results and mutations; neither is applied)."""
    module = UnflattenedModule(ep, flat_args_adapter)
    if ep.example_inputs is not None:
        args, kwargs = ep.example_inputs
        leaves = ep.user_leaves(args, kwargs)
        n_keys = len(ep.graph_signature.random_keys)
        keys = [eager.wrap(np.array([0x5EED, i], dtype=np.int64)) for i in range(n_keys)]
        flat = ep.run_flat(ep.placeholder_values(leaves, None, keys))
        news, result = module.run(args, kwargs, apply=False, keys=keys)
        got = split_static((news, result), lambda x: isinstance(x, Tensor))[0]
        for i, (a, b) in enumerate(zip(flat, got)):
            x, y = np.asarray(a._ops.concrete(a)), np.asarray(b._ops.concrete(b))
            if x.shape != y.shape or not np.array_equal(x, y, equal_nan=True):
                raise GraphCaptureError(f"unflatten: the hierarchy gives a different value for flat output {i} than "
                                        "the exported program on the example inputs")
    return module


__all__ = ["FlatArgsAdapter", "InterpreterModule", "UnflattenedModule", "unflatten"]
