"""The state a :class:`~tensorplay.interpreters.graph.trace.GraphModule` call reads, checked.

A graph reads its parameters, buffers and captured tensors from the tensors recorded with it.
A call may override them by name (``gm(x, state={"weight": w})``), and a traced module may have
had a parameter or buffer *reassigned* since (``model.weight = Parameter(...)``). Each call
resolves both: an unknown name, a value of another shape or dtype, or a removed parameter is an
error naming the input (never a silent broadcast, a silent cast or a stale weight); a
reassigned tensor of the right shape and dtype is used.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tensorplay.interpreters.graph.ir import Graph, Var
from tensorplay.spec.errors import DTypeError, ShapeError, TensorplayError
from tensorplay.symbolic import SymDim
from tensorplay.tensor import Tensor

OVERRIDABLE = ("parameter", "buffer", "captured", "random_key")


class StateKeyError(TensorplayError, KeyError):
    """``state=`` names an input the graph does not have (a typo, or a user input)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def _shape_and_dtype(value: Any) -> tuple[tuple[Any, ...], np.dtype[Any]]:
    if isinstance(value, Tensor):
        return tuple(value._data.shape), np.dtype(value._data.dtype)
    array = np.asarray(value)
    return tuple(array.shape), array.dtype


def check_value(p: Var, value: Any, where: str) -> None:
    """``value`` (a tensor or an array) can stand for placeholder ``p``: same shape, same dtype."""
    if value is None:
        raise TypeError(f"{where}: expected a tensor of shape {list(p.shape)} ({p.aval.dtype}), got None")
    if not isinstance(value, (Tensor, np.ndarray)):
        raise TypeError(f"{where}: expected a tensor or a numpy array, got {type(value).__name__}")
    shape, dtype = _shape_and_dtype(value)
    expected = tuple(p.shape)
    if len(shape) != len(expected) or any(
            not isinstance(e, SymDim) and not isinstance(g, SymDim) and int(e) != int(g)
            for e, g in zip(expected, shape)):
        raise ShapeError(f"{where}: expected shape {list(expected)}, got {list(shape)}")
    if dtype != np.dtype(p.aval.dtype):
        raise DTypeError(f"{where}: expected dtype {p.aval.dtype}, got {dtype} (convert it; a graph never "
                         "casts its state silently)")


class ModuleState:
    """Reads a traced module's current parameters and buffers by placeholder name; for a
    ``tensorplay.nn.Module`` the owning registry is found once and read on every call."""

    def __init__(self, module: Any, graph: Graph) -> None:
        self.module = module
        self.names = [(str(p.name), p) for p in graph.inputs if p.kind in ("parameter", "buffer")]
        self._slots: dict[str, tuple[dict[str, Any], str]] | None = None

    def _resolve(self) -> dict[str, tuple[dict[str, Any], str]]:
        slots: dict[str, tuple[dict[str, Any], str]] = {}
        for name, p in self.names:
            path, _, attr = name.rpartition(".")
            owner = self.module.get_submodule(path)
            registry = owner.__dict__["_parameters" if p.kind == "parameter" else "_buffers"]
            slots[name] = (registry, attr)
        return slots

    def current(self) -> dict[str, Any]:
        """``{placeholder name: the module's tensor now}`` (``None`` where it was removed)."""
        if not callable(getattr(self.module, "get_submodule", None)):  # a module by duck typing
            found = dict(self.module.named_parameters())
            buffers = getattr(self.module, "named_buffers", None)
            if callable(buffers):
                found.update(buffers())
            return {name: found.get(name) for name, _ in self.names}
        if self._slots is None:
            self._slots = self._resolve()
        return {name: registry.get(attr) for name, (registry, attr) in self._slots.items()}


def call_state(graph: Graph, module_state: ModuleState | None, state: Mapping[str, Any] | None,
               where: str) -> dict[str, Any] | None:
    """The ``state`` mapping to run ``graph`` with: the caller's overrides (names, shapes and dtypes
    checked) plus the module's parameters and buffers reassigned since tracing (checked too)."""
    placeholders = {str(p.name): p for p in graph.inputs if p.kind in OVERRIDABLE}
    out: dict[str, Any] = {}
    if state:
        for name, value in state.items():
            p = placeholders.get(name)
            if p is None:
                names = ", ".join(repr(n) for n in sorted(placeholders)) or "none"
                raise StateKeyError(f"{where}: state has no input named {name!r}; the graph reads {names}")
            check_value(p, value, f"{where}: state[{name!r}]")
            out[name] = value
    if module_state is not None:
        for name, tensor in module_state.current().items():
            p = placeholders[name]
            if name in out or tensor is p.source:
                continue
            if tensor is None:
                raise StateKeyError(f"{where}: the module's {p.kind} {name!r} was removed after tracing; "
                                    "trace it again")
            check_value(p, tensor, f"{where}: the module's {p.kind} {name!r} (reassigned after tracing)")
            out[name] = tensor
    return out or None


__all__ = ["ModuleState", "StateKeyError", "call_state", "check_value"]
