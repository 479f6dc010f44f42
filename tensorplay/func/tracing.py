"""Tracing a function to a graph, and interpreting graphs for the transforms.

Every transform does the same two steps:

1. :func:`trace_for_transform` records ``f`` with a fresh :class:`~tensorplay.interpreters.graph.recorder.Recorder`.
   The recorder runs in *execute* mode when the inputs are concrete (eager tensors,
   or values of an outer execute-mode recording), so Python control flow on values
   works; otherwise (inside ``vmap``, or under a symbolic recording) it is symbolic.
   A tensor of an outer transform (or any lower-level interpreter) that ``f`` closes
   over becomes an implicit ``"captured"`` input of the graph.
2. The graph is interpreted with rules that emit into the *caller's interpreter*:
   the highest-level interpreter among the transform's inputs and the graph's
   captured tensors (eager, or an outer transform's recorder). That is what makes
   transforms nest: an inner transform's rules are recorded by the outer one.

``grad`` called inside a symbolic transform's trace (``vmap(grad(f))``) records ``f`` straight into that trace
(:func:`trace_inline`): the graph it would record of its own is exactly what the second step replays there.

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

from tensorplay import compile_hooks
from tensorplay.errors import ArgumentTypeError
from tensorplay.interpreters.eager import tape
from tensorplay.interpreters.eager.interpreter import eager
from tensorplay.interpreters.graph.evaluate import apply_mutations, input_values
from tensorplay.interpreters.graph.ir import Graph, Literal, Var
from tensorplay.interpreters.graph.recorder import Recorder, foreign_aval
from tensorplay.interpreters.graph.batched import map_over_lead
from tensorplay.interpreters.graph.walk import Walker
from tensorplay.interpreter import BaseInterpreter
from tensorplay.recording import creating_in, creating_interpreter
from tensorplay.spec.aval import Aval
from tensorplay.spec.errors import GraphCaptureError, MissingRuleError
from tensorplay.pytree import TreeSpec, tree_flatten, tree_unflatten
from tensorplay.ops import PRIMITIVE_NAMES
from tensorplay.tensor import Tensor, highest_interpreter

AnyTensor = Tensor[*tuple[Any, ...]]

class _Active(threading.local):
    """Recorders of the transforms now tracing in this thread, innermost last."""

    def __init__(self) -> None:
        self.stack: list[Recorder] = []


_ACTIVE = _Active()

_MERGE = [True]
"""Whether transform traces merge repeated calls (:class:`~tensorplay.interpreters.graph.recorder.Recorder`'s
``merge``); a switch for comparing with unmerged traces."""


# ---- interpreters ---------------------------------------------------------------------------------

def highest(values: Sequence[Any], default: Any = eager) -> Any:
    """The interpreter that runs an operation on ``values`` (:func:`tensorplay.tensor.highest_interpreter`,
    eager by default)."""
    return highest_interpreter(values, default)


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


class Dispatch(BaseInterpreter):
    """An ``Ops`` that runs each primitive on the highest-level interpreter among its tensor arguments,
    or on ``default`` when it has none (see the module docstring)."""

    name = "dispatch"

    def __init__(self, default: Any, top: Any = None) -> None:
        self.default = default
        self.top = default if top is None else top
        self.level = default.level
        self.recorders = [r for r in (default, self.top) if isinstance(r, Recorder)]
        self.location_targets = self.recorders

    def __repr__(self) -> str:
        return f"<dispatch, default {self.default!r}>"

    def map(self, lead: int, x: Any, f: Callable[[Any], Any]) -> Any:
        """See :func:`tensorplay.prefix.map`."""
        return map_over_lead(self, lead, x, f)

    def random_key(self) -> Any:
        """A key of the newest interpreter this dispatcher emits into."""
        return self.top.random_key()

    def constant(self, value: Any) -> Any:
        """A constant of the default interpreter."""
        return self.default.constant(value)


def _dispatching(target: str) -> Callable[..., Any]:
    def method(self: Dispatch, *inputs: Any, **params: Any) -> Any:
        return getattr(highest_interpreter(inputs, self.default), target)(*inputs, **params)
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


def trace_for_transform(fn: Callable[..., Any], leaves: Sequence[Any], spec: TreeSpec, wrt: Sequence[int],
                        transform: str, *,
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
    # a trace made while a capture runs becomes a cached graph: merging what the sweeps emit pays at every call
    # executing, it computes with the sizes the enclosing recording bound to its symbolic dims (``tp.compile``
    # with ``dynamic=True``: the traced values' shapes, and sizes read from them, are symbolic)
    binding = getattr(creating_interpreter(None), "binding", None) if values is not None else None
    recorder = Recorder(execute=values is not None, binding=binding, merge=_MERGE[0],
                        merge_emitted=compile_hooks.handler() is not None)
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
        with creating_in(recorder):
            result = fn(*args, **(kwargs or {}))
        out_vars, out_spec, aux = _outputs(recorder, result, transform, has_aux)
    finally:
        _ACTIVE.stack.pop()
        recorder.close()
    graph = recorder.graph
    graph.outputs = list(out_vars) + ([v for v in aux[0] if v is not None] if aux is not None else [])
    return Traced(graph, recorder, in_vars, out_vars, out_spec, aux)


def _outputs(recorder: Recorder, result: Any, transform: str,
             has_aux: bool) -> tuple[list[Any], TreeSpec, tuple[list[Any], TreeSpec, list[Any]] | None]:
    """``(out_vars, out_spec, aux)`` of :class:`Traced` for what the traced function returned."""
    if has_aux:
        if not (isinstance(result, tuple) and len(result) == 2):
            raise ArgumentTypeError(f"{transform}(f, has_aux=True): f must return a pair (output, aux), got "
                                    f"{type(result).__name__}")
        result, aux_tree = result
    out_leaves, out_spec = tree_flatten(result)
    out_vars: list[Any] = []
    for i, leaf in enumerate(out_leaves):
        if not isinstance(leaf, Tensor):
            raise ArgumentTypeError(f"{transform}: the function must return tensors (or tuples, lists and dicts of "
                                    f"tensors); output leaf {i} is a {type(leaf).__name__}")
        out_vars.append(recorder.lift(leaf))
    aux = None
    if has_aux:
        aux_leaves, aux_spec = tree_flatten(aux_tree)
        aux_vars = [recorder.lift(x) if isinstance(x, Tensor) else None for x in aux_leaves]
        aux = (aux_vars, aux_spec, aux_leaves)
    return out_vars, out_spec, aux


class _RecordedValues(dict[Any, Any]):
    """The environment of an inline trace (:func:`trace_inline`): every variable of the recording as a
    tensor of its recorder, made on first read."""

    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __missing__(self, var: Var) -> AnyTensor:
        made = self[var] = Tensor(self.recorder, var)
        return made


class InlineTrace:
    """A function recorded straight into the symbolic recording it was called in (see :func:`trace_inline`):
    ``traced`` is its :class:`Traced` (its graph lists the nodes the call recorded, which belong to the
    recording; its ``in_vars`` are the stand-ins of the differentiated inputs), ``values`` the environment its
    sweeps read (each variable as a tensor of the recording)."""

    traced: Traced

    def __init__(self, recorder: Recorder, stand_ins: list[AnyTensor], leaves: list[Any]) -> None:
        self.recorder = recorder
        self.values = _RecordedValues(recorder)
        self.in_vars: list[Var] = [t._data for t in stand_ins]
        self._stand_ins = stand_ins
        self._leaves = leaves
        self._real: dict[Var, Var] = {}

    def close(self) -> None:
        """Make the recording read the differentiated inputs themselves where it read their stand-in
        placeholders, and drop those placeholders (the sweeps that needed them are done). Idempotent."""
        if self._real:
            return  # closed already
        recorder = self.recorder
        graph = recorder.graph
        finished = Recorder()
        finished.close()
        for t, p, leaf in zip(self._stand_ins, self.in_vars, self._leaves):
            if recorder.capture_as(p, leaf):  # an input from outside the recording: the stand-in captures it
                real = p
            else:
                real = leaf._data if leaf._ops is recorder else recorder.lift(leaf)
                graph.replace_all_uses(p, real)
                graph.inputs.remove(p)
            self._real[p] = real
            # the function's own handle on its input ends with the call, as it does with a graph of its own: a
            # use of it afterwards is refused by a finished recording (newer than this one, so it is asked)
            t._ops = finished  # type: ignore[assignment]  # a Recorder is an Interpreter

    def result(self, x: Any) -> Any:
        """``x`` (a result of the sweeps) reading the inputs themselves, not their dropped stand-ins."""
        recorder: Any = self.recorder
        if isinstance(x, Tensor) and x._ops is recorder and x._data in self._real:
            return Tensor(recorder, self._real[x._data])
        return x


def trace_inline(fn: Callable[..., Any], leaves: Sequence[Any], spec: TreeSpec, wrt: Sequence[int], transform: str,
                 *, kwargs: dict[str, Any] | None = None, has_aux: bool = False) -> InlineTrace | None:
    """``fn(*tree_unflatten(spec, leaves), **kwargs)`` recorded straight into the symbolic transform
    recording it is called in (``grad`` inside ``vmap``'s trace), leaves ``wrt`` replaced by stand-in
    placeholders of that recording; ``None`` when the call is not in one (no innermost symbolic transform
    recording that is also where tensors are created, or no leaf is a value of it): then
    :func:`trace_for_transform` records a graph of its own.

    What :func:`trace_for_transform` followed by :func:`forward` into that recording records, without
    recording the function into a graph of its own first and replaying it. The transform's sweeps run over
    the nodes the call recorded; then :meth:`InlineTrace.close` puts the inputs themselves in place of the
    stand-ins."""
    stack = _ACTIVE.stack
    if not stack:
        return None
    recorder = stack[-1]
    graph = recorder.graph
    if (recorder.execute or recorder.closed or graph._anchor is not None or graph._pending or graph._erased
            or creating_interpreter(None) is not recorder
            or not any(isinstance(x, Tensor) and x._ops is recorder for x in leaves)):
        return None
    start = len(graph._nodes)
    new_leaves = list(leaves)
    stand_ins: list[AnyTensor] = []
    for i in wrt:
        t = recorder.input(f"{transform}_input", foreign_aval(leaves[i]), "user_input")
        stand_ins.append(t)
        new_leaves[i] = t
    inline = InlineTrace(recorder, stand_ins, [leaves[i] for i in wrt])
    try:
        result = fn(*tree_unflatten(spec, new_leaves), **(kwargs or {}))
        out_vars, out_spec, aux = _outputs(recorder, result, transform, has_aux)
    except BaseException:
        inline.close()  # the recording stays consistent for a caller that catches the error
        raise
    segment = Graph()
    segment.nodes = graph._nodes[start:]
    inline.traced = Traced(segment, recorder, inline.in_vars, out_vars, out_spec, aux)
    return inline


# ---- running graphs -------------------------------------------------------------------------------

def caller_of(traced: Traced, inputs: Sequence[Any]) -> Any:
    """The interpreter the graph's rules emit into: the highest level among ``inputs`` and the graph's
    captured tensors."""
    return highest(graph_sources(traced.graph), highest(inputs))


def forward(traced: Traced, ops: Any, inputs: Sequence[Any]) -> dict[Any, Any]:
    """Run the graph with ``ops`` and return the value of every variable (placeholders included).

    When ``ops`` is eager, the graph was recorded in execute mode and nothing is on the tape, the
    values computed while recording are reused (the forward pass runs once). State the function updates
    (batch-norm running statistics: ``graph.mutations``) is written back, once per call, as eagerly."""
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
            _write_state(graph, ops, values, env)
            return env
    if type(ops) is Recorder and not ops.execute and not traced.execute and not graph.symbols:
        ops.replay(graph.nodes, env)  # the nodes re-recorded as they are (a trace inside vmap's)
    else:
        run_nodes(graph.nodes, ops, env)
    _write_state(graph, ops, values, env)
    if graph.guards and isinstance(ops, Recorder):
        # Python control flow decided on values while tracing: the caller's recording depends on it too
        for guard in graph.guards:
            outer = env.get(guard.value)
            if type(outer) is Tensor and outer._ops is ops:
                ops.graph.guards.append(guard._replace(value=outer._data))
    return env


def _write_state(graph: Graph, ops: Any, values: Sequence[Any], env: dict[Any, Any]) -> None:
    """Write the graph's state mutations back into the tensors they belong to (see ``forward``)."""
    if graph.mutations:
        apply_mutations(graph, ops, values, [read(env, v) for _, v in graph.mutations])


def run_nodes(nodes: Sequence[Any], ops: Any, env: dict[Any, Any]) -> None:
    """Evaluate ``nodes`` in order with ``ops``, reading and writing ``env``."""
    Walker(ops).run(nodes, env)


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


def _rule_for(rules: dict[str, Any], node: Any, transform: str, kind: str, unsupported: str) -> Any:
    """The ``kind`` rule of ``node``'s primitive; a :class:`MissingRuleError` naming the primitive and where it
    was recorded when there is none."""
    rule = rules.get(node.target)
    if rule is None:
        raise MissingRuleError(f"{transform}: no {kind} rule for primitive '{node.target}' (recorded at "
                               f"{node.location}); {unsupported} through it is not supported")
    return rule


class _ReverseSweep(Walker):
    """Walks the graph backwards pushing cotangents through the vjp rules (see :func:`backward`)."""

    def __init__(self, traced: Traced, env: dict[Any, Any], ops: Any, needed: set[Var], transform: str) -> None:
        from tensorplay.rules.util import _NEEDED
        from tensorplay.rules.vjp import VJP_RULES
        super().__init__(ops)
        self.values = env
        self.needed = needed
        self.transform = transform
        self.rules = VJP_RULES
        self._mask = _NEEDED  # where the rules read which inputs want a cotangent (set_needed_inputs)

    def add(self, ct: dict[Any, Any], v: Any, c: Any) -> None:
        """Add cotangent ``c`` to value ``v`` (nothing for literals, ``None`` or values nobody asked for)."""
        if c is None or v.__class__ is not Var or v not in self.needed:
            return
        prev = ct.get(v)
        ct[v] = c if prev is None else self.ops.add(prev, c)

    def step(self, node: Any, ct: dict[Any, Any]) -> None:
        out = node.outputs[0]
        g = ct.pop(out, None)
        if g is None:
            return
        rule = self.rules.get(node.target) or _rule_for(self.rules, node, self.transform, "vjp", "differentiating")
        # rules may skip the cotangents of inputs that do not depend on ``wanted`` (set_needed_inputs)
        needed = self.needed
        node_inputs = node.inputs
        mask = tuple([v.__class__ is Var and v in needed for v in node_inputs])
        self._mask.mask = mask
        values = self.values
        if node.has_sym:
            args, params = self.inputs(node, values), self.params(node)
        else:  # what inputs() and params() return without symbolic sizes
            args = [values[v] if v.__class__ is Var else (None if v is None else v.value) for v in node_inputs]
            params = node.params
        cts = rule(self.ops, g, tuple(args), values[out], **params)
        for v, c, wanted in zip(node_inputs, cts, mask):
            if wanted and c is not None:  # what add() does, for the inputs the mask marks
                prev = ct.get(v)
                ct[v] = c if prev is None else self.ops.add(prev, c)


class _TangentSweep(Walker):
    """Walks the graph forwards pushing tangents through the jvp rules (see :func:`tangent_sweep`)."""

    def __init__(self, env: dict[Any, Any], ops: Any, transform: str) -> None:
        from tensorplay.rules.jvp import JVP_RULES
        super().__init__(ops)
        self.values = env
        self.transform = transform
        self.rules = JVP_RULES

    def step(self, node: Any, tan: dict[Any, Any]) -> None:
        ts = [tan.get(v) if v.__class__ is Var else None for v in node.inputs]
        if all(t is None for t in ts):
            return
        rule = _rule_for(self.rules, node, self.transform, "jvp", "forward-mode differentiation")
        out = node.outputs[0]
        t_out = rule(self.ops, tuple(self.inputs(node, self.values)), tuple(ts), self.values[out],
                     **self.params(node))
        if t_out is not None:
            tan[out] = t_out


def backward(traced: Traced, env: dict[Any, Any], ops: Any, seeds: Sequence[tuple[Any, Any]],
             wanted: Sequence[Var], transform: str) -> list[Any]:
    """The reverse sweep: cotangents of ``wanted`` (placeholders) given cotangents ``seeds`` of graph
    values, with the vjp rules emitting into ``ops``.

    Only nodes that depend on ``wanted`` and received a cotangent are visited (a cotangent is never
    pushed through a node that received none); cotangents reaching one value are summed. An entry is
    ``None`` when no cotangent reached that input."""
    from tensorplay.rules.util import _NEEDED, set_needed_inputs
    sweep = _ReverseSweep(traced, env, ops, traced.depends_on(wanted), transform)
    ct: dict[Var, Any] = {}
    for v, g in seeds:
        sweep.add(ct, v, g)
    if not ct:
        return [None] * len(wanted)
    previous_mask = getattr(_NEEDED, "mask", None)
    try:
        sweep.run(traced.graph.nodes, ct, reverse=True)
    finally:
        set_needed_inputs(previous_mask)
    return [ct.get(v) for v in wanted]


def tangent_sweep(traced: Traced, env: dict[Any, Any], ops: Any, tangents: dict[Var, Any],
                  transform: str) -> dict[Var, Any]:
    """The forward sweep of the jvp rules: tangents of every value reached from ``tangents`` (seeded on
    placeholders), emitted into ``ops``. Values not reached have no entry (a zero tangent)."""
    tan: dict[Var, Any] = {v: t for v, t in tangents.items() if t is not None}
    return _TangentSweep(env, ops, transform).run(traced.graph.nodes, tan)


def zeros_like(ops: Any, x: AnyTensor) -> AnyTensor:
    """Zeros with the shape and dtype of ``x`` (under ``ops``)."""
    return ops.full(shape=tuple(x.shape), value=0.0, dtype=x.dtype.name)  # type: ignore[no-any-return]


def ones_like(ops: Any, x: AnyTensor) -> AnyTensor:
    """Ones with the shape and dtype of ``x`` (under ``ops``)."""
    return ops.full(shape=tuple(x.shape), value=1.0, dtype=x.dtype.name)  # type: ignore[no-any-return]


__all__ = ["Dispatch", "InlineTrace", "Traced", "backward", "caller_of", "concrete_value", "forward", "highest",
           "read", "run_nodes", "sweep_ops", "tangent_sweep", "trace_for_transform", "trace_inline"]
