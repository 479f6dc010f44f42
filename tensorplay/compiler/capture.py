"""Capture: run a function once with graph-recorder tensors and return its graph and the plan to run it.

:func:`capture` makes each tensor argument a ``"user_input"`` placeholder (symbolic dims where the
caller asks for them), each tensor the function reads from outside (:mod:`.sources`) a state
placeholder read again at every call, and runs the function in execute mode under a
:class:`CaptureHandler` (through :mod:`tensorplay.compile_hooks`), so an optimizer step, a random
factory or a Python decision on a symbolic size becomes part of the graph or of its guards.

Capture runs the program but is not a call: arguments, module parameters and buffers, ``.grad``
attributes, optimizer state and the global random generator are left as they were (checked: a draw
from the global generator during capture is refused, since its numbers would be baked into the
graph).

The result, :class:`Captured`, is the graph (outputs: the user's tensors, then the values of
side effects, then the values of data guards) and the plans that map placeholders to where their
values come from at call time and effect outputs to where they go.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optree

from tensorplay import compile_hooks, random_state
from tensorplay.recording import creating_in, recording
from tensorplay.interpreters.eager import tape
from tensorplay.interpreters.graph.ir import Graph, Location, Var
from tensorplay.interpreters.graph.recorder import foreign_aval, user_location
from tensorplay.compiler.recording import CaptureRecorder, Respecialize
from tensorplay.compiler.sources import Sources, ValueSource
from tensorplay.spec.aval import Aval
from tensorplay.spec.errors import GraphCaptureError
from tensorplay.symbolic import SymDim, deciding
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


@dataclass(frozen=True)
class SizeGuard:
    """A Python decision on a symbolic size during capture: ``expr op other`` gave ``outcome`` (for
    ``op == "value"``: the size ``expr`` had, read with ``int()``); ``what`` and ``location`` say where."""

    expr: SymDim
    op: str
    other: Any
    outcome: Any
    what: str
    location: Location | None

    def holds(self, binding: dict[str, int]) -> bool:
        """Whether the same decision is taken with the sizes of ``binding``."""
        value = self.expr.evaluate(binding)
        if self.op == "value":
            return bool(value == self.outcome)
        other = self.other.evaluate(binding) if isinstance(self.other, SymDim) else self.other
        return bool(_COMPARE[self.op](value, other) == self.outcome)

    def describe(self) -> str:
        """``int() of a size: Batch == 32`` / ``Batch > 10 was True``."""
        if self.op == "value":
            return f"{self.what}: {self.expr} was {self.outcome}"
        left: Any = self.expr
        right: Any = self.other
        linear = self.expr.linear_in() if right == 0 else None
        if linear is not None and linear[1] == 1:  # ``B - 4 > 0`` reads ``B > 4``
            left, right = linear[0], -linear[2]
        return f"{left} {self.op} {right} was {self.outcome}"


@dataclass(frozen=True)
class Effect:
    """Where a side-effect output of the graph goes after a call.

    ``kind``: ``"copy_arg"`` (written into argument leaf ``index`` in place), ``"set_grad"`` (the new
    ``.grad`` of ``target``: ``("arg", leaf)`` or ``("state", source)``; ``has_value`` False means
    ``None``), ``"opt_state"`` / ``"opt_step"`` (an optimizer's state entry ``key`` for parameter source
    ``index``: an array, or a step count), ``"opt_call"`` (``optimizer`` is a callable run after each call:
    optimizer state computed in Python, such as NAdam's momentum product).
    """

    kind: str
    target: tuple[str, int]
    has_value: bool = True
    key: str = ""
    optimizer: Any = None


@dataclass
class InputPlan:
    """Where a placeholder's value comes from at each call: ``("arg", leaf)``, ``("arg_grad", leaf)``,
    ``("state", source)``, ``("state_grad", source)``, ``("key",)``, ``("tensor", tensor)`` (a tensor
    met while capturing, read again each call), ``("const", array)``, ``("cotangent", k)`` (training
    regions) or an optimizer entry (``("opt_state", source, key, optimizer)``, ``("opt_scalar", reader)``)."""

    kind: str
    index: int = 0
    ref: Any = None
    key: str = ""


@dataclass
class Captured:
    """The result of :func:`capture` (see the module docstring).

    A training region (``training``: grad mode on, no ``backward()`` inside, and float outputs that
    depend on leaves requiring grad) also holds the reverse sweep recorded after the first
    ``n_forward_nodes`` nodes: ``cotangents`` (placeholders, one per output in ``differentiable``)
    and ``leaf_grads`` (one per ``grad_leaves`` entry, ``None`` where no cotangent reaches it).
    """

    graph: Graph
    inputs: list[InputPlan]
    n_outputs: int
    out_spec: Any
    out_static: list[Any]
    out_is_tensor: list[bool]
    effects: list[Effect]
    size_guards: list[SizeGuard]
    backward_inside: bool
    value_guards: list[ValueSource] = field(default_factory=list)
    grad_free: set[int] = field(default_factory=set)
    grad_leaves: list[tuple[str, int]] = field(default_factory=list)
    extra_tensors: list[AnyTensor] = field(default_factory=list)
    n_forward_nodes: int = 0
    training: bool = False
    differentiable: list[int] = field(default_factory=list)
    cotangents: list[Var] = field(default_factory=list)
    leaf_grads: list[Var | None] = field(default_factory=list)

    @property
    def n_effects(self) -> int:
        """Effect outputs (after the user's outputs)."""
        return sum(1 for e in self.effects if e.has_value)


class CaptureHandler:
    """What :mod:`tensorplay.compile_hooks` hands to the library while capturing (see the module
    docstring of :mod:`tensorplay.compile_hooks`)."""

    def __init__(self, recorder: CaptureRecorder, binding: dict[str, int]) -> None:
        self.recorder = recorder
        self.binding = binding
        self.size_guards: list[SizeGuard] = []
        self._decisions: set[tuple[Any, ...]] = set()
        self.grad_saved: dict[int, tuple[AnyTensor, Any]] = {}
        self.optimizer_effects: list[tuple[Var | None, Effect]] = []
        self.opt_inputs: dict[int, InputPlan] = {}
        # tensors the capture rebinds to recorder values that were not swapped in as state (a parameter of a
        # module passed as an argument, updated by optimizer.step()): restored when the capture ends
        self.rebound: list[tuple[Any, Any, Any]] = []
        self.value_guards: list[ValueSource] = []
        self.thread = threading.get_ident()
        self.grad_inputs: dict[int, AnyTensor] = {}  # leaf id -> the input standing for its .grad
        self.grad_free: set[int] = set()  # ids of leaves whose incoming .grad the function drops unread

    # ---- .grad bookkeeping ------------------------------------------------------------------------------
    def save_grad(self, tensor: AnyTensor) -> None:
        """Remember ``tensor``'s ``.grad`` before capture first changes it (restored afterwards)."""
        if id(tensor) not in self.grad_saved:
            self.grad_saved[id(tensor)] = (tensor, tensor._grad)

    def restore_grads(self) -> list[tuple[AnyTensor, Any]]:
        """Put every changed ``.grad`` back; returns ``(tensor, value at the end of capture)`` pairs."""
        final = []
        for tensor, original in self.grad_saved.values():
            final.append((tensor, tensor._grad))
            tensor._grad = original
        return final

    # ---- hooks ----------------------------------------------------------------------------------------
    def zero_grad(self, params: Sequence[AnyTensor], set_to_none: bool) -> None:
        """``zero_grad`` of a module or an optimizer, on the recorder's view of the gradients."""
        for p in params:
            if set_to_none and not self.recorder.graph.nodes:
                # dropped before anything ran: the graph is the same whether or not the call brings a .grad
                self.grad_free.add(id(p))
            if p._grad is None:
                continue
            self.save_grad(p)
            if set_to_none:
                p._grad = None
            else:
                var_shape = tuple(p._grad.shape)
                p._grad = self.recorder.full(shape=var_shape, value=0.0, dtype=p._grad.dtype.name)

    def optimizer_step(self, optimizer: Any, closure: Any) -> Any:
        """``optimizer.step()``: the update recorded (see :mod:`tensorplay.compiler.optimizers`)."""
        from tensorplay.compiler.optimizers import record_step
        loss = None
        if closure is not None:
            with tape.enable_grad():
                loss = closure()
        record_step(self, optimizer)
        return loss

    def random_key(self) -> AnyTensor:
        """A ``"random_key"`` input: a fresh key at every call."""
        return self.recorder.random_key()

    def eager_draw(self) -> None:
        """A draw from the global generator while capturing (an eager random operation): refused."""
        raise GraphCaptureError(
            "a random number was drawn from the global generator while the compiled function was captured "
            f"(an eager random operation on a tensor that is not an input, e.g. dropout or nn.init on a tensor "
            f"made inside the function){_at(user_location(3))}; its numbers would be the same at every call. "
            "Draw random numbers from the inputs' operations (tp.randn, dropout on an input or a parameter) or "
            "pass them in as an argument")

    def dim_value(self, dim: SymDim, what: str) -> int:
        """``int()`` of a symbolic size in Python code: its captured value, guarded exactly."""
        if self.recorder.internal:
            raise Respecialize(frozenset(dim.free_symbols), f"{what} inside a shape rule")
        value = dim.evaluate(self.binding)
        self._guard_size(SizeGuard(dim, "value", None, value, what, user_location(3)))
        return value

    def _guard_size(self, guard: SizeGuard) -> None:
        """Record ``guard`` unless the same decision is recorded already (a module called in a loop
        repeats its checks; every call of the compiled code checks each guard once)."""
        decision = (guard.expr, guard.op, guard.other, guard.outcome)
        if decision not in self._decisions:
            self._decisions.add(decision)
            self.size_guards.append(guard)

    def decide(self, diff: SymDim, op: str) -> bool | None:
        """``diff op 0`` for a comparison of symbolic sizes (:func:`tensorplay.symbolic.deciding`), in the
        capturing thread only: decided on the captured sizes and guarded."""
        if threading.get_ident() != self.thread:
            return None
        try:
            return self.decide_dim(diff, op, 0)
        except KeyError:  # a symbol of another recording
            return None

    def decide_dim(self, dim: SymDim, op: str, other: Any) -> bool:
        """A comparison of a symbolic size in Python code: decided on the captured sizes and guarded."""
        if op == "==" and self.recorder.structural:
            return False  # a vjp rule's shape comparison: structural, the general code fits every size
        if self.recorder.internal:
            if op == "==":
                return False  # shape rules compare structurally; a mismatch respecializes the dims
            symbols = set(dim.free_symbols) | (set(other.free_symbols) if isinstance(other, SymDim) else set())
            raise Respecialize(frozenset(symbols), f"{dim} {op} {other} inside a shape rule")
        left = dim.evaluate(self.binding)
        right = other.evaluate(self.binding) if isinstance(other, SymDim) else other
        outcome = bool(_COMPARE[op](left, right))
        self._guard_size(SizeGuard(dim, op, other, outcome, f"{dim} {op} {other}", user_location(3)))
        return outcome


def _at(location: Location | None) -> str:
    return f" (at {location})" if location is not None else ""


@dataclass
class Call:
    """One call of the compiled function, as capture needs it."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    leaves: list[Any]
    spec: Any
    names: list[str]
    grad_enabled: bool


def _rebuild_args(call: Call, new_leaves: list[Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    args, kwargs = optree.tree_unflatten(call.spec, new_leaves)
    return tuple(args), dict(kwargs)


def capture(fn: Callable[..., Any], call: Call, sources: Sources, symbols: dict[tuple[int, int], SymDim],
            binding: dict[str, int]) -> Captured:
    """Record ``fn`` on ``call`` (see the module docstring); ``symbols`` makes axis ``(leaf, axis)`` of a
    tensor argument symbolic, ``binding`` gives the symbols' sizes in this call."""
    recorder = CaptureRecorder(binding=dict(binding), symbolic=bool(symbols))
    handler = CaptureHandler(recorder, dict(binding))
    recorder.on_grad_write = handler.save_grad
    graph = recorder.graph
    plans: list[InputPlan] = []
    arg_tensors: dict[int, tuple[AnyTensor, Var]] = {}

    new_leaves: list[Any] = []
    for i, leaf in enumerate(call.leaves):
        if not isinstance(leaf, Tensor):
            new_leaves.append(leaf)
            continue
        base = foreign_aval(leaf)
        shape = tuple(symbols.get((i, axis), size) for axis, size in enumerate(base.shape))
        t = recorder.input(call.names[i], Aval(shape, base.dtype), "user_input", leaf._data)
        plans.append(InputPlan("arg", i))
        var: Var = t._data
        as_data = getattr(leaf, "_as_data_input", None)  # an Index: a bounded integer data input
        if as_data is not None:
            t = as_data(t)
        t._requires_grad = leaf._requires_grad
        if leaf._requires_grad:
            recorder.grad_leaf[var] = t
        if leaf._grad is not None and leaf._requires_grad:
            g = recorder.input(f"{call.names[i]}_grad", foreign_aval(leaf._grad), "captured", leaf._grad._data)
            plans.append(InputPlan("arg_grad", i))
            t._grad = g
            handler.grad_inputs[id(t)] = g
        arg_tensors[i] = (t, var)
        new_leaves.append(t)

    state_index: dict[int, int] = {}
    for j, src in enumerate(sources.tensors):
        var = recorder.register_state(src.name, src.tensor, src.kind)
        plans.append(InputPlan("state", j))
        state_index[id(src.tensor)] = j
        if src.tensor._requires_grad and src.tensor._data.dtype.kind == "f":
            recorder.grad_leaf[var] = src.tensor
    for j, src in enumerate(sources.tensors):
        tensor = src.tensor
        if tensor._grad is not None and tensor._requires_grad:
            handler.save_grad(tensor)
            g = recorder.input(f"{src.name}.grad", foreign_aval(tensor._grad), "captured", tensor._grad._data)
            plans.append(InputPlan("state_grad", j))
            tensor._grad = g
            handler.grad_inputs[id(tensor)] = g
    handler.state_index = state_index  # type: ignore[attr-defined]
    handler.sources = sources  # type: ignore[attr-defined]
    handler.plans = plans  # type: ignore[attr-defined]

    seed_before = random_state.initial_seed()
    saved = recorder.swap_in_state(("parameter", "buffer", "captured"))
    args, kwargs = _rebuild_args(call, new_leaves)
    try:
        with compile_hooks.installed(handler), recording(recorder), creating_in(recorder), \
                deciding(handler.decide):
            result = fn(*args, **kwargs)
    finally:
        recorder.restore_state(saved)
        recorder.restore_state(handler.rebound[::-1])
        final_grads = handler.restore_grads()
    if random_state.initial_seed() != seed_before:
        raise GraphCaptureError(
            "tp.manual_seed was called inside the compiled function: it would run once, when the function is "
            "captured, not at every call. Seed the generator outside the compiled function")
    try:
        return _finish(recorder, handler, call, result, plans, arg_tensors, final_grads, state_index)
    finally:
        recorder.close()


def _output_leaves(result: Any) -> tuple[list[Any], Any]:
    leaves, spec = optree.tree_flatten(result, none_is_leaf=True)
    return list(leaves), spec


def _finish(recorder: CaptureRecorder, handler: CaptureHandler, call: Call, result: Any, plans: list[InputPlan],
            arg_tensors: dict[int, tuple[AnyTensor, Var]], final_grads: list[tuple[AnyTensor, Any]],
            state_index: dict[int, int]) -> Captured:
    graph = recorder.graph
    leaves, out_spec = _output_leaves(result)
    outputs: list[Var] = []
    statics: list[Any] = []
    is_tensor: list[bool] = []
    for leaf in leaves:
        if isinstance(leaf, Tensor):
            outputs.append(recorder.lift(leaf))
            statics.append(None)
            is_tensor.append(True)
        else:
            statics.append(leaf)
            is_tensor.append(False)
    effects: list[Effect] = []
    effect_values: list[Var] = []
    for i, (t, var) in sorted(arg_tensors.items()):
        if t._data is not var:
            new = recorder.lift(t)
            effects.append(Effect("copy_arg", ("arg", i)))
            effect_values.append(new)
    arg_of = {id(t): i for i, (t, _) in arg_tensors.items()}
    extra: list[AnyTensor] = []  # leaves met while capturing that are not discovered state

    def target_of(tensor: AnyTensor) -> tuple[str, int]:
        if id(tensor) in arg_of:
            return ("arg", arg_of[id(tensor)])
        if id(tensor) in state_index:
            return ("state", state_index[id(tensor)])
        for k, t in enumerate(extra):
            if t is tensor:
                return ("tensor", k)
        extra.append(tensor)
        return ("tensor", len(extra) - 1)

    for tensor, final in final_grads:
        if final is not None and final is handler.grad_inputs.get(id(tensor)):
            continue  # the gradient the call started with, untouched
        target = target_of(tensor)
        if final is None:
            effects.append(Effect("set_grad", target, has_value=False))
        elif isinstance(final, Tensor) and final._ops is recorder:
            effects.append(Effect("set_grad", target))
            effect_values.append(recorder.lift(final))
    for value, effect in handler.optimizer_effects:
        effects.append(effect)
        if effect.has_value:
            assert value is not None
            effect_values.append(value)
    guard_values = [g.value for g in graph.guards]
    graph.outputs = [*outputs, *effect_values, *guard_values]
    graph.out_tree = None
    _plan_late_inputs(graph, plans, handler)
    leaf_vars: list[Var] = []
    grad_leaves: list[tuple[str, int]] = []
    for var, tensor in recorder.grad_leaf.items():
        if tensor._requires_grad:
            leaf_vars.append(var)
            grad_leaves.append(target_of(tensor))
    captured = Captured(graph=graph, inputs=plans, n_outputs=len(outputs), out_spec=out_spec, out_static=statics,
                        out_is_tensor=is_tensor, effects=effects, size_guards=list(handler.size_guards),
                        value_guards=list(handler.value_guards), grad_free=set(handler.grad_free),
                        backward_inside=recorder.backward_started is not None, grad_leaves=grad_leaves,
                        n_forward_nodes=len(graph.nodes), extra_tensors=extra)
    if call.grad_enabled and not captured.backward_inside and leaf_vars:
        _record_backward(recorder, captured, outputs, leaf_vars, handler)
    for p, plan in zip(graph.inputs, captured.inputs):
        p.meta["plan"] = plan
    return captured


def _plan_late_inputs(graph: Graph, plans: list[InputPlan], handler: CaptureHandler) -> None:
    """Plans for the placeholders created while the function ran (captured tensors, constants, keys)."""
    for p in graph.inputs[len(plans):]:
        plans.append(_late_plan(p, handler))


def _record_backward(recorder: CaptureRecorder, captured: Captured, outputs: list[Var], leaf_vars: list[Var],
                     handler: CaptureHandler) -> None:
    """A training region: record the reverse sweep from the float outputs that depend on the leaves, with
    a cotangent placeholder per such output (see :mod:`tensorplay.compiler.pipeline` for the split)."""
    from tensorplay.compiler.recording import _Values
    from tensorplay.func.tracing import Traced, backward as reverse_sweep
    graph = recorder.graph
    zero: Any = 0
    traced = Traced(graph, recorder, leaf_vars, list(outputs), optree.tree_flatten(zero)[1], None)
    reached = traced.depends_on(leaf_vars)
    differentiable = [k for k, v in enumerate(outputs) if type(v) is Var and v.dtype.kind == "f" and v in reached]
    if not differentiable:
        return
    seeds = []
    cotangents = []
    for k in differentiable:
        var = outputs[k]
        shape = tuple(d.evaluate(handler.binding) if isinstance(d, SymDim) else d for d in var.shape)
        ct = recorder.input(f"grad_output_{k}", var.aval, "user_input", np.ones(shape, dtype=var.dtype))
        captured.inputs.append(InputPlan("cotangent", k))
        seeds.append((var, ct))
        cotangents.append(ct._data)
    n_forward = len(graph.nodes)
    grads = reverse_sweep(traced, _Values(recorder), recorder, seeds, leaf_vars, "backward")
    _plan_late_inputs(graph, captured.inputs, handler)
    captured.training = True
    captured.n_forward_nodes = n_forward
    captured.differentiable = differentiable
    captured.cotangents = cotangents
    captured.leaf_grads = [None if g is None else recorder.lift(g) for g in grads]


def _late_plan(p: Var, handler: CaptureHandler) -> InputPlan:
    found = handler.opt_inputs.get(p.id)
    if found is not None:
        return found
    if p.kind == "random_key":
        return InputPlan("key")
    if p.kind == "constant":
        return InputPlan("const", ref=np.asarray(p.source))
    if isinstance(p.source, Tensor):
        return InputPlan("tensor", ref=p.source)
    raise GraphCaptureError(f"internal: no plan for graph input {p.name!r} ({p.kind})")


__all__ = ["Call", "CaptureHandler", "Captured", "Effect", "InputPlan", "SizeGuard", "capture"]
