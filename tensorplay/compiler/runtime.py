"""Running a compiled specialization: inputs gathered, data guards checked, effects written back.

:meth:`Specialization.run` reads every placeholder's value (:class:`~tensorplay.compiler.capture.InputPlan`:
the call's tensors, the state read through :mod:`.sources`, fresh random keys, optimizer state and
hyperparameters), runs the compiled forward, checks the values that decided Python branches during
capture (a failure raises :class:`GuardMiss` before anything was written, and the random generator is
put back), writes the state mutations and side effects back (parameters and buffers in place,
``.grad`` attributes, optimizer state), and wraps the outputs as eager tensors, joined to the tape
as one node for a training region (:mod:`.autograd`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import optree

from tensorplay import random_state
from tensorplay.compiler.autograd import Region, attach
from tensorplay.compiler.capture import Captured, Effect, InputPlan
from tensorplay.compiler.guards import Guards, Reason
from tensorplay.compiler.pipeline import Program
from tensorplay.interpreters.eager.interpreter import eager
from tensorplay.interpreters.graph.ir import Guard
from tensorplay.symbolic import SymDim
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]


class GuardMiss(Exception):
    """A data-dependent branch went the other way: the specialization does not apply to this call."""

    def __init__(self, reason: Reason) -> None:
        super().__init__(str(reason))
        self.reason = reason


def _bump(t: AnyTensor) -> None:
    box = t._version
    if box is None:
        t._version = [1]
    else:
        box[0] += 1


def _owned(array: Any, seen: set[int]) -> np.ndarray[Any, Any]:
    """``array`` when it may be handed out as a fresh tensor's memory, else a copy (read-only memory,
    memory another value of this call already holds)."""
    if not isinstance(array, np.ndarray):
        array = np.asarray(array)
    if not array.flags.writeable or id(array) in seen or (array.base is not None and id(array.base) in seen):
        array = array.copy()
    seen.add(id(array))
    owned: np.ndarray[Any, Any] = array
    return owned


def _guard_reason(guard: Guard, value: Any) -> Reason:
    now: Any = np.asarray(value)
    if now.size == 1:
        now = now.reshape(()).item()
    what = {"bool": "a Python branch on a tensor (bool)", "item": "t.item()", "float": "float(t)",
            "int": "int(t)", "index": "a tensor used as an index", "tolist": "t.tolist()",
            "numpy": "t.numpy()", "array": "numpy.asarray(t)"}.get(guard.kind, guard.kind)
    return Reason("branch", f"{what} gave {guard.outcome!r} when captured, now {now!r}",
                  location=str(guard.location) if guard.location else "",
                  fix="reading a tensor's value into Python specialises the compiled code on it; keep the "
                      "decision in tensor operations (tp.where), or return the tensor and read it outside the "
                      "compiled function")


@dataclass
class Specialization:
    """One compiled variant of a function: its guards, its program and how to assemble its result."""

    guards: Guards
    program: Program
    out_spec: Any
    out_static: list[Any]
    out_is_tensor: list[bool]
    effects: list[Effect]
    n_outputs: int
    grad_leaves: list[tuple[str, int]]
    differentiable: list[int]
    name: str
    extra_tensors: list[AnyTensor]
    index: int = 0
    hits: int = 0
    n_effect_values: int = 0
    const_positions: tuple[int, ...] = ()
    has_keys: bool = False

    def __post_init__(self) -> None:
        self.n_effect_values = sum(1 for e in self.effects if e.has_value)
        self.const_positions = tuple(i for i, plan in enumerate(self.program.inputs) if plan.kind == "const")
        self.has_keys = any(plan.kind == "key" for plan in self.program.inputs)

    @classmethod
    def make(cls, guards: Guards, program: Program, captured: Captured, name: str) -> Specialization:
        """A specialization of ``captured`` compiled as ``program``."""
        return cls(guards, program, captured.out_spec, captured.out_static, captured.out_is_tensor,
                   captured.effects, captured.n_outputs, captured.grad_leaves, captured.differentiable, name,
                   captured.extra_tensors)

    # ---- inputs ---------------------------------------------------------------------------------------
    def gather(self, leaves: Sequence[Any], reads: Sequence[Any]) -> list[Any]:
        """The value of every placeholder for this call."""
        arrays: list[Any] = []
        for plan in self.program.inputs:
            kind = plan.kind
            if kind == "arg":
                arrays.append(leaves[plan.index]._data)
            elif kind == "state":
                arrays.append(reads[plan.index]._data)
            elif kind == "const":
                arrays.append(plan.ref)
            elif kind == "tensor":
                arrays.append(plan.ref._data)
            elif kind == "key":
                arrays.append(random_state.next_key())
            elif kind == "state_grad":
                owner = reads[plan.index]
                # no .grad: the function drops it unread (a grad-free guard), any array of its shape will do
                arrays.append(owner._data if owner._grad is None else owner._grad._data)
            elif kind == "arg_grad":
                arrays.append(leaves[plan.index]._grad._data)
            elif kind == "opt_state":
                optimizer, p = plan.ref
                entries = optimizer.state.get_state(p)
                array = entries.get(plan.key)
                if array is None:  # the first step creates the state as zeros, as the eager optimizer does
                    array = entries[plan.key] = np.zeros_like(p._data)
                arrays.append(array)
            elif kind == "opt_scalar":
                arrays.append(np.asarray(plan.ref(), dtype=plan.key))
            else:  # pragma: no cover - every plan kind is handled above
                raise AssertionError(f"no value for input plan {plan}")
        return arrays

    # ---- running --------------------------------------------------------------------------------------
    def run(self, leaves: Sequence[Any], reads: Sequence[Any], binding: dict[str, int]) -> Any:
        """Run on a call whose guards hold (see the module docstring); raises :class:`GuardMiss`."""
        started = self.start(leaves, reads)
        return self.finish(started, self.execute(started), leaves, reads, binding)

    def start(self, leaves: Sequence[Any], reads: Sequence[Any]) -> tuple[list[Any], Any]:
        """The placeholders' values for this call, and the random generator's state before the keys were
        drawn (when a data guard might send the call elsewhere)."""
        rng = random_state.get_state() if self.program.graph.guards and self.has_keys else None
        return self.gather(leaves, reads), rng

    def execute(self, started: tuple[list[Any], Any]) -> Sequence[Any]:
        """The compiled forward on the gathered values."""
        return self.program.forward(*started[0])

    def finish(self, started: tuple[list[Any], Any], result: Sequence[Any], leaves: Sequence[Any],
               reads: Sequence[Any], binding: dict[str, int]) -> Any:
        """Check the data guards, write state and effects back, and build the outputs."""
        arrays, rng = started
        program = self.program
        graph = program.graph
        n_out = self.n_outputs
        base = n_out + self.n_effect_values
        for k, guard in enumerate(graph.guards):
            value = result[base + k]
            if not guard.check(value):
                if rng is not None:
                    random_state.set_state(rng)
                raise GuardMiss(_guard_reason(guard, value))
        seen: set[int] = {id(a) for a in arrays}
        n_graph_outputs = len(graph.outputs)
        for target, new in zip(program.mutation_targets, result[n_graph_outputs:]):
            self._write_state(target, arrays, new, leaves, reads)
        self._apply_effects(result[n_out:base], leaves, reads, seen)
        outputs: list[AnyTensor] = []
        consts = self.const_positions
        for array in result[:n_out]:
            if not isinstance(array, np.ndarray) or (consts and any(array is arrays[i] for i in consts)):
                array = np.array(array, copy=True)
            outputs.append(Tensor(eager, array))
        if program.backward is not None and self.differentiable:
            start = base + len(graph.guards)
            saved = list(result[start:start + program.n_residuals])
            self._attach(outputs, saved, leaves, reads, binding)
        flat: list[Any] = []
        it = iter(outputs)
        for is_tensor, static in zip(self.out_is_tensor, self.out_static):
            flat.append(next(it) if is_tensor else static)
        self.hits += 1
        return optree.tree_unflatten(self.out_spec, flat)

    def _write_state(self, target: int, arrays: Sequence[Any], new: Any, leaves: Sequence[Any],
                     reads: Sequence[Any]) -> None:
        plan = self.program.inputs[target]
        array = arrays[target]
        if new is not array:
            np.copyto(array, new, casting="same_kind")
        owner = _owner(plan, leaves, reads)
        if owner is not None:
            _bump(owner)

    def _target(self, target: tuple[str, int], leaves: Sequence[Any], reads: Sequence[Any]) -> AnyTensor:
        kind, index = target
        if kind == "arg":
            return leaves[index]  # type: ignore[no-any-return]
        if kind == "state":
            return reads[index]  # type: ignore[no-any-return]
        return self.extra_tensors[index]

    def _apply_effects(self, values: Sequence[Any], leaves: Sequence[Any], reads: Sequence[Any],
                       seen: set[int]) -> None:
        it = iter(values)
        for effect in self.effects:
            value = next(it) if effect.has_value else None
            kind = effect.kind
            if kind == "copy_arg":
                t = leaves[effect.target[1]]
                np.copyto(t._data, np.asarray(value), casting="same_kind")
                _bump(t)
            elif kind == "set_grad":
                t = self._target(effect.target, leaves, reads)
                t._grad = None if value is None else Tensor(eager, _owned(value, seen))
            elif kind == "opt_state":
                optimizer, p = effect.optimizer
                optimizer.state.get_state(p)[effect.key] = np.array(value, copy=True, order="K")
            elif kind == "opt_step":
                optimizer, p = effect.optimizer
                state = optimizer.state.get_state(p)
                state["step"] = int(state.get("step", 0)) + 1

    def _attach(self, outputs: list[AnyTensor], saved: list[Any], leaves: Sequence[Any], reads: Sequence[Any],
                binding: dict[str, int]) -> None:
        program = self.program
        assert program.backward is not None
        avals = []
        for var in program.output_avals:
            shape = tuple(d.evaluate(binding) if isinstance(d, SymDim) else int(d) for d in var.shape)
            avals.append((shape, var.dtype))
        inputs = [self._target(t, leaves, reads) for t in self.grad_leaves]
        region = Region(program.backward, saved, avals, self.name, program.grad_slots)
        attach(outputs, self.differentiable, inputs, region)


def _owner(plan: InputPlan, leaves: Sequence[Any], reads: Sequence[Any]) -> AnyTensor | None:
    if plan.kind == "state":
        return reads[plan.index]  # type: ignore[no-any-return]
    if plan.kind == "arg":
        return leaves[plan.index]  # type: ignore[no-any-return]
    if plan.kind == "tensor":
        return plan.ref  # type: ignore[no-any-return]
    return None


__all__ = ["GuardMiss", "Specialization"]
