"""``typecheck(graph)``: the IR's own type checker.

Checks, in order: every placeholder has a known kind and a valid aval; every
value is assigned once (single assignment); every node's target is a
primitive; every input is defined before use (a placeholder or an earlier
node's output) or is a literal whose aval matches its value; every node's
output aval is exactly what the primitive's shape rule gives for its input
avals and params; outputs and guards refer to defined values. Run it after
every pass in tests.
"""

from __future__ import annotations

from typing import Any

from tensorplay.interpreters.graph.ir import INPUT_KINDS, NUMPY_DTYPES, Graph, Literal, Node, Var
from tensorplay.spec.aval import Aval
from tensorplay.spec.errors import TensorplayError
from tensorplay.ops import PRIMITIVE_NAMES
from tensorplay.symbolic import SymDim

_PRIMITIVES = frozenset(PRIMITIVE_NAMES)


class GraphTypeError(TensorplayError, TypeError):
    """The graph is ill-formed: the message names the node index, the primitive and the avals."""


def _where(index: int, node: Node) -> str:
    loc = f" (recorded at {node.location})" if node.location else ""
    return f"node {index} ({node.target}){loc}"


def _valid_dim(d: Any) -> bool:
    return isinstance(d, SymDim) or (isinstance(d, int) and not isinstance(d, bool) and d >= 0)


def _check_aval(aval: Any, what: str) -> None:
    if not isinstance(aval, Aval) or not isinstance(aval.shape, tuple):
        raise GraphTypeError(f"{what}: aval must be an Aval (shape tuple, dtype), got {aval!r}")
    if aval.dtype not in NUMPY_DTYPES:
        raise GraphTypeError(f"{what}: unknown dtype {aval.dtype!r} in aval {aval!r}")
    bad = [d for d in aval.shape if not _valid_dim(d)]
    if bad:
        raise GraphTypeError(f"{what}: shape entries must be non-negative ints or SymDims, got {bad[0]!r} "
                             f"in {aval!r}")


def _name(v: Var) -> str:
    return v.name if v.name is not None else f"%{v.id}"


def typecheck(graph: Graph) -> Graph:
    """Check ``graph`` (see the module docstring); returns it, or raises :class:`GraphTypeError`."""
    from tensorplay.spec import SPECS

    defined: set[int] = set()
    for i, p in enumerate(graph.inputs):
        if not isinstance(p, Var):
            raise GraphTypeError(f"input {i}: expected a Var, got {p!r}")
        if p.kind not in INPUT_KINDS:
            raise GraphTypeError(f"input {i} ({p.name}): unknown kind {p.kind!r}")
        if p.producer is not None:
            raise GraphTypeError(f"input {i} ({p.name}) is also the output of {p.producer!r}")
        _check_aval(p.aval, f"input {i} ({p.name})")
        if p.id in defined:
            raise GraphTypeError(f"input {i} ({p.name}) appears twice among the inputs")
        defined.add(p.id)

    for index, node in enumerate(graph.nodes):
        where = _where(index, node)
        if node.target not in _PRIMITIVES:
            raise GraphTypeError(f"{where}: {node.target!r} is not a primitive of the Ops protocol")
        avals: list[Aval | None] = []
        for k, v in enumerate(node.inputs):
            if v is None:
                avals.append(None)
            elif type(v) is Literal:
                expected = Literal(v.value).aval
                if v.aval != expected:
                    raise GraphTypeError(f"{where}: literal input {k} ({v.value!r}) has aval {v.aval!r}, "
                                         f"expected {expected!r}")
                avals.append(v.aval)
            elif type(v) is Var:
                if v.id not in defined:
                    state = "is defined later" if any(v is o for n in graph.nodes for o in n.outputs) \
                        else "is not defined in this graph"
                    raise GraphTypeError(f"{where}: input {k} {_name(v)}: {v.aval!r} {state} "
                                         "(every value must be defined before use)")
                avals.append(v.aval)
            else:
                raise GraphTypeError(f"{where}: input {k} is {v!r}, expected a Var, a Literal or None")
        try:
            expected_aval = SPECS[node.target].rule(*avals, **node.params)
        except Exception as error:
            shown = ", ".join("None" if a is None else repr(a) for a in avals)
            raise GraphTypeError(f"{where}: the shape rule rejects inputs ({shown}) with params "
                                 f"{node.params}: {error}") from error
        if len(node.outputs) != 1:
            raise GraphTypeError(f"{where}: expected one output, got {len(node.outputs)}")
        out = node.outputs[0]
        if out.producer is not node:
            raise GraphTypeError(f"{where}: output {_name(out)} records a different producer")
        _check_aval(out.aval, where)
        if out.aval != expected_aval:
            raise GraphTypeError(f"{where}: output aval {out.aval!r} differs from the rule's {expected_aval!r}")
        if out.id in defined:
            raise GraphTypeError(f"{where}: output {_name(out)} is assigned more than once "
                                 "(single assignment violated)")
        defined.add(out.id)

    for k, v in enumerate(graph.outputs):
        if type(v) is Var and v.id not in defined:
            raise GraphTypeError(f"output {k} ({_name(v)}: {v.aval!r}) is not defined in this graph")
        if type(v) not in (Var, Literal):
            raise GraphTypeError(f"output {k} is {v!r}, expected a Var or a Literal")
    seen: set[int] = set()
    for p, v in graph.mutations:
        if p.kind not in ("buffer", "parameter", "captured") or not any(p is q for q in graph.inputs):
            raise GraphTypeError(f"mutation of {_name(p)}: only state inputs (buffers, parameters, captured "
                                 f"tensors) of this graph can be mutated, got kind {p.kind!r}")
        if p.id in seen:
            raise GraphTypeError(f"mutation of {_name(p)}: the input is mutated twice")
        seen.add(p.id)
        if type(v) is Var and v.id not in defined:
            raise GraphTypeError(f"mutation of {_name(p)}: new value {_name(v)} is not defined in this graph")
        if v.aval != p.aval:
            raise GraphTypeError(f"mutation of {_name(p)}: new value aval {v.aval!r} differs from {p.aval!r}")
    for g in graph.guards:
        if g.value.id not in defined:
            raise GraphTypeError(f"guard {g} reads a value not defined in this graph")
    return graph
