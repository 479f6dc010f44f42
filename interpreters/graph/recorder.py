"""The recorder: an implementation of ``Ops`` that appends nodes to a :class:`Graph`.

Every primitive call runs the primitive's shape rule from :mod:`tensorplay.spec` at record
time, so a shape error names the user's file and line. Tensor payloads are
:class:`~tensorplay.interpreters.graph.ir.Var` values (``.shape`` with ints and
``SymDim``\\ s, ``.dtype`` a numpy dtype).

Two modes:

* **symbolic** (default): values have no data. ``bool(t)``, ``t.item()``,
  ``int(t)``, ``t.numpy()`` raise :class:`GraphCaptureError` naming the
  data-dependent operation and the user's line; ``len()`` or iteration over a
  symbolic dim raise from :class:`~tensorplay.symbolic.SymDim`.
* **execute**: every value also carries its concrete result, computed by the
  eager interpreter's kernels. Reading it (``bool(t)``, ``t.item()``, ...) works
  and is recorded in ``graph.guards`` with the outcome it decided.

A tensor of another (lower-level) interpreter met while recording -- a closure,
a global, an eager parameter, an outer recorder's value -- becomes an implicit
``"captured"`` input of the graph (read from the tensor each time the graph
runs), never a silent copy. Module parameters and buffers registered with
:meth:`Recorder.register_state` are captured by name.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Callable
from types import CodeType
from typing import Any

import numpy as np

from tensorplay.interpreters.eager.interpreter import dtype_name, eager, rule_key
from tensorplay.dtypes import native_order
from tensorplay.interpreters.graph.views import VIEW_PRIMITIVES, ViewTable, positions
from tensorplay.interpreters.graph.ir import (
    NUMPY_DTYPES, PARAMS, Graph, Guard, Literal, Location, Node, Var, complete_params, has_symbolic,
    substitute,
)
from tensorplay.spec import SPECS
from tensorplay.spec.table import PRIMITIVES
from tensorplay.spec.aval import Aval
from tensorplay.spec.errors import DTypeError, GraphCaptureError, TensorplayError
from tensorplay import random_state, recording
from tensorplay.ops import PRIMITIVE_NAMES
from tensorplay.derived import (check_inplace_operand, check_setitem_key, clamp, has_symbolic_item, setitem_plan, setitem_value,
                                symbolic_setitem_value)
from tensorplay.interpreter import BaseInterpreter
from tensorplay.symbolic import SymDim
from tensorplay.tensor import Tensor, highest_interpreter

_levels = itertools.count(1)
_RULE_MEMO: dict[Any, tuple[Aval, bool]] = {}

# ---- the user's source location -----------------------------------------------------------------

_HERE = os.path.dirname(os.path.abspath(__file__))
_PACKAGE = os.path.dirname(os.path.dirname(_HERE))  # tensorplay/ (interpreters/ and spec/ are inside it)
_NUMPY = os.path.dirname(os.path.abspath(np.__file__))  # numpy's own frames are never the user's line
_INTERNAL_PREFIXES = tuple(sorted({path + os.sep for d in ("", "spec", "interpreters")
                                   for path in (os.path.join(_PACKAGE, d).rstrip(os.sep),
                                                os.path.realpath(os.path.join(_PACKAGE, d)))}
                                  | {_NUMPY + os.sep, os.path.realpath(_NUMPY) + os.sep}))
_internal_code: dict[int, tuple[CodeType, bool]] = {}
"""``id(code)`` -> ``(code, whether it is the project's or numpy's)``. Keyed by identity: a code object's own
hash is recomputed from its bytecode and constants at every look-up (0.35 us for ``cross_entropy``'s), and
recording looks up every frame between it and the user's line. The entry holds the code object, so its id
stays its own while the entry lives."""


def _is_internal(code: CodeType) -> bool:
    entry = _internal_code.get(id(code))
    if entry is not None:
        return entry[1]
    name = code.co_filename
    flag = name.startswith(_INTERNAL_PREFIXES) or name.startswith("<tensorplay")
    if len(_internal_code) > 100_000:
        _internal_code.clear()
    _internal_code[id(code)] = (code, flag)
    return flag


_LOCATIONS: dict[tuple[int, int], tuple[CodeType, Location]] = {}
"""``(id(code), line)`` -> ``(code, its Location)`` (keyed by identity, as :data:`_internal_code`)."""


def _location(code: CodeType, lineno: int) -> Location:
    """The :class:`Location` of line ``lineno`` of ``code`` (one object per line: recording makes many)."""
    key = (id(code), lineno)
    found = _LOCATIONS.get(key)
    if found is None:
        if len(_LOCATIONS) > 100_000:
            _LOCATIONS.clear()
        found = _LOCATIONS[key] = (code, Location(code.co_filename, lineno, code.co_name))
    return found[1]


def user_location(depth: int = 1) -> Location | None:
    """The first frame outside tensorplay, spec, interpreters and numpy (the user's line), or ``None``."""
    frame: Any = sys._getframe(depth)
    while frame is not None:
        code = frame.f_code
        if not _is_internal(code):
            return _location(code, frame.f_lineno)
        frame = frame.f_back
    return None


def _with_location(error: BaseException, target: str, location: Location | None) -> BaseException:
    """``error`` re-made with the user's location appended to its message (same type)."""
    where = f"\n  while recording {target} at {location}" if location else f"\n  while recording {target}"
    try:
        new = type(error)(f"{error}{where}")
    except Exception:  # an exception type with an unusual constructor: keep it, add a note
        error.add_note(where.strip())
        return error
    new.__cause__ = error.__cause__
    return new


# ---- reading values ---------------------------------------------------------------------------------

_READ_KINDS = {"__bool__": "bool", "__float__": "float", "__int__": "int", "__index__": "index",
               "item": "item", "tolist": "tolist", "numpy": "numpy", "__array__": "array"}

_REFUSALS = {
    "bool": "bool() of a recorded tensor (an `if`, `while`, `and`/`or`, `not` or `assert` on a tensor's "
            "value): Python control flow that depends on data",
    "item": "t.item() on a recorded tensor: reading a tensor's value into Python",
    "float": "float() of a recorded tensor: reading a tensor's value into Python",
    "int": "int() of a recorded tensor: reading a tensor's value into Python",
    "index": "using a recorded tensor as a Python index (operator.index): reading a tensor's value",
    "tolist": "t.tolist() on a recorded tensor: reading a tensor's value into Python",
    "numpy": "t.numpy() on a recorded tensor: reading a tensor's value into numpy",
    "array": "numpy.asarray() of a recorded tensor: reading a tensor's value into numpy",
    "concrete": "an operation whose result depends on a tensor's value (for example boolean-mask "
                "indexing, whose result size depends on the mask)",
}


def _read_kind() -> str:
    frame: Any = sys._getframe(2)
    kind = "concrete"
    for _ in range(3):
        if frame is None:
            break
        found = _READ_KINDS.get(frame.f_code.co_name)
        if found is not None and frame.f_code.co_filename.endswith("tensor.py"):
            kind = found
            if found != "item":
                break
        frame = frame.f_back
    return kind


def foreign_aval(x: Tensor[*tuple[Any, ...]]) -> Aval:
    """The aval of a tensor of any interpreter (its payload has ``.shape`` and a numpy ``.dtype``)."""
    data = x._data
    return Aval(tuple(data.shape), dtype_name(data.dtype))


class Recorder(BaseInterpreter):
    """Records primitive calls into ``self.graph`` (see the module docstring).

    ``execute=True`` also computes every value eagerly; ``binding`` maps symbolic dim names to
    the sizes of the example inputs (execute mode with symbolic shapes). ``merge=True`` records a
    call that repeats an earlier one (same primitive, same input values, same params; not a random draw
    or a view) as that call's value instead of a new node: the transforms' traces, whose graphs every
    later sweep walks node by node, stay as small as the function's distinct computations. Only the traced
    function's own calls merge, unless ``merge_emitted``: work a walker emits into the recorder (a sweep's rules,
    :meth:`replay`) comes from graphs that merging recorders made, where a repeat is rare and each look-up
    would cost; a trace that will be compiled (run many times) merges that too.
    """

    name = "graph"

    def __init__(self, graph: Graph | None = None, *, execute: bool = False,
                 binding: dict[str, Any] | None = None, merge: bool = False, merge_emitted: bool = False) -> None:
        self.level = next(_levels)
        self.graph = graph if graph is not None else Graph()
        self.execute = execute
        self.binding: dict[str, Any] = dict(binding or {})
        self.closed = False
        self.location_override: Location | None = None
        self._captures: dict[int, tuple[Any, Any, Var]] = {}
        self._guard_keys: set[tuple[int, str]] = set()
        self._n_captured = 0
        self._n_keys = 0
        self._state: dict[int, tuple[Any, Var]] = {}
        self._views = ViewTable()
        self._merged: dict[Any, Var] | None = {} if merge else None
        self._merge_emitted = merge_emitted

    def __repr__(self) -> str:
        mode = "execute" if self.execute else "symbolic"
        return f"<graph recorder level={self.level} {mode}{' closed' if self.closed else ''}: {self.graph!r}>"

    # ---- inputs ------------------------------------------------------------------------------
    def input(self, name: str, aval: Aval, kind: str = "user_input", value: Any = None,
              source: Any = None) -> Tensor[*tuple[Any, ...]]:
        """A new placeholder as a tensor of this recorder (``value``: its concrete array in execute mode)."""
        var = self.graph.add_input(name, aval, kind, source)
        if self.execute:
            var.value = value
        return _tensor(self, var)

    def register_state(self, name: str, tensor: Tensor[*tuple[Any, ...]], kind: str) -> Var:
        """Capture a module parameter or buffer by ``name``: uses of ``tensor`` read this input
        (a tensor registered twice, e.g. a tied weight, keeps its first name)."""
        entry = self._state.get(id(tensor))
        if entry is not None and entry[0] is tensor:
            return entry[1]
        var = self.graph.add_input(name, foreign_aval(tensor), kind, tensor)
        if self.execute:
            var.value = np.asarray(tensor._ops.concrete(tensor))
        self._captures[id(tensor)] = (tensor, tensor._data, var)
        self._state[id(tensor)] = (tensor, var)
        return var

    def lift(self, x: Tensor[*tuple[Any, ...]]) -> Var:
        """The value of this graph standing for ``x``, a tensor of another interpreter."""
        if x._ops is self:  # type: ignore[comparison-overlap]
            return x._data  # type: ignore[no-any-return]
        entry = self._captures.get(id(x))
        if entry is not None and entry[0] is x and entry[1] is x._data:
            return entry[2]
        level = getattr(x._ops, "level", None)
        if level is None or level > self.level:
            raise GraphCaptureError(
                f"a tensor of interpreter {getattr(x._ops, 'name', x._ops)!r} (level {level}) was passed to "
                f"the graph recorder at level {self.level}; a value of an inner recording cannot flow into "
                f"an outer one{_at(user_location(2))}")
        value = None
        if self.execute:
            payload = x._data
            if isinstance(payload, Var):
                # a value of another recording: read its data without recording a guard there (capturing
                # a value decides nothing; reads of it inside this recording are guarded here)
                value = payload.value
            else:
                value = np.asarray(x._ops.concrete(x))
            if value is None:
                raise GraphCaptureError(
                    "execute-mode recording captured a value of a symbolic recording, which has no data"
                    f"{_at(user_location(2))}")
        self._n_captured += 1
        var = self.graph.add_input(f"captured_{self._n_captured - 1}", foreign_aval(x), "captured", x)
        var.value = value
        self._captures[id(x)] = (x, x._data, var)
        return var

    def capture_as(self, var: Var, x: Tensor[*tuple[Any, ...]]) -> bool:
        """Make the placeholder ``var`` (of this graph, with ``x``'s aval) the ``"captured"`` input of ``x``, a
        tensor of a lower-level interpreter this recording has not met yet, as :meth:`lift` would have made it
        (symbolic mode). False, changing nothing, when ``x`` was met already or is not such a tensor."""
        level = getattr(x._ops, "level", None)
        entry = self._captures.get(id(x))
        if (self.execute or level is None or level >= self.level or isinstance(x._data, Var)
                or (entry is not None and entry[0] is x)):
            return False
        self._n_captured += 1
        var.kind = "captured"
        var.name = self.graph.fresh_name(f"captured_{self._n_captured - 1}")
        var.source = x
        self._captures[id(x)] = (x, x._data, var)
        return True

    # ---- recording -------------------------------------------------------------------------------
    def record(self, target: str, inputs: tuple[Any, ...], params: dict[str, Any]) -> Tensor[*tuple[Any, ...]]:
        """Append ``target(*inputs, **params)``; returns the output as a tensor of this recorder."""
        if self.closed:
            raise GraphCaptureError(
                f"{target}: this tensor belongs to a recording that has finished (it escaped from a traced "
                f"function); use the traced function's outputs instead{_at(user_location(3))}")
        for t in inputs:
            if isinstance(t, Tensor) and t._ops is not self:  # type: ignore[comparison-overlap]
                top = highest_interpreter(inputs, self)
                if top is not self:  # a value of a newer recording (a sample inside map or vmap): it records it
                    return getattr(top, target)(*inputs, **params)  # type: ignore[no-any-return]
                break
        values: list[Any] = []
        avals: list[Any] = []
        sym = False
        for x in inputs:
            if isinstance(x, Tensor):
                v = x._data if x._ops is self else self.lift(x)  # type: ignore[comparison-overlap]
                values.append(v)
                avals.append(v.aval)
            elif x is None:
                values.append(None)
                avals.append(None)
            else:
                lit = _literal(target, x)
                sym = sym or isinstance(lit.value, SymDim)
                values.append(lit)
                avals.append(lit.aval)
        if params:
            if len(params) != len(_DECLARED[target]):
                params = complete_params(target, params)
        elif _DECLARED[target]:
            params = complete_params(target, params)
        if target == "permute" and self.location_override is not None:
            undone = _undone_permute(values[0], params["perm"])
            if undone is not None:  # a rule transposing back what it was given (matmul's vjp of x @ w.T)
                return Tensor(self, undone)
        pkey = rule_key(params)
        # a walker emitting here sets the location (see the class for what merges)
        merged = self._merged if self.graph._anchor is None and (
            self.location_override is None or self._merge_emitted) else None
        merge_key: Any = None
        if merged is not None:  # a transform's trace (most recordings do not merge: no call here)
            merge_key, found = _merge_lookup(merged, target, values, pkey)
            if found is not None:
                return Tensor(self, found)
        location = self.location_override
        if location is None:
            # the first frame outside the project (inlined user_location: this is the hot path)
            frame: Any = sys._getframe(1)
            while frame is not None:
                code = frame.f_code
                entry = _internal_code.get(id(code))
                internal = entry[1] if entry is not None else _is_internal(code)
                if not internal:
                    location = _location(code, frame.f_lineno)
                    break
                frame = frame.f_back
        # the shape rule runs at record time; its result and whether the params mention symbolic sizes are
        # memoised by (target, avals, params)
        try:
            key: Any = (target, *avals, pkey)
            memo = _RULE_MEMO.get(key)
        except TypeError:  # an unhashable param: no memo
            key, memo = None, None
        if memo is None:
            try:
                aval = SPECS[target].rule(*avals, **params)
            except (TensorplayError, ValueError, TypeError, IndexError) as error:
                raise _with_location(error, target, location) from None
            memo = (aval, has_symbolic(params))
            if key is not None:
                if len(_RULE_MEMO) > 20_000:
                    _RULE_MEMO.clear()
                _RULE_MEMO[key] = memo
        aval, psym = memo
        node = self.graph.append(target, values, params, aval, location, sym or psym)
        out = node.outputs[0]
        if merge_key is not None:
            merged[merge_key] = out  # type: ignore[index]
        if self.execute:
            out.value = self._compute(node)
        made: Tensor[*tuple[Any, ...]] = Tensor(self, out)
        if target in VIEW_PRIMITIVES and type(inputs[0]) is Tensor:
            self._views.note(inputs[0], made, target, params)
        return made

    def replay(self, nodes: Any, env: dict[Any, Any]) -> None:
        """Record ``nodes`` (of another symbolic graph, whose avals hold here) again, reading each input from
        ``env`` (tensors of this recorder or of lower interpreters) and writing each output's tensor into it:
        what :meth:`record` would do for each node, without its checks and shape rules (the nodes were checked
        when they were first recorded) and at the nodes' own locations. Symbolic mode only."""
        assert not self.execute and not self.closed
        graph = self.graph
        merged = self._merged if self._merge_emitted and graph._anchor is None else None
        for node in nodes:
            values: list[Any] = []
            for v in node.inputs:
                if type(v) is Var:
                    x = env[v]
                    values.append(x._data if x._ops is self else self.lift(x))
                else:
                    values.append(v)
            target, params = node.target, node.params
            merge_key, found = _merge_lookup(merged, target, values, rule_key(params)) if merged is not None \
                else (None, None)
            if found is not None:
                env[node.outputs[0]] = Tensor(self, found)
                continue
            # params are never changed in place once recorded: the new node shares them
            out = graph.append(target, values, params, node.outputs[0].aval, node.location, node.has_sym).outputs[0]
            if merge_key is not None:
                merged[merge_key] = out  # type: ignore[index]
            env[node.outputs[0]] = Tensor(self, out)

    def _compute(self, node: Node) -> Any:
        args: list[Any] = []
        for v in node.inputs:
            if v is None:
                args.append(None)
            elif type(v) is Var:
                args.append(eager.wrap(v.value))
            else:
                args.append(v.value)
        params = node.params
        if node.has_sym:
            args = [a.subs(self.binding) if isinstance(a, SymDim) else a for a in args]
            params = substitute(params, self.binding)
        result = getattr(eager, node.target)(*args, **params)._data
        return result

    # ---- Interpreter services -------------------------------------------------------------------
    def concrete(self, x: Tensor[*tuple[Any, ...]]) -> Any:
        """Execute mode: the value (the read is recorded as a guard). Symbolic mode: refused."""
        kind = _read_kind()
        var = self.lift(x)
        if not self.execute or var.value is None:
            raise GraphCaptureError(
                f"{_REFUSALS[kind]} cannot be recorded symbolically: the graph has no values while it is "
                f"being recorded{_at(user_location(2))}. Use tp.where(cond, a, b) to select between values "
                "instead of branching, keep the computation in tensor operations, or trace with "
                "execute=True to specialise on this value (recorded as a guard that compile re-checks).")
        value = var.value
        key = (var.id, kind)
        if key not in self._guard_keys:
            self._guard_keys.add(key)
            outcome: Any = value
            if kind == "bool" and np.size(value) == 1:
                outcome = bool(np.asarray(value).reshape(()).item())
            elif kind in ("item", "float", "int", "index") and np.size(value) == 1:
                outcome = np.asarray(value).reshape(()).item()
            self.graph.guards.append(Guard(kind, var, outcome, np.array(value, copy=True), user_location(2)))
        return value

    def constant(self, value: Any) -> Tensor[*tuple[Any, ...]]:
        """A tensor of another interpreter is captured as an input; a numpy array becomes a ``"constant"``
        input of the graph (its data is stored with the graph)."""
        if isinstance(value, Tensor):
            return _tensor(self, self.lift(value))
        array = native_order(np.asarray(value))  # a big-endian array: a native-order copy
        if array.dtype.name not in NUMPY_DTYPES:
            raise DTypeError(f"unsupported dtype {array.dtype} for a tensor constant")
        var = self.graph.add_input("constant", Aval(tuple(array.shape), array.dtype.name), "constant", array)
        var.value = array
        return _tensor(self, var)

    def random_key(self) -> Tensor[*tuple[Any, ...]]:
        """A ``"random_key"`` input: each run of the graph draws a fresh key from the global generator
        (``tp.manual_seed``), in the order the keys were requested. Recording never advances the
        generator; in execute mode the value is the key the next eager draw would give."""
        self._n_keys += 1
        value = None
        if self.execute:
            value = random_state.peek_key(self._n_keys - 1)
        return self.input("key", Aval((2,), "int64"), "random_key", value)

    def map(self, lead: int, x: Any, f: Callable[[Any], Any]) -> Any:
        """See :func:`tensorplay.prefix.map`: the batched computation is recorded."""
        from tensorplay.interpreters.graph.batched import map_over_lead
        return map_over_lead(self, lead, x, f)

    def wrap(self, var: Var) -> Tensor[*tuple[Any, ...]]:
        """A tensor of this recorder holding ``var``."""
        return _tensor(self, var)

    def close(self) -> None:
        """Refuse further recording (tensors that escape the traced function then raise when used)."""
        self.closed = True
        self._views = ViewTable()  # nothing more is written through them: let their roots go

    def format(self, x: Tensor[*tuple[Any, ...]]) -> str:
        """``Tensor(graph, %12: float32[B, 784])`` (plus the value in execute mode)."""
        var: Var = x._data
        label = var.name if var.name is not None else f"%{var.id}"
        text = f"Tensor(graph level {self.level}, {label}: {var.aval!r})"
        if self.execute and var.value is not None:
            text += f"\n  value = {np.array2string(np.asarray(var.value), threshold=20)}"
        return text

    def set_requires_grad(self, x: Tensor[*tuple[Any, ...]], flag: bool) -> None:
        """Only sets the flag: differentiate recorded graphs with ``tensorplay.func``."""
        x._requires_grad = bool(flag)

    def detach(self, x: Tensor[*tuple[Any, ...]]) -> Tensor[*tuple[Any, ...]]:
        """Recorded as ``stop_gradient``."""
        return self.record("stop_gradient", (x,), {})

    def backward(self, x: Tensor[*tuple[Any, ...]], gradient: Any, retain_graph: bool,
                 create_graph: bool) -> None:
        """Refused: the tape is eager-only; use ``tensorplay.func.grad`` on recorded programs."""
        raise GraphCaptureError(f"backward() inside a recorded function is not supported{_at(user_location(2))}; "
                                "differentiate with tensorplay.func.grad / vjp instead")

    def contiguous(self, x: Tensor[*tuple[Any, ...]]) -> Tensor[*tuple[Any, ...]]:
        """Layout is not part of the IR: ``x`` itself."""
        return x

    def clone(self, x: Tensor[*tuple[Any, ...]]) -> Tensor[*tuple[Any, ...]]:
        """A new handle on the same (immutable) value: later in-place ops on either rebind only it."""
        return _tensor(self, self.lift(x))

    def inplace(self, x: Tensor[*tuple[Any, ...]], op: str, other: Any) -> Tensor[*tuple[Any, ...]]:
        """``x op= other`` recorded functionally: the handle ``x`` is rebound to the new value
        (the dtype of ``x`` is kept: float results are not cast into int tensors). ``x`` from outside
        the traced function (an eager global) is recorded as a state mutation (see
        :mod:`tensorplay.recording`)."""
        if x._ops is not self:  # type: ignore[comparison-overlap]
            self._check_outside_write(x, f"in-place {op}_")
            self._check_written_value(other, f"{op}_")
            self.write_state(x, self._inplace_value(x, op, other), f"{op}_")
            self._refresh_views(x)
            return x
        self._check_writable(x, f"{op}_")
        self._rebind(x, self._inplace_value(x, op, other), f"{op}_")
        self._write_through(x, f"{op}_", other)
        return x

    # ---- writes through views (see :mod:`.views`) ------------------------------------------------
    def _check_written_value(self, value: Any, where: str) -> None:
        """A write to a tensor from outside the traced function: refuse a value computed eagerly, at trace
        time, from such tensors (``c[0] = c.sum()``, ``c.add_(c * 0.5)``): the graph would write that
        trace-time reading at every call."""
        if isinstance(value, Tensor) and value._ops is not self and recording.derived_from_outside(value):  # type: ignore[comparison-overlap]
            raise GraphCaptureError(
                f"{where} writes to a tensor from outside the traced function a value that was computed "
                f"eagerly, once, at trace time, from tensors from outside it{_at(user_location(3))}: the graph "
                "would write that same value at every call. Compute it from values the graph records (a view "
                "of the tensor, such as c[0:2], c.T or c.detach(), is recorded; an operation such as c.sum() or "
                "c * 0.5 on the tensor itself runs eagerly), or compute it outside the traced function")

    def _check_writable(self, x: Tensor[*tuple[Any, ...]], where: str) -> None:
        view = self._views.of(x)
        if view is None:
            return
        if not view.writable:
            raise GraphCaptureError(f"{where}: the tensor is a read-only view (the result of expand or "
                                    f"broadcast_to){_at(user_location(3))}; clone it first")
        if positions(view, self._layout(view.root))[0] is None:
            raise GraphCaptureError(
                f"{where} through a view (a slice, reshape or transpose) of a tensor of symbolic shape "
                f"{list(view.root_shape)} is not supported{_at(user_location(3))}: the positions it writes "
                "need static sizes. Write the whole tensor (tp.where, tp.cat) or keep those dims static")

    def _layout(self, root: Tensor[*tuple[Any, ...]]) -> Any:
        """The array whose memory order decides which reshapes of ``root`` copy: its data when eager, its
        value in execute mode, else ``None`` (row-major assumed)."""
        data = root._data
        return data if isinstance(data, np.ndarray) else getattr(data, "value", None)

    def _write_through(self, x: Tensor[*tuple[Any, ...]], where: str, value_written: Any = None) -> None:
        """``x`` was just rebound by a write (of ``value_written``): when it is a view, scatter its new value
        into its root (a recorded state mutation for a root from outside); then re-derive the root's other
        live views."""
        view = self._views.of(x)
        if view is None:
            self._refresh_views(x)
            return
        root = view.root
        index, shared = positions(view, self._layout(root))
        assert index is not None  # checked by _check_writable before the write
        if not shared:
            return  # a copy (a reshape numpy could not do as a view): the write stays in it, as eagerly
        mine = root._ops is self  # type: ignore[comparison-overlap]
        old = root if mine else _tensor(self, self.lift(root))
        plan = setitem_plan(view.root_shape, np.unravel_index(index, view.root_shape))
        new = setitem_value(self, old, x, plan)  # type: ignore[arg-type]  # a Recorder is an Ops
        if mine:
            self._rebind(root, new, where)
        else:
            self._check_outside_write(root, where)
            self._check_written_value(value_written, where)
            self.write_state(root, new, where)
        self._refresh_views(root, exclude=x)

    def _refresh_views(self, root: Tensor[*tuple[Any, ...]], exclude: Any = None) -> None:
        """Re-derive the live views of ``root`` from its value now (their memory is ``root``'s)."""
        for tensor, view in self._views.live_views(root):
            if tensor is exclude or not positions(view, self._layout(root))[1]:
                continue
            value: Tensor[*tuple[Any, ...]] = root if root._ops is self else _tensor(self, self.lift(root))  # type: ignore[comparison-overlap]
            for target, params in view.chain:
                value = self.record(target, (value,), params)
            tensor._data = value._data

    def _inplace_value(self, x: Tensor[*tuple[Any, ...]], op: str, other: Any) -> Tensor[*tuple[Any, ...]]:
        """The value of ``x`` after ``x op= other`` (recorded)."""
        check_inplace_operand(f"{op}_", x, other)
        shape = tuple(self.lift(x).shape)
        dtype = self.lift(x).aval.dtype
        if op == "fill":
            return self.record("full", (), {"shape": shape, "value": other, "dtype": dtype})
        if op == "copy":
            src = other if isinstance(other, Tensor) else self.constant(np.asarray(other))
            if tuple(self.lift(src).shape) != shape:
                return self.record("broadcast_to", (src,), {"shape": shape})
            return src
        if op == "clamp":
            return clamp(self, x, *other)  # type: ignore[arg-type,no-any-return]  # a Recorder is an Ops
        return self.record(op, (x, other), {})

    def _check_outside_write(self, x: Tensor[*tuple[Any, ...]], what: str) -> None:
        """``x`` is not a value of this recording: allowed (as a recorded state mutation) only for state
        from outside the function this recorder traces with ``tp.graph.trace``."""
        frame = recording.outside_state(x)
        if frame is not None and frame.recorder is self:
            return
        if frame is None and recording.active[0] and getattr(x._ops, "level", None) == 0:
            raise GraphCaptureError(
                f"{what} writes a recorded value into an eager tensor created inside the traced function"
                f"{_at(user_location(3))}: the tensor would hold a trace-time constant. Build it from the "
                "traced inputs instead (x.new_zeros, x * 0, tp.where, tp.cat) or out of place")
        raise GraphCaptureError(
            f"{what} on a tensor that is not a value of this recording (a captured "
            f"{getattr(x._ops, 'name', '?')} tensor) would mutate state outside the graph"
            f"{_at(user_location(3))}; compute a new tensor instead")

    def write_state(self, state: Tensor[*tuple[Any, ...]], new: Tensor[*tuple[Any, ...]], where: str) -> None:
        """Record that ``state`` (a tensor from outside the traced function) holds ``new`` after each run
        of the graph (a state mutation, as :meth:`buffer_update`); ``new`` is cast to ``state``'s dtype
        when in-place numpy would (same kind), else refused."""
        target = np.dtype(self.lift(state).dtype)
        new_dtype = np.dtype(self.lift(new).dtype)
        if new_dtype != target and not (np.can_cast(new_dtype, target, "same_kind") or new_dtype.kind == "b"):
            raise DTypeError(f"{where}: result type {new_dtype} can't be cast to the tensor's dtype {target} "
                             f"in place{_at(user_location(3))}")
        self.buffer_update(state, new)

    def _rebind(self, x: Tensor[*tuple[Any, ...]], new: Tensor[*tuple[Any, ...]], where: str) -> None:
        var: Var = x._data
        new_var = self.lift(new)
        if new_var.dtype != var.dtype:
            if not (np.can_cast(new_var.dtype, var.dtype, "same_kind") or new_var.dtype.kind == "b"):
                raise DTypeError(f"{where}: result type {new_var.dtype} can't be cast to the tensor's dtype "
                                 f"{var.dtype} in place{_at(user_location(3))}")
            new = self.record("cast", (new,), {"dtype": var.aval.dtype})
            new_var = new._data
        x._data = new_var
        self._note_mutation(x, new_var)

    def buffer_update(self, buffer: Tensor[*tuple[Any, ...]], new: Tensor[*tuple[Any, ...]]) -> None:
        """Record that the state tensor ``buffer`` (a module buffer, or another tensor captured from
        outside) holds ``new`` after the graph runs (``graph.mutations``); later reads in this recording
        see ``new``. Recording never changes ``buffer``'s data: running the graph does."""
        entry = self._state.get(id(buffer))
        if entry is None or entry[0] is not buffer:
            if buffer._ops is self:  # type: ignore[comparison-overlap]
                raise GraphCaptureError(
                    "buffer_update: the target must be state captured from outside the graph (a module "
                    f"buffer), not a value computed in the recording{_at(user_location(2))}")
            entry = (buffer, self.lift(buffer))
            self._state[id(buffer)] = entry
        target = entry[1]
        value = self.lift(new)
        if value.aval.dtype != target.aval.dtype:
            value = self.record("cast", (new,), {"dtype": target.aval.dtype})._data
        if tuple(value.shape) != tuple(target.shape):
            raise GraphCaptureError(f"buffer_update: {target.name} has shape {list(target.shape)}, the new value "
                                    f"{list(value.shape)}{_at(user_location(2))}")
        if buffer._ops is self:  # type: ignore[comparison-overlap]
            buffer._data = value  # module state swapped in for the trace: later reads see the new value
        else:
            self._captures[id(buffer)] = (buffer, buffer._data, value)
        self._note_mutation(buffer, value)

    def _note_mutation(self, tensor: Tensor[*tuple[Any, ...]], value: Var) -> None:
        """If ``tensor`` is module state (or a captured buffer), record that it ends up holding ``value``."""
        entry = self._state.get(id(tensor))
        if entry is None or entry[0] is not tensor:
            return
        target = entry[1]
        self.graph.mutations = [(p, v) for p, v in self.graph.mutations if p is not target]
        if value is not target:
            self.graph.mutations.append((target, value))

    def swap_in_state(self, kinds: tuple[str, ...] = ("parameter",)) -> list[tuple[Any, Any, Any]]:
        """Make every registered state tensor of ``kinds`` (parameters by default) a tensor of this
        recorder holding its placeholder, so that ``self.weight.T`` in a forward is recorded rather
        than computed eagerly; returns what :meth:`restore_state` needs. (Buffers stay eager tensors:
        layers read them directly; they are captured by name when they meet recorded values.)
        The tensors change for every thread: ``trace`` uses this only for modules by duck typing;
        a ``tensorplay.nn.Module`` reads :meth:`state_handle` tensors in the tracing thread alone."""
        saved = []
        for tensor, var in self._state.values():
            if var.kind not in kinds:
                continue
            saved.append((tensor, tensor._ops, tensor._data))
            tensor._ops = self
            tensor._data = var
        return saved

    @staticmethod
    def restore_state(saved: list[tuple[Any, Any, Any]]) -> None:
        """Undo :meth:`swap_in_state`."""
        for tensor, ops, data in saved:
            tensor._ops = ops
            tensor._data = data

    def has_state(self, tensor: Tensor[*tuple[Any, ...]]) -> bool:
        """Whether ``tensor`` was registered with :meth:`register_state`."""
        entry = self._state.get(id(tensor))
        return entry is not None and entry[0] is tensor

    def state_handle(self, tensor: Tensor[*tuple[Any, ...]]) -> Tensor[*tuple[Any, ...]]:
        """A tensor of this recorder holding the placeholder of registered state ``tensor`` (what a
        module's forward reads for ``self.weight`` while it is traced, so ``self.weight.T`` is
        recorded); in-place updates of the handle are recorded as mutations of that state."""
        entry = self._state[id(tensor)]
        handle = _tensor(self, entry[1])
        handle._requires_grad = tensor._requires_grad
        self._state[id(handle)] = (handle, entry[1])
        return handle

    def setitem(self, x: Tensor[*tuple[Any, ...]], key: Any, value: Any) -> None:
        """``x[key] = value`` recorded functionally (``where`` of a scattered update); rebinds ``x``.

        The written positions must not depend on data: basic indices (ints, slices, ``None``,
        ``...``) and constant index arrays; a recorded index tensor needs execute mode."""
        check_setitem_key(key)
        outside = x._ops is not self  # type: ignore[comparison-overlap]
        if outside:
            self._check_outside_write(x, "x[key] = value")
        shape = tuple(self.lift(x).shape)
        if not outside:
            self._check_writable(x, "setitem")
        if any(isinstance(d, SymDim) for d in shape) or has_symbolic_item(key):
            new = symbolic_setitem_value(self, _tensor(self, self.lift(x)), key, value)  # type: ignore[arg-type]
            if new is None:
                raise GraphCaptureError(
                    f"x[key] = value on a tensor with symbolic shape {list(shape)} supports ints and slices with "
                    f"positive steps as the key, got {key!r}{_at(user_location(2))}; build the result with "
                    "tp.where or concat")
            self._bind_setitem(x, new, value, outside)
            return
        items = key if isinstance(key, tuple) else (key,)
        index = tuple(np.asarray(self._index_value(k)) if isinstance(k, Tensor) else k for k in items)
        new = setitem_value(self, x, value, setitem_plan(shape, index))  # type: ignore[arg-type]
        self._bind_setitem(x, new, value, outside)

    def _bind_setitem(self, x: Tensor[*tuple[Any, ...]], new: Tensor[*tuple[Any, ...]], value: Any,
                      outside: bool) -> None:
        """``x`` now holds ``new`` after ``x[key] = value``: recorded as a state write when ``x`` is not a value
        of this recording, written through to what ``x`` views when it is a view."""
        if outside:
            self._check_written_value(value, "x[key] = value")
            self.write_state(x, new, "setitem")
            self._refresh_views(x)
            return
        x._data = new._data
        self._note_mutation(x, new._data)
        self._write_through(x, "setitem", value)

    def _index_value(self, k: Tensor[*tuple[Any, ...]]) -> Any:
        """The value of the index tensor ``k`` of ``x[k] = value``: an eager tensor the traced function
        created from constants (``tp.tensor([0, 2])``, ``tp.arange(3)``) is the same on every call and
        is read directly (also when recording symbolically); any other needs execute mode."""
        if type(k._data) is np.ndarray and recording.created_by(k, self):
            return k._data
        return self.concrete(k)


def _tensor(ops: Any, var: Any) -> Tensor[*tuple[Any, ...]]:
    return Tensor(ops, var)


def _at(location: Location | None) -> str:
    return f" (at {location})" if location is not None else ""


def _literal(target: str, x: Any) -> Literal:
    if isinstance(x, (bool, int, float, SymDim)):
        return Literal(x)
    if isinstance(x, np.generic) and x.dtype.kind in "biuf":
        return Literal(x.item())
    raise DTypeError(f"{target}: expected a Tensor or a Python scalar as operand, got {type(x).__name__}")


_DECLARED = PARAMS

_MERGEABLE = frozenset(name for name in PRIMITIVE_NAMES if not PRIMITIVES[name].random and name not in VIEW_PRIMITIVES)
"""Primitives whose repeated calls a merging recorder records once (see :class:`Recorder`)."""


def _undone_permute(value: Any, perm: Any) -> Var | None:
    """For ``permute(value, perm)`` emitted by a walker (the rules: never written through in place), the value
    it gives back when ``value`` is itself a permute that this one undoes; ``None`` otherwise."""
    node = value.producer if type(value) is Var else None
    if node is None or node.target != "permute" or type(node.inputs[0]) is not Var:
        return None
    first = node.params["perm"]
    n = len(first)
    if len(perm) != n or any(int(first[int(p) % n]) % n != i for i, p in enumerate(perm)):
        return None
    return node.inputs[0]


def _merge_lookup(merged: dict[Any, Var] | None, target: str, values: list[Any], pkey: Any) -> tuple[Any, Var | None]:
    """For a merging recorder's table ``merged`` (``None``: none), the key of the call ``target(*values)``
    with params key ``pkey`` and the value an earlier identical call recorded (``None`` when there is none,
    or the call is not mergeable: a random draw, a view, an unhashable param)."""
    if merged is None or target not in _MERGEABLE:
        return None, None
    key = (target, *values, pkey)
    try:
        return key, merged.get(key)
    except TypeError:  # an unhashable param (a list): no merging
        return None, None


def _make_method(target: str) -> Callable[..., Any]:
    def method(self: Recorder, *inputs: Any, **params: Any) -> Any:
        return self.record(target, inputs, params)
    method.__name__ = method.__qualname__ = target
    method.__doc__ = f"Record ``{target}`` (see :meth:`tensorplay.ops.Ops.{target}`)."
    return method


for _name in PRIMITIVE_NAMES:
    setattr(Recorder, _name, _make_method(_name))
