"""Cached transforms: ``grad(f)``, ``vmap(f)``, ... trace once and run a precompiled graph afterwards.

Every public transform returns a :class:`Transformed`. Called at top level with eager tensors, it runs
through a cache entry keyed by the transform, its options and the identity of the function it
transforms (recursively for nested transforms: ``vmap(grad(f))`` is one entry for ``f``): the entry is
made by the compiler (:func:`tensorplay.compile_hooks.transform_cache`, the same capture, guards and
specializations as ``tp.compile``), so the transformed graph is cached per input avals, grad mode and
the guard outcomes recorded while tracing (Python values, containers, branches on data), and every tensor
the function reads from outside its arguments (globals, closure cells, module parameters and buffers) is
an input read again at every call. A change of any of them is seen.

``vjp`` and ``linearize``, whose results hold a function, are cached in two stages (the forward, then the
function it returns: :mod:`tensorplay.func.staged`).

Called inside another transform, a graph recording or a ``tp.compile`` capture, the transform runs its
Python as before (the outer recording sees the operations). ``tp.compile(vmap(grad(f)))`` therefore
captures the whole transformed graph with the compiler's own backend.

Caching changes one thing users can see: the function's Python runs when a graph is traced, not at every
call (as in ``jax.jit``): a ``print`` inside it prints at the first call and after each retrace, and a number
drawn in Python (``random.random()``, ``np.random.rand()``) is drawn once, at the trace, and reused by the
cached calls; draw with tensorplay's random functions (``tp.rand``, dropout: fresh at every call) or pass the
number as an argument. A function
that changes the Python state it reads while traced, or reads state too deep to guard, is not cached (it
runs uncached at every call). The first call of a transformed function runs uncached (a function
transformed anew at every call pays no capture); the second traces it into the cache. :func:`set_caching` turns the cache off for the process (``TP_FUNC_CACHE=0``
in the environment does the same; ``TP_FUNC_CACHE=first`` traces into the cache at the first call).
"""

from __future__ import annotations

import os
import threading
import types
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tensorplay import compile_hooks
from tensorplay.recording import creating_interpreter
from tensorplay.tensor import Tensor

_MAX_ENTRIES = 128
"""Cache entries kept (least recently used ones are dropped)."""

_ENTRIES: OrderedDict[Any, Any] = OrderedDict()
_SEEN: OrderedDict[Any, list[Any]] = OrderedDict()
"""Keys called once (uncached): a transformed function is traced into the cache at its second call, so
code that transforms a new function at every call (``grad(lambda x: ...)(x)`` in a loop) pays no capture."""
_LOCK = threading.Lock()
_SETTING = os.environ.get("TP_FUNC_CACHE", "1").strip().lower()
_ENABLED = [_SETTING not in ("0", "false", "no", "off")]
_AT_FIRST_CALL = [_SETTING == "first"]
"""``TP_FUNC_CACHE=first``: trace into the cache at the first call (the tests run the whole transform suite
through the cached path this way)."""


def set_caching(enabled: bool) -> bool:
    """Turn the transform cache on or off for the process; returns the previous setting."""
    previous = _ENABLED[0]
    _ENABLED[0] = bool(enabled)
    return previous


def caching_enabled() -> bool:
    """Whether transformed functions use the cache (see :func:`set_caching`)."""
    return _ENABLED[0]


def traces_at_first_call() -> bool:
    """Whether a new key is traced into the cache at its first call (``TP_FUNC_CACHE=first``)."""
    return _AT_FIRST_CALL[0]


def clear_cache() -> None:
    """Forget every cached transformed graph."""
    with _LOCK:
        _ENTRIES.clear()
        _SEEN.clear()


_PLAIN_OPTIONS = frozenset({bool, int, float, str, type(None)})


def _freeze(value: Any) -> Any:
    """A hashable key of a transform option (``in_dims`` may be nested lists and dicts)."""
    kind = type(value)
    if kind in _PLAIN_OPTIONS:  # the common cases first (a new transform makes its key at once)
        return (kind.__name__, value)
    if kind is tuple or kind is list:
        return (kind.__name__, tuple([_freeze(v) for v in value]))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_freeze(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((_freeze(k), _freeze(v)) for k, v in value.items()))
    if value is None or isinstance(value, (bool, int, float, str)):
        return (type(value).__name__, value)
    return ("id", id(value))


def _function_key(func: Any) -> Any:
    if isinstance(func, Transformed):
        return func.cache_key
    if isinstance(func, types.MethodType):  # ``model.forward`` is a new bound method at every access
        return ("method", id(func.__func__), id(func.__self__))
    return ("fn", id(func))


def _identity(func: Any) -> list[Any]:
    """The objects whose ``id`` is part of :func:`_function_key` of ``func``."""
    if isinstance(func, Transformed):
        return func.identity
    if isinstance(func, types.MethodType):
        return [func.__func__, func.__self__]
    return [func]


def _reference(obj: Any) -> Any:
    """A weak reference to ``obj`` where it takes one (else a strong one, in a bounded table)."""
    try:
        return weakref.ref(obj)
    except TypeError:
        return lambda: obj


def _same_objects(refs: list[Any], objects: list[Any]) -> bool:
    """Whether ``refs`` still lead to ``objects`` (a key seen before was not an ``id`` of a dead object,
    reused by a new one)."""
    return len(refs) == len(objects) and all(r() is o for r, o in zip(refs, objects))


class Transformed:
    """A transformed function (see the module docstring).

    ``transform`` names the transform, ``__wrapped__`` is the function it transforms, ``uncached`` the
    transformed function without the cache. ``recompile_reasons`` and ``compile_count`` describe the cache
    entry (as for ``tp.compile``); ``cache_disabled`` says why a function is run uncached, if it is.
    """

    def __init__(self, transform: str, func: Any, options: dict[str, Any], uncached: Callable[..., Any],
                 not_cached: str | None = None) -> None:
        self.transform = transform
        self.not_cached = not_cached
        self.__wrapped__ = func
        self.uncached = uncached
        self.options = options
        self.cache_key = (transform, tuple([(k, _freeze(options[k])) for k in sorted(options)]), _function_key(func))
        self.identity = _identity(func)
        for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
            value = getattr(func, attr, None)
            if isinstance(value, str):
                setattr(self, attr, value)
        self._entry: Any = None

    def __repr__(self) -> str:
        return f"<{self.transform} of {getattr(self.__wrapped__, '__name__', self.__wrapped__)!r}>"

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        """As a class attribute, a transformed function binds like a method."""
        return self if obj is None else types.MethodType(self, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        entry = self.entry_for_call(args, kwargs)
        if entry is None:
            return self.uncached(*args, **kwargs)
        return entry(*args, **kwargs)

    def entry_for_call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The cache entry that runs this call, or ``None`` when it runs uncached (the cache is off, the call
        is inside a recording or transform, or it is the first call of this key)."""
        if not _ENABLED[0] or self.not_cached is not None or not top_level(args, kwargs):
            return None
        entry = self._entry
        if entry is None:
            if self._first_call():
                return None
            entry = self.entry()
        return entry

    def _first_call(self) -> bool:
        """Whether no function with this key was called before (see ``_SEEN``); it is remembered."""
        key = self.cache_key
        if _AT_FIRST_CALL[0]:
            return False
        with _LOCK:
            if key in _ENTRIES:
                return False
            seen = _SEEN.get(key)
            if seen is not None and _same_objects(seen, self.identity):
                return False
            _SEEN[key] = [_reference(o) for o in self.identity]
            while len(_SEEN) > 4 * _MAX_ENTRIES:
                _SEEN.popitem(last=False)
            return True

    def entry(self) -> Any:
        """The cache entry of this transformed function (``None`` when no compiler is available)."""
        entry = self._entry
        if entry is not None:
            return entry
        key = self.cache_key
        with _LOCK:
            found = _ENTRIES.get(key)
            if found is not None:
                _ENTRIES.move_to_end(key)
        if found is None:
            factory = compile_hooks.transform_cache()
            if factory is None:
                return None
            found = factory(self)
            with _LOCK:
                _ENTRIES[key] = found
                while len(_ENTRIES) > _MAX_ENTRIES:
                    _ENTRIES.popitem(last=False)
        self._entry = found
        return found

    def existing_entry(self) -> Any:
        """The cache entry when one was made (by this object or another with the same key), else ``None``."""
        if self._entry is not None:
            return self._entry
        with _LOCK:
            return _ENTRIES.get(self.cache_key)

    @property
    def recompile_reasons(self) -> list[Any]:
        """The cache entry's retrace events (each lists its reasons), oldest first."""
        entry = self.existing_entry()
        return [] if entry is None else list(entry.recompile_reasons)

    @property
    def compile_count(self) -> int:
        """How many times the transformed graph was traced through the cache."""
        entry = self.existing_entry()
        return 0 if entry is None else int(entry.compile_count)

    @property
    def cache_disabled(self) -> str | None:
        """Why this function runs uncached (``None`` when it is cached)."""
        if self.not_cached is not None:
            return self.not_cached
        entry = self.existing_entry()
        return None if entry is None else entry.disabled


def top_level(args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    """Whether a call runs outside any recording, capture or transform, on eager tensors only."""
    if compile_hooks.handler() is not None or creating_interpreter(None) is not None:
        return False
    stack = list(args) + list(kwargs.values())
    while stack:
        item = stack.pop()
        if isinstance(item, Tensor):
            if type(item._data) is not np.ndarray:
                return False
        elif isinstance(item, (tuple, list)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return True


CHUNKED = ("chunked: evaluating a batch in chunks bounds peak memory, which a cached graph (holding every "
           "chunk's intermediates) would not")


def transformed(transform: str, func: Any, options: dict[str, Any], uncached: Callable[..., Any],
                not_cached: str | None = None) -> Transformed:
    """Wrap ``uncached`` (``transform`` of ``func`` with ``options``) in the cache; ``not_cached`` (a reason)
    makes it always run uncached."""
    return Transformed(transform, func, options, uncached, not_cached)


__all__ = ["Transformed", "caching_enabled", "clear_cache", "set_caching", "top_level", "traces_at_first_call",
           "transformed"]
