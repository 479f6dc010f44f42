"""The eager tape: grad mode, recording, ``backward``/``grad`` and in-place ops.

Each recorded operation is a :class:`Node` holding the primitive, its input
tensors (values for the vjp rule), the *edges* to the inputs' producers taken
at record time (a node, or the leaf tensor itself), the inputs' version
numbers and its result's value (the rules of ``USES_OUTPUT`` read it; the
others get ``output=None``). Cotangents are keyed by node, so
an in-place op that rebinds a tensor to a new node affects only later uses.
The vjp rules (:mod:`tensorplay.rules.vjp`) run on the eager interpreter, so
with ``create_graph=True`` the backward pass is itself recorded.
"""

from __future__ import annotations

import functools
import sys
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, overload

import numpy as np

from tensorplay import compile_hooks, recording
from tensorplay.derived import check_inplace_operand, check_setitem_key, check_setitem_value, clamp, setitem_plan, setitem_value
from tensorplay.interpreters.eager.padded import add_cotangents, dense
from tensorplay.spec.errors import AutogradError, DTypeError, IndexRangeError, TensorplayError
from tensorplay.tensor import Tensor

class _GradState(threading.local):
    """Per-thread grad mode; recording is on by default (a class attribute: reading it is one lookup)."""

    enabled = True


_state = _GradState()
_GRAD_LOCK = threading.Lock()  # guards the accumulation into leaves' .grad (threads may share a leaf)


def grad_enabled() -> bool:
    """Whether operations are recorded on the tape (thread-local, on by default)."""
    return _state.enabled


def set_grad_enabled(mode: bool) -> None:
    """Turn recording on or off for this thread."""
    _state.enabled = bool(mode)


class _GradMode:
    """Context manager and decorator that sets grad mode and restores the previous one."""

    def __init__(self, mode: bool) -> None:
        self.mode = mode
        self.previous: list[bool] = []

    def __enter__(self) -> None:
        self.previous.append(grad_enabled())
        set_grad_enabled(self.mode)

    def __exit__(self, *exc: object) -> None:
        set_grad_enabled(self.previous.pop())

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        mode = self.mode

        @functools.wraps(fn)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with _GradMode(mode):
                return fn(*args, **kwargs)
        return wrapped


@overload
def no_grad() -> _GradMode: ...


@overload
def no_grad(fn: Callable[..., Any]) -> Callable[..., Any]: ...


def no_grad(fn: Callable[..., Any] | None = None) -> _GradMode | Callable[..., Any]:
    """``with tp.no_grad():``, ``@tp.no_grad()`` or ``@tp.no_grad``: nothing inside is recorded."""
    return _GradMode(False) if fn is None else _GradMode(False)(fn)


@overload
def enable_grad() -> _GradMode: ...


@overload
def enable_grad(fn: Callable[..., Any]) -> Callable[..., Any]: ...


def enable_grad(fn: Callable[..., Any] | None = None) -> _GradMode | Callable[..., Any]:
    """``with tp.enable_grad():`` (or as a decorator, with or without ``()``) turns recording back on
    inside ``no_grad``."""
    return _GradMode(True) if fn is None else _GradMode(True)(fn)


class Node:
    """One recorded operation. ``name`` is the primitive (``grad_fn`` prints it)."""

    # ``hooks``: the result's tensor hooks (:mod:`tensorplay.interpreters.eager.hooks`), unset on most nodes
    __slots__ = ("name", "inputs", "params", "edges", "versions", "out_data", "out_box", "out_version", "hooks")
    hooks: Any  # (declared only: reading it on a node without hooks raises AttributeError, hence getattr)

    def __init__(self, name: str, inputs: tuple[Any, ...], params: dict[str, Any], output: Tensor[*tuple[Any, ...]]):
        self.name = name
        self.inputs: tuple[Any, ...] | None = inputs
        self.params = params
        if len(inputs) == 1 and type(inputs[0]) is Tensor:  # the common one-input node, without the lists
            x = inputs[0]
            self.edges: tuple[Any, ...] = ((x if x._node is None else x._node) if x._requires_grad else None,)
            box_in = x._version
            self.versions: tuple[int, ...] = (0 if box_in is None else box_in[0],)
        elif len(inputs) == 2 and type(inputs[0]) is Tensor and type(inputs[1]) is Tensor:  # two, likewise
            x, y = inputs
            box_x, box_y = x._version, y._version
            self.edges = ((x if x._node is None else x._node) if x._requires_grad else None,
                          (y if y._node is None else y._node) if y._requires_grad else None)
            self.versions = (0 if box_x is None else box_x[0], 0 if box_y is None else box_y[0])
        else:
            edges: list[Any] = []
            versions: list[int] = []
            for x in inputs:
                if isinstance(x, Tensor):
                    edges.append((x if x._node is None else x._node) if x._requires_grad else None)
                    box_in = x._version
                    versions.append(0 if box_in is None else box_in[0])
                else:
                    edges.append(None)
                    versions.append(0)
            self.edges = tuple(edges)
            self.versions = tuple(versions)
        # the result's value, for rules that read ``output`` (the output tensor itself may be gone by the
        # time backward reaches this node); ``out_box`` detects an in-place write into that memory
        self.out_data: Any = output._data
        box = output._version
        if box is None:
            box = output._version = [0]
        self.out_box: list[int] | None = box
        self.out_version = box[0]

    def saved_output(self) -> Tensor[*tuple[Any, ...]]:
        """The primal result as a tensor produced by this node (so rules can differentiate through it)."""
        from tensorplay.interpreters.eager.interpreter import eager
        if self.out_box is not None and self.out_box[0] != self.out_version:
            raise AutogradError(
                f"backward: the result of '{self.name}' (shape {list(self.out_data.shape)}) was modified in "
                f"place after it was saved for backward (version {self.out_version} then, {self.out_box[0]} now); "
                "compute on a .clone() or do the in-place update after backward")
        interpreter: Any = eager
        out: Tensor[*tuple[Any, ...]] = Tensor(interpreter, self.out_data)
        out._node, out._requires_grad = self, True
        return out

    def alias_output(self, box: list[int]) -> None:
        """The result is a view: it shares ``box``, the version counter of the memory it views."""
        self.out_box = box
        self.out_version = box[0]

    def preserve_output(self, current: Any) -> None:
        """Before ``current`` (this node's result memory) is overwritten in place: keep a private copy."""
        if self.out_data is current and self.out_box is not None and self.out_box[0] == self.out_version:
            self.out_data = current.copy()
            self.out_box = None

    def __repr__(self) -> str:
        return f"<{self.name}Backward>"


def _edge(x: Any) -> Any:
    if isinstance(x, Tensor) and x._requires_grad:
        return x._node if x._node is not None else x
    return None


def version_of(x: Any) -> int:
    """The in-place version counter of tensor ``x`` (0 before its first in-place write; 0 for a non-tensor)."""
    return x._version[0] if isinstance(x, Tensor) and x._version is not None else 0


def record(name: str, inputs: tuple[Any, ...], params: dict[str, Any], output: Tensor[*tuple[Any, ...]]) -> None:
    """Attach a node for ``output`` (called by the eager interpreter when an input requires grad)."""
    if output._data.dtype.kind != "f":
        return  # integer and bool results carry no gradient
    attach(output, name, inputs, params)


def attach(output: Tensor[*tuple[Any, ...]], name: str, inputs: tuple[Any, ...], params: dict[str, Any]) -> None:
    """Give ``output`` its node: :func:`record` for callers that already know the result is float, an input
    requires grad and recording is on (the eager fast paths)."""
    output._node = Node(name, inputs, params, output)
    output._requires_grad = True


def set_requires_grad(x: Tensor[*tuple[Any, ...]], flag: bool) -> None:
    """``x.requires_grad = flag`` for a leaf float tensor."""
    if x._node is not None and not flag:
        raise AutogradError("requires_grad: you can only change requires_grad of leaf tensors; "
                            "use .detach() to get a tensor without history")
    if flag and x._data.dtype.kind != "f":
        raise DTypeError(f"requires_grad: only float tensors can require gradients, got {x.dtype}")
    x._requires_grad = bool(flag)


# ---- gradient-ready hooks (what data-parallel training hangs its all-reduce on) ------------------------

class _Hooks(threading.local):
    """Per-thread list of the callbacks queued for the end of the running ``backward()`` (``None`` outside)."""

    queued: list[Callable[[], None]] | None = None


_HOOK_STATE = _Hooks()
_READY_HOOKS: dict[int, tuple[Any, list[Callable[[Tensor[*tuple[Any, ...]]], None]]]] = {}
"""``id(leaf) -> (weakref to the leaf, hooks)``: the hooks of :func:`register_grad_ready_hook`."""


class HookHandle:
    """What :func:`register_grad_ready_hook` returns: ``remove()`` unregisters the hook."""

    __slots__ = ("key", "fn")

    def __init__(self, key: int, fn: Callable[[Tensor[*tuple[Any, ...]]], None]) -> None:
        self.key = key
        self.fn = fn

    def remove(self) -> None:
        """Unregister the hook (a second call does nothing)."""
        entry = _READY_HOOKS.get(self.key)
        if entry is None:
            return
        hooks = entry[1]
        if self.fn in hooks:
            hooks.remove(self.fn)
        if not hooks:
            del _READY_HOOKS[self.key]


def register_grad_ready_hook(leaf: Tensor[*tuple[Any, ...]],
                             fn: Callable[[Tensor[*tuple[Any, ...]]], None]) -> HookHandle:
    """Call ``fn(leaf)`` during ``backward()`` as soon as ``leaf.grad`` is final for that backward: when
    the reverse sweep has passed the last recorded node with an edge to ``leaf`` (as PyTorch's
    ``register_post_accumulate_grad_hook``). ``leaf.grad`` then holds the accumulated gradient (earlier
    backwards' included); the rest of the sweep is still to run, so work started in ``fn`` (a
    non-blocking all-reduce) overlaps it. Not called by ``tp.autograd.grad`` (nothing accumulates) nor for
    a backward that does not reach ``leaf``. The hook is dropped when ``leaf`` is garbage collected."""
    if leaf._node is not None:
        raise AutogradError("register_grad_ready_hook: the tensor is not a leaf (it has a grad_fn); "
                            "register the hook on the parameter or input tensor")
    key = id(leaf)
    entry = _READY_HOOKS.get(key)
    if entry is None or entry[0]() is not leaf:
        entry = (weakref.ref(leaf, _forgetter(key)), [])
        _READY_HOOKS[key] = entry
    entry[1].append(fn)
    return HookHandle(key, fn)


def _forgetter(key: int) -> Callable[[Any], None]:
    def forget(_ref: Any) -> None:
        _READY_HOOKS.pop(key, None)
    return forget


def has_grad_ready_hooks(leaf: Tensor[*tuple[Any, ...]]) -> bool:
    """Whether :func:`register_grad_ready_hook` hooks are registered on ``leaf``."""
    entry = _READY_HOOKS.get(id(leaf))
    return entry is not None and entry[0]() is leaf and bool(entry[1])


def queue_callback(fn: Callable[[], None]) -> None:
    """From a grad-ready hook: call ``fn()`` once the running ``backward()`` has written every leaf's
    ``.grad`` (callbacks run in the order queued; an error in the sweep drops them)."""
    queued = _HOOK_STATE.queued
    if queued is None:
        raise AutogradError("queue_callback: no backward() is running in this thread; call it from a hook "
                            "registered with register_grad_ready_hook")
    queued.append(fn)


def backward_token() -> object | None:
    """An object that identifies the ``backward()`` running in this thread with hooks (``None`` outside one):
    a hook can tell a new backward from the one it last saw, even after that one failed."""
    return _HOOK_STATE.queued


def _ready_plan(order: list[Node]) -> dict[int, list[Tensor[*tuple[Any, ...]]]] | None:
    """``id(node) -> hooked leaves`` whose gradient is final once the sweep reaches that node (the node
    after the last one with an edge to the leaf); leaves last used by the final node finish with the sweep."""
    last: dict[int, tuple[int, Tensor[*tuple[Any, ...]]]] = {}
    for i, node in enumerate(order):
        for edge in node.edges:
            if edge is not None and type(edge) is not Node and id(edge) in _READY_HOOKS:
                last[id(edge)] = (i, edge)
    plan: dict[int, list[Tensor[*tuple[Any, ...]]]] = {}
    for i, leaf in last.values():
        if i + 1 < len(order):
            plan.setdefault(id(order[i + 1]), []).append(leaf)
    return plan


def _run_ready_hooks(leaf: Tensor[*tuple[Any, ...]]) -> None:
    entry = _READY_HOOKS.get(id(leaf))
    if entry is not None and entry[0]() is leaf:
        for fn in list(entry[1]):
            fn(leaf)


_NO_TARGETS: frozenset[int] = frozenset()  # loss.backward(): no target leaves (the mask then ignores them)

TENSOR_HOOKS: list[Any] = []
"""The module :mod:`tensorplay.interpreters.eager.hooks` once a tensor hook or ``retain_grad`` was registered
(empty before: a backward then never looks for hooks)."""


# ---- the backward sweep ----------------------------------------------------------------------------

def _toposort(roots: Sequence[Node]) -> list[Node]:
    order: list[Node] = []
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(r, False) for r in roots]
    pop, push, add = stack.pop, stack.append, seen.add
    while stack:
        node, expanded = pop()
        if expanded:
            order.append(node)
            continue
        key = id(node)
        if key in seen:
            continue
        add(key)
        push((node, True))
        for edge in node.edges:
            if type(edge) is Node and id(edge) not in seen:
                push((edge, False))
    return order  # producers before consumers


def paths_to_targets(order: Sequence[Node], target_nodes: dict[int, int],
                     targets: Sequence[Tensor[*tuple[Any, ...]]]) -> dict[int, bool]:
    """The nodes of ``order`` (consumers first) a ``tp.autograd.grad`` pass needs: ``id(node) -> runs``, with
    ``runs`` true for a node with a path on to a target (a target node, or an edge to a target leaf) and
    false for a target node without one (its cotangent is only captured)."""
    target_leaves = {id(t) for t in targets if t._node is None}
    needed: dict[int, bool] = {}
    for node in reversed(order):  # producers first: a node's producers are decided before it
        key = id(node)
        runs = any((id(e) in needed) if type(e) is Node else (e is not None and id(e) in target_leaves)
                   for e in node.edges)
        if runs or key in target_nodes:
            needed[key] = runs
    return needed


def _accumulate(store: dict[int, Any], key: int, value: Any) -> None:
    old = store.get(key)
    store[key] = value if old is None else old + value


_RULES: Any = None  # tensorplay.rules.vjp, imported on the first backward


def _rules() -> Any:
    global _RULES
    if _RULES is None:
        from tensorplay.rules import vjp
        _RULES = vjp
    return _RULES


def _clone_vjp(ops: Any, g: Any, inputs: Any, output: Any, **params: Any) -> tuple[Any, ...]:
    return (g,)


EXTRA_VJP: dict[str, Callable[..., Any]] = {"clone": _clone_vjp}
"""Backward rules of tape nodes that are not primitives (``rule(ops, g, inputs, output, **params)``): the
eager ``clone``, and the nodes a compiled region adds (:mod:`tensorplay.compiler.autograd` registers them)."""

EXTRA_VALUE_FREE: set[str] = set()
"""Names of :data:`EXTRA_VJP` nodes whose rule reads only its inputs' shapes and dtypes (as the primitives of
``VALUE_FREE`` in :mod:`tensorplay.rules.vjp`): an in-place update of such an input after it was recorded is
harmless."""


def _vjp_rule(name: str) -> Callable[..., Any]:
    extra = EXTRA_VJP.get(name)
    if extra is not None:
        return extra
    rule = _rules().VJP_RULES.get(name)
    if rule is None:
        from tensorplay.spec.errors import MissingRuleError
        raise MissingRuleError(f"backward: primitive '{name}' has no vjp rule")
    return rule  # type: ignore[no-any-return]


_FUSED: dict[str, Callable[..., Any]] | None = None  # interpreters.eager.fused_vjp.FUSED_VJP, imported lazily


def _fused_rules() -> dict[str, Callable[..., Any]]:
    """The fused backward rules, used instead of the composite ones when no graph is created."""
    global _FUSED
    if _FUSED is None:
        from tensorplay.interpreters.eager.fused_vjp import FUSED_VJP
        _FUSED = FUSED_VJP
    return _FUSED


def _uses_output() -> frozenset[str]:
    return _rules().USES_OUTPUT  # type: ignore[no-any-return]


def run_backward(outputs: Sequence[Tensor[*tuple[Any, ...]]], grad_outputs: Sequence[Any],
                 retain_graph: bool, create_graph: bool,
                 targets: Sequence[Tensor[*tuple[Any, ...]]] | None) -> list[Any]:
    """The reverse sweep. With ``targets`` None, leaves' ``.grad`` accumulate; otherwise the
    cotangents of ``targets`` are returned (``None`` where a target is unreached)."""
    from tensorplay.interpreters.eager.interpreter import eager
    from tensorplay.rules.util import _NEEDED as needed  # the inputs that want a cotangent, read by rules
    node_grads: dict[int, Any] = {}
    leaf_grads: dict[int, Any] = {}
    roots: list[Node] = []
    for out, g in zip(outputs, grad_outputs):
        if out._node is None:
            _accumulate(leaf_grads, id(out), g)
        else:
            roots.append(out._node)
            _accumulate(node_grads, id(out._node), g)
    target_nodes = {id(t._node): i for i, t in enumerate(targets or ()) if t._node is not None}
    found: list[Any] = [None] * len(targets or ())
    leaves: dict[int, Tensor[*tuple[Any, ...]]] = {}
    # without create_graph, fused kernels replace the composite rules (those stay for higher derivatives)
    fused = None if create_graph else _fused_rules()
    order = _toposort(roots)
    order.reverse()
    ready = _ready_plan(order) if _READY_HOOKS and targets is None else None
    th = TENSOR_HOOKS[0] if TENSOR_HOOKS else None  # tensor hooks (their module), None when none exist
    # tp.autograd.grad: only the nodes with a path on to a target run (the rest, e.g. a weight's GEMM when the
    # targets are inputs, are skipped as PyTorch skips them)
    reach = paths_to_targets(order, target_nodes, targets) if targets is not None else None
    target_leaves = {id(t) for t in targets if t._node is None} if targets is not None else _NO_TARGETS
    outer_queue = _HOOK_STATE.queued
    if ready is not None:
        _HOOK_STATE.queued = []
    previous = grad_enabled()
    set_grad_enabled(create_graph)
    try:
        value_free = _value_free().union(EXTRA_VALUE_FREE)
        uses_output = _uses_output()
        for node in order:
            key = id(node)
            if ready is not None and key in ready:  # leaves whose last user was the previous node: final now
                for final in ready.pop(key):
                    if id(final) in leaf_grads:  # (no local holds the cotangent: see _unshared_payload)
                        _store_leaf_grad(final, th.on_leaf(final, dense(leaf_grads.pop(id(final))), create_graph)
                                         if th else dense(leaf_grads.pop(id(final))), create_graph)
                        _run_ready_hooks(final)
            g = dense(node_grads.pop(key, None))
            if key in target_nodes:
                found[target_nodes[key]] = g
            if th is not None and g is not None:
                g = th.on_node(node, g, reach, found, target_nodes)
            if g is None:
                continue  # never push a cotangent through a node that received none
            if reach is not None and not reach.get(key):
                continue  # no path on to a target
            inputs = node.inputs
            if inputs is None:  # freed by an earlier backward
                raise AutogradError(
                    "backward: trying to backward through the graph a second time (its saved values were "
                    "freed after the first backward); pass retain_graph=True to the first backward call")
            name = node.name
            edges = node.edges
            stale = _stale_input(inputs, node.versions, edges, name not in value_free)
            if stale is not None:
                _raise_stale(node, *stale)
            rule = (fused.get(name) if fused is not None else None) or _vjp_rule(name)
            output = node.saved_output() if name in uses_output else None  # other rules never read it
            if reach is None:
                mask = (edges[0] is not None,) if len(edges) == 1 else tuple([e is not None for e in edges])
            else:  # an edge is wanted when it leads on to a target
                mask = tuple([e is not None and (id(e) in reach if type(e) is Node else id(e) in target_leaves)
                              for e in edges])
            needed.mask = mask
            cotangents = rule(eager, g, inputs, output, **node.params)
            needed.mask = None
            for edge, ct, wanted in zip(edges, cotangents, mask):
                if not wanted or ct is None:
                    continue
                if not create_graph and isinstance(ct, Tensor):
                    ct = Tensor(eager, ct._data)
                if type(edge) is Node:
                    store, k = node_grads, id(edge)
                else:
                    k = id(edge)
                    leaves[k] = edge
                    store = leaf_grads
                old = store.get(k)
                store[k] = ct if old is None else add_cotangents(old, ct)
            cotangents = ct = ()  # let go of the rule's tensors (see _unshared_payload)
            if not retain_graph:
                node.inputs = None
                node.out_data = None
    except BaseException:
        _HOOK_STATE.queued = outer_queue
        raise
    finally:
        needed.mask = None
        set_grad_enabled(previous)
    if targets is not None:
        for i, t in enumerate(targets):
            if t._node is None:
                g = dense(leaf_grads.get(id(t)))
                found[i] = g if th is None else th.on_leaf(t, g, create_graph)
        return found
    try:
        for key in list(leaf_grads):
            leaf = leaves.get(key)
            if leaf is None:
                leaf = next((o for o in outputs if id(o) == key), None)
            if leaf is None:
                del leaf_grads[key]
                continue
            # the dict lets go of the cotangent and no local holds it: see _unshared_payload
            _store_leaf_grad(leaf, th.on_leaf(leaf, dense(leaf_grads.pop(key)), create_graph) if th
                             else dense(leaf_grads.pop(key)), create_graph)
            if ready is not None:
                _run_ready_hooks(leaf)
        queued = _HOOK_STATE.queued
        if ready is not None and queued:
            for fn in queued:
                fn()
    finally:
        _HOOK_STATE.queued = outer_queue
    return []


def _store_leaf_grad(leaf: Tensor[*tuple[Any, ...]], g: Tensor[*tuple[Any, ...]], create_graph: bool) -> None:
    """Accumulate the cotangent ``g`` into ``leaf.grad`` (the caller lets go of ``g`` right after)."""
    eager = _eager()
    with _GRAD_LOCK:  # read-add-write of .grad: atomic, so concurrent backward calls lose no update
        old = leaf._grad
        if old is not None:
            leaf._grad = old + g
        elif create_graph:
            leaf._grad = eager.clone(g)  # its own writeable memory (g may be shared, or a broadcast view)
        else:
            leaf._grad = Tensor(eager, _unshared_payload(g))


_EAGER: list[Any] = []  # the eager interpreter, imported on first use (it imports this module)


def _eager() -> Any:
    if not _EAGER:
        from tensorplay.interpreters.eager.interpreter import eager
        _EAGER.append(eager)
    return _EAGER[0]


def _unshared_payload(g: Tensor[*tuple[Any, ...]]) -> Any:
    """``g``'s array for a leaf's new ``.grad``: the array itself when nothing but ``g`` holds it and
    nothing but the backward pass holds ``g`` (a cotangent a rule just computed: taking it saves a copy,
    2 ms on 16 MB), else a copy (the caller's seed, a cached constant, a view or a broadcast). The test is
    on reference counts, as PyTorch's gradient accumulation steals a gradient nobody else uses: ``g``
    and its array may have no more holders than a probe tensor held by one local (measured once, through
    calls of the same depth, so the interpreter's own way of counting cancels out)."""
    held = _holder_counts(g)
    alone = _alone_counts()
    d = g._data
    if held[0] <= alone[0] and held[1] <= alone[1] and type(d) is np.ndarray and d.flags.writeable \
            and (d.flags.owndata or (held[2] <= alone[2] and _views_all_of_base(d))):
        return d
    return np.array(d, copy=True)


def _views_all_of_base(d: Any) -> bool:
    """Whether ``d`` views all of an array that owns its memory (a transpose or same-shape reshape of a
    fresh result, e.g. the weight gradient of ``x @ w.T``, which keeps ``w``'s transposed layout); with
    :func:`_holder_counts` saying nothing else holds that array, ``.grad`` may take ``d``."""
    base = d.base
    return (type(base) is np.ndarray and base.base is None and base.flags.owndata and base.flags.writeable
            and d.nbytes == base.nbytes)


def _holder_counts(g: Tensor[*tuple[Any, ...]]) -> tuple[int, int, int]:
    """``sys.getrefcount`` of ``g``, of its array and of that array's base (``None`` for an array that owns
    its memory), from two calls below the frame that holds ``g``."""
    d = g._data
    base = d.base
    return sys.getrefcount(g), sys.getrefcount(d), sys.getrefcount(base)


def _probe_counts(probe: Tensor[*tuple[Any, ...]]) -> tuple[int, int, int]:
    return _holder_counts(probe)


_ALONE: list[tuple[int, int, int]] = []


def _alone_counts() -> tuple[int, int, int]:
    """:func:`_holder_counts` of a tensor held by one local only, whose array (a transposed view) only it
    holds, and whose array's base only that array holds."""
    if not _ALONE:
        probe: Tensor[*tuple[Any, ...]] = Tensor(None, np.empty((3, 2)).T)
        _ALONE.append(_probe_counts(probe))
    return _ALONE[0]


def _value_free() -> frozenset[str]:
    return _rules().VALUE_FREE  # type: ignore[no-any-return]


def _stale_input(inputs: tuple[Any, ...], versions: tuple[int, ...], edges: tuple[Any, ...],
                 values_needed: bool) -> tuple[int, bool] | None:
    """The first input the rule must not use, as ``(index, modified)``: ``modified`` when the rule reads
    its value and it was modified in place since it was recorded, else its producer's result memory was
    changed behind the producer. ``None`` when every input is as recorded (the common case)."""
    for i, (x, saved, edge) in enumerate(zip(inputs, versions, edges)):
        if not isinstance(x, Tensor):
            continue
        box = x._version
        if values_needed and (0 if box is None else box[0]) != saved:
            return i, True
        if type(edge) is Node and edge.out_box is not None and edge.out_box is box and saved != edge.out_version:
            return i, False
    return None


def _raise_stale(node: Node, index: int, modified: bool) -> None:
    """The error for :func:`_stale_input`'s finding on ``node``."""
    assert node.inputs is not None
    x, saved = node.inputs[index], node.versions[index]
    if modified:
        raise AutogradError(
            f"backward: input {index} of '{node.name}' (shape {list(x._data.shape)}) was modified in place "
            f"after it was saved for backward (version {saved} then, {version_of(x)} now); "
            "compute on a .clone() or do the in-place update after backward")
    raise AutogradError(_stale_message(f"input {index} of '{node.name}'", x, node.edges[index]))


def _stale_message(what: str, x: Tensor[*tuple[Any, ...]], producer: Node) -> str:
    return (f"backward: {what} (shape {list(x._data.shape)}) was modified in place through a view or an "
            f"alias after '{producer.name}' computed it, so its recorded history no longer describes its value; "
            "clone() the tensor before modifying a view of it")


def _check_fresh(x: Tensor[*tuple[Any, ...]], where: str) -> None:
    """Refuse to extend the history of a tensor whose memory was changed behind its node's back."""
    node = x._node
    if node is not None and node.out_box is not None and node.out_box is x._version \
            and x._version[0] != node.out_version:
        raise AutogradError(_stale_message(f"the target of {where}", x, node).replace("backward: ", f"{where}: "))


def _seed(out: Tensor[*tuple[Any, ...]], g: Any, where: str) -> Tensor[*tuple[Any, ...]]:
    from tensorplay.interpreters.eager.interpreter import eager
    if g is None:
        if out._data.size != 1:
            raise AutogradError(
                f"{where}: grad can be implicitly created only for scalar outputs, got shape "
                f"{list(out._data.shape)}; pass gradient= (a tensor of that shape)")
        return Tensor(eager, np.ones_like(out._data))
    if not isinstance(g, Tensor):
        g = Tensor(eager, np.asarray(g, dtype=out._data.dtype))
    seed: Tensor[*tuple[Any, ...]] = g
    if tuple(g._data.shape) != tuple(out._data.shape):
        raise AutogradError(f"{where}: gradient has shape {list(g._data.shape)}, expected the output's shape "
                            f"{list(out._data.shape)}")
    return seed


def backward(outputs: Sequence[Tensor[*tuple[Any, ...]]], gradients: Sequence[Any] | None,
             retain_graph: bool, create_graph: bool) -> None:
    """Accumulate gradients of ``outputs`` into every reachable leaf's ``.grad``."""
    for out in outputs:
        if not out._requires_grad:
            raise AutogradError("backward: the tensor does not require grad and has no grad_fn; "
                                "set requires_grad=True on the leaves you differentiate with respect to")
    seeds = [_seed(o, None if gradients is None else gradients[i], "backward") for i, o in enumerate(outputs)]
    run_backward(outputs, seeds, retain_graph or create_graph, create_graph, None)


def grad(outputs: Any, inputs: Any, grad_outputs: Any = None, retain_graph: bool | None = None,
         create_graph: bool = False, allow_unused: bool = False) -> tuple[Any, ...]:
    """``tp.autograd.grad``: the gradients of ``outputs`` w.r.t. ``inputs`` (not accumulated into ``.grad``)."""
    outs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    ins = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    gos = [grad_outputs] if isinstance(grad_outputs, Tensor) or grad_outputs is None else list(grad_outputs)
    if grad_outputs is None:
        gos = [None] * len(outs)
    for i, x in enumerate(ins):
        if not x._requires_grad:
            raise AutogradError(f"autograd.grad: input {i} does not require grad")
    for o in outs:
        if not o._requires_grad:
            raise AutogradError("autograd.grad: an output does not require grad and has no grad_fn")
    seeds = [_seed(o, g, "autograd.grad") for o, g in zip(outs, gos)]
    retain = create_graph if retain_graph is None else retain_graph
    found = run_backward(outs, seeds, retain, create_graph, ins)
    for i, g in enumerate(found):
        if g is None and not allow_unused:
            raise AutogradError(f"autograd.grad: input {i} was not used to compute the outputs; "
                                "pass allow_unused=True to get None for it")
    return tuple(found)


def reset_grads(tensors: Any, set_to_none: bool) -> None:
    """``zero_grad``: each tensor's ``.grad`` becomes ``None``, or zeros in place. A gradient with
    history (from ``create_graph=True``) is detached first, and one whose memory cannot be written (a
    read-only array, e.g. a broadcast) gets fresh zeros, as PyTorch detaches and zeroes it."""
    handler = compile_hooks.handler()
    if handler is not None:  # inside tensorplay.compile's capture: the gradients are graph values
        handler.zero_grad(list(tensors), set_to_none)
        return
    for t in tensors:
        grad = t._grad
        if grad is None:
            continue
        if set_to_none:
            t._grad = None
        elif grad._node is not None or not grad._data.flags.writeable:
            from tensorplay.interpreters.eager.interpreter import eager
            t._grad = Tensor(eager, np.zeros(grad._data.shape, dtype=grad._data.dtype))
        else:
            grad._data[...] = 0
            box = grad._version
            if box is not None:
                box[0] += 1


# ---- in-place operations ---------------------------------------------------------------------------

def _check_inplace_target(x: Tensor[*tuple[Any, ...]], where: str) -> None:
    if grad_enabled():
        if x._requires_grad and x._node is None:
            raise AutogradError(f"{where}: a leaf tensor that requires grad is being used in an in-place "
                                "operation; wrap the update in tp.no_grad() or operate on a clone")
        base = x._base
        if base is not None and base._requires_grad and base._node is None:
            raise AutogradError(f"{where}: a view of a leaf tensor that requires grad (shape "
                                f"{list(base._data.shape)}) is being used in an in-place operation, which would "
                                "change the leaf behind autograd's back; wrap the update in tp.no_grad() or "
                                "operate on a clone")
    if not x._data.flags.writeable:
        raise AutogradError(f"{where}: the tensor is a read-only view (e.g. the result of expand); clone it first")


def _write(ops: Any, x: Tensor[*tuple[Any, ...]], new: Tensor[*tuple[Any, ...]], where: str,
           index: Any = Ellipsis) -> Tensor[*tuple[Any, ...]]:
    value = new._data
    if value.dtype != x._data.dtype:
        if np.can_cast(value.dtype, x._data.dtype, "same_kind") or value.dtype.kind == "b":
            value = value.astype(x._data.dtype)
        else:
            raise DTypeError(f"{where}: result type {value.dtype} can't be cast to the tensor's dtype "
                             f"{x._data.dtype} in place")
    x._data[index] = value
    box = x._version
    if box is None:
        box = x._version = [0]
    box[0] += 1
    if new._node is not None:
        if TENSOR_HOOKS and x._node is not None:  # retain_grad follows x to its new node
            TENSOR_HOOKS[0].moved(x, x._node, new._node)
        x._node = new._node
        x._requires_grad = True
    elif x._node is not None and grad_enabled():
        # the whole value was replaced by a constant (zero_, fill_, copy_ of a constant): no history left
        x._node = None
        x._requires_grad = False
    return x


_UFUNCS: dict[str, Any] = {"add": np.add, "sub": np.subtract, "mul": np.multiply}


def _recorder_for_write(x: Tensor[*tuple[Any, ...]], other: Any) -> Any:
    """The recorder that must handle an in-place write to eager ``x``: the active ``graph.trace`` when
    ``x`` is state from outside the traced function (the write becomes a recorded mutation), or the
    interpreter of a recorded ``other`` (which refuses what it cannot record); ``None``: write eagerly."""
    if isinstance(other, Tensor) and other._ops.level > 0:
        return other._ops
    if recording.active[0]:
        frame = recording.outside_state(x)
        if frame is not None:
            return frame.recorder
    return None


def inplace(ops: Any, x: Tensor[*tuple[Any, ...]], op: str, other: Any) -> Tensor[*tuple[Any, ...]]:
    """``x op= other``: computed out of place (recorded when needed), then written into ``x``."""
    where = f"{op}_"
    recorder = _recorder_for_write(x, other)
    if recorder is not None:
        return recorder.inplace(x, op, other)  # type: ignore[no-any-return]
    _check_inplace_target(x, where)
    check_inplace_operand(where, x, other)
    taped = grad_enabled() and (x._requires_grad or (isinstance(other, Tensor) and other._requires_grad))
    if not taped and op in _UFUNCS:
        src = other._data if isinstance(other, Tensor) else other
        try:
            _UFUNCS[op](x._data, src, out=x._data, casting="same_kind")
        except TypeError:  # numpy refused a narrowing cast (writing nothing): the path below names the result
            pass           # type by the library's own promotion, not numpy's
        else:
            box = x._version
            if box is None:
                box = x._version = [0]
            box[0] += 1
            return x
    if op == "fill":
        new = ops.full(shape=tuple(x._data.shape), value=other, dtype=x._data.dtype.name)
    elif op == "copy":
        src = other if isinstance(other, Tensor) else ops.constant(np.asarray(other))
        new = src if tuple(src._data.shape) == tuple(x._data.shape) else ops.broadcast_to(
            src, shape=tuple(x._data.shape))
        if new._requires_grad and grad_enabled():
            new = ops.clone(new)
    else:
        _check_fresh(x, where)
        base = Tensor(ops, x._data.copy()) if x._requires_grad else x
        if x._requires_grad:
            base._node, base._requires_grad = x._node, True
            if x._node is not None:
                x._node.preserve_output(x._data)
        new = clamp(ops, base, *other) if op == "clamp" else getattr(ops, op)(base, other)
    return _write(ops, x, new, where)


def _key_error(x: Tensor[*tuple[Any, ...]], key: Any, error: IndexError) -> Exception:
    """The error for a key numpy refused in ``x[key] = value``: the one ``x[key]`` raises (its checks name the
    index, the axis and the size), else an :class:`IndexRangeError` with numpy's reason and ``x``'s shape."""
    if isinstance(error, TensorplayError):
        return error
    try:
        with no_grad():
            x[key]
    except TensorplayError as clear:
        return clear
    except IndexError as plain:
        return IndexRangeError(f"setitem: {plain}")
    return IndexRangeError(f"setitem: {error} (tensor shape {list(x.shape)})")


def setitem(ops: Any, x: Tensor[*tuple[Any, ...]], key: Any, value: Any) -> None:
    """``x[key] = value`` (numpy indexing); differentiable w.r.t. ``value`` and the rest of ``x``."""
    check_setitem_key(key)
    recorder = _recorder_for_write(x, value)
    if recorder is not None:
        recorder.setitem(x, key, value)
        return
    _check_inplace_target(x, "setitem")
    index = tuple(k._data if isinstance(k, Tensor) else k for k in key) if isinstance(key, tuple) else (
        key._data if isinstance(key, Tensor) else key)
    if not (grad_enabled() and (x._requires_grad or (isinstance(value, Tensor) and value._requires_grad))):
        try:
            x._data[index] = value._data if isinstance(value, Tensor) else value
        except ValueError:
            check_setitem_value(tuple(np.shape(value._data if isinstance(value, Tensor) else value)),
                                tuple(np.shape(x._data[index])))
            raise
        except IndexError as error:
            raise _key_error(x, key, error) from None
        box = x._version
        if box is None:
            box = x._version = [0]
        box[0] += 1
        return
    # recorded: new = where(written, scatter of value, old x), numpy's last-write-wins for repeats
    try:
        plan = setitem_plan(tuple(x._data.shape), index)
    except IndexError as error:
        raise _key_error(x, key, error) from None
    _check_fresh(x, "setitem")
    old: Tensor[*tuple[Any, ...]] = Tensor(ops, x._data.copy())
    old._node, old._requires_grad = x._node, x._requires_grad
    if x._node is not None:
        x._node.preserve_output(x._data)
    _write(ops, x, setitem_value(ops, old, value, plan), "setitem")
