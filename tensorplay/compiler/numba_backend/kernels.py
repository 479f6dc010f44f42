"""Fused kernels: one generated numba function per pointwise-fusion group.

:func:`plan_group` describes a group (see :mod:`tensorplay.compiler.passes.fusion`): its iteration
space (the shape of its pointwise nodes), its external inputs with their broadcast pattern, the
values it must write (used outside the group) and its reductions. Adjacent axes that every operand
treats alike are merged (a ``[B, T, F]`` space with a ``[F]`` bias becomes ``[B*T, F]``), so most
kernels are one or two loops deep. :func:`kernel_source` writes the numba function:

* inputs arrive as C-contiguous arrays reshaped to the merged rank, with size 1 on broadcast axes;
* every value has the dtype eager computation gives it (float32 arithmetic stays float32, literals
  are cast to the operation's dtype, comparisons run in the promoted dtype), and NaN propagates as
  in numpy (``maximum``, ``relu``, ``reduce_max``);
* sums accumulate in float64 and are cast to their dtype at the end; a reduction over the innermost
  axes uses one scalar accumulator per output element;
* the source depends only on the group's structure (never on sizes), so a kernel is shared by every
  specialization and call with the same structure, and its text is the on-disk cache key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tensorplay.interpreters.graph.ir import Graph, Literal, Node, Var
from tensorplay.spec.dtypes import result_type



@dataclass
class GroupPlan:
    """A fusion group, ready to be generated and called (see the module docstring)."""

    nodes: list[Node]
    space: tuple[Any, ...]
    inputs: list[Var]
    outputs: list[Var]
    reductions: list[Node]
    merged: list[list[int]]
    input_patterns: list[tuple[bool, ...]]
    reduced_axes: list[tuple[bool, ...]]
    source: str = ""
    name: str = ""
    key: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    aliases: dict[int, int] = field(default_factory=dict)
    """Written value id -> index of the input the kernel writes it into, element for element (an
    optimizer's state updated in place; see :func:`alias_outputs`). Such values get no output argument."""


def _pattern(shape: tuple[Any, ...], space: tuple[Any, ...]) -> tuple[bool, ...]:
    """For each axis of ``space``: whether an operand of ``shape`` (right-aligned) varies along it."""
    offset = len(space) - len(shape)
    out = []
    for axis, size in enumerate(space):
        k = axis - offset
        if k < 0:
            out.append(False)
            continue
        d = shape[k]
        out.append(not (isinstance(d, int) and d == 1 and not (isinstance(size, int) and size == 1)))
    return tuple(out)


def plan_group(graph: Graph, nodes: list[Node], live_outside: set[int]) -> GroupPlan:
    """Describe the fusion group ``nodes`` of ``graph``; ``live_outside`` holds the ids of values read
    outside the group (outputs, mutations, guards, other nodes)."""
    member = {id(n) for n in nodes}
    reductions = [n for n in nodes if n.target.startswith("reduce_")]
    pointwise = [n for n in nodes if not n.target.startswith("reduce_")]
    space = tuple(pointwise[0].outputs[0].shape)
    inputs: list[Var] = []
    seen: set[int] = set()
    for node in nodes:
        for v in node.inputs:
            if type(v) is Var and (v.producer is None or id(v.producer) not in member) and v.id not in seen:
                seen.add(v.id)
                inputs.append(v)
    outputs = [n.outputs[0] for n in pointwise if n.outputs[0].id in live_outside] + \
        [n.outputs[0] for n in reductions]
    input_patterns = [_pattern(tuple(v.shape), space) for v in inputs]
    reduced: list[tuple[bool, ...]] = []
    for r in reductions:
        axes = {a % len(space) for a in r.params["axes"]}  # no axes: nothing is reduced (a copy)
        reduced.append(tuple(axis in axes for axis in range(len(space))))
    # merge adjacent axes that every operand and reduction treats alike (drop static size-1 axes)
    merged: list[list[int]] = []
    signature_of_last: tuple[Any, ...] | None = None
    for axis, size in enumerate(space):
        if isinstance(size, int) and size == 1:
            continue
        signature = tuple(p[axis] for p in input_patterns) + tuple(r[axis] for r in reduced)
        if merged and signature == signature_of_last:
            merged[-1].append(axis)
        else:
            merged.append([axis])
            signature_of_last = signature
    plan = GroupPlan(nodes, space, inputs, outputs, reductions, merged, input_patterns, reduced)
    plan.source, plan.name = kernel_source(plan)
    plan.key = hashlib.sha256(plan.source.encode()).hexdigest()
    return plan


# ---- source generation ------------------------------------------------------------------------------

_NP = {"float32": "np.float32", "float64": "np.float64"}


def _literal(value: Any, dtype: str) -> str:
    if dtype == "bool":
        return "True" if bool(value) else "False"
    number = float(value)
    if number != number:
        text = "np.nan"
    elif number in (float("inf"), float("-inf")):
        text = "np.inf" if number > 0 else "-np.inf"
    else:
        text = repr(number)
    return f"{_NP[dtype]}({text})"


def _cast(expr: str, source: str, target: str) -> str:
    if source == target:
        return expr
    if target == "bool":
        return f"({expr} != 0)"
    return f"{_NP[target]}({expr})"


def _weak(v: Any) -> str:
    return v.aval.dtype  # type: ignore[no-any-return]


class _Emitter:
    """Writes the loop body: one line per node, values named ``t<k>`` with known dtypes."""

    def __init__(self, plan: GroupPlan) -> None:
        self.plan = plan
        self.names: dict[int, tuple[str, str]] = {}   # var id -> (expression, dtype)
        self.lines: list[str] = []
        self.count = 0

    def operand(self, v: Any, dtype: str) -> str:
        """``v`` (a value or a literal) as an expression of ``dtype``."""
        if type(v) is Literal:
            return _literal(v.value, dtype)
        expr, have = self.names[v.id]
        return _cast(expr, have, dtype)

    def define(self, node: Node, expr: str) -> None:
        name = f"t{self.count}"
        self.count += 1
        self.lines.append(f"{name} = {expr}")
        self.names[node.outputs[0].id] = (name, node.outputs[0].aval.dtype)

    def node(self, node: Node) -> None:
        target = node.target
        out = node.outputs[0].aval.dtype
        ins = node.inputs
        if target == "where":
            cond = self.operand(ins[0], "bool")
            self.define(node, f"({self.operand(ins[1], out)} if {cond} else {self.operand(ins[2], out)})")
            return
        if target == "cast":
            self.define(node, self.operand(ins[0], out))
            return
        if len(ins) == 1:
            self.define(node, _unary(target, self.operand(ins[0], out if target != "logical_not" else "bool"), out))
            return
        if out == "bool":
            if target in _LOGICAL:
                a, b = self.operand(ins[0], "bool"), self.operand(ins[1], "bool")
                self.define(node, f"({a} {_LOGICAL[target]} {b})")
                return
            compute = result_type([_weak(v) for v in ins])
            a, b = self.operand(ins[0], compute), self.operand(ins[1], compute)
            self.define(node, f"({a} {_COMPARE[target]} {b})")
            return
        a, b = self.operand(ins[0], out), self.operand(ins[1], out)
        self.define(node, _binary(target, a, b))


_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_ARITH = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_LOGICAL = {"logical_and": "and", "logical_or": "or"}


_UNARY_CODE: dict[str, Callable[[str, str], str]] = {
    "neg": lambda x, dtype: f"(-{x})",
    "abs": lambda x, dtype: f"abs({x})",
    "sign": lambda x, dtype: f"np.sign({x})",
    "floor": lambda x, dtype: f"np.floor({x})",
    "ceil": lambda x, dtype: f"np.ceil({x})",
    "round": lambda x, dtype: f"np.rint({x})",  # half to even, as the primitive
    "sqrt": lambda x, dtype: f"np.sqrt({x})",
    "rsqrt": lambda x, dtype: f"({_literal(1.0, dtype)} / np.sqrt({x}))",
    "relu": lambda x, dtype: f"({x} if ({x} >= {_literal(0.0, dtype)} or {x} != {x}) else {_literal(0.0, dtype)})",
    "logical_not": lambda x, dtype: f"(not {x})",
}
"""Scalar Python/numba code of each fusible unary primitive, given the operand's code and dtype."""

def _infix(op: str) -> Callable[[str, str], str]:
    return lambda a, b: f"({a} {op} {b})"


_BINARY_CODE: dict[str, Callable[[str, str], str]] = {
    **{name: _infix(op) for name, op in _ARITH.items()},
    "maximum": lambda a, b: f"({a} if ({a} >= {b} or {a} != {a}) else {b})",
    "minimum": lambda a, b: f"({a} if ({a} <= {b} or {a} != {a}) else {b})",
}
"""Scalar code of each fusible binary arithmetic primitive (NaN propagates through maximum/minimum)."""

KERNEL_CODE_TARGETS = frozenset(_UNARY_CODE) | frozenset(_BINARY_CODE) | frozenset(_COMPARE) | frozenset(_LOGICAL) | {
    "where", "cast"}
"""Every primitive a generated kernel can compute inline (each fusible primitive must be here)."""


def _unary(target: str, x: str, dtype: str) -> str:
    code = _UNARY_CODE.get(target)
    if code is None:
        raise AssertionError(f"no kernel code for {target}")
    return code(x, dtype)


def _binary(target: str, a: str, b: str) -> str:
    code = _BINARY_CODE.get(target)
    if code is None:
        raise AssertionError(f"no kernel code for {target}")
    return code(a, b)


def _index(pattern: tuple[bool, ...], merged: list[list[int]]) -> str:
    parts = [f"i{k}" if pattern[group[0]] else "0" for k, group in enumerate(merged)]
    return ", ".join(parts) if parts else "0"


def _kept_index(reduced: tuple[bool, ...], merged: list[list[int]]) -> str:
    parts = [f"i{k}" for k, group in enumerate(merged) if not reduced[group[0]]]
    return ", ".join(parts) if parts else "0"


def uses_scalar_accumulators(plan: GroupPlan) -> bool:
    """Whether the reductions of ``plan`` all reduce the innermost merged axes (one scalar accumulator per
    output element, written by the kernel); otherwise the caller passes accumulator arrays."""
    return bool(plan.reductions) and all(r == plan.reduced_axes[0] for r in plan.reduced_axes) and \
        _is_suffix(plan.reduced_axes[0], plan.merged)


def accumulator_dtype(node: Node) -> str:
    """Sums accumulate in float64; products, maxima and minima in their own dtype (a product as numpy's
    ``multiply.reduce``, which the eager interpreter runs)."""
    return "float64" if node.target == "reduce_sum" else node.outputs[0].aval.dtype


START = {"reduce_sum": 0.0, "reduce_max": float("-inf"), "reduce_min": float("inf"), "reduce_prod": 1.0}
"""The initial value of each reduction's accumulator."""


def kernel_arguments(plan: GroupPlan) -> tuple[list[Var], list[Node]]:
    """The arrays a kernel writes, in argument order (pointwise values, then reductions with scalar
    accumulators), and the reductions whose accumulator arrays the caller passes after them."""
    reduction_ids = {r.outputs[0].id for r in plan.reductions}
    written = [v for v in plan.outputs if v.id not in reduction_ids]
    if uses_scalar_accumulators(plan):
        return written + [r.outputs[0] for r in plan.reductions], []
    return written, list(plan.reductions)


def kernel_source(plan: GroupPlan) -> tuple[str, str]:
    """The numba function for ``plan`` (source, function name); see the module docstring.

    Arguments: the merged sizes ``n0, n1, ...``, the inputs ``a0, ...``, the outputs ``o0, ...``
    (:attr:`GroupPlan.outputs` minus reductions, then the reductions when they use scalar accumulators)
    and otherwise one accumulator array ``r0, ...`` per reduction (initialised by the caller). No array is
    allocated or reshaped inside a kernel: numba compiles those constructs slowly."""
    merged = plan.merged
    rank = len(merged)
    emitter = _Emitter(plan)
    in_names = [f"a{j}" for j in range(len(plan.inputs))]
    for j, v in enumerate(plan.inputs):
        emitter.names[v.id] = (f"{in_names[j]}[{_index(plan.input_patterns[j], merged)}]", v.aval.dtype)
    for node in plan.nodes:
        if not node.target.startswith("reduce_"):
            emitter.node(node)
    reduction_ids = {r.outputs[0].id for r in plan.reductions}
    scalar = uses_scalar_accumulators(plan)
    written, _ = kernel_arguments(plan)
    out_names = {v.id: f"o{k}" for k, v in enumerate(written)}
    acc_names = [] if scalar else [f"r{k}" for k in range(len(plan.reductions))]
    sizes = [f"n{k}" for k in range(rank)]
    full_index = ", ".join(f"i{i}" for i in range(rank)) or "0"
    for v in written:
        if v.id in plan.aliases:
            out_names[v.id] = in_names[plan.aliases[v.id]]
    inner = list(emitter.lines)
    for v in written:
        if v.id not in reduction_ids:
            inner.append(f"{out_names[v.id]}[{full_index}] = {emitter.operand(v, v.aval.dtype)}")
    per_row: list[str] = []
    after_row: list[str] = []
    before_inner: list[str] = []  # accumulator arrays reduced along the innermost axis: a local partial
    after_inner: list[str] = []   # over that loop, added in after it (no store and load per element)
    for r_index, r in enumerate(plan.reductions):
        source = r.inputs[0]
        assert isinstance(source, Var)
        acc_dtype = accumulator_dtype(r)
        value = _cast(emitter.operand(source, source.aval.dtype), source.aval.dtype, acc_dtype)
        index = _kept_index(plan.reduced_axes[r_index], merged)
        if scalar:
            acc = f"acc{r_index}"
            per_row.append(f"{acc} = {_literal(START[r.target], acc_dtype)}")
            inner.append(_accumulate(r.target, acc, value))
            after_row.append(f"{out_names[r.outputs[0].id]}[{index}] = "
                             f"{_cast(acc, acc_dtype, r.outputs[0].aval.dtype)}")
        elif rank and plan.reduced_axes[r_index][merged[-1][0]]:
            local = f"part{r_index}"
            before_inner.append(f"{local} = {_literal(START[r.target], acc_dtype)}")
            inner.append(_accumulate(r.target, local, value))
            after_inner.append(_accumulate(r.target, f"{acc_names[r_index]}[{index}]", local))
        else:
            inner.append(_accumulate(r.target, f"{acc_names[r_index]}[{index}]", value))
    body: list[str] = []
    n_outer = sum(1 for g in merged if not plan.reduced_axes[0][g[0]]) if scalar else rank
    if before_inner:  # the innermost loop is opened below, between its partials' start and end
        n_outer -= 1
    depth = 0
    for i in range(n_outer):
        body.append("    " * depth + f"for i{i} in range({sizes[i]}):")
        depth += 1
    body.extend("    " * depth + line for line in per_row + before_inner)
    inner_depth = depth
    for i in range(n_outer, rank):
        body.append("    " * inner_depth + f"for i{i} in range({sizes[i]}):")
        inner_depth += 1
    if rank == 0:
        inner_depth = 0
    body.extend("    " * inner_depth + line for line in inner)
    body.extend("    " * depth + line for line in after_inner + after_row)
    names = sizes + in_names + [out_names[v.id] for v in written if v.id not in plan.aliases] + acc_names
    text = "\n".join([f"def kernel({', '.join(names)}):"] + ["    " + line for line in body]) + "\n"
    return text, "kernel"


def alias_outputs(plan: GroupPlan, aliases: dict[int, int]) -> None:
    """Have the kernel of ``plan`` (elementwise, every operand of its full shape or a scalar) write each
    value of ``aliases`` (written value id -> input index) into that input instead of an output argument,
    and regenerate its source. Every input element is read before the iteration that reads it writes it,
    so the update is exact; and a loop reading and writing one array vectorises, where an output that
    merely overlaps an input (the same memory passed twice) defeats the vectoriser's overlap check."""
    written, _ = kernel_arguments(plan)
    known = {v.id for v in written}
    if not aliases or any(k not in known for k in aliases) or len(set(aliases.values())) != len(aliases):
        raise AssertionError("alias_outputs: each aliased value must be a written value, each input used once")
    plan.aliases = dict(aliases)
    plan.source, plan.name = kernel_source(plan)
    plan.key = hashlib.sha256(plan.source.encode()).hexdigest()


def _is_suffix(reduced: tuple[bool, ...], merged: list[list[int]]) -> bool:
    flags = [reduced[g[0]] for g in merged]
    seen_reduced = False
    for flag in flags:
        if flag:
            seen_reduced = True
        elif seen_reduced:
            return False
    return seen_reduced


def _accumulate(kind: str, acc: str, value: str) -> str:
    if kind == "reduce_sum":
        return f"{acc} += {value}"
    if kind == "reduce_prod":
        return f"{acc} *= {value}"
    op = ">" if kind == "reduce_max" else "<"
    return f"{acc} = {value} if ({value} {op} {acc} or {value} != {value}) else {acc}"


__all__ = ["GroupPlan", "START", "alias_outputs", "kernel_arguments", "accumulator_dtype", "kernel_source", "plan_group", "uses_scalar_accumulators"]

