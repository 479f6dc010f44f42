"""The Python around a compiled specialization's code, generated once per specialization.

A call of a specialization gathers one array per placeholder (:class:`~tensorplay.compiler.capture.InputPlan`:
an argument, a state tensor, an optimizer's moment or hyperparameter, a fresh random key, ...) and, after
the compiled code ran, writes each mutated state back into its array. Interpreted plan by plan, that is a
branch on the plan's kind per input and a few attribute look-ups per state, at every call (a transformer
block's Adam step: 39 inputs, 36 states written back, 24 effects). :func:`gather_function`,
:func:`write_back_function` and :func:`effects_function` turn the plans and effects into one straight-line
function each, with the same reads and writes in the same order, calling the same helpers for the cases
with logic (:func:`opt_state`, :func:`state_grad`, :func:`new_grad`, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tensorplay import random_state
from tensorplay.compiler.capture import Effect, InputPlan
from tensorplay.interpreters.eager.interpreter import eager
from tensorplay.nn.module import bump_version as bump
from tensorplay.tensor import Tensor


def opt_state(optimizer: Any, p: Any, key: str) -> Any:
    """``optimizer``'s state entry ``key`` of parameter ``p``; the first step creates it as zeros, as the eager
    optimizer does."""
    entries = optimizer.state.get_state(p)
    array = entries.get(key)
    if array is None:
        array = entries[key] = np.zeros_like(p._data)
    return array


def state_grad(owner: Any) -> Any:
    """The ``.grad`` of a state tensor; without one (the function drops it unread: a grad-free guard) any
    array of its shape will do, its own data."""
    return owner._data if owner._grad is None else owner._grad._data


def write(array: Any, new: Any) -> None:
    """``array`` holds ``new`` (copied unless the compiled code wrote it in place)."""
    if new is not array:
        np.copyto(array, new, casting="same_kind")


def owned(array: Any, seen: set[int]) -> np.ndarray[Any, Any]:
    """``array`` when it may be handed out as a fresh tensor's memory, else a copy (read-only memory,
    memory another value of this call already holds: ``seen``, the ids of those arrays, gets it too)."""
    if not isinstance(array, np.ndarray):
        array = np.asarray(array)
    if not array.flags.writeable or id(array) in seen or (array.base is not None and id(array.base) in seen):
        array = array.copy()
    seen.add(id(array))
    result: np.ndarray[Any, Any] = array
    return result


def new_grad(value: Any, seen: set[int]) -> Any:
    """The eager tensor a ``.grad`` effect sets, on memory no other value of the call holds (``None`` stays
    ``None``)."""
    return None if value is None else Tensor(eager, owned(value, seen))


def copy_arg(t: Any, value: Any) -> None:
    """Argument tensor ``t`` updated in place to ``value``."""
    np.copyto(t._data, np.asarray(value), casting="same_kind")
    bump(t)


def set_opt_state(optimizer: Any, p: Any, key: str, value: Any) -> None:
    """``optimizer``'s state entry ``key`` of ``p`` created as (a copy of) ``value``."""
    optimizer.state.get_state(p)[key] = np.array(value, copy=True, order="K")


def count_step(optimizer: Any, p: Any) -> None:
    """One more step of ``optimizer`` for parameter ``p``."""
    state = optimizer.state.get_state(p)
    state["step"] = int(state.get("step", 0)) + 1


def _unplanned(plan: InputPlan) -> Any:  # pragma: no cover - every plan kind of a forward is generated
    raise AssertionError(f"no value for input plan {plan}")


class _Source:
    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {"_opt_state": opt_state, "_state_grad": state_grad, "_bump": bump,
                                          "_write": write, "_next_key": random_state.next_key,
                                          "_asarray": np.asarray, "_unplanned": _unplanned, "_new_grad": new_grad,
                                          "_copy_arg": copy_arg, "_set_opt_state": set_opt_state,
                                          "_count_step": count_step}

    def const(self, value: Any) -> str:
        name = f"_c{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def function(self, name: str, args: str, body: list[str]) -> Callable[..., Any]:
        source = f"def {name}({args}):\n" + "".join(f"    {line}\n" for line in body or ["pass"])
        code: dict[str, Any] = {}
        exec(compile(source, f"<tensorplay-{name}>", "exec"), self.namespace, code)
        made: Callable[..., Any] = code[name]
        return made


def _value(src: _Source, plan: InputPlan) -> str:
    kind, i = plan.kind, plan.index
    if kind == "arg":
        return f"leaves[{i}]._data"
    if kind == "state":
        return f"reads[{i}]._data"
    if kind == "const":
        return src.const(plan.ref)
    if kind == "tensor":
        return f"{src.const(plan.ref)}._data"
    if kind == "key":
        return "_next_key()"
    if kind == "state_grad":
        return f"_state_grad(reads[{i}])"
    if kind == "arg_grad":
        return f"leaves[{i}]._grad._data"
    if kind == "opt_state":
        optimizer, p = plan.ref
        return f"_opt_state({src.const(optimizer)}, {src.const(p)}, {plan.key!r})"
    if kind == "opt_scalar":
        return f"_asarray({src.const(plan.ref)}(), dtype={plan.key!r})"
    return f"_unplanned({src.const(plan)})"


def gather_function(plans: Sequence[InputPlan]) -> Callable[[Sequence[Any], Sequence[Any]], list[Any]]:
    """``gather(leaves, reads)``: the value of every placeholder for a call whose argument leaves are
    ``leaves`` and whose tensor sources read ``reads``, in the order of ``plans``."""
    src = _Source()
    values = [_value(src, plan) for plan in plans]
    return src.function("gather", "leaves, reads", [f"return [{', '.join(values)}]"])


def _owner(plan: InputPlan, src: _Source) -> str | None:
    if plan.kind == "state":
        return f"reads[{plan.index}]"
    if plan.kind == "arg":
        return f"leaves[{plan.index}]"
    if plan.kind == "tensor":
        return src.const(plan.ref)
    return None


def write_back_function(plans: Sequence[InputPlan], targets: Sequence[int], first: int
                        ) -> Callable[[Sequence[Any], Sequence[Any], Sequence[Any], Sequence[Any]], None]:
    """``write_back(arrays, result, leaves, reads)``: the new value of each mutated placeholder (``result``
    from position ``first`` on, one per entry of ``targets``, which index ``plans`` and the gathered
    ``arrays``) written into its array, and the tensor owning it (an argument, a state source, a captured
    tensor) counted as written."""
    src = _Source()
    body = []
    for k, target in enumerate(targets):
        body.append(f"_write(arrays[{target}], result[{first + k}])")
        owner = _owner(plans[target], src)
        if owner is not None:
            body.append(f"_bump({owner})")
    return src.function("write_back", "arrays, result, leaves, reads", body)


def effects_function(effects: Sequence[Effect], first: int, extra_tensors: Sequence[Any]
                     ) -> Callable[[Sequence[Any], Sequence[Any], Sequence[Any], set[int]], None]:
    """``apply_effects(result, leaves, reads, seen)``: each of ``effects`` applied, in order (the values of
    those that have one in ``result`` from position ``first`` on): an argument updated in place, a
    ``.grad`` set (a tensor on memory no array of ``seen`` holds, or ``None``), an optimizer's state entry
    created, a step counted, an optimizer's Python-side state advanced (``"opt_call"``: its callable called).
    A target ``("arg", i)`` is argument leaf ``i``, ``("state", i)`` tensor source
    ``i``, any other one of ``extra_tensors``."""
    src = _Source()
    body = []
    k = first
    for effect in effects:
        value = f"result[{k}]" if effect.has_value else "None"
        k += effect.has_value
        kind = effect.kind
        if kind == "copy_arg":
            body.append(f"_copy_arg(leaves[{effect.target[1]}], {value})")
        elif kind == "set_grad":
            where, index = effect.target
            target = f"leaves[{index}]" if where == "arg" else f"reads[{index}]" if where == "state" \
                else src.const(extra_tensors[index])
            body.append(f"{target}._grad = " + ("None" if not effect.has_value else f"_new_grad({value}, seen)"))
        elif kind in ("opt_state", "opt_step"):
            optimizer, p = effect.optimizer
            call = f"_set_opt_state({src.const(optimizer)}, {src.const(p)}, {effect.key!r}, {value})" \
                if kind == "opt_state" else f"_count_step({src.const(optimizer)}, {src.const(p)})"
            body.append(call)
        elif kind == "opt_call":
            body.append(f"{src.const(effect.optimizer)}()")
    return src.function("apply_effects", "result, leaves, reads, seen", body)


__all__ = ["bump", "copy_arg", "count_step", "effects_function", "gather_function", "new_grad", "opt_state", "owned",
           "set_opt_state", "state_grad", "write", "write_back_function"]
