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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optree

from tensorplay import random_state
from tensorplay.compiler.autograd import Region, attach
from tensorplay.compiler.capture import Captured, Effect
from tensorplay.compiler.glue import effects_function, gather_function, write_back_function
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

    gather: Callable[[Sequence[Any], Sequence[Any]], list[Any]] = field(init=False, repr=False)
    """``gather(leaves, reads)``: the value of every placeholder for this call (:func:`.glue.gather_function`)."""
    write_back: Callable[..., None] = field(init=False, repr=False)
    """``write_back(arrays, result, leaves, reads)``: the state mutations written back (:mod:`.glue`)."""
    apply_effects: Callable[..., None] = field(init=False, repr=False)
    """``apply_effects(result, leaves, reads, seen)``: the side effects applied (:func:`.glue.effects_function`)."""

    def __post_init__(self) -> None:
        self.n_effect_values = sum(1 for e in self.effects if e.has_value)
        self.const_positions = tuple(i for i, plan in enumerate(self.program.inputs) if plan.kind == "const")
        self.has_keys = any(plan.kind == "key" for plan in self.program.inputs)
        program = self.program
        self.gather = gather_function(program.inputs)
        self.write_back = write_back_function(program.inputs, program.mutation_targets, len(program.graph.outputs))
        self.apply_effects = effects_function(self.effects, self.n_outputs, self.extra_tensors)

    @classmethod
    def make(cls, guards: Guards, program: Program, captured: Captured, name: str) -> Specialization:
        """A specialization of ``captured`` compiled as ``program``."""
        return cls(guards, program, captured.out_spec, captured.out_static, captured.out_is_tensor,
                   captured.effects, captured.n_outputs, captured.grad_leaves, captured.differentiable, name,
                   captured.extra_tensors)

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
        self.write_back(arrays, result, leaves, reads)
        self.apply_effects(result, leaves, reads, seen)
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

    def _target(self, target: tuple[str, int], leaves: Sequence[Any], reads: Sequence[Any]) -> AnyTensor:
        kind, index = target
        if kind == "arg":
            return leaves[index]  # type: ignore[no-any-return]
        if kind == "state":
            return reads[index]  # type: ignore[no-any-return]
        return self.extra_tensors[index]

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


__all__ = ["GuardMiss", "Specialization"]
