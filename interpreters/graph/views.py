"""Views while recording: an in-place write through a view reaches the tensor it views.

Recorded values are immutable; an in-place operation rebinds the handle it was called on. Eagerly,
``x[0:2].add_(1.0)``, ``x.view(2, 2).mul_(2.0)`` or ``x.T.add_(y)`` change ``x`` too, since the view
shares ``x``'s memory. :class:`ViewTable` gives a recorder the same meaning: every result of a view
primitive (``reshape``, ``permute``, ``slice``, ``broadcast_to``, and ``stop_gradient`` for ``detach()``:
those the eager interpreter answers with a numpy view) is noted with its *root* (the tensor it views, through any chain of views) and the
chain of view primitives from the root. A write through a view then

* scatters the view's new value into the root (positions: the chain applied to ``arange`` of the
  root's size) and rebinds the root -- for a root from outside the traced function (an eager tensor),
  a recorded state mutation, as a direct ``root.add_(...)`` is;
* re-derives every other live view of that root (the chain replayed on the root's new value), as
  their shared memory would show the write eagerly.

A write to a root re-derives its live views too. A ``reshape`` that numpy can only do by copying
gives a copy, as eagerly: writes to it stay there. Views of ``broadcast_to`` (``expand``) are
read-only, as eagerly; a write through a view of a root with symbolic dims is refused with a clear
error (the positions need static sizes).
"""

from __future__ import annotations

import weakref
from typing import Any, NamedTuple

import numpy as np

from tensorplay.symbolic import SymDim
from tensorplay.spec.table import names
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]

VIEW_PRIMITIVES = frozenset({*names("view"), "stop_gradient"})
"""The primitives whose eager result is a view of their input (``stop_gradient``: ``detach()``, the same
memory)."""


class View(NamedTuple):
    """A view noted by :class:`ViewTable`: the view (weakly), its root, the chain of ``(primitive,
    params)`` from the root; ``writable``: no ``broadcast_to`` in the chain."""

    ref: weakref.ref[AnyTensor]
    root: AnyTensor
    chain: tuple[tuple[str, dict[str, Any]], ...]
    writable: bool

    @property
    def root_shape(self) -> tuple[Any, ...]:
        """The root's shape (an in-place write keeps it)."""
        return tuple(self.root._data.shape)


def positions(view: View, like: Any = None) -> tuple[np.ndarray[Any, Any] | None, bool]:
    """Where each element of ``view`` lies in its root, flat (``None`` when a size is symbolic), and whether
    ``view`` shares the root's memory: a ``reshape`` that numpy can only do by copying (of a strided view,
    ``c[::2].reshape(-1)``) gives a copy eagerly, so writes to it do not reach the root. ``like``: the
    root's array when known (its memory order decides the copies), else a row-major one is assumed."""
    root_shape = view.root_shape
    if any(isinstance(d, SymDim) for d in root_shape):
        return None, True
    size = int(np.prod(root_shape, dtype=np.int64))
    base: np.ndarray[Any, Any] = np.empty_like(like, dtype=np.int64) if isinstance(like, np.ndarray) \
        and like.shape == root_shape else np.empty(root_shape, dtype=np.int64)
    base[...] = np.arange(size, dtype=np.int64).reshape(root_shape)
    index = base
    for target, params in view.chain:
        if target == "reshape":
            shape = params["shape"]
            if any(isinstance(d, SymDim) for d in shape):
                return None, True
            reshaped = index.reshape(shape)
            if reshaped.size and not np.shares_memory(reshaped, base):
                return reshaped, False
            index = reshaped
        elif target == "permute":
            index = index.transpose(params["perm"])
        elif target == "slice":
            index = index[tuple(slice(a, None if (b < 0 and c < 0) else b, c)
                                for a, b, c in zip(params["starts"], params["stops"], params["steps"]))]
        elif target == "broadcast_to":
            index = np.broadcast_to(index, params["shape"])
    return index, True


class ViewTable:
    """The views a recorder made, by the id of the view's handle, and per root (see the module
    docstring). Noting a view is on the recorder's hot path: entries are plain tuples."""

    def __init__(self) -> None:
        self._views: dict[int, View] = {}
        self._by_root: dict[int, list[int]] = {}

    def note(self, source: AnyTensor, view: AnyTensor, target: str, params: dict[str, Any]) -> None:
        """``view`` is ``target(source, **params)`` (``params`` are the recorded node's: not copied)."""
        parent = self._views.get(id(source))
        if parent is not None and parent[0]() is source:
            root, chain, writable = parent[1], parent[2] + ((target, params),), parent[3]
        else:
            root, chain, writable = source, ((target, params),), True
        key = id(view)
        self._views[key] = View(weakref.ref(view), root, chain, writable and target != "broadcast_to")
        keys = self._by_root.get(id(root))
        if keys is None:
            self._by_root[id(root)] = [key]
        else:
            keys.append(key)

    def of(self, tensor: AnyTensor) -> View | None:
        """The :class:`View` ``tensor`` is, if it is one."""
        found = self._views.get(id(tensor))
        return found if found is not None and found.ref() is tensor else None

    def live_views(self, root: AnyTensor) -> list[tuple[AnyTensor, View]]:
        """The views of ``root`` still alive (forgetting the others)."""
        keys = self._by_root.get(id(root))
        if not keys:
            return []
        alive: list[tuple[AnyTensor, View]] = []
        kept = []
        for key in keys:
            view = self._views.get(key)
            tensor = view.ref() if view is not None else None
            if view is None:
                continue
            if tensor is None:
                del self._views[key]
                continue
            if view.root is not root:  # the id was reused by a view of another root
                continue
            kept.append(key)
            alive.append((tensor, view))
        self._by_root[id(root)] = kept
        return alive


__all__ = ["VIEW_PRIMITIVES", "View", "ViewTable", "positions"]
