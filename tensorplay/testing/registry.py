"""The registry of *ways of running* a program, which :func:`~tensorplay.testing.check_interpreters`
and the ``tp_interpreter`` pytest fixture iterate over.

A way is a function ``run(fn, *args)`` that computes what ``fn(*args)`` computes -- the same
pytree of eager tensors -- by some other route (recording a graph then evaluating it, vmap over
a batch, compiling, exporting and loading...). It may check more on the way (the vmap way
compares every batch row with a loop) and raises :class:`NotApplicable` for a program it cannot
run at all (vmap of a function without tensor arguments).

The built-in ways are registered first, in this order: ``eager``, ``traced``,
``traced_execute``, ``graph_module``, ``retraced``, ``vmap``. A feature adds its own way by
calling :func:`register_interpreter` when its module is imported, e.g. in a compiler::

    from tensorplay.testing.registry import register_interpreter
    register_interpreter("compiled", lambda fn, *args: compile(fn)(*args),
                         description="tensorplay.compile, then call")

and, so that the way is known before anything imports that module, names the module in the
``tensorplay.testing.interpreters`` entry-point group of its package metadata (every module named
there is imported the first time the registry is read).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, TypedDict

ENTRY_POINT_GROUP = "tensorplay.testing.interpreters"
"""Entry points in this group are imported when the registry is first read (each registers its ways)."""


class NotApplicable(Exception):
    """Raised by a way of running that cannot run this program at all (a skip, not a failure)."""


@dataclass(frozen=True)
class Runner:
    """A registered way of running: ``runner(fn, *args)`` returns what ``fn(*args)`` returns, computed
    that way. ``name`` is its registry key (and the pytest id), ``description`` one line for messages."""

    name: str
    run: Callable[..., Any]
    description: str = ""

    def __call__(self, fn: Callable[..., Any], *args: Any) -> Any:
        __tracebackhide__ = True
        return self.run(fn, *args)

    def __repr__(self) -> str:
        return f"<tensorplay.testing way {self.name!r}: {self.description}>"


_RUNNERS: dict[str, Runner] = {}
_loaded = {"builtins": False, "entry_points": False}


def _load_builtins() -> None:
    if not _loaded["builtins"]:
        _loaded["builtins"] = True
        importlib.import_module("tensorplay.testing.ways")


def _load_entry_points() -> None:
    _load_builtins()
    if _loaded["entry_points"]:
        return
    _loaded["entry_points"] = True
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            entry.load()
        except Exception as error:
            error.add_note(f"while loading the tensorplay.testing way of running {entry.name!r} "
                           f"({entry.value}) named in the {ENTRY_POINT_GROUP!r} entry points")
            raise


def register_interpreter(name: str, run: Callable[..., Any], *, description: str = "",
                         replace: bool = False) -> Runner:
    """Add a way of running: ``run(fn, *args)`` must return what ``fn(*args)`` returns (the same
    structure, eager tensors), computed that way. ``description`` (default: the first line of ``run``'s
    docstring) says how, in messages. Registering a taken ``name`` is an error unless ``replace=True``.
    Returns the :class:`Runner`."""
    _load_builtins()
    if not isinstance(name, str) or not name or not name.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"register_interpreter: name must be a non-empty identifier-like string (letters, "
                         f"digits, '_' and '-'), got {name!r}")
    if not callable(run):
        raise TypeError(f"register_interpreter({name!r}): run must be callable as run(fn, *args), got "
                        f"{type(run).__name__}")
    if name in _RUNNERS and not replace:
        raise ValueError(f"register_interpreter: a way named {name!r} is already registered "
                         f"({_RUNNERS[name].description}); pass replace=True to replace it")
    doc = (getattr(run, "__doc__", None) or "").strip()
    runner = Runner(name, run, description or (doc.splitlines()[0] if doc else name))
    _RUNNERS[name] = runner
    return runner


def unregister_interpreter(name: str) -> None:
    """Remove the way ``name`` (``KeyError`` naming the registered ways when there is none)."""
    _load_entry_points()
    if name not in _RUNNERS:
        raise KeyError(f"no way of running named {name!r}; registered: {', '.join(_RUNNERS)}")
    del _RUNNERS[name]


def interpreters() -> dict[str, Runner]:
    """The registered ways of running, by name, in registration order (built-ins first)."""
    _load_entry_points()
    return dict(_RUNNERS)


def select(names: Iterable[str] | None = None, exclude: Iterable[str] = ()) -> list[Runner]:
    """The runners named ``names`` (all when ``None``) minus ``exclude``, in registry order; an unknown
    name is a ``ValueError`` listing the registered ones."""
    registered = interpreters()
    wanted = list(registered) if names is None else list(names)
    excluded = list(exclude)
    unknown = [n for n in wanted + excluded if n not in registered]
    if unknown:
        raise ValueError(f"unknown way(s) of running {', '.join(map(repr, unknown))}; registered: "
                         f"{', '.join(registered)}")
    return [r for n, r in registered.items() if n in wanted and n not in excluded]


# ---- tolerances for the checks a way makes itself -----------------------------------------------

_TOLERANCES: ContextVar[tuple[float | None, float | None]] = ContextVar("tensorplay_testing_tolerances",
                                                                       default=(None, None))


class Tolerances(TypedDict):
    """``rtol`` and ``atol`` for :func:`~tensorplay.testing.assert_close` (``None``: the dtype's default)."""

    rtol: float | None
    atol: float | None


def tolerances() -> Tolerances:
    """``{"rtol": ..., "atol": ...}`` for the comparisons a way makes itself (``None``: the dtype's
    default); :func:`~tensorplay.testing.check_interpreters` sets them to its own."""
    rtol, atol = _TOLERANCES.get()
    return Tolerances(rtol=rtol, atol=atol)


@contextmanager
def using_tolerances(rtol: float | None, atol: float | None) -> Iterator[None]:
    """Within the block, :func:`tolerances` returns ``rtol`` and ``atol``."""
    token = _TOLERANCES.set((rtol, atol))
    try:
        yield
    finally:
        _TOLERANCES.reset(token)


__all__ = ["ENTRY_POINT_GROUP", "NotApplicable", "Runner", "Tolerances", "interpreters", "register_interpreter",
           "select", "tolerances", "unregister_interpreter", "using_tolerances"]
