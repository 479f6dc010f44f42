"""What a traced program requires of its dynamic dims, and whether the declaration allows it.

Two sources of requirements:

* **decisions**: Python code comparing symbolic sizes while the program is traced (``if x.shape[1] > 8``).
  Within :func:`deciding`, a comparison the declared ranges decide is answered without a trace; one they do
  not decide is answered with the example's sizes and recorded (a :class:`Decision`, with the user's line):
  the traced program is only right for sizes that decide the same way.
* **shape rules**: symbolic shape rules skip checks they cannot decide (``F`` against ``16``), so the graph
  can hold requirements no rule raised. :func:`probe` re-runs every rule with concrete sizes (the example's,
  and for each dim in turn, sizes across its declared range: its ends, its neighbours, far values) and
  locates, for each dim whose sizes fail, the boundary (``Seq >= 3``), a specialisation (``F == 16``) or a
  tie (``B == B2``), with the first operation that fails and its source line.

:func:`analyse` turns both into :class:`Requirement`\\ s; :mod:`tensorplay.export.exporting` compares them
with each dim's declaration.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tensorplay.export.dynamic import ShapeSpec
from tensorplay.interpreters.graph.ir import Graph, Literal, Location, Node, Var, has_symbolic, substitute
from tensorplay.interpreters.graph.recorder import user_location
from tensorplay.spec.aval import Aval
from tensorplay.symbolic import SymDim, deciding as _deciding

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}
_FAR = (7, 13, 31, 97, 1009, 65_537, 1_048_583)


@dataclass(frozen=True)
class Decision:
    """``expr op 0`` was ``outcome`` for the example while tracing, at ``location`` (the user's line)."""

    expr: SymDim
    op: str
    outcome: bool
    location: Location | None

    def condition(self) -> tuple[SymDim, str]:
        """The condition the traced program assumes: ``(expr, op)`` meaning ``expr op 0``."""
        return (self.expr, self.op) if self.outcome else (self.expr, _NEGATE[self.op])


class Decider:
    """Answers symbolic comparisons from the declared ranges, else from the example (recorded)."""

    def __init__(self, spec: ShapeSpec, strict: bool = False) -> None:
        self.ranges = spec.ranges
        self.hints = spec.hints
        self.strict = strict
        self.decisions: list[Decision] = []
        self.thread = threading.get_ident()  # comparisons of other threads are not this export's

    def __call__(self, diff: SymDim, op: str) -> bool | None:
        if threading.get_ident() != self.thread:
            return None
        low, high = diff.bounds(self.ranges)
        decided = _by_bounds(low, high, op)
        if decided is not None:
            return decided
        if self.strict or not diff.free_symbols <= set(self.hints):
            return None
        value = diff.evaluate(self.hints)
        outcome = _compare(value, op)
        self.decisions.append(Decision(diff, op, outcome, user_location(3)))
        return outcome


def _compare(value: float, op: str) -> bool:
    return {"<": value < 0, "<=": value <= 0, ">": value > 0, ">=": value >= 0}[op]


def _by_bounds(low: float, high: float, op: str) -> bool | None:
    """``expr op 0`` when every value in ``[low, high]`` decides it the same way, else ``None``."""
    at_low, at_high = _compare(low, op), _compare(high, op)  # a threshold test: equal at both ends, equal between
    return at_low if at_low == at_high else None


@contextmanager
def deciding(decider: Decider) -> Iterator[Decider]:
    """Install ``decider`` for the comparisons of symbolic sizes made within the block."""
    with _deciding(decider):
        yield decider


# ---- requirements ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Requirement:
    """What the program needs of root dim ``dim``: ``kind`` ``"min"``/``"max"`` (``dim >= value`` /
    ``dim <= value``), ``"equal"`` (``dim == value``: specialised), ``"tie"`` (``dim == other``), with
    ``where`` (the operation and the user's line that imposed it) and ``detail`` (the rule's message or the
    comparison)."""

    dim: str
    kind: str
    value: int | None = None
    other: str | None = None
    where: str = ""
    detail: str = ""

    @property
    def text(self) -> str:
        """``Seq >= 3``, ``F == 16``, ``B2 == B``."""
        op = {"min": ">=", "max": "<=", "equal": "=="}.get(self.kind)
        if op is not None:
            return f"{self.dim} {op} {self.value}"
        return f"{self.dim} == {self.other}"


def _node_where(node: Node) -> str:
    loc = f" at {node.location}" if node.location is not None else ""
    return f"{node.target}{loc}"


def from_decisions(decisions: Sequence[Decision], spec: ShapeSpec) -> list[Requirement]:
    """One requirement per decision: a bound on its one dim when linear in one dim, else the dims it mentions
    specialised to the example's sizes."""
    out: list[Requirement] = []
    for decision in decisions:
        expr, op = decision.condition()
        where = f"a comparison of sizes at {decision.location}" if decision.location else "a comparison of sizes"
        detail = f"the program took the branch where {expr} {op} 0"
        lin = expr.linear_in()
        if lin is not None:
            name, a, c = lin
            # a*name + c op 0  ->  name op' -c/a
            bound = -c / a
            rel = op if a > 0 else _FLIP[op]
            if rel in (">", ">="):
                k = math.floor(bound) + 1 if rel == ">" else math.ceil(bound)
                out.append(Requirement(name, "min", k, where=where, detail=detail))
            else:
                k = math.ceil(bound) - 1 if rel == "<" else math.floor(bound)
                out.append(Requirement(name, "max", k, where=where, detail=detail))
            continue
        for name in sorted(expr.free_symbols):
            out.append(Requirement(name, "equal", spec.hints[name], where=where, detail=detail))
    return out


# ---- probing the shape rules ----------------------------------------------------------------------------

class Prober:
    """Checks a graph's shape rules with concrete sizes for its dims (see the module docstring)."""

    def __init__(self, graph: Graph, spec: ShapeSpec) -> None:
        from tensorplay.spec import SPECS
        self.rules = SPECS
        self.spec = spec
        self.graph = graph
        self.inputs = [p for p in graph.inputs if any(isinstance(d, SymDim) for d in p.shape)]
        self.nodes = [n for n in graph.nodes if n.has_sym or _mentions_symbols(n)]

    def failure(self, binding: Mapping[str, int]) -> tuple[Node | None, str] | None:
        """``None`` when every rule accepts the sizes ``binding`` gives, else the first failing node (``None``
        for an input whose size would be negative) and the message."""
        for p in self.inputs:
            for axis, d in enumerate(p.shape):
                if isinstance(d, SymDim) and d.subs(binding) < 0:
                    return None, f"input {p.name!r} axis {axis} would have size {d.subs(binding)}"
        for node in self.nodes:
            avals = [None if v is None else _concrete_aval(v, binding) for v in node.inputs]
            params = substitute(node.params, binding) if node.has_sym else node.params
            try:
                result = self.rules[node.target].rule(*avals, **params)
            except Exception as error:  # a rule's refusal is what we look for
                return node, str(error).split("\n")[0]
            expected = tuple(d.subs(binding) if isinstance(d, SymDim) else d for d in node.out.shape)
            if tuple(result.shape) != expected:
                return node, (f"the rule gives shape {list(result.shape)}, the graph was traced with "
                              f"{list(node.out.shape)} = {list(expected)}")
        return None

    def passes(self, binding: Mapping[str, int]) -> bool:
        """Whether :meth:`failure` finds nothing."""
        return self.failure(binding) is None


def _mentions_symbols(node: Node) -> bool:
    return any(isinstance(v, Var) and any(isinstance(d, SymDim) for d in v.shape) for v in node.inputs) or \
        any(isinstance(d, SymDim) for d in node.out.shape)


def _concrete_aval(v: Var | Literal, binding: Mapping[str, int]) -> Aval:
    if isinstance(v, Literal):
        return v.aval
    if not has_symbolic(v.shape):
        return v.aval
    return Aval(tuple(d.subs(binding) if isinstance(d, SymDim) else d for d in v.shape), v.aval.dtype)


def _candidates(low: int, high: int | None, hint: int) -> list[int]:
    values = {low, low + 1, low + 2, hint - 2, hint - 1, hint + 1, hint + 2, 2 * hint, 2 * hint + 1, 3 * hint + 1,
              *_FAR}
    if high is not None:
        values |= {high - 1, high, (low + high) // 2}
    else:
        values |= {4 * hint + 16}
    return sorted(v for v in values if v != hint and v >= low and (high is None or v <= high))


def check_example(graph: Graph, spec: ShapeSpec) -> None:
    """``ShapeError`` (naming the operation and its line) when the example's own sizes fail a shape rule of the
    graph traced with symbolic sizes."""
    from tensorplay.errors import ShapeError

    failure = Prober(graph, spec).failure(spec.hints)
    if failure is not None:
        node, message = failure
        where = f" ({_node_where(node)})" if node is not None else ""
        raise ShapeError(f"export: with dynamic dims the program's shapes do not hold for the example itself"
                         f"{where}: {message}")


def probe(graph: Graph, spec: ShapeSpec) -> list[Requirement]:
    """The requirements the shape rules impose on each dynamic dim (see the module docstring); the example's
    own sizes are assumed to pass (:func:`check_example`)."""
    prober = Prober(graph, spec)
    hints = spec.hints
    out: list[Requirement] = []
    for name, info in spec.dims.items():
        failing: dict[int, tuple[Node | None, str]] = {}
        for v in _candidates(info.min, info.max, info.hint):
            found = prober.failure({**hints, name: v})
            if found is not None:
                failing[v] = found
        if not failing:
            continue
        out.extend(_classify(prober, spec, name, failing))
    return out


def _classify(prober: Prober, spec: ShapeSpec, name: str, failing: dict[int, tuple[Node | None, str]]
              ) -> list[Requirement]:
    hints = spec.hints
    info = spec.dims[name]
    first = failing[min(failing, key=lambda v: abs(v - info.hint))]
    where = _node_where(first[0]) if first[0] is not None else "the inputs"
    for other, other_info in spec.dims.items():  # a tie: moving both together passes
        if other == name or other_info.hint != info.hint:
            continue
        if all(other_info.contains(v) and prober.passes({**hints, name: v, other: v}) for v in failing):
            return [Requirement(name, "tie", other=other, where=where, detail=first[1])]
    below = [v for v in failing if v < info.hint]
    above = [v for v in failing if v > info.hint]
    out: list[Requirement] = []
    if below:
        low = _boundary(prober, hints, name, max(below), info.hint, upward=True)
        detail = failing[max(below)][1]
        out.append(Requirement(name, "min", low, where=_where_of(failing[max(below)], where), detail=detail))
    if above:
        high = _boundary(prober, hints, name, min(above), info.hint, upward=False)
        detail = failing[min(above)][1]
        out.append(Requirement(name, "max", high, where=_where_of(failing[min(above)], where), detail=detail))
    bounds = {r.kind: r.value for r in out}
    if bounds.get("min", info.min) == bounds.get("max", info.max) == info.hint or _not_interval(
            failing, bounds.get("min"), bounds.get("max")):
        return [Requirement(name, "equal", info.hint, where=where, detail=first[1])]
    return out


def _where_of(found: tuple[Node | None, str], default: str) -> str:
    return _node_where(found[0]) if found[0] is not None else default


def _boundary(prober: Prober, hints: Mapping[str, int], name: str, bad: int, good: int, upward: bool) -> int:
    """The passing size nearest ``bad`` between ``bad`` (fails) and ``good`` (passes), by bisection."""
    lo, hi = (bad, good) if upward else (good, bad)
    # invariant (upward): lo fails, hi passes; (downward): lo passes, hi fails
    while hi - lo > 1:
        mid = (lo + hi) // 2
        ok = prober.passes({**hints, name: mid})
        if upward:
            lo, hi = (lo, mid) if ok else (mid, hi)
        else:
            lo, hi = (mid, hi) if ok else (lo, mid)
    return hi if upward else lo


def _not_interval(failing: Mapping[int, Any], low: int | None, high: int | None) -> bool:
    """True when some failing size lies inside the found ``[low, high]`` (the passing sizes are not an
    interval, e.g. only multiples of 4 pass)."""
    return any((low is None or v >= low) and (high is None or v <= high) for v in failing)


__all__ = ["Decider", "Decision", "Prober", "Requirement", "check_example", "deciding", "from_decisions", "probe"]
