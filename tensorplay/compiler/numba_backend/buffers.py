"""The buffer plan of a generated function: the arrays GEMMs and fused kernels write, allocated once and
reused by every later call.

Per specialization, :func:`plan` looks at the lowered order of the graph (one position per unit: a node,
or a fusion group called as one kernel) and collects the arrays a ``matmul``, a generated kernel or another
runtime helper given an output array (a placement of pieces, :func:`.runtime.place`) writes (its outputs,
and the accumulators of its reductions). Each such
array's *lifetime* runs from the unit that writes it to the last unit that reads it **or any value that
may share its memory** (a reshape, permute, slice or broadcast of it, or anything an eager kernel
returned from it: every node outside a short list of ones known to return fresh arrays counts as one
that may return a view of its inputs). Arrays whose lifetimes do not overlap share a slot of an
:class:`Arena` (the smallest free slot that fits, else the largest free one, grown; a slot is reused only
from the unit *after* its last read, so no kernel or GEMM reads and writes the same memory). A function
with little to plan gets no plan (:data:`MIN_PLANNED_BYTES`).

Safety: nothing that outlives the call is ever planned. An array is left to ordinary allocation when a
graph output, a mutation's new value (written into the user's state), a guard value, or anything that
may share its memory with one of those reaches it: so outputs handed to the user, the residuals a
training region's forward returns for its backward, values returned through views, and the new
values of state never live in a reused buffer.

Re-entrancy: each call takes a whole set of buffers from its arena's free list and gives it back when
it returns (or raises). A call that finds the free list empty -- the first call, another thread in the
same function, a recursive call from a hook -- allocates a fresh set, so two running calls never share
memory; the steady single-threaded path allocates nothing.

Symbolic (dynamic) sizes: the plan (which arrays share a slot) does not depend on sizes, so arrays of
symbolic shapes are planned too; a call passes the values of the symbolic dims as its key, and a set of
buffers is sized for (and reused only by calls with) one key. Sets are kept for the first :data:`MAX_KEYS`
keys; a call with any other sizes gets separate arrays (dropped when it returns), so a function called with
ever new sizes allocates as without a plan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensorplay.compiler.numba_backend.kernels import GroupPlan, accumulator_dtype, kernel_arguments
from tensorplay.interpreters.graph.ir import Graph, Node, Var
from tensorplay.spec.table import PRIMITIVES

Array = np.ndarray[Any, Any]
Key = tuple[str, int]
"""A planned array: ``("o", var id)`` for a value a GEMM or kernel writes, ``("r", var id)`` for the
accumulator of the reduction giving that var."""

ALIGN = 64
"""Every slot starts on a cache line."""

MAX_IDLE_SETS = 4
"""At most this many buffer sets are kept for later calls (more only while calls overlap)."""

_MAY_ALIAS_FAMILIES = ("view", "check", "norm", "softmax")
"""Families whose lowering may return an input's memory (views, ``check_index`` returning its input) or goes
through helpers not audited for it (the row kernels' entry points)."""

FRESH = frozenset(name for name, prim in PRIMITIVES.items()
                  if prim.family not in _MAY_ALIAS_FAMILIES and name != "stop_gradient")  # the identity
"""Primitives whose lowering (:data:`.lower.EMITTERS`: numpy ufuncs and reductions, the eager interpreter's
elementwise, convolution, pooling, attention, scan, indexing and random kernels) always returns a new array,
never a view of an input. Everything else -- views, ``check_index`` (which returns its input), whatever falls
back to the eager interpreter -- may share memory with its inputs, as far as lifetimes and escapes go."""


MIN_PLANNED_BYTES = 16 << 10
"""A function whose plannable arrays take fewer bytes in all (symbolic dims at :data:`NOMINAL_SIZE`) gets no
plan: taking and giving back a set of buffers costs about 0.3 us a call, what two small allocations cost,
and arrays that small are cheap to allocate and in cache anyway."""

NOMINAL_SIZE = 64
"""The size a symbolic dim is taken to have when slots are matched to arrays by size (the real sizes are
read at each call; they only decide how big a slot is allocated)."""

MAX_KEYS = 4
"""Buffer sets are kept for at most this many combinations of symbolic sizes (the first ones seen: say a
full batch, the last partial one, an evaluation batch)."""

View = tuple[int, tuple[Any, ...], str, bool]
"""A planned array: ``(slot, shape, dtype, fortran)``; the shape's entries are ints or symbolic dims."""


def _shape_function(views: list[View], symbols: tuple[str, ...]) -> Callable[[tuple[int, ...]], list[tuple[int, ...]]]:
    """``shapes(key)``: the shape of every view when the symbolic dims ``symbols`` have the values ``key``
    (generated once: a call with new sizes pays a few integer operations, not symbolic arithmetic)."""
    if not symbols:
        fixed = [tuple(shape) for _, shape, _, _ in views]
        return lambda key: fixed
    names = {s: f"_k{i}" for i, s in enumerate(symbols)}
    rows = []
    for _, shape, _, _ in views:
        dims = [str(d) if type(d) is int else f"({d.to_source(names)})" for d in shape]
        rows.append("(" + "".join(f"{d}, " for d in dims) + ")")
    unpack = "".join(f"{n}, " for n in names.values())
    source = f"def shapes(key):\n    {unpack}= key\n    return [{', '.join(rows)}]\n"
    namespace: dict[str, Any] = {}
    exec(compile(source, "<tensorplay buffer shapes>", "exec"), namespace)  # noqa: S102 - our own source
    shapes: Callable[[tuple[int, ...]], list[tuple[int, ...]]] = namespace["shapes"]
    return shapes


def _nbytes(shape: tuple[Any, ...], dtype: str) -> int:
    """Bytes of an array of ``shape`` (symbolic dims at :data:`NOMINAL_SIZE`)."""
    size = 1
    for d in shape:
        size *= d if type(d) is int else NOMINAL_SIZE
    return max(size, 0) * np.dtype(dtype).itemsize


@dataclass
class _Request:
    key: Key
    shape: tuple[Any, ...]
    dtype: str
    both_orders: bool
    start: int
    end: int = -1

    @property
    def nbytes(self) -> int:
        return _nbytes(self.shape, self.dtype)


class Arena:
    """The buffers of one generated function: one view per planned array (``views``, see :data:`View`) into
    ``n_slots`` slots, each as large as the largest array it holds at the call's sizes (``symbols``: the
    symbolic dims, in the order of the key a call passes: their values). :meth:`acquire` hands a call a
    tuple of the views (allocated when no idle set of that key is left), :meth:`release` takes it back for
    the next call (see the module docstring)."""

    def __init__(self, n_slots: int, views: list[View], symbols: tuple[str, ...] = ()) -> None:
        self.n_slots = n_slots
        self.views = views
        self.symbols = symbols
        self._free: dict[tuple[int, ...], list[tuple[Array, ...]]] = {}
        self._shapes = _shape_function(views, symbols)
        self._itemsizes = [np.dtype(dtype).itemsize for _, _, dtype, _ in views]
        self.allocations = 0
        """How many buffer sets were allocated (one in a single-threaded steady state of one shape)."""

    def slot_sizes(self, key: tuple[int, ...] = ()) -> list[int]:
        """Bytes of each slot when the symbolic dims have the values ``key``."""
        return self._slot_sizes(self._shapes(key))

    def _slot_sizes(self, shapes: list[tuple[int, ...]]) -> list[int]:
        sizes = [0] * self.n_slots
        for (slot, _, _, _), itemsize, shape in zip(self.views, self._itemsizes, shapes):
            n = itemsize
            for d in shape:
                n *= d
            if n > sizes[slot]:
                sizes[slot] = n
        return sizes

    def _allocate(self, key: tuple[int, ...]) -> tuple[Array, ...]:
        """One block holding every slot, each starting on an :data:`ALIGN` boundary, and the views into it."""
        shapes = self._shapes(key)
        offsets = []
        total = 0
        for size in self._slot_sizes(shapes):
            offsets.append(total)
            total += -(-size // ALIGN) * ALIGN
        raw = np.empty(total + ALIGN, dtype=np.uint8)
        start = -raw.__array_interface__["data"][0] % ALIGN
        self.allocations += 1
        return tuple(np.ndarray(shape, dtype=dtype, buffer=raw, offset=start + offsets[slot],
                                order="F" if fortran else "C")
                     for (slot, _, dtype, fortran), shape in zip(self.views, shapes))

    def _loose(self, key: tuple[int, ...]) -> tuple[Array, ...]:
        """A set of separate arrays (no slot shared: what the call would allocate without a plan), for a
        key that will not be kept."""
        self.allocations += 1
        return tuple(np.empty(shape, dtype=dtype, order="F" if fortran else "C")
                     for (_, _, dtype, fortran), shape in zip(self.views, self._shapes(key)))

    def acquire(self, key: tuple[int, ...] = ()) -> tuple[Array, ...]:
        """A set of buffers for the symbolic sizes ``key`` that no other running call holds."""
        try:
            return self._free[key].pop()
        except IndexError:  # every set of this key is in use
            return self._allocate(key)
        except KeyError:
            if len(self._free) < MAX_KEYS:
                self._free.setdefault(key, [])
                return self._allocate(key)
            return self._loose(key)

    def release(self, buffers: tuple[Array, ...], key: tuple[int, ...] = ()) -> None:
        """Give back a set :meth:`acquire` handed out for ``key`` (its views must not be used any more)."""
        free = self._free.get(key)
        if free is not None and len(free) < MAX_IDLE_SETS:
            free.append(buffers)

    def clear(self) -> None:
        """Drop the idle buffer sets (the next call allocates again)."""
        self._free.clear()


@dataclass
class BufferPlan:
    """Which arrays of a generated function live in its :class:`Arena` (``names``: key -> the local
    name of its C-order view; ``fortran``: key -> the name of its column-major view, for elementwise
    kernels that run in the order of their operands)."""

    names: dict[Key, str] = field(default_factory=dict)
    fortran: dict[Key, str] = field(default_factory=dict)
    arena: Arena | None = None

    def array(self, key: Key, fallback: str, order: str | None = None) -> str:
        """Source for the array ``key`` is written into: its view (picked by the run-time flag ``order``
        when given: column-major when true), else ``fallback`` (an allocation)."""
        name = self.names.get(key)
        if name is None:
            return fallback
        if order is not None:
            return f"({self.fortran[key]} if {order} else {name})"
        return name

    def filled(self, key: Key, value: str, fallback: str) -> str:
        """Source for the accumulator ``key`` set to ``value`` (its view, filled in place), else ``fallback``."""
        name = self.names.get(key)
        return fallback if name is None else f"_rt.filled({name}, {value})"

    def out(self, var: Var) -> str:
        """``, out=<view>`` for a GEMM writing ``var`` into the plan, else ``""``."""
        name = self.names.get(("o", var.id))
        return "" if name is None else f", out={name}"

    def wrap(self, args: str, lines: list[str], head: int = 0, symbols: dict[str, str] | None = None) -> str:
        """The generated function's source: ``def run(args)`` over the body ``lines`` (inside the quiet
        error state), taking a set of buffers (after the first ``head`` lines, which read the symbolic
        sizes into the locals ``symbols`` names) and giving it back on the way out."""
        if not self.names:
            body = "\n".join("        " + line for line in lines)
            return f"def run({args}):\n    with _rt.quiet():\n{body}\n"
        assert self.arena is not None
        views = [f"_b{k}" for k in range(len(self.arena.views))]  # the names _assign gave, in the arena's order
        names = symbols or {}
        key = "".join(f"{names[s]}, " for s in self.arena.symbols)
        first = "".join("    " + line + "\n" for line in lines[:head])
        body = "\n".join("            " + line for line in lines[head:])
        return (f"def run({args}):\n{first}    _key = ({key})\n    _bufs = _arena.acquire(_key)\n    try:\n"
                f"        {', '.join(views)}, = _bufs\n        with _rt.quiet():\n{body}\n"
                f"    finally:\n        _arena.release(_bufs, _key)\n")


NO_PLAN = BufferPlan()
"""Nothing planned: every array is allocated by the call that writes it."""


def group_arrays(plan: GroupPlan, elementwise: bool) -> list[tuple[Key, tuple[Any, ...], str, Var]]:
    """The arrays the kernel of ``plan`` writes, as its caller passes them: ``(key, shape, dtype, result
    var)`` -- outputs (the value's own shape for an elementwise kernel, else the merged rank) then the
    accumulators of reductions (the merged kept axes)."""
    written, accumulators = kernel_arguments(plan)
    if elementwise:
        return [(("o", v.id), tuple(v.shape), v.aval.dtype, v) for v in written]
    sizes: list[Any] = []
    for group in plan.merged:
        size: Any = 1
        for axis in group:
            size = size * plan.space[axis]
        sizes.append(size)
    reduction_of = {r.outputs[0].id: k for k, r in enumerate(plan.reductions)}

    def kept(k: int) -> tuple[Any, ...]:
        return tuple(sizes[j] for j, group in enumerate(plan.merged) if not plan.reduced_axes[k][group[0]]) or (1,)

    out = []
    for v in written:
        index = reduction_of.get(v.id)
        out.append((("o", v.id), (tuple(sizes) or (1,)) if index is None else kept(index), v.aval.dtype, v))
    for r in accumulators:
        v = r.outputs[0]
        out.append((("r", v.id), kept(reduction_of[v.id]), accumulator_dtype(r), v))
    return out


def plan(graph: Graph, order: list[list[Node]], plans: dict[int, GroupPlan], last_use: dict[int, int],
         elementwise: Callable[[GroupPlan], bool], inplace: dict[int, Var],
         written: dict[int, int] | None = None) -> BufferPlan:
    """The buffer plan of the function lowered from ``graph`` in ``order`` (``plans``: fusion groups by
    their first node; ``last_use``: var id -> position of its last read; ``inplace``: kernel outputs
    written into the state they update, never planned; ``written``: ids of other nodes' results that a
    runtime helper writes into a given C-contiguous array, as a GEMM does, each with the position from
    which the array is written, at or before its node's). See the module docstring."""
    written = written or {}
    requests: dict[Key, _Request] = {}
    roots: dict[int, set[Key]] = {}  # var id -> the planned candidates its memory may be
    for position, unit in enumerate(order):
        group = plans.get(id(unit[0]))
        if group is not None:
            flat = elementwise(group)
            for key, shape, dtype, var in group_arrays(group, flat):
                if var.id in inplace:
                    roots.setdefault(var.id, set())
                    continue
                requests[key] = _Request(key, tuple(shape), dtype, flat, position)
                if key[0] == "o" or dtype == var.aval.dtype:  # a sum's float64 accumulator is cast: new memory
                    roots.setdefault(var.id, set()).add(key)
                else:
                    roots.setdefault(var.id, set())
            continue
        for node in unit:
            out = node.outputs[0]
            if (node.target == "matmul" or out.id in written) and len(unit) == 1:
                requests[("o", out.id)] = _Request(("o", out.id), tuple(out.shape), out.aval.dtype, False,
                                                   min(position, written.get(out.id, position)))
                roots[out.id] = {("o", out.id)}
                continue
            if node.target in FRESH:
                roots[out.id] = set()
                continue
            shared: set[Key] = set()
            for v in node.inputs:
                if type(v) is Var:
                    shared |= roots.get(v.id, set())
            roots[out.id] = shared
    escaping: set[Key] = set()
    for v in list(graph.outputs) + [v for _, v in graph.mutations] + [g.value for g in graph.guards]:
        if type(v) is Var:
            escaping |= roots.get(v.id, set())
    for vid, keys in roots.items():
        end = last_use.get(vid, -1)
        for key in keys:
            request = requests.get(key)
            if request is not None:
                request.end = max(request.end, end)
    live = [r for key, r in requests.items() if key not in escaping]
    if sum(r.nbytes for r in live) < MIN_PLANNED_BYTES:
        return NO_PLAN
    return _assign(live, tuple(sorted(graph.symbols)))


def _assign(requests: list[_Request], symbols: tuple[str, ...]) -> BufferPlan:
    """Slots for ``requests`` by lifetime (see the module docstring)."""
    if not requests:
        return NO_PLAN
    requests.sort(key=lambda r: (r.start, -r.nbytes))
    slots: list[int] = []
    busy_until: list[int] = []
    result = BufferPlan()
    views: list[View] = []
    for r in requests:
        end = max(r.end, r.start)
        need = r.nbytes
        free = [s for s in range(len(slots)) if busy_until[s] < r.start]
        fitting = [s for s in free if slots[s] >= need]
        if fitting:
            slot = min(fitting, key=lambda s: slots[s])
        elif free:
            slot = max(free, key=lambda s: slots[s])
            slots[slot] = need
        else:
            slot = len(slots)
            slots.append(need)
            busy_until.append(-1)
        busy_until[slot] = end
        result.names[r.key] = f"_b{len(views)}"
        views.append((slot, r.shape, r.dtype, False))
        if r.both_orders:
            result.fortran[r.key] = f"_b{len(views)}"
            views.append((slot, r.shape, r.dtype, True))
    result.arena = Arena(len(slots), views, symbols)
    return result


__all__ = ["Arena", "BufferPlan", "NO_PLAN", "group_arrays", "plan"]
