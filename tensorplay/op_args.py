"""Argument checks shared by the operations composed from primitives (:mod:`.math_ops`, :mod:`.math_more`,
:mod:`.indexing_ops`, :mod:`.sequence_ops`): is a value a tensor, must it be one, and a size that has to be
a Python int. Part of the tensor core: it imports no interpreter."""

from __future__ import annotations

from typing import Any

from tensorplay.errors import ArgumentTypeError


def is_tensor(value: Any) -> bool:
    """Whether ``value`` is a tensorplay tensor (of any interpreter)."""
    from tensorplay.tensor import Tensor  # the tensor module imports the operation modules that use this
    return isinstance(value, Tensor)


def check_tensor(value: Any, where: str, name: str) -> None:
    """An :class:`ArgumentTypeError` naming ``where`` and the argument ``name`` unless ``value`` is a tensor."""
    if not is_tensor(value):
        raise ArgumentTypeError(f"{where}: {name} must be a tensor, got {type(value).__name__}")


def static_size(n: Any, where: str) -> int:
    """A size as a Python int: a symbolic one is read through ``value_for``, so ``tp.compile`` specialises on it
    with a guard (and an export that keeps that dim dynamic reports a specialisation naming ``where``)."""
    return n if isinstance(n, int) else int(n.value_for(f"{where} along a dim of symbolic size"))


__all__ = ["check_tensor", "is_tensor", "static_size"]
