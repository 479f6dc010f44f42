"""The SSA IR: a :class:`Graph` of single-assignment :class:`Var` values.

* A **value** is a :class:`Var` (defined once: by a placeholder or by one node's
  output) or a :class:`Literal` (a Python scalar, or a symbolic size, used as an
  operand). Every value carries its aval: ``(shape, dtype)`` where a shape entry
  is an ``int`` or a :class:`~tensorplay.symbolic.SymDim`.
* A **placeholder** is an input ``Var`` with a ``kind``: ``"user_input"``,
  ``"parameter"``, ``"buffer"`` (module state, captured by name), ``"captured"``
  (a tensor of another interpreter met while recording: a closure, a global,
  an outer recorder's value; read from its ``source`` each time the graph runs)
  , ``"constant"`` (a numpy array baked into the graph, in ``source``) or
  ``"random_key"`` (a key for a random primitive: drawn from the global generator each
  time the graph runs, so every call gets fresh numbers; recording draws none).
* A :class:`Node` applies one primitive (``target``) to input values with static
  ``params`` and defines its output ``Var``; it keeps the user's source location.
  ``node.meta["val"]`` is the output aval, as in ``torch.fx``.
* Guards (execute-mode recording) are reads of concrete values that decided
  Python control flow; compile re-checks them.
* ``mutations`` pairs a state placeholder (a buffer) with the value it holds after
  the graph runs (``ops.buffer_update`` while recording, e.g. batch-norm running
  statistics); running the graph writes them back.

Rewrites: a builder ``builder(graph, node) -> value`` emits replacement nodes with
:meth:`Graph.emit` (placed before ``node`` inside :meth:`Graph.inserting_before`)
and returns the value users should consume; :meth:`Graph.rewrite` does the whole
dance (insert, replace uses, erase).
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from tensorplay.spec.aval import Aval
from tensorplay.spec.dtypes import DTYPES, weak_kind
from tensorplay.spec.table import PRIMITIVES
from tensorplay.symbolic import SymDim

NUMPY_DTYPES: dict[str, np.dtype[Any]] = {name: np.dtype(name) for name in DTYPES}
"""Dtype name -> numpy dtype (the ``dtype`` of a :class:`Var`)."""

INPUT_KINDS = ("user_input", "parameter", "buffer", "captured", "constant", "random_key")
"""The kinds of placeholders, in the order they usually appear."""

_ids = itertools.count()


class Location(NamedTuple):
    """Where in the user's code a node was recorded."""

    filename: str
    lineno: int
    function: str

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno} in {self.function}"

    def short(self) -> str:
        """``file.py:12`` (base name only)."""
        return f"{self.filename.replace(chr(92), '/').rsplit('/', 1)[-1]}:{self.lineno}"


_PLAIN = (int, float, str, bool, type(None))


def has_symbolic(value: Any) -> bool:
    """True when ``value`` (a dim, or nested tuples/lists/dicts of them) contains a :class:`SymDim`."""
    kind = type(value)
    if kind in _PLAIN:
        return False
    if kind is SymDim:
        return True
    if kind is tuple or kind is list:
        for v in value:
            if type(v) not in _PLAIN and has_symbolic(v):
                return True
        return False
    if kind is dict:
        for v in value.values():
            if type(v) not in _PLAIN and has_symbolic(v):
                return True
        return False
    return isinstance(value, SymDim)


def substitute(value: Any, binding: Mapping[str, Any]) -> Any:
    """``value`` with every :class:`SymDim` in it evaluated under ``binding`` (tuples, lists, dicts)."""
    if isinstance(value, SymDim):
        return value.subs(binding)
    if isinstance(value, tuple):
        return tuple(substitute(v, binding) for v in value)
    if isinstance(value, list):
        return [substitute(v, binding) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, binding) for k, v in value.items()}
    return value


class Var:
    """A single-assignment value with an aval.

    ``shape`` (ints and :class:`SymDim`) and ``dtype`` (a numpy dtype) make it a valid
    payload of a :class:`~tensorplay.tensor.Tensor` under the recorder. ``producer`` is
    the defining :class:`Node` (``None`` for placeholders); placeholders also have
    ``kind``, ``name`` and ``source``. ``value`` holds the concrete result when the
    graph was recorded in execute mode. ``users`` holds the nodes that read it, kept up to
    date by every node construction, input change and erasure (in the order they started
    reading it, which need not be graph order).
    """

    __slots__ = ("aval", "shape", "dtype", "producer", "kind", "name", "source", "value", "id", "_meta", "users")

    def __init__(self, aval: Aval, producer: Node | None = None, *, kind: str | None = None,
                 name: str | None = None, source: Any = None) -> None:
        self.aval = aval
        self.shape = aval.shape
        self.dtype = NUMPY_DTYPES[aval.dtype]
        self.producer = producer
        self.kind = kind
        self.name = name
        self.source = source
        self.value: Any = None
        self.id = next(_ids)
        self._meta: dict[str, Any] | None = None
        self.users: dict[Node, None] = {}

    @property
    def ndim(self) -> int:
        """The rank."""
        return len(self.shape)

    @property
    def is_placeholder(self) -> bool:
        """True for graph inputs."""
        return self.kind is not None

    @property
    def target(self) -> str | None:
        """For a placeholder, its name (``torch.fx`` spelling); ``None`` for node outputs."""
        return self.name

    @property
    def meta(self) -> dict[str, Any]:
        """``{"val": aval}`` plus whatever passes store (created on first use)."""
        if self._meta is None:
            self._meta = {"val": self.aval}
        return self._meta

    def __repr__(self) -> str:
        label = self.name if self.name is not None else f"%{self.id}"
        return f"<Var {label}: {self.aval!r}>"


_WEAK_AVALS = {bool: Aval((), "weak_bool"), int: Aval((), "weak_int"), float: Aval((), "weak_float"),
               SymDim: Aval((), "weak_int")}


class Literal:
    """A scalar operand in the IR: a Python ``bool``/``int``/``float`` (weak), or a symbolic size."""

    __slots__ = ("value", "aval")

    def __init__(self, value: Any) -> None:
        self.value = value
        aval = _WEAK_AVALS.get(type(value))
        self.aval = aval if aval is not None else Aval((), "weak_int" if isinstance(value, SymDim) else
                                                      weak_kind(value))

    def __repr__(self) -> str:
        return f"Literal({self.value!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Literal) and type(self.value) is type(other.value) and \
            self.value == other.value

    def __hash__(self) -> int:
        return hash((type(self.value), self.value))


Value = Var | Literal


class Node:
    """One primitive application: ``outputs = target(*inputs, **params)``.

    Setting ``inputs`` keeps the ``users`` of the old and new input values up to date."""

    __slots__ = ("target", "_inputs", "params", "outputs", "location", "has_sym", "_meta", "erased")

    def __init__(self, target: str, inputs: tuple[Value | None, ...], params: dict[str, Any],
                 outputs: tuple[Var, ...], location: Location | None = None, has_sym: bool | None = None) -> None:
        self.target = target
        self._inputs = inputs
        for v in inputs:
            if type(v) is Var:
                v.users[self] = None
        self.erased = False
        self.params = params
        self.outputs = outputs
        self.location = location
        self.has_sym = (has_symbolic(params) or any(type(v) is Literal and isinstance(v.value, SymDim)
                                                    for v in inputs)) if has_sym is None else has_sym
        self._meta: dict[str, Any] | None = None

    @property
    def inputs(self) -> tuple[Value | None, ...]:
        """The input values: variables, literals, or ``None`` for an absent optional input."""
        return self._inputs

    @inputs.setter
    def inputs(self, values: tuple[Value | None, ...]) -> None:
        for v in self._inputs:
            if type(v) is Var:
                v.users.pop(self, None)
        self._inputs = tuple(values)
        for v in self._inputs:
            if type(v) is Var:
                v.users[self] = None

    # equality and hashing are by identity: object's own (C-level: ``Var.users`` hashes nodes at every record)

    @property
    def out(self) -> Var:
        """The (single) output value."""
        return self.outputs[0]

    @property
    def aval(self) -> Aval:
        """The output aval."""
        return self.outputs[0].aval

    @property
    def args(self) -> tuple[Value | None, ...]:
        """The input values (``torch.fx`` spelling)."""
        return self.inputs

    @property
    def kwargs(self) -> dict[str, Any]:
        """The static params (``torch.fx`` spelling)."""
        return self.params

    @property
    def meta(self) -> dict[str, Any]:
        """``{"val": output aval, "location": source location}`` plus whatever passes store."""
        if self._meta is None:
            val: Any = self.outputs[0].aval if len(self.outputs) == 1 else tuple(o.aval for o in self.outputs)
            self._meta = {"val": val, "location": self.location}
        return self._meta

    def __repr__(self) -> str:
        return f"<Node {self.target} -> {self.outputs[0].aval!r}>"


class Guard(NamedTuple):
    """A concrete read during execute-mode recording: ``kind`` (``"bool"``, ``"item"``, ``"int"``,
    ``"float"``, ``"index"``, ``"numpy"``, ...) of ``value`` gave ``outcome``; ``expected`` is the
    array that was read. :meth:`check` says whether a new value would decide the same way."""

    kind: str
    value: Var
    outcome: Any
    expected: Any
    location: Location | None

    def check(self, value: Any) -> bool:
        """True when ``value`` (an array) leads to the same outcome as at recording time."""
        array = np.asarray(value)
        if self.kind == "bool":
            return array.size == 1 and bool(array.reshape(()).item()) == self.outcome
        expected = np.asarray(self.expected)
        if array.shape != expected.shape or array.dtype != expected.dtype:
            return False
        return bool(np.array_equal(array, expected, equal_nan=array.dtype.kind == "f"))

    def __str__(self) -> str:
        where = f"  at {self.location}" if self.location else ""
        return f"{self.kind}({'%' + str(self.value.id) if self.value.name is None else self.value.name})" \
               f" == {self.outcome!r}{where}"


def unique_name(base: str, used: set[str]) -> str:
    """``base``, or ``base_1``, ``base_2``, ... : the first not in ``used``, which it is added to."""
    name = base
    for i in itertools.count(1):
        if name not in used:
            break
        name = f"{base}_{i}"
    used.add(name)
    return name


PARAMS: dict[str, dict[str, Any]] = {
    name: {q.name: inspect.Parameter.empty if q.required else q.default for q in p.params}
    for name, p in PRIMITIVES.items()}
"""Primitive name -> its static params in declaration order, with defaults (``inspect.Parameter.empty``
for required ones), from the primitive table."""


def complete_params(target: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with the protocol's defaults filled in, in declaration order; unknown or missing
    ones raise ``TypeError`` naming the primitive."""
    declared = PARAMS[target]
    if len(params) == len(declared) and all(k in declared for k in params):
        return params
    unknown = [k for k in params if k not in declared]
    if unknown:
        raise TypeError(f"{target}: unexpected parameter(s) {', '.join(unknown)}; "
                        f"it takes {', '.join(declared) or 'none'}")
    out = {}
    for key, default in declared.items():
        if key in params:
            out[key] = params[key]
        elif default is inspect.Parameter.empty:
            raise TypeError(f"{target}: missing required parameter {key!r}")
        else:
            out[key] = default
    return out


class Graph:
    """A graph: placeholders (``inputs``), ``nodes`` in order, ``outputs`` and ``guards``.

    Build one with a :class:`~tensorplay.interpreters.graph.recorder.Recorder` (``tensorplay.graph.trace``),
    or by hand with :meth:`add_input` and :meth:`emit`.

    Rewriting (the API of compiler passes) costs time linear in what it touches: every value knows
    its ``users``; :meth:`replace_all_uses` visits only them; :meth:`erase` and the insertions of
    :meth:`inserting_before` are recorded and applied to ``nodes`` in one pass the next time the node
    list is read; :meth:`eliminate_dead_code` is one reverse sweep.
    """

    def __init__(self) -> None:
        self.inputs: list[Var] = []
        self._nodes: list[Node] = []
        self.outputs: list[Value] = []
        self.guards: list[Guard] = []
        self.mutations: list[tuple[Var, Value]] = []
        self.out_tree: Any = None
        self._anchor: Node | None = None
        self._pending: dict[Node, list[Node]] = {}
        self._erased = 0
        self._names: set[str] = set()

    # ---- vocabulary --------------------------------------------------------------------------
    @property
    def nodes(self) -> list[Node]:
        """The nodes in execution order (pending insertions and erasures applied first)."""
        if self._pending or self._erased:
            self._compact()
        return self._nodes

    @nodes.setter
    def nodes(self, nodes: list[Node]) -> None:
        self._pending.clear()
        self._erased = 0
        self._nodes = list(nodes)

    def _compact(self) -> None:
        order: list[Node] = []
        pending = self._pending
        for node in self._nodes:
            before = pending.pop(node, None) if pending else None
            if before:
                order.extend(n for n in before if not n.erased)
            if not node.erased:
                order.append(node)
        if pending:  # anchors that were erased after nodes were inserted before them
            raise AssertionError("graph: insertions before a node that is not in the graph")
        self._nodes = order
        self._erased = 0

    @property
    def placeholders(self) -> list[Var]:
        """The input values (every kind), in order."""
        return self.inputs

    def inputs_of_kind(self, kind: str) -> list[Var]:
        """The placeholders of one kind (see :data:`INPUT_KINDS`)."""
        return [v for v in self.inputs if v.kind == kind]

    @property
    def user_inputs(self) -> list[Var]:
        """The inputs the caller passes positionally."""
        return self.inputs_of_kind("user_input")

    @property
    def symbols(self) -> frozenset[str]:
        """The symbolic dim names of the inputs' shapes."""
        names: set[str] = set()
        for v in self.inputs:
            for d in v.shape:
                if isinstance(d, SymDim):
                    names |= d.free_symbols
        return frozenset(names)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    # ---- building ----------------------------------------------------------------------------
    def fresh_name(self, base: str) -> str:
        """A placeholder name not used yet in this graph (``base``, ``base_1``, ...)."""
        return unique_name(base, self._names)

    def add_input(self, name: str, aval: Aval, kind: str = "user_input", source: Any = None) -> Var:
        """A new placeholder (its name is made unique)."""
        if kind not in INPUT_KINDS:
            raise ValueError(f"unknown input kind {kind!r}; expected one of {', '.join(INPUT_KINDS)}")
        var = Var(aval, kind=kind, name=self.fresh_name(name), source=source)
        self.inputs.append(var)
        return var

    def append(self, target: str, inputs: Sequence[Value | None], params: dict[str, Any], aval: Aval,
               location: Location | None = None, has_sym: bool | None = None) -> Node:
        """Add a node whose output aval is already known (the recorder's path); no rule runs.
        ``has_sym`` (whether params or literals mention symbolic dims) is computed when not given.
        Inside :meth:`inserting_before` the node goes before the anchor node."""
        node = Node(target, tuple(inputs), params, (), location, has_sym)
        node.outputs = (Var(aval, node),)
        if self._anchor is None:
            self._nodes.append(node)
        else:
            self._pending.setdefault(self._anchor, []).append(node)
        return node

    def emit(self, target: str, *inputs: Any, location: Location | None = None, **params: Any) -> Var:
        """Add ``target(*inputs, **params)``, running its shape rule; returns the output ``Var``.

        Inputs are values of this graph or Python scalars (made literals)."""
        from tensorplay.spec import SPECS
        values: list[Value | None] = [
            v if isinstance(v, (Var, Literal)) or v is None else Literal(v) for v in inputs]
        params = complete_params(target, params)
        aval = SPECS[target].rule(*(None if v is None else v.aval for v in values), **params)
        return self.append(target, values, params, aval, location).out

    @contextlib.contextmanager
    def inserting_before(self, node: Node) -> Iterator[None]:
        """Within the block, :meth:`emit` and :meth:`append` insert before ``node`` (in emission order)."""
        if node.erased:
            raise ValueError(f"cannot insert before {node!r}: it was erased")
        previous = self._anchor
        self._anchor = node
        try:
            yield
        finally:
            self._anchor = previous

    # ---- rewriting ---------------------------------------------------------------------------
    def users(self) -> dict[Var, list[Node]]:
        """For each value, the nodes that consume it, in graph order (a full rebuild; passes should
        read ``var.users``)."""
        out: dict[Var, list[Node]] = {}
        for node in self.nodes:
            for v in node.inputs:
                if type(v) is Var:
                    out.setdefault(v, []).append(node)
        return out

    def replace_all_uses(self, old: Var, new: Value) -> int:
        """Make every node input, output, mutation and guard that reads ``old`` read ``new``; returns
        the number of places changed. Visits only ``old``'s users."""
        count = 0
        sym = type(new) is Literal and isinstance(new.value, SymDim)
        for node in list(old.users):
            node.inputs = tuple(new if v is old else v for v in node.inputs)
            node.has_sym = node.has_sym or sym
            count += 1
        for i, v in enumerate(self.outputs):
            if v is old:
                self.outputs[i] = new
                count += 1
        if any(v is old for _, v in self.mutations):
            self.mutations = [(p, new if v is old else v) for p, v in self.mutations]
            count += 1
        if isinstance(new, Var) and any(g.value is old for g in self.guards):
            self.guards = [g._replace(value=new) if g.value is old else g for g in self.guards]
        return count

    def is_used(self, var: Var) -> bool:
        """True when a node, an output, a mutation or a guard reads ``var``."""
        return bool(var.users) or any(v is var for v in self.outputs) or \
            any(v is var for _, v in self.mutations) or any(g.value is var for g in self.guards)

    def erase(self, node: Node) -> None:
        """Remove ``node``; its outputs must have no users left."""
        if node.erased:
            raise ValueError(f"cannot erase {node!r}: it was already erased")
        for out in node.outputs:
            if self.is_used(out):
                raise ValueError(f"cannot erase {node!r}: its output is still used")
        node.inputs = ()
        node.erased = True
        self._erased += 1

    def rewrite(self, node: Node, builder: Callable[[Graph, Node], Value]) -> Value:
        """Replace ``node`` by what ``builder(graph, node)`` emits (inserted before it); returns the
        value its users now read."""
        with self.inserting_before(node):
            new = builder(self, node)
        self.replace_all_uses(node.out, new)
        self.erase(node)
        return new

    def release(self) -> None:
        """Unlink the graph's values from its nodes (each value's ``producer`` and ``users``), so that a graph
        nobody uses any more is freed at once by reference counting instead of later by the cycle collector
        (a transform's trace made at every uncached call is thousands of objects). The graph must not be
        used afterwards."""
        for p in self.inputs:
            p.users = {}
        for node in self.nodes:
            for out in node.outputs:
                out.producer = None
                out.users = {}

    def live_nodes(self, keep: Callable[[Node], bool] | None = None) -> list[Node]:
        """The nodes whose values the graph's outputs, mutations or guards read (directly or through other
        live nodes), and those ``keep(node)`` protects, in graph order; the graph is not changed. One reverse
        sweep (the rule of :meth:`eliminate_dead_code`: an unused random draw is dead too)."""
        live: set[Any] = set(self.outputs)
        live.update(v for _, v in self.mutations)
        live.update(g.value for g in self.guards)
        found: list[Node] = []
        for node in reversed(self.nodes):
            outs = node.outputs
            if (outs[0] in live if len(outs) == 1 else any(out in live for out in outs)) \
                    or (keep is not None and keep(node)):
                found.append(node)
                live.update(node.inputs)  # literals and None too: harmless members
        found.reverse()
        return found

    def eliminate_dead_code(self, keep: Callable[[Node], bool] | None = None) -> int:
        """Erase every node whose outputs nothing reads (directly or through other dead nodes), except
        those ``keep(node)`` protects; returns the number erased. One reverse sweep."""
        erased = 0
        for node in reversed(self.nodes):
            if keep is not None and keep(node):
                continue
            if not any(self.is_used(out) for out in node.outputs):
                self.erase(node)
                erased += 1
        return erased

    # ---- display -----------------------------------------------------------------------------
    def __str__(self) -> str:
        from .printer import format_graph
        return format_graph(self)

    def __repr__(self) -> str:
        return (f"<Graph: {len(self.inputs)} inputs, {len(self.nodes)} nodes, {len(self.outputs)} outputs"
                f"{f', {len(self.guards)} guards' if self.guards else ''}>")

    def to_dot(self) -> str:
        """Graphviz source (see :func:`tensorplay.interpreters.graph.dot.to_dot`)."""
        from .dot import to_dot
        return to_dot(self)

    def python_code(self) -> str:
        """Python source of a function computing the graph (see :mod:`tensorplay.interpreters.graph.codegen`)."""
        from .codegen import python_code
        return python_code(self)
