"""Compiler backends: ``backend(graph_module, example_inputs, **kwargs) -> callable``.

A backend receives a captured, optimised :class:`~tensorplay.interpreters.graph.trace.GraphModule`
and one example numpy array per placeholder of its graph (in placeholder order: user inputs,
parameters, buffers, captured tensors, constants, random keys). It returns a callable taking
numpy arrays in the same order and returning a sequence of arrays: the values of
``graph.outputs`` followed by the new values of ``graph.mutations`` (the compiler writes those back
into the state they belong to). Keyword arguments: ``name`` always; ``mode`` when not "default",
``options`` when non-empty, ``dynamic`` when set, ``strict_native`` when requested.

Built in: ``"numba"`` (the default: generated Python over numpy arrays, fused pointwise groups as
generated numba kernels, BLAS for matmul) and ``"eager"`` (runs the graph with the eager
interpreter: the reference). :func:`register_backend` adds one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from tensorplay.errors import TensorplayError

Backend = Callable[..., Callable[..., Any]]


class BackendError(TensorplayError, TypeError, ValueError):
    """An unknown backend name, an invalid registration, or a backend that returned no callable.

    A ``TypeError`` (a backend that returns something not callable is one, as the compile contract says) and,
    for the code that caught an unknown name or option as one, a ``ValueError``."""


_BUILTIN: dict[str, str] = {
    "eager": "tensorplay.compiler.backends.eager:eager_backend",
    "numba": "tensorplay.compiler.numba_backend:numba_backend",
}
_REGISTERED: dict[str, Backend] = {}


def register_backend(name: str | Backend | None = None, compiler_fn: Backend | None = None, *,
                     replace: bool = False) -> Any:
    """Register ``compiler_fn`` under ``name`` (``register_backend("mine", fn)``); also a decorator
    (``@register_backend("mine")`` or ``@register_backend``, which uses the function's name).
    An existing name is refused unless ``replace=True``; built-in names cannot be replaced."""
    if callable(name) and compiler_fn is None:
        fn: Backend = name
        return register_backend(getattr(fn, "__name__", None), fn, replace=replace)
    if compiler_fn is None:
        def decorate(fn: Backend) -> Backend:
            register_backend(name if name is not None else getattr(fn, "__name__", None), fn, replace=replace)
            return fn
        return decorate
    if not isinstance(name, str) or not name:
        raise BackendError(f"register_backend: the name must be a non-empty string, got {name!r}")
    if not callable(compiler_fn):
        raise BackendError(f"register_backend({name!r}): the backend must be callable "
                           f"(backend(graph_module, example_inputs, **kwargs) -> callable), got "
                           f"{type(compiler_fn).__name__}")
    if name in _BUILTIN:
        raise BackendError(f"register_backend: {name!r} is a built-in backend and cannot be replaced")
    if name in _REGISTERED and not replace and _REGISTERED[name] is not compiler_fn:
        raise BackendError(f"register_backend: a backend named {name!r} is already registered; pass "
                           "replace=True to replace it")
    _REGISTERED[name] = compiler_fn
    return compiler_fn


def lookup_backend(backend: str | Backend) -> Backend:
    """The backend callable for a registered name (or ``backend`` itself when it is callable)."""
    if callable(backend) and not isinstance(backend, str):
        return backend
    if not isinstance(backend, str):
        raise BackendError(f"backend must be a registered name or a callable, got {type(backend).__name__}")
    found = _REGISTERED.get(backend)
    if found is not None:
        return found
    path = _BUILTIN.get(backend)
    if path is None:
        raise BackendError(f"unknown backend {backend!r}; the backends are {', '.join(list_backends())} "
                           "(register one with tp.compiler.register_backend)")
    module, attribute = path.split(":")
    fn: Backend = getattr(importlib.import_module(module), attribute)
    return fn


def list_backends() -> list[str]:
    """The names of the built-in and registered backends, sorted."""
    return sorted({*_BUILTIN, *_REGISTERED})


__all__ = ["Backend", "BackendError", "list_backends", "lookup_backend", "register_backend"]
