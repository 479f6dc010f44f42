"""The compiled wrapper: specializations cached by guards, recompilation limits and reasons.

:class:`CompiledFunction` is what ``tp.compile(fn)`` returns. Each call is described
(:func:`tensorplay.compiler.guards.describe`), matched against the cached specializations (a dict
lookup by the call's key, then the guards on state read from outside), and run; on a miss the
function is captured again (:mod:`.capture`), optimised and compiled (:mod:`.pipeline`), and the
reasons of the miss are recorded on the wrapper (``recompile_reasons``) and printed when
``TP_LOG_RECOMPILES=1`` or ``config.verbose``.

Dynamic shapes: with ``dynamic=True`` every dim of every tensor argument is captured symbolic (dims
with equal sizes share a symbol; a dim a shape rule or a Python decision needs static becomes
static). With the default policy the first call is static and a dim whose size changes is marked
dynamic and recompiled symbolic once, so any sequence of sizes of that dim costs at most two
compiles. Size 1 is an ordinary size.

Specializations live in a *bucket* shared by the wrappers of one function object compiled with the
same settings (``isolate_recompiles=True`` gives a wrapper its own); ``recompile_limit`` bounds the
specializations cached per bucket: at the limit a call raises (``fullgraph``, or
``config.fail_on_recompile_limit_hit``) or is compiled again without being cached, never run
uncaptured. ``config.accumulated_recompile_limit`` bounds the captures of one wrapper in all.

Calls from inside a transform (``tensorplay.func``), a graph recording or another compiled function's
capture run the function's Python, so the outer interpreter records it.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensorplay import compile_hooks
from tensorplay.compiler import naming
from tensorplay.compiler.capture import Call, capture
from tensorplay.compiler.guards import CallDescription, Guards, Reason, describe, tensor_meta
from tensorplay.compiler.pipeline import build
from tensorplay.compiler.recording import Respecialize
from tensorplay.compiler.runtime import GuardMiss, Specialization
from tensorplay.compiler.settings import config
from tensorplay.compiler.sources import Sources, discover, is_module
from tensorplay.errors import TensorplayError
from tensorplay.interpreters.eager import tape
from tensorplay.spec.errors import GraphCaptureError
from tensorplay.symbolic import SymDim
from tensorplay.tensor import Tensor

_STATE_LOCK = threading.RLock()
"""Held while a capture swaps recorder tensors into state (module parameters ...) and while a compiled
call reads or writes that state, so no call sees a capture's temporary values."""


def _static_error(fn: Any, request: Any, sources: Any, error: TensorplayError) -> TensorplayError:
    """The error of a capture with symbolic dims that failed (a shape or dtype error): the one a capture with
    this call's own sizes raises, whose message names them (``input feature size 5``, not the symbol ``In``);
    ``error`` itself when that capture does not fail the same way."""
    try:
        with _STATE_LOCK:
            capture(fn, request, sources, {}, {})
    except TensorplayError as static:
        if type(static) is type(error):
            return static
    return error


class RecompileLimitError(TensorplayError, RuntimeError):
    """A compiled function reached its recompilation limit (the message lists the last reasons)."""


@dataclass(frozen=True)
class Options:
    """The settings one ``tp.compile`` call fixed (see :func:`tensorplay.compiler.compile`)."""

    fullgraph: bool
    dynamic: bool | None
    backend: Callable[..., Any]
    backend_name: str
    mode: str | None
    options: tuple[tuple[str, Any], ...]
    name: str | None
    recompile_limit: int | None
    isolate_recompiles: bool
    strict_native: bool

    def backend_kwargs(self) -> dict[str, Any]:
        """The keyword arguments the backend receives besides ``name``."""
        kwargs: dict[str, Any] = {}
        if self.mode not in (None, "default"):
            kwargs["mode"] = self.mode
        if self.options:
            kwargs["options"] = dict(self.options)
        if self.dynamic is not None:
            kwargs["dynamic"] = self.dynamic
        if self.strict_native:
            kwargs["strict_native"] = True
        return kwargs

    def fingerprint(self) -> tuple[Any, ...]:
        """What makes two wrappers' specializations interchangeable."""
        return (self.backend, self.mode, self.options, self.dynamic, self.strict_native, self.fullgraph)


@dataclass
class RecompileEvent:
    """One capture after a miss: the ``reasons`` (against each cached specialization, most recent first),
    whether the result was ``cached``, and the capture and compile time."""

    reasons: list[Reason]
    cached: bool
    seconds: float = 0.0
    specialization: int = -1

    def __str__(self) -> str:
        lines = [f"specialization {self.specialization}{'' if self.cached else ' (not cached: limit reached)'}"
                 " compiled because:"]
        lines.extend(f"  - {r}" for r in self.reasons)
        return "\n".join(lines)


class _Bucket:
    """The specializations shared by the wrappers of one function object (see the module docstring)."""

    def __init__(self) -> None:
        self.specs: list[Specialization] = []
        self.table: dict[Any, list[Specialization]] = {}
        self.masks: list[frozenset[tuple[int, int]]] = []
        self.lock = threading.RLock()
        self.dynamic_sites: set[tuple[str, int]] = set()
        self.static_sites: set[tuple[str, int]] = set()
        self.generation = 0  # bumped by clear(): a wrapper's fast path holds only a current specialization

    def clear(self) -> None:
        self.generation += 1
        self.specs.clear()
        self.table.clear()
        self.masks.clear()
        self.dynamic_sites.clear()
        self.static_sites.clear()

    def add(self, spec: Specialization) -> None:
        spec.index = len(self.specs)
        self.specs.append(spec)
        mask = spec.guards.symbolic
        if mask not in self.masks:
            self.masks.append(mask)
        self.table.setdefault(spec.guards.key, []).append(spec)

    def candidates(self, call: CallDescription) -> list[Specialization]:
        """The specializations whose key matches ``call``, newest first (a newer one was compiled because
        the older ones stopped matching: a training loop's first step creates the optimizer state)."""
        found: list[Specialization] = []
        for mask in self.masks:
            key = call.exact_key() if not mask else call.masked_key(mask)
            found.extend(self.table.get(key, ()))
        if len(found) > 1:
            found.sort(key=lambda s: -s.index)
        return found


_BUCKETS: weakref.WeakValueDictionary[Any, _Bucket] = weakref.WeakValueDictionary()
_ALL_BUCKETS: weakref.WeakSet[_Bucket] = weakref.WeakSet()


def _bucket_for(fn: Any, options: Options) -> _Bucket:
    if options.isolate_recompiles:
        bucket = _Bucket()
        _ALL_BUCKETS.add(bucket)
        return bucket
    owner = getattr(fn, "__self__", None)
    key = (id(getattr(fn, "__func__", fn)), id(owner), options.fingerprint())
    found = _BUCKETS.get(key)
    if found is None:
        found = _Bucket()
        _BUCKETS[key] = found
        _ALL_BUCKETS.add(found)
    return found


def reset_buckets() -> None:
    """Forget every cached specialization of every compiled function."""
    for bucket in list(_ALL_BUCKETS):
        with bucket.lock:
            bucket.clear()


def _log_enabled() -> bool:
    return bool(config.verbose) or os.environ.get("TP_LOG_RECOMPILES", "").strip() not in ("", "0", "false")


def _inline(leaves: list[Any]) -> bool:
    """Whether the call must run the function's Python (a transform, a recording or a capture is active)."""
    if compile_hooks.handler() is not None:
        return True
    for leaf in leaves:
        if isinstance(leaf, Tensor) and type(leaf._data) is not np.ndarray:
            return True
    return False


class CompiledFunction:
    """A compiled function (or module forward): call it like the original (see the module docstring).

    ``recompile_reasons`` lists a :class:`RecompileEvent` per capture after the first;
    ``compile_count`` is the number of captures; ``specializations`` the cached ones.
    """

    _uncached_past_limit = False
    """At the recompile limit, run the function's Python (a cached transform) instead of capturing again."""

    def __init__(self, fn: Callable[..., Any], options: Options) -> None:
        self._fn = fn
        self._options = options
        self._bucket = _bucket_for(fn, options)
        self.__name__: str = str(options.name or getattr(fn, "__name__", type(fn).__name__))
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn
        self.recompile_reasons: list[RecompileEvent] = []
        self.compile_count = 0
        self.compile_seconds: list[float] = []
        self._last: tuple[Any, ...] | None = None  # the fast path: grad mode, snapshot, specialization, call
        self._count_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<compiled {self.__name__} ({self._options.backend_name}): {len(self._bucket.specs)} specialization(s)>"

    @property
    def specializations(self) -> list[Specialization]:
        """The cached specializations, oldest first."""
        return list(self._bucket.specs)

    @property
    def original(self) -> Callable[..., Any]:
        """The function that was compiled."""
        return self._fn

    # ---- calling --------------------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        leaves, spec = naming.flatten_call(args, kwargs)
        if _inline(leaves):
            return self._fn(*args, **kwargs)
        grad = tape.grad_enabled()
        misses: list[tuple[Specialization, Reason]] = []
        try:
            fast = self._last
            if fast is not None and fast[0] == grad and fast[4] == self._bucket.generation \
                    and _same_call(fast[1], leaves):
                result = self._try(fast[2], fast[3], leaves, misses)
                if result is not _NO_RESULT:
                    return result
            call = describe(leaves, spec, grad)
            for candidate in self._bucket.candidates(call):
                result = self._try(candidate, call, leaves, misses)
                if result is not _NO_RESULT:
                    self._last = (grad, _snapshot(leaves), candidate, call, self._bucket.generation)
                    return result
            return self._compile_and_run(args, kwargs, leaves, spec, call, misses)
        except _Inline:
            return self._fn(*args, **kwargs)

    def _try(self, spec: Specialization, call: CallDescription, leaves: list[Any],
             misses: list[tuple[Specialization, Reason]]) -> Any:
        """Run ``spec`` when its guards hold for this call (``_NO_RESULT`` otherwise). The state is read and
        written back under :data:`_STATE_LOCK`; the compiled code itself runs unlocked, so threads overlap."""
        guards = spec.guards
        with _STATE_LOCK:
            reads, values, objects = guards.read_state()
            for t in reads:
                if isinstance(t, Tensor) and type(t._data) is not np.ndarray:
                    raise _Inline  # state swapped for another interpreter's values (functional_call)
            if not guards.state_ok(reads, values, objects):
                return _NO_RESULT
            binding = guards.sizes_for(call) if guards.symbols or guards.size_guards else {}
            if binding is None:
                return _NO_RESULT
            started = spec.start(leaves, reads)
        result = spec.execute(started)
        with _STATE_LOCK:
            try:
                return spec.finish(started, result, leaves, reads, binding)
            except GuardMiss as miss:
                misses.append((spec, miss.reason))
                return _NO_RESULT

    # ---- compiling ------------------------------------------------------------------------------------
    def _reasons(self, call: CallDescription, misses: list[tuple[Specialization, Reason]]) -> list[Reason]:
        reasons: list[Reason] = []
        seen: set[tuple[str, str]] = set()
        branch = {id(s): r for s, r in misses}
        for spec in reversed(self._bucket.specs):
            found = spec.guards.call_reasons(call)
            if not found:
                with _STATE_LOCK:
                    found = spec.guards.state_reasons([s.read() for s in spec.guards.tensors])
            if not found and id(spec) in branch:
                found = [branch[id(spec)]]
            for r in found:
                if (r.kind, r.message) in seen:
                    continue  # an older specialization missed for the same reason: named once, newest first
                seen.add((r.kind, r.message))
                reasons.append(Reason(r.kind, f"specialization {spec.index}: {r.message}", r.location, r.fix))
        return reasons

    def _count_capture(self) -> None:
        with self._count_lock:
            self.compile_count += 1
            limit = config.accumulated_recompile_limit
            if self.compile_count > limit:
                raise RecompileLimitError(
                    f"tp.compile: {self.__name__} was captured {self.compile_count - 1} times, the accumulated "
                    f"limit (tensorplay.compiler.config.accumulated_recompile_limit = {limit}); the last "
                    f"reasons: {'; '.join(str(r) for r in (self.recompile_reasons[-1].reasons if self.recompile_reasons else []))}")

    def _compile_and_run(self, args: tuple[Any, ...], kwargs: dict[str, Any], leaves: list[Any], tree: Any,
                         call: CallDescription, misses: list[tuple[Specialization, Reason]]) -> Any:
        bucket = self._bucket
        with bucket.lock:
            for candidate in bucket.candidates(call):  # another thread may have compiled it meanwhile
                result = self._try(candidate, call, leaves, [])
                if result is not _NO_RESULT:
                    return result
            reasons = self._reasons(call, misses) if bucket.specs else []
            limit = self._options.recompile_limit if self._options.recompile_limit is not None \
                else config.recompile_limit
            cache = len(bucket.specs) < limit
            if not cache and (self._options.fullgraph or config.fail_on_recompile_limit_hit):
                raise RecompileLimitError(
                    f"tp.compile: {self.__name__} reached its recompile limit ({limit} specializations); this call "
                    "would need another because:\n" + "\n".join(f"  - {r}" for r in reasons) +
                    "\nRaise the limit (tp.compile(recompile_limit=...) or tensorplay.compiler.config."
                    "recompile_limit), or make the calls agree (see the reasons)")
            if not cache and self._uncached_past_limit:
                uncached = RecompileEvent(reasons, False, 0.0, -1)
                self.recompile_reasons.append(uncached)
                if _log_enabled():
                    print(f"tp.compile: {self.__name__} runs uncached: {uncached}", file=sys.stderr)
                raise _Inline
            self._count_capture()
            self._mark_dynamic(call, leaves, tree, args, kwargs)
            event = None
            if reasons or not cache:  # recorded before capturing: a capture that fails keeps its reasons
                event = RecompileEvent(reasons, cache, 0.0, len(bucket.specs) if cache else -1)
                self.recompile_reasons.append(event)
                if _log_enabled():
                    print(f"tp.compile: recompiling {self.__name__}: {event}", file=sys.stderr)
            start = time.perf_counter()
            spec = self._capture_and_build(args, kwargs, leaves, tree, call)
            seconds = time.perf_counter() - start
            self.compile_seconds.append(seconds)
            if event is not None:
                event.seconds = seconds
            if cache:
                bucket.add(spec)
        result = self._try(spec, call, leaves, misses)
        if result is _NO_RESULT:
            raise GraphCaptureError(
                f"tp.compile: the function {self.__name__} was just compiled for this call but its guards reject "
                "it: " + "; ".join(str(r) for _, r in misses[-1:]) + ". The function's Python gives different "
                "results on the same inputs (does it read state that changes during the call?)")
        return result

    # ---- dynamic shapes -------------------------------------------------------------------------------
    def _dynamic_mode(self) -> bool | None:
        dynamic = self._options.dynamic
        if dynamic is None:
            dynamic = config.dynamic_shapes
        if dynamic is None and not config.assume_static_by_default:
            return True
        return dynamic

    def _mark_dynamic(self, call: CallDescription, leaves: list[Any], tree: Any, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> None:
        """The default policy: dims whose size differs from the most recent specialization's become dynamic."""
        if self._dynamic_mode() is not None or not self._bucket.specs:
            return
        names = self._leaf_names(args, kwargs)
        mine = dict(call.tensors)
        for spec in reversed(self._bucket.specs):
            were = spec.guards.description
            if were.spec != call.spec:
                continue
            for i, meta in were.tensors:
                now = mine.get(i)
                if now is None or len(now.shape) != len(meta.shape) or now.dtype != meta.dtype:
                    continue
                for axis, (a, b) in enumerate(zip(meta.shape, now.shape)):
                    if a != b:
                        self._bucket.dynamic_sites.add((names[i], axis))
            break

    def _leaf_names(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[str]:
        arg_names = naming.argument_names(self._fn, len(args), sorted(kwargs))
        return naming.leaf_paths(args, kwargs, arg_names)

    def _symbols(self, call: CallDescription, names: list[str], arg_names: list[str], args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> tuple[dict[tuple[int, int], SymDim], dict[str, int],
                                                  dict[tuple[int, int], str]]:
        """Symbolic dims for this capture (duck sizing: equal sizes share a symbol)."""
        labels = naming.dim_labels(self._fn, arg_names)
        dim_names: dict[tuple[int, int], str] = {}
        arg_of_leaf = self._arg_of_leaf(args, kwargs, arg_names)
        for i, meta in call.tensors:
            for axis in range(len(meta.shape)):
                label = naming.dim_name(labels, arg_of_leaf[i], axis, len(meta.shape))
                if label is not None and names[i] == arg_of_leaf[i]:
                    dim_names[(i, axis)] = label
        mode = self._dynamic_mode()
        sites: list[tuple[int, int, int]] = []
        for i, meta in call.tensors:
            for axis, size in enumerate(meta.shape):
                site = (names[i], axis)
                if site in self._bucket.static_sites:
                    continue
                if mode is True or (mode is None and site in self._bucket.dynamic_sites):
                    sites.append((i, axis, size))
        by_size: dict[int, SymDim] = {}
        symbols: dict[tuple[int, int], SymDim] = {}
        binding: dict[str, int] = {}
        used: set[str] = set()
        for i, axis, size in sites:
            sym = by_size.get(size)
            if sym is None:
                base = dim_names.get((i, axis)) or f"{names[i]}_{axis}"
                name = naming.identifier(base)
                k = 1
                while name in used:
                    name = f"{naming.identifier(base)}_{k}"
                    k += 1
                used.add(name)
                sym = SymDim(name)
                by_size[size] = sym
                binding[name] = size
            symbols[(i, axis)] = sym
        return symbols, binding, dim_names

    @staticmethod
    def _arg_of_leaf(args: tuple[Any, ...], kwargs: dict[str, Any], arg_names: list[str]) -> list[str]:
        out: list[str] = []
        import optree
        values = list(args) + [kwargs[k] for k in sorted(kwargs)]
        for name, value in zip(arg_names, values):
            out.extend([name] * len(optree.tree_leaves(value, none_is_leaf=True)))
        return out

    def _discover(self, modules: Sequence[tuple[str, Any]] = ()) -> Sources:
        """What the function reads from outside its arguments, and the state of the ``(name, module)`` pairs
        among its arguments (:func:`tensorplay.compiler.sources.discover`)."""
        return discover(self._fn, modules)

    def _capture_and_build(self, args: tuple[Any, ...], kwargs: dict[str, Any], leaves: list[Any], tree: Any,
                           call: CallDescription) -> Specialization:
        arg_names = naming.argument_names(self._fn, len(args), sorted(kwargs))
        names = naming.leaf_paths(args, kwargs, arg_names)
        while True:
            symbols, binding, dim_names = self._symbols(call, names, arg_names, args, kwargs)
            sources = self._discover([(names[i], leaf) for i, leaf in enumerate(leaves) if is_module(leaf)])
            request = Call(args, kwargs, leaves, tree, names, call.grad_enabled)
            try:
                with _STATE_LOCK:
                    captured = capture(self._fn, request, sources, symbols, binding)
            except Respecialize as again:
                fixed = {(names[i], axis) for (i, axis), s in symbols.items() if s.free_symbols & again.symbols}
                if not fixed:
                    raise GraphCaptureError(f"tp.compile: internal error: cannot respecialize {again.reason}") from again
                self._bucket.static_sites |= fixed
                continue
            except TensorplayError as error:
                if not symbols or isinstance(error, GraphCaptureError):
                    raise
                raise _static_error(self._fn, request, sources, error) from None
            break
        symbolic = frozenset(symbols)
        sym_sites: dict[str, list[tuple[int, int]]] = {}
        for site, s in symbols.items():
            sym_sites.setdefault(s.name, []).append(site)
        statics = {i: leaf for i, leaf in enumerate(leaves) if not isinstance(leaf, Tensor)}
        guards = Guards(call, symbolic, sym_sites, names, dim_names, statics, sources.tensors,
                        [tensor_meta(s.tensor, id(s.tensor) in captured.grad_free) for s in sources.tensors],
                        list(sources.values) + list(captured.value_guards), sources.objects, captured.size_guards,
                        sources.containers)
        changed = _changed_by_capture(guards)
        if changed:
            raise StateChangedInCapture(
                captured,
                f"tp.compile: {self.__name__} changed the Python state it reads while it was captured: "
                + "; ".join(r.message for r in changed) + ". A compiled call does not run the function's Python "
                "again, so that change would happen once, not at every call. Make the change outside the compiled "
                "function, or keep that state in a tensor (tensor updates in place are compiled)")
        program = build(captured, self._options.backend, self.__name__, self._options.backend_kwargs())
        return Specialization.make(guards, program, captured, self.__name__)


_NO_RESULT: Any = object()


def _changed_by_capture(guards: Guards) -> list[Reason]:
    """The Python state (values, containers, objects) the function read and changed itself while it was
    captured: its guards no longer hold right after the capture."""
    with _STATE_LOCK:
        if guards.state_ok([s.read() for s in guards.tensors]):
            return []
        return [r for r in guards.state_reasons([s.read() for s in guards.tensors])
                if r.kind in ("value", "identity", "state") and " was a tensor, now " not in r.message]


def _snapshot(leaves: list[Any]) -> list[tuple[Any, ...]]:
    """What the fast path compares: per tensor leaf a weak reference, its payload's identity, its version
    counter, ``requires_grad`` and whether it has a ``.grad``; per other leaf the object itself."""
    out: list[tuple[Any, ...]] = []
    for leaf in leaves:
        if isinstance(leaf, Tensor):
            box = leaf._version
            out.append((weakref.ref(leaf), id(leaf._data), box[0] if box else 0, leaf._requires_grad,
                        leaf._grad is None))
        else:
            out.append((None, leaf))
    return out


def _same_call(snapshot: list[tuple[Any, ...]], leaves: list[Any]) -> bool:
    """Whether ``leaves`` are the same tensors, unmodified (an in-place update bumps the version and
    misses), and the same other objects, as when ``snapshot`` was taken."""
    if len(snapshot) != len(leaves):
        return False
    for entry, leaf in zip(snapshot, leaves):
        ref = entry[0]
        if ref is None:
            if entry[1] is not leaf:
                return False
            continue
        if ref() is not leaf or id(leaf._data) != entry[1]:
            return False
        box = leaf._version
        if (box[0] if box else 0) != entry[2] or leaf._requires_grad != entry[3] or (leaf._grad is None) != entry[4]:
            return False
    return True


class StateChangedInCapture(GraphCaptureError):
    """The function changed the Python state it reads while it was captured; ``captured`` is that capture
    (its values are the results of the call it captured)."""

    def __init__(self, captured: Any, message: str) -> None:
        super().__init__(message)
        self.captured = captured


class _Inline(Exception):
    """The call must run the function's Python (see :func:`_inline`)."""


class CompiledModule:
    """``tp.compile(module)``: calling it runs the compiled ``forward``; every other attribute is the
    module's (``compiled.parameters()``, ``compiled.train()``, ...). ``_orig_mod`` is the module."""

    def __init__(self, module: Any, options: Options) -> None:
        object.__setattr__(self, "_orig_mod", module)
        object.__setattr__(self, "_compiled", CompiledFunction(module, options))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._compiled(*args, **kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The compiled forward."""
        return self._compiled(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_orig_mod"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._orig_mod, name, value)

    def __repr__(self) -> str:
        return f"Compiled({self._orig_mod!r})"

    @property
    def recompile_reasons(self) -> list[RecompileEvent]:
        """See :attr:`CompiledFunction.recompile_reasons`."""
        compiled: CompiledFunction = object.__getattribute__(self, "_compiled")
        return compiled.recompile_reasons

    @property
    def compile_count(self) -> int:
        """See :attr:`CompiledFunction.compile_count`."""
        compiled: CompiledFunction = object.__getattribute__(self, "_compiled")
        return compiled.compile_count


__all__ = ["CompiledFunction", "CompiledModule", "Options", "RecompileEvent", "RecompileLimitError",
           "StateChangedInCapture", "reset_buckets"]

