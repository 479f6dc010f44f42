"""Choosing an interpreter: ``tp.ops_of`` and the ``@tp.program`` decorator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, ParamSpec, TypeVar

from tensorplay.interpreters.eager.interpreter import eager
from tensorplay.ops import Interpreter
from tensorplay.tensor import Tensor, pick_interpreter

P = ParamSpec("P")
R = TypeVar("R")


def _walk(value: Any, found: list[Interpreter]) -> None:
    if isinstance(value, Tensor):
        found.append(value._ops)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _walk(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            _walk(item, found)


def ops_of(*values: Any) -> Interpreter:
    """The interpreter that must run an operation on ``values`` (tensors, or nested lists,
    tuples and dicts of them): the highest-level one among them; eager when there are none."""
    found: list[Interpreter] = []
    _walk(values, found)
    ops: Interpreter = eager
    for candidate in found:
        ops = pick_interpreter(ops, candidate)
    return ops


class Program(Generic[P, R]):
    """A function written as ``f(ops, *args)``, callable as ``f(*args)`` under the interpreter its
    tensor arguments carry (eager when none), and as ``f.run(ops, *args)`` explicitly."""

    def __init__(self, fn: Callable[..., R]) -> None:
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "program")
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __call__(self, *args: Any, **kwargs: Any) -> R:
        return self.fn(ops_of(args, kwargs), *args, **kwargs)

    def run(self, ops: Any, *args: Any, **kwargs: Any) -> R:
        """Run under the interpreter ``ops``."""
        return self.fn(ops, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<tensorplay program {self.__name__}>"


def program(fn: Callable[..., R]) -> Program[..., R]:
    """Decorator: ``@tp.program def mlp(ops, params, x): ...`` then ``mlp(params, x)`` or
    ``mlp.run(ops, params, x)``."""
    return Program(fn)
