"""``ExportedProgram``: a traced graph with its calling convention, state, dims and checks.

An exported program is self-contained: its graph (placeholders: parameters, buffers, constant tensors, user
inputs, random keys), its :class:`~tensorplay.export.signature.ExportGraphSignature`, copies of the model's
state (``state_dict``: parameters and persistent buffers; ``constants``: non-persistent buffers and lifted
constant tensors), its dims (``range_constraints``, keyed by the user's dim names) and the structure of its
arguments and results. Running it checks the inputs first (every declared min, max, tie and static size,
with the dim's name and where it was declared), then interprets the graph with the interpreter of its inputs
(eagerly, or re-recorded into an enclosing trace or transform).

* ``ep.module()``: a callable :class:`~tensorplay.nn.Module` taking the user's arguments, with the state folded
  back in (cached; :meth:`ExportedProgram.invalidate_unlifted` drops it); it applies buffer and parameter
  mutations to its own state and draws random keys from the global generator (``tp.manual_seed`` replays).
* ``ExportedProgram.call_exported(ep)``: the flat contract on the user's arguments: the state and random keys
  are filled in from the program, the new values of mutated state then the user outputs come out; nothing is
  mutated. ``ep.run_flat(ep.placeholder_values(user, state, keys))`` takes every placeholder's value given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensorplay.export.dynamic import DimInfo, linear_parts
from tensorplay.export.errors import InputConstraintError
from tensorplay.export.signature import ExportGraphSignature, InputKind
from tensorplay.interpreters.eager.interpreter import eager
from tensorplay.interpreters.graph.evaluate import apply_mutations
from tensorplay.interpreters.graph.ir import Graph, Literal, Var, unique_name
from tensorplay.interpreters.graph.walk import Walker
from tensorplay.pytree import Structure, join_static, split_static, structure_difference
from tensorplay.spec.errors import DTypeError
from tensorplay.symbolic import SymDim
from tensorplay.tensor import Tensor, highest_interpreter

AnyTensor = Tensor[*tuple[Any, ...]]


@dataclass(frozen=True)
class ValueRange:
    """The sizes a dim may take: ``[lower, upper]`` (``upper`` ``None``: unbounded)."""

    lower: int
    upper: int | None

    def __str__(self) -> str:
        return f"[{self.lower}, {'inf' if self.upper is None else self.upper}]"

    def __contains__(self, size: object) -> bool:
        return isinstance(size, int) and self.lower <= size and (self.upper is None or size <= self.upper)


class RangeConstraints(dict[str, ValueRange]):
    """Dim name (the user's) -> :class:`ValueRange`; prints as ``{Seq: [2, 4096]}``."""

    def __str__(self) -> str:
        return "{" + ", ".join(f"{name}: {r}" for name, r in self.items()) + "}"

    __repr__ = __str__


@dataclass
class CallSpec:
    """How the user calls the program: argument ``names`` in signature order (``keyword`` ones by keyword),
    the structure of the arguments (``in_tree``, static leaves kept) and of the results (``out_tree``; a size
    among its static leaves is a symbolic dim, evaluated per call), and the ``defaults`` of arguments."""

    names: list[str]
    keyword: set[str]
    in_tree: Structure
    out_tree: Structure | None
    defaults: dict[str, Any] = field(default_factory=dict)


@dataclass
class ModuleCallEntry:
    """One recorded submodule call (for ``unflatten``): its ``path``, enclosing call, the names of the values
    it received and returned with their structures (``None`` when a file could not hold them), its module's
    class name, and the names of the values its
    nodes define (in graph order)."""

    path: str
    parent: int | None
    inputs: list[str]
    in_structure: Structure | None
    outputs: list[str]
    out_structure: Structure | None
    module_type: str = ""
    defines: list[str] = field(default_factory=list)


# ---- value names ------------------------------------------------------------------------------------------

def value_name(value: Var) -> str:
    """The name of a graph value: a placeholder's name, or the name :func:`name_values` gave a node output."""
    if value.kind is not None:
        return str(value.name)
    name = value.meta.get("name")
    if name is None:
        raise KeyError(f"value {value!r} has no name yet (call name_values on its graph)")
    return str(name)


def name_values(graph: Graph) -> dict[str, Var]:
    """Give every node output without a name one (the primitive's name, made unique: ``matmul``,
    ``matmul_1``); returns name -> value for every value of the graph."""
    out: dict[str, Var] = {str(p.name): p for p in graph.inputs}
    used = set(out)
    for node in graph.nodes:
        for v in node.outputs:
            name = v.meta.get("name")
            if name is None or name in out:
                name = unique_name(node.target, used)
                v.meta["name"] = name
            used.add(name)
            out[name] = v
    return out


# ---- the program ------------------------------------------------------------------------------------------

class ExportedProgram:
    """See the module docstring."""

    def __init__(self, graph: Graph, graph_signature: ExportGraphSignature, state_dict: dict[str, AnyTensor],
                 constants: dict[str, AnyTensor], dims: dict[str, DimInfo], call_spec: CallSpec, *,
                 example_inputs: tuple[tuple[Any, ...], dict[str, Any]] | None = None,
                 module_call_graph: list[ModuleCallEntry] | None = None, constraints: list[Any] | None = None,
                 name: str = "forward") -> None:
        self.graph = graph
        self.graph_signature = graph_signature
        self.state_dict = state_dict
        self.constants = constants
        self.dims = dims
        self.call_spec = call_spec
        self.example_inputs = example_inputs
        self.module_call_graph = list(module_call_graph or [])
        self.constraints = list(constraints or [])
        self.name = name
        self._module: Any = None
        name_values(graph)
        self._attach_state()

    def _attach_state(self) -> None:
        """Point each state placeholder at the program's own tensor (the graph then runs on its own)."""
        state = {**self.state_dict, **self.constants}
        for spec, p in zip(self.graph_signature.input_specs, self.graph.inputs):
            if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
                p.source = state[str(spec.target)]
            elif spec.kind is InputKind.CONSTANT_TENSOR:
                p.source = np.asarray(state[str(spec.target)]._data)

    # ---- views ---------------------------------------------------------------------------------------------
    @property
    def range_constraints(self) -> RangeConstraints:
        """Dim name -> the sizes it may take (the user's names)."""
        return RangeConstraints({name: ValueRange(info.min, info.max) for name, info in self.dims.items()})

    @property
    def tensor_constants(self) -> dict[str, AnyTensor]:
        """The lifted constant tensors (closures, globals, arrays baked in), by name."""
        return {t: self.constants[t] for t in self.graph_signature.lifted_tensor_constants}

    def named_parameters(self) -> Iterator[tuple[str, AnyTensor]]:
        """``(name, tensor)`` for each parameter input."""
        for name in self.graph_signature.parameters:
            yield name, self.state_dict[name]

    def parameters(self) -> Iterator[AnyTensor]:
        """The parameters."""
        for _, t in self.named_parameters():
            yield t

    def named_buffers(self) -> Iterator[tuple[str, AnyTensor]]:
        """``(name, tensor)`` for each buffer input (persistent ones from ``state_dict``, others from
        ``constants``)."""
        for name in self.graph_signature.buffers:
            yield name, self.state_dict[name] if name in self.state_dict else self.constants[name]

    def buffers(self) -> Iterator[AnyTensor]:
        """The buffers."""
        for _, t in self.named_buffers():
            yield t

    @property
    def graph_module(self) -> Any:
        """The graph as a ``tensorplay.graph.GraphModule`` (user inputs in, state read from the program)."""
        from tensorplay.interpreters.graph.trace import GraphModule
        return GraphModule(self.graph, name=self.name)

    @property
    def code(self) -> str:
        """Python source of the graph: ``def forward(ops, <every placeholder>)``."""
        return self.graph.python_code()

    def __str__(self) -> str:
        return (f"ExportedProgram:\n{self.graph}\nGraph signature:\n{self.graph_signature}\n"
                f"Range constraints: {self.range_constraints}")

    def __repr__(self) -> str:
        return f"<ExportedProgram {self.name}: {self.graph!r}, range constraints {self.range_constraints}>"

    # ---- checks --------------------------------------------------------------------------------------------
    def _declared(self, name: str) -> str:
        info = self.dims.get(name)
        if info is None:
            return ""
        text = f"; {name} declared at {info.declared_at}"
        return text + (f"; {info.note}" if info.note else "")

    def check_inputs(self, leaves: Sequence[Any]) -> dict[str, Any]:
        """Check the user inputs (tensors, in order) against the program's shapes, dims and dtypes; returns
        the binding of its dims. Raises :class:`InputConstraintError` naming the dim, input and axis."""
        placeholders = self.graph.user_inputs
        if len(leaves) != len(placeholders):
            raise TypeError(f"{self.name}: expected {len(placeholders)} tensor input(s) "
                            f"({', '.join(str(p.name) for p in placeholders)}), got {len(leaves)}")
        binding: dict[str, Any] = {}
        first: dict[str, str] = {}
        for p, x in zip(placeholders, leaves):
            shape = tuple(x.shape)
            dtype = x._data.dtype if isinstance(x, Tensor) else np.asarray(x).dtype
            if dtype != p.dtype:
                raise DTypeError(f"{self.name}: input {p.name!r} must have dtype {p.aval.dtype}, got {dtype}")
            if len(shape) != len(p.shape):
                raise InputConstraintError(f"{self.name}: input {p.name!r} must have rank {len(p.shape)} (shape "
                                           f"{list(p.shape)}), got shape {list(shape)}")
            for axis, (d, size) in enumerate(zip(p.shape, shape)):
                where = f"input {p.name!r} axis {axis}"
                if not isinstance(d, SymDim):
                    if isinstance(size, int) and size != d:
                        raise InputConstraintError(f"{self.name}: {where} has size {size}, expected {d} (a static "
                                                   "size of the exported program)")
                    continue
                root, scale, offset = linear_parts(d)
                if not isinstance(size, int):  # a symbolic size of an enclosing trace: bind it as it is
                    value: Any = size if scale == 1 and offset == 0 else (size - offset) // scale
                else:
                    value, remainder = divmod(size - offset, scale)
                    if remainder:
                        raise InputConstraintError(f"{self.name}: {where} has size {size}, which is not of the form "
                                                   f"{d}{self._declared(root)}")
                if root in binding:
                    if binding[root] != value:
                        raise InputConstraintError(
                            f"{self.name}: {where} has {d} = {size}, so {root}={value}, but {first[root]} gives "
                            f"{root}={binding[root]}: the sizes that share dim {root} must agree"
                            f"{self._declared(root)}")
                    continue
                binding[root] = value
                first[root] = where
        for root, value in binding.items():
            info = self.dims.get(root)
            if info is None or not isinstance(value, int):
                continue
            if value < info.min:
                raise InputConstraintError(f"{self.name}: {root}={value} violates {root} >= {info.min} "
                                           f"({first[root]}{self._declared(root)})")
            if info.max is not None and value > info.max:
                raise InputConstraintError(f"{self.name}: {root}={value} violates {root} <= {info.max} "
                                           f"({first[root]}{self._declared(root)})")
        return binding

    # ---- running -------------------------------------------------------------------------------------------
    def run_flat(self, values: Sequence[Any], binding: Mapping[str, Any] | None = None) -> tuple[Any, ...]:
        """Interpret the graph on one value per placeholder (in order), with the interpreter of those values;
        returns the new values of mutated state, then the user outputs. ``binding`` (the dims' sizes) is
        computed from the user inputs when not given."""
        if len(values) != len(self.graph.inputs):
            raise TypeError(f"{self.name}: the flat contract takes {len(self.graph.inputs)} values "
                            f"({', '.join(str(p.name) for p in self.graph.inputs)}), got {len(values)}")
        values = [v if isinstance(v, Tensor) else eager.constant(np.asarray(v)) for v in values]
        if binding is None:
            users = [v for v, p in zip(values, self.graph.inputs) if p.kind == "user_input"]
            binding = self.check_inputs(users)
        ops = highest_interpreter(values, eager)
        walker = Walker(ops, binding)
        env = walker.run(self.graph.nodes, dict(zip(self.graph.inputs, values)))
        mutations = [walker.read(env, v) for _, v in self.graph.mutations]
        outputs = [walker.read(env, v) for v in self.graph.outputs]
        return tuple(mutations + outputs)

    def placeholder_values(self, user: Sequence[Any], state: Mapping[str, Any] | None = None,
                           keys: Sequence[Any] | None = None, ops: Any = None) -> list[Any]:
        """One value per placeholder: ``state[target]`` (default: the program's own tensors) for parameters,
        buffers and constants, ``user`` for the user inputs, ``keys`` (default: fresh keys from ``ops``, or the
        global generator) for random keys."""
        own = {**self.state_dict, **self.constants}
        state = own if state is None else state
        users = iter(user)
        key_list = iter(keys) if keys is not None else None
        out: list[Any] = []
        for spec in self.graph_signature.input_specs:
            if spec.kind is InputKind.USER_INPUT:
                out.append(next(users))
            elif spec.kind is InputKind.RANDOM_KEY:
                if key_list is not None:
                    out.append(next(key_list))
                else:
                    fresh = getattr(ops if ops is not None else eager, "random_key", None) or eager.random_key
                    out.append(fresh())
            else:
                out.append(state[str(spec.target)])
        return out

    def user_leaves(self, args: Sequence[Any], kwargs: Mapping[str, Any] | None) -> list[Any]:
        """The tensor leaves of a call's arguments, checked against the exported structure."""
        from tensorplay.export.dynamic import combine
        spec = self.call_spec
        try:
            arguments = combine(list(spec.names), tuple(args), kwargs, spec.keyword, spec.defaults)
        except TypeError as error:
            raise TypeError(f"{self.name}: {error}") from None
        leaves, structure = split_static(tuple(arguments.values))
        diff = structure_difference(spec.in_tree, structure)
        if diff:
            raise TypeError(f"{self.name}: the arguments do not match the exported ones: {diff}")
        return [x if isinstance(x, Tensor) else eager.constant(np.asarray(x)) for x in leaves]

    def results(self, outputs: Sequence[Any], binding: Mapping[str, Any]) -> Any:
        """The user outputs in the exported result structure (sizes among its static leaves evaluated under
        ``binding``)."""
        tree = self.call_spec.out_tree
        return join_static(concrete(tree, binding), list(outputs)) if tree is not None else tuple(outputs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("an ExportedProgram is not called directly: use ep.module()(*args) (state folded in, "
                        "mutations applied) or ExportedProgram.call_exported(ep)(*args) (the flat contract)")

    def module(self) -> Any:
        """A callable module taking the user's arguments, with the program's state (see the module docstring);
        the same object until :meth:`invalidate_unlifted`."""
        if self._module is None:
            from tensorplay.export.unlifted import ExportedModule
            self._module = ExportedModule(self)
        return self._module

    def invalidate_unlifted(self) -> None:
        """Forget the module :meth:`module` made (the next call makes a new one)."""
        self._module = None

    @staticmethod
    def call_exported(program: ExportedProgram) -> Callable[..., tuple[Any, ...]]:
        """A function executing the flat contract of ``program`` on the user's arguments: it takes what the
        exported function takes (``call_exported(ep)(x)``, structure and keywords as exported, inputs checked)
        and fills in the rest of the flat contract from the program: its parameters, buffers and constants
        (``program.state_dict`` and ``program.constants``) and fresh random keys (from the generator of the
        inputs' interpreter, the global one eagerly: ``tp.manual_seed`` replays). It returns the flat outputs:
        the new values of mutated state, then the user outputs (flattened), in
        ``program.graph_signature.output_specs`` order. Nothing is mutated. To give every placeholder's value
        yourself (other state, explicit keys), use ``program.run_flat(program.placeholder_values(user, state,
        keys))``."""
        def call(*args: Any, **kwargs: Any) -> tuple[Any, ...]:
            leaves = program.user_leaves(args, kwargs)
            binding = program.check_inputs(leaves)
            values = program.placeholder_values(leaves, ops=highest_interpreter(leaves, eager))
            return program.run_flat(values, binding)
        call.__name__ = f"call_exported_{program.name}"
        return call

    def apply_state_mutations(self, values: Sequence[Any], new_values: Sequence[Any]) -> None:
        """Write mutated state back (``values``: one per placeholder, as run; ``new_values``: the mutations)."""
        if self.graph.mutations:
            ops = highest_interpreter([*values, *new_values], eager)
            apply_mutations(self.graph, ops, values, new_values)

    # ---- transformations and files --------------------------------------------------------------------------
    def run_decompositions(self, decomp_table: Mapping[Any, Any] | None = None) -> ExportedProgram:
        """A copy with every node whose target has an entry in ``decomp_table`` (default: the library's default
        decompositions) replaced by what its builder emits; see :mod:`tensorplay.export.decomp`."""
        from tensorplay.export.decomp import run_decompositions
        return run_decompositions(self, decomp_table)

    def serialize(self, opset_version: Mapping[str, int] | None = None, pickle_protocol: int = 4) -> Any:
        """A :class:`~tensorplay.export.files.SerializedArtifact` (JSON program + safetensors tensors); see
        :func:`tensorplay.export.files.serialize`."""
        from tensorplay.export.files import serialize
        return serialize(self, opset_version, pickle_protocol)

    @classmethod
    def deserialize(cls, artifact: Any, state_dict: bytes | None = None, constants: bytes | None = None,
                    example_inputs: bytes | None = None) -> ExportedProgram:
        """The program :meth:`serialize` made; see :func:`tensorplay.export.files.deserialize`."""
        from tensorplay.export.files import deserialize
        return deserialize(artifact, state_dict, constants, example_inputs)

    def copy_with(self, graph: Graph, graph_signature: ExportGraphSignature) -> ExportedProgram:
        """A program with another graph and signature and this one's state, dims and calling convention."""
        return ExportedProgram(graph, graph_signature, self.state_dict, self.constants, self.dims, self.call_spec,
                               example_inputs=self.example_inputs, module_call_graph=self.module_call_graph,
                               constraints=self.constraints, name=self.name)


def concrete(structure: Structure, binding: Mapping[str, Any]) -> Structure:
    """``structure`` with the symbolic sizes among its static leaves evaluated under ``binding`` (a function
    that returns ``x.shape[0]`` returns this call's size)."""
    if not any(isinstance(v, SymDim) for v in structure.static):
        return structure
    static = tuple(v.subs(binding) if isinstance(v, SymDim) else v for v in structure.static)
    return Structure(structure.spec, static, structure.is_tensor)


def output_values(graph: Graph) -> list[Var | Literal]:
    """The flat outputs: mutated state's new values, then the user outputs."""
    return [v for _, v in graph.mutations] + list(graph.outputs)


__all__ = ["CallSpec", "ExportedProgram", "ModuleCallEntry", "RangeConstraints", "ValueRange", "concrete", "name_values",
           "output_values", "value_name"]
