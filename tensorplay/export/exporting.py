"""``export(model, args, kwargs=None, *, dynamic_shapes=None, strict=False) -> ExportedProgram``.

1. The ``dynamic_shapes`` spec is resolved against the example arguments (:mod:`tensorplay.export.dynamic`):
   a symbolic shape per tensor input, a domain per dim.
2. The model is traced symbolically (:mod:`tensorplay.export.capture`); comparisons of symbolic sizes are
   answered from the domains, or from the example and recorded.
3. What the program requires of each dim (those decisions, and the shape rules re-run at sizes across each
   domain: :mod:`tensorplay.export.requirements`) is compared with the declarations. For a declared
   ``Dim`` any requirement beyond its declaration is an error naming the dim, the requirement, the
   operation and the user's line that imposed it, with a machine-readable fix
   (:class:`~tensorplay.export.errors.ConstraintViolationError`). ``Dim.DYNAMIC`` dims take the ranges and ties
   the program needs (a specialisation is still an error); ``Dim.AUTO`` dims (and dims from annotations)
   take whatever it needs, static included; the model is then traced again with the settled dims.
4. The graph becomes an :class:`~tensorplay.export.program.ExportedProgram`: tensors captured from closures
   and globals become constant inputs (``strict=True`` refuses them, and decides no comparison of sizes from
   the example), placeholders are ordered (parameters, buffers, constants, user inputs, random keys), and the
   state is copied (the program does not change when the model does).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from tensorplay.export.capture import Captured, ModuleCall, capture
from tensorplay.export.dynamic import AUTO, DECLARED, Arguments, DimInfo, ShapeSpec, SuggestedFix, combine, refined, resolve
from tensorplay.export.errors import CapturedStateWriteError, ConstraintViolationError
from tensorplay.export.program import CallSpec, ExportedProgram, ModuleCallEntry, name_values, value_name
from tensorplay.export.requirements import Requirement, check_example, from_decisions, probe
from tensorplay.export.signature import (
    ExportGraphSignature, InputKind, InputSpec, OutputKind, OutputSpec, TensorArgument,
)
from tensorplay.interpreters.eager.interpreter import eager
from tensorplay.interpreters.graph.ir import Graph, Var
from tensorplay.interpreters.graph.trace import is_module
from tensorplay.interpreters.graph.typecheck import typecheck
from tensorplay.pytree import split_static, tree_map
from tensorplay.spec.errors import GraphCaptureError, ShapeError
from tensorplay.tensor import Tensor

_MAX_TRACES = 8
_ORDER = {"parameter": 0, "buffer": 1, "constant": 2, "captured": 2, "user_input": 3, "random_key": 4}


def export(model: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None = None, *,
           dynamic_shapes: Any = None, strict: bool = False) -> ExportedProgram:
    """Export ``model`` (a function or a ``tp.nn.Module``) traced on the example ``args`` and ``kwargs``.

    ``dynamic_shapes`` says which input dims are dynamic (see :mod:`tensorplay.export.dynamic`); ``strict``
    refuses tensors captured from closures and globals and any comparison of dynamic sizes the declared
    ranges do not decide. Returns an :class:`~tensorplay.export.program.ExportedProgram`; see the module
    docstring for what is checked. The example's values are never read: only their shapes and dtypes.
    """
    if not isinstance(args, tuple):
        raise TypeError(f"export: args must be a tuple of example arguments, got a {type(args).__name__} "
                        "(one argument is written (x,))")
    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise TypeError(f"export: kwargs must be a dict, got a {type(kwargs).__name__}")
    arguments = combine(model, args, kwargs)
    spec = resolve(model, arguments, dynamic_shapes)
    spec, captured = settle(model, arguments, spec, strict)
    return build_program(model, arguments, spec, captured, (args, dict(kwargs or {})), strict)


class _Joint:
    """``model`` followed by ``loss_fn`` and differentiated: ``(loss, {parameter name: gradient})``. Duck-typed as
    a module (its parameters and buffers are the model's) with the arguments of both in one signature."""

    def __init__(self, model: Any, loss_fn: Any, n_model: int, model_names: list[str], loss_names: list[str]) -> None:
        import inspect
        self.model = model
        self.loss_fn = loss_fn
        self.n_model = n_model
        params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in [*model_names, *loss_names]]

        def forward(*values: Any) -> Any:
            return self(*values)

        forward.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        self.forward = forward
        self.__name__ = f"{getattr(model, '__name__', type(model).__name__)}_joint"

    def named_parameters(self) -> Any:
        return self.model.named_parameters()

    def named_buffers(self) -> Any:
        return self.model.named_buffers()

    def named_modules(self) -> Any:
        return self.model.named_modules()

    def state_dict(self) -> Any:
        return self.model.state_dict()

    def __call__(self, *values: Any) -> Any:
        from tensorplay.func import functional_call, grad_and_value
        model_args, loss_args = values[:self.n_model], values[self.n_model:]
        params = {n: p for n, p in self.model.named_parameters() if p.requires_grad}

        def loss_of(p: dict[str, Any]) -> Any:
            return self.loss_fn(functional_call(self.model, p, tuple(model_args)), *loss_args)

        grads, loss = grad_and_value(loss_of)(params)
        return loss, grads


def export_joint(model: Any, args: tuple[Any, ...], loss_fn: Any, loss_args: tuple[Any, ...] = (), *,
                 dynamic_shapes: Any = None, strict: bool = False) -> ExportedProgram:
    """Export the training computation of ``model``: ``loss = loss_fn(model(*args), *loss_args)`` and its gradient
    with respect to every parameter that requires one. The program's results are ``(loss, {name: gradient})``;
    its signature marks them ``LOSS_OUTPUT`` and ``GRADIENT_TO_PARAMETER`` (``backward_signature``). Arguments
    (and ``dynamic_shapes`` keys) are those of ``model.forward`` followed by those of ``loss_fn`` after its
    first."""
    if not isinstance(args, tuple) or not isinstance(loss_args, tuple):
        raise TypeError("export_joint: args and loss_args must be tuples of example arguments")
    if not is_module(model):
        raise TypeError(f"export_joint: expected a module (its parameters are differentiated), got {model!r}")
    model_names = combine(model, args, None).names
    loss_names = combine(loss_fn, (None, *loss_args), None).names[1:]
    joint = _Joint(model, loss_fn, len(args), model_names, loss_names)
    arguments = combine(joint, (*args, *loss_args), None)
    spec = resolve(joint, arguments, dynamic_shapes)
    spec, captured = settle(joint, arguments, spec, strict)
    kinds: list[tuple[OutputKind, str | None]] = []
    if captured.out_tree is not None:
        import optree
        paths = optree.treespec_paths(captured.out_tree.spec)
        for path, is_tensor in zip(paths, captured.out_tree.is_tensor):
            if is_tensor:
                kinds.append((OutputKind.LOSS_OUTPUT, None) if path[0] == 0 else
                             (OutputKind.GRADIENT_TO_PARAMETER, str(path[1])))
    return build_program(joint, arguments, spec, captured, ((*args, *loss_args), {}), strict, kinds)


def settle(model: Any, arguments: Arguments, spec: ShapeSpec, strict: bool) -> tuple[ShapeSpec, Captured]:
    """Trace, find the requirements, apply those the declarations leave to the exporter, and trace again
    until nothing changes; a requirement that contradicts a declaration raises."""
    for _ in range(_MAX_TRACES):
        try:
            captured = attempt(model, arguments, spec, strict)
        except (ShapeError, GraphCaptureError, ValueError, TypeError) as error:
            requirements = diagnose(model, arguments, spec, strict, error)
        else:
            requirements = from_decisions(captured.decisions, spec) + probe(captured.graph, spec)
        changes, violations = judge(spec, requirements)
        if violations:
            raise violation_error(violations)
        if not changes:
            return spec, captured
        spec = refined(spec, changes)
    raise GraphCaptureError(f"export: the dynamic dims did not settle after {_MAX_TRACES} traces (each trace "
                            f"required more of them); dims now: "
                            f"{', '.join(f'{n} {i.range_text()}' for n, i in spec.dims.items())}")


def attempt(model: Any, arguments: Arguments, spec: ShapeSpec, strict: bool) -> Captured:
    """Trace with ``spec`` and check the graph's shape rules at the example's sizes: a symbolic rule assumes
    dims it cannot compare agree (a size-1 axis of the example broadcasting against another is not seen), so a
    graph the example's own sizes contradict is refused here (``ShapeError``)."""
    captured = capture(model, arguments, spec, strict)
    check_example(captured.graph, spec)
    return captured


def diagnose(model: Any, arguments: Arguments, spec: ShapeSpec, strict: bool, error: Exception) -> list[Requirement]:
    """The trace failed: find the dim whose dynamism causes it (tracing again with that one dim static, then with
    all of them static). Its requirement is a specialisation, located at the user's line the error came from;
    when no dim is to blame, the error is the program's own and is raised again."""
    dynamic = list(spec.dims)
    where = _error_location(error)
    detail = str(error).split("\n")[0]
    for name in dynamic:
        try:
            attempt(model, arguments, refined(spec, {name: spec.dims[name].hint}), strict)
        except (GraphCaptureError, ValueError, TypeError):
            continue
        return [Requirement(name, "equal", spec.dims[name].hint, where=where, detail=detail)]
    if dynamic:
        try:
            attempt(model, arguments, refined(spec, {n: spec.dims[n].hint for n in dynamic}), strict)
        except (GraphCaptureError, ValueError, TypeError):
            pass
        else:
            return [Requirement(n, "equal", spec.dims[n].hint, where=where, detail=detail) for n in dynamic]
    raise error


def _error_location(error: BaseException) -> str:
    """``file.py:12 in forward``: the innermost frame of the user's code in ``error``'s traceback."""
    from tensorplay.interpreters.graph.recorder import _is_internal
    found = "the traced program"
    tb = error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if not _is_internal(code):
            found = f"{code.co_filename}:{tb.tb_lineno} in {code.co_name}"
        tb = tb.tb_next
    return found


Violation = tuple[Requirement, DimInfo, SuggestedFix]


def judge(spec: ShapeSpec, requirements: list[Requirement]) -> tuple[dict[str, Any], list[Violation]]:
    """Which requirements change which dims (``changes``, for :func:`~tensorplay.export.dynamic.refined`) and
    which contradict a declaration (``violations``, each with its suggested fix)."""
    changes: dict[str, Any] = {}
    violations: list[Violation] = []
    by_dim: dict[str, list[Requirement]] = {}
    for r in requirements:
        by_dim.setdefault(r.dim, []).append(r)
    for name, reqs in by_dim.items():
        info = spec.dims[name]
        if name in changes:
            continue
        equal = next((r for r in reqs if r.kind == "equal"), None)
        tie = next((r for r in reqs if r.kind == "tie"), None)
        mins = [r for r in reqs if r.kind == "min" and r.value is not None and r.value > info.min]
        maxs = [r for r in reqs if r.kind == "max" and r.value is not None and (info.max is None or r.value < info.max)]
        low = max(mins, key=lambda r: int(r.value or 0)) if mins else None
        high = min(maxs, key=lambda r: int(r.value or 0)) if maxs else None
        if equal is None and low is not None and high is not None and low.value == high.value == info.hint:
            equal = Requirement(name, "equal", info.hint, where=low.where, detail=low.detail)
        if equal is not None:
            if info.kind == AUTO:
                changes[name] = info.hint
            else:
                violations.append((equal, info, SuggestedFix("specialize", name, info.hint)))
            continue
        if tie is not None and tie.other is not None:
            other = spec.dims[tie.other]
            if changes.get(tie.other) == name or any(f.kind == "tie" and (f.dim, f.to) == (tie.other, name)
                                                     for _, _, f in violations):
                continue
            if info.kind == DECLARED and other.kind == DECLARED:
                violations.append((tie, info, SuggestedFix("tie", name, to=tie.other)))
            elif info.kind != DECLARED:
                changes[name] = tie.other
            else:
                changes[tie.other] = name
            continue
        if low is None and high is None:
            continue
        if info.kind == DECLARED:
            violations += [(r, info, SuggestedFix("set_min" if r.kind == "min" else "set_max", name, r.value))
                           for r in (low, high) if r is not None]
            continue
        note = "; ".join(f"the program needs {r.text} ({r.where})" for r in (low, high) if r is not None)
        changes[name] = (low.value if low is not None else info.min, high.value if high is not None else info.max,
                         note)
    return changes, violations


def _describe(requirement: Requirement, info: DimInfo) -> str:
    declared = f"{info.name} is declared {info.range_text()} ({info.kind} dim, at {info.declared_at})"
    if requirement.kind == "equal":
        what = f"the program specialises {info.name} to {requirement.value}"
        declared = f"{info.name} is declared dynamic ({info.declared_at})"
    elif requirement.kind == "tie":
        what = f"the program requires {requirement.text}"
        declared = f"they are declared as different dims ({info.name} at {info.declared_at})"
    else:
        what = f"the program requires {requirement.text}"
    return f"{what} ({requirement.where}: {requirement.detail}), but {declared}"


def violation_error(violations: list[Violation]) -> ConstraintViolationError:
    """The error listing each violation with its suggested fix (as JSON)."""
    lines = ["export: the program's requirements contradict the declared dynamic shapes:"]
    for requirement, info, fix in violations:
        lines.append(f"  - {info.name}: {_describe(requirement, info)}")
        lines.append(f"    suggested fix: {json.dumps(fix.to_json())}")
    lines.append("Apply the suggested fixes with tp.export.apply_fixes(dynamic_shapes, error) and export again.")
    return ConstraintViolationError("\n".join(lines), tuple(violations), tuple(fix for _, _, fix in violations))


# ---- building the program -----------------------------------------------------------------------------------

def _copy_tensor(t: Any, as_parameter: bool) -> Any:
    array = np.array(t._ops.concrete(t) if isinstance(t, Tensor) else t, copy=True)
    if as_parameter:
        from tensorplay.nn.parameter import Parameter
        return Parameter(array, requires_grad=bool(getattr(t, "requires_grad", False)) and array.dtype.kind == "f")
    return eager.wrap(array)


def _copy_example(value: Any) -> Any:
    def copy(x: Any) -> Any:
        if isinstance(x, Tensor):
            return eager.wrap(np.array(x._ops.concrete(x), copy=True))
        if isinstance(x, np.ndarray):
            return np.array(x, copy=True)
        return x
    return tree_map(copy, value)


def _lift_captures(graph: Graph, strict: bool) -> None:
    """Tensors captured from closures and globals become constant inputs (their values now)."""
    mutated = {id(p) for p, _ in graph.mutations}
    for p in graph.inputs:
        if p.kind != "captured":
            continue
        users = [n for n in p.users]
        where = f" (first read by {users[0].target} at {users[0].location})" if users and users[0].location else ""
        if strict:
            raise GraphCaptureError(
                f"export(strict=True): the program reads a tensor that is not an input, a parameter or a buffer "
                f"(a closure or a global, shape {list(p.shape)}){where}; pass it as an argument or register it on "
                "the module, or export with strict=False to bake its current value in as a constant")
        if id(p) in mutated:
            raise CapturedStateWriteError(f"export: the program writes to a tensor captured from outside the model "
                                    f"(shape {list(p.shape)}){where}; only module buffers and parameters can be "
                                    "updated by an exported program")
        source = p.source
        p.kind = "constant"
        p.source = np.array(source._ops.concrete(source) if isinstance(source, Tensor) else source, copy=True)


def _state(model: Any, graph: Graph) -> tuple[dict[str, Any], dict[str, Any], list[InputSpec]]:
    persistent = set(model.state_dict().keys()) if is_module(model) and hasattr(model, "state_dict") else set()
    state: dict[str, Any] = {}
    constants: dict[str, Any] = {}
    specs: list[InputSpec] = []
    for p in graph.inputs:
        name = str(p.name)
        if p.kind == "parameter":
            state[name] = _copy_tensor(p.source, as_parameter=True)
            specs.append(InputSpec(InputKind.PARAMETER, TensorArgument(name), name))
        elif p.kind == "buffer":
            keep = name in persistent
            (state if keep else constants)[name] = _copy_tensor(p.source, as_parameter=False)
            specs.append(InputSpec(InputKind.BUFFER, TensorArgument(name), name, keep))
        elif p.kind == "constant":
            constants[name] = eager.wrap(np.array(p.source, copy=True))
            specs.append(InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(name), name))
        elif p.kind == "user_input":
            specs.append(InputSpec(InputKind.USER_INPUT, TensorArgument(name)))
        else:
            specs.append(InputSpec(InputKind.RANDOM_KEY, TensorArgument(name)))
    return state, constants, specs


def output_specs(graph: Graph, user_kinds: list[tuple[OutputKind, str | None]] | None = None) -> list[OutputSpec]:
    """Mutations (buffer, parameter) then user outputs (``user_kinds``: kind and target per user output;
    default: plain user outputs)."""
    specs = []
    for placeholder, value in graph.mutations:
        assert isinstance(value, Var)
        kind = OutputKind.PARAMETER_MUTATION if placeholder.kind == "parameter" else OutputKind.BUFFER_MUTATION
        specs.append(OutputSpec(kind, TensorArgument(value_name(value)), str(placeholder.name)))
    kinds = user_kinds or [(OutputKind.USER_OUTPUT, None)] * len(graph.outputs)
    for value, (kind, target) in zip(graph.outputs, kinds):
        assert isinstance(value, Var)
        specs.append(OutputSpec(kind, TensorArgument(value_name(value)), target))
    return specs


def module_call_entries(calls: list[ModuleCall]) -> list[ModuleCallEntry]:
    """The recorded submodule calls with values by name (nodes erased since are left out)."""
    kept = {id(c): i for i, c in enumerate(calls)}
    entries = []
    for call in calls:
        parent = call.parent
        while parent is not None and id(calls[parent]) not in kept:
            parent = calls[parent].parent
        defines = [value_name(n.out) for n in call.nodes if not n.erased]
        entries.append(ModuleCallEntry(call.path, parent, [value_name(v) for v in call.inputs], call.in_structure,
                                       [value_name(v) for v in call.outputs], call.out_structure, call.module_type,
                                       defines))
    return entries


def build_program(model: Any, arguments: Arguments, spec: ShapeSpec, captured: Captured,
                  example: tuple[tuple[Any, ...], dict[str, Any]], strict: bool,
                  user_kinds: list[tuple[OutputKind, str | None]] | None = None) -> ExportedProgram:
    """The :class:`ExportedProgram` of a settled trace (see the module docstring)."""
    graph = captured.graph
    _lift_captures(graph, strict)
    graph.eliminate_dead_code()
    graph.inputs.sort(key=lambda p: _ORDER[str(p.kind)])
    name_values(graph)
    state, constants, inputs = _state(model, graph)
    signature = ExportGraphSignature(inputs, output_specs(graph, user_kinds))
    typecheck(graph)
    in_tree = split_static(tuple(arguments.values))[1]
    call_spec = CallSpec(list(arguments.names), set(arguments.keyword), in_tree, captured.out_tree,
                         dict(arguments.defaults))
    name = getattr(model, "__name__", type(model).__name__)
    return ExportedProgram(graph, signature, state, constants, dict(spec.dims), call_spec,
                           example_inputs=(_copy_example(example[0]), _copy_example(example[1])),
                           module_call_graph=module_call_entries(captured.calls), constraints=spec.constraints(),
                           name=name)


__all__ = ["build_program", "export", "export_joint", "judge", "module_call_entries", "output_specs", "settle", "violation_error"]
