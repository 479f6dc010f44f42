"""The built-in ways of running a program (registered by :mod:`tensorplay.testing.registry`).

Each takes ``(fn, *args)``: ``fn`` a function, a ``@tp.program`` or a module; ``args`` pytrees whose
tensor leaves are the inputs (other leaves are passed as they are). Every graph recorded here is
type-checked (:func:`tensorplay.graph.typecheck`) before it runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import tensorplay as tp
from tensorplay import random_state
from tensorplay.graph import evaluate, trace, typecheck
from tensorplay.pytree import tree_flatten, tree_unflatten
from tensorplay.tensor import Tensor
from tensorplay.testing.compare import assert_close
from tensorplay.testing.registry import NotApplicable, register_interpreter, tolerances

AnyTensor = Tensor[*tuple[Any, ...]]

VMAP_ROWS = 3
"""The batch size of the vmap way: row 0 holds the given arguments, rows 1 and 2 other values."""


def is_module(obj: Any) -> bool:
    """Anything with ``named_parameters()`` is run as a module (its parameters and buffers are state)."""
    return callable(getattr(obj, "named_parameters", None))


class ModuleState:
    """The buffers of a module (batch-norm statistics, ...), to snapshot, restore and compare."""

    def __init__(self, fn: Any) -> None:
        named = getattr(fn, "named_buffers", None) if is_module(fn) else None
        self.buffers: dict[str, AnyTensor] = {n: b for n, b in named() if isinstance(b, Tensor)} if named else {}

    def snapshot(self) -> dict[str, np.ndarray[Any, Any]]:
        """A copy of every buffer's value."""
        return {n: np.array(b.detach().numpy()) for n, b in self.buffers.items()}

    def restore(self, snapshot: dict[str, np.ndarray[Any, Any]]) -> None:
        """Write ``snapshot`` back into the buffers (in place: the module keeps its tensors)."""
        with tp.no_grad():
            for n, b in self.buffers.items():
                b.copy_(tp.tensor(snapshot[n]))


class FlatCall:
    """``fn`` as a function of the tensor leaves of ``args`` returning the list of its output tensors
    (what a recorded graph takes and gives); :meth:`rebuild` puts a graph's outputs back into the
    output structure seen while recording. A module's parameters and buffers stay module state."""

    def __init__(self, fn: Any, args: Sequence[Any]) -> None:
        self.fn = fn
        self.leaves, self.spec = tree_flatten(tuple(args))
        self.positions = [i for i, leaf in enumerate(self.leaves) if isinstance(leaf, Tensor)]
        self.inputs = [self.leaves[i] for i in self.positions]
        self.out_leaves: list[Any] = []
        self.out_spec: Any = None
        self.__name__ = str(getattr(fn, "__name__", type(fn).__name__))
        if is_module(fn):
            self.named_parameters = fn.named_parameters
            if callable(getattr(fn, "named_buffers", None)):
                self.named_buffers = fn.named_buffers

    def __call__(self, *tensors: Any) -> list[Any]:
        leaves = list(self.leaves)
        for i, t in zip(self.positions, tensors):
            leaves[i] = t
        out = self.fn(*tree_unflatten(self.spec, leaves))
        self.out_leaves, self.out_spec = tree_flatten(out)
        return [leaf for leaf in self.out_leaves if isinstance(leaf, Tensor)]

    def rebuild(self, outputs: Sequence[Any]) -> Any:
        """The output structure with ``outputs`` at its tensor leaves (other leaves as recorded)."""
        it = iter(outputs)
        leaves = [next(it) if isinstance(leaf, Tensor) else leaf for leaf in self.out_leaves]
        return tree_unflatten(self.out_spec, leaves)


def _checked_trace(fn: Any, *args: Any, execute: bool = False) -> Any:
    gm = trace(fn, *args, execute=execute)
    typecheck(gm.graph)
    return gm


def run_eager(fn: Callable[..., Any], *args: Any) -> Any:
    """Call ``fn(*args)``: the reference."""
    return fn(*args)


def run_traced(fn: Callable[..., Any], *args: Any) -> Any:
    """Record symbolically (``trace``), then interpret the graph node by node (``evaluate``)."""
    flat = FlatCall(fn, args)
    gm = _checked_trace(flat, *flat.inputs)
    return flat.rebuild(evaluate(gm.graph, tp.ops_of(flat.inputs), *flat.inputs))


def run_traced_execute(fn: Callable[..., Any], *args: Any) -> Any:
    """Record in execute mode (``trace(execute=True)``: values computed while recording, guards
    recorded), check the recorded values against the replay, then run the generated code."""
    flat = FlatCall(fn, args)
    gm = _checked_trace(flat, *flat.inputs, execute=True)
    recorded = [np.asarray(t) for t in flat.out_leaves if isinstance(t, Tensor)]
    replayed = gm(*flat.inputs)
    assert_close([np.asarray(t) for t in replayed], recorded, equal_nan=True, **tolerances(),
                 msg="traced_execute: the values computed while recording differ from the replay of the graph")
    return flat.rebuild(replayed)


def run_graph_module(fn: Callable[..., Any], *args: Any) -> Any:
    """``trace(fn, *args)`` (a module's parameters and buffers become graph inputs), then call the
    ``GraphModule``: its generated Python code."""
    return _checked_trace(fn, *args)(*args)


def run_retraced(fn: Callable[..., Any], *args: Any) -> Any:
    """Record, evaluate the graph under a second recording (inlining it, as transforms do), then
    evaluate that second graph."""
    flat = FlatCall(fn, args)
    first = _checked_trace(flat, *flat.inputs).graph
    second = _checked_trace(lambda *xs: list(evaluate(first, tp.ops_of(xs), *xs)), *flat.inputs).graph
    return flat.rebuild(evaluate(second, tp.ops_of(flat.inputs), *flat.inputs))


# ---- vmap ---------------------------------------------------------------------------------------

def _row(t: AnyTensor, r: int) -> AnyTensor:
    """Row ``r`` of the vmap batch for the argument ``t``: ``t`` itself for row 0, else floats scaled by
    ``1 + r / 4`` (signs, zeros and structure kept) and integers and booleans permuted (ranges kept)."""
    if r == 0:
        return t
    value = np.asarray(t)
    if value.dtype.kind == "f":
        return tp.tensor(value * (1.0 + r / 4.0), dtype=t.dtype)
    flat = value.reshape(-1)
    return tp.tensor(flat[np.random.default_rng(r).permutation(flat.size)].reshape(value.shape))


def run_vmap(fn: Callable[..., Any], *args: Any) -> Any:
    """``vmap`` over a batch of 3 rows of the arguments (row 0 the given ones; every tensor argument
    batched, randomness shared by the rows), each row checked against ``fn`` on that row alone;
    returns row 0. Outputs that are not tensors are taken from the per-sample trace."""
    __tracebackhide__ = True
    from tensorplay.func import vmap

    flat = FlatCall(fn, args)
    if not flat.inputs:
        raise NotApplicable("vmap: the program takes no tensor argument to map over")
    rows = [[_row(t, r) for t in flat.inputs] for r in range(VMAP_ROWS)]
    batched = [tp.stack([rows[r][k] for r in range(VMAP_ROWS)]) for k in range(len(flat.inputs))]
    state, seed = ModuleState(fn), random_state.get_state()
    before = state.snapshot()
    out = vmap(flat, randomness="same")(*batched)
    after, seed_after = state.snapshot(), random_state.get_state()
    for r in range(VMAP_ROWS):
        state.restore(before)
        random_state.set_state(seed)
        row_args = list(flat.leaves)
        for i, t in zip(flat.positions, rows[r]):
            row_args[i] = t
        expected = fn(*tree_unflatten(flat.spec, row_args))
        assert_close(flat.rebuild([t[r] for t in out]), expected, equal_nan=True, **tolerances(),
                     msg=f"vmap: row {r} of the batched result differs from the program run on row {r} alone "
                         "(row 0 holds the given arguments; rows 1 and 2 scale float arguments by 1.25 and 1.5 "
                         "and permute integer and boolean ones)")
    state.restore(after)
    random_state.set_state(seed_after)
    return flat.rebuild([t[0] for t in out])


register_interpreter("eager", run_eager, description="called directly (the reference)")
register_interpreter("traced", run_traced, description="trace (symbolic), then evaluate the graph")
register_interpreter("traced_execute", run_traced_execute,
                     description="trace(execute=True), then the generated code with its guards")
register_interpreter("graph_module", run_graph_module, description="trace, then the GraphModule's generated code")
register_interpreter("retraced", run_retraced,
                     description="trace, evaluate the graph into a second trace, evaluate that")
register_interpreter("vmap", run_vmap, description="vmap over a batch of 3 rows, each checked against a loop")

__all__ = ["FlatCall", "ModuleState", "VMAP_ROWS", "is_module", "run_eager", "run_graph_module", "run_retraced",
           "run_traced", "run_traced_execute", "run_vmap"]
