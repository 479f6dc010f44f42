"""Tensor hooks on the eager tape: ``register_hook``, ``retain_grad`` and post-accumulate hooks.

PyTorch's semantics, on the tape of :mod:`tensorplay.interpreters.eager.tape`:

* ``t.register_hook(fn)``: during a backward pass (``backward()`` or ``tp.autograd.grad``) ``fn(g)`` is
  called with the gradient ``g`` of ``t`` (the sum over all of ``t``'s uses, once per pass). A tensor
  returned by ``fn`` replaces ``g`` from then on: later hooks see it, it flows on to ``t``'s inputs, is
  accumulated into ``t.grad`` (a leaf) or returned by ``tp.autograd.grad``; ``None`` keeps ``g``. Hooks
  run in registration order. For a non-leaf the hooks belong to the tape node that produced ``t`` (an
  in-place update of ``t`` afterwards leaves them on the old value, as in PyTorch).
* ``t.retain_grad()``: a non-leaf accumulates its gradient (after its hooks) into ``t.grad``; it
  follows ``t`` through in-place updates. A no-op for a leaf.
* ``leaf.register_post_accumulate_grad_hook(fn)``: ``fn(leaf)`` once ``leaf.grad`` is final in a
  ``backward()`` (:func:`tensorplay.interpreters.eager.tape.register_grad_ready_hook`).

Hooks of a non-leaf live on its :class:`~tensorplay.interpreters.eager.tape.Node` (its ``hooks``
slot, left unset on nodes without hooks); those of a leaf in a table keyed by the leaf's id (weakly: the
entry goes with the leaf). The tape asks this module only once some hook was registered
(``tape.TENSOR_HOOKS`` names it then), so a backward without hooks costs one list test more.

Hooks are eager-only: a tensor being recorded (``tp.compile``, ``tp.graph.trace``, a
``tensorplay.func`` transform) has no tape, and is refused with a :class:`GraphCaptureError`.
"""

from __future__ import annotations

import itertools
import sys
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import tensorplay.tensor as _tensor_module
from tensorplay import compile_hooks
from tensorplay.interpreters.eager import tape
from tensorplay.interpreters.eager.tape import HookHandle, Node
from tensorplay.spec.errors import AutogradError, GraphCaptureError
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]
Hook = Callable[[AnyTensor], Any]

_KEYS = itertools.count()


class TensorHooks:
    """The hooks of one tensor (a leaf) or one node's result (a non-leaf): ``fns`` (handle key -> hook,
    in registration order) and ``retain`` (a weak reference to the tensor whose ``.grad`` keeps the
    gradient, for a non-leaf after ``retain_grad()``)."""

    __slots__ = ("fns", "retain")

    def __init__(self) -> None:
        self.fns: dict[int, Hook] = {}
        self.retain: weakref.ref[AnyTensor] | None = None


class RemovableHandle:
    """What ``register_hook`` returns: ``remove()`` unregisters the hook (again: nothing); also a
    context manager that removes it on exit."""

    __slots__ = ("_fns", "_key")

    def __init__(self, fns: dict[int, Hook], key: int) -> None:
        self._fns = fns
        self._key = key

    def remove(self) -> None:
        """Unregister the hook."""
        self._fns.pop(self._key, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


_LEAVES: dict[int, tuple[weakref.ref[AnyTensor], TensorHooks]] = {}
"""``id(leaf) -> (weak reference to the leaf, its hooks)``."""


def _activate() -> None:
    """Tell the tape that hooks exist (from now on it asks :func:`on_node` and :func:`on_leaf`)."""
    if not tape.TENSOR_HOOKS:
        tape.TENSOR_HOOKS.append(sys.modules[__name__])


def _check_hookable(t: Any, where: str) -> None:
    """Refuse a non-tensor, a tensor being recorded, a capture in progress, and a tensor without gradient."""
    if not isinstance(t, Tensor):
        raise AutogradError(f"{where}: expected a Tensor, got {type(t).__name__}")
    level = getattr(t._ops, "level", 0)
    if level != 0 or compile_hooks.handler() is not None:
        raise GraphCaptureError(
            f"{where}: tensor hooks run on the eager tape only, and this tensor is being recorded "
            f"({'graph level ' + str(level) if level else 'inside a tp.compile capture'}: tp.compile, "
            "tp.graph.trace or a tensorplay.func transform, where gradients are computed as a graph, not on "
            "the tape); register the hook on an eager tensor outside the recorded function, or apply the "
            "change to the gradient the transform returns (e.g. scale the result of tensorplay.func.grad)")
    if not t._requires_grad:
        raise AutogradError(f"{where}: cannot register a hook on a tensor that doesn't require gradient "
                            f"(shape {list(t._data.shape)}); set requires_grad=True on it first")


def _hooks_of(t: AnyTensor) -> TensorHooks:
    """``t``'s hook record, made on first use."""
    _activate()
    node = t._node
    if node is not None:
        found: TensorHooks | None = getattr(node, "hooks", None)
        if found is None:
            found = node.hooks = TensorHooks()
        return found
    key = id(t)
    entry = _LEAVES.get(key)
    if entry is None or entry[0]() is not t:
        entry = (weakref.ref(t, _forgetter(key)), TensorHooks())
        _LEAVES[key] = entry
    return entry[1]


def _forgetter(key: int) -> Callable[[Any], None]:
    def forget(_ref: Any) -> None:
        _LEAVES.pop(key, None)
    return forget


def register_hook(t: AnyTensor, hook: Hook) -> RemovableHandle:
    """``t.register_hook(hook)``: see the module docstring. ``hook(grad) -> Tensor | None``."""
    _check_hookable(t, "register_hook")
    if not callable(hook):
        raise AutogradError(f"register_hook: the hook must be callable, got {type(hook).__name__}")
    fns = _hooks_of(t).fns
    key = next(_KEYS)
    fns[key] = hook
    return RemovableHandle(fns, key)


def retain_grad(t: AnyTensor) -> None:
    """``t.retain_grad()``: a non-leaf keeps its gradient in ``.grad`` (accumulated over backward calls)."""
    if isinstance(t, Tensor) and not t._requires_grad and getattr(t._ops, "level", 0) == 0:
        raise AutogradError(f"retain_grad: can't retain_grad on a tensor that has requires_grad=False "
                            f"(shape {list(t._data.shape)})")
    _check_hookable(t, "retain_grad")
    if t._node is None:
        return  # a leaf keeps its gradient anyway
    _hooks_of(t).retain = weakref.ref(t)


def retains_grad(t: AnyTensor) -> bool:
    """Whether ``retain_grad()`` was called on non-leaf ``t`` (``False`` for a leaf, as PyTorch)."""
    node = t._node
    hooks: TensorHooks | None = getattr(node, "hooks", None) if node is not None else None
    return hooks is not None and hooks.retain is not None and hooks.retain() is t


def has_hooks(leaf: AnyTensor) -> bool:
    """Whether ``register_hook`` hooks are registered (and not removed) on leaf ``leaf``."""
    entry = _LEAVES.get(id(leaf))
    return entry is not None and entry[0]() is leaf and bool(entry[1].fns)


def register_post_accumulate_grad_hook(t: AnyTensor, hook: Callable[[AnyTensor], None]) -> HookHandle:
    """``leaf.register_post_accumulate_grad_hook(hook)``: ``hook(leaf)`` after ``leaf.grad`` is accumulated
    in a ``backward()`` (not ``tp.autograd.grad``)."""
    _check_hookable(t, "register_post_accumulate_grad_hook")
    if t._node is not None:
        raise AutogradError("register_post_accumulate_grad_hook: post accumulate grad hooks cannot be registered "
                            f"on non-leaf tensors (this one has grad_fn {t._node!r}); register it on a leaf")
    if not callable(hook):
        raise AutogradError(f"register_post_accumulate_grad_hook: the hook must be callable, got "
                            f"{type(hook).__name__}")
    return tape.register_grad_ready_hook(t, hook)


# ---- what the tape calls (only once a hook exists) -------------------------------------------------

def _run(hooks: TensorHooks, g: AnyTensor) -> AnyTensor:
    """``g`` through ``hooks.fns`` in order, each returned tensor replacing it (same shape and dtype)."""
    for fn in list(hooks.fns.values()):
        out = fn(g)
        if out is None:
            continue
        name = getattr(fn, "__name__", type(fn).__name__)
        if not isinstance(out, Tensor):
            raise AutogradError(f"backward: hook '{name}' returned a {type(out).__name__}; a hook returns a "
                                "Tensor (the new gradient) or None")
        if tuple(out._data.shape) != tuple(g._data.shape):
            raise AutogradError(f"backward: hook '{name}' has changed the size of the gradient: it returned shape "
                                f"{list(out._data.shape)}, expected {list(g._data.shape)}")
        if out._data.dtype != g._data.dtype:
            raise AutogradError(f"backward: hook '{name}' has changed the type of the gradient: it returned "
                                f"{out._data.dtype}, expected {g._data.dtype}")
        g = out
    return g


def on_node(node: Node, g: AnyTensor, reach: dict[int, bool] | None, found: list[Any],
            target_nodes: dict[int, int]) -> AnyTensor:
    """The gradient of ``node``'s result after its tensor's hooks (and ``retain_grad``). ``reach`` (a
    ``tp.autograd.grad`` pass; ``None``: ``backward()``) holds the nodes the pass needs, as PyTorch runs no
    hook off them; a target node that is only captured there (no other target lies beyond it) returns the
    gradient after its hooks in ``found``, one that must also run keeps the gradient from before them (the
    tape stored it), as PyTorch orders its capture and its hooks."""
    hooks: TensorHooks | None = getattr(node, "hooks", None)
    if hooks is None:
        return g
    key = id(node)
    runs = True if reach is None else reach.get(key)
    if runs is None:
        return g
    if hooks.fns:
        g = _run(hooks, g)
    retained = hooks.retain() if hooks.retain is not None else None
    if retained is not None and retained._node is node:
        old = retained._grad
        retained._grad = tape._eager().clone(g) if old is None else old + g
    if not runs and key in target_nodes:
        found[target_nodes[key]] = g
    return g


def on_leaf(leaf: AnyTensor, g: Any, create_graph: bool) -> Any:
    """The gradient of ``leaf`` after its hooks (``g`` itself when it has none), run in the grad mode of the
    sweep (recording only with ``create_graph``)."""
    if g is None:
        return g
    entry = _LEAVES.get(id(leaf))
    if entry is None or entry[0]() is not leaf or not entry[1].fns:
        return g
    with tape._GradMode(create_graph):
        return _run(entry[1], g)


def moved(x: AnyTensor, old: Node, new: Node) -> None:
    """An in-place update rebound ``x`` from node ``old`` to ``new``: ``retain_grad`` follows ``x``."""
    hooks: TensorHooks | None = getattr(old, "hooks", None)
    if hooks is None or hooks.retain is None or hooks.retain() is not x:
        return
    hooks.retain = None
    target: TensorHooks | None = getattr(new, "hooks", None)
    if target is None:
        target = new.hooks = TensorHooks()
    target.retain = weakref.ref(x)


_tensor_module._TENSOR_HOOKS[:] = [sys.modules[__name__]]  # Tensor.register_hook and friends call this module

__all__ = ["RemovableHandle", "TensorHooks", "has_hooks", "moved", "on_leaf", "on_node", "register_hook",
           "register_post_accumulate_grad_hook", "retain_grad", "retains_grad"]
