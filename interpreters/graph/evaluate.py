"""``evaluate(graph, ops, *inputs)``: run a graph with any interpreter.

With the eager interpreter it computes the outputs; with a recorder it re-records
the graph into the recorder's graph (inlining: the nodes keep their original
source locations). Every node is one call ``ops.<target>(*inputs, **params)``.
This one function is what lets transforms compose.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tensorplay.interpreters.graph.ir import Graph, Var
from tensorplay.interpreters.graph.walk import Walker
from tensorplay.spec.errors import DTypeError, GraphCaptureError, ShapeError
from tensorplay.spec.structure import out_of_range
from tensorplay import random_state
from tensorplay.errors import IndexRangeError
from tensorplay.symbolic import bind_shape, check_shape
from tensorplay.tensor import Tensor


def bind_inputs(graph: Graph, inputs: Sequence[Any]) -> dict[str, Any]:
    """Check ``inputs`` (tensors or arrays) against the graph's user inputs and return the binding
    of its symbolic dims (``{name: size}``; sizes are ints, or other graphs' dims when re-recording)."""
    placeholders = graph.user_inputs
    if len(inputs) != len(placeholders):
        names = ", ".join(str(p.name) for p in placeholders)
        raise TypeError(f"the graph takes {len(placeholders)} input(s) ({names}), got {len(inputs)}")
    binding: dict[str, Any] = {}
    symbolic = bool(graph.symbols)
    for p, x in zip(placeholders, inputs):
        shape = tuple(x.shape)
        dtype = x._data.dtype if isinstance(x, Tensor) else np.asarray(x).dtype
        if dtype != p.dtype:
            raise DTypeError(f"graph input {p.name!r}: expected dtype {p.aval.dtype}, got {dtype}")
        if p._meta is not None and "index_bound" in p._meta:
            _check_index_bound(p, x, p._meta["index_bound"])
        if symbolic:
            try:
                bind_shape(p.shape, shape, binding, f"graph input {p.name!r}")
            except ValueError as error:
                raise ShapeError(str(error)) from None
        elif shape != p.shape:
            raise ShapeError(f"graph input {p.name!r}: expected shape {list(p.shape)}, got {list(shape)}")
    if symbolic:
        for p, x in zip(placeholders, inputs):
            try:
                check_shape(p.shape, tuple(x.shape), binding, f"graph input {p.name!r}")
            except ValueError as error:
                raise ShapeError(str(error)) from None
    return binding


def _check_index_bound(p: Var, x: Any, bound: int) -> None:
    """A data input traced as an ``Index`` (``tp.index``): its values must stay in ``[0, bound)``."""
    if isinstance(x, Tensor):
        if getattr(x._ops, "level", 0) != 0:  # a value being recorded has no data to check
            return
        array = np.asarray(x._data)
    else:
        array = np.asarray(x)
    found = out_of_range(array, bound)
    if found is not None:
        position, value = found
        raise IndexRangeError(f"graph input {p.name!r}: value {value} at position {position} is out of range; it "
                              f"was traced as an index tensor with bound {bound} (expected 0 <= value < {bound})")


def input_values(graph: Graph, ops: Any, inputs: Sequence[Any],
                 state: Mapping[str, Any] | None = None) -> list[Any]:
    """The value of every placeholder, in order: ``inputs`` for the user inputs, ``state[name]`` or the
    recorded source for parameters, buffers and captured tensors, the stored array for constants, a
    fresh key (``ops.random_key()``, else the global generator's next key) for random keys."""
    values: list[Any] = []
    it = iter(inputs)
    for p in graph.inputs:
        kind = p.kind
        if kind == "user_input":
            x = next(it)
            values.append(x if isinstance(x, Tensor) else ops.constant(np.asarray(x)))
        elif kind == "constant":
            values.append(ops.constant(p.source))
        elif kind == "random_key" and not (state is not None and p.name in state):
            fresh = getattr(ops, "random_key", None)
            values.append(fresh() if fresh is not None else ops.constant(random_state.next_key()))
        else:
            source = state[str(p.name)] if state is not None and p.name in state else p.source
            if isinstance(source, Tensor):
                level = getattr(source._ops, "level", 0)
                if level > ops.level:
                    raise GraphCaptureError(
                        f"graph input {p.name!r} ({kind}) is a value of {source._ops!r}, which the interpreter "
                        f"{getattr(ops, 'name', ops)!r} cannot read; pass it in state={{{p.name!r}: ...}}")
                values.append(source)
            elif source is None:
                raise GraphCaptureError(f"graph input {p.name!r} ({kind}) has no value: pass it in state")
            else:
                values.append(ops.constant(np.asarray(source)))
    return values


def evaluate(graph: Graph, ops: Any, *inputs: Any, state: Mapping[str, Any] | None = None,
             binding: Mapping[str, Any] | None = None) -> tuple[Any, ...]:
    """Run ``graph`` with the interpreter ``ops``; returns the flat tuple of outputs.

    ``inputs`` are the user inputs, in order (tensors of any interpreter, or numpy arrays).
    Parameters, buffers and captured tensors are read from ``state`` (by placeholder name)
    or else from the tensors recorded with the graph. Symbolic dims are bound from the
    inputs' shapes (or given in ``binding``); params that mention them are evaluated.
    """
    bound: dict[str, Any] = bind_inputs(graph, inputs)
    if binding:
        bound.update(binding)
    values = input_values(graph, ops, inputs, state)
    walker = Walker(ops, bound)
    env = walker.run(graph.nodes, dict(zip(graph.inputs, values)))
    out = [walker.read(env, v) for v in graph.outputs]
    if graph.mutations:
        apply_mutations(graph, ops, values, [walker.read(env, v) for _, v in graph.mutations])
    return tuple(out)


def apply_mutations(graph: Graph, ops: Any, placeholder_values: Sequence[Any], new_values: Sequence[Any]) -> None:
    """Write the graph's state mutations back: each mutated placeholder's tensor (as passed in
    ``placeholder_values``, one per ``graph.inputs``) takes its new value, through
    ``ops.buffer_update`` when the interpreter records, else in place (eager)."""
    position = {id(p): i for i, p in enumerate(graph.inputs)}
    hook = getattr(ops, "buffer_update", None)
    for (placeholder, _), new in zip(graph.mutations, new_values):
        target = placeholder_values[position[id(placeholder)]]
        if hook is not None:
            hook(target, new)
            continue
        if not isinstance(target, Tensor) or not isinstance(getattr(target, "_data", None), np.ndarray):
            raise GraphCaptureError(f"cannot write the new value of {placeholder.name!r} back into {target!r}")
        np.copyto(target._data, np.asarray(new._data if isinstance(new, Tensor) else new), casting="same_kind")
        box = target._version
        if box is None:
            target._version = [1]
        else:
            box[0] += 1
