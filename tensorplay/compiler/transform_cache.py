"""The cache entries of :mod:`tensorplay.func`'s transforms: compile's capture, guards and specializations.

:func:`make` turns a :class:`~tensorplay.func.cache.Transformed` (``grad(f)``, ``vmap(grad(f))``, ...) into
a :class:`CachedTransform`: a :class:`~tensorplay.compiler.compiled.CompiledFunction` of the transformed
function with the ``"eager"`` backend (the transformed graph's generated straight-line code, one
interpreter call per node: no tracing, no rule look-up, no sweep in Python at a cached call), static
shapes, and state discovered from the function that is transformed. Its guards, recompile reasons and
state inputs are compile's own.

Unlike ``tp.compile`` it never refuses: a function that cannot be cached (its capture is refused, it changes
the Python state it reads while traced, or it reads state too deep to guard) runs uncached from then on
(:attr:`CachedTransform.disabled` says why), and past the recompile limit a call runs uncached instead of
being captured again.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from tensorplay.compiler.backends.eager import eager_backend
import numpy as np
import optree

from tensorplay.compiler.compiled import CompiledFunction, Options, StateChangedInCapture
from tensorplay.compiler.sources import Sources, UnguardedStateWarning, discover
from tensorplay.errors import TensorplayError
from tensorplay.interpreters.eager.interpreter import eager


class _Uncacheable(Exception):
    """The transformed function reads state that cannot be guarded."""


class CachedTransform(CompiledFunction):
    """A transform's cache entry (see the module docstring)."""

    _uncached_past_limit = True

    def __init__(self, transformed: Any) -> None:
        name = f"{transformed.transform}({getattr(transformed.__wrapped__, '__name__', 'f')})"
        options = Options(fullgraph=False, dynamic=False, backend=eager_backend, backend_name="plan", mode=None,
                          options=(), name=name, recompile_limit=None, isolate_recompiles=True,
                          strict_native=False)
        super().__init__(transformed.uncached, options)
        self._transformed = transformed
        self.disabled: str | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.disabled is not None:
            return self._fn(*args, **kwargs)
        try:
            return super().__call__(*args, **kwargs)
        except StateChangedInCapture as error:
            self.disabled = f"{type(error).__name__}: {error}"
            result = _captured_result(error.captured)
            return self._fn(*args, **kwargs) if result is _RERUN else result
        except (_Uncacheable, TensorplayError) as error:
            # refused by capture (or a user's error, which the uncached call raises again): run the Python
            self.disabled = f"{type(error).__name__}: {error}"
            return self._fn(*args, **kwargs)

    def _capture_and_build(self, *args: Any) -> Any:
        spec = super()._capture_and_build(*args)
        _drop_values(spec.program)
        return spec

    def _discover(self, modules: Sequence[tuple[str, Any]] = ()) -> Sources:
        if not getattr(self._transformed, "reads_state", True):
            return Sources()  # a pullback graph: every value it reads is an argument
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UnguardedStateWarning)
            sources = discover(self._transformed, modules)
        for w in caught:
            if issubclass(w.category, UnguardedStateWarning):
                raise _Uncacheable(str(w.message))
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return sources


def _drop_values(program: Any) -> None:
    """Forget the values the capture computed (every intermediate of the traced call: per-sample gradients of
    a large layer are tens of MB) once the backend has compiled the graphs; a cached entry keeps code only."""
    for graph in (program.graph, program.backward_graph):
        if graph is None:
            continue
        for p in graph.inputs:
            p.value = None
        for node in graph.nodes:
            for out in node.outputs:
                out.value = None


_RERUN: Any = object()


def _captured_result(captured: Any) -> Any:
    """The result of the call a capture ran (its recorded values), so that a function that cannot be cached
    does not run its Python twice; ``_RERUN`` when the call has effects that a capture does not apply."""
    graph = captured.graph
    if captured.effects or captured.training or graph.mutations:
        return _RERUN
    values = [v.value for v in graph.outputs[:captured.n_outputs]]
    if any(v is None for v in values):
        return _RERUN
    it = iter(values)
    flat = [eager.wrap(np.array(next(it), copy=True)) if is_tensor else static
            for is_tensor, static in zip(captured.out_is_tensor, captured.out_static)]
    return optree.tree_unflatten(captured.out_spec, flat)


def make(transformed: Any) -> CachedTransform:
    """The cache entry of ``transformed`` (a :class:`~tensorplay.func.cache.Transformed`)."""
    return CachedTransform(transformed)


__all__ = ["CachedTransform", "make"]
