"""``trace(fn_or_module, *example_args)`` -> :class:`GraphModule`.

The example arguments (tensors, numpy arrays, or tuples/lists/dicts of them;
other values are static) become the graph's user inputs. A module's
``named_parameters()`` and ``named_buffers()`` become ``"parameter"`` and
``"buffer"`` inputs, captured by name. ``dynamic`` marks dims symbolic::

    trace(f, x, dynamic={0: {0: "B"}})          # axis 0 of argument 0 is B
    trace(f, x, y, dynamic=[("B", None), None])  # per argument, per axis
    trace(f, xs, dynamic={"xs_1": {0: "T"}})     # by input name (pytree leaves: xs_0, xs_1, ...)

Entries may be names or ``SymDim`` expressions (``2*sym("T") + 1``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tensorplay.dtypes import plain_array
from tensorplay.interpreters.eager.interpreter import eager
from tensorplay.interpreters.graph.codegen import compile_graph
from tensorplay.interpreters.graph.evaluate import apply_mutations, bind_inputs, input_values
from tensorplay.interpreters.graph.ir import Graph, Literal, Var
from tensorplay.interpreters.graph.printer import format_graph
from tensorplay.interpreters.graph.recorder import Recorder, foreign_aval
from tensorplay.interpreters.graph.state import ModuleState, call_state
from tensorplay.spec.aval import Aval
from tensorplay.spec.errors import GraphCaptureError
from tensorplay.recording import creating_in, recording
from tensorplay.swaps import replaced
from tensorplay.symbolic import SymDim, bind_shape, check_shape
from tensorplay.pytree import Structure, join_static, leaf_names, split_static, structure_difference
from tensorplay.tensor import Tensor, highest_interpreter


class GuardError(GraphCaptureError):
    """A value read while tracing in execute mode decides differently now: re-trace."""


def is_module(obj: Any) -> bool:
    """Duck typing: anything with ``named_parameters()``."""
    return callable(getattr(obj, "named_parameters", None))


def _arg_names(fn: Any, n: int) -> list[str]:
    target = fn.forward if is_module(fn) and hasattr(fn, "forward") else fn
    names: list[str] = []
    try:
        params = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        params = []
    for p in params:
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind is inspect.Parameter.VAR_POSITIONAL:
            names.extend(f"{p.name}_{i}" for i in range(n - len(names)))
            break
    names.extend(f"arg{i}" for i in range(len(names), n))
    return names[:n]


def _axis_spec(spec: Any, ndim: int, where: str) -> dict[int, Any]:
    if spec is None:
        return {}
    if spec is True:
        return {a: f"{where}_{a}" for a in range(ndim)}
    if isinstance(spec, Mapping):
        items = dict(spec)
    elif isinstance(spec, Sequence) and not isinstance(spec, str):
        if len(spec) != ndim:
            raise ValueError(f"dynamic: {where} has rank {ndim}, got {len(spec)} axis entries {list(spec)}")
        items = {a: s for a, s in enumerate(spec) if s is not None}
    else:
        raise TypeError(f"dynamic: expected None, True, a dict {{axis: name}} or a per-axis list for {where}, "
                        f"got {spec!r}")
    out = {}
    for axis, s in items.items():
        if not -ndim <= axis < ndim:
            raise ValueError(f"dynamic: axis {axis} is out of range for {where} of rank {ndim}")
        if isinstance(s, int) and not isinstance(s, bool):
            continue  # a static size
        out[axis % ndim] = SymDim(s) if isinstance(s, str) else s
        if not isinstance(out[axis % ndim], SymDim):
            raise TypeError(f"dynamic: axis {axis} of {where}: expected a dim name or a SymDim, got {s!r}")
    return out


def _specs_for_leaves(dynamic: Any, n_args: int, arg_trees: list[Structure],
                      names_per_arg: list[list[str]]) -> dict[str, Any]:
    """Map placeholder name -> per-tensor spec."""
    if dynamic is None:
        return {}
    per_name: dict[str, Any] = {}
    if isinstance(dynamic, Mapping):
        items = list(dynamic.items())
    elif isinstance(dynamic, Sequence) and not isinstance(dynamic, str):
        if len(dynamic) != n_args:
            raise ValueError(f"dynamic: got {len(dynamic)} entries for {n_args} arguments")
        items = list(enumerate(dynamic))
    else:
        raise TypeError(f"dynamic: expected a dict or a list with one entry per argument, got {dynamic!r}")
    for key, spec in items:
        if isinstance(key, int):
            if not 0 <= key < n_args:
                raise ValueError(f"dynamic: argument index {key} is out of range ({n_args} arguments)")
            if spec is None:
                continue
            if arg_trees[key].spec.num_leaves != 1 or arg_trees[key].spec.type is not None:
                raise TypeError(f"dynamic: argument {key} is a container; name its tensors instead "
                                f"({', '.join(names_per_arg[key])})")
            per_name[names_per_arg[key][0]] = spec
        else:
            known = {n for names in names_per_arg for n in names}
            if key not in known:
                raise ValueError(f"dynamic: no input named {key!r}; inputs are {', '.join(sorted(known))}")
            per_name[key] = spec
    return per_name


def trace(fn: Any, *example_args: Any, execute: bool = False, dynamic: Any = None) -> GraphModule:
    """Record ``fn(*example_args)`` (a function or a module) into a :class:`GraphModule`.

    ``execute=False`` records symbolically (no values: data-dependent Python is refused);
    ``execute=True`` also computes every value and records each read as a guard.
    ``dynamic`` marks symbolic dims (see the module docstring).
    """
    module = fn if is_module(fn) else None
    recorder = Recorder(execute=execute)
    graph = recorder.graph
    if module is not None:
        for name, t in module.named_parameters():
            recorder.register_state(name, t, "parameter")
        named_buffers = getattr(module, "named_buffers", None)
        if callable(named_buffers):
            for name, t in named_buffers():
                if isinstance(t, Tensor):
                    recorder.register_state(name, t, "buffer")
    arg_names = _arg_names(fn, len(example_args))
    arg_trees: list[Structure] = []
    names_per_arg: list[list[str]] = []
    arg_leaves: list[list[Any]] = []
    for name, arg in zip(arg_names, example_args):
        leaves, structure = split_static(arg)
        arg_trees.append(structure)
        arg_leaves.append(leaves)
        names_per_arg.append(leaf_names(structure, name))
    specs = _specs_for_leaves(dynamic, len(example_args), arg_trees, names_per_arg)

    binding: dict[str, Any] = {}
    recorded_args = []
    for leaves, structure, names in zip(arg_leaves, arg_trees, names_per_arg):
        new_leaves = []
        for leaf, name in zip(leaves, names):
            t = leaf if isinstance(leaf, Tensor) else eager.constant(plain_array(leaf, f"trace: input {name!r}"))
            base = foreign_aval(t)
            axes = _axis_spec(specs.get(name), len(base.shape), name)
            shape = tuple(axes.get(a, d) for a, d in enumerate(base.shape))
            if axes:
                try:
                    bind_shape(shape, base.shape, binding, f"example input {name!r}")
                    check_shape(shape, base.shape, binding, f"example input {name!r}")
                except ValueError as error:
                    raise ValueError(f"dynamic: {error}") from None
            value = np.asarray(t._ops.concrete(t)) if execute else None
            placeholder = recorder.input(name, Aval(shape, base.dtype), "user_input", value)
            as_data = getattr(leaf, "_as_data_input", None)  # an Index: a bounded integer data input
            new_leaves.append(as_data(placeholder) if as_data is not None else placeholder)
        recorded_args.append(join_static(structure, new_leaves))
    recorder.binding = {k: v for k, v in binding.items() if isinstance(v, int)}

    # a tensorplay Module reads the recorder's handles for its parameters in this thread only; a module
    # by duck typing (no named_modules) has its parameter tensors themselves swapped for the trace
    duck = module is not None and not callable(getattr(module, "named_modules", None))
    saved = recorder.swap_in_state() if duck else []
    try:
        with replaced(_parameter_handles(module, recorder) if module is not None and not duck else ()), \
                recording(recorder), creating_in(recorder):
            result = fn(*recorded_args)
    finally:
        recorder.restore_state(saved)
        recorder.close()
    out_leaves, out_tree = split_static(result, lambda x: isinstance(x, Tensor))
    outputs: list[Any] = []
    for leaf in out_leaves:
        outputs.append(recorder.lift(leaf))
    graph.outputs = outputs
    in_tree = split_static(tuple(example_args))[1]
    graph.out_tree = out_tree
    return GraphModule(graph, module=module, in_tree=in_tree, out_tree=out_tree,
                       name=getattr(fn, "__name__", type(fn).__name__))


def _parameter_handles(module: Any, recorder: Recorder) -> list[tuple[Any, str, Tensor[*tuple[Any, ...]]]]:
    """``(owner, name, handle)`` for every parameter of ``module`` under every name (tied weights too):
    while tracing, the module's attribute reads give the recorder's handles -- in the tracing thread
    only (:mod:`tensorplay.swaps`), so other threads using the module meanwhile see its own tensors."""
    handles: dict[int, Tensor[*tuple[Any, ...]]] = {}
    out = []
    for _, owner in module.named_modules(remove_duplicate=False):
        for name, tensor in owner.__dict__.get("_parameters", {}).items():
            if tensor is None or not recorder.has_state(tensor):
                continue
            handle = handles.get(id(tensor))
            if handle is None:
                handle = handles[id(tensor)] = recorder.state_handle(tensor)
            out.append((owner, name, handle))
    return out


class GraphModule:
    """A recorded graph, callable like the function it came from.

    ``.graph`` is the IR, ``.code`` the generated Python source of the forward,
    ``str(gm)`` the jaxpr-style listing, ``.to_dot()`` Graphviz. Calling it runs the
    generated code under the interpreter of its inputs (eager by default; a recorder
    inlines it). Parameters, buffers and captured tensors are read from the tensors
    recorded with the graph (so a module's in-place parameter updates are seen), or from the
    module's attributes when a parameter or buffer was reassigned since tracing, unless ``state``
    overrides them by name; either must have the traced shape and dtype (``state`` names are
    checked: :class:`~tensorplay.interpreters.graph.state.StateKeyError` for an unknown one). Guards recorded in execute mode are re-checked
    when running eagerly (:class:`GuardError` when the traced branch no longer applies).
    """

    def __init__(self, graph: Graph, module: Any = None, in_tree: Structure | None = None,
                 out_tree: Structure | None = None, name: str = "forward") -> None:
        self.graph = graph
        self.module = module
        self.in_tree = in_tree
        self.out_tree = out_tree if out_tree is not None else graph.out_tree
        self.__name__ = name
        self._compiled: dict[bool, tuple[Callable[..., Any], str]] = {}
        self._module_state: ModuleState | None = None

    # ---- code ------------------------------------------------------------------------------------
    def recompile(self) -> None:
        """Regenerate the code after the graph was changed in place."""
        self._compiled.clear()

    def _forward(self, guarded: bool) -> Callable[..., Any]:
        entry = self._compiled.get(guarded)
        if entry is None:
            entry = self._compiled[guarded] = compile_graph(self.graph, guarded, self._check_guard)
        return entry[0]

    @property
    def code(self) -> str:
        """The generated Python source of the forward (guard checks included when the graph has guards)."""
        guarded = bool(self.graph.guards)
        self._forward(guarded)
        return self._compiled[guarded][1]

    def _check_guard(self, index: int, ops: Any, value: Tensor[*tuple[Any, ...]]) -> None:
        guard = self.graph.guards[index]
        if not guard.check(ops.concrete(value)):
            where = f" at {guard.location}" if guard.location else ""
            raise GuardError(f"guard failed: {guard.kind}() of a value read{where} gave {guard.outcome!r} when "
                             "the function was traced; the inputs now take a different path. Trace again "
                             "with these inputs (tp.graph.trace(fn, *inputs, execute=True)).")

    # ---- calling ---------------------------------------------------------------------------------
    def __call__(self, *args: Any, state: Mapping[str, Any] | None = None) -> Any:
        leaves, td = split_static(tuple(args))
        if self.in_tree is not None:
            diff = structure_difference(self.in_tree, td)
            if diff:
                raise TypeError(f"{self.__name__}: arguments do not match the traced ones: {diff}")
        if self.module is not None and self._module_state is None:
            self._module_state = ModuleState(self.module, self.graph)
        state = call_state(self.graph, self._module_state, state, self.__name__)
        sources = [state.get(str(p.name), p.source) if state is not None else p.source for p in self.graph.inputs]
        ops: Any = highest_interpreter(sources, highest_interpreter(leaves, eager))
        inputs = [x if isinstance(x, Tensor) else eager.constant(plain_array(x, self.__name__)) for x in leaves]
        bind_inputs(self.graph, inputs)
        values = input_values(self.graph, ops, inputs, state)
        guarded = bool(self.graph.guards) and ops is eager
        flat = self._forward(guarded)(ops, *values)
        if self.graph.mutations:
            flat, news = flat
            apply_mutations(self.graph, ops, values, news)
        return join_static(self.out_tree, list(flat)) if self.out_tree is not None else flat

    # ---- display ---------------------------------------------------------------------------------
    def __str__(self) -> str:
        return format_graph(self.graph)

    def __repr__(self) -> str:
        return f"<GraphModule {self.__name__}: {self.graph!r}>"

    def print_readable(self, show_locations: bool = True) -> str:
        """The jaxpr-style listing with source locations (also printed)."""
        text = format_graph(self.graph, show_locations=show_locations)
        print(text)
        return text

    def to_dot(self) -> str:
        """Graphviz source of the graph."""
        return self.graph.to_dot()

    @property
    def guards(self) -> list[Any]:
        """The guards recorded in execute mode."""
        return self.graph.guards


def outputs_as_values(graph: Graph, outs: Sequence[Any], recorder: Recorder) -> None:
    """Set ``graph.outputs`` from tensors (lifted) and Python scalars (literals)."""
    graph.outputs = [recorder.lift(o) if isinstance(o, Tensor) else Literal(o) for o in outs]


__all__ = ["GraphModule", "GuardError", "is_module", "trace", "outputs_as_values", "Var"]
