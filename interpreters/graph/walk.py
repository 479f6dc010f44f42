"""One graph walker: the loop every interpretation of a graph shares.

Running a graph means, for each node in order (or in reverse, for a backward sweep): read the
node's input values (variables from an environment, literals as recorded, symbolic sizes
evaluated under the binding of the graph's symbolic dims), evaluate its params under the same
binding, make the recorders being emitted into record at the node's source location, and do the
per-node work. :class:`Walker` does all but the last, which is :meth:`Walker.step`:

* :func:`tensorplay.interpreters.graph.evaluate.evaluate` and the transforms' forward pass call
  the primitive on an interpreter (the default step);
* the transforms' reverse and tangent sweeps apply vjp and jvp rules (:mod:`tensorplay.func.tracing`);
* the batched interpretation applies batching rules (:mod:`tensorplay.interpreters.graph.batched`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from tensorplay.interpreters.graph.ir import Literal, Node, Var, substitute
from tensorplay.symbolic import SymDim


def location_targets(ops: Any) -> list[Any]:
    """The recorders that work emitted into ``ops`` may be recorded by: each has a ``location_override``
    the walker sets to the location of the node being interpreted. An interpreter that forwards to
    others (the transforms' dispatcher) lists them in ``location_targets``."""
    targets = getattr(ops, "location_targets", None)
    if targets is not None:
        return list(targets)
    return [ops] if hasattr(ops, "location_override") else []


class Walker:
    """Interprets nodes of a graph with ``ops`` (see the module docstring).

    ``binding`` maps symbolic dim names to sizes (ints, or dims of another recording); it is applied
    to literals and params of nodes that mention symbolic dims. Subclasses override :meth:`step`.
    """

    def __init__(self, ops: Any, binding: Mapping[str, Any] | None = None) -> None:
        self.ops = ops
        self.binding: Mapping[str, Any] = binding or {}
        self._targets = location_targets(ops)
        self._methods: dict[str, Any] = {}

    # ---- reading a node ----------------------------------------------------------------------------
    def inputs(self, node: Node, env: Mapping[Any, Any]) -> list[Any]:
        """The values of ``node``'s inputs: variables from ``env``, literals as recorded (symbolic sizes
        evaluated), ``None`` kept for an absent optional input."""
        args = [env[v] if v.__class__ is Var else (None if v is None else v.value) for v in node.inputs]
        if node.has_sym:
            args = [a.subs(self.binding) if isinstance(a, SymDim) else a for a in args]
        return args

    def params(self, node: Node) -> dict[str, Any]:
        """``node``'s params, with symbolic sizes evaluated under the binding."""
        return substitute(node.params, self.binding) if node.has_sym else node.params

    def read(self, env: Mapping[Any, Any], value: Any) -> Any:
        """The value of a graph output or mutation: a variable from ``env``, or a literal."""
        if value.__class__ is Var:
            return env[value]
        assert isinstance(value, Literal)
        return value.value.subs(self.binding) if isinstance(value.value, SymDim) else value.value

    def method(self, target: str) -> Any:
        """``ops.<target>`` (looked up once per walker)."""
        fn = self._methods.get(target)
        if fn is None:
            fn = self._methods[target] = getattr(self.ops, target)
        return fn

    # ---- walking -----------------------------------------------------------------------------------
    def step(self, node: Node, env: dict[Any, Any]) -> None:
        """The per-node work; by default, apply the primitive to the input values with ``ops``."""
        params = self.params(node)
        fn = self.method(node.target)
        env[node.outputs[0]] = fn(*self.inputs(node, env), **params) if params else fn(*self.inputs(node, env))

    def run(self, nodes: Sequence[Node], env: dict[Any, Any], *, reverse: bool = False) -> dict[Any, Any]:
        """:meth:`step` every node of ``nodes`` (in reverse order when ``reverse``), with the recorders
        being emitted into recording at each node's location; returns ``env``."""
        order: Iterable[Node] = reversed(nodes) if reverse else nodes
        step = self.step
        if not self._targets:  # nothing records locations: the plain loop
            for node in order:
                step(node, env)
            return env
        with self.locations() as at:
            for node in order:
                at(node)
                step(node, env)
        return env

    @contextmanager
    def locations(self) -> Iterator[Any]:
        """A function ``at(node)`` that makes the target recorders record at ``node``'s location, for the
        duration of the block (their previous locations come back afterwards)."""
        targets = self._targets
        if not targets:
            yield _nowhere
            return
        previous = [t.location_override for t in targets]

        def at(node: Node) -> None:
            for t in targets:
                t.location_override = node.location

        try:
            yield at
        finally:
            for t, p in zip(targets, previous):
                t.location_override = p


def _nowhere(node: Node) -> None:
    return None


__all__ = ["Walker", "location_targets"]
