"""Cached ``vjp`` and ``linearize``: a forward graph and a pullback graph, with residuals passed between them.

``vjp(f, *primals)`` returns ``(output, vjp_fn)`` and ``linearize(f, *primals)`` returns ``(output, jvp_fn)``:
results that hold a function. At top level they run in two cached stages:

1. the *forward*: ``f``'s primal computation, and everything the returned function needs that does not
   depend on its argument (the *residuals*: the saved values of the vjp rules, ``cos(x)`` for ``sin``, a
   dropout mask), is one cache entry of :mod:`tensorplay.func.cache` (compile's capture and guards, keyed by
   the function as ``grad(f)`` is). While it is traced, the returned function is recorded once into its own
   graph (its argument: the seeds, cotangents or tangents; every other value it reads: a residual);
2. the *pullback* (:class:`Pullback`): that graph, run with the residuals of one forward call and the
   seeds. It has one cache entry per traced forward (it reads no state: every value it needs is passed).

Each forward call returns its own residuals (arrays of that call): random draws are fresh at every call and
the returned function uses its own forward's, and a returned function called after the state ``f`` read has
changed (a rebound global, a parameter updated in place by an optimizer) still computes with the values of its
forward call (residuals that alias an input are copied). Called inside another transform or a recording, and
when caching is off, ``vjp`` and ``linearize`` run uncached.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tensorplay import compile_hooks
from tensorplay.func import cache
from tensorplay.func.tracing import highest
from tensorplay.interpreters.graph.evaluate import evaluate
from tensorplay.interpreters.graph.ir import Graph, Var
from tensorplay.interpreters.graph.recorder import Recorder, foreign_aval
from tensorplay.interpreters.graph.views import VIEW_PRIMITIVES
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]

_KEPT_KINDS = ("user_input", "constant", "random_key")
"""Placeholders of a pullback graph that are not residuals (seeds, constants, fresh random keys)."""


class Pullback:
    """The function a cached ``vjp``/``linearize`` returns, as a graph: ``pullback(residuals, seeds)`` is the
    flat tuple of its results for ``seeds`` (cotangents of the outputs, or tangents of the primals) with the
    ``residuals`` of one forward call.

    ``transform`` names it (``"vjp_fn"``, ``"jvp_fn"``); ``copy`` lists the residuals that are inputs of the
    forward (a primal or a tensor the function read), copied after each forward call so that a later in-place
    update of that input does not reach the pullback. At top level, from its second call (its first with
    ``TP_FUNC_CACHE=first``), it runs a cache entry (:func:`tensorplay.compile_hooks.transform_cache`) with the
    residuals and seeds as inputs; elsewhere it evaluates its graph in the caller's interpreter.
    """

    reads_state = False
    """It reads nothing but its arguments (the cache entry discovers no state)."""

    def __init__(self, graph: Graph, names: list[str], copy: frozenset[int], transform: str) -> None:
        self.graph = graph
        self.names = names
        self.copy = copy
        self.transform = transform
        self.__name__ = transform
        self.__wrapped__ = self.run
        self.uncached = self.run
        self._entry: Any = None
        self._calls = 0

    def __repr__(self) -> str:
        return f"<{self.transform}: {len(self.graph.nodes)} node(s), {len(self.names)} residual(s)>"

    def run(self, *flat: Any) -> tuple[Any, ...]:
        """Evaluate the graph: ``flat`` is the residuals followed by the seeds."""
        n = len(self.names)
        ops = highest(flat)
        return evaluate(self.graph, ops, *flat[n:], state=dict(zip(self.names, flat[:n])))

    def __call__(self, residuals: Sequence[Any], seeds: Sequence[Any]) -> tuple[Any, ...]:
        flat = (*residuals, *seeds)
        if cache.caching_enabled() and cache.top_level(flat, {}):
            entry = self._entry
            if entry is None and (self._calls or cache.traces_at_first_call()):
                factory = compile_hooks.transform_cache()
                entry = self._entry = None if factory is None else factory(self)
            self._calls += 1
            if entry is not None:
                result: tuple[Any, ...] = entry(*flat)
                return result
        return self.run(*flat)

    @property
    def compile_count(self) -> int:
        """How many times the pullback graph was traced into its cache entry."""
        return 0 if self._entry is None else int(self._entry.compile_count)

    def own(self, residuals: Sequence[AnyTensor]) -> list[AnyTensor]:
        """The residuals of one forward call, with those that may share memory with an input or an output of the
        call copied (see :func:`record_pullback`)."""
        out = list(residuals)
        for i in self.copy:
            out[i] = out[i].clone()
        return out


class StagedFunction:
    """The function a cached ``vjp``/``linearize`` hands back (``vjp_fn``, ``jvp_fn``): ``seeds(*args)`` checks
    its arguments and returns the seed leaves, ``results(flat)`` packs the pullback's flat results; in between,
    the :class:`Pullback` runs with the residuals of its own forward call. ``pullback`` and ``compile_count``
    describe the cache entry."""

    def __init__(self, pullback: Pullback, residuals: list[AnyTensor], seeds: Callable[..., list[Any]],
                 results: Callable[[list[Any]], Any], doc: str) -> None:
        self.pullback = pullback
        self._residuals = residuals
        self._seeds = seeds
        self._results = results
        self.__name__ = pullback.transform
        self.__doc__ = doc

    def __repr__(self) -> str:
        return f"<{self.pullback.transform} of a cached forward>"

    def __call__(self, *args: Any) -> Any:
        return self._results(list(self.pullback(self._residuals, self._seeds(*args))))

    @property
    def compile_count(self) -> int:
        """How many times the pullback graph was traced into its cache entry."""
        return self.pullback.compile_count


def _may_alias(x: AnyTensor, inputs: Sequence[Any], outputs: Sequence[Any]) -> bool:
    """Whether the payload of ``x`` (a residual) may share memory with an input of the forward call or one of
    its outputs: for arrays, by their memory; for values of a recording (the forward being traced into the
    cache), when ``x`` is an output, or a placeholder or a view of one."""
    data = x._data
    if isinstance(data, np.ndarray):
        return any(isinstance(t._data, np.ndarray) and np.may_share_memory(data, t._data)
                   for t in (*inputs, *outputs) if isinstance(t, Tensor))
    out_ids = {id(t._data) for t in outputs if isinstance(t, Tensor)}
    v: Any = data
    while isinstance(v, Var):
        if id(v) in out_ids or v.kind is not None:
            return True
        node = v.producer
        if node is None or node.target not in VIEW_PRIMITIVES:
            return False
        v = node.inputs[0]
    return False


def record_pullback(recorder: Recorder, results: Sequence[AnyTensor], inputs: Sequence[Any],
                    outputs: Sequence[Any], transform: str) -> tuple[Pullback, list[AnyTensor]]:
    """Close ``recorder`` (whose user inputs are the seeds) with ``results`` as its outputs: the
    :class:`Pullback` and its residuals (the tensors of the caller the recording read). ``inputs`` are the
    values of the forward's inputs and ``outputs`` its outputs: a residual that may share memory with one of
    them is copied after each forward call."""
    graph = recorder.graph
    graph.outputs = [recorder.lift(r) for r in results]
    recorder.close()
    names: list[str] = []
    residuals: list[AnyTensor] = []
    copy: set[int] = set()
    for p in graph.inputs:
        if p.kind in _KEPT_KINDS:
            continue
        source = p.source
        assert isinstance(source, Tensor)
        if _may_alias(source, inputs, outputs):
            copy.add(len(residuals))
        names.append(str(p.name))
        residuals.append(source)
        p.source = None  # the residuals of each call are passed: the graph keeps none
    return Pullback(graph, names, frozenset(copy), transform), residuals


def run_staged(transform: str, func: Any, options: dict[str, Any], stage: Callable[..., Any],
               primals: tuple[Any, ...]) -> tuple[Any, list[AnyTensor], Pullback] | None:
    """Run ``stage(*primals)`` (which returns ``(result, residuals, pullback)``) through the forward's cache
    entry (the first call of a key runs it eagerly, as :class:`~tensorplay.func.cache.Transformed` does);
    ``None`` when the transform runs uncached (the cache is off, or the call is inside a recording or transform)."""
    if not cache.caching_enabled() or not cache.top_level(primals, {}):
        return None
    entry = cache.transformed(transform, func, options, stage).entry_for_call(primals, {})
    result, residuals, pullback = stage(*primals) if entry is None else entry(*primals)
    return result, pullback.own(residuals), pullback


def seed_inputs(recorder: Recorder, like: Sequence[AnyTensor], prefix: str) -> list[AnyTensor]:
    """One user input of ``recorder`` per tensor of ``like`` (same shape and dtype), named ``prefix{i}``."""
    return [recorder.input(f"{prefix}{i}", foreign_aval(x), "user_input") for i, x in enumerate(like)]


__all__ = ["Pullback", "StagedFunction", "record_pullback", "run_staged", "seed_inputs"]
