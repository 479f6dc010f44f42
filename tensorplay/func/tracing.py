"""Tracing a function to a graph, and interpreting graphs for the transforms.

Every transform does the same two steps:

1. :func:`trace` records ``f`` with a fresh :class:`~tensorplay.interpreters.graph.recorder.Recorder`.
   The recorder runs in *execute* mode when the inputs are concrete (eager tensors,
   or values of an outer execute-mode recording), so Python control flow on values
   works; otherwise (inside ``vmap``, or under a symbolic recording) it is symbolic.
   A tensor of an outer transform (or any lower-level interpreter) that ``f`` closes
   over becomes an implicit ``"captured"`` input of the graph.
2. The graph is interpreted with rules that emit into the *caller's interpreter*:
   the highest-level interpreter among the transform's inputs and the graph's
   captured tensors (eager, or an outer transform's recorder). That is what makes
   transforms nest: an inner transform's rules are recorded by the outer one.

:class:`Dispatch` routes each primitive to the highest-level interpreter among its
tensor arguments (the caller's when it has none): a sweep whose seeds belong to a
newer recording (``vmap`` of a ``vjp_fn``, the tangent graph of ``linearize``) then
computes everything that does not depend on them once, in the caller's interpreter.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from tensorplay.interpreters.eager import tape
from tensorplay.interpreters.eager.interpreter import eager
from tensorplay.interpreters.graph.evaluate import input_values
from tensorplay.interpreters.graph.ir import Graph, Literal, Var
from tensorplay.interpreters.graph.recorder import Recorder, foreign_aval
from tensorplay.spec.aval import Aval
from tensorplay.spec.errors import GraphCaptureError, MissingRuleError
from tensorplay.pytree import TreeSpec, tree_flatten, tree_unflatten
from tensorplay.ops import PRIMITIVE_NAMES
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]

class _Active(threading.local):
    """Recorders of the transforms now tracing in this thread, innermost last."""

    def __init__(self) -> None:
        self.stack: list[Recorder] = []


_ACTIVE = _Active()


# ---- interpreters ---------------------------------------------------------------------------------

def highest(values: Sequence[Any], default: Any = eager) -> Any:
    """The highest-level interpreter among the tensors in ``values`` (``default`` when none is higher)."""
    ops = default
    level = ops.level
    for x in values:
        if type(x) is Tensor and x._ops.level > level:
            ops = x._ops
            level = ops.level
    return ops


def graph_sources(graph: Graph) -> list[Any]:
    """The tensors a graph reads besides its user inputs (captured tensors, parameters, buffers)."""
    return [p.source for p in graph.inputs if p.kind != "user_input" and isinstance(p.source, Tensor)]


def concrete_value(x: AnyTensor) -> Any:
    """The numpy value of ``x`` when it has one without recording anything (eager, or a value of an
    execute-mode recording); ``None`` otherwise."""
    ops = x._ops
    if ops is eager:
        return x._data
    if isinstance(ops, Recorder) and ops.execute:
        return x._data.value
    return None


def in_symbolic_transform() -> bool:
    """True while a transform traces symbolically (values of that recording have no data)."""
    return any(not r.execute for r in _ACTIVE.stack)


class Dispatch:
    """An ``Ops`` that runs each primitive on the highest-level interpreter among its tensor arguments,
    or on ``default`` when it has none (see the module docstring)."""

    name = "dispatch"

    def __init__(self, default: Any, top: Any = None) -> None:
        self.default = default
        self.top = default if top is None else top
        self.level = default.level
        self.recorders = [r for r in (default, self.top) if isinstance(r, Recorder)]

    def __repr__(self) -> str:
        return f"<dispatch, default {self.default!r}>"


def _dispatching(target: str) -> Callable[..., Any]:
    def method(self: Dispatch, *inputs: Any, **params: Any) -> Any:
        ops = self.default
        level = ops.level
        for x in inputs:
            if type(x) is Tensor and x._ops.level > level:
                ops = x._ops
                level = ops.level
        return getattr(ops, target)(*inputs, **params)
    method.__name__ = method.__qualname__ = target
    return method


for _name in PRIMITIVE_NAMES:
    setattr(Dispatch, _name, _dispatching(_name))


def sweep_ops(caller: Any, seeds: Sequence[Any]) -> Any:
    """The ``ops`` a rule sweep uses: the caller's interpreter, or a :class:`Dispatch` over it when a
    seed (cotangent, tangent) belongs to a newer interpreter."""
    top = highest(seeds, caller)
    return caller if top is caller else Dispatch(caller, top)


# ---- tracing --------------------------------------------------------------------------------------

class Traced:
    """The graph of one call of a function.

    ``in_vars`` are the placeholders of the traced inputs (in order); ``out_vars`` the flat primary
    outputs (``out_spec`` their structure); ``aux_vars``/``aux_spec``/``aux_static`` the auxiliary
    output (tensor leaves become graph outputs, other leaves are kept as they are).
    """

    def __init__(self, graph: Graph, recorder: Recorder, in_vars: list[Var], out_vars: list[Any],
                 out_spec: TreeSpec, aux: tuple[list[Any], TreeSpec, list[Any]] | None) -> None:
        self.graph = graph
        self.recorder = recorder
        self.execute = recorder.execute
        self.in_vars = in_vars
        self.out_vars = out_vars
        self.out_spec = out_spec
        self.aux = aux
        self._needed: dict[tuple[int, ...], set[Var]] = {}

    def depends_on(self, wanted: Sequence[Var]) -> set[Var]:
        """The values of the graph that depend on any of ``wanted`` (placeholders), ``wanted`` included."""
        key = tuple(v.id for v in wanted)
        found = self._needed.get(key)
        if found is None:
            found = set(wanted)
            for node in self.graph.nodes:
                for v in node.inputs:
                    if v.__class__ is Var and v in found:
                        found.update(node.outputs)
                        break
            self._needed[key] = found
        return found


def trace(fn: Callable[..., Any], leaves: Sequence[Any], spec: TreeSpec, wrt: Sequence[int], transform: str, *,
          kwargs: dict[str, Any] | None = None, avals: Sequence[Aval] | None = None,
          has_aux: bool = False, symbolic: bool = False) -> Traced:
    """Record ``fn(*tree_unflatten(spec, leaves), **kwargs)`` with leaves ``wrt`` replaced by graph inputs.

    ``avals`` (one per ``wrt`` entry) overrides their abstract values (``vmap`` passes per-sample ones
    and ``symbolic=True``). Execute mode is used when every traced input is concrete and no enclosing
    transform records symbolically; if the function then captures a symbolic value, it is retraced
    symbolically.
    """
    values = [None if avals is not None else concrete_value(leaves[i]) for i in wrt]
    execute = not symbolic and not in_symbolic_transform() and all(v is not None for v in values)
    if execute:
        try:
            return _trace(fn, leaves, spec, wrt, transform, kwargs, avals, has_aux, values)
        except GraphCaptureError as error:
            if "symbolic recording" not in str(error):
                raise
    return _trace(fn, leaves, spec, wrt, transform, kwargs, avals, has_aux, None)


def _trace(fn: Callable[..., Any], leaves: Sequence[Any], spec: TreeSpec, wrt: Sequence[int], transform: str,
           kwargs: dict[str, Any] | None, avals: Sequence[Aval] | None, has_aux: bool,
           values: list[Any] | None) -> Traced:
    recorder = Recorder(execute=values is not None)
    new_leaves = list(leaves)
    in_vars: list[Var] = []
    for k, i in enumerate(wrt):
        aval = avals[k] if avals is not None else foreign_aval(leaves[i])
        t = recorder.input(f"x{i}", aval, "user_input", None if values is None else values[k])
        in_vars.append(t._data)
        new_leaves[i] = t
    args = tree_unflatten(spec, new_leaves)
    _ACTIVE.stack.append(recorder)
    try:
        result = fn(*args, **(kwargs or {}))
        if has_aux:
            if not (isinstance(result, tuple) and len(result) == 2):
                raise TypeError(f"{transform}(f, has_aux=True): f must return a pair (output, aux), got "
                                f"{type(result).__name__}")
            result, aux_tree = result
        out_leaves, out_spec = tree_flatten(result)
        out_vars: list[Any] = []
        for i, leaf in enumerate(out_leaves):
            if not isinstance(leaf, Tensor):
                raise TypeError(f"{transform}: the function must return tensors (or tuples, lists and dicts of "
                                f"tensors); output leaf {i} is a {type(leaf).__name__}")
            out_vars.append(recorder.lift(leaf))
        aux = None
        if has_aux:
            aux_leaves, aux_spec = tree_flatten(aux_tree)
            aux_vars = [recorder.lift(x) if isinstance(x, Tensor) else None for x in aux_leaves]
            aux = (aux_vars, aux_spec, aux_leaves)
    finally:
        _ACTIVE.stack.pop()
        recorder.close()
    graph = recorder.graph
    graph.outputs = list(out_vars) + ([v for v in aux[0] if v is not None] if aux is not None else [])
    return Traced(graph, recorder, in_vars, out_vars, out_spec, aux)


# ---- running graphs -------------------------------------------------------------------------------

def caller_of(traced: Traced, inputs: Sequence[Any]) -> Any:
    """The interpreter the graph's rules emit into: the highest level among ``inputs`` and the graph's
    captured tensors."""
    return highest(graph_sources(traced.graph), highest(inputs))


def forward(traced: Traced, ops: Any, inputs: Sequence[Any]) -> dict[Any, Any]:
    """Run the graph with ``ops`` and return the value of every variable (placeholders included).

    When ``ops`` is eager, the graph was recorded in execute mode and nothing is on the tape, the
    values computed while recording are reused (the forward pass runs once)."""
    graph = traced.graph
    values = input_values(graph, ops, inputs)
    env: dict[Any, Any] = dict(zip(graph.inputs, values))
    if ops is eager and traced.execute and not (
            tape.grad_enabled() and any(type(x) is Tensor and x._requires_grad for x in values)):
        wrap = eager.wrap
        for node in graph.nodes:
            out = node.outputs[0]
            if out.value is None:
                break
            env[out] = wrap(out.value)
        else:
            return env
    run_nodes(graph.nodes, ops, env)
    if graph.guards and isinstance(ops, Recorder):
        # Python control flow decided on values while tracing: the caller's recording depends on it too
        for guard in graph.guards:
            outer = env.get(guard.value)
            if type(outer) is Tensor and outer._ops is ops:
                ops.graph.guards.append(guard._replace(value=outer._data))
    return env


def run_nodes(nodes: Sequence[Any], ops: Any, env: dict[Any, Any]) -> None:
    """Evaluate ``nodes`` in order with ``ops``, reading and writing ``env``."""
    recording = isinstance(ops, Recorder)
    previous = ops.location_override if recording else None
    methods: dict[str, Any] = {}
    try:
        for node in nodes:
            target = node.target
            fn = methods.get(target)
            if fn is None:
                fn = methods[target] = getattr(ops, target)
            args = [env[v] if v.__class__ is Var else (None if v is None else v.value) for v in node.inputs]
            if recording:
                ops.location_override = node.location
            env[node.outputs[0]] = fn(*args, **node.params)
    finally:
        if recording:
            ops.location_override = previous


def read(env: dict[Any, Any], value: Any) -> Any:
    """The value of a graph output (a variable, or a literal)."""
    if value.__class__ is Var:
        return env[value]
    assert isinstance(value, Literal)
    return value.value


def aux_output(traced: Traced, env: dict[Any, Any]) -> Any:
    """The auxiliary output, rebuilt from ``env`` (tensor leaves) and the kept non-tensor leaves."""
    assert traced.aux is not None
    aux_vars, aux_spec, aux_leaves = traced.aux
    leaves = [leaf if v is None else read(env, v) for v, leaf in zip(aux_vars, aux_leaves)]
    return tree_unflatten(aux_spec, leaves)


def recorders_of(ops: Any) -> list[Recorder]:
    """The recorders a sweep with ``ops`` may record into (their ``location_override`` is set per node,
    so recorded nodes keep the location of the node they come from, without walking the stack)."""
    if isinstance(ops, Dispatch):
        return ops.recorders
    return [ops] if isinstance(ops, Recorder) else []


def _input_values(env: dict[Any, Any], node: Any) -> tuple[Any, ...]:
    """The values of ``node``'s inputs: variables read from ``env``, literals as recorded (``None`` kept)."""
    return tuple(env[v] if v.__class__ is Var else (None if v is None else v.value) for v in node.inputs)


def _rule_for(rules: dict[str, Any], node: Any, transform: str, kind: str, unsupported: str) -> Any:
    """The ``kind`` rule of ``node``'s primitive; a :class:`MissingRuleError` naming the primitive and where it
    was recorded when there is none."""
    rule = rules.get(node.target)
    if rule is None:
        raise MissingRuleError(f"{transform}: no {kind} rule for primitive '{node.target}' (recorded at "
                               f"{node.location}); {unsupported} through it is not supported")
    return rule


@contextmanager
def _node_locations(ops: Any) -> Iterator[Callable[[Any], None]]:
    """A sweep's ``at(node)``: the recorders it may record into (:func:`recorders_of`) record at ``node``'s
    location until the sweep ends, when their previous locations come back."""
    recorders = recorders_of(ops)
    previous = [r.location_override for r in recorders]

    def at(node: Any) -> None:
        for r in recorders:
            r.location_override = node.location

    try:
        yield at
    finally:
        for r, p in zip(recorders, previous):
            r.location_override = p


def backward(traced: Traced, env: dict[Any, Any], ops: Any, seeds: Sequence[tuple[Any, Any]],
             wanted: Sequence[Var], transform: str) -> list[Any]:
    """The reverse sweep: cotangents of ``wanted`` (placeholders) given cotangents ``seeds`` of graph
    values, with the vjp rules emitting into ``ops``.

    Only nodes that depend on ``wanted`` and received a cotangent are visited (a cotangent is never
    pushed through a node that received none); cotangents reaching one value are summed. An entry is
    ``None`` when no cotangent reached that input."""
    from tensorplay.rules.util import _NEEDED, set_needed_inputs
    from tensorplay.rules.vjp import VJP_RULES
    needed = traced.depends_on(wanted)
    ct: dict[Var, Any] = {}

    def add(v: Any, c: Any) -> None:
        if c is None or v.__class__ is not Var or v not in needed:
            return
        prev = ct.get(v)
        ct[v] = c if prev is None else ops.add(prev, c)

    for v, g in seeds:
        add(v, g)
    if not ct:
        return [None] * len(wanted)
    previous_mask = getattr(_NEEDED, "mask", None)
    try:
        with _node_locations(ops) as at:
            for node in reversed(traced.graph.nodes):
                out = node.outputs[0]
                g = ct.pop(out, None)
                if g is None:
                    continue
                rule = _rule_for(VJP_RULES, node, transform, "vjp", "differentiating")
                at(node)
                inputs = _input_values(env, node)
                # rules may skip the cotangents of inputs that do not depend on ``wanted``
                set_needed_inputs(tuple(v.__class__ is Var and v in needed for v in node.inputs))
                for v, c in zip(node.inputs, rule(ops, g, inputs, env[out], **node.params)):
                    add(v, c)
    finally:
        set_needed_inputs(previous_mask)
    return [ct.get(v) for v in wanted]


def tangent_sweep(traced: Traced, env: dict[Any, Any], ops: Any, tangents: dict[Var, Any],
                  transform: str) -> dict[Var, Any]:
    """The forward sweep of the jvp rules: tangents of every value reached from ``tangents`` (seeded on
    placeholders), emitted into ``ops``. Values not reached have no entry (a zero tangent)."""
    from tensorplay.rules.jvp import JVP_RULES
    tan: dict[Var, Any] = {v: t for v, t in tangents.items() if t is not None}
    with _node_locations(ops) as at:
        for node in traced.graph.nodes:
            ts = [tan.get(v) if v.__class__ is Var else None for v in node.inputs]
            if all(t is None for t in ts):
                continue
            rule = _rule_for(JVP_RULES, node, transform, "jvp", "forward-mode differentiation")
            at(node)
            out = node.outputs[0]
            t_out = rule(ops, _input_values(env, node), tuple(ts), env[out], **node.params)
            if t_out is not None:
                tan[out] = t_out
    return tan


def zeros_like(ops: Any, x: AnyTensor) -> AnyTensor:
    """Zeros with the shape and dtype of ``x`` (under ``ops``)."""
    return ops.full(shape=tuple(x.shape), value=0.0, dtype=x.dtype.name)  # type: ignore[no-any-return]


def ones_like(ops: Any, x: AnyTensor) -> AnyTensor:
    """Ones with the shape and dtype of ``x`` (under ``ops``)."""
    return ops.full(shape=tuple(x.shape), value=1.0, dtype=x.dtype.name)  # type: ignore[no-any-return]


__all__ = ["Dispatch", "Traced", "backward", "caller_of", "concrete_value", "forward", "highest", "read",
           "run_nodes", "sweep_ops", "tangent_sweep", "trace"]
