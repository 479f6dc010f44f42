"""``tp.compile``: the entry point, its validation and its decorator forms."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any, TypeVar, overload

from tensorplay.compiler.backends import Backend, lookup_backend
from tensorplay.compiler.compiled import CompiledFunction, CompiledModule, Options, reset_buckets
from tensorplay.compiler.settings import CompileConfigError, CompileTypeError, config

F = TypeVar("F", bound=Callable[..., Any])

MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
"""The accepted ``mode`` names (passed to the backend; the numba backend treats them alike)."""


def _is_module(obj: Any) -> bool:
    from tensorplay.nn.module import Module
    return isinstance(obj, Module)


def _validate(model: Any, *, dynamic: Any, dynamic_shapes: Any, mode: Any, options: Any, name: Any,
              recompile_limit: Any, fullgraph: Any, isolate_recompiles: Any, strict_native: Any) -> bool | None:
    """Check the arguments in the documented order; returns the effective ``dynamic``."""
    if dynamic is not None and dynamic_shapes is not None:
        raise CompileConfigError("tp.compile: pass either dynamic= or dynamic_shapes= (an alias of dynamic), not "
                                 f"both (got dynamic={dynamic!r}, dynamic_shapes={dynamic_shapes!r})")
    if dynamic_shapes is not None and not isinstance(dynamic_shapes, bool):
        raise CompileTypeError(f"tp.compile: dynamic_shapes is an alias of dynamic and must be None, True or False, "
                               f"got {type(dynamic_shapes).__name__} {dynamic_shapes!r}")
    if dynamic_shapes is not None:
        dynamic = dynamic_shapes
    if mode is not None and options is not None:
        raise CompileConfigError("tp.compile: pass either mode= or options=, not both (a mode names a set of "
                                 "options)")
    if options is not None and not isinstance(options, dict):
        raise CompileTypeError(f"tp.compile: options must be a dict of backend options, got "
                               f"{type(options).__name__}")
    config.validate()
    if dynamic is not None and not isinstance(dynamic, bool):
        raise CompileTypeError(f"tp.compile: dynamic must be None, True or False, got {dynamic!r}")
    if mode is not None and mode not in MODES:
        raise CompileConfigError(f"tp.compile: unknown mode {mode!r}; the modes are {', '.join(MODES)}")
    for flag_name, flag in (("fullgraph", fullgraph), ("isolate_recompiles", isolate_recompiles),
                            ("strict_native", strict_native)):
        if not isinstance(flag, bool):
            raise CompileTypeError(f"tp.compile: {flag_name} must be True or False, got {flag!r}")
    if name is not None and not isinstance(name, str):
        raise CompileTypeError(f"tp.compile: name must be a string, got {type(name).__name__}")
    if model is not None and not callable(model):
        raise CompileTypeError(f"tp.compile: expected a function, a bound method or an nn.Module to compile, got "
                               f"a {type(model).__name__} (which is not callable)")
    if recompile_limit is not None:
        if isinstance(recompile_limit, bool) or not isinstance(recompile_limit, int):
            raise CompileTypeError(f"tp.compile: recompile_limit must be an int, got {recompile_limit!r}")
        if recompile_limit < 1:
            raise CompileConfigError(f"tp.compile: recompile_limit must be at least 1, got {recompile_limit}")
    return dynamic


@overload
def compile(model: F, *, fullgraph: bool = ..., dynamic: bool | None = ..., backend: str | Backend | None = ...,
            mode: str | None = ..., options: dict[str, Any] | None = ..., name: str | None = ...,
            disable: bool = ..., recompile_limit: int | None = ..., isolate_recompiles: bool = ...,
            strict_native: bool = ..., dynamic_shapes: bool | None = ...) -> F: ...


@overload
def compile(model: None = None, *, fullgraph: bool = ..., dynamic: bool | None = ...,
            backend: str | Backend | None = ..., mode: str | None = ..., options: dict[str, Any] | None = ...,
            name: str | None = ..., disable: bool = ..., recompile_limit: int | None = ...,
            isolate_recompiles: bool = ..., strict_native: bool = ...,
            dynamic_shapes: bool | None = ...) -> Callable[[F], F]: ...


def compile(model: Any = None, *, fullgraph: bool = False, dynamic: bool | None = None,
            backend: str | Backend | None = None, mode: str | None = None, options: dict[str, Any] | None = None,
            name: str | None = None, disable: bool = False, recompile_limit: int | None = None,
            isolate_recompiles: bool = False, strict_native: bool = False,
            dynamic_shapes: bool | None = None) -> Any:
    """Compile a function, a bound method or an ``nn.Module`` (its ``forward``); usable as ``@tp.compile``
    and ``@tp.compile(...)``.

    The first call captures the function with the graph recorder (it runs once, with values), runs
    the pass pipeline and hands the graph to ``backend`` (``"numba"`` by default: generated Python
    over numpy arrays with fused numba kernels; ``"eager"``; or any registered name or callable).
    Later calls whose guards hold (shapes, dtypes, ``requires_grad``, grad mode, Python values the
    function read, branches it took) run the compiled code; others are compiled again (see
    :mod:`tensorplay.compiler.compiled` for the policy, the limits and the reasons recorded on the
    returned wrapper). When parameters or arguments require grad, forward and backward are compiled
    together and the call joins the tape as one node; ``loss.backward()`` and ``optimizer.step()``
    inside the function are compiled too.

    Arguments: ``fullgraph`` (raise at the recompile limit instead of compiling uncached), ``dynamic``
    (``True``: symbolic dims from the first call; ``False``: never; ``None``: the default policy),
    ``dynamic_shapes`` (an alias of ``dynamic``), ``mode`` (one of :data:`MODES`) or ``options`` (a dict
    for the backend, e.g. ``{"fastmath": False}``), ``name`` (for messages and kernel files),
    ``disable`` (return ``model`` unchanged), ``recompile_limit`` (overrides
    ``config.recompile_limit``), ``isolate_recompiles`` (this wrapper's specializations are its own),
    ``strict_native`` (the backend refuses to fall back to the eager interpreter for a node).
    """
    dynamic = _validate(model, dynamic=dynamic, dynamic_shapes=dynamic_shapes, mode=mode, options=options,
                        name=name, recompile_limit=recompile_limit, fullgraph=fullgraph,
                        isolate_recompiles=isolate_recompiles, strict_native=strict_native)
    backend_fn = lookup_backend("numba" if backend is None else backend)
    backend_name = backend if isinstance(backend, str) else (getattr(backend, "__name__", "custom")
                                                             if backend is not None else "numba")

    def wrap(target: Any) -> Any:
        if disable:
            return target
        if not callable(target):
            raise CompileTypeError(f"tp.compile: expected a function, a bound method or an nn.Module to compile, "
                                   f"got a {type(target).__name__} (which is not callable)")
        opts = Options(fullgraph=fullgraph, dynamic=dynamic, backend=backend_fn, backend_name=backend_name,
                       mode=mode, options=tuple(sorted((options or {}).items(), key=lambda kv: kv[0])),
                       name=name, recompile_limit=recompile_limit, isolate_recompiles=isolate_recompiles,
                       strict_native=strict_native)
        if _is_module(target):
            return CompiledModule(target, opts)
        if isinstance(target, (CompiledFunction, CompiledModule)):
            return target
        if not isinstance(target, (types.FunctionType, types.MethodType, types.BuiltinFunctionType)) and \
                not callable(getattr(type(target), "__call__", None)):
            raise CompileTypeError(f"tp.compile: cannot compile a {type(target).__name__}")
        return CompiledFunction(target, opts)

    if model is None:
        return wrap
    return wrap(model)


def reset() -> None:
    """Forget every compiled specialization, the numba backend's in-memory kernels and its code cache
    (the on-disk kernel cache stays; ``config.force_disable_caches`` bypasses it). The accumulated
    recompile counts of existing wrappers are kept."""
    reset_buckets()
    import sys
    backend = sys.modules.get("tensorplay.compiler.numba_backend")
    if backend is not None:
        backend.reset()


__all__ = ["MODES", "compile", "reset"]
