"""Lowering: a graph becomes the Python source of one function over numpy arrays.

``run(p0, p1, ...)`` takes one array per placeholder and returns the graph's outputs followed by its
mutations' new values. No tensor wrapper and no shape rule runs on this path: every node is one
statement computing exactly what the eager interpreter computes for it, in the same dtypes
(:data:`EMITTERS`):

* views (``reshape``, ``permute``, ``broadcast_to``, ``slice``) are numpy views;
* unary and binary elementwise nodes outside fusion groups are numpy ufunc calls with the eager
  interpreter's casts; ``matmul`` is one BLAS call (:func:`.runtime.matmul`);
* every pointwise-fusion group (:mod:`tensorplay.compiler.passes.fusion`) is one call of its generated
  numba kernel (:mod:`.kernels`), scheduled as a unit;
* convolution, pooling, layer norm, softmax, attention, gather/scatter and random draws call the eager
  interpreter's kernels (:mod:`tensorplay.interpreters.eager.kernels`) directly;
* the recorded forms of a cross-entropy (with its reverse sweep), of GELU's backward and of layer norm's
  backward are each one call of the eager interpreter's fused kernel (:mod:`.patterns`); a layer norm's
  backward reads the statistics its forward kept, an unmasked attention's backward the probabilities its
  forward kept, and a sum of zero pads into disjoint windows is one placement of the pieces;
* a float sum over the leading axes (a bias's gradient) is one GEMV with ones (:func:`.runtime.sum_leading`);
* an elementwise kernel that updates a state in place reads and writes it through one argument;
* anything else falls back to the eager interpreter's method (refused with ``strict_native``).

The function body runs inside one ``numpy.errstate(all="ignore")`` (eager arithmetic is silent about
inf and NaN too) and deletes intermediates after their last use. The arrays GEMMs, kernels and placements
write into, when nothing returned from the call can reach them, live in buffers planned once per function
and reused by every call (:mod:`.buffers`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensorplay.compiler.numba_backend import buffers, runtime, windows
from tensorplay.compiler.numba_backend.patterns import (AttentionProbs, CrossEntropy, GeluBackward, LayerNormBackward,
                                                        PadSum, find_attention_probs, find_cross_entropies,
                                                        find_gelu_backwards, find_layer_norm_backwards, find_pad_sums)
from tensorplay.compiler.numba_backend.kernels import (START, GroupPlan, accumulator_dtype, alias_outputs, kernel_arguments,
                                                       plan_group)
from tensorplay.interpreters.eager import kernels as K
from tensorplay.interpreters.eager.interpreter import BINARY_KERNELS, UNARY_KERNELS, EagerInterpreter
from tensorplay.interpreters.graph.codegen import symbol_size_expression
from tensorplay.interpreters.graph.ir import Graph, Literal, Node, Var
from tensorplay.spec.dtypes import result_type
from tensorplay.spec.errors import GraphCaptureError
from tensorplay.spec.table import PRIMITIVES
from tensorplay.symbolic import SymDim


@dataclass
class Lowered:
    """The generated function's ``source``, its ``namespace`` (helpers, constants, kernel slots to fill
    with :attr:`kernels`) and the primitives that fell back to the eager interpreter."""

    source: str
    namespace: dict[str, Any]
    kernels: list[tuple[str, GroupPlan]] = field(default_factory=list)
    fallbacks: list[Node] = field(default_factory=list)


class _Writer:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.names: dict[int, str] = {}
        self.lines: list[str] = []
        self.namespace: dict[str, Any] = {"np": np, "_rt": runtime}
        self.n_consts = 0
        self.symbols: dict[str, str] = {}
        self.sizes: dict[str, str] = {}  # source of a symbolic size or shape -> the local computed once
        self.size_lines: list[str] = []  # their definitions, placed after the symbols are read
        self.kernels: list[tuple[str, GroupPlan]] = []
        self.fallbacks: list[Node] = []
        self.buffers = buffers.NO_PLAN
        self.ln_stats: dict[int, str] = {}  # forward layer_norm node id -> the local its statistics go to
        self.windows: dict[int, str] = {}  # matmul node id -> source of the window view it writes into
        self.in_place: set[int] = set()  # pad-sum roots whose pieces all write into their windows
        self.scalar_views: dict[int, str] = {}  # placeholder id -> its shared one-element view (``_e0``, ...)

    # ---- values ---------------------------------------------------------------------------------------
    def const(self, value: Any) -> str:
        name = f"_c{self.n_consts}"
        self.n_consts += 1
        self.namespace[name] = value
        return name

    def render(self, value: Any) -> str:
        """Python source for a param or literal value (symbolic sizes read from the inputs' shapes)."""
        if value is None or isinstance(value, (bool, str)):
            return repr(value)
        if isinstance(value, int):
            return repr(int(value))
        if isinstance(value, float):
            if math.isnan(value):
                return "float('nan')"
            if math.isinf(value):
                return "float('inf')" if value > 0 else "-float('inf')"
            return repr(float(value))
        if isinstance(value, SymDim):
            source = value.to_source(self.symbols)
            return source if value.is_symbol else self.size_local(source)
        if isinstance(value, tuple):
            inner = ", ".join(self.render(v) for v in value)
            source = f"({inner},)" if len(value) == 1 else f"({inner})"
            return self.size_local(source) if any(isinstance(v, SymDim) for v in value) else source
        if isinstance(value, list):
            return "[" + ", ".join(self.render(v) for v in value) + "]"
        if isinstance(value, dict):
            return "{" + ", ".join(f"{k!r}: {self.render(v)}" for k, v in value.items()) + "}"
        return self.const(value)

    def size_local(self, source: str) -> str:
        """The local holding the symbolic size or shape ``source``: each is computed once per call, at the
        top of the function (the symbols' sizes are known there), however many nodes use it."""
        name = self.sizes.get(source)
        if name is None:
            name = self.sizes[source] = f"_z{len(self.sizes)}"
            self.size_lines.append(f"{name} = {source}")
        return name

    def value(self, v: Any) -> str:
        if v is None:
            return "None"
        if type(v) is Literal:
            return self.render(v.value)
        return self.names[v.id]

    def define(self, node: Node, expr: str) -> str:
        name = f"v{len(self.names)}"
        self.names[node.outputs[0].id] = name
        self.lines.append(f"{name} = {expr}")
        return name

    def shape(self, var: Var) -> str:
        return self.render(tuple(var.shape))


def _dt(name: str) -> str:
    return f"np.{name}" if name != "bool" else "np.bool_"


def _kind(dtype: str) -> str:
    return np.dtype(dtype if dtype != "bool" else "bool").kind


def _as(expr: str, dtype: str, rank: int) -> str:
    """``expr`` as an ndarray of ``dtype`` (numpy returns scalars for 0-d results)."""
    return f"_rt.as_array({expr}, {_dt(dtype)})" if rank == 0 else f"_rt.as_dtype({expr}, {_dt(dtype)})"


# ---- per-primitive emitters ------------------------------------------------------------------------------

Emitter = Callable[[_Writer, Node], None]


def _unwrap(fn: Any) -> Any:
    return getattr(fn, "__wrapped__", fn)


def _unary(w: _Writer, node: Node) -> None:
    x = node.inputs[0]
    assert isinstance(x, Var)
    out = node.outputs[0].aval.dtype
    expr = w.value(x)
    if _kind(x.aval.dtype) != "f" or node.params:
        if out != x.aval.dtype and out != "bool":
            expr = f"{expr}.astype({_dt(out)})"
    fn = w.const(_unwrap(UNARY_KERNELS[node.target]))
    params = "".join(f", {k}={w.render(v)}" for k, v in node.params.items())
    w.define(node, _as(f"{fn}({expr}{params})", out, len(node.outputs[0].shape)))


def _compute_dtype(node: Node) -> str:
    out = node.outputs[0].aval.dtype
    if out != "bool":
        return out
    return result_type([v.aval.dtype for v in node.inputs if v is not None])


def _operand(w: _Writer, v: Any, compute: str) -> str:
    if type(v) is Var and v.aval.dtype != compute:
        return f"{w.value(v)}.astype({_dt(compute)})"
    return w.value(v)


def _binary(w: _Writer, node: Node) -> None:
    out = node.outputs[0].aval.dtype
    compute = _compute_dtype(node)
    a, b = (_operand(w, v, compute) for v in node.inputs)
    fn = w.const(_unwrap(BINARY_KERNELS[node.target]))
    w.define(node, _as(f"{fn}({a}, {b})", out, len(node.outputs[0].shape)))


def _where(w: _Writer, node: Node) -> None:
    c, x, y = (w.value(v) for v in node.inputs)
    out = node.outputs[0]
    w.define(node, _as(f"np.where({c}, {x}, {y})", out.aval.dtype, len(out.shape)))


def _reduce(w: _Writer, node: Node) -> None:
    x = w.value(node.inputs[0])
    axes, keep = tuple(node.params["axes"]), bool(node.params["keepdims"])
    fn = {"reduce_sum": "np.sum", "reduce_max": "np.max", "reduce_min": "np.min",
          "reduce_prod": "np.prod"}[node.target]
    out = node.outputs[0]
    operand = node.inputs[0]
    rank = len(operand.shape) if type(operand) is Var else 0
    if node.target == "reduce_sum" and not keep and 0 < len(axes) < rank and _float_nodes(node) \
            and tuple(a % rank for a in axes) == tuple(range(len(axes))):  # a bias's gradient
        w.define(node, f"_rt.sum_leading({x}, {len(axes)})")
        return
    expr = f"{fn}({x}, axis={w.render(axes)}, keepdims={keep})" if axes else f"{x}.copy()"
    w.define(node, _as(expr, out.aval.dtype, len(out.shape)))


def _arg_reduce(w: _Writer, node: Node) -> None:
    fn = "np.argmax" if node.target == "argmax" else "np.argmin"
    out = node.outputs[0]
    w.define(node, _as(f"{fn}({w.value(node.inputs[0])}, axis={int(node.params['axis'])}, "
                       f"keepdims={bool(node.params['keepdims'])})", out.aval.dtype, len(out.shape)))


def _reshape(w: _Writer, node: Node) -> None:
    w.define(node, f"{w.value(node.inputs[0])}.reshape({w.render(tuple(node.params['shape']))})")


def _permute(w: _Writer, node: Node) -> None:
    w.define(node, f"{w.value(node.inputs[0])}.transpose({w.render(tuple(node.params['perm']))})")


def _broadcast(w: _Writer, node: Node) -> None:
    w.define(node, f"np.broadcast_to({w.value(node.inputs[0])}, {w.render(tuple(node.params['shape']))})")


def _slice(w: _Writer, node: Node) -> None:
    parts = []
    for a, b, c in zip(node.params["starts"], node.params["stops"], node.params["steps"]):
        stop = "None" if (isinstance(b, int) and b < 0 and c < 0) else w.render(b)
        parts.append(f"{w.render(a)}:{stop}:{w.render(c)}")
    w.define(node, f"{w.value(node.inputs[0])}[{', '.join(parts)},]")


def _pad(w: _Writer, node: Node) -> None:
    out = node.outputs[0]
    pads = tuple(tuple(p) for p in node.params["pads"])
    w.define(node, _as(f"np.pad({w.value(node.inputs[0])}, {w.render(pads)}, mode='constant', "
                       f"constant_values={w.render(node.params['value'])})", out.aval.dtype, len(out.shape)))


def _concat(w: _Writer, node: Node) -> None:
    out = node.outputs[0]
    parts = ", ".join(f"{w.value(v)}.astype({_dt(out.aval.dtype)}, copy=False)" for v in node.inputs)
    w.define(node, f"np.concatenate([{parts}], axis={int(node.params['axis'])})")


def _cast(w: _Writer, node: Node) -> None:
    w.define(node, f"{w.value(node.inputs[0])}.astype({_dt(node.params['dtype'])})")


def _identity(w: _Writer, node: Node) -> None:
    w.define(node, w.value(node.inputs[0]))


def _full(w: _Writer, node: Node) -> None:
    w.define(node, f"np.full({w.render(tuple(node.params['shape']))}, {w.render(node.params['value'])}, "
                   f"dtype={_dt(node.params['dtype'])})")


def _iota(w: _Writer, node: Node) -> None:
    w.define(node, f"np.arange({w.render(node.params['length'])}, dtype={_dt(node.params['dtype'])})")


def _matmul(w: _Writer, node: Node) -> None:
    a, b = (w.value(v) for v in node.inputs)
    window = w.windows.get(id(node))
    out = w.buffers.out(node.outputs[0]) if window is None else f", out={window}"
    w.define(node, f"_rt.matmul({a}, {b}, {_dt(node.outputs[0].aval.dtype)}{out})")


def _kernel(w: _Writer, node: Node) -> None:
    fn = w.const(getattr(K, node.target))
    args = [w.value(v) for v in node.inputs]
    args += [f"{k}={w.render(v)}" for k, v in node.params.items()]
    out = node.outputs[0]
    w.define(node, _as(f"{fn}({', '.join(args)})", out.aval.dtype, len(out.shape)))


def _float_nodes(node: Node) -> bool:
    """Whether every input of ``node`` is a var of its (float32 or float64) output dtype."""
    dtype = node.outputs[0].aval.dtype
    return dtype in ("float32", "float64") and all(type(v) is Var and v.aval.dtype == dtype for v in node.inputs)


def _rows(w: _Writer, node: Node) -> None:
    """``softmax`` and ``log_softmax`` by the eager row kernels (:func:`.runtime.rows`), not the fallback's
    tensor round trip."""
    axis = node.params["axis"]
    if not _float_nodes(node) or type(axis) is not int:
        _fallback(w, node)
        return
    w.define(node, f"_rt.rows({node.target!r}, {w.value(node.inputs[0])}, {axis})")


def _layer_norm(w: _Writer, node: Node) -> None:
    """``layer_norm_last_axis`` by the eager row kernel (:func:`.runtime.layer_norm`)."""
    eps = node.params["eps"]
    if not _float_nodes(node) or not isinstance(eps, (int, float)) or isinstance(eps, bool):
        _fallback(w, node)
        return
    x, gamma, beta = (w.value(v) for v in node.inputs)
    stats = w.ln_stats.get(id(node))
    if stats is not None:  # a backward reads the rows' statistics
        out = f"v{len(w.names)}"
        w.names[node.outputs[0].id] = out
        w.lines.append(f"{out}, {stats} = _rt.layer_norm_stats({x}, {gamma}, {beta}, {w.render(float(eps))})")
        return
    w.define(node, f"_rt.layer_norm({x}, {gamma}, {beta}, {w.render(float(eps))})")


def _pad_float(w: _Writer, node: Node) -> None:
    """A float ``pad`` by non-negative static amounts as a filled array with ``x`` copied into its window
    (:func:`.runtime.pad`); anything else through ``numpy.pad``."""
    pads = tuple(tuple(p) for p in node.params["pads"])
    value = node.params["value"]
    if not _float_nodes(node) or not all(type(a) is int and a >= 0 for p in pads for a in p) \
            or not isinstance(value, (int, float)) or isinstance(value, bool):
        _pad(w, node)
        return
    w.define(node, f"_rt.pad({w.value(node.inputs[0])}, {w.render(pads)}, {w.render(float(value))})")


def _fallback(w: _Writer, node: Node) -> None:
    w.fallbacks.append(node)
    method = w.const(getattr(EagerInterpreter(), node.target))
    args = [f"_rt.wrap({w.value(v)})" if type(v) is Var else w.value(v) for v in node.inputs]
    args += [f"{k}={w.render(v)}" for k, v in node.params.items()]
    w.define(node, f"{method}({', '.join(args)})._data")


def _emitters() -> dict[str, Emitter]:
    table: dict[str, Emitter] = {}
    for name, prim in PRIMITIVES.items():
        if prim.family == "unary":
            table[name] = _unary
        elif prim.family == "binary":
            table[name] = _binary
        elif getattr(getattr(EagerInterpreter, name, None), "generated_for", None) is not None \
                and callable(getattr(K, name, None)):
            table[name] = _kernel  # the eager interpreter runs K.<name> after the shape rule
    table.update({
        "where": _where, "reduce_sum": _reduce, "reduce_max": _reduce, "reduce_min": _reduce,
        "reduce_prod": _reduce, "argmax": _arg_reduce, "argmin": _arg_reduce, "reshape": _reshape, "permute": _permute,
        "broadcast_to": _broadcast, "slice": _slice, "pad": _pad, "concat": _concat, "cast": _cast,
        "stop_gradient": _identity, "full": _full, "iota": _iota, "matmul": _matmul,
    })
    table.update({"softmax": _rows, "log_softmax": _rows, "layer_norm_last_axis": _layer_norm, "pad": _pad_float})
    return table


EMITTERS: dict[str, Emitter] = _emitters()
"""How each primitive is lowered (primitives without an entry fall back to the eager interpreter)."""


# ---- fused groups ----------------------------------------------------------------------------------------

def _elementwise(plan: GroupPlan) -> bool:
    """A group without reductions whose operands all have its shape (or are scalars): its kernel is one
    flat loop and may run on arrays of either memory order (``Linear`` weights are column-major)."""
    if plan.reductions or len(plan.merged) != 1:
        return False
    space = tuple(plan.space)
    return all(all(p) and tuple(v.shape) == space or not any(p)
               for v, p in zip(plan.inputs, plan.input_patterns))


def _one_element(w: _Writer, v: Var) -> str:
    """A one-element input of an elementwise kernel as the 1-d array the kernel reads. For a placeholder (an
    optimizer's hyperparameter, read by one kernel per parameter) the view is made once and shared: a
    placeholder is never rebound or planned, and a view of it sees any write into it."""
    if v.producer is not None:
        return f"{w.value(v)}.reshape((1,))"
    name = w.scalar_views.get(v.id)
    if name is None:
        name = w.scalar_views[v.id] = f"_e{len(w.scalar_views)}"
        w.lines.append(f"{name} = {w.value(v)}.reshape((1,))")
    return name


def _emit_group(w: _Writer, plan: GroupPlan, slot: str, inplace: dict[int, Var]) -> None:
    """Call the kernel of ``plan``: inputs made contiguous and reshaped to the merged rank, outputs and
    accumulators allocated (or, for an elementwise group, written into the state they update: ``inplace``
    maps such outputs to their placeholders), results reshaped to their avals."""
    sizes = []
    for group in plan.merged:
        size: Any = 1
        for axis in group:
            size = size * plan.space[axis]
        sizes.append(w.render(size))
    args = list(sizes)
    tag = len(w.names)
    written, accumulators = kernel_arguments(plan)
    if _elementwise(plan):
        full = [v for v, p in zip(plan.inputs, plan.input_patterns) if all(p)]
        order = f"_f{tag}"
        w.lines.append(f"{order} = {f'_rt.fortran({w.value(full[0])})' if full else 'False'}")
        for v, pattern in zip(plan.inputs, plan.input_patterns):
            args.append(f"_rt.flat({w.value(v)}, {order})" if all(pattern) else _one_element(w, v))
        for k, v in enumerate(written):
            name = f"_o{tag}_{k}"
            state = inplace.get(v.id)
            if v.id in plan.aliases:  # read and written by the kernel as one array
                w.lines.append(f"{name} = _rt.into_copy({w.value(state)}, {order})")
                args[len(sizes) + plan.aliases[v.id]] = f"_rt.flat({name}, {order})"
                continue
            if state is not None:
                w.lines.append(f"{name} = _rt.into({w.value(state)}, {order})")
            else:
                w.lines.append(f"{name} = " + w.buffers.array(
                    ("o", v.id), f"_rt.empty({w.shape(v)}, {_dt(v.aval.dtype)}, {order})", order))
            args.append(f"_rt.flat({name}, {order})")
        w.lines.append(f"{slot}({', '.join(args)})")
        for k, v in enumerate(written):
            w.names[v.id] = f"_o{tag}_{k}"
        return
    for v, pattern in zip(plan.inputs, plan.input_patterns):
        dims = [sizes[k] if pattern[group[0]] else "1" for k, group in enumerate(plan.merged)] or ["1"]
        args.append(f"_rt.contiguous({w.value(v)}).reshape(({', '.join(dims)},))")
    reduction_of = {r.outputs[0].id: k for k, r in enumerate(plan.reductions)}

    def kept(k: int) -> list[str]:
        return [sizes[j] for j, group in enumerate(plan.merged) if not plan.reduced_axes[k][group[0]]] or ["1"]

    results: list[tuple[str, Var, str]] = []
    for k, v in enumerate(written):
        name = f"_o{tag}_{k}"
        index = reduction_of.get(v.id)
        dims = sizes or ["1"] if index is None else kept(index)
        w.lines.append(f"{name} = " + w.buffers.array(("o", v.id),
                                                      f"np.empty(({', '.join(dims)},), dtype={_dt(v.aval.dtype)})"))
        args.append(name)
        results.append((name, v, ""))
    for k, r in enumerate(accumulators):
        name = f"_r{tag}_{k}"
        index = reduction_of[r.outputs[0].id]
        w.lines.append(f"{name} = " + w.buffers.filled(("r", r.outputs[0].id), w.render(START[r.target]),
                       f"np.full(({', '.join(kept(index))},), {w.render(START[r.target])}, "
                       f"dtype={_dt(accumulator_dtype(r))})"))
        args.append(name)
        results.append((name, r.outputs[0], f".astype({_dt(r.outputs[0].aval.dtype)}, copy=False)"))
    w.lines.append(f"{slot}({', '.join(args)})")
    for name, v, convert in results:
        result = f"v{len(w.names)}"
        w.names[v.id] = result
        w.lines.append(f"{result} = {name}{convert}.reshape({w.shape(v)})")


# ---- the function ----------------------------------------------------------------------------------------

def _symbol_lines(w: _Writer, graph: Graph, arg: dict[int, str]) -> None:
    """``B = p0.shape[0]`` for every symbolic dim of the inputs' shapes."""
    for s in sorted(graph.symbols):
        w.symbols[s] = f"_s_{s}"
    for s in sorted(graph.symbols):
        read = symbol_size_expression(graph, s, arg)
        if read is None:
            raise GraphCaptureError(f"numba backend: cannot read the size of symbolic dim {s} from the inputs")
        w.lines.append(f"_s_{s} = {read}")


def _units(graph: Graph, groups: dict[int, list[Node]]) -> list[list[Node]]:
    """Nodes and fusion groups in a dependency order that keeps each group together."""
    unit_of: dict[int, int] = {}
    unit_of_group: dict[int, int] = {}
    units: list[list[Node]] = []
    group_of = {id(n): g for g, nodes in groups.items() for n in nodes}
    for node in graph.nodes:
        g = group_of.get(id(node))
        if g is not None:
            index = unit_of_group.get(g)
            if index is None:
                index = unit_of_group[g] = len(units)
                units.append([])
            units[index].append(node)
            unit_of[id(node)] = index
        else:
            unit_of[id(node)] = len(units)
            units.append([node])
    deps: list[set[int]] = [set() for _ in units]
    users: list[set[int]] = [set() for _ in units]
    for i, unit in enumerate(units):
        for node in unit:
            for v in node.inputs:
                if type(v) is Var and v.producer is not None:
                    j = unit_of[id(v.producer)]
                    if j != i:
                        deps[i].add(j)
                        users[j].add(i)
    ready = [i for i in range(len(units)) if not deps[i]]
    heapq.heapify(ready)
    order: list[list[Node]] = []
    remaining = [len(d) for d in deps]
    while ready:
        i = heapq.heappop(ready)
        order.append(units[i])
        for j in users[i]:
            remaining[j] -= 1
            if remaining[j] == 0:
                heapq.heappush(ready, j)
    if len(order) != len(units):  # fusion groups are convex; a move of _sink_into_readers is checked here
        raise GraphCaptureError("numba backend: the fusion groups form a cycle")
    return order


_CONV_KEYS = ("stride", "padding", "dilation", "groups")


def _var_inputs(node: Node) -> list[Var] | None:
    """The node's two inputs when both are vars, else None."""
    vs = [v for v in node.inputs if type(v) is Var]
    return vs if len(vs) == 2 == len(node.inputs) else None


def _conv_backward_pairs(graph: Graph) -> dict[int, Node]:
    """The input and weight gradients of one convolution, computed from one cotangent: each
    ``conv_weight_grad_nd(x, g)`` and ``conv_transpose_nd(g, w)`` with the same ``g`` and geometry, the
    transposed convolution giving ``x``'s shape, all of one float dtype. Maps each node's id to its partner
    (both directions); such a pair is lowered as one call of :func:`.runtime.conv_backward`, one read of
    ``g`` as the eager interpreter's backward makes."""
    weight_grads: dict[tuple[Any, ...], tuple[Node, Var]] = {}
    for node in graph.nodes:
        vs = _var_inputs(node) if node.target == "conv_weight_grad_nd" else None
        if vs is not None:
            key = (vs[1].id,) + tuple(repr(node.params.get(k)) for k in _CONV_KEYS)
            weight_grads.setdefault(key, (node, vs[0]))
    pairs: dict[int, Node] = {}
    for node in graph.nodes:
        vs = _var_inputs(node) if node.target == "conv_transpose_nd" else None
        if vs is None:
            continue
        g, w = vs
        found = weight_grads.get((g.id,) + tuple(repr(node.params.get(k)) for k in _CONV_KEYS))
        if found is None or id(found[0]) in pairs:
            continue
        partner, x = found
        dtypes = {v.aval.dtype for v in (x, g, w, node.outputs[0], partner.outputs[0])}
        if len(dtypes) != 1 or dtypes.pop() not in ("float32", "float64"):
            continue
        if tuple(node.outputs[0].shape) != tuple(x.shape) or tuple(partner.outputs[0].shape) != tuple(w.shape) \
                or tuple(partner.params.get("kernel_size", ())) != tuple(w.shape[2:]):
            continue
        pairs[id(node)], pairs[id(partner)] = partner, node
    return pairs


def _conv_backward(w: _Writer, weight_grad: Node, transpose: Node) -> None:
    """Both gradients of a pair from :func:`_conv_backward_pairs` in one statement."""
    x, g = (w.value(v) for v in weight_grad.inputs)
    weight = w.value(transpose.inputs[1])
    names = []
    for node in (transpose, weight_grad):
        names.append(f"v{len(w.names)}")
        w.names[node.outputs[0].id] = names[-1]
    params = "".join(f", {k}={w.render(transpose.params[k])}" for k in _CONV_KEYS + ("output_padding",))
    w.lines.append(f"{names[0]}, {names[1]} = _rt.conv_backward({x}, {weight}, {g}{params})")


Fused = CrossEntropy | GeluBackward | LayerNormBackward | AttentionProbs | PadSum
"""A recognised subgraph computed by one kernel call (:mod:`.patterns`)."""


def _without_fused(graph: Graph, groups: dict[int, list[Node]], losses: list[Fused]) -> dict[int, Fused]:
    """Take the nodes of each recognised subgraph out of their fusion groups (``groups`` is changed; a
    group left without a pointwise node is dropped); returns node id -> its subgraph. A subgraph whose
    nodes sit between other nodes of a group (the rest of the group would both feed it and read it) is
    left as recorded: ``losses`` keeps only the subgraphs taken out."""
    covered: dict[int, Fused] = {}
    for ce in list(losses):
        before = {g: list(nodes) for g, nodes in groups.items()}
        keys = set(ce.covered)
        for g in list(groups):
            kept = [n for n in groups[g] if id(n) not in keys]
            if any(not n.target.startswith("reduce_") for n in kept):
                groups[g] = kept
            else:
                del groups[g]
        if _acyclic(graph, groups):
            covered.update((key, ce) for key in keys)
        else:
            groups.clear()
            groups.update(before)
            losses.remove(ce)
    return covered


def _sink_into_readers(graph: Graph, groups: dict[int, list[Node]]) -> None:
    """Move each pointwise node whose inputs its group materialises anyway (external inputs, or values the
    group writes for other readers) and whose readers all lie in one other group of its shape into that
    group (``groups`` is changed): its own group then no longer writes its value. Relu's backward mask
    ``sign(relu(x))``, grouped with the forward, was a whole extra output of the forward's kernel."""
    group_of = {id(n): g for g, nodes in groups.items() for n in nodes}
    reads = {v.id for v in graph.outputs if type(v) is Var} | {v.id for _, v in graph.mutations if type(v) is Var}
    reads |= {g.value.id for g in graph.guards}

    def space(g: int) -> tuple[Any, ...]:
        return tuple(next(n for n in groups[g] if not n.target.startswith("reduce_")).outputs[0].shape)

    for g in list(groups):
        for node in list(groups[g]):
            out = node.outputs[0]
            if node.target.startswith("reduce_") or out.id in reads or not out.users or len(groups[g]) < 2:
                continue
            targets = {group_of.get(id(u)) for u in out.users}
            b = targets.pop() if len(targets) == 1 else None
            if b is None or b == g or tuple(out.shape) != space(b):
                continue
            if not all(type(v) is not Var or v.producer is None or group_of.get(id(v.producer)) != g
                       or any(group_of.get(id(u)) != g for u in v.users) for v in node.inputs):
                continue
            groups[g].remove(node)
            groups[b].append(node)
            if not _acyclic(graph, groups):  # b would read what g computes while g reads b: keep it in g
                groups[b].remove(node)
                groups[g].append(node)
                continue
            group_of[id(node)] = b
            if not any(not n.target.startswith("reduce_") for n in groups[g]):  # pragma: no cover - kept above
                raise AssertionError("a fusion group lost its last pointwise node")


def _acyclic(graph: Graph, groups: dict[int, list[Node]]) -> bool:
    """Whether the fusion groups, each run as one unit, can still be ordered (:func:`_units` succeeds)."""
    try:
        _units(graph, groups)
    except GraphCaptureError:
        return False
    return True


def _extend_fused_uses(last_use: dict[int, int], order: list[list[Node]], losses: list[Fused]) -> None:
    """The kernel calls of a cross-entropy read its logits and target where the loss is computed, and the
    seed where its gradient is; a GELU backward reads ``x`` and ``g`` at its last node, a layer-norm backward
    its inputs at its first result: keep them alive until then."""
    position = {id(node): k for k, unit in enumerate(order) for node in unit}
    for ce in losses:
        if isinstance(ce, AttentionProbs):  # the probabilities are returned by the attention's own call
            continue
        if isinstance(ce, PadSum):  # the pieces are copied into their windows where the sum is
            for v, _, _ in ce.parts:
                last_use[v.id] = max(last_use.get(v.id, -1), position[id(ce.root)])
            continue
        if isinstance(ce, GeluBackward):
            for v in (ce.x, ce.g):
                last_use[v.id] = max(last_use.get(v.id, -1), position[id(ce.result)])
            continue
        if isinstance(ce, LayerNormBackward):
            at = min(position[id(n)] for n in (ce.dx, ce.dgamma) if n is not None)
            for read in (ce.x, ce.gamma, ce.g):
                if read is not None:
                    last_use[read.id] = max(last_use.get(read.id, -1), at)
            continue
        if ce.one_call:  # one call where the first of its results is, reading what the covered nodes read
            at = min(position[id(n)] for n in ce.results())
            for v in _cross_entropy_reads(ce):
                if type(v) is Var:
                    last_use[v.id] = max(last_use.get(v.id, -1), at)
            continue
        assert ce.loss is not None  # a cross-entropy without its loss is one call
        reads = [(ce.logits, ce.loss), (ce.target, ce.loss)]
        if ce.grad is not None and type(ce.seed) is Var:
            reads.append((ce.seed, ce.grad))
        for v, node in reads:
            last_use[v.id] = max(last_use.get(v.id, -1), position[id(node)])


def _cross_entropy_reads(ce: CrossEntropy) -> tuple[Any, Any, Any, Any]:
    """What the one call of ``ce`` reads: the logits before any bias, the bias (``None`` without), the target
    before any range check taken in, the seed."""
    target = ce.target if ce.check is None else ce.check.inputs[0]
    return (ce.logits if ce.z is None else ce.z), ce.bias, target, ce.seed


def _place_products(w: _Writer, found: PadSum) -> None:
    """Have each batched GEMM whose permuted product is a piece of ``found`` write into its window of the
    planned result (the placement then finds it there and copies nothing). The window's view is sliced
    directly where the shapes are static (:mod:`.windows`), else found at run time (:func:`.runtime.window`);
    when every piece of a covering placement is a GEMM writing into a static view, the placement is the
    buffer itself (``w.in_place``)."""
    result = found.root.outputs[0]
    buffer = w.buffers.names[("o", result.id)]
    whole = found.covering
    for (value, low, shape), product in zip(found.parts, found.products):
        if product is None:
            whole = False
            continue
        mm, perm = product
        inverse = tuple(perm.index(axis) for axis in range(len(perm)))
        view = windows.static_view(buffer, tuple(result.shape), result.aval.dtype, low, shape, tuple(value.shape),
                                   inverse)
        a, b = mm.inputs[0], mm.inputs[1]  # vars of the product's rank (:func:`.patterns._permuted_product`)
        if view is None or type(a) is not Var or type(b) is not Var or not windows.honours_out(a.shape, b.shape) \
                or mm.outputs[0].aval.dtype != result.aval.dtype:
            whole = False
        w.windows[id(mm)] = view if view is not None else (
            f"_rt.window({buffer}, {w.render(low)}, {w.render(shape)}, {w.render(tuple(value.shape))}, "
            f"{w.render(inverse)})")
    if whole:
        w.in_place.add(id(found.root))


def _keep_computable(order: list[list[Node]], losses: list[Fused], covered: dict[int, Fused]) -> None:
    """Forget each attention whose recomputed probabilities come before the attention itself in ``order``
    (nothing orders the two): those nodes then run as recorded (``losses`` and ``covered`` are changed); a
    layer-norm backward placed before its forward recomputes the statistics."""
    position = {id(node): k for k, unit in enumerate(order) for node in unit}
    for norm in losses:
        if isinstance(norm, LayerNormBackward) and norm.forward is not None \
                and position[id(norm.forward)] > min(position[key] for key in norm.covered):
            norm.forward = None  # the statistics are recomputed
    for found in [f for f in losses if isinstance(f, AttentionProbs)]:
        if position[id(found.attention)] > min(position[key] for key in found.covered if key != id(found.attention)):
            losses.remove(found)
            for key in found.covered:
                covered.pop(key, None)


def _emit_fused(w: _Writer, node: Node, fused: Fused) -> None:
    """The statement of ``node`` inside a recognised subgraph (nothing for the nodes its call covers)."""
    if isinstance(fused, CrossEntropy):
        _emit_cross_entropy(w, node, fused)
    elif isinstance(fused, PadSum):
        if node is fused.root and id(node) in w.in_place:  # every piece was written into its window
            w.define(node, w.buffers.names[("o", node.outputs[0].id)])
        elif node is fused.root:
            result = node.outputs[0]
            parts = ", ".join(f"({w.value(v)}, {w.render(low)}, {w.render(shape)})" for v, low, shape in fused.parts)
            w.define(node, f"_rt.place({w.shape(result)}, {_dt(result.aval.dtype)}, ({parts},), {fused.covering}"
                           f"{w.buffers.out(result)})")
    elif isinstance(fused, AttentionProbs):
        if node is fused.attention:
            q, k, v = (w.value(x) for x in node.inputs[:3])
            out, probs = f"v{len(w.names)}", f"v{len(w.names) + 1}"
            w.names[node.outputs[0].id] = out
            w.names[fused.softmax.outputs[0].id] = probs
            w.lines.append(f"{out}, {probs} = _rt.attention_probs({q}, {k}, {v}, {w.render(float(node.params['scale']))})")
    elif isinstance(fused, LayerNormBackward):
        results = [n for n in (fused.dx, fused.dgamma) if n is not None]
        if any(node is n for n in results) and not any(n.outputs[0].id in w.names for n in results):
            names = []
            for n in (fused.dx, fused.dgamma):
                names.append("_" if n is None else f"v{len(w.names)}")
                if n is not None:
                    w.names[n.outputs[0].id] = names[-1]
            gamma = "None" if fused.gamma is None else w.value(fused.gamma)
            stats = "None" if fused.forward is None else w.ln_stats[id(fused.forward)]
            w.lines.append(f"{names[0]}, {names[1]} = _rt.layer_norm_backward({w.value(fused.x)}, {gamma}, "
                           f"{w.value(fused.g)}, {w.render(fused.eps)}, {fused.dx is not None}, "
                           f"{fused.dgamma is not None}, {stats})")
    elif node is fused.result:
        w.define(node, f"_rt.gelu_backward({w.value(fused.g)}, {w.value(fused.x)})")


def _emit_cross_entropy(w: _Writer, node: Node, ce: CrossEntropy) -> None:
    """At a cross-entropy's loss: one call computing it (:func:`.runtime.cross_entropy`); at its gradient:
    one call computing ``dx`` (:func:`.runtime.cross_entropy_grad`); nothing for the other nodes it covers.
    In the one-call form, one call (:func:`.runtime.cross_entropy_step`) at the first of its results."""
    if ce.one_call:
        if any(n.outputs[0].id in w.names for n in ce.results()) or node not in ce.results():
            return  # computed where the first of its results is
        names = []
        for n in (ce.loss, ce.grad, ce.bias_grad):
            names.append("_" if n is None else f"v{len(w.names)}")
            if n is not None:
                w.names[n.outputs[0].id] = names[-1]
        logits, bias, target, seed = _cross_entropy_reads(ce)
        check = "None" if ce.check is None else w.render(
            (ce.check.params["bound"], ce.check.params["what"], tuple(ce.check.params.get("allowed", ()))))
        w.lines.append(f"{', '.join(names)} = _rt.cross_entropy_step({w.value(logits)}, "
                       f"{'None' if bias is None else w.value(bias)}, {w.value(target)}, {ce.ignore_index}, "
                       f"{w.value(seed)}, {check}, {ce.bias_grad is not None})")
        return
    assert ce.loss is not None  # a cross-entropy without its loss is one call
    state = f"_ce{ce.loss.outputs[0].id}"
    if node is ce.loss:
        name = f"v{len(w.names)}"
        w.names[node.outputs[0].id] = name
        w.lines.append(f"{name}, {state} = _rt.cross_entropy({w.value(ce.logits)}, {w.value(ce.target)}, "
                       f"{ce.ignore_index})")
        if ce.grad is None:
            w.lines.append(f"del {state}")
    elif node is ce.grad:
        w.define(node, f"_rt.cross_entropy_grad({state}, {w.value(ce.seed)})")
        w.lines.append(f"del {state}")


def _defined(w: _Writer, node: Node) -> bool:
    return all(type(v) is not Var or v.id in w.names for v in node.inputs)


def lower(graph: Graph, *, strict_native: bool = False, fuse: bool = True, small_kernels: bool = False,
          plan_buffers: bool = True) -> Lowered:
    """Generate the function for ``graph`` (see the module docstring); ``plan_buffers``: GEMMs and kernels
    write into an arena reused across calls (:mod:`.buffers`)."""
    w = _Writer(graph)
    arg_names = {p.id: f"p{i}" for i, p in enumerate(graph.inputs)}
    for p in graph.inputs:
        w.names[p.id] = arg_names[p.id]
    _symbol_lines(w, graph, arg_names)
    sizes_at = len(w.lines)
    groups: dict[int, list[Node]] = {}
    if fuse:
        for node in graph.nodes:
            g = node.meta.get("fusion_group")
            if g is not None:
                groups.setdefault(g, []).append(node)
    losses: list[Fused] = [*find_cross_entropies(graph), *find_gelu_backwards(graph),
                           *find_layer_norm_backwards(graph), *find_attention_probs(graph),
                           *find_pad_sums(graph)] if fuse else []
    fused_losses = _without_fused(graph, groups, losses)
    _sink_into_readers(graph, groups)
    live_outside = _live_outside(graph, groups)
    order = _units(graph, groups)
    _keep_computable(order, losses, fused_losses)
    for found in losses:
        if isinstance(found, LayerNormBackward) and found.forward is not None:
            w.ln_stats.setdefault(id(found.forward), f"_st{len(w.ln_stats)}")
    plans = {id(unit[0]): plan_group(graph, unit, live_outside) for unit in order
             if len(unit) > 1 or unit[0].meta.get("fusion_group") in groups and id(unit[0]) not in fused_losses}
    if not small_kernels:
        order = _drop_small_kernels(order, plans, size_hints(graph))
    last_use = _last_uses(graph, order)
    _extend_fused_uses(last_use, order, losses)
    keep = {v.id for v in graph.outputs if type(v) is Var} | \
        {v.id for _, v in graph.mutations if type(v) is Var} | {p.id for p in graph.inputs}
    inplace = _inplace_updates(graph, order, plans)
    _alias_states(plans, inplace)
    pairs = _conv_backward_pairs(graph)
    if plan_buffers:
        at = {id(node): k for k, unit in enumerate(order) for node in unit}
        placed = {f.root.outputs[0].id: min([at[id(f.root)]] + [at[id(p[0])] for p in f.products if p])
                  for f in losses if isinstance(f, PadSum)}  # the GEMMs writing into the windows come first
        w.buffers = buffers.plan(graph, order, plans, last_use, _elementwise, inplace, placed)
        for found in losses:
            if isinstance(found, PadSum) and ("o", found.root.outputs[0].id) in w.buffers.names:
                _place_products(w, found)
        w.namespace["_arena"] = w.buffers.arena
    for position, unit in enumerate(order):
        plan = plans.get(id(unit[0]))
        partner = pairs.get(id(unit[0])) if plan is None else None
        if plan is None and id(unit[0]) in fused_losses:
            _emit_fused(w, unit[0], fused_losses[id(unit[0])])
        elif partner is not None and partner.outputs[0].id in w.names:
            pass  # computed with its partner
        elif partner is not None and _defined(w, partner):
            first, second = (unit[0], partner) if unit[0].target == "conv_weight_grad_nd" else (partner, unit[0])
            _conv_backward(w, first, second)
        elif plan is not None:
            slot = f"_k{len(w.kernels)}"
            w.kernels.append((slot, plan))
            _emit_group(w, plan, slot, inplace)
        else:
            node = unit[0]
            emitter = EMITTERS.get(node.target)
            if emitter is None:
                if strict_native:
                    raise GraphCaptureError(
                        f"numba backend (strict_native): no native lowering for primitive '{node.target}' "
                        f"(recorded at {node.location}); drop strict_native to run it through the eager "
                        "interpreter")
                emitter = _fallback
            emitter(w, node)
        dead = [vid for vid, last in last_use.items() if last == position and vid not in keep and vid in w.names]
        if dead:
            w.lines.append("del " + ", ".join(w.names[vid] for vid in sorted(dead)))
    w.lines[sizes_at:sizes_at] = w.size_lines
    outs = [w.value(v) for v in graph.outputs] + [w.value(v) for _, v in graph.mutations]
    w.lines.append(f"return ({', '.join(outs)}{',' if len(outs) == 1 else ''})")
    args = ", ".join(arg_names[p.id] for p in graph.inputs)
    source = w.buffers.wrap(args, w.lines, len(graph.symbols), w.symbols)  # the first lines read the sizes
    return Lowered(source, w.namespace, w.kernels, w.fallbacks)


_VIEWS = frozenset(name for name, prim in PRIMITIVES.items() if prim.family == "view") | {"stop_gradient"}


def _inplace_updates(graph: Graph, order: list[list[Node]], plans: dict[int, GroupPlan]) -> dict[int, Var]:
    """Mutation values an elementwise kernel may write straight into the state they replace (an optimizer
    updating parameters and momentum buffers): output var id -> state placeholder. Only when nothing reads
    the old state (or a view of it) after that kernel, the state is not an output, and the graph has no
    data guards (a run is never abandoned after writing state)."""
    if graph.guards or not graph.mutations:
        return {}
    root: dict[int, int] = {p.id: p.id for p in graph.inputs}
    last: dict[int, int] = {}
    position_of: dict[int, int] = {}
    for position, unit in enumerate(order):
        for node in unit:
            position_of[node.outputs[0].id] = position
            for v in node.inputs:
                if type(v) is Var and v.id in root:
                    last[root[v.id]] = max(last.get(root[v.id], -1), position)
            source = node.inputs[0] if node.inputs else None
            if node.target in _VIEWS and type(source) is Var and source.id in root:
                root[node.outputs[0].id] = root[source.id]
    returned = {root[v.id] for v in graph.outputs if type(v) is Var and v.id in root}
    found: dict[int, Var] = {}
    for target, value in graph.mutations:
        if type(value) is not Var or value.id not in position_of or target.id in returned:
            continue
        position = position_of[value.id]
        plan = plans.get(id(order[position][0]))
        if plan is None or not _elementwise(plan) or tuple(target.shape) != tuple(plan.space):
            continue
        if last.get(target.id, -1) > position:
            continue
        if any(v.id == target.id and not all(p) for v, p in zip(plan.inputs, plan.input_patterns)):
            continue
        found[value.id] = target
    return found


def _alias_states(plans: dict[int, GroupPlan], inplace: dict[int, Var]) -> None:
    """Let each elementwise kernel that writes a state in place (``inplace``) and reads that same state
    as an input read and write it through one argument (:func:`.kernels.alias_outputs`): the loop then
    vectorises (an SGD step on a 784x256 weight took 185 us with the state passed twice, 41 us so)."""
    for plan in plans.values():
        if not _elementwise(plan):
            continue
        index = {v.id: j for j, v in enumerate(plan.inputs)}
        aliases: dict[int, int] = {}
        for v in kernel_arguments(plan)[0]:
            state = inplace.get(v.id)
            if state is not None and state.id in index and state.aval.dtype == v.aval.dtype \
                    and index[state.id] not in aliases.values():
                aliases[v.id] = index[state.id]
        if aliases:
            alias_outputs(plan, aliases)


SMALL_GROUP = 4096
"""A fusion group whose iteration space has fewer elements (symbolic sizes taken at the sizes the graph was
captured with) gets a kernel only when a larger group of the graph uses the same kernel anyway: on a few
thousand elements numpy's calls cost about what a kernel call costs, and each distinct kernel costs a
compilation the first time."""


def size_hints(graph: Graph) -> dict[str, int]:
    """Symbol name -> its size in the values the graph's placeholders hold (the capture's example); symbols
    no placeholder value shows are absent. Used for choices that do not change results (which groups get a
    kernel), so a dynamic graph makes the static graph's choices at the size it was captured with."""
    hints: dict[str, int] = {}
    for p in graph.inputs:
        shape = getattr(p.value, "shape", None)
        if shape is None or len(shape) != len(p.shape):
            continue
        for d, size in zip(p.shape, shape):
            linear = d.linear_in() if isinstance(d, SymDim) else None
            if linear is not None and linear[0] not in hints and (int(size) - linear[2]) % linear[1] == 0:
                hints[linear[0]] = (int(size) - linear[2]) // linear[1]
    return hints


def _space_size(plan: GroupPlan, hints: dict[str, int]) -> int | None:
    size = 1
    for d in plan.space:
        if isinstance(d, SymDim):
            d = d.subs(hints)
        if not isinstance(d, int):
            return None
        size *= d
    return size


def _drop_small_kernels(order: list[list[Node]], plans: dict[int, GroupPlan],
                        hints: dict[str, int]) -> list[list[Node]]:
    """``order`` with the small groups (see :data:`SMALL_GROUP`) split back into single nodes."""
    def small(plan: GroupPlan) -> bool:
        size = _space_size(plan, hints)
        return size is not None and size < SMALL_GROUP

    needed = {plan.source for plan in plans.values() if not small(plan)}
    out: list[list[Node]] = []
    for unit in order:
        plan = plans.get(id(unit[0]))
        if plan is not None and small(plan) and plan.source not in needed:
            del plans[id(unit[0])]
            out.extend([node] for node in unit)
        else:
            out.append(unit)
    return out


def _live_outside(graph: Graph, groups: dict[int, list[Node]]) -> set[int]:
    """Ids of values read by something outside the group that produces them."""
    group_of = {id(n): g for g, nodes in groups.items() for n in nodes}
    live: set[int] = {v.id for v in graph.outputs if type(v) is Var}
    live |= {v.id for _, v in graph.mutations if type(v) is Var}
    live |= {g.value.id for g in graph.guards}
    for node in graph.nodes:
        mine = group_of.get(id(node))
        for v in node.inputs:
            if type(v) is Var and v.producer is not None and (mine is None or group_of.get(id(v.producer)) != mine):
                live.add(v.id)
    return live


def _last_uses(graph: Graph, order: list[list[Node]]) -> dict[int, int]:
    """Var id -> the position (in ``order``) of the last unit reading it."""
    last: dict[int, int] = {}
    for position, unit in enumerate(order):
        for node in unit:
            for v in node.inputs:
                if type(v) is Var:
                    last[v.id] = position
            last.setdefault(node.outputs[0].id, position)
    return last


__all__ = ["EMITTERS", "Lowered", "lower"]
